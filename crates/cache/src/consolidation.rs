//! What `consolidate` needs from Kubernetes objects: the controller that re-creates a pod
//! (and which of its pods this one is), the `caldera.sh/no-consolidate` opt-out, and the
//! room held for moved pods, kept as JSON in the `caldera.sh/consolidation` annotation of the
//! PodGroup the move made room for.

use caldera_model::consolidation::RECREATING_KINDS;
use caldera_model::{Controller, MoveHold, Time};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The label a ReplicaSet's pods carry (the Deployment controller's template hash).
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// The label (annotation before 1.28) of an indexed Job's pods.
pub const JOB_COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The controller that re-creates the pod once deleted, if its controller owner reference is
/// of a kind that does ([`RECREATING_KINDS`]), with the pod's slot: `pod-template-hash` for a
/// ReplicaSet's, its own name for a StatefulSet's (the replacement has it too), the completion
/// index for an indexed Job's.
pub fn controller(meta: &ObjectMeta) -> Option<Controller> {
    let owner = crate::workload::Owner::of(meta)?;
    // `apps/v1` → `apps`; `v1` → the core group.
    let group = owner
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    if !RECREATING_KINDS.contains(&(group, &*owner.kind)) {
        return None;
    }
    let labels = meta.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let annotation = |k: &str| meta.annotations.as_ref().and_then(|a| a.get(k)).cloned();
    let slot = match &*owner.kind {
        "StatefulSet" => meta.name.clone(),
        "Job" => label(JOB_COMPLETION_INDEX).or_else(|| annotation(JOB_COMPLETION_INDEX)),
        _ => label(POD_TEMPLATE_HASH),
    };
    Some(Controller {
        kind: owner.kind,
        name: owner.name,
        uid: owner.uid,
        slot: slot.map(Arc::from),
    })
}

/// Whether the `batch/v1` Job re-creates an evicted pod without counting the eviction as a
/// failure (against `backoffLimit`): its `podFailurePolicy` has a rule `action: Ignore` on a
/// pod condition of type `DisruptionTarget` (status `True`, the default). Otherwise moving its
/// pod could fail the Job, so `consolidate` does not.
pub fn job_ignores_disruption(job: &k8s_openapi::api::batch::v1::Job) -> bool {
    let Some(policy) = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
    else {
        return false;
    };
    // Rules are evaluated in order: the first that matches decides. An eviction only sets
    // the DisruptionTarget condition, so an earlier `onExitCodes` rule may match first only
    // by exit code; a rule on DisruptionTarget before it with another action decides.
    for rule in &policy.rules {
        let on_disruption = rule.on_pod_conditions.as_ref().is_some_and(|cs| {
            cs.iter().any(|c| {
                c.type_ == "DisruptionTarget" && c.status.as_deref().is_none_or(|s| s == "True")
            })
        });
        if on_disruption {
            return rule.action == "Ignore";
        }
    }
    false
}

