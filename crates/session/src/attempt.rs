//! Placing one job: a gang inside one statement, or one extra member of a satisfied gang.

use crate::session::{Candidates, Placement, Session, Statement};
use crate::shortfall::Shortfall;
use crate::state::Holdup;
use crate::topology::{place_in_topology, place_sub_groups, prefer_used_domain};
use caldera_model::{Resources, TopologyTree};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Nothing to place.
    Idle,
    /// Placed and committed this many members.
    Placed(usize),
    /// Could not place; the job's holdup says why.
    Held,
}

/// Tries `job` once: if its gang is not yet satisfied, places members until it is and commits
/// them together, or undoes them all; if it is satisfied, places one more member on its own.
/// Only members for which `wanted` holds are tried.
/// Room held for the job's own tasks, and for jobs of lower priority (see [`crate::reserve`]),
/// is usable during the attempt.
pub fn attempt(
    ssn: &mut Session,
    job: usize,
    wanted: &dyn Fn(&caldera_model::Task) -> bool,
) -> Attempt {
    if ssn.reservations.is_empty() {
        return attempt_inner(ssn, job, wanted);
    }
    let released = crate::reserve::release(ssn, job);
    let result = attempt_inner(ssn, job, wanted);
    crate::reserve::restore(ssn, job, released);
    result
}

/// Where `job`'s gang would go now (members and nodes), without placing it: the same search
/// as an attempt, every placement undone. `None` when it does not fit. The failure cache is
/// neither read nor written (the caller changes the cluster between probes).
pub fn probe(ssn: &mut Session, job: usize) -> Option<Vec<(usize, usize)>> {
    let tasks: Vec<usize> = ssn.state.pending_tasks(job).collect();
    if tasks.is_empty() || ssn.job_ready(job) {
        return None;
    }
    let need = ssn.state.lacking(job);
    let tasks = ssn.order_tasks(job, tasks);
    let saved = ssn.state.job_runs[job].holdup.clone();
    let result = match ssn.state.jobs[job].topology.clone() {
        Some(topo) => place_in_topology(ssn, job, &tasks, need, &topo, true),
        None if !ssn.state.sub_groups[job].is_empty() => {
            place_sub_groups(ssn, job, &tasks, None, true)
        }
        None => place_gang(ssn, job, &tasks, &mut Placement::default(), None, true),
    };
    ssn.state.job_runs[job].holdup = saved;
    result.ok().map(|_| std::mem::take(&mut ssn.probed))
}

