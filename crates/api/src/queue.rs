//! Queue (`scheduling.volcano.sh/v1beta1`, cluster-scoped): a share of the cluster that PodGroups
//! are scheduled in.
//!
//! Field for field compatible with Volcano's `Queue`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum::string_enum;

/// Spec of a Queue: its weight, limits, guarantee and place in the queue hierarchy.
//
// Every field is optional so that a manifest round-trips exactly as written; the getters
// (`weight()`, `reclaimable()`, `priority()`) apply the documented defaults.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
// Several `printcolumn(...)` share `type_ = "string"`, which clippy mistakes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "Queue",
    plural = "queues",
    singular = "queue",
    shortname = "q",
    shortname = "queue-v1beta1",
    status = "QueueStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "Queue is a share of the cluster that PodGroups are scheduled in.",
    printcolumn(name = "Weight", type_ = "integer", json_path = ".spec.weight"),
    printcolumn(name = "State", type_ = "string", json_path = ".status.state"),
    printcolumn(name = "Parent", type_ = "string", json_path = ".spec.parent"),
    printcolumn(name = "GPU-Usage", type_ = "string", json_path = ".status.usage.gpu"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
// See `PodGroupSpec`: `null_spec_is_default!` below reads a missing `spec` as the default.
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "QueueSpec")]
pub struct QueueSpec {
    /// Relative share of the cluster, 1..65535. Defaults to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535), extend("default" = 1))]
    pub weight: Option<i32>,

    /// Hard ceiling on what the queue's jobs may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub capability: Option<BTreeMap<String, Quantity>>,

    /// Whether other queues may reclaim resources this queue uses above its share. Defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub reclaimable: Option<bool>,

    /// Volcano multi-cluster: clusters the queue's jobs may be dispatched to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extend_clusters: Option<Vec<Cluster>>,

    /// Resources reserved for the queue: a floor it always gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<Guarantee>,

    /// Volcano node-group affinity of the queue's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,

    /// Volcano's queue type.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,

    /// Parent queue in a hierarchy; absent means a child of the root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,

    /// Explicit share, used instead of the weight split when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub deserved: Option<BTreeMap<String, Quantity>>,

    /// Queues with a higher priority are served first and reclaimed from last. Defaults to 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,

    /// Volcano's dequeue strategy: `fifo` or `traverse` (its default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dequeue_strategy: Option<DequeueStrategy>,
}

null_spec_is_default!(QueueSpec);

impl QueueSpec {
    /// The queue's weight: `weight`, or 1 when absent or out of range.
    pub fn weight(&self) -> i32 {
        self.weight.filter(|w| (1..=65535).contains(w)).unwrap_or(1)
    }

    /// Whether other queues may reclaim from this one: `reclaimable`, default true.
    pub fn reclaimable(&self) -> bool {
        self.reclaimable.unwrap_or(true)
    }

    /// The queue's priority: `priority`, default 0.
    pub fn priority(&self) -> i32 {
        self.priority.unwrap_or(0)
    }
}

string_enum! {
    /// How Volcano takes jobs from a queue.
    pub enum DequeueStrategy {
        /// Strict FIFO: if the head cannot be scheduled, nothing behind it is tried.
        Fifo = "fifo",
        /// Skip a head that cannot be scheduled and try the next job.
        Traverse = "traverse",
    }
    schema_enum = false;
}

/// Resources reserved for a queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guarantee {
    /// The reserved amounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub resource: Option<BTreeMap<String, Quantity>>,
}

/// Volcano multi-cluster: a cluster a queue's jobs may be dispatched to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Cluster name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Relative weight among the clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Capacity offered to the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
}

/// Volcano node-group affinity rules of a queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Affinity {
    /// Node groups the queue's pods go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_affinity: Option<NodeGroupAffinity>,
    /// Node groups the queue's pods avoid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_group_anti_affinity: Option<NodeGroupAffinity>,
}

/// Required and preferred node groups (Volcano's `NodeGroupAffinity` and
/// `NodeGroupAntiAffinity` have this same shape).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NodeGroupAffinity {
    /// Node groups that must (or, for anti-affinity, must not) be used.
    #[serde(
        rename = "requiredDuringSchedulingIgnoredDuringExecution",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub required: Option<Vec<String>>,
    /// Node groups that should (or should not) be used.
    #[serde(
        rename = "preferredDuringSchedulingIgnoredDuringExecution",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub preferred: Option<Vec<String>>,
}

string_enum! {
    /// State of a Queue.
    pub enum QueueState {
        /// Admits new PodGroups.
        Open = "Open",
        /// Admits nothing new.
        Closed = "Closed",
        /// Being closed: admits nothing new, running jobs continue.
        Closing = "Closing",
        /// Not known.
        Unknown = "Unknown",
    }
    schema_enum = false;
}

/// Observed state of a Queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// `Open`, `Closed`, `Closing` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<QueueState>,
    /// PodGroups in phase `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<i32>,
    /// PodGroups in phase `Pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<i32>,
    /// PodGroups in phase `Running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,
    /// PodGroups in phase `Inqueue`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inqueue: Option<i32>,
    /// PodGroups in phase `Completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<i32>,
    /// Resources allocated to the queue's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub allocated: Option<BTreeMap<String, Quantity>>,
    /// Volcano's resource reservation for the queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<Reservation>,
    /// Caldera's conditions (Volcano has none): `Schedulable` `False` while the queue is out
    /// of the queue tree (reason `ParentCycle`, `ParentNotFound`, `AncestorNotInTree` or
    /// `RootHasParent`) and so holds no new work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<QueueCondition>>,
    /// Caldera's decayed usage (the `fairshare` plugin; Volcano has none): written at most
    /// every `usageWritePeriod`, read back at start so a restart resumes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<QueueUsage>,
}

/// A queue's decayed usage record: fractions of the cluster's capacity per resource, in
/// millionths (1000000 = the whole cluster), of the queue and every queue below it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueUsage {
    /// When the record was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// The decayed mean fraction held, per resource, at `lastUpdateTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decayed: Option<BTreeMap<String, i64>>,
    /// The fraction held at `lastUpdateTime`, per resource (held until the next record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<BTreeMap<String, i64>>,
    /// The decayed GPU fraction at `lastUpdateTime`, as a decimal (`0.25`), for people
    /// (`kubectl get queue` shows it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

/// One condition of a Queue.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QueueCondition {
    /// `Schedulable`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// One-word CamelCase reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Volcano's resource reservation: nodes locked for a queue and their idle resources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// Locked nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
    /// Idle resources on the locked nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub resource: Option<BTreeMap<String, Quantity>>,
}
