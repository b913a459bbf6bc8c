//! Consolidation: moving running pods that their controllers re-create, so that a gang that
//! fits the cluster's free capacity in total, but in no allowed placement (fragmentation),
//! can run. See docs/consolidation.md.
//!
//! **What may move.** A *unit* is every bound member of one job (a gang moves whole or not at
//! all; a pod without a group is a job of one). Every member must be ours, bound and not
//! terminating, not critical, re-created by its controller ([`caldera_model::Controller`]:
//! a ReplicaSet, StatefulSet, Job, …), not opted out (`caldera.sh/no-consolidate` on the pod,
//! its PodGroup or its namespace), and started at least `minRuntime` ago — a replacement starts
//! afresh, so no pod moves twice within it. The job's priority is at most the waiting job's,
//! and a PodDisruptionBudget must allow every member's eviction (less what this session already
//! planned).
//!
//! **Proof before eviction.** For a starving job (admitted, valid, no room held) whose need
//! fits the free total: units are taken away virtually until [`probe`] places the job (every
//! predicate and topology rule), units it fits without are given back, the job's members are
//! held where the probe put them, and then every member of every moved unit must be placed on
//! room that is free *now* (any node, every predicate). Only if both succeed are the moves
//! made; otherwise everything is undone and nothing is evicted.
//!
//! **Least disruption.** Units are ranked fewest pods, then fewest GPUs, then most recently
//! started. The search is node by node first: for each node, the cheapest units on it that
//! cover what the job lacks there; nodes are tried cheapest plan first (at most
//! [`NODE_PLANS`]; among plans alike, the node the gang then fills tightest), so a one-node
//! gang on a large cluster costs a handful of probes (a gang spanning nodes then tries the
//! [`CLUSTER_UNITS`] cheapest units cluster-wide). Moved pods go where they fit tightest,
//! so a move fills the smallest holes and leaves big ones for the gangs that need them.
//! `maxPods` and `maxGPUs` bound what one session moves.
//!
//! **Held room.** The waiting job's members are held and nominated as a preemptor's are. The
//! moved pods' replacements have new names, so their room is a [`MoveHold`] (controller uid
//! and slot → node, until `holdTimeout`) kept on the waiting job's PodGroup
//! (`caldera.sh/consolidation`). Each session ([`open`]) a hold counts on its node through
//! the pending replacement that matches it (held there, so it is placed there first), else
//! through the moved pod while it terminates; it is dropped once used (a pod of that slot
//! placed or bound on the node), expired, or its node gone.

pub mod decision;
use crate::attempt::probe;
use crate::evict::{self, At, Leaving, GPU};
use crate::reserve;
use crate::session::Session;
use crate::state::Holdup;
use caldera_config::ConsolidateConfig;
use caldera_model::{MoveHold, MoveHoldWrite, Resources, TaskStatus, Time};
pub use decision::{Consolidation, Hold};
use std::collections::{BTreeMap, BTreeSet};

/// At most this many node plans are probed for one waiting job.
pub const NODE_PLANS: usize = 8;

/// At most this many units (cheapest first) are taken in the cluster-wide plan, each followed
/// by a probe: a gang that needs more moves than that is not served by consolidation.
pub const CLUSTER_UNITS: usize = 32;

/// A movable unit: every bound member of one job.
#[derive(Debug, Clone)]
struct Unit {
    job: usize,
    tasks: Vec<usize>,
    priority: i32,
    gpus: i64,
    started: Time,
}

impl Unit {
    /// Cheapest first: fewest pods, fewest GPUs, most recently started, then by job.
    fn cost(&self) -> (usize, i64, std::cmp::Reverse<Time>, usize) {
        (
            self.tasks.len(),
            self.gpus,
            std::cmp::Reverse(self.started),
            self.job,
        )
    }
}

