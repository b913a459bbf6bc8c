//! Kubernetes' own gang API (`scheduling.k8s.io/v1alpha2`, 1.36, feature `GenericWorkload`)
//! → model: a native `PodGroup` becomes the same [`GroupInfo`] a Volcano PodGroup does, so the
//! session sees one kind of job (docs/workloads.md, "Native Workloads and PodGroups").
//!
//! - membership: a pod's `spec.schedulingGroup.podGroupName` names the PodGroup;
//! - `spec.schedulingPolicy.gang.minCount` is `minMember`; `basic` is `minMember` 1 (members
//!   placed one by one, as kube-scheduler places them);
//! - `spec.schedulingConstraints.topology[0].key` is a one-tier topology, required (as
//!   Caldera's `spec.topology` with `mode: required`);
//! - the queue: label `kueue.x-k8s.io/queue-name` or annotation
//!   `scheduling.volcano.sh/queue-name` on the PodGroup, else on its Workload, else `default`;
//! - priority: `spec.priority`, else `spec.priorityClassName`, else the highest of its pods';
//! - status: only the `PodGroupScheduled` condition, read back into the model's condition.

use crate::convert::GroupInfo;
use crate::error::{ObjectKind, Problem, Result};
use crate::fields::time;
use caldera_api::workload::LABEL_KUEUE_QUEUE_NAME;
use caldera_api::{ANNOTATION_QUEUE_NAME, DEFAULT_QUEUE};
use caldera_model::{
    Condition, NativeGroup, PodGroupPhase, PodGroupStatus, Topology, NATIVE_SCHEDULED,
};
use k8s_openapi::api::scheduling::v1alpha2::{PodGroup, Workload};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Group and version of the native gang API.
pub const GROUP_VERSION: &str = "scheduling.k8s.io/v1alpha2";

/// A native PodGroup, converted: the [`GroupInfo`] every PodGroup becomes, plus what is
/// resolved against other objects when a snapshot is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NativeInfo {
    /// As for a Volcano PodGroup; `group.queue` is the PodGroup's own queue or `default`.
    pub group: GroupInfo,
    /// The queue the PodGroup itself names (label or annotation), if any.
    pub own_queue: Option<Arc<str>>,
    /// `spec.priority` (set by priority admission when the API has the field).
    pub priority: Option<i32>,
    /// The Workload and template it was made from.
    pub source: NativeGroup,
}

/// The queue an object names: label `kueue.x-k8s.io/queue-name` (Kueue's LocalQueue name,
/// read as Caldera's queue) or annotation `scheduling.volcano.sh/queue-name`; the annotation
/// wins when both are set, as for Jobs.
pub fn queue_of(meta: &ObjectMeta) -> Option<Arc<str>> {
    let annotation = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_QUEUE_NAME));
    let label = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_KUEUE_QUEUE_NAME));
    annotation
        .or(label)
        .filter(|q| !q.is_empty())
        .map(|q| Arc::from(q.as_str()))
}

/// What Caldera reads of a Workload: the queue it names.
pub fn workload_queue(w: &Workload) -> Option<Arc<str>> {
    queue_of(&w.metadata)
}

