//! The search for one preemptor: take units cheapest first until the gang fits, prune what it fits
//! without, and commit the result (evictions, the room held, the `Preemption`).

use super::*;

/// A unit a search took: its rank among the candidates, the unit, and the tasks taken with
/// their previous status.
pub(super) type Chosen<'a> = (usize, &'a Unit, Vec<(usize, TaskStatus)>);

/// What a search found.
pub(super) enum Searched {
    /// Victims chosen and evicted; the victims' jobs.
    Evicted(BTreeSet<usize>),
    /// Taking every unit it could never made enough room: the most room it reached.
    Short(Resources),
    /// No set of units let the gang fit.
    NoFit,
}

/// Searches victims for `job` among `pool`'s units; on success evicts them and holds the
/// room.
pub(super) fn search(
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
pub(super) type Choice<'a> = (
    Vec<(&'a Unit, Vec<(usize, TaskStatus)>)>,
    Vec<(usize, usize)>,
);

/// Takes `candidates` (cheapest first) one by one until the gang fits ([`probe`]), then gives
/// back every unit it fits without, most expensive first. On success the chosen units stay
/// taken; otherwise every unit is given back and the error is the room that taking every unit
/// considered would have made (set-aside ones included). `free` bounds what a placement can
/// use (what is free where the gang may go).
#[allow(clippy::too_many_arguments)]
pub(super) fn choose<'a>(
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

/// Whether victim job `v` keeps either none of its members or at least `minMember`.
pub(super) fn gang_whole_or_enough(ssn: &Session, v: usize) -> bool {
    let ready = ssn.state.ready_count(v);
    ready == 0 || ready >= ssn.state.jobs[v].min_member
}

/// Makes the decision stick: victims evicted (they still hold their nodes while they
/// terminate), budgets charged, the preemptor's members held and nominated where the search
/// placed them.
pub(super) fn commit(
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
        ssn.decisions.nominations.push((t, Some(node)));
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
    ssn.decisions.preemptions.push(Preemption {
        action: mode.name(),
        job,
        victims,
        placement,
        why,
    });
}
