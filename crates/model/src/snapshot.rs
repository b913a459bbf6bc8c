//! The snapshot: one consistent view of the cluster that a session decides on.

use crate::job::Job;
use crate::node::Node;
use crate::plan::Plan;
use crate::queue::Queue;
use crate::resources::Resources;
use crate::task::{PendingReason, Task, TaskStatus};
use std::collections::HashMap;
use std::sync::Arc;

/// A pod of ours whose PodGroup does not exist yet: it waits, and says which group is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingPod {
    /// Pod uid.
    pub uid: Arc<str>,
    /// Pod namespace.
    pub namespace: Arc<str>,
    /// Pod name.
    pub name: Arc<str>,
    /// `namespace/name` of the missing PodGroup.
    pub group: Arc<str>,
    /// Why it waits, when it is not simply that the PodGroup does not exist yet (a gang derived
    /// from a workload that cannot be made: a clash, a malformed annotation).
    pub why: Option<Arc<str>>,
    /// The pod's creation time.
    pub created: crate::Time,
    /// Current `PodScheduled=False` condition.
    pub pending_reason: Option<Arc<PendingReason>>,
    /// The ProvisioningRequest its consume annotation names (see [`crate::Task::consumes`]).
    pub consumes: Option<Arc<str>>,
}

/// Everything a session needs, already converted from Kubernetes objects.
///
/// Invariants (checked by [`Snapshot::check`]): nodes sorted by name, jobs by id, queues by
/// name; every task's `job` indexes `jobs`, and every job's `tasks` index `tasks`; every job's
/// queue exists in `queues`; `Node::used` already counts every pod on the node (ours with a
/// node included).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Nodes, sorted by name.
    pub nodes: Vec<Node>,
    /// Members of our jobs.
    pub tasks: Vec<Task>,
    /// Jobs, sorted by id.
    pub jobs: Vec<Job>,
    /// Queues, sorted by name.
    pub queues: Vec<Queue>,
    /// Pods waiting for a PodGroup that does not exist.
    pub waiting: Vec<WaitingPod>,
    /// Pods on nodes (any scheduler's, ours already bound included) that the inter-pod
    /// constraints of pending members select, plus every pod with required anti-affinity.
    /// Sorted by (namespace, name).
    pub pods: Vec<crate::interpod::PlacedPod>,
    /// Autoscaler requests: the settings, when on and served.
    pub provisioning: Option<crate::ProvisioningPolicy>,
    /// Requests no job owns any more (PodGroup gone, or a second request for one gang): to
    /// delete.
    pub stale_capacity: Vec<crate::CapacityRelease>,
    /// PodDisruptionBudgets that cover members of our jobs.
    pub budgets: Vec<Budget>,
    /// Volumes `WaitForFirstConsumer` claims may take, claims in use, attach limits.
    pub volumes: crate::volume::VolumeCatalog,
    /// The HyperNode tree over `nodes` (empty without HyperNodes).
    pub topology: crate::topology::TopologyTree,
    /// Dynamic Resource Allocation: devices, classes and claims (empty without DRA).
    pub dra: crate::dra::DeviceInventory,
}

/// A PodDisruptionBudget, as far as choosing victims needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// `namespace/name`.
    pub id: Arc<str>,
    /// `status.disruptionsAllowed` (0 for a pod covered by several budgets: the eviction API
    /// refuses those).
    pub allowed: u32,
}

impl Snapshot {
    /// Σ allocatable over nodes that are Ready.
    pub fn total_allocatable(&self) -> Resources {
        let mut total = Resources::new();
        for n in self.nodes.iter().filter(|n| n.ready) {
            total.add(&n.allocatable);
        }
        total
    }

