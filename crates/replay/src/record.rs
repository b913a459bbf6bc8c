//! `caldera record`'s bookkeeping, without I/O: the pods and PodGroups a watch reports go in
//! ([`Recorder::pod`], [`Recorder::pod_gone`], [`Recorder::podgroup`]); a job's trace line
//! comes out once every member has finished ([`Recorder::take_finished`]). The runtime layer
//! (`caldera record` in the `caldera` binary) feeds it from watches, using only `list` and
//! `watch`.
//!
//! A job is a PodGroup's members (or a lone pod of ours). `submit`: its first member's (or its
//! PodGroup's) creation, from the recording's start; `duration`: the longest a member ran, from
//! its bind (`PodScheduled=True`) to its end (its containers' `finishedAt`, else when the
//! recorder saw it finish or go); shapes from the first member's requests; `queue`, `priority`
//! and `preemptible` (annotation `volcano.sh/preemptable`) as the pods and PodGroup say. Jobs
//! created before the recording started are left out: their arrival was not seen.

use crate::cluster::{NodeSpec, GPU_MODEL_LABEL, GPU_RESOURCE};
use crate::trace::{Gpu, JobSpec};
use caldera_api::PodGroup;
use k8s_openapi::api::core::v1::{Node, Pod};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default, Clone)]
struct Member {
    bound_ms: Option<i64>,
    end_ms: Option<i64>,
}

#[derive(Debug, Default, Clone)]
struct Job {
    created_ms: Option<i64>,
    spec: Option<JobSpec>,
    members: BTreeMap<String, Member>,
    min_member: Option<u32>,
    queue: Option<String>,
    written: bool,
}

/// Jobs seen so far.
#[derive(Debug, Clone)]
pub struct Recorder {
    start_ms: i64,
    scheduler_names: BTreeSet<String>,
    jobs: BTreeMap<String, Job>,
    /// Jobs that arrived before the recording started (not written).
    pub skipped: BTreeSet<String>,
}

fn millis(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    t.0.as_millisecond()
}

/// The group id of a pod: `namespace/podgroup`, or `namespace/pod` for a lone pod.
fn group_of(pod: &Pod) -> String {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let annotations = pod.metadata.annotations.as_ref();
    let labels = pod.metadata.labels.as_ref();
    let group = annotations
        .and_then(|a| a.get(caldera_api::ANNOTATION_GROUP_NAME))
        .or_else(|| labels.and_then(|l| l.get(caldera_api::LABEL_VOLCANO_PODGROUP)))
        .or_else(|| labels.and_then(|l| l.get(caldera_api::LABEL_COSCHEDULING_POD_GROUP)));
    match group {
        Some(g) => format!("{ns}/{g}"),
        None => format!("{ns}/pod:{}", pod.metadata.name.as_deref().unwrap_or("")),
    }
}

fn shape(pod: &Pod, name: &str) -> JobSpec {
    let request = caldera_cache::pod_request(pod).unwrap_or_default();
    let gpus = u32::try_from(request.get(GPU_RESOURCE)).unwrap_or(0);
    let mut job = JobSpec::new(name, 0, 0, 1, Gpu::whole(gpus));
    job.cpu_milli = request.get(caldera_model::resources::CPU);
    job.memory = request.get(caldera_model::resources::MEMORY);
    let spec = pod.spec.as_ref();
    job.priority = spec.and_then(|s| s.priority).unwrap_or(0);
    job.gpu_models = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .into_iter()
        .flat_map(|r| &r.node_selector_terms)
        .flat_map(|t| t.match_expressions.iter().flatten())
        .filter(|e| e.key == GPU_MODEL_LABEL && e.operator == "In")
        .flat_map(|e| e.values.iter().flatten().cloned())
        .collect();
    let annotations = pod.metadata.annotations.as_ref();
    job.preemptible = annotations
        .and_then(|a| a.get("volcano.sh/preemptable"))
        .is_none_or(|v| v != "false");
    if let Some(q) = annotations.and_then(|a| a.get(caldera_api::ANNOTATION_QUEUE_NAME)) {
        job.queue = q.clone();
    }
    job
}