/// Whether task `t` may be moved by a consolidation at `now`.
fn movable(ssn: &Session, t: usize, min_runtime_ms: i64) -> bool {
    let task = &ssn.state.tasks[t];
    matches!(task.status, TaskStatus::Bound | TaskStatus::Running)
        && !task.critical
        && !task.no_consolidate
        && task.controller.is_some()
        && pinned_claims(task).is_none()
        && ssn.state.now.millis_since(task.started) >= min_runtime_ms
        && !crate::evict::too_young(&ssn.state, t)
}

/// Why `consolidate` never moves job `job`'s pods whatever their state, if it does not: the
/// proof places each moved pod on its own, so a job whose placement obeys rules over the
/// whole gang (a hard topology rule, sub-groups) is not moved: a replacement placed pod by
/// pod could break them. Pods whose DRA claims are made for them (from a template, or the
/// extended-resource bridge's) are not moved either: their allocation pins them to their
/// node, and what the replacement's new claims need is not judged.
pub fn never_moved(ssn: &Session, job: usize) -> Option<String> {
    let j = &ssn.state.jobs[job];
    if j.topology.as_ref().is_some_and(|t| t.required) {
        return Some(
            "its hard topology rule binds the whole gang, which a move proven pod by pod could break"
                .to_string(),
        );
    }
    if !j.sub_group_policies.is_empty() {
        return Some(
            "its sub-groups (subGroupPolicy) bind the gang's members together, which a move proven pod by pod could break"
                .to_string(),
        );
    }
    j.tasks
        .iter()
        .map(|&t| &ssn.state.tasks[t])
        .filter(|t| matches!(t.status, TaskStatus::Bound | TaskStatus::Running))
        .find_map(|t| {
            pinned_claims(t).map(|c| {
                format!(
                    "pod {} has DRA claim {c} made for it, allocated on its node (its replacement's new claim is not judged)",
                    t.key()
                )
            })
        })
}

/// The first claim made for the pod (from a template, or the extended-resource bridge's):
/// allocated for this pod on its node.
fn pinned_claims(task: &caldera_model::Task) -> Option<String> {
    let claims = task.claims.as_deref()?;
    claims
        .claims
        .iter()
        .find(|c| c.from_template)
        .map(|c| c.claim.to_string())
        .or_else(|| claims.extended_claim.as_deref().map(str::to_string))
}

/// The movable units of a session, listed once per action: cheapest first, and per node the
/// units with a member there (in the same order). Moved units are marked gone.
struct Pool {
    units: Vec<Unit>,
    on_node: Vec<Vec<usize>>,
    gone: Vec<bool>,
    /// Per node: the most GPUs one unit there frees on it (bounds how many units a node plan
    /// needs).
    most_gpus: Vec<i64>,
    /// Per node: [`evict::room`], kept current: between searches only a decided move changes
    /// a node.
    rooms: Vec<Resources>,
    /// Σ `rooms`.
    free: Resources,
    /// Some node has more room than when the action started (a move freed more than its job
    /// took).
    grown: bool,
}

impl Pool {
    fn new(ssn: &Session, cfg: &ConsolidateConfig, at: &At) -> Self {
        let units = units(ssn, cfg);
        let mut on_node = vec![Vec::new(); ssn.state.nodes.len()];
        let mut most_gpus = vec![0i64; ssn.state.nodes.len()];
        for (i, u) in units.iter().enumerate() {
            let mut per_node: BTreeMap<usize, i64> = BTreeMap::new();
            for &t in &u.tasks {
                if let Some(n) = at.node(t) {
                    *per_node.entry(n).or_insert(0) += ssn.state.tasks[t].request.get(GPU);
                }
            }
            for (n, g) in per_node {
                on_node[n].push(i);
                most_gpus[n] = most_gpus[n].max(g);
            }
        }
        let gone = vec![false; units.len()];
        let rooms: Vec<Resources> = (0..ssn.state.nodes.len())
            .map(|n| evict::room(ssn, n))
            .collect();
        let mut free = Resources::new();
        for r in &rooms {
            free.add(r);
        }
        Pool {
            units,
            on_node,
            gone,
            most_gpus,
            rooms,
            free,
            grown: false,
        }
    }

