//! RBAC for one ServiceAccount, as kube-apiserver's RBAC authorizer decides it: a request
//! bearing [`Rbac::token`] is allowed only when a rule of a ClusterRole bound to the account
//! (cluster-wide) or of a Role bound to it in the request's namespace matches its verb, API
//! group, resource (`plural` or `plural/subresource`) and, where the rule names some, the
//! object's name; otherwise it is refused with kube-apiserver's 403. Requests with any other
//! token, or none, are the administrator's and always allowed (the e2e driver's). A
//! `SelfSubjectAccessReview` is answered for whoever asks, as the default `system:basic-user`
//! role lets every authenticated user ask.
//!
//! Not modelled: aggregated ClusterRoles, groups as subjects, non-resource URLs (discovery is
//! open to every caller, as `system:discovery` makes it).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde_json::Value;

use super::status::ApiError;

/// The rules bound to one ServiceAccount, and the token that acts as it.
#[derive(Debug, Clone)]
pub struct Rbac {
    /// The bearer token that is this account.
    pub token: String,
    /// `system:serviceaccount:<namespace>:<name>`.
    pub user: String,
    /// Rules in force cluster-wide (ClusterRoles through ClusterRoleBindings).
    cluster: Vec<PolicyRule>,
    /// Rules in force in one namespace (Roles, or ClusterRoles through RoleBindings).
    namespaced: Vec<(String, PolicyRule)>,
}

/// What one request asks to do, as the authorizer sees it.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: &'a str,
    /// API group (empty: core).
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// Subresource (`binding`, `status`, ...), if any.
    pub subresource: Option<&'a str>,
    /// Namespace of a namespaced request.
    pub namespace: Option<&'a str>,
    /// Object name (empty for lists, watches of a collection and creates).
    pub name: Option<&'a str>,
}

fn matches(values: Option<&Vec<String>>, wanted: &str) -> bool {
    values.is_some_and(|v| v.iter().any(|x| x == "*" || x == wanted))
}

fn rule_allows(rule: &PolicyRule, a: &Attributes<'_>) -> bool {
    let resource = match a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.to_string(),
    };
    let resource_ok = rule.resources.as_ref().is_some_and(|rs| {
        rs.iter().any(|r| {
            r == "*" || *r == resource || (a.subresource.is_some_and(|s| *r == format!("*/{s}")))
        })
    });
    let names_ok = match &rule.resource_names {
        None => true,
        Some(names) if names.is_empty() => true,
        Some(names) => a
            .name
            .is_some_and(|n| !n.is_empty() && names.iter().any(|x| x == n)),
    };
    rule.verbs.iter().any(|v| v == "*" || v == a.verb)
        && matches(rule.api_groups.as_ref(), a.group)
        && resource_ok
        && names_ok
}

fn kind_of(doc: &Value) -> &str {
    doc.get("kind").and_then(Value::as_str).unwrap_or_default()
}

