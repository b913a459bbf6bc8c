//! Queues as given by the cluster (weights, limits, state) and the status Caldera writes.

use crate::job::Condition;
use crate::resources::Resources;
use std::sync::Arc;

/// Counts of PodGroups by phase, and what the queue holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct QueueStatus {
    /// `Open` or `Closed` (kept as found).
    pub state: String,
    /// PodGroups Pending.
    pub pending: u32,
    /// PodGroups Inqueue.
    pub inqueue: u32,
    /// PodGroups Running.
    pub running: u32,
    /// PodGroups Completed.
    pub completed: u32,
    /// PodGroups Unknown.
    pub unknown: u32,
    /// Σ requests of the queue's members that hold a node.
    pub allocated: Resources,
    /// Caldera's conditions: `Schedulable` False while the queue is out of the queue tree (a
    /// cycle of parents, a parent that does not exist), so it holds no new work.
    pub conditions: Vec<Condition>,
}

/// A queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    /// Name (cluster-scoped).
    pub name: Arc<str>,
    /// `metadata.uid` (empty when unknown or implicit): what events about the queue regard.
    pub uid: Arc<str>,
    /// Weight, 1..65535.
    pub weight: u32,
    /// Hard ceiling; `None` means unlimited.
    pub capability: Option<Resources>,
    /// Reserved floor.
    pub guarantee: Resources,
    /// Explicit share, used instead of the weight split when set.
    pub deserved: Option<Resources>,
    /// May be reclaimed from.
    pub reclaimable: bool,
    /// Higher first.
    pub priority: i32,
    /// Closed queues admit nothing new.
    pub open: bool,
    /// Current status (`None` if the object has none yet, or the queue is implicit).
    pub status: Option<QueueStatus>,
    /// Whether a Queue object exists (the `default` queue may be implicit).
    pub exists: bool,
    /// `spec.parent`: the queue above this one in a hierarchy (`None`: a child of `root`).
    pub parent: Option<Arc<str>>,
    /// Resources other than cpu and memory that `spec.capability` names with amount 0
    /// (`capability` drops zero amounts): the capacity plugin bounds them at 0 rather than
    /// inheriting the parent's bound, as Volcano does.
    pub zero_capability: Vec<Arc<str>>,
}

impl Queue {
    /// An open queue with weight 1 and no limits.
    pub fn new(name: &str) -> Self {
        Queue {
            name: Arc::from(name),
            uid: Arc::from(""),
            weight: 1,
            capability: None,
            guarantee: Resources::new(),
            deserved: None,
            reclaimable: true,
            priority: 0,
            open: true,
            status: None,
            exists: true,
            parent: None,
            zero_capability: Vec::new(),
        }
    }
}
