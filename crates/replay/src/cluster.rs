//! The cluster a trace runs on: nodes (`--nodes` CSV, an openb node list, or manifests) and
//! queues (`--queues` CSV or manifests), and the Kubernetes objects the replay puts in the
//! simulator's store for nodes, queues, priorities and jobs.
//!
//! Nodes CSV: `node`, `cpu`, `memory`, `gpu`, optional `gpu_model` (the node label
//! `nvidia.com/gpu.product`), optional `pods` (default 110), and any other column as a node
//! label of that name (a rack, an NVLink domain). Queues CSV: `queue`, `weight`, optional
//! `parent`, optional `capability_gpu`.

use crate::csv::Table;
use crate::error::{Error, Result};
use crate::trace::{field, parse_int, quantity, JobSpec};
use caldera_model::quantity::{format_bytes, format_milli, Scale};
use caldera_sim::manifest::Object;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::json;
use std::collections::BTreeMap;

/// The node label carrying a node's GPU model (NVIDIA GPU feature discovery's).
pub const GPU_MODEL_LABEL: &str = "nvidia.com/gpu.product";

/// The extended resource whole GPUs are requested as.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The namespace every replayed job's objects live in.
pub const NAMESPACE: &str = "replay";

/// One node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Name.
    pub name: String,
    /// CPU, millicores.
    pub cpu_milli: i64,
    /// Memory, bytes.
    pub memory: i64,
    /// Whole GPUs.
    pub gpus: u32,
    /// GPU model, if any.
    pub gpu_model: Option<String>,
    /// Pod capacity.
    pub pods: i64,
    /// Other labels.
    pub labels: BTreeMap<String, String>,
}

/// One queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Name.
    pub name: String,
    /// Weight (1..65535).
    pub weight: u32,
    /// Parent queue (the queue tree).
    pub parent: Option<String>,
    /// A hard ceiling on the queue's GPUs.
    pub capability_gpu: Option<u32>,
}

const NODE_COLUMNS: [&str; 6] = ["node", "cpu", "memory", "gpu", "gpu_model", "pods"];

/// Reads a nodes CSV (`node,cpu,memory,gpu[,gpu_model][,pods][,label…]`); an openb node list
/// (`sn,cpu_milli,memory_mib,gpu,model`) is recognised by its header.
pub fn read_nodes(text: &str, file: &str) -> Result<Vec<NodeSpec>> {
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .unwrap_or("");
    if first.split(',').any(|c| c.trim() == "sn") {
        return crate::openb::read_nodes(text, file);
    }
    let table = Table::read(text, file, &["node", "cpu", "memory", "gpu"], None)?;
    let mut out: Vec<NodeSpec> = Vec::with_capacity(table.rows.len());
    let mut seen = std::collections::BTreeSet::new();
    for row in table.iter() {
        let name = row.required("node")?.to_string();
        if !seen.insert(name.clone()) {
            return Err(row.error("node", format!("node {name:?} appears twice")));
        }
        let labels = row
            .others(&NODE_COLUMNS)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        out.push(NodeSpec {
            name,
            cpu_milli: field(&row, "cpu", 0, quantity(Scale::Milli))?,
            memory: field(&row, "memory", 0, quantity(Scale::Units))?,
            gpus: field(&row, "gpu", 0, parse_int)?,
            gpu_model: row.get("gpu_model").map(str::to_string),
            pods: field(&row, "pods", 110, parse_int)?,
            labels,
        });
    }
    Ok(out)
}

/// Reads a queues CSV (`queue,weight[,parent][,capability_gpu]`).
pub fn read_queues(text: &str, file: &str) -> Result<Vec<QueueSpec>> {
    let table = Table::read(
        text,
        file,
        &["queue", "weight"],
        Some(&["queue", "weight", "parent", "capability_gpu"]),
    )?;
    let mut out = Vec::new();
    for row in table.iter() {
        let weight: u32 = field(&row, "weight", 1, parse_int)?;
        if !(1..=65535).contains(&weight) {
            return Err(row.error("weight", format!("{weight} is not in 1..65535")));
        }
        out.push(QueueSpec {
            name: row.required("queue")?.to_string(),
            weight,
            parent: row.get("parent").map(str::to_string),
            capability_gpu: row
                .get("capability_gpu")
                .map(|t| parse_int(t).map_err(|e| row.error("capability_gpu", e)))
                .transpose()?,
        });
    }
    Ok(out)
}

fn typed<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Invalid(format!("building an object: {e}")))
}

