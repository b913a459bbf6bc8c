//! The runtime's view of the cluster: the cache's [`ClusterIndex`] fed by the watches, the
//! [`Overlay`] of work in flight, which caches have synced, and objects that failed to
//! convert. Everything here is synchronous; the watch tasks call it under one lock.
//!
//! Every kind read with its own type goes through [`Cluster::apply`], [`Cluster::delete`] and
//! [`Cluster::reset`], written once over [`Fed`]; pods (the assumed binds) and Volcano's
//! PodGroups and Queues (read untyped, their resourceVersions kept for status writes) have
//! their own. Each `apply`/`delete` returns whether the change may let a session place
//! something (a new pending pod of ours, freed capacity, a new node, a changed PodGroup or
//! Queue spec): the scheduling loop then runs a session after the debounce instead of waiting
//! for the period. Status-only changes (most of them Caldera's own writes) do not trigger.

use crate::overlay::{Kind, ObjKey, Overlay};
use caldera_api::calls::{self, Resource, Watch};
use caldera_api::{PodGroup, ProvisioningRequest, Queue as ApiQueue};
use caldera_cache::{ClusterIndex, Indexed, PodInfo};
use caldera_model::{Node, TaskStatus};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Namespace, Node as KubeNode, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha2::{
    PodGroup as NativePodGroup, Workload as NativeWorkload,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{DynamicObject, TypeMeta};
use kube::ResourceExt;
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Debug};
use std::sync::Arc;
use std::time::Duration;
use tracing::warn;

/// The kinds the runtime watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Watched {
    /// Pods, all namespaces, all schedulers.
    Pods,
    /// Nodes.
    Nodes,
    /// Volcano PodGroups.
    PodGroups,
    /// Volcano Queues.
    Queues,
    /// PriorityClasses.
    PriorityClasses,
    /// PodDisruptionBudgets (victims are chosen within their `disruptionsAllowed`).
    Budgets,
    /// Namespaces (their labels, for pod affinity terms with a `namespaceSelector`).
    Namespaces,
    /// PersistentVolumeClaims (volume binding).
    Claims,
    /// PersistentVolumes.
    Volumes,
    /// StorageClasses.
    StorageClasses,
    /// CSINodes (attach limits).
    CsiNodes,
    /// `batch/v1` Jobs (gangs derived from them, docs/workloads.md).
    Jobs,
}

impl Watched {
    /// Every watched kind.
    pub const ALL: [Watched; 12] = [
        Watched::Pods,
        Watched::Nodes,
        Watched::PodGroups,
        Watched::Queues,
        Watched::PriorityClasses,
        Watched::Budgets,
        Watched::Namespaces,
        Watched::Claims,
        Watched::Volumes,
        Watched::StorageClasses,
        Watched::CsiNodes,
        Watched::Jobs,
    ];

    /// Its entry in the list of what `caldera run` watches ([`caldera_api::calls`]).
    pub fn watch(self) -> &'static Watch {
        match self {
            Watched::Pods => &calls::PODS,
            Watched::Nodes => &calls::NODES,
            Watched::PodGroups => &calls::PODGROUPS,
            Watched::Queues => &calls::QUEUES,
            Watched::PriorityClasses => &calls::PRIORITY_CLASSES,
            Watched::Budgets => &calls::BUDGETS,
            Watched::Namespaces => &calls::NAMESPACES,
            Watched::Claims => &calls::CLAIMS,
            Watched::Volumes => &calls::VOLUMES,
            Watched::StorageClasses => &calls::STORAGE_CLASSES,
            Watched::CsiNodes => &calls::CSI_NODES,
            Watched::Jobs => &calls::JOBS,
        }
    }

    /// The required kind `w` is, if it is one.
    pub fn of(w: &Watch) -> Option<Watched> {
        Watched::ALL
            .into_iter()
            .find(|k| k.watch().resource == w.resource)
    }

    /// Plural resource name.
    pub fn as_str(self) -> &'static str {
        self.watch().resource.plural
    }
}

