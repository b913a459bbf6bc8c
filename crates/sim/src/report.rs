//! What a simulation shows: a JSON document for programs (sorted, byte-identical across runs)
//! and tables for people (gangs, lone pods, claims, GPU occupancy per node).

use crate::driver::Simulation;
use crate::expect::queue_allocated;
use crate::invariants::{bound_counts, node_usage};
use crate::store::node_name;
use caldera_model::Resources;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The whole result, as `-o json` prints it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Virtual time at the end (RFC 3339).
    pub time: String,
    /// Sessions run.
    pub sessions: u64,
    /// Every pod, by namespace and name.
    pub pods: Vec<PodRow>,
    /// Every PodGroup, by namespace and name.
    pub pod_groups: Vec<PodGroupRow>,
    /// Every node, by name.
    pub nodes: Vec<NodeRow>,
    /// Every queue the scheduler knows (the implicit `default` included), by name.
    pub queues: Vec<QueueRow>,
    /// Every PersistentVolumeClaim, by namespace and name.
    pub claims: Vec<ClaimRow>,
}

/// One PersistentVolumeClaim: where the volume binder and the PV controller have got to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `status.phase` (`Pending` when absent).
    pub phase: String,
    /// `spec.storageClassName`, or null.
    pub storage_class: Option<String>,
    /// `spec.volumeName` (the PersistentVolume it is bound or pre-bound to), or null.
    pub volume: Option<String>,
    /// The `volume.kubernetes.io/selected-node` annotation (the node a scheduler chose for
    /// provisioning), or null.
    pub selected_node: Option<String>,
}

/// One pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `spec.nodeName`, or null.
    pub node: Option<String>,
    /// `status.phase` (`Pending` when absent).
    pub phase: String,
    /// `status.reason`, or null.
    pub reason: Option<String>,
    /// Reason of `PodScheduled=False`, or null.
    pub condition_reason: Option<String>,
    /// `status.nominatedNodeName` (a node held for the pod before it is bound: a preemptor
    /// waiting for its victims, a member waiting for its volumes), or null.
    pub nominated_node: Option<String>,
    /// Being deleted (`metadata.deletionTimestamp` set): a victim still on its node for its
    /// grace period.
    pub terminating: bool,
}

/// One PodGroup condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConditionRow {
    /// `Scheduled` or `Unschedulable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// Reason.
    pub reason: String,
    /// Message.
    pub message: String,
}

/// One PodGroup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupRow {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Queue.
    pub queue: String,
    /// `minMember` (0 or absent reads as 1).
    pub min_member: i32,
    /// Members with a node.
    pub bound: usize,
    /// `status.phase` (`Pending` when absent).
    pub phase: String,
    /// `status.conditions`.
    pub conditions: Vec<ConditionRow>,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRow {
    /// Name.
    pub name: String,
    /// What it offers (without the pod count).
    pub allocatable: BTreeMap<String, String>,
    /// Σ requests of the pods on it that have not finished.
    pub allocated: BTreeMap<String, String>,
}

/// One queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueRow {
    /// Name.
    pub name: String,
    /// `spec.parent`, when set (hierarchical queues).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// Deserved share from the last session, or null when no plugin computed one.
    pub deserved: Option<BTreeMap<String, String>>,
    /// Σ requests of its members that hold a node.
    pub allocated: BTreeMap<String, String>,
}

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_else(|| "default".into()),
        meta.name.clone().unwrap_or_default(),
    )
}

fn pod_phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".into())
}

/// `Terminating`, with the `DisruptionTarget` condition's reason when there is one (an
/// eviction's).
fn terminating(pod: &Pod) -> String {
    match caldera_cache::pod_condition(pod, "DisruptionTarget").and_then(|c| c.reason.clone()) {
        Some(r) => format!("Terminating ({r})"),
        None => "Terminating".into(),
    }
}

fn scheduled_false(pod: &Pod) -> Option<(String, String)> {
    caldera_cache::pod_condition(pod, "PodScheduled")
        .filter(|c| c.status == "False")
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        })
}

