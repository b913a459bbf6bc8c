//! Resources, quantities, nodes, tasks, jobs, queues, the snapshot and the plan: the pure
//! domain model.
//!
//! Nothing here does I/O, reads a clock or depends on Kubernetes client crates; the `cache`
//! crate converts Kubernetes objects into these values.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capacity;
pub mod check;
pub mod consolidation;
pub mod dra;
pub mod interpod;
pub mod job;
pub mod node;
pub mod plan;
pub mod quantity;
pub mod queue;
pub mod resources;
pub mod selector;
pub mod snapshot;
pub mod task;
pub mod time;
pub mod topology;
pub mod volume;

pub use capacity::{
    request_name, CapacityNeed, CapacityRelease, CapacityRequest, CapacityState, ConsumingPod,
    PodSetNeed, ProvisioningPolicy,
};
pub use consolidation::{Controller, MoveHold, MoveHoldWrite, HOLDS_ANNOTATION, NO_CONSOLIDATE};
pub use dra::{
    AllocatedConfig, Allocation, AllocationMode, AttributeValue, Capacity, CapacityRange, Claim,
    ClaimWrite, ConfigSource, ConstraintKind, Consumer, CounterConsumption, CounterSet, Device,
    DeviceClass, DeviceConfig, DeviceConstraint, DeviceInventory, DeviceNodes, DeviceRequest,
    DeviceResult, ExactRequest, ExtendedRequest, ExtendedResourceClaim, PodClaim, RequestKind,
    RequestMapping, RequestPolicy, SubRequest, TaskClaims, UnusablePool,
};
pub use interpod::{
    LabelSelector, Labels, Namespaces, PlacedPod, PodAffinityTerm, PodConstraints,
    SpreadConstraint, HARD_POD_AFFINITY_WEIGHT, HOSTNAME,
};
pub use job::{
    Condition, Job, NativeCondition, NativeGroup, PodGroupPhase, PodGroupStatus,
    MIN_RUNTIME_ANNOTATION, NATIVE_SCHEDULED,
};
pub use node::Node;
pub use plan::{
    Bind, Event, EventObject, Eviction, Nomination, ObjectRef, Plan, PodConditionUpdate,
    PodFailure, PodGroupStatusUpdate, QueueStatusUpdate,
};
pub use quantity::{parse_quantity, QuantityError, Scale};
pub use queue::{Queue, QueueStatus, QueueUsage, USAGE_SCALE};
pub use resources::{overcommit_allowed, Resources, CPU, EPHEMERAL_STORAGE, MEMORY, PODS};
pub use selector::{
    HostPort, Requirement, SelectorOp, SelectorTerm, Taint, TaintEffect, Toleration,
};
pub use snapshot::{Budget, Snapshot, WaitingPod};
pub use task::{PendingReason, PlacementSpec, Task, TaskStatus};
pub use time::Time;
pub use topology::{
    split_sub_groups, Domain, SubGroup, SubGroupPolicy, TierLimit, Topology, TopologySource,
    TopologyTree,
};
pub use volume::{
    ClaimNeed, NodeAttach, TaskVolumes, Volume, VolumeCatalog, VolumeNeeds, VolumeWrite,
};