impl fmt::Display for Watched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object the cache could not convert (a malformed quantity, an unknown operator, a field
/// of the wrong type). It is left out of scheduling until a corrected version arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Which kind.
    pub kind: Watched,
    /// `namespace/name` or name.
    pub key: String,
    /// `metadata.uid`.
    pub uid: String,
    /// The conversion error, naming the field.
    pub message: String,
    /// Whether an event has been recorded for it.
    pub reported: bool,
}

/// What of a Volcano PodGroup or Queue says whether it changed: `(uid, generation, state)`.
type Seen = (String, Option<i64>, Option<String>);

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Cluster {
    pub index: ClusterIndex,
    pub overlay: Overlay,
    synced: BTreeMap<Watched, bool>,
    /// Last resourceVersion seen per object Caldera writes the status of.
    rvs: HashMap<ObjKey, String>,
    /// Converted nodes, to tell a real change from a heartbeat.
    nodes: HashMap<String, Node>,
    /// Volcano PodGroups and Queues as last seen: `(uid, generation, state)` (the generation
    /// moves only with the spec; a Queue's state is `status.state`), by kind and key.
    seen: HashMap<ObjKey, Seen>,
    invalid: BTreeMap<(Watched, String), Invalid>,
    /// The optional kinds the API server serves ([`caldera_api::calls::Need::Optional`]:
    /// HyperNodes, the native gang API, DRA, the owners gangs are derived from,
    /// ProvisioningRequests), and where each stands. A kind not served is not here.
    optional: BTreeMap<Resource, Optional>,
    /// Derived PodGroups whose create is in flight, by `namespace/name`, since when: in the
    /// index as if created until the watch shows them (see [`Cluster::assume_podgroup`]).
    assumed_podgroups: HashMap<String, tokio::time::Instant>,
}

/// Where a served optional kind stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Optional {
    /// Served; not listed yet (a session waits for it).
    Listing,
    /// Listed at least once.
    Synced,
    /// The API server refuses to list it (403): its dependants wait with `message`, every
    /// other pod is scheduled. `reported`: the Warning event is out.
    Refused {
        /// What is missing, as the dependants' pods and the event say it.
        message: Arc<str>,
        /// Whether the event has been planned.
        reported: bool,
    },
}

fn pod_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

fn ns_of(o: &impl ResourceExt) -> String {
    o.namespace().unwrap_or_else(|| "default".to_string())
}

/// Whether a pod of ours waits for a node.
fn pending_ours(p: &PodInfo, names: &[String]) -> bool {
    p.status() == TaskStatus::Pending && names.iter().any(|n| **n == *p.scheduler_name)
}

/// A pod with its status-only fields blanked, to compare what matters to scheduling.
fn scheduling_view(p: &PodInfo) -> PodInfo {
    let mut p = p.clone();
    p.pending_reason = None;
    p.pending_since = None;
    p
}

impl Cluster {
    pub fn is_synced(&self, kind: Watched) -> bool {
        self.synced.get(&kind).copied().unwrap_or(false)
    }

    /// Every required kind listed, and every served optional kind listed or refused (a
    /// refused one holds only its dependants, not the session).
    pub fn all_synced(&self) -> bool {
        Watched::ALL.iter().all(|k| self.is_synced(*k))
            && self.optional.values().all(|o| *o != Optional::Listing)
    }

    /// The optional kind `w` is served: it is watched, and sessions wait for its first list.
    pub fn serve(&mut self, w: &Watch) {
        self.optional.entry(w.resource).or_insert(Optional::Listing);
    }

    /// Whether the optional kind `w` is served.
    pub fn is_served(&self, w: &Watch) -> bool {
        self.optional.contains_key(&w.resource)
    }

    /// Whether the optional kind `w` has been listed (and is not refused now).
    pub fn is_listed(&self, w: &Watch) -> bool {
        self.optional.get(&w.resource) == Some(&Optional::Synced)
    }

    /// The optional kind `w` was listed; a refusal of it is over. Whether it had been refused.
    pub fn listed(&mut self, w: &Watch) -> bool {
        let before = self.optional.insert(w.resource, Optional::Synced);
        self.index.set_refused(w.resource, None);
        matches!(before, Some(Optional::Refused { .. }))
    }

