//! The object store: one ordered map per resource, a single global resourceVersion, a bounded
//! per-resource watch history, the live watchers, and the write semantics of kube-apiserver's
//! registry strategies (create, update, status, patch, delete, binding, eviction).
//!
//! Everything runs under one mutex, so every write is atomic with respect to lists and to the
//! start of every watch: a watch registered under the lock misses no event and sees none twice.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::admission::{self, obj_mut};
use super::dra;
use super::patch;
use super::podspec;
use super::resources::{
    self, def, Flavor, ResourceDef, ResourceId, BUDGETS, CLAIMS, CLAIM_TEMPLATES, DEPLOYMENTS,
    JOBS, NAMESPACES, NATIVE_PODGROUPS, NODES, PODS, PRIORITY_CLASSES, REPLICASETS, RESOURCES,
    RESOURCE_CLAIMS, RUNTIME_CLASSES, STORAGE_CLASSES, VOLUMES,
};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::storage;
use super::time;
use caldera_actors::disruption::{self, Eviction};
use caldera_api::validation::{self, NameRule};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

mod controllers;
mod delete;
mod prepare;
mod read;
mod update;

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the watch history and sent to watchers. `object` is the new state
/// (for DELETED: the last state, stamped with the deletion's resourceVersion, as etcd reports
/// it); `prev` is the state before, which watch filters need to turn a MODIFIED that leaves or
/// enters a selector into DELETED or ADDED.
#[derive(Debug)]
pub(crate) struct Event {
    pub rv: u64,
    pub kind: EventType,
    pub object: Arc<Stored>,
    pub prev: Option<Arc<Stored>>,
}

type Key = (String, String);

/// A stored object and its JSON encoding, made at most once per stored version (on the first
/// list, get or watch that needs it) so that reads copy bytes instead of serialising again;
/// kube-apiserver's watch cache caches serialisations for the same reason.
#[derive(Debug)]
pub(crate) struct Stored {
    pub value: Value,
    json: OnceLock<Vec<u8>>,
}

impl Stored {
    pub(crate) fn new(value: Value) -> Self {
        Self {
            value,
            json: OnceLock::new(),
        }
    }

    pub(crate) fn json(&self) -> &[u8] {
        // Serialising a Value cannot fail: its map keys are strings.
        self.json
            .get_or_init(|| serde_json::to_vec(&self.value).unwrap_or_default())
    }
}

impl std::ops::Deref for Stored {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

#[derive(Default)]
struct ResourceState {
    objects: BTreeMap<Key, Arc<Stored>>,
    history: VecDeque<Arc<Event>>,
    /// Watches from a resourceVersion below this get 410 Expired: events after it are all kept.
    window_start: u64,
    watchers: Vec<mpsc::UnboundedSender<Arc<Event>>>,
}

/// The finalizer kube-apiserver puts on every native PodGroup.
pub(crate) const PODGROUP_PROTECTION: &str = "scheduling.k8s.io/podgroup-protection";

/// Store behaviour chosen at server start.
#[derive(Debug, Clone)]
pub(crate) struct StoreConfig {
    pub history_window: usize,
    pub node_lifecycle_controller: bool,
    pub auto_create_namespaces: bool,
    pub disruption_controller: bool,
    pub pv_controller: bool,
    pub job_controller: bool,
    pub replicaset_controller: bool,
    pub podgroup_protection: bool,
    pub resource_claim_controller: bool,
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sub {
    Main,
    Status,
}

/// The patch formats accepted (server-side apply is answered with 415 by the HTTP layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    Merge,
    Strategic,
    Json,
}

/// The parts of `DeleteOptions` the store honours.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub grace_period_seconds: Option<i64>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground` (only Jobs' dependents are
    /// collected).
    pub propagation_policy: Option<String>,
}

impl DeleteOptions {
    pub(crate) fn from_body(body: &Value) -> Self {
        Self {
            grace_period_seconds: body["gracePeriodSeconds"].as_i64(),
            uid: body["preconditions"]["uid"].as_str().map(str::to_string),
            resource_version: body["preconditions"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            propagation_policy: body["propagationPolicy"].as_str().map(str::to_string),
        }
    }
}

/// A LIST request after parsing.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListQuery {
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
}

