//! The scenario's object kinds as API resources, and the JSON work on manifests: labelling,
//! the merge patch between two manifests (what `kubectl apply` sends), and subset checks.

use crate::error::{Error, Result};
use caldera_sim::manifest::{Kind, Object};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::Client;
use serde_json::{Map, Value};
use std::fmt;

/// The label every object the driver creates carries; its value is the run's id, so a run
/// finds (and deletes) exactly what it made.
pub const RUN_LABEL: &str = "caldera.sh/e2e-run";

/// The taint TaintNodesByCondition admission puts on every new Node.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Group, version and plural of a kind.
pub fn gvr(kind: Kind) -> (&'static str, &'static str, &'static str) {
    match kind {
        Kind::Namespace => ("", "v1", "namespaces"),
        Kind::PriorityClass => ("scheduling.k8s.io", "v1", "priorityclasses"),
        Kind::Queue => ("scheduling.volcano.sh", "v1beta1", "queues"),
        Kind::Node => ("", "v1", "nodes"),
        Kind::HyperNode => ("topology.volcano.sh", "v1alpha1", "hypernodes"),
        Kind::PodGroup => ("scheduling.volcano.sh", "v1beta1", "podgroups"),
        Kind::Pod => ("", "v1", "pods"),
        Kind::PodDisruptionBudget => ("policy", "v1", "poddisruptionbudgets"),
        Kind::StorageClass => ("storage.k8s.io", "v1", "storageclasses"),
        Kind::CSINode => ("storage.k8s.io", "v1", "csinodes"),
        Kind::PersistentVolume => ("", "v1", "persistentvolumes"),
        Kind::PersistentVolumeClaim => ("", "v1", "persistentvolumeclaims"),
        Kind::Job => ("batch", "v1", "jobs"),
        Kind::Workload => ("scheduling.k8s.io", "v1alpha2", "workloads"),
        Kind::NativePodGroup => ("scheduling.k8s.io", "v1alpha2", "podgroups"),
        Kind::JobSet => ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        Kind::LeaderWorkerSet => ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
        Kind::ReplicaSet => ("apps", "v1", "replicasets"),
        Kind::Deployment => ("apps", "v1", "deployments"),
    }
}

/// The API resource of a kind.
pub fn api_resource(kind: Kind) -> ApiResource {
    let (group, version, plural) = gvr(kind);
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind.as_str()),
        plural,
    )
}