    /// The API server refuses the optional kind `w` (403): its dependants wait with
    /// `message`. Whether this is news (it was not refused already).
    pub fn refused(&mut self, w: &Watch, message: Arc<str>) -> bool {
        if matches!(
            self.optional.get(&w.resource),
            Some(Optional::Refused { .. })
        ) {
            return false;
        }
        self.optional.insert(
            w.resource,
            Optional::Refused {
                message: message.clone(),
                reported: false,
            },
        );
        self.index.set_refused(w.resource, Some(message));
        true
    }

    /// The optional kinds refused now.
    pub fn refused_kinds(&self) -> Vec<Resource> {
        self.optional
            .iter()
            .filter(|(_, o)| matches!(o, Optional::Refused { .. }))
            .map(|(r, _)| *r)
            .collect()
    }

    /// Refusals no event has been planned for yet, each marked reported.
    pub fn unreported_refusals(&mut self) -> Vec<(Resource, Arc<str>)> {
        let mut out = Vec::new();
        for (resource, state) in &mut self.optional {
            if let Optional::Refused { message, reported } = state {
                if !*reported {
                    *reported = true;
                    out.push((*resource, message.clone()));
                }
            }
        }
        out
    }

    pub fn resource_version(&self, key: &ObjKey) -> Option<&str> {
        self.rvs.get(key).map(String::as_str)
    }

    fn set_rv(&mut self, key: ObjKey, rv: Option<String>) {
        self.overlay.seen(&key, rv.as_deref());
        match rv {
            Some(rv) => {
                self.rvs.insert(key, rv);
            }
            None => {
                self.rvs.remove(&key);
            }
        }
    }

    fn forget(&mut self, key: &ObjKey) {
        self.overlay.deleted(key);
        self.rvs.remove(key);
    }

    fn mark_invalid(&mut self, kind: Watched, key: String, uid: String, message: String) {
        let entry = self.invalid.get(&(kind, key.clone()));
        if entry.is_some_and(|e| e.message == message && e.uid == uid) {
            return;
        }
        tracing::error!(kind = %kind, object = %key, error = %message, "object left out of scheduling");
        self.invalid.insert(
            (kind, key.clone()),
            Invalid {
                kind,
                key,
                uid,
                message,
                reported: false,
            },
        );
    }

    fn mark_valid(&mut self, kind: Watched, key: &str) {
        self.invalid.remove(&(kind, key.to_string()));
    }

    fn invalid_keys(&self, kind: Watched) -> Vec<String> {
        self.invalid
            .keys()
            .filter(|(k, _)| *k == kind)
            .map(|(_, key)| key.clone())
            .collect()
    }

    /// After a relist: invalid entries of objects no longer listed are dropped (valid ones
    /// were dropped as they were applied).
    fn drop_unlisted(
        &mut self,
        kind: Watched,
        before: Vec<String>,
        listed: impl Iterator<Item = String>,
    ) {
        let listed: std::collections::HashSet<String> = listed.collect();
        for key in before.into_iter().filter(|k| !listed.contains(k)) {
            self.invalid.remove(&(kind, key));
        }
    }

    /// Objects that failed to convert.
    pub fn invalid(&self) -> impl Iterator<Item = &Invalid> {
        self.invalid.values()
    }

    /// Invalid objects not yet reported, marked reported.
    pub fn take_unreported(&mut self) -> Vec<Invalid> {
        let mut out = Vec::new();
        for i in self.invalid.values_mut().filter(|i| !i.reported) {
            i.reported = true;
            out.push(i.clone());
        }
        out
    }

    /// Every invalid object is reported again (a new leader records its own events).
    pub fn unreport_all(&mut self) {
        for i in self.invalid.values_mut() {
            i.reported = false;
        }
    }

    // ----- pods -----

