//! The scheduler runs under the RBAC Caldera ships, never an administrator's token: what
//! `deploy/` grants its ServiceAccount (`deploy/rbac.yaml`, and for gate mode
//! `deploy/gate/`'s ClusterRole in place of run mode's) is all it may do, so a watch or write
//! the shipped ClusterRole lacks fails the suite.
//!
//! - On the stand-in, [`stand_in`] gives the rules it enforces for [`STAND_IN_TOKEN`] (as
//!   kube-apiserver's RBAC authorizer would), and the scheduler's client carries that token.
//! - On a real cluster, [`install`] applies the ServiceAccount and its roles and bindings as
//!   `kubectl apply -k deploy/` would (gate mode's under a ServiceAccount of its own, so the two
//!   ClusterRoles are never in force together), and mints a token with the TokenRequest API.

use crate::error::{Error, Result};
use caldera_testkit::apiserver::{yaml_documents, Rbac};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::Value;
use std::path::PathBuf;

/// The bearer token the stand-in takes as the shipped ServiceAccount.
pub const STAND_IN_TOKEN: &str = "caldera-e2e-service-account-token";

/// The namespace `deploy/` puts the ServiceAccount and the Lease in.
pub const NAMESPACE: &str = "caldera-system";

/// The ServiceAccount of run mode (`deploy/serviceaccount.yaml`).
pub const RUN_ACCOUNT: &str = "caldera";

/// The ServiceAccount gate mode's roles are bound to in this suite (deploy/gate/ binds them to
/// `caldera`; a second account keeps run mode's ClusterRole out of gate mode's runs).
pub const GATE_ACCOUNT: &str = "caldera-gate-e2e";

/// The Lease each mode elects on (`deploy/`'s Role names it).
pub fn lease_name(gate: bool) -> &'static str {
    if gate {
        "caldera-gate"
    } else {
        "caldera"
    }
}

fn deploy(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(file)
}

fn documents(file: &str) -> Result<Vec<Value>> {
    let path = deploy(file);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| Error::Input(format!("reading {}: {e}", path.display())))?;
    yaml_documents(&text).map_err(|e| Error::Input(format!("{}: {e}", path.display())))
}

fn is(doc: &Value, kind: &str, name: &str) -> bool {
    doc["kind"] == kind && doc["metadata"]["name"] == name
}

/// The ServiceAccount, roles and bindings `deploy/` ships for a mode, bound to the account the
/// suite runs that mode under ([`RUN_ACCOUNT`], [`GATE_ACCOUNT`]).
pub fn shipped(gate: bool) -> Result<Vec<Value>> {
    let mut docs: Vec<Value> = documents("serviceaccount.yaml")?;
    docs.extend(documents("rbac.yaml")?);
    if !gate {
        return Ok(docs);
    }
    // deploy/gate/: run mode's ClusterRole and binding deleted, gate mode's added, the lease
    // Role naming `caldera-gate`.
    docs.retain(|d| !is(d, "ClusterRole", "caldera") && !is(d, "ClusterRoleBinding", "caldera"));
    docs.extend(documents("gate/rbac.yaml")?);
    for d in &mut docs {
        if is(d, "Role", "caldera-leader-election") {
            d["rules"][0]["resourceNames"] = serde_json::json!([lease_name(true)]);
        }
        match d["kind"].as_str() {
            Some("ServiceAccount") => d["metadata"]["name"] = GATE_ACCOUNT.into(),
            Some("Role" | "RoleBinding") => {
                let name = format!("{}-gate-e2e", d["metadata"]["name"].as_str().unwrap_or(""));
                d["metadata"]["name"] = name.clone().into();
                if d["kind"] == "RoleBinding" {
                    d["roleRef"]["name"] =
                        format!("{}-gate-e2e", d["roleRef"]["name"].as_str().unwrap_or("")).into();
                }
            }
            _ => {}
        }
        if let Some(subjects) = d["subjects"].as_array_mut() {
            for s in subjects {
                s["name"] = GATE_ACCOUNT.into();
            }
        }
    }
    Ok(docs)
}

/// The account a mode runs under.
pub fn account(gate: bool) -> &'static str {
    if gate {
        GATE_ACCOUNT
    } else {
        RUN_ACCOUNT
    }
}

