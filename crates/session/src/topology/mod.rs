//! Topology-aware gang placement over the domain tree (HyperNodes, or one tier from a node
//! label): one search for Volcano's `networkTopology` and Caldera's `spec.topology`.
//!
//! As Volcano's `allocate` action with the `network-topology-aware` plugin: tiers are tried
//! from the lowest up to the highest the rule allows; within a tier, domains whose free room
//! could hold the gang are tried fullest first (Volcano's HyperNode binpack score: keep whole
//! racks free for the next big gang), then by name; the first domain the gang fits in wins.
//! Members already holding a node pin the gang: domains holding them are tried first, and
//! under a hard rule the search never leaves the highest allowed domain around them. A soft
//! rule may go up to the cluster root, where the gang spreads over as few tier-1 domains as
//! it can; a hard rule that finds no domain holds the gang with a message naming the tier and
//! the closest candidate.

use crate::place::{place_gang, USED_DOMAIN_BONUS};
use crate::session::{Placement, Session, Statement};
use crate::state::Holdup;
use caldera_model::{Resources, Topology, TopologySource, TopologyTree};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) mod rooms;
mod search;
mod sub_groups;

use rooms::DomainRooms;

pub(crate) use search::*;
pub(crate) use sub_groups::*;

const ROOMY_DOMAIN_BONUS: f64 = 1.0e3;

impl Session {
    /// The domain tree a rule's source gives: the snapshot's HyperNodes, or the one-tier tree
    /// of a node label (built once per session).
    pub fn topology_tree(&mut self, source: &TopologySource) -> Arc<TopologyTree> {
        match source {
            TopologySource::HyperNodes => self.state.topology.clone(),
            TopologySource::Label(key) => {
                if let Some(t) = self.label_trees.get(key) {
                    return t.clone();
                }
                let tree = Arc::new(TopologyTree::from_label(&self.state.nodes, key));
                self.label_trees.insert(key.clone(), tree.clone());
                tree
            }
        }
    }
}

impl Session {
    /// Brings the rooms of `tree` (the tree of `source`) up to date and returns them.
    fn rooms(&mut self, source: &TopologySource, tree: &TopologyTree) -> &[(Resources, Resources)] {
        let log_len = self.change_log.len();
        if !self.domain_rooms.contains_key(source) {
            let mut node_domains = vec![Vec::new(); self.state.nodes.len()];
            for (i, d) in tree.domains.iter().enumerate() {
                for &n in &d.nodes {
                    if let Some(list) = node_domains.get_mut(n as usize) {
                        list.push(i as u32);
                    }
                }
            }
            let counted: Vec<Resources> = self
                .state
                .nodes
                .iter()
                .map(|n| if n.ready { n.idle() } else { Resources::new() })
                .collect();
            let rooms = tree
                .domains
                .iter()
                .map(|d| {
                    let mut alloc = Resources::new();
                    let mut idle = Resources::new();
                    for &n in &d.nodes {
                        let node = &self.state.nodes[n as usize];
                        if node.ready {
                            alloc.add(&node.allocatable);
                            idle.add(&counted[n as usize]);
                        }
                    }
                    (alloc, idle)
                })
                .collect();
            let fresh = DomainRooms {
                node_domains,
                counted,
                rooms,
                seen: log_len,
            };
            self.domain_rooms.insert(source.clone(), fresh);
        }
        let Some(r) = self.domain_rooms.get_mut(source) else {
            return &[];
        };
        for i in r.seen..log_len {
            let n = self.change_log[i] as usize;
            let node = &self.state.nodes[n];
            let now = if node.ready {
                node.idle()
            } else {
                Resources::new()
            };
            if now == r.counted[n] {
                continue;
            }
            let before = std::mem::replace(&mut r.counted[n], now);
            for &d in &r.node_domains[n] {
                let idle = &mut r.rooms[d as usize].1;
                idle.sub(&before);
                idle.add(&r.counted[n]);
            }
        }
        r.seen = log_len;
        &r.rooms
    }

    /// The first plugin's domain weights (see [`crate::plugin::Plugin::domain_weights`]).
    pub fn domain_weights(&self) -> Option<&BTreeMap<String, f64>> {
        self.slots.iter().find_map(|s| s.plugin.domain_weights())
    }
}

/// Volcano's HyperNode binpack score of putting `gang` in a domain: over the resources the
/// gang asks for, the weighted mean of (used + request) / allocatable (weights from
/// [`crate::plugin::Plugin::domain_weights`]). Higher is fuller.
fn fullness(
    weights_of: Option<&BTreeMap<String, f64>>,
    alloc: &Resources,
    idle: &Resources,
    gang: &Resources,
) -> f64 {
    let mut sum = 0.0;
    let mut weights = 0.0;
    for (name, req) in gang.iter() {
        let a = alloc.get(name);
        let w = match weights_of {
            Some(map) => map.get(name).copied().unwrap_or(0.0),
            None => 1.0,
        };
        if a <= 0 || w <= 0.0 {
            continue;
        }
        let used = a - idle.get(name);
        sum += w * (used + req) as f64 / a as f64;
        weights += w;
    }
    if weights > 0.0 {
        sum / weights
    } else {
        0.0
    }
}

