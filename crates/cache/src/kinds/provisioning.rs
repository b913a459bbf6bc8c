//! Autoscaler requests (`autoscaling.x-k8s.io` ProvisioningRequests) Caldera made, by
//! (namespace, name); the ones the API server refused; and, at snapshot time, each job's
//! request and the nodes booked for it.

use super::{namespaced_or_empty, Indexed};
use crate::error::Result;
use crate::index::{key_of, Booking, ClusterIndex, SnapshotOptions};
use crate::provisioning::{request_info, RequestInfo};
use caldera_api::ProvisioningRequest;
use caldera_model::{
    CapacityNeed, CapacityRelease, CapacityRequest, CapacityState, ConsumingPod, PlacementSpec,
    Resources, Snapshot, Task,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, PoisonError};

/// Requests Caldera did not make are ignored.
impl Indexed for ProvisioningRequest {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        Some(namespaced_or_empty(&self.metadata))
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        if let Some(info) = request_info(self) {
            let (namespace, name) = namespaced_or_empty(&self.metadata);
            index.requests.insert(key_of(namespace, name), info);
        }
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index.requests.remove(&key_of(namespace, name));
    }

    fn clear(index: &mut ClusterIndex) {
        index.requests.clear();
    }
}

impl ClusterIndex {
    /// Records that the API server refused to make `need` (422), `why` naming the fields:
    /// until a later write of the PodGroup's requests succeeds, its job has this request in
    /// state `Failed` with that message, so the PodGroup's condition says why, and the next
    /// attempt (with whatever changed) waits for the request back-off instead of being sent
    /// again every session.
    pub fn refuse_provisioning_request(
        &mut self,
        need: &CapacityNeed,
        why: &str,
        now: caldera_model::Time,
    ) {
        let info = RequestInfo {
            podgroup: need.podgroup.clone(),
            podgroup_uid: need.podgroup_uid.clone(),
            request: CapacityRequest {
                namespace: need.namespace.clone(),
                name: need.name.clone(),
                attempt: need.attempt,
                created: now,
                state: CapacityState::Failed,
                since: now,
                message: format!("refused by the API server as invalid: {why}"),
                pod_sets: u32::try_from(need.pod_sets.len()).unwrap_or(u32::MAX),
            },
        };
        self.refused_requests
            .insert(key_of(&need.namespace, &need.podgroup), info);
    }

    /// Forgets the refusal recorded for the PodGroup `namespace/podgroup` (a write of its
    /// requests went through).
    pub fn forget_refused_provisioning_request(&mut self, namespace: &str, podgroup: &str) {
        self.refused_requests.remove(&key_of(namespace, podgroup));
    }

    /// Caldera's requests, by namespace and name.
    pub fn provisioning_requests(&self) -> impl Iterator<Item = &RequestInfo> {
        self.requests.values()
    }