    /// Brings the rooms of `nodes` up to date.
    fn refresh(&mut self, ssn: &Session, nodes: impl IntoIterator<Item = usize>) {
        let nodes: BTreeSet<usize> = nodes.into_iter().collect();
        for n in nodes {
            let now = evict::room(ssn, n);
            self.grown |= now.iter().any(|(r, v)| v > self.rooms[n].get(r));
            self.free.sub(&self.rooms[n]);
            self.free.add(&now);
            self.rooms[n] = now;
        }
    }

    /// Whether unit `i` may move for a job of `priority` (other than `job`) within `budget`.
    fn eligible(&self, i: usize, job: usize, priority: i32, budget: &Budget) -> bool {
        let u = &self.units[i];
        !self.gone[i]
            && u.job != job
            && u.priority <= priority
            && u.tasks.len() as u32 <= budget.pods
            && u.gpus <= budget.gpus
    }
}

/// The movable units, cheapest first.
fn units(ssn: &Session, cfg: &ConsolidateConfig) -> Vec<Unit> {
    let min_runtime = i64::try_from(cfg.min_runtime.as_millis()).unwrap_or(i64::MAX);
    let st = &ssn.state;
    let mut out = Vec::new();
    for (v, job) in st.jobs.iter().enumerate() {
        if job.topology.as_ref().is_some_and(|t| t.required) || !job.sub_group_policies.is_empty() {
            // See [`never_moved`].
            continue;
        }
        let mut tasks = Vec::new();
        let mut whole = true;
        for &t in &job.tasks {
            match st.tasks[t].status {
                TaskStatus::Bound | TaskStatus::Running => {
                    if movable(ssn, t, min_runtime) {
                        tasks.push(t);
                    } else {
                        whole = false;
                    }
                }
                // Placed in this session: the gang is not settled.
                TaskStatus::Allocated | TaskStatus::Binding => whole = false,
                _ => {}
            }
        }
        if !whole || tasks.is_empty() {
            continue;
        }
        let mut gpus = 0;
        let mut started = Time(i64::MIN);
        for &t in &tasks {
            gpus += st.tasks[t].request.get(GPU);
            started = started.max(st.tasks[t].started);
        }
        out.push(Unit {
            job: v,
            tasks,
            priority: job.priority,
            gpus,
            started,
        });
    }
    out.sort_by_key(Unit::cost);
    out
}

/// Why consolidation did (not) help a job, for `caldera_consolidation_attempts_total{result}`.
const MOVED: &str = "moved";
const NOT_FRAGMENTED: &str = "not_fragmented";
const NO_MOVE: &str = "no_move";
const NO_ROOM_FOR_MOVED: &str = "no_room_for_moved";
const LIMIT: &str = "limit";
const NO_PODGROUP: &str = "no_podgroup";

/// What the action may still move in this session.
struct Budget {
    pods: u32,
    gpus: i64,
}

/// Runs the `consolidate` action over every starving job, queue by queue in queue order, jobs
/// in job order.
pub fn run(ssn: &mut Session, cfg: &ConsolidateConfig) {
    let jobs = evict::starving_in_order(ssn, false);
    if jobs.is_empty() {
        return;
    }
    let at = At::new(ssn);
    // Room pods already terminating will free counts as free (as for preempt): a move is
    // never made for room that is on its way anyway.
    let mut leaving = Leaving::vacate(ssn, &at);
    let mut pool = Pool::new(ssn, cfg, &at);
    let mut budget = Budget {
        pods: cfg.max_pods,
        gpus: i64::from(cfg.max_gpus),
    };
    for job in jobs {
        if !evict::starving(ssn, job) {
            continue;
        }
        let result = if budget.pods == 0 {
            LIMIT
        } else {
            consolidate_for(ssn, cfg, job, &at, &mut leaving, &mut pool, &mut budget)
        };
        *ssn.stats.consolidation_attempts.entry(result).or_insert(0) += 1;
    }
    leaving.restore(ssn);
}