/// When the pod was bound: its `PodScheduled=True` transition, if it has a node.
fn bound_ms(pod: &Pod) -> Option<i64> {
    pod.spec.as_ref()?.node_name.as_ref()?;
    pod.status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled" && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref().map(millis))
}

/// When the pod's containers finished, if it has finished.
fn finished_ms(pod: &Pod) -> Option<Option<i64>> {
    let status = pod.status.as_ref()?;
    if !matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
        return None;
    }
    Some(
        status
            .container_statuses
            .iter()
            .flatten()
            .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
            .map(millis)
            .max(),
    )
}

impl Recorder {
    /// A recorder started at `start_ms` (Unix ms), recording pods of `scheduler_names`.
    pub fn new(start_ms: i64, scheduler_names: &[String]) -> Recorder {
        Recorder {
            start_ms,
            scheduler_names: scheduler_names.iter().cloned().collect(),
            jobs: BTreeMap::new(),
            skipped: BTreeSet::new(),
        }
    }

    /// A pod was added or changed; `now_ms` is when the recorder saw it.
    pub fn pod(&mut self, pod: &Pod, now_ms: i64) {
        let scheduler = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .unwrap_or("default-scheduler");
        if !self.scheduler_names.contains(scheduler) {
            return;
        }
        let id = group_of(pod);
        let Some(name) = pod.metadata.name.clone() else {
            return;
        };
        let created = pod.metadata.creation_timestamp.as_ref().map(millis);
        let job = self.jobs.entry(id.clone()).or_default();
        if job.written {
            return;
        }
        job.created_ms = match (job.created_ms, created) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if job.spec.is_none() {
            job.spec = Some(shape(pod, id.rsplit('/').next().unwrap_or(&id)));
        }
        let member = job.members.entry(name).or_default();
        if member.bound_ms.is_none() {
            member.bound_ms = bound_ms(pod);
        }
        if member.end_ms.is_none() {
            if let Some(end) = finished_ms(pod) {
                member.end_ms = Some(end.unwrap_or(now_ms));
            }
        }
    }

    /// A pod was deleted; `now_ms` is when the recorder saw it go.
    pub fn pod_gone(&mut self, pod: &Pod, now_ms: i64) {
        let id = group_of(pod);
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        if let Some(m) = pod
            .metadata
            .name
            .as_ref()
            .and_then(|n| job.members.get_mut(n))
        {
            if m.end_ms.is_none() {
                m.end_ms = Some(now_ms);
            }
        }
    }

    /// A PodGroup was added or changed.
    pub fn podgroup(&mut self, pg: &PodGroup) {
        let ns = pg.metadata.namespace.as_deref().unwrap_or("default");
        let id = format!("{ns}/{}", pg.metadata.name.as_deref().unwrap_or(""));
        let job = self.jobs.entry(id).or_default();
        job.min_member = pg.spec.min_member.and_then(|m| u32::try_from(m).ok());
        job.queue = pg.spec.queue.clone();
        if let Some(c) = pg.metadata.creation_timestamp.as_ref().map(millis) {
            job.created_ms = Some(job.created_ms.map_or(c, |a| a.min(c)));
        }
    }

    /// The jobs whose every member has finished since the last call, as trace lines (submit
    /// from the recording's start), in order of arrival.
    pub fn take_finished(&mut self) -> Vec<JobSpec> {
        let mut out = Vec::new();
        for (id, job) in self.jobs.iter_mut() {
            if job.written || job.members.is_empty() {
                continue;
            }
            if !job.members.values().all(|m| m.end_ms.is_some()) {
                continue;
            }
            job.written = true;
            let Some(mut spec) = job.spec.clone() else {
                continue;
            };
            let created = job.created_ms.unwrap_or(self.start_ms);
            if created < self.start_ms {
                self.skipped.insert(id.clone());
                continue;
            }
            let ran: Vec<i64> = job
                .members
                .values()
                .filter_map(|m| Some(m.end_ms? - m.bound_ms?))
                .collect();
            if ran.is_empty() {
                // Never bound (deleted while pending): not a job that ran.
                continue;
            }
            spec.name = id.replace('/', ".");
            spec.submit_ms = created - self.start_ms;
            spec.duration_ms = ran.into_iter().max().unwrap_or(0).max(0);
            spec.members = job.members.len() as u32;
            spec.min_members = job
                .min_member
                .unwrap_or(spec.members)
                .clamp(1, spec.members);
            if let Some(q) = &job.queue {
                spec.queue = q.clone();
            }
            out.push(spec);
        }
        out.sort_by(|a, b| (a.submit_ms, &a.name).cmp(&(b.submit_ms, &b.name)));
        out
    }

