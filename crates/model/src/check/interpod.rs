//! The inter-pod rules of a plan (affinity, anti-affinity, hard spread), checked against the
//! snapshot it was made from.

use crate::interpod::*;
use crate::plan::Plan;
use crate::selector::untolerated_taint;
use crate::snapshot::Snapshot;
use crate::task::Task;
use std::collections::{BTreeMap, HashMap};

/// A pod on a node, as the independent inter-pod check sees it.
struct Seen<'a> {
    namespace: &'a str,
    labels: &'a BTreeMap<String, String>,
    node: usize,
    terminating: bool,
    anti: &'a [PodAffinityTerm],
}

/// Re-checks every bind's inter-pod constraints from scratch, in plan order (members bound
/// earlier in the plan count as existing pods for later ones): the pod's required affinity
/// (with kube-scheduler's first-pod exception) and anti-affinity, existing pods' required
/// anti-affinity, and `DoNotSchedule` topology spread. A direct scan of every pod, so the
/// session's indexes cannot hide their own mistakes.
pub fn check_binds(snapshot: &Snapshot, plan: &Plan) -> Vec<String> {
    let mut seen: Vec<Seen> = snapshot
        .pods
        .iter()
        .filter_map(|p| {
            Some(Seen {
                namespace: &p.namespace,
                labels: &p.labels,
                node: snapshot.node_index(&p.node)?,
                terminating: p.terminating,
                anti: &p.anti_affinity,
            })
        })
        .collect();
    let tasks: HashMap<(&str, &str), &Task> = snapshot
        .tasks
        .iter()
        .map(|t| ((&*t.namespace, &*t.name), t))
        .collect();
    let nodes = &snapshot.nodes;
    let same = |key: &str, a: usize, b: usize| {
        let (x, y) = (nodes[a].labels.get(key), nodes[b].labels.get(key));
        x.is_some() && x == y
    };
    let mut out = Vec::new();
    for bind in &plan.binds {
        let (Some(task), Some(n)) = (
            tasks.get(&(&*bind.pod.namespace, &*bind.pod.name)),
            snapshot.node_index(&bind.node),
        ) else {
            continue;
        };
        let mut fail = |why: &str| {
            out.push(format!(
                "pod {}/{} bound to {}: {why}",
                bind.pod.namespace, bind.pod.name, bind.node
            ))
        };
        let c = &task.spec.pods;
        let ns = &*task.namespace;
        for p in &seen {
            if p.anti
                .iter()
                .any(|t| t.matches(ns, &task.labels) && same(&t.topology_key, p.node, n))
            {
                fail("an existing pod's required anti-affinity forbids its domain");
            }
        }
        for t in &c.anti_affinity {
            if seen
                .iter()
                .any(|p| t.matches(p.namespace, p.labels) && same(&t.topology_key, p.node, n))
            {
                fail("its required anti-affinity matches a pod in the node's domain");
            }
        }
        // kube-scheduler counts only pods that match every term (`podMatchesAllAffinityTerms`):
        // each term needs such a pod in the node's domain for its key, and the first-pod
        // exception holds while no such pod exists on a node with one of the terms' keys.
        let matches_all = |namespace: &str, labels: &BTreeMap<String, String>| {
            c.affinity.iter().all(|t| t.matches(namespace, labels))
        };
        let met = c.affinity.iter().all(|t| {
            seen.iter()
                .any(|p| matches_all(p.namespace, p.labels) && same(&t.topology_key, p.node, n))
        });
        let first = matches_all(ns, &task.labels)
            && c.affinity
                .iter()
                .all(|t| nodes[n].labels.contains_key(&t.topology_key))
            && !seen.iter().any(|p| {
                matches_all(p.namespace, p.labels)
                    && c.affinity
                        .iter()
                        .any(|t| nodes[p.node].labels.contains_key(&t.topology_key))
            });
        if !met && !first {
            fail("its required pod affinity is not met in the node's domain");
        }
        for s in c.spread.iter().filter(|s| s.hard) {
            let eligible = |i: usize| {
                let node = &nodes[i];
                c.spread
                    .iter()
                    .filter(|x| x.hard)
                    .all(|x| node.labels.contains_key(&x.topology_key))
                    && (!s.honor_node_affinity || task.spec.matches_node(&node.name, &node.labels))
                    && (!s.honor_taints
                        || untolerated_taint(&node.taints, &task.spec.tolerations).is_none())
            };
            let Some(here) = nodes[n].labels.get(&s.topology_key) else {
                fail("the node lacks the spread constraint's topology key");
                continue;
            };
            let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
            for i in (0..nodes.len()).filter(|&i| eligible(i)) {
                if let Some(d) = nodes[i].labels.get(&s.topology_key) {
                    counts.entry(d).or_insert(0);
                }
            }
            for p in seen.iter().filter(|p| !p.terminating && eligible(p.node)) {
                if s.counts(p.namespace, p.labels) {
                    if let Some(d) = nodes[p.node].labels.get(&s.topology_key) {
                        *counts.entry(d).or_insert(0) += 1;
                    }
                }
            }
            let mut min = counts.values().copied().min().unwrap_or(0);
            if s.min_domains.is_some_and(|m| (counts.len() as u32) < m) {
                min = 0;
            }
            let own = u32::from(s.counts(ns, &task.labels));
            let count = counts.get(here.as_str()).copied().unwrap_or(0);
            if count + own > min + s.max_skew {
                fail(&format!(
                    "topology spread over {} is skewed: {count} + {own} in {here} against a minimum of {min} (maxSkew {})",
                    s.topology_key, s.max_skew
                ));
            }
        }
        seen.push(Seen {
            namespace: ns,
            labels: &task.labels,
            node: n,
            terminating: false,
            anti: &c.anti_affinity,
        });
    }
    out
}
