//! Status writes (the [`crate::Class::Report`] class): what users and controllers read about an
//! object, coalesced per object while it waits.
//!
//! Each [`StatusWrite`] names the object it writes ([`StatusWrite::target`]); the
//! [`ReportQueue`] holds at most one write per target. A newer write to a target replaces the
//! one waiting (it says everything the older one would have: a PodGroup's status is written
//! once, with its final state), and keeps the older one's place in line. Writes to one target
//! are sent one at a time: a write that arrives while the previous one is in flight waits for
//! it, so the newest always lands last.
//!
//! To add a kind of status write: a variant here, its target and request in
//! [`StatusWrite::target`] and [`StatusWrite::send`] (the request itself in `writes.rs`), and a
//! [`WriteKind`] for its metric label.

use crate::capacity::CapacityWrites;
use crate::error::{Result, WriteKind};
use crate::{writes, Inner, Target};
use caldera_model::{
    PodConditionUpdate, PodFailure, PodGroupStatusUpdate, QueueStatus, QueueStatusUpdate, Time,
};
use std::collections::{HashMap, HashSet, VecDeque};
use tokio_util::task::task_tracker::TaskTrackerToken;

/// A status write.
#[derive(Debug, Clone)]
pub(crate) enum StatusWrite {
    /// `PodScheduled=False`; `true`: the pod already says so (its transition time stays).
    Condition(PodConditionUpdate, bool),
    /// Phase Failed (gang timeout).
    Failure(PodFailure),
    /// A PodGroup's status.
    PodGroup(PodGroupStatusUpdate),
    /// A Queue's status, with the status it had (for the merge patch); boxed, as two statuses
    /// with their usage records would make every write this large.
    Queue(Box<(QueueStatusUpdate, Option<QueueStatus>)>),
    /// A preemptor's `status.nominatedNodeName`, set or cleared.
    Nomination(caldera_model::Nomination),
    /// A PodGroup's autoscaler requests (`capacity.rs`): several requests, in order.
    Capacity(CapacityWrites),
    /// A PodGroup's consolidation holds (annotation `caldera.sh/consolidation`).
    MoveHolds(caldera_model::MoveHoldWrite),
    /// An object one of Caldera's controllers keeps (`owned.rs`).
    Object(crate::owned::ObjectWrite),
}

/// `(kind, key)`: what coalesces.
pub(crate) type ReportKey = (WriteKind, String);

/// The key of a pod's `PodScheduled=False` (or Failed) status write.
pub(crate) fn pod_status_key(namespace: &str, name: &str) -> ReportKey {
    (WriteKind::PodStatus, format!("{namespace}/{name}"))
}

impl StatusWrite {
    /// The object written, and the kind of write.
    pub fn target(&self) -> (Target, WriteKind) {
        match self {
            StatusWrite::Condition(c, _) => (
                Target::Pod {
                    namespace: c.pod.namespace.clone(),
                    name: c.pod.name.clone(),
                },
                WriteKind::PodStatus,
            ),
            StatusWrite::Failure(f) => (
                Target::Pod {
                    namespace: f.pod.namespace.clone(),
                    name: f.pod.name.clone(),
                },
                WriteKind::PodStatus,
            ),
            StatusWrite::PodGroup(u) if u.native => (
                Target::NativePodGroup {
                    namespace: u.namespace.clone(),
                    name: u.name.clone(),
                },
                WriteKind::PodGroupStatus,
            ),
            StatusWrite::PodGroup(u) => (
                Target::PodGroup {
                    namespace: u.namespace.clone(),
                    name: u.name.clone(),
                },
                WriteKind::PodGroupStatus,
            ),
            StatusWrite::Queue(q) => (
                Target::Queue {
                    name: q.0.name.clone(),
                },
                WriteKind::QueueStatus,
            ),
            StatusWrite::Nomination(n) => (
                Target::Pod {
                    namespace: n.pod.namespace.clone(),
                    name: n.pod.name.clone(),
                },
                WriteKind::Nomination,
            ),
            StatusWrite::Capacity(c) => (
                Target::Capacity {
                    namespace: c.namespace.clone(),
                    podgroup: c.podgroup.clone(),
                },
                WriteKind::ProvisioningRequest,
            ),
            StatusWrite::MoveHolds(w) => (
                Target::PodGroup {
                    namespace: w.namespace.clone(),
                    name: w.name.clone(),
                },
                WriteKind::ConsolidationHolds,
            ),
            StatusWrite::Object(w) => (
                Target::Object {
                    namespace: w.namespace.clone(),
                    name: w.name.clone(),
                },
                w.write_kind(),
            ),
        }
    }