/// How many members asking `req` the Ready nodes of `nodes` could take, at most `cap`.
fn members_fitting(ssn: &Session, nodes: &[u32], req: &Resources, cap: u32) -> u32 {
    let mut count = 0u32;
    for &n in nodes {
        let node = &ssn.state.nodes[n as usize];
        if !node.ready {
            continue;
        }
        // Free room per resource without building the node's idle list (this runs for
        // every node of every domain a failure message looks at).
        let here = req
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(name, v)| {
                let free = node.allocatable.get(name) - node.used.get(name);
                (free.max(0) / v).min(i64::from(cap)) as u32
            })
            .min()
            .unwrap_or(cap);
        count = count.saturating_add(here);
        if count >= cap {
            return cap;
        }
    }
    count
}

/// The domain of `domains` (indices into `tree`, the tree of `source`) whose Ready nodes in
/// `scope` (all of them when `None`) could take the most members asking `req`, at most
/// `cap`, ties to the lower tier, then the name: (how many, domain). `None` when none could
/// take one. Domains are looked at by their total free room first, and a domain whose room
/// could not beat the best found is not counted node by node.
fn closest(
    ssn: &mut Session,
    source: &TopologySource,
    tree: &TopologyTree,
    domains: &[u32],
    scope: Option<&[u32]>,
    req: &Resources,
    cap: u32,
) -> Option<(u32, u32)> {
    let rooms = ssn.rooms(source, tree);
    let mut order: Vec<(u32, u32)> = domains
        .iter()
        .map(|&d| {
            let idle = &rooms[d as usize].1;
            let bound = req
                .iter()
                .filter(|(_, v)| *v > 0)
                .map(|(name, v)| (idle.get(name).max(0) / v).min(i64::from(cap)) as u32)
                .min()
                .unwrap_or(cap);
            (bound, d)
        })
        .collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut best: Option<(u32, u32)> = None;
    for (bound, d) in order {
        if bound == 0 || best.is_some_and(|(c, _)| bound < c) {
            break;
        }
        let nodes = &tree.domains[d as usize].nodes;
        let count = match scope {
            None => members_fitting(ssn, nodes, req, cap),
            Some(s) => {
                let inside: Vec<u32> = nodes
                    .iter()
                    .copied()
                    .filter(|n| s.binary_search(n).is_ok())
                    .collect();
                members_fitting(ssn, &inside, req, cap)
            }
        };
        // Domains are indexed by (tier, name): a lower index wins a tie.
        let better = match best {
            None => count > 0,
            Some((c, b)) => count > c || (count == c && d < b),
        };
        if better {
            best = Some((count, d));
        }
    }
    best
}

/// The source of `job`'s topology rule (the HyperNodes when it has none).
fn job_source(ssn: &Session, job: usize) -> TopologySource {
    ssn.state.jobs[job]
        .topology
        .as_ref()
        .map(|t| t.source.clone())
        .unwrap_or(TopologySource::HyperNodes)
}

/// The nodes members of `job` already hold, sorted.
pub(crate) fn held_nodes(ssn: &Session, job: usize) -> Vec<u32> {
    held_by(ssn, &ssn.state.jobs[job].tasks)
}

