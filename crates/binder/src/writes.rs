//! The API calls, one function each: a bind, the status patches, an eviction, a nomination,
//! an event.
//!
//! Every body is built here so that its shape can be read in one place; the
//! `API calls caldera run makes` section of ARCHITECTURE.md lists them for RBAC.

use crate::error::{Error, Result, WriteKind};
use crate::events::QueuedEvent;
use caldera_model::{
    Bind, EventObject, Eviction, NativeCondition, Nomination, PodConditionUpdate, PodFailure,
    PodGroupStatus, QueueStatus, Resources, Time, VolumeWrite, NATIVE_SCHEDULED,
};
use k8s_openapi::api::core::v1::{
    Binding, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod,
};
use k8s_openapi::api::events::v1::{Event as KubeEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, Patch,
    PatchParams, PostParams, Preconditions,
};
use kube::Client;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// Group, version and plural of Volcano's PodGroup.
const PODGROUP: (&str, &str, &str, &str) =
    ("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups");
/// Group, version and plural of the native PodGroup (Kubernetes 1.36, `GenericWorkload`).
const NATIVE_PODGROUP: (&str, &str, &str, &str) =
    ("scheduling.k8s.io", "v1alpha2", "PodGroup", "podgroups");
/// Group, version and plural of Volcano's Queue.
const QUEUE: (&str, &str, &str, &str) = ("scheduling.volcano.sh", "v1beta1", "Queue", "queues");

fn api_resource((group, version, kind, plural): (&str, &str, &str, &str)) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// `POST /api/v1/namespaces/{ns}/pods/{name}/binding`, with the pod's uid as a precondition so
/// that a pod deleted and re-created under the same name is not bound by a stale decision.
pub async fn bind(client: &Client, b: &Bind) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &b.pod.namespace);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(b.pod.name.to_string()),
            namespace: Some(b.pod.namespace.to_string()),
            // The cache stands `namespace/name` in for a missing uid; that is no precondition.
            uid: Some(b.pod.uid.to_string()).filter(|u| !u.is_empty() && !u.contains('/')),
            ..ObjectMeta::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(b.node.to_string()),
            ..ObjectReference::default()
        },
    };
    api.create_subresource::<_, Value>("binding", &b.pod.name, &PostParams::default(), &binding)
        .await
        .map(|_| ())
        .map_err(|source| Error::Bind {
            pod: b.pod.to_string(),
            node: b.node.to_string(),
            source,
        })
}

pub use caldera_cache::gate::{nomination_patch, release_patch};
/// The gate gate mode lifts.
pub const GANG_GATE: &str = caldera_api::GANG_GATE;

/// Gate mode's release of a member: `PATCH pods/{name}/status` with [`nomination_patch`]
/// while the pod is still gated, then `PATCH pods/{name}` with [`release_patch`] (the pin in
/// every required node-affinity term, no gates, the uid). Nominating first means the member
/// enters kube-scheduler's queue already nominated: there is no moment where it is ungated
/// and its node's capacity is free for other pods of its priority. Sent again after a
/// failure, both are the same patches.
pub async fn release(client: &Client, b: &Bind, patch: &Value, field_manager: &str) -> Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &b.pod.namespace);
    let params = patch_params(field_manager);
    let failed = |source| Error::Release {
        pod: b.pod.to_string(),
        node: b.node.to_string(),
        source,
    };
    api.patch_status(
        &b.pod.name,
        &params,
        &Patch::Merge(&nomination_patch(&b.node)),
    )
    .await
    .map_err(failed)?;
    api.patch(&b.pod.name, &params, &Patch::Merge(patch))
        .await
        .map(|_| ())
        .map_err(failed)
}

/// The merge patch of a volume binder write, at `now`: a claim's `selected-node` and Caldera's
/// time of the choice; a volume's `spec.claimRef` (with the claim's uid when known) and
/// `pv.kubernetes.io/bound-by-controller`, as kube-scheduler pre-binds; or the claim's
/// selection removed.
pub fn volume_patch(w: &VolumeWrite, now: Time) -> Value {
    use caldera_model::volume::{SELECTED_AT, SELECTED_NODE};
    match w {
        VolumeWrite::SelectNode { node, .. } => json!({
            "metadata": {"annotations": {SELECTED_NODE: node.as_ref(), SELECTED_AT: now.to_rfc3339()}}
        }),
        VolumeWrite::PreBind {
            namespace,
            claim,
            uid,
            ..
        } => {
            let mut claim_ref = json!({
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": namespace.as_ref(),
                "name": claim.as_ref(),
            });
            // The cache stands `namespace/name` in for a missing uid; that is no uid.
            if !uid.is_empty() && !uid.contains('/') {
                claim_ref["uid"] = json!(uid.as_ref());
            }
            json!({
                "metadata": {"annotations": {
                    "pv.kubernetes.io/bound-by-controller": "yes",
                    SELECTED_AT: now.to_rfc3339(),
                }},
                "spec": {"claimRef": claim_ref},
            })
        }
        VolumeWrite::Unselect { .. } => json!({
            "metadata": {"annotations": {SELECTED_NODE: null, SELECTED_AT: null}}
        }),
    }
}

/// Sends a volume binder write: `PATCH persistentvolumeclaims/{name}` or
/// `PATCH persistentvolumes/{name}` with [`volume_patch`].
pub async fn volume(
    client: &Client,
    w: &VolumeWrite,
    now: Time,
    field_manager: &str,
) -> Result<()> {
    let params = patch_params(field_manager);
    let patch = volume_patch(w, now);
    match w {
        VolumeWrite::SelectNode {
            namespace, claim, ..
        }
        | VolumeWrite::Unselect { namespace, claim } => {
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
            api.patch(claim, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|source| Error::Volume {
                    kind: WriteKind::ClaimSelection,
                    object: format!("{namespace}/{claim}"),
                    source,
                })
        }
        VolumeWrite::PreBind { volume, .. } => {
            let api: Api<PersistentVolume> = Api::all(client.clone());
            api.patch(volume, &params, &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|source| Error::Volume {
                    kind: WriteKind::VolumePreBind,
                    object: volume.to_string(),
                    source,
                })
        }
    }
}

