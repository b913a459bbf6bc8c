//! The session's working copy of the cluster, changed only through statements.

use crate::interpod::InterPod;
use caldera_model::{
    CapacityRelease, Job, Node, ProvisioningPolicy, Queue, Resources, Snapshot, Task, Time,
    WaitingPod,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use crate::run::{Holdup, JobRun};

/// The tenants of a session's jobs (fairshare's `tenantKey`): a tenant is one key within one
/// queue, so tenants of different queues are never compared.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tenants {
    /// Per job, its tenant (an index into `names`).
    pub of_job: Vec<u32>,
    /// Per tenant, its queue and key (`namespace=<ns>`, or `<label>=<value>`), sorted.
    pub names: Vec<(usize, Arc<str>)>,
}

impl Tenants {
    /// Job `j`'s tenant.
    pub fn of(&self, j: usize) -> usize {
        self.of_job[j] as usize
    }
}

/// The mutable world of one session.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    /// The session's time.
    pub now: Time,
    /// Nodes, sorted by name, with this session's placements applied.
    pub nodes: Vec<Node>,
    /// Tasks (status and node change as they are placed).
    pub tasks: Vec<Task>,
    /// Jobs, sorted by id.
    pub jobs: Vec<Job>,
    /// Queues, sorted by name.
    pub queues: Vec<Queue>,
    /// Queue index of each job.
    pub job_queue: Vec<usize>,
    /// Per-job facts.
    pub job_runs: Vec<JobRun>,
    /// Σ requests of members holding a node, per queue.
    pub queue_allocated: Vec<Resources>,
    /// The queue tree (`Queue.spec.parent`): node `i < queues.len()` is queue `i`; a virtual
    /// `root` follows when no queue is named so.
    pub tree: caldera_queue::QueueTree,
    /// Per tree node: Σ requests of members holding a node in its whole subtree (a leaf's is
    /// its `queue_allocated`). Kept current with every placement, undo and eviction.
    pub tree_allocated: Vec<Resources>,
    /// Σ allocatable of Ready nodes.
    pub total: Resources,
    /// Σ used over Ready nodes at session open.
    pub used: Resources,
    /// Σ used over Ready nodes now: kept current with every placement, undo and eviction
    /// (what a failed gang's message says is free, without a pass over every node).
    pub used_now: Resources,
    /// Pods waiting for a PodGroup that does not exist.
    pub waiting: Vec<WaitingPod>,
    /// Everything that holds capacity: the ledger, inter-pod counts, volumes, devices,
    /// bookings (see [`crate::track`]).
    pub trackers: crate::track::Trackers,
    /// Per task: an id of what other pods' constraints can see of it (namespace and the label
    /// keys any selector in the session reads). Members alike in request, spec and this id
    /// place alike.
    pub traits: Vec<u32>,
    /// Autoscaler requests, when on.
    pub provisioning: Option<ProvisioningPolicy>,
    /// Requests no job owns: deleted at close.
    pub stale_capacity: Vec<CapacityRelease>,
    /// Some node is booked for a job (capacity held for it); node choice then depends on the
    /// job, not only on the member's kind.
    pub has_bookings: bool,
    /// PodDisruptionBudgets covering our members.
    pub budgets: Vec<caldera_model::Budget>,
    /// Disruptions each budget still allows in this session (evictions decided here count).
    pub budget_left: Vec<u32>,
    /// The HyperNode tree over `nodes` (see [`caldera_model::Snapshot::topology`]).
    pub topology: std::sync::Arc<caldera_model::TopologyTree>,
    /// Per job: its sub-groups (`subGroupPolicy`; empty for most jobs), see
    /// [`caldera_model::split_sub_groups`].
    pub sub_groups: Vec<std::sync::Arc<Vec<caldera_model::SubGroup>>>,
    /// The `fairshare` plugin's settings when it is configured: usage adjusts proportion's
    /// split or capacity's order over the deserved shares, and the session records usage on
    /// the Queues' status at close.
    pub fair: Option<std::sync::Arc<caldera_queue::fair::FairSettings>>,
    /// Each job's tenant when fairshare orders a queue's jobs by tenant usage (`tenantKey`):
    /// the job order then consults the tenants' usage, which placements change, so each
    /// queue's jobs wait in one heap per tenant (`actions::Heap`).
    pub tenants: Option<std::sync::Arc<Tenants>>,
}