/// Why `job`'s hard topology rule could never be met, even on empty nodes: no domain of an
/// allowed tier has the allocatable room for its gang (its `minResources`, else the requests
/// of its first `minMember` members). `None` when some domain could, when the rule allows the
/// cluster root, when members already hold nodes (the allocate action judges the pinned
/// domain), and when the rule itself cannot be resolved (allocate says why).
pub fn never_fits(ssn: &mut Session, job: usize) -> Option<String> {
    let topo = ssn.state.jobs[job]
        .topology
        .clone()
        .filter(|t| t.required)?;
    let tree = ssn.topology_tree(&topo.source);
    let allowed = topo.allowed_tier(&tree).ok()?;
    if tree.is_empty() || allowed >= tree.root_tier() || !held_nodes(ssn, job).is_empty() {
        return None;
    }
    let j = &ssn.state.jobs[job];
    let gang = match &j.min_resources {
        Some(r) => r.clone(),
        None => {
            let mut sum = Resources::new();
            for &t in j.tasks.iter().take(j.min_member as usize) {
                sum.add(&ssn.state.tasks[t].request);
            }
            sum
        }
    };
    let rooms = ssn.rooms(&topo.source, &tree);
    let allowed_domains = || {
        tree.domains
            .iter()
            .enumerate()
            .filter(|(_, d)| d.tier <= allowed)
    };
    // Whether some domain could hold the gang, before any message is worked out: from the
    // highest tiers down (the larger domains, listed last), so a gang that fits stops early.
    if allowed_domains()
        .rev()
        .any(|(i, _)| gang.fits_in(&rooms[i].0))
    {
        return None;
    }
    let mut largest: Option<(f64, u32, Resources)> = None;
    for (i, _) in allowed_domains() {
        let alloc = &rooms[i].0;
        let size = fullness(None, alloc, &Resources::new(), &gang);
        if largest.as_ref().is_none_or(|(s, _, _)| size < *s) {
            largest = Some((size, i as u32, alloc.clone()));
        }
    }
    let mut msg = format!(
        "no {} domain of tier {allowed} or lower could hold the gang even empty (it needs {gang})",
        topo.source_name()
    );
    if let Some((_, d, alloc)) = largest {
        msg = format!(
            "{msg}; the largest, {}, has {alloc} in all",
            tree.domains[d as usize].name
        );
    }
    Some(msg)
}

/// Places `tasks` (the gang needs `need` of them) under `topo`; see the module doc.
pub(crate) fn place_in_topology(
    ssn: &mut Session,
    job: usize,
    tasks: &[usize],
    need: u32,
    topo: &Topology,
    dry: bool,
) -> Result<usize, Option<u32>> {
    let tree = ssn.topology_tree(&topo.source);
    let root_tier = tree.root_tier();
    let allowed = match topo.allowed_tier(&tree) {
        Ok(t) => t,
        Err(msg) => {
            ssn.hold(job, Holdup::Fit(msg));
            return Err(None);
        }
    };
    // Members already holding nodes pin the gang: the smallest domain holding them, and the
    // highest allowed domain around it bounds a hard rule.
    let held = held_nodes(ssn, job);
    let pin = Pin::of(&tree, &held, allowed);
    let scope = pin.pin;
    if topo.required && !held.is_empty() && scope.is_none() && allowed < root_tier {
        let msg = format!(
            "the gang's members already hold nodes in no single {} domain of tier {allowed} or lower; the rest cannot join them",
            topo.source_name()
        );
        ssn.hold(job, Holdup::Fit(msg));
        return Err(None);
    }
    let pinned = !held.is_empty();
    let mut gang = Resources::new();
    for &t in tasks.iter().take(need as usize) {
        gang.add(&ssn.state.tasks[t].request);
    }
    let search = DomainSearch {
        tree: &tree,
        source: &topo.source,
        allowed,
        among: None,
        pin,
        // A preemption search trying one domain places the gang inside it and nowhere else.
        confine: ssn.topology_within,
        need: &gang,
    };
    // Why the first domain with room enough still could not take the gang (its members'
    // other constraints: anti-affinity, spread, volumes, ports), for the message.
    let mut other_cause: Option<String> = None;
    let (looked, placed) = search.run(ssn, |ssn, i| {
        let nodes = tree.domains[i as usize].nodes.clone();
        let mut placement = Placement {
            only: Some(Arc::new(nodes)),
            bonus: None,
        };
        let saved = ssn.state.job_runs[job].holdup.clone();
        if let Ok(n) = place_within(ssn, job, tasks, &mut placement, None, dry) {
            ssn.state.job_runs[job].domain = Some(tree.domains[i as usize].name.clone());
            return Some(Ok(n));
        }
        match &ssn.state.job_runs[job].holdup {
            Some(Holdup::Quota(_)) => return Some(Err(None)),
            Some(Holdup::Fit(msg)) if saved.is_none() && other_cause.is_none() => {
                // kube-scheduler's summary for the member that did not fit in that
                // domain (not the whole shortfall message of that attempt).
                let fit = ssn.state.job_runs[job].shortfall.as_ref().map(|s| &s.fit);
                other_cause = Some(fit.unwrap_or(msg).clone());
            }
            _ => {}
        }
        ssn.state.job_runs[job].holdup = saved;
        None
    });
    if let Some(result) = placed {
        return result;
    }
    let Looked {
        considered,
        with_room,
    } = looked;
    // A hard rule reaches the root only above real tiers: with no domains at all it holds.
    if allowed >= root_tier && (!topo.required || !tree.is_empty()) {
        // The cluster root: a hard rule that allows it places anywhere (inside the pinned
        // domain's top ancestor when members hold nodes); a soft rule spreads over as few
        // tier-1 domains as it can.
        ssn.state.job_runs[job].domain = None;
        if topo.required {
            let mut placement = Placement {
                only: scope.map(|s| Arc::new(tree.domains[s as usize].nodes.clone())),
                bonus: None,
            };
            return place_within(ssn, job, tasks, &mut placement, None, dry);
        }
        if !ssn.state.sub_groups[job].is_empty() {
            return place_sub_groups(ssn, job, tasks, None, dry);
        }
        return spread_softly(ssn, job, tasks, &gang, &tree, &held, dry);
    }
    if tree.is_empty() && matches!(topo.source, TopologySource::HyperNodes) {
        let msg = "networkTopology is hard but no HyperNodes exist (create them; `caldera crd` prints their CRD)".to_string();
        ssn.hold(job, Holdup::Fit(msg));
        return Err(None);
    }
    let mut msg = match &topo.source {
        TopologySource::Label(key) => format!(
            "0/{considered} {key} domains can hold all {need} members of the gang together (it needs {gang})"
        ),
        TopologySource::HyperNodes => format!(
            "0/{considered} HyperNodes of tier {allowed} or lower can hold all {need} members of the gang together (it needs {gang})"
        ),
    };
    if let Some(&first) = tasks.first() {
        let req = ssn.state.tasks[first].request.clone();
        let domains = search.eligible();
        let best = closest(ssn, &topo.source, &tree, &domains, None, &req, need)
            .map(|(count, d)| (count, &tree.domains[d as usize]));
        if let Some((count, d)) = best {
            if matches!(topo.source, TopologySource::HyperNodes) {
                msg = format!(
                    "{msg}; the closest, {} (tier {}), could hold {count} of them",
                    d.name, d.tier
                );
            } else {
                msg = format!("{msg}; the closest, {}, could hold {count} of them", d.name);
            }
        }
    }
    if let Some(cause) = other_cause {
        msg = format!(
            "{msg}; {with_room} had room for it, but its members do not all fit there: {cause}"
        );
    }
    ssn.hold(job, Holdup::Fit(msg));
    if pinned {
        // Depends on where this gang's members are: nothing to remember for others.
        Err(None)
    } else {
        // No domain holds `need` such members, so no gang needing as many does either; a
        // smaller one might.
        Err(Some(need.saturating_sub(1)))
    }
}