    pub fn apply_pod(&mut self, pod: &Pod, names: &[String]) -> bool {
        let ns = ns_of(pod);
        let name = pod.name_any();
        let key = pod_key(&ns, &name);
        let old = self.index.pod(&ns, &name).cloned();
        let result = self.index.apply(pod);
        self.set_rv((Kind::Pod, key.clone()), pod.resource_version());
        match &result {
            Ok(()) => self.mark_valid(Watched::Pods, &key),
            Err(e) => self.mark_invalid(
                Watched::Pods,
                key.clone(),
                pod.uid().unwrap_or_default(),
                e.to_string(),
            ),
        }
        let new = self.index.pod(&ns, &name);
        if let Some(p) = new {
            // The watch shows the bind now: the pod is bound, or (gate mode) this update is its
            // release from Caldera's gate, held at its node. Any other update of an unbound pod
            // (its own PodScheduled condition, a nomination, a label) leaves the bind assumed:
            // forgetting it would let the next session place the pod a second time.
            let released = p.held.is_some() && old.as_ref().is_some_and(|o| o.gang_gate);
            if p.status() != TaskStatus::Pending || released {
                self.overlay.forget_bind(&p.uid);
            }
        }
        let freed = old.as_ref().is_some_and(|o| o.counts_on_node())
            && !new.is_some_and(|n| n.counts_on_node());
        let newly_pending = match (new, &old) {
            (Some(n), _) if !pending_ours(n, names) => false,
            (Some(_), None) => true,
            (Some(n), Some(o)) => scheduling_view(n) != scheduling_view(o),
            (None, _) => false,
        };
        freed || newly_pending
    }

    pub fn delete_pod(&mut self, pod: &Pod) -> bool {
        let ns = ns_of(pod);
        let name = pod.name_any();
        let key = pod_key(&ns, &name);
        let old = self.index.pod(&ns, &name).cloned();
        self.index.delete::<Pod>((&ns, &name));
        self.forget(&(Kind::Pod, key.clone()));
        self.mark_valid(Watched::Pods, &key);
        if let Some(uid) = pod.uid() {
            self.overlay.forget_bind(&uid);
        }
        old.is_some_and(|o| o.counts_on_node() || o.status() == TaskStatus::Pending)
    }

    pub fn reset_pods(&mut self, pods: &[Pod]) {
        self.rvs.retain(|(k, _), _| *k != Kind::Pod);
        // Conversion errors are recorded per pod below, with the object's key.
        let _ = self.index.reset(pods);
        let mut still_invalid = std::collections::HashSet::new();
        for pod in pods {
            let key = pod_key(&ns_of(pod), &pod.name_any());
            self.set_rv((Kind::Pod, key.clone()), pod.resource_version());
            if self.index.pod(&ns_of(pod), &pod.name_any()).is_none() {
                if let Err(e) = PodInfo::try_from(pod) {
                    still_invalid.insert(key.clone());
                    self.mark_invalid(
                        Watched::Pods,
                        key,
                        pod.uid().unwrap_or_default(),
                        e.to_string(),
                    );
                }
            }
        }
        self.invalid
            .retain(|(k, key), _| *k != Watched::Pods || still_invalid.contains(key));
        // A bind in flight stays assumed only while its pod is still listed and unbound.
        let index = &self.index;
        let pending: std::collections::HashSet<String> = pods
            .iter()
            .filter_map(|p| {
                let info = index.pod(&ns_of(p), &p.name_any())?;
                (info.status() == TaskStatus::Pending).then(|| info.uid.to_string())
            })
            .collect();
        self.overlay.retain_assumed(|uid| pending.contains(uid));
        self.synced.insert(Watched::Pods, true);
    }

    // ----- Volcano's PodGroups and Queues ([`Untyped`]) -----

    pub fn apply_untyped<K: Untyped>(&mut self, obj: &DynamicObject) -> bool {
        let key = untyped_id::<K>(obj);
        if K::OBJECT == Kind::PodGroup {
            self.assumed_podgroups.remove(&key);
        }
        self.set_rv((K::OBJECT, key.clone()), obj.resource_version());
        let uid = obj.uid().unwrap_or_default();
        let decoded = decode::<K>(obj, K::WATCHED.watch());
        let state = decoded.as_ref().ok().and_then(K::state);
        let result = decoded.and_then(|o| self.index.apply(&o).map_err(|e| e.to_string()));
        match result {
            Ok(()) => self.mark_valid(K::WATCHED, &key),
            Err(message) => {
                K::forget(&mut self.index, &ns_of(obj), &obj.name_any());
                self.mark_invalid(K::WATCHED, key.clone(), uid.clone(), message);
            }
        }
        let seen = (uid, obj.metadata.generation, state);
        self.seen.insert((K::OBJECT, key), seen.clone()) != Some(seen)
    }

