//! The cluster index: converted objects kept up to date by synchronous `apply`/`delete`/`reset`
//! calls, written once over [`Indexed`] (each kind's hooks live in [`crate::kinds`]); the
//! snapshot is assembled from it in [`crate::snapshot`].

use crate::convert::{GroupInfo, PodInfo, PriorityClassInfo};
use crate::derive::{Workload, WorkloadKind};
use crate::error::{Error, Result};
use crate::intern::SpecInterner;
use crate::provisioning::RequestInfo;
use caldera_model::{HostPort, Node, Queue, Resources};
use k8s_openapi::api::batch::v1::Job as KubeJob;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as KubeLabelSelector;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A kind [`ClusterIndex`] keeps (implemented in the crate's `kinds` module, once per watched
/// kind; defined here, so the index does not depend on its kinds). The index calls the hooks
/// in this order: `apply` = `remove(key)`, `insert`, `changed`; `delete` = `remove(key)`,
/// `changed`; `reset` = `clear`, then `apply` for each object, then `changed`.
/// So `insert` may assume no earlier version of its object is kept.
pub trait Indexed: Sized {
    /// How the index names an object of the kind: its name, or its namespace and name.
    type Key<'a>: Copy;

    /// The key of `self`; `None` when the object has none (it is then only converted, so a
    /// malformed object still gets its error).
    fn key(&self) -> Option<Self::Key<'_>>;

    /// Converts `self` and keeps it, with everything derived from it. On a conversion error
    /// nothing is kept and the error names the object and field.
    fn insert(&self, index: &mut ClusterIndex) -> Result<()>;

    /// Forgets the object `key` and everything derived from it; an unknown key is ignored.
    fn remove(index: &mut ClusterIndex, key: Self::Key<'_>);

    /// Forgets every object of the kind (the start of a relist).
    fn clear(index: &mut ClusterIndex);

    /// Brings what is derived from all objects of the kind together up to date, after any
    /// change. Most kinds derive nothing across objects.
    fn changed(_index: &mut ClusterIndex) {}
}

/// A node booked for a provisioned request, kept from snapshot to snapshot
/// ([`ClusterIndex`]'s `bookings`, by node name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Booking {
    /// The job (PodGroup id) it is booked for.
    pub(crate) job: Arc<str>,
    /// The request it was booked under (a retry's new request books afresh).
    pub(crate) request: Arc<str>,
}

/// Scheduler names Caldera answers to unless configured otherwise (SPEC §2).
pub const DEFAULT_SCHEDULER_NAMES: [&str; 2] = ["caldera", "volcano"];

/// What a snapshot depends on besides the objects: the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// Pods whose `spec.schedulerName` is one of these are ours.
    pub scheduler_names: Vec<String>,
    /// Gang timeout for PodGroups without `scheduleTimeoutSeconds` (config
    /// `gangScheduleTimeout`); rounded up to whole seconds. Never applied to a pod without a
    /// group: a lone pod is not a gang, and kube-scheduler never fails pods for waiting.
    pub default_gang_timeout: Option<Duration>,
    /// Gate mode (`caldera gate`): `scheduler_names` are kube-scheduler's, and a pod of theirs
    /// is ours only while it carries [`caldera_api::GANG_GATE`], or once released (held at
    /// its pinned node, or bound) when it belongs to a group. A released member is a task
    /// `Binding` at the node it is held at.
    pub gate: bool,
    /// Autoscaler requests (config `autoscaler.provisioningRequest`), when on and served.
    pub provisioning: Option<caldera_model::ProvisioningPolicy>,
    /// Gate mode: the model of kube-scheduler (`caldera_actors::kube_scheduler::predict`),
    /// run over the pending, ungated pods of `scheduler_names` that Caldera does not serve,
    /// so the room they are about to take counts as used.
    pub predict: Option<Predictor>,
    /// Where gangs are derived from workloads (config `autoGroup`; never in gate mode).
    pub auto_group: crate::workload::AutoGroup,
}

/// Places pending pods `(pod, priority)` on `nodes` as kube-scheduler would, adding each to
/// its node (see [`SnapshotOptions::predict`]). There is one model of kube-scheduler, so any
/// two predictors compare equal (function addresses say nothing).
#[derive(Clone, Copy)]
pub struct Predictor(pub fn(&mut [Node], &[(&PodInfo, i32)]));

impl PartialEq for Predictor {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Predictor {}

impl std::fmt::Debug for Predictor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Predictor")
    }
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions {
            scheduler_names: DEFAULT_SCHEDULER_NAMES.map(String::from).to_vec(),
            default_gang_timeout: None,
            gate: false,
            provisioning: None,
            predict: None,
            auto_group: crate::workload::AutoGroup::default(),
        }
    }
}

