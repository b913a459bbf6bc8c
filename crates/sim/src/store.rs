//! The in-memory object store: behaves like the API server for what the scheduler can see.
//!
//! - Create fills defaults as the API server and its admission plugins would: namespace
//!   `default`, a uid (deterministic, from a counter), `creationTimestamp` = the virtual
//!   clock, pod `schedulerName: default-scheduler`, container requests from limits, pod
//!   `spec.priority` from its PriorityClass (or the global default), pod phase `Pending`.
//! - Apply of an existing object is an update: metadata and spec are replaced (uid and
//!   creation time kept; a pod keeps its `spec.nodeName` unless the new spec sets one, as
//!   `kubectl apply` would); status is kept unless the new object gives one.
//! - Binds set `spec.nodeName` and `PodScheduled=True`; status writes replace status only.
//! - Pod admission sets `spec.priority` and `spec.preemptionPolicy` from the pod's
//!   PriorityClass (or the global default), as the Priority admission plugin does.
//! - A scheduler's eviction (`pods/eviction`) is judged against the PodDisruptionBudgets as
//!   kube-apiserver judges it ([`caldera_actors::disruption`]); an evicted bound pod gets
//!   `DisruptionTarget` and stays, terminating, for its grace period, and [`Store::kubelet`]
//!   removes it once its `deletionTimestamp` has passed ([`caldera_actors::kubelet`]).
//! - PodDisruptionBudgets carry the status the disruption controller would compute, refreshed
//!   after every write.
//! - PersistentVolumes and PersistentVolumeClaims are created as kube-apiserver creates them
//!   (status dropped, phase `Pending`, the DefaultStorageClass admission plugin,
//!   [`caldera_actors::pv_controller::admit_claim`]); an apply keeps what controllers and
//!   schedulers wrote (annotations, `volumeName`, `claimRef`, status), as `kubectl apply`'s merge
//!   does. After every write to a claim, a volume or a StorageClass the PV controller runs
//!   ([`caldera_actors::pv_controller::sync`]) and its writes land at once.
//!
//! - kube-controller-manager's StatefulSet controller runs for the StatefulSets given
//!   ([`Store::add_statefulset`], plain manifests only) at every session, and its ephemeral
//!   volume controller makes the claims of a pod's generic ephemeral volumes when the pod is
//!   created ([`caldera_actors::statefulset`]).
//! - Its Job controller runs for every `batch/v1` Job at every session and right after the
//!   Job is applied ([`caldera_actors::job`]); deleting a Job deletes, as the garbage collector
//!   does with `kubectl delete`'s background propagation, the pods (gracefully) and the
//!   PodGroups it owns.
//! - Its ReplicaSet and Deployment controllers run for every `apps/v1` ReplicaSet and
//!   Deployment at every session and right after one is applied
//!   ([`caldera_actors::replicaset`]): a ReplicaSet keeps `replicas` active pods (a terminating
//!   one is replaced at once), adopts matching orphans; a Deployment runs the ReplicaSet of its
//!   template. Deleting either deletes, as the garbage collector does in the background, its
//!   ReplicaSets and their pods (gracefully).
//!
//! Every write goes through to a [`ClusterIndex`], the same index the live scheduler keeps,
//! so a snapshot here is built exactly as it is in a cluster.

use crate::manifest::{Kind, Object};
use caldera_actors::disruption::{self, Eviction};
use caldera_actors::kubelet::{self, Deletion};
use caldera_actors::pv_controller;
use caldera_actors::statefulset;
use caldera_api::{HyperNode, PodGroup, ProvisioningRequest, Queue};
use caldera_cache::derive::Workload;
use caldera_cache::workload::DerivedWrite;
use caldera_cache::{ClusterIndex, SnapshotOptions};
use caldera_model::{CapacityNeed, ConsumingPod};
use caldera_model::{Snapshot, Time};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::PodTemplate;
use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, PodCondition, PodStatus};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha2::{
    PodGroup as NativePodGroup, Workload as NativeWorkload,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as KubeTime};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// Converts a model time to a Kubernetes timestamp (`None` only for times outside the years
/// -9999..=9999, which a virtual clock starting in 2026 never reaches).
pub fn kube_time(t: Time) -> Option<KubeTime> {
    k8s_openapi::jiff::Timestamp::from_millisecond(t.0)
        .ok()
        .map(KubeTime)
}

/// What an apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// A new object.
    Created,
    /// An existing object changed.
    Updated,
    /// An existing object, already equal.
    Unchanged,
}

/// Why a bind did not land (the API server would answer 409 or 404).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// No such pod.
    #[error("pod {0} not found")]
    NotFound(String),
    /// The pod was re-created under the same name since the snapshot.
    #[error("pod {0} has another uid")]
    UidMismatch(String),
    /// A release of a pod that does not carry the gate (already released).
    #[error("pod {0} does not carry the gate scheduling.caldera.sh/gang")]
    NotGated(String),
    /// Already bound.
    #[error("pod {pod} is already bound to {node}")]
    AlreadyBound {
        /// The pod.
        pod: String,
        /// Its node.
        node: String,
    },
}

/// A native PodGroup seen as a Volcano one, for what reads both alike (expectations, reports,
/// invariants): `minMember` is `gang.minCount` (1 for `basic`), the queue the one it names,
/// the conditions its own (`PodGroupScheduled`), and the phase `Running` once that condition
/// is `True`, else `Pending` (the native API has no phase).
pub fn native_view(n: &NativePodGroup) -> PodGroup {
    let converted = caldera_cache::native::podgroup(n).ok();
    let min_member = converted.as_ref().map_or(1, |c| c.group.min_member) as i32;
    let conditions: Vec<caldera_api::PodGroupCondition> = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| caldera_api::PodGroupCondition {
            type_: Some(caldera_api::PodGroupConditionType::from(c.type_.as_str())),
            status: Some(caldera_api::ConditionStatus::from(c.status.as_str())),
            transition_id: None,
            last_transition_time: Some(c.last_transition_time.clone()),
            reason: Some(c.reason.clone()).filter(|r| !r.is_empty()),
            message: Some(c.message.clone()).filter(|m| !m.is_empty()),
        })
        .collect();
    let scheduled = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == caldera_model::NATIVE_SCHEDULED && c.status == "True");
    let mut pg = PodGroup::new(
        n.metadata.name.as_deref().unwrap_or_default(),
        caldera_api::PodGroupSpec {
            min_member: Some(min_member),
            queue: converted.and_then(|c| c.own_queue).map(|q| q.to_string()),
            ..Default::default()
        },
    );
    pg.metadata = n.metadata.clone();
    pg.status = Some(caldera_api::PodGroupStatus {
        phase: Some(caldera_api::PodGroupPhase::from(if scheduled {
            "Running"
        } else {
            "Pending"
        })),
        conditions: Some(conditions),
        ..Default::default()
    });
    pg
}

/// Why an eviction did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvictError {
    /// No such pod (404), or it was re-created under the same name.
    #[error("pod {0} not found")]
    NotFound(String),
    /// A PodDisruptionBudget refused it (429, or 500/403 for a broken budget).
    #[error("Cannot evict pod as it would violate the pod's disruption budget: {0}")]
    Refused(String),
}

type Key = (String, String);

/// The objects of namespace `ns` in a map keyed by (namespace, name), by name.
fn in_namespace<'a, T>(objects: &'a BTreeMap<Key, T>, ns: &str) -> Vec<&'a T> {
    objects
        .range((ns.to_string(), String::new())..)
        .take_while(|((n, _), _)| n == ns)
        .map(|(_, o)| o)
        .collect()
}

/// The objects of a simulated cluster.
#[derive(Debug, Default)]
pub struct Store {
    namespaces: BTreeMap<String, Namespace>,
    priority_classes: BTreeMap<String, PriorityClass>,
    queues: BTreeMap<String, Queue>,
    hypernodes: BTreeMap<String, HyperNode>,
    nodes: BTreeMap<String, Node>,
    podgroups: BTreeMap<Key, PodGroup>,
    pods: BTreeMap<Key, Pod>,
    budgets: BTreeMap<Key, PodDisruptionBudget>,
    index: ClusterIndex,
    next_uid: u64,
    /// Every uid given out (or kept from a manifest), so none is given twice.
    uids: BTreeSet<String>,
    generation: u64,
    gate_admission: GateAdmission,
    requests: BTreeMap<Key, ProvisioningRequest>,
    pod_templates: BTreeMap<Key, PodTemplate>,
    /// Requests ever created per PodGroup `namespace/name`.
    requests_created: BTreeMap<String, usize>,
    claims: BTreeMap<Key, PersistentVolumeClaim>,
    volumes: BTreeMap<String, PersistentVolume>,
    storage_classes: BTreeMap<String, StorageClass>,
    csinodes: BTreeMap<String, CSINode>,
    device_classes: BTreeMap<String, DeviceClass>,
    resource_slices: BTreeMap<String, ResourceSlice>,
    resource_claims: BTreeMap<Key, ResourceClaim>,
    claim_templates: BTreeMap<Key, ResourceClaimTemplate>,
    statefulsets: BTreeMap<Key, StatefulSet>,
    jobs: BTreeMap<Key, Job>,
    native_podgroups: BTreeMap<Key, NativePodGroup>,
    native_workloads: BTreeMap<Key, NativeWorkload>,
    /// JobSets and LeaderWorkerSets (their controllers are played: [`caldera_actors::jobset`],
    /// [`caldera_actors::lws`]).
    workloads: BTreeMap<(Kind, String, String), Workload>,
    replicasets: BTreeMap<Key, ReplicaSet>,
    deployments: BTreeMap<Key, Deployment>,
}

/// What the store does with Caldera's gate on pods being created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GateAdmission {
    /// Nothing: pods are stored as given.
    #[default]
    Off,
    /// The gate-mode admission policy: grouped pods of `default-scheduler` get the gate.
    Add,
    /// A cluster without gate mode, for comparisons: the gate is dropped from pods that name
    /// it, so kube-scheduler alone places them.
    Strip,
}

