//! The cluster index: converted objects kept up to date by synchronous `apply`/`delete`/`reset`
//! calls, and the snapshot assembled from them.

use crate::convert::{
    self, implicit_default_queue, missing_queue, GroupInfo, PodInfo, PriorityClassInfo,
};
use crate::derive::{
    gang_part, gang_parts, gang_podgroup_name, pod_candidate, workload_gang, Candidate, Workload,
    WorkloadKind,
};
use crate::error::{Error, Result};
use crate::intern::SpecInterner;
use crate::provisioning::{request_info, RequestInfo};
use crate::workload::{job_finished, job_gang, job_podgroup_name, DerivedWrite, JobGang, Owner};
use caldera_api::ProvisioningRequest;
use caldera_api::{PodGroup, Queue as ApiQueue, DEFAULT_QUEUE};
use caldera_model::{
    Budget, HostPort, Job, LabelSelector, Namespaces, Node, PlacedPod, PlacementSpec, Queue,
    Resources, SelectorOp, Snapshot, Task, TaskStatus, WaitingPod,
};
use caldera_model::{CapacityNeed, CapacityRelease, CapacityRequest, CapacityState, ConsumingPod};
use k8s_openapi::api::batch::v1::Job as KubeJob;
use k8s_openapi::api::core::v1::{
    Namespace, Node as KubeNode, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as KubeLabelSelector;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

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
    fn serves(&self, p: &PodInfo) -> bool {
        !self.gate
            || p.gang_gate
            || (p.group.is_some() && !p.native && (p.node.is_some() || p.held.is_some()))
    }
}

/// `(namespace, name)` of a pod.
type PodKey = (Arc<str>, Arc<str>);

/// What the pods on one node hold.
#[derive(Debug, Default, Clone)]
pub(crate) struct Usage {
    used: Resources,
    pods: i64,
    host_ports: Vec<HostPort>,
}

/// Every object the scheduler looks at, converted, with per-node usage maintained as pods
/// change. Not thread-safe by itself: the runtime wraps it in a lock and takes snapshots under
/// it.
///
/// Invariants: `usage[n]` is Σ over pods `p` with `p.counts_on_node()` and `p.node == n` (the
/// node need not be known yet), its host ports sorted; `members[s][j]` holds exactly the pods with scheduler `s` and
/// job id `j`; `group_refs[g]` counts the pods of any scheduler naming group `g`.
#[derive(Debug, Default)]
pub struct ClusterIndex {
    nodes: BTreeMap<Arc<str>, Node>,
    pub(crate) usage: HashMap<Arc<str>, Usage>,
    pods: BTreeMap<PodKey, PodInfo>,
    members: HashMap<Arc<str>, BTreeMap<Arc<str>, BTreeSet<PodKey>>>,
    group_refs: HashMap<Arc<str>, usize>,
    /// Unbound pods held at a node (`PodInfo::held`).
    held: BTreeSet<PodKey>,
    podgroups: BTreeMap<Arc<str>, GroupInfo>,
    /// Native `scheduling.k8s.io/v1alpha2` PodGroups by `namespace/name` (crate::native).
    native_podgroups: BTreeMap<Arc<str>, crate::native::NativeInfo>,
    /// Native Workloads by `namespace/name`: the queue each names.
    native_workloads: BTreeMap<Arc<str>, Option<Arc<str>>>,
    queues: BTreeMap<Arc<str>, Queue>,
    hypernodes: BTreeMap<Arc<str>, crate::topology::HyperNodeInfo>,
    /// The HyperNode objects as given (discovery reads their owner labels).
    hypernode_objects: BTreeMap<Arc<str>, caldera_api::HyperNode>,
    priority_classes: BTreeMap<Arc<str>, PriorityClassInfo>,
    global_default_priority: Option<i32>,
    specs: SpecInterner,
    /// Pods on nodes by label: key → value → pods (for inter-pod constraints).
    by_label: HashMap<String, HashMap<String, BTreeSet<PodKey>>>,
    /// Pods on nodes with required anti-affinity (they keep matching pods out of their domains).
    anti: BTreeSet<PodKey>,
    /// Pods on nodes with terms that score pods coming to their domains (preferred terms,
    /// required affinity).
    scoring: BTreeSet<PodKey>,
    requests: BTreeMap<PodKey, RequestInfo>,
    /// Autoscaler requests the API server refused as invalid (422), by PodGroup (namespace,
    /// name): never made, so no watch shows them; a snapshot gives them to their job as a
    /// failed request until a write of the PodGroup's requests goes through (see
    /// [`ClusterIndex::refuse_provisioning_request`]).
    refused_requests: BTreeMap<PodKey, RequestInfo>,
    /// PodDisruptionBudgets by (namespace, name): selector and `status.disruptionsAllowed`.
    budgets: BTreeMap<PodKey, (KubeLabelSelector, u32)>,
    /// Namespace labels, for terms that select namespaces by label.
    namespaces: BTreeMap<Arc<str>, BTreeMap<String, String>>,
    /// Namespaces annotated `caldera.sh/no-consolidate`.
    no_consolidate_namespaces: BTreeSet<Arc<str>>,
    /// Claims, volumes, storage classes, CSINodes, and the pods on nodes that use claims.
    volumes: crate::volumes::VolumeIndex,
    /// DRA: DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates.
    dra: crate::dra::DraIndex,
    /// Nodes booked for provisioned autoscaler requests, by node name: they stick from one
    /// snapshot to the next (see `book_nodes`). The only state a snapshot carries forward.
    bookings: Mutex<BTreeMap<Arc<str>, Booking>>,
    /// `batch/v1` Jobs by (namespace, name), the workloads gangs are derived from.
    jobs: BTreeMap<PodKey, KubeJob>,
    /// Whether Jobs are watched (`reset_jobs` was called): without them no gang is derived and
    /// their pods are scheduled one by one, as before.
    jobs_watched: bool,
    /// Workloads of the kinds in [`crate::derive`] (JobSet, LeaderWorkerSet, ...), by kind,
    /// namespace and name.
    workloads: BTreeMap<(WorkloadKind, Arc<str>, Arc<str>), Workload>,
    /// The kinds of [`Self::workloads`] watched (served by the API server): a pod of a kind not
    /// watched is scheduled as before.
    workload_kinds: BTreeSet<WorkloadKind>,
    /// Optional kinds the API server refuses to list (403), with what their dependants' pods
    /// say while they wait ([`ClusterIndex::set_refused`]).
    refused: BTreeMap<caldera_api::calls::Resource, Arc<str>>,
}

/// A gang of a workload of a kind in [`crate::derive`]: kind, namespace, name, part.
type GangKey = (WorkloadKind, Arc<str>, Arc<str>, Option<String>);

/// Derived gangs of one snapshot, cached: per Job, and per [`GangKey`].
#[derive(Default)]
struct DerivedCache {
    jobs: HashMap<PodKey, JobGang>,
    workloads: HashMap<GangKey, JobGang>,
    /// [`ClusterIndex::grouped_by_operator`], once computed.
    operator_grouped: Option<HashSet<WorkloadKey>>,
}

/// A workload by kind, namespace and name.
type WorkloadKey = (WorkloadKind, Arc<str>, Arc<str>);

/// How a pod of ours that names no group is grouped.
enum Resolved {
    /// A group of one, as before.
    Lone,
    /// A member of the derived group with this job id (`namespace/name`).
    Derived(Arc<str>),
    /// Waits, for the derived group with this id, with this message.
    Wait(Arc<str>, Arc<str>),
}

/// The label kube-apiserver puts on every Namespace, naming it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

fn key_of(namespace: &str, name: &str) -> PodKey {
    (Arc::from(namespace), Arc::from(name))
}

