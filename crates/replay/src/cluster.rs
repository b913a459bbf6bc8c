//! The cluster a trace runs on: nodes (`--nodes` CSV, an openb node list, or manifests) and
//! queues (`--queues` CSV or manifests), and the Kubernetes objects the replay puts in the
//! simulator's store for nodes, queues, priorities and jobs.
//!
//! Nodes CSV: `node`, `cpu`, `memory`, `gpu`, optional `gpu_model` (the node label
//! `nvidia.com/gpu.product`), optional `pods` (default 110), and any other column as a node
//! label of that name (a rack, an NVLink domain). Queues CSV: `queue`, `weight`, optional
//! `parent`, optional `capability_gpu`.
//!
//! GPUs reach pods one of two ways. A trace of whole GPUs only: each node lists
//! `nvidia.com/gpu` (a device plugin) and members request it. A trace with a fraction of a GPU
//! anywhere ([`share_gpus`]): each node publishes its GPUs as shared DRA devices instead (one
//! ResourceSlice per node, driver [`GPU_DRIVER`], devices `gpu-0`… with
//! `allowMultipleAllocations` and one capacity [`SHARE_CAPACITY`] of `1`, a whole GPU), as
//! NVIDIA's DRA driver does with consumable capacity (KEP-5075), and every GPU member asks
//! through a ResourceClaim of its own ([`claim_object`]): a fraction as a capacity request of
//! one device (`share: 250m`), whole GPUs as `count` devices each asked all of its share, so a
//! GPU that holds any fraction cannot serve a whole-GPU member.

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

/// The DRA driver whose devices are the replay's shared GPUs.
pub const GPU_DRIVER: &str = "gpu.nvidia.com";

/// The DeviceClass of those devices.
pub const GPU_CLASS: &str = "gpu.nvidia.com";

/// The capacity of a shared GPU its shares consume: `1` is the whole GPU.
pub const SHARE_CAPACITY: &str = "share";

/// The name of a pod's claim (in the pod, and the ResourceClaim's own name is the pod's).
const CLAIM_REQUEST: &str = "gpu";

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

/// Reads a nodes CSV (`node,cpu,memory,gpu[,gpu_model][,pods][,label…]`);
/// [`crate::input::read_nodes`] tells it from an openb node list.
pub fn read_nodes_csv(text: &str, file: &str) -> Result<Vec<NodeSpec>> {
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
/// shape, restricted to the job's GPU models. A fraction of a GPU is never requested here: only
/// [`shared_pod_object`] can ask for one.
pub fn pod_object(id: &str, name: &str, job: &JobSpec, grouped: bool) -> Result<Pod> {
    pod_with(id, name, job, grouped, false)
}

/// A member pod as [`pod_object`] builds it, on a cluster whose GPUs are shared DRA devices
/// ([`share_gpus`]): a GPU member names its own ResourceClaim (called `name`, made by
/// [`claim_object`]) instead of requesting `nvidia.com/gpu`.
pub fn shared_pod_object(id: &str, name: &str, job: &JobSpec, grouped: bool) -> Result<Pod> {
    pod_with(id, name, job, grouped, true)
}

/// The ResourceClaim of member `name` on a cluster of shared GPUs, `None` for a member
/// asking for no GPU: a fraction of a GPU is one device asked that much of its
/// [`SHARE_CAPACITY`]; `n` whole GPUs are `n` devices (different ones, as a request's slots
/// are) each asked all of it.
pub fn claim_object(name: &str, job: &JobSpec) -> Result<Option<Object>> {
    let (count, share) = match job.gpu.whole_gpus() {
        Some(0) => return Ok(None),
        Some(n) => (n, "1".to_string()),
        None => (1, format_milli(i64::from(job.gpu.milli()))),
    };
    Ok(Some(Object::ResourceClaim(typed(json!({
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"devices": {"requests": [{"name": CLAIM_REQUEST, "exactly": {
            "deviceClassName": GPU_CLASS, "allocationMode": "ExactCount", "count": count,
            "capacity": {"requests": {SHARE_CAPACITY: share}}}}]}}
    }))?)))
}

/// Whether a trace needs shared GPUs: some member asks for a fraction of one.
pub fn needs_sharing(jobs: &[JobSpec]) -> bool {
    jobs.iter().any(|j| j.gpu.is_fraction())
}