fn attempt_inner(
    ssn: &mut Session,
    job: usize,
    wanted: &dyn Fn(&caldera_model::Task) -> bool,
) -> Attempt {
    let tasks: Vec<usize> = ssn
        .state
        .pending_tasks(job)
        .filter(|&t| wanted(&ssn.state.tasks[t]))
        .collect();
    if tasks.is_empty() {
        return Attempt::Idle;
    }
    ssn.stats.attempts += 1;
    // A scheduling input Caldera does not evaluate is never ignored: the job waits, saying so.
    if let Some(what) = ssn.state.jobs[job].unsupported.clone() {
        let msg = format!(
            "PodGroup {} uses {what}, which Caldera does not support yet",
            ssn.state.jobs[job].id
        );
        ssn.hold(job, Holdup::Fit(msg));
        return Attempt::Held;
    }
    // A malformed `caldera.sh/min-runtime` is refused, never ignored: the gang waits, naming it.
    if let Some(Err(why)) = ssn.state.jobs[job].min_runtime.clone() {
        let msg = format!(
            "PodGroup {}: {why}; the gang waits until the annotation is fixed",
            ssn.state.jobs[job].id
        );
        ssn.hold(job, Holdup::Fit(msg));
        return Attempt::Held;
    }
    if let Some(&t) = tasks
        .iter()
        .find(|&&t| ssn.state.tasks[t].spec.unsupported.is_some())
    {
        let task = &ssn.state.tasks[t];
        let what = task.spec.unsupported.as_deref().unwrap_or_default();
        let msg = format!(
            "pod {} uses {what}, which Caldera does not support yet",
            task.key()
        );
        ssn.hold(job, Holdup::Fit(msg));
        return Attempt::Held;
    }
    if crate::volumes::timed_out(ssn, job) {
        return Attempt::Held;
    }
    // A member whose claims keep it off every node (a missing claim, an unbound `Immediate`
    // one, a DRA claim not created yet or missing) is not tried; the gang waits with
    // kube-scheduler's message unless the others satisfy it.
    let blocked: Vec<usize> = tasks
        .iter()
        .copied()
        .filter(|&t| ssn.state.tasks[t].blocked().is_some())
        .collect();
    let tasks: Vec<usize> = if blocked.is_empty() {
        tasks
    } else {
        let t = &ssn.state.tasks[blocked[0]];
        let msg = format!(
            "pod {}: 0/{} nodes are available: {}.",
            t.key(),
            ssn.state.nodes.len(),
            t.blocked().unwrap_or_default()
        );
        ssn.hold(job, Holdup::Fit(msg));
        let rest: Vec<usize> = tasks.into_iter().filter(|t| !blocked.contains(t)).collect();
        if rest.is_empty() {
            return Attempt::Held;
        }
        rest
    };
    if ssn.job_ready(job) {
        // An extra member of a satisfied gang stays in the gang's domain: always under a
        // hard rule (within the highest allowed domain around its members), and first under
        // a soft one.
        // With sub-groups, the next sub-group (or member no policy takes) goes whole;
        // otherwise one member, the first in order (found without sorting the backlog).
        // (`tasks` is not empty: an attempt without pending members returned `Idle` above.)
        let sub_groups = !ssn.state.sub_groups[job].is_empty();
        let next: Vec<usize> = if sub_groups {
            ssn.order_tasks(job, tasks)
        } else {
            // `tasks`, as a test: pending, wanted and not blocked (see above).
            let first = ssn.first_task(job, |t| {
                let task = &ssn.state.tasks[t];
                task.schedulable_pending() && wanted(task) && task.blocked().is_none()
            });
            // The same member sorting would put first (checked where sorting is cheap).
            debug_assert!(first.is_some_and(|t| tasks.contains(&t)));
            debug_assert!(
                tasks.len() > 64 || first == ssn.order_tasks(job, tasks.clone()).first().copied()
            );
            first.into_iter().collect()
        };
        if let Some(topo) = ssn.state.jobs[job].topology.clone() {
            return place_in_topology(ssn, job, &next, 1, &topo, false)
                .map(Attempt::Placed)
                .unwrap_or(Attempt::Held);
        }
        if sub_groups {
            return place_sub_groups(ssn, job, &next, None, false)
                .map(Attempt::Placed)
                .unwrap_or(Attempt::Held);
        }
        return place_gang(ssn, job, &next, &mut Placement::default(), None, false)
            .map(Attempt::Placed)
            .unwrap_or(Attempt::Held);
    }
    let need = ssn.state.lacking(job);
    // With nodes booked for some job, where a member may go depends on its job: alike gangs
    // no longer place alike.
    // Room held for the job's own members (a nomination), or lent to it by jobs of lower
    // priority, makes it differ from alike gangs too.
    let key =
        if ssn.state.has_bookings || crate::reserve::waiting(ssn, job) || ssn.reservations.lent() {
            None
        } else {
            fail_key(ssn, job, &tasks)
        };
    if let Some(key) = &key {
        if let Some((epoch, placeable, msg, short)) = ssn.fail_cache.get(key) {
            // In this epoch at most `placeable` such members fit: a gang needing more fails,
            // and says so for its own size.
            if *epoch == ssn.epoch && need > *placeable {
                let short = short.clone();
                let msg = match &short {
                    Some(s) => {
                        let (need, gang) = gang_need(ssn, job, &tasks);
                        s.message(need, &gang)
                    }
                    None => msg.clone(),
                };
                ssn.stats.cached_failures += 1;
                ssn.state.job_runs[job].shortfall = short;
                ssn.hold(job, Holdup::Fit(msg));
                return Attempt::Held;
            }
        }
    }
    let tasks = ssn.order_tasks(job, tasks);
    // Room held for this gang's members (their nominations) is where they go, each to the node
    // held for it, as kube-scheduler tries a pod's nominated node first.
    if crate::reserve::waiting(ssn, job) {
        if let Some(n) = place_held(ssn, job, &tasks) {
            return Attempt::Placed(n);
        }
    }
    // Capacity booked for this gang (nodes an autoscaler added for it) is tried first.
    let booked = booked_nodes(ssn, job);
    if !booked.is_empty()
        && ssn.state.jobs[job].topology.is_none()
        && ssn.state.sub_groups[job].is_empty()
    {
        let mut mine = Placement {
            only: Some(Arc::new(booked)),
            bonus: None,
        };
        let saved = ssn.state.job_runs[job].holdup.clone();
        if let Ok(n) = place_gang(ssn, job, &tasks, &mut mine, None, false) {
            return Attempt::Placed(n);
        }
        ssn.state.job_runs[job].holdup = saved;
    }
    let result = match ssn.state.jobs[job].topology.clone() {
        Some(topo) => place_in_topology(ssn, job, &tasks, need, &topo, false),
        None if !ssn.state.sub_groups[job].is_empty() => {
            place_sub_groups(ssn, job, &tasks, None, false)
        }
        None => place_gang(ssn, job, &tasks, &mut Placement::default(), None, false),
    };
    match result {
        Ok(n) => Attempt::Placed(n),
        Err(no_room) => {
            // Only a shortage of nodes is remembered: running out of members to place (or a
            // queue limit) says nothing about other gangs.
            if let (Some(key), Some(placed), Some(Holdup::Fit(msg))) =
                (key, no_room, &ssn.state.job_runs[job].holdup)
            {
                // Under a topology the message is the topology's, not one attempt's.
                let short = ssn.state.job_runs[job]
                    .shortfall
                    .clone()
                    .filter(|_| ssn.state.jobs[job].topology.is_none());
                let entry = (ssn.epoch, placed, msg.clone(), short);
                ssn.fail_cache.insert(key, entry);
            }
            Attempt::Held
        }
    }
}