/// One page of a LIST.
pub(crate) struct ListPage {
    pub items: Vec<Arc<Stored>>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WatchFrom {
    /// Only changes from now on.
    Now,
    /// Synthetic ADDED events for every current object, then changes.
    CurrentState,
    /// Every change after this resourceVersion (410 if the history no longer reaches back).
    After(u64),
}

/// What a new watch replays before live events.
pub(crate) enum Replay {
    Events(Vec<Arc<Event>>),
    Objects(Vec<Arc<Stored>>),
}

pub(crate) struct WatchStart {
    pub replay: Replay,
    pub live: mpsc::UnboundedReceiver<Arc<Event>>,
    pub resource_version: u64,
}

pub(crate) struct State {
    rv: u64,
    resources: Vec<ResourceState>,
    config: StoreConfig,
    random: u64,
    /// Set while the disruption controller writes, so its own writes do not re-trigger it.
    syncing_budgets: bool,
    /// Set while the PV controller writes, so its own writes do not re-trigger it.
    syncing_volumes: bool,
    /// Set while the Job controller writes, so its own writes do not re-trigger it.
    syncing_jobs: bool,
    /// Set while the resource-claim controller writes, so its own writes do not re-trigger it.
    syncing_claims: bool,
    /// Set while the ReplicaSet and Deployment controllers write, likewise.
    syncing_replicasets: bool,
}

/// kube-apiserver's checks of `name` and of the labels of `obj` ([`validation::object_meta`]):
/// a Namespace's name is a DNS-1123 label, any other a subdomain.
fn meta_causes(d: &ResourceDef, name: &str, obj: &Value) -> Vec<(String, String)> {
    let rule = if d.flavor == Flavor::Namespace {
        NameRule::Label
    } else {
        NameRule::Subdomain
    };
    let labels = obj["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)));
    validation::object_meta(name, rule, None, labels)
}

fn meta<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or_default()
}

fn key_of(d: &ResourceDef, namespace: &str, name: &str) -> Key {
    let ns = if d.namespaced { namespace } else { "" };
    (ns.to_string(), name.to_string())
}

fn set_type_meta(d: &ResourceDef, obj: &mut Value) {
    if let Value::Object(map) = obj {
        map.insert("apiVersion".into(), json!(d.api_version()));
        map.insert("kind".into(), json!(d.kind));
    }
}

fn check_type_meta(d: &ResourceDef, body: &Value) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(format!(
            "the request body must be a JSON object of kind {}",
            d.kind
        )));
    }
    let kind = body["kind"].as_str().unwrap_or_default();
    let api_version = body["apiVersion"].as_str().unwrap_or_default();
    if (!kind.is_empty() && kind != d.kind)
        || (!api_version.is_empty() && api_version != d.api_version())
    {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): {api_version}, Kind={kind} does not match {}, Kind={}",
            d.kind,
            d.api_version(),
            d.kind
        )));
    }
    Ok(())
}