    /// Jobs seen and not finished yet.
    pub fn unfinished(&self) -> usize {
        self.jobs
            .values()
            .filter(|j| !j.written && !j.members.is_empty())
            .count()
    }
}

/// A node as a nodes-CSV line's content.
pub fn node_spec(node: &Node) -> Option<NodeSpec> {
    let alloc = node.status.as_ref()?.allocatable.as_ref()?;
    let q = |name: &str, scale| {
        alloc
            .get(name)
            .and_then(|v| caldera_model::quantity::parse_quantity(&v.0, scale).ok())
            .unwrap_or(0)
    };
    use caldera_model::quantity::Scale;
    Some(NodeSpec {
        name: node.metadata.name.clone()?,
        cpu_milli: q("cpu", Scale::Milli),
        memory: q("memory", Scale::Units),
        gpus: u32::try_from(q(GPU_RESOURCE, Scale::Units)).unwrap_or(0),
        gpu_model: node
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(GPU_MODEL_LABEL))
            .cloned(),
        pods: q("pods", Scale::Units).max(1),
        labels: BTreeMap::new(),
    })
}

/// Nodes as a nodes CSV.
pub fn write_nodes(nodes: &[NodeSpec]) -> String {
    use caldera_model::quantity::{format_bytes, format_milli};
    let mut out = String::from("node,cpu,memory,gpu,gpu_model,pods\n");
    for n in nodes {
        out.push_str(&format!(
            "{},{},{},{},{},{}\n",
            crate::csv::quote(&n.name),
            format_milli(n.cpu_milli),
            format_bytes(n.memory),
            n.gpus,
            crate::csv::quote(n.gpu_model.as_deref().unwrap_or("")),
            n.pods
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>, phase: &str, bound_at: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:10Z",
                         "annotations": {"scheduling.k8s.io/group-name": "train"}},
            "spec": {"schedulerName": "caldera", "nodeName": node, "priority": 5,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": "4"}}}]},
            "status": {"phase": phase, "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": bound_at}]}
        })).unwrap()
    }

    #[test]
    fn a_gang_is_written_once_every_member_finished() {
        let start = 1_767_225_600_000; // 2026-01-01T00:00:00Z
        let mut r = Recorder::new(start, &["caldera".to_string()]);
        let pg: PodGroup = serde_json::from_value(json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:10Z"},
            "spec": {"minMember": 2, "queue": "research"}})).unwrap();
        r.podgroup(&pg);
        r.pod(
            &pod("train-0", Some("n1"), "Running", "2026-01-01T00:00:12Z"),
            start + 12_000,
        );
        r.pod(
            &pod("train-1", Some("n2"), "Running", "2026-01-01T00:00:12Z"),
            start + 12_000,
        );
        assert!(r.take_finished().is_empty());
        r.pod(
            &pod("train-0", Some("n1"), "Succeeded", "2026-01-01T00:00:12Z"),
            start + 42_000,
        );
        r.pod_gone(
            &pod("train-1", Some("n2"), "Running", "2026-01-01T00:00:12Z"),
            start + 44_000,
        );
        let jobs = r.take_finished();
        assert_eq!(jobs.len(), 1);
        let j = &jobs[0];
        assert_eq!(
            (j.name.as_str(), j.submit_ms, j.duration_ms),
            ("ml.train", 10_000, 32_000)
        );
        assert_eq!(
            (j.members, j.min_members, j.gpu, j.cpu_milli),
            (2, 2, Gpu::whole(4), 2000)
        );
        assert_eq!((j.queue.as_str(), j.priority), ("research", 5));
        assert!(r.take_finished().is_empty());
    }
}
