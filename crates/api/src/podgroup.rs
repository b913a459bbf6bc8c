//! PodGroup (`scheduling.volcano.sh/v1beta1`): a gang of pods that must be placed together.
//!
//! Field for field compatible with Volcano's `PodGroup`, plus two Caldera extensions that
//! Volcano ignores: `scheduleTimeoutSeconds` and `topology`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum::string_enum;

/// Spec of a PodGroup: how many members must be placed together, in which queue, and how.
//
// Every field is optional so that a manifest round-trips exactly as written; the getters
// (`min_member()`, `queue_name()`) apply the documented defaults.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
// Several `printcolumn(...)` share `type_ = "string"`, which clippy mistakes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "scheduling.volcano.sh",
    version = "v1beta1",
    kind = "PodGroup",
    plural = "podgroups",
    singular = "podgroup",
    shortname = "pg",
    shortname = "podgroup-v1beta1",
    namespaced,
    status = "PodGroupStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "PodGroup is a gang of pods that Caldera places all together or not at all.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "MinMember", type_ = "integer", json_path = ".spec.minMember"),
    printcolumn(name = "Running", type_ = "integer", json_path = ".status.running"),
    printcolumn(name = "Queue", type_ = "string", json_path = ".spec.queue"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
// `remote = "Self"`: `null_spec_is_default!` below writes the serde traits, so that an object
// with no `spec` at all (which Volcano accepts) reads as an empty spec instead of failing.
#[serde(remote = "Self", rename_all = "camelCase")]
#[schemars(rename = "PodGroupSpec")]
pub struct PodGroupSpec {
    /// How many members must be placed together. 0 or absent means 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_member: Option<i32>,

    /// Per-role minimum members; the role of a pod is its `volcano.sh/task-spec` annotation or label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_task_member: Option<BTreeMap<String, i32>>,

    /// Queue the group is scheduled in. Defaults to `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "default"))]
    pub queue: Option<String>,

    /// PriorityClass giving the group's priority; absent means the cluster's global default, else 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,

    /// Resources the group needs at minimum; used to admit it into its queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::resource_list")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,

    /// Volcano's network-topology constraint (works with Volcano's HyperNode CRD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,

    /// Volcano's sub-groups: gang and topology constraints for subsets of the members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_policy: Option<Vec<SubGroupPolicySpec>>,

    /// Caldera extension: seconds to wait for the gang to become ready before failing its
    /// pending members. Absent means the scheduler's `gangScheduleTimeout`, by default forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub schedule_timeout_seconds: Option<i32>,

    /// Caldera extension: place all members within one domain of a node label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<TopologySpec>,
}

null_spec_is_default!(PodGroupSpec);

impl PodGroupSpec {
    /// Members that must be placed together: `minMember`, where 0 or absent means 1.
    pub fn min_member(&self) -> i32 {
        self.min_member.filter(|&n| n > 0).unwrap_or(1)
    }

    /// The queue the group belongs to: `queue`, or [`crate::DEFAULT_QUEUE`] when absent or empty.
    pub fn queue_name(&self) -> &str {
        self.queue
            .as_deref()
            .filter(|queue| !queue.is_empty())
            .unwrap_or(crate::DEFAULT_QUEUE)
    }
}

string_enum! {
    /// Volcano's network-topology mode.
    pub enum NetworkTopologyMode {
        /// Members must not cross the allowed tier.
        Hard = "hard",
        /// Members should stay within the allowed tier when possible.
        Soft = "soft",
    }
    schema_enum = true;
}

/// Volcano's network-topology constraint on a PodGroup or sub-group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`; Volcano defaults it to `hard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "hard"))]
    pub mode: Option<NetworkTopologyMode>,

    /// Highest HyperNode tier the members may span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub highest_tier_allowed: Option<i64>,

    /// Name of the highest HyperNode tier the members may span (exclusive with `highestTierAllowed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_name: Option<String>,
}

/// One of Volcano's sub-group policies: a subset of members with its own gang and topology
/// rules. Fields of newer Volcano versions are kept as they are.
//
// Volcano is still growing this type, so fields Caldera does not know go to `extra` and the CRD
// preserves them (`x-kubernetes-preserve-unknown-fields`) instead of pruning them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubGroupPolicySpec {
    /// Name of the policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,

    /// Topology constraint for each sub-group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopologySpec>,

    /// Number of pods in each sub-group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_group_size: Option<i32>,

    /// How many sub-groups must fit before any is scheduled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_sub_groups: Option<i32>,

    /// Selects the pods this policy applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,

    /// Label keys whose values split the selected pods into sub-groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_label_keys: Option<Vec<String>>,

    /// Fields of newer Volcano versions, kept verbatim.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Whether a [`TopologySpec`] must hold or is only preferred.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TopologyMode {
    /// No placement outside a single domain.
    Required,
    /// Use as few domains as possible.
    Preferred,
}

/// Caldera extension: keep the gang within one domain of a node label.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopologySpec {
    /// `required` (one domain or nothing) or `preferred` (fewest domains).
    pub mode: TopologyMode,
    /// Node label whose value names the domain, e.g. `kubernetes.io/hostname`.
    #[schemars(length(min = 1))]
    pub key: String,
}

string_enum! {
    /// Phase of a PodGroup, written by the scheduler.
    pub enum PodGroupPhase {
        /// Not yet admitted by its queue.
        Pending = "Pending",
        /// Admitted: members may compete for nodes.
        Inqueue = "Inqueue",
        /// At least `minMember` members are scheduled.
        Running = "Running",
        /// Every member has finished.
        Completed = "Completed",
        /// Some members run but the rest cannot be scheduled.
        Unknown = "Unknown",
    }
    schema_enum = false;
}

string_enum! {
    /// Type of a PodGroup condition.
    pub enum PodGroupConditionType {
        /// The gang was placed.
        Scheduled = "Scheduled",
        /// The gang could not be placed; the reason says why.
        Unschedulable = "Unschedulable",
    }
    schema_enum = false;
}

string_enum! {
    /// Status of a condition, as in Kubernetes' `ConditionStatus`.
    pub enum ConditionStatus {
        /// The condition holds.
        True = "True",
        /// The condition does not hold.
        False = "False",
        /// Not known.
        Unknown = "Unknown",
    }
    schema_enum = false;
}

/// Observed state of a PodGroup. Written by Caldera only, through the status subresource.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupStatus {
    /// Current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<PodGroupPhase>,

    /// Conditions (`Scheduled`, `Unschedulable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<PodGroupCondition>>,

    /// Members running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<i32>,

    /// Members that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,

    /// Members that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
}

/// One condition of a PodGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodGroupCondition {
    /// `Scheduled` or `Unschedulable`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<PodGroupConditionType>,

    /// `True`, `False` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConditionStatus>,

    /// Volcano's ID of the transition.
    #[serde(
        rename = "transitionID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub transition_id: Option<String>,

    /// When the condition last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,

    /// One-word CamelCase reason, e.g. `NotEnoughResources` (constants in `caldera_api::reason`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,

    /// Human-readable detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