fn status_success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl State {
    pub(crate) fn new(config: StoreConfig) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5eed);
        let mut state = Self {
            rv: 0,
            resources: RESOURCES.iter().map(|_| ResourceState::default()).collect(),
            config,
            random: seed,
            syncing_budgets: false,
            syncing_volumes: false,
            syncing_jobs: false,
            syncing_claims: false,
            syncing_replicasets: false,
        };
        state.seed_builtin_objects();
        state
    }

    /// The objects every kube-apiserver creates at start.
    fn seed_builtin_objects(&mut self) {
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            // Cannot fail: fixed valid names in an empty store.
            let _ = self.create(NAMESPACES, "", json!({"metadata": {"name": ns}}), false);
        }
        for (name, value, description) in [
            (
                "system-node-critical",
                2_000_001_000,
                "Used for system critical pods that must not be moved from their current node.",
            ),
            (
                "system-cluster-critical",
                2_000_000_000,
                "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
            ),
        ] {
            let _ = self.create(
                PRIORITY_CLASSES,
                "",
                json!({"metadata": {"name": name}, "value": value, "description": description}),
                false,
            );
        }
    }

    pub(crate) fn resource_version(&self) -> u64 {
        self.rv
    }

    fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let mut r = splitmix(&mut self.random);
        (0..5)
            .map(|_| {
                let c = ALPHABET[(r % ALPHABET.len() as u64) as usize] as char;
                r /= ALPHABET.len() as u64;
                c
            })
            .collect()
    }

    fn new_uid(&mut self) -> String {
        let a = splitmix(&mut self.random);
        let b = splitmix(&mut self.random);
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    fn lookup(&self, id: ResourceId, namespace: &str, name: &str) -> Option<&Arc<Stored>> {
        self.resources[id]
            .objects
            .get(&key_of(def(id), namespace, name))
    }

    pub(crate) fn get(
        &self,
        id: ResourceId,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Stored>, ApiError> {
        self.lookup(id, namespace, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(def(id), name))
    }

    pub(crate) fn all(&self, id: ResourceId) -> impl Iterator<Item = &Arc<Stored>> {
        self.resources[id].objects.values()
    }

    /// Records a change: bumps the global resourceVersion, stores, appends to the watch
    /// history and fans out to watchers. `new` is `None` for a deletion, in which case `last`
    /// is the final state reported in the DELETED event.
    fn commit(
        &mut self,
        id: ResourceId,
        key: &Key,
        new: Option<Value>,
        last: Option<Value>,
    ) -> Arc<Stored> {
        self.rv += 1;
        let rv = self.rv;
        let rs = &mut self.resources[id];
        let (kind, object, prev) = match new {
            Some(mut obj) => {
                obj_mut(&mut obj, "metadata")
                    .insert("resourceVersion".into(), json!(rv.to_string()));
                let obj = Arc::new(Stored::new(obj));
                let prev = rs.objects.insert(key.clone(), obj.clone());
                let kind = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, obj, prev)
            }
            None => {
                let prev = rs.objects.remove(key);
                let mut obj = last
                    .or_else(|| prev.as_ref().map(|p| p.value.clone()))
                    .unwrap_or_else(|| json!({}));
                obj_mut(&mut obj, "metadata")
                    .insert("resourceVersion".into(), json!(rv.to_string()));
                (EventType::Deleted, Arc::new(Stored::new(obj)), prev)
            }
        };
        let event = Arc::new(Event {
            rv,
            kind,
            object: object.clone(),
            prev,
        });
        rs.history.push_back(event.clone());
        while rs.history.len() > self.config.history_window {
            if let Some(old) = rs.history.pop_front() {
                rs.window_start = old.rv;
            }
        }
        rs.watchers.retain(|w| w.send(event.clone()).is_ok());
        // The disruption controller reacts to every pod and budget change in the namespace.
        if (id == PODS || id == BUDGETS) && !self.syncing_budgets {
            self.syncing_budgets = true;
            self.sync_budgets(&key.0);
            self.syncing_budgets = false;
        }
        // The resource-claim controller reacts to changes of claims, templates and of pods
        // that name claims.
        let claim_work = match id {
            RESOURCE_CLAIMS | CLAIM_TEMPLATES => true,
            PODS => dra::pod_has_claims(&object.value),
            _ => false,
        };
        if claim_work && self.config.resource_claim_controller && !self.syncing_claims {
            self.syncing_claims = true;
            self.sync_resource_claims(&key.0);
            self.syncing_claims = false;
        }
        // The PV controller reacts to every claim, volume and class change.
        if matches!(id, CLAIMS | VOLUMES | STORAGE_CLASSES) && !self.syncing_volumes {
            self.syncing_volumes = true;
            self.sync_volumes();
            self.syncing_volumes = false;
        }
        object
    }

    fn ensure_namespace(&mut self, namespace: &str, dry_run: bool) -> Result<(), ApiError> {
        if self.lookup(NAMESPACES, "", namespace).is_some() {
            return Ok(());
        }
        if !self.config.auto_create_namespaces {
            return Err(ApiError::namespace_not_found(namespace));
        }
        if dry_run {
            return Ok(());
        }
        self.create(
            NAMESPACES,
            "",
            json!({"metadata": {"name": namespace}}),
            false,
        )
        .map(|_| ())
    }

    pub(crate) fn create(
        &mut self,
        id: ResourceId,
        namespace: &str,
        mut body: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        check_type_meta(d, &body)?;
        let body_ns = meta(&body, "namespace").to_string();
        let ns = if d.namespaced {
            if !body_ns.is_empty() && body_ns != namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            namespace.to_string()
        } else {
            String::new()
        };
        let mut name = meta(&body, "name").to_string();
        if name.is_empty() {
            let prefix = meta(&body, "generateName").to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    d,
                    "",
                    &[(
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ));
            }
            loop {
                name = format!("{prefix}{}", self.random_suffix());
                if self.lookup(id, &ns, &name).is_none() {
                    break;
                }
            }
        }
        let causes = meta_causes(d, &name, &body);
        if !causes.is_empty() {
            return Err(ApiError::invalid(d, &name, &causes));
        }
        if !meta(&body, "resourceVersion").is_empty() {
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let key = key_of(d, &ns, &name);
        if self.resources[id].objects.contains_key(&key) {
            return Err(ApiError::already_exists(d, &name));
        }
        if d.namespaced {
            self.ensure_namespace(&ns, dry_run)?;
        }
        let uid = self.new_uid();
        {
            let m = obj_mut(&mut body, "metadata");
            m.insert("name".into(), json!(name));
            if d.namespaced {
                m.insert("namespace".into(), json!(ns));
            } else {
                m.remove("namespace");
            }
            m.insert("uid".into(), json!(uid));
            m.insert("creationTimestamp".into(), json!(time::now()));
            for field in [
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "resourceVersion",
                "selfLink",
                "managedFields",
            ] {
                m.remove(field);
            }
            if d.tracks_generation() {
                m.insert("generation".into(), json!(1));
            } else {
                m.remove("generation");
            }
        }
        set_type_meta(d, &mut body);
        admission::normalize_quantities(d.flavor, &mut body);
        self.prepare_create(id, &name, &mut body)?;
        if dry_run {
            return Ok(body);
        }
        let stored = self.commit(id, &key, Some(body), None);
        self.after_write(id, &key);
        Ok(stored.value.clone())
    }

    /// A write that bypasses strategies and validation (what a kubelet or a test fixture does).
    pub(crate) fn modify(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let old = self.get(id, namespace, name)?;
        let mut new = old.value.clone();
        f(&mut new);
        admission::normalize_quantities(d.flavor, &mut new);
        {
            let m = obj_mut(&mut new, "metadata");
            for field in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "resourceVersion",
            ] {
                match old["metadata"].get(field) {
                    Some(v) => m.insert(field.into(), v.clone()),
                    None => m.remove(field),
                };
            }
        }
        set_type_meta(d, &mut new);
        if new == old.value {
            return Ok(new);
        }
        let key = key_of(d, namespace, name);
        let stored = self.commit(id, &key, Some(new), None);
        self.after_write(id, &key);
        Ok(stored.value.clone())
    }

    /// Removes an object at once, whatever its grace period (a kubelet finishing termination).
    pub(crate) fn remove(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let old = self.get(id, namespace, name)?;
        let key = key_of(d, namespace, name);
        let stored = self.commit(id, &key, None, Some(old.value.clone()));
        Ok(stored.value.clone())
    }
}

