//! Consolidation: what lets `consolidate` move a running pod, and the room held for the pod
//! its controller re-creates (see `caldera_session::consolidate`).

use crate::time::Time;
use std::sync::Arc;

/// Annotation on a pod, a PodGroup or a namespace: never moved by `consolidate`.
pub const NO_CONSOLIDATE: &str = "caldera.sh/no-consolidate";

/// Annotation Caldera writes on the PodGroup of a job it consolidated for: the room held for
/// the pods it moved ([`MoveHold`]s, JSON; `caldera_cache::consolidation` reads and writes it).
pub const HOLDS_ANNOTATION: &str = "caldera.sh/consolidation";

/// The controller that re-creates a pod once it is deleted (its controller owner reference
/// is one of the kinds that do).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Controller {
    /// `ReplicaSet`, `StatefulSet`, `Job`, …
    pub kind: Arc<str>,
    /// The owner's name.
    pub name: Arc<str>,
    /// The owner's uid.
    pub uid: Arc<str>,
    /// Which of the owner's pods this is, as far as its replacement shares it: the
    /// `pod-template-hash` label (ReplicaSet), the pod's name (StatefulSet: the replacement has
    /// the same name), the completion index (indexed Job); `None` when nothing tells its
    /// replacement apart from its siblings.
    pub slot: Option<Arc<str>>,
}

/// Room held at a node for the pod that replaces one `consolidate` moved: the next pending pod
/// of the same controller and slot goes there first. Persisted on the PodGroup of the job the
/// move made room for ([`HOLDS_ANNOTATION`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MoveHold {
    /// The controller's uid.
    pub owner: Arc<str>,
    /// The controller's slot of the moved pod ([`Controller::slot`]).
    pub slot: Option<Arc<str>>,
    /// The moved pod's namespace (its replacement is created there too; may differ from the
    /// job's).
    pub namespace: Arc<str>,
    /// The moved pod's name: while it terminates, the hold counts through it.
    pub pod: Arc<str>,
    /// The node held.
    pub node: Arc<str>,
    /// When the pod was moved (a pod of the slot created since and placed on the node used
    /// the hold).
    pub since: Time,
    /// When the hold lapses, used or not.
    pub until: Time,
}

impl MoveHold {
    /// Whether a pod of `controller` may take this hold.
    pub fn matches(&self, controller: &Controller) -> bool {
        *self.owner == *controller.uid && self.slot == controller.slot
    }
}

/// The holds to write on a PodGroup (empty: remove the annotation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MoveHoldWrite {
    /// PodGroup namespace.
    pub namespace: Arc<str>,
    /// PodGroup name.
    pub name: Arc<str>,
    /// PodGroup uid.
    pub uid: Arc<str>,
    /// The holds, sorted.
    pub holds: Vec<MoveHold>,
}

/// Controller owners that re-create a deleted pod: (API group, kind); the owner reference's
/// `apiVersion` must be of that group (a `Job` of another group is not a `batch` Job).
/// (A DaemonSet re-creates its pod on the same node, so moving one frees nothing.) A `batch`
/// Job re-creates an evicted pod without counting it against `backoffLimit` only when its
/// `podFailurePolicy` ignores `DisruptionTarget` (`caldera_cache::consolidation`).
pub const RECREATING_KINDS: [(&str, &str); 5] = [
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("batch", "Job"),
    ("", "ReplicationController"),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
];