/// Tries to make room for `job` by moving units of `pool`; the result for the metrics.
fn consolidate_for(
    ssn: &mut Session,
    cfg: &ConsolidateConfig,
    job: usize,
    at: &At,
    leaving: &mut Leaving,
    pool: &mut Pool,
    budget: &mut Budget,
) -> &'static str {
    let j = &ssn.state.jobs[job];
    // Holds are kept on the job's own PodGroup: a pod without one has nowhere to keep them.
    if !j.has_podgroup() || j.native.is_some() {
        return NO_PODGROUP;
    }
    let need = evict::gang_need(ssn, job);
    if !need.fits_in(&pool.free) {
        return NOT_FRAGMENTED;
    }
    // Allocate found no room for it in this session, and since then no room has grown (no pod
    // was terminating, nothing was evicted, no move freed more than its job took): it does
    // not fit now either, and the probe, a full placement search, is saved.
    let unchanged = !pool.grown
        && leaving.is_empty()
        && ssn.decisions.preemptions.is_empty()
        && matches!(ssn.state.job_runs[job].holdup, Some(Holdup::Fit(_)));
    if !unchanged && probe(ssn, job).is_some() {
        // It fits as things are (or once terminating pods are gone): nothing to move.
        return NOT_FRAGMENTED;
    }
    let priority = ssn.state.jobs[job].priority;
    let mut plans = node_plans(ssn, job, priority, &need, at, pool, budget);
    plans.truncate(NODE_PLANS);
    let mut refused_for_room = false;
    let mut tried_all = false;
    let mut k = 0;
    loop {
        let plan = match plans.get(k) {
            Some(p) => p.clone(),
            None if !tried_all => {
                // Cluster-wide, cheapest first: for gangs no one node plan serves.
                tried_all = true;
                (0..pool.units.len())
                    .filter(|&i| pool.eligible(i, job, priority, budget))
                    .take(CLUSTER_UNITS)
                    .collect()
            }
            None => break,
        };
        k += 1;
        if plan.is_empty() {
            continue;
        }
        match try_plan(ssn, cfg, job, at, pool, &plan, budget) {
            Tried::Moved(moved_units) => {
                if let Some(c) = ssn.decisions.consolidations.last() {
                    let touched: Vec<usize> = c
                        .placement
                        .iter()
                        .chain(&c.moved)
                        .map(|&(_, n)| n)
                        .chain(c.moved.iter().filter_map(|&(t, _)| at.node(t)))
                        .collect();
                    pool.refresh(ssn, touched);
                }
                for &i in &moved_units {
                    for &t in &pool.units[i].tasks {
                        leaving.left(at, t);
                    }
                    budget.pods = budget.pods.saturating_sub(pool.units[i].tasks.len() as u32);
                    budget.gpus -= pool.units[i].gpus;
                    pool.gone[i] = true;
                }
                return MOVED;
            }
            Tried::NoRoomForMoved => refused_for_room = true,
            Tried::NoFit => {}
        }
    }
    if refused_for_room {
        NO_ROOM_FOR_MOVED
    } else {
        NO_MOVE
    }
}

