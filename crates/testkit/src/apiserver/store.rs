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

/// kube-apiserver's defaulting and validation of a new `batch/v1` Job (what a scheduler's
/// view depends on); its status is the Job controller's.
fn prepare_job(obj: &mut Value) -> Result<(), Vec<(String, String)>> {
    let restart = obj["spec"]["template"]["spec"]["restartPolicy"].as_str();
    if !matches!(restart, Some("Never" | "OnFailure")) {
        return Err(vec![(
            "spec.template.spec.restartPolicy".into(),
            format!(
                "Unsupported value: \"{}\": supported values: \"OnFailure\", \"Never\"",
                restart.unwrap_or("Always")
            ),
        )]);
    }
    if let Value::Object(map) = obj {
        map.remove("status");
    }
    let spec = obj_mut(obj, "spec");
    if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
        spec.insert("completions".into(), json!(1));
    }
    spec.entry("parallelism").or_insert_with(|| json!(1));
    spec.entry("backoffLimit").or_insert_with(|| json!(6));
    spec.entry("completionMode")
        .or_insert_with(|| json!("NonIndexed"));
    spec.entry("suspend").or_insert_with(|| json!(false));
    Ok(())
}

/// kube-apiserver's defaulting and validation of a new `apps/v1` ReplicaSet or Deployment
/// (what a scheduler's view depends on): `replicas` 1, a selector that selects the template's
/// labels; its status is the controller's.
fn prepare_apps(obj: &mut Value) -> Result<(), Vec<(String, String)>> {
    let selector = serde_json::from_value::<
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    >(obj["spec"]["selector"].clone())
    .ok();
    let template = serde_json::from_value::<PodTemplateSpec>(obj["spec"]["template"].clone()).ok();
    caldera_actors::replicaset::validate(selector.as_ref(), template.as_ref())
        .map_err(|e| vec![e])?;
    if let Value::Object(map) = obj {
        map.remove("status");
    }
    obj_mut(obj, "spec")
        .entry("replicas")
        .or_insert_with(|| json!(1));
    Ok(())
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

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            text.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect()
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A pod's effective grace period for a delete (`podStrategy.CheckGracefulDelete`).
fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(0);
    if pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        period = 0;
    }
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Failed" | "Succeeded")
    ) {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    period
}

