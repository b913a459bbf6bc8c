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
    /// Decayed usage, kept by the `fairshare` plugin (`None`: never recorded).
    pub usage: Option<QueueUsage>,
}

/// A queue's decayed usage as recorded at `at` (Queue `status.usage`).
///
/// Fractions are of the cluster's capacity, per resource, in millionths (so the model stays
/// exact and comparable). `decayed` is the exponentially weighted mean of the fraction held,
/// with the configured half-life; `held` is what the queue (its whole subtree) held at `at`,
/// and stands for what it holds until the next record. So the usage at any later time `t` is
/// `decayed·d + held·(1 − d)` with `d = 2^(−(t − at)/halfLife)`, and a record need only be
/// written when `held` changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct QueueUsage {
    /// When this record was made.
    pub at: crate::time::Time,
    /// Decayed mean fraction of the cluster held, per resource, in millionths (≤ 1,000,000).
    pub decayed: std::collections::BTreeMap<Arc<str>, u32>,
    /// Fraction of the cluster held at `at`, per resource, in millionths (≤ 1,000,000).
    pub held: std::collections::BTreeMap<Arc<str>, u32>,
}

/// One million: a whole cluster, in the millionths [`QueueUsage`] counts in.
pub const USAGE_SCALE: u32 = 1_000_000;

impl QueueUsage {
    /// The decayed fraction per resource at `now`, as fractions (0..=1), for a half-life of
    /// `half_life_ms` (> 0). `now` before `at` counts as `at`.
    pub fn decayed_at(
        &self,
        now: crate::time::Time,
        half_life_ms: i64,
    ) -> std::collections::BTreeMap<Arc<str>, f64> {
        let elapsed = now.millis_since(self.at).max(0) as f64;
        let keep = if half_life_ms > 0 {
            (-(elapsed / half_life_ms as f64)).exp2()
        } else {
            0.0
        };
        let scale = f64::from(USAGE_SCALE);
        let mut out = std::collections::BTreeMap::new();
        for name in self.decayed.keys().chain(self.held.keys()) {
            let old = f64::from(self.decayed.get(name).copied().unwrap_or(0)) / scale;
            let held = f64::from(self.held.get(name).copied().unwrap_or(0)) / scale;
            out.insert(
                name.clone(),
                (old * keep + held * (1.0 - keep)).clamp(0.0, 1.0),
            );
        }
        out
    }
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