/// Converts a native PodGroup. Inputs Caldera does not evaluate hold the gang with a message
/// naming them (`GroupInfo::unsupported`); a missing name is an error.
pub fn podgroup(pg: &PodGroup) -> Result<NativeInfo> {
    let meta = &pg.metadata;
    let name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| crate::Error {
            kind: ObjectKind::NativePodGroup,
            object: "<unnamed>".into(),
            field: "metadata.name".into(),
            problem: Problem::Missing,
        })?;
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    let created = meta
        .creation_timestamp
        .as_ref()
        .map(time)
        .unwrap_or_default();
    let spec = &pg.spec;
    let policy = &spec.scheduling_policy;
    let mut unsupported: Option<Arc<str>> = None;
    let min_member = match (&policy.gang, &policy.basic) {
        (Some(g), None) => g.min_count.max(1) as u32,
        (None, Some(_)) => 1,
        _ => {
            unsupported =
                Some("spec.schedulingPolicy (exactly one of gang and basic must be set)".into());
            1
        }
    };
    let topology = match spec
        .scheduling_constraints
        .as_ref()
        .and_then(|c| c.topology.as_deref())
        .unwrap_or_default()
    {
        [] => None,
        [t] if !t.key.is_empty() => Some(Topology::one_tier(&t.key, true)),
        [_] => {
            unsupported = Some("spec.schedulingConstraints.topology[0].key is empty".into());
            None
        }
        _ => {
            unsupported = Some(
                "spec.schedulingConstraints.topology (more than one constraint; Caldera reads one tier)"
                    .into(),
            );
            None
        }
    };
    if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
        unsupported = Some(
            "spec.resourceClaims (claims of a native PodGroup, shared by its pods, are not supported yet; a pod's own spec.resourceClaims are)"
                .into(),
        );
    }
    let conditions: Vec<Condition> = pg
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == NATIVE_SCHEDULED)
        .map(|c| {
            let scheduled = c.status == "True";
            Condition {
                type_: if scheduled {
                    "Scheduled"
                } else {
                    "Unschedulable"
                }
                .into(),
                status: "True".into(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                last_transition: time(&c.last_transition_time),
            }
        })
        .collect();
    let scheduled = conditions.iter().any(|c| c.type_ == "Scheduled");
    let pending_since = conditions
        .iter()
        .find(|c| c.type_ == "Unschedulable")
        .map(|c| c.last_transition);
    let own_queue = queue_of(meta);
    let source = spec
        .pod_group_template_ref
        .as_ref()
        .and_then(|r| r.workload.as_ref())
        .map(|w| NativeGroup {
            workload: Some(w.workload_name.as_str().into()),
            template: Some(w.pod_group_template_name.as_str().into()),
        })
        .unwrap_or_default();
    let group = GroupInfo {
        id: format!("{namespace}/{name}").into(),
        namespace: namespace.into(),
        name: name.into(),
        uid: meta
            .uid
            .as_deref()
            .map(Arc::from)
            .unwrap_or_else(|| format!("{namespace}/{name}").into()),
        queue: own_queue.clone().unwrap_or_else(|| DEFAULT_QUEUE.into()),
        min_member,
        min_task_member: BTreeMap::new(),
        priority_class: spec
            .priority_class_name
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(Arc::from),
        min_resources: None,
        timeout_seconds: None,
        topology,
        // The native API has no sub-groups.
        sub_group_policies: Vec::new(),
        unsupported,
        created,
        pending_since,
        status: PodGroupStatus {
            // The native API has no phase: a gang placed once is Running, any other starts
            // each session Pending and is admitted afresh (as a group of one is).
            phase: if scheduled {
                PodGroupPhase::Running
            } else {
                PodGroupPhase::Pending
            },
            conditions,
            running: 0,
            succeeded: 0,
            failed: 0,
        },
        autoscale: Some(false),
        owner_uid: crate::workload::Owner::of(meta).map(|o| o.uid),
        derived_owner: None,
        no_consolidate: crate::consolidation::opted_out(meta.annotations.as_ref()),
        // Holds are written on Volcano PodGroups only (docs/consolidation.md).
        moves: Vec::new(),
        min_runtime: crate::convert::min_runtime(meta.annotations.as_ref()),
    };
    Ok(NativeInfo {
        group,
        own_queue,
        priority: spec.priority,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pg(spec: serde_json::Value) -> PodGroup {
        serde_json::from_value(json!({
            "apiVersion": GROUP_VERSION, "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "uid": "u1",
                         "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
            "spec": spec,
        }))
        .expect("a valid PodGroup")
    }

    #[test]
    fn gang_min_count_is_min_member_and_topology_is_one_tier() {
        let info = podgroup(&pg(json!({
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
            "podGroupTemplateRef": {"workload": {"workloadName": "job-1", "podGroupTemplateName": "workers"}},
        })))
        .expect("converts");
        assert_eq!(info.group.min_member, 4);
        assert_eq!(
            info.group.topology,
            Some(Topology::one_tier("topology.kubernetes.io/rack", true))
        );
        assert_eq!(info.own_queue.as_deref(), Some("team-a"));
        assert_eq!(
            info.source.display().as_deref(),
            Some("Workload job-1 (template workers)")
        );
        assert_eq!(info.group.unsupported, None);
    }

    #[test]
    fn basic_policy_places_members_one_by_one() {
        let info = podgroup(&pg(json!({"schedulingPolicy": {"basic": {}}}))).expect("converts");
        assert_eq!(info.group.min_member, 1);
        assert_eq!(info.group.unsupported, None);
    }

    #[test]
    fn inputs_not_evaluated_hold_the_gang() {
        let both = podgroup(&pg(
            json!({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 2}}}),
        ))
        .expect("converts");
        assert!(both.group.unsupported.is_some());
        let two = podgroup(&pg(json!({
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]},
        })))
        .expect("converts");
        assert!(two
            .group
            .unsupported
            .as_deref()
            .is_some_and(|m| m.contains("topology")));
    }

    #[test]
    fn the_scheduled_condition_reads_back() {
        let mut g = pg(json!({"schedulingPolicy": {"gang": {"minCount": 2}}}));
        g.status = Some(
            serde_json::from_value(json!({"conditions": [{
                "type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
                "message": "2/2 members do not fit", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}))
            .expect("a valid status"),
        );
        let info = podgroup(&g).expect("converts");
        assert_eq!(info.group.status.phase, PodGroupPhase::Pending);
        assert!(info.group.pending_since.is_some());
        let c = caldera_model::NativeCondition::of(&info.group.status).expect("a condition");
        assert!(!c.scheduled);
        assert_eq!(c.reason, "Unschedulable");
        assert_eq!(c.message, "2/2 members do not fit");
    }
}