    pub fn delete_untyped<K: Untyped>(&mut self, obj: &DynamicObject) -> bool {
        let key = untyped_id::<K>(obj);
        if K::OBJECT == Kind::PodGroup {
            self.assumed_podgroups.remove(&key);
        }
        K::forget(&mut self.index, &ns_of(obj), &obj.name_any());
        self.forget(&(K::OBJECT, key.clone()));
        self.seen.remove(&(K::OBJECT, key.clone()));
        self.mark_valid(K::WATCHED, &key);
        true
    }

    pub fn reset_untyped<K: Untyped>(&mut self, objs: &[DynamicObject]) {
        if K::OBJECT == Kind::PodGroup {
            // The reset drops them from the index; the loop creates any still missing.
            self.assumed_podgroups.clear();
        }
        self.rvs.retain(|(k, _), _| *k != K::OBJECT);
        let before = self.invalid_keys(K::WATCHED);
        self.seen.retain(|(k, _), _| *k != K::OBJECT);
        let _ = self.index.reset::<K>([]);
        for o in objs {
            self.apply_untyped::<K>(o);
        }
        self.drop_unlisted(K::WATCHED, before, objs.iter().map(untyped_id::<K>));
        self.synced.insert(K::WATCHED, true);
    }

    /// A derived PodGroup whose create was just asked for: in the index as if created, until
    /// the watch shows it (or a relist), so the next session sees every gang derived in one
    /// round together, as the simulator does, ordered by their workloads' creation times. Two
    /// creates in flight land in either order; without this a session between them would see
    /// only the younger gang and place it. One whose create the watch has not shown after
    /// `ttl` is taken out again ([`Cluster::expire_assumed_podgroups`]).
    pub fn assume_podgroup(&mut self, pg: &PodGroup, now: tokio::time::Instant) {
        let key = pod_key(
            pg.metadata.namespace.as_deref().unwrap_or("default"),
            pg.metadata.name.as_deref().unwrap_or_default(),
        );
        if self.index.apply(pg).is_ok() {
            self.assumed_podgroups.insert(key, now);
        }
    }

    /// Takes out of the index the assumed PodGroups (see [`Cluster::assume_podgroup`]) the
    /// watch has not shown within `ttl`: their create failed or is lost, and is asked again.
    pub fn expire_assumed_podgroups(&mut self, now: tokio::time::Instant, ttl: Duration) {
        let old: Vec<String> = self
            .assumed_podgroups
            .iter()
            .filter(|(_, at)| now.duration_since(**at) >= ttl)
            .map(|(k, _)| k.clone())
            .collect();
        for key in old {
            self.assumed_podgroups.remove(&key);
            if let Some((namespace, name)) = key.split_once('/') {
                self.index.delete::<PodGroup>((namespace, name));
            }
        }
    }

    /// Whether the PodGroup `namespace/name` is assumed (its create in flight).
    #[cfg(test)]
    pub fn is_assumed_podgroup(&self, key: &str) -> bool {
        self.assumed_podgroups.contains_key(key)
    }

    /// The plan's volume writes, assumed done until the watches show them.
    pub fn assume_volume_writes(
        &mut self,
        writes: &[caldera_model::VolumeWrite],
        now: caldera_model::Time,
    ) {
        for w in writes {
            self.index.assume_volume_write(w, now);
        }
    }
}