fn patch_params(field_manager: &str) -> PatchParams {
    PatchParams {
        field_manager: Some(field_manager.to_string()),
        ..PatchParams::default()
    }
}

/// Which part of an object a patch writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// The object itself.
    Object,
    /// Its `status` subresource.
    Status,
}

/// `PATCH` of `name` (its `status` subresource for [`Part::Status`]) under the field manager:
/// the new resourceVersion; a failure is an [`Error::Status`] of `kind` about `object`.
pub(crate) async fn patch_object<K>(
    api: &Api<K>,
    field_manager: &str,
    name: &str,
    part: Part,
    patch: Patch<Value>,
    kind: WriteKind,
    object: String,
) -> Result<Option<String>>
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = patch_params(field_manager);
    let answer = match part {
        Part::Object => api.patch(name, &params, &patch).await,
        Part::Status => api.patch_status(name, &params, &patch).await,
    };
    answer
        .map(|o| o.meta().resource_version.clone())
        .map_err(|source| Error::Status {
            kind,
            object,
            source,
        })
}

/// The `PodScheduled=False` condition. `keep_transition`: the pod already has
/// `PodScheduled=False`, so its `lastTransitionTime` (from which a lone pod's wait is counted)
/// stays.
pub fn pod_condition_patch(c: &PodConditionUpdate, now: Time, keep_transition: bool) -> Value {
    let mut condition = json!({
        "type": "PodScheduled",
        "status": "False",
        "reason": c.reason,
        "message": c.message,
    });
    if !keep_transition {
        condition["lastTransitionTime"] = json!(now.to_rfc3339());
    }
    json!({
        "metadata": { "uid": &*c.pod.uid },
        "status": { "conditions": [condition] },
    })
}

/// `PATCH pods/{name}/status` (strategic merge: `conditions` merge by `type`). Returns the
/// new resourceVersion.
pub async fn pod_condition(
    client: &Client,
    field_manager: &str,
    c: &PodConditionUpdate,
    now: Time,
    keep_transition: bool,
) -> Result<Option<String>> {
    let patch = pod_condition_patch(c, now, keep_transition);
    pod_status(client, field_manager, &c.pod.namespace, &c.pod.name, patch).await
}

/// `PATCH pods/{name}/status` with a strategic merge `patch`. Returns the new resourceVersion.
async fn pod_status(
    client: &Client,
    field_manager: &str,
    namespace: &str,
    name: &str,
    patch: Value,
) -> Result<Option<String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let object = format!("{namespace}/{name}");
    let patch = Patch::Strategic(patch);
    patch_object(
        &api,
        field_manager,
        name,
        Part::Status,
        patch,
        WriteKind::PodStatus,
        object,
    )
    .await
}

/// `POST pods/{name}/eviction` (`policy/v1`), with the pod's uid as precondition so a pod
/// re-created under the same name is never evicted. The API server checks the pod's
/// PodDisruptionBudgets: 429 means a budget refused it.
pub async fn evict(client: &Client, e: &Eviction) -> Result<Option<String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &e.pod.namespace);
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(e.pod.uid.to_string()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    };
    api.evict(&e.pod.name, &params)
        .await
        .map(|_| None)
        .map_err(|source| Error::Status {
            kind: WriteKind::Eviction,
            object: e.pod.to_string(),
            source,
        })
}

/// The merge patch setting (or, with `None`, clearing) a preemptor's
/// `status.nominatedNodeName`, with the pod's uid as precondition.
pub fn preemptor_nomination_patch(n: &Nomination) -> Value {
    json!({
        "metadata": { "uid": &*n.pod.uid },
        "status": { "nominatedNodeName": n.node.as_deref() },
    })
}

/// `PATCH pods/{name}/status` writing the nomination, as kube-scheduler does after preempting.
pub async fn nominate(
    client: &Client,
    field_manager: &str,
    n: &Nomination,
) -> Result<Option<String>> {
    let api: Api<Pod> = Api::namespaced(client.clone(), &n.pod.namespace);
    let object = n.pod.to_string();
    let patch = Patch::Merge(preemptor_nomination_patch(n));
    patch_object(
        &api,
        field_manager,
        &n.pod.name,
        Part::Status,
        patch,
        WriteKind::Nomination,
        object,
    )
    .await
}

/// Phase Failed with the gang-timeout reason, and `PodScheduled=False` saying the same.
pub fn pod_failure_patch(f: &PodFailure, now: Time) -> Value {
    json!({
        "metadata": { "uid": &*f.pod.uid },
        "status": {
            "phase": "Failed",
            "reason": f.reason,
            "message": f.message,
            "conditions": [{
                "type": "PodScheduled",
                "status": "False",
                "reason": f.reason,
                "message": f.message,
                "lastTransitionTime": now.to_rfc3339(),
            }],
        },
    })
}

/// `PATCH pods/{name}/status` marking a pending member Failed (gang timeout).
pub async fn pod_failure(
    client: &Client,
    field_manager: &str,
    f: &PodFailure,
    now: Time,
) -> Result<Option<String>> {
    let patch = pod_failure_patch(f, now);
    pod_status(client, field_manager, &f.pod.namespace, &f.pod.name, patch).await
}

/// Conditions as the API writes them (PodGroup and Queue status alike).
fn conditions_json(conditions: &[caldera_model::Condition]) -> Vec<Value> {
    conditions
        .iter()
        .map(|c| {
            json!({
                "type": c.type_,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": c.last_transition.to_rfc3339(),
            })
        })
        .collect()
}

/// The merge patch of a PodGroup's `status`: phase, conditions (replaced whole: merge patches
/// replace lists), and the member counts.
pub fn podgroup_status_patch(s: &PodGroupStatus) -> Value {
    let conditions = conditions_json(&s.conditions);
    json!({
        "status": {
            "phase": s.phase.as_str(),
            "conditions": conditions,
            "running": s.running,
            "succeeded": s.succeeded,
            "failed": s.failed,
        }
    })
}

