//! Jobs: a PodGroup (or an implicit group of one pod) and what the gang needs.

use crate::resources::Resources;
use crate::time::Time;
use std::collections::BTreeMap;
use std::sync::Arc;

/// PodGroup phase (SPEC §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PodGroupPhase {
    /// Not yet admitted by enqueue.
    Pending,
    /// Admitted, competing for nodes.
    Inqueue,
    /// At least minMember members scheduled.
    Running,
    /// Every member has finished.
    Completed,
    /// Unknown.
    Unknown,
}

impl PodGroupPhase {
    /// Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Inqueue => "Inqueue",
            Self::Running => "Running",
            Self::Completed => "Completed",
            Self::Unknown => "Unknown",
        }
    }

    /// Parses the Kubernetes spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Pending" => Self::Pending,
            "Inqueue" => Self::Inqueue,
            "Running" => Self::Running,
            "Completed" => Self::Completed,
            "Unknown" => Self::Unknown,
            _ => return None,
        })
    }
}

/// A status condition (PodGroup `Scheduled`/`Unschedulable`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Condition {
    /// `Scheduled` or `Unschedulable`.
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// Machine-readable reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
    /// When the condition last changed status.
    pub last_transition: Time,
}

impl Condition {
    /// Same content, ignoring the transition time.
    pub fn same_content(&self, other: &Condition) -> bool {
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.message == other.message
    }
}

/// The status Caldera writes on a PodGroup.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodGroupStatus {
    /// Phase.
    pub phase: PodGroupPhase,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// Members running.
    pub running: u32,
    /// Members succeeded.
    pub succeeded: u32,
    /// Members failed.
    pub failed: u32,
}

impl PodGroupStatus {
    /// Since when the gang has been valid and waiting: the transition time of a True
    /// `Unschedulable` condition that is not `NotEnoughTasks`, nor gate mode's
    /// `NotBoundAfterRelease` (the gang was placed; see [`Job::pending_since`]).
    pub fn pending_since(&self) -> Option<Time> {
        self.conditions
            .iter()
            .find(|c| {
                c.type_ == "Unschedulable"
                    && c.status == "True"
                    && c.reason != "NotEnoughTasks"
                    && c.reason != "NotBoundAfterRelease"
            })
            .map(|c| c.last_transition)
    }

    /// Same content, ignoring condition transition times.
    pub fn same_content(&self, other: &PodGroupStatus) -> bool {
        self.phase == other.phase
            && self.running == other.running
            && self.succeeded == other.succeeded
            && self.failed == other.failed
            && self.conditions.len() == other.conditions.len()
            && self
                .conditions
                .iter()
                .zip(&other.conditions)
                .all(|(a, b)| a.same_content(b))
    }
}

/// PodGroup annotation: a Go duration (`30m`, `2h`); a member of the gang that has run less
/// than it is never a victim of preempt, reclaim or consolidate. It overrides the fairshare
/// plugin's `minRuntime` for this gang (`0s` turns the protection off for it).
pub const MIN_RUNTIME_ANNOTATION: &str = "caldera.sh/min-runtime";

/// A job: the unit that is placed all-or-nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// `namespace/name`.
    pub id: Arc<str>,
    /// Namespace.
    pub namespace: Arc<str>,
    /// PodGroup name, or the pod's name for an implicit group.
    pub name: Arc<str>,
    /// PodGroup uid (for events); the pod's uid for an implicit group.
    pub uid: Arc<str>,
    /// Queue name.
    pub queue: Arc<str>,
    /// Members that must be placed together (≥ 1).
    pub min_member: u32,
    /// Per-role minimums.
    pub min_task_member: BTreeMap<String, u32>,
    /// Job priority.
    pub priority: i32,
    /// `minResources`, used at enqueue.
    pub min_resources: Option<Resources>,
    /// `scheduleTimeoutSeconds` (or the config default).
    pub timeout_seconds: Option<u64>,
    /// Topology rule (HyperNodes' `networkTopology`, or one tier from `spec.topology`'s label).
    pub topology: Option<crate::topology::Topology>,
    /// `subGroupPolicy`: how members split into sub-groups, each with its own size, minimum
    /// count and topology rule (empty: none; see [`crate::split_sub_groups`]).
    pub sub_group_policies: Vec<crate::topology::SubGroupPolicy>,
    /// A scheduling input of the PodGroup that Caldera does not honour yet (e.g.
    /// `subGroupPolicy`): the job waits, `Unschedulable`, with this named — never ignored.
    pub unsupported: Option<Arc<str>>,
    /// Creation time.
    pub created: Time,
    /// Since when the gang has been valid and waiting: the `Unschedulable` condition's
    /// transition time (not counting `NotEnoughTasks`), or for an implicit group its pod's
    /// `PodScheduled=False` transition time. The gang timeout counts from here.
    pub pending_since: Option<Time>,
    /// The PodGroup's current status; `None` for an implicit group (no object to write).
    pub status: Option<PodGroupStatus>,
    /// Indices of members in [`crate::Snapshot::tasks`], in (namespace, name) order.
    pub tasks: Vec<usize>,
    /// May ask an autoscaler for capacity (config on, not opted out by annotation; always
    /// false for an implicit group).
    pub autoscale: bool,
    /// Its live (or last, if over) autoscaler request.
    pub capacity: Option<crate::CapacityRequest>,
    /// Set when the gang is a native `scheduling.k8s.io/v1alpha2` PodGroup (not a Volcano
    /// one): its status is written as kube-scheduler writes it ([`NativeCondition`]).
    pub native: Option<NativeGroup>,
    /// Room held for the pods `consolidate` moved to make room for this job (its PodGroup's
    /// `caldera.sh/consolidation` annotation), sorted.
    pub moves: Vec<crate::consolidation::MoveHold>,
    /// Its PodGroup's annotation [`MIN_RUNTIME_ANNOTATION`]: the gang's own `minRuntime` in
    /// milliseconds, in place of the fairshare plugin's argument; `Err` carries why a
    /// malformed value was refused (the gang waits, its condition naming the annotation).
    /// `None`: not annotated.
    pub min_runtime: Option<Result<i64, Arc<str>>>,
}