impl State {
    /// Builds the working state from a snapshot, taking it over (no copy).
    pub fn new(mut snapshot: Snapshot, now: Time) -> Self {
        // Devices count as the resources their classes name, before anything sums requests.
        // One inventory, shared by the allocator and the device state (never copied).
        let inv = std::sync::Arc::new(std::mem::take(&mut snapshot.dra));
        let mut allocator = caldera_dra::Allocator::shared(inv.clone());
        let backed = crate::devices::fold(&mut snapshot, &mut allocator);
        let devices = crate::devices::Devices::new(inv, &snapshot.nodes, backed, allocator);
        let job_queue: Vec<usize> = snapshot
            .jobs
            .iter()
            .map(|j| snapshot.queue_index(&j.queue).unwrap_or(0))
            .collect();
        let mut job_runs = vec![JobRun::default(); snapshot.jobs.len()];
        let mut queue_allocated = vec![Resources::new(); snapshot.queues.len()];
        for t in &snapshot.tasks {
            if t.status.is_ready() {
                job_runs[t.job].ready += 1;
            }
            if holds_node(t) {
                job_runs[t.job].allocated.add(&t.request);
                if let Some(&q) = job_queue.get(t.job) {
                    if let Some(qa) = queue_allocated.get_mut(q) {
                        qa.add(&t.request);
                    }
                }
            }
        }
        let tree = caldera_queue::QueueTree::of(&snapshot.queues);
        let mut tree_allocated = vec![Resources::new(); tree.len()];
        for (q, a) in queue_allocated.iter().enumerate() {
            if a.is_empty() {
                continue;
            }
            tree_allocated[q].add(a);
            for &p in tree.ancestors(q) {
                tree_allocated[p].add(a);
            }
        }
        let mut used = Resources::new();
        for n in snapshot.nodes.iter().filter(|n| n.ready) {
            used.add(&n.used);
        }
        let total = snapshot.total_allocatable();
        let interpod = InterPod::new(&snapshot.pods, &snapshot.nodes);
        let traits = with_claim_shapes(traits(&snapshot), &snapshot.tasks, &devices);
        let volumes = crate::volumes::Volumes::new(snapshot.volumes, &snapshot.nodes);
        let mut jobs = snapshot.jobs;
        let mut nodes = snapshot.nodes;
        expire_bookings(&mut jobs, &mut nodes, snapshot.provisioning.as_ref(), now);
        let bookings = crate::track::Bookings::new(&nodes, &jobs);
        let has_bookings = bookings.any();
        let no_groups = std::sync::Arc::new(Vec::new());
        let sub_groups = jobs
            .iter()
            .map(|j| {
                if j.sub_group_policies.is_empty() {
                    return no_groups.clone();
                }
                let members = j.tasks.iter().map(|&t| (t, &*snapshot.tasks[t].labels));
                std::sync::Arc::new(caldera_model::split_sub_groups(
                    &j.sub_group_policies,
                    members,
                ))
            })
            .collect();
        State {
            fair: None,
            tenants: None,
            sub_groups,
            topology: std::sync::Arc::new(snapshot.topology),
            trackers: crate::track::Trackers {
                ledger: crate::track::Ledger,
                interpod,
                volumes,
                devices,
                bookings,
            },
            traits,
            now,
            nodes,
            tasks: snapshot.tasks,
            jobs,
            queues: snapshot.queues,
            job_queue,
            job_runs,
            queue_allocated,
            tree,
            tree_allocated,
            total,
            used_now: used.clone(),
            used,
            waiting: snapshot.waiting,
            provisioning: snapshot.provisioning,
            stale_capacity: snapshot.stale_capacity,
            has_bookings,
            budget_left: snapshot.budgets.iter().map(|b| b.allowed).collect(),
            budgets: snapshot.budgets,
        }
    }

    /// Counts `req` on queue `q` and every queue above it.
    pub fn charge_queue(&mut self, q: usize, req: &Resources) {
        crate::track::charge(
            &self.tree,
            &mut self.queue_allocated,
            &mut self.tree_allocated,
            q,
            req,
            true,
        );
    }

    /// Undoes [`State::charge_queue`].
    pub fn discharge_queue(&mut self, q: usize, req: &Resources) {
        crate::track::charge(
            &self.tree,
            &mut self.queue_allocated,
            &mut self.tree_allocated,
            q,
            req,
            false,
        );
    }