/// `objects` with every node's `nvidia.com/gpu` published as shared DRA devices instead (see
/// the module doc): the node no longer lists the resource; a ResourceSlice per node offers
/// its GPUs, with its GPU model as the devices' `productName`; one DeviceClass selects them.
pub fn share_gpus(objects: &[Object]) -> Result<Vec<Object>> {
    let capacity = gpu_capacity(objects);
    let mut out = Vec::with_capacity(objects.len() * 2 + 1);
    out.push(Object::DeviceClass(typed(json!({
        "metadata": {"name": GPU_CLASS},
        "spec": {"selectors": [{"cel": {"expression":
            format!("device.driver == '{GPU_DRIVER}' && device.allowMultipleAllocations")}}]}
    }))?));
    for o in objects {
        let Object::Node(node) = o else {
            out.push(o.clone());
            continue;
        };
        let name = node.metadata.name.clone().unwrap_or_default();
        let gpus = capacity.get(&name).copied().unwrap_or(0) / 1000;
        if gpus == 0 {
            out.push(o.clone());
            continue;
        }
        let mut node = node.clone();
        if let Some(status) = node.status.as_mut() {
            for list in [status.allocatable.as_mut(), status.capacity.as_mut()]
                .into_iter()
                .flatten()
            {
                list.remove(GPU_RESOURCE);
            }
        }
        let model = node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(GPU_MODEL_LABEL))
            .cloned();
        let devices: Vec<serde_json::Value> = (0..gpus)
            .map(|k| {
                let mut attributes = json!({"type": {"string": "gpu"}});
                if let Some(m) = &model {
                    attributes["productName"] = json!({"string": m});
                }
                json!({"name": format!("gpu-{k}"), "allowMultipleAllocations": true,
                       "attributes": attributes,
                       "capacity": {SHARE_CAPACITY: {"value": "1"}}})
            })
            .collect();
        out.push(Object::Node(node));
        out.push(Object::ResourceSlice(typed(json!({
            "metadata": {"name": format!("{name}-{GPU_DRIVER}")},
            "spec": {"driver": GPU_DRIVER, "nodeName": name,
                     "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}
        }))?));
    }
    Ok(out)
}

fn pod_with(id: &str, name: &str, job: &JobSpec, grouped: bool, shared: bool) -> Result<Pod> {
    let mut requests = serde_json::Map::new();
    if job.cpu_milli > 0 {
        requests.insert("cpu".into(), json!(format_milli(job.cpu_milli)));
    }
    if job.memory > 0 {
        requests.insert("memory".into(), json!(format_bytes(job.memory)));
    }
    let mut limits = serde_json::Map::new();
    let claim = shared && job.gpu.milli() > 0;
    if let Some(g) = job.gpu.whole_gpus().filter(|g| *g > 0 && !shared) {
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
    let mut resources = json!({"requests": requests, "limits": limits});
    if claim {
        resources["claims"] = json!([{"name": CLAIM_REQUEST}]);
    }
    let mut spec = json!({
        "schedulerName": "caldera",
        "priorityClassName": priority_class_name(job.priority),
        "containers": [{"name": "main", "image": "replay", "resources": resources}],
    });
    if claim {
        spec["resourceClaims"] = json!([{"name": CLAIM_REQUEST, "resourceClaimName": name}]);
    }
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

/// GPU capacity per node (thousandths), from the Node objects.
pub fn gpu_capacity(objects: &[Object]) -> BTreeMap<String, u64> {
    objects
        .iter()
        .filter_map(|o| match o {
            Object::Node(n) => {
                let gpus = n
                    .status
                    .as_ref()
                    .and_then(|s| s.allocatable.as_ref())
                    .and_then(|a| a.get(GPU_RESOURCE))
                    .and_then(|q| {
                        caldera_model::quantity::parse_quantity(
                            &q.0,
                            caldera_model::quantity::Scale::Units,
                        )
                        .ok()
                    })
                    .unwrap_or(0);
                Some((
                    n.metadata.name.clone().unwrap_or_default(),
                    u64::try_from(gpus).unwrap_or(0) * 1000,
                ))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_csv_extra_columns_are_labels() {
        let nodes = read_nodes_csv(
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
        let err = read_nodes_csv("node,cpu,memory,gpu\nn1,64,512Gi,eight\n", "n.csv").unwrap_err();
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
