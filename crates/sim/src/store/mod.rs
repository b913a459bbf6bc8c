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

mod controllers;
mod kept;
mod pods;
mod writes;

use kept::{Kept, KeyOf};

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

    /// The ResourceClaim `namespace/name`.
    pub fn resource_claim(&self, namespace: &str, name: &str) -> Option<&ResourceClaim> {
        self.resource_claims
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims.get(&(namespace.to_string(), name.to_string()))
    }

    /// The volume `name`.
    pub fn volume(&self, name: &str) -> Option<&PersistentVolume> {
        self.volumes.get(name)
    }

    /// Every stored object of kind `T` (`store.list::<Pod>()`), by name, or by namespace then
    /// name; PodDisruptionBudgets with their computed status.
    pub fn list<T: Kept>(&self) -> impl Iterator<Item = &T> {
        T::map(self).values()
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

    /// The names of the objects of kind `T` in namespace `ns` that `pick` picks, by name.
    fn names_in<T: Kept<Key = Key>>(&self, ns: &str, pick: impl Fn(&T) -> bool) -> Vec<String> {
        let objects = in_namespace(T::map(self), ns).into_iter();
        objects
            .filter(|o| pick(o))
            .map(|o| name_of(o.meta()))
            .collect()
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
        self.index.apply(&o)?;
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
                self.index.delete::<Workload>((wkind, &ns, name));
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
                    for job in self.names_in::<Job>(&ns, |j| owned_by(&j.metadata)) {
                        self.delete(Kind::Job, Some(&ns), &job, now);
                    }
                }
                // Its StatefulSets, and through them their pods.
                Kind::LeaderWorkerSet => {
                    let owned = |p: &Pod| caldera_actors::lws::owned_by(p, name);
                    for pod in self.names_in::<Pod>(&ns, owned) {
                        self.delete_gracefully(&ns, &pod, now);
                    }
                    self.refresh_budgets(now);
                }
                // Its ReplicaSets, and through them their pods.
                Kind::Deployment => {
                    for rs in self.names_in::<ReplicaSet>(&ns, |r| owned_by(&r.metadata)) {
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