/// A handle on the stand-in's object store, for tests that want to look at or change state
/// without going through HTTP. Writes made here produce watch events like any other write.
///
/// Resources are named by plural (`pods`), singular, kind (`PodGroup`), short name (`pg`) or
/// `plural.group` (`events.events.k8s.io`); `namespace` is ignored for cluster-scoped resources.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<State>>,
}

fn unknown_resource(resource: &str) -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        format!("the server does not serve a resource named {resource:?}"),
    )
}

impl Store {
    pub(crate) fn new(config: StoreConfig) -> Self {
        Self {
            inner: Arc::new(Mutex::new(State::new(config))),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied write: every write builds
        // the new object first and commits it in one step, so the state is usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stored object, or `None` if it does not exist (or the resource name is unknown).
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let id = resources::resolve(resource)?;
        self.lock()
            .lookup(id, namespace, name)
            .map(|o| o.value.clone())
    }

    /// Every stored object of a resource, across namespaces, in key (namespace, name) order.
    pub fn list(&self, resource: &str) -> Vec<Value> {
        let Some(id) = resources::resolve(resource) else {
            return Vec::new();
        };
        self.lock().all(id).map(|o| o.value.clone()).collect()
    }

    /// How many objects of a resource are stored.
    pub fn count(&self, resource: &str) -> usize {
        resources::resolve(resource).map_or(0, |id| self.lock().resources[id].objects.len())
    }

    /// Creates an object exactly as a POST would (defaulting, admission, validation); the
    /// namespace comes from `metadata.namespace`, else `default`.
    pub fn create(&self, resource: &str, object: Value) -> Result<Value, ApiError> {
        let id = resources::resolve(resource).ok_or_else(|| unknown_resource(resource))?;
        let ns = object["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        self.lock().create(id, &ns, object, false)
    }

    /// Changes an object in place with no validation and no subresource rules (spec, status
    /// and metadata alike), as a kubelet or controller would; name, namespace, uid and
    /// creationTimestamp are kept. A change that changes nothing writes nothing.
    pub fn modify(
        &self,
        resource: &str,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Result<Value, ApiError> {
        let id = resources::resolve(resource).ok_or_else(|| unknown_resource(resource))?;
        self.lock().modify(id, namespace, name, f)
    }

    /// `POST pods/{name}/binding` with `binding`, as a scheduler sends it (uid and
    /// resourceVersion preconditions, gated or bound pods refused).
    pub fn bind(&self, namespace: &str, name: &str, binding: &Value) -> Result<Value, ApiError> {
        self.lock().bind(namespace, Some(name), binding, false)
    }

    /// Removes an object at once, bypassing graceful deletion (what the kubelet's final delete
    /// of a terminated pod amounts to). Returns the last state, as sent in the DELETED event.
    pub fn remove(&self, resource: &str, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let id = resources::resolve(resource).ok_or_else(|| unknown_resource(resource))?;
        self.lock().remove(id, namespace, name)
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().resource_version()
    }

    /// Drops the watch history, as etcd compaction plus a watch-cache reset would: the next
    /// watch from any earlier resourceVersion gets `410 Expired`. Open watches are unaffected.
    pub fn compact(&self) {
        self.lock().compact();
    }

    /// Closes every open watch stream, as a server-side timeout or an API server restart
    /// does. Clients re-watch from the last resourceVersion they saw.
    pub fn close_watches(&self) {
        self.lock().close_watches();
    }

    /// How many watch streams are open.
    pub fn active_watches(&self) -> usize {
        self.lock().active_watches()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State::new(StoreConfig {
            history_window: 3,
            node_lifecycle_controller: true,
            auto_create_namespaces: true,
            disruption_controller: true,
            pv_controller: true,
            job_controller: true,
            replicaset_controller: true,
            podgroup_protection: true,
            resource_claim_controller: true,
        })
    }

    fn pod(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}})
    }