/// The Node object of `n`: Ready, with its allocatable.
pub fn node_object(n: &NodeSpec) -> Result<Object> {
    let mut labels = n.labels.clone();
    labels.insert("kubernetes.io/hostname".into(), n.name.clone());
    if let Some(m) = &n.gpu_model {
        labels.insert(GPU_MODEL_LABEL.into(), m.clone());
    }
    let mut alloc = json!({
        "cpu": format_milli(n.cpu_milli),
        "memory": format_bytes(n.memory),
        "pods": n.pods.to_string(),
    });
    if n.gpus > 0 {
        alloc[GPU_RESOURCE] = json!(n.gpus.to_string());
    }
    let node: Node = typed(json!({
        "metadata": {"name": n.name, "labels": labels},
        "status": {"allocatable": alloc, "capacity": alloc,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }))?;
    Ok(Object::Node(node))
}

/// The Queue object of `q`.
pub fn queue_object(q: &QueueSpec) -> Result<Object> {
    let mut spec = json!({"weight": q.weight, "reclaimable": true});
    if let Some(p) = &q.parent {
        spec["parent"] = json!(p);
    }
    if let Some(c) = q.capability_gpu {
        spec["capability"] = json!({GPU_RESOURCE: c.to_string()});
    }
    Ok(Object::Queue(typed(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": q.name}, "spec": spec
    }))?))
}

/// The PriorityClass the jobs of priority `value` name.
pub fn priority_class_name(value: i32) -> String {
    if value < 0 {
        format!("replay-priority-m{}", value.unsigned_abs())
    } else {
        format!("replay-priority-{value}")
    }
}

/// The PriorityClass of `value`.
pub fn priority_class(value: i32) -> Result<Object> {
    let pc: PriorityClass = typed(json!({
        "metadata": {"name": priority_class_name(value)}, "value": value
    }))?;
    Ok(Object::PriorityClass(pc))
}

/// The PodGroup of job `id` (named `id`) of `job`.
pub fn podgroup_object(id: &str, job: &JobSpec) -> Result<Object> {
    Ok(Object::PodGroup(typed(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": id, "namespace": NAMESPACE},
        "spec": {"minMember": job.min_members, "queue": job.queue,
                 "priorityClassName": priority_class_name(job.priority)}
    }))?))
}

/// A member pod `name` of job `id`: Caldera's, in the job's gang (a job of one member has
/// no PodGroup: it is scheduled as a group of one in its queue), requesting the member's
/// shape, restricted to the job's GPU models. A fractional GPU is never requested here: the
/// replay refuses such jobs until GPU sharing exists.
pub fn pod_object(id: &str, name: &str, job: &JobSpec, grouped: bool) -> Result<Pod> {
    let mut requests = serde_json::Map::new();
    if job.cpu_milli > 0 {
        requests.insert("cpu".into(), json!(format_milli(job.cpu_milli)));
    }
    if job.memory > 0 {
        requests.insert("memory".into(), json!(format_bytes(job.memory)));
    }
    let mut limits = serde_json::Map::new();
    if let Some(g) = job.gpu.whole_gpus().filter(|g| *g > 0) {
        requests.insert(GPU_RESOURCE.into(), json!(g.to_string()));
        // Extended resources cannot be overcommitted: the API server wants limit = request.
        limits.insert(GPU_RESOURCE.into(), json!(g.to_string()));
    }
    let mut annotations = serde_json::Map::new();
    if grouped {
        annotations.insert(caldera_api::ANNOTATION_GROUP_NAME.into(), json!(id));
    } else {
        annotations.insert(caldera_api::ANNOTATION_QUEUE_NAME.into(), json!(job.queue));
    }
    // Volcano's opt-out of preemption; see docs/replay.md on what Caldera does with it.
    annotations.insert(
        "volcano.sh/preemptable".into(),
        json!(job.preemptible.to_string()),
    );
    let mut spec = json!({
        "schedulerName": "caldera",
        "priorityClassName": priority_class_name(job.priority),
        "containers": [{"name": "main", "image": "replay", "resources": {"requests": requests, "limits": limits}}],
    });
    if !job.gpu_models.is_empty() {
        spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": GPU_MODEL_LABEL, "operator": "In", "values": job.gpu_models}]}]}}});
    }
    typed(json!({
        "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations,
                     "labels": {"replay.caldera.sh/job": id}},
        "spec": spec
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_csv_extra_columns_are_labels() {
        let nodes = read_nodes(
            "node,cpu,memory,gpu,gpu_model,rack\nn1,64,512Gi,8,H100,r1\n",
            "n.csv",
        )
        .unwrap();
        assert_eq!(nodes[0].gpus, 8);
        assert_eq!(nodes[0].labels.get("rack").map(String::as_str), Some("r1"));
        assert_eq!(nodes[0].gpu_model.as_deref(), Some("H100"));
        node_object(&nodes[0]).unwrap();
    }

    #[test]
    fn bad_node_and_queue_lines_say_where() {
        let err = read_nodes("node,cpu,memory,gpu\nn1,64,512Gi,eight\n", "n.csv").unwrap_err();
        assert_eq!(
            err.to_string(),
            "n.csv:2:13: column \"gpu\": \"eight\" is not an integer in range"
        );
        let err = read_queues("queue,weight\nq,0\n", "q.csv").unwrap_err();
        assert_eq!(
            err.to_string(),
            "q.csv:2:3: column \"weight\": 0 is not in 1..65535"
        );
    }
}
