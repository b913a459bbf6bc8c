//! The search of a hard-topology preemptor: domain by domain, tier by tier, the cheapest domain to
//! empty enough.

use super::*;

/// The domains a hard-topology preemptor may be placed in, by tier, lowest first (each tier's
/// in tree order): every domain of an allowed tier, or, when members already hold nodes, the
/// domains of an allowed tier holding all of them. `None` when the job has no hard rule over
/// real tiers (no rule, a soft one, one that allows the cluster root, or one that cannot be
/// resolved: the probe says why); then the search is not by domain.
pub(super) fn hard_domains(
    ssn: &mut Session,
    job: usize,
) -> Option<(Arc<TopologyTree>, Vec<Vec<u32>>)> {
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
pub(super) fn domain_cost(
    ssn: &Session,
    chosen: &[(&Unit, Vec<(usize, TaskStatus)>)],
) -> (i32, i64, usize) {
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
pub(super) fn search_domains(
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
