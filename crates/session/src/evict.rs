//! Choosing victims for `preempt` and `reclaim`: whole gangs as units, a search over
//! placements, and the nomination that holds the freed room for the preemptor.
//!
//! **Units.** A victim unit is every bound member of one gang (evicting part of a gang leaves
//! it useless), or one member of an elastic gang above its `minMember` (at most the surplus,
//! so a gang is never left with 0 < members < `minMember`). Only our own bound, running
//! members that are not terminating and not critical (kube-system, system-critical, mirror
//! pods) are candidates; a gang with a critical member is never a whole-gang victim.
//!
//! **Who may be a victim.** `preempt`: units of jobs of strictly lower priority in the
//! preemptor's queue. `reclaim`: units of other queues that are `reclaimable`, above their
//! deserved share, and stay at or above it after the unit goes; not of a queue that reclaimed
//! in this session or is still waiting for a reclaim it made (no thrash). A unit the
//! PodDisruptionBudgets do not allow (`disruptionsAllowed`, less what this session already
//! planned) is never chosen: the eviction API would refuse it and leave a gang evicted in part.
//!
//! **Search.** Units are ranked cheapest first — preempt: lowest priority, then fewest GPUs,
//! then fewest pods, then most recently started; reclaim: lowest priority, then most recently
//! started, then fewest GPUs — and taken away one by one (virtually) until the whole gang fits
//! ([`probe`]: every predicate, the topology, free nodes and emptied ones alike). A pruning
//! pass then gives back every unit, most expensive first, without which the gang still fits.
//! Nothing is evicted unless the gang then fits: a job is never a victim of a job that could
//! not then run.
//!
//! **Topology.** A preemptor with a hard network topology (HyperNodes, or Caldera's one-tier
//! `spec.topology`) chooses its victims inside one domain it may use (`search_domains`):
//! tier by tier, lowest first, each eligible domain is searched on its own — only units with
//! a member on its nodes, in the order above, the probe placing the gang inside that domain
//! only — and the cheapest domain to empty enough (highest priority evicted, then GPUs, then
//! pods) is the one evicted from. A unit with no member there is never taken: nothing is
//! evicted where the gang cannot go (a victim gang spanning domains still goes whole). With
//! members already running, only the domains holding them are eligible.
//!
//! **Cost.** One session may decide thousands of preemptions on a cluster of thousands of
//! nodes, so the search is kept to what can change its answer. The units are listed once per
//! action and re-listed only for the jobs that lose members. What is free counts each node's
//! idle resources but never below zero, and is kept up to
//! date as units are taken. That sum bounds every placement, so a probe runs only once the
//! gang's resources fit in it, the pruning pass probes only units whose room is not needed by
//! that bound, a job whose gang cannot fit even with every candidate taken is refused without
//! taking any, and until the next eviction a job of the same queue (and, for preempt, the
//! same priority) — which takes the same units in the same order — is refused at once when
//! the room such a job reached was too small for it.
//!
//! On a cluster over-committed by earlier preemptions most units free room where the gang
//! cannot go (a node still short of GPUs after the unit leaves). Such a unit is set aside
//! instead of taken (`SetAside`) and the pruning pass gives such units back without a probe
//! (`Sieve::idle_for`); both only where a unit's effect on the gang is confined to its own
//! nodes' resources, so the search decides exactly as if it took every unit in turn (checked
//! against the plain search on thousands of random full clusters: same plans).
//!
//! **Room counted once.** While an action chooses, pods already terminating (victims of
//! earlier sessions and of this one) are off their nodes (`Leaving`): the room they free is
//! counted once, whether it is free, held for a preemptor (a reservation counts on its node)
//! or still being freed. A victim set is therefore minimal as the cluster will be once they
//! are gone. A gang that fits only in room terminating pods will free is held there and
//! nominated without any victim.
//!
//! **After.** Victims stay on their nodes for the rest of the session (they terminate for
//! their grace period); the preemptor's members are held at the nodes the search placed them
//! on ([`crate::reserve`]) and nominated there, and bind there once the room is free
//! ([`crate::attempt`] places a gang's held members on their held nodes first). A preemptor
//! with room held is not planned again while it waits.

use crate::attempt::probe;
use crate::reserve;
use crate::session::Session;
use crate::state::{holds_node, Holdup};
use crate::track::Hold;
use caldera_model::resources::{CPU, MEMORY};
use caldera_model::{PodGroupPhase, Resources, TaskStatus, Time, TopologyTree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The resource that counts as a GPU when ranking units.
pub const GPU: &str = "nvidia.com/gpu";

/// What the config lets evict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Switches {
    /// `preempt` is an action and some plugin keeps `enablePreemptable` on.
    pub preempt: bool,
    /// `reclaim` is an action and some plugin keeps `enableReclaimable` on.
    pub reclaim: bool,
    /// No plugin turned `enablePreemptive` off: queues below their share may reclaim.
    pub preemptive: bool,
    /// Deserved shares are explicit (the capacity plugin): a queue reclaims while the gang
    /// fits its share on the resources the share names (Volcano's zero-filtered check), not
    /// on every resource.
    pub explicit_deserved: bool,
    /// Hierarchical queues are on (capacity with `enableHierarchy`): reclaim takes from the
    /// nearest relatives first and keeps every queue on a victim's path below the common
    /// ancestor at its deserved share and guarantee.
    pub tree: bool,
}

/// Which action is choosing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Within a queue, by priority.
    Preempt,
    /// Across queues, by fair share.
    Reclaim,
}

impl Mode {
    /// The action's name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Preempt => "preempt",
            Mode::Reclaim => "reclaim",
        }
    }
}

/// One decided preemption: who, whom, and where the preemptor will go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// `preempt` or `reclaim`.
    pub action: &'static str,
    /// The preemptor job.
    pub job: usize,
    /// The victim tasks, unit by unit.
    pub victims: Vec<usize>,
    /// The preemptor's members and the nodes held for them.
    pub placement: Vec<(usize, usize)>,
    /// Why these victims, for `caldera explain`.
    pub why: String,
}

/// A victim unit.
#[derive(Debug, Clone)]
struct Unit {
    job: usize,
    /// The victim job's queue.
    queue: usize,
    tasks: Vec<usize>,
    priority: i32,
    gpus: i64,
    started: Time,
    /// Σ of its members' requests.
    request: Resources,
    /// Every bound member of the gang (not one surplus member).
    whole: bool,
}

fn victimable(ssn: &Session, task: usize) -> bool {
    let t = &ssn.state.tasks[task];
    matches!(t.status, TaskStatus::Bound | TaskStatus::Running)
        && !t.critical
        && !too_young(&ssn.state, task)
}

/// fairshare's `minRuntime`: a pod that has run less than it is never a victim.
pub(crate) fn too_young(st: &crate::state::State, task: usize) -> bool {
    st.fair
        .as_ref()
        .is_some_and(|f| f.too_young(st.tasks[task].started, st.now))
}

/// The units of job `v`: the surplus members of an elastic gang one by one (most recently
/// started first), then the whole gang.
fn units_of(ssn: &Session, v: usize) -> Vec<Unit> {
    let st = &ssn.state;
    let job = &st.jobs[v];
    let bound: Vec<usize> = job
        .tasks
        .iter()
        .copied()
        .filter(|&t| matches!(st.tasks[t].status, TaskStatus::Bound | TaskStatus::Running))
        .collect();
    if bound.is_empty() || bound.iter().any(|&t| st.tasks[t].critical) {
        return Vec::new();
    }
    // A unit with a member younger than fairshare's minRuntime is not taken: surplus members
    // one by one skip it, and the whole gang is no unit while one of its members is young.
    let young: Vec<usize> = bound
        .iter()
        .copied()
        .filter(|&t| too_young(st, t))
        .collect();
    let unit = |tasks: Vec<usize>, whole: bool| {
        let mut request = Resources::new();
        let mut started = Time(i64::MIN);
        for &t in &tasks {
            request.add(&st.tasks[t].request);
            started = started.max(st.tasks[t].started);
        }
        Unit {
            job: v,
            queue: st.job_queue[v],
            gpus: request.get(GPU),
            priority: job.priority,
            started,
            request,
            tasks,
            whole,
        }
    };
    let mut out = Vec::new();
    let surplus = st.ready_count(v).saturating_sub(job.min_member) as usize;
    if surplus > 0 {
        let mut single = bound.clone();
        single.sort_by(|&a, &b| {
            st.tasks[b]
                .started
                .cmp(&st.tasks[a].started)
                .then_with(|| st.tasks[a].name.cmp(&st.tasks[b].name))
        });
        for &t in single.iter().take(surplus) {
            if !young.contains(&t) {
                out.push(unit(vec![t], false));
            }
        }
    }
    if young.is_empty() {
        out.push(unit(bound, true));
    }
    out
}