/// The merge patch setting (or, with no holds, removing) a PodGroup's
/// `caldera.sh/consolidation` annotation, with its uid as precondition.
pub fn move_holds_patch(w: &caldera_model::MoveHoldWrite) -> Value {
    let value = (!w.holds.is_empty()).then(|| caldera_cache::consolidation::encode(&w.holds));
    json!({
        "metadata": {
            "uid": &*w.uid,
            "annotations": { caldera_model::HOLDS_ANNOTATION: value },
        },
    })
}

/// `PATCH podgroups/{name}` writing the consolidation holds.
pub async fn move_holds(
    client: &Client,
    field_manager: &str,
    w: &caldera_model::MoveHoldWrite,
) -> Result<Option<String>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &w.namespace, &api_resource(PODGROUP));
    let object = format!("{}/{}", w.namespace, w.name);
    let patch = Patch::Merge(move_holds_patch(w));
    let kind = WriteKind::ConsolidationHolds;
    patch_object(
        &api,
        field_manager,
        &w.name,
        Part::Object,
        patch,
        kind,
        object,
    )
    .await
}

/// `PATCH podgroups/{name}/status` (merge patch, no resourceVersion: cannot conflict).
pub async fn podgroup_status(
    client: &Client,
    field_manager: &str,
    namespace: &str,
    name: &str,
    s: &PodGroupStatus,
) -> Result<Option<String>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &api_resource(PODGROUP));
    let object = format!("{namespace}/{name}");
    let patch = Patch::Merge(podgroup_status_patch(s));
    let kind = WriteKind::PodGroupStatus;
    patch_object(&api, field_manager, name, Part::Status, patch, kind, object).await
}

/// The strategic merge patch of a native PodGroup's `status`: only its `PodGroupScheduled`
/// condition (conditions merge by `type`, so conditions others wrote stay), as kube-scheduler
/// writes it. `None` when the status says nothing there ([`NativeCondition::of`]).
pub fn native_podgroup_status_patch(s: &PodGroupStatus) -> Option<Value> {
    let c = NativeCondition::of(s)?;
    Some(json!({
        "status": {
            "conditions": [{
                "type": NATIVE_SCHEDULED,
                "status": if c.scheduled { "True" } else { "False" },
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": c.last_transition.to_rfc3339(),
            }],
        }
    }))
}

/// `PATCH scheduling.k8s.io/v1alpha2 podgroups/{name}/status` (strategic merge, no
/// resourceVersion: cannot conflict). Nothing is sent when the status says nothing there.
pub async fn native_podgroup_status(
    client: &Client,
    field_manager: &str,
    namespace: &str,
    name: &str,
    s: &PodGroupStatus,
) -> Result<Option<String>> {
    let Some(patch) = native_podgroup_status_patch(s) else {
        return Ok(None);
    };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &api_resource(NATIVE_PODGROUP));
    let object = format!("{namespace}/{name}");
    let patch = Patch::Strategic(patch);
    let kind = WriteKind::PodGroupStatus;
    patch_object(&api, field_manager, name, Part::Status, patch, kind, object).await
}

/// The merge patch of a Queue's `status`: the PodGroup counts and `allocated` (resources that
/// dropped to zero are set to `null`, since a merge patch merges maps). `state` is written
/// only when `old` has none (Caldera fills it in, as Volcano's queue controller would);
/// otherwise the state someone else set (`Closed`) is never overwritten.
pub fn queue_status_patch(s: &QueueStatus, old: Option<&QueueStatus>) -> Value {
    let mut allocated = Map::new();
    for (name, quantity) in s.allocated.to_quantities() {
        allocated.insert(name, Value::String(quantity));
    }
    let empty = Resources::new();
    for name in old.map_or(&empty, |o| &o.allocated).names() {
        if !allocated.contains_key(name) {
            allocated.insert(name.to_string(), Value::Null);
        }
    }
    // Conditions are replaced whole (a merge patch replaces lists); `null` drops the last.
    let conditions = conditions_json(&s.conditions);
    let mut status = json!({
        "pending": s.pending,
        "inqueue": s.inqueue,
        "running": s.running,
        "completed": s.completed,
        "unknown": s.unknown,
        "allocated": allocated,
    });
    if !conditions.is_empty() {
        status["conditions"] = Value::Array(conditions);
    } else if old.is_some_and(|o| !o.conditions.is_empty()) {
        status["conditions"] = Value::Null;
    }
    let old_state = old.map(|o| o.state.as_str()).unwrap_or("");
    if old_state.is_empty() && !s.state.is_empty() {
        status["state"] = json!(s.state);
    }
    let old_usage = old.and_then(|o| o.usage.as_ref());
    if let Some(usage) = s.usage.as_ref().filter(|u| Some(*u) != old_usage) {
        status["usage"] = usage_json(usage, old_usage);
    }
    json!({ "status": status })
}

/// A usage record (fairshare) as `status.usage`; resources the old record named and this one
/// does not are nulled, since a merge patch merges maps.
fn usage_json(u: &caldera_model::QueueUsage, old: Option<&caldera_model::QueueUsage>) -> Value {
    let amounts =
        |new: &std::collections::BTreeMap<std::sync::Arc<str>, u32>,
         old: Option<&std::collections::BTreeMap<std::sync::Arc<str>, u32>>| {
            let mut m = Map::new();
            for name in old.into_iter().flat_map(|o| o.keys()) {
                m.insert(name.to_string(), Value::Null);
            }
            for (name, v) in new {
                m.insert(name.to_string(), json!(v));
            }
            Value::Object(m)
        };
    let gpu = u.decayed.get("nvidia.com/gpu").copied().unwrap_or(0);
    json!({
        "lastUpdateTime": u.at.to_rfc3339(),
        "decayed": amounts(&u.decayed, old.map(|o| &o.decayed)),
        "held": amounts(&u.held, old.map(|o| &o.held)),
        "gpu": format!("{:.3}", f64::from(gpu) / f64::from(caldera_model::USAGE_SCALE)),
    })
}

