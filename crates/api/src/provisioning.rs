//! ProvisioningRequest (`autoscaling.x-k8s.io/v1`): cluster-autoscaler's all-or-nothing
//! scale-up API, which Caldera creates for gangs that lack nodes (docs/autoscaler.md).
//!
//! The CRD belongs to cluster-autoscaler, not to Caldera: it is not in `crds/` and
//! `caldera crd` does not print it. [`provisioning_request_crd`] gives a definition with the
//! same group, names and fields for test clusters and the API stand-in.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group.
pub const PROVISIONING_GROUP: &str = "autoscaling.x-k8s.io";
/// The version Caldera speaks.
pub const PROVISIONING_VERSION: &str = "v1";
/// The resource (plural).
pub const PROVISIONING_PLURAL: &str = "provisioningrequests";

/// cluster-autoscaler's class that adds all the capacity of a request or none of it.
pub const CLASS_BEST_EFFORT_ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
/// cluster-autoscaler's class that only checks (and books) capacity that already exists.
pub const CLASS_CHECK_CAPACITY: &str = "check-capacity.autoscaling.x-k8s.io";

/// Pod annotation: the name of the ProvisioningRequest (same namespace) the pod consumes;
/// cluster-autoscaler then does not scale up for the pod on its own.
pub const ANNOTATION_CONSUME_PROVISIONING_REQUEST: &str =
    "autoscaling.x-k8s.io/consume-provisioning-request";
/// Pod annotation: the class of the request the pod consumes.
pub const ANNOTATION_PROVISIONING_CLASS: &str = "autoscaling.x-k8s.io/provisioning-class-name";

/// Condition types of a request's status, as cluster-autoscaler writes them.
pub mod condition {
    /// The autoscaler took the request on and will try to provision it.
    pub const ACCEPTED: &str = "Accepted";
    /// All the requested capacity exists and is booked for the request.
    pub const PROVISIONED: &str = "Provisioned";
    /// The capacity cannot be obtained.
    pub const FAILED: &str = "Failed";
    /// It was provisioned, and the booking ran out before pods used it.
    pub const BOOKING_EXPIRED: &str = "BookingExpired";
    /// The capacity is no longer valid.
    pub const CAPACITY_REVOKED: &str = "CapacityRevoked";
}

/// What capacity to provision: groups of pods, each described by a PodTemplate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "autoscaling.x-k8s.io",
    version = "v1",
    kind = "ProvisioningRequest",
    plural = "provisioningrequests",
    singular = "provisioningrequest",
    shortname = "provreq",
    shortname = "provreqs",
    namespaced,
    status = "ProvisioningRequestStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "ProvisioningRequest asks the cluster autoscaler for capacity for a set of pods, all or nothing."
)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestSpec {
    /// Groups of pods to provision for (1 to 32); immutable.
    pub pod_sets: Vec<PodSet>,
    /// How to provision (e.g. [`CLASS_BEST_EFFORT_ATOMIC`]); immutable.
    pub provisioning_class_name: String,
    /// Class parameters (string values of at most 255 characters); immutable.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// One group of identical pods.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// The PodTemplate (same namespace) describing the pods.
    pub pod_template_ref: Reference,
    /// How many such pods (at least 1).
    pub count: i32,
}

/// A reference to an object in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Reference {
    /// The object's name.
    #[serde(default)]
    pub name: String,
}

/// What the autoscaler reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestStatus {
    /// `Accepted`, `Provisioned`, `Failed`, `BookingExpired`, `CapacityRevoked` (see
    /// [`condition`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Class-specific details.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub provisioning_class_details: BTreeMap<String, String>,
}

impl ProvisioningRequest {
    /// The condition of `type_` when its status is `True`.
    pub fn true_condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    }
}

/// A CustomResourceDefinition for ProvisioningRequest with cluster-autoscaler's group, names
/// and fields, for test clusters and the API stand-in (real clusters install the autoscaler's
/// own).
pub fn provisioning_request_crd() -> CustomResourceDefinition {
    let mut crd = ProvisioningRequest::crd();
    // A structural schema, as kube-apiserver requires of a CRD.
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|v| v.open_api_v3_schema.as_mut())
        {
            crate::schema::normalize(schema);
        }
    }
    crd
}
