//! The overlay of work in flight: binds issued but not yet seen in the watch ("assumed"), and
//! status writes not yet seen. The next session's snapshot is taken through it, so a member
//! whose bind is in flight counts as placed on its node (no double placement) and a status
//! just written is not written again.
//!
//! An assumed bind is cleared when the watch shows the pod bound, finished or deleted, or when
//! the bind is answered 404/409 or given up. A status write is cleared when the watch
//! delivers the object at the resourceVersion the write returned, when the object is deleted,
//! or when the write fails (the next session then decides again).

use caldera_model::dra::{Allocation, Claim, ClaimWrite, Consumer, ExtendedResourceClaim};
use caldera_model::{PendingReason, PodGroupStatus, QueueStatus, Snapshot, TaskStatus};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long a confirmed write (or a bind the server accepted) may wait for the watch before
/// the overlay stops trusting it; only reached when the watch is broken for that long.
const CONFIRMED_TTL: Duration = Duration::from_secs(60);

/// How long a bind answered 404/409 stays assumed while the watch has not shown why (the pod
/// bound elsewhere, or gone). Keeping it meanwhile stops the next session from placing the
/// pod again before the watch catches up.
const SETTLED_TTL: Duration = Duration::from_secs(10);

/// The kinds of object Caldera writes the status of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    Pod,
    PodGroup,
    Queue,
}

/// `(kind, namespace/name or name)`.
pub(crate) type ObjKey = (Kind, String);

/// A bind in flight.
#[derive(Debug, Clone)]
pub(crate) struct Assumed {
    pub node: Arc<str>,
    /// When the server accepted the bind (the watch should follow shortly).
    pub bound_at: Option<Instant>,
    /// When the server answered 404/409 (the watch should show why shortly).
    pub settled_at: Option<Instant>,
}

/// What a status write said.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Written {
    PodCondition(PendingReason),
    PodFailed,
    PodGroup(PodGroupStatus),
    Queue(QueueStatus),
}

#[derive(Debug, Clone)]
struct PendingWrite {
    content: Written,
    /// The resourceVersion the write returned; `None` while in flight.
    resource_version: Option<String>,
    confirmed_at: Option<Instant>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    assumed: HashMap<Arc<str>, Assumed>,
    writes: HashMap<ObjKey, PendingWrite>,
    /// Evictions sent, by pod `namespace/name`: the victim counts as terminating until the
    /// watch shows it so (or the eviction fails).
    evicting: HashMap<String, Instant>,
    /// Nominations sent, by pod `namespace/name`: the node (or `None`: cleared).
    nominating: HashMap<String, (Option<Arc<str>>, Instant)>,
    /// DRA claim writes sent, by claim `namespace/name`: laid over the snapshot's claim (its
    /// allocation, its new users) until the watch shows them, so no device is given twice.
    claims: HashMap<String, (ClaimWrite, Instant)>,
    /// Claims of the extended-resource bridge being made, by pod uid: stand-ins in the
    /// snapshot until the watch shows a claim the pod owns.
    extended: HashMap<Arc<str>, (ExtendedResourceClaim, Instant)>,
}

impl Overlay {
    pub fn assume(&mut self, uid: Arc<str>, node: Arc<str>) {
        self.assumed.insert(
            uid,
            Assumed {
                node,
                bound_at: None,
                settled_at: None,
            },
        );
    }

    pub fn is_assumed(&self, uid: &str) -> bool {
        self.assumed.contains_key(uid)
    }

    pub fn assumed_len(&self) -> usize {
        self.assumed.len()
    }

    pub fn bind_accepted(&mut self, uid: &str) {
        if let Some(a) = self.assumed.get_mut(uid) {
            a.bound_at = Some(Instant::now());
        }
    }

    /// The bind was answered 404/409: the pod is bound elsewhere or gone, which the watch will
    /// show; until then (at most [`SETTLED_TTL`]) it stays where it is.
    pub fn bind_settled(&mut self, uid: &str) {
        if let Some(a) = self.assumed.get_mut(uid) {
            a.settled_at = Some(Instant::now());
        }
    }

    pub fn forget_bind(&mut self, uid: &str) {
        self.assumed.remove(uid);
    }

    /// Keeps only the assumed binds `keep` says yes to.
    pub fn retain_assumed(&mut self, mut keep: impl FnMut(&str) -> bool) {
        self.assumed.retain(|uid, _| keep(uid));
    }

