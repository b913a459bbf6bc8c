//! Tasks: the members of a job (pods), with their state, request and constraints.

use crate::resources::Resources;
use crate::selector::{HostPort, SelectorTerm, Toleration};
use crate::time::Time;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a member is in its life (SPEC §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskStatus {
    /// No node yet.
    Pending,
    /// Placed in this session, not yet committed.
    Allocated,
    /// Committed; the bind is in flight.
    Binding,
    /// `spec.nodeName` is set.
    Bound,
    /// Phase Running.
    Running,
    /// Phase Succeeded.
    Succeeded,
    /// Phase Failed.
    Failed,
    /// Terminating (deletionTimestamp set).
    Releasing,
}

impl TaskStatus {
    /// Counts toward a gang's ready number: Allocated, Binding, Bound, Running, Succeeded.
    pub fn is_ready(self) -> bool {
        matches!(
            self,
            Self::Allocated | Self::Binding | Self::Bound | Self::Running | Self::Succeeded
        )
    }

    /// Has a node (or is being given one), so it occupies resources on that node.
    pub fn occupies_node(self) -> bool {
        matches!(
            self,
            Self::Allocated | Self::Binding | Self::Bound | Self::Running | Self::Releasing
        )
    }

    /// Scheduled as users count it for the PodGroup phase: Bound, Running, Succeeded, Failed.
    pub fn is_scheduled(self) -> bool {
        matches!(
            self,
            Self::Allocated
                | Self::Binding
                | Self::Bound
                | Self::Running
                | Self::Succeeded
                | Self::Failed
        )
    }
}

/// The `PodScheduled=False` condition a pending pod carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PendingReason {
    /// `Unschedulable` or `QueueQuotaExceeded`.
    pub reason: String,
    /// Human-readable fit message.
    pub message: String,
}

/// One member of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    /// `metadata.uid`.
    pub uid: Arc<str>,
    /// `metadata.namespace`.
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Arc<str>,
    /// Index of the job in [`crate::Snapshot::jobs`].
    pub job: usize,
    /// Current state.
    pub status: TaskStatus,
    /// The node it is bound to, if any.
    pub node: Option<Arc<str>>,
    /// Resource request as Kubernetes computes it (containers, init containers, overhead).
    pub request: Resources,
    /// Pod priority (from its PriorityClass).
    pub priority: i32,
    /// Role from `volcano.sh/task-spec`.
    pub role: Option<Arc<str>>,
    /// Has scheduling gates: never placed, does not count toward the gang.
    pub gated: bool,
    /// Placement constraints; identical members share one.
    pub spec: Arc<PlacementSpec>,
    /// `metadata.labels` (what other pods' affinity and spread terms select on).
    pub labels: crate::interpod::Labels,
    /// `metadata.creationTimestamp`.
    pub created: Time,
    /// The current `PodScheduled=False` condition, to write only changes. Shared, since a
    /// snapshot is assembled every session.
    pub pending_reason: Option<Arc<PendingReason>>,
    /// kube-system, system-critical or a mirror (static) pod: never a victim (conformance).
    pub critical: bool,
    /// A pending member's `status.nominatedNodeName`: capacity is held for it there (see
    /// `caldera_session::reserve`).
    pub nominated: Option<Arc<str>>,
    /// `spec.preemptionPolicy: Never`: waits in priority order but never evicts anyone.
    pub never_preempts: bool,
    /// When it started (`status.startTime`, else its creation): the most recently started
    /// victims lose the least work.
    pub started: Time,
    /// Index in [`crate::Snapshot::budgets`] of the PodDisruptionBudget the eviction API will
    /// judge it by (only for running pods: the API ignores budgets for pods not running).
    pub budget: Option<u32>,
    /// The ProvisioningRequest (same namespace) its
    /// `autoscaling.x-k8s.io/consume-provisioning-request` annotation names: cluster-autoscaler
    /// leaves the pod to that request and never scales up for it on its own.
    pub consumes: Option<Arc<str>>,
    /// Its claims' names and binding state, when it has unbound or not fully bound claims
    /// (what they ask of a node is in `spec.volumes`).
    pub volumes: Option<Arc<crate::volume::TaskVolumes>>,
    /// Its DRA claims and extended-resource requests devices may serve (`None`: neither); set
    /// for every member, placed ones too (what a victim frees).
    pub claims: Option<Arc<crate::dra::TaskClaims>>,
    /// The controller that re-creates it once deleted, if any: only such pods may be moved by
    /// `consolidate`.
    pub controller: Option<Arc<crate::consolidation::Controller>>,
    /// `caldera.sh/no-consolidate` on the pod, its PodGroup or its namespace.
    pub no_consolidate: bool,
}

impl Task {
    /// The pod, as a write names it.
    pub fn object_ref(&self) -> crate::plan::ObjectRef {
        crate::plan::ObjectRef::new(&self.namespace, &self.name, &self.uid)
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// A member that requests nothing (placed by backfill).
    pub fn best_effort(&self) -> bool {
        self.request.is_empty()
    }

    /// Whether it may be bound now: every claim it mounts is fully bound.
    pub fn volumes_bound(&self) -> bool {
        self.volumes.as_ref().is_none_or(|v| v.all_bound)
    }

    /// Why it can go to no node at all, whatever the node (kube-scheduler's PreFilter
    /// message): a claim it mounts is missing, an unbound `Immediate` one, lost or being
    /// deleted, or a DRA claim it needs is not there yet or not its own. `None` otherwise.
    pub fn blocked(&self) -> Option<&str> {
        self.spec
            .volumes
            .blocked
            .as_deref()
            .or_else(|| self.claims.as_ref().and_then(|c| c.waiting.as_deref()))
    }

    /// Waiting for a node and allowed to get one.
    pub fn schedulable_pending(&self) -> bool {
        self.status == TaskStatus::Pending && !self.gated
    }
}

/// Everything about a pod that decides which nodes it may use, shared by identical members.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PlacementSpec {
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity: any term must match. `None` means no requirement.
    pub required_terms: Option<Vec<SelectorTerm>>,
    /// Preferred node affinity: (weight, term).
    pub preferred_terms: Vec<(i32, SelectorTerm)>,
    /// `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// Host ports of all containers.
    pub host_ports: Vec<HostPort>,
    /// Inter-pod affinity, anti-affinity and topology spread.
    pub pods: crate::interpod::PodConstraints,
    /// A scheduling input Caldera does not evaluate (e.g. a `spec.schedulingGroup` without
    /// `podGroupName`), named for the message: such a pod is never placed.
    pub unsupported: Option<String>,
    /// What the pod's PersistentVolumeClaims ask of a node.
    pub volumes: crate::volume::VolumeNeeds,
}

impl PlacementSpec {
    /// Whether the node selector and required affinity admit the node.
    pub fn matches_node(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
            && self
                .required_terms
                .as_ref()
                .is_none_or(|terms| terms.iter().any(|t| t.matches(name, labels)))
    }
}
