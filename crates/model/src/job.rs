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