/// Decodes an untyped object of `w` into `K`, filling in `apiVersion`/`kind` when a list left
/// them out. The error names the object and what serde found wrong.
fn decode<K: DeserializeOwned>(obj: &DynamicObject, w: &Watch) -> Result<K, String> {
    let mut obj = obj.clone();
    if obj.types.is_none() {
        obj.types = Some(TypeMeta {
            api_version: w.resource.api_version(),
            kind: w.resource.kind.to_string(),
        });
    }
    let value = serde_json::to_value(&obj).map_err(|e| format!("cannot encode: {e}"))?;
    serde_json::from_value(value).map_err(|e| format!("cannot decode: {e}"))
}

/// Volcano's PodGroups and Queues, read untyped: one malformed object must not stop the watch,
/// so each is decoded on its own (and recorded [`Invalid`] when it does not decode). Their
/// resourceVersions are kept for Caldera's status writes, and a change counts only when the
/// spec moves (`metadata.generation`), or what [`Untyped::state`] reads.
pub(crate) trait Untyped: Indexed + DeserializeOwned {
    /// Its required kind.
    const WATCHED: Watched;
    /// Its kind among the objects Caldera writes the status of.
    const OBJECT: Kind;

    /// What else makes a change count besides the spec: nothing, unless the kind says so.
    fn state(&self) -> Option<String> {
        None
    }

    /// Forgets the object `namespace/name` (or `name`) in the index.
    fn forget(index: &mut ClusterIndex, namespace: &str, name: &str);
}

impl Untyped for PodGroup {
    const WATCHED: Watched = Watched::PodGroups;
    const OBJECT: Kind = Kind::PodGroup;

    fn forget(index: &mut ClusterIndex, namespace: &str, name: &str) {
        index.delete::<PodGroup>((namespace, name));
    }
}

/// A Queue opened or closed (`status.state`) counts as a change.
impl Untyped for ApiQueue {
    const WATCHED: Watched = Watched::Queues;
    const OBJECT: Kind = Kind::Queue;

    fn state(&self) -> Option<String> {
        let state = self.status.as_ref()?.state.as_ref()?;
        Some(state.to_string())
    }

    fn forget(index: &mut ClusterIndex, _namespace: &str, name: &str) {
        index.delete::<ApiQueue>(name);
    }
}

/// The key of an untyped `obj` of `K` among the invalid objects and resourceVersions.
fn untyped_id<K: Untyped>(obj: &DynamicObject) -> String {
    if K::WATCHED.watch().resource.namespaced {
        pod_key(&ns_of(obj), &obj.name_any())
    } else {
        obj.name_any()
    }
}

impl Cluster {
    /// Whether a Queue object of that name is in the cache.
    pub fn has_queue(&self, name: &str) -> bool {
        self.seen.contains_key(&(Kind::Queue, name.to_string()))
    }
}

/// What one kind read with its own type means to `caldera run` besides feeding the index
/// (the index's side is [`Indexed`]): which watch it is, and whether a change may let a
/// session place something. [`Cluster::apply`], [`Cluster::delete`] and [`Cluster::reset`]
/// are written once over it, and [`crate::watch::fed`] wires its watch, as linkerd's policy
/// controller wires each kubert index. A required kind ([`Watched`]) records the objects that
/// do not convert ([`Invalid`], reported as events) and marks itself synced after a list; an
/// optional kind logs them (its sync is [`Cluster::listed`]).
pub(crate) trait Fed:
    Indexed + kube::Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + 'static
{
    /// Its entry in the list of what `caldera run` watches.
    const WATCH: &'static Watch;

    /// After `self` was applied (`converted`: whether it converted): whether a session may
    /// place something now. Any change may, unless the kind says otherwise.
    fn applied(&self, _cluster: &mut Cluster, _converted: bool) -> bool {
        true
    }

    /// After `self` was deleted.
    fn deleted(&self, _cluster: &mut Cluster) {}

    /// Before a list replaces every object of the kind.
    fn relisted(_cluster: &mut Cluster) {}
}

macro_rules! fed {
    ($($kind:ty => $watch:expr),* $(,)?) => {
        $(impl Fed for $kind {
            const WATCH: &'static Watch = $watch;
        })*
    };
}