/// Everything but `metadata` and `status`: what moves a custom resource's generation.
fn generation_relevant(obj: &Value) -> Value {
    match obj {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "metadata" && k.as_str() != "status")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
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

    /// kube-controller-manager's ephemeral volume controller: the claims of the pod's generic
    /// ephemeral volumes ([`caldera_actors::statefulset::ephemeral_claims`]) are created when
    /// missing, each as its own write.
    fn ephemeral_claims(&mut self, key: &Key) {
        let Some(pod) = self.resources[PODS].objects.get(key).cloned() else {
            return;
        };
        let has_ephemeral = pod.value["spec"]["volumes"]
            .as_array()
            .is_some_and(|vs| vs.iter().any(|v| !v["ephemeral"].is_null()));
        if !has_ephemeral {
            return;
        }
        let Ok(pod) = serde_json::from_value::<Pod>(pod.value.clone()) else {
            return;
        };
        for claim in caldera_actors::statefulset::ephemeral_claims(&pod) {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if self.lookup(CLAIMS, &key.0, &name).is_some() {
                continue;
            }
            if let Ok(body) = serde_json::to_value(&claim) {
                let _ = self.create(CLAIMS, &key.0, body, false);
            }
        }
    }

    /// kube-controller-manager's Job controller ([`caldera_actors::job`]): the Job's missing
    /// pods, the deletion of a failed Job's active pods, and its status, each its own write.
    fn sync_job(&mut self, namespace: &str, name: &str) {
        let Some(job) = self.lookup(JOBS, namespace, name).and_then(|j| {
            serde_json::from_value::<k8s_openapi::api::batch::v1::Job>(j.value.clone()).ok()
        }) else {
            return;
        };
        let pods: Vec<Pod> = self.resources[PODS]
            .objects
            .range((namespace.to_string(), String::new())..)
            .take_while(|(k, _)| k.0 == namespace)
            .filter_map(|(_, p)| serde_json::from_value(p.value.clone()).ok())
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let out =
            caldera_actors::job::sync(&job, &refs, &|n| self.lookup(PODS, namespace, n).is_some());
        for pod in out.create {
            if let Ok(body) = serde_json::to_value(&pod) {
                let _ = self.create(PODS, namespace, body, false);
            }
        }
        for pod in &out.delete {
            let _ = self.delete(PODS, namespace, pod, &DeleteOptions::default(), false);
        }
        if let Ok(status) = serde_json::to_value(&out.status) {
            let _ = self.modify(JOBS, namespace, name, |j| {
                if let Value::Object(map) = j {
                    map.insert("status".into(), status);
                }
            });
        }
    }

    /// kube-controller-manager's Deployment and ReplicaSet controllers
    /// ([`caldera_actors::replicaset`]) over `namespace`, after a write to a pod, a ReplicaSet
    /// or a Deployment there: every Deployment's ReplicaSets made and scaled, then every
    /// ReplicaSet's pods adopted, released, created and deleted, and their statuses written,
    /// each its own write. Until nothing changes (a Deployment's new ReplicaSet makes pods at
    /// once), at most a few rounds.
    fn sync_apps(&mut self, namespace: &str) {
        for _ in 0..3 {
            let before = self.rv;
            self.sync_deployments(namespace);
            self.sync_replicasets(namespace);
            if self.rv == before {
                break;
            }
        }
    }

    /// The ReplicaSet controller's reaction to a pod deleted or terminating in `namespace`
    /// (the ReplicaSet's own deletions do not re-trigger it).
    fn replicasets_after_pod_change(&mut self, namespace: &str) {
        if self.config.replicaset_controller && !self.syncing_replicasets {
            self.syncing_replicasets = true;
            self.sync_apps(namespace);
            self.syncing_replicasets = false;
        }
    }

    fn typed_in<T: for<'de> k8s_openapi::serde::Deserialize<'de>>(
        &self,
        id: ResourceId,
        namespace: &str,
    ) -> Vec<T> {
        self.resources[id]
            .objects
            .range((namespace.to_string(), String::new())..)
            .take_while(|(k, _)| k.0 == namespace)
            .filter_map(|(_, o)| serde_json::from_value(o.value.clone()).ok())
            .collect()
    }

    fn sync_deployments(&mut self, namespace: &str) {
        let deployments: Vec<Deployment> = self.typed_in(DEPLOYMENTS, namespace);
        for deploy in deployments {
            let sets: Vec<ReplicaSet> = self.typed_in(REPLICASETS, namespace);
            let refs: Vec<&ReplicaSet> = sets.iter().collect();
            let pods: Vec<Pod> = self.typed_in(PODS, namespace);
            let pod_refs: Vec<&Pod> = pods.iter().collect();
            let out = caldera_actors::replicaset::sync_deployment(&deploy, &refs, &pod_refs);
            for (name, replicas) in &out.scale {
                let _ = self.modify(REPLICASETS, namespace, name, |r| {
                    obj_mut(r, "spec").insert("replicas".into(), json!(replicas));
                });
            }
            if let Some(rs) = out.create {
                if let Ok(body) = serde_json::to_value(&rs) {
                    let _ = self.create(REPLICASETS, namespace, body, false);
                }
            }
            let name = deploy.metadata.name.clone().unwrap_or_default();
            if let Ok(status) = serde_json::to_value(&out.status) {
                let _ = self.modify(DEPLOYMENTS, namespace, &name, |d| {
                    if let Value::Object(map) = d {
                        map.insert("status".into(), status);
                    }
                });
            }
        }
    }

    fn sync_replicasets(&mut self, namespace: &str) {
        let sets: Vec<ReplicaSet> = self.typed_in(REPLICASETS, namespace);
        let now = time::now_model();
        for rs in sets {
            let pods: Vec<Pod> = self.typed_in(PODS, namespace);
            let refs: Vec<&Pod> = pods.iter().collect();
            let out = caldera_actors::replicaset::sync(&rs, &refs, now, &|n| {
                self.lookup(PODS, namespace, n).is_some()
            });
            let owner = caldera_actors::replicaset::controller_ref(&rs);
            let owner_json = serde_json::to_value(&owner).unwrap_or(Value::Null);
            for pod in &out.adopt {
                let _ = self.modify(PODS, namespace, pod, |p| {
                    let m = obj_mut(p, "metadata");
                    let refs = m.entry("ownerReferences").or_insert_with(|| json!([]));
                    if let Value::Array(list) = refs {
                        list.push(owner_json.clone());
                    }
                });
            }
            for pod in &out.release {
                let _ = self.modify(PODS, namespace, pod, |p| {
                    if let Some(list) = p["metadata"]["ownerReferences"].as_array_mut() {
                        list.retain(|o| o["uid"] != owner.uid.as_str());
                    }
                });
            }
            for pod in out.create {
                if let Ok(body) = serde_json::to_value(&pod) {
                    let _ = self.create(PODS, namespace, body, false);
                }
            }
            for pod in &out.delete {
                let _ = self.delete(PODS, namespace, pod, &DeleteOptions::default(), false);
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            if let Ok(status) = serde_json::to_value(&out.status) {
                let _ = self.modify(REPLICASETS, namespace, &name, |r| {
                    if let Value::Object(map) = r {
                        map.insert("status".into(), status);
                    }
                });
            }
        }
    }

    /// The garbage collector for the dependents of the deleted Job, JobSet or LeaderWorkerSet
    /// `uid` in `namespace`:
    /// deleted (`Background`, `Foreground`) or orphaned (`Orphan`, and no policy: the default
    /// of `batch/v1` Jobs).
    fn collect_job_dependents(&mut self, namespace: &str, uid: &str, policy: Option<&str>) {
        let orphan = !matches!(policy, Some("Background" | "Foreground"));
        for id in 0..RESOURCES.len() {
            if !def(id).namespaced || !def(id).is_stored() {
                continue;
            }
            let owned: Vec<Key> = self.resources[id]
                .objects
                .range((namespace.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == namespace)
                .filter(|(_, o)| {
                    o.value["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for key in owned {
                if orphan {
                    let _ = self.modify(id, &key.0, &key.1, |o| {
                        if let Some(refs) = o["metadata"]["ownerReferences"].as_array_mut() {
                            refs.retain(|r| r["uid"] != uid);
                        }
                    });
                } else {
                    // The garbage collector deletes dependents in the background, so their own
                    // dependents (a JobSet's Jobs' pods) go too.
                    let background = DeleteOptions {
                        propagation_policy: Some("Background".into()),
                        ..DeleteOptions::default()
                    };
                    let _ = self.delete(id, &key.0, &key.1, &background, false);
                }
            }
        }
    }

    /// kube-controller-manager's PV controller ([`caldera_actors::pv_controller`]): binds claims
    /// and volumes, each object it changes written as its own write (volumes first).
    fn sync_volumes(&mut self) {
        if !self.config.pv_controller {
            return;
        }
        let values = |s: &Self, id| -> Vec<Value> { s.all(id).map(|o| o.value.clone()).collect() };
        let writes = storage::controller_writes(
            &values(self, CLAIMS),
            &values(self, VOLUMES),
            &values(self, STORAGE_CLASSES),
        );
        for (name, fields) in writes.volumes {
            let _ = self.modify(VOLUMES, "", &name, |v| {
                storage::apply_fields(v, &fields, &["claimRef"]);
            });
        }
        for (namespace, name, fields) in writes.claims {
            let _ = self.modify(CLAIMS, &namespace, &name, |c| {
                storage::apply_fields(c, &fields, &["volumeName", "storageClassName"]);
            });
        }
    }

    /// kube-controller-manager's podgroup-protection controller, for the terminating native
    /// PodGroups of `namespace`: the finalizer goes once no pod that has not finished names
    /// the group (`spec.schedulingGroup.podGroupName`); and, as for any object, a terminating
    /// PodGroup whose last finalizer is gone is deleted.
    fn protect_podgroups(&mut self, namespace: &str) {
        let terminating: Vec<(Key, Value)> = self.resources[NATIVE_PODGROUPS]
            .objects
            .iter()
            .filter(|(k, o)| {
                k.0 == namespace && !o.value["metadata"]["deletionTimestamp"].is_null()
            })
            .map(|(k, o)| (k.clone(), o.value.clone()))
            .collect();
        for (key, mut pg) in terminating {
            let name = key.1.as_str();
            let in_use = self.resources[PODS].objects.iter().any(|(k, p)| {
                k.0 == namespace
                    && p.value["spec"]["schedulingGroup"]["podGroupName"] == name
                    && !matches!(
                        p.value["status"]["phase"].as_str(),
                        Some("Succeeded" | "Failed")
                    )
            });
            let m = obj_mut(&mut pg, "metadata");
            let mut finalizers: Vec<Value> = m
                .get("finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let before = finalizers.len();
            if self.config.podgroup_protection && !in_use {
                finalizers.retain(|f| f != PODGROUP_PROTECTION);
            }
            if finalizers.is_empty() {
                self.commit(NATIVE_PODGROUPS, &key, None, Some(pg));
            } else if finalizers.len() != before {
                m.insert("finalizers".into(), Value::Array(finalizers));
                self.commit(NATIVE_PODGROUPS, &key, Some(pg), None);
            }
        }
    }

    /// kube-controller-manager's resource-claim controller ([`caldera_actors::resourceclaim`])
    /// over `namespace`: claims created from templates, pods' `resourceClaimStatuses`, then
    /// claims' status, finalizers and deletions, each as its own write.
    fn sync_resource_claims(&mut self, namespace: &str) {
        let in_ns = |s: &Self, id: ResourceId| -> Vec<Value> {
            s.resources[id]
                .objects
                .range((namespace.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == namespace)
                .map(|(_, o)| o.value.clone())
                .collect()
        };
        let claims = in_ns(self, RESOURCE_CLAIMS);
        // The pods that name claims, and those that own one (the bridge's claims).
        let owners: std::collections::BTreeSet<&str> = claims
            .iter()
            .flat_map(|c| {
                c["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .filter_map(|o| o["uid"].as_str())
            .collect();
        let pods: Vec<Value> = in_ns(self, PODS)
            .into_iter()
            .filter(|p| {
                dra::pod_has_claims(p)
                    || p["metadata"]["uid"]
                        .as_str()
                        .is_some_and(|u| owners.contains(u))
            })
            .collect();
        let templates = in_ns(self, CLAIM_TEMPLATES);
        let out = dra::controller_sync(&pods, &claims, &templates, &|ns, name| {
            self.lookup(RESOURCE_CLAIMS, ns, name).is_some()
        });
        for claim in out.create {
            if let Ok(body) = serde_json::to_value(&claim) {
                let _ = self.create(RESOURCE_CLAIMS, namespace, body, false);
            }
        }
        for pod in out.pods {
            let Ok(statuses) = serde_json::to_value(&pod.resource_claim_statuses) else {
                continue;
            };
            let _ = self.modify(PODS, &pod.namespace, &pod.name, |p| {
                obj_mut(p, "status").insert("resourceClaimStatuses".into(), statuses);
            });
        }
        for update in out.claims {
            if let Some(status) = update.status.and_then(|s| serde_json::to_value(&s).ok()) {
                let _ = self.modify(RESOURCE_CLAIMS, &update.namespace, &update.name, |c| {
                    if let Value::Object(map) = c {
                        map.insert("status".into(), status);
                    }
                });
            }
            if let Some(finalizers) = update.finalizers {
                let _ = self.modify(RESOURCE_CLAIMS, &update.namespace, &update.name, |c| {
                    let m = obj_mut(c, "metadata");
                    if finalizers.is_empty() {
                        m.remove("finalizers");
                    } else {
                        m.insert("finalizers".into(), json!(finalizers));
                    }
                });
                self.release_finalized(RESOURCE_CLAIMS, &update.namespace, &update.name);
            }
            if update.delete {
                let _ = self.delete(
                    RESOURCE_CLAIMS,
                    &update.namespace,
                    &update.name,
                    &DeleteOptions::default(),
                    false,
                );
            }
        }
    }

    /// A terminating object whose last finalizer is gone is deleted (what kube-apiserver does on
    /// the update that removes it).
    fn release_finalized(&mut self, id: ResourceId, namespace: &str, name: &str) {
        let Some(obj) = self.lookup(id, namespace, name).cloned() else {
            return;
        };
        let finalizers = obj.value["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if obj.value["metadata"]["deletionTimestamp"].is_null() || finalizers {
            return;
        }
        let key = key_of(def(id), namespace, name);
        self.commit(id, &key, None, Some(obj.value.clone()));
    }

    /// Controllers that react to a write at once (their effect is a separate, later write).
    fn after_write(&mut self, id: ResourceId, key: &Key) {
        if id == NATIVE_PODGROUPS || id == PODS {
            self.protect_podgroups(&key.0.clone());
        }
        if id == PODS && self.config.pv_controller {
            self.ephemeral_claims(key);
        }
        if self.config.job_controller && !self.syncing_jobs {
            let job = match id {
                JOBS => Some(key.1.clone()),
                PODS => self.resources[PODS].objects.get(key).and_then(|p| {
                    p.value["metadata"]["ownerReferences"]
                        .as_array()?
                        .iter()
                        .find(|o| o["controller"] == true && o["kind"] == "Job")
                        .and_then(|o| o["name"].as_str().map(str::to_string))
                }),
                _ => None,
            };
            if let Some(name) = job {
                self.syncing_jobs = true;
                self.sync_job(&key.0, &name);
                self.syncing_jobs = false;
            }
        }
        if matches!(id, PODS | REPLICASETS | DEPLOYMENTS) {
            self.replicasets_after_pod_change(&key.0.clone());
        }
        if id == NODES && self.config.node_lifecycle_controller {
            let Some(node) = self.resources[NODES].objects.get(key).cloned() else {
                return;
            };
            if let Some(taints) = admission::sync_condition_taints(&node) {
                let mut next = node.value.clone();
                obj_mut(&mut next, "spec").insert("taints".into(), Value::Array(taints));
                self.commit(NODES, key, Some(next), None);
            }
        }
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

    pub(crate) fn list(&self, id: ResourceId, query: &ListQuery) -> Result<ListPage, ApiError> {
        let d = def(id);
        let rs = &self.resources[id];
        let (resource_version, start) = match &query.continue_token {
            Some(token) => {
                let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
                let decoded: Value = hex_decode(token)
                    .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                    .ok_or_else(bad)?;
                let rv = decoded["rv"].as_u64().ok_or_else(bad)?;
                let ns = decoded["ns"].as_str().ok_or_else(bad)?.to_string();
                let name = decoded["name"].as_str().ok_or_else(bad)?.to_string();
                (rv, Bound::Excluded((ns, name)))
            }
            None => (
                self.rv,
                match &query.namespace {
                    Some(ns) if d.namespaced => Bound::Included((ns.clone(), String::new())),
                    _ => Bound::Unbounded,
                },
            ),
        };
        let in_namespace = |k: &Key| match &query.namespace {
            Some(ns) if d.namespaced => &k.0 == ns,
            _ => true,
        };
        let limit = query.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key: Option<&Key> = None;
        let mut more = false;
        if let (Some(name), None) = (query.fields.required_name(), &query.continue_token) {
            // A name-pinned selector is a point lookup, not a scan.
            let candidates: Vec<&Arc<Stored>> = match &query.namespace {
                Some(ns) if d.namespaced => rs
                    .objects
                    .get(&(ns.clone(), name.to_string()))
                    .into_iter()
                    .collect(),
                _ => rs
                    .objects
                    .iter()
                    .filter(|(k, _)| k.1 == name)
                    .map(|(_, v)| v)
                    .collect(),
            };
            items.extend(
                candidates
                    .into_iter()
                    .filter(|o| query.labels.matches(o) && query.fields.matches(o))
                    .cloned(),
            );
        } else {
            for (k, obj) in rs.objects.range((start, Bound::Unbounded)) {
                if !in_namespace(k) {
                    break;
                }
                if items.len() == limit {
                    more = true;
                    break;
                }
                last_key = Some(k);
                if query.labels.matches(obj) && query.fields.matches(obj) {
                    items.push(obj.clone());
                }
            }
        }
        let continue_token = match (more, last_key) {
            (true, Some((ns, name))) => {
                let token = json!({"rv": resource_version, "ns": ns, "name": name});
                Some(hex_encode(token.to_string().as_bytes()))
            }
            _ => None,
        };
        Ok(ListPage {
            items,
            resource_version,
            continue_token,
        })
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

    /// Per-resource defaulting, admission and `PrepareForCreate`.
    fn prepare_create(
        &mut self,
        id: ResourceId,
        name: &str,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let d = def(id);
        if d.group == "events.k8s.io" {
            let errors = admission::validate_v1_event(obj);
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        match d.flavor {
            Flavor::Pod => {
                admission::default_pod(obj);
                self.admit_runtime_class(name, obj)?;
                self.admit_priority(name, obj)?;
                admission::add_default_tolerations(obj);
                admission::reset_pod_status(obj);
                let errors = podspec::validate_pod_spec(&obj["spec"], "spec");
                if !errors.is_empty() {
                    return Err(ApiError::invalid(d, name, &errors));
                }
            }
            Flavor::PodTemplate => {
                admission::default_pod_template(obj);
                let errors = podspec::validate_pod_spec(&obj["template"]["spec"], "template.spec");
                if !errors.is_empty() {
                    return Err(ApiError::invalid(d, name, &errors));
                }
            }
            Flavor::Node => admission::add_not_ready_taint(obj),
            Flavor::Namespace => {
                obj_mut(obj, "metadata")
                    .entry("labels")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .map(|l| l.insert("kubernetes.io/metadata.name".into(), json!(name)));
                obj_mut(obj, "spec").insert("finalizers".into(), json!(["kubernetes"]));
                if let Value::Object(map) = obj {
                    map.insert("status".into(), json!({"phase": "Active"}));
                }
            }
            Flavor::Custom => {
                if d.has_status() {
                    if let Value::Object(map) = obj {
                        map.remove("status");
                    }
                }
            }
            Flavor::Crd => {
                let expected = format!(
                    "{}.{}",
                    obj["spec"]["names"]["plural"].as_str().unwrap_or_default(),
                    obj["spec"]["group"].as_str().unwrap_or_default()
                );
                if expected != name {
                    return Err(ApiError::invalid(
                        d,
                        name,
                        &[(
                            "metadata.name".into(),
                            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
                        )],
                    ));
                }
                let status = admission::established_crd_status(obj);
                if let Value::Object(map) = obj {
                    map.insert("status".into(), status);
                }
            }
            Flavor::PriorityClass => {
                let Some(value) = obj["value"].as_i64() else {
                    return Err(ApiError::invalid(
                        d,
                        name,
                        &[("value".into(), "Required value".into())],
                    ));
                };
                if value > 1_000_000_000 && !name.starts_with("system-") {
                    return Err(ApiError::invalid(
                        d,
                        name,
                        &[(
                            "value".into(),
                            "Forbidden: maximum allowed value of a user defined priority is 1000000000".into(),
                        )],
                    ));
                }
                if obj["globalDefault"] == true {
                    let existing = self
                        .all(PRIORITY_CLASSES)
                        .find(|pc| pc["globalDefault"] == true)
                        .map(|pc| meta(pc, "name").to_string());
                    if let Some(existing) = existing {
                        return Err(ApiError::forbidden(
                            d,
                            name,
                            &format!("PriorityClass {existing} is already marked as default. Only one default can exist"),
                        ));
                    }
                }
                if let Value::Object(map) = obj {
                    map.entry("preemptionPolicy")
                        .or_insert_with(|| json!("PreemptLowerPriority"));
                }
            }
            Flavor::Budget => {
                // `PrepareForCreate`: the status starts empty (Go's zero values).
                if let Value::Object(map) = obj {
                    map.insert(
                        "status".into(),
                        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
                    );
                }
                obj_mut(obj, "metadata").insert("generation".into(), json!(1));
            }
            Flavor::Volume => {
                storage::prepare_volume(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::Claim => {
                let classes: Vec<StorageClass> = self
                    .all(STORAGE_CLASSES)
                    .filter_map(|c| serde_json::from_value(c.value.clone()).ok())
                    .collect();
                storage::prepare_claim(obj, &classes).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::StorageClass => {
                storage::prepare_class(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::Job => prepare_job(obj).map_err(|c| ApiError::invalid(d, name, &c))?,
            Flavor::Apps => prepare_apps(obj).map_err(|c| ApiError::invalid(d, name, &c))?,
            Flavor::NativePodGroup => {
                // kube-apiserver drops the status on create and adds the protection finalizer
                // (kube-controller-manager's podgroup-protection controller removes it once no
                // live pod names the group).
                if let Value::Object(map) = obj {
                    map.remove("status");
                }
                let m = obj_mut(obj, "metadata");
                let finalizers = m.entry("finalizers").or_insert_with(|| json!([]));
                if let Value::Array(list) = finalizers {
                    if !list.iter().any(|f| f == PODGROUP_PROTECTION) {
                        list.push(json!(PODGROUP_PROTECTION));
                    }
                }
                m.insert("generation".into(), json!(1));
            }
            Flavor::ResourceClaim => {
                dra::prepare_claim(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::ClaimTemplate => {
                dra::prepare_template(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::DeviceClass | Flavor::ResourceSlice => {
                let causes = if d.flavor == Flavor::DeviceClass {
                    dra::validate_class(obj)
                } else {
                    dra::validate_slice(obj)
                };
                if !causes.is_empty() {
                    return Err(ApiError::invalid(d, name, &causes));
                }
            }
            Flavor::CoreEvent
            | Flavor::EventV1
            | Flavor::Lease
            | Flavor::RuntimeClass
            | Flavor::Binding => {}
        }
        Ok(())
    }

    /// RuntimeClass admission: overhead comes only from the pod's RuntimeClass.
    fn admit_runtime_class(&self, name: &str, pod: &mut Value) -> Result<(), ApiError> {
        let pods = def(PODS);
        let has_overhead = !pod["spec"]["overhead"].is_null();
        let class_name = pod["spec"]["runtimeClassName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if class_name.is_empty() {
            if has_overhead {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
                ));
            }
            return Ok(());
        }
        let Some(class) = self.lookup(RUNTIME_CLASSES, "", &class_name).cloned() else {
            return Err(ApiError::forbidden(
                pods,
                name,
                &format!("pod rejected: RuntimeClass \"{class_name}\" not found"),
            ));
        };
        let fixed = &class["overhead"]["podFixed"];
        let spec = obj_mut(pod, "spec");
        if fixed.is_object() {
            if has_overhead && spec.get("overhead") != Some(fixed) {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
                ));
            }
            spec.insert("overhead".into(), fixed.clone());
        } else if has_overhead {
            return Err(ApiError::forbidden(
                pods,
                name,
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
            ));
        }
        if let Some(selector) = class["scheduling"]["nodeSelector"].as_object() {
            let pod_selector = spec.entry("nodeSelector").or_insert_with(|| json!({}));
            if let Value::Object(pod_selector) = pod_selector {
                for (k, v) in selector {
                    match pod_selector.get(k) {
                        Some(existing) if existing != v => {
                            return Err(ApiError::forbidden(
                                pods,
                                name,
                                &format!(
                                    "conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                                    v.as_str().unwrap_or_default(),
                                    existing.as_str().unwrap_or_default()
                                ),
                            ))
                        }
                        _ => {
                            pod_selector.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
        if let Some(tolerations) = class["scheduling"]["tolerations"].as_array() {
            let list = spec.entry("tolerations").or_insert_with(|| json!([]));
            if let Value::Array(list) = list {
                for t in tolerations {
                    if !list.contains(t) {
                        list.push(t.clone());
                    }
                }
            }
        }
        Ok(())
    }

    /// Priority admission: resolve `priorityClassName` (or the global default) into `priority`.
    fn admit_priority(&self, name: &str, pod: &mut Value) -> Result<(), ApiError> {
        let pods = def(PODS);
        let class_name = pod["spec"]["priorityClassName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (class_name, value, policy) = if class_name.is_empty() {
            let default = self
                .all(PRIORITY_CLASSES)
                .filter(|pc| pc["globalDefault"] == true)
                .min_by_key(|pc| pc["value"].as_i64().unwrap_or_default());
            match default {
                Some(pc) => (
                    meta(pc, "name").to_string(),
                    pc["value"].as_i64().unwrap_or_default(),
                    pc["preemptionPolicy"].as_str().map(str::to_string),
                ),
                None => (String::new(), 0, None),
            }
        } else {
            let Some(pc) = self.lookup(PRIORITY_CLASSES, "", &class_name) else {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    &format!("no PriorityClass with name {class_name} was found"),
                ));
            };
            (
                class_name,
                pc["value"].as_i64().unwrap_or_default(),
                pc["preemptionPolicy"].as_str().map(str::to_string),
            )
        };
        let spec = obj_mut(pod, "spec");
        if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
            if given != value {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"),
                ));
            }
        }
        if !class_name.is_empty() {
            spec.insert("priorityClassName".into(), json!(class_name));
        }
        spec.insert("priority".into(), json!(value));
        let policy = policy.unwrap_or_else(|| "PreemptLowerPriority".to_string());
        spec.entry("preemptionPolicy")
            .or_insert_with(|| json!(policy));
        Ok(())
    }

    /// PUT.
    pub(crate) fn update(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        sub: Sub,
        body: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        check_type_meta(d, &body)?;
        let old = self.get(id, namespace, name)?;
        let body_rv = meta(&body, "resourceVersion");
        if !body_rv.is_empty() && body_rv != meta(&old, "resourceVersion") {
            return Err(ApiError::stale(d, name));
        }
        // A uid in a PUT body is a precondition (`rest.DefaultUpdatedObjectInfo`), checked by
        // storage before anything else: a Conflict.
        let (body_uid, uid) = (meta(&body, "uid"), meta(&old, "uid"));
        if !body_uid.is_empty() && body_uid != uid {
            return Err(ApiError::precondition_failed(
                d.group, d.plural, name, "UID", body_uid, uid,
            ));
        }
        self.finish_update(id, namespace, name, sub, &old, body, dry_run)
    }

    /// PATCH.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        sub: Sub,
        kind: PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let old = self.get(id, namespace, name)?;
        let mut new = old.value.clone();
        match kind {
            PatchType::Merge => patch::merge_patch(&mut new, patch),
            PatchType::Strategic => patch::strategic_merge(&mut new, patch, d.flavor)?,
            PatchType::Json => new = patch::json_patch(&new, patch)?,
        }
        let new_rv = meta(&new, "resourceVersion");
        if !new_rv.is_empty() && new_rv != meta(&old, "resourceVersion") {
            return Err(ApiError::stale(d, name));
        }
        // A patch carries no precondition: a uid it sets that is not the object's fails
        // `ValidateObjectMetaUpdate` (the uid is immutable), 422.
        let new_uid = meta(&new, "uid");
        if new_uid != meta(&old, "uid") {
            return Err(ApiError::invalid(
                d,
                name,
                &[(
                    "metadata.uid".to_string(),
                    format!("Invalid value: {}: field is immutable", json!(new_uid)),
                )],
            ));
        }
        self.finish_update(id, namespace, name, sub, &old, new, dry_run)
    }

    /// The shared tail of PUT and PATCH: `PrepareForUpdate`, validation, no-op detection, commit.
    #[allow(clippy::too_many_arguments)]
    fn finish_update(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        sub: Sub,
        old: &Arc<Stored>,
        mut new: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let new_name = meta(&new, "name");
        if !new_name.is_empty() && new_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({new_name}) does not match the name on the URL ({name})"
            )));
        }
        let new_ns = meta(&new, "namespace");
        if d.namespaced && !new_ns.is_empty() && new_ns != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        set_type_meta(d, &mut new);
        {
            let old_meta = old["metadata"].as_object().cloned().unwrap_or_default();
            let m = obj_mut(&mut new, "metadata");
            for field in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
            ] {
                match old_meta.get(field) {
                    Some(v) => m.insert(field.into(), v.clone()),
                    None => m.remove(field),
                };
            }
        }
        let copy_field = |to: &mut Value, from: &Value, field: &str| {
            if let Value::Object(map) = to {
                match from.get(field) {
                    Some(v) => map.insert(field.into(), v.clone()),
                    None => map.remove(field),
                };
            }
        };
        match sub {
            Sub::Main => {
                if d.has_status() {
                    copy_field(&mut new, old, "status");
                }
            }
            Sub::Status => match d.flavor {
                Flavor::Pod => {
                    copy_field(&mut new, old, "spec");
                    let owners = old["metadata"].get("ownerReferences").cloned();
                    let m = obj_mut(&mut new, "metadata");
                    match owners {
                        Some(o) => m.insert("ownerReferences".into(), o),
                        None => m.remove("ownerReferences"),
                    };
                    if new["status"]["qosClass"].is_null() && !old["status"]["qosClass"].is_null() {
                        obj_mut(&mut new, "status")
                            .insert("qosClass".into(), old["status"]["qosClass"].clone());
                    }
                }
                Flavor::Node | Flavor::Namespace => copy_field(&mut new, old, "spec"),
                _ => {
                    let status = new.get("status").cloned();
                    new = old.value.clone();
                    if let Value::Object(map) = &mut new {
                        match status {
                            Some(s) => map.insert("status".into(), s),
                            None => map.remove("status"),
                        };
                    }
                }
            },
        }
        admission::normalize_quantities(d.flavor, &mut new);
        if sub == Sub::Main {
            let causes = meta_causes(d, name, &new);
            if !causes.is_empty() {
                return Err(ApiError::invalid(d, name, &causes));
            }
        }
        if d.flavor == Flavor::Pod && sub == Sub::Main {
            let errors = admission::validate_pod_spec_update(old, &new);
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        if sub == Sub::Main {
            let errors = match d.flavor {
                Flavor::Volume => storage::validate_volume_update(old, &new),
                Flavor::Claim => storage::validate_claim_update(old, &new),
                Flavor::StorageClass => storage::validate_class_update(old, &new),
                Flavor::PodTemplate => {
                    admission::default_pod_template(&mut new);
                    podspec::validate_pod_spec(&new["template"]["spec"], "template.spec")
                }
                Flavor::ResourceClaim | Flavor::ClaimTemplate => {
                    dra::validate_spec_update(old, &new, "spec")
                }
                Flavor::DeviceClass => dra::validate_class(&new),
                Flavor::ResourceSlice => dra::validate_slice(&new),
                _ => Vec::new(),
            };
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        if d.flavor == Flavor::ResourceClaim && sub == Sub::Status {
            let errors = dra::validate_status_update(old, &new);
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        if d.flavor == Flavor::PriorityClass && old["value"] != new["value"] {
            return Err(ApiError::invalid(
                d,
                name,
                &[(
                    "value".into(),
                    "Forbidden: may not be changed in an update.".into(),
                )],
            ));
        }
        if d.tracks_generation() {
            let changed = match d.flavor {
                Flavor::Pod => old["spec"] != new["spec"],
                _ => generation_relevant(old) != generation_relevant(&new),
            };
            let generation =
                old["metadata"]["generation"].as_i64().unwrap_or(1) + i64::from(changed);
            obj_mut(&mut new, "metadata").insert("generation".into(), json!(generation));
        }
        if old.value == new || dry_run {
            // A write that changes nothing is not persisted: no new resourceVersion, no event.
            return Ok(new);
        }
        let key = key_of(d, namespace, name);
        let stored = self.commit(id, &key, Some(new), None);
        self.after_write(id, &key);
        let value = stored.value.clone();
        if d.flavor == Flavor::ResourceClaim {
            self.release_finalized(id, namespace, name);
        }
        Ok(value)
    }

    /// DELETE of one object. Returns the response body.
    pub(crate) fn delete(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let old = self.get(id, namespace, name)?;
        if let Some(uid) = &opts.uid {
            let actual = meta(&old, "uid");
            if uid != actual {
                return Err(ApiError::precondition_failed(
                    d.group, d.plural, name, "UID", uid, actual,
                ));
            }
        }
        if let Some(rv) = &opts.resource_version {
            let actual = meta(&old, "resourceVersion");
            if rv != actual {
                return Err(ApiError::precondition_failed(
                    d.group,
                    d.plural,
                    name,
                    "ResourceVersion",
                    rv,
                    actual,
                ));
            }
        }
        let key = key_of(d, namespace, name);
        let mut last = old.value.clone();
        if d.flavor == Flavor::Pod {
            let grace = pod_grace_period(&old, opts.grace_period_seconds);
            let pending = old["metadata"]["deletionGracePeriodSeconds"].as_i64();
            let terminating = !old["metadata"]["deletionTimestamp"].is_null();
            if grace > 0 {
                if terminating && pending.is_some_and(|p| p > 0 && p <= grace) {
                    // Graceful deletion already pending with a period no longer than this one.
                    return Ok(old.value.clone());
                }
                let m = obj_mut(&mut last, "metadata");
                m.insert("deletionTimestamp".into(), json!(time::after(grace)));
                m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                if dry_run {
                    return Ok(last);
                }
                let stored = self.commit(id, &key, Some(last), None);
                let value = stored.value.clone();
                if id == PODS {
                    // A terminating pod no longer counts as its ReplicaSet's replica.
                    self.replicasets_after_pod_change(namespace);
                }
                return Ok(value);
            }
            let m = obj_mut(&mut last, "metadata");
            if !terminating {
                m.insert("deletionTimestamp".into(), json!(time::now()));
            }
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        let finalizers = old.value["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if matches!(d.flavor, Flavor::NativePodGroup | Flavor::ResourceClaim) && finalizers {
            // Finalizers keep the object, terminating, until the last one is removed.
            if !last["metadata"]["deletionTimestamp"].is_null() {
                return Ok(old.value.clone());
            }
            obj_mut(&mut last, "metadata").insert("deletionTimestamp".into(), json!(time::now()));
            obj_mut(&mut last, "metadata").insert("deletionGracePeriodSeconds".into(), json!(0));
            if dry_run {
                return Ok(last);
            }
            let stored = self.commit(id, &key, Some(last), None);
            let value = stored.value.clone();
            if d.flavor == Flavor::NativePodGroup {
                self.protect_podgroups(namespace);
            }
            return Ok(value);
        }
        if dry_run {
            return Ok(last);
        }
        if d.flavor == Flavor::Namespace {
            self.delete_namespace_contents(name);
        }
        let uid = meta(&old, "uid").to_string();
        let stored = self.commit(id, &key, None, Some(last));
        if id == JOBS && self.config.job_controller {
            self.collect_job_dependents(namespace, &uid, opts.propagation_policy.as_deref());
        }
        if id == PODS {
            self.protect_podgroups(namespace);
            self.replicasets_after_pod_change(namespace);
        }
        if matches!(id, REPLICASETS | DEPLOYMENTS) && self.config.replicaset_controller {
            // `apps/v1` defaults to background propagation.
            let policy = opts.propagation_policy.as_deref().unwrap_or("Background");
            self.collect_job_dependents(namespace, &uid, Some(policy));
        }
        if matches!(d.kind, "JobSet" | "LeaderWorkerSet") {
            // Custom resources default to background propagation.
            let policy = opts.propagation_policy.as_deref().unwrap_or("Background");
            self.collect_job_dependents(namespace, &uid, Some(policy));
        }
        if d.returns_deleted_object() {
            Ok(stored.value.clone())
        } else {
            let mut details = json!({"name": name, "kind": d.plural, "uid": uid});
            if !d.group.is_empty() {
                details["group"] = json!(d.group);
            }
            let mut status = status_success(200);
            status["details"] = details;
            Ok(status)
        }
    }

    /// What the namespace controller does before a namespace goes away.
    fn delete_namespace_contents(&mut self, namespace: &str) {
        for id in 0..RESOURCES.len() {
            if !def(id).namespaced {
                continue;
            }
            let keys: Vec<Key> = self.resources[id]
                .objects
                .range((namespace.to_string(), String::new())..)
                .take_while(|(k, _)| k.0 == namespace)
                .map(|(k, _)| k.clone())
                .collect();
            for key in keys {
                self.commit(id, &key, None, None);
            }
        }
    }

    /// DELETE on a collection: deletes (or, for bound pods, starts terminating) every match.
    pub(crate) fn delete_collection(
        &mut self,
        id: ResourceId,
        query: &ListQuery,
        opts: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Vec<Value>, ApiError> {
        let mut all = query.clone();
        all.limit = None;
        all.continue_token = None;
        let page = self.list(id, &all)?;
        let mut out = Vec::new();
        for obj in page.items {
            let result = self.delete(
                id,
                meta(&obj, "namespace"),
                meta(&obj, "name"),
                opts,
                dry_run,
            )?;
            if result["kind"] == "Status" {
                out.push((*obj).clone());
            } else {
                out.push(result);
            }
        }
        Ok(out)
    }

    /// `pods/binding` (and the legacy `bindings` resource when `url_name` is `None`).
    pub(crate) fn bind(
        &mut self,
        namespace: &str,
        url_name: Option<&str>,
        binding: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let name = meta(binding, "name").to_string();
        if url_name.is_some_and(|u| u != name) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        let target_kind = binding["target"]["kind"].as_str().unwrap_or_default();
        let target = binding["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut problems = Vec::new();
        if !target_kind.is_empty() && target_kind != "Node" {
            problems.push(format!("target.kind: Unsupported value: \"{target_kind}\": supported values: \"Node\", \"<empty>\""));
        }
        if target.is_empty() {
            problems.push("target.name: Required value".to_string());
        }
        if !problems.is_empty() {
            // kube-apiserver returns binding validation as a plain error, hence a 500.
            return Err(ApiError::internal(problems.join(", ")));
        }
        let pod = self.get(PODS, namespace, &name)?;
        let precondition = |field: &str, label: &str| -> Result<(), ApiError> {
            let wanted = meta(binding, field);
            let actual = meta(&pod, field);
            if !wanted.is_empty() && wanted != actual {
                return Err(ApiError::precondition_failed(
                    "", "pods", &name, label, wanted, actual,
                ));
            }
            Ok(())
        };
        precondition("uid", "UID")?;
        precondition("resourceVersion", "ResourceVersion")?;
        let refuse = |why: String| Err(ApiError::conflict("", "pods/binding", &name, &why));
        if !pod["metadata"]["deletionTimestamp"].is_null() {
            return refuse(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            ));
        }
        let current = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if !current.is_empty() {
            return refuse(format!(
                "pod {name} is already assigned to node \"{current}\""
            ));
        }
        if pod["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| !g.is_empty())
        {
            return refuse(format!("pod {name} has non-empty .spec.schedulingGates"));
        }
        let mut next = pod.value.clone();
        obj_mut(&mut next, "spec").insert("nodeName".into(), json!(target));
        if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
            if !annotations.is_empty() {
                let m = obj_mut(&mut next, "metadata");
                let slot = m.entry("annotations").or_insert_with(|| json!({}));
                if let Value::Object(existing) = slot {
                    for (k, v) in annotations {
                        existing.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        admission::set_pod_scheduled(&mut next);
        if !dry_run {
            let key = key_of(def(PODS), namespace, &name);
            self.commit(PODS, &key, Some(next), None);
        }
        Ok(status_success(201))
    }

    /// `pods/eviction`, judged against the namespace's PodDisruptionBudgets as
    /// kube-apiserver judges it ([`caldera_actors::disruption::evict`]): a refusal is 429
    /// TooManyRequests with the budget named in a `DisruptionBudget` cause; an allowed
    /// eviction charges the budget, marks the pod `DisruptionTarget` and deletes it
    /// gracefully with the eviction's `deleteOptions`.
    pub(crate) fn evict(
        &mut self,
        namespace: &str,
        name: &str,
        eviction: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let body_name = meta(eviction, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let opts = DeleteOptions::from_body(&eviction["deleteOptions"]);
        let stored = self.get(PODS, namespace, name)?;
        let pod: Pod = serde_json::from_value(stored.value.clone()).map_err(ApiError::internal)?;
        let budgets: Vec<PodDisruptionBudget> = self
            .all(BUDGETS)
            .filter(|b| meta(b, "namespace") == namespace)
            .filter_map(|b| serde_json::from_value(b.value.clone()).ok())
            .collect();
        let refs: Vec<&PodDisruptionBudget> = budgets.iter().collect();
        let now = time::now_model();
        match disruption::evict(&pod, &refs) {
            Eviction::Delete => {}
            Eviction::Charge(i) => {
                let mut pdb = budgets[i].clone();
                disruption::charge(&mut pdb, name, now);
                if !dry_run {
                    let status = serde_json::to_value(&pdb.status).map_err(ApiError::internal)?;
                    let pdb_name = pdb.metadata.name.clone().unwrap_or_default();
                    self.modify(BUDGETS, namespace, &pdb_name, |b| {
                        if let Value::Object(map) = b {
                            map.insert("status".into(), status);
                        }
                    })?;
                }
            }
            Eviction::Refused { cause } => {
                return Err(ApiError::too_many_requests(
                    disruption::REFUSED_MESSAGE,
                    "DisruptionBudget",
                    &cause,
                ))
            }
            Eviction::MultipleBudgets => {
                return Err(ApiError::new(
                    500,
                    "InternalError",
                    disruption::MULTIPLE_MESSAGE,
                ))
            }
            Eviction::Forbidden { budget, reason } => {
                return Err(ApiError::forbidden(def(BUDGETS), &budget, &reason))
            }
        }
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        if !finished && !dry_run {
            let mut marked = pod.clone();
            disruption::put_condition(&mut marked, disruption::disruption_target(now));
            let conditions =
                serde_json::to_value(marked.status.as_ref().and_then(|s| s.conditions.as_ref()))
                    .map_err(ApiError::internal)?;
            self.modify(PODS, namespace, name, |p| {
                obj_mut(p, "status").insert("conditions".into(), conditions);
            })?;
        }
        self.delete(PODS, namespace, name, &opts, dry_run)?;
        Ok(status_success(201))
    }

    /// The disruption controller: recomputes the status of every PodDisruptionBudget in
    /// `namespace` ([`caldera_actors::disruption::status`]) and writes the ones that changed,
    /// each as its own write. A pod's controller is found among the ReplicaSets (and their
    /// Deployments); no other controller's scale is.
    fn sync_budgets(&mut self, namespace: &str) {
        if !self.config.disruption_controller {
            return;
        }
        let budgets: Vec<(String, PodDisruptionBudget)> = self
            .all(BUDGETS)
            .filter(|b| meta(b, "namespace") == namespace)
            .filter_map(|b| {
                let pdb = serde_json::from_value(b.value.clone()).ok()?;
                Some((meta(b, "name").to_string(), pdb))
            })
            .collect();
        if budgets.is_empty() {
            return;
        }
        let pods: Vec<Pod> = self
            .all(PODS)
            .filter(|p| meta(p, "namespace") == namespace)
            .filter_map(|p| serde_json::from_value(p.value.clone()).ok())
            .collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let now = time::now_model();
        let sets: Vec<ReplicaSet> = self.typed_in(REPLICASETS, namespace);
        let deployments: Vec<Deployment> = self.typed_in(DEPLOYMENTS, namespace);
        let named = |meta: &ObjectMeta, n: &str| meta.name.as_deref() == Some(n);
        for (name, pdb) in budgets {
            let mut status = disruption::status(&pdb, &refs, now, &|owner, _| {
                caldera_actors::replicaset::scale_of(
                    owner,
                    &|n| sets.iter().find(|r| named(&r.metadata, n)).cloned(),
                    &|n| deployments.iter().find(|d| named(&d.metadata, n)).cloned(),
                )
            });
            let old = pdb.status.clone().unwrap_or_default();
            let mut same = old.clone();
            same.conditions = None;
            let mut new = status.clone();
            new.conditions = None;
            if same == new && old.conditions.is_some() {
                continue;
            }
            if status.disrupted_pods.is_none() {
                status.disrupted_pods = None;
            }
            let Ok(status) = serde_json::to_value(&status) else {
                continue;
            };
            let _ = self.modify(BUDGETS, namespace, &name, |b| {
                if let Value::Object(map) = b {
                    map.insert("status".into(), status);
                }
            });
        }
    }

    pub(crate) fn watch(
        &mut self,
        id: ResourceId,
        from: WatchFrom,
    ) -> Result<WatchStart, ApiError> {
        let rv = self.rv;
        let rs = &mut self.resources[id];
        let replay = match from {
            WatchFrom::Now => Replay::Events(Vec::new()),
            WatchFrom::CurrentState => Replay::Objects(rs.objects.values().cloned().collect()),
            WatchFrom::After(n) => {
                if n < rs.window_start {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {n} ({})",
                        rs.window_start
                    )));
                }
                let first = rs.history.partition_point(|e| e.rv <= n);
                Replay::Events(rs.history.range(first..).cloned().collect())
            }
        };
        let (tx, live) = mpsc::unbounded_channel();
        rs.watchers.push(tx);
        Ok(WatchStart {
            replay,
            live,
            resource_version: rv,
        })
    }

    /// Forgets the watch history: any watch from a resourceVersion before now gets 410.
    pub(crate) fn compact(&mut self) {
        let rv = self.rv;
        for rs in &mut self.resources {
            rs.history.clear();
            rs.window_start = rv;
        }
    }

    /// Ends every open watch stream (clients see the stream close and re-watch).
    pub(crate) fn close_watches(&mut self) {
        for rs in &mut self.resources {
            rs.watchers.clear();
        }
    }

    pub(crate) fn active_watches(&mut self) -> usize {
        self.resources
            .iter_mut()
            .map(|rs| {
                rs.watchers.retain(|w| !w.is_closed());
                rs.watchers.len()
            })
            .sum()
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