    pub fn write_started(&mut self, key: ObjKey, content: Written) {
        self.writes.insert(
            key,
            PendingWrite {
                content,
                resource_version: None,
                confirmed_at: None,
            },
        );
    }

    /// The write to `key` succeeded at `rv`; `seen` is the resourceVersion the watch has
    /// already delivered for it (the watch may have been faster than the response).
    pub fn write_done(&mut self, key: &ObjKey, rv: Option<&str>, seen: Option<&str>) {
        if rv.is_some() && rv == seen {
            self.writes.remove(key);
            return;
        }
        if let Some(w) = self.writes.get_mut(key) {
            w.resource_version = rv.map(str::to_string);
            w.confirmed_at = Some(Instant::now());
        }
    }

    pub fn write_failed(&mut self, key: &ObjKey) {
        self.writes.remove(key);
        if key.0 == Kind::Pod {
            self.evicting.remove(&key.1);
            self.nominating.remove(&key.1);
        }
    }

    /// An eviction of pod `key` (`namespace/name`) is about to be sent.
    /// A claim write is about to be sent.
    pub fn claim_written(&mut self, w: ClaimWrite) {
        self.claims.insert(w.key(), (w, Instant::now()));
    }

    /// The bridge's claim for a pod is about to be made.
    pub fn extended_claim(&mut self, e: ExtendedResourceClaim) {
        self.extended.insert(e.pod_uid.clone(), (e, Instant::now()));
    }

    /// A claim write of a gang that did not bind: nothing of it holds.
    pub fn forget_claim(&mut self, w: &ClaimWrite) {
        self.claims.remove(&w.key());
    }

    /// The bridge's claim for the pod `pod_uid` was not made.
    pub fn forget_extended(&mut self, pod_uid: &str) {
        self.extended.remove(pod_uid);
    }

    /// Lays the claim writes in flight over the snapshot's claims; forgets those the watch
    /// shows done, and those whose claim is gone.
    fn apply_claims(&mut self, snap: &mut Snapshot) {
        let claims = &mut snap.dra.claims;
        self.claims.retain(|_, (w, _)| {
            let Some(i) = claims
                .binary_search_by(|c| (&*c.namespace, &*c.name).cmp(&(&*w.namespace, &*w.name)))
                .ok()
            else {
                return false;
            };
            let c = &mut claims[i];
            let users_in = w.reserved_for.iter().all(|u| c.reserved_for_pod(&u.uid));
            if c.allocation.is_some() && users_in {
                return false;
            }
            if c.allocation.is_none() && w.allocate {
                c.allocation = Some(Allocation {
                    devices: w.devices.clone(),
                    config: w.config.clone(),
                    node_selector: w.node_selector.clone(),
                });
            }
            for u in &w.reserved_for {
                if !c.reserved_for.iter().any(|r| r.uid == u.uid) {
                    c.reserved_for.push(u.clone());
                }
            }
            true
        });
        self.extended.retain(|pod_uid, (e, _)| {
            let made = claims.iter().any(|c| {
                c.owner.as_ref().is_some_and(|(_, u)| u == pod_uid) && c.allocation.is_some()
            });
            if made {
                return false;
            }
            let stand_in = Claim {
                namespace: e.namespace.clone(),
                name: format!("{}-extended-resources-", e.pod).into(),
                uid: format!("{}/extended", e.pod_uid).into(),
                requests: Vec::new(),
                constraints: Vec::new(),
                config: Vec::new(),
                allocation: Some(Allocation {
                    devices: e.devices.clone(),
                    config: e.config.clone(),
                    node_selector: e.node_selector.clone(),
                }),
                reserved_for: vec![Consumer {
                    resource: "pods".into(),
                    name: e.pod.clone(),
                    uid: e.pod_uid.clone(),
                }],
                deleting: false,
                owner: Some(("Pod".into(), e.pod_uid.clone())),
                unsupported: None,
            };
            let at = claims
                .binary_search_by(|c| {
                    (&*c.namespace, &*c.name).cmp(&(&*stand_in.namespace, &*stand_in.name))
                })
                .unwrap_or_else(|i| i);
            claims.insert(at, stand_in);
            true
        });
    }