/// Takes `task` off its node (`node`, its index) for the search (as if gone).
pub(crate) fn take(ssn: &mut Session, task: usize, node: Option<usize>) -> TaskStatus {
    for s in ssn.slots.iter_mut().rev() {
        s.plugin.on_deallocate(&ssn.state, task);
    }
    let t = &mut ssn.state.tasks[task];
    let prev = t.status;
    t.status = TaskStatus::Releasing;
    let ready = prev.is_ready();
    ssn.unplace(task, Hold::Running { node, ready });
    prev
}

/// Undoes [`take`].
pub(crate) fn give_back(ssn: &mut Session, task: usize, node: Option<usize>, prev: TaskStatus) {
    ssn.state.tasks[task].status = prev;
    let ready = prev.is_ready();
    ssn.place(task, Hold::Running { node, ready });
    for s in &mut ssn.slots {
        s.plugin.on_allocate(&ssn.state, task);
    }
}

/// Whether queue `q` may give up `unit` and keep a share (max over resources of allocated /
/// deserved) of at least 1: on some resource the unit holds, what stays is still at or above
/// the queue's deserved amount. `gone`: what the queue is counted as having given up already
/// besides what is taken (units a search set aside).
fn stays_at_share(ssn: &Session, q: usize, unit: &Resources, gone: Option<&Resources>) -> bool {
    let Some(deserved) = ssn.deserved(q) else {
        return false;
    };
    let mut allocated = ssn.state.queue_allocated[q].clone();
    if let Some(gone) = gone {
        allocated.sub(gone);
    }
    unit.iter()
        .any(|(r, v)| v > 0 && deserved.get(r) > 0 && allocated.get(r) - v >= deserved.get(r))
}

/// Whether reclaiming for queue `rq` may take `unit` (Σ of the tasks to take) from queue
/// `vq`. Flat queues: `vq` keeps its deserved share ([`stays_at_share`]). With the queue tree
/// (`tree`), every queue on `vq`'s path below its deepest common ancestor with `rq` — `vq`
/// and the ancestors that are not also `rq`'s — must be reclaimable, keep its deserved share
/// on some resource the unit holds, and keep its guarantee on every resource. `gone`: per
/// victim queue, what units set aside already count as given up.
fn may_give_up(
    ssn: &Session,
    tree: bool,
    rq: usize,
    vq: usize,
    unit: &Resources,
    gone: &HashMap<usize, Resources>,
) -> bool {
    if !tree {
        return stays_at_share(ssn, vq, unit, gone.get(&vq));
    }
    let st = &ssn.state;
    let common = st.tree.common_ancestor(rq, vq);
    let path = st.tree.path(vq);
    let below = path.iter().position(|&x| x == common).map_or(0, |i| i + 1);
    path[below..].iter().all(|&x| {
        let Some(queue) = st.queues.get(x) else {
            return false;
        };
        // What x's subtree has given up through units set aside.
        let mut left = st.tree_allocated[x].clone();
        for (q, r) in gone {
            if *q == x || st.tree.ancestors(*q).contains(&x) {
                left.sub(r);
            }
        }
        let Some(deserved) = ssn.deserved(x) else {
            return false;
        };
        let after = left.minus(unit);
        queue.reclaimable
            && unit
                .iter()
                .any(|(r, v)| v > 0 && deserved.get(r) > 0 && after.get(r) >= deserved.get(r))
            && queue.guarantee.iter().all(|(r, g)| after.get(r) >= g)
    })
}

/// Whether `queue` is below its deserved share enough to take `need` more. With explicit
/// shares (capacity) only the resources the share names count, and one of them must be asked.
fn below_share(ssn: &Session, q: usize, need: &Resources) -> bool {
    let Some(deserved) = ssn.deserved(q) else {
        return false;
    };
    let allocated = &ssn.state.queue_allocated[q];
    if ssn.eviction.explicit_deserved {
        let named: Vec<(&str, i64)> = need
            .iter()
            .filter(|&(r, v)| v > 0 && deserved.get(r) > 0)
            .collect();
        return !named.is_empty()
            && named
                .iter()
                .all(|&(r, v)| allocated.get(r) + v <= deserved.get(r));
    }
    need.iter()
        .all(|(r, v)| allocated.get(r) + v <= deserved.get(r))
}

/// The request of the members `job` still needs to be ready.
pub(crate) fn gang_need(ssn: &Session, job: usize) -> Resources {
    let st = &ssn.state;
    let need = st.jobs[job]
        .min_member
        .saturating_sub(st.ready_count(job))
        .max(1) as usize;
    let tasks: Vec<usize> = st.pending_tasks(job).collect();
    let mut out = Resources::new();
    for t in ssn.order_tasks(job, tasks).into_iter().take(need) {
        out.add(&st.tasks[t].request);
    }
    out
}

/// Queues that may not lose units to reclaim now: those waiting for a reclaim they made, and
/// those that reclaimed in this session.
fn protected_queues(ssn: &Session) -> BTreeSet<usize> {
    let mut out: BTreeSet<usize> = ssn
        .reservations
        .jobs()
        .map(|j| ssn.state.job_queue[j])
        .collect();
    for p in ssn.preemptions.iter().filter(|p| p.action == "reclaim") {
        out.insert(ssn.state.job_queue[p.job]);
    }
    out
}

/// Orders units for `mode`: the action's ranking, then the first member's namespace and
/// name, then the victim job and the unit's place among its units (so equal ranks keep the
/// order the units were listed in).
#[derive(Debug, Clone, PartialEq, Eq)]
struct UnitKey {
    mode: Mode,
    priority: i32,
    gpus: i64,
    pods: usize,
    started: Time,
    namespace: std::sync::Arc<str>,
    name: std::sync::Arc<str>,
    job: usize,
    index: usize,
}

impl Ord for UnitKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        let rank = match self.mode {
            Mode::Preempt => self
                .priority
                .cmp(&o.priority)
                .then(self.gpus.cmp(&o.gpus))
                .then(self.pods.cmp(&o.pods))
                .then(o.started.cmp(&self.started)),
            Mode::Reclaim => self
                .priority
                .cmp(&o.priority)
                .then(o.started.cmp(&self.started))
                .then(self.gpus.cmp(&o.gpus))
                .then(self.pods.cmp(&o.pods)),
        };
        rank.then_with(|| self.namespace.cmp(&o.namespace))
            .then_with(|| self.name.cmp(&o.name))
            .then(self.pods.cmp(&o.pods))
            .then(self.job.cmp(&o.job))
            .then(self.index.cmp(&o.index))
    }
}

impl PartialOrd for UnitKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// Every victim unit of the session, cheapest first for one action. Built once per action
/// run; the units of a victim job are listed afresh whenever members of it are evicted, so
/// the pool always equals what listing every job's units now would give.
struct Pool {
    units: BTreeMap<UnitKey, Unit>,
    /// The keys of each job's units in `units`.
    keys: Vec<Vec<UnitKey>>,
    /// Σ of the whole-gang units' requests by (queue, priority): what taking every unit of
    /// them would free at most.
    held: BTreeMap<(usize, i32), Resources>,
    mode: Mode,
    /// Where each task is.
    at: At,
    /// The pods terminating, off their nodes while the action runs.
    leaving: Leaving,
}

