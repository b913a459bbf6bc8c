//! Volcano-compatible CRD types: PodGroup and Queue in scheduling.volcano.sh/v1beta1, HyperNode
//! in topology.volcano.sh/v1alpha1.
//!
//! The types mirror Volcano's `v1beta1` API field for field, with every field optional so that
//! any object round-trips without loss; getters such as [`PodGroupSpec::min_member`] apply the
//! defaults. [`crds`] and [`crds_yaml`] give the CustomResourceDefinitions that `caldera crd`
//! prints and `crds/` holds. This crate has no client and no async runtime.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod calls;
#[macro_use]
mod null_spec;
mod crd;
mod hypernode;
mod podgroup;
mod provisioning;
mod queue;
mod schema;
mod string_enum;
#[cfg(test)]
mod structural_tests;
pub mod validation;
mod well_known;

pub use crd::{crds, crds_yaml, Error, Result};
pub use hypernode::{
    ExactMatch, HyperNode, HyperNodeSpec, HyperNodeStatus, MemberSelector, MemberSpec, MemberType,
    RegexMatch,
};
pub use podgroup::{
    ConditionStatus, NetworkTopologyMode, NetworkTopologySpec, PodGroup, PodGroupCondition,
    PodGroupConditionType, PodGroupPhase, PodGroupSpec, PodGroupStatus, SubGroupPolicySpec,
    TopologyMode, TopologySpec,
};
pub use provisioning::{
    condition as provisioning_condition, provisioning_request_crd, PodSet, ProvisioningRequest,
    ProvisioningRequestSpec, ProvisioningRequestStatus, Reference,
    ANNOTATION_CONSUME_PROVISIONING_REQUEST, ANNOTATION_PROVISIONING_CLASS,
    CLASS_BEST_EFFORT_ATOMIC, CLASS_CHECK_CAPACITY, PROVISIONING_GROUP, PROVISIONING_PLURAL,
    PROVISIONING_VERSION,
};
pub use queue::{
    Affinity, Cluster, DequeueStrategy, Guarantee, NodeGroupAffinity, Queue, QueueCondition,
    QueueSpec, QueueState, QueueStatus, QueueUsage, Reservation,
};
pub use well_known::*;