/// Per node, the cheapest eligible units on it that cover what `need` lacks in its room,
/// cheapest plan first (then by node). Units are indices into the pool.
fn node_plans(
    ssn: &Session,
    job: usize,
    priority: i32,
    need: &Resources,
    at: &At,
    pool: &Pool,
    budget: &Budget,
) -> Vec<Vec<usize>> {
    type Key = (usize, i64, std::cmp::Reverse<Time>, (i64, i64, i64));
    let mut plans: Vec<(Key, usize, Vec<usize>)> = Vec::new();
    let need_gpus = need.get(GPU);
    // The most pods a plan kept so far takes, once NODE_PLANS are kept: a node whose plan must
    // take more units is not looked at.
    let mut worst = usize::MAX;
    for (n, units) in pool.on_node.iter().enumerate() {
        if units.is_empty() {
            continue;
        }
        let short = need_gpus - pool.rooms[n].get(GPU);
        if short > 0 {
            if pool.most_gpus[n] == 0 {
                continue;
            }
            let fewest = (short + pool.most_gpus[n] - 1) / pool.most_gpus[n];
            if fewest as usize > worst {
                continue;
            }
        }
        let node = &ssn.state.nodes[n];
        if !node.ready || !need.fits_in(&node.allocatable) {
            continue;
        }
        let mut room = pool.rooms[n].clone();
        let mut chosen = Vec::new();
        let (mut pods, mut gpus, mut started) = (0usize, 0i64, Time(i64::MIN));
        for &i in units {
            if need.fits_in(&room) {
                break;
            }
            if !pool.eligible(i, job, priority, budget) {
                continue;
            }
            let u = &pool.units[i];
            if (pods + u.tasks.len()) as u32 > budget.pods || gpus + u.gpus > budget.gpus {
                continue;
            }
            for &t in &u.tasks {
                if at.node(t) == Some(n) {
                    room.add(&ssn.state.tasks[t].request);
                }
            }
            pods += u.tasks.len();
            gpus += u.gpus;
            started = started.max(u.started);
            chosen.push(i);
        }
        if !chosen.is_empty() && need.fits_in(&room) {
            // Of plans alike, the node the gang fills tightest: a big hole stays for a big gang.
            let left = room.minus(need);
            let fit = (left.get(GPU), left.cpu, left.memory);
            plans.push(((pods, gpus, std::cmp::Reverse(started), fit), n, chosen));
            if plans.len() >= 4 * NODE_PLANS {
                plans.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
                plans.truncate(NODE_PLANS);
            }
            if plans.len() >= NODE_PLANS {
                worst = plans.iter().map(|p| p.0 .0).max().unwrap_or(usize::MAX);
            }
        }
    }
    plans.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    plans.into_iter().map(|(_, _, p)| p).collect()
}

enum Tried {
    /// Moves decided: the units moved (indices into `all`).
    Moved(Vec<usize>),
    /// The job would fit, but a moved pod fits nowhere else.
    NoRoomForMoved,
    /// The job does not fit even with the plan's units gone.
    NoFit,
}

