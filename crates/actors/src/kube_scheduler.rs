//! kube-scheduler, as far as gate mode and `caldera simulate --compare kube-scheduler` need it.
//!
//! One scheduling cycle over the cluster's pods: every pending pod of kube-scheduler (no node,
//! no scheduling gate, not finished or terminating) is taken one at a time, higher priority
//! first, then older first (then namespace/name), as its active queue orders them. For each,
//! the feasible nodes are those that are Ready, not cordoned (unless tolerated), whose taints
//! with effect `NoSchedule`/`NoExecute` it tolerates, that match its `nodeSelector` and
//! required node affinity (`matchExpressions` and `matchFields`), and that have room for its
//! request, its pod slot and its host ports — counting every bound pod, every pod placed
//! earlier in the cycle, and every pod *nominated* to the node (`status.nominatedNodeName`)
//! with a priority higher than or equal to its own, as kube-scheduler's nominator does. A pod
//! nominated to a node that fits goes there; otherwise the feasible node that is least
//! allocated (kube-scheduler's default `NodeResourcesFit` score: the mean over cpu and memory
//! of free/allocatable after placing the pod) wins, ties to the node name (kube-scheduler
//! breaks them at random; a model must not).
//!
//! Not modelled: preemption, inter-pod affinity, topology spread, volume binding, image
//! locality and the other score plugins. Pods that fit nowhere get kube-scheduler's
//! `FailedScheduling` message (`0/2 nodes are available: 2 Insufficient nvidia.com/gpu.`).

use caldera_cache::{PodInfo, PodPhase};
use caldera_model::selector::untolerated_taint;
use caldera_model::{Node, Resources, TaintEffect, Time, CPU, MEMORY};
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use std::collections::BTreeMap;

/// The taint kube-scheduler uses for cordoned nodes.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A bind kube-scheduler makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// The node.
    pub node: String,
}

/// A pod kube-scheduler could not place this cycle, with its `PodScheduled=False` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaced {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub name: String,
    /// Pod uid.
    pub uid: String,
    /// kube-scheduler's message, e.g. `0/2 nodes are available: 2 Insufficient nvidia.com/gpu.`
    pub message: String,
}

/// What one cycle decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cycle {
    /// Binds, in the order made.
    pub binds: Vec<Placement>,
    /// Pods left pending, in queue order.
    pub unschedulable: Vec<Unplaced>,
}

/// The reason kube-scheduler writes on `PodScheduled=False` of a pod it cannot place.
pub const REASON_UNSCHEDULABLE: &str = "Unschedulable";

struct Candidate {
    info: PodInfo,
    priority: i32,
    nominated: Option<String>,
}

/// Runs one kube-scheduler cycle over `nodes` and `pods` at `now` (unused by the rules today;
/// part of the signature so backoff can be modelled without changing callers). `serves`
/// says which pods are kube-scheduler's (usually: `schedulerName` is `default-scheduler`).
/// Objects that do not convert (a malformed quantity) are skipped: the real API server
/// would not have admitted them.
pub fn schedule<'a>(
    nodes: impl IntoIterator<Item = &'a KubeNode>,
    pods: impl IntoIterator<Item = &'a Pod>,
    serves: &dyn Fn(&Pod) -> bool,
    _now: Time,
) -> Cycle {
    let mut model: BTreeMap<String, Node> = nodes
        .into_iter()
        .filter_map(|n| caldera_cache::node(n).ok())
        .map(|n| (n.name.to_string(), n))
        .collect();
    // Who holds what: bound pods, and nominations (priority, request) per node.
    let mut nominations: BTreeMap<String, Vec<(String, i32, Resources)>> = BTreeMap::new();
    let mut queue = Vec::new();
    for pod in pods {
        let Ok(info) = PodInfo::try_from(pod) else {
            continue;
        };
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        if info.counts_on_node() {
            if let Some(n) = info.node.as_deref().and_then(|n| model.get_mut(n)) {
                n.add_pod(&info.request, &info.spec.host_ports);
            }
            continue;
        }
        if info.node.is_some() || info.terminating || info.phase.is_terminal() {
            continue;
        }
        let nominated = pod
            .status
            .as_ref()
            .and_then(|s| s.nominated_node_name.clone())
            .filter(|n| !n.is_empty());
        if let Some(n) = &nominated {
            if !info.gated {
                nominations.entry(n.clone()).or_default().push((
                    info.key(),
                    priority,
                    info.request.clone(),
                ));
            }
        }
        if !info.gated && info.phase == PodPhase::Pending && serves(pod) {
            queue.push(Candidate {
                info,
                priority,
                nominated,
            });
        }
    }
    queue.sort_by(|a, b| queue_order((&a.info, a.priority), (&b.info, b.priority)));

    let mut cycle = Cycle::default();
    for c in queue {
        let key = c.info.key();
        let held = |node: &str| -> Resources {
            let mut sum = Resources::new();
            for (who, prio, req) in nominations.get(node).into_iter().flatten() {
                if *who != key && *prio >= c.priority {
                    sum.add(req);
                }
            }
            sum
        };
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let mut best: Option<(i64, &str)> = None;
        let mut chosen = None;
        for node in model.values() {
            match fits(&c.info, node, &held(&node.name)) {
                Err(why) => {
                    for w in why {
                        *reasons.entry(w).or_default() += 1;
                    }
                }
                Ok(()) => {
                    if c.nominated.as_deref() == Some(&*node.name) {
                        chosen = Some(node.name.to_string());
                        break;
                    }
                    let score = least_allocated(&c.info.request, node);
                    if best.is_none_or(|(s, _)| score > s) {
                        best = Some((score, &node.name));
                    }
                }
            }
        }
        let chosen = chosen.or_else(|| best.map(|(_, n)| n.to_string()));
        match chosen {
            Some(node) => {
                if let Some(n) = model.get_mut(&node) {
                    n.add_pod(&c.info.request, &c.info.spec.host_ports);
                }
                // Its nomination, wherever it was, is spent.
                for list in nominations.values_mut() {
                    list.retain(|(who, _, _)| *who != key);
                }
                cycle.binds.push(Placement {
                    namespace: c.info.namespace.to_string(),
                    name: c.info.name.to_string(),
                    uid: c.info.uid.to_string(),
                    node,
                });
            }
            None => cycle.unschedulable.push(Unplaced {
                namespace: c.info.namespace.to_string(),
                name: c.info.name.to_string(),
                uid: c.info.uid.to_string(),
                message: message(model.len(), &reasons),
            }),
        }
    }
    cycle
}