// Every change of these may let a session place something.
fed! {
    PriorityClass => &calls::PRIORITY_CLASSES,
    PodDisruptionBudget => &calls::BUDGETS,
    Namespace => &calls::NAMESPACES,
    Job => &calls::JOBS,
    PersistentVolumeClaim => &calls::CLAIMS,
    PersistentVolume => &calls::VOLUMES,
    StorageClass => &calls::STORAGE_CLASSES,
    CSINode => &calls::CSI_NODES,
    DeviceClass => &calls::DEVICE_CLASSES,
    ResourceSlice => &calls::RESOURCE_SLICES,
    ResourceClaim => &calls::RESOURCE_CLAIMS,
    ResourceClaimTemplate => &calls::RESOURCE_CLAIM_TEMPLATES,
    NativePodGroup => &calls::NATIVE_PODGROUPS,
    NativeWorkload => &calls::NATIVE_WORKLOADS,
    ProvisioningRequest => &calls::PROVISIONING_REQUESTS,
}

/// A node's heartbeat (its status' times) changes nothing: only a node that converts to
/// something new may let a session place something.
impl Fed for KubeNode {
    const WATCH: &'static Watch = &calls::NODES;

    fn applied(&self, cluster: &mut Cluster, converted: bool) -> bool {
        let name = self.name_any();
        if !converted {
            cluster.nodes.remove(&name);
            return false;
        }
        match caldera_cache::node(self) {
            Ok(n) => cluster.nodes.insert(name, n.clone()).as_ref() != Some(&n),
            Err(_) => false,
        }
    }

    fn deleted(&self, cluster: &mut Cluster) {
        cluster.nodes.remove(&self.name_any());
    }

    fn relisted(cluster: &mut Cluster) {
        cluster.nodes.clear();
    }
}

/// The key of `o` among the invalid objects: `namespace/name`, or its name.
fn id<K: Fed>(o: &K) -> String {
    if K::WATCH.resource.namespaced {
        pod_key(&ns_of(o), &o.name_any())
    } else {
        o.name_any()
    }
}

impl Cluster {
    /// Feeds an object added or changed to the index; whether a session may place something
    /// now ([`Fed::applied`]).
    pub fn apply<K: Fed>(&mut self, o: &K) -> bool {
        let result = self.index.apply(o);
        let converted = result.is_ok();
        match (Watched::of(K::WATCH), result) {
            (Some(kind), Ok(())) => self.mark_valid(kind, &id(o)),
            (Some(kind), Err(e)) => {
                self.mark_invalid(kind, id(o), o.uid().unwrap_or_default(), e.to_string())
            }
            (None, Ok(())) => {}
            (None, Err(e)) => warn!(kind = %K::WATCH.resource, error = %e, "left out"),
        }
        o.applied(self, converted)
    }

    /// Forgets an object deleted; a session may place something now.
    pub fn delete<K: Fed>(&mut self, o: &K) -> bool {
        if let Some(key) = o.key() {
            self.index.delete::<K>(key);
        }
        if let Some(kind) = Watched::of(K::WATCH) {
            self.mark_valid(kind, &id(o));
        }
        o.deleted(self);
        true
    }

