//! Nodes as the scheduler sees them: what they offer, what is used, and what keeps pods off.

use crate::resources::Resources;
use crate::selector::{HostPort, Taint};
use std::sync::Arc;

/// A node and its current load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `metadata.labels`, shared: a snapshot's copy of a node shares them with the cache.
    pub labels: crate::interpod::Labels,
    /// `spec.taints`, shared like the labels.
    pub taints: Arc<[Taint]>,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// The `Ready` condition is `True`.
    pub ready: bool,
    /// `status.allocatable` without the `pods` count.
    pub allocatable: Resources,
    /// `status.allocatable.pods` (110 when absent).
    pub max_pods: i64,
    /// Σ requests of every pod on the node, whoever scheduled it, terminating ones included.
    pub used: Resources,
    /// Number of pods on the node.
    pub pod_count: i64,
    /// Host ports taken by pods on the node.
    pub host_ports: Vec<HostPort>,
    /// Capacity held for a job that is not bound yet: the id of the job this node is booked
    /// for. Other jobs' members do not go here; that job's members try here first.
    pub booked_for: Option<Arc<str>>,
    /// `metadata.creationTimestamp`.
    pub created: crate::Time,
}

/// The taints of a node without any: one shared allocation, so the copies of untainted nodes
/// a session makes touch no memory of their own for them.
pub fn untainted() -> Arc<[Taint]> {
    static NONE: std::sync::OnceLock<Arc<[Taint]>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| Arc::from([])).clone()
}

impl Node {
    /// An empty, ready node offering `allocatable`.
    pub fn new(name: &str, allocatable: Resources) -> Self {
        Node {
            name: Arc::from(name),
            labels: Default::default(),
            taints: untainted(),
            unschedulable: false,
            ready: true,
            allocatable,
            max_pods: 110,
            used: Resources::new(),
            pod_count: 0,
            host_ports: Vec::new(),
            booked_for: None,
            created: crate::Time(0),
        }
    }

    /// What is left: allocatable − used.
    pub fn idle(&self) -> Resources {
        self.allocatable.minus(&self.used)
    }

    /// Accounts a pod with `request` and `ports` on this node.
    pub fn add_pod(&mut self, request: &Resources, ports: &[HostPort]) {
        self.used.add(request);
        self.pod_count += 1;
        self.host_ports.extend(ports.iter().cloned());
    }

    /// Undoes [`Node::add_pod`].
    pub fn remove_pod(&mut self, request: &Resources, ports: &[HostPort]) {
        self.used.sub(request);
        self.pod_count -= 1;
        for p in ports {
            if let Some(i) = self.host_ports.iter().rposition(|q| q == p) {
                self.host_ports.remove(i);
            }
        }
    }
}
