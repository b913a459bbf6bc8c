//! Placing a gang sub-group by sub-group (`subGroupPolicy`): each sub-group inside one domain of
//! its own rule, inside the gang's, and the members of one placement.

use super::*;

/// A unit of a job with sub-groups: one sub-group (index into the job's sub-groups), or one
/// member no policy takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    Group(usize),
    Loose(usize),
}

/// Places a job with sub-groups (Volcano's `subGroupPolicy`) inside `scope` (the gang's
/// domain; every node when `None`), in one statement: sub-group by sub-group, each inside one
/// domain of its own rule within the scope (the lowest tier first, the fullest domain first,
/// as for a gang), `subGroupSize` members at a time, all or none. Sub-groups a policy's
/// `minSubGroups` still needs go first, then the others, then members no policy takes, one
/// by one. A gang not yet ready stops as soon as it is (the rest come in later attempts); a
/// ready one places one more sub-group (or member). Nothing is kept unless the gang is ready
/// at the end; the message then names the first sub-group that found no domain.
pub(crate) fn place_sub_groups(
    ssn: &mut Session,
    job: usize,
    tasks: &[usize],
    scope: Option<Arc<Vec<u32>>>,
    dry: bool,
) -> Result<usize, Option<u32>> {
    let groups = ssn.state.sub_groups[job].clone();
    let policies = ssn.state.jobs[job].sub_group_policies.clone();
    let mut group_of = std::collections::HashMap::new();
    for (g, group) in groups.iter().enumerate() {
        for &t in &group.tasks {
            group_of.insert(t, g);
        }
    }
    let was_ready = ssn.job_ready(job);
    // Pending members per sub-group, in the order given.
    let mut pending: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
    let mut loose = Vec::new();
    for &t in tasks {
        match group_of.get(&t) {
            Some(&g) => pending[g].push(t),
            None => loose.push(t),
        }
    }
    // Sub-groups still needed for `minSubGroups` first, by policy.
    let mut full_per_policy = vec![0u32; policies.len()];
    for group in groups.iter() {
        let ready = group
            .tasks
            .iter()
            .filter(|&&t| ssn.state.tasks[t].status.is_ready())
            .count() as u32;
        if ready >= policies[group.policy as usize].size {
            full_per_policy[group.policy as usize] += 1;
        }
    }
    let mut needed = Vec::new();
    let mut others = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        if pending[g].is_empty() {
            continue;
        }
        let p = group.policy as usize;
        let ready = group
            .tasks
            .iter()
            .filter(|&&t| ssn.state.tasks[t].status.is_ready())
            .count() as u32;
        if ready < policies[p].size && full_per_policy[p] < policies[p].min {
            full_per_policy[p] += 1;
            needed.push(Unit::Group(g));
        } else {
            others.push(Unit::Group(g));
        }
    }
    let mut units: std::collections::VecDeque<Unit> = needed
        .into_iter()
        .chain(others)
        .chain(loose.iter().map(|&t| Unit::Loose(t)))
        .collect();
    let mut stmt = Statement::new();
    let mut first_failure: Option<String> = None;
    let mut quota: Option<String> = None;
    let mut outcomes: Vec<(Arc<str>, String)> = Vec::new();
    while let Some(unit) = units.pop_front() {
        if !stmt.is_empty() && (was_ready || ssn.job_ready(job)) {
            break;
        }
        match unit {
            Unit::Loose(t) => {
                let placement = Placement {
                    only: scope.clone(),
                    bonus: None,
                };
                match place_members(ssn, &mut stmt, &[t], 1, &placement) {
                    Ok(()) => {}
                    Err(Holdup::Quota(msg)) => {
                        quota = Some(msg);
                        break;
                    }
                    Err(Holdup::Fit(msg)) | Err(Holdup::NotAdmitted { message: msg, .. }) => {
                        first_failure.get_or_insert(format!(
                            "member {} (in no sub-group) found no node: {msg}",
                            ssn.state.tasks[t].key()
                        ));
                    }
                }
            }
            Unit::Group(g) => {
                let group = &groups[g];
                let policy = &policies[group.policy as usize];
                pending[g].retain(|&t| ssn.state.tasks[t].schedulable_pending());
                let explain = first_failure.is_none();
                match place_one_sub_group(
                    ssn,
                    &mut stmt,
                    group,
                    policy,
                    &pending[g],
                    &scope,
                    explain,
                ) {
                    Ok(outcome) => {
                        outcomes.push((group.name.clone(), outcome));
                        // Its other members follow, after the other sub-groups (as Volcano
                        // puts a ready sub-job back in the queue).
                        if pending[g]
                            .iter()
                            .any(|&t| ssn.state.tasks[t].schedulable_pending())
                        {
                            units.push_back(unit);
                        }
                    }
                    Err(Holdup::Quota(msg)) => {
                        quota = Some(msg);
                        break;
                    }
                    Err(Holdup::Fit(msg)) | Err(Holdup::NotAdmitted { message: msg, .. }) => {
                        outcomes.push((group.name.clone(), format!("no room: {msg}")));
                        first_failure.get_or_insert(format!("sub-group {}: {msg}", group.name));
                        // Stop once the members left could no longer make the gang ready.
                        let left: usize = units
                            .iter()
                            .map(|u| match u {
                                Unit::Group(g) => pending[*g].len(),
                                Unit::Loose(_) => 1,
                            })
                            .sum();
                        let have = ssn.state.ready_count(job) as usize;
                        if !was_ready && have + left < ssn.state.jobs[job].min_member as usize {
                            break;
                        }
                    }
                }
            }
        }
    }
    let ready = !stmt.is_empty() && ssn.job_ready(job);
    for (name, outcome) in outcomes {
        let runs = &mut ssn.state.job_runs[job].sub_groups;
        if ready {
            runs.insert(name, outcome);
            continue;
        }
        // A failed attempt does not hide where an earlier one placed the sub-group.
        if runs.get(&name).is_some_and(|o| o.starts_with("placed")) {
            continue;
        }
        let outcome = match outcome.strip_prefix("placed") {
            Some(rest) => format!("fits{rest}, but is not kept: the gang cannot be placed"),
            None => outcome,
        };
        runs.insert(name, outcome);
    }
    if ready && dry {
        let n = stmt.len();
        ssn.probed = stmt.ops().to_vec();
        ssn.discard(stmt);
        return Ok(n);
    }
    if ready {
        return Ok(crate::place::settle(ssn, job, stmt));
    }
    ssn.discard(stmt);
    if let Some(msg) = quota {
        ssn.hold(job, Holdup::Quota(msg));
        return Err(None);
    }
    let msg = match first_failure {
        Some(m) => format!("the gang's sub-groups cannot all be placed: {m}"),
        None => match ssn.state.sub_groups_short(job, |t| {
            t.status.is_ready() || t.schedulable_pending()
        }) {
            Some((policy, have, min)) => format!(
                "subGroupPolicy {policy:?} needs {min} full sub-groups; only {have} have their members"
            ),
            None => "the gang's members could not all be placed together".to_string(),
        },
    };
    ssn.hold(job, Holdup::Fit(msg));
    Err(None)
}