    /// Replaces every object of the kind (a list); a required kind is synced from now on.
    pub fn reset<K: Fed>(&mut self, objects: &[K]) {
        K::relisted(self);
        let kind = Watched::of(K::WATCH);
        let before = kind.map(|k| self.invalid_keys(k)).unwrap_or_default();
        let _ = self.index.reset::<K>([]);
        for o in objects {
            self.apply(o);
        }
        if let Some(kind) = kind {
            self.drop_unlisted(kind, before, objects.iter().map(id));
            self.synced.insert(kind, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value, gated: bool) -> Pod {
        let gates = if gated {
            serde_json::json!([{"name": caldera_api::GANG_GATE}])
        } else {
            serde_json::Value::Null
        };
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "p", "uid": "p-uid", "resourceVersion": "1"},
            "spec": {
                "schedulerName": "caldera",
                "schedulingGates": gates,
                "containers": [{"name": "c", "image": "i"}],
            },
            "status": status,
        }))
        .unwrap()
    }

    fn names() -> Vec<String> {
        vec!["caldera".to_string()]
    }

    #[test]
    fn an_update_of_a_nominated_pod_keeps_its_bind_assumed() {
        let mut cluster = Cluster::default();
        let nominated = serde_json::json!({"phase": "Pending", "nominatedNodeName": "n1"});
        cluster.apply_pod(&pod(nominated.clone(), false), &names());
        cluster.overlay.assume("p-uid".into(), "n1".into());
        // Its own PodScheduled condition lands while the bind is in flight.
        let mut status = nominated;
        status["conditions"] = serde_json::json!([{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"
        }]);
        cluster.apply_pod(&pod(status, false), &names());
        assert!(
            cluster.overlay.is_assumed("p-uid"),
            "the bind is still in flight"
        );
        // The watch shows it bound: the assumption ends.
        let mut bound = pod(serde_json::json!({"phase": "Pending"}), false);
        bound.spec.as_mut().unwrap().node_name = Some("n1".into());
        cluster.apply_pod(&bound, &names());
        assert!(!cluster.overlay.is_assumed("p-uid"));
    }

    /// The jobs of the index's snapshot, by id.
    fn job_ids(cluster: &Cluster) -> Vec<String> {
        let snap = cluster
            .index
            .snapshot(&caldera_cache::SnapshotOptions::default());
        snap.jobs.iter().map(|j| j.id.to_string()).collect()
    }

    #[test]
    fn a_derived_podgroup_being_created_is_in_the_snapshot_until_the_watch_shows_it() {
        let pg: PodGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"namespace": "ns", "name": "job-a",
                "annotations": {"scheduling.caldera.sh/derived-from": "job.batch/a"},
                "labels": {"app.kubernetes.io/managed-by": "caldera"}},
            "spec": {"minMember": 2},
        }))
        .unwrap();
        let mut cluster = Cluster::default();
        let t0 = tokio::time::Instant::now();
        cluster.assume_podgroup(&pg, t0);
        assert!(cluster.is_assumed_podgroup("ns/job-a"));
        assert_eq!(job_ids(&cluster), ["ns/job-a"]);
        // Not shown within the time: taken out (its create is asked again).
        cluster.expire_assumed_podgroups(t0 + Duration::from_secs(9), Duration::from_secs(10));
        assert_eq!(job_ids(&cluster), ["ns/job-a"]);
        cluster.expire_assumed_podgroups(t0 + Duration::from_secs(10), Duration::from_secs(10));
        assert!(!cluster.is_assumed_podgroup("ns/job-a"));
        assert!(job_ids(&cluster).is_empty());
        // Assumed again, then the watch shows it: it stays, now as the real object.
        cluster.assume_podgroup(&pg, t0);
        let mut real = serde_json::to_value(&pg).unwrap();
        real["metadata"]["uid"] = serde_json::json!("pg-uid");
        real["metadata"]["resourceVersion"] = serde_json::json!("7");
        let real: DynamicObject = serde_json::from_value(real).unwrap();
        cluster.apply_untyped::<PodGroup>(&real);
        assert!(!cluster.is_assumed_podgroup("ns/job-a"));
        cluster.expire_assumed_podgroups(t0 + Duration::from_secs(60), Duration::from_secs(10));
        assert_eq!(job_ids(&cluster), ["ns/job-a"]);
    }

    #[test]
    fn a_release_from_the_gate_ends_the_assumption() {
        let mut cluster = Cluster::default();
        cluster.apply_pod(
            &pod(serde_json::json!({"phase": "Pending"}), true),
            &names(),
        );
        cluster.overlay.assume("p-uid".into(), "n1".into());
        // The nomination lands while the pod is still gated: the release is still in flight.
        let nominated = serde_json::json!({"phase": "Pending", "nominatedNodeName": "n1"});
        cluster.apply_pod(&pod(nominated.clone(), true), &names());
        assert!(cluster.overlay.is_assumed("p-uid"));
        // The release lands: ungated and held at n1, kube-scheduler's to bind.
        cluster.apply_pod(&pod(nominated, false), &names());
        assert!(!cluster.overlay.is_assumed("p-uid"));
    }
}