impl ClusterIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    // ----- namespaces -----

    /// Adds or replaces a Namespace's labels (with `kubernetes.io/metadata.name`, which
    /// kube-apiserver always sets).
    pub fn apply_namespace(&mut self, ns: &Namespace) {
        let Some(name) = ns.metadata.name.as_deref() else {
            return;
        };
        let mut labels = ns.metadata.labels.clone().unwrap_or_default();
        labels.insert(NAMESPACE_NAME_LABEL.into(), name.to_string());
        self.namespaces.insert(Arc::from(name), labels);
        if crate::consolidation::opted_out(ns.metadata.annotations.as_ref()) {
            self.no_consolidate_namespaces.insert(Arc::from(name));
        } else {
            self.no_consolidate_namespaces.remove(name);
        }
    }

    /// Forgets a Namespace.
    pub fn delete_namespace(&mut self, name: &str) {
        self.namespaces.remove(name);
        self.no_consolidate_namespaces.remove(name);
    }

    /// Replaces every Namespace.
    pub fn reset_namespaces<'a>(&mut self, namespaces: impl IntoIterator<Item = &'a Namespace>) {
        self.namespaces.clear();
        self.no_consolidate_namespaces.clear();
        for ns in namespaces {
            self.apply_namespace(ns);
        }
    }

    /// The namespaces whose labels match `selector`: those of the Namespaces known, and the
    /// namespace of any pod whose Namespace has not been seen (it exists, since the pod does,
    /// with at least its `kubernetes.io/metadata.name` label).
    fn namespaces_matching(&self, selector: &LabelSelector) -> Vec<String> {
        let mut out: Vec<String> = self
            .namespaces
            .iter()
            .filter(|(_, labels)| selector.matches(labels))
            .map(|(n, _)| n.to_string())
            .collect();
        let mut last: Option<&str> = None;
        for (ns, _) in self.pods.keys() {
            if last == Some(&**ns) || self.namespaces.contains_key(ns) {
                continue;
            }
            last = Some(ns);
            let labels = BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), ns.to_string())]);
            if selector.matches(&labels) {
                out.push(ns.to_string());
            }
        }
        out
    }

    /// Resolves the namespace selectors of the tasks' terms against the current Namespaces
    /// (specs shared by several tasks are resolved once and stay shared).
    fn resolve_namespaces(&self, tasks: &mut [Task]) {
        let mut memo: HashMap<*const PlacementSpec, Arc<PlacementSpec>> = HashMap::new();
        let mut matched: HashMap<LabelSelector, Vec<String>> = HashMap::new();
        let mut matching = |s: &LabelSelector| {
            matched
                .entry(s.clone())
                .or_insert_with(|| self.namespaces_matching(s))
                .clone()
        };
        for t in tasks.iter_mut() {
            if !t.spec.pods.selects_namespaces() {
                continue;
            }
            let spec = memo
                .entry(Arc::as_ptr(&t.spec))
                .or_insert_with(|| {
                    let mut spec = (*t.spec).clone();
                    if let Some(pods) = spec.pods.resolve_namespaces(&mut matching) {
                        spec.pods = pods;
                    }
                    Arc::new(spec)
                })
                .clone();
            t.spec = spec;
        }
    }

    // ----- pods -----

    /// Adds or replaces a pod. On a conversion error the pod's previous version is removed
    /// (so nothing stale is scheduled) and the error names the field; the API server validates
    /// the fields that can fail, so this is rare outside hand-written manifests.
    pub fn apply_pod(&mut self, pod: &Pod) -> Result<()> {
        let converted = PodInfo::try_from(pod);
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        if let Some(name) = pod.metadata.name.as_deref() {
            self.delete_pod(namespace, name);
        }
        let mut info = converted?;
        info.spec = self.specs.intern(info.spec);
        self.insert_pod(info);
        Ok(())
    }

    /// Removes a pod; unknown pods are ignored.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) {
        let key = key_of(namespace, name);
        let Some(old) = self.pods.remove(&key) else {
            return;
        };
        self.held.remove(&key);
        self.volumes.users.remove(&key);
        if old.counts_on_node() {
            for (k, v) in old.labels.iter() {
                if let Some(values) = self.by_label.get_mut(k) {
                    if let Some(set) = values.get_mut(v) {
                        set.remove(&key);
                        if set.is_empty() {
                            values.remove(v);
                        }
                    }
                    if values.is_empty() {
                        self.by_label.remove(k);
                    }
                }
            }
            self.anti.remove(&key);
            self.scoring.remove(&key);
            if let Some(node) = &old.node {
                if let Some(u) = self.usage.get_mut(node) {
                    u.used.sub(&old.request);
                    u.pods -= 1;
                    for p in &old.spec.host_ports {
                        if let Ok(i) = u.host_ports.binary_search(p) {
                            u.host_ports.remove(i);
                        }
                    }
                    if u.pods <= 0 {
                        self.usage.remove(node);
                    }
                }
            }
        }
        if let Some(jobs) = self.members.get_mut(&old.scheduler_name) {
            if let Some(set) = jobs.get_mut(&old.job_id) {
                set.remove(&key);
                if set.is_empty() {
                    jobs.remove(&old.job_id);
                }
            }
            if jobs.is_empty() {
                self.members.remove(&old.scheduler_name);
            }
        }
        if old.group.is_some() {
            if let Some(n) = self.group_refs.get_mut(&old.job_id) {
                *n -= 1;
                if *n == 0 {
                    self.group_refs.remove(&old.job_id);
                }
            }
        }
    }

    fn insert_pod(&mut self, info: PodInfo) {
        let key: PodKey = (info.namespace.clone(), info.name.clone());
        if info.counts_on_node() {
            for (k, v) in info.labels.iter() {
                self.by_label
                    .entry(k.clone())
                    .or_default()
                    .entry(v.clone())
                    .or_default()
                    .insert(key.clone());
            }
            if !info.spec.pods.anti_affinity.is_empty() {
                self.anti.insert(key.clone());
            }
            let c = &info.spec.pods;
            if !c.preferred_affinity.is_empty()
                || !c.preferred_anti_affinity.is_empty()
                || !c.affinity.is_empty()
            {
                self.scoring.insert(key.clone());
            }
            if let Some(node) = &info.node {
                let u = self.usage.entry(node.clone()).or_default();
                u.used.add(&info.request);
                u.pods += 1;
                // Kept sorted, so a node's ports do not depend on the order pods arrived in.
                for p in &info.spec.host_ports {
                    let i = u.host_ports.partition_point(|q| q <= p);
                    u.host_ports.insert(i, p.clone());
                }
            }
        }
        self.members
            .entry(info.scheduler_name.clone())
            .or_default()
            .entry(info.job_id.clone())
            .or_default()
            .insert(key.clone());
        if info.group.is_some() {
            *self.group_refs.entry(info.job_id.clone()).or_default() += 1;
        }
        if info.held.is_some() {
            self.held.insert(key.clone());
        }
        if let (Some(node), true) = (&info.node, info.counts_on_node() && !info.claims.is_empty()) {
            self.volumes
                .users
                .insert(key.clone(), (node.clone(), info.claims.clone()));
        }
        self.pods.insert(key, info);
    }

    /// Replaces every pod (a watch restart). Pods that fail to convert are left out and their
    /// errors returned; the rest are loaded.
    pub fn reset_pods<'a>(&mut self, pods: impl IntoIterator<Item = &'a Pod>) -> Vec<Error> {
        self.pods.clear();
        self.usage.clear();
        self.by_label.clear();
        self.anti.clear();
        self.scoring.clear();
        self.members.clear();
        self.group_refs.clear();
        self.held.clear();
        self.volumes.users.clear();
        let mut errors = Vec::new();
        for pod in pods {
            if let Err(e) = self.apply_pod(pod) {
                errors.push(e);
            }
        }
        errors
    }

    /// The converted pod `namespace/name`, if known.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodInfo> {
        self.pods.get(&key_of(namespace, name))
    }

    /// Number of pods known.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    // ----- nodes -----

    /// Adds or replaces a node. On error the previous version is removed.
    pub fn apply_node(&mut self, node: &KubeNode) -> Result<()> {
        if let Some(name) = node.metadata.name.as_deref() {
            self.nodes.remove(name);
        }
        let n = convert::node(node)?;
        self.nodes.insert(n.name.clone(), n);
        Ok(())
    }

    /// Removes a node. Its pods keep counting against the name until they go, so a node that
    /// comes back is not seen empty.
    pub fn delete_node(&mut self, name: &str) {
        self.nodes.remove(name);
    }

    /// Replaces every node.
    pub fn reset_nodes<'a>(&mut self, nodes: impl IntoIterator<Item = &'a KubeNode>) -> Vec<Error> {
        self.nodes.clear();
        nodes
            .into_iter()
            .filter_map(|n| self.apply_node(n).err())
            .collect()
    }

    // ----- jobs (workloads gangs are derived from) -----

    /// Adds or replaces a `batch/v1` Job.
    pub fn apply_job(&mut self, job: &KubeJob) {
        let namespace = job.metadata.namespace.as_deref().unwrap_or("default");
        if let Some(name) = job.metadata.name.as_deref() {
            self.jobs.insert(key_of(namespace, name), job.clone());
        }
        self.jobs_watched = true;
    }

    /// Removes a Job.
    pub fn delete_job(&mut self, namespace: &str, name: &str) {
        self.jobs.remove(&key_of(namespace, name));
    }

    /// Replaces every Job; from now on gangs are derived from them.
    pub fn reset_jobs<'a>(&mut self, jobs: impl IntoIterator<Item = &'a KubeJob>) {
        self.jobs.clear();
        for job in jobs {
            self.apply_job(job);
        }
        self.jobs_watched = true;
    }

    /// The Job `namespace/name`, if known.
    pub fn job(&self, namespace: &str, name: &str) -> Option<&KubeJob> {
        self.jobs.get(&key_of(namespace, name))
    }

    /// Adds or replaces a workload of a kind in [`crate::derive`] (others are ignored); its
    /// kind counts as watched from now on.
    pub fn apply_workload(&mut self, w: &Workload) {
        let Some(kind) = w.workload_kind() else {
            return;
        };
        let namespace = w.metadata.namespace.as_deref().unwrap_or("default");
        if let Some(name) = w.metadata.name.as_deref() {
            let key = (kind, Arc::from(namespace), Arc::from(name));
            // StatefulSets and Deployments are many and grouped only when they ask: the others
            // are not kept (their pods are scheduled as before).
            if kind.opt_in() && !crate::derive::opted_in(w) {
                self.workloads.remove(&key);
            } else {
                self.workloads.insert(key, w.clone());
            }
        }
        self.workload_kinds.insert(kind);
    }

    /// Removes a workload.
    pub fn delete_workload(&mut self, kind: WorkloadKind, namespace: &str, name: &str) {
        self.workloads
            .remove(&(kind, Arc::from(namespace), Arc::from(name)));
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

    /// While the API server refuses HyperNodes, why a gang placed over them waits.
    fn hypernodes_refused(&self, g: &GroupInfo) -> Option<Arc<str>> {
        let m = self.refused(&caldera_api::calls::HYPERNODES)?;
        let over_hypernodes = |t: &Option<caldera_model::Topology>| {
            t.as_ref()
                .is_some_and(|t| t.source == caldera_model::TopologySource::HyperNodes)
        };
        (over_hypernodes(&g.topology)
            || g.sub_group_policies
                .iter()
                .any(|p| over_hypernodes(&p.topology)))
        .then(|| {
            format!("its networkTopology is placed over HyperNodes, which cannot be read: {m}")
                .into()
        })
    }

    /// Why DRA's kinds cannot be read, while the API server refuses one of them.
    fn dra_refused(&self) -> Option<&Arc<str>> {
        use caldera_api::calls;
        [
            &calls::DEVICE_CLASSES,
            &calls::RESOURCE_SLICES,
            &calls::RESOURCE_CLAIMS,
            &calls::RESOURCE_CLAIM_TEMPLATES,
        ]
        .into_iter()
        .find_map(|w| self.refused(w))
    }

    /// Replaces every workload of `kind`; from now on the kind is watched.
    pub fn reset_workloads<'a>(
        &mut self,
        kind: WorkloadKind,
        workloads: impl IntoIterator<Item = &'a Workload>,
    ) {
        self.workloads.retain(|(k, _, _), _| *k != kind);
        for w in workloads {
            if w.workload_kind() == Some(kind) {
                self.apply_workload(w);
            }
        }
        self.workload_kinds.insert(kind);
    }

    /// Stops watching `kind` (its API went away): its workloads are forgotten and its pods
    /// are scheduled as before.
    pub fn unwatch_workloads(&mut self, kind: WorkloadKind) {
        self.workloads.retain(|(k, _, _), _| *k != kind);
        self.workload_kinds.remove(&kind);
    }

    /// The workload `namespace/name` of `kind`, if known.
    pub fn workload(&self, kind: WorkloadKind, namespace: &str, name: &str) -> Option<&Workload> {
        self.workloads
            .get(&(kind, Arc::from(namespace), Arc::from(name)))
    }

    /// The write that brings the existing PodGroup of a derived gang to `pg`, if any: create it
    /// when missing, update its derived fields when they differ; nothing when it is someone
    /// else's (a clash, reported on the pods).
    fn derived_write(&self, pg: PodGroup) -> Option<DerivedWrite> {
        let ns = pg.metadata.namespace.as_deref().unwrap_or("default");
        let id = format!("{ns}/{}", pg.metadata.name.as_deref().unwrap_or(""));
        let Some(existing) = self.podgroups.get(id.as_str()) else {
            return Some(DerivedWrite::Create(pg));
        };
        let owner = Owner::of(&pg.metadata).map(|o| o.uid);
        if existing.owner_uid != owner {
            return None;
        }
        let wanted = GroupInfo::try_from(&pg).ok()?;
        let same = wanted.min_member == existing.min_member
            && wanted.queue == existing.queue
            && wanted.priority_class == existing.priority_class
            && wanted.min_resources == existing.min_resources
            && wanted.timeout_seconds == existing.timeout_seconds;
        if same {
            return None;
        }
        // A merge patch merges maps: the resources the stored minResources has and the
        // derived one has not are cleared by name.
        let kept = wanted
            .min_resources
            .as_ref()
            .map(Resources::to_quantities)
            .unwrap_or_default();
        let removed_resources = existing
            .min_resources
            .as_ref()
            .map(Resources::to_quantities)
            .unwrap_or_default()
            .into_keys()
            .filter(|k| !kept.contains_key(k))
            .collect();
        Some(DerivedWrite::Update {
            podgroup: pg,
            removed_resources,
        })
    }

    /// The writes that bring the PodGroups of workloads whose gang is derived
    /// (docs/workloads.md) up to date: for each known Job that [`job_gang`] groups, in a
    /// namespace `opts.auto_group` covers, not finished, its PodGroup is created when missing
    /// and its spec updated when the Job now derives another one (`parallelism` changed, an
    /// override annotation set). A PodGroup of that name the Job does not own is a clash:
    /// nothing is written (its pods say so). Sorted by namespace, then name.
    pub fn derived_podgroups(&self, opts: &SnapshotOptions) -> Vec<DerivedWrite> {
        if opts.gate || !opts.auto_group.enabled {
            return Vec::new();
        }
        let from_jobs = self
            .jobs
            .iter()
            .filter(|((ns, _), job)| opts.auto_group.covers(ns) && !job_finished(job))
            .filter_map(|(_, job)| match job_gang(job, &opts.scheduler_names) {
                JobGang::Gang(pg) => Some(*pg),
                _ => None,
            });
        let operator_grouped = self.grouped_by_operator();
        let from_workloads = self
            .workloads
            .iter()
            .filter(|((_, ns, _), _)| opts.auto_group.covers(ns))
            .filter(|(key, _)| !operator_grouped.contains(*key))
            .flat_map(|((kind, _, _), w)| {
                gang_parts(w, *kind).into_iter().filter_map(move |part| {
                    match workload_gang(w, *kind, part.as_deref(), &opts.scheduler_names) {
                        JobGang::Gang(pg) => Some(*pg),
                        _ => None,
                    }
                })
            });
        let wanted: Vec<PodGroup> = from_jobs.chain(from_workloads).collect();
        let wanted_ids: HashSet<String> = wanted
            .iter()
            .map(|pg| {
                let m = &pg.metadata;
                let ns = m.namespace.as_deref().unwrap_or("default");
                format!("{ns}/{}", m.name.as_deref().unwrap_or(""))
            })
            .collect();
        let stale = self
            .podgroups
            .values()
            .filter(|g| !wanted_ids.contains(&*g.id) && opts.auto_group.covers(&g.namespace))
            .filter(|g| self.derived_stale(g, opts, &operator_grouped))
            .map(|g| {
                DerivedWrite::Delete(PodGroup {
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        namespace: Some(g.namespace.to_string()),
                        name: Some(g.name.to_string()),
                        uid: (g.uid != g.id).then(|| g.uid.to_string()),
                        ..Default::default()
                    },
                    spec: Default::default(),
                    status: None,
                })
            });
        let mut writes: Vec<DerivedWrite> = wanted
            .into_iter()
            .filter_map(|pg| self.derived_write(pg))
            .chain(stale)
            .collect();
        writes.sort_by(|a, b| {
            let key = |w: &DerivedWrite| {
                let m = &w.podgroup().metadata;
                (m.namespace.clone(), m.name.clone())
            };
            key(a).cmp(&key(b))
        });
        writes
    }

    /// Whether `g` (not wanted by any workload now) is a PodGroup Caldera derived whose
    /// workload, known here by its uid, no longer derives it, and that no pod names: a Job not
    /// grouped any more (not when it finished: it keeps its PodGroup), a part of a workload
    /// that is gone (an LWS group above `replicas`, a JobSet regrouped), a workload not grouped
    /// any more or grouped by its operator ([`Self::grouped_by_operator`]), or a StatefulSet
    /// or Deployment no longer opted in (not kept here). A PodGroup
    /// whose workload is not known is left alone (the garbage collector deletes it with its
    /// owner).
    fn derived_stale(
        &self,
        g: &GroupInfo,
        opts: &SnapshotOptions,
        operator_grouped: &HashSet<WorkloadKey>,
    ) -> bool {
        let Some(owner) = g.derived_owner.as_ref() else {
            return false;
        };
        if self.members.values().any(|jobs| jobs.contains_key(&g.id)) {
            return false;
        }
        let uid_matches = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.uid.as_deref() == Some(&*owner.uid)
        };
        if owner.is_job() {
            let Some(job) = self
                .jobs
                .get(&key_of(&g.namespace, &owner.name))
                .filter(|j| uid_matches(&j.metadata))
            else {
                return false;
            };
            if job_finished(job) || *g.name != job_podgroup_name(&owner.name) {
                return false;
            }
            return matches!(job_gang(job, &opts.scheduler_names), JobGang::NotGrouped(_));
        }
        let Some(kind) = WorkloadKind::of(&owner.api_version, &owner.kind) else {
            return false;
        };
        if !self.workload_kinds.contains(&kind) {
            return false;
        }
        let key = (kind, g.namespace.clone(), owner.name.clone());
        let Some(w) = self.workloads.get(&key) else {
            // Kept unless opted in: a StatefulSet or Deployment not here is no longer grouped
            // (or gone, and its PodGroup with it).
            return kind.opt_in();
        };
        if !uid_matches(&w.metadata) {
            return false;
        }
        if operator_grouped.contains(&key) {
            return true;
        }
        gang_parts(w, kind)
            .into_iter()
            .filter(|part| *g.name == gang_podgroup_name(kind, &owner.name, part.as_deref()))
            .all(|part| {
                matches!(
                    workload_gang(w, kind, part.as_deref(), &opts.scheduler_names),
                    JobGang::NotGrouped(_)
                )
            })
    }

    /// The workloads of a kind whose operator groups its pods
    /// ([`WorkloadKind::operator_groups_pods`]) some pod of which names a group of its own: no
    /// gang is derived for them, their operator's PodGroup stands.
    fn grouped_by_operator(&self) -> HashSet<WorkloadKey> {
        self.pods
            .values()
            .filter(|p| p.group.is_some())
            .filter_map(|p| {
                let c = self.candidate(p)?;
                c.kind
                    .operator_groups_pods()
                    .then(|| (c.kind, p.namespace.clone(), c.name))
            })
            .collect()
    }

    /// How the pod `p` of ours (no group of its own) is grouped: by the gang derived from its
    /// Job when auto-grouping covers it, else alone. `derived` caches [`job_gang`] per Job
    /// for one snapshot.
    fn resolve(&self, p: &PodInfo, opts: &SnapshotOptions, derived: &mut DerivedCache) -> Resolved {
        if opts.gate || !opts.auto_group.covers(&p.namespace) {
            return Resolved::Lone;
        }
        if let Some(c) = self.candidate(p) {
            return self.resolve_workload(p, c, opts, derived);
        }
        let Some(owner) = p.owner.as_ref().filter(|o| o.is_job()) else {
            return Resolved::Lone;
        };
        if !self.jobs_watched {
            return Resolved::Lone;
        }
        let pg_name = job_podgroup_name(&owner.name);
        let id: Arc<str> = format!("{}/{pg_name}", p.namespace).into();
        let key = key_of(&p.namespace, &owner.name);
        let Some(job) = self
            .jobs
            .get(&key)
            .filter(|j| j.metadata.uid.as_deref() == Some(&*owner.uid))
        else {
            let why = format!(
                "waiting for Job {}/{} (its gang is derived from the Job)",
                p.namespace, owner.name
            );
            return Resolved::Wait(id, why.into());
        };
        let gang = derived
            .jobs
            .entry(key)
            .or_insert_with(|| job_gang(job, &opts.scheduler_names));
        match gang {
            JobGang::NotGrouped(_) => Resolved::Lone,
            JobGang::Invalid(why) => Resolved::Wait(id, why.as_str().into()),
            JobGang::Gang(_) => match self.podgroups.get(&id) {
                Some(g) if g.owner_uid.as_deref() != Some(&*owner.uid) => {
                    let why = format!(
                        "PodGroup {id} exists but is not derived from Job {}/{}; Caldera does not adopt it (rename the Job, or delete the PodGroup)",
                        p.namespace, owner.name
                    );
                    Resolved::Wait(id, why.into())
                }
                _ => Resolved::Derived(id),
            },
        }
    }

    /// The derived gang of a kind in [`crate::derive`] the pod belongs to, from its labels and
    /// owner, or — for an MPIJob's launcher — its Job's owner.
    fn candidate(&self, p: &PodInfo) -> Option<Candidate> {
        if let Some(c) = pod_candidate(&p.labels, p.owner.as_ref()) {
            return Some(c);
        }
        let owner = p.owner.as_ref().filter(|o| o.is_job())?;
        let job = self.jobs.get(&key_of(&p.namespace, &owner.name))?;
        let top = Owner::of(&job.metadata)?;
        (WorkloadKind::of(&top.api_version, &top.kind) == Some(WorkloadKind::MpiJob)).then_some(
            Candidate {
                kind: WorkloadKind::MpiJob,
                name: top.name,
                part: None,
                uid: Some(top.uid),
            },
        )
    }

    /// [`Self::resolve`] for a pod of a workload of a kind in [`crate::derive`].
    fn resolve_workload(
        &self,
        p: &PodInfo,
        c: Candidate,
        opts: &SnapshotOptions,
        derived: &mut DerivedCache,
    ) -> Resolved {
        if !self.workload_kinds.contains(&c.kind) {
            return Resolved::Lone;
        }
        let kind = c.kind.kind();
        let key = (c.kind, p.namespace.clone(), c.name.clone());
        let Some(w) = self.workloads.get(&key).filter(|w| {
            c.uid
                .as_deref()
                .is_none_or(|u| w.metadata.uid.as_deref() == Some(u))
        }) else {
            if c.kind.opt_in() {
                // Not kept unless opted in: scheduled as before.
                return Resolved::Lone;
            }
            let part = (c.kind == WorkloadKind::LeaderWorkerSet)
                .then_some(c.part.as_deref())
                .flatten();
            let id = format!(
                "{}/{}",
                p.namespace,
                gang_podgroup_name(c.kind, &c.name, part)
            );
            let refused = self
                .refused(c.kind.watch())
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            let why = format!(
                "waiting for {kind} {}/{} (its gang is derived from it){refused}",
                p.namespace, c.name
            );
            return Resolved::Wait(id.into(), why.into());
        };
        if c.kind.operator_groups_pods()
            && derived
                .operator_grouped
                .get_or_insert_with(|| self.grouped_by_operator())
                .contains(&key)
        {
            // Its operator groups its pods: scheduled as before (in their group).
            return Resolved::Lone;
        }
        let part = gang_part(w, c.kind, c.part.as_deref());
        let id: Arc<str> = format!(
            "{}/{}",
            p.namespace,
            gang_podgroup_name(c.kind, &c.name, part.as_deref())
        )
        .into();
        if part.as_deref() == Some("") {
            let why = format!(
                "the pod has no {} label, so its gang in {kind} {}/{} is unknown",
                if c.kind == WorkloadKind::LeaderWorkerSet {
                    crate::derive::LABEL_LWS_GROUP_INDEX
                } else {
                    crate::derive::LABEL_JOBSET_REPLICATED_JOB
                },
                p.namespace,
                c.name
            );
            return Resolved::Wait(id, why.into());
        }
        let (k, ns, name) = key;
        let gang = derived
            .workloads
            .entry((k, ns, name, part.clone()))
            .or_insert_with(|| workload_gang(w, c.kind, part.as_deref(), &opts.scheduler_names));
        match gang {
            JobGang::NotGrouped(_) => Resolved::Lone,
            JobGang::Invalid(why) => Resolved::Wait(id, why.as_str().into()),
            JobGang::Gang(pg) => {
                let owner = Owner::of(&pg.metadata).map(|o| o.uid);
                match self.podgroups.get(&id) {
                    Some(g) if g.owner_uid != owner => {
                        let why = format!(
                            "PodGroup {id} exists but is not derived from {kind} {}/{}; Caldera does not adopt it (rename the workload, or delete the PodGroup)",
                            p.namespace, c.name
                        );
                        Resolved::Wait(id, why.into())
                    }
                    _ => Resolved::Derived(id),
                }
            }
        }
    }

    // ----- podgroups -----

    /// Adds or replaces a PodGroup. On error the previous version is removed.
    pub fn apply_podgroup(&mut self, pg: &PodGroup) -> Result<()> {
        let namespace = pg.metadata.namespace.as_deref().unwrap_or("default");
        if let Some(name) = pg.metadata.name.as_deref() {
            self.delete_podgroup(namespace, name);
        }
        let g = GroupInfo::try_from(pg)?;
        self.podgroups.insert(g.id.clone(), g);
        Ok(())
    }

    /// Removes a PodGroup; its pods then wait for it.
    pub fn delete_podgroup(&mut self, namespace: &str, name: &str) {
        self.podgroups
            .remove(format!("{namespace}/{name}").as_str());
    }

    /// Replaces every PodGroup.
    pub fn reset_podgroups<'a>(
        &mut self,
        podgroups: impl IntoIterator<Item = &'a PodGroup>,
    ) -> Vec<Error> {
        self.podgroups.clear();
        podgroups
            .into_iter()
            .filter_map(|pg| self.apply_podgroup(pg).err())
            .collect()
    }

    // ----- native PodGroups and Workloads (scheduling.k8s.io/v1alpha2) -----

    /// Adds or replaces a native PodGroup. On error the previous version is removed.
    pub fn apply_native_podgroup(
        &mut self,
        pg: &k8s_openapi::api::scheduling::v1alpha2::PodGroup,
    ) -> Result<()> {
        let namespace = pg.metadata.namespace.as_deref().unwrap_or("default");
        if let Some(name) = pg.metadata.name.as_deref() {
            self.delete_native_podgroup(namespace, name);
        }
        let info = crate::native::podgroup(pg)?;
        self.native_podgroups.insert(info.group.id.clone(), info);
        Ok(())
    }

    /// Removes a native PodGroup; its pods then wait for it.
    pub fn delete_native_podgroup(&mut self, namespace: &str, name: &str) {
        self.native_podgroups
            .remove(format!("{namespace}/{name}").as_str());
    }

    /// Replaces every native PodGroup.
    pub fn reset_native_podgroups<'a>(
        &mut self,
        podgroups: impl IntoIterator<Item = &'a k8s_openapi::api::scheduling::v1alpha2::PodGroup>,
    ) -> Vec<Error> {
        self.native_podgroups.clear();
        podgroups
            .into_iter()
            .filter_map(|pg| self.apply_native_podgroup(pg).err())
            .collect()
    }

    /// Adds or replaces a native Workload (read for the queue it names).
    pub fn apply_native_workload(&mut self, w: &k8s_openapi::api::scheduling::v1alpha2::Workload) {
        let namespace = w.metadata.namespace.as_deref().unwrap_or("default");
        let Some(name) = w.metadata.name.as_deref() else {
            return;
        };
        self.native_workloads.insert(
            format!("{namespace}/{name}").into(),
            crate::native::workload_queue(w),
        );
    }

    /// Removes a native Workload.
    pub fn delete_native_workload(&mut self, namespace: &str, name: &str) {
        self.native_workloads
            .remove(format!("{namespace}/{name}").as_str());
    }

    /// Replaces every native Workload.
    pub fn reset_native_workloads<'a>(
        &mut self,
        workloads: impl IntoIterator<Item = &'a k8s_openapi::api::scheduling::v1alpha2::Workload>,
    ) {
        self.native_workloads.clear();
        for w in workloads {
            self.apply_native_workload(w);
        }
    }

    /// The job of a native PodGroup: its [`GroupInfo`]'s, with the queue resolved through its
    /// Workload and the priority from `spec.priority` or its class (else, later, its pods').
    fn native_job(&self, n: &crate::native::NativeInfo, opts: &SnapshotOptions) -> Job {
        let mut job = self.group_job(&n.group, opts);
        let workload_queue = || {
            let w = n.source.workload.as_deref()?;
            self.native_workloads
                .get(format!("{}/{w}", n.group.namespace).as_str())
                .cloned()
                .flatten()
        };
        if n.own_queue.is_none() {
            if let Some(q) = workload_queue() {
                job.queue = q;
            }
        }
        if let Some(p) = n.priority {
            job.priority = p;
        }
        job.native = Some(n.source.clone());
        job
    }

    // ----- queues -----

    /// Adds or replaces a Queue. On error the previous version is removed.
    pub fn apply_queue(&mut self, q: &ApiQueue) -> Result<()> {
        if let Some(name) = q.metadata.name.as_deref() {
            self.queues.remove(name);
        }
        let q = convert::queue(q)?;
        self.queues.insert(q.name.clone(), q);
        Ok(())
    }

    /// Removes a Queue.
    pub fn delete_queue(&mut self, name: &str) {
        self.queues.remove(name);
    }

    /// Replaces every Queue.
    pub fn reset_queues<'a>(
        &mut self,
        queues: impl IntoIterator<Item = &'a ApiQueue>,
    ) -> Vec<Error> {
        self.queues.clear();
        queues
            .into_iter()
            .filter_map(|q| self.apply_queue(q).err())
            .collect()
    }

    // ----- hypernodes -----

    /// Adds or replaces a HyperNode. On error the previous version is removed.
    pub fn apply_hypernode(&mut self, hn: &caldera_api::HyperNode) -> Result<()> {
        if let Some(name) = hn.metadata.name.as_deref() {
            self.hypernodes.remove(name);
        }
        if let Some(name) = hn.metadata.name.as_deref() {
            // Kept even when it does not convert: discovery must still see what it owns.
            self.hypernode_objects.insert(name.into(), hn.clone());
        }
        let info = crate::topology::HyperNodeInfo::try_from(hn)?;
        self.hypernodes.insert(info.name.clone(), info);
        Ok(())
    }

    /// Removes a HyperNode.
    pub fn delete_hypernode(&mut self, name: &str) {
        self.hypernodes.remove(name);
        self.hypernode_objects.remove(name);
    }

    /// Every HyperNode object, by name.
    pub fn hypernode_objects(&self) -> impl Iterator<Item = &caldera_api::HyperNode> {
        self.hypernode_objects.values()
    }

    /// Per HyperNode of the tree: how many nodes lie under it, at any depth (Volcano's
    /// `status.nodeCount`).
    pub fn hypernode_node_counts(&self) -> BTreeMap<Arc<str>, i64> {
        let nodes: Vec<Node> = self.nodes.values().cloned().collect();
        let tree = crate::topology::build_tree(&self.hypernodes, &nodes);
        tree.domains
            .iter()
            .map(|d| (d.name.clone(), d.nodes.len() as i64))
            .collect()
    }

    /// Every node's name and labels, by name (what HyperNode discovery reads).
    pub fn node_labels(&self) -> Vec<crate::discovery::NodeLabels<'_>> {
        self.nodes.values().map(|n| (&*n.name, &n.labels)).collect()
    }

    /// Replaces every HyperNode.
    pub fn reset_hypernodes<'a>(
        &mut self,
        hypernodes: impl IntoIterator<Item = &'a caldera_api::HyperNode>,
    ) -> Vec<Error> {
        self.hypernodes.clear();
        self.hypernode_objects.clear();
        hypernodes
            .into_iter()
            .filter_map(|h| self.apply_hypernode(h).err())
            .collect()
    }

    // ----- pod disruption budgets -----

    /// Adds or replaces a PodDisruptionBudget (its selector and `disruptionsAllowed`).
    pub fn apply_budget(&mut self, pdb: &PodDisruptionBudget) {
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or("default");
        let Some(name) = pdb.metadata.name.as_deref() else {
            return;
        };
        let key = key_of(namespace, name);
        // A budget without a selector covers nothing.
        let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.clone()) else {
            self.budgets.remove(&key);
            return;
        };
        let allowed = pdb
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed)
            .unwrap_or(0)
            .max(0) as u32;
        self.budgets.insert(key, (selector, allowed));
    }

    /// Removes a PodDisruptionBudget.
    pub fn delete_budget(&mut self, namespace: &str, name: &str) {
        self.budgets.remove(&key_of(namespace, name));
    }

    /// Replaces every PodDisruptionBudget.
    pub fn reset_budgets<'a>(
        &mut self,
        budgets: impl IntoIterator<Item = &'a PodDisruptionBudget>,
    ) {
        self.budgets.clear();
        for b in budgets {
            self.apply_budget(b);
        }
    }

    /// The budget the eviction API will judge a running pod by: the one budget whose selector
    /// (not empty: the eviction API lets none match) matches its labels, or a budget allowing
    /// nothing when several do (the API refuses those evictions).
    fn budget_of(&self, p: &PodInfo, budgets: &mut Vec<Budget>) -> Option<u32> {
        if p.phase != convert::PodPhase::Running || p.terminating {
            return None;
        }
        let ns = p.namespace.clone();
        let range = (ns.clone(), Arc::from(""))..;
        let matching: Vec<(&PodKey, u32)> = self
            .budgets
            .range(range)
            .take_while(|(k, _)| k.0 == ns)
            .filter(|(_, (sel, _))| {
                !crate::labels::is_empty(sel) && crate::labels::matches(sel, Some(&p.labels))
            })
            .map(|(k, (_, allowed))| (k, *allowed))
            .collect();
        let (id, allowed): (Arc<str>, u32) = match matching.as_slice() {
            [] => return None,
            [(k, allowed)] => (format!("{}/{}", k.0, k.1).into(), *allowed),
            _ => (format!("{ns}/(several budgets)").into(), 0),
        };
        let index = match budgets.iter().position(|b| b.id == id) {
            Some(i) => i,
            None => {
                budgets.push(Budget { id, allowed });
                budgets.len() - 1
            }
        };
        Some(index as u32)
    }

    // ----- dynamic resource allocation -----

    /// Adds or replaces a DeviceClass. On error the previous version is removed.
    pub fn apply_device_class(
        &mut self,
        c: &k8s_openapi::api::resource::v1::DeviceClass,
    ) -> Result<()> {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        self.dra.classes.remove(name);
        let class = crate::dra::device_class(c)?;
        self.dra.classes.insert(class.name.clone(), class);
        Ok(())
    }

    /// Removes a DeviceClass.
    pub fn delete_device_class(&mut self, name: &str) {
        self.dra.classes.remove(name);
    }

    /// Replaces every DeviceClass.
    pub fn reset_device_classes<'a>(
        &mut self,
        classes: impl IntoIterator<Item = &'a k8s_openapi::api::resource::v1::DeviceClass>,
    ) -> Vec<Error> {
        self.dra.classes.clear();
        classes
            .into_iter()
            .filter_map(|c| self.apply_device_class(c).err())
            .collect()
    }

    /// Adds or replaces a ResourceSlice. On error the previous version is removed (its pool
    /// then counts a slice short, so it is not used until a valid version arrives).
    pub fn apply_resource_slice(
        &mut self,
        s: &k8s_openapi::api::resource::v1::ResourceSlice,
    ) -> Result<()> {
        let name = s.metadata.name.as_deref().unwrap_or_default();
        self.dra.slices.remove(name);
        let slice = crate::dra::slice(s)?;
        self.dra.slices.insert(Arc::from(name), slice);
        Ok(())
    }

    /// Removes a ResourceSlice.
    pub fn delete_resource_slice(&mut self, name: &str) {
        self.dra.slices.remove(name);
    }

    /// Replaces every ResourceSlice.
    pub fn reset_resource_slices<'a>(
        &mut self,
        slices: impl IntoIterator<Item = &'a k8s_openapi::api::resource::v1::ResourceSlice>,
    ) -> Vec<Error> {
        self.dra.slices.clear();
        slices
            .into_iter()
            .filter_map(|s| self.apply_resource_slice(s).err())
            .collect()
    }

    /// Adds or replaces a ResourceClaim. On error the previous version is removed (pods using
    /// it wait, saying it is not found).
    pub fn apply_resource_claim(
        &mut self,
        c: &k8s_openapi::api::resource::v1::ResourceClaim,
    ) -> Result<()> {
        let namespace = c.metadata.namespace.as_deref().unwrap_or("default");
        let name = c.metadata.name.as_deref().unwrap_or_default();
        self.delete_resource_claim(namespace, name);
        let claim = crate::dra::claim(c)?;
        self.dra.claims.insert(key_of(namespace, name), claim);
        Ok(())
    }

    /// Removes a ResourceClaim.
    pub fn delete_resource_claim(&mut self, namespace: &str, name: &str) {
        self.dra.claims.remove(&key_of(namespace, name));
    }

    /// Replaces every ResourceClaim.
    pub fn reset_resource_claims<'a>(
        &mut self,
        claims: impl IntoIterator<Item = &'a k8s_openapi::api::resource::v1::ResourceClaim>,
    ) -> Vec<Error> {
        self.dra.claims.clear();
        claims
            .into_iter()
            .filter_map(|c| self.apply_resource_claim(c).err())
            .collect()
    }

    /// Adds or replaces a ResourceClaimTemplate.
    pub fn apply_resource_claim_template(
        &mut self,
        t: &k8s_openapi::api::resource::v1::ResourceClaimTemplate,
    ) -> Result<()> {
        let key = crate::dra::template(t)?;
        self.dra.templates.insert(key);
        Ok(())
    }

    /// Removes a ResourceClaimTemplate.
    pub fn delete_resource_claim_template(&mut self, namespace: &str, name: &str) {
        self.dra.templates.remove(&key_of(namespace, name));
    }

    /// Replaces every ResourceClaimTemplate.
    pub fn reset_resource_claim_templates<'a>(
        &mut self,
        templates: impl IntoIterator<Item = &'a k8s_openapi::api::resource::v1::ResourceClaimTemplate>,
    ) -> Vec<Error> {
        self.dra.templates.clear();
        templates
            .into_iter()
            .filter_map(|t| self.apply_resource_claim_template(t).err())
            .collect()
    }

    // ----- volumes -----

    /// Adds or replaces a PersistentVolumeClaim. On error the previous version is removed.
    pub fn apply_claim(&mut self, pvc: &PersistentVolumeClaim) -> Result<()> {
        let namespace = pvc.metadata.namespace.as_deref().unwrap_or("default");
        let name = pvc.metadata.name.as_deref().unwrap_or_default();
        self.delete_claim(namespace, name);
        let c = crate::volumes::claim(pvc)?;
        self.volumes.claims.insert(key_of(namespace, name), c);
        Ok(())
    }

    /// Removes a PersistentVolumeClaim.
    pub fn delete_claim(&mut self, namespace: &str, name: &str) {
        let key = key_of(namespace, name);
        self.volumes.claims.remove(&key);
        self.volumes.watched_claims.remove(&key);
    }

    /// Replaces every PersistentVolumeClaim.
    pub fn reset_claims<'a>(
        &mut self,
        claims: impl IntoIterator<Item = &'a PersistentVolumeClaim>,
    ) -> Vec<Error> {
        self.volumes.claims.clear();
        self.volumes.watched_claims.clear();
        claims
            .into_iter()
            .filter_map(|c| self.apply_claim(c).err())
            .collect()
    }

    /// Adds or replaces a PersistentVolume. On error the previous version is removed.
    pub fn apply_volume(&mut self, pv: &PersistentVolume) -> Result<()> {
        if let Some(name) = pv.metadata.name.as_deref() {
            self.delete_volume(name);
        }
        let v = crate::volumes::volume(pv)?;
        self.volumes.volumes.insert(v.volume.name.clone(), v);
        Ok(())
    }

    /// Removes a PersistentVolume.
    pub fn delete_volume(&mut self, name: &str) {
        self.volumes.volumes.remove(name);
        self.volumes.watched_volumes.remove(name);
    }

    /// Replaces every PersistentVolume.
    pub fn reset_volumes<'a>(
        &mut self,
        volumes: impl IntoIterator<Item = &'a PersistentVolume>,
    ) -> Vec<Error> {
        self.volumes.volumes.clear();
        self.volumes.watched_volumes.clear();
        volumes
            .into_iter()
            .filter_map(|v| self.apply_volume(v).err())
            .collect()
    }

    /// Adds or replaces a StorageClass. On error the previous version is removed.
    pub fn apply_storage_class(&mut self, sc: &StorageClass) -> Result<()> {
        let name = sc.metadata.name.as_deref().unwrap_or_default();
        self.volumes.classes.remove(name);
        let c = crate::volumes::class(sc)?;
        self.volumes.classes.insert(Arc::from(name), c);
        Ok(())
    }

    /// Removes a StorageClass.
    pub fn delete_storage_class(&mut self, name: &str) {
        self.volumes.classes.remove(name);
    }

    /// Replaces every StorageClass.
    pub fn reset_storage_classes<'a>(
        &mut self,
        classes: impl IntoIterator<Item = &'a StorageClass>,
    ) -> Vec<Error> {
        self.volumes.classes.clear();
        classes
            .into_iter()
            .filter_map(|c| self.apply_storage_class(c).err())
            .collect()
    }

    /// Adds or replaces a CSINode (its drivers' attach limits).
    pub fn apply_csinode(&mut self, n: &CSINode) {
        if let Some(name) = n.metadata.name.as_deref() {
            self.volumes
                .csinodes
                .insert(Arc::from(name), crate::volumes::csinode_limits(n));
        }
    }

    /// Removes a CSINode.
    pub fn delete_csinode(&mut self, name: &str) {
        self.volumes.csinodes.remove(name);
    }

    /// Records a volume write the binder is about to send as if the watch had shown it, so the
    /// next session does not choose again before the claim or volume comes back (as
    /// kube-scheduler's assume cache does). The watched object replaces it when it arrives.
    pub fn assume_volume_write(
        &mut self,
        w: &caldera_model::VolumeWrite,
        now: caldera_model::Time,
    ) {
        use caldera_model::VolumeWrite;
        match w {
            VolumeWrite::SelectNode {
                namespace,
                claim,
                node,
            } => {
                if let Some(c) = self.volumes.assumed_claim(namespace, claim) {
                    c.selected_node = Some(node.clone());
                    c.selected_at = Some(now);
                }
            }
            VolumeWrite::Unselect { namespace, claim } => {
                if let Some(c) = self.volumes.assumed_claim(namespace, claim) {
                    c.selected_node = None;
                    c.selected_at = None;
                }
            }
            VolumeWrite::PreBind {
                volume,
                namespace,
                claim,
                uid,
            } => {
                if let Some(v) = self.volumes.assumed_volume(volume) {
                    v.claim_ref = Some((namespace.clone(), claim.clone(), uid.clone()));
                    v.volume.claim_ref = Some(format!("{namespace}/{claim}").into());
                    v.selected_at = Some(now);
                }
            }
        }
    }

    /// A volume write the binder gave up on (refused, failed every attempt, or cancelled by a
    /// lost leadership): the claim or volume is as last watched again, so the next session
    /// decides afresh instead of waiting for a write that never landed. Nothing changes if the
    /// watch has delivered the object since.
    pub fn volume_write_failed(&mut self, w: &caldera_model::VolumeWrite) {
        self.volumes.write_failed(w);
    }

    /// Replaces every CSINode.
    pub fn reset_csinodes<'a>(&mut self, nodes: impl IntoIterator<Item = &'a CSINode>) {
        self.volumes.csinodes.clear();
        for n in nodes {
            self.apply_csinode(n);
        }
    }

    // ----- priority classes -----

    /// Adds or replaces a PriorityClass.
    pub fn apply_priority_class(&mut self, pc: &PriorityClass) -> Result<()> {
        if let Some(name) = pc.metadata.name.as_deref() {
            self.priority_classes.remove(name);
        }
        let result = convert::priority_class(pc).map(|info| {
            self.priority_classes.insert(info.name.clone(), info);
        });
        self.refresh_global_default();
        result
    }

    /// Removes a PriorityClass.
    pub fn delete_priority_class(&mut self, name: &str) {
        self.priority_classes.remove(name);
        self.refresh_global_default();
    }

    /// Replaces every PriorityClass.
    pub fn reset_priority_classes<'a>(
        &mut self,
        classes: impl IntoIterator<Item = &'a PriorityClass>,
    ) -> Vec<Error> {
        self.priority_classes.clear();
        let errors = classes
            .into_iter()
            .filter_map(|pc| self.apply_priority_class(pc).err())
            .collect();
        self.refresh_global_default();
        errors
    }

    /// Kubernetes allows one global default; should several exist anyway, the highest value
    /// wins, so the answer does not depend on arrival order.
    fn refresh_global_default(&mut self) {
        self.global_default_priority = self
            .priority_classes
            .values()
            .filter(|pc| pc.global_default)
            .map(|pc| pc.value)
            .max();
    }

    /// A priority: the explicit value, else the named class's, else the global default, else 0.
    fn priority(&self, explicit: Option<i32>, class: Option<&Arc<str>>) -> i32 {
        explicit
            .or_else(|| {
                class
                    .and_then(|c| self.priority_classes.get(c))
                    .map(|pc| pc.value)
            })
            .or(self.global_default_priority)
            .unwrap_or(0)
    }

    // ----- autoscaler requests -----

    /// Adds or replaces a ProvisioningRequest; requests Caldera did not make are ignored.
    pub fn apply_provisioning_request(&mut self, pr: &ProvisioningRequest) {
        let namespace = pr.metadata.namespace.as_deref().unwrap_or("default");
        let name = pr.metadata.name.as_deref().unwrap_or_default();
        self.delete_provisioning_request(namespace, name);
        if let Some(info) = request_info(pr) {
            self.requests.insert(key_of(namespace, name), info);
        }
    }

    /// Removes a ProvisioningRequest.
    pub fn delete_provisioning_request(&mut self, namespace: &str, name: &str) {
        self.requests.remove(&key_of(namespace, name));
    }

    /// Replaces every ProvisioningRequest.
    pub fn reset_provisioning_requests<'a>(
        &mut self,
        requests: impl IntoIterator<Item = &'a ProvisioningRequest>,
    ) {
        self.requests.clear();
        for pr in requests {
            self.apply_provisioning_request(pr);
        }
    }

    /// Records that the API server refused to make `need` (422), `why` naming the fields:
    /// until a later write of the PodGroup's requests succeeds, its job has this request in
    /// state `Failed` with that message, so the PodGroup's condition says why, and the next
    /// attempt (with whatever changed) waits for the request back-off instead of being sent
    /// again every session.
    pub fn refuse_provisioning_request(
        &mut self,
        need: &CapacityNeed,
        why: &str,
        now: caldera_model::Time,
    ) {
        let info = RequestInfo {
            podgroup: need.podgroup.clone(),
            podgroup_uid: need.podgroup_uid.clone(),
            request: CapacityRequest {
                namespace: need.namespace.clone(),
                name: need.name.clone(),
                attempt: need.attempt,
                created: now,
                state: CapacityState::Failed,
                since: now,
                message: format!("refused by the API server as invalid: {why}"),
                pod_sets: u32::try_from(need.pod_sets.len()).unwrap_or(u32::MAX),
            },
        };
        self.refused_requests
            .insert(key_of(&need.namespace, &need.podgroup), info);
    }

    /// Forgets the refusal recorded for the PodGroup `namespace/podgroup` (a write of its
    /// requests went through).
    pub fn forget_refused_provisioning_request(&mut self, namespace: &str, podgroup: &str) {
        self.refused_requests.remove(&key_of(namespace, podgroup));
    }

    /// Caldera's requests, by namespace and name.
    pub fn provisioning_requests(&self) -> impl Iterator<Item = &RequestInfo> {
        self.requests.values()
    }

    /// Gives each job its request (the newest one made for its PodGroup, by uid); every other
    /// request of Caldera's is stale. Then books nodes for provisioned requests.
    fn attach_requests(&self, snap: &mut Snapshot, opts: &SnapshotOptions) {
        let Some(policy) = &opts.provisioning else {
            return;
        };
        snap.provisioning = Some(policy.clone());
        let mut by_uid: HashMap<&str, usize> = HashMap::new();
        for (i, job) in snap.jobs.iter().enumerate() {
            if job.has_podgroup() {
                by_uid.insert(&job.uid, i);
            }
        }
        let mut owner: Vec<(usize, &RequestInfo)> = Vec::new();
        for info in self.requests.values() {
            match by_uid.get(&*info.podgroup_uid) {
                Some(&j) if *snap.jobs[j].namespace == *info.request.namespace => {
                    owner.push((j, info))
                }
                _ => snap.stale_capacity.push(CapacityRelease {
                    namespace: info.request.namespace.clone(),
                    podgroup: info.podgroup.clone(),
                    name: info.request.name.clone(),
                    pods: consuming(snap, &info.request.namespace, &info.request.name),
                    pod_sets: info.request.pod_sets,
                    why: format!("its PodGroup {} is gone", info.podgroup),
                }),
            }
        }
        let refused: Vec<(usize, &RequestInfo)> = self
            .refused_requests
            .values()
            .filter_map(|info| {
                let &j = by_uid.get(&*info.podgroup_uid)?;
                (*snap.jobs[j].namespace == *info.request.namespace).then_some((j, info))
            })
            .collect();
        // Newest attempt (then newest, then last name) wins; the others are stale.
        owner.sort_by(|a, b| {
            let (ra, rb) = (&a.1.request, &b.1.request);
            a.0.cmp(&b.0)
                .then(rb.attempt.cmp(&ra.attempt))
                .then(rb.created.cmp(&ra.created))
                .then(rb.name.cmp(&ra.name))
        });
        let mut last = None;
        for (j, info) in owner {
            if last == Some(j) {
                snap.stale_capacity.push(CapacityRelease {
                    namespace: info.request.namespace.clone(),
                    podgroup: info.podgroup.clone(),
                    name: info.request.name.clone(),
                    pods: consuming(snap, &info.request.namespace, &info.request.name),
                    pod_sets: info.request.pod_sets,
                    why: format!("PodGroup {} has a newer request", snap.jobs[j].id),
                });
                continue;
            }
            last = Some(j);
            snap.jobs[j].capacity = Some(info.request.clone());
        }
        // A refused request stands for an attempt no watch shows: the job's, unless a request
        // of that attempt or a later one exists.
        for (j, info) in refused {
            let job = &mut snap.jobs[j];
            if job
                .capacity
                .as_ref()
                .is_none_or(|c| c.attempt < info.request.attempt)
            {
                job.capacity = Some(info.request.clone());
            }
        }
        let mut kept = self.bookings.lock().unwrap_or_else(PoisonError::into_inner);
        book_nodes(snap, &mut kept);
    }

    // ----- snapshot -----

    /// Assembles a snapshot. Nothing is re-converted: nodes get their usage from the running
    /// totals, and only our pods (by `opts.scheduler_names`) are visited. Deterministic: the
    /// same objects and options give an equal snapshot, given the same nodes booked for
    /// provisioned autoscaler requests by the snapshots before (bookings stick, see
    /// `book_nodes`; with none, a fresh index derives them from the objects alone).
    ///
    /// - Every node, with `used`/`pod_count`/`host_ports` from all pods on it.
    /// - One job per PodGroup that has at least one of our pods or no pods at all (a PodGroup
    ///   whose pods all belong to another scheduler is left to that scheduler), and one
    ///   implicit job per pod of ours without a group.
    /// - Our pending pods whose PodGroup does not exist go to `waiting`.
    /// - Every queue, plus `default` if missing, plus a closed stand-in for each queue a job
    ///   names that does not exist.
    pub fn snapshot(&self, opts: &SnapshotOptions) -> Snapshot {
        let mut nodes: Vec<Node> = self
            .nodes
            .values()
            .map(|n| {
                let mut n = n.clone();
                if let Some(u) = self.usage.get(&n.name) {
                    n.used = u.used.clone();
                    n.pod_count = u.pods;
                    n.host_ports = u.host_ports.clone();
                }
                n
            })
            .collect();

        // Job id -> our pods, in name order.
        let mut names: Vec<&str> = opts.scheduler_names.iter().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        // Pods held at a node count there for everyone: kube-scheduler's nominated pods, and
        // in gate mode our released members. In run mode our own held pods are the session's
        // to place, so they do not count twice.
        for p in self.held.iter().filter_map(|k| self.pods.get(k)) {
            let ours = names.binary_search(&&*p.scheduler_name).is_ok();
            let Some(node) = &p.held else { continue };
            if ours && !opts.gate {
                continue;
            }
            if let Ok(i) = nodes.binary_search_by(|n| n.name.cmp(node)) {
                nodes[i].add_pod(&p.request, &p.spec.host_ports);
            }
        }
        if let (true, Some(predict)) = (opts.gate, opts.predict) {
            let pending: Vec<(&PodInfo, i32)> = names
                .iter()
                .flat_map(|n| self.members.get(*n).into_iter().flatten())
                .flat_map(|(_, keys)| keys.iter().filter_map(|k| self.pods.get(k)))
                .filter(|p| {
                    !opts.serves(p)
                        && p.status() == TaskStatus::Pending
                        && !p.gated
                        && p.held.is_none()
                })
                .map(|p| (p, self.priority(p.spec_priority, p.priority_class.as_ref())))
                .collect();
            if !pending.is_empty() {
                (predict.0)(&mut nodes, &pending);
            }
        }
        let mut by_job: BTreeMap<Arc<str>, Vec<&PodInfo>> = BTreeMap::new();
        // Jobs of pods that name no group but belong to a gang derived from their workload,
        // with the message of those that must wait.
        let mut derived_ids: HashMap<Arc<str>, Option<Arc<str>>> = HashMap::new();
        let mut derived = DerivedCache::default();
        for name in &names {
            for (job, keys) in self.members.get(*name).into_iter().flatten() {
                let mut served = keys
                    .iter()
                    .filter_map(|k| self.pods.get(k))
                    .filter(|p| opts.serves(p))
                    .peekable();
                let Some(first) = served.peek() else {
                    continue;
                };
                let mut id = job.clone();
                if let (Some(group), Some(_)) = (&first.group, &first.owner) {
                    // A pod of a group of its own whose owner derives a gang: the explicit
                    // group keeps it, and the derived gang waits saying why (a pod is never in
                    // two gangs; Caldera does not guess).
                    if let Resolved::Derived(g) = self.resolve(first, opts, &mut derived) {
                        let why = format!(
                            "pod {}/{} names PodGroup {group} of its own and also belongs to the gang {g} derived from its workload; a pod is never in two gangs (name the PodGroup in the workload's pod template, or opt the workload out)",
                            first.namespace, first.name
                        );
                        derived_ids.insert(g, Some(why.into()));
                    }
                } else if first.group.is_none() {
                    match self.resolve(first, opts, &mut derived) {
                        Resolved::Lone => {}
                        Resolved::Derived(g) => {
                            derived_ids.entry(g.clone()).or_insert(None);
                            id = g;
                        }
                        Resolved::Wait(g, why) => {
                            derived_ids.insert(g.clone(), Some(why));
                            id = g;
                        }
                    }
                }
                let entry = by_job.entry(id).or_default();
                let merging = !entry.is_empty();
                entry.extend(served);
                if merging {
                    entry.sort_by(|a, b| a.name.cmp(&b.name));
                }
            }
        }
        // In gate mode native PodGroups are kube-scheduler's (see `serves`).
        let native_ids = self.native_podgroups.keys().filter(|_| !opts.gate);
        for id in self.podgroups.keys().chain(native_ids) {
            if !self.group_refs.contains_key(id) {
                by_job.entry(id.clone()).or_default();
            }
        }

        let mut snap = Snapshot::default();
        // Members whose claims ask alike share one spec.
        let mut volume_specs: HashSet<Arc<PlacementSpec>> = HashSet::new();
        let mut with_claims = false;
        for (id, pods) in by_job {
            let why = derived_ids.get(&id);
            let grouped = why.is_some() || pods.first().is_none_or(|p| p.group.is_some());
            // Members naming the native PodGroup of this name (`spec.schedulingGroup`), or with
            // no members, the PodGroup of either API that exists.
            let native = match pods.first() {
                Some(p) => p.native,
                None => !self.podgroups.contains_key(&id),
            };
            let mixed = pods.iter().any(|p| p.native != native);
            let clash: Option<Arc<str>> = mixed.then(|| {
                format!(
                    "pods name {id} both as a native scheduling.k8s.io PodGroup (spec.schedulingGroup) and as a Volcano PodGroup; Caldera does not guess which gang is meant"
                )
                .into()
            });
            let why_native = clash.as_ref().map(|c| Some(c.clone()));
            let why = why.or(why_native.as_ref());
            let native_missing = native && !self.native_podgroups.contains_key(&id);
            let why_missing: Option<Option<Arc<str>>> = (native_missing && why.is_none()).then(|| {
                let refused = self
                    .refused(&caldera_api::calls::NATIVE_PODGROUPS)
                    .or_else(|| self.refused(&caldera_api::calls::NATIVE_WORKLOADS));
                Some(
                    match refused {
                        Some(m) => format!(
                            "PodGroup {id} (scheduling.k8s.io/v1alpha2, named by spec.schedulingGroup) cannot be read: {m}"
                        ),
                        None => format!(
                            "PodGroup {id} (scheduling.k8s.io/v1alpha2, named by spec.schedulingGroup) does not exist yet"
                        ),
                    }
                    .into(),
                )
            });
            let why = why.or(why_missing.as_ref());
            let job = if grouped {
                let found = if native {
                    self.native_podgroups
                        .get(&id)
                        .map(|n| self.native_job(n, opts))
                } else {
                    self.podgroups.get(&id).map(|g| self.group_job(g, opts))
                };
                match found.filter(|_| why.is_none_or(Option::is_none)) {
                    Some(job) => job,
                    None => {
                        snap.waiting.extend(
                            pods.iter()
                                .filter(|p| p.status() == TaskStatus::Pending)
                                .map(|p| WaitingPod {
                                    uid: p.uid.clone(),
                                    namespace: p.namespace.clone(),
                                    name: p.name.clone(),
                                    group: id.clone(),
                                    why: why.cloned().flatten(),
                                    created: p.created,
                                    pending_reason: p.pending_reason.clone(),
                                    consumes: p.consumes.clone(),
                                }),
                        );
                        continue;
                    }
                }
            } else {
                // Without a group the job id is unique to the pod, so there is exactly one.
                let Some(pod) = pods.first() else { continue };
                self.implicit_job(pod)
            };
            let job_index = snap.jobs.len();
            let mut job = job;
            let group_opted_out = grouped
                && if native {
                    self.native_podgroups
                        .get(&id)
                        .is_some_and(|n| n.group.no_consolidate)
                } else {
                    self.podgroups.get(&id).is_some_and(|g| g.no_consolidate)
                };
            for p in pods {
                job.tasks.push(snap.tasks.len());
                let mut task = self.task(p, job_index);
                task.no_consolidate |=
                    group_opted_out || self.no_consolidate_namespaces.contains(&p.namespace);
                if task.status == TaskStatus::Pending && !p.claims.is_empty() {
                    if let Some((needs, names)) = self.volumes.resolve(p) {
                        let mut spec = (*task.spec).clone();
                        spec.volumes = needs;
                        task.spec = match volume_specs.get(&spec) {
                            Some(shared) => Arc::clone(shared),
                            None => {
                                let shared = Arc::new(spec);
                                volume_specs.insert(shared.clone());
                                shared
                            }
                        };
                        task.volumes = Some(Arc::new(names));
                        with_claims = true;
                    }
                }
                // Bound members too: their claims' devices count for their queues and are freed
                // for a preemptor when they are victims (caldera_session::devices).
                if !matches!(task.status, TaskStatus::Succeeded | TaskStatus::Failed)
                    && (p.resource_claims.is_some() || !p.extended.is_empty())
                {
                    let none = crate::dra::PodClaims::default();
                    let refs = p.resource_claims.as_deref().unwrap_or(&none);
                    let mut claims = self.dra.task_claims(refs, &p.extended);
                    if let Some(c) = claims
                        .as_mut()
                        .filter(|_| task.status == TaskStatus::Pending && !refs.refs.is_empty())
                    {
                        if let Some(m) = self.dra_refused() {
                            c.waiting = Some(m.clone());
                        }
                    }
                    task.claims = claims.map(Arc::new);
                }
                if !self.budgets.is_empty() {
                    task.budget = self.budget_of(p, &mut snap.budgets);
                }
                if !opts.gate && task.status == TaskStatus::Pending {
                    // Our own nominated members: capacity is held for them in the session.
                    task.nominated = p.held.clone().filter(|_| p.node.is_none());
                }
                if opts.gate {
                    task.gated = p.other_gates;
                    if task.status == TaskStatus::Pending && !p.gang_gate {
                        task.status = TaskStatus::Binding;
                        task.node = p.held.clone();
                    }
                }
                snap.tasks.push(task);
            }
            if !grouped {
                if let Some(t) = snap.tasks.last() {
                    job.priority = t.priority;
                }
            } else if native {
                let explicit = self
                    .native_podgroups
                    .get(&id)
                    .is_some_and(|n| n.priority.is_some() || n.group.priority_class.is_some());
                if !explicit {
                    // The native API (without WorkloadAwarePreemption) has no priority of its
                    // own: the gang's is its highest member's.
                    if let Some(p) = job.tasks.iter().map(|&t| snap.tasks[t].priority).max() {
                        job.priority = p;
                    }
                }
            }
            snap.jobs.push(job);
        }

        let mut queues = self.queues.clone();
        if !queues.contains_key(DEFAULT_QUEUE) {
            queues.insert(DEFAULT_QUEUE.into(), implicit_default_queue());
        }
        for job in &snap.jobs {
            if !queues.contains_key(&job.queue) {
                queues.insert(job.queue.clone(), missing_queue(&job.queue));
            }
        }
        snap.queues = queues.into_values().collect();
        snap.nodes = nodes;
        if !self.dra.is_empty() {
            snap.dra = self.dra.inventory();
        }
        if !self.hypernodes.is_empty() {
            snap.topology = crate::topology::build_tree(&self.hypernodes, &snap.nodes);
        }
        self.resolve_namespaces(&mut snap.tasks);
        snap.pods = self.placed_pods(&snap.tasks);
        if let Some(policy) = &opts.provisioning {
            for job in &mut snap.jobs {
                let group = self.podgroups.get(&job.id).and_then(|g| g.autoscale);
                // Autoscaler requests are owned by Volcano PodGroups; native gangs ask none.
                job.autoscale =
                    job.has_podgroup() && job.native.is_none() && group.unwrap_or(policy.all_gangs);
            }
        }
        self.attach_requests(&mut snap, opts);
        if with_claims {
            snap.volumes = self.volumes.catalog();
        }
        snap.volumes.left_to_kube_scheduler = opts.gate;
        snap
    }

    /// Pods on nodes that the inter-pod constraints of pending `tasks` select, plus every pod
    /// with required anti-affinity, found through the label index (not by scanning all pods
    /// unless a selector has no `In`/`Exists` requirement).
    fn placed_pods(&self, tasks: &[Task]) -> Vec<PlacedPod> {
        let mut keys: BTreeSet<&PodKey> = self.anti.iter().chain(&self.scoring).collect();
        let mut seen_specs: HashSet<*const PlacementSpec> = HashSet::new();
        let mut seen_terms: HashSet<(LabelSelector, Namespaces)> = HashSet::new();
        let mut all_pods = false;
        for t in tasks.iter().filter(|t| t.schedulable_pending()) {
            if t.spec.pods.is_empty() || !seen_specs.insert(Arc::as_ptr(&t.spec)) {
                continue;
            }
            let c = &t.spec.pods;
            let spread_ns: Vec<Namespaces> = c
                .spread
                .iter()
                .map(|s| Namespaces::Only(vec![s.namespace.clone()]))
                .collect();
            let terms = c
                .affinity
                .iter()
                .chain(&c.anti_affinity)
                .chain(c.preferred_affinity.iter().map(|(_, t)| t))
                .chain(c.preferred_anti_affinity.iter().map(|(_, t)| t))
                .filter_map(|t| t.selector.as_ref().map(|s| (s, &t.namespaces)))
                .chain(
                    c.spread
                        .iter()
                        .zip(&spread_ns)
                        .filter_map(|(s, ns)| s.selector.as_ref().map(|sel| (sel, ns))),
                );
            for (sel, ns) in terms {
                if all_pods || !seen_terms.insert((sel.clone(), ns.clone())) {
                    continue;
                }
                let Some(req) = sel.narrowest() else {
                    all_pods = true;
                    continue;
                };
                let Some(values) = self.by_label.get(&req.key) else {
                    continue;
                };
                let sets: Vec<&BTreeSet<PodKey>> = if req.op == SelectorOp::In {
                    req.values.iter().filter_map(|v| values.get(v)).collect()
                } else {
                    values.values().collect()
                };
                for key in sets.into_iter().flatten() {
                    if keys.contains(key) {
                        continue;
                    }
                    if let Some(p) = self.pods.get(key) {
                        if ns.contains(&p.namespace) && sel.matches(&p.labels) {
                            keys.insert(key);
                        }
                    }
                }
            }
        }
        let matched: std::cell::RefCell<HashMap<LabelSelector, Vec<String>>> = Default::default();
        let placed = |p: &PodInfo| {
            let node = p.node.clone().filter(|_| p.counts_on_node())?;
            let resolved = p.spec.pods.resolve_namespaces(&mut |s| {
                matched
                    .borrow_mut()
                    .entry(s.clone())
                    .or_insert_with(|| self.namespaces_matching(s))
                    .clone()
            });
            Some(PlacedPod {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                labels: p.labels.clone(),
                node,
                terminating: p.terminating,
                anti_affinity: resolved
                    .as_ref()
                    .map_or_else(
                        || p.spec.pods.anti_affinity.clone(),
                        |r| r.anti_affinity.clone(),
                    )
                    .into(),
                scoring_terms: resolved.as_ref().unwrap_or(&p.spec.pods).scoring_terms(),
            })
        };
        if all_pods {
            return self.pods.values().filter_map(placed).collect();
        }
        keys.into_iter()
            .filter_map(|k| self.pods.get(k))
            .filter_map(placed)
            .collect()
    }

    fn task(&self, p: &PodInfo, job: usize) -> Task {
        Task {
            uid: p.uid.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            job,
            status: p.status(),
            node: p.node.clone(),
            request: p.request.clone(),
            priority: self.priority(p.spec_priority, p.priority_class.as_ref()),
            role: p.role.clone(),
            gated: p.gated,
            spec: p.spec.clone(),
            labels: p.labels.clone(),
            created: p.created,
            pending_reason: p.pending_reason.clone(),
            critical: p.critical,
            nominated: None,
            never_preempts: p.never_preempts,
            started: p.started.unwrap_or(p.created),
            budget: None,
            consumes: p.consumes.clone(),
            volumes: None,
            claims: None,
            controller: self.recreating(p),
            no_consolidate: p.no_consolidate,
        }
    }

    /// The pod's re-creating controller; a `batch` Job's only when the Job is known and its
    /// `podFailurePolicy` ignores the eviction ([`crate::consolidation::job_ignores_disruption`]):
    /// otherwise the eviction counts against its `backoffLimit`.
    fn recreating(&self, p: &PodInfo) -> Option<Arc<caldera_model::Controller>> {
        let c = p.controller.as_ref()?;
        if &*c.kind == "Job" {
            let job = self.job(&p.namespace, &c.name)?;
            if job.metadata.uid.as_deref() != Some(&*c.uid)
                || !crate::consolidation::job_ignores_disruption(job)
            {
                return None;
            }
        }
        Some(c.clone())
    }

    fn group_job(&self, g: &GroupInfo, opts: &SnapshotOptions) -> Job {
        let default_timeout = opts
            .default_gang_timeout
            .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        Job {
            id: g.id.clone(),
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            uid: g.uid.clone(),
            queue: g.queue.clone(),
            min_member: g.min_member,
            min_task_member: g.min_task_member.clone(),
            priority: self.priority(None, g.priority_class.as_ref()),
            min_resources: g.min_resources.clone(),
            timeout_seconds: g.timeout_seconds.or(default_timeout),
            topology: g.topology.clone(),
            sub_group_policies: g.sub_group_policies.clone(),
            unsupported: g.unsupported.clone().or_else(|| self.hypernodes_refused(g)),
            created: g.created,
            pending_since: g.pending_since,
            status: Some(g.status.clone()),
            tasks: Vec::new(),
            autoscale: false,
            capacity: None,
            native: None,
            moves: g.moves.clone(),
        }
    }

    fn implicit_job(&self, p: &PodInfo) -> Job {
        Job {
            id: p.job_id.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            uid: p.uid.clone(),
            queue: p
                .queue_annotation
                .clone()
                .unwrap_or_else(|| DEFAULT_QUEUE.into()),
            min_member: 1,
            min_task_member: BTreeMap::new(),
            // A lone pod's job has the pod's priority (Volcano's controller copies the pod's
            // priorityClassName into the PodGroup it makes for such a pod).
            priority: self.priority(p.spec_priority, p.priority_class.as_ref()),
            min_resources: None,
            timeout_seconds: None,
            topology: None,
            sub_group_policies: Vec::new(),
            unsupported: None,
            created: p.created,
            pending_since: p.pending_since,
            status: None,
            tasks: Vec::new(),
            autoscale: false,
            capacity: None,
            native: None,
            moves: Vec::new(),
        }
    }
}