/// kube-scheduler's active queue order: higher priority, then older, then namespace/name.
fn queue_order(a: (&PodInfo, i32), b: (&PodInfo, i32)) -> std::cmp::Ordering {
    b.1.cmp(&a.1)
        .then(a.0.created.cmp(&b.0.created))
        .then_with(|| a.0.namespace.cmp(&b.0.namespace))
        .then_with(|| a.0.name.cmp(&b.0.name))
}

/// What kube-scheduler is about to do with the pods it has pending: places each of `pending`
/// (a pod and its priority), in queue order, on the feasible node it would choose among
/// `nodes` — model nodes whose `used` already counts bound and held (nominated) pods — and
/// adds it there. Gate mode runs it on every snapshot (`SnapshotOptions::predict`), so
/// Caldera never releases a gang into room that kube-scheduler's own queue is about to take:
/// without it, a node that frees up would be raced for by the gang's release and by the
/// ordinary pods already waiting for it, and a member pinned to a node filled in between
/// could leave its gang partial.
pub fn predict(nodes: &mut [Node], pending: &[(&PodInfo, i32)]) {
    let mut order: Vec<(&PodInfo, i32)> = pending.to_vec();
    order.sort_by(|a, b| queue_order(*a, *b));
    let none = Resources::new();
    for (info, _) in order {
        let mut best: Option<(i64, usize)> = None;
        for (i, node) in nodes.iter().enumerate() {
            if fits(info, node, &none).is_ok() {
                let score = least_allocated(&info.request, node);
                if best.is_none_or(|(s, _)| score > s) {
                    best = Some((score, i));
                }
            }
        }
        if let Some((_, i)) = best {
            nodes[i].add_pod(&info.request, &info.spec.host_ports);
        }
    }
}

/// kube-scheduler's summary: `0/N nodes are available: 2 Insufficient cpu, 1 node(s) ...`.
fn message(nodes: usize, reasons: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    parts.sort();
    if parts.is_empty() {
        format!("0/{nodes} nodes are available.")
    } else {
        format!("0/{nodes} nodes are available: {}.", parts.join(", "))
    }
}

/// Whether `pod` may go to `node`, with `held` of the node's capacity nominated to others.
/// The error lists every reason, in kube-scheduler's words.
fn fits(pod: &PodInfo, node: &Node, held: &Resources) -> Result<(), Vec<String>> {
    let spec = &pod.spec;
    if !node.ready {
        return Err(vec!["node(s) were not ready".into()]);
    }
    if node.unschedulable {
        let cordon = caldera_model::Taint {
            key: UNSCHEDULABLE_TAINT.into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        };
        if !spec.tolerations.iter().any(|t| t.tolerates(&cordon)) {
            return Err(vec!["node(s) were unschedulable".into()]);
        }
    }
    if !spec.matches_node(&node.name, &node.labels) {
        return Err(vec![
            "node(s) didn't match Pod's node affinity/selector".into()
        ]);
    }
    if let Some(t) = untolerated_taint(&node.taints, &spec.tolerations) {
        return Err(vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key, t.value
        )]);
    }
    let mut why = Vec::new();
    if node.pod_count >= node.max_pods {
        why.push("Too many pods".to_string());
    }
    let free = node.idle().minus(held);
    for name in pod.request.insufficient(&free) {
        why.push(format!("Insufficient {name}"));
    }
    if spec
        .host_ports
        .iter()
        .any(|p| node.host_ports.iter().any(|q| p.conflicts(q)))
    {
        why.push("node(s) didn't have free ports for the requested pod ports".into());
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(why)
    }
}

/// `NodeResourcesFit` with `LeastAllocated` on cpu and memory (weight 1 each), 0–100 scaled by
/// 1000 to stay in integers.
fn least_allocated(request: &Resources, node: &Node) -> i64 {
    let mut total = 0;
    for r in [CPU, MEMORY] {
        let alloc = node.allocatable.get(r);
        if alloc <= 0 {
            continue;
        }
        let used = node.used.get(r).saturating_add(request.get(r));
        let free = alloc.saturating_sub(used).max(0);
        total += (free as i128 * 100_000 / alloc as i128) as i64;
    }
    total / 2
}

#[cfg(test)]
mod tests;