impl Pool {
    fn new(ssn: &Session, mode: Mode) -> Self {
        let mut pool = Pool {
            units: BTreeMap::new(),
            keys: vec![Vec::new(); ssn.state.jobs.len()],
            held: BTreeMap::new(),
            mode,
            at: At::new(ssn),
            leaving: Leaving::default(),
        };
        for v in 0..ssn.state.jobs.len() {
            pool.list(ssn, v);
        }
        pool
    }

    /// Lists the units job `v` has now.
    fn list(&mut self, ssn: &Session, v: usize) {
        let st = &ssn.state;
        if !st.jobs[v].tasks.iter().any(|&t| victimable(ssn, t)) {
            return;
        }
        for (index, unit) in units_of(ssn, v).into_iter().enumerate() {
            let first = &st.tasks[unit.tasks[0]];
            let key = UnitKey {
                mode: self.mode,
                priority: unit.priority,
                gpus: unit.gpus,
                pods: unit.tasks.len(),
                started: unit.started,
                namespace: first.namespace.clone(),
                name: first.name.clone(),
                job: v,
                index,
            };
            if unit.whole {
                let q = st.job_queue[v];
                self.held
                    .entry((q, unit.priority))
                    .or_default()
                    .add(&unit.request);
            }
            self.keys[v].push(key.clone());
            self.units.insert(key, unit);
        }
    }

    /// Lists job `v`'s units again (members of it were evicted).
    fn refresh(&mut self, ssn: &Session, v: usize) {
        let q = ssn.state.job_queue[v];
        for key in std::mem::take(&mut self.keys[v]) {
            if let Some(unit) = self.units.remove(&key) {
                if unit.whole {
                    if let Some(sum) = self.held.get_mut(&(q, unit.priority)) {
                        sum.sub(&unit.request);
                    }
                }
            }
        }
        self.list(ssn, v);
    }

    /// The units `job` may take under the pool's action, cheapest first.
    fn candidates<'a>(&'a self, rule: &'a Rule) -> impl Iterator<Item = &'a Unit> + 'a {
        self.units
            .values()
            .filter(move |u| u.job != rule.job && rule.allows(u.queue, u.priority))
    }

    /// Σ of what every whole-gang unit the rule allows holds (the preemptor's own never
    /// counts: under either action its own units are not its candidates — same priority, or
    /// its own queue).
    fn most(&self, rule: &Rule) -> Resources {
        let mut out = Resources::new();
        for (&(vq, priority), sum) in &self.held {
            if rule.allows(vq, priority) {
                out.add(sum);
            }
        }
        out
    }
}

/// Where each task is: the index of its node (tasks keep their nodes while a preemption is
/// chosen; taken victims stay on theirs as they terminate), looked up once per action.
#[derive(Debug)]
pub(crate) struct At(Vec<u32>);

impl At {
    const NONE: u32 = u32::MAX;

    pub(crate) fn new(ssn: &Session) -> Self {
        let st = &ssn.state;
        At(st
            .tasks
            .iter()
            .map(|t| {
                t.node
                    .as_deref()
                    .and_then(|n| st.node_index(n))
                    .map_or(Self::NONE, |n| n as u32)
            })
            .collect())
    }

    pub(crate) fn node(&self, task: usize) -> Option<usize> {
        self.0
            .get(task)
            .filter(|&&n| n != Self::NONE)
            .map(|&n| n as usize)
    }
}

/// Which units one preemptor may take.
struct Rule {
    job: usize,
    mode: Mode,
    queue: usize,
    priority: i32,
    /// Reclaim: the queues it may take from.
    queues: Vec<bool>,
}

impl Rule {
    fn new(ssn: &Session, job: usize, mode: Mode, protected: &BTreeSet<usize>) -> Self {
        let st = &ssn.state;
        let queue = st.job_queue[job];
        let queues = match mode {
            Mode::Preempt => Vec::new(),
            Mode::Reclaim => (0..st.queues.len())
                .map(|vq| vq != queue && st.queues[vq].reclaimable && !protected.contains(&vq))
                .collect(),
        };
        Rule {
            job,
            mode,
            queue,
            priority: st.jobs[job].priority,
            queues,
        }
    }

    /// Whether units of queue `vq` and priority `priority` may be taken.
    fn allows(&self, vq: usize, priority: i32) -> bool {
        match self.mode {
            Mode::Preempt => vq == self.queue && priority < self.priority,
            Mode::Reclaim => self.queues.get(vq).copied().unwrap_or(false),
        }
    }
}

/// What node `n` has free for a placement: its idle resources, none below zero (a node
/// over-committed on a resource — terminating victims beside the room held for their
/// preemptor — has none of it to give); nothing when it is not Ready.
pub(crate) fn room(ssn: &Session, n: usize) -> Resources {
    let node = &ssn.state.nodes[n];
    let mut idle = node.idle();
    if !node.ready {
        return Resources::new();
    }
    let short: Vec<(String, i64)> = idle
        .iter()
        .filter(|&(_, v)| v < 0)
        .map(|(r, v)| (r.to_string(), v))
        .collect();
    for (r, v) in short {
        idle.add_named(&r, -v);
    }
    idle
}

/// Σ [`room`] over all nodes: no placement can use more.
pub(crate) fn free_capacity(ssn: &Session) -> Resources {
    let mut r = Resources::new();
    for n in 0..ssn.state.nodes.len() {
        r.add(&room(ssn, n));
    }
    r
}

/// [`take`]s `task` and adds the room it frees on its node to `free`.
fn take_into(ssn: &mut Session, at: &At, task: usize, free: &mut Resources) -> TaskStatus {
    let node = at.node(task);
    let before = node.map(|n| room(ssn, n));
    let prev = take(ssn, task, node);
    if let (Some(n), Some(before)) = (node, before) {
        free.add(&room(ssn, n));
        free.sub(&before);
    }
    prev
}

/// The room giving `tasks` back (they are taken now) would cost `free`: `free` without it.
fn free_without(
    ssn: &Session,
    at: &At,
    tasks: &[(usize, TaskStatus)],
    free: &Resources,
) -> Resources {
    let mut on_node: BTreeMap<usize, Resources> = BTreeMap::new();
    for &(t, _) in tasks {
        if let Some(n) = at.node(t) {
            on_node
                .entry(n)
                .or_default()
                .add(&ssn.state.tasks[t].request);
        }
    }
    let mut out = free.clone();
    for (n, back) in on_node {
        let now = room(ssn, n);
        out.sub(&now);
        let node = &ssn.state.nodes[n];
        if node.ready {
            let mut after = node.allocatable.minus(&node.used);
            after.sub(&back);
            for (r, v) in after.iter() {
                if v > 0 {
                    out.add_named(r, v);
                }
            }
        }
    }
    out
}

/// Whether a job may start evicting: admitted, valid, not yet ready, members pending, no room
/// held for it already, not stopped by its queue's limits, and not `preemptionPolicy: Never`.
pub(crate) fn starving(ssn: &Session, job: usize) -> bool {
    starving_in(ssn, job, false)
}

/// [`starving`]; with `quota_may_free`, also a job a queue limit held. Reclaim with the queue
/// tree passes it: a leaf below its deserved share held by an *ancestor* at its capability gets
/// room by taking from an over-share queue under that ancestor, which lowers the ancestor too
/// (Volcano's capacity_test `Test_capacityPlugin_OnSessionOpenWithHierarchy` case3; the run
/// checks the leaf is below its share, and nothing is evicted unless the gang then passes every
/// limit).
fn starving_in(ssn: &Session, job: usize, quota_may_free: bool) -> bool {
    let st = &ssn.state;
    let run = &st.job_runs[job];
    let held_by = match &run.holdup {
        None | Some(Holdup::Fit(_)) => true,
        Some(Holdup::Quota(_)) => quota_may_free,
        Some(Holdup::NotAdmitted { .. }) => false,
    };
    run.admitted
        && run.invalid.is_none()
        && held_by
        && st.pending_tasks(job).next().is_some()
        && !ssn.job_ready(job)
        && !st.pending_tasks(job).any(|t| st.tasks[t].never_preempts)
        && !reserve::waiting(ssn, job)
}