/// An `Api` for `kind`: in `namespace` for namespaced kinds given one, else cluster-wide.
pub fn api(client: &Client, kind: Kind, namespace: Option<&str>) -> Api<DynamicObject> {
    let resource = api_resource(kind);
    match namespace.filter(|_| kind.namespaced()) {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Whether a `status` the manifest gives is written, through the `status` subresource: not for
/// kinds without one, nor for claims and volumes, whose status is the PV controller's
/// (kube-apiserver drops it on create, and so does the simulator).
pub fn has_status_subresource(kind: Kind) -> bool {
    !matches!(
        kind,
        Kind::PriorityClass
            | Kind::StorageClass
            | Kind::CSINode
            | Kind::PersistentVolume
            | Kind::PersistentVolumeClaim
    )
}

/// An object by kind, namespace (namespaced kinds only) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// Kind.
    pub kind: Kind,
    /// Namespace, for namespaced kinds (`default` when the manifest gives none).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// The key of `kind` `name` in `namespace` (ignored for cluster-scoped kinds; `default`
    /// when absent for namespaced ones).
    pub fn new(kind: Kind, namespace: Option<&str>, name: &str) -> Self {
        let namespace = kind.namespaced().then(|| {
            namespace
                .filter(|ns| !ns.is_empty())
                .unwrap_or("default")
                .to_string()
        });
        ObjectKey {
            kind,
            namespace,
            name: name.to_string(),
        }
    }

    /// An `Api` for this object's kind and namespace.
    pub fn api(&self, client: &Client) -> Api<DynamicObject> {
        api(client, self.kind, self.namespace.as_deref())
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// A scenario object as JSON, as it would be sent: only the fields the manifest sets,
/// `apiVersion` and `kind` filled, the namespace made explicit.
pub fn to_json(object: &Object) -> Result<(ObjectKey, Value)> {
    let encoded = match object {
        Object::Namespace(o) => serde_json::to_value(o),
        Object::PriorityClass(o) => serde_json::to_value(o),
        Object::Queue(o) => serde_json::to_value(o),
        Object::Node(o) => serde_json::to_value(o),
        Object::HyperNode(o) => serde_json::to_value(o),
        Object::PodGroup(o) => serde_json::to_value(o),
        Object::Pod(o) => serde_json::to_value(o),
        Object::PodDisruptionBudget(o) => serde_json::to_value(o),
        Object::StorageClass(o) => serde_json::to_value(o),
        Object::CSINode(o) => serde_json::to_value(o),
        Object::PersistentVolume(o) => serde_json::to_value(o),
        Object::PersistentVolumeClaim(o) => serde_json::to_value(o),
        Object::Job(o) => serde_json::to_value(o),
        Object::Workload(o) => serde_json::to_value(o),
        Object::NativePodGroup(o) => serde_json::to_value(o),
        Object::JobSet(o) | Object::LeaderWorkerSet(o) => serde_json::to_value(o),
        Object::ReplicaSet(o) => serde_json::to_value(o),
        Object::Deployment(o) => serde_json::to_value(o),
    };
    let mut value = encoded.map_err(|source| Error::Json {
        object: object.describe(),
        source,
    })?;
    let kind = object.kind();
    let namespace = value["metadata"]["namespace"].as_str().map(str::to_string);
    let key = ObjectKey::new(kind, namespace.as_deref(), object.name());
    let (group, version, _) = gvr(kind);
    if let Value::Object(map) = &mut value {
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        map.insert("apiVersion".into(), Value::String(api_version));
        map.insert("kind".into(), Value::String(kind.as_str().into()));
    }
    if let Some(ns) = &key.namespace {
        value["metadata"]["namespace"] = Value::String(ns.clone());
    }
    Ok((key, value))
}

/// Adds `key=value` to `metadata.labels`.
pub fn add_label(object: &mut Value, key: &str, value: &str) {
    let labels = &mut object["metadata"]["labels"];
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    labels[key] = Value::String(value.to_string());
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`: changed fields as in `new`,
/// fields `new` lacks set to `null`, lists replaced whole. This is what `kubectl apply` sends
/// for a custom resource, computed from the manifest applied before rather than from the live
/// object, so server-filled fields (defaults, admission's additions, `spec.nodeName`) stay.
pub fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(old), Value::Object(new)) => {
            let mut patch = Map::new();
            for (key, new_value) in new {
                match old.get(key) {
                    Some(old_value) if old_value == new_value => {}
                    Some(old_value @ Value::Object(_)) if new_value.is_object() => {
                        patch.insert(key.clone(), merge_diff(old_value, new_value));
                    }
                    _ => {
                        patch.insert(key.clone(), new_value.clone());
                    }
                }
            }
            for key in old.keys() {
                if !new.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            Value::Object(patch)
        }
        _ => new.clone(),
    }
}

/// Whether a merge patch changes nothing.
pub fn is_empty_patch(patch: &Value) -> bool {
    patch.as_object().is_some_and(Map::is_empty)
}

/// Whether every field of `want` is in `got` with the same value (objects compared field by
/// field, anything else exactly).
pub fn is_subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(want), Value::Object(got)) => want
            .iter()
            .all(|(k, v)| got.get(k).is_some_and(|g| is_subset(v, g))),
        _ => want == got,
    }
}

/// Whether the node's `Ready` condition is `True`.
pub fn node_is_ready(node: &Value) -> bool {
    node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_diff_removes_what_the_new_manifest_drops() {
        let old = json!({"metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"schedulingGates": [{"name": "g"}], "containers": [{"name": "c"}]}});
        let new = json!({"metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            merge_diff(&old, &new),
            json!({"spec": {"schedulingGates": null}})
        );
        assert!(is_empty_patch(&merge_diff(&new, &new)));
    }

    #[test]
    fn merge_diff_replaces_lists_and_changed_scalars() {
        let old = json!({"spec": {"weight": 1, "list": [1, 2]}});
        let new = json!({"spec": {"weight": 3, "list": [1]}});
        assert_eq!(
            merge_diff(&old, &new),
            json!({"spec": {"weight": 3, "list": [1]}})
        );
    }

    #[test]
    fn subset_compares_objects_field_by_field() {
        let got = json!({"allocatable": {"cpu": "4", "pods": "110"}, "phase": "x"});
        assert!(is_subset(&json!({"allocatable": {"cpu": "4"}}), &got));
        assert!(!is_subset(&json!({"allocatable": {"cpu": "8"}}), &got));
        assert!(!is_subset(&json!({"capacity": {}}), &got));
    }

    #[test]
    fn keys_default_the_namespace_of_namespaced_kinds_only() {
        assert_eq!(
            ObjectKey::new(Kind::Pod, None, "p").to_string(),
            "Pod default/p"
        );
        assert_eq!(
            ObjectKey::new(Kind::Node, Some("x"), "n").to_string(),
            "Node n"
        );
    }
}