/// Builds the report of the simulation's current state.
pub fn report(sim: &Simulation) -> Report {
    let store = sim.store();
    let pods = store
        .list::<Pod>()
        .map(|p| {
            let (namespace, name) = ns_name(&p.metadata);
            PodRow {
                namespace,
                name,
                node: node_name(p).map(str::to_string),
                phase: pod_phase(p),
                reason: p.status.as_ref().and_then(|s| s.reason.clone()),
                condition_reason: scheduled_false(p).map(|(r, _)| r),
                nominated_node: p
                    .status
                    .as_ref()
                    .and_then(|s| s.nominated_node_name.clone())
                    .filter(|n| !n.is_empty()),
                terminating: p.metadata.deletion_timestamp.is_some(),
            }
        })
        .collect();
    let bound = bound_counts(store);
    let pod_groups = store
        .all_podgroups()
        .map(|pg| {
            let (namespace, name) = ns_name(&pg.metadata);
            let status = pg.status.as_ref();
            PodGroupRow {
                bound: bound
                    .get(&format!("{namespace}/{name}"))
                    .copied()
                    .unwrap_or(0),
                namespace,
                name,
                queue: pg.spec.queue_name().to_string(),
                min_member: pg.spec.min_member(),
                phase: status
                    .and_then(|s| s.phase.as_ref())
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_else(|| "Pending".into()),
                conditions: status
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|c| ConditionRow {
                        type_: c.type_.as_ref().map(|t| t.to_string()).unwrap_or_default(),
                        status: c.status.as_ref().map(|s| s.to_string()).unwrap_or_default(),
                        reason: c.reason.clone().unwrap_or_default(),
                        message: c.message.clone().unwrap_or_default(),
                    })
                    .collect(),
            }
        })
        .collect();
    let usage = node_usage(store);
    let nodes = store
        .list::<Node>()
        .filter_map(|n| caldera_cache::node(n).ok())
        .map(|n| NodeRow {
            name: n.name.to_string(),
            allocatable: n.allocatable.to_quantities(),
            allocated: usage
                .get(&*n.name)
                .map(|(r, _)| r.to_quantities())
                .unwrap_or_default(),
        })
        .collect();
    let shares = sim.queue_shares();
    let snap = sim.snapshot();
    let parents: BTreeMap<&str, &str> = snap
        .queues
        .iter()
        .filter_map(|q| q.parent.as_deref().map(|p| (&*q.name, p)))
        .collect();
    let queues = queue_allocated(sim)
        .into_iter()
        .map(|(name, allocated)| QueueRow {
            parent: parents.get(name.as_str()).map(|p| p.to_string()),
            deserved: shares
                .get(&name)
                .and_then(|s| s.deserved.as_ref())
                .map(Resources::to_quantities),
            allocated: allocated.to_quantities(),
            name,
        })
        .collect();
    let claims = store
        .list::<PersistentVolumeClaim>()
        .map(|c| {
            let (namespace, name) = ns_name(&c.metadata);
            let spec = c.spec.as_ref();
            ClaimRow {
                namespace,
                name,
                phase: c
                    .status
                    .as_ref()
                    .and_then(|s| s.phase.clone())
                    .unwrap_or_else(|| "Pending".into()),
                storage_class: spec.and_then(|s| s.storage_class_name.clone()),
                volume: spec
                    .and_then(|s| s.volume_name.clone())
                    .filter(|v| !v.is_empty()),
                selected_node: c
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(caldera_actors::pv_controller::SELECTED_NODE))
                    .cloned(),
            }
        })
        .collect();
    Report {
        time: sim.now().to_rfc3339(),
        sessions: sim.sessions(),
        pods,
        pod_groups,
        nodes,
        queues,
        claims,
    }
}

/// The report as pretty JSON with a trailing newline. Deterministic: every list is sorted and
/// every map is a `BTreeMap`.
pub fn to_json(report: &Report) -> Result<String, serde_json::Error> {
    serde_json::to_string_pretty(report).map(|mut s| {
        s.push('\n');
        s
    })
}