/// `PATCH queues/{name}/status` (merge patch).
pub async fn queue_status(
    client: &Client,
    field_manager: &str,
    name: &str,
    s: &QueueStatus,
    old: Option<&QueueStatus>,
) -> Result<Option<String>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &api_resource(QUEUE));
    let patch = Patch::Merge(queue_status_patch(s, old));
    let kind = WriteKind::QueueStatus;
    patch_object(
        &api,
        field_manager,
        name,
        Part::Status,
        patch,
        kind,
        name.to_string(),
    )
    .await
}

/// The largest `note` the API server accepts (1 kB).
const MAX_NOTE: usize = 1024;

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Makes event names unique within this process even within one clock tick.
static EVENT_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Who records events: `reportingController` and `reportingInstance`.
#[derive(Debug, Clone)]
pub struct Reporter {
    /// `reportingController` (`caldera`).
    pub controller: String,
    /// `reportingInstance` (this replica's identity).
    pub instance: String,
}

/// The `events.k8s.io/v1` Event for a queued event: `action` is `Binding` for the `Scheduled`
/// event of a bound pod and `Scheduling` otherwise. An entry that stands for several events
/// (folded under load, see `events.rs`) carries `series.count` and names its PodGroup as
/// `related`.
pub(crate) fn event_object(reporter: &Reporter, q: &QueuedEvent) -> KubeEvent {
    let e = &q.event;
    let (api_version, kind) = event_kind(e.object);
    let now = Timestamp::now();
    let unique =
        (now.as_nanosecond() as u64).wrapping_add(EVENT_COUNTER.fetch_add(1, Ordering::Relaxed));
    let name = format!("{}.{unique:x}", truncate(&e.name, 200));
    let folded = q.count > 1;
    let related = q
        .group
        .as_ref()
        .filter(|_| folded && e.object == EventObject::Pod);
    KubeEvent {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(event_namespace(e).to_string()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(q.first_seen)),
        series: folded.then(|| EventSeries {
            count: i32::try_from(q.count).unwrap_or(i32::MAX),
            last_observed_time: MicroTime(q.last_seen),
        }),
        action: Some(q.action.to_string()),
        reason: Some(e.reason.clone()),
        note: Some(truncate(&q.note(), MAX_NOTE)),
        type_: Some(if e.warning { "Warning" } else { "Normal" }.to_string()),
        regarding: Some(ObjectReference {
            api_version: Some(api_version.to_string()),
            kind: Some(kind.to_string()),
            namespace: Some(e.namespace.to_string()).filter(|n| !n.is_empty()),
            name: Some(e.name.to_string()),
            uid: real_uid(&e.uid),
            ..ObjectReference::default()
        }),
        related: related.map(|g| {
            let (api_version, kind) = event_kind(if g.native {
                EventObject::NativePodGroup
            } else {
                EventObject::PodGroup
            });
            ObjectReference {
                api_version: Some(api_version.to_string()),
                kind: Some(kind.to_string()),
                namespace: Some(g.namespace.to_string()),
                name: Some(g.name.to_string()),
                uid: real_uid(&g.uid),
                ..ObjectReference::default()
            }
        }),
        reporting_controller: Some(truncate(&reporter.controller, 128)),
        reporting_instance: Some(truncate(&reporter.instance, 128)),
        ..KubeEvent::default()
    }
}

/// Where an event lives: its object's namespace, or `default` for a cluster-scoped object (a
/// Queue), as kube-apiserver's own events about Nodes do.
fn event_namespace(e: &caldera_model::Event) -> &str {
    if e.namespace.is_empty() {
        "default"
    } else {
        &e.namespace
    }
}

fn event_kind(object: EventObject) -> (&'static str, &'static str) {
    match object {
        EventObject::Pod => ("v1", "Pod"),
        EventObject::PodGroup => ("scheduling.volcano.sh/v1beta1", "PodGroup"),
        EventObject::Queue => ("scheduling.volcano.sh/v1beta1", "Queue"),
        EventObject::NativePodGroup => ("scheduling.k8s.io/v1alpha2", "PodGroup"),
        EventObject::Lease => ("coordination.k8s.io/v1", "Lease"),
    }
}

/// The cache stands `namespace/name` in for a missing uid; that is not sent.
fn real_uid(uid: &str) -> Option<String> {
    Some(uid.to_string()).filter(|u| !u.is_empty() && !u.contains('/'))
}

/// `POST /apis/events.k8s.io/v1/namespaces/{ns}/events`.
pub(crate) async fn event(client: &Client, reporter: &Reporter, q: &QueuedEvent) -> Result<()> {
    let e = &q.event;
    let api: Api<KubeEvent> = Api::namespaced(client.clone(), event_namespace(e));
    api.create(&PostParams::default(), &event_object(reporter, q))
        .await
        .map(|_| ())
        .map_err(|source| Error::Event {
            reason: e.reason.clone(),
            object: format!("{}/{}", e.namespace, e.name),
            source,
        })
}

/// A model node selector as a `v1` `NodeSelector`.
fn node_selector_json(terms: &[caldera_model::SelectorTerm]) -> Value {
    let requirement = |r: &caldera_model::selector::Requirement| {
        let op = format!("{:?}", r.op);
        let mut v = json!({"key": r.key, "operator": op});
        if !r.values.is_empty() {
            v["values"] = json!(r.values);
        }
        v
    };
    let terms: Vec<Value> = terms
        .iter()
        .map(|t| {
            let mut term = json!({});
            if !t.expressions.is_empty() {
                term["matchExpressions"] =
                    Value::Array(t.expressions.iter().map(requirement).collect());
            }
            if !t.fields.is_empty() {
                term["matchFields"] = Value::Array(t.fields.iter().map(requirement).collect());
            }
            term
        })
        .collect();
    json!({ "nodeSelectorTerms": terms })
}