/// Places one sub-group's next `subGroupSize` members (one more member once it is full)
/// inside one domain of its policy's rule within `scope`, into `stmt`; says where, or why
/// not (nothing of it stays placed then).
pub(super) fn place_one_sub_group(
    ssn: &mut Session,
    stmt: &mut Statement,
    group: &caldera_model::SubGroup,
    policy: &caldera_model::SubGroupPolicy,
    pending: &[usize],
    scope: &Option<Arc<Vec<u32>>>,
    explain: bool,
) -> Result<String, Holdup> {
    let ready = group
        .tasks
        .iter()
        .filter(|&&t| ssn.state.tasks[t].status.is_ready())
        .count() as u32;
    let need = if ready >= policy.size {
        1
    } else {
        policy.size - ready
    };
    if (pending.len() as u32) < need {
        return Err(Holdup::Fit(format!(
            "it has {} members, fewer than its subGroupSize {}",
            group.tasks.len(),
            policy.size
        )));
    }
    let whole = Placement {
        only: scope.clone(),
        bonus: None,
    };
    let Some(rule) = policy.topology.clone() else {
        place_members(ssn, stmt, pending, need, &whole)?;
        return Ok("placed (no networkTopology of its own)".to_string());
    };
    let tree = ssn.topology_tree(&rule.source);
    let root_tier = tree.root_tier();
    let allowed = rule.allowed_tier(&tree).map_err(Holdup::Fit)?;
    if rule.required && tree.is_empty() {
        return Err(Holdup::Fit(format!(
            "its networkTopology is hard but there are no {} domains",
            rule.source_name()
        )));
    }
    // Members of the sub-group already holding nodes pin it, as members pin a gang.
    let held = held_by(ssn, &group.tasks);
    let pinned = Pin::of(&tree, &held, allowed);
    let pin = pinned.pin;
    if rule.required && !held.is_empty() && pin.is_none() && allowed < root_tier {
        return Err(Holdup::Fit(format!(
            "its members already hold nodes in no single {} domain of tier {allowed} or lower",
            rule.source_name()
        )));
    }
    let mut req = Resources::new();
    for &t in pending.iter().take(need as usize) {
        req.add(&ssn.state.tasks[t].request);
    }
    // The domains of allowed tiers that hold a node of the scope, found from the scope's
    // nodes up (a gang's domain is a few of thousands), by index (i.e. by tier, then name).
    let domains = domains_touching(&tree, scope.as_deref().map(Vec::as_slice), allowed);
    let search = DomainSearch {
        tree: &tree,
        source: &rule.source,
        allowed,
        among: Some(&domains),
        pin: pinned,
        confine: None,
        need: &req,
    };
    let (looked, placed) = search.run(ssn, |ssn, i| {
        let d = &tree.domains[i as usize];
        let nodes: Vec<u32> = match scope {
            None => d.nodes.clone(),
            Some(s) => d
                .nodes
                .iter()
                .copied()
                .filter(|n| s.binary_search(n).is_ok())
                .collect(),
        };
        let placement = Placement {
            only: Some(Arc::new(nodes)),
            bonus: None,
        };
        match place_members(ssn, stmt, pending, need, &placement) {
            Ok(()) => Some(Ok(format!("placed in {}", d.name))),
            Err(Holdup::Quota(m)) => Some(Err(Holdup::Quota(m))),
            Err(_) => None,
        }
    });
    if let Some(result) = placed {
        return result;
    }
    let considered = looked.considered;
    let mut best: Option<(u32, u32)> = None;
    if allowed >= root_tier {
        // A soft rule (or a hard one allowing the root): anywhere in scope, inside the
        // pinned domain's top ancestor under a hard rule.
        let placement = match (rule.required, pin) {
            (true, Some(p)) => Placement {
                only: Some(Arc::new(
                    tree.domains[p as usize]
                        .nodes
                        .iter()
                        .copied()
                        .filter(|n| scope.as_ref().is_none_or(|s| s.binary_search(n).is_ok()))
                        .collect(),
                )),
                bonus: None,
            },
            _ => whole,
        };
        place_members(ssn, stmt, pending, need, &placement)?;
        return Ok("placed across domains".to_string());
    }
    // The closest domain is worth its cost only for the message that will be shown.
    if let Some(&first) = pending.first().filter(|_| explain) {
        let one = ssn.state.tasks[first].request.clone();
        let eligible = search.eligible();
        let scope_nodes = scope.as_deref().map(Vec::as_slice);
        best = closest(ssn, &rule.source, &tree, &eligible, scope_nodes, &one, need);
    }
    let inside = if scope.is_some() {
        " inside the gang's domain"
    } else {
        ""
    };
    let mut msg = format!(
        "0/{considered} {} domains of tier {allowed} or lower{inside} can hold its {need} members together (they need {req})",
        rule.source_name()
    );
    if let Some((count, d)) = best {
        let d = &tree.domains[d as usize];
        msg = format!(
            "{msg}; the closest, {} (tier {}), could hold {count} of them",
            d.name, d.tier
        );
    }
    Err(Holdup::Fit(msg))
}

