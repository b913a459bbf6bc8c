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
//! **After.** Victims stay on their nodes (they terminate for their grace period); the
//! preemptor's members are held at the nodes the search placed them on
//! ([`crate::reserve`]) and nominated there. A preemptor with room held is not planned again
//! while it waits.

use crate::attempt::probe;
use crate::reserve;
use crate::session::Session;
use crate::state::{holds_node, Holdup};
use caldera_model::{PodGroupPhase, Resources, TaskStatus, Time};
use std::collections::{BTreeMap, BTreeSet};

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
    tasks: Vec<usize>,
    priority: i32,
    gpus: i64,
    started: Time,
    /// Every bound member of the gang (not one surplus member).
    whole: bool,
}

fn victimable(ssn: &Session, task: usize) -> bool {
    let t = &ssn.state.tasks[task];
    matches!(t.status, TaskStatus::Bound | TaskStatus::Running) && !t.critical
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
    let unit = |tasks: Vec<usize>, whole: bool| {
        let mut request = Resources::new();
        let mut started = Time(i64::MIN);
        for &t in &tasks {
            request.add(&st.tasks[t].request);
            started = started.max(st.tasks[t].started);
        }
        Unit {
            job: v,
            gpus: request.get(GPU),
            priority: job.priority,
            started,
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
            out.push(unit(vec![t], false));
        }
    }
    out.push(unit(bound, true));
    out
}

/// Takes `task` off its node for the search (as if gone).
fn take(ssn: &mut Session, task: usize) -> TaskStatus {
    for s in ssn.slots.iter_mut().rev() {
        s.plugin.on_deallocate(&ssn.state, task);
    }
    let st = &mut ssn.state;
    let node = st.tasks[task].node.clone();
    let node = node.as_deref().and_then(|n| st.node_index(n));
    let t = &mut st.tasks[task];
    let prev = t.status;
    t.status = TaskStatus::Releasing;
    let (req, job) = (t.request.clone(), t.job);
    let ports = t.spec.host_ports.clone();
    if let Some(n) = node {
        st.nodes[n].remove_pod(&req, &ports);
    }
    st.job_runs[job].allocated.sub(&req);
    if prev.is_ready() {
        st.job_runs[job].ready -= 1;
    }
    let q = st.job_queue[job];
    st.queue_allocated[q].sub(&req);
    if let Some(n) = node {
        ssn.touch_nodes(&[n as u32]);
    }
    prev
}

/// Undoes [`take`].
fn give_back(ssn: &mut Session, task: usize, prev: TaskStatus) {
    let st = &mut ssn.state;
    let node = st.tasks[task].node.clone();
    let node = node.as_deref().and_then(|n| st.node_index(n));
    let t = &mut st.tasks[task];
    t.status = prev;
    let (req, job) = (t.request.clone(), t.job);
    let ports = t.spec.host_ports.clone();
    if let Some(n) = node {
        st.nodes[n].add_pod(&req, &ports);
    }
    st.job_runs[job].allocated.add(&req);
    if prev.is_ready() {
        st.job_runs[job].ready += 1;
    }
    let q = st.job_queue[job];
    st.queue_allocated[q].add(&req);
    if let Some(n) = node {
        ssn.touch_nodes(&[n as u32]);
    }
    for s in &mut ssn.slots {
        s.plugin.on_allocate(&ssn.state, task);
    }
}

/// Whether queue `q` may give up `unit` and keep a share (max over resources of allocated /
/// deserved) of at least 1: on some resource the unit holds, what stays is still at or above
/// the queue's deserved amount.
fn stays_at_share(ssn: &Session, q: usize, unit: &Resources) -> bool {
    let Some(deserved) = ssn.deserved(q) else {
        return false;
    };
    let allocated = &ssn.state.queue_allocated[q];
    unit.iter()
        .any(|(r, v)| v > 0 && deserved.get(r) > 0 && allocated.get(r) - v >= deserved.get(r))
}

/// Whether `queue` is below its deserved share enough to take `need` more.
fn below_share(ssn: &Session, q: usize, need: &Resources) -> bool {
    let Some(deserved) = ssn.deserved(q) else {
        return false;
    };
    let allocated = &ssn.state.queue_allocated[q];
    need.iter()
        .all(|(r, v)| allocated.get(r) + v <= deserved.get(r))
}