/// Where a native `scheduling.k8s.io/v1alpha2` PodGroup comes from: the Workload and
/// template its `spec.podGroupTemplateRef` names (the name users see), if any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NativeGroup {
    /// `spec.podGroupTemplateRef.workload.workloadName`.
    pub workload: Option<Arc<str>>,
    /// `spec.podGroupTemplateRef.workload.podGroupTemplateName`.
    pub template: Option<Arc<str>>,
}

impl NativeGroup {
    /// The name users see: `Workload <w> (template <t>)`, else nothing.
    pub fn display(&self) -> Option<String> {
        let w = self.workload.as_deref()?;
        Some(match self.template.as_deref() {
            Some(t) => format!("Workload {w} (template {t})"),
            None => format!("Workload {w}"),
        })
    }
}

/// The condition type kube-scheduler writes on a native PodGroup.
pub const NATIVE_SCHEDULED: &str = "PodGroupScheduled";

/// The `PodGroupScheduled` condition of a native PodGroup, as kube-scheduler 1.36 writes it:
/// `True`/`Scheduled` once the gang is placed, `False`/`Unschedulable` (or `Preempted`) while
/// it waits. The model's richer status maps onto it ([`NativeCondition::of`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NativeCondition {
    /// `True` when scheduled.
    pub scheduled: bool,
    /// `Scheduled`, `Unschedulable` or `Preempted`.
    pub reason: &'static str,
    /// Human-readable message (the model condition's).
    pub message: String,
    /// When it last changed status.
    pub last_transition: Time,
}

impl NativeCondition {
    /// What a model status says on a native PodGroup, or `None` when it says nothing there:
    /// no condition, or too few members exist yet (kube-scheduler keeps such pods back
    /// without touching the PodGroup, so the gang timeout does not count that wait).
    pub fn of(status: &PodGroupStatus) -> Option<NativeCondition> {
        let c = status.conditions.first()?;
        if c.status != "True" || c.reason == "NotEnoughTasks" {
            return None;
        }
        let (scheduled, reason) = match (c.type_.as_str(), c.reason.as_str()) {
            ("Scheduled", _) => (true, "Scheduled"),
            (_, "Preempted") => (false, "Preempted"),
            _ => (false, "Unschedulable"),
        };
        Some(NativeCondition {
            scheduled,
            reason,
            message: c.message.clone(),
            last_transition: c.last_transition,
        })
    }

    /// Same content, ignoring the transition time.
    pub fn same_content(&self, other: &NativeCondition) -> bool {
        self.scheduled == other.scheduled
            && self.reason == other.reason
            && self.message == other.message
    }
}

impl Job {
    /// Whether this job is backed by a PodGroup object.
    pub fn has_podgroup(&self) -> bool {
        self.status.is_some()
    }

    /// The current phase (implicit groups start Pending).
    pub fn phase(&self) -> PodGroupPhase {
        self.status
            .as_ref()
            .map(|s| s.phase)
            .unwrap_or(PodGroupPhase::Pending)
    }

    /// The current condition of `type_`, if any.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(reason: &str) -> PodGroupStatus {
        PodGroupStatus {
            phase: PodGroupPhase::Running,
            conditions: vec![Condition {
                type_: "Unschedulable".into(),
                status: "True".into(),
                reason: reason.into(),
                message: String::new(),
                last_transition: Time(5_000),
            }],
            running: 0,
            succeeded: 0,
            failed: 0,
        }
    }

    #[test]
    fn a_gang_waits_only_when_valid_and_not_placed() {
        assert_eq!(
            status("NotEnoughResources").pending_since(),
            Some(Time(5_000))
        );
        assert_eq!(status("NotEnoughTasks").pending_since(), None);
        // Gate mode: the gang was placed; its members wait for kube-scheduler, not for room.
        assert_eq!(status("NotBoundAfterRelease").pending_since(), None);
    }
}