/// Gangs whose pending members are all alike (same request and spec, no roles), in the same
/// queue and with the same topology, place alike: if only `m` such members fit, any such gang
/// needing more than `m` fails. This is the key under which that is remembered for the rest of
/// the epoch (until the next commit changes the nodes).
fn fail_key(ssn: &Session, job: usize, tasks: &[usize]) -> Option<crate::session::FailKey> {
    let j = &ssn.state.jobs[job];
    // Sub-groups place by their members' labels: alike requests say nothing.
    if !j.min_task_member.is_empty() || !j.sub_group_policies.is_empty() {
        return None;
    }
    let first = &ssn.state.tasks[tasks[0]];
    let traits = ssn.state.traits[tasks[0]];
    let alike = tasks.iter().all(|&ti| {
        let t = &ssn.state.tasks[ti];
        t.request == first.request
            && (Arc::ptr_eq(&t.spec, &first.spec) || t.spec == first.spec)
            && ssn.state.traits[ti] == traits
    });
    alike.then(|| {
        (
            first.request.clone(),
            (*first.spec).clone(),
            traits,
            j.topology.clone(),
            ssn.state.job_queue[job],
        )
    })
}

/// Places members of `tasks` in order until the job is ready, inside one statement; commits on
/// success, discards otherwise (recording the holdup). `prefer` (a soft topology at the
/// cluster root) makes nodes in tier-1 domains already used by the statement score higher. `dry`: a probe; a gang that
/// fits is recorded in `ssn.probed` and undone instead of committed.
pub(crate) fn place_gang(
    ssn: &mut Session,
    job: usize,
    tasks: &[usize],
    placement: &mut Placement,
    prefer: Option<&TopologyTree>,
    dry: bool,
) -> Result<usize, Option<u32>> {
    let mut stmt = Statement::new();
    // Kinds of member met in this attempt, by a representative task, with their candidates.
    let mut kinds: Vec<(usize, Candidates)> = Vec::new();
    let mut holdup = None;
    let mut no_room = false;
    for &t in tasks {
        if !stmt.is_empty() && ssn.job_ready(job) {
            break;
        }
        if let Err(msg) = ssn.allocatable(t) {
            holdup = Some(Holdup::Quota(msg));
            break;
        }
        // A member whose constraints look at other nodes (spread, affinity over zones) is
        // scored afresh: any placement may have changed its view of every node.
        let pods = &ssn.state.tasks[t].spec.pods;
        if pods.crosses_nodes() && !pods.verdict_only_crosses_nodes() {
            let mut c = ssn.candidates(t, placement);
            match ssn.pick(t, &mut c, placement) {
                Some(node) => {
                    ssn.allocate(&mut stmt, t, node);
                    if let Some(tree) = prefer {
                        prefer_used_domain(ssn, tree, node, placement);
                    }
                    continue;
                }
                None => {
                    holdup = Some(Holdup::Fit(ssn.fit_message(&c)));
                    no_room = true;
                    break;
                }
            }
        }
        let kind = {
            let task = &ssn.state.tasks[t];
            let traits = ssn.state.traits[t];
            kinds.iter().position(|(rep, _)| {
                let r = &ssn.state.tasks[*rep];
                r.request == task.request && r.spec == task.spec && ssn.state.traits[*rep] == traits
            })
        };
        let kind = match kind {
            Some(k) => k,
            None => {
                // Kinds checked at pick time are kept only within the attempt.
                let keep = !ssn.state.tasks[t].spec.pods.crosses_nodes();
                let shared = placement.only.is_none() && placement.bonus.is_none();
                let c = if keep && shared && !ssn.state.has_bookings {
                    let task = &ssn.state.tasks[t];
                    let key = (
                        task.request.clone(),
                        (*task.spec).clone(),
                        ssn.state.traits[t],
                    );
                    match ssn.kind_cache.remove(&key) {
                        Some(mut c) => {
                            ssn.catch_up(t, &mut c, placement);
                            c
                        }
                        None => ssn.candidates(t, placement),
                    }
                } else {
                    ssn.candidates(t, placement)
                };
                kinds.push((t, c));
                kinds.len() - 1
            }
        };
        match ssn.pick(t, &mut kinds[kind].1, placement) {
            Some(node) => {
                ssn.allocate(&mut stmt, t, node);
                if let Some(tree) = prefer {
                    prefer_used_domain(ssn, tree, node, placement);
                }
                ssn.refresh(t, node, &mut kinds[kind].1, placement);
            }
            None => {
                holdup = Some(Holdup::Fit(ssn.fit_message(&kinds[kind].1)));
                no_room = true;
                break;
            }
        }
    }
    let keep = placement.only.is_none() && placement.bonus.is_none() && !ssn.state.has_bookings;
    let ready = !stmt.is_empty() && ssn.job_ready(job);
    if keep {
        for (rep, c) in kinds
            .into_iter()
            .filter(|(rep, _)| !ssn.state.tasks[*rep].spec.pods.crosses_nodes())
        {
            let task = &ssn.state.tasks[rep];
            let key = (
                task.request.clone(),
                (*task.spec).clone(),
                ssn.state.traits[rep],
            );
            ssn.kind_cache.insert(key, c);
        }
    }
    if ready && dry {
        let n = stmt.len();
        ssn.probed = stmt.ops().to_vec();
        ssn.discard(stmt);
        Ok(n)
    } else if ready {
        Ok(settle(ssn, job, stmt))
    } else {
        let placed = stmt.len() as u32;
        // Said of a gang still short of minMember; an extra member of a placed gang is one pod.
        let shortfall = match &holdup {
            Some(Holdup::Fit(fit)) if no_room && !ssn.job_ready(job) => {
                Some(shortfall_of(ssn, &stmt, placement, fit))
            }
            _ => None,
        };
        ssn.discard(stmt);
        let holdup = match &shortfall {
            Some(s) => {
                let (need, gang) = gang_need(ssn, job, tasks);
                Holdup::Fit(s.message(need, &gang))
            }
            None => holdup.unwrap_or_else(|| {
                Holdup::Fit("the gang's members could not all be placed together".to_string())
            }),
        };
        ssn.state.job_runs[job].shortfall = shortfall;
        ssn.hold(job, holdup);
        Err(no_room.then_some(placed))
    }
}