/// The documents of a multi-document YAML text (`---`-separated), empty ones left out.
pub fn yaml_documents(text: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value: Value = serde::Deserialize::deserialize(doc).map_err(|e| e.to_string())?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

fn parse<T: serde::de::DeserializeOwned>(doc: &Value) -> Result<T, String> {
    serde_json::from_value(doc.clone()).map_err(|e| format!("{}: {e}", kind_of(doc)))
}

impl Rbac {
    /// The rules `documents` (ClusterRoles, Roles and their bindings, as `deploy/rbac.yaml`
    /// holds them; other kinds are ignored) bind to the ServiceAccount `namespace/name`, for
    /// requests bearing `token`. An error names a document that does not parse.
    pub fn service_account(
        documents: &[Value],
        namespace: &str,
        name: &str,
        token: &str,
    ) -> Result<Rbac, String> {
        let mut cluster_roles = Vec::new();
        let mut roles = Vec::new();
        let mut cluster_bindings = Vec::new();
        let mut bindings = Vec::new();
        for doc in documents {
            match kind_of(doc) {
                "ClusterRole" => cluster_roles.push(parse::<ClusterRole>(doc)?),
                "Role" => roles.push(parse::<Role>(doc)?),
                "ClusterRoleBinding" => cluster_bindings.push(parse::<ClusterRoleBinding>(doc)?),
                "RoleBinding" => bindings.push(parse::<RoleBinding>(doc)?),
                _ => {}
            }
        }
        let is_us = |subjects: &Option<Vec<k8s_openapi::api::rbac::v1::Subject>>| {
            subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == name
                    && s.namespace.as_deref() == Some(namespace)
            })
        };
        let cluster_role = |role: &str| -> Vec<PolicyRule> {
            cluster_roles
                .iter()
                .filter(|r| r.metadata.name.as_deref() == Some(role))
                .flat_map(|r| r.rules.iter().flatten().cloned())
                .collect()
        };
        let mut out = Rbac {
            token: token.to_string(),
            user: format!("system:serviceaccount:{namespace}:{name}"),
            cluster: Vec::new(),
            namespaced: Vec::new(),
        };
        for b in cluster_bindings.iter().filter(|b| is_us(&b.subjects)) {
            if b.role_ref.kind == "ClusterRole" {
                out.cluster.extend(cluster_role(&b.role_ref.name));
            }
        }
        for b in bindings.iter().filter(|b| is_us(&b.subjects)) {
            let ns = b.metadata.namespace.clone().unwrap_or_default();
            match b.role_ref.kind.as_str() {
                "ClusterRole" => out.namespaced.extend(
                    cluster_role(&b.role_ref.name)
                        .into_iter()
                        .map(|r| (ns.clone(), r)),
                ),
                "Role" => out.namespaced.extend(
                    roles
                        .iter()
                        .filter(|r| {
                            r.metadata.name.as_deref() == Some(b.role_ref.name.as_str())
                                && r.metadata.namespace.as_deref() == Some(ns.as_str())
                        })
                        .flat_map(|r| r.rules.iter().flatten().cloned())
                        .map(|r| (ns.clone(), r)),
                ),
                _ => {}
            }
        }
        Ok(out)
    }

    /// Drops every rule granting `verb` on `resource` (`plural` or `plural/sub`) in `group`,
    /// as an operator who removed it from the ClusterRole would have (tests of a missing rule).
    pub fn without(mut self, group: &str, resource: &str, verb: &str) -> Rbac {
        let mut kept = Vec::new();
        for rule in self.cluster.drain(..) {
            let hit = matches(rule.api_groups.as_ref(), group)
                && rule.resources.iter().flatten().any(|r| r == resource);
            if !hit {
                kept.push(rule);
                continue;
            }
            let others: Vec<String> = rule
                .resources
                .iter()
                .flatten()
                .filter(|r| *r != resource)
                .cloned()
                .collect();
            if !others.is_empty() {
                kept.push(PolicyRule {
                    resources: Some(others),
                    ..rule.clone()
                });
            }
            let verbs: Vec<String> = rule.verbs.iter().filter(|v| *v != verb).cloned().collect();
            if !verbs.is_empty() {
                kept.push(PolicyRule {
                    resources: Some(vec![resource.to_string()]),
                    verbs,
                    ..rule
                });
            }
        }
        self.cluster = kept;
        self
    }

    /// Whether the account may do `a`.
    pub fn allows(&self, a: &Attributes<'_>) -> bool {
        self.cluster.iter().any(|r| rule_allows(r, a))
            || a.namespace.is_some_and(|ns| {
                self.namespaced
                    .iter()
                    .any(|(n, r)| n == ns && rule_allows(r, a))
            })
    }

    /// kube-apiserver's refusal of `a`.
    pub(crate) fn refusal(&self, a: &Attributes<'_>) -> ApiError {
        let resource = match a.subresource {
            Some(sub) => format!("{}/{sub}", a.resource),
            None => a.resource.to_string(),
        };
        let qualified = if a.group.is_empty() {
            a.resource.to_string()
        } else {
            format!("{}.{}", a.resource, a.group)
        };
        let subject = match a.name.filter(|n| !n.is_empty()) {
            Some(n) => format!("{qualified} \"{n}\""),
            None => qualified,
        };
        let scope = match a.namespace {
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_string(),
        };
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{subject} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
                self.user, a.verb, a.group
            ),
        )
        .with_details(a.group, a.resource, a.name.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifests() -> Vec<Value> {
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "sched"},
                   "rules": [
                       {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["list", "watch"]},
                       {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "sched"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sched"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "sys"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "lease", "namespace": "sys"},
                   "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "resourceNames": ["caldera"], "verbs": ["get", "update"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "lease", "namespace": "sys"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "lease"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "sys"}]}),
        ]
    }

    fn attrs<'a>(verb: &'a str, group: &'a str, resource: &'a str) -> Attributes<'a> {
        Attributes {
            verb,
            group,
            resource,
            subresource: None,
            namespace: None,
            name: None,
        }
    }

    #[test]
    fn bound_rules_allow_and_everything_else_is_refused_as_kube_apiserver_words_it() {
        let rbac = Rbac::service_account(&manifests(), "sys", "sa", "t").expect("rbac");
        assert!(rbac.allows(&attrs("list", "", "pods")));
        assert!(rbac.allows(&attrs("watch", "", "nodes")));
        assert!(!rbac.allows(&attrs("delete", "", "pods")));
        let binding = Attributes {
            subresource: Some("binding"),
            namespace: Some("default"),
            name: Some("p"),
            ..attrs("create", "", "pods")
        };
        assert!(rbac.allows(&binding));
        let status = Attributes {
            subresource: Some("status"),
            ..binding
        };
        assert!(!rbac.allows(&Attributes {
            verb: "patch",
            ..status
        }));
        let native = attrs("list", "scheduling.k8s.io", "podgroups");
        assert!(!rbac.allows(&native));
        let refusal = rbac.refusal(&native);
        assert_eq!(refusal.code, 403);
        assert_eq!(
            refusal.message,
            "podgroups.scheduling.k8s.io is forbidden: User \"system:serviceaccount:sys:sa\" cannot list resource \"podgroups\" in API group \"scheduling.k8s.io\" at the cluster scope"
        );
    }

    #[test]
    fn a_role_counts_only_in_its_namespace_and_for_its_names() {
        let rbac = Rbac::service_account(&manifests(), "sys", "sa", "t").expect("rbac");
        let lease = |ns, name| Attributes {
            namespace: Some(ns),
            name: Some(name),
            ..attrs("get", "coordination.k8s.io", "leases")
        };
        assert!(rbac.allows(&lease("sys", "caldera")));
        assert!(!rbac.allows(&lease("sys", "other")));
        assert!(!rbac.allows(&lease("default", "caldera")));
        // Another account gets nothing.
        let other = Rbac::service_account(&manifests(), "sys", "someone", "t").expect("rbac");
        assert!(!other.allows(&attrs("list", "", "pods")));
    }

    #[test]
    fn without_removes_one_verb_of_one_resource_only() {
        let rbac = Rbac::service_account(&manifests(), "sys", "sa", "t")
            .expect("rbac")
            .without("", "pods", "list");
        assert!(!rbac.allows(&attrs("list", "", "pods")));
        assert!(rbac.allows(&attrs("watch", "", "pods")));
        assert!(rbac.allows(&attrs("list", "", "nodes")));
    }
}