/// fairshare's `preemptionDelay`: job `j` evicts (preempt, reclaim, consolidate) only once it
/// has waited that long, so room that frees meanwhile (a job ending, an autoscaler's nodes) is
/// taken instead.
pub(crate) fn delay_over(ssn: &Session, j: usize) -> bool {
    let st = &ssn.state;
    st.fair
        .as_ref()
        .is_none_or(|f| f.may_preempt(st.jobs[j].pending_since, st.now))
}

/// Runs `mode` over every starving job, queue by queue in queue order, jobs in job order.
pub fn run(ssn: &mut Session, mode: Mode) {
    let allowed = match mode {
        Mode::Preempt => ssn.eviction.preempt,
        Mode::Reclaim => ssn.eviction.reclaim && ssn.eviction.preemptive,
    };
    if !allowed {
        return;
    }
    let quota_may_free = mode == Mode::Reclaim && ssn.eviction.tree;
    let mut jobs: Vec<usize> = (0..ssn.state.jobs.len())
        .filter(|&j| starving_in(ssn, j, quota_may_free) && delay_over(ssn, j))
        .collect();
    if jobs.is_empty() {
        return;
    }
    jobs.sort_by(|&a, &b| {
        let (qa, qb) = (ssn.state.job_queue[a], ssn.state.job_queue[b]);
        ssn.queue_order(qa, qb).then_with(|| ssn.job_order(a, b))
    });
    let mut pool = Pool::new(ssn, mode);
    // Pods already terminating are as good as gone for a preemptor, which waits for its room
    // anyway: the room they free counts once, whoever holds it (see [`Leaving`]).
    pool.leaving = Leaving::vacate(ssn, &pool.at);
    // What each node has free, and the sum: between searches only a decided preemption
    // changes a node (its victims leave theirs, its preemptor's room is held), so these are
    // brought up to date for the nodes it touches, not summed afresh.
    let mut rooms: Vec<Resources> = (0..ssn.state.nodes.len()).map(|n| room(ssn, n)).collect();
    let mut free = Resources::new();
    for r in &rooms {
        free.add(r);
    }
    let mut protected = match mode {
        Mode::Reclaim => protected_queues(ssn),
        Mode::Preempt => BTreeSet::new(),
    };
    // Jobs that choose among the same units (same queue; for preempt, same priority) take
    // them in the same order, so until something is evicted the room they reach is the same:
    // the most room such a job found, when it was not enough. Keyed by (queue, priority).
    let mut short: HashMap<(usize, i32), (usize, Resources)> = HashMap::new();
    for job in jobs {
        if !starving_in(ssn, job, quota_may_free) {
            continue;
        }
        let need = gang_need(ssn, job);
        let q = ssn.state.job_queue[job];
        if mode == Mode::Reclaim && (ssn.overused(q) || !below_share(ssn, q, &need)) {
            continue;
        }
        let alike = match mode {
            Mode::Preempt => (q, ssn.state.jobs[job].priority),
            Mode::Reclaim => (q, 0),
        };
        let decided = ssn.preemptions.len();
        let known_short = short
            .get(&alike)
            .is_some_and(|(at, most)| *at == decided && !need.fits_in(most));
        let mut outcome = "no_victims";
        if !known_short {
            match search(ssn, job, mode, &need, &pool, &protected, &free) {
                Searched::Evicted(victim_jobs) => {
                    for v in victim_jobs {
                        pool.refresh(ssn, v);
                    }
                    let mut touched: BTreeSet<usize> = BTreeSet::new();
                    if let Some(p) = ssn.preemptions.last() {
                        touched.extend(p.placement.iter().map(|&(_, n)| n));
                        touched.extend(p.victims.iter().filter_map(|&t| pool.at.node(t)));
                        for &t in &p.victims {
                            // Taken off their nodes by the search already.
                            pool.leaving.left(&pool.at, t);
                        }
                    }
                    for n in touched {
                        let now = room(ssn, n);
                        free.sub(&rooms[n]);
                        free.add(&now);
                        rooms[n] = now;
                    }
                    if mode == Mode::Reclaim {
                        // A queue that reclaimed is not reclaimed from in this session.
                        protected.insert(q);
                    }
                    let none = ssn.preemptions.last().is_some_and(|p| p.victims.is_empty());
                    outcome = if none { "held" } else { "evicted" };
                }
                Searched::Short(most) => {
                    short.insert(alike, (decided, most));
                }
                Searched::NoFit => {}
            }
        }
        *ssn.stats.preemption_attempts.entry(outcome).or_insert(0) += 1;
    }
    std::mem::take(&mut pool.leaving).restore(ssn);
}

/// The pods terminating on their nodes (victims of earlier sessions and of this action, or
/// deleted by anyone), taken off their nodes while an action chooses victims and put back
/// after, since for the rest of the session they still occupy their nodes.
///
/// Why: room held for a preemptor is the room its victims free. Counting both the held room
/// and the terminating victims on a node counts that room twice, and a search then sees less
/// room than the cluster will have once they are gone: on a node shared by a victim gang
/// still terminating, the preemptor it makes room for, and another gang, taking that other
/// gang frees nothing as far as the search can tell, so it takes a further unit that was not
/// needed (measured on a real API server: 208 or 216 victims for 200 preemptor pods). With
/// them taken off, room is counted once whatever its state: free, held, or still being freed
/// by pods terminating; a node's room is what it will have once they are gone, less what is
/// held there.
#[derive(Debug, Default)]
pub(crate) struct Leaving {
    /// (task, node) of every pod taken off its node.
    tasks: Vec<(usize, usize)>,
    /// Per node: whether pods terminating there free room.
    on_node: Vec<bool>,
}

impl Leaving {
    /// Takes every terminating pod off its node.
    pub(crate) fn vacate(ssn: &mut Session, at: &At) -> Self {
        let mut out = Leaving {
            tasks: Vec::new(),
            on_node: vec![false; ssn.state.nodes.len()],
        };
        let terminating: Vec<usize> = (0..ssn.state.tasks.len())
            .filter(|&t| ssn.state.tasks[t].status == TaskStatus::Releasing)
            .collect();
        for t in terminating {
            out.add(ssn, at, t);
        }
        out
    }

    /// Takes terminating task `t` (on its node in the session) off its node.
    fn add(&mut self, ssn: &mut Session, at: &At, t: usize) {
        let Some(n) = at.node(t) else {
            return;
        };
        ssn.unplace(t, Hold::Terminating(n));
        self.tasks.push((t, n));
        self.on_node[n] = true;
    }

    /// Whether no pod was terminating when the action started.
    pub(crate) fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Records victim `t`, already off its node.
    pub(crate) fn left(&mut self, at: &At, t: usize) {
        if let Some(n) = at.node(t) {
            self.tasks.push((t, n));
            self.on_node[n] = true;
        }
    }

    /// Whether `placement` uses a node where pods are still terminating (so it may not fit
    /// as the nodes are now).
    pub(crate) fn needed_by(&self, placement: &[(usize, usize)]) -> bool {
        placement.iter().any(|&(_, n)| self.on_node[n])
    }

    /// Puts every pod taken off back on its node.
    pub(crate) fn restore(self, ssn: &mut Session) {
        for (t, n) in self.tasks {
            ssn.place(t, Hold::Terminating(n));
        }
    }
}

/// A unit a search took: its rank among the candidates, the unit, and the tasks taken with
/// their previous status.
type Chosen<'a> = (usize, &'a Unit, Vec<(usize, TaskStatus)>);

/// What a search found.
enum Searched {
    /// Victims chosen and evicted; the victims' jobs.
    Evicted(BTreeSet<usize>),
    /// Taking every unit it could never made enough room: the most room it reached.
    Short(Resources),
    /// No set of units let the gang fit.
    NoFit,
}

