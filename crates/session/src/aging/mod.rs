//! Aging against starvation (fairshare's `maxWait`): a gang that has waited longer than
//! `maxWait` goes ahead of its queue, and when it still does not fit, room is held for it so
//! that smaller jobs only backfill around it (Slurm's backfill reservation).
//!
//! **Aged.** A job is aged at session open when fairshare's `maxWait` is on (> 0), the job is
//! valid (enough members, no unsupported input), has pending members and is not ready, and it
//! has waited at least `maxWait` on the session's clock since
//! [`caldera_model::Job::pending_since`]: since it became valid and waiting (its PodGroup's
//! `Unschedulable` condition, not counting `NotEnoughTasks`; a lone pod's
//! `PodScheduled=False`). That is the clock the gang timeout and `preemptionDelay` use, and
//! Slurm's age factor (time since the job became eligible): a gang still missing members has
//! not started waiting for room.
//!
//! **Order.** The PodGroup's priority still comes first (the `priority` plugin; a job of
//! higher priority may also use room held for a lower one, as with any reservation). Right
//! after it, an aged job goes before every job that is not; among aged jobs the largest gang
//! goes first (by the dominant share of the cluster its missing members ask for), then the
//! longest-waiting. A small aged job fits into the next room that frees anyway; the large gang
//! needs the queue's one hold (below), and behind a burst of the queue's older small jobs,
//! each aged in turn and each taking the hold first, it would wait the whole burst out
//! (Slurm's job-size factor weighs large jobs up for the same reason). The
//! other job-order plugins (gang, drf, ...) order what is left. Queue order is unchanged: the
//! job goes ahead of its own queue, and the room held for it keeps other queues out.
//!
//! **Share lifted.** An aged job is marked in its [`crate::state::JobRun::aged`]; a queue
//! plugin that holds members to a weighted share (`proportion`'s deserved) holds an aged job's
//! members only to what its queue may ever have (capability, and the cluster less the other
//! queues' guarantees): a gang larger than its queue's share would otherwise never start.
//!
//! **Room held.** When an aged gang's attempt in `allocate` finds no room (not when its
//! queue's quota holds it), [`hold`] chooses where it would fit once the pods now running
//! leave: it takes, virtually and node by node, the running pods of other jobs off the nodes
//! with the most room for it first (pods already terminating first of all), and runs the
//! real placement search ([`crate::attempt::probe`], every predicate and topology rule) as
//! soon as what is free could hold the gang. Its members are then held at the nodes the probe
//! chose — reservations ([`crate::reserve`]), exactly the members' requests, never more than
//! the gang lacks — and nominated there (`status.nominatedNodeName`), so later sessions start
//! with the room held ([`crate::reserve::open`] keeps an aged job's nominations while its
//! node, once the pods there leave, can hold them). A held member counts on its node for
//! every job of lower or equal priority, so nothing new starts in that room and what frees
//! there stays free until the gang fits; smaller jobs use only the rest.
//!
//! **One per queue.** Only one aged gang per queue holds room at a time: the first whose
//! attempt fails (the largest, then the longest-waiting, among equal priorities); the queue's
//! other aged gangs are ordered ahead of the rest and get the hold in turn. Kubernetes pods
//! have no run-time estimate, so no job may start in held room (Slurm lets jobs that end
//! before the reservation's start in), and holds for every aged gang of a backlogged queue
//! would leave much of the cluster idle.
//!
//! **No deadlock.** Each hold is one whole placement of the gang, chosen with the holds before
//! it counted, so two aged gangs never hold parts of the same room; the hold ends when the
//! gang binds (its reservations are used up), when it is deleted (no pod, no nomination), or
//! when it is no longer aged (its nominations are then judged like any other and dropped
//! where the room is not free). An aged gang that holds room waits for it and does not
//! preempt or reclaim meanwhile, as a nominated preemptor does.

pub mod marks;

use crate::evict::{free_capacity, gang_need, give_back, room, take_into, At, Leaving};
use crate::reserve;
use crate::session::Session;
use caldera_model::{Resources, TaskStatus};
pub use marks::Aging;

