//! Placing one job: a gang inside one statement, or one extra member of a satisfied gang.

use crate::place::{gang_need, place_gang, settle};
use crate::session::{Placement, Session, Statement};
use crate::state::Holdup;
use crate::topology::{place_in_topology, place_sub_groups};
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
    if volumes_timed_out(ssn, job) {
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

/// Whether `job`'s wait for its volumes has ended without them: a claim Caldera chose a node
/// for lost that choice (a provisioner removes `volume.kubernetes.io/selected-node` when
/// provisioning fails), or the claims were not bound within kube-scheduler's bind timeout (10
/// minutes) of the choice. Then the job is released (its selections undone and its nodes
/// freed, said in its condition and events) and tried again in a later session.
fn volumes_timed_out(ssn: &mut Session, job: usize) -> bool {
    if ssn.state.trackers.volumes.left_to_kube_scheduler {
        return false;
    }
    let st = &ssn.state;
    let mut failed: Vec<String> = Vec::new();
    let mut since: Option<caldera_model::Time> = None;
    let mut waiting: Vec<String> = Vec::new();
    for &t in &st.jobs[job].tasks {
        let task = &st.tasks[t];
        let Some(v) = task.volumes.as_ref().filter(|_| task.schedulable_pending()) else {
            continue;
        };
        failed.extend(v.failed.iter().map(|c| format!("{}/{c}", task.namespace)));
        if !v.all_bound {
            if let Some(at) = v.selected_at {
                since = Some(since.map_or(at, |s: caldera_model::Time| s.min(at)));
                waiting.extend(
                    v.claims
                        .iter()
                        .map(|(c, _)| format!("{}/{c}", task.namespace)),
                );
            }
        }
    }
    let why = if !failed.is_empty() {
        failed.sort();
        format!(
            "provisioning failed for claim(s) {} (the provisioner removed {}); the gang's nodes are released and it is placed again",
            failed.join(", "),
            caldera_model::volume::SELECTED_NODE
        )
    } else if since
        .is_some_and(|s| st.now.millis_since(s) >= caldera_model::volume::BIND_TIMEOUT_MS)
    {
        waiting.sort();
        waiting.dedup();
        format!(
            "claim(s) {} were not bound within {}s of choosing their nodes (provisioning failed or is slow); the gang's nodes are released and it is placed again",
            waiting.join(", "),
            caldera_model::volume::BIND_TIMEOUT_MS / 1000
        )
    } else {
        return false;
    };
    crate::reserve::drop_job(ssn, job);
    for &t in &ssn.state.jobs[job].tasks {
        let task = &ssn.state.tasks[t];
        if task.schedulable_pending() && task.nominated.is_some() {
            ssn.decisions.nominations.push((t, None));
        }
    }
    ssn.hold(job, Holdup::Fit(why.clone()));
    ssn.decisions.volume_releases.push((job, why));
    true
}