/// Whether `caldera.sh/no-consolidate` is set to anything but `"false"`.
pub fn opted_out(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations
        .and_then(|a| a.get(caldera_model::NO_CONSOLIDATE))
        .is_some_and(|v| v != "false")
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Holds {
    holds: Vec<Hold>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hold {
    owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slot: Option<String>,
    /// Absent in annotations written before it was recorded: the PodGroup's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    pod: String,
    node: String,
    since: String,
    until: String,
}

/// The annotation's value for `holds`.
pub fn encode(holds: &[MoveHold]) -> String {
    let holds = Holds {
        holds: holds
            .iter()
            .map(|h| Hold {
                owner: h.owner.to_string(),
                slot: h.slot.as_deref().map(str::to_string),
                namespace: Some(h.namespace.to_string()),
                pod: h.pod.to_string(),
                node: h.node.to_string(),
                since: h.since.to_rfc3339(),
                until: h.until.to_rfc3339(),
            })
            .collect(),
    };
    // Serializing plain strings cannot fail.
    serde_json::to_string(&holds).unwrap_or_default()
}

/// Reads the annotation's value (of a PodGroup in `namespace`: a hold that does not name the
/// moved pod's namespace, as written before it was recorded, means that one); the error says
/// what is wrong.
pub fn decode(text: &str, namespace: &str) -> Result<Vec<MoveHold>, String> {
    let holds: Holds = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(holds.holds.len());
    for (i, h) in holds.holds.into_iter().enumerate() {
        let time = |field: &str, text: &str| {
            Time::parse_rfc3339(text)
                .ok_or_else(|| format!("holds[{i}].{field}: not an RFC 3339 time: {text:?}"))
        };
        let since = time("since", &h.since)?;
        let until = time("until", &h.until)?;
        if h.owner.is_empty() || h.pod.is_empty() || h.node.is_empty() {
            return Err(format!("holds[{i}]: owner, pod and node must not be empty"));
        }
        if h.namespace.as_deref() == Some("") {
            return Err(format!("holds[{i}].namespace: must not be empty"));
        }
        out.push(MoveHold {
            owner: h.owner.into(),
            slot: h.slot.map(Arc::from),
            namespace: h.namespace.as_deref().unwrap_or(namespace).into(),
            pod: h.pod.into(),
            node: h.node.into(),
            since,
            until,
        });
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_survive_the_annotation() {
        let holds = vec![MoveHold {
            owner: "uid-rs".into(),
            slot: Some("abc12".into()),
            namespace: "serving".into(),
            pod: "web-x".into(),
            node: "gpu-1".into(),
            since: Time::from_secs(1_799_999_000),
            until: Time::from_secs(1_800_000_000),
        }];
        assert_eq!(decode(&encode(&holds), "training"), Ok(holds));
    }

    #[test]
    fn a_hold_written_without_namespace_is_in_the_podgroups() {
        let old = r#"{"holds":[{"owner":"u","pod":"p","node":"n","since":"2026-01-01T00:00:00Z","until":"2026-01-01T00:05:00Z"}]}"#;
        let holds = decode(old, "training").unwrap();
        assert_eq!(&*holds[0].namespace, "training");
        let empty = r#"{"holds":[{"owner":"u","namespace":"","pod":"p","node":"n","since":"2026-01-01T00:00:00Z","until":"2026-01-01T00:05:00Z"}]}"#;
        assert!(decode(empty, "training")
            .unwrap_err()
            .contains("holds[0].namespace"));
    }

    #[test]
    fn a_malformed_annotation_names_the_field() {
        let bad = r#"{"holds":[{"owner":"u","pod":"p","node":"n","since":"2026-01-01T00:00:00Z","until":"soon"}]}"#;
        assert!(decode(bad, "ns").unwrap_err().contains("holds[0].until"));
        assert!(decode(r#"{"holds":[{"owner":"u"}]}"#, "ns").is_err());
        assert!(decode("[]", "ns").is_err());
    }

    #[test]
    fn a_job_recreates_an_evicted_pod_only_if_its_failure_policy_ignores_disruption() {
        let job = |policy: serde_json::Value| -> k8s_openapi::api::batch::v1::Job {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "train", "namespace": "ns"},
                "spec": {"template": {}, "podFailurePolicy": policy}
            }))
            .unwrap()
        };
        let ignore = job(serde_json::json!({"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
        ]}));
        assert!(job_ignores_disruption(&ignore));
        let counts = job(serde_json::json!({"rules": [
            {"action": "Count", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
        ]}));
        assert!(!job_ignores_disruption(&counts));
        let other = job(serde_json::json!({"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "ConfigIssue"}]}
        ]}));
        assert!(!job_ignores_disruption(&other));
        let none: k8s_openapi::api::batch::v1::Job = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "t"}, "spec": {"template": {}}}),
        )
        .unwrap();
        assert!(!job_ignores_disruption(&none));
    }

    #[test]
    fn only_recreating_controllers_count() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
        let meta = |kind: &str| ObjectMeta {
            name: Some("web-abc".into()),
            labels: Some([(POD_TEMPLATE_HASH.to_string(), "h1".to_string())].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                name: "web".into(),
                uid: "u1".into(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let rs = controller(&meta("ReplicaSet")).unwrap();
        assert_eq!(rs.slot.as_deref(), Some("h1"));
        let sts = controller(&meta("StatefulSet")).unwrap();
        assert_eq!(sts.slot.as_deref(), Some("web-abc"));
        assert!(controller(&meta("DaemonSet")).is_none());
        // The kind must be of its API group: a Job of apps/v1 is no batch Job.
        assert!(controller(&meta("Job")).is_none());
        let mut job = meta("Job");
        job.owner_references.as_mut().unwrap()[0].api_version = "batch/v1".into();
        assert!(controller(&job).is_some());
        let mut rs = meta("ReplicaSet");
        rs.owner_references.as_mut().unwrap()[0].api_version = "example.com/v1".into();
        assert!(controller(&rs).is_none());
        assert!(controller(&meta("Node")).is_none());
    }
}