/// Marks the aged jobs at session open (before [`reserve::open`], which keeps their
/// nominations).
pub fn open(ssn: &mut Session) {
    let jobs = ssn.state.jobs.len();
    let mut aging = Aging {
        since: vec![None; jobs],
        ahead: vec![false; jobs],
        size: vec![0.0; jobs],
        chose: vec![false; jobs],
        any: false,
    };
    let Some(fair) = ssn.state.fair.clone().filter(|f| f.max_wait_ms > 0) else {
        ssn.aging = aging;
        return;
    };
    let now = ssn.state.now;
    for j in 0..jobs {
        let since = ssn.state.jobs[j].pending_since;
        if fair.aged(since, now)
            && ssn.state.job_runs[j].invalid.is_none()
            // A job waiting on an input Caldera does not support could never use held room.
            && ssn.state.jobs[j].unsupported.is_none()
            && !matches!(ssn.state.jobs[j].min_runtime, Some(Err(_)))
            && ssn.state.pending_tasks(j).next().is_some()
            && !ssn.job_ready(j)
        {
            aging.since[j] = since;
            aging.ahead[j] = true;
            aging.size[j] = caldera_queue::share_of(&gang_need(ssn, j), &ssn.state.total);
            ssn.state.job_runs[j].aged = true;
            aging.any = true;
            ssn.stats.aged += 1;
        }
    }
    ssn.aging = aging;
}

/// After aged `job`'s attempt found no room: holds room for it where it would fit once the
/// pods running there leave (see the module's "Room held"), unless room is held for the
/// whole gang already. Nothing is held when the gang would not fit even then.
pub fn hold(ssn: &mut Session, job: usize) {
    if !ssn.aging.is_aged(job) || ssn.state.pending_tasks(job).next().is_none() {
        return;
    }
    let had: Vec<usize> = reserve::of_job_tasks(ssn, job);
    if had.len() >= ssn.state.lacking(job) as usize {
        return;
    }
    // One hold per queue, for its head: without run times, room held for every aged gang of a
    // backlogged queue would idle much of the cluster (measured on a replayed week: GPU
    // allocation 87% → 62%). The others wait their turn, ordered ahead of the rest.
    let q = ssn.state.job_queue[job];
    let holder = (0..ssn.state.jobs.len()).find(|&j| {
        j != job && ssn.state.job_queue[j] == q && ssn.aging.is_aged(j) && reserve::waiting(ssn, j)
    });
    if holder.is_some() {
        return;
    }
    // Room held for part of the gang is of no use: chosen again whole.
    reserve::drop_job(ssn, job);
    let placement = choose(ssn, job);
    let chosen: Vec<usize> = placement.iter().flatten().map(|&(t, _)| t).collect();
    for t in had.into_iter().filter(|t| !chosen.contains(t)) {
        ssn.decisions.nominations.push((t, None));
    }
    let Some(placement) = placement else {
        return;
    };
    for (t, n) in placement {
        reserve::hold(ssn, t, n);
        let node = ssn.state.nodes[n].name.clone();
        ssn.decisions.nominations.push((t, Some(node)));
    }
    ssn.aging.chose[job] = true;
}

/// Where `job`'s gang would go once the pods running on the nodes with the most room for it
/// leave: the fewest such nodes the placement search needs (doubling the nodes between
/// searches), or `None` when it fits nowhere even with every running pod gone.
fn choose(ssn: &mut Session, job: usize) -> Option<Vec<(usize, usize)>> {
    let need = gang_need(ssn, job);
    let at = At::new(ssn);
    let leaving = Leaving::vacate(ssn, &at);
    let st = &ssn.state;
    // The running pods of other jobs on each node: critical pods (kube-system, mirror pods)
    // stay, as they do not leave.
    let mut on_node: Vec<Vec<usize>> = vec![Vec::new(); st.nodes.len()];
    for (t, task) in st.tasks.iter().enumerate() {
        if task.job != job
            && !task.critical
            && matches!(task.status, TaskStatus::Bound | TaskStatus::Running)
        {
            if let Some(n) = at.node(t) {
                on_node[n].push(t);
            }
        }
    }
    let mut nodes: Vec<(f64, usize)> = (0..st.nodes.len())
        .filter(|&n| st.nodes[n].ready && !on_node[n].is_empty())
        .map(|n| (covers(&room(ssn, n), &need), n))
        .collect();
    nodes.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut free = free_capacity(ssn);
    let mut taken: Vec<(usize, usize, TaskStatus)> = Vec::new();
    let mut found = None;
    let mut next_search = 0;
    for (i, &(_, n)) in nodes.iter().enumerate() {
        if i >= next_search && need.fits_in(&free) {
            found = crate::attempt::probe(ssn, job);
            if found.is_some() {
                break;
            }
            next_search = (i * 2).max(i + 1);
        }
        for t in std::mem::take(&mut on_node[n]) {
            let prev = take_into(ssn, &at, t, &mut free);
            taken.push((t, n, prev));
        }
    }
    if found.is_none() && need.fits_in(&free) {
        found = crate::attempt::probe(ssn, job);
    }
    for (t, n, prev) in taken.into_iter().rev() {
        give_back(ssn, t, Some(n), prev);
    }
    leaving.restore(ssn);
    found
}