/// A node booked for a provisioned request, kept from snapshot to snapshot
/// ([`ClusterIndex`]'s `bookings`, by node name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Booking {
    /// The job (PodGroup id) it is booked for.
    job: Arc<str>,
    /// The request it was booked under (a retry's new request books afresh).
    request: Arc<str>,
}

/// Books nodes for jobs whose request is live (accepted or provisioned): an autoscaler adds
/// the nodes before it marks the request provisioned, so nodes appear while it is only
/// accepted and must already be held (the session places a gang on them only once its request
/// is provisioned).
///
/// **A provisioned request's bookings stick** (`kept`, carried from one snapshot to the
/// next): once a node is booked for it, it stays that gang's for as long as the request is the
/// gang's, provisioned, and the gang still has members waiting — no other request takes it,
/// whatever the order in which later nodes and request states are seen. An accepted request's
/// bookings are tentative, derived afresh each time (the nodes it holds may turn out to be
/// another request's, which the autoscaler then marks provisioned first).
///
/// Derivation: first every kept booking is honoured; then provisioned requests, then accepted
/// ones, each in order of the request's state change (then job id), take Ready, schedulable
/// nodes created after their request was, that their first pending member may go to and that
/// nobody has booked, oldest first, until their idle resources hold the members they still
/// lack; the nodes a provisioned request takes are kept. An autoscaler does not say which
/// nodes it added for which request (cluster-autoscaler writes no such label); nodes that
/// appeared after the request are the ones that can be its. Creation times have whole seconds,
/// so "after" is strict: a node from the request's own second may be older than the request
/// (the cluster's nodes, when a gang asks at once), and booking it would take an old node from
/// everyone else and let the gang spread over it. An autoscaler's node comes seconds later; one
/// from the same second is merely not booked. After a restart `kept` starts empty and the same
/// derivation rebuilds it from the cluster as it is then (deterministic: state-change times,
/// job ids, creation times, node names).
fn book_nodes(snap: &mut Snapshot, kept: &mut BTreeMap<Arc<str>, Booking>) {
    use caldera_model::CapacityState;
    let mut live: Vec<usize> = (0..snap.jobs.len())
        .filter(|&j| {
            snap.jobs[j]
                .capacity
                .as_ref()
                .is_some_and(|c| c.state.live())
        })
        .collect();
    // What each live job still lacks: the requests of its first pending members.
    let mut lacking: HashMap<usize, (Resources, Arc<PlacementSpec>)> = HashMap::new();
    for &j in &live {
        let job = &snap.jobs[j];
        let pending: Vec<&Task> = job
            .tasks
            .iter()
            .map(|&t| &snap.tasks[t])
            .filter(|t| t.schedulable_pending())
            .collect();
        let ready = job
            .tasks
            .iter()
            .filter(|&&t| snap.tasks[t].status.is_ready())
            .count() as u32;
        let count = job.min_member.saturating_sub(ready).max(1) as usize;
        let Some(first) = pending.first() else {
            continue;
        };
        let mut need = Resources::new();
        for t in pending.iter().take(count) {
            need.add(&t.request);
        }
        lacking.insert(j, (need, first.spec.clone()));
    }
    // Kept bookings hold while their node exists, their request is still the job's and
    // provisioned, and the job still waits for members.
    let provisioned: HashMap<&str, (usize, &str)> = live
        .iter()
        .filter(|&&j| lacking.contains_key(&j))
        .filter_map(|&j| {
            let job = &snap.jobs[j];
            let c = job.capacity.as_ref()?;
            (c.state == CapacityState::Provisioned).then_some((&*job.id, (j, &*c.name)))
        })
        .collect();
    let by_name: HashMap<Arc<str>, usize> = snap
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    kept.retain(|node, b| {
        by_name.contains_key(node)
            && provisioned
                .get(&*b.job)
                .is_some_and(|(_, request)| *request == &*b.request)
    });
    let mut have: HashMap<usize, Resources> = HashMap::new();
    for (node, b) in kept.iter() {
        let (Some(&n), Some(&(j, _))) = (by_name.get(node), provisioned.get(&*b.job)) else {
            continue;
        };
        snap.nodes[n].booked_for = Some(b.job.clone());
        have.entry(j).or_default().add(&snap.nodes[n].idle());
    }
    drop(by_name);
    drop(provisioned);
    // Provisioned requests first: their nodes exist (the autoscaler says so); an accepted
    // request's are still coming, and a node that appears meanwhile is more likely the
    // provisioned one's.
    live.sort_by_key(|&j| {
        let c = snap.jobs[j].capacity.as_ref();
        let waiting = c.is_none_or(|c| c.state != CapacityState::Provisioned);
        (waiting, c.map(|c| c.since), j)
    });
    let mut order: Vec<usize> = (0..snap.nodes.len()).collect();
    order.sort_by(|&a, &b| {
        let (na, nb) = (&snap.nodes[a], &snap.nodes[b]);
        na.created.cmp(&nb.created).then(na.name.cmp(&nb.name))
    });
    for j in live {
        let job = &snap.jobs[j];
        let Some(c) = job.capacity.as_ref() else {
            continue;
        };
        let Some((need, spec)) = lacking.get(&j) else {
            continue;
        };
        let (asked, sticks, request) = (
            c.created,
            c.state == CapacityState::Provisioned,
            c.name.clone(),
        );
        let id = job.id.clone();
        let mut have = have.remove(&j).unwrap_or_default();
        for &n in &order {
            if need.fits_in(&have) {
                break;
            }
            let node = &snap.nodes[n];
            let usable = node.ready
                && !node.unschedulable
                && node.booked_for.is_none()
                && node.created > asked
                && spec.matches_node(&node.name, &node.labels)
                && caldera_model::selector::untolerated_taint(&node.taints, &spec.tolerations)
                    .is_none();
            if usable {
                have.add(&node.idle());
                if sticks {
                    kept.insert(
                        node.name.clone(),
                        Booking {
                            job: id.clone(),
                            request: request.clone(),
                        },
                    );
                }
                snap.nodes[n].booked_for = Some(id.clone());
            }
        }
    }
}

/// Our pods not bound yet (members, and pods waiting for their PodGroup) annotated to consume
/// the request `namespace/name`.
fn consuming(snap: &Snapshot, namespace: &str, name: &str) -> Vec<ConsumingPod> {
    let of = |ns: &Arc<str>, consumes: &Option<Arc<str>>| {
        **ns == *namespace && consumes.as_deref() == Some(name)
    };
    let members = snap
        .tasks
        .iter()
        .filter(|t| t.node.is_none() && of(&t.namespace, &t.consumes))
        .map(|t| (&t.namespace, &t.name, &t.uid));
    let waiting = snap
        .waiting
        .iter()
        .filter(|w| of(&w.namespace, &w.consumes))
        .map(|w| (&w.namespace, &w.name, &w.uid));
    members
        .chain(waiting)
        .map(|(namespace, name, uid)| ConsumingPod {
            namespace: namespace.clone(),
            name: name.clone(),
            uid: uid.clone(),
        })
        .collect()
}