impl SnapshotOptions {
    /// The options of gate mode: kube-scheduler's default profile, and `default_gang_timeout`.
    pub fn gate(default_gang_timeout: Option<Duration>) -> Self {
        SnapshotOptions {
            scheduler_names: vec![caldera_api::KUBE_SCHEDULER_NAME.to_string()],
            default_gang_timeout,
            gate: true,
            provisioning: None,
            predict: None,
            auto_group: crate::workload::AutoGroup::off(),
        }
    }

    /// Whether `p` (a pod of one of `scheduler_names`) is a member Caldera decides for. In gate
    /// mode a member of a native `scheduling.k8s.io` PodGroup is kube-scheduler's own gang
    /// (1.36 places those itself), never Caldera's, unless it carries Caldera's gate.
    pub(crate) fn serves(&self, p: &PodInfo) -> bool {
        !self.gate
            || p.gang_gate
            || (p.group.is_some() && !p.native && (p.node.is_some() || p.held.is_some()))
    }
}

/// `(namespace, name)` of a pod.
pub(crate) type PodKey = (Arc<str>, Arc<str>);

/// A job's pods by key: the same infos as [`ClusterIndex`]'s pod index holds.
pub(crate) type JobPods = BTreeMap<PodKey, Arc<PodInfo>>;

/// What the pods on one node hold.
#[derive(Debug, Default, Clone)]
pub(crate) struct Usage {
    pub(crate) used: Resources,
    pub(crate) pods: i64,
    pub(crate) host_ports: Vec<HostPort>,
}

impl Usage {
    /// Copies this usage onto `node` (`None`: no pod counts there).
    pub(crate) fn mirror(usage: Option<&Usage>, node: &mut Node) {
        match usage {
            Some(u) => {
                node.used.clone_from(&u.used);
                node.pod_count = u.pods;
                node.host_ports.clone_from(&u.host_ports);
            }
            None => {
                node.used = Resources::new();
                node.pod_count = 0;
                node.host_ports.clear();
            }
        }
    }
}

/// Every object the scheduler looks at, converted, with per-node usage maintained as pods
/// change. Not thread-safe by itself: the runtime wraps it in a lock and takes snapshots under
/// it.
///
/// Invariants: `usage[n]` is Σ over pods `p` with `p.counts_on_node()` and `p.node == n` (the
/// node need not be known yet), its host ports sorted; a known node's `used`, `pod_count` and
/// `host_ports` are its `usage` (zero without an entry), so a snapshot copies nodes as they are; `members[s][j]` holds exactly the pods with scheduler `s` and
/// job id `j`; `group_refs[g]` counts the pods of any scheduler naming group `g`.
#[derive(Debug, Default)]
pub struct ClusterIndex {
    pub(crate) nodes: BTreeMap<Arc<str>, Node>,
    pub(crate) usage: HashMap<Arc<str>, Usage>,
    pub(crate) pods: BTreeMap<PodKey, Arc<PodInfo>>,
    /// Scheduler name → job id → its pods (the same infos as `pods`, so a snapshot walks a
    /// job's members without looking each up).
    pub(crate) members: HashMap<Arc<str>, BTreeMap<Arc<str>, JobPods>>,
    pub(crate) group_refs: HashMap<Arc<str>, usize>,
    /// Unbound pods held at a node (`PodInfo::held`).
    pub(crate) held: BTreeSet<PodKey>,
    pub(crate) podgroups: BTreeMap<Arc<str>, GroupInfo>,
    /// Native `scheduling.k8s.io/v1alpha2` PodGroups by `namespace/name` (crate::native).
    pub(crate) native_podgroups: BTreeMap<Arc<str>, crate::native::NativeInfo>,
    /// Native Workloads by `namespace/name`: the queue each names.
    pub(crate) native_workloads: BTreeMap<Arc<str>, Option<Arc<str>>>,
    pub(crate) queues: BTreeMap<Arc<str>, Queue>,
    pub(crate) hypernodes: BTreeMap<Arc<str>, crate::topology::HyperNodeInfo>,
    /// The HyperNode objects as given (discovery reads their owner labels).
    pub(crate) hypernode_objects: BTreeMap<Arc<str>, caldera_api::HyperNode>,
    pub(crate) priority_classes: BTreeMap<Arc<str>, PriorityClassInfo>,
    pub(crate) global_default_priority: Option<i32>,
    pub(crate) specs: SpecInterner,
    /// Pods on nodes by label: key → value → pods (for inter-pod constraints).
    pub(crate) by_label: HashMap<String, HashMap<String, BTreeSet<PodKey>>>,
    /// Pods on nodes with required anti-affinity (they keep matching pods out of their domains).
    pub(crate) anti: BTreeSet<PodKey>,
    /// Pods on nodes with terms that score pods coming to their domains (preferred terms,
    /// required affinity).
    pub(crate) scoring: BTreeSet<PodKey>,
    pub(crate) requests: BTreeMap<PodKey, RequestInfo>,
    /// Autoscaler requests the API server refused as invalid (422), by PodGroup (namespace,
    /// name): never made, so no watch shows them; a snapshot gives them to their job as a
    /// failed request until a write of the PodGroup's requests goes through (see
    /// [`ClusterIndex::refuse_provisioning_request`]).
    pub(crate) refused_requests: BTreeMap<PodKey, RequestInfo>,
    /// PodDisruptionBudgets by (namespace, name): selector and `status.disruptionsAllowed`.
    pub(crate) budgets: BTreeMap<PodKey, (KubeLabelSelector, u32)>,
    /// Namespace labels, for terms that select namespaces by label.
    pub(crate) namespaces: BTreeMap<Arc<str>, BTreeMap<String, String>>,
    /// Namespaces annotated `caldera.sh/no-consolidate`.
    pub(crate) no_consolidate_namespaces: BTreeSet<Arc<str>>,
    /// Claims, volumes, storage classes, CSINodes, and the pods on nodes that use claims.
    pub(crate) volumes: crate::volumes::VolumeIndex,
    /// DRA: DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates.
    pub(crate) dra: crate::dra::DraIndex,
    /// Nodes booked for provisioned autoscaler requests, by node name: they stick from one
    /// snapshot to the next (see `book_nodes`). The only state a snapshot carries forward.
    pub(crate) bookings: Mutex<BTreeMap<Arc<str>, Booking>>,
    /// `batch/v1` Jobs by (namespace, name), the workloads gangs are derived from.
    pub(crate) jobs: BTreeMap<PodKey, KubeJob>,
    /// Whether Jobs are watched (a Job applied, or Jobs reset): without them no gang is derived and
    /// their pods are scheduled one by one, as before.
    pub(crate) jobs_watched: bool,
    /// Workloads of the kinds in [`crate::derive`] (JobSet, LeaderWorkerSet, ...), by kind,
    /// namespace and name.
    pub(crate) workloads: BTreeMap<(WorkloadKind, Arc<str>, Arc<str>), Workload>,
    /// The kinds of [`Self::workloads`] watched (served by the API server): a pod of a kind not
    /// watched is scheduled as before.
    pub(crate) workload_kinds: BTreeSet<WorkloadKind>,
    /// Optional kinds the API server refuses to list (403), with what their dependants' pods
    /// say while they wait ([`ClusterIndex::set_refused`]).
    pub(crate) refused: BTreeMap<caldera_api::calls::Resource, Arc<str>>,
}