/// How much of `need` room `r` covers: Σ over the resources `need` asks for of the fraction
/// covered (each at most 1).
fn covers(r: &Resources, need: &Resources) -> f64 {
    need.iter()
        .filter(|&(_, v)| v > 0)
        .map(|(name, v)| (r.get(name).max(0) as f64 / v as f64).min(1.0))
        .sum()
}

/// What `explain` says of aged `job` after the session: since when it waits and what is held.
pub fn describe(ssn: &Session, job: usize) -> Option<String> {
    let since = ssn.aging.since(job)?;
    let st = &ssn.state;
    let max_wait = st.fair.as_ref().map_or(0, |f| f.max_wait_ms);
    let waited = st.now.millis_since(since);
    let head = format!(
        "aged: waiting since {} ({} ≥ maxWait {}), ahead of its queue's jobs of equal priority",
        since.to_rfc3339(),
        duration(waited),
        duration(max_wait),
    );
    let held = reserve::of_job_tasks(ssn, job);
    let placed = ssn
        .decisions
        .committed
        .iter()
        .chain(&ssn.decisions.volume_waits)
        .any(|&(t, _)| st.tasks[t].job == job);
    let tail = if placed {
        "; placed in this session".to_string()
    } else if held.is_empty() {
        "; no room held: the gang fits nowhere even once the running pods leave".to_string()
    } else {
        let mut total = Resources::new();
        let mut nodes: Vec<String> = Vec::new();
        for r in ssn.reservations.of_job(job) {
            total.add(&st.tasks[r.task].request);
            nodes.push(st.nodes[r.node].name.to_string());
        }
        nodes.sort();
        let mut counted: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nodes.len() {
            let same = nodes[i..].iter().take_while(|n| **n == nodes[i]).count();
            counted.push(format!("{} ×{same}", nodes[i]));
            i += same;
        }
        let when = if ssn.aging.chose(job) {
            "held from now on"
        } else {
            "held since an earlier session"
        };
        format!(
            "; room {when} for {} member(s) ({total}) on {}; other jobs of equal or lower priority place only around it",
            held.len(),
            counted.join(", ")
        )
    };
    Some(head + &tail)
}

/// The PodGroup condition's message for aged `job` holding room on `nodes` (`None` when it is
/// not aged).
pub(crate) fn condition(ssn: &Session, job: usize, nodes: &[&str]) -> Option<String> {
    ssn.aging.since(job)?;
    let max_wait = ssn.state.fair.as_ref().map_or(0, |f| f.max_wait_ms);
    let fit = match &ssn.state.job_runs[job].holdup {
        Some(crate::state::Holdup::Fit(m)) => format!("; {m}"),
        _ => String::new(),
    };
    Some(format!(
        "waiting longer than maxWait {}: room is held on node(s) {} until the pods there free it{fit}",
        duration(max_wait),
        nodes.join(", ")
    ))
}

/// `ms` as Go prints a duration, to the second (`1h0m0s`, `2m30s`, `30s`).
pub(crate) fn duration(ms: i64) -> String {
    let s = ms / 1000;
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}h{m}m{sec}s")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else {
        format!("{sec}s")
    }
}