    /// What to send instead of this waiting write when `newer` comes for the same target:
    /// `newer` (it says everything this one would), except for autoscaler writes, whose
    /// operations are appended in order (a deleted request must still be deleted).
    pub fn coalesce(self, newer: StatusWrite) -> StatusWrite {
        match (self, newer) {
            (StatusWrite::Capacity(mut waiting), StatusWrite::Capacity(newer)) => {
                waiting.absorb(newer);
                StatusWrite::Capacity(waiting)
            }
            (_, newer) => newer,
        }
    }

    /// Sends it, taking a token of the client's bucket for each request (and of the share for
    /// each after the first, see [`Inner::follower_token`]); the object's new resourceVersion.
    pub async fn send(&self, inner: &Inner, now: Time, epoch: u64) -> Result<Option<String>> {
        let (_, kind) = self.target();
        if let StatusWrite::Capacity(c) = self {
            return c.send(inner, epoch).await;
        }
        inner.limiter.acquire().await;
        inner.observer.request(kind);
        let client = &inner.client;
        let fm = inner.options.field_manager.as_str();
        match self {
            StatusWrite::Condition(c, keep) => {
                writes::pod_condition(client, fm, c, now, *keep).await
            }
            StatusWrite::Failure(f) => writes::pod_failure(client, fm, f, now).await,
            StatusWrite::PodGroup(u) if u.native => {
                writes::native_podgroup_status(client, fm, &u.namespace, &u.name, &u.status).await
            }
            StatusWrite::PodGroup(u) => {
                writes::podgroup_status(client, fm, &u.namespace, &u.name, &u.status).await
            }
            StatusWrite::Queue(q) => {
                let (u, old) = &**q;
                writes::queue_status(client, fm, &u.name, &u.status, old.as_ref()).await
            }
            StatusWrite::Nomination(n) => writes::nominate(client, fm, n).await,
            StatusWrite::MoveHolds(w) => writes::move_holds(client, fm, w).await,
            StatusWrite::Object(w) => w.send(client, fm).await,
            StatusWrite::Capacity(_) => Ok(None),
        }
    }
}

/// A write waiting in the [`ReportQueue`].
#[derive(Debug)]
pub(crate) struct Waiting {
    pub write: StatusWrite,
    /// The plan's time (transition times are written with it).
    pub now: Time,
    /// Keeps [`crate::Binder::drain`] waiting until the write is sent or given up.
    pub _pending: Option<TaskTrackerToken>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct ReportQueue {
    /// Targets in the order their (oldest still waiting) write arrived.
    order: VecDeque<ReportKey>,
    waiting: HashMap<ReportKey, Waiting>,
    in_flight: HashSet<ReportKey>,
}

impl ReportQueue {
    /// Queues `w`; `true` when it replaced a waiting write to the same target.
    pub fn push(&mut self, w: Waiting) -> bool {
        let (target, kind) = w.write.target();
        let key = (kind, target.key());
        match self.waiting.remove(&key) {
            Some(old) => {
                let write = old.write.coalesce(w.write);
                self.waiting.insert(key, Waiting { write, ..w });
                true
            }
            None => {
                self.waiting.insert(key.clone(), w);
                self.order.push_back(key);
                false
            }
        }
    }

    /// Drops the write waiting for `key`, if any (a bind of the pod makes its waiting
    /// `PodScheduled=False` wrong: the server sets `PodScheduled=True` when it binds).
    pub fn cancel(&mut self, key: &ReportKey) -> Option<Waiting> {
        let w = self.waiting.remove(key)?;
        self.order.retain(|k| k != key);
        Some(w)
    }

    /// Writes waiting (not counting those in flight).
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether a write to `key` waits.
    pub fn is_waiting(&self, key: &ReportKey) -> bool {
        self.waiting.contains_key(key)
    }

    /// The oldest waiting write whose target has no write in flight; it is in flight from now
    /// until [`ReportQueue::done`].
    pub fn take(&mut self) -> Option<(ReportKey, Waiting)> {
        let i = self
            .order
            .iter()
            .position(|k| !self.in_flight.contains(k))?;
        let key = self.order.remove(i)?;
        let w = self.waiting.remove(&key)?;
        self.in_flight.insert(key.clone());
        Some((key, w))
    }

    /// The oldest nomination waiting and not in flight, taken as [`ReportQueue::take`] would.
    pub fn take_nomination(&mut self) -> Option<(ReportKey, Waiting)> {
        let i = self
            .order
            .iter()
            .position(|k| k.0 == WriteKind::Nomination && !self.in_flight.contains(k))?;
        let key = self.order.remove(i)?;
        let w = self.waiting.remove(&key)?;
        self.in_flight.insert(key.clone());
        Some((key, w))
    }

