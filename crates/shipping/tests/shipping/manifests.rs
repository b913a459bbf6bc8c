//! Reading the shipped YAML: files, multi-document streams, and typed checks that lose nothing.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text of a file, by its path from the repository root.
pub fn read(relative: &str) -> String {
    let path = root().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every `.yaml`/`.yml` file under `dir` (a path from the repository root), as paths from the
/// root, sorted.
pub fn yaml_files(dir: &str) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()))
                .path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if path
                .extension()
                .is_some_and(|ext| ext == "yaml" || ext == "yml")
            {
                let relative = path.strip_prefix(root).unwrap_or(&path);
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let root = root();
    let mut out = Vec::new();
    walk(&root, &root.join(dir), &mut out);
    out.sort();
    assert!(!out.is_empty(), "no YAML files under {dir}/");
    out
}

/// One document of a multi-document YAML file.
#[derive(Debug, Clone)]
pub struct Document {
    /// Path from the repository root.
    pub file: String,
    /// 1-based position in the file (empty documents are skipped but counted).
    pub index: usize,
    /// The document as JSON.
    pub value: Value,
}

impl Document {
    fn text(&self, pointer: &str) -> &str {
        self.value
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn api_version(&self) -> &str {
        self.text("/apiVersion")
    }

    pub fn kind(&self) -> &str {
        self.text("/kind")
    }

    pub fn name(&self) -> &str {
        self.text("/metadata/name")
    }

    pub fn namespace(&self) -> Option<&str> {
        self.value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
    }

    pub fn is(&self, kind: &str) -> bool {
        self.kind() == kind
    }

    /// `deploy/rbac.yaml, document 2 (ClusterRole caldera)`, for messages.
    pub fn describe(&self) -> String {
        format!(
            "{}, document {} ({} {})",
            self.file,
            self.index,
            self.kind(),
            self.name()
        )
    }
}

/// The non-empty documents of one YAML text; `file` names it in messages.
pub fn parse_documents(file: &str, text: &str) -> Vec<Document> {
    let mut out = Vec::new();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document)
            .unwrap_or_else(|e| panic!("{file}, document {}: not valid YAML: {e}", i + 1));
        if !value.is_null() {
            out.push(Document {
                file: file.to_string(),
                index: i + 1,
                value,
            });
        }
    }
    out
}

/// The documents of one file (a path from the repository root).
pub fn documents_in(file: &str) -> Vec<Document> {
    parse_documents(file, &read(file))
}

/// Whether a file is kustomize's own config rather than a Kubernetes object.
pub fn is_kustomization(file: &str) -> bool {
    file.rsplit('/').next() == Some("kustomization.yaml")
}

/// Every Kubernetes object under `dir`: all documents of all YAML files but kustomization.yaml.
pub fn objects(dir: &str) -> Vec<Document> {
    yaml_files(dir)
        .iter()
        .filter(|file| !is_kustomization(file))
        .flat_map(|file| documents_in(file))
        .collect()
}

/// The one object of `kind` named `name` among `documents`.
pub fn find<'d>(documents: &'d [Document], kind: &str, name: &str) -> &'d Document {
    let found: Vec<&Document> = documents
        .iter()
        .filter(|d| d.is(kind) && d.name() == name)
        .collect();
    match found.as_slice() {
        [one] => one,
        [] => panic!("no {kind} named {name}"),
        many => panic!("{} objects {kind} {name}", many.len()),
    }
}

/// The 0-based index of the first line where two texts differ (the shorter one's length when
/// one is a prefix of the other), for messages about stale copies.
pub fn first_different_line(a: &str, b: &str) -> usize {
    a.lines()
        .zip(b.lines())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.lines().count().min(b.lines().count()))
}

/// Kinds without a namespace among those Caldera ships.
pub const CLUSTER_SCOPED: [&str; 8] = [
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "Queue",
    "HyperNode",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

/// The objects of `kind` among `documents`.
pub fn all_of<'d>(documents: &'d [Document], kind: &str) -> Vec<&'d Document> {
    documents.iter().filter(|d| d.is(kind)).collect()
}

/// Deserializes a document into `T` and checks that nothing was dropped on the way: serializing
/// the value back must give every field of the document again (a misspelt or misplaced field
/// would otherwise be ignored here, and pruned or rejected by the API server).
pub fn typed<T: DeserializeOwned + Serialize>(document: &Document) -> Result<T, String> {
    let object: T = serde_json::from_value(document.value.clone())
        .map_err(|e| format!("{}: does not deserialize: {e}", document.describe()))?;
    let back = serde_json::to_value(&object)
        .map_err(|e| format!("{}: does not serialize back: {e}", document.describe()))?;
    let mut lost = Vec::new();
    lost_fields(&document.value, &back, "", &mut lost);
    if lost.is_empty() {
        Ok(object)
    } else {
        Err(format!(
            "{}: fields the type does not know (misspelt or misplaced?): {}",
            document.describe(),
            lost.join("; ")
        ))
    }
}

