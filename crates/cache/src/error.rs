//! The conversion error: which object, which field, and what is wrong with it.

use caldera_model::QuantityError;
use std::fmt;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The kind of object a conversion failed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// `v1` Pod.
    Pod,
    /// `v1` Node.
    Node,
    /// `scheduling.volcano.sh/v1beta1` PodGroup.
    PodGroup,
    /// `scheduling.volcano.sh/v1beta1` Queue.
    Queue,
    /// `scheduling.k8s.io/v1` PriorityClass.
    PriorityClass,
    /// `v1` PersistentVolume.
    PersistentVolume,
    /// `v1` PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// `storage.k8s.io/v1` StorageClass.
    StorageClass,
    /// `storage.k8s.io/v1` CSINode.
    CsiNode,
    /// `topology.volcano.sh/v1alpha1` HyperNode.
    HyperNode,
    /// `scheduling.k8s.io/v1alpha2` PodGroup (Kubernetes' own).
    NativePodGroup,
    /// `resource.k8s.io/v1` DeviceClass.
    DeviceClass,
    /// `resource.k8s.io/v1` ResourceSlice.
    ResourceSlice,
    /// `resource.k8s.io/v1` ResourceClaim.
    ResourceClaim,
    /// `resource.k8s.io/v1` ResourceClaimTemplate.
    ResourceClaimTemplate,
    /// `v1` Namespace.
    Namespace,
    /// `policy/v1` PodDisruptionBudget.
    PodDisruptionBudget,
    /// `batch/v1` Job.
    Job,
    /// `jobset.x-k8s.io` JobSet.
    JobSet,
    /// `leaderworkerset.x-k8s.io` LeaderWorkerSet.
    LeaderWorkerSet,
    /// `apps/v1` ReplicaSet.
    ReplicaSet,
    /// `apps/v1` Deployment.
    Deployment,
    /// `scheduling.k8s.io/v1alpha2` Workload.
    Workload,
}

impl ObjectKind {
    /// Lower-case name as it appears in messages (`pod`, `podgroup`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pod => "pod",
            Self::Node => "node",
            Self::PodGroup => "podgroup",
            Self::Queue => "queue",
            Self::PriorityClass => "priorityclass",
            Self::PersistentVolume => "persistentvolume",
            Self::PersistentVolumeClaim => "persistentvolumeclaim",
            Self::StorageClass => "storageclass",
            Self::CsiNode => "csinode",
            Self::HyperNode => "hypernode",
            Self::NativePodGroup => "podgroup.scheduling.k8s.io",
            Self::DeviceClass => "deviceclass",
            Self::ResourceSlice => "resourceslice",
            Self::ResourceClaim => "resourceclaim",
            Self::ResourceClaimTemplate => "resourceclaimtemplate",
            Self::Namespace => "namespace",
            Self::PodDisruptionBudget => "poddisruptionbudget",
            Self::Job => "job",
            Self::JobSet => "jobset",
            Self::LeaderWorkerSet => "leaderworkerset",
            Self::ReplicaSet => "replicaset",
            Self::Deployment => "deployment",
            Self::Workload => "workload",
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is wrong with a field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A quantity Kubernetes would reject.
    #[error(transparent)]
    Quantity(#[from] QuantityError),
    /// A value outside a fixed set (an operator, a taint effect).
    #[error("unknown value {value:?}, expected one of {expected}")]
    UnknownValue {
        /// The value found.
        value: String,
        /// The accepted values, comma-separated.
        expected: &'static str,
    },
    /// A required field is missing or empty.
    #[error("missing")]
    Missing,
    /// A value that breaks a rule of the field (a bad pattern, a negative tier).
    #[error("{0}")]
    Invalid(String),
}

/// An object that cannot be converted, naming the object and the field.
///
/// Displays as `pod default/x: spec.containers[0].resources.requests.cpu: invalid quantity
/// "abc": unknown suffix`. Not worth retrying: the same object converts the same way; the
/// index drops it until a corrected version arrives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {object}: {field}: {problem}")]
pub struct Error {
    /// Kind of the object.
    pub kind: ObjectKind,
    /// `namespace/name` (or `name` for cluster-scoped kinds).
    pub object: String,
    /// Path of the offending field, e.g. `spec.containers[0].resources.requests.cpu`.
    pub field: String,
    /// What is wrong.
    pub problem: Problem,
}