/// `status.allocation` of a claim (`resource.k8s.io/v1` `AllocationResult`): the devices (a
/// share of a shared device with its `shareID` and `consumedCapacity`), the configuration
/// copied from class and claim, and the node selector.
pub fn allocation_json(
    devices: &[caldera_model::dra::DeviceResult],
    config: &[caldera_model::dra::AllocatedConfig],
    node_selector: Option<&[caldera_model::SelectorTerm]>,
) -> Value {
    use caldera_model::dra::ConfigSource;
    let results: Vec<Value> = devices
        .iter()
        .map(|d| {
            let mut r = json!({
                "request": &*d.request,
                "driver": &*d.driver,
                "pool": &*d.pool,
                "device": &*d.device,
            });
            if d.admin_access {
                r["adminAccess"] = json!(true);
            }
            if let Some(id) = &d.share_id {
                r["shareID"] = json!(&**id);
            }
            if !d.consumed.is_empty() {
                r["consumedCapacity"] = d
                    .consumed
                    .iter()
                    .map(|(name, q)| (name.to_string(), json!(&*q.text)))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
            r
        })
        .collect();
    let config: Vec<Value> = config
        .iter()
        .map(|c| {
            let parameters: Value = serde_json::from_str(&c.config.parameters)
                .unwrap_or_else(|_| Value::String(c.config.parameters.to_string()));
            let mut v = json!({
                "source": match c.source {
                    ConfigSource::Class => "FromClass",
                    ConfigSource::Claim => "FromClaim",
                },
                "opaque": {"driver": &*c.config.driver, "parameters": parameters},
            });
            if !c.config.requests.is_empty() {
                v["requests"] = json!(c
                    .config
                    .requests
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>());
            }
            v
        })
        .collect();
    let mut devices = json!({ "results": results });
    if !config.is_empty() {
        devices["config"] = Value::Array(config);
    }
    let mut allocation = json!({ "devices": devices });
    if let Some(terms) = node_selector {
        allocation["nodeSelector"] = node_selector_json(terms);
    }
    allocation
}

/// The reason of the 409 the binder makes up for a claim that is no longer as decided.
const CLAIM_CHANGED: &str = "ClaimChanged";

/// A 409 for a claim that is no longer as the decision saw it.
fn claim_changed(object: &str, why: &str) -> Error {
    Error::Claim {
        object: object.to_string(),
        source: kube::Error::Api(
            kube::core::Status::failure(
                &format!("resource claim {object} {why}; the decision is made again"),
                CLAIM_CHANGED,
            )
            .with_code(409)
            .boxed(),
        ),
    }
}

/// The devices of an allocation as comparable tuples (request, driver, pool, device).
fn allocated_devices(
    allocation: &k8s_openapi::api::resource::v1::AllocationResult,
) -> std::collections::BTreeSet<(String, String, String, String)> {
    allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r.request.clone(),
                r.driver.clone(),
                r.pool.clone(),
                r.device.clone(),
            )
        })
        .collect()
}

/// Writes one claim's allocation and users as kube-scheduler's DynamicResources PreBind does:
/// reads the claim (it must still be the one decided on: same uid, not being deleted, not
/// allocated otherwise — an allocation equal to the one decided is this write's own, repeated;
/// for a reservation only, still allocated as decided: same devices, same node selector), adds the finalizer
/// `resource.kubernetes.io/delete-protection` (an update with the read resourceVersion), then
/// writes `status.allocation` and the new `status.reservedFor` entries in one update of
/// `resourceclaims/status` with the resourceVersion just returned. A claim changed meanwhile
/// is a 409 (the server's, or synthesized here).
pub async fn claim(
    client: &Client,
    w: &caldera_model::dra::ClaimWrite,
    field_manager: &str,
) -> Result<()> {
    // A 409 from the server (another writer between the read and the update) is read again:
    // the checks then say whether the decision still holds.
    retry_conflicts(3, || claim_once(client, w, field_manager)).await
}

/// Runs a claim write again on a 409 from the server, at most `retries` more times; a 409
/// synthesized by the write itself (`CLAIM_CHANGED`: the decision no longer holds) is final.
async fn retry_conflicts<F, Fut>(retries: usize, mut write: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    let mut conflicts = 0;
    loop {
        match write().await {
            Err(Error::Claim {
                source: kube::Error::Api(s),
                ..
            }) if s.code == 409 && s.reason != CLAIM_CHANGED && conflicts < retries => {
                conflicts += 1
            }
            other => return other,
        }
    }
}

async fn claim_once(
    client: &Client,
    w: &caldera_model::dra::ClaimWrite,
    field_manager: &str,
) -> Result<()> {
    use k8s_openapi::api::resource::v1::{
        AllocationResult, ResourceClaim, ResourceClaimConsumerReference,
    };
    let object = w.key();
    let failed = |source| Error::Claim {
        object: object.clone(),
        source,
    };
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &w.namespace);
    let mut current = api.get(&w.name).await.map_err(failed)?;
    let uid = current.metadata.uid.as_deref().unwrap_or_default();
    if !w.uid.is_empty() && !w.uid.contains('/') && uid != &*w.uid {
        return Err(claim_changed(&object, "was replaced"));
    }
    if current.metadata.deletion_timestamp.is_some() {
        return Err(claim_changed(&object, "is being deleted"));
    }
    let wanted: AllocationResult = serde_json::from_value(allocation_json(
        &w.devices,
        &w.config,
        w.node_selector.as_deref(),
    ))
    .map_err(|e| failed(kube::Error::SerdeError(e)))?;
    let existing = current.status.as_ref().and_then(|s| s.allocation.clone());
    match &existing {
        Some(a) if w.allocate && allocated_devices(a) != allocated_devices(&wanted) => {
            return Err(claim_changed(&object, "was allocated otherwise meanwhile"));
        }
        None if !w.allocate => {
            return Err(claim_changed(&object, "is no longer allocated"));
        }
        // A reservation only: the allocation must still be the one decided on (its devices
        // and the nodes it admits), or the pod would land where its claim is not.
        Some(a)
            if !w.allocate
                && (allocated_devices(a) != allocated_devices(&wanted)
                    || serde_json::to_value(&a.node_selector).ok()
                        != serde_json::to_value(&wanted.node_selector).ok()) =>
        {
            return Err(claim_changed(&object, "was allocated otherwise meanwhile"));
        }
        _ => {}
    }
    let pp = PostParams {
        field_manager: Some(field_manager.to_string()),
        ..PostParams::default()
    };
    if w.allocate {
        let finalizers = current.metadata.finalizers.get_or_insert_with(Vec::new);
        let protection = caldera_model::dra::DELETE_PROTECTION_FINALIZER;
        if !finalizers.iter().any(|f| f == protection) {
            finalizers.push(protection.to_string());
            current = api.replace(&w.name, &pp, &current).await.map_err(failed)?;
        }
    }
    let mut status = current.status.clone().unwrap_or_default();
    if status.allocation.is_none() {
        status.allocation = Some(wanted);
    }
    let users = status.reserved_for.get_or_insert_with(Vec::new);
    let before = users.len();
    for c in &w.reserved_for {
        if !users.iter().any(|u| u.uid == *c.uid) {
            users.push(ResourceClaimConsumerReference {
                api_group: None,
                resource: c.resource.to_string(),
                name: c.name.to_string(),
                uid: c.uid.to_string(),
            });
        }
    }
    if users.len() > caldera_model::dra::RESERVED_FOR_MAX {
        return Err(claim_changed(&object, "has no room left in reservedFor"));
    }
    if existing.is_some() && users.len() == before {
        // Already written (a repeated write after an unanswered one).
        return Ok(());
    }
    current.status = Some(status);
    api.replace_status(&w.name, &pp, &current)
        .await
        .map(|_| ())
        .map_err(failed)
}