/// Commits the placements of `stmt`, which make `job` ready: bound, or held while their
/// volumes are bound. How many members it placed.
pub(crate) fn settle(ssn: &mut Session, job: usize, stmt: Statement) -> usize {
    let n = stmt.len();
    let volumes_pending = !ssn.state.trackers.volumes.left_to_kube_scheduler
        && stmt
            .ops()
            .iter()
            .any(|&(t, _)| !ssn.state.tasks[t].volumes_bound());
    if volumes_pending {
        // Volume binding first: the members keep their nodes, and are bound together
        // once every claim is.
        ssn.commit_waiting_for_volumes(stmt);
    } else {
        ssn.commit(stmt);
    }
    ssn.clear_hold(job);
    n
}

/// Places the members of `job` with room held for them (its reservations, released for this
/// attempt), each on the node held for it, in member order, until the gang is ready; commits
/// them, or undoes them all and says `None` (a held node no longer takes its member, or the
/// held members are not enough): the gang is then placed as any other.
fn place_held(ssn: &mut Session, job: usize, tasks: &[usize]) -> Option<usize> {
    let held: std::collections::HashMap<usize, usize> = ssn
        .reservations
        .of_job(job)
        .iter()
        .map(|r| (r.task, r.node))
        .collect();
    let mut stmt = Statement::new();
    for &t in tasks {
        if !stmt.is_empty() && ssn.job_ready(job) {
            break;
        }
        let Some(&node) = held.get(&t) else {
            continue;
        };
        if ssn.allocatable(t).is_err() || !ssn.fits_on(t, node) {
            break;
        }
        ssn.allocate(&mut stmt, t, node);
    }
    if !stmt.is_empty() && ssn.job_ready(job) {
        Some(settle(ssn, job, stmt))
    } else {
        ssn.discard(stmt);
        None
    }
}

