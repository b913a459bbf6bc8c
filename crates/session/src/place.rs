//! Placing one gang's members on nodes inside one statement, and settling a statement that
//! made the gang ready: what an attempt ([`crate::attempt`]), a topology search
//! ([`crate::topology`]) and a sub-group search all run, so it reads none of them.

use crate::session::{Candidates, Placement, Session, Statement};
use crate::shortfall::Shortfall;
use crate::state::Holdup;
use caldera_model::{Resources, TopologyTree};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What every node of a tier-1 domain the gang already uses adds to its score
/// ([`prefer_used_domain`]), far above any other score.
pub(crate) const USED_DOMAIN_BONUS: f64 = 1.0e6;

/// The kind of member met before (in `kinds`, by a representative task with its candidates)
/// that task `t` is one of: the same request, placement spec and traits, so the same nodes fit
/// it and score it the same.
pub(crate) fn kind_of(ssn: &Session, kinds: &[(usize, Candidates)], t: usize) -> Option<usize> {
    let task = &ssn.state.tasks[t];
    let traits = ssn.state.traits[t];
    kinds.iter().position(|(rep, _)| {
        let r = &ssn.state.tasks[*rep];
        r.request == task.request && r.spec == task.spec && ssn.state.traits[*rep] == traits
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
        let kind = match kind_of(ssn, &kinds, t) {
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

/// Once a member lands in a tier-1 domain, every node of that domain scores far higher for the
/// rest of the gang, so the gang spreads over as few domains as possible.
pub(crate) fn prefer_used_domain(
    ssn: &mut Session,
    tree: &TopologyTree,
    node: usize,
    placement: &mut Placement,
) {
    let Some(Some(domain)) = tree.leaf_of.get(node) else {
        return;
    };
    if let Some(bonus) = placement.bonus.as_mut() {
        let b = Arc::make_mut(bonus);
        let mut changed = Vec::new();
        for &m in &tree.domains[*domain as usize].nodes {
            if b[m as usize] < USED_DOMAIN_BONUS {
                b[m as usize] += USED_DOMAIN_BONUS;
                changed.push(m);
            }
        }
        ssn.touch_nodes(&changed);
    }
}

/// Members job `job` still needs, and what the first that many of `tasks` request together.
pub(crate) fn gang_need(ssn: &Session, job: usize, tasks: &[usize]) -> (u32, Resources) {
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