/// Searches victims for `job` among `pool`'s units; on success evicts them and holds the
/// room.
fn search(
    ssn: &mut Session,
    job: usize,
    mode: Mode,
    need: &Resources,
    pool: &Pool,
    protected: &BTreeSet<usize>,
    free: &Resources,
) -> Searched {
    // A gang that fits as things are needs no victim: allocate places it. One that fits only
    // in room pods still terminating will free needs none either: that room is held for it
    // (it would otherwise evict more, for room that is already on its way).
    if need.fits_in(free) {
        if let Some(placement) = probe(ssn, job) {
            if !pool.leaving.needed_by(&placement) {
                return Searched::NoFit;
            }
            commit(ssn, job, mode, Vec::new(), placement, None);
            return Searched::Evicted(BTreeSet::new());
        }
    }
    // Taking every candidate could not make room for the gang: nothing to try. (A
    // whole-gang unit holds every victimable member of its job, surplus units only some.)
    let rule = Rule::new(ssn, job, mode, protected);
    let mut most = pool.most(&rule);
    if most.is_empty() {
        return Searched::NoFit;
    }
    most.add(free);
    if !need.fits_in(&most) {
        return Searched::NoFit;
    }
    let mut candidates: Vec<&Unit> = pool.candidates(&rule).collect();
    if mode == Mode::Reclaim && ssn.eviction.tree {
        // Nearest relatives first: siblings (deepest common ancestor), then cousins, and so
        // up the tree (Volcano's hierarchical VictimQueueOrderFn); the stable sort keeps the
        // action's ranking within each.
        let tree = &ssn.state.tree;
        let rq = ssn.state.job_queue[job];
        candidates
            .sort_by_key(|u| std::cmp::Reverse(tree.depth(tree.common_ancestor(rq, u.queue))));
    }
    if let Some((tree, tiers)) = hard_domains(ssn, job) {
        return search_domains(ssn, job, mode, need, &pool.at, &candidates, &tree, tiers);
    }
    let sieve = Sieve::new(ssn, job, need);
    match choose(
        ssn,
        job,
        mode,
        need,
        &pool.at,
        candidates,
        &sieve,
        free.clone(),
    ) {
        Ok((chosen, placement)) => {
            let victim_jobs = chosen.iter().map(|(u, _)| u.job).collect();
            commit(ssn, job, mode, chosen, placement, None);
            Searched::Evicted(victim_jobs)
        }
        Err(reached) => {
            // The room only grew as units were taken: if the gang's resources never fit in
            // it, no placement was ever tried.
            if need.fits_in(&reached) {
                Searched::NoFit
            } else {
                Searched::Short(reached)
            }
        }
    }
}

/// Units chosen by [`choose`], in candidate order, with the tasks taken and their previous
/// status; and where the preemptor's members go.
type Choice<'a> = (
    Vec<(&'a Unit, Vec<(usize, TaskStatus)>)>,
    Vec<(usize, usize)>,
);

/// Takes `candidates` (cheapest first) one by one until the gang fits ([`probe`]), then gives
/// back every unit it fits without, most expensive first. On success the chosen units stay
/// taken; otherwise every unit is given back and the error is the room that taking every unit
/// considered would have made (set-aside ones included). `free` bounds what a placement can
/// use (what is free where the gang may go).
#[allow(clippy::too_many_arguments)]
fn choose<'a>(
    ssn: &mut Session,
    job: usize,
    mode: Mode,
    need: &Resources,
    at: &'a At,
    candidates: Vec<&'a Unit>,
    sieve: &Sieve,
    mut free: Resources,
) -> Result<Choice<'a>, Resources> {
    let mut spent: BTreeMap<u32, u32> = BTreeMap::new();
    // Chosen units in candidate order, with the tasks taken and their previous status.
    let mut chosen: Vec<Chosen> = Vec::new();
    let mut set_aside = SetAside::new(at);
    let mut placement = None;
    for (rank, unit) in candidates.into_iter().enumerate() {
        let tasks: Vec<usize> = unit
            .tasks
            .iter()
            .copied()
            .filter(|&t| victimable(ssn, t) && !set_aside.tasks.contains_key(&t))
            .collect();
        if tasks.is_empty() {
            continue; // taken (or set aside) already as part of another unit
        }
        // Budgets: never a unit the eviction API would refuse.
        let mut want: BTreeMap<u32, u32> = BTreeMap::new();
        for &t in &tasks {
            if let Some(b) = ssn.state.tasks[t].budget {
                *want.entry(b).or_insert(0) += 1;
            }
        }
        let within = want.iter().all(|(b, n)| {
            let left = ssn.state.budget_left.get(*b as usize).copied().unwrap_or(0);
            spent.get(b).copied().unwrap_or(0) + n <= left
        });
        if !within {
            continue;
        }
        if mode == Mode::Reclaim {
            // As if every unit considered so far were taken, set-aside ones included.
            let mut req = Resources::new();
            for &t in &tasks {
                req.add(&ssn.state.tasks[t].request);
            }
            let vq = ssn.state.job_queue[unit.job];
            let rq = ssn.state.job_queue[job];
            if !may_give_up(ssn, ssn.eviction.tree, rq, vq, &req, &set_aside.by_queue) {
                continue;
            }
        }
        for (b, n) in want {
            *spent.entry(b).or_insert(0) += n;
        }
        if sieve.sets_aside(ssn, at, &tasks, &set_aside) {
            // The gang could use none of its nodes even with it gone: nothing changes for
            // the gang, so no probe either (see [`SetAside`]).
            set_aside.add(ssn, rank, unit, &tasks);
            continue;
        }
        let taken: Vec<(usize, TaskStatus)> = tasks
            .iter()
            .map(|&t| (t, set_aside.take_into(ssn, t, &mut free)))
            .collect();
        let nodes: BTreeSet<usize> = taken.iter().filter_map(|&(t, _)| at.node(t)).collect();
        chosen.push((rank, unit, taken));
        // Units set aside on a node this one made usable are taken now, and so are those of
        // the same victim job as any unit taken (what the pruning pass may give back of a
        // victim gang depends on which of its units were taken).
        let mut wanted: Vec<usize> = set_aside.of_job(unit.job);
        for n in nodes {
            if sieve.usable(ssn, n, &set_aside) {
                wanted.extend(set_aside.on_node(n));
            }
        }
        while !wanted.is_empty() {
            let mut jobs = BTreeSet::new();
            for (rank, unit, taken) in set_aside.take_units(ssn, &wanted, &mut free) {
                jobs.insert(unit.job);
                chosen.push((rank, unit, taken));
            }
            wanted = jobs.into_iter().flat_map(|v| set_aside.of_job(v)).collect();
        }
        if need.fits_in(&free) {
            if let Some(p) = probe(ssn, job) {
                placement = Some(p);
                break;
            }
        }
    }
    let Some(mut placement) = placement else {
        // The room that taking every unit considered would have made, set-aside ones
        // included (what an alike job reaches: see `Searched::Short`).
        let reached = set_aside.room_with(ssn, &free);
        for (_, _, taken) in chosen.into_iter().rev() {
            for (t, prev) in taken.into_iter().rev() {
                give_back(ssn, t, at.node(t), prev);
            }
        }
        return Err(reached);
    };
    chosen.sort_by_key(|&(rank, _, _)| rank);
    let mut chosen: Vec<(&Unit, Vec<(usize, TaskStatus)>)> =
        chosen.into_iter().map(|(_, u, t)| (u, t)).collect();
    // What a successful probe places: the same members every time (the shortest prefix of
    // the gang's members, in order, that makes it ready), so they must fit in what is free.
    let mut placed = Resources::new();
    for &(t, _) in &placement {
        placed.add(&ssn.state.tasks[t].request);
    }
    // Pruning: give back every unit the gang fits without, most expensive first — unless
    // that would leave a victim gang with 0 < members < minMember (a surplus member given
    // back while the rest of its gang goes).
    let mut k = chosen.len();
    while k > 0 && chosen.len() > 1 {
        k -= 1;
        let (_, taken) = &chosen[k];
        let taken = taken.clone();
        // `free` bounds what any placement can use: without the unit, a probe would fail.
        let without = free_without(ssn, at, &taken, &free);
        if !placed.fits_in(&without) {
            continue;
        }
        let idle = sieve.idle_for(ssn, at, &taken);
        for &(t, prev) in taken.iter().rev() {
            give_back(ssn, t, at.node(t), prev);
        }
        let victim = chosen[k].0.job;
        if idle && gang_whole_or_enough(ssn, victim) {
            // The gang can use none of its nodes even with the unit gone: the probe would
            // place it exactly as now.
            free = without;
            chosen.remove(k);
            continue;
        }
        let fits = if gang_whole_or_enough(ssn, victim) {
            probe(ssn, job)
        } else {
            None
        };
        match fits {
            Some(p) => {
                placement = p;
                free = without;
                chosen.remove(k);
            }
            None => {
                for &(t, _) in &taken {
                    take(ssn, t, at.node(t));
                }
            }
        }
    }
    Ok((chosen, placement))
}