/// Lays out rows as left-aligned columns (the last column is not padded).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let last = row.len().saturating_sub(1);
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i == last {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The gang table: every PodGroup, plus every group our pods name that does not exist.
pub fn gang_table(sim: &Simulation, report: &Report) -> String {
    let mut rows: Vec<Vec<String>> = report
        .pod_groups
        .iter()
        .map(|g| {
            let unschedulable = g
                .conditions
                .iter()
                .find(|c| c.type_ == "Unschedulable" && c.status == "True");
            let scheduled = g
                .conditions
                .iter()
                .find(|c| c.type_ == "Scheduled" && c.status == "True");
            let reason = match (unschedulable, scheduled) {
                (Some(c), _) if g.phase != "Running" && g.phase != "Completed" => {
                    format!("{}: {}", c.reason, c.message)
                }
                (_, Some(c)) => c.reason.clone().if_empty("Scheduled"),
                (Some(c), None) => format!("{}: {}", c.reason, c.message),
                (None, None) => String::new(),
            };
            vec![
                format!("{}/{}", g.namespace, g.name),
                g.queue.clone(),
                g.min_member.to_string(),
                g.bound.to_string(),
                g.phase.clone(),
                reason,
            ]
        })
        .collect();
    let known: BTreeSet<(String, String)> = report
        .pod_groups
        .iter()
        .map(|g| (g.namespace.clone(), g.name.clone()))
        .collect();
    let ours: BTreeSet<&str> = sim
        .options()
        .scheduler_names
        .iter()
        .map(String::as_str)
        .collect();
    let mut missing: BTreeMap<(String, String), usize> = BTreeMap::new();
    for pod in sim.store().list::<Pod>() {
        let sched = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
        if !sched.is_some_and(|s| ours.contains(s)) {
            continue;
        }
        if let Some(group) = sim.store().group_of(pod) {
            let (ns, _) = ns_name(&pod.metadata);
            let key = (ns, group);
            if !known.contains(&key) {
                *missing.entry(key).or_default() += 1;
            }
        }
    }
    for ((ns, name), n) in missing {
        rows.push(vec![
            format!("{ns}/{name}"),
            "-".into(),
            "-".into(),
            "0".into(),
            "-".into(),
            format!("no PodGroup {ns}/{name}: {n} pods wait for it"),
        ]);
    }
    rows.sort();
    if rows.is_empty() {
        return "no gangs\n".into();
    }
    table(&["GANG", "QUEUE", "MIN", "BOUND", "PHASE", "REASON"], &rows)
}

trait IfEmpty {
    fn if_empty(self, default: &str) -> String;
}

impl IfEmpty for String {
    fn if_empty(self, default: &str) -> String {
        if self.is_empty() {
            default.to_string()
        } else {
            self
        }
    }
}

/// Our pods that belong to no group: name, node, phase, why pending.
pub fn lone_pod_table(sim: &Simulation) -> Option<String> {
    let ours: BTreeSet<&str> = sim
        .options()
        .scheduler_names
        .iter()
        .map(String::as_str)
        .collect();
    let rows: Vec<Vec<String>> = sim
        .store()
        .list::<Pod>()
        .filter(|p| {
            let sched = p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref());
            sched.is_some_and(|s| ours.contains(s)) && sim.store().group_of(p).is_none()
        })
        .map(|p| {
            let (ns, name) = ns_name(&p.metadata);
            let why = match (
                p.status.as_ref().and_then(|s| s.reason.clone()),
                scheduled_false(p),
            ) {
                _ if p.metadata.deletion_timestamp.is_some() => terminating(p),
                (Some(r), _) => r,
                (None, Some((r, m))) if node_name(p).is_none() => format!("{r}: {m}"),
                _ => String::new(),
            };
            vec![
                format!("{ns}/{name}"),
                node_name(p).unwrap_or("-").to_string(),
                pod_phase(p),
                why,
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| table(&["POD", "NODE", "PHASE", "REASON"], &rows))
}

/// Claims, when there are any: name, phase, class, volume, selected node; and the nodes held for
/// members that wait for them.
pub fn claim_table(report: &Report) -> Option<String> {
    let rows: Vec<Vec<String>> = report
        .claims
        .iter()
        .map(|c| {
            vec![
                format!("{}/{}", c.namespace, c.name),
                c.phase.clone(),
                c.storage_class.clone().unwrap_or_else(|| "-".into()),
                c.volume.clone().unwrap_or_else(|| "-".into()),
                c.selected_node.clone().unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut out = table(
        &["CLAIM", "PHASE", "CLASS", "VOLUME", "SELECTED NODE"],
        &rows,
    );
    let held: Vec<String> = report
        .pods
        .iter()
        .filter(|p| p.node.is_none())
        .filter_map(|p| {
            let node = p.nominated_node.as_ref()?;
            Some(format!("{}/{} → {node}", p.namespace, p.name))
        })
        .collect();
    if !held.is_empty() {
        let _ = writeln!(out, "held for pods not bound yet: {}", held.join(", "));
    }
    if report
        .claims
        .iter()
        .any(|c| c.phase == "Pending" && c.selected_node.is_some())
    {
        out.push_str(
            "nothing provisions volumes in the simulator: a claim with a selected node stays Pending \
             until a PersistentVolume for it is applied (in a scenario, a later `apply` step)\n",
        );
    }
    Some(out)
}

/// Whether a resource is a GPU (`nvidia.com/gpu`, `amd.com/gpu`, ...).
fn is_gpu(name: &str) -> bool {
    name.rsplit('/').next().is_some_and(|n| n.contains("gpu"))
}

/// One bar per node with GPUs: `node-a  [######..]  6/8 nvidia.com/gpu`, then how many are
/// free in all. A bar has a cell per GPU up to 16, and is scaled to 16 cells beyond.
/// DRA devices are shown the same way, per driver (`6/8 gpu.nvidia.com`): those a node reaches
/// and how many are allocated; below it, each shared device (`allowMultipleAllocations`) with
/// the fraction its shares hold (`  gpu-3  [###.....]  0.35 (2 claims)`: of its fullest
/// capacity).
pub fn gpu_view(sim: &Simulation) -> Option<String> {
    let usage = node_usage(sim.store());
    let mut lines: Vec<(String, String, String)> = Vec::new();
    let mut totals: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    let inventory = sim.snapshot().dra;
    let devices = (!inventory.devices.is_empty()).then(|| caldera_dra::Allocator::new(inventory));
    for node in sim
        .store()
        .list::<Node>()
        .filter_map(|n| caldera_cache::node(n).ok())
    {
        let gpus = node
            .allocatable
            .iter()
            .filter(|(r, _)| is_gpu(r))
            .map(|(r, total)| {
                let used = usage.get(&*node.name).map(|(u, _)| u.get(r)).unwrap_or(0);
                (r.to_string(), used, total)
            });
        let by_driver = devices.iter().flat_map(|a| {
            a.usage(caldera_dra::NodeView {
                name: &node.name,
                labels: &node.labels,
            })
        });
        let by_driver =
            by_driver.map(|u| (u.driver.to_string(), i64::from(u.used), i64::from(u.total)));
        let shared: Vec<caldera_dra::SharedUse> = devices
            .iter()
            .flat_map(|a| {
                a.shared_usage(caldera_dra::NodeView {
                    name: &node.name,
                    labels: &node.labels,
                })
            })
            .collect();
        for (resource, used, total) in gpus.chain(by_driver).collect::<Vec<_>>() {
            let resource = resource.as_str();
            let sum = totals.entry(resource.to_string()).or_default();
            sum.0 += used.clamp(0, total);
            sum.1 += total;
            let cells = total.clamp(1, 16);
            let filled = if total <= 16 {
                used.clamp(0, total)
            } else {
                (used.clamp(0, total) * cells + total / 2) / total
            };
            let bar: String = (0..cells)
                .map(|i| if i < filled { '#' } else { '.' })
                .collect();
            lines.push((
                node.name.to_string(),
                format!("[{bar}]"),
                format!("{used}/{total} {resource}"),
            ));
            // Each shared device of the driver, under it: the fraction its shares hold.
            for d in shared.iter().filter(|d| *d.driver == *resource) {
                lines.push((format!("  {}", d.device), d.bar(), d.summary()));
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let name_w = lines.iter().map(|l| l.0.chars().count()).max().unwrap_or(0);
    let bar_w = lines.iter().map(|l| l.1.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for (name, bar, count) in lines {
        let _ = writeln!(out, "{name:<name_w$}  {bar:<bar_w$}  {count}");
    }
    for (resource, (used, total)) in totals {
        let _ = writeln!(out, "{} of {total} {resource} free", total - used);
    }
    Some(out)
}

/// The queue tree, when any queue names a parent: each queue under its parent (indented),
/// with its deserved share, allocation over its subtree and share (max over deserved
/// resources of allocated / deserved).
pub fn queue_tree_table(sim: &Simulation) -> Option<String> {
    let snap = sim.snapshot();
    if snap.queues.iter().all(|q| q.parent.is_none()) {
        return None;
    }
    let tree = caldera_queue::QueueTree::of(&snap.queues);
    let allocated = queue_allocated(sim);
    let shares = sim.queue_shares();
    let mut rows = Vec::new();
    let mut visit = vec![tree.root()];
    // Depth first, children in name order, so each queue sits under its parent.
    while let Some(x) = visit.pop() {
        let name = tree.name(x).to_string();
        let deserved = shares.get(&name).and_then(|s| s.deserved.clone());
        let held = allocated.get(&name).cloned().unwrap_or_default();
        let virtual_root = x >= tree.queues();
        if !virtual_root {
            rows.push(vec![
                format!(
                    "{}{name}",
                    "  ".repeat(
                        tree.depth(x)
                            .saturating_sub(usize::from(tree.virtual_root()))
                    )
                ),
                deserved.as_ref().map_or("-".into(), |d| d.to_string()),
                held.to_string(),
                deserved.as_ref().map_or("-".into(), |d| {
                    format!("{:.2}", caldera_queue::capacity::share(&held, d))
                }),
            ]);
        }
        visit.extend(tree.children(x).iter().rev());
    }
    for q in 0..tree.queues() {
        if let Some(problem) = tree.problem(q) {
            rows.push(vec![
                tree.name(q).to_string(),
                "-".into(),
                "-".into(),
                format!("not in the tree: {problem}"),
            ]);
        }
    }
    Some(table(&["QUEUE", "DESERVED", "ALLOCATED", "SHARE"], &rows))
}

/// With `fairshare` configured, each queue's usage: the weighted decayed usage that adjusts
/// its share (a fraction of the cluster, at the simulation's time), its GPU part, the GPUs it
/// held at its last record and when that was written (Queue `status.usage`).
pub fn queue_usage_table(sim: &Simulation) -> Option<String> {
    let fair = sim.fair()?;
    // The session's view, as the scheduler weighs usage (devices counted as the resources
    // their classes name).
    let now = sim.now();
    let state = caldera_session::state::State::new(sim.snapshot(), now);
    let gpu = "nvidia.com/gpu";
    let rows: Vec<Vec<String>> = state
        .queues
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let record = q.status.as_ref().and_then(|s| s.usage.as_ref());
            let usage = caldera_session::fair::queue_usage(&state, fair, i);
            match record {
                Some(r) => {
                    let decayed = fair.decayed(r, now);
                    let held = r.held.get(gpu).copied().unwrap_or(0);
                    vec![
                        q.name.to_string(),
                        format!("{usage:.3}"),
                        format!("{:.3}", decayed.get(gpu).copied().unwrap_or(0.0)),
                        format!(
                            "{:.3}",
                            f64::from(held) / f64::from(caldera_model::USAGE_SCALE)
                        ),
                        r.at.to_string(),
                    ]
                }
                None => vec![
                    q.name.to_string(),
                    format!("{usage:.3}"),
                    "-".into(),
                    "-".into(),
                    "never".into(),
                ],
            }
        })
        .collect();
    (!rows.is_empty()).then(|| {
        table(
            &["QUEUE", "USAGE", "GPU USAGE", "GPU HELD", "RECORDED"],
            &rows,
        )
    })
}

/// The HyperNode tree, top down, with free GPUs per domain and the gangs placed in each (the
/// smallest domain holding all their bound members), then anything wrong with the objects.
/// `None` without HyperNodes.
pub fn topology_view(sim: &Simulation) -> Option<String> {
    topology_lines(&sim.snapshot())
}

/// [`topology_view`] of a snapshot (also used by `caldera explain`).
pub fn topology_lines(snap: &caldera_model::Snapshot) -> Option<String> {
    let tree = &snap.topology;
    if tree.is_empty() {
        return None;
    }
    // Gangs (and their sub-groups) by the domain that holds their bound members.
    let mut placed: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    let mut placed_sub_groups: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let nodes_of = |tasks: &[usize]| -> Vec<u32> {
        let mut nodes: Vec<u32> = tasks
            .iter()
            .filter_map(|&t| {
                let task = &snap.tasks[t];
                task.status
                    .occupies_node()
                    .then(|| snap.node_index(task.node.as_deref()?))
                    .flatten()
                    .map(|n| n as u32)
            })
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    };
    for job in snap.jobs.iter().filter(|j| j.has_podgroup()) {
        if let Some(d) = tree.smallest_holding(&nodes_of(&job.tasks)) {
            placed.entry(d).or_default().push(&job.id);
        }
        let members = job.tasks.iter().map(|&t| (t, &*snap.tasks[t].labels));
        for g in caldera_model::split_sub_groups(&job.sub_group_policies, members) {
            if let Some(d) = tree.smallest_holding(&nodes_of(&g.tasks)) {
                placed_sub_groups
                    .entry(d)
                    .or_default()
                    .push(format!("{} {}", job.id, g.name));
            }
        }
    }
    let free = |d: &caldera_model::Domain| -> String {
        let mut totals: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for &n in &d.nodes {
            let node = &snap.nodes[n as usize];
            let idle = node.idle();
            for (resource, total) in node.allocatable.iter().filter(|(r, _)| is_gpu(r)) {
                let sum = totals.entry(resource).or_default();
                sum.0 += if node.ready {
                    idle.get(resource).clamp(0, total)
                } else {
                    0
                };
                sum.1 += total;
            }
        }
        let parts: Vec<String> = totals
            .iter()
            .map(|(r, (f, t))| format!("{f}/{t} {r} free"))
            .collect();
        if parts.is_empty() {
            format!("{} nodes", d.nodes.len())
        } else {
            format!("{} nodes, {}", d.nodes.len(), parts.join(", "))
        }
    };
    let max = tree.max_tier();
    let mut out = String::from("HyperNodes\n");
    // Depth-first from the top domains, children by (tier, name) as the tree keeps them.
    let mut stack: Vec<u32> = (0..tree.domains.len() as u32)
        .filter(|&i| tree.domains[i as usize].parent.is_none())
        .collect();
    // Highest tiers first, then by name; popped from the end.
    stack.sort_by(|a, b| {
        let (x, y) = (&tree.domains[*a as usize], &tree.domains[*b as usize]);
        (std::cmp::Reverse(x.tier), &x.name).cmp(&(std::cmp::Reverse(y.tier), &y.name))
    });
    stack.reverse();
    while let Some(i) = stack.pop() {
        let d = &tree.domains[i as usize];
        let indent = "  ".repeat((max.saturating_sub(d.tier)) as usize);
        let tier = match tree.tier_names.iter().find(|(_, &t)| t == d.tier) {
            Some((name, _)) => format!("tier {} {name}", d.tier),
            None => format!("tier {}", d.tier),
        };
        let _ = write!(out, "{indent}{} ({tier}): {}", d.name, free(d));
        if let Some(gangs) = placed.get(&i) {
            let _ = write!(out, "; gangs: {}", gangs.join(", "));
        }
        if let Some(groups) = placed_sub_groups.get(&i) {
            let _ = write!(out, "; sub-groups: {}", groups.join(", "));
        }
        out.push('\n');
        let mut children: Vec<u32> = (0..tree.domains.len() as u32)
            .filter(|&c| tree.domains[c as usize].parent == Some(i))
            .collect();
        children.reverse();
        stack.extend(children);
    }
    for p in &tree.problems {
        let _ = writeln!(out, "warning: {p}");
    }
    Some(out)
}

/// Everything for people: the gang table, the queue tree (hierarchical queues only), queue
/// usage (with `fairshare`), lone
/// pods, GPU occupancy, and the HyperNode tree.
pub fn render_text(sim: &Simulation) -> String {
    let mut out = format!("at {} after {} sessions\n\n", sim.now(), sim.sessions());
    let report = report(sim);
    out.push_str(&gang_table(sim, &report));
    if let Some(t) = queue_tree_table(sim) {
        out.push('\n');
        out.push_str(&t);
    }
    if let Some(t) = queue_usage_table(sim) {
        out.push('\n');
        out.push_str(&t);
    }
    if let Some(t) = lone_pod_table(sim) {
        out.push('\n');
        out.push_str(&t);
    }
    if let Some(c) = claim_table(&report) {
        out.push('\n');
        out.push_str(&c);
    }
    if let Some(g) = gpu_view(sim) {
        out.push('\n');
        out.push_str(&g);
    }
    if let Some(t) = topology_view(sim) {
        out.push('\n');
        out.push_str(&t);
    }
    out
}