/// The request of the members `job` still needs to be ready.
fn gang_need(ssn: &Session, job: usize) -> Resources {
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
        .iter()
        .map(|r| ssn.state.job_queue[ssn.state.tasks[r.task].job])
        .collect();
    for p in ssn.preemptions.iter().filter(|p| p.action == "reclaim") {
        out.insert(ssn.state.job_queue[p.job]);
    }
    out
}

/// The candidate units for `job` under `mode`, cheapest first.
fn candidates(ssn: &Session, job: usize, mode: Mode) -> Vec<Unit> {
    let st = &ssn.state;
    let q = st.job_queue[job];
    let protected = match mode {
        Mode::Reclaim => protected_queues(ssn),
        Mode::Preempt => BTreeSet::new(),
    };
    let mut units = Vec::new();
    for v in 0..st.jobs.len() {
        if v == job || !st.jobs[v].tasks.iter().any(|&t| victimable(ssn, t)) {
            continue;
        }
        let vq = st.job_queue[v];
        let eligible = match mode {
            Mode::Preempt => vq == q && st.jobs[v].priority < st.jobs[job].priority,
            Mode::Reclaim => vq != q && st.queues[vq].reclaimable && !protected.contains(&vq),
        };
        if eligible {
            units.extend(units_of(ssn, v));
        }
    }
    let key = |u: &Unit| {
        let first = &st.tasks[u.tasks[0]];
        (first.namespace.clone(), first.name.clone(), u.tasks.len())
    };
    match mode {
        Mode::Preempt => units.sort_by(|a, b| {
            a.priority
                .cmp(&b.priority)
                .then(a.gpus.cmp(&b.gpus))
                .then(a.tasks.len().cmp(&b.tasks.len()))
                .then(b.started.cmp(&a.started))
                .then_with(|| key(a).cmp(&key(b)))
        }),
        Mode::Reclaim => units.sort_by(|a, b| {
            a.priority
                .cmp(&b.priority)
                .then(b.started.cmp(&a.started))
                .then(a.gpus.cmp(&b.gpus))
                .then(a.tasks.len().cmp(&b.tasks.len()))
                .then_with(|| key(a).cmp(&key(b)))
        }),
    }
    units
}

/// Σ idle over Ready nodes.
fn free_capacity(ssn: &Session) -> Resources {
    let mut r = Resources::new();
    for n in ssn.state.nodes.iter().filter(|n| n.ready) {
        r.add(&n.idle());
    }
    r
}

/// Whether a job may start evicting: admitted, valid, not yet ready, members pending, no room
/// held for it already, not stopped by its queue's limits, and not `preemptionPolicy: Never`.
fn starving(ssn: &Session, job: usize) -> bool {
    let st = &ssn.state;
    let run = &st.job_runs[job];
    run.admitted
        && run.invalid.is_none()
        && matches!(run.holdup, None | Some(Holdup::Fit(_)))
        && st.pending_tasks(job).next().is_some()
        && !ssn.job_ready(job)
        && !st.pending_tasks(job).any(|t| st.tasks[t].never_preempts)
        && !reserve::waiting(ssn, job)
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
    let mut jobs: Vec<usize> = (0..ssn.state.jobs.len())
        .filter(|&j| starving(ssn, j))
        .collect();
    jobs.sort_by(|&a, &b| {
        let (qa, qb) = (ssn.state.job_queue[a], ssn.state.job_queue[b]);
        ssn.queue_order(qa, qb).then_with(|| ssn.job_order(a, b))
    });
    for job in jobs {
        if !starving(ssn, job) {
            continue;
        }
        let need = gang_need(ssn, job);
        if mode == Mode::Reclaim {
            let q = ssn.state.job_queue[job];
            if ssn.overused(q) || !below_share(ssn, q, &need) {
                continue;
            }
        }
        let result = search(ssn, job, mode, &need);
        let outcome = if result { "evicted" } else { "no_victims" };
        *ssn.stats.preemption_attempts.entry(outcome).or_insert(0) += 1;
    }
}