/// The claim kube-scheduler makes for a pod whose extended resources devices serve
/// (KEP-5004): created with the generated name `<pod>-extended-resources-`, the annotation
/// `resource.kubernetes.io/extended-resource-claim: "true"`, the pod as controller owner and
/// one `exactly` request per (container, resource); then its allocation and the pod as user
/// through `resourceclaims/status`; then `pod.status.extendedResourceClaimStatus` (merge patch,
/// the pod's uid as precondition). A pod that already names such a claim gets none again.
pub async fn extended_claim(
    client: &Client,
    e: &caldera_model::dra::ExtendedResourceClaim,
    field_manager: &str,
) -> Result<String> {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let object = format!("{}/{}", e.namespace, e.pod);
    let failed = |source| Error::Claim {
        object: object.clone(),
        source,
    };
    let requests: Vec<Value> = e
        .requests
        .iter()
        .map(|(name, class, count)| {
            json!({"name": &**name, "exactly": {
                "deviceClassName": &**class, "allocationMode": "ExactCount", "count": count
            }})
        })
        .collect();
    let body: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "generateName": format!("{}-extended-resources-", e.pod),
            "namespace": &*e.namespace,
            "annotations": {caldera_model::dra::EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
            "finalizers": [caldera_model::dra::DELETE_PROTECTION_FINALIZER],
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Pod", "name": &*e.pod, "uid": &*e.pod_uid,
                "controller": true, "blockOwnerDeletion": true
            }]
        },
        "spec": {"devices": {"requests": requests}}
    }))
    .map_err(|err| failed(kube::Error::SerdeError(err)))?;
    let pp = PostParams {
        field_manager: Some(field_manager.to_string()),
        ..PostParams::default()
    };
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &e.namespace);
    let mut created = api.create(&pp, &body).await.map_err(failed)?;
    let name = created.metadata.name.clone().unwrap_or_default();
    let rest = async {
        let status = json!({
            "allocation": allocation_json(&e.devices, &e.config, e.node_selector.as_deref()),
            "reservedFor": [{"resource": "pods", "name": &*e.pod, "uid": &*e.pod_uid}],
        });
        created.status = Some(
            serde_json::from_value(status).map_err(|err| failed(kube::Error::SerdeError(err)))?,
        );
        api.replace_status(&name, &pp, &created)
            .await
            .map_err(failed)?;
        let mappings: Vec<Value> = e
        .mappings
        .iter()
        .map(|m| {
            json!({"containerName": &*m.container, "resourceName": &*m.resource, "requestName": &*m.request})
        })
        .collect();
        let patch = json!({
            "metadata": {"uid": &*e.pod_uid},
            "status": {"extendedResourceClaimStatus": {
                "resourceClaimName": name, "requestMappings": mappings
            }}
        });
        let pods: Api<Pod> = Api::namespaced(client.clone(), &e.namespace);
        pods.patch_status(&e.pod, &patch_params(field_manager), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(failed)
    };
    match rest.await {
        Ok(()) => Ok(name),
        Err(err) => {
            // Half made: the claim goes again, so no pod is left naming a claim no one uses.
            if let Err(undo) = delete_extended_claim(client, e, &name, field_manager).await {
                tracing::warn!(error = %undo, "could not delete a half-made extended-resource claim");
            }
            Err(err)
        }
    }
}