    /// Tells every tracker that `task` holds room as `hold` says (`place`) or no longer does;
    /// the nodes whose fit changed are pushed onto `touched`.
    pub(crate) fn track(
        &mut self,
        task: usize,
        hold: crate::track::Hold,
        place: bool,
        touched: &mut Vec<u32>,
    ) {
        let mut w = crate::track::World {
            tasks: &self.tasks,
            nodes: &mut self.nodes,
            runs: &mut self.job_runs,
            job_queue: &self.job_queue,
            queue_allocated: &mut self.queue_allocated,
            tree_allocated: &mut self.tree_allocated,
            tree: &self.tree,
            used_now: &mut self.used_now,
            touched,
        };
        if place {
            self.trackers.place(&mut w, task, hold);
        } else {
            self.trackers.unplace(&mut w, task, hold);
        }
    }

    /// Whether `node` is booked and not for `job` to use now (capacity held for another job,
    /// or held for `job` while its request is only accepted: see [`State::may_use_booking`]).
    pub fn booked_for_other(&self, node: usize, job: usize) -> bool {
        self.trackers.bookings.booked_for_other(node, job)
    }

    /// Whether `job` may be placed on the nodes booked for it: only once its request is
    /// provisioned. While it is merely accepted, nodes that appear are held for it (nobody
    /// else takes them) but may be another request's, provisioned a moment later, which books
    /// first; placing the gang there would take them from it for good.
    pub fn may_use_booking(&self, job: usize) -> bool {
        self.jobs[job]
            .capacity
            .as_ref()
            .is_some_and(|c| c.state == caldera_model::CapacityState::Provisioned)
    }

    /// Members of sub-group `group` of `job` that count toward it (placed or running).
    pub fn sub_group_ready(&self, job: usize, group: usize) -> u32 {
        self.sub_groups[job][group]
            .tasks
            .iter()
            .filter(|&&t| self.tasks[t].status.is_ready())
            .count() as u32
    }

    /// Why `job`'s sub-groups keep it from being ready: the first policy with fewer than
    /// `minSubGroups` sub-groups that have `subGroupSize` members counted by `count` (ready
    /// members, or members that may run). `None` when every policy has enough.
    pub fn sub_groups_short(
        &self,
        job: usize,
        count: impl Fn(&Task) -> bool,
    ) -> Option<(std::sync::Arc<str>, u32, u32)> {
        let policies = &self.jobs[job].sub_group_policies;
        for (i, p) in policies.iter().enumerate().filter(|(_, p)| p.min > 0) {
            let full = self.sub_groups[job]
                .iter()
                .filter(|g| g.policy as usize == i)
                .filter(|g| {
                    g.tasks.iter().filter(|&&t| count(&self.tasks[t])).count() as u32 >= p.size
                })
                .count() as u32;
            if full < p.min {
                return Some((p.name.clone(), full, p.min));
            }
        }
        None
    }

    /// Members of `job` that count toward its gang: Allocated, Binding, Bound, Running,
    /// Succeeded.
    pub fn ready_count(&self, job: usize) -> u32 {
        self.job_runs[job].ready
    }

    /// Members `job` still needs to be ready: `minMember` less those that count, at least 1
    /// (a satisfied gang grows one member at a time).
    pub fn lacking(&self, job: usize) -> u32 {
        self.jobs[job]
            .min_member
            .saturating_sub(self.ready_count(job))
            .max(1)
    }

    /// Pending members of `job` that may be placed (not gated), in snapshot order.
    pub fn pending_tasks(&self, job: usize) -> impl Iterator<Item = usize> + '_ {
        self.jobs[job]
            .tasks
            .iter()
            .copied()
            .filter(|&t| self.tasks[t].schedulable_pending())
    }

    /// Index of the node named `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.binary_search_by(|n| (*n.name).cmp(name)).ok()
    }

    /// Index of `node` in [`State::nodes`]: found from its address when it is an element of
    /// that list (plugins' filters and scores are called with one, for every node of every
    /// evaluation), else by its name (a copy, e.g. `explain`'s probe).
    pub fn index_of(&self, node: &Node) -> Option<usize> {
        let size = std::mem::size_of::<Node>();
        let offset = (node as *const Node as usize).checked_sub(self.nodes.as_ptr() as usize);
        match offset {
            Some(o) if size > 0 && o % size == 0 && o / size < self.nodes.len() => Some(o / size),
            _ => self.node_index(&node.name),
        }
    }

    /// `task`'s [`State::traits`] id when it is an element of [`State::tasks`] (found from its
    /// address, as [`State::index_of`] finds nodes).
    pub fn kind_of(&self, task: &Task) -> Option<u32> {
        let size = std::mem::size_of::<Task>();
        let base = self.tasks.as_ptr() as usize;
        let at = task as *const Task as usize;
        let i = at.checked_sub(base)?;
        if size == 0 || i % size != 0 {
            return None;
        }
        self.traits.get(i / size).copied()
    }
}