/// A soft rule at the cluster root: roomier tier-1 domains first, and once a member lands in
/// a domain (or members already hold nodes there) its nodes score far higher for the rest.
fn spread_softly(
    ssn: &mut Session,
    job: usize,
    tasks: &[usize],
    gang: &Resources,
    tree: &TopologyTree,
    held: &[u32],
    dry: bool,
) -> Result<usize, Option<u32>> {
    let total = ssn.state.total.clone();
    let mut bonus = vec![0.0; ssn.state.nodes.len()];
    let source = job_source(ssn, job);
    let rooms = ssn.rooms(&source, tree).to_vec();
    let mut ranked: Vec<(f64, u32)> = tree
        .domains
        .iter()
        .enumerate()
        .filter(|(_, d)| d.tier == 1)
        .map(|(i, _)| {
            let idle = &rooms[i].1;
            let room: f64 = gang
                .iter()
                .map(|(n, _)| idle.get(n) as f64 / total.get(n).max(1) as f64)
                .sum();
            (room, i as u32)
        })
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let count = ranked.len().max(1) as f64;
    for (rank, (_, d)) in ranked.iter().enumerate() {
        for &n in &tree.domains[*d as usize].nodes {
            bonus[n as usize] = ROOMY_DOMAIN_BONUS * (count - rank as f64) / count;
        }
    }
    for &n in held {
        if let Some(Some(d)) = tree.leaf_of.get(n as usize) {
            for &m in &tree.domains[*d as usize].nodes {
                if bonus[m as usize] < USED_DOMAIN_BONUS {
                    bonus[m as usize] += USED_DOMAIN_BONUS;
                }
            }
        }
    }
    let mut placement = Placement {
        only: None,
        bonus: Some(Arc::new(bonus)),
    };
    place_gang(ssn, job, tasks, &mut placement, Some(tree), dry)
}

/// Places `tasks` of `job` inside `scope` (every node when `None`): the gang's members
/// directly, or, for a job with sub-groups, sub-group by sub-group ([`place_sub_groups`]).
pub(crate) fn place_within(
    ssn: &mut Session,
    job: usize,
    tasks: &[usize],
    placement: &mut Placement,
    prefer: Option<&TopologyTree>,
    dry: bool,
) -> Result<usize, Option<u32>> {
    if ssn.state.sub_groups[job].is_empty() {
        place_gang(ssn, job, tasks, placement, prefer, dry)
    } else {
        place_sub_groups(ssn, job, tasks, placement.only.clone(), dry)
    }
}