    /// Gives each job its request (the newest one made for its PodGroup, by uid); every other
    /// request of Caldera's is stale. Then books nodes for provisioned requests.
    pub(crate) fn attach_requests(&self, snap: &mut Snapshot, opts: &SnapshotOptions) {
        let Some(policy) = &opts.provisioning else {
            return;
        };
        snap.provisioning = Some(policy.clone());
        let mut by_uid: HashMap<&str, usize> = HashMap::new();
        for (i, job) in snap.jobs.iter().enumerate() {
            if job.has_podgroup() {
                by_uid.insert(&job.uid, i);
            }
        }
        let mut owner: Vec<(usize, &RequestInfo)> = Vec::new();
        for info in self.requests.values() {
            match by_uid.get(&*info.podgroup_uid) {
                Some(&j) if *snap.jobs[j].namespace == *info.request.namespace => {
                    owner.push((j, info))
                }
                _ => snap.stale_capacity.push(CapacityRelease {
                    namespace: info.request.namespace.clone(),
                    podgroup: info.podgroup.clone(),
                    name: info.request.name.clone(),
                    pods: consuming(snap, &info.request.namespace, &info.request.name),
                    pod_sets: info.request.pod_sets,
                    why: format!("its PodGroup {} is gone", info.podgroup),
                }),
            }
        }
        let refused: Vec<(usize, &RequestInfo)> = self
            .refused_requests
            .values()
            .filter_map(|info| {
                let &j = by_uid.get(&*info.podgroup_uid)?;
                (*snap.jobs[j].namespace == *info.request.namespace).then_some((j, info))
            })
            .collect();
        // Newest attempt (then newest, then last name) wins; the others are stale.
        owner.sort_by(|a, b| {
            let (ra, rb) = (&a.1.request, &b.1.request);
            a.0.cmp(&b.0)
                .then(rb.attempt.cmp(&ra.attempt))
                .then(rb.created.cmp(&ra.created))
                .then(rb.name.cmp(&ra.name))
        });
        let mut last = None;
        for (j, info) in owner {
            if last == Some(j) {
                snap.stale_capacity.push(CapacityRelease {
                    namespace: info.request.namespace.clone(),
                    podgroup: info.podgroup.clone(),
                    name: info.request.name.clone(),
                    pods: consuming(snap, &info.request.namespace, &info.request.name),
                    pod_sets: info.request.pod_sets,
                    why: format!("PodGroup {} has a newer request", snap.jobs[j].id),
                });
                continue;
            }
            last = Some(j);
            snap.jobs[j].capacity = Some(info.request.clone());
        }
        // A refused request stands for an attempt no watch shows: the job's, unless a request
        // of that attempt or a later one exists.
        for (j, info) in refused {
            let job = &mut snap.jobs[j];
            if job
                .capacity
                .as_ref()
                .is_none_or(|c| c.attempt < info.request.attempt)
            {
                job.capacity = Some(info.request.clone());
            }
        }
        let mut kept = self.bookings.lock().unwrap_or_else(PoisonError::into_inner);
        book_nodes(snap, &mut kept);
    }
}

