//! deploy/gate/: gate mode's overlay grants exactly the API calls ARCHITECTURE.md says
//! `caldera gate` makes (no pods/binding), runs `caldera gate` on its own Lease, and ships
//! the admission policy that gates grouped pods of default-scheduler.

use crate::architecture;
use crate::deploy::{deploy_objects, lease_namespace, service_account, GATE_DIR};
use crate::manifests::{all_of, documents_in, objects, read, typed, Document};
use crate::rbac::{granted, show};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
};
use std::collections::BTreeSet;

const SECTION: &str = "API calls `caldera gate` makes";

/// What gate mode's kustomization deploys: deploy/ without run mode's ClusterRole and its
/// binding (the overlay deletes them), plus deploy/gate/.
pub(crate) fn gate_objects() -> Vec<Document> {
    let dropped =
        |d: &Document| (d.is("ClusterRole") || d.is("ClusterRoleBinding")) && d.name() == "caldera";
    deploy_objects()
        .into_iter()
        .filter(|d| !dropped(d))
        .chain(objects(GATE_DIR.trim_end_matches('/')))
        .collect()
}

fn kustomization() -> serde_json::Value {
    let docs = documents_in(&format!("{GATE_DIR}kustomization.yaml"));
    assert_eq!(docs.len(), 1);
    docs[0].value.clone()
}

#[test]
fn gate_rbac_grants_exactly_the_api_calls_architecture_md_lists_for_gate_mode() {
    let documents = gate_objects();
    let lease_namespace = lease_namespace(&documents);
    let markdown = read("ARCHITECTURE.md");
    let section = architecture::section_titled(&markdown, SECTION)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no section \"{SECTION}\""));
    let needed = architecture::parse_calls(&section, &lease_namespace)
        .unwrap_or_else(|e| panic!("ARCHITECTURE.md, section \"{SECTION}\": {e}"));
    let account = service_account(&documents);
    let granted = granted(&documents, (&account.0, &account.1));
    let missing: BTreeSet<_> = needed.difference(&granted).cloned().collect();
    let extra: BTreeSet<_> = granted.difference(&needed).cloned().collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "deploy/gate/ and ARCHITECTURE.md (\"{SECTION}\") disagree.\nNeeded but not granted:{}\nGranted but not listed:{}",
        show(&missing),
        show(&extra)
    );
    let resources: BTreeSet<&str> = granted.iter().map(|c| c.resource.as_str()).collect();
    assert!(!resources.contains("pods/binding"), "gate mode never binds");
    assert!(resources.contains("pods") && resources.contains("pods/status"));
}

#[test]
fn gate_kustomization_runs_caldera_gate_on_its_own_lease_without_run_modes_role() {
    let k = kustomization();
    let resources: Vec<&str> = k["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.as_str())
        .collect();
    let mut present: Vec<String> = crate::manifests::yaml_files("deploy/gate")
        .into_iter()
        .filter(|f| !crate::manifests::is_kustomization(f))
        .map(|f| f.trim_start_matches(GATE_DIR).to_string())
        .collect();
    present.insert(0, "..".to_string());
    assert_eq!(
        resources, present,
        "deploy/ as the base, then every file in deploy/gate/"
    );
    // Each patch, parsed: a JSON 6902 list (with its target) or a strategic-merge delete.
    let patches: Vec<(serde_json::Value, serde_json::Value)> = k["patches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let body: serde_json::Value =
                serde_yaml_ng::from_str(p["patch"].as_str().unwrap()).unwrap();
            (p["target"].clone(), body)
        })
        .collect();
    let replaced = |kind: &str, name: &str, path: &str| {
        patches.iter().find_map(|(target, body)| {
            (target["kind"] == kind && target["name"] == name)
                .then(|| {
                    body.as_array()?
                        .iter()
                        .find(|op| op["path"] == path)
                        .cloned()
                })
                .flatten()
        })
    };
    let command = replaced(
        "Deployment",
        "caldera",
        "/spec/template/spec/containers/0/command",
    )
    .expect("the Deployment's command is replaced");
    assert_eq!(command["value"], serde_json::json!(["/caldera", "gate"]));
    let lease = replaced("Role", "caldera-leader-election", "/rules/0/resourceNames")
        .expect("the lease Role names gate mode's Lease");
    assert_eq!(lease["value"], serde_json::json!(["caldera-gate"]));
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(
            patches.iter().any(|(_, body)| body["$patch"] == "delete"
                && body["kind"] == kind
                && body["metadata"]["name"] == "caldera"),
            "run mode's {kind} is deleted"
        );
    }
    // The Lease the overlay names is the one `caldera gate` elects on.
    let cli = read("crates/cli/src/run.rs");
    assert!(cli.contains("pub const GATE_LEASE: &str = \"caldera-gate\";"));
}

#[test]
fn admission_policy_gates_grouped_pods_of_default_scheduler() {
    let documents = objects(GATE_DIR.trim_end_matches('/'));
    let policies = all_of(&documents, "MutatingAdmissionPolicy");
    let bindings = all_of(&documents, "MutatingAdmissionPolicyBinding");
    assert_eq!((policies.len(), bindings.len()), (1, 1));
    assert_eq!(
        policies[0].value["apiVersion"],
        "admissionregistration.k8s.io/v1"
    );
    let policy: MutatingAdmissionPolicy = typed(policies[0]).unwrap_or_else(|e| panic!("{e}"));
    let binding: MutatingAdmissionPolicyBinding =
        typed(bindings[0]).unwrap_or_else(|e| panic!("{e}"));
    let spec = policy.spec.unwrap();
    assert_eq!(binding.spec.unwrap().policy_name, policy.metadata.name);
    let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].operations.as_deref(),
        Some(&["CREATE".to_string()][..])
    );
    assert_eq!(
        rules[0].resources.as_deref(),
        Some(&["pods".to_string()][..])
    );
    let conditions: String = spec
        .match_conditions
        .unwrap()
        .iter()
        .map(|c| c.expression.clone())
        .collect();
    for key in caldera_api::GROUP_NAME_KEYS.map(|(_, k)| k) {
        assert!(
            conditions.contains(&format!("'{key}'")),
            "{key} in {conditions}"
        );
    }
    assert!(conditions.contains("'default-scheduler'"));
    assert!(conditions.contains(&format!("'{}'", caldera_api::GANG_GATE)));
    let mutations = spec.mutations.unwrap();
    let expression = mutations[0]
        .apply_configuration
        .as_ref()
        .and_then(|a| a.expression.clone())
        .unwrap();
    assert!(expression.contains(&format!("name: '{}'", caldera_api::GANG_GATE)));
}
