//! The hard topology rules of a plan, checked against the snapshot it was made from.

use crate::topology::*;
use std::collections::BTreeMap;

/// Checks a plan against the hard topology rules: after it, every member holding a node of a
/// gang with a hard rule lies in one domain of an allowed tier (or the rule allows the root),
/// and so does every member of each sub-group whose policy has a hard rule. One line per
/// violation; empty when the plan keeps every rule.
pub fn check_binds(snapshot: &crate::Snapshot, plan: &crate::Plan) -> Vec<String> {
    use std::collections::BTreeSet;
    let task_of: std::collections::HashMap<(&str, &str), usize> = snapshot
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| ((&*t.namespace, &*t.name), i))
        .collect();
    // Per job with a hard rule somewhere: the node of each member the plan binds.
    let mut planned: BTreeMap<usize, BTreeMap<usize, u32>> = BTreeMap::new();
    for b in &plan.binds {
        let (Some(&t), Some(n)) = (
            task_of.get(&(&*b.pod.namespace, &*b.pod.name)),
            snapshot.node_index(&b.node),
        ) else {
            continue;
        };
        let job = &snapshot.jobs[snapshot.tasks[t].job];
        let hard = |r: &Option<Topology>| r.as_ref().is_some_and(|r| r.required);
        if hard(&job.topology) || job.sub_group_policies.iter().any(|p| hard(&p.topology)) {
            planned
                .entry(snapshot.tasks[t].job)
                .or_default()
                .insert(t, n as u32);
        }
    }
    let mut out = Vec::new();
    let mut label_trees: BTreeMap<&str, TopologyTree> = BTreeMap::new();
    for (job, binds) in planned {
        let j = &snapshot.jobs[job];
        // Members bound before this plan count toward the domain too.
        let node_of = |t: usize| -> Option<u32> {
            if let Some(&n) = binds.get(&t) {
                return Some(n);
            }
            let task = &snapshot.tasks[t];
            if !task.status.occupies_node() {
                return None;
            }
            task.node
                .as_deref()
                .and_then(|n| snapshot.node_index(n))
                .map(|n| n as u32)
        };
        let mut rules: Vec<(String, &Topology, Vec<usize>)> = Vec::new();
        if let Some(rule) = j.topology.as_ref().filter(|r| r.required) {
            rules.push((format!("podgroup {}", j.id), rule, j.tasks.clone()));
        }
        let members = j.tasks.iter().map(|&t| (t, &*snapshot.tasks[t].labels));
        for g in split_sub_groups(&j.sub_group_policies, members) {
            let policy = &j.sub_group_policies[g.policy as usize];
            if let Some(rule) = policy.topology.as_ref().filter(|r| r.required) {
                rules.push((
                    format!("sub-group {} of podgroup {}", g.name, j.id),
                    rule,
                    g.tasks,
                ));
            }
        }
        for (what, rule, tasks) in rules {
            let nodes: BTreeSet<u32> = tasks.iter().filter_map(|&t| node_of(t)).collect();
            if nodes.is_empty() {
                continue;
            }
            let tree = match &rule.source {
                TopologySource::HyperNodes => &snapshot.topology,
                TopologySource::Label(key) => label_trees
                    .entry(key)
                    .or_insert_with(|| TopologyTree::from_label(&snapshot.nodes, key)),
            };
            let allowed = match rule.allowed_tier(tree) {
                Ok(t) if t >= tree.root_tier() && !tree.is_empty() => continue,
                Ok(t) => t,
                Err(why) => {
                    out.push(format!("{what} was bound though {why}"));
                    continue;
                }
            };
            let nodes: Vec<u32> = nodes.into_iter().collect();
            let inside = tree
                .smallest_holding(&nodes)
                .filter(|&d| tree.domains[d as usize].tier <= allowed);
            if inside.is_none() {
                let names: Vec<&str> = nodes
                    .iter()
                    .map(|&n| &*snapshot.nodes[n as usize].name)
                    .collect();
                out.push(format!(
                    "{what} requires one {} domain of tier {allowed} or lower but was bound across {}",
                    rule.source_name(),
                    names.join(", ")
                ));
            }
        }
    }
    out
}