/// Deletes a bridge claim this binder made for a pod that will not bind with it: the pod's
/// `status.extendedResourceClaimStatus` is cleared if it names the claim (the pod's uid as
/// precondition), the delete-protection finalizer removed and the claim deleted. A claim or pod
/// gone already is fine.
pub async fn delete_extended_claim(
    client: &Client,
    e: &caldera_model::dra::ExtendedResourceClaim,
    name: &str,
    field_manager: &str,
) -> Result<()> {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let object = format!("{}/{}", e.namespace, name);
    let failed = |source| Error::Claim {
        object: object.clone(),
        source,
    };
    let gone = |r: std::result::Result<(), kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other,
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &e.namespace);
    let names_it = match pods.get_status(&e.pod).await {
        Ok(p) => {
            let named = serde_json::to_value(&p.status).ok().and_then(|v| {
                v.pointer("/extendedResourceClaimStatus/resourceClaimName")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            p.metadata.uid.as_deref() == Some(&*e.pod_uid) && named.as_deref() == Some(name)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(err) => return Err(failed(err)),
    };
    if names_it {
        let patch = json!({
            "metadata": {"uid": &*e.pod_uid},
            "status": {"extendedResourceClaimStatus": null}
        });
        gone(
            pods.patch_status(&e.pod, &patch_params(field_manager), &Patch::Merge(&patch))
                .await
                .map(|_| ()),
        )
        .map_err(failed)?;
    }
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &e.namespace);
    let protection = caldera_model::dra::DELETE_PROTECTION_FINALIZER;
    match api.get(name).await {
        Ok(c)
            if c.metadata
                .finalizers
                .as_ref()
                .is_some_and(|f| f.iter().any(|x| x == protection)) =>
        {
            let mut kept: Vec<String> = c.metadata.finalizers.clone().unwrap_or_default();
            kept.retain(|x| x != protection);
            let patch = json!({"metadata": {
                "finalizers": kept,
                "resourceVersion": c.metadata.resource_version,
            }});
            gone(
                api.patch(name, &patch_params(field_manager), &Patch::Merge(&patch))
                    .await
                    .map(|_| ()),
            )
            .map_err(failed)?;
        }
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(err) => return Err(failed(err)),
    }
    gone(
        api.delete(name, &kube::api::DeleteParams::default())
            .await
            .map(|_| ()),
    )
    .map_err(failed)
}

/// Undoes a claim write of a gang that will not bind (kube-scheduler's Unreserve): the pods it
/// added leave `status.reservedFor`; when it allocated the claim and no user is left, the
/// allocation is cleared and the delete-protection finalizer removed. A claim gone, or
/// changed by others meanwhile, is left alone.
pub async fn unclaim(
    client: &Client,
    w: &caldera_model::dra::ClaimWrite,
    field_manager: &str,
) -> Result<()> {
    // Members of one gang sharing a claim undo concurrently: a 409 is read again.
    retry_conflicts(5, || unclaim_once(client, w, field_manager)).await
}

async fn unclaim_once(
    client: &Client,
    w: &caldera_model::dra::ClaimWrite,
    field_manager: &str,
) -> Result<()> {
    use k8s_openapi::api::resource::v1::ResourceClaim;
    let object = w.key();
    let failed = |source| Error::Claim {
        object: object.clone(),
        source,
    };
    let api: Api<ResourceClaim> = Api::namespaced(client.clone(), &w.namespace);
    let mut current = match api.get(&w.name).await {
        Ok(c) => c,
        Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
        Err(e) => return Err(failed(e)),
    };
    let ours = |uid: &str| w.reserved_for.iter().any(|c| &*c.uid == uid);
    let Some(status) = current.status.as_mut() else {
        return Ok(());
    };
    let users = status.reserved_for.take().unwrap_or_default();
    let before = users.len();
    let kept: Vec<_> = users.into_iter().filter(|u| !ours(&u.uid)).collect();
    if kept.len() == before {
        return Ok(());
    }
    let deallocate = w.allocate && kept.is_empty();
    status.reserved_for = (!kept.is_empty()).then_some(kept);
    if deallocate {
        status.allocation = None;
    }
    let pp = PostParams {
        field_manager: Some(field_manager.to_string()),
        ..PostParams::default()
    };
    let mut current = api
        .replace_status(&w.name, &pp, &current)
        .await
        .map_err(failed)?;
    if deallocate {
        let protection = caldera_model::dra::DELETE_PROTECTION_FINALIZER;
        if let Some(f) = current.metadata.finalizers.as_mut() {
            if f.iter().any(|x| x == protection) {
                f.retain(|x| x != protection);
                api.replace(&w.name, &pp, &current).await.map_err(failed)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_model::{Condition, Event, PodGroupPhase};

    fn status_with(type_: &str, reason: &str) -> PodGroupStatus {
        PodGroupStatus {
            phase: PodGroupPhase::Inqueue,
            conditions: vec![Condition {
                type_: type_.into(),
                status: "True".into(),
                reason: reason.into(),
                message: "3/4 members fit".into(),
                last_transition: Time(1_000),
            }],
            running: 0,
            succeeded: 0,
            failed: 0,
        }
    }

    /// A native PodGroup gets only `PodGroupScheduled`, as kube-scheduler writes it; too few
    /// members writes nothing there.
    #[test]
    fn native_podgroup_patch_is_the_podgroup_scheduled_condition_only() {
        let waiting =
            native_podgroup_status_patch(&status_with("Unschedulable", "NotEnoughResources"))
                .expect("a condition");
        assert_eq!(
            waiting,
            json!({"status": {"conditions": [{
                "type": "PodGroupScheduled", "status": "False", "reason": "Unschedulable",
                "message": "3/4 members fit", "lastTransitionTime": "1970-01-01T00:00:01Z"}]}})
        );
        let placed = native_podgroup_status_patch(&status_with("Scheduled", "Scheduled"))
            .expect("a condition");
        assert_eq!(placed["status"]["conditions"][0]["status"], "True");
        assert_eq!(placed["status"]["conditions"][0]["reason"], "Scheduled");
        assert_eq!(
            native_podgroup_status_patch(&status_with("Unschedulable", "NotEnoughTasks")),
            None
        );
    }

    #[test]
    fn queue_patch_nulls_dropped_resources_and_keeps_state() {
        let old = QueueStatus {
            state: "Closed".into(),
            allocated: Resources::from_pairs([("cpu", 2000), ("nvidia.com/gpu", 4)]),
            ..QueueStatus::default()
        };
        let new = QueueStatus {
            state: "Closed".into(),
            running: 1,
            allocated: Resources::from_pairs([("cpu", 1500)]),
            ..QueueStatus::default()
        };
        let patch = queue_status_patch(&new, Some(&old));
        assert_eq!(
            patch,
            json!({"status": {"pending": 0, "inqueue": 0, "running": 1, "completed": 0,
                "unknown": 0, "allocated": {"cpu": "1500m", "nvidia.com/gpu": null}}})
        );
        let fresh = QueueStatus {
            state: "Open".into(),
            ..QueueStatus::default()
        };
        assert_eq!(queue_status_patch(&fresh, None)["status"]["state"], "Open");
    }

    #[test]
    fn queue_patch_writes_a_new_usage_record_and_nulls_dropped_resources() {
        let record = |at: i64, decayed: &[(&str, u32)], held: &[(&str, u32)]| {
            let map = |pairs: &[(&str, u32)]| {
                pairs
                    .iter()
                    .map(|(k, v)| (std::sync::Arc::<str>::from(*k), *v))
                    .collect()
            };
            caldera_model::QueueUsage {
                at: caldera_model::Time::from_secs(at),
                decayed: map(decayed),
                held: map(held),
            }
        };
        let old = QueueStatus {
            state: "Open".into(),
            usage: Some(record(0, &[], &[("nvidia.com/gpu", 500_000), ("cpu", 10)])),
            ..QueueStatus::default()
        };
        let new = QueueStatus {
            state: "Open".into(),
            usage: Some(record(3600, &[("nvidia.com/gpu", 250_000)], &[])),
            ..QueueStatus::default()
        };
        let patch = queue_status_patch(&new, Some(&old));
        assert_eq!(
            patch["status"]["usage"],
            json!({"lastUpdateTime": "1970-01-01T01:00:00Z",
                "decayed": {"nvidia.com/gpu": 250000},
                "held": {"nvidia.com/gpu": null, "cpu": null},
                "gpu": "0.250"})
        );
        // The same record is not written again.
        let patch = queue_status_patch(&new, Some(&new));
        assert!(patch["status"].get("usage").is_none());
    }

    #[test]
    fn podgroup_patch_writes_the_whole_status() {
        let s = PodGroupStatus {
            phase: PodGroupPhase::Inqueue,
            conditions: vec![Condition {
                type_: "Unschedulable".into(),
                status: "True".into(),
                reason: "NotEnoughResources".into(),
                message: "2/2 members in gang unschedulable".into(),
                last_transition: Time::from_secs(0),
            }],
            running: 0,
            succeeded: 0,
            failed: 0,
        };
        let patch = podgroup_status_patch(&s);
        assert_eq!(patch["status"]["phase"], "Inqueue");
        assert_eq!(
            patch["status"]["conditions"][0]["lastTransitionTime"],
            "1970-01-01T00:00:00Z"
        );
    }

    #[test]
    fn pod_condition_keeps_transition_time_when_already_unschedulable() {
        let c = PodConditionUpdate {
            pod: caldera_model::ObjectRef {
                namespace: "ns".into(),
                name: "p".into(),
                uid: "u".into(),
            },
            reason: "Unschedulable".into(),
            message: "m".into(),
        };
        let kept = pod_condition_patch(&c, Time::from_secs(5), true);
        assert!(kept["status"]["conditions"][0]
            .get("lastTransitionTime")
            .is_none());
        let set = pod_condition_patch(&c, Time::from_secs(5), false);
        assert_eq!(
            set["status"]["conditions"][0]["lastTransitionTime"],
            "1970-01-01T00:00:05Z"
        );
    }

    #[test]
    fn event_notes_are_capped_at_a_kilobyte() {
        let reporter = Reporter {
            controller: "caldera".into(),
            instance: "me".into(),
        };
        let e = Event {
            object: EventObject::PodGroup,
            namespace: "ns".into(),
            name: "pg".into(),
            uid: "ns/pg".into(),
            warning: true,
            reason: "Unschedulable".into(),
            message: "é".repeat(600),
        };
        let ev = event_object(&reporter, &QueuedEvent::new(e, "Scheduling", None));
        assert!(ev.note.as_ref().unwrap().len() <= MAX_NOTE);
        assert!(ev.series.is_none());
        assert_eq!(ev.type_.as_deref(), Some("Warning"));
        let regarding = ev.regarding.unwrap();
        assert_eq!(regarding.kind.as_deref(), Some("PodGroup"));
        assert_eq!(regarding.uid, None, "a made-up uid is not sent");
    }

    #[test]
    fn a_queue_event_lives_in_default_and_regards_the_cluster_scoped_queue() {
        let reporter = Reporter {
            controller: "caldera".into(),
            instance: "me".into(),
        };
        let e = Event {
            object: EventObject::Queue,
            namespace: "".into(),
            name: "x".into(),
            uid: "".into(),
            warning: true,
            reason: "ParentCycle".into(),
            message: "queue x is not in the queue tree".into(),
        };
        let ev = event_object(&reporter, &QueuedEvent::new(e, "Scheduling", None));
        assert_eq!(ev.metadata.namespace.as_deref(), Some("default"));
        let regarding = ev.regarding.unwrap();
        assert_eq!(regarding.kind.as_deref(), Some("Queue"));
        assert_eq!(
            regarding.api_version.as_deref(),
            Some("scheduling.volcano.sh/v1beta1")
        );
        assert_eq!(regarding.namespace, None);
        assert_eq!(regarding.name.as_deref(), Some("x"));
    }

    #[test]
    fn queue_patch_writes_conditions_and_drops_the_last_one_with_null() {
        let broken = QueueStatus {
            state: "Open".into(),
            conditions: vec![Condition {
                type_: "Schedulable".into(),
                status: "False".into(),
                reason: "ParentCycle".into(),
                message: "parents form a cycle: x → y → x".into(),
                last_transition: Time::from_secs(5),
            }],
            ..QueueStatus::default()
        };
        let patch = queue_status_patch(&broken, None);
        assert_eq!(patch["status"]["conditions"][0]["reason"], "ParentCycle");
        assert_eq!(
            patch["status"]["conditions"][0]["lastTransitionTime"],
            "1970-01-01T00:00:05Z"
        );
        let fixed = QueueStatus {
            state: "Open".into(),
            ..QueueStatus::default()
        };
        let patch = queue_status_patch(&fixed, Some(&broken));
        assert_eq!(patch["status"]["conditions"], Value::Null);
        assert!(patch["status"]
            .as_object()
            .unwrap()
            .contains_key("conditions"));
        assert!(!queue_status_patch(&fixed, Some(&fixed))["status"]
            .as_object()
            .unwrap()
            .contains_key("conditions"));
    }
}