/// The domains a hard-topology preemptor may be placed in, by tier, lowest first (each tier's
/// in tree order): every domain of an allowed tier, or, when members already hold nodes, the
/// domains of an allowed tier holding all of them. `None` when the job has no hard rule over
/// real tiers (no rule, a soft one, one that allows the cluster root, or one that cannot be
/// resolved: the probe says why); then the search is not by domain.
fn hard_domains(ssn: &mut Session, job: usize) -> Option<(Arc<TopologyTree>, Vec<Vec<u32>>)> {
    let topo = ssn.state.jobs[job]
        .topology
        .clone()
        .filter(|t| t.required)?;
    let tree = ssn.topology_tree(&topo.source);
    let allowed = topo.allowed_tier(&tree).ok()?;
    if tree.is_empty() || allowed >= tree.root_tier() {
        return None;
    }
    let held = crate::topology::held_nodes(ssn, job);
    let eligible: Vec<u32> = if held.is_empty() {
        (0..tree.domains.len() as u32).collect()
    } else {
        tree.smallest_holding(&held)
            .map(|a| tree.ancestors(a))
            .unwrap_or_default()
    };
    let mut tiers: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for d in eligible {
        let tier = tree.domains[d as usize].tier;
        if tier <= allowed {
            tiers.entry(tier).or_default().push(d);
        }
    }
    for list in tiers.values_mut() {
        list.sort_unstable();
    }
    Some((tree, tiers.into_values().collect()))
}

/// What emptying a domain costs, compared as the action ranks units, applied to the set: the
/// highest priority evicted, then the GPUs, then the pods evicted (lower is cheaper).
fn domain_cost(ssn: &Session, chosen: &[(&Unit, Vec<(usize, TaskStatus)>)]) -> (i32, i64, usize) {
    let mut priority = i32::MIN;
    let mut gpus = 0i64;
    let mut pods = 0usize;
    for (unit, taken) in chosen {
        priority = priority.max(unit.priority);
        for &(t, _) in taken {
            gpus += ssn.state.tasks[t].request.get(GPU);
            pods += 1;
        }
    }
    (priority, gpus, pods)
}

/// A hard-topology preemptor's search: victims inside one domain it may use. Tier by tier,
/// lowest first (as allocate tries tiers), each domain of the tier is searched on its own —
/// the candidate units with a member on its nodes, in the action's order, taken until the
/// gang fits inside that domain, then pruned — and the cheapest domain to empty enough
/// ([`domain_cost`]; ties: the first in tree order) is the one evicted from. A unit with no
/// member in the domain is never taken, so nothing is evicted where the gang cannot go.
#[allow(clippy::too_many_arguments)]
fn search_domains(
    ssn: &mut Session,
    job: usize,
    mode: Mode,
    need: &Resources,
    at: &At,
    candidates: &[&Unit],
    tree: &TopologyTree,
    tiers: Vec<Vec<u32>>,
) -> Searched {
    let sieve = Sieve {
        requests: Vec::new(),
    };
    let mut in_domain = vec![false; ssn.state.nodes.len()];
    // Per node, the candidates (by rank) with a member on it: a domain's candidates are read
    // off its nodes, not found by scanning every candidate for every domain.
    let mut on_node: Vec<Vec<usize>> = vec![Vec::new(); ssn.state.nodes.len()];
    for (rank, u) in candidates.iter().enumerate() {
        for &t in &u.tasks {
            if let Some(list) = at.node(t).and_then(|n| on_node.get_mut(n)) {
                if list.last() != Some(&rank) {
                    list.push(rank);
                }
            }
        }
    }
    for domains in tiers {
        // (cost, domain, victim units with their tasks, placement)
        type Best<'u> = (
            (i32, i64, usize),
            u32,
            Vec<(&'u Unit, Vec<usize>)>,
            Vec<(usize, usize)>,
        );
        let mut best: Option<Best> = None;
        for d in domains {
            let nodes = &tree.domains[d as usize].nodes;
            for &n in nodes {
                in_domain[n as usize] = true;
            }
            let inside = |t: usize| at.node(t).is_some_and(|n| in_domain[n]);
            let mut ranks: Vec<usize> = nodes
                .iter()
                .flat_map(|&n| on_node[n as usize].iter().copied())
                .collect();
            ranks.sort_unstable();
            ranks.dedup();
            let mine: Vec<&Unit> = ranks.into_iter().map(|r| candidates[r]).collect();
            // What is free in the domain, and all that taking every unit could free there:
            // the gang's resources must fit in the latter for a search to be worth it.
            let mut free = Resources::new();
            for &n in nodes {
                free.add(&room(ssn, n as usize));
            }
            let mut most = free.clone();
            for u in &mine {
                for &t in u.tasks.iter().filter(|&&t| inside(t) && victimable(ssn, t)) {
                    most.add(&ssn.state.tasks[t].request);
                }
            }
            for &n in nodes {
                in_domain[n as usize] = false;
            }
            if mine.is_empty() || !need.fits_in(&most) {
                continue;
            }
            ssn.topology_within = Some(d);
            let found = choose(ssn, job, mode, need, at, mine, &sieve, free);
            ssn.topology_within = None;
            let Ok((chosen, placement)) = found else {
                continue;
            };
            let cost = domain_cost(ssn, &chosen);
            let units = chosen
                .iter()
                .map(|(u, taken)| (*u, taken.iter().map(|&(t, _)| t).collect()))
                .collect();
            for (_, taken) in chosen.into_iter().rev() {
                for (t, prev) in taken.into_iter().rev() {
                    give_back(ssn, t, at.node(t), prev);
                }
            }
            if best.as_ref().is_none_or(|b| cost < b.0) {
                best = Some((cost, d, units, placement));
            }
        }
        if let Some((_, d, units, placement)) = best {
            let mut chosen = Vec::new();
            let mut victim_jobs = BTreeSet::new();
            for (unit, tasks) in units {
                let taken = tasks
                    .iter()
                    .map(|&t| (t, take(ssn, t, at.node(t))))
                    .collect();
                victim_jobs.insert(unit.job);
                chosen.push((unit, taken));
            }
            let domain = &tree.domains[d as usize];
            let name = match ssn.state.jobs[job]
                .topology
                .as_ref()
                .and_then(|t| t.label_key())
            {
                Some(key) => format!("{key} domain {}", domain.name),
                None => format!("HyperNode {} (tier {})", domain.name, domain.tier),
            };
            commit(ssn, job, mode, chosen, placement, Some(name));
            return Searched::Evicted(victim_jobs);
        }
    }
    Searched::NoFit
}

/// What the preemptor's members could use, to tell units that cannot change where its gang
/// goes.
struct Sieve {
    /// The distinct requests of the preemptor's pending members; empty when a unit's effect
    /// on the gang is not confined to the resources of the unit's own nodes (inter-pod
    /// terms, volumes, a topology or sub-groups on the preemptor's side, or its queue's quota within
    /// reach), so no unit is ever found idle.
    requests: Vec<Resources>,
}