    /// Index of the node named `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.binary_search_by(|n| (*n.name).cmp(name)).ok()
    }

    /// Records what carrying out `plan` does, as the binder and the watch would report it:
    /// bound members get their node and count there, pending members their condition,
    /// timed-out members phase Failed, PodGroups and Queues their new status. Lets tests and benchmarks
    /// run sessions back to back without a cluster.
    pub fn record(&mut self, plan: &Plan) {
        let index: HashMap<(Arc<str>, Arc<str>), usize> = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| ((t.namespace.clone(), t.name.clone()), i))
            .collect();
        let task = |ns: &Arc<str>, name: &Arc<str>| index.get(&(ns.clone(), name.clone())).copied();
        for b in &plan.binds {
            let Some(i) = task(&b.pod.namespace, &b.pod.name) else {
                continue;
            };
            let t = &mut self.tasks[i];
            t.status = TaskStatus::Bound;
            t.node = Some(b.node.clone());
            if let Ok(n) = self.nodes.binary_search_by(|n| n.name.cmp(&b.node)) {
                let t = &self.tasks[i];
                self.nodes[n].add_pod(&t.request, &t.spec.host_ports);
            }
            let t = &self.tasks[i];
            self.pods.push(crate::interpod::PlacedPod {
                namespace: t.namespace.clone(),
                name: t.name.clone(),
                labels: t.labels.clone(),
                node: b.node.clone(),
                terminating: false,
                anti_affinity: t.spec.pods.anti_affinity.clone().into(),
                scoring_terms: t.spec.pods.scoring_terms(),
            });
        }
        self.pods
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        for c in &plan.pod_conditions {
            if let Some(i) = task(&c.pod.namespace, &c.pod.name) {
                self.tasks[i].pending_reason = Some(Arc::new(PendingReason {
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                }));
            }
        }
        for f in &plan.pod_failures {
            if let Some(i) = task(&f.pod.namespace, &f.pod.name) {
                self.tasks[i].status = TaskStatus::Failed;
            }
        }
        for u in &plan.podgroups {
            let id = format!("{}/{}", u.namespace, u.name);
            if let Ok(j) = self.jobs.binary_search_by(|j| (*j.id).cmp(id.as_str())) {
                let job = &mut self.jobs[j];
                if job.pending_since.is_none() {
                    job.pending_since = u.status.pending_since();
                }
                job.status = Some(u.status.clone());
            }
        }
        for u in &plan.queues {
            if let Ok(q) = self.queues.binary_search_by(|q| q.name.cmp(&u.name)) {
                self.queues[q].status = Some(u.status.clone());
            }
        }
    }

    /// Index of the queue named `name`.
    pub fn queue_index(&self, name: &str) -> Option<usize> {
        self.queues.binary_search_by(|q| (*q.name).cmp(name)).ok()
    }

    /// Checks the structural invariants; returns the first violation.
    pub fn check(&self) -> Result<(), String> {
        let sorted = |names: Vec<&str>, what: &str| {
            if names.windows(2).all(|w| w[0] < w[1]) {
                Ok(())
            } else {
                Err(format!("{what} are not sorted and unique"))
            }
        };
        sorted(self.nodes.iter().map(|n| &*n.name).collect(), "nodes")?;
        sorted(self.jobs.iter().map(|j| &*j.id).collect(), "jobs")?;
        sorted(self.queues.iter().map(|q| &*q.name).collect(), "queues")?;
        for (ti, t) in self.tasks.iter().enumerate() {
            let job = self
                .jobs
                .get(t.job)
                .ok_or_else(|| format!("task {} names job #{}", t.key(), t.job))?;
            if !job.tasks.contains(&ti) {
                return Err(format!("job {} does not list task {}", job.id, t.key()));
            }
        }
        for (ji, j) in self.jobs.iter().enumerate() {
            if self.queue_index(&j.queue).is_none() {
                return Err(format!("job {} names missing queue {}", j.id, j.queue));
            }
            for &ti in &j.tasks {
                if self.tasks.get(ti).map(|t| t.job) != Some(ji) {
                    return Err(format!("job {} lists task #{ti} of another job", j.id));
                }
            }
        }
        Ok(())
    }
}