/// Paths of `original` that `back` does not have with the same value. Scalars compare by
/// text, since a quantity written `8` comes back as `"8"`.
pub fn lost_fields(original: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    match (original, back) {
        (Value::Object(a), Value::Object(b)) => {
            for (key, value) in a {
                if value.is_null() {
                    continue;
                }
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match b.get(key) {
                    Some(other) => lost_fields(value, other, &here, out),
                    None => out.push(here),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                lost_fields(x, y, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Object(_) | Value::Array(_), _) | (_, Value::Object(_) | Value::Array(_)) => {
            out.push(format!("{path}: {original} came back as {back}"));
        }
        (a, b) => {
            if scalar_text(a) != scalar_text(b) {
                out.push(format!("{path}: {a} came back as {b}"));
            }
        }
    }
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Type-checks a Kubernetes object by its apiVersion and kind; kinds nobody added a check for
/// are an error, so nothing ships unchecked.
pub fn check_typed(document: &Document) -> Result<(), String> {
    use k8s_openapi::api::{apps, batch, core, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let d = document;
    match (d.api_version(), d.kind()) {
        ("v1", "Namespace") => typed::<core::v1::Namespace>(d).map(drop),
        ("v1", "ServiceAccount") => typed::<core::v1::ServiceAccount>(d).map(drop),
        ("v1", "ConfigMap") => typed::<core::v1::ConfigMap>(d).map(drop),
        ("v1", "Service") => typed::<core::v1::Service>(d).map(drop),
        ("v1", "Pod") => typed::<core::v1::Pod>(d).map(drop),
        ("apps/v1", "Deployment") => typed::<apps::v1::Deployment>(d).map(drop),
        ("policy/v1", "PodDisruptionBudget") => {
            typed::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(d).map(drop)
        }
        ("monitoring.coreos.com/v1", "ServiceMonitor") => typed::<ServiceMonitor>(d).map(drop),
        ("apps/v1", "StatefulSet") => typed::<apps::v1::StatefulSet>(d).map(drop),
        ("batch/v1", "Job") => typed::<batch::v1::Job>(d).map(drop),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            typed::<rbac::v1::ClusterRole>(d).map(drop)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            typed::<rbac::v1::ClusterRoleBinding>(d).map(drop)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => typed::<rbac::v1::Role>(d).map(drop),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            typed::<rbac::v1::RoleBinding>(d).map(drop)
        }
        ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy") => {
            typed::<k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicy>(d)
                .map(drop)
        }
        ("admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding") => {
            typed::<k8s_openapi::api::admissionregistration::v1::MutatingAdmissionPolicyBinding>(d)
                .map(drop)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            typed::<CustomResourceDefinition>(d).map(drop)
        }
        ("scheduling.volcano.sh/v1beta1", "PodGroup") => typed::<caldera_api::PodGroup>(d).map(drop),
        ("scheduling.volcano.sh/v1beta1", "Queue") => typed::<caldera_api::Queue>(d).map(drop),
        (api_version, kind) => Err(format!(
            "{}: no type check for {api_version} {kind}; add one to check_typed in crates/shipping/tests/shipping/manifests.rs",
            d.describe()
        )),
    }
}

/// The pod template specs of a workload document: a Pod's spec, or a controller's
/// `spec.template.spec`, with how many pods it makes (replicas, parallelism; else 1).
pub fn pod_specs(document: &Document) -> Option<(&Value, &Value, i64)> {
    match document.kind() {
        "Pod" => Some((
            document.value.get("metadata")?,
            document.value.get("spec")?,
            1,
        )),
        "Deployment" | "StatefulSet" | "ReplicaSet" | "Job" => {
            let spec = document.value.get("spec")?;
            let count = spec
                .get("replicas")
                .or_else(|| spec.get("parallelism"))
                .and_then(Value::as_i64)
                .unwrap_or(1);
            let template = spec.get("template")?;
            Some((template.get("metadata")?, template.get("spec")?, count))
        }
        _ => None,
    }
}

/// The Prometheus operator's ServiceMonitor (monitoring.coreos.com/v1), as far as the chart
/// uses it: no Rust type ships with k8s-openapi, and a field spelt otherwise than the operator's
/// CRD is lost on the way through these and reported by [`typed`].
#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitor {
    pub api_version: String,
    pub kind: String,
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pub spec: ServiceMonitorSpec,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    pub selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<NamespaceSelector>,
    pub endpoints: Vec<ServiceMonitorEndpoint>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub any: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_names: Vec<String>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorEndpoint {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
}