/// The domains of tier `allowed` or lower holding a node of `scope` (every such domain when
/// `None`), ascending. From the scope's tier-1 domains up when every node of the scope has
/// one (a HyperNode may also hold nodes directly: then every domain is checked).
pub(super) fn domains_touching(
    tree: &TopologyTree,
    scope: Option<&[u32]>,
    allowed: u32,
) -> Vec<u32> {
    let all = || {
        (0..tree.domains.len() as u32)
            .filter(|&d| tree.domains[d as usize].tier <= allowed)
            .collect::<Vec<u32>>()
    };
    let Some(scope) = scope else {
        return all();
    };
    let mut found = Vec::new();
    let mut last_leaf = None;
    for &n in scope {
        let Some(Some(leaf)) = tree.leaf_of.get(n as usize) else {
            return all()
                .into_iter()
                .filter(|&d| {
                    let d = &tree.domains[d as usize];
                    d.nodes.iter().any(|n| scope.binary_search(n).is_ok())
                })
                .collect();
        };
        if last_leaf == Some(*leaf) {
            continue;
        }
        last_leaf = Some(*leaf);
        let mut at = Some(*leaf);
        while let Some(d) = at {
            let domain = &tree.domains[d as usize];
            if domain.tier > allowed {
                break;
            }
            found.push(d);
            at = domain.parent;
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// Places `count` of `members` (in order, skipping those that find no node) on the nodes of
/// `placement` into `stmt`; on failure undoes what it placed here and says why (the fit
/// message of the member that found no node, or the queue's refusal).
pub(super) fn place_members(
    ssn: &mut Session,
    stmt: &mut Statement,
    members: &[usize],
    count: u32,
    placement: &Placement,
) -> Result<(), Holdup> {
    let mark = stmt.len();
    let mut kinds: Vec<(usize, crate::session::Candidates)> = Vec::new();
    let mut placed = 0u32;
    let mut failure = None;
    for &t in members {
        if placed == count {
            break;
        }
        if let Err(msg) = ssn.allocatable(t) {
            failure = Some(Holdup::Quota(msg));
            break;
        }
        let pods = &ssn.state.tasks[t].spec.pods;
        let fresh = pods.crosses_nodes() && !pods.verdict_only_crosses_nodes();
        let kind = if fresh {
            None
        } else {
            crate::place::kind_of(ssn, &kinds, t)
        };
        let k = match kind {
            Some(k) => k,
            None => {
                let c = ssn.candidates(t, placement);
                kinds.push((t, c));
                kinds.len() - 1
            }
        };
        match ssn.pick(t, &mut kinds[k].1, placement) {
            Some(node) => {
                ssn.allocate(stmt, t, node);
                ssn.refresh(t, node, &mut kinds[k].1, placement);
                placed += 1;
            }
            None => {
                failure = Some(Holdup::Fit(ssn.fit_message(&kinds[k].1)));
                break;
            }
        }
        if fresh {
            kinds.pop();
        }
    }
    if placed == count {
        return Ok(());
    }
    let tail = stmt.split_off(mark);
    ssn.discard(tail);
    Err(failure.unwrap_or_else(|| {
        Holdup::Fit(format!("only {placed} of {count} members could be placed"))
    }))
}