/// Counts against its queue's allocation: a member placed or running.
pub fn holds_node(t: &Task) -> bool {
    use caldera_model::TaskStatus::*;
    matches!(t.status, Allocated | Binding | Bound | Running)
}

/// Per task, an id of its namespace and the labels any selector in the snapshot reads (of
/// pending members' constraints, or placed pods' anti-affinity and scoring terms); all 0 when
/// nothing reads labels.
fn traits(snapshot: &Snapshot) -> Vec<u32> {
    let mut keys: BTreeSet<&str> = BTreeSet::new();
    let mut any = false;
    let mut seen = std::collections::HashSet::new();
    for t in &snapshot.tasks {
        if !t.spec.pods.is_empty() && seen.insert(std::sync::Arc::as_ptr(&t.spec)) {
            any = true;
            keys.extend(t.spec.pods.label_keys());
            for term in &t.spec.pods.anti_affinity {
                keys.extend(term.selector.iter().flat_map(|s| s.keys()));
            }
        }
    }
    for p in &snapshot.pods {
        let scoring = p.scoring_terms.iter().map(|(_, t)| t);
        for term in p.anti_affinity.iter().chain(scoring) {
            any = true;
            keys.extend(term.selector.iter().flat_map(|s| s.keys()));
        }
    }
    if !any {
        return vec![0; snapshot.tasks.len()];
    }
    let mut ids: HashMap<(&str, BTreeMap<&str, &str>), u32> = HashMap::new();
    snapshot
        .tasks
        .iter()
        .map(|t| {
            let projected: BTreeMap<&str, &str> = keys
                .iter()
                .filter_map(|k| t.labels.get(*k).map(|v| (*k, v.as_str())))
                .collect();
            let next = ids.len() as u32;
            *ids.entry((&*t.namespace, projected)).or_insert(next)
        })
        .collect()
}

/// Refines [`traits`] ids by what members' DRA claims make of where they may go (see
/// [`crate::devices::Devices::shape`]): members with claims alike still share an id.
fn with_claim_shapes(
    mut ids: Vec<u32>,
    tasks: &[Task],
    devices: &crate::devices::Devices,
) -> Vec<u32> {
    if !tasks.iter().any(|t| t.claims.is_some()) {
        return ids;
    }
    let mut seen: HashMap<(u32, Option<crate::devices::ClaimShape>), u32> = HashMap::new();
    for (t, id) in tasks.iter().zip(ids.iter_mut()) {
        let next = seen.len() as u32;
        *id = *seen.entry((*id, devices.shape(t))).or_insert(next);
    }
    ids
}

/// A provisioned request's booking lasts `bookingTimeout` from when it was provisioned; after
/// that Caldera treats it as expired (whether or not the autoscaler has said so yet) and frees
/// its nodes for everyone.
fn expire_bookings(
    jobs: &mut [Job],
    nodes: &mut [Node],
    policy: Option<&ProvisioningPolicy>,
    now: Time,
) {
    let Some(policy) = policy else {
        return;
    };
    for job in jobs.iter_mut() {
        let Some(c) = job.capacity.as_mut() else {
            continue;
        };
        let end = c.since.plus_millis(policy.booking_ms);
        if c.state == caldera_model::CapacityState::Provisioned && now >= end {
            c.state = caldera_model::CapacityState::BookingExpired;
            c.since = end;
            c.message = format!(
                "the booking of {}s ran out before the gang was placed",
                policy.booking_ms / 1000
            );
            for n in nodes.iter_mut() {
                if n.booked_for.as_ref() == Some(&job.id) {
                    n.booked_for = None;
                }
            }
        }
    }
}