/// Takes `plan`'s units away (cheapest first, within the budgets) until `job` fits, gives back
/// those it fits without, proves the moved pods fit elsewhere, and on success makes the
/// moves. On failure the session is as before.
fn try_plan(
    ssn: &mut Session,
    cfg: &ConsolidateConfig,
    job: usize,
    at: &At,
    pool: &Pool,
    plan: &[usize],
    budget: &Budget,
) -> Tried {
    let all = &pool.units;
    let mut taken: Vec<(usize, Vec<(usize, TaskStatus)>)> = Vec::new();
    let (mut pods, mut gpus) = (0u32, 0i64);
    let mut charged: BTreeMap<u32, u32> = BTreeMap::new();
    let mut placement = None;
    for &i in plan {
        let u = &all[i];
        if pods + u.tasks.len() as u32 > budget.pods || gpus + u.gpus > budget.gpus {
            continue;
        }
        if !budgets_allow(ssn, &u.tasks, &mut charged) {
            continue;
        }
        pods += u.tasks.len() as u32;
        gpus += u.gpus;
        let prev = u
            .tasks
            .iter()
            .map(|&t| (t, evict::take(ssn, t, at.node(t))))
            .collect();
        taken.push((i, prev));
        if let Some(p) = probe(ssn, job) {
            placement = Some(p);
            break;
        }
    }
    let Some(mut placement) = placement else {
        give_back_all(ssn, at, taken);
        return Tried::NoFit;
    };
    // Give back, most expensive first, every unit the job fits without (a single unit is
    // needed: the job did not fit before anything was taken).
    let mut k = if taken.len() > 1 { taken.len() } else { 0 };
    while k > 0 {
        k -= 1;
        let (i, prev) = taken.remove(k);
        for &(t, status) in prev.iter().rev() {
            evict::give_back(ssn, t, at.node(t), status);
        }
        match probe(ssn, job) {
            Some(p) => placement = p,
            None => {
                let prev = all[i]
                    .tasks
                    .iter()
                    .map(|&t| (t, evict::take(ssn, t, at.node(t))))
                    .collect();
                taken.insert(k, (i, prev));
            }
        }
    }
    // Hold the job's room, then every moved pod must fit in what is left. What each job held
    // before (earlier holds, nominations) stays if this try fails: only what it adds goes.
    let mut marks: BTreeMap<usize, usize> = BTreeMap::new();
    marks.insert(job, reserve::mark(ssn, job));
    for (i, _) in &taken {
        for &t in &all[*i].tasks {
            let j = ssn.state.tasks[t].job;
            marks.entry(j).or_insert_with(|| reserve::mark(ssn, j));
        }
    }
    for &(t, n) in &placement {
        reserve::hold(ssn, t, n);
    }
    let mut moved: Vec<(usize, usize)> = Vec::new();
    let mut fits = true;
    // Nodes whose room differs from the pool's: the job's, the taken units', the moved pods'.
    let mut stale: BTreeSet<usize> = placement.iter().map(|&(_, n)| n).collect();
    for (i, _) in &taken {
        stale.extend(all[*i].tasks.iter().filter_map(|&t| at.node(t)));
    }
    for (i, _) in &taken {
        match place_elsewhere(ssn, &all[*i].tasks, &pool.rooms, &mut stale) {
            Some(places) => {
                for &(t, n) in &places {
                    // Counted there from now on (through the moved pod, which terminates).
                    reserve::hold(ssn, t, n);
                }
                moved.extend(places);
            }
            None => {
                fits = false;
                break;
            }
        }
    }
    if !fits {
        for (j, len) in marks {
            reserve::drop_since(ssn, j, len);
        }
        give_back_all(ssn, at, taken);
        return Tried::NoRoomForMoved;
    }
    commit(ssn, cfg, job, all, &taken, moved, placement);
    Tried::Moved(taken.into_iter().map(|(i, _)| i).collect())
}

/// Whether the PodDisruptionBudgets allow evicting `tasks` beside what `charged` counts
/// (per budget); charges them when they do.
fn budgets_allow(ssn: &Session, tasks: &[usize], charged: &mut BTreeMap<u32, u32>) -> bool {
    let mut want: BTreeMap<u32, u32> = BTreeMap::new();
    for &t in tasks {
        if let Some(b) = ssn.state.tasks[t].budget {
            *want.entry(b).or_insert(0) += 1;
        }
    }
    for (&b, &n) in &want {
        let left = ssn.state.budget_left.get(b as usize).copied().unwrap_or(0);
        if charged.get(&b).copied().unwrap_or(0) + n > left {
            return false;
        }
    }
    for (b, n) in want {
        *charged.entry(b).or_insert(0) += n;
    }
    true
}

fn give_back_all(ssn: &mut Session, at: &At, taken: Vec<(usize, Vec<(usize, TaskStatus)>)>) {
    for (_, prev) in taken.into_iter().rev() {
        for (t, status) in prev.into_iter().rev() {
            evict::give_back(ssn, t, at.node(t), status);
        }
    }
}