fn ns_of(meta: &ObjectMeta) -> String {
    meta.namespace
        .clone()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// A kind the store keeps in a map of its own: its key, what an apply keeps of the stored
/// object, and its entry in the scheduler's index. [`Store::upsert`], [`Store::put`] and
/// [`Store::remove`] apply, store and delete every kind through these.
trait Kept: Clone + PartialEq + Sized {
    /// `name`, or `(namespace, name)` for a namespaced kind.
    type Key: KeyOf;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    fn map(store: &Store) -> &BTreeMap<Self::Key, Self>;
    fn map_mut(store: &mut Store) -> &mut BTreeMap<Self::Key, Self>;
    /// An update: what the applied object takes from the stored one, besides the server-owned
    /// metadata (status a controller owns, fields a controller or scheduler wrote).
    fn keep(&mut self, _old: &Self) {}
    /// A create: what kube-apiserver drops or defaults.
    fn create(&mut self, _now: Time) {}
    /// Shows the object to the index; refused when the scheduler's conversion fails. Storage
    /// objects are indexed all together instead ([`Store::pv_controller`]).
    fn index(&self, _index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
        Ok(())
    }
    /// Takes the object out of the index.
    fn unindex(_key: &Self::Key, _index: &mut ClusterIndex) {}
}

/// The key of a stored object: its name, or its namespace (`default` when unset) and name.
trait KeyOf: Ord + Clone {
    const NAMESPACED: bool;
    fn of(meta: &ObjectMeta) -> Self;
    fn at(namespace: &str, name: &str) -> Self;
}

impl KeyOf for String {
    const NAMESPACED: bool = false;
    fn of(meta: &ObjectMeta) -> Self {
        name_of(meta)
    }
    fn at(_: &str, name: &str) -> Self {
        name.to_string()
    }
}

impl KeyOf for Key {
    const NAMESPACED: bool = true;
    fn of(meta: &ObjectMeta) -> Self {
        (ns_of(meta), name_of(meta))
    }
    fn at(namespace: &str, name: &str) -> Self {
        (namespace.to_string(), name.to_string())
    }
}

/// `impl Kept for $kind`, stored in `Store::$map` under `$key`, with the given overrides.
macro_rules! kept {
    ($kind:ty, $map:ident, $key:ty $(; $($body:tt)*)?) => {
        impl Kept for $kind {
            type Key = $key;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn map(store: &Store) -> &BTreeMap<$key, Self> {
                &store.$map
            }
            fn map_mut(store: &mut Store) -> &mut BTreeMap<$key, Self> {
                &mut store.$map
            }
            $($($body)*)?
        }
    };
}

/// [`Kept::keep`] for a status that an apply without one leaves as it is.
macro_rules! status_kept_unless_given {
    () => {
        fn keep(&mut self, old: &Self) {
            if self.status.is_none() {
                self.status = old.status.clone();
            }
        }
    };
}

/// [`Kept::keep`] and [`Kept::create`] for a status only its controller writes (a status
/// subresource): an apply keeps the stored one, a create starts with none.
macro_rules! status_of_the_controller {
    () => {
        fn keep(&mut self, old: &Self) {
            self.status = old.status.clone();
        }
        fn create(&mut self, _now: Time) {
            self.status = None;
        }
    };
}

/// [`Kept::index`] and [`Kept::unindex`] through the index's `$apply` (fallible unless marked
/// `infallible`) and `$delete` (by name, or by namespace and name).
macro_rules! indexed {
    (infallible $apply:ident, $($delete:tt)*) => {
        fn index(&self, index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
            index.$apply(self);
            Ok(())
        }
        indexed!(@unindex $($delete)*);
    };
    (@unindex $delete:ident(name)) => {
        fn unindex(key: &String, index: &mut ClusterIndex) {
            index.$delete(key);
        }
    };
    (@unindex $delete:ident(namespace, name)) => {
        fn unindex(key: &Key, index: &mut ClusterIndex) {
            index.$delete(&key.0, &key.1);
        }
    };
    ($apply:ident, $($delete:tt)*) => {
        fn index(&self, index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
            index.$apply(self)
        }
        indexed!(@unindex $($delete)*);
    };
}

kept!(Namespace, namespaces, String;
    status_kept_unless_given!();
    indexed!(infallible apply_namespace, delete_namespace(name)););
kept!(PriorityClass, priority_classes, String;
    indexed!(apply_priority_class, delete_priority_class(name)););
kept!(Queue, queues, String;
    status_kept_unless_given!();
    indexed!(apply_queue, delete_queue(name)););
kept!(HyperNode, hypernodes, String;
    status_kept_unless_given!();
    indexed!(apply_hypernode, delete_hypernode(name)););
kept!(Node, nodes, String;
    status_kept_unless_given!();
    indexed!(apply_node, delete_node(name)););
kept!(PodGroup, podgroups, Key;
    status_kept_unless_given!();
    indexed!(apply_podgroup, delete_podgroup(namespace, name)););
kept!(Pod, pods, Key; indexed!(apply_pod, delete_pod(namespace, name)););
kept!(NativePodGroup, native_podgroups, Key;
    status_kept_unless_given!();
    indexed!(apply_native_podgroup, delete_native_podgroup(namespace, name)););
kept!(NativeWorkload, native_workloads, Key;
    indexed!(infallible apply_native_workload, delete_native_workload(namespace, name)););
kept!(Job, jobs, Key;
    status_of_the_controller!();
    indexed!(infallible apply_job, delete_job(namespace, name)););
kept!(ReplicaSet, replicasets, Key; status_of_the_controller!(););
kept!(ProvisioningRequest, requests, Key;
    indexed!(infallible apply_provisioning_request, delete_provisioning_request(namespace, name)););
kept!(StorageClass, storage_classes, String);
kept!(StatefulSet, statefulsets, Key);
kept!(CSINode, csinodes, String);
kept!(DeviceClass, device_classes, String;
    indexed!(apply_device_class, delete_device_class(name)););
kept!(ResourceSlice, resource_slices, String;
    indexed!(apply_resource_slice, delete_resource_slice(name)););
kept!(ResourceClaimTemplate, claim_templates, Key;
    indexed!(apply_resource_claim_template, delete_resource_claim_template(namespace, name)););

kept!(Deployment, deployments, Key;
status_of_the_controller!();
// Opted-in Deployments are gangs (docs/workloads.md): the index reads them untyped, as
// the runtime's watch does.
fn index(&self, index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
    if let Some(w) = serde_json::to_value(self)
        .ok()
        .and_then(|v| serde_json::from_value::<Workload>(v).ok())
    {
        index.apply_workload(&w);
    }
    Ok(())
}
fn unindex(key: &Key, index: &mut ClusterIndex) {
    let kind = caldera_cache::derive::WorkloadKind::Deployment;
    index.delete_workload(kind, &key.0, &key.1);
});

kept!(PodDisruptionBudget, budgets, Key;
    // Status belongs to the disruption controller; the generation moves with the spec.
    fn keep(&mut self, old: &Self) {
        let generation = old.metadata.generation.unwrap_or(1);
        self.metadata.generation = Some(generation + i64::from(self.spec != old.spec));
        self.status = old.status.clone();
    }
    fn create(&mut self, _now: Time) {
        self.metadata.generation = Some(1);
        self.status = None;
    }
    indexed!(infallible apply_budget, delete_budget(namespace, name)););

kept!(ResourceClaim, resource_claims, Key;
    // Status is written through the status subresource only; a manifest may give one (a claim
    // allocated before the scenario).
    fn keep(&mut self, old: &Self) {
        if self.metadata.finalizers.is_none() {
            self.metadata.finalizers = old.metadata.finalizers.clone();
        }
        self.status = old.status.clone();
    }
    indexed!(apply_resource_claim, delete_resource_claim(namespace, name)););

kept!(PersistentVolume, volumes, String;
// Status belongs to the PV controller; what it and schedulers wrote stays.
fn keep(&mut self, old: &Self) {
    merge_annotations(&mut self.metadata, &old.metadata);
    let spec = self.spec.get_or_insert_with(Default::default);
    let old_spec = old.spec.clone().unwrap_or_default();
    spec.claim_ref = spec.claim_ref.take().or(old_spec.claim_ref);
    spec.volume_mode = spec.volume_mode.take().or(old_spec.volume_mode);
    spec.persistent_volume_reclaim_policy = spec
        .persistent_volume_reclaim_policy
        .take()
        .or(old_spec.persistent_volume_reclaim_policy);
    self.status = old.status.clone();
}
fn create(&mut self, now: Time) {
    pv_controller::admit_volume(self, now);
});

kept!(PersistentVolumeClaim, claims, Key;
// Status belongs to the PV controller; what it and schedulers wrote stays. A create's
// admission needs the classes: [`Store::apply`] runs it.
fn keep(&mut self, old: &Self) {
    merge_annotations(&mut self.metadata, &old.metadata);
    let spec = self.spec.get_or_insert_with(Default::default);
    let old_spec = old.spec.clone().unwrap_or_default();
    spec.volume_name = spec.volume_name.take().or(old_spec.volume_name);
    spec.storage_class_name = spec.storage_class_name.take().or(old_spec.storage_class_name);
    spec.volume_mode = spec.volume_mode.take().or(old_spec.volume_mode);
    self.status = old.status.clone();
});

impl Store {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// What to do with Caldera's gate on pods created from now on: play the gate-mode
    /// admission policy (`deploy/gate/`, see [`caldera_cache::gate::admit`]), or drop it.
    pub fn set_gate_admission(&mut self, admission: GateAdmission) {
        self.gate_admission = admission;
    }

    /// Bumped by every write that changed something; equal generations mean equal content.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The index kept in step with the objects.
    pub fn index(&self) -> &ClusterIndex {
        &self.index
    }

    /// A snapshot, as the scheduler would take it.
    pub fn snapshot(&self, opts: &SnapshotOptions) -> Snapshot {
        self.index.snapshot(opts)
    }

    /// Pods, by namespace then name.
    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values()
    }

    /// Nodes, by name.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// PodGroups, by namespace then name.
    pub fn podgroups(&self) -> impl Iterator<Item = &PodGroup> {
        self.podgroups.values()
    }

    /// Queues, by name.
    pub fn queues(&self) -> impl Iterator<Item = &Queue> {
        self.queues.values()
    }

    /// HyperNodes, by name.
    pub fn hypernodes(&self) -> impl Iterator<Item = &HyperNode> {
        self.hypernodes.values()
    }

    /// PodDisruptionBudgets, by namespace then name, with their computed status.
    pub fn budgets(&self) -> impl Iterator<Item = &PodDisruptionBudget> {
        self.budgets.values()
    }

    /// PersistentVolumeClaims, by namespace then name.
    pub fn claims(&self) -> impl Iterator<Item = &PersistentVolumeClaim> {
        self.claims.values()
    }

    /// PersistentVolumes, by name.
    pub fn volumes(&self) -> impl Iterator<Item = &PersistentVolume> {
        self.volumes.values()
    }

    /// StorageClasses, by name.
    pub fn storage_classes(&self) -> impl Iterator<Item = &StorageClass> {
        self.storage_classes.values()
    }

    /// CSINodes, by name.
    pub fn csinodes(&self) -> impl Iterator<Item = &CSINode> {
        self.csinodes.values()
    }

    /// Sets a pod's `status.extendedResourceClaimStatus` (the claim made for its extended
    /// resources served by devices, KEP-5004). False when the pod is gone.
    pub fn set_extended_claim_status(
        &mut self,
        namespace: &str,
        name: &str,
        status: k8s_openapi::api::core::v1::PodExtendedResourceClaimStatus,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(pod) = self.pods.get_mut(&key) else {
            return false;
        };
        pod.status
            .get_or_insert_with(Default::default)
            .extended_resource_claim_status = Some(status);
        let _ = self.index.apply_pod(pod);
        self.generation += 1;
        true
    }

    /// DeviceClasses, by name.
    pub fn device_classes(&self) -> impl Iterator<Item = &DeviceClass> {
        self.device_classes.values()
    }

    /// ResourceSlices, by name.
    pub fn resource_slices(&self) -> impl Iterator<Item = &ResourceSlice> {
        self.resource_slices.values()
    }

    /// ResourceClaims, by (namespace, name).
    pub fn resource_claims(&self) -> impl Iterator<Item = &ResourceClaim> {
        self.resource_claims.values()
    }

    /// The ResourceClaim `namespace/name`.
    pub fn resource_claim(&self, namespace: &str, name: &str) -> Option<&ResourceClaim> {
        self.resource_claims
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// ResourceClaimTemplates, by (namespace, name).
    pub fn resource_claim_templates(&self) -> impl Iterator<Item = &ResourceClaimTemplate> {
        self.claim_templates.values()
    }

    /// Stores a ResourceClaim exactly as given, status included (what a status write or the
    /// resource-claim controller leaves), and shows it to the scheduler. Refused, changing
    /// nothing, when the scheduler's conversion rejects it.
    pub fn put_resource_claim(&mut self, claim: ResourceClaim) -> Result<(), caldera_cache::Error> {
        caldera_cache::dra::claim(&claim)?;
        let _ = self.put(claim);
        Ok(())
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims.get(&(namespace.to_string(), name.to_string()))
    }

    /// The volume `name`.
    pub fn volume(&self, name: &str) -> Option<&PersistentVolume> {
        self.volumes.get(name)
    }

    /// The pod `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods.get(&(namespace.to_string(), name.to_string()))
    }

    /// The PodGroup `namespace/name`: Volcano's, else a native one seen as Volcano's
    /// ([`native_view`]), so expectations and reports read both alike.
    pub fn podgroup(&self, namespace: &str, name: &str) -> Option<Cow<'_, PodGroup>> {
        let key = (namespace.to_string(), name.to_string());
        match self.podgroups.get(&key) {
            Some(pg) => Some(Cow::Borrowed(pg)),
            None => self
                .native_podgroups
                .get(&key)
                .map(|n| Cow::Owned(native_view(n))),
        }
    }

    /// Every PodGroup, Volcano's then the native ones (seen as Volcano's, [`native_view`]),
    /// each by namespace then name.
    pub fn all_podgroups(&self) -> impl Iterator<Item = Cow<'_, PodGroup>> {
        self.podgroups.values().map(Cow::Borrowed).chain(
            self.native_podgroups
                .values()
                .map(|n| Cow::Owned(native_view(n))),
        )
    }

    /// Native `scheduling.k8s.io/v1alpha2` PodGroups, by namespace then name.
    pub fn native_podgroups(&self) -> impl Iterator<Item = &NativePodGroup> {
        self.native_podgroups.values()
    }

    /// Native `scheduling.k8s.io/v1alpha2` Workloads, by namespace then name.
    pub fn native_workloads(&self) -> impl Iterator<Item = &NativeWorkload> {
        self.native_workloads.values()
    }

    /// Writes a native PodGroup's `PodGroupScheduled` condition as kube-scheduler would (a
    /// strategic merge by type: other conditions stay), from the model's status. Returns
    /// whether anything changed.
    pub fn set_native_podgroup_status(
        &mut self,
        namespace: &str,
        name: &str,
        status: &caldera_model::PodGroupStatus,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(c) = caldera_model::NativeCondition::of(status) else {
            return false;
        };
        let Some(mut pg) = self.native_podgroups.get(&key).cloned() else {
            return false;
        };
        let condition = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: caldera_model::NATIVE_SCHEDULED.into(),
            status: if c.scheduled { "True" } else { "False" }.into(),
            reason: c.reason.into(),
            message: c.message.clone(),
            last_transition_time: kube_time(c.last_transition)
                .unwrap_or(KubeTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            observed_generation: None,
        };
        let conditions = pg
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new);
        match conditions.iter_mut().find(|x| x.type_ == condition.type_) {
            Some(old) if *old == condition => return false,
            Some(old) => *old = condition,
            None => conditions.push(condition),
        }
        // Converted when stored; a condition written here converts as well.
        let _ = self.put(pg);
        true
    }

    /// The node `name`.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// The queue `name`.
    pub fn queue(&self, name: &str) -> Option<&Queue> {
        self.queues.get(name)
    }

    fn fresh_meta(&mut self, meta: &mut ObjectMeta, namespaced: bool, now: Time) {
        if namespaced {
            meta.namespace = Some(ns_of(meta));
        } else {
            meta.namespace = None;
        }
        // A new object keeps a uid its manifest gives (a `caldera snapshot` keeps the uids, so
        // owner references, e.g. a generic ephemeral claim's to its pod, still point at their
        // owners) unless another object has it; otherwise it gets a fresh one, as from the
        // API server.
        let given = meta
            .uid
            .take()
            .filter(|u| !u.is_empty() && !self.uids.contains(u));
        let uid = given.unwrap_or_else(|| loop {
            self.next_uid += 1;
            let uid = format!("00000000-0000-4000-8000-{:012x}", self.next_uid);
            if !self.uids.contains(&uid) {
                break uid;
            }
        });
        self.uids.insert(uid.clone());
        meta.uid = Some(uid);
        meta.creation_timestamp = kube_time(now);
        meta.resource_version = None;
        meta.generation = None;
    }

    /// Keeps the server-owned fields of `old` in `new`.
    fn keep_meta(new: &mut ObjectMeta, old: &ObjectMeta) {
        new.namespace = old.namespace.clone();
        new.uid = old.uid.clone();
        new.creation_timestamp = old.creation_timestamp.clone();
        if new.deletion_timestamp.is_none() {
            new.deletion_timestamp = old.deletion_timestamp.clone();
        }
    }

    /// Creates or updates an object. Content the scheduler's conversion rejects (a malformed
    /// quantity) or a name or label kube-apiserver refuses is refused, and nothing changes.
    pub fn apply(&mut self, object: Object, now: Time) -> Result<Applied, caldera_cache::Error> {
        crate::manifest::validate(&object)?;
        let applied = match object {
            Object::Namespace(mut o) => {
                // kube-apiserver names every Namespace in a label.
                let name = name_of(&o.metadata);
                o.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .insert(caldera_cache::NAMESPACE_NAME_LABEL.into(), name);
                self.upsert(o, now)?.1
            }
            Object::PriorityClass(o) => self.upsert(o, now)?.1,
            Object::Queue(o) => self.upsert(o, now)?.1,
            Object::HyperNode(o) => self.upsert(o, now)?.1,
            Object::Node(o) => self.upsert(o, now)?.1,
            Object::PodGroup(o) => self.upsert(o, now)?.1,
            Object::Pod(o) => self.apply_pod(o, now)?,
            Object::NativePodGroup(o) => self.upsert(o, now)?.1,
            Object::Workload(o) => self.upsert(o, now)?.1,
            Object::Job(o) => {
                let (key, applied) = self.upsert(o, now)?;
                self.sync_job(&key, now)?;
                applied
            }
            Object::ReplicaSet(o) => {
                let (key, applied) = self.upsert(o, now)?;
                self.sync_replicaset(&key, now)?;
                applied
            }
            Object::Deployment(o) => {
                let (key, applied) = self.upsert(o, now)?;
                self.sync_deployment(&key, now)?;
                applied
            }
            Object::JobSet(o) => self.apply_workload(Kind::JobSet, o, now)?,
            Object::LeaderWorkerSet(o) => self.apply_workload(Kind::LeaderWorkerSet, o, now)?,
            Object::PodDisruptionBudget(o) => self.upsert(o, now)?.1,
            Object::StorageClass(o) => self.upsert(o, now)?.1,
            Object::CSINode(o) => self.upsert(o, now)?.1,
            Object::DeviceClass(o) => self.upsert(o, now)?.1,
            Object::ResourceSlice(o) => self.upsert(o, now)?.1,
            Object::ResourceClaim(o) => self.upsert(o, now)?.1,
            Object::ResourceClaimTemplate(o) => self.upsert(o, now)?.1,
            Object::PersistentVolume(o) => self.upsert(o, now)?.1,
            Object::PersistentVolumeClaim(mut o) => {
                if !self.claims.contains_key(&Key::of(&o.metadata)) {
                    // Created: status dropped, DefaultStorageClass admission.
                    o.status = None;
                    let classes: Vec<StorageClass> =
                        self.storage_classes.values().cloned().collect();
                    pv_controller::admit_claim(&mut o, &classes);
                }
                self.upsert(o, now)?.1
            }
        };
        if applied != Applied::Unchanged {
            self.generation += 1;
            self.refresh_budgets(now);
            self.pv_controller(now);
        }
        Ok(applied)
    }

    /// Creates or updates `o` as kube-apiserver does: an update keeps the server-owned
    /// metadata and what [`Kept::keep`] says, a create gets fresh metadata and
    /// [`Kept::create`]'s defaults; then the index sees it. Refused, changing nothing, when
    /// the index's conversion fails.
    fn upsert<T: Kept>(
        &mut self,
        mut o: T,
        now: Time,
    ) -> Result<(T::Key, Applied), caldera_cache::Error> {
        let key = T::Key::of(o.meta());
        match T::map(self).get(&key) {
            Some(old) => {
                Self::keep_meta(o.meta_mut(), old.meta());
                o.keep(old);
            }
            None => {
                self.fresh_meta(o.meta_mut(), T::Key::NAMESPACED, now);
                o.create(now);
            }
        }
        o.index(&mut self.index)?;
        let applied = replace(T::map_mut(self), key.clone(), o);
        Ok((key, applied))
    }

    /// Stores `o` as it is (a status or controller write, an object read back from a cluster)
    /// and shows it to the index. Stored even when the index refuses it; the refusal is
    /// returned.
    fn put<T: Kept>(&mut self, o: T) -> Result<(), caldera_cache::Error> {
        let indexed = o.index(&mut self.index);
        T::map_mut(self).insert(T::Key::of(o.meta()), o);
        self.generation += 1;
        indexed
    }

    /// Removes `namespace/name` of kind `T` and its index entry. `None` when it did not exist,
    /// else its uid, if it had one.
    fn remove<T: Kept>(&mut self, namespace: &str, name: &str) -> Option<Option<String>> {
        let key = T::Key::at(namespace, name);
        T::unindex(&key, &mut self.index);
        T::map_mut(self).remove(&key).map(|o| o.meta().uid.clone())
    }

    /// [`Store::apply`] of a pod: an update keeps the node, the priority and (when the pod
    /// gives none) the status; a create runs the Priority admission plugin and the gate
    /// admission, and starts `Pending`. A created pod's generic ephemeral volumes get their
    /// claims.
    fn apply_pod(&mut self, mut o: Pod, now: Time) -> Result<Applied, caldera_cache::Error> {
        let key = Key::of(&o.metadata);
        match self.pods.get(&key) {
            Some(old) => {
                Self::keep_meta(&mut o.metadata, &old.metadata);
                let old_spec = old.spec.clone().unwrap_or_default();
                let spec = o.spec.get_or_insert_with(Default::default);
                if spec.node_name.is_none() {
                    spec.node_name = old_spec.node_name;
                }
                if spec.priority.is_none() {
                    spec.priority = old_spec.priority;
                }
                if o.status.is_none() {
                    o.status = old.status.clone();
                }
            }
            None => {
                self.fresh_meta(&mut o.metadata, true, now);
                self.admit_priority(&mut o);
                match self.gate_admission {
                    GateAdmission::Off => {}
                    GateAdmission::Add => {
                        caldera_cache::gate::admit(&mut o);
                    }
                    GateAdmission::Strip => {
                        if let Some(spec) = o.spec.as_mut() {
                            let gates = caldera_cache::gate::gates_without_ours(spec);
                            spec.scheduling_gates = (!gates.is_empty()).then_some(gates);
                        }
                    }
                }
                if o.status.is_none() {
                    o.status = Some(PodStatus {
                        phase: Some("Pending".into()),
                        ..Default::default()
                    });
                }
            }
        }
        default_pod_spec(&mut o);
        self.index.apply_pod(&o)?;
        let ephemeral = statefulset::ephemeral_claims(&o);
        let applied = replace(&mut self.pods, key, o);
        if applied == Applied::Created {
            for claim in ephemeral {
                if !self.claims.contains_key(&Key::of(&claim.metadata)) {
                    self.apply(Object::PersistentVolumeClaim(claim), now)?;
                }
            }
        }
        Ok(applied)
    }

    /// The PV controller: one sync over every claim and volume at `now`, its writes stored at
    /// once ([`pv_controller::sync`]). Run after every write to a claim, a volume or a class.
    pub fn pv_controller(&mut self, now: Time) {
        self.sync_volume_index();
        if self.claims.is_empty() && self.volumes.is_empty() {
            return;
        }
        let claims: Vec<PersistentVolumeClaim> = self.claims.values().cloned().collect();
        let volumes: Vec<PersistentVolume> = self.volumes.values().cloned().collect();
        let classes: Vec<StorageClass> = self.storage_classes.values().cloned().collect();
        let writes = pv_controller::sync(&claims, &volumes, &classes, now);
        if writes.is_empty() {
            return;
        }
        for w in writes {
            match w {
                pv_controller::Write::Claim(c) => {
                    let key = (ns_of(&c.metadata), name_of(&c.metadata));
                    self.claims.insert(key, c);
                }
                pv_controller::Write::Volume(v) => {
                    self.volumes.insert(name_of(&v.metadata), v);
                }
            }
        }
        self.generation += 1;
        self.sync_volume_index();
    }

    /// Feeds the storage objects to the index (the scheduler's view of them). Objects that do
    /// not convert were refused at load (`manifest::validate`); the PV controller's writes
    /// keep them convertible.
    fn sync_volume_index(&mut self) {
        let _ = self.index.reset_claims(self.claims.values());
        let _ = self.index.reset_volumes(self.volumes.values());
        let _ = self
            .index
            .reset_storage_classes(self.storage_classes.values());
        self.index.reset_csinodes(self.csinodes.values());
    }

    /// Stores a storage object (StorageClass, CSINode, PersistentVolume or claim) or a DRA
    /// object (DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate) exactly as
    /// given, status included, without admission and without running the PV controller: a
    /// live cluster's object as read back (its own controller has run). An object of another
    /// kind is given back, untouched.
    pub fn insert_read(&mut self, object: Object) -> Option<Object> {
        let storage = matches!(
            object,
            Object::StorageClass(_)
                | Object::CSINode(_)
                | Object::PersistentVolume(_)
                | Object::PersistentVolumeClaim(_)
        );
        // What the index refuses stays out of the scheduler's view, as it would live.
        let _ = match object {
            Object::DeviceClass(o) => self.put(o),
            Object::ResourceSlice(o) => self.put(o),
            Object::ResourceClaim(o) => self.put(o),
            Object::ResourceClaimTemplate(o) => self.put(o),
            Object::StorageClass(o) => self.put(o),
            Object::CSINode(o) => self.put(o),
            Object::PersistentVolume(o) => self.put(o),
            Object::PersistentVolumeClaim(o) => self.put(o),
            other => return Some(other),
        };
        if storage {
            self.sync_volume_index();
        }
        None
    }

    /// StatefulSets, by namespace then name.
    pub fn statefulsets(&self) -> impl Iterator<Item = &StatefulSet> {
        self.statefulsets.values()
    }

    /// Stores a StatefulSet (create or replace) and runs its controller at once. Returns what
    /// the controller created; a pod or claim the scheduler's conversion rejects is an error
    /// (what was created before it stays).
    pub fn add_statefulset(
        &mut self,
        set: StatefulSet,
        now: Time,
    ) -> Result<statefulset::Created, caldera_cache::Error> {
        let (key, _) = self.upsert(set, now)?;
        self.generation += 1;
        self.sync_statefulset(&key, now)
    }

    fn sync_statefulset(
        &mut self,
        key: &Key,
        now: Time,
    ) -> Result<statefulset::Created, caldera_cache::Error> {
        let Some(set) = self.statefulsets.get(key) else {
            return Ok(statefulset::Created::default());
        };
        let ns = key.0.clone();
        let created = statefulset::sync(
            set,
            &|name| self.pods.get(&(ns.clone(), name.to_string())),
            &|name| self.claims.contains_key(&(ns.clone(), name.to_string())),
        );
        for claim in &created.claims {
            self.apply(Object::PersistentVolumeClaim(claim.clone()), now)?;
        }
        for pod in &created.pods {
            self.apply(Object::Pod(pod.clone()), now)?;
        }
        Ok(created)
    }

    /// The workload controllers: every StatefulSet's controller syncs (an `OrderedReady` set
    /// makes its next pod once the one before is Running and Ready). Returns the pods created
    /// (`namespace/name`); pods the conversion rejects are skipped (they were accepted when the
    /// set was added, from the same template).
    pub fn controllers(&mut self, now: Time) -> Vec<String> {
        let keys: Vec<Key> = self.statefulsets.keys().cloned().collect();
        let mut made = Vec::new();
        let jobs: Vec<Key> = self.jobs.keys().cloned().collect();
        for key in jobs {
            if let Ok(created) = self.sync_job(&key, now) {
                made.extend(created);
            }
        }
        let workloads: Vec<(Kind, String, String)> = self.workloads.keys().cloned().collect();
        for key in workloads {
            if let Ok(created) = self.sync_workload(&key, now) {
                made.extend(created);
            }
        }
        let deployments: Vec<Key> = self.deployments.keys().cloned().collect();
        for key in deployments {
            if let Ok(created) = self.sync_deployment(&key, now) {
                made.extend(created);
            }
        }
        let replicasets: Vec<Key> = self.replicasets.keys().cloned().collect();
        for key in replicasets {
            if let Ok(created) = self.sync_replicaset(&key, now) {
                made.extend(created);
            }
        }
        for key in keys {
            if let Ok(created) = self.sync_statefulset(&key, now) {
                made.extend(
                    created
                        .pods
                        .iter()
                        .map(|p| format!("{}/{}", key.0, name_of(&p.metadata))),
                );
            }
        }
        // The resource-claim controller: after the pods are made, before the session.
        self.sync_resource_claims(now);
        made
    }

    /// Stores a JobSet or LeaderWorkerSet (create or replace; status is its controller's) and
    /// runs its controller at once.
    fn apply_workload(
        &mut self,
        kind: Kind,
        mut o: Workload,
        now: Time,
    ) -> Result<Applied, caldera_cache::Error> {
        let key = (kind, ns_of(&o.metadata), name_of(&o.metadata));
        match self.workloads.get(&key) {
            Some(old) => Self::keep_meta(&mut o.metadata, &old.metadata),
            None => self.fresh_meta(&mut o.metadata, true, now),
        }
        self.index.apply_workload(&o);
        let applied = replace(&mut self.workloads, key.clone(), o);
        self.sync_workload(&key, now)?;
        Ok(applied)
    }

    /// One sync of a JobSet's controller (its missing Jobs, whose pods the Job controller then
    /// makes) or a LeaderWorkerSet's (its missing pods). Returns the pods created
    /// (`namespace/name`).
    fn sync_workload(
        &mut self,
        key: &(Kind, String, String),
        now: Time,
    ) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(w) = self.workloads.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.1.clone();
        let mut made = Vec::new();
        match key.0 {
            Kind::JobSet => {
                let jobs = caldera_actors::jobset::missing_jobs(w, &|name| {
                    self.jobs.contains_key(&(ns.clone(), name.to_string()))
                });
                for job in jobs {
                    let before: BTreeSet<Key> = self.pods.keys().cloned().collect();
                    self.apply(Object::Job(job), now)?;
                    made.extend(
                        self.pods
                            .keys()
                            .filter(|k| !before.contains(*k))
                            .map(|(n, p)| format!("{n}/{p}")),
                    );
                }
            }
            Kind::LeaderWorkerSet => {
                let pods = caldera_actors::lws::missing_pods(w, &|name| {
                    self.pods.contains_key(&(ns.clone(), name.to_string()))
                });
                for pod in pods {
                    made.push(format!("{ns}/{}", name_of(&pod.metadata)));
                    self.apply(Object::Pod(pod), now)?;
                }
            }
            _ => {}
        }
        Ok(made)
    }

    /// The group the pod counts in: its own, or the PodGroup derived from its Job
    /// ([`caldera_cache::workload::member_group`]).
    pub fn group_of(&self, pod: &Pod) -> Option<String> {
        let ns = ns_of(&pod.metadata);
        let native = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.clone())
            .filter(|n| !n.is_empty());
        if native.is_some() {
            return native;
        }
        caldera_cache::workload::member_group(&pod.metadata, |name| {
            let pg = self.podgroups.get(&(ns.clone(), name.to_string()))?;
            caldera_cache::workload::Owner::of(&pg.metadata).map(|o| o.uid.to_string())
        })
    }

    /// `batch/v1` Jobs, by namespace then name.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    /// One sync of the Job controller for the Job `key`: creates its missing pods, deletes
    /// the active pods of a Job that has failed, writes its status. Returns the pods created
    /// (`namespace/name`).
    fn sync_job(&mut self, key: &Key, now: Time) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(job) = self.jobs.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.0.clone();
        let pods: Vec<&Pod> = in_namespace(&self.pods, &ns);
        let out = caldera_actors::job::sync(job, &pods, &|name| {
            self.pods.contains_key(&(ns.clone(), name.to_string()))
        });
        let mut made = Vec::new();
        for pod in out.create {
            made.push(format!("{ns}/{}", name_of(&pod.metadata)));
            self.apply(Object::Pod(pod), now)?;
        }
        for name in &out.delete {
            self.delete_gracefully(&ns, name, now);
        }
        if let Some(job) = self.jobs.get_mut(key) {
            if job.status.as_ref() != Some(&out.status) {
                job.status = Some(out.status);
                self.index.apply_job(job);
                self.generation += 1;
            }
        }
        Ok(made)
    }

    /// kube-controller-manager's resource-claim controller
    /// ([`caldera_actors::resourceclaim`]): the claims of pods' template entries (owned by the
    /// pod, named in its `status.resourceClaimStatuses`), users that are gone or finished
    /// removed from `reservedFor`, a claim that lost its last user deallocated (allocation and
    /// delete-protection finalizer gone), and the claims of pods that are done or gone deleted
    /// (the garbage collector's part). Returns whether anything changed.
    fn sync_resource_claims(&mut self, now: Time) -> bool {
        if self.resource_claims.is_empty() && self.claim_templates.is_empty() {
            return false;
        }
        let out = {
            let pods: Vec<&Pod> = self.pods.values().collect();
            let claims: Vec<&ResourceClaim> = self.resource_claims.values().collect();
            let templates: Vec<&ResourceClaimTemplate> = self.claim_templates.values().collect();
            caldera_actors::resourceclaim::sync(&pods, &claims, &templates, &|ns, name| {
                self.resource_claims
                    .contains_key(&(ns.to_string(), name.to_string()))
            })
        };
        let changed = !out.is_empty();
        for claim in out.create {
            // Made from a template the conversion accepted; a refusal leaves the pod waiting.
            let _ = self.apply(Object::ResourceClaim(claim), now);
        }
        for p in out.pods {
            let key = (p.namespace, p.name);
            if let Some(mut pod) = self.pods.get(&key).cloned() {
                pod.status
                    .get_or_insert_with(Default::default)
                    .resource_claim_statuses = Some(p.resource_claim_statuses);
                self.put_pod(pod);
            }
        }
        for u in out.claims {
            let key = (u.namespace, u.name);
            if u.delete {
                self.index.delete_resource_claim(&key.0, &key.1);
                self.resource_claims.remove(&key);
                self.generation += 1;
                continue;
            }
            if let Some(mut claim) = self.resource_claims.get(&key).cloned() {
                if let Some(status) = u.status {
                    claim.status = Some(status);
                }
                if let Some(finalizers) = u.finalizers {
                    claim.metadata.finalizers = (!finalizers.is_empty()).then_some(finalizers);
                }
                let _ = self.put_resource_claim(claim);
            }
        }
        changed
    }

    /// `apps/v1` ReplicaSets, by namespace then name.
    pub fn replicasets(&self) -> impl Iterator<Item = &ReplicaSet> {
        self.replicasets.values()
    }

    /// `apps/v1` Deployments, by namespace then name.
    pub fn deployments(&self) -> impl Iterator<Item = &Deployment> {
        self.deployments.values()
    }

    /// One sync of the ReplicaSet controller for `key`: adopts and releases pods, creates the
    /// missing ones, deletes the surplus, writes its status. Returns the pods created
    /// (`namespace/name`).
    fn sync_replicaset(
        &mut self,
        key: &Key,
        now: Time,
    ) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(rs) = self.replicasets.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.0.clone();
        let pods: Vec<&Pod> = in_namespace(&self.pods, &ns);
        let out = caldera_actors::replicaset::sync(rs, &pods, now, &|name| {
            self.pods.contains_key(&(ns.clone(), name.to_string()))
        });
        let owner = caldera_actors::replicaset::controller_ref(rs);
        for name in &out.adopt {
            let pkey = (ns.clone(), name.clone());
            if let Some(mut pod) = self.pods.get(&pkey).cloned() {
                pod.metadata
                    .owner_references
                    .get_or_insert_with(Vec::new)
                    .push(owner.clone());
                self.put_pod(pod);
            }
        }
        for name in &out.release {
            let pkey = (ns.clone(), name.clone());
            if let Some(mut pod) = self.pods.get(&pkey).cloned() {
                if let Some(refs) = pod.metadata.owner_references.as_mut() {
                    refs.retain(|o| o.uid != owner.uid);
                }
                self.put_pod(pod);
            }
        }
        let mut made = Vec::new();
        for pod in out.create {
            made.push(format!("{ns}/{}", name_of(&pod.metadata)));
            self.apply(Object::Pod(pod), now)?;
        }
        for name in &out.delete {
            self.delete_gracefully(&ns, name, now);
        }
        if let Some(rs) = self.replicasets.get_mut(key) {
            if rs.status.as_ref() != Some(&out.status) {
                rs.status = Some(out.status);
                self.generation += 1;
            }
        }
        if !(out.adopt.is_empty() && out.release.is_empty() && out.delete.is_empty()) {
            self.refresh_budgets(now);
        }
        Ok(made)
    }

    /// One sync of the Deployment controller for `key`: creates the ReplicaSet of its template,
    /// scales its ReplicaSets, writes its status. Returns the pods created (`namespace/name`).
    fn sync_deployment(
        &mut self,
        key: &Key,
        now: Time,
    ) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(deploy) = self.deployments.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.0.clone();
        let sets: Vec<&ReplicaSet> = in_namespace(&self.replicasets, &ns);
        let pods: Vec<&Pod> = in_namespace(&self.pods, &ns);
        let out = caldera_actors::replicaset::sync_deployment(deploy, &sets, &pods);
        let mut made = Vec::new();
        for (name, replicas) in &out.scale {
            let rkey = (ns.clone(), name.clone());
            if let Some(rs) = self.replicasets.get_mut(&rkey) {
                rs.spec.get_or_insert_with(Default::default).replicas = Some(*replicas);
                self.generation += 1;
                made.extend(self.sync_replicaset(&rkey, now)?);
            }
        }
        if let Some(rs) = out.create {
            let before: BTreeSet<Key> = self.pods.keys().cloned().collect();
            self.apply(Object::ReplicaSet(rs), now)?;
            made.extend(
                self.pods
                    .keys()
                    .filter(|k| !before.contains(*k))
                    .map(|(n, p)| format!("{n}/{p}")),
            );
        }
        if let Some(d) = self.deployments.get_mut(key) {
            if d.status.as_ref() != Some(&out.status) {
                d.status = Some(out.status);
                self.generation += 1;
            }
        }
        Ok(made)
    }

    /// Deletes a pod as a controller's or the garbage collector's DELETE does: a bound,
    /// unfinished pod terminates for its grace period; any other goes at once.
    fn delete_gracefully(&mut self, namespace: &str, name: &str, now: Time) {
        let key = (namespace.to_string(), name.to_string());
        let Some(pod) = self.pods.get(&key).cloned() else {
            return;
        };
        self.delete_pod_object(key, pod, now);
    }

    /// Deletes the stored pod `key` (given as `pod`, possibly changed) as kube-apiserver's
    /// DELETE does: at once, or terminating for its grace period when bound and unfinished.
    fn delete_pod_object(&mut self, key: Key, mut pod: Pod, now: Time) {
        match kubelet::deletion(&pod, None, now) {
            Deletion::Now => {
                self.index.delete_pod(&key.0, &key.1);
                self.pods.remove(&key);
                self.generation += 1;
            }
            Deletion::Graceful {
                until,
                grace_seconds,
            } => {
                kubelet::mark_terminating(&mut pod, until, grace_seconds);
                self.put_pod(pod);
            }
            Deletion::Unchanged => self.put_pod(pod),
        }
    }

    /// The garbage collector's part for pods: those owned by `uid` are deleted gracefully.
    fn delete_owned_pods(&mut self, uid: &str, now: Time) {
        let owned: Vec<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in owned {
            self.delete_gracefully(&ns, &name, now);
        }
        self.refresh_budgets(now);
    }

    /// Writes the PodGroups Caldera derives from workloads (`ClusterIndex::derived_podgroups`)
    /// as the runtime does: creates the missing ones, sets the derived fields of the others,
    /// deletes those no longer derived. Returns them (`namespace/name`).
    pub fn create_derived_podgroups(&mut self, opts: &SnapshotOptions, now: Time) -> Vec<String> {
        let mut made = Vec::new();
        for write in self.index.derived_podgroups(opts) {
            let key = (
                ns_of(&write.podgroup().metadata),
                name_of(&write.podgroup().metadata),
            );
            made.push(format!("{}/{}", key.0, key.1));
            // An update is a merge patch of the derived fields, as the runtime sends it: the
            // rest of the object stays.
            let pg = match (&write, self.podgroups.get(&key)) {
                (DerivedWrite::Delete(pg), Some(old)) => {
                    // With the uid as precondition, as the runtime deletes it.
                    if pg.metadata.uid.is_none() || pg.metadata.uid == old.metadata.uid {
                        self.delete(Kind::PodGroup, Some(&key.0), &key.1, now);
                    }
                    continue;
                }
                (DerivedWrite::Delete(_), None) => continue,
                (DerivedWrite::Update { .. }, Some(old)) => write.applied_to(old),
                _ => write.podgroup().clone(),
            };
            // Derived from a Job that converted, so the PodGroup converts too.
            let _ = self.apply(Object::PodGroup(pg), now);
        }
        made
    }

    /// Sets (or, with `None`, removes) an annotation on the claim `namespace/name`, as a merge
    /// patch of a scheduler would (e.g. `volume.kubernetes.io/selected-node`); the PV
    /// controller then runs. Returns whether the claim exists (with `uid` when given).
    pub fn annotate_claim(
        &mut self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        annotation: &str,
        value: Option<&str>,
        now: Time,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(claim) = self.claims.get_mut(&key) else {
            return false;
        };
        if uid.is_some_and(|u| claim.metadata.uid.as_deref() != Some(u)) {
            return false;
        }
        let before = claim.metadata.annotations.clone();
        let annotations = claim
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match value {
            Some(v) => {
                annotations.insert(annotation.to_string(), v.to_string());
            }
            None => {
                annotations.remove(annotation);
            }
        }
        if annotations.is_empty() {
            claim.metadata.annotations = None;
        }
        if claim.metadata.annotations != before {
            self.generation += 1;
            self.pv_controller(now);
        }
        true
    }

    /// Pre-binds the volume `name` to a claim by `spec.claimRef`, as kube-scheduler's volume
    /// binder does for a chosen static volume; the PV controller then binds the pair. Refused
    /// (false) when the volume is missing or already refers to another claim.
    pub fn prebind_volume(&mut self, name: &str, claim_ref: ObjectReference, now: Time) -> bool {
        let Some(volume) = self.volumes.get_mut(name) else {
            return false;
        };
        let spec = volume.spec.get_or_insert_with(Default::default);
        match &spec.claim_ref {
            Some(r) if r.name == claim_ref.name && r.namespace == claim_ref.namespace => {}
            Some(_) => return false,
            None => {
                spec.claim_ref = Some(claim_ref);
                self.generation += 1;
                self.pv_controller(now);
            }
        }
        true
    }

    /// Carries out a volume binder write of a plan, as the binder's merge patch would: a
    /// claim's `selected-node` (with Caldera's time of the choice) set or removed, or a
    /// volume pre-bound to a claim (`claimRef` with the claim's uid,
    /// `pv.kubernetes.io/bound-by-controller`, Caldera's time). A write to an object that is
    /// gone does nothing (the API server would answer 404).
    pub fn write_volume(&mut self, w: &caldera_model::VolumeWrite, now: Time) {
        use caldera_model::volume::{SELECTED_AT, SELECTED_NODE};
        use caldera_model::VolumeWrite;
        let at = now.to_rfc3339();
        match w {
            VolumeWrite::SelectNode {
                namespace,
                claim,
                node,
            } => {
                self.annotate_claim(namespace, claim, None, SELECTED_AT, Some(&at), now);
                self.annotate_claim(namespace, claim, None, SELECTED_NODE, Some(node), now);
            }
            VolumeWrite::Unselect { namespace, claim } => {
                self.annotate_claim(namespace, claim, None, SELECTED_NODE, None, now);
                self.annotate_claim(namespace, claim, None, SELECTED_AT, None, now);
            }
            VolumeWrite::PreBind {
                volume,
                namespace,
                claim,
                uid,
            } => {
                if let Some(v) = self.volumes.get_mut(&**volume) {
                    let a = v.metadata.annotations.get_or_insert_with(Default::default);
                    a.insert("pv.kubernetes.io/bound-by-controller".into(), "yes".into());
                    a.insert(SELECTED_AT.into(), at);
                }
                let claim_ref = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(namespace.to_string()),
                    name: Some(claim.to_string()),
                    uid: Some(uid.to_string()).filter(|u| !u.is_empty() && !u.contains('/')),
                    ..ObjectReference::default()
                };
                self.prebind_volume(volume, claim_ref, now);
            }
        }
    }

    /// The disruption controller: recomputes every budget's status at `now`. Scenarios have
    /// no workload controllers, so a pod's controller is never found (percentages and
    /// `maxUnavailable` then count only pods without one, as the real controller does).
    pub fn refresh_budgets(&mut self, now: Time) {
        if self.budgets.is_empty() {
            return;
        }
        let pods: Vec<&Pod> = self.pods.values().collect();
        let (replicasets, deployments) = (&self.replicasets, &self.deployments);
        let mut changed = false;
        for pdb in self.budgets.values_mut() {
            let status = disruption::status(pdb, &pods, now, &|owner, ns| {
                caldera_actors::replicaset::scale_of(
                    owner,
                    &|n| replicasets.get(&(ns.to_string(), n.to_string())).cloned(),
                    &|n| deployments.get(&(ns.to_string(), n.to_string())).cloned(),
                )
            });
            let same = pdb.status.as_ref().is_some_and(|old| {
                let mut old = old.clone();
                let mut new = status.clone();
                // The controller rewrites only on a change of content.
                old.conditions = None;
                new.conditions = None;
                old == new
            });
            if !same {
                pdb.status = Some(status);
                self.index.apply_budget(pdb);
                changed = true;
            }
        }
        if changed {
            self.generation += 1;
        }
    }

    /// The Priority admission plugin: a pod without `spec.priority` gets its class's value, or
    /// the global default class (name and value) when it names none. A class that does not
    /// exist yet is left for the scheduler to resolve later instead of rejecting the pod, so
    /// the order of objects in a manifest does not matter.
    fn admit_priority(&self, pod: &mut Pod) {
        let Some(spec) = pod.spec.as_mut() else {
            return;
        };
        let class = match spec.priority_class_name.as_deref() {
            Some(name) => self.priority_classes.get(name),
            None => self
                .priority_classes
                .values()
                .filter(|pc| pc.global_default == Some(true))
                .max_by_key(|pc| pc.value.unwrap_or(0)),
        };
        let Some(pc) = class else {
            return;
        };
        if spec.priority_class_name.is_none() {
            spec.priority_class_name = pc.metadata.name.clone();
        }
        if spec.priority.is_none() {
            spec.priority = Some(pc.value.unwrap_or(0));
        }
        if spec.preemption_policy.is_none() {
            spec.preemption_policy = Some(
                pc.preemption_policy
                    .clone()
                    .unwrap_or_else(|| "PreemptLowerPriority".into()),
            );
        }
    }

    /// Deletes an object at once (no grace period: no kubelet would confirm it) at `now`, and
    /// what it owned as the garbage collector would. Returns whether it existed.
    pub fn delete(&mut self, kind: Kind, namespace: Option<&str>, name: &str, now: Time) -> bool {
        let ns = namespace.unwrap_or("default").to_string();
        let gone = match kind {
            Kind::Namespace => self.remove::<Namespace>(&ns, name),
            Kind::PriorityClass => self.remove::<PriorityClass>(&ns, name),
            Kind::Queue => self.remove::<Queue>(&ns, name),
            Kind::HyperNode => self.remove::<HyperNode>(&ns, name),
            Kind::Node => self.remove::<Node>(&ns, name),
            Kind::PodGroup => self.remove::<PodGroup>(&ns, name),
            Kind::Pod => self.remove::<Pod>(&ns, name),
            Kind::PodDisruptionBudget => self.remove::<PodDisruptionBudget>(&ns, name),
            Kind::StorageClass => self.remove::<StorageClass>(&ns, name),
            Kind::CSINode => self.remove::<CSINode>(&ns, name),
            Kind::DeviceClass => self.remove::<DeviceClass>(&ns, name),
            Kind::ResourceSlice => self.remove::<ResourceSlice>(&ns, name),
            Kind::ResourceClaim => self.remove::<ResourceClaim>(&ns, name),
            Kind::ResourceClaimTemplate => self.remove::<ResourceClaimTemplate>(&ns, name),
            Kind::PersistentVolume => self.remove::<PersistentVolume>(&ns, name),
            Kind::PersistentVolumeClaim => self.remove::<PersistentVolumeClaim>(&ns, name),
            Kind::NativePodGroup => self.remove::<NativePodGroup>(&ns, name),
            Kind::Workload => self.remove::<NativeWorkload>(&ns, name),
            Kind::ReplicaSet => self.remove::<ReplicaSet>(&ns, name),
            Kind::Deployment => self.remove::<Deployment>(&ns, name),
            Kind::Job => self.remove::<Job>(&ns, name),
            Kind::JobSet | Kind::LeaderWorkerSet => {
                let wkind = if kind == Kind::JobSet {
                    caldera_cache::derive::WorkloadKind::JobSet
                } else {
                    caldera_cache::derive::WorkloadKind::LeaderWorkerSet
                };
                self.index.delete_workload(wkind, &ns, name);
                let gone = self.workloads.remove(&(kind, ns.clone(), name.to_string()));
                gone.map(|w| w.metadata.uid)
            }
        };
        let Some(uid) = gone else {
            return false;
        };
        // The garbage collector, as `kubectl delete`'s background propagation has it.
        let owns = matches!(
            kind,
            Kind::PodGroup
                | Kind::Pod
                | Kind::NativePodGroup
                | Kind::Workload
                | Kind::JobSet
                | Kind::LeaderWorkerSet
                | Kind::ReplicaSet
                | Kind::Deployment
                | Kind::Job
        );
        if let Some(uid) = uid.filter(|_| owns) {
            self.collect_garbage(&uid);
            let owned_by =
                |meta: &ObjectMeta| meta.owner_references.iter().flatten().any(|o| o.uid == uid);
            match kind {
                // Its Jobs, and through them their pods.
                Kind::JobSet => {
                    let jobs: Vec<String> = in_namespace(&self.jobs, &ns)
                        .into_iter()
                        .filter(|j| owned_by(&j.metadata))
                        .map(|j| name_of(&j.metadata))
                        .collect();
                    for job in jobs {
                        self.delete(Kind::Job, Some(&ns), &job, now);
                    }
                }
                // Its StatefulSets, and through them their pods.
                Kind::LeaderWorkerSet => {
                    let pods: Vec<String> = in_namespace(&self.pods, &ns)
                        .into_iter()
                        .filter(|p| caldera_actors::lws::owned_by(p, name))
                        .map(|p| name_of(&p.metadata))
                        .collect();
                    for pod in pods {
                        self.delete_gracefully(&ns, &pod, now);
                    }
                    self.refresh_budgets(now);
                }
                // Its ReplicaSets, and through them their pods.
                Kind::Deployment => {
                    let sets: Vec<String> = in_namespace(&self.replicasets, &ns)
                        .into_iter()
                        .filter(|r| owned_by(&r.metadata))
                        .map(|r| name_of(&r.metadata))
                        .collect();
                    for rs in sets {
                        self.delete(Kind::ReplicaSet, Some(&ns), &rs, now);
                    }
                }
                Kind::ReplicaSet | Kind::Job => self.delete_owned_pods(&uid, now),
                _ => {}
            }
        }
        // A pod's deletion takes its ephemeral claims with it.
        if matches!(
            kind,
            Kind::StorageClass | Kind::PersistentVolume | Kind::PersistentVolumeClaim | Kind::Pod
        ) {
            self.pv_controller(now);
        }
        self.generation += 1;
        true
    }

    // ----- autoscaler requests -----

    /// ProvisioningRequests, by namespace then name.
    pub fn provisioning_requests(&self) -> impl Iterator<Item = &ProvisioningRequest> {
        self.requests.values()
    }

    /// PodTemplates, by namespace then name.
    pub fn pod_templates(&self) -> impl Iterator<Item = &PodTemplate> {
        self.pod_templates.values()
    }

    /// How many requests were ever created for the PodGroup `namespace/name`.
    pub fn requests_created(&self, podgroup: &str) -> usize {
        self.requests_created.get(podgroup).copied().unwrap_or(0)
    }

    /// Creates the PodTemplates and the request of `need`, and annotates its members, as the
    /// binder does. A request that exists already is left as it is (the API server's 409).
    pub fn create_capacity(&mut self, need: &CapacityNeed, now: Time) {
        let key = (need.namespace.to_string(), need.name.to_string());
        if self.requests.contains_key(&key) {
            return;
        }
        let (mut pr, templates) = caldera_cache::provisioning::build(need);
        for mut t in templates {
            self.fresh_meta(&mut t.metadata, true, now);
            let tkey = (ns_of(&t.metadata), name_of(&t.metadata));
            self.pod_templates.insert(tkey, t);
        }
        self.fresh_meta(&mut pr.metadata, true, now);
        self.index.apply_provisioning_request(&pr);
        self.requests.insert(key, pr);
        *self
            .requests_created
            .entry(format!("{}/{}", need.namespace, need.podgroup))
            .or_default() += 1;
        let annotations = caldera_cache::provisioning::consume_annotations(need);
        for p in &need.pods {
            let key = (p.namespace.to_string(), p.name.to_string());
            let Some(mut pod) = self.pods.get(&key).cloned() else {
                continue;
            };
            if pod.metadata.uid.as_deref() != Some(&*p.uid) {
                continue;
            }
            pod.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .extend(annotations.clone());
            self.put_pod(pod);
        }
        self.generation += 1;
    }

    /// Stores a request as it is (a live cluster's, read back), without counting a creation.
    pub fn insert_request(&mut self, pr: ProvisioningRequest) {
        let _ = self.put(pr);
    }

    /// Sets how many requests were created per PodGroup `namespace/name` (a live cluster's,
    /// as an observer counted them).
    pub fn set_requests_created(&mut self, created: BTreeMap<String, usize>) {
        self.requests_created = created;
    }

    /// Deletes a request and the PodTemplates it refers to. Returns whether it existed.
    pub fn delete_capacity(&mut self, namespace: &str, name: &str) -> bool {
        let Some(pr) = self
            .requests
            .remove(&(namespace.to_string(), name.to_string()))
        else {
            return false;
        };
        self.index.delete_provisioning_request(namespace, name);
        for t in caldera_cache::provisioning::template_names(&pr) {
            self.pod_templates.remove(&(namespace.to_string(), t));
        }
        self.generation += 1;
        true
    }

    /// Removes the consume annotations naming `request` from `pods` (same uid), as the binder
    /// does when a request goes while members still wait.
    pub fn stop_consuming(&mut self, pods: &[ConsumingPod], request: &str) {
        for p in pods {
            let key = (p.namespace.to_string(), p.name.to_string());
            let Some(mut pod) = self.pods.get(&key).cloned() else {
                continue;
            };
            let Some(annotations) = pod.metadata.annotations.as_mut() else {
                continue;
            };
            if pod.metadata.uid.as_deref() != Some(&*p.uid)
                || annotations
                    .get(caldera_api::ANNOTATION_CONSUME_PROVISIONING_REQUEST)
                    .map(String::as_str)
                    != Some(request)
            {
                continue;
            }
            annotations.remove(caldera_api::ANNOTATION_CONSUME_PROVISIONING_REQUEST);
            annotations.remove(caldera_api::ANNOTATION_PROVISIONING_CLASS);
            self.put_pod(pod);
            self.generation += 1;
        }
    }

    /// Writes every HyperNode's `status.nodeCount` (the nodes under it, at any depth) where
    /// it differs, as Volcano's HyperNode controller (and Caldera's leader) does.
    pub fn write_hypernode_node_counts(&mut self) {
        // Counting builds the topology tree over a copy of every node: not for no HyperNode
        // (it was a third of a replay session's time on 4,000 nodes).
        if self.hypernodes.is_empty() {
            return;
        }
        let counts = self.index.hypernode_node_counts();
        for (name, h) in self.hypernodes.iter_mut() {
            let Some(&count) = counts.get(name.as_str()) else {
                continue;
            };
            let status = h.status.get_or_insert_with(Default::default);
            if status.node_count != Some(count) {
                status.node_count = Some(count);
                self.generation += 1;
            }
        }
    }

    /// Sets a condition on a request's status (as the autoscaler does), replacing one of the
    /// same type.
    pub fn set_request_condition(&mut self, namespace: &str, name: &str, condition: Condition) {
        let key = (namespace.to_string(), name.to_string());
        let Some(pr) = self.requests.get_mut(&key) else {
            return;
        };
        caldera_actors::autoscaler::set_condition(pr, condition);
        self.index.apply_provisioning_request(pr);
        self.generation += 1;
    }

    /// The garbage collector: objects owned by the deleted object `uid` go too (requests,
    /// PodTemplates, claims).
    fn collect_garbage(&mut self, uid: &str) {
        self.collect_garbage_of(&BTreeSet::from([uid.to_string()]));
    }

    /// [`Store::collect_garbage`] for several owners at once, in one pass over each kind.
    fn collect_garbage_of(&mut self, uids: &BTreeSet<String>) {
        if uids.is_empty() {
            return;
        }
        let owned = |meta: &ObjectMeta| {
            meta.owner_references
                .iter()
                .flatten()
                .any(|o| uids.contains(&o.uid))
        };
        let requests: Vec<Key> = self
            .requests
            .iter()
            .filter(|(_, pr)| owned(&pr.metadata))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in requests {
            self.delete_capacity(&ns, &name);
        }
        let podgroups: Vec<Key> = self
            .podgroups
            .iter()
            .filter(|(_, pg)| owned(&pg.metadata))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in podgroups {
            self.index.delete_podgroup(&ns, &name);
            self.podgroups.remove(&(ns, name));
            self.generation += 1;
        }
        self.pod_templates.retain(|_, t| !owned(&t.metadata));
        let before = self.claims.len();
        self.claims.retain(|_, c| !owned(&c.metadata));
        if self.claims.len() != before {
            self.generation += 1;
        }
    }

    /// Writes a pod and re-indexes it. The pod converted when it was stored, and the fields
    /// the callers change (nodeName, conditions, phase) cannot make conversion fail, so an
    /// error here would be a bug in this file; it is ignored rather than aborting a run.
    fn put_pod(&mut self, pod: Pod) {
        let _ = self.put(pod);
    }

    /// Binds a pod, as `pods/binding` does: sets `spec.nodeName` and `PodScheduled=True`.
    pub fn bind(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        now: Time,
    ) -> Result<(), BindError> {
        let key = (namespace.to_string(), name.to_string());
        let id = format!("{namespace}/{name}");
        let mut pod = self
            .pods
            .get(&key)
            .cloned()
            .ok_or_else(|| BindError::NotFound(id.clone()))?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(BindError::UidMismatch(id));
        }
        let spec = pod.spec.get_or_insert_with(Default::default);
        if let Some(bound) = &spec.node_name {
            return Err(BindError::AlreadyBound {
                pod: id,
                node: bound.clone(),
            });
        }
        spec.node_name = Some(node.to_string());
        set_condition(&mut pod, "PodScheduled", "True", None, None, now);
        self.put_pod(pod);
        Ok(())
    }

    /// Releases a gated member to `node`, as `caldera gate` does: one update adding the pin to
    /// every required node-affinity term and removing the gate [`caldera_api::GANG_GATE`],
    /// with `status.nominatedNodeName` set first (the order matters only to a live
    /// kube-scheduler; here the three changes land at once).
    pub fn release(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
    ) -> Result<(), BindError> {
        let key = (namespace.to_string(), name.to_string());
        let id = format!("{namespace}/{name}");
        let mut pod = self
            .pods
            .get(&key)
            .cloned()
            .ok_or_else(|| BindError::NotFound(id.clone()))?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(BindError::UidMismatch(id));
        }
        if let Some(bound) = node_name(&pod) {
            return Err(BindError::AlreadyBound {
                pod: id,
                node: bound.to_string(),
            });
        }
        if !caldera_cache::gate::has_gang_gate(pod.spec.as_ref()) {
            return Err(BindError::NotGated(id));
        }
        let spec = pod.spec.take().unwrap_or_default();
        pod.spec = Some(caldera_cache::gate::pinned_spec(&spec, node));
        pod.status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some(node.to_string());
        self.put_pod(pod);
        Ok(())
    }

    /// Sets `PodScheduled=False` with `reason` and `message` on an unbound pod whose uid
    /// matches. Returns whether anything changed.
    pub fn set_unschedulable(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        reason: &str,
        message: &str,
        now: Time,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        if pod.metadata.uid.as_deref() != Some(uid) || node_name(&pod).is_some() {
            return false;
        }
        let before = pod.status.clone();
        set_condition(
            &mut pod,
            "PodScheduled",
            "False",
            Some(reason),
            Some(message),
            now,
        );
        if pod.status == before {
            return false;
        }
        self.put_pod(pod);
        true
    }

    /// Sets (or clears) `status.nominatedNodeName` of an unbound pod whose uid matches.
    /// Returns whether anything changed.
    pub fn set_nominated(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: Option<&str>,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        if pod.metadata.uid.as_deref() != Some(uid) || node_name(&pod).is_some() {
            return false;
        }
        let status = pod.status.get_or_insert_with(Default::default);
        if status.nominated_node_name.as_deref() == node {
            return false;
        }
        status.nominated_node_name = node.map(str::to_string);
        self.put_pod(pod);
        true
    }

    /// Marks an unbound pod Failed with `reason` and `message` (the gang timeout). Returns
    /// whether anything changed.
    pub fn fail_pod(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        reason: &str,
        message: &str,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        if pod.metadata.uid.as_deref() != Some(uid) || node_name(&pod).is_some() {
            return false;
        }
        let status = pod.status.get_or_insert_with(Default::default);
        if status.phase.as_deref() == Some("Failed") {
            return false;
        }
        status.phase = Some("Failed".into());
        status.reason = Some(reason.to_string());
        status.message = Some(message.to_string());
        self.put_pod(pod);
        true
    }

    /// Sets the phase of a pod as its kubelet would ([`kubelet::set_phase`]: `Running` makes
    /// it Ready). Returns whether anything changed.
    pub fn set_phase(&mut self, namespace: &str, name: &str, phase: &str, now: Time) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        let status = pod.status.get_or_insert_with(Default::default);
        if !kubelet::set_phase(status, phase, now) {
            return false;
        }
        self.put_pod(pod);
        self.refresh_budgets(now);
        true
    }

    /// `pods/eviction` by the scheduler, judged as kube-apiserver judges it: the budgets may
    /// refuse (429, nothing changes); otherwise the pod gets `DisruptionTarget` (unless it has
    /// finished) and is deleted gracefully: a bound pod stays, terminating, for its grace
    /// period; an unbound one is gone at once.
    pub fn evict(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        now: Time,
    ) -> Result<(), EvictError> {
        let key = (namespace.to_string(), name.to_string());
        let id = format!("{namespace}/{name}");
        let mut pod = self
            .pods
            .get(&key)
            .cloned()
            .ok_or_else(|| EvictError::NotFound(id.clone()))?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(EvictError::NotFound(id));
        }
        let budgets: Vec<Key> = self
            .budgets
            .keys()
            .filter(|(ns, _)| ns == namespace)
            .cloned()
            .collect();
        let refs: Vec<&PodDisruptionBudget> =
            budgets.iter().filter_map(|k| self.budgets.get(k)).collect();
        match disruption::evict(&pod, &refs) {
            Eviction::Delete => {}
            Eviction::Charge(i) => {
                if let Some(pdb) = budgets.get(i).and_then(|k| self.budgets.get_mut(k)) {
                    disruption::charge(pdb, name, now);
                    self.index.apply_budget(pdb);
                }
            }
            Eviction::Refused { cause } => return Err(EvictError::Refused(cause)),
            Eviction::MultipleBudgets => {
                return Err(EvictError::Refused(disruption::MULTIPLE_MESSAGE.into()))
            }
            Eviction::Forbidden { budget, reason } => {
                return Err(EvictError::Refused(format!("{budget}: {reason}")))
            }
        }
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if !finished {
            disruption::put_condition(&mut pod, disruption::disruption_target(now));
        }
        self.delete_pod_object(key, pod, now);
        self.refresh_budgets(now);
        Ok(())
    }

    /// The kubelets: removes every terminating bound pod whose `deletionTimestamp` has come.
    /// Returns the pods removed (`namespace/name`).
    pub fn kubelet(&mut self, now: Time) -> Vec<String> {
        let due: Vec<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| kubelet::removal_due(p, now))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in &due {
            self.index.delete_pod(ns, name);
            self.pods.remove(&(ns.clone(), name.clone()));
            self.generation += 1;
        }
        if !due.is_empty() {
            self.refresh_budgets(now);
        }
        due.into_iter().map(|(ns, n)| format!("{ns}/{n}")).collect()
    }

    /// Deletes the pods `names` of `namespace` at once, without a grace period (`kubectl delete
    /// --grace-period=0 --force`, or pods that have finished: the kubelet has nothing left to
    /// stop), then collects what they owned in one pass. Returns how many existed.
    pub fn force_delete_pods(&mut self, namespace: &str, names: &[String], now: Time) -> usize {
        let mut uids = BTreeSet::new();
        for name in names {
            let key = (namespace.to_string(), name.clone());
            if let Some(pod) = self.pods.remove(&key) {
                self.index.delete_pod(namespace, name);
                self.generation += 1;
                uids.extend(pod.metadata.uid);
            }
        }
        let removed = uids.len();
        self.collect_garbage_of(&uids);
        if removed > 0 {
            self.refresh_budgets(now);
        }
        removed
    }

    /// When the next terminating pod is due to go, if any.
    pub fn next_removal(&self) -> Option<Time> {
        self.pods.values().filter_map(kubelet::gone_at).min()
    }

    /// Replaces a PodGroup's status. Returns whether anything changed.
    pub fn set_podgroup_status(
        &mut self,
        namespace: &str,
        name: &str,
        status: caldera_api::PodGroupStatus,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pg) = self.podgroups.get(&key).cloned() else {
            return false;
        };
        if pg.status.as_ref() == Some(&status) {
            return false;
        }
        pg.status = Some(status);
        // Converted when stored; a status built from the model converts as well.
        let _ = self.put(pg);
        true
    }

    /// Sets (or, with no holds, removes) a PodGroup's `caldera.sh/consolidation` annotation,
    /// as the binder's merge patch does when the uid still matches. Returns whether anything
    /// changed.
    pub fn set_move_holds(&mut self, w: &caldera_model::MoveHoldWrite) -> bool {
        let key = (w.namespace.to_string(), w.name.to_string());
        let Some(mut pg) = self.podgroups.get(&key).cloned() else {
            return false;
        };
        if pg.metadata.uid.as_deref().is_some_and(|u| u != &*w.uid) {
            return false;
        }
        let annotations = pg.metadata.annotations.get_or_insert_with(Default::default);
        let before = annotations.get(caldera_model::HOLDS_ANNOTATION).cloned();
        if w.holds.is_empty() {
            annotations.remove(caldera_model::HOLDS_ANNOTATION);
        } else {
            annotations.insert(
                caldera_model::HOLDS_ANNOTATION.to_string(),
                caldera_cache::consolidation::encode(&w.holds),
            );
        }
        if annotations.get(caldera_model::HOLDS_ANNOTATION) == before.as_ref() {
            return false;
        }
        let _ = self.put(pg);
        true
    }

    /// Replaces a Queue's status. Returns whether anything changed.
    pub fn set_queue_status(&mut self, name: &str, status: caldera_api::QueueStatus) -> bool {
        let Some(mut q) = self.queues.get(name).cloned() else {
            return false;
        };
        if q.status.as_ref() == Some(&status) {
            return false;
        }
        q.status = Some(status);
        // Converted when stored; a status built from the model converts as well.
        let _ = self.put(q);
        true
    }
}

