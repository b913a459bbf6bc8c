//! The RBAC in deploy/ grants exactly the API calls ARCHITECTURE.md says `caldera run` makes.

use crate::architecture::{self, Call, Scope};
use crate::deploy::{deploy_objects, lease_namespace, service_account};
use crate::manifests::{all_of, read, typed, Document};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use std::collections::BTreeSet;

/// Whether a binding's subjects include the ServiceAccount `namespace/name`.
fn binds(subjects: Option<&Vec<Subject>>, (namespace, name): (&str, &str)) -> bool {
    subjects.into_iter().flatten().any(|s| {
        s.kind == "ServiceAccount" && s.name == name && s.namespace.as_deref() == Some(namespace)
    })
}

fn expand(rules: Option<&Vec<PolicyRule>>, scope: &Scope, out: &mut BTreeSet<Call>) {
    for rule in rules.into_iter().flatten() {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                for verb in &rule.verbs {
                    out.insert(Call {
                        group: group.clone(),
                        resource: resource.clone(),
                        verb: verb.clone(),
                        scope: scope.clone(),
                    });
                }
            }
        }
    }
}

/// What the ServiceAccount `caldera run` uses may do, through every binding in deploy/.
/// Panics on a role nobody binds, and on a binding to a role deploy/ does not define.
pub(crate) fn granted(documents: &[Document], account: (&str, &str)) -> BTreeSet<Call> {
    let cluster_roles: Vec<ClusterRole> = all_of(documents, "ClusterRole")
        .into_iter()
        .map(|d| typed(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let roles: Vec<Role> = all_of(documents, "Role")
        .into_iter()
        .map(|d| typed(d).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut used_cluster_roles = BTreeSet::new();
    let mut used_roles = BTreeSet::new();
    let mut out = BTreeSet::new();
    let mut grant = |role_ref: &RoleRef, namespace: Option<&str>| {
        assert_eq!(
            role_ref.api_group.as_deref(),
            Some("rbac.authorization.k8s.io")
        );
        let scope = match namespace {
            Some(ns) => Scope::Namespace(ns.to_string()),
            None => Scope::Cluster,
        };
        match role_ref.kind.as_str() {
            "ClusterRole" => {
                let role = cluster_roles
                    .iter()
                    .find(|r| r.metadata.name.as_deref() == Some(role_ref.name.as_str()))
                    .unwrap_or_else(|| panic!("no ClusterRole {} in deploy/", role_ref.name));
                used_cluster_roles.insert(role_ref.name.clone());
                expand(role.rules.as_ref(), &scope, &mut out);
            }
            "Role" => {
                let role = roles
                    .iter()
                    .find(|r| {
                        r.metadata.name.as_deref() == Some(role_ref.name.as_str())
                            && r.metadata.namespace.as_deref() == namespace
                    })
                    .unwrap_or_else(|| {
                        panic!("no Role {} in namespace {namespace:?}", role_ref.name)
                    });
                used_roles.insert(role_ref.name.clone());
                expand(role.rules.as_ref(), &scope, &mut out);
            }
            other => panic!("binding to a {other}"),
        }
    };
    for document in all_of(documents, "ClusterRoleBinding") {
        let binding: ClusterRoleBinding = typed(document).unwrap_or_else(|e| panic!("{e}"));
        if binds(binding.subjects.as_ref(), account) {
            grant(&binding.role_ref, None);
        }
    }
    for document in all_of(documents, "RoleBinding") {
        let binding: RoleBinding = typed(document).unwrap_or_else(|e| panic!("{e}"));
        if binds(binding.subjects.as_ref(), account) {
            grant(&binding.role_ref, binding.metadata.namespace.as_deref());
        }
    }
    for role in &cluster_roles {
        let name = role.metadata.name.clone().unwrap_or_default();
        assert!(
            used_cluster_roles.contains(&name),
            "ClusterRole {name} is not bound to {}/{}",
            account.0,
            account.1
        );
    }
    for role in &roles {
        let name = role.metadata.name.clone().unwrap_or_default();
        assert!(
            used_roles.contains(&name),
            "Role {name} is not bound to {}/{}",
            account.0,
            account.1
        );
    }
    out
}

/// The calls ARCHITECTURE.md lists.
fn documented_calls(lease_namespace: &str) -> BTreeSet<Call> {
    let markdown = read("ARCHITECTURE.md");
    let section = architecture::section(&markdown).unwrap_or_else(|| {
        panic!(
            "ARCHITECTURE.md has no section \"{}\" listing the API calls `caldera run` makes",
            architecture::SECTION
        )
    });
    architecture::parse_calls(&section, lease_namespace).unwrap_or_else(|e| {
        panic!(
            "ARCHITECTURE.md, section \"{}\": {e}",
            architecture::SECTION
        )
    })
}

pub(crate) fn show(calls: &BTreeSet<Call>) -> String {
    if calls.is_empty() {
        return "\n  (none)".to_string();
    }
    calls
        .iter()
        .map(|c| format!("\n  - {c}"))
        .collect::<String>()
}

/// `caldera_api::calls`, the one list of what `caldera run` calls, in this test's terms.
fn listed_calls(lease_namespace: &str) -> BTreeSet<Call> {
    caldera_api::calls::calls()
        .into_iter()
        .map(|c| Call {
            group: c.group,
            resource: c.resource,
            verb: c.verb,
            scope: match c.scope {
                caldera_api::calls::Scope::Cluster => Scope::Cluster,
                caldera_api::calls::Scope::LeaseNamespace => {
                    Scope::Namespace(lease_namespace.to_string())
                }
            },
        })
        .collect()
}

/// Panics unless the two sets of calls are equal, naming what each lacks.
fn assert_same_calls(
    (left_name, left): (&str, &BTreeSet<Call>),
    (right_name, right): (&str, &BTreeSet<Call>),
) {
    let only_left: BTreeSet<Call> = left.difference(right).cloned().collect();
    let only_right: BTreeSet<Call> = right.difference(left).cloned().collect();
    assert!(
        only_left.is_empty() && only_right.is_empty(),
        "{left_name} and {right_name} disagree.\nOnly in {left_name}:{}\nOnly in {right_name}:{}",
        show(&only_left),
        show(&only_right)
    );
}

/// The runtime's watches and writes come from `caldera_api::calls`: the ClusterRole grants
/// that list, no more and no less, so a new watch or write without its rule fails here.
#[test]
fn rbac_grants_exactly_the_calls_the_runtime_lists() {
    let documents = deploy_objects();
    let lease_namespace = lease_namespace(&documents);
    let account = service_account(&documents);
    assert_same_calls(
        (
            "caldera_api::calls (crates/api/src/calls.rs)",
            &listed_calls(&lease_namespace),
        ),
        (
            "deploy/rbac.yaml",
            &granted(&documents, (&account.0, &account.1)),
        ),
    );
}

/// ARCHITECTURE.md's table lists the same calls (so, with the test above, the RBAC grants
/// exactly what the table says).
#[test]
fn architecture_md_lists_exactly_the_calls_the_runtime_lists() {
    let documents = deploy_objects();
    let lease_namespace = lease_namespace(&documents);
    assert_same_calls(
        (
            "caldera_api::calls (crates/api/src/calls.rs)",
            &listed_calls(&lease_namespace),
        ),
        (
            "ARCHITECTURE.md (\"API calls `caldera run` makes\")",
            &documented_calls(&lease_namespace),
        ),
    );
}

#[test]
fn rbac_has_no_wildcards_and_no_non_resource_urls() {
    let documents = deploy_objects();
    for document in all_of(&documents, "ClusterRole")
        .into_iter()
        .chain(all_of(&documents, "Role"))
    {
        let rules: Vec<PolicyRule> = serde_json::from_value(
            document
                .value
                .get("rules")
                .cloned()
                .unwrap_or(serde_json::Value::Null),
        )
        .unwrap_or_else(|e| panic!("{}: rules: {e}", document.describe()));
        assert!(!rules.is_empty(), "{}: no rules", document.describe());
        for rule in &rules {
            let lists = [
                ("apiGroups", rule.api_groups.clone().unwrap_or_default()),
                ("resources", rule.resources.clone().unwrap_or_default()),
                ("verbs", rule.verbs.clone()),
                (
                    "resourceNames",
                    rule.resource_names.clone().unwrap_or_default(),
                ),
            ];
            for (field, values) in lists {
                assert!(
                    !values.iter().any(|v| v.contains('*')),
                    "{}: wildcard in {field}: {values:?}",
                    document.describe()
                );
            }
            assert!(
                rule.non_resource_urls.is_none(),
                "{}: nonResourceURLs granted",
                document.describe()
            );
            assert!(
                rule.api_groups.as_ref().is_some_and(|g| !g.is_empty())
                    && rule.resources.as_ref().is_some_and(|r| !r.is_empty())
                    && !rule.verbs.is_empty(),
                "{}: a rule without apiGroups, resources or verbs",
                document.describe()
            );
        }
    }
    assert!(
        !all_of(&documents, "ClusterRole").is_empty() && !all_of(&documents, "Role").is_empty(),
        "deploy/ should have a ClusterRole and a Role"
    );
}

#[test]
fn role_for_the_lease_is_in_the_lease_namespace() {
    let documents = deploy_objects();
    let lease_namespace = lease_namespace(&documents);
    for kind in ["Role", "RoleBinding"] {
        for document in all_of(&documents, kind) {
            assert_eq!(
                document.namespace(),
                Some(lease_namespace.as_str()),
                "{}: the Lease is in {lease_namespace} (--lease-namespace)",
                document.describe()
            );
        }
    }
}

#[test]
fn every_role_is_bound_to_the_scheduler_service_account() {
    let documents = deploy_objects();
    let account = service_account(&documents);
    // `granted` panics on a role nobody binds to the account.
    let granted = granted(&documents, (&account.0, &account.1));
    assert!(
        granted.iter().any(|c| c.scope == Scope::Cluster)
            && granted
                .iter()
                .any(|c| matches!(c.scope, Scope::Namespace(_))),
        "the ServiceAccount {}/{} should get both the ClusterRole and the Lease Role",
        account.0,
        account.1
    );
}