/// Where the moved `tasks` (taken off their nodes) could run now, all of them, each passing
/// every predicate on room that is free: `None` when one fits nowhere. Leaves the session as
/// it was.
///
/// Each goes to the node it fits tightest (least GPU, then CPU, then memory left, then by
/// name), not where the node order would put a new pod: a moved pod fills the smallest hole,
/// so a move does not break up room another waiting gang needs.
fn place_elsewhere(
    ssn: &mut Session,
    tasks: &[usize],
    rooms: &[Resources],
    stale: &mut BTreeSet<usize>,
) -> Option<Vec<(usize, usize)>> {
    let mut saved = Vec::with_capacity(tasks.len());
    for &t in tasks {
        let task = &mut ssn.state.tasks[t];
        saved.push((t, task.status, task.node.take()));
        task.status = TaskStatus::Pending;
    }
    let mut stmt = crate::session::Statement::new();
    let mut ok = true;
    for &t in tasks {
        let request = ssn.state.tasks[t].request.clone();
        let mut fits: Vec<((i64, i64, i64), usize)> = (0..ssn.state.nodes.len())
            .filter_map(|n| {
                let fresh;
                let room = if stale.contains(&n) {
                    fresh = evict::room(ssn, n);
                    &fresh
                } else {
                    &rooms[n]
                };
                request.fits_in(room).then(|| {
                    let left = room.minus(&request);
                    ((left.get(GPU), left.cpu, left.memory), n)
                })
            })
            .collect();
        fits.sort_unstable();
        match fits
            .into_iter()
            .map(|(_, n)| n)
            .find(|&n| ssn.fits_on(t, n))
        {
            Some(n) => {
                ssn.allocate(&mut stmt, t, n);
                stale.insert(n);
            }
            None => {
                ok = false;
                break;
            }
        }
    }
    let places = stmt.ops().to_vec();
    ssn.discard(stmt);
    for (t, status, node) in saved {
        let task = &mut ssn.state.tasks[t];
        task.status = status;
        task.node = node;
    }
    ok.then_some(places)
}

/// Makes the decision stick: budgets charged, the job's members nominated where the probe put
/// them, holds for the moved pods' replacements, and the record for the plan.
fn commit(
    ssn: &mut Session,
    cfg: &ConsolidateConfig,
    job: usize,
    all: &[Unit],
    taken: &[(usize, Vec<(usize, TaskStatus)>)],
    moved: Vec<(usize, usize)>,
    placement: Vec<(usize, usize)>,
) {
    let until = ssn
        .state
        .now
        .plus_millis(i64::try_from(cfg.hold_timeout.as_millis()).unwrap_or(i64::MAX));
    for &(t, n) in &moved {
        if let Some(b) = ssn.state.tasks[t].budget {
            if let Some(left) = ssn.state.budget_left.get_mut(b as usize) {
                *left = left.saturating_sub(1);
            }
        }
        let task = &ssn.state.tasks[t];
        if let Some(c) = &task.controller {
            let hold = MoveHold {
                owner: c.uid.clone(),
                slot: c.slot.clone(),
                namespace: task.namespace.clone(),
                pod: task.name.clone(),
                node: ssn.state.nodes[n].name.clone(),
                since: ssn.state.now,
                until,
            };
            ssn.decisions.move_holds[job].push(Hold {
                hold,
                task: Some(t),
            });
        }
    }
    for &(t, n) in &placement {
        let node = ssn.state.nodes[n].name.clone();
        ssn.decisions.nominations.push((t, Some(node)));
    }
    let mut lines = Vec::new();
    for (i, _) in taken {
        let u = &all[*i];
        let v = &ssn.state.jobs[u.job];
        let to: Vec<String> = u
            .tasks
            .iter()
            .filter_map(|t| moved.iter().find(|m| m.0 == *t))
            .map(|&(t, n)| {
                format!(
                    "{} {} → {}",
                    ssn.state.tasks[t].name,
                    ssn.state.tasks[t].node.as_deref().unwrap_or("?"),
                    ssn.state.nodes[n].name
                )
            })
            .collect();
        lines.push(format!(
            "{} ({} pod{}, priority {}, {} GPU: {})",
            v.id,
            u.tasks.len(),
            if u.tasks.len() == 1 { "" } else { "s" },
            v.priority,
            caldera_model::resources::format_value(GPU, u.gpus),
            to.join(", ")
        ));
    }
    ssn.stats.consolidation_moves += moved.len() as u64;
    let why = format!(
        "consolidate moves {}; the fewest pods (then GPUs, then the most recently started) whose moves let all {} needed members fit, each moved pod proven to fit on room free now, held for its replacement until {}",
        lines.join(", "),
        placement.len(),
        until.to_rfc3339()
    );
    ssn.decisions.consolidations.push(Consolidation {
        job,
        moved,
        placement,
        why,
    });
}

