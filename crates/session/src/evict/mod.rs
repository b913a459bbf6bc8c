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
//!
//! **Files.** `units`: who may be a victim and the ranking; `search`: one preemptor's search
//! and its commit; `domains`: a hard-topology preemptor's search, domain by domain; `sieve`:
//! pruning without probes; `room`: taking units off through the trackers and giving them
//! back, terminating pods, free room. Here: the action's loop ([`run`]), who is starving, and
//! [`could_run_by_evicting`].

use crate::attempt::probe;
use crate::reserve;
use crate::session::Session;
use crate::state::{holds_node, Holdup};
use crate::track::Hold;
use caldera_model::resources::{CPU, MEMORY};
use caldera_model::{PodGroupPhase, Resources, TaskStatus, Time, TopologyTree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub mod decision;
mod domains;
mod room;
mod search;
mod sieve;
mod units;

pub use decision::{Preemption, Switches};
use domains::*;
pub(crate) use room::*;
use search::*;
use sieve::*;
pub(crate) use units::*;

/// The resource that counts as a GPU when ranking units.
pub const GPU: &str = "nvidia.com/gpu";

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

/// The request of the members `job` still needs to be ready.
pub(crate) fn gang_need(ssn: &Session, job: usize) -> Resources {
    let st = &ssn.state;
    let need = st.lacking(job) as usize;
    let tasks: Vec<usize> = st.pending_tasks(job).collect();
    let mut out = Resources::new();
    for t in ssn.order_tasks(job, tasks).into_iter().take(need) {
        out.add(&st.tasks[t].request);
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

/// The jobs that may evict now ([`starving_in`], their `preemptionDelay` over), queue by queue
/// in queue order, jobs in job order: the order preempt, reclaim and consolidate serve them in.
pub(crate) fn starving_in_order(ssn: &Session, quota_may_free: bool) -> Vec<usize> {
    let mut jobs: Vec<usize> = (0..ssn.state.jobs.len())
        .filter(|&j| starving_in(ssn, j, quota_may_free) && delay_over(ssn, j))
        .collect();
    jobs.sort_by(|&a, &b| {
        let (qa, qb) = (ssn.state.job_queue[a], ssn.state.job_queue[b]);
        ssn.queue_order(qa, qb).then_with(|| ssn.job_order(a, b))
    });
    jobs
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
    let jobs = starving_in_order(ssn, quota_may_free);
    if jobs.is_empty() {
        return;
    }
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
        let decided = ssn.decisions.preemptions.len();
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
                    if let Some(p) = ssn.decisions.preemptions.last() {
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
                    let none = ssn
                        .decisions
                        .preemptions
                        .last()
                        .is_some_and(|p| p.victims.is_empty());
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