    pub fn evicting(&mut self, key: String) {
        self.evicting.insert(key, Instant::now());
    }

    /// A nomination of pod `key` (`namespace/name`) is about to be sent.
    pub fn nominating(&mut self, key: String, node: Option<Arc<str>>) {
        self.nominating.insert(key, (node, Instant::now()));
    }

    /// The watch delivered `key` at `rv`.
    pub fn seen(&mut self, key: &ObjKey, rv: Option<&str>) {
        let caught_up = self
            .writes
            .get(key)
            .is_some_and(|w| w.resource_version.is_some() && w.resource_version.as_deref() == rv);
        if caught_up {
            self.writes.remove(key);
        }
    }

    /// The object is gone.
    pub fn deleted(&mut self, key: &ObjKey) {
        self.writes.remove(key);
    }

    /// Forgets everything (a new leadership term starts from the caches).
    pub fn clear(&mut self) {
        self.assumed.clear();
        self.writes.clear();
        self.evicting.clear();
        self.nominating.clear();
        self.claims.clear();
        self.extended.clear();
    }

    /// Drops confirmed entries the watch has not caught up with for too long.
    fn expire(&mut self) {
        let stale = |t: Option<Instant>, ttl| t.is_some_and(|t: Instant| t.elapsed() > ttl);
        self.assumed
            .retain(|_, a| !stale(a.bound_at, CONFIRMED_TTL) && !stale(a.settled_at, SETTLED_TTL));
        self.writes
            .retain(|_, w| !stale(w.confirmed_at, CONFIRMED_TTL));
        self.evicting.retain(|_, t| t.elapsed() <= CONFIRMED_TTL);
        self.nominating
            .retain(|_, (_, t)| t.elapsed() <= CONFIRMED_TTL);
        self.claims.retain(|_, (_, t)| t.elapsed() <= CONFIRMED_TTL);
        self.extended
            .retain(|_, (_, t)| t.elapsed() <= CONFIRMED_TTL);
    }