/// Reads every job's holds into the session: each counts on its node through the pending
/// replacement it matches (held there, placed there first), else through the moved pod while
/// it terminates. Expired holds, holds on nodes gone or not Ready, and holds already used (a
/// pod of the slot bound on the node) are dropped; [`holds_to_write`] says so in the plan.
pub fn open(ssn: &mut Session) {
    let now = ssn.state.now;
    let mut claimed: BTreeSet<usize> = BTreeSet::new();
    for job in 0..ssn.state.jobs.len() {
        if ssn.state.jobs[job].moves.is_empty() {
            continue;
        }
        let holds = ssn.state.jobs[job].moves.clone();
        for hold in holds {
            if hold.until <= now {
                continue;
            }
            let Some(n) = ssn
                .state
                .node_index(&hold.node)
                .filter(|&n| ssn.state.nodes[n].ready)
            else {
                continue;
            };
            let st = &ssn.state;
            let of_slot = |t: &caldera_model::Task| {
                *t.namespace == *hold.namespace
                    && t.controller.as_deref().is_some_and(|c| hold.matches(c))
            };
            let used = st.tasks.iter().any(|t| {
                of_slot(t)
                    && t.status.is_ready()
                    && t.node.as_deref() == Some(&*hold.node)
                    && t.created.secs() >= hold.since.secs()
            });
            if used {
                continue;
            }
            let replacement = (0..st.tasks.len()).find(|&t| {
                let task = &st.tasks[t];
                task.schedulable_pending()
                    && task.nominated.is_none()
                    && !claimed.contains(&t)
                    && of_slot(task)
            });
            let moved = (0..st.tasks.len()).find(|&t| {
                let task = &st.tasks[t];
                task.status == TaskStatus::Releasing
                    && *task.namespace == *hold.namespace
                    && *task.name == *hold.pod
            });
            let task = replacement.or(moved);
            if let Some(t) = task {
                claimed.insert(t);
                reserve::hold(ssn, t, n);
            }
            ssn.decisions.move_holds[job].push(Hold { hold, task });
        }
    }
}

/// The PodGroups whose holds differ from what they carry: holds used in this session (their
/// replacement placed) are dropped.
pub fn holds_to_write(ssn: &Session) -> Vec<MoveHoldWrite> {
    let st = &ssn.state;
    let mut out = Vec::new();
    for (j, job) in st.jobs.iter().enumerate() {
        let mut holds: Vec<MoveHold> = ssn.decisions.move_holds[j]
            .iter()
            // A held task placed in this session used its hold (the moved pod itself, which
            // terminates, never is).
            .filter(|h| h.task.is_none_or(|t| !st.tasks[t].status.is_ready()))
            .map(|h| h.hold.clone())
            .collect();
        holds.sort();
        if holds == job.moves || !job.has_podgroup() || job.native.is_some() {
            continue;
        }
        out.push(MoveHoldWrite {
            namespace: job.namespace.clone(),
            name: job.name.clone(),
            uid: job.uid.clone(),
            holds,
        });
    }
    out
}
