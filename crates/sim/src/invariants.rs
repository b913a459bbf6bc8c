//! Checks run after every session, independent of the plugins that made the decisions: no node
//! over-committed, no gang newly bound in part, and every bind passing every predicate.
//!
//! These re-derive the rules from the model ([`caldera_model`]) rather than calling the
//! predicates plugin, so a bug there cannot hide itself.

use crate::store::{node_name, Store};
use caldera_model::selector::untolerated_taint;
use caldera_model::{HostPort, Plan, Resources, Snapshot, Task, TaskStatus};
use k8s_openapi::api::core::v1::Pod;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// PodGroups (`namespace/name`) with `0 < bound < minMember` in the store.
pub fn partial_gangs(store: &Store) -> BTreeSet<String> {
    let bound = bound_counts(store);
    store
        .all_podgroups()
        .filter_map(|pg| {
            let ns = pg.metadata.namespace.as_deref().unwrap_or("default");
            let id = format!("{ns}/{}", pg.metadata.name.as_deref().unwrap_or(""));
            let n = bound.get(&id).copied().unwrap_or(0);
            let min = pg.spec.min_member().max(1) as usize;
            (n > 0 && n < min).then_some(id)
        })
        .collect()
}

/// Members with a node, per group id `namespace/group`: Bound, Running, Succeeded, and Failed
/// after running (a pod failed before it had a node has none).
pub fn bound_counts(store: &Store) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for pod in store.list::<Pod>() {
        if node_name(pod).is_none() {
            continue;
        }
        if let Some(group) = store.group_of(pod) {
            let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
            *out.entry(format!("{ns}/{group}")).or_default() += 1;
        }
    }
    out
}

/// Σ requests per node of the pods that hold resources there (not Succeeded or Failed),
/// recomputed from the pod objects, and the pod count.
pub fn node_usage(store: &Store) -> BTreeMap<String, (Resources, i64)> {
    let mut out: BTreeMap<String, (Resources, i64)> = BTreeMap::new();
    for pod in store.list::<Pod>() {
        let Some(node) = node_name(pod) else { continue };
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded") | Some("Failed")) {
            continue;
        }
        // Pods in the store converted when stored, so their request computes.
        let request = caldera_cache::pod_request(pod).unwrap_or_default();
        let entry = out.entry(node.to_string()).or_default();
        entry.0.add(&request);
        entry.1 += 1;
    }
    out
}

/// Nodes in `nodes` whose pods ask for more than they offer, after the session. A node offers
/// what `folded` (the session's snapshot, devices counted as the resources their classes
/// name: `caldera_session::devices::fold`) says it offers beyond its own allocatable.
pub fn overcommitted(store: &Store, nodes: &BTreeSet<String>, folded: &Snapshot) -> Vec<String> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let usage = node_usage(store);
    let mut out = Vec::new();
    for name in nodes {
        let Some(mut node) = store.node(name).and_then(|n| caldera_cache::node(n).ok()) else {
            continue;
        };
        if let Some(seen) = folded.node_index(name).map(|i| &folded.nodes[i]) {
            for (r, v) in seen.allocatable.iter() {
                if node.allocatable.get(r) == 0 {
                    node.allocatable.set(r, v);
                }
            }
        }
        let Some((used, pods)) = usage.get(name) else {
            continue;
        };
        let over: Vec<String> = used
            .iter()
            .filter(|(r, v)| *v > node.allocatable.get(r))
            .map(|(r, v)| {
                let f = |x| caldera_model::resources::format_value(r, x);
                format!("{r} {} > {}", f(v), f(node.allocatable.get(r)))
            })
            .collect();
        if !over.is_empty() {
            out.push(format!(
                "node {name} is over-committed: {}",
                over.join(", ")
            ));
        }
        if *pods > node.max_pods {
            out.push(format!(
                "node {name} holds {pods} pods, more than its {}",
                node.max_pods
            ));
        }
    }
    out
}

/// Re-checks every bind of `plan` against the snapshot it was made from: the pod was a pending,
/// ungated member of ours; the node is Ready and schedulable, its taints tolerated, its labels
/// match the pod's selector and required affinity, and it has room (resources, pod count,
/// host ports) counting the binds placed on it before in the same plan; a gang with a required
/// topology stays within one domain; the volume rules hold for binds and volume writes
/// (`caldera_model::check::volume::check_plan`).
pub fn check_binds(snapshot: &Snapshot, plan: &Plan) -> Vec<String> {
    if plan.binds.is_empty() {
        return caldera_model::check::volume::check_plan(snapshot, plan);
    }
    let tasks: HashMap<(&str, &str), &Task> = snapshot
        .tasks
        .iter()
        .map(|t| ((&*t.namespace, &*t.name), t))
        .collect();
    let mut placed: HashMap<&str, (Resources, i64, Vec<HostPort>)> = HashMap::new();
    let mut out = Vec::new();
    for bind in &plan.binds {
        let pod = bind.pod.to_string();
        let Some(task) = tasks.get(&(&*bind.pod.namespace, &*bind.pod.name)) else {
            out.push(format!(
                "pod {pod} was bound but is not a member of any job of ours"
            ));
            continue;
        };
        let mut fail = |why: String| out.push(format!("pod {pod} bound to {}: {why}", bind.node));
        if task.status != TaskStatus::Pending {
            fail(format!("it was not pending but {:?}", task.status));
        }
        if task.gated {
            fail("it has scheduling gates".into());
        }
        if *task.uid != *bind.pod.uid {
            fail("the bind names another uid".into());
        }
        let Some(node) = snapshot.node_index(&bind.node).map(|i| &snapshot.nodes[i]) else {
            fail("no such node".into());
            continue;
        };
        if !node.ready {
            fail("the node is not Ready".into());
        }
        if node.unschedulable {
            fail("the node is cordoned".into());
        }
        if let Some(t) = untolerated_taint(&node.taints, &task.spec.tolerations) {
            fail(format!(
                "taint {}={}:{} is not tolerated",
                t.key,
                t.value,
                t.effect.as_str()
            ));
        }
        if !task.spec.matches_node(&node.name, &node.labels) {
            fail("the node does not match the pod's node selector or required affinity".into());
        }
        let (earlier, count, ports) = placed.entry(&bind.node).or_default();
        let idle = node.idle().minus(earlier);
        let short: Vec<&str> = task.request.insufficient(&idle).collect();
        if !short.is_empty() {
            fail(format!("insufficient {}", short.join(", ")));
        }
        if node.pod_count + *count + 1 > node.max_pods {
            fail(format!("the node already holds {} pods", node.max_pods));
        }
        for p in &task.spec.host_ports {
            if node
                .host_ports
                .iter()
                .chain(ports.iter())
                .any(|q| q.conflicts(p))
            {
                fail(format!("host port {}/{} is taken", p.port, p.protocol));
            }
        }
        earlier.add(&task.request);
        *count += 1;
        ports.extend(task.spec.host_ports.iter().cloned());
    }
    out.extend(caldera_model::check::topology::check_binds(snapshot, plan));
    out.extend(caldera_model::check::interpod::check_binds(snapshot, plan));
    out.extend(caldera_model::check::volume::check_plan(snapshot, plan));
    out
}