impl Sieve {
    /// `need`: what the gang's members still needed hold ([`gang_need`]).
    fn new(ssn: &mut Session, job: usize, need: &Resources) -> Self {
        let off = Sieve {
            requests: Vec::new(),
        };
        let st = &ssn.state;
        if st.jobs[job].topology.is_some() || !st.sub_groups[job].is_empty() {
            return off;
        }
        let mut requests: Vec<Resources> = Vec::new();
        let mut kinds: Vec<usize> = Vec::new();
        for t in st.pending_tasks(job) {
            let spec = &st.tasks[t].spec;
            // DRA claims: whether a unit's devices serve the gang is the allocator's call.
            if !spec.pods.is_empty() || !spec.volumes.is_empty() || st.tasks[t].claims.is_some() {
                return off;
            }
            if !requests.contains(&st.tasks[t].request) {
                requests.push(st.tasks[t].request.clone());
                kinds.push(t);
            }
        }
        // Taking a unit of the preemptor's own queue (preempt) gives the queue room: with its
        // quota in reach, a unit on nodes the gang cannot use may still be what lets it in.
        // The quota is out of reach when one more member of each kind passes it on top of
        // the whole gang, with no unit taken.
        let q = st.job_queue[job];
        ssn.state.charge_queue(q, need);
        let spare = kinds.iter().all(|&t| ssn.allocatable(t).is_ok());
        ssn.state.discharge_queue(q, need);
        if !spare {
            return off;
        }
        Sieve { requests }
    }

    /// Whether a search may set aside the unit of victim `tasks` (not taken): on each of their
    /// nodes no member would fit even with them and every unit set aside there gone, and
    /// they carry no inter-pod terms.
    fn sets_aside(&self, ssn: &Session, at: &At, tasks: &[usize], aside: &SetAside) -> bool {
        if self.requests.is_empty() {
            return false;
        }
        let st = &ssn.state;
        let mut freed: BTreeMap<usize, Resources> = BTreeMap::new();
        for &t in tasks {
            if !st.tasks[t].spec.pods.is_empty() {
                return false;
            }
            let Some(n) = at.node(t) else {
                continue;
            };
            freed.entry(n).or_default().add(&st.tasks[t].request);
        }
        let none = Resources::new();
        freed.into_iter().all(|(n, room)| {
            let pending = aside.on_node.get(&n).map_or(&none, |(p, _)| p);
            !self.usable_with(ssn, n, &room, pending)
        })
    }

    /// Whether a member could go on node `n` were the units set aside there gone.
    fn usable(&self, ssn: &Session, n: usize, aside: &SetAside) -> bool {
        match aside.on_node.get(&n) {
            Some((pending, _)) if !pending.is_empty() => {
                self.usable_with(ssn, n, pending, &Resources::new())
            }
            _ => false,
        }
    }

    /// Whether some member fits on node `n` (Ready) with `more` and `also` freed there.
    fn usable_with(&self, ssn: &Session, n: usize, more: &Resources, also: &Resources) -> bool {
        let node = &ssn.state.nodes[n];
        if !node.ready {
            return false;
        }
        let left = |name: &str| {
            node.allocatable.get(name) - node.used.get(name) + more.get(name) + also.get(name)
        };
        // As `Resources::fits_in`: cpu and memory always, other resources the member asks for.
        let (cpu, memory) = (left(CPU), left(MEMORY));
        self.requests.iter().any(|r| {
            r.cpu <= cpu
                && r.memory <= memory
                && r.iter()
                    .filter(|&(name, _)| name != CPU && name != MEMORY)
                    .all(|(name, v)| v <= left(name))
        })
    }

    /// Whether `taken` (victim tasks now taken off their nodes) cannot matter to the gang:
    /// on each of their nodes no member fits even with them gone, and they carry no
    /// inter-pod terms (whose reach goes beyond their node). Given back, they leave every
    /// node the gang could use exactly as it is, so a probe places it exactly as now.
    fn idle_for(&self, ssn: &Session, at: &At, taken: &[(usize, TaskStatus)]) -> bool {
        if self.requests.is_empty() {
            return false;
        }
        let st = &ssn.state;
        let none = Resources::new();
        taken.iter().all(|&(t, _)| {
            if !st.tasks[t].spec.pods.is_empty() {
                return false;
            }
            at.node(t)
                .is_none_or(|n| !self.usable_with(ssn, n, &none, &none))
        })
    }
}

/// Units a search passed over without taking them: on nodes the preemptor's members could not
/// use even with them gone (see [`Sieve::sets_aside`]). They count as taken (budgets are
/// charged, reclaim's share counts them gone, later units leave their tasks out), so the
/// search decides exactly as if it had taken them — taking them changes nothing a probe sees, and the pruning pass would give
/// every one of them back — without the cost: on a cluster over-committed by earlier
/// preemptions most units are such. When a unit taken later makes one of their nodes usable,
/// every unit set aside there is taken at once (together they may free what one does not).
#[derive(Debug)]
struct SetAside<'a> {
    at: &'a At,
    /// (rank among the candidates, unit, the tasks it set aside).
    units: Vec<(usize, &'a Unit, Vec<usize>)>,
    /// Tasks set aside and not taken since, with their node.
    tasks: HashMap<usize, Option<usize>>,
    /// Per node: Σ requests of its tasks set aside, and the units (index in `units`) with
    /// tasks there.
    on_node: HashMap<usize, (Resources, Vec<usize>)>,
    /// Per victim queue: Σ requests of its tasks set aside.
    by_queue: HashMap<usize, Resources>,
    /// Per victim job: its units set aside (index in `units`).
    by_job: HashMap<usize, Vec<usize>>,
}

impl<'a> SetAside<'a> {
    fn new(at: &'a At) -> Self {
        SetAside {
            at,
            units: Vec::new(),
            tasks: HashMap::new(),
            on_node: HashMap::new(),
            by_queue: HashMap::new(),
            by_job: HashMap::new(),
        }
    }

    fn add(&mut self, ssn: &Session, rank: usize, unit: &'a Unit, tasks: &[usize]) {
        let index = self.units.len();
        let mut mine = Vec::new();
        for &t in tasks {
            let node = self.at.node(t);
            let request = &ssn.state.tasks[t].request;
            self.tasks.insert(t, node);
            if let Some(n) = node {
                let (pending, units) = self.on_node.entry(n).or_default();
                pending.add(request);
                if units.last() != Some(&index) {
                    units.push(index);
                }
            }
            self.by_queue
                .entry(ssn.state.job_queue[ssn.state.tasks[t].job])
                .or_default()
                .add(request);
            mine.push(t);
        }
        self.by_job.entry(unit.job).or_default().push(index);
        self.units.push((rank, unit, mine));
    }

    /// [`take_into`], forgetting `task` as set aside.
    fn take_into(&mut self, ssn: &mut Session, task: usize, free: &mut Resources) -> TaskStatus {
        if let Some(node) = self.tasks.remove(&task) {
            let request = &ssn.state.tasks[task].request;
            if let Some((pending, _)) = node.and_then(|n| self.on_node.get_mut(&n)) {
                pending.sub(request);
            }
            let q = ssn.state.job_queue[ssn.state.tasks[task].job];
            if let Some(sum) = self.by_queue.get_mut(&q) {
                sum.sub(request);
            }
        }
        take_into(ssn, self.at, task, free)
    }

    /// The units set aside with tasks on node `n`.
    fn on_node(&self, n: usize) -> Vec<usize> {
        self.on_node
            .get(&n)
            .map(|(_, units)| units.clone())
            .unwrap_or_default()
    }