/// Inserts `value`, telling whether it was new, changed or equal.
fn replace<K: Ord, V: PartialEq>(map: &mut BTreeMap<K, V>, key: K, value: V) -> Applied {
    let applied = match map.get(&key) {
        None => Applied::Created,
        Some(old) if *old == value => return Applied::Unchanged,
        Some(_) => Applied::Updated,
    };
    map.insert(key, value);
    applied
}

/// Annotations an apply does not mention stay (controllers' and schedulers' writes), as
/// `kubectl apply`'s merge keeps them; the applied ones win.
fn merge_annotations(new: &mut ObjectMeta, old: &ObjectMeta) {
    let Some(old) = old.annotations.as_ref() else {
        return;
    };
    let annotations = new.annotations.get_or_insert_with(Default::default);
    for (k, v) in old {
        annotations.entry(k.clone()).or_insert_with(|| v.clone());
    }
}

/// `spec.nodeName`, if set.
pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// API-server defaulting of a pod spec: `schedulerName` and container requests from limits.
fn default_pod_spec(pod: &mut Pod) {
    let spec = pod.spec.get_or_insert_with(Default::default);
    if spec.scheduler_name.as_deref().is_none_or(str::is_empty) {
        spec.scheduler_name = Some("default-scheduler".into());
    }
    let default_requests = |c: &mut Container| {
        let Some(res) = c.resources.as_mut() else {
            return;
        };
        let Some(limits) = res.limits.clone() else {
            return;
        };
        let requests = res.requests.get_or_insert_with(Default::default);
        for (name, q) in limits {
            requests.entry(name).or_insert(q);
        }
    };
    spec.containers.iter_mut().for_each(default_requests);
    spec.init_containers
        .iter_mut()
        .flatten()
        .for_each(default_requests);
}

/// Sets the pod condition `type_` to `status`; the transition time moves only when the status
/// changes, as in Kubernetes.
fn set_condition(
    pod: &mut Pod,
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
    now: Time,
) {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let fresh = PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        last_transition_time: kube_time(now),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status == status {
                c.reason = fresh.reason;
                c.message = fresh.message;
            } else {
                *c = fresh;
            }
        }
        None => conditions.push(fresh),
    }
}