    /// Whether a write to `key` is in flight.
    pub fn in_flight(&self, key: &ReportKey) -> bool {
        self.in_flight.contains(key)
    }

    /// Whether a write could be taken now.
    pub fn has_ready(&self) -> bool {
        self.order.iter().any(|k| !self.in_flight.contains(k))
    }

    /// The write to `key` taken last is answered (or given up).
    pub fn done(&mut self, key: &ReportKey) {
        self.in_flight.remove(key);
    }

    /// Empties the queue (writes in flight finish on their own), returning the targets of the
    /// writes dropped.
    pub fn clear(&mut self) -> Vec<Target> {
        self.order.clear();
        self.waiting
            .drain()
            .map(|(_, w)| w.write.target().0)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_model::{PodGroupPhase, PodGroupStatus};

    fn pg(name: &str, phase: PodGroupPhase) -> Waiting {
        Waiting {
            write: StatusWrite::PodGroup(PodGroupStatusUpdate {
                namespace: "ns".into(),
                name: name.into(),
                status: PodGroupStatus {
                    phase,
                    conditions: Vec::new(),
                    running: 0,
                    succeeded: 0,
                    failed: 0,
                },
                native: false,
            }),
            now: Time(0),
            _pending: None,
        }
    }

    fn phase(w: &Waiting) -> Option<PodGroupPhase> {
        match &w.write {
            StatusWrite::PodGroup(u) => Some(u.status.phase),
            _ => None,
        }
    }

    #[test]
    fn a_newer_write_replaces_the_waiting_one_in_its_place() {
        let mut q = ReportQueue::default();
        assert!(!q.push(pg("a", PodGroupPhase::Pending)));
        assert!(!q.push(pg("b", PodGroupPhase::Pending)));
        assert!(q.push(pg("a", PodGroupPhase::Running)));
        assert_eq!(q.len(), 2);
        let (key, first) = q.take().unwrap();
        assert_eq!(key.1, "ns/a");
        assert_eq!(
            phase(&first),
            Some(PodGroupPhase::Running),
            "only the final state"
        );
        assert_eq!(q.take().map(|(k, _)| k.1), Some("ns/b".to_string()));
        assert!(q.take().is_none());
    }

    fn nomination(name: &str) -> Waiting {
        Waiting {
            write: StatusWrite::Nomination(caldera_model::Nomination {
                pod: caldera_model::ObjectRef {
                    namespace: "ns".into(),
                    name: name.into(),
                    uid: "u".into(),
                },
                node: Some("n1".into()),
            }),
            now: Time(0),
            _pending: None,
        }
    }

    #[test]
    fn a_nomination_is_taken_ahead_of_older_writes_and_only_once() {
        let mut q = ReportQueue::default();
        q.push(pg("a", PodGroupPhase::Pending));
        q.push(nomination("p1"));
        q.push(nomination("p2"));
        let (key, _) = q.take_nomination().unwrap();
        assert_eq!(key, (WriteKind::Nomination, "ns/p1".to_string()));
        q.push(nomination("p1"));
        assert_eq!(
            q.take_nomination().map(|(k, _)| k.1),
            Some("ns/p2".to_string()),
            "p1's newer nomination waits for the one in flight"
        );
        assert!(q.take_nomination().is_none());
        assert_eq!(q.take().map(|(k, _)| k.1), Some("ns/a".to_string()));
        q.done(&key);
        assert_eq!(
            q.take_nomination().map(|(k, _)| k.1),
            Some("ns/p1".to_string())
        );
    }

    #[test]
    fn a_cancelled_write_is_gone() {
        let mut q = ReportQueue::default();
        q.push(pg("a", PodGroupPhase::Pending));
        q.push(pg("b", PodGroupPhase::Pending));
        let key = (WriteKind::PodGroupStatus, "ns/a".to_string());
        assert!(q.cancel(&key).is_some());
        assert!(q.cancel(&key).is_none());
        assert_eq!(q.take().map(|(k, _)| k.1), Some("ns/b".to_string()));
        assert!(q.take().is_none());
    }

    #[test]
    fn a_target_with_a_write_in_flight_waits_for_it() {
        let mut q = ReportQueue::default();
        q.push(pg("a", PodGroupPhase::Inqueue));
        let (key, _) = q.take().unwrap();
        q.push(pg("a", PodGroupPhase::Running));
        assert!(!q.has_ready());
        assert!(
            q.take().is_none(),
            "a's newer write waits for the one in flight"
        );
        q.done(&key);
        assert_eq!(
            q.take().map(|(_, w)| phase(&w)),
            Some(Some(PodGroupPhase::Running))
        );
    }
}
