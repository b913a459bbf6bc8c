//! HyperNode (`topology.volcano.sh/v1alpha1`, cluster-scoped): a network domain of nodes or of
//! other HyperNodes (a rack, a spine, an NVLink domain).
//!
//! Field for field compatible with Volcano's `HyperNode`, so Volcano manifests apply unchanged.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::string_enum::string_enum;

/// Spec of a HyperNode: its tier and members.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
// Several `printcolumn(...)` share `type_ = "string"`, which clippy mistakes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[kube(
    group = "topology.volcano.sh",
    version = "v1alpha1",
    kind = "HyperNode",
    plural = "hypernodes",
    singular = "hypernode",
    shortname = "hn",
    status = "HyperNodeStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "HyperNode represents a collection of nodes sharing similar network topology or performance characteristics.",
    printcolumn(name = "Tier", type_ = "string", json_path = ".spec.tier"),
    printcolumn(name = "TierName", type_ = "string", json_path = ".spec.tierName"),
    printcolumn(name = "NodeCount", type_ = "integer", json_path = ".status.nodeCount"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeSpec {
    /// Tier of the HyperNode: 1 is closest to the nodes.
    #[schemars(range(min = 0))]
    pub tier: i64,

    /// Name of the tier (`highestTierName` of a PodGroup refers to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub tier_name: Option<String>,

    /// Nodes or HyperNodes included in the HyperNode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub members: Vec<MemberSpec>,
}

string_enum! {
    /// What a member selects.
    pub enum MemberType {
        /// Nodes.
        Node = "Node",
        /// Another HyperNode (by exact name).
        HyperNode = "HyperNode",
    }
    schema_enum = true;
}

/// A node or a HyperNode member.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSpec {
    /// `Node` or `HyperNode`.
    #[serde(rename = "type")]
    pub type_: MemberType,

    /// How members are selected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "Either ExactMatch or RegexMatch or LabelMatch must be specified",
         "rule": "has(self.exactMatch) || has(self.regexMatch) || has(self.labelMatch)"},
        {"message": "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
         "rule": "(has(self.exactMatch) ? 1 : 0) + (has(self.regexMatch) ? 1 : 0) + (has(self.labelMatch) ? 1 : 0) <= 1"}
    ]))]
    pub selector: Option<MemberSelector>,
}

/// Selection rule of a member: exactly one of the three.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberSelector {
    /// A node or HyperNode by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_match: Option<ExactMatch>,

    /// Nodes whose name the pattern matches anywhere (Go's `regexp.MatchString`: unanchored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex_match: Option<RegexMatch>,

    /// Nodes whose labels match (only for `type: Node`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_match: Option<LabelSelector>,
}

/// An exact name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ExactMatch {
    /// The name of the node or HyperNode.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
}

/// A regular expression over node names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RegexMatch {
    /// The pattern (RE2 syntax, unanchored).
    #[schemars(length(min = 1))]
    pub pattern: String,
}

/// Observed state of a HyperNode.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HyperNodeStatus {
    /// Details about the current state of the HyperNode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,

    /// Number of nodes currently in the HyperNode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub node_count: Option<i64>,
}
