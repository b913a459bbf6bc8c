//! The plan: everything a session decided, for the binder to carry out.

use crate::job::PodGroupStatus;
use crate::queue::QueueStatus;
use std::sync::Arc;

/// The object a write is about: namespace, name and uid. The uid is part of it so that a write
/// meant for one pod never lands on a pod re-created under the same name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// `metadata.uid`.
    pub uid: Arc<str>,
}

impl ObjectRef {
    /// A reference to `namespace/name` with `uid`.
    pub fn new(namespace: &Arc<str>, name: &Arc<str>, uid: &Arc<str>) -> Self {
        ObjectRef {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: uid.clone(),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    /// `namespace/name`, as kubectl and the events name an object.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A pod to bind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Bind {
    /// The pod.
    pub pod: ObjectRef,
    /// Target node.
    pub node: Arc<str>,
    /// `namespace/name` of the job; binds of one committed gang are adjacent.
    pub job: Arc<str>,
}

/// A `PodScheduled=False` condition to set on a pending pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodConditionUpdate {
    /// The pod.
    pub pod: ObjectRef,
    /// `Unschedulable` or `QueueQuotaExceeded`.
    pub reason: String,
    /// Fit message.
    pub message: String,
}

/// A pending member to mark Failed (gang timeout).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodFailure {
    /// The pod.
    pub pod: ObjectRef,
    /// `GangScheduleTimeout`.
    pub reason: String,
    /// Names the PodGroup.
    pub message: String,
}

/// A bound pod to evict (`pods/eviction`), to make room for a preemptor.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Eviction {
    /// The pod.
    pub pod: ObjectRef,
    /// The node it frees.
    pub node: Arc<str>,
    /// `namespace/name` of the victim's job; evictions of one victim unit are adjacent.
    pub job: Arc<str>,
    /// `namespace/name` of the job it makes room for.
    pub preemptor: Arc<str>,
    /// `preempt` or `reclaim`.
    pub action: &'static str,
    /// A PodDisruptionBudget covers the pod, so the API server may refuse its eviction (429);
    /// an eviction no budget covers is never refused.
    pub budgeted: bool,
}

/// A pending pod's `status.nominatedNodeName` to set (or clear, with `node: None`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Nomination {
    /// The pod.
    pub pod: ObjectRef,
    /// The node held for it, or `None` to drop the nomination.
    pub node: Option<Arc<str>>,
}

/// A new PodGroup status.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodGroupStatusUpdate {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// The full new status.
    pub status: PodGroupStatus,
    /// A native `scheduling.k8s.io/v1alpha2` PodGroup: only its `PodGroupScheduled`
    /// condition is written ([`crate::NativeCondition::of`]).
    pub native: bool,
}

/// A new Queue status.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueueStatusUpdate {
    /// Queue name.
    pub name: Arc<str>,
    /// The full new status.
    pub status: QueueStatus,
}

/// The object an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventObject {
    /// A Pod.
    Pod,
    /// A PodGroup.
    PodGroup,
    /// A Queue (cluster-scoped: the event's namespace is empty).
    Queue,
    /// A native `scheduling.k8s.io/v1alpha2` PodGroup.
    NativePodGroup,
    /// The leader-election Lease: what is wrong with the scheduler itself (a kind the API
    /// server refuses to list to it).
    Lease,
}

/// An event to record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Event {
    /// Kind of the regarding object.
    pub object: EventObject,
    /// Its namespace.
    pub namespace: Arc<str>,
    /// Its name.
    pub name: Arc<str>,
    /// Its uid.
    pub uid: Arc<str>,
    /// `Normal` (false) or `Warning` (true).
    pub warning: bool,
    /// Reason (`Scheduled`, `FailedScheduling`, `Unschedulable`, ...).
    pub reason: String,
    /// Message.
    pub message: String,
}

/// Everything one session decided. Deterministic: the same snapshot, time and config give an
/// equal plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Binds, committed gang by committed gang.
    pub binds: Vec<Bind>,
    /// Pod conditions that changed.
    pub pod_conditions: Vec<PodConditionUpdate>,
    /// Pods to mark Failed.
    pub pod_failures: Vec<PodFailure>,
    /// Pods to evict, victim unit by victim unit.
    pub evictions: Vec<Eviction>,
    /// Nominations to set or drop.
    pub nominations: Vec<Nomination>,
    /// PodGroup statuses that changed.
    pub podgroups: Vec<PodGroupStatusUpdate>,
    /// Queue statuses that changed.
    pub queues: Vec<QueueStatusUpdate>,
    /// Events.
    pub events: Vec<Event>,
    /// Autoscaler requests to create (with their PodTemplates), and members to annotate.
    pub capacity_requests: Vec<crate::CapacityNeed>,
    /// Autoscaler requests to delete (with their PodTemplates).
    pub capacity_releases: Vec<crate::CapacityRelease>,
    /// Volume binder writes (claims annotated with their member's node, volumes pre-bound,
    /// selections undone), before the binds that wait for them.
    pub volume_writes: Vec<crate::VolumeWrite>,
    /// DRA claim allocations and reservations, written before the binds that need them (every
    /// member's of a gang before any member binds).
    pub claim_writes: Vec<crate::dra::ClaimWrite>,
    /// Claims to create for pods whose extended resources devices serve (KEP-5004), before
    /// their binds.
    pub extended_claims: Vec<crate::dra::ExtendedResourceClaim>,
    /// PodGroups whose consolidation holds changed (annotation `caldera.sh/consolidation`).
    pub move_holds: Vec<crate::MoveHoldWrite>,
}

impl Plan {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.binds.is_empty()
            && self.pod_conditions.is_empty()
            && self.pod_failures.is_empty()
            && self.evictions.is_empty()
            && self.nominations.is_empty()
            && self.podgroups.is_empty()
            && self.queues.is_empty()
            && self.events.is_empty()
            && self.capacity_requests.is_empty()
            && self.capacity_releases.is_empty()
            && self.volume_writes.is_empty()
            && self.claim_writes.is_empty()
            && self.extended_claims.is_empty()
            && self.move_holds.is_empty()
    }
}