    /// Lays the overlay over `snap`. Assumed members whose node has vanished are forgotten
    /// (their bind, if it lands, shows up in the watch).
    pub fn apply(&mut self, snap: &mut Snapshot) {
        self.expire();
        if !self.claims.is_empty() || !self.extended.is_empty() {
            self.apply_claims(snap);
        }
        let mut vanished = Vec::new();
        for t in &mut snap.tasks {
            if let Some(a) = self.assumed.get(&t.uid) {
                if t.status == TaskStatus::Pending && t.node.is_none() {
                    match snap.nodes.binary_search_by(|n| (*n.name).cmp(&a.node)) {
                        Ok(ni) => {
                            t.status = TaskStatus::Binding;
                            t.node = Some(a.node.clone());
                            snap.nodes[ni].add_pod(&t.request, &t.spec.host_ports);
                            // Counted by inter-pod constraints too, as if bound.
                            snap.pods.push(caldera_model::PlacedPod {
                                namespace: t.namespace.clone(),
                                name: t.name.clone(),
                                labels: t.labels.clone(),
                                node: a.node.clone(),
                                terminating: false,
                                anti_affinity: t.spec.pods.anti_affinity.clone().into(),
                                scoring_terms: t.spec.pods.scoring_terms(),
                            });
                        }
                        Err(_) => vanished.push(t.uid.clone()),
                    }
                }
            }
            if !self.evicting.is_empty() || !self.nominating.is_empty() {
                let key = format!("{}/{}", t.namespace, t.name);
                if self.evicting.contains_key(&key) {
                    if matches!(t.status, TaskStatus::Bound | TaskStatus::Running) {
                        t.status = TaskStatus::Releasing;
                    } else {
                        // The watch shows it terminating, finished or gone.
                        self.evicting.remove(&key);
                    }
                }
                if let Some((node, _)) = self.nominating.get(&key) {
                    if t.status != TaskStatus::Pending || t.nominated == *node {
                        self.nominating.remove(&key);
                    } else {
                        t.nominated = node.clone();
                    }
                }
            }
            if self.writes.is_empty() {
                continue;
            }
            let key = (Kind::Pod, format!("{}/{}", t.namespace, t.name));
            match self.writes.get(&key).map(|w| &w.content) {
                Some(Written::PodCondition(r)) if t.status == TaskStatus::Pending => {
                    t.pending_reason = Some(std::sync::Arc::new(r.clone()));
                }
                Some(Written::PodFailed) if t.status == TaskStatus::Pending => {
                    t.status = TaskStatus::Failed;
                }
                _ => {}
            }
        }
        for uid in vanished {
            self.assumed.remove(&uid);
        }
        if self.writes.is_empty() {
            return;
        }
        for w in &mut snap.waiting {
            let key = (Kind::Pod, format!("{}/{}", w.namespace, w.name));
            if let Some(Written::PodCondition(r)) = self.writes.get(&key).map(|w| &w.content) {
                w.pending_reason = Some(std::sync::Arc::new(r.clone()));
            }
        }
        for j in &mut snap.jobs {
            if j.status.is_none() {
                continue;
            }
            let key = (Kind::PodGroup, j.id.to_string());
            if let Some(Written::PodGroup(s)) = self.writes.get(&key).map(|w| &w.content) {
                j.pending_since = s.pending_since();
                j.status = Some(s.clone());
            }
        }
        for q in &mut snap.queues {
            if !q.exists {
                continue;
            }
            let key = (Kind::Queue, q.name.to_string());
            if let Some(Written::Queue(s)) = self.writes.get(&key).map(|w| &w.content) {
                q.status = Some(s.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_model::{Job, Node, PlacementSpec, Queue, Resources, Task, Time};

    fn snapshot() -> Snapshot {
        let mut snap = Snapshot::default();
        snap.nodes
            .push(Node::new("n1", Resources::from_pairs([("cpu", 4000)])));
        snap.queues.push(Queue::new("default"));
        snap.jobs.push(Job {
            id: "ns/g".into(),
            namespace: "ns".into(),
            name: "g".into(),
            uid: "g-uid".into(),
            queue: "default".into(),
            min_member: 1,
            min_task_member: Default::default(),
            priority: 0,
            min_resources: None,
            timeout_seconds: None,
            topology: None,
            sub_group_policies: Vec::new(),
            unsupported: None,
            created: Time(0),
            pending_since: None,
            status: None,
            tasks: vec![0],
            autoscale: false,
            capacity: None,
            native: None,
            moves: Vec::new(),
            min_runtime: None,
        });
        snap.tasks.push(Task {
            uid: "p-uid".into(),
            namespace: "ns".into(),
            name: "p".into(),
            job: 0,
            status: TaskStatus::Pending,
            node: None,
            request: Resources::from_pairs([("cpu", 1000)]),
            priority: 0,
            role: None,
            gated: false,
            spec: Arc::new(PlacementSpec::default()),
            labels: Default::default(),
            created: Time(0),
            pending_reason: None,
            critical: false,
            nominated: None,
            never_preempts: false,
            started: Time(0),
            budget: None,
            consumes: None,
            volumes: None,
            claims: None,
            controller: None,
            no_consolidate: false,
        });
        snap
    }

    #[test]
    fn an_assumed_member_is_placed_and_its_node_charged() {
        let mut overlay = Overlay::default();
        overlay.assume("p-uid".into(), "n1".into());
        let mut snap = snapshot();
        overlay.apply(&mut snap);
        assert_eq!(snap.tasks[0].status, TaskStatus::Binding);
        assert_eq!(snap.tasks[0].node.as_deref(), Some("n1"));
        assert_eq!(snap.nodes[0].used.cpu, 1000);
        assert_eq!(snap.nodes[0].pod_count, 1);
    }

    fn dra_claim(name: &str) -> Claim {
        Claim {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("{name}-uid").into(),
            requests: vec![],
            constraints: vec![],
            config: vec![],
            allocation: None,
            reserved_for: vec![],
            deleting: false,
            owner: None,
            unsupported: None,
        }
    }

    fn claim_write(name: &str, pod: &str) -> ClaimWrite {
        ClaimWrite {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("{name}-uid").into(),
            allocate: true,
            devices: vec![caldera_model::dra::DeviceResult::whole(
                "gpu",
                "gpu.example.com",
                "n1",
                "gpu-0",
            )],
            config: vec![],
            node: Some("n1".into()),
            node_selector: None,
            reserved_for: vec![Consumer {
                resource: "pods".into(),
                name: pod.into(),
                uid: format!("{pod}-uid").into(),
            }],
        }
    }

    #[test]
    fn a_claim_write_in_flight_holds_its_devices_until_the_watch_shows_it() {
        let mut overlay = Overlay::default();
        overlay.claim_written(claim_write("gpu-a", "p"));
        let mut snap = snapshot();
        snap.dra.claims.push(dra_claim("gpu-a"));
        overlay.apply(&mut snap);
        let c = &snap.dra.claims[0];
        assert_eq!(c.allocation.as_ref().map(|a| a.devices.len()), Some(1));
        assert!(c.reserved_for_pod("p-uid"));
        // The watch shows it written: the overlay lets go.
        let mut snap = snapshot();
        let mut seen = dra_claim("gpu-a");
        seen.allocation = Some(Allocation::default());
        seen.reserved_for.push(Consumer {
            resource: "pods".into(),
            name: "p".into(),
            uid: "p-uid".into(),
        });
        snap.dra.claims.push(seen);
        overlay.apply(&mut snap);
        assert!(overlay.claims.is_empty());
        // A write given up holds nothing.
        overlay.claim_written(claim_write("gpu-b", "q"));
        overlay.forget_claim(&claim_write("gpu-b", "q"));
        let mut snap = snapshot();
        snap.dra.claims.push(dra_claim("gpu-b"));
        overlay.apply(&mut snap);
        assert_eq!(snap.dra.claims[0].allocation, None);
    }

    #[test]
    fn a_bridge_claim_being_made_stands_in_until_the_pod_owns_one() {
        let mut overlay = Overlay::default();
        let w = claim_write("unused", "legacy");
        overlay.extended_claim(ExtendedResourceClaim {
            namespace: "ns".into(),
            pod: "legacy".into(),
            pod_uid: "legacy-uid".into(),
            requests: vec![],
            devices: w.devices.clone(),
            config: vec![],
            node: Some("n1".into()),
            node_selector: None,
            mappings: vec![],
        });
        let mut snap = snapshot();
        snap.dra.claims.push(dra_claim("a"));
        snap.dra.claims.push(dra_claim("z"));
        overlay.apply(&mut snap);
        let names: Vec<&str> = snap.dra.claims.iter().map(|c| &*c.name).collect();
        assert_eq!(names, ["a", "legacy-extended-resources-", "z"]);
        assert!(snap.dra.claims[1].reserved_for_pod("legacy-uid"));
        let mut snap = snapshot();
        let mut made = dra_claim("legacy-extended-resources-x2b4c");
        made.owner = Some(("Pod".into(), "legacy-uid".into()));
        made.allocation = Some(Allocation::default());
        snap.dra.claims.push(made);
        overlay.apply(&mut snap);
        assert_eq!(snap.dra.claims.len(), 1);
        assert!(overlay.extended.is_empty());
    }

    #[test]
    fn an_assumed_member_on_a_vanished_node_is_forgotten() {
        let mut overlay = Overlay::default();
        overlay.assume("p-uid".into(), "gone".into());
        let mut snap = snapshot();
        overlay.apply(&mut snap);
        assert_eq!(snap.tasks[0].status, TaskStatus::Pending);
        assert!(!overlay.is_assumed("p-uid"));
    }

    #[test]
    fn a_written_condition_stands_until_the_watch_delivers_its_version() {
        let mut overlay = Overlay::default();
        let key = (Kind::Pod, "ns/p".to_string());
        let reason = PendingReason {
            reason: "Unschedulable".into(),
            message: "no".into(),
        };
        overlay.write_started(key.clone(), Written::PodCondition(reason.clone()));
        overlay.write_done(&key, Some("7"), Some("5"));
        overlay.seen(&key, Some("6"));
        let mut snap = snapshot();
        overlay.apply(&mut snap);
        assert_eq!(snap.tasks[0].pending_reason.as_deref(), Some(&reason));
        overlay.seen(&key, Some("7"));
        let mut snap = snapshot();
        overlay.apply(&mut snap);
        assert_eq!(snap.tasks[0].pending_reason, None);
    }

    #[test]
    fn a_write_the_watch_already_delivered_is_not_kept() {
        let mut overlay = Overlay::default();
        let key = (Kind::Queue, "default".to_string());
        overlay.write_started(key.clone(), Written::Queue(QueueStatus::default()));
        overlay.write_done(&key, Some("9"), Some("9"));
        assert!(overlay.writes.is_empty());
    }
}