/// Members job `job` still needs, and what the first that many of `tasks` request together.
fn gang_need(ssn: &Session, job: usize, tasks: &[usize]) -> (u32, Resources) {
    let need = ssn.state.lacking(job);
    let mut gang = Resources::new();
    for &t in tasks.iter().take(need as usize) {
        gang.add(&ssn.state.tasks[t].request);
    }
    (need, gang)
}

/// What the attempt in `stmt` got before a member found no node (`fit`: kube-scheduler's
/// summary for it): members per node, the nodes of the scope it left empty, and what was
/// free on the scope's Ready nodes before it.
fn shortfall_of(ssn: &Session, stmt: &Statement, placement: &Placement, fit: &str) -> Shortfall {
    let mut counts: BTreeMap<usize, u32> = BTreeMap::new();
    for &(_, node) in stmt.ops() {
        *counts.entry(node).or_insert(0) += 1;
    }
    let left_empty = |n: &u32| !counts.contains_key(&(*n as usize));
    // The whole cluster (no scope) from the session's running sums, without a pass over
    // every node: a failed gang's message at 100,000 nodes.
    let (mut free, empty, empty_count) = match &placement.only {
        Some(scope) => (
            ssn.idle_of(scope),
            scope
                .iter()
                .filter(|n| left_empty(n))
                .take(crate::shortfall::NAMED_NODES)
                .map(|&n| ssn.state.nodes[n as usize].name.clone())
                .collect(),
            scope.iter().filter(|n| left_empty(n)).count(),
        ),
        None => (
            ssn.idle_all(),
            (0..ssn.state.nodes.len() as u32)
                .filter(left_empty)
                .take(crate::shortfall::NAMED_NODES)
                .map(|n| ssn.state.nodes[n as usize].name.clone())
                .collect(),
            ssn.state.nodes.len() - counts.len(),
        ),
    };
    for &(t, _) in stmt.ops() {
        free.add(&ssn.state.tasks[t].request);
    }
    let mut placed: Vec<(Arc<str>, u32)> = counts
        .iter()
        .map(|(&n, &c)| (ssn.state.nodes[n].name.clone(), c))
        .collect();
    placed.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Shortfall {
        placed,
        empty,
        empty_count,
        free,
        fit: fit.to_string(),
    }
}

/// Nodes booked for `job`, in index order.
fn booked_nodes(ssn: &Session, job: usize) -> Vec<u32> {
    if !ssn.state.has_bookings || !ssn.state.may_use_booking(job) {
        return Vec::new();
    }
    let id = &ssn.state.jobs[job].id;
    (0..ssn.state.nodes.len())
        .filter(|&n| ssn.state.nodes[n].booked_for.as_ref() == Some(id))
        .map(|n| n as u32)
        .collect()
}