    /// The units of victim job `v` set aside and not taken since.
    fn of_job(&self, v: usize) -> Vec<usize> {
        self.by_job
            .get(&v)
            .map(|units| {
                units
                    .iter()
                    .copied()
                    .filter(|&u| self.units[u].2.iter().any(|t| self.tasks.contains_key(t)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Takes units (indices in `units`) set aside: all their tasks not taken yet, wherever
    /// they are.
    fn take_units(
        &mut self,
        ssn: &mut Session,
        units: &[usize],
        free: &mut Resources,
    ) -> Vec<Chosen<'a>> {
        let mut out = Vec::new();
        for &u in units {
            let (rank, unit) = (self.units[u].0, self.units[u].1);
            let tasks: Vec<usize> = self.units[u]
                .2
                .iter()
                .copied()
                .filter(|t| self.tasks.contains_key(t))
                .collect();
            if tasks.is_empty() {
                continue;
            }
            let taken = tasks
                .into_iter()
                .map(|t| (t, self.take_into(ssn, t, free)))
                .collect();
            out.push((rank, unit, taken));
        }
        out
    }

    /// `free` as it would be with every unit set aside taken too.
    fn room_with(&self, ssn: &Session, free: &Resources) -> Resources {
        let mut out = free.clone();
        for (&n, (pending, _)) in &self.on_node {
            if pending.is_empty() || !ssn.state.nodes[n].ready {
                continue;
            }
            let node = &ssn.state.nodes[n];
            out.sub(&room(ssn, n));
            let mut after = node.idle();
            after.add(pending);
            for (r, v) in after.iter() {
                if v > 0 {
                    out.add_named(r, v);
                }
            }
        }
        out
    }
}

/// Whether victim job `v` keeps either none of its members or at least `minMember`.
fn gang_whole_or_enough(ssn: &Session, v: usize) -> bool {
    let ready = ssn.state.ready_count(v);
    ready == 0 || ready >= ssn.state.jobs[v].min_member
}

/// Makes the decision stick: victims evicted (they still hold their nodes while they
/// terminate), budgets charged, the preemptor's members held and nominated where the search
/// placed them.
fn commit(
    ssn: &mut Session,
    job: usize,
    mode: Mode,
    chosen: Vec<(&Unit, Vec<(usize, TaskStatus)>)>,
    placement: Vec<(usize, usize)>,
    domain: Option<String>,
) {
    let mut victims = Vec::new();
    let mut lines = Vec::new();
    for (unit, taken) in &chosen {
        let v = &ssn.state.jobs[unit.job];
        let whole = unit.whole && unit.tasks.len() > 1;
        lines.push(format!(
            "{} ({} pod{}{}, priority {}, queue {}, {} GPU)",
            v.id,
            taken.len(),
            if taken.len() == 1 { "" } else { "s" },
            if whole { ", the whole gang" } else { "" },
            v.priority,
            v.queue,
            caldera_model::resources::format_value(GPU, unit.gpus),
        ));
        for &(t, _) in taken {
            victims.push(t);
        }
    }
    for &t in &victims {
        // Terminating victims keep their node for their grace period: they stay off it (as
        // taken) until the action ends ([`Leaving`]), and are back on it after.
        if let Some(b) = ssn.state.tasks[t].budget {
            if let Some(left) = ssn.state.budget_left.get_mut(b as usize) {
                *left = left.saturating_sub(1);
            }
        }
    }
    for &(t, n) in &placement {
        reserve::hold(ssn, t, n);
        let node = ssn.state.nodes[n].name.clone();
        ssn.nominations.push((t, Some(node)));
    }
    *ssn.stats.victims.entry(mode.name()).or_insert(0) += victims.len() as u64;
    let order = match mode {
        Mode::Preempt => {
            "lowest priority first, then fewest GPUs, fewest pods, most recently started"
        }
        Mode::Reclaim => "lowest priority first, then most recently started, fewest GPUs",
    };
    let why = if lines.is_empty() {
        format!(
            "{} evicts nothing: all {} needed members fit in room that pods still terminating will free, held for them",
            mode.name(),
            placement.len(),
        )
    } else {
        let inside = match &domain {
            Some(d) => format!(
                " inside {d}, the cheapest domain of the lowest tier its topology allows to empty enough (highest priority evicted, then GPUs, then pods)"
            ),
            None => String::new(),
        };
        format!(
        "{} evicts {}; chosen as the cheapest units that let all {} needed members fit{inside} ({order}; units a PodDisruptionBudget would refuse are never taken; units the gang fits without were given back)",
        mode.name(),
        lines.join(", "),
        placement.len(),
    )
    };
    ssn.preemptions.push(Preemption {
        action: mode.name(),
        job,
        victims,
        placement,
        why,
    });
}

/// What evicting could free, for admission: the free capacity, and what the jobs that could
/// be victims hold, summed by queue and priority. Built once per enqueue (nothing it counts
/// changes while jobs are admitted).
#[derive(Debug)]
pub struct Evictable {
    free: Resources,
    /// Per queue: its jobs' evictable requests by priority, ascending, each with the running
    /// sum of the entries up to it.
    by_queue: Vec<Vec<(i32, Resources)>>,
    /// Per queue: all its jobs hold, when reclaim may take from it (reclaimable and above
    /// its deserved share).
    reclaimable: Vec<Option<Resources>>,
    /// Σ of `reclaimable`.
    reclaimable_total: Resources,
}

impl Evictable {
    /// Sums what every job's victimable members hold.
    pub fn new(ssn: &Session) -> Self {
        let st = &ssn.state;
        let queues = st.queues.len();
        let mut by_priority: Vec<BTreeMap<i32, Resources>> = vec![BTreeMap::new(); queues];
        let mut held = vec![Resources::new(); queues];
        for (v, job) in st.jobs.iter().enumerate() {
            let mut r = Resources::new();
            for &t in &job.tasks {
                if victimable(ssn, t) && holds_node(&st.tasks[t]) {
                    r.add(&st.tasks[t].request);
                }
            }
            let vq = st.job_queue[v];
            held[vq].add(&r);
            by_priority[vq].entry(job.priority).or_default().add(&r);
        }
        let by_queue = by_priority
            .into_iter()
            .map(|m| {
                let mut sum = Resources::new();
                m.into_iter()
                    .map(|(p, r)| {
                        sum.add(&r);
                        (p, sum.clone())
                    })
                    .collect()
            })
            .collect();
        let reclaim = ssn.eviction.reclaim && ssn.eviction.preemptive;
        let reclaimable: Vec<Option<Resources>> = held
            .into_iter()
            .enumerate()
            .map(|(q, r)| {
                let over = st.queues[q].reclaimable
                    && ssn
                        .deserved(q)
                        .is_some_and(|d| !st.queue_allocated[q].fits_in(&d));
                (reclaim && over).then_some(r)
            })
            .collect();
        let mut reclaimable_total = Resources::new();
        for r in reclaimable.iter().flatten() {
            reclaimable_total.add(r);
        }
        Evictable {
            free: free_capacity(ssn),
            by_queue,
            reclaimable,
            reclaimable_total,
        }
    }
}

/// Whether `job`, refused at enqueue because the cluster is full, could run by evicting:
/// the free capacity plus what its possible victims hold covers its minimum. Admission then
/// lets preempt or reclaim find the actual victims. `evictable` is built on first use.
pub fn could_run_by_evicting(ssn: &Session, job: usize, evictable: &mut Option<Evictable>) -> bool {
    let st = &ssn.state;
    if st.jobs[job].phase() != PodGroupPhase::Pending
        || st.jobs[job]
            .tasks
            .iter()
            .any(|&t| st.tasks[t].never_preempts)
    {
        return false;
    }
    let need = match &st.jobs[job].min_resources {
        Some(r) => r.clone(),
        None => return false,
    };
    let e = evictable.get_or_insert_with(|| Evictable::new(ssn));
    let q = st.job_queue[job];
    let mut room = e.free.clone();
    if ssn.eviction.preempt {
        // Jobs of its queue with a lower priority.
        let lower = &e.by_queue[q];
        let below = lower.partition_point(|(p, _)| *p < st.jobs[job].priority);
        if below > 0 {
            room.add(&lower[below - 1].1);
        }
    }
    // Jobs of other queues reclaim may take from.
    room.add(&e.reclaimable_total);
    if let Some(own) = &e.reclaimable[q] {
        room.sub(own);
    }
    need.fits_in(&room)
}