/// What the stand-in enforces for [`STAND_IN_TOKEN`] in a mode.
pub fn stand_in(gate: bool) -> Result<Rbac> {
    Rbac::service_account(&shipped(gate)?, NAMESPACE, account(gate), STAND_IN_TOKEN)
        .map_err(Error::Input)
}

fn decode<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<T> {
    serde_json::from_value(doc.clone()).map_err(|e| Error::Input(format!("{}: {e}", doc["kind"])))
}

/// Applies (server-side, as `kubectl apply --server-side -k deploy/` would) the namespace and
/// a mode's ServiceAccount, roles and bindings on a real cluster, and returns a token of that
/// ServiceAccount (TokenRequest, one hour).
pub async fn install(client: &Client, gate: bool) -> Result<String> {
    let params = PatchParams::apply("caldera-e2e").force();
    let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    Api::<Namespace>::all(client.clone())
        .patch(NAMESPACE, &params, &Patch::Apply(ns))
        .await
        .map_err(|e| Error::api("apply", format!("Namespace {NAMESPACE}"), e))?;
    for doc in shipped(gate)? {
        let name = doc["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let what = format!("{} {name}", doc["kind"].as_str().unwrap_or_default());
        let result = match doc["kind"].as_str() {
            Some("ServiceAccount") => Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
                .patch(
                    &name,
                    &params,
                    &Patch::Apply(decode::<ServiceAccount>(&doc)?),
                )
                .await
                .map(|_| ()),
            Some("ClusterRole") => Api::<ClusterRole>::all(client.clone())
                .patch(&name, &params, &Patch::Apply(decode::<ClusterRole>(&doc)?))
                .await
                .map(|_| ()),
            Some("ClusterRoleBinding") => Api::<ClusterRoleBinding>::all(client.clone())
                .patch(
                    &name,
                    &params,
                    &Patch::Apply(decode::<ClusterRoleBinding>(&doc)?),
                )
                .await
                .map(|_| ()),
            Some("Role") => Api::<Role>::namespaced(client.clone(), NAMESPACE)
                .patch(&name, &params, &Patch::Apply(decode::<Role>(&doc)?))
                .await
                .map(|_| ()),
            Some("RoleBinding") => Api::<RoleBinding>::namespaced(client.clone(), NAMESPACE)
                .patch(&name, &params, &Patch::Apply(decode::<RoleBinding>(&doc)?))
                .await
                .map(|_| ()),
            _ => Ok(()),
        };
        result.map_err(|e| Error::api("apply", what, e))?;
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let account = account(gate);
    let answer = Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .create_token_request(account, &PostParams::default(), &request)
        .await
        .map_err(|e| {
            Error::api(
                "create",
                format!("token of ServiceAccount {NAMESPACE}/{account}"),
                e,
            )
        })?;
    answer
        .status
        .and_then(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Error::Input(format!("no token for ServiceAccount {NAMESPACE}/{account}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_testkit::apiserver::Attributes;

    fn list(group: &'static str, resource: &'static str) -> Attributes<'static> {
        Attributes {
            verb: "list",
            group,
            resource,
            subresource: None,
            namespace: None,
            name: None,
        }
    }

    #[test]
    fn each_mode_gets_its_own_clusterrole_only() {
        let run = stand_in(false).expect("run");
        let gate = stand_in(true).expect("gate");
        let bind = Attributes {
            verb: "create",
            subresource: Some("binding"),
            namespace: Some("default"),
            name: Some("p"),
            ..list("", "pods")
        };
        assert!(run.allows(&bind));
        assert!(!gate.allows(&bind), "gate mode never binds");
        for rbac in [&run, &gate] {
            assert!(rbac.allows(&list("", "pods")));
            assert!(rbac.allows(&list("scheduling.k8s.io", "podgroups")));
        }
        let lease = |name| Attributes {
            verb: "update",
            namespace: Some(NAMESPACE),
            name: Some(name),
            ..list("coordination.k8s.io", "leases")
        };
        assert!(run.allows(&lease("caldera")) && !run.allows(&lease("caldera-gate")));
        assert!(gate.allows(&lease("caldera-gate")) && !gate.allows(&lease("caldera")));
    }
}