/// The label kube-apiserver puts on every Namespace, naming it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

pub(crate) fn key_of(namespace: &str, name: &str) -> PodKey {
    (Arc::from(namespace), Arc::from(name))
}

impl ClusterIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an object of kind `K` (its previous version is forgotten first). On a
    /// conversion error nothing of it is kept, so nothing stale is scheduled, and the error
    /// names the field.
    pub fn apply<K: Indexed>(&mut self, object: &K) -> Result<()> {
        if let Some(key) = object.key() {
            K::remove(self, key);
        }
        let result = object.insert(self);
        K::changed(self);
        result
    }

    /// Forgets the object `key` of kind `K`; an unknown key is ignored.
    pub fn delete<K: Indexed>(&mut self, key: K::Key<'_>) {
        K::remove(self, key);
        K::changed(self);
    }

    /// Replaces every object of kind `K` (a watch's first list, or a relist). Objects that do
    /// not convert are left out and their errors returned; the rest are kept.
    pub fn reset<'a, K: Indexed + 'a>(
        &mut self,
        objects: impl IntoIterator<Item = &'a K>,
    ) -> Vec<Error> {
        K::clear(self);
        let errors = objects
            .into_iter()
            .filter_map(|o| self.apply(o).err())
            .collect();
        K::changed(self);
        errors
    }

    /// The API server refuses to list the optional kind `resource` (`Some`, with the message
    /// naming the missing permission) or lists it again (`None`). While refused, the pods that
    /// depend on it wait with that message ([`caldera_api::calls::Watch::dependants`]) and
    /// every other pod is scheduled as usual.
    pub fn set_refused(
        &mut self,
        resource: caldera_api::calls::Resource,
        message: Option<Arc<str>>,
    ) {
        match message {
            Some(m) => {
                self.refused.insert(resource, m);
            }
            None => {
                self.refused.remove(&resource);
            }
        }
    }

    /// Why `watch` cannot be read, while the API server refuses it.
    pub fn refused(&self, watch: &caldera_api::calls::Watch) -> Option<&Arc<str>> {
        self.refused.get(&watch.resource)
    }
}