    #[test]
    fn history_window_bounds_watch_resumption() {
        let mut s = state();
        let start = s.resource_version();
        for i in 0..5 {
            assert!(s.create(PODS, "ns", pod(&format!("p{i}")), false).is_ok());
        }
        let expired = s.watch(PODS, WatchFrom::After(start)).err();
        assert_eq!(expired.as_ref().map(|e| e.code), Some(410));
        let Ok(recent) = s.watch(PODS, WatchFrom::After(s.resource_version() - 3)) else {
            panic!("recent watch must succeed");
        };
        match recent.replay {
            Replay::Events(events) => assert_eq!(events.len(), 3),
            Replay::Objects(_) => panic!("expected events"),
        }
    }

    #[test]
    fn pagination_walks_every_object_once() {
        let mut s = state();
        for i in 0..25 {
            assert!(s
                .create(
                    PODS,
                    if i % 2 == 0 { "a" } else { "b" },
                    pod(&format!("p{i:02}")),
                    false
                )
                .is_ok());
        }
        let mut query = ListQuery {
            limit: Some(7),
            ..Default::default()
        };
        let mut seen = Vec::new();
        let first_rv = s.resource_version();
        loop {
            let Ok(page) = s.list(PODS, &query) else {
                panic!("list failed")
            };
            assert_eq!(page.resource_version, first_rv);
            seen.extend(
                page.items
                    .iter()
                    .map(|o| format!("{}/{}", meta(o, "namespace"), meta(o, "name"))),
            );
            match page.continue_token {
                Some(t) => query.continue_token = Some(t),
                None => break,
            }
        }
        assert_eq!(seen.len(), 25);
        let mut sorted = seen.clone();
        sorted.sort();
        assert_eq!(seen, sorted);
    }

    #[test]
    fn node_lifecycle_removes_not_ready_taint_of_ready_node() {
        let mut s = state();
        let node = json!({"metadata": {"name": "n1"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let created = s.create(NODES, "", node, false).unwrap_or_default();
        assert_eq!(created["spec"]["taints"][0]["key"], admission::NOT_READY);
        let stored = s
            .get(NODES, "", "n1")
            .map(|n| (*n).clone())
            .unwrap_or_default();
        assert_eq!(stored["spec"]["taints"], json!([]));
    }
}