/// Books nodes for jobs whose request is live (accepted or provisioned): an autoscaler adds
/// the nodes before it marks the request provisioned, so nodes appear while it is only
/// accepted and must already be held (the session places a gang on them only once its request
/// is provisioned).
///
/// **A provisioned request's bookings stick** (`kept`, carried from one snapshot to the
/// next): once a node is booked for it, it stays that gang's for as long as the request is the
/// gang's, provisioned, and the gang still has members waiting — no other request takes it,
/// whatever the order in which later nodes and request states are seen. An accepted request's
/// bookings are tentative, derived afresh each time (the nodes it holds may turn out to be
/// another request's, which the autoscaler then marks provisioned first).
///
/// Derivation: first every kept booking is honoured; then provisioned requests, then accepted
/// ones, each in order of the request's state change (then job id), take Ready, schedulable
/// nodes created after their request was, that their first pending member may go to and that
/// nobody has booked, oldest first, until their idle resources hold the members they still
/// lack; the nodes a provisioned request takes are kept. An autoscaler does not say which
/// nodes it added for which request (cluster-autoscaler writes no such label); nodes that
/// appeared after the request are the ones that can be its. Creation times have whole seconds,
/// so "after" is strict: a node from the request's own second may be older than the request
/// (the cluster's nodes, when a gang asks at once), and booking it would take an old node from
/// everyone else and let the gang spread over it. An autoscaler's node comes seconds later; one
/// from the same second is merely not booked. After a restart `kept` starts empty and the same
/// derivation rebuilds it from the cluster as it is then (deterministic: state-change times,
/// job ids, creation times, node names).
fn book_nodes(snap: &mut Snapshot, kept: &mut BTreeMap<Arc<str>, Booking>) {
    use caldera_model::CapacityState;
    let mut live: Vec<usize> = (0..snap.jobs.len())
        .filter(|&j| {
            snap.jobs[j]
                .capacity
                .as_ref()
                .is_some_and(|c| c.state.live())
        })
        .collect();
    // What each live job still lacks: the requests of its first pending members.
    let mut lacking: HashMap<usize, (Resources, Arc<PlacementSpec>)> = HashMap::new();
    for &j in &live {
        let job = &snap.jobs[j];
        let pending: Vec<&Task> = job
            .tasks
            .iter()
            .map(|&t| &snap.tasks[t])
            .filter(|t| t.schedulable_pending())
            .collect();
        let ready = job
            .tasks
            .iter()
            .filter(|&&t| snap.tasks[t].status.is_ready())
            .count() as u32;
        let count = job.min_member.saturating_sub(ready).max(1) as usize;
        let Some(first) = pending.first() else {
            continue;
        };
        let mut need = Resources::new();
        for t in pending.iter().take(count) {
            need.add(&t.request);
        }
        lacking.insert(j, (need, first.spec.clone()));
    }
    // Kept bookings hold while their node exists, their request is still the job's and
    // provisioned, and the job still waits for members.
    let provisioned: HashMap<&str, (usize, &str)> = live
        .iter()
        .filter(|&&j| lacking.contains_key(&j))
        .filter_map(|&j| {
            let job = &snap.jobs[j];
            let c = job.capacity.as_ref()?;
            (c.state == CapacityState::Provisioned).then_some((&*job.id, (j, &*c.name)))
        })
        .collect();
    let by_name: HashMap<Arc<str>, usize> = snap
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    kept.retain(|node, b| {
        by_name.contains_key(node)
            && provisioned
                .get(&*b.job)
                .is_some_and(|(_, request)| *request == &*b.request)
    });
    let mut have: HashMap<usize, Resources> = HashMap::new();
    for (node, b) in kept.iter() {
        let (Some(&n), Some(&(j, _))) = (by_name.get(node), provisioned.get(&*b.job)) else {
            continue;
        };
        snap.nodes[n].booked_for = Some(b.job.clone());
        have.entry(j).or_default().add(&snap.nodes[n].idle());
    }
    drop(by_name);
    drop(provisioned);
    // Provisioned requests first: their nodes exist (the autoscaler says so); an accepted
    // request's are still coming, and a node that appears meanwhile is more likely the
    // provisioned one's.
    live.sort_by_key(|&j| {
        let c = snap.jobs[j].capacity.as_ref();
        let waiting = c.is_none_or(|c| c.state != CapacityState::Provisioned);
        (waiting, c.map(|c| c.since), j)
    });
    let mut order: Vec<usize> = (0..snap.nodes.len()).collect();
    order.sort_by(|&a, &b| {
        let (na, nb) = (&snap.nodes[a], &snap.nodes[b]);
        na.created.cmp(&nb.created).then(na.name.cmp(&nb.name))
    });
    for j in live {
        let job = &snap.jobs[j];
        let Some(c) = job.capacity.as_ref() else {
            continue;
        };
        let Some((need, spec)) = lacking.get(&j) else {
            continue;
        };
        let (asked, sticks, request) = (
            c.created,
            c.state == CapacityState::Provisioned,
            c.name.clone(),
        );
        let id = job.id.clone();
        let mut have = have.remove(&j).unwrap_or_default();
        for &n in &order {
            if need.fits_in(&have) {
                break;
            }
            let node = &snap.nodes[n];
            let usable = node.ready
                && !node.unschedulable
                && node.booked_for.is_none()
                && node.created > asked
                && spec.matches_node(&node.name, &node.labels)
                && caldera_model::selector::untolerated_taint(&node.taints, &spec.tolerations)
                    .is_none();
            if usable {
                have.add(&node.idle());
                if sticks {
                    kept.insert(
                        node.name.clone(),
                        Booking {
                            job: id.clone(),
                            request: request.clone(),
                        },
                    );
                }
                snap.nodes[n].booked_for = Some(id.clone());
            }
        }
    }
}

/// Our pods not bound yet (members, and pods waiting for their PodGroup) annotated to consume
/// the request `namespace/name`.
fn consuming(snap: &Snapshot, namespace: &str, name: &str) -> Vec<ConsumingPod> {
    let of = |ns: &Arc<str>, consumes: &Option<Arc<str>>| {
        **ns == *namespace && consumes.as_deref() == Some(name)
    };
    let members = snap
        .tasks
        .iter()
        .filter(|t| t.node.is_none() && of(&t.namespace, &t.consumes))
        .map(|t| (&t.namespace, &t.name, &t.uid));
    let waiting = snap
        .waiting
        .iter()
        .filter(|w| of(&w.namespace, &w.consumes))
        .map(|w| (&w.namespace, &w.name, &w.uid));
    members
        .chain(waiting)
        .map(|(namespace, name, uid)| ConsumingPod {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: uid.clone(),
        })
        .collect()
}
