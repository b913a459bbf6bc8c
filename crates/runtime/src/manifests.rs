//! `caldera snapshot`: the live cluster as multi-document YAML manifests (Namespaces, Nodes
//! with their status, Pods, PodGroups, Queues, PriorityClasses, StorageClasses, CSINodes,
//! PersistentVolumes, PersistentVolumeClaims, `batch/v1` Jobs, JobSets and LeaderWorkerSets) that
//! `caldera simulate -f` and `caldera explain -f` read back.

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::Client;
use serde_json::Value;

/// Why a snapshot could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// Listing a kind failed.
    #[error("listing {resource}: {source}")]
    List {
        /// The resource.
        resource: &'static str,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// An object could not be written as YAML.
    #[error("writing {resource} as YAML: {message}")]
    Encode {
        /// The resource.
        resource: &'static str,
        /// What the encoder said.
        message: String,
    },
}

/// What is dropped from every object: server-side bookkeeping the simulator has no use for.
/// The uid stays: owner references (a generic ephemeral claim's to its pod, which the volume
/// rules check) name their owner by uid, and the simulator keeps a manifest's uid.
const STRIPPED_METADATA: [&str; 4] = ["managedFields", "resourceVersion", "selfLink", "generation"];

/// The kinds, in the order they are written (what a pod refers to comes first).
const KINDS: [(&str, &str, &str, &str); 16] = [
    ("", "v1", "Namespace", "namespaces"),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
    ),
    ("scheduling.volcano.sh", "v1beta1", "Queue", "queues"),
    ("", "v1", "Node", "nodes"),
    ("topology.volcano.sh", "v1alpha1", "HyperNode", "hypernodes"),
    ("storage.k8s.io", "v1", "StorageClass", "storageclasses"),
    ("storage.k8s.io", "v1", "CSINode", "csinodes"),
    ("", "v1", "PersistentVolume", "persistentvolumes"),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    ("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups"),
    // Kubernetes' own gang API (1.36 with GenericWorkload; left out where not served).
    ("scheduling.k8s.io", "v1alpha2", "Workload", "workloads"),
    ("scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups"),
    ("", "v1", "Pod", "pods"),
    // After their pods: the simulator's Job controller then finds them and makes none again.
    ("batch", "v1", "Job", "jobs"),
    // After their Jobs and pods, for the same reason; left out where their CRDs are not
    // installed. Their pods' gangs are derived from them (docs/workloads.md).
    ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
    (
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
    ),
];

fn clean(mut obj: Value, api_version: &str, kind: &str) -> Value {
    if let Value::Object(map) = &mut obj {
        map.insert("apiVersion".into(), Value::String(api_version.to_string()));
        map.insert("kind".into(), Value::String(kind.to_string()));
        if let Some(Value::Object(meta)) = map.get_mut("metadata") {
            for field in STRIPPED_METADATA {
                meta.remove(field);
            }
        }
    }
    obj
}

/// Lists every object of the kinds in `KINDS` (500 per page) and writes them as YAML documents
/// separated by `---`. A custom kind whose CRD is not installed, or the native gang API where
/// it is not served (404), is left out.
pub async fn cluster_manifests(client: &Client) -> Result<String, SnapshotError> {
    let mut out = String::new();
    for (group, version, kind, plural) in KINDS {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let mut params = ListParams::default().limit(500);
        loop {
            let page = match api.list(&params).await {
                Ok(page) => page,
                Err(kube::Error::Api(s))
                    if s.code == 404
                        && !group.is_empty()
                        && (group != "scheduling.k8s.io" || version != "v1") =>
                {
                    tracing::warn!(
                        resource = plural,
                        "not served (CRD not installed?); left out"
                    );
                    break;
                }
                Err(source) => {
                    return Err(SnapshotError::List {
                        resource: plural,
                        source,
                    })
                }
            };
            for item in &page.items {
                let value = serde_json::to_value(item).map_err(|e| SnapshotError::Encode {
                    resource: plural,
                    message: e.to_string(),
                })?;
                let value = clean(value, &resource.api_version, kind);
                let yaml = serde_yaml_ng::to_string(&value).map_err(|e| SnapshotError::Encode {
                    resource: plural,
                    message: e.to_string(),
                })?;
                out.push_str("---\n");
                out.push_str(&yaml);
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
    }
    Ok(out)
}