/// Searches victims for `job`; on success evicts them and holds the room. Returns whether it
/// evicted.
fn search(ssn: &mut Session, job: usize, mode: Mode, need: &Resources) -> bool {
    let units = candidates(ssn, job, mode);
    if units.is_empty() {
        return false;
    }
    let mut free = free_capacity(ssn);
    let mut spent: BTreeMap<u32, u32> = BTreeMap::new();
    // Chosen units: (index into `units`, the tasks taken and their previous status).
    let mut chosen: Vec<(usize, Vec<(usize, TaskStatus)>)> = Vec::new();
    let mut placement = None;
    for (i, unit) in units.iter().enumerate() {
        let tasks: Vec<usize> = unit
            .tasks
            .iter()
            .copied()
            .filter(|&t| victimable(ssn, t))
            .collect();
        if tasks.is_empty() {
            continue; // taken already as part of another unit
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
            let mut req = Resources::new();
            for &t in &tasks {
                req.add(&ssn.state.tasks[t].request);
            }
            let vq = ssn.state.job_queue[unit.job];
            if !stays_at_share(ssn, vq, &req) {
                continue;
            }
        }
        for (b, n) in want {
            *spent.entry(b).or_insert(0) += n;
        }
        let taken: Vec<(usize, TaskStatus)> = tasks.iter().map(|&t| (t, take(ssn, t))).collect();
        for &(t, _) in &taken {
            free.add(&ssn.state.tasks[t].request);
        }
        chosen.push((i, taken));
        if need.fits_in(&free) {
            if let Some(p) = probe(ssn, job) {
                placement = Some(p);
                break;
            }
        }
    }
    let Some(mut placement) = placement else {
        for (_, taken) in chosen.into_iter().rev() {
            for (t, prev) in taken.into_iter().rev() {
                give_back(ssn, t, prev);
            }
        }
        return false;
    };
    // Pruning: give back every unit the gang fits without, most expensive first — unless
    // that would leave a victim gang with 0 < members < minMember (a surplus member given
    // back while the rest of its gang goes).
    let mut k = chosen.len();
    while k > 0 && chosen.len() > 1 {
        k -= 1;
        let (_, taken) = &chosen[k];
        let taken = taken.clone();
        for &(t, prev) in taken.iter().rev() {
            give_back(ssn, t, prev);
        }
        let victim = units[chosen[k].0].job;
        let fits = if gang_whole_or_enough(ssn, victim) {
            probe(ssn, job)
        } else {
            None
        };
        match fits {
            Some(p) => {
                placement = p;
                chosen.remove(k);
            }
            None => {
                for &(t, _) in &taken {
                    take(ssn, t);
                }
            }
        }
    }
    commit(ssn, job, mode, &units, chosen, placement);
    true
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
    units: &[Unit],
    chosen: Vec<(usize, Vec<(usize, TaskStatus)>)>,
    placement: Vec<(usize, usize)>,
) {
    let mut victims = Vec::new();
    let mut lines = Vec::new();
    for (i, taken) in &chosen {
        let unit = &units[*i];
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
        // Terminating victims keep their node for their grace period.
        let task = &ssn.state.tasks[t];
        let (req, ports) = (task.request.clone(), task.spec.host_ports.clone());
        let budget = task.budget;
        if let Some(n) = task.node.as_deref().and_then(|n| ssn.state.node_index(n)) {
            ssn.state.nodes[n].add_pod(&req, &ports);
            ssn.touch_nodes(&[n as u32]);
        }
        if let Some(b) = budget {
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
    let why = format!(
        "{} evicts {}; chosen as the cheapest units that let all {} needed members fit ({order}; units a PodDisruptionBudget would refuse are never taken; units the gang fits without were given back)",
        mode.name(),
        lines.join(", "),
        placement.len(),
    );
    ssn.preemptions.push(Preemption {
        action: mode.name(),
        job,
        victims,
        placement,
        why,
    });
}

/// Whether `job`, refused at enqueue because the cluster is full, could run by evicting:
/// the free capacity plus what its possible victims hold covers its minimum. Admission then
/// lets preempt or reclaim find the actual victims.
pub fn could_run_by_evicting(ssn: &Session, job: usize) -> bool {
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
    let q = st.job_queue[job];
    let mut room = free_capacity(ssn);
    for (v, other) in st.jobs.iter().enumerate() {
        let vq = st.job_queue[v];
        let by_preempt = ssn.eviction.preempt && vq == q && other.priority < st.jobs[job].priority;
        let by_reclaim = ssn.eviction.reclaim
            && ssn.eviction.preemptive
            && vq != q
            && st.queues[vq].reclaimable
            && ssn
                .deserved(vq)
                .is_some_and(|d| !st.queue_allocated[vq].fits_in(&d));
        if !(by_preempt || by_reclaim) {
            continue;
        }
        for &t in &other.tasks {
            if victimable(ssn, t) && holds_node(&st.tasks[t]) {
                room.add(&st.tasks[t].request);
            }
        }
    }
    need.fits_in(&room)
}
