//! What kube-controller-manager's ReplicaSet controller (`pkg/controller/replicaset`) and,
//! in outline, its Deployment controller (`pkg/controller/deployment`) do for a scheduler to
//! see: the pods of an `apps/v1` ReplicaSet, and the ReplicaSet a Deployment runs.
//!
//! **ReplicaSet.** The controller keeps `spec.replicas` (default 1) *active* pods: pods it
//! controls that are neither `Succeeded`, `Failed` nor terminating (`FilterActivePods`), so a
//! pod being deleted, evicted or gone is replaced at once, while it still terminates on its
//! node. Its pods (`GetPodFromTemplate`) carry the template's labels (with the
//! `pod-template-hash` a Deployment put there) and annotations, a controller owner reference
//! to the ReplicaSet (`blockOwnerDeletion`), and are named `<rs>-<5 characters>`, as
//! `generateName` makes them; here the suffix is derived from the ReplicaSet's uid, the time
//! and a counter, so a run is deterministic and a replacement does not get the name of the
//! pod it replaces. It claims pods as `ClaimPods` does: a pod without a controller whose
//! labels match the selector is adopted (an owner reference added; not while the ReplicaSet
//! is being deleted), a pod it controls whose labels no longer match is released. With more
//! active pods than `replicas` it deletes the surplus in `ActivePodsWithRanks` order: pods
//! not yet bound, then `Pending` before `Unknown` before `Running`, not Ready before Ready,
//! lower `controller.kubernetes.io/pod-deletion-cost` first, more of its pods on the same node
//! first, Ready more recently first, then the newest. Status: `replicas` (active pods),
//! `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas` (Ready for
//! `minReadySeconds`), `terminatingReplicas`, `observedGeneration`.
//!
//! **Deployment.** It runs one ReplicaSet per pod template, named `<deployment>-<hash>`, the
//! hash (also the `pod-template-hash` label on the ReplicaSet, its selector and its template)
//! computed from the template and `status.collisionCount`. The real hash is FNV-32a over Go's
//! printing of the template, which is not reproducible here; this one is FNV-32a over the
//! template's JSON, encoded the same way (`rand.SafeEncodeString`), so a live cluster names
//! the ReplicaSet otherwise. A new template rolls out as the strategy says
//! ([`sync_deployment`]): `Recreate` scales the old ReplicaSets to 0 and makes the new one once
//! their pods are gone; `RollingUpdate` surges by `maxSurge` and scales old ones down as
//! `maxUnavailable` and the pods' availability allow.
//!
//! Not modelled: the slow-start batches of pod creation and the burst limit (500),
//! `ReplicaFailure` conditions, container restart counts in the deletion order, the
//! logarithmic scale-down buckets, proportional scaling of a Deployment resized mid-rollout,
//! Deployment `paused`, `progressDeadlineSeconds`, `revisionHistoryLimit`, revision
//! annotations and Deployment conditions.

use std::collections::BTreeMap;

use caldera_cache::labels;
use caldera_model::Time;
use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus,
};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::kubelet::is_ready;
use crate::time::from_kube;

/// The label the Deployment controller puts on its ReplicaSets and their pods.
pub const POD_TEMPLATE_HASH: &str = caldera_cache::derive::LABEL_POD_TEMPLATE_HASH;
/// Pod annotation ranking pods for deletion on scale-down (lower goes first).
pub const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// What one sync of a ReplicaSet does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sync {
    /// Pods to create, in order.
    pub create: Vec<Pod>,
    /// Pods to delete (names): the surplus of a ReplicaSet scaled down.
    pub delete: Vec<String>,
    /// Pods to adopt (names): give each [`controller_ref`] as an owner reference.
    pub adopt: Vec<String>,
    /// Pods to release (names): remove the owner reference naming the ReplicaSet's uid.
    pub release: Vec<String>,
    /// The ReplicaSet's status after the sync.
    pub status: ReplicaSetStatus,
}

/// Why a ReplicaSet or Deployment is refused, as kube-apiserver's validation refuses it: the
/// field and the message.
pub fn validate(
    selector: Option<&LabelSelector>,
    template: Option<&PodTemplateSpec>,
) -> Result<(), (String, String)> {
    let Some(selector) = selector.filter(|s| !labels::is_empty(s)) else {
        return Err((
            "spec.selector".into(),
            "Required value: empty selector is invalid".into(),
        ));
    };
    let template_labels = template
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.as_ref());
    if !labels::matches(selector, template_labels) {
        return Err((
            "spec.template.metadata.labels".into(),
            "Invalid value: `selector` does not match template `labels`".into(),
        ));
    }
    Ok(())
}

/// The owner reference the ReplicaSet's pods carry.
pub fn controller_ref(rs: &ReplicaSet) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: rs.metadata.name.clone().unwrap_or_default(),
        uid: rs.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Whether the pod's controller reference names the ReplicaSet's uid.
pub fn owned_by(pod: &Pod, rs: &ReplicaSet) -> bool {
    let Some(uid) = rs.metadata.uid.as_deref() else {
        return false;
    };
    controller_of(&pod.metadata).is_some_and(|o| o.uid == uid)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// Whether the pod counts as one of a controller's replicas (`controller.FilterActivePods`):
/// not finished and not being deleted.
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && !matches!(phase(pod), "Succeeded" | "Failed")
}

fn bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// When the pod last became Ready (None when not Ready).
fn ready_since(pod: &Pod) -> Option<Time> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| c.last_transition_time.as_ref().map_or(Time(0), from_kube))
}

fn deletion_cost(pod: &Pod) -> i32 {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DELETION_COST))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// kube-controller-manager's `controller.ActivePods` order (what the Job controller deletes
/// first): unscheduled before scheduled, Pending before Unknown before Running, not Ready
/// before Ready, Ready for less time before longer, newer before older; then name, so the
/// order is total.
pub(crate) fn active_pods_cmp(a: &Pod, b: &Pod) -> std::cmp::Ordering {
    let phase_rank = |p: &Pod| match phase(p) {
        "Pending" => 0,
        "Unknown" => 1,
        _ => 2,
    };
    let created = |p: &Pod| {
        p.metadata
            .creation_timestamp
            .as_ref()
            .map_or(Time(0), from_kube)
    };
    bound(a)
        .cmp(&bound(b))
        .then(phase_rank(a).cmp(&phase_rank(b)))
        .then(is_ready(a).cmp(&is_ready(b)))
        .then(ready_since(b).cmp(&ready_since(a)))
        .then(created(b).cmp(&created(a)))
        .then(b.metadata.name.cmp(&a.metadata.name))
}

/// The order the controller deletes surplus pods in (`ActivePodsWithRanks`), first to go first.
fn deletion_order(pods: &mut [&Pod]) {
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    for p in pods.iter() {
        if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            *per_node.entry(n).or_default() += 1;
        }
    }
    let phase_rank = |p: &Pod| match phase(p) {
        "Pending" => 0,
        "Unknown" => 1,
        _ => 2,
    };
    let created = |p: &Pod| {
        p.metadata
            .creation_timestamp
            .as_ref()
            .map_or(Time(0), from_kube)
    };
    pods.sort_by(|a, b| {
        bound(a)
            .cmp(&bound(b))
            .then(phase_rank(a).cmp(&phase_rank(b)))
            .then(is_ready(a).cmp(&is_ready(b)))
            .then(deletion_cost(a).cmp(&deletion_cost(b)))
            .then_with(|| {
                let on = |p: &Pod| {
                    p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .and_then(|n| per_node.get(n).copied())
                        .unwrap_or(0)
                };
                on(b).cmp(&on(a))
            })
            .then(ready_since(b).cmp(&ready_since(a)))
            .then(created(b).cmp(&created(a)))
            .then(b.metadata.name.cmp(&a.metadata.name))
    });
}

/// One sync of the ReplicaSet controller at `now` over the ReplicaSet and `pods` (any pods of
/// its namespace; those it controls or may adopt are picked here). `taken(name)` says whether
/// a pod name is in use.
pub fn sync(rs: &ReplicaSet, pods: &[&Pod], now: Time, taken: &dyn Fn(&str) -> bool) -> Sync {
    let mut out = Sync {
        status: rs.status.clone().unwrap_or_default(),
        ..Default::default()
    };
    let (Some(name), Some(uid), Some(spec)) = (
        rs.metadata.name.as_deref(),
        rs.metadata.uid.as_deref(),
        rs.spec.as_ref(),
    ) else {
        return out;
    };
    if validate(Some(&spec.selector), spec.template.as_ref()).is_err() {
        return out;
    }
    let selector = &spec.selector;
    let matches = |p: &Pod| labels::matches(selector, p.metadata.labels.as_ref());
    let ns = rs.metadata.namespace.as_deref().unwrap_or("default");
    let deleting = rs.metadata.deletion_timestamp.is_some();
    let mut mine: Vec<&Pod> = Vec::new();
    for p in pods.iter().copied() {
        if p.metadata.namespace.as_deref().unwrap_or("default") != ns {
            continue;
        }
        let pod_name = p.metadata.name.clone().unwrap_or_default();
        match controller_of(&p.metadata) {
            Some(o) if o.uid == uid => {
                if matches(p) {
                    mine.push(p);
                } else if !deleting {
                    out.release.push(pod_name);
                }
            }
            Some(_) => {}
            None => {
                if !deleting && matches(p) && p.metadata.deletion_timestamp.is_none() {
                    out.adopt.push(pod_name);
                    mine.push(p);
                }
            }
        }
    }
    let mut active: Vec<&Pod> = mine.iter().copied().filter(|p| is_active(p)).collect();
    let wanted = usize::try_from(spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    let min_ready_ms = i64::from(spec.min_ready_seconds.unwrap_or(0).max(0)) * 1000;
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let counted = |f: &dyn Fn(&Pod) -> bool| -> i32 {
        i32::try_from(active.iter().filter(|p| f(p)).count()).unwrap_or(i32::MAX)
    };
    let fully_labeled = counted(&|p: &Pod| {
        let l = p.metadata.labels.clone().unwrap_or_default();
        template_labels.iter().all(|(k, v)| l.get(k) == Some(v))
    });
    let ready = counted(&|p: &Pod| is_ready(p));
    let available =
        counted(&|p: &Pod| ready_since(p).is_some_and(|t| t.plus_millis(min_ready_ms) <= now));
    let terminating = i32::try_from(
        mine.iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .count(),
    )
    .unwrap_or(i32::MAX);
    let replicas = active.len();
    if !deleting {
        if replicas > wanted {
            deletion_order(&mut active);
            out.delete = active
                .iter()
                .take(replicas - wanted)
                .filter_map(|p| p.metadata.name.clone())
                .collect();
        } else {
            let seed = format!("{uid}/{}", now.0);
            let mut n = 0u64;
            let mut made: Vec<String> = Vec::new();
            for _ in replicas..wanted {
                let pod_name = loop {
                    n += 1;
                    let candidate = format!("{name}-{}", crate::meta::suffix(&seed, n));
                    if !taken(&candidate) && !made.contains(&candidate) {
                        break candidate;
                    }
                };
                made.push(pod_name.clone());
                out.create.push(pod_for(rs, &pod_name));
            }
        }
    }
    out.status = ReplicaSetStatus {
        replicas: i32::try_from(replicas).unwrap_or(i32::MAX),
        fully_labeled_replicas: Some(fully_labeled),
        ready_replicas: Some(ready),
        available_replicas: Some(available),
        terminating_replicas: Some(terminating),
        observed_generation: rs.metadata.generation,
        conditions: out.status.conditions.take(),
    };
    out
}

/// The pod `pod_name` of the ReplicaSet, from its template (`GetPodFromTemplate`).
fn pod_for(rs: &ReplicaSet, pod_name: &str) -> Pod {
    let template = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name.to_string()),
            namespace: rs.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![controller_ref(rs)]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// `rand.SafeEncodeString`: each byte mapped into the alphabet names are made from.
fn safe_encode(s: &str) -> String {
    s.bytes()
        .map(|b| char::from(crate::meta::ALPHABET[usize::from(b) % crate::meta::ALPHABET.len()]))
        .collect()
}

/// The `pod-template-hash` of a Deployment's template (see the module doc: FNV-32a over the
/// template's JSON and the collision count, encoded as the real controller encodes it).
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut h: u32 = 0x811c_9dc5;
    let json = serde_json::to_string(template).unwrap_or_default();
    let count = collision_count.map(|c| c.to_string()).unwrap_or_default();
    for b in json.bytes().chain(count.bytes()) {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    safe_encode(&h.to_string())
}

/// The template without the `pod-template-hash` label (`EqualIgnoreHash` compares these).
fn without_hash(template: &PodTemplateSpec) -> PodTemplateSpec {
    let mut t = template.clone();
    if let Some(l) = t.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        l.remove(POD_TEMPLATE_HASH);
    }
    t
}

/// What one sync of a Deployment does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeploymentSync {
    /// The ReplicaSet to create for the current template, if none exists yet.
    pub create: Option<ReplicaSet>,
    /// ReplicaSets (names) whose `spec.replicas` must change, with the new value.
    pub scale: Vec<(String, i32)>,
    /// The Deployment's status after the sync.
    pub status: DeploymentStatus,
}

/// Whether the ReplicaSet's controller reference names the Deployment's uid.
pub fn replicaset_owned_by(rs: &ReplicaSet, deploy: &Deployment) -> bool {
    let Some(uid) = deploy.metadata.uid.as_deref() else {
        return false;
    };
    controller_of(&rs.metadata).is_some_and(|o| o.uid == uid)
}

/// `intstr.GetScaledValueFromIntOrPercent` of a rolling update bound (`maxSurge` rounds up,
/// `maxUnavailable` down), 25% when unset.
fn scaled_bound(
    v: Option<&k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
    total: i32,
    round_up: bool,
) -> i32 {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let pct = match v {
        Some(IntOrString::Int(i)) => return (*i).max(0),
        Some(IntOrString::String(s)) => s
            .strip_suffix('%')
            .and_then(|p| p.parse::<i64>().ok())
            .unwrap_or(25),
        None => 25,
    };
    let num = pct * i64::from(total);
    let value = if round_up {
        (num + 99).div_euclid(100)
    } else {
        num.div_euclid(100)
    };
    i32::try_from(value.max(0)).unwrap_or(i32::MAX)
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

fn created(rs: &ReplicaSet) -> Time {
    rs.metadata
        .creation_timestamp
        .as_ref()
        .map_or(Time(0), from_kube)
}

/// One sync of the Deployment controller over the Deployment, `replicasets` (any of its
/// namespace; those it controls are picked here) and `pods` (any; those of its old
/// ReplicaSets matter to `Recreate`).
///
/// `Recreate` (`rolloutRecreate`): old ReplicaSets go to 0; the new one is made and scaled up
/// only once no pod of an old one is left but finished ones (a terminating pod still counts).
/// `RollingUpdate` (`rolloutRolling`, the default): the new ReplicaSet is scaled up within
/// `replicas + maxSurge` (default 25%, rounded up) counting every ReplicaSet's `replicas`,
/// and, in a sync that scaled nothing up, old ones are scaled down, unhealthy replicas first,
/// as far as `replicas − maxUnavailable` (default 25%, rounded down; 1 when both are 0)
/// available pods allow, oldest ReplicaSet first.
pub fn sync_deployment(
    deploy: &Deployment,
    replicasets: &[&ReplicaSet],
    pods: &[&Pod],
) -> DeploymentSync {
    let mut out = DeploymentSync {
        status: deploy.status.clone().unwrap_or_default(),
        ..Default::default()
    };
    let (Some(name), Some(uid), Some(spec)) = (
        deploy.metadata.name.as_deref(),
        deploy.metadata.uid.as_deref(),
        deploy.spec.as_ref(),
    ) else {
        return out;
    };
    if validate(Some(&spec.selector), Some(&spec.template)).is_err()
        || deploy.metadata.deletion_timestamp.is_some()
    {
        return out;
    }
    let replicas = spec.replicas.unwrap_or(1).max(0);
    let collision_count = out.status.collision_count;
    let hash = template_hash(&spec.template, collision_count);
    let mut mine: Vec<&ReplicaSet> = replicasets
        .iter()
        .copied()
        .filter(|rs| replicaset_owned_by(rs, deploy))
        .collect();
    mine.sort_by(|a, b| {
        created(a)
            .cmp(&created(b))
            .then(a.metadata.name.cmp(&b.metadata.name))
    });
    let wanted = without_hash(&spec.template);
    let current = mine.iter().copied().find(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| without_hash(t) == wanted)
    });
    let is_current = |rs: &ReplicaSet| current.is_some_and(|c| c.metadata.uid == rs.metadata.uid);
    let old: Vec<&ReplicaSet> = mine.iter().copied().filter(|rs| !is_current(rs)).collect();
    let mut scale = |rs: &ReplicaSet, to: i32| {
        if spec_replicas(rs) != to {
            out.scale
                .push((rs.metadata.name.clone().unwrap_or_default(), to));
        }
    };
    // What the new ReplicaSet should have now (`NewRSNewReplicas`), and whether it may be made.
    let (new_replicas, may_create) = match spec.strategy.as_ref().and_then(|s| s.type_.as_deref()) {
        Some("Recreate") => {
            for rs in &old {
                scale(rs, 0);
            }
            let old_running = pods.iter().any(|p| {
                old.iter().any(|rs| owned_by(p, rs)) && !matches!(phase(p), "Succeeded" | "Failed")
            });
            if old_running {
                (current.map_or(0, spec_replicas), false)
            } else {
                (replicas, true)
            }
        }
        _ => {
            let rolling = spec
                .strategy
                .as_ref()
                .and_then(|s| s.rolling_update.as_ref());
            let surge = scaled_bound(rolling.and_then(|r| r.max_surge.as_ref()), replicas, true);
            let mut unavailable = scaled_bound(
                rolling.and_then(|r| r.max_unavailable.as_ref()),
                replicas,
                false,
            );
            if surge == 0 && unavailable == 0 {
                unavailable = 1;
            }
            let total: i32 = mine.iter().map(|rs| spec_replicas(rs)).sum();
            let have = current.map_or(0, spec_replicas);
            let target = if have > replicas {
                replicas
            } else {
                let room = (replicas + surge - total).max(0);
                have + room.min(replicas - have)
            };
            if target == have && current.is_some() {
                // Nothing scaled up: scale old ReplicaSets down as availability allows.
                let all: i32 = total;
                let min_available = replicas - unavailable;
                let new_unavailable = current.map_or(0, |c| spec_replicas(c) - available(c));
                let max_down = all - min_available - new_unavailable;
                if max_down > 0 {
                    let mut sizes: Vec<i32> = old.iter().map(|rs| spec_replicas(rs)).collect();
                    // Unhealthy replicas first (`cleanupUnhealthyReplicas`).
                    let mut cleaned = 0;
                    for (i, rs) in old.iter().enumerate() {
                        let unhealthy = (sizes[i] - available(rs)).max(0);
                        let n = unhealthy.min(max_down - cleaned);
                        sizes[i] -= n;
                        cleaned += n;
                    }
                    // Then available ones, down to `minAvailable`.
                    let available_now: i32 = mine.iter().map(|rs| available(rs)).sum();
                    let mut budget = (available_now - min_available).max(0);
                    for size in sizes.iter_mut() {
                        let n = (*size).min(budget);
                        *size -= n;
                        budget -= n;
                    }
                    for (rs, size) in old.iter().zip(sizes) {
                        scale(rs, size);
                    }
                }
            }
            (target, true)
        }
    };
    match current {
        Some(c) => scale(c, new_replicas),
        None if may_create => {
            let mut template = spec.template.clone();
            template
                .metadata
                .get_or_insert_with(Default::default)
                .labels
                .get_or_insert_with(Default::default)
                .insert(POD_TEMPLATE_HASH.into(), hash.clone());
            let mut selector = spec.selector.clone();
            selector
                .match_labels
                .get_or_insert_with(Default::default)
                .insert(POD_TEMPLATE_HASH.into(), hash.clone());
            let mut rs_labels = spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            rs_labels.insert(POD_TEMPLATE_HASH.into(), hash.clone());
            out.create = Some(ReplicaSet {
                metadata: ObjectMeta {
                    name: Some(format!("{name}-{hash}")),
                    namespace: deploy.metadata.namespace.clone(),
                    labels: Some(rs_labels),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "Deployment".into(),
                        name: name.to_string(),
                        uid: uid.to_string(),
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..Default::default()
                },
                spec: Some(ReplicaSetSpec {
                    replicas: Some(new_replicas),
                    min_ready_seconds: spec.min_ready_seconds,
                    selector,
                    template: Some(template),
                }),
                status: None,
            });
        }
        None => {}
    }
    let sum = |f: &dyn Fn(&ReplicaSetStatus) -> Option<i32>| -> Option<i32> {
        Some(
            mine.iter()
                .filter_map(|rs| rs.status.as_ref())
                .filter_map(f)
                .sum(),
        )
    };
    let updated = current
        .and_then(|c| c.status.as_ref())
        .map_or(0, |s| s.replicas);
    let total = sum(&|s| Some(s.replicas)).unwrap_or(0);
    let available_total = sum(&|s| s.available_replicas).unwrap_or(0);
    out.status = DeploymentStatus {
        replicas: Some(total),
        updated_replicas: Some(updated),
        ready_replicas: sum(&|s| s.ready_replicas),
        available_replicas: Some(available_total),
        unavailable_replicas: Some((replicas - available_total).max(0)),
        terminating_replicas: sum(&|s| s.terminating_replicas),
        observed_generation: deploy.metadata.generation,
        collision_count,
        conditions: out.status.conditions.take(),
    };
    out
}

/// The scale the disruption controller counts for a pod's controller reference `owner`
/// (`getPodReplicaSet` / `getPodDeployment`): a ReplicaSet's `spec.replicas`, or, when a
/// Deployment controls it, the Deployment's. `None` when not a ReplicaSet or not found.
pub fn scale_of(
    owner: &OwnerReference,
    replicaset: &dyn Fn(&str) -> Option<ReplicaSet>,
    deployment: &dyn Fn(&str) -> Option<Deployment>,
) -> Option<i32> {
    if owner.kind != "ReplicaSet" || !owner.api_version.starts_with("apps/") {
        return None;
    }
    let rs = replicaset(&owner.name).filter(|rs| rs.metadata.uid.as_deref() == Some(&owner.uid))?;
    if let Some(d) = controller_of(&rs.metadata).filter(|o| o.kind == "Deployment") {
        let deploy = deployment(&d.name).filter(|x| x.metadata.uid.as_deref() == Some(&d.uid))?;
        return Some(deploy.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1));
    }
    Some(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as KubeTime;

    const NOW: Time = Time(1_790_000_000_000);

    fn labels_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn rs(replicas: i32) -> ReplicaSet {
        let l = labels_of(&[("app", "web"), (POD_TEMPLATE_HASH, "abc12")]);
        ReplicaSet {
            metadata: ObjectMeta {
                name: Some("web-abc12".into()),
                namespace: Some("default".into()),
                uid: Some("rs-uid".into()),
                generation: Some(3),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some(l.clone()),
                    ..Default::default()
                },
                template: Some(PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(l),
                        annotations: Some(labels_of(&[("note", "x")])),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        scheduler_name: Some("caldera".into()),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn at(ms: i64) -> Option<KubeTime> {
        crate::time::to_kube(Time(ms))
    }

    fn named(mut p: Pod, name: &str, created: i64) -> Pod {
        p.metadata.name = Some(name.into());
        p.metadata.creation_timestamp = at(created);
        p
    }

    fn running_on(mut p: Pod, node: &str, ready_at: i64) -> Pod {
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: at(ready_at),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p
    }

    fn names(pods: &[Pod]) -> Vec<String> {
        pods.iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn creates_replicas_pods_from_the_template_owned_by_the_replicaset() {
        let r = rs(3);
        let s = sync(&r, &[], NOW, &|_| false);
        assert_eq!(s.create.len(), 3);
        let made = names(&s.create);
        for (p, n) in s.create.iter().zip(&made) {
            assert!(owned_by(p, &r));
            assert!(
                n.starts_with("web-abc12-") && n.len() == "web-abc12-".len() + 5,
                "{n}"
            );
            let l = p.metadata.labels.clone().unwrap();
            assert_eq!(l.get(POD_TEMPLATE_HASH).map(String::as_str), Some("abc12"));
            assert_eq!(p.metadata.annotations.clone().unwrap()["note"], "x");
            assert_eq!(
                p.spec.as_ref().unwrap().scheduler_name.as_deref(),
                Some("caldera")
            );
            let o = &p.metadata.owner_references.as_ref().unwrap()[0];
            assert_eq!(
                (o.kind.as_str(), o.block_owner_deletion),
                ("ReplicaSet", Some(true))
            );
        }
        let distinct: std::collections::BTreeSet<_> = made.iter().collect();
        assert_eq!(distinct.len(), 3);
        // Synced again with its pods (stored as the server would): nothing to do.
        let stored: Vec<Pod> = s.create.clone();
        let refs: Vec<&Pod> = stored.iter().collect();
        let again = sync(&r, &refs, NOW, &|_| false);
        assert!(again.create.is_empty() && again.delete.is_empty());
        assert_eq!(again.status.replicas, 3);
        assert_eq!(again.status.observed_generation, Some(3));
    }

    #[test]
    fn a_terminating_pod_is_replaced_at_once_under_another_name() {
        let r = rs(2);
        let first = sync(&r, &[], NOW, &|_| false).create;
        let mut evicted = running_on(first[0].clone(), "n1", 0);
        evicted.metadata.deletion_timestamp = at(NOW.0 + 30_000);
        let other = running_on(first[1].clone(), "n2", 0);
        let taken = |n: &str| names(&first).iter().any(|m| m == n);
        let later = Time(NOW.0 + 1000);
        let s = sync(&r, &[&evicted, &other], later, &taken);
        assert_eq!(
            s.create.len(),
            1,
            "the terminating pod does not count as active"
        );
        assert!(!names(&first).contains(&names(&s.create)[0]));
        assert_eq!(s.status.replicas, 1);
        assert_eq!(s.status.terminating_replicas, Some(1));
        assert_eq!(s.status.ready_replicas, Some(1));
        // Gone altogether: replaced too, and not under the name of the pod it replaces.
        let s = sync(&r, &[&other], Time(NOW.0 + 40_000), &|n| {
            n == names(&first)[1]
        });
        assert_eq!(s.create.len(), 1);
        assert_ne!(names(&s.create)[0], names(&first)[0]);
    }

    #[test]
    fn finished_pods_are_replaced() {
        let r = rs(1);
        let mut done = sync(&r, &[], NOW, &|_| false).create.remove(0);
        done.status = Some(PodStatus {
            phase: Some("Failed".into()),
            ..Default::default()
        });
        assert_eq!(sync(&r, &[&done], NOW, &|_| false).create.len(), 1);
    }

    #[test]
    fn scale_down_deletes_unbound_then_not_ready_then_newest() {
        let r = rs(5);
        let made = sync(&r, &[], NOW, &|_| false).create;
        let p: Vec<Pod> = made
            .iter()
            .enumerate()
            .map(|(i, p)| named(p.clone(), &format!("p{i}"), 1000 * i as i64))
            .collect();
        let old_ready = running_on(p[0].clone(), "n1", 10);
        let new_ready = running_on(p[1].clone(), "n2", 20);
        let mut bound_pending = p[2].clone();
        bound_pending
            .spec
            .get_or_insert_with(Default::default)
            .node_name = Some("n3".into());
        let unbound_old = p[3].clone();
        let unbound_new = p[4].clone();
        let all = [
            &old_ready,
            &new_ready,
            &bound_pending,
            &unbound_old,
            &unbound_new,
        ];
        let order = |replicas: i32| {
            let mut r = r.clone();
            r.spec.as_mut().unwrap().replicas = Some(replicas);
            sync(&r, &all, NOW, &|_| true).delete
        };
        assert_eq!(order(3), vec!["p4", "p3"]);
        assert_eq!(order(1), vec!["p4", "p3", "p2", "p1"]);
        assert!(order(5).is_empty());
    }

    #[test]
    fn deletion_cost_and_crowded_nodes_go_first() {
        let r = rs(3);
        let made = sync(&r, &[], NOW, &|_| false).create;
        let a = running_on(named(made[0].clone(), "a", 0), "n1", 5);
        let b = running_on(named(made[1].clone(), "b", 0), "n1", 5);
        let mut c = running_on(named(made[2].clone(), "c", 0), "n2", 5);
        let mut r2 = r.clone();
        r2.spec.as_mut().unwrap().replicas = Some(2);
        // Two on n1: one of those goes (the same rank otherwise; name breaks the tie).
        assert_eq!(sync(&r2, &[&a, &b, &c], NOW, &|_| true).delete, vec!["b"]);
        c.metadata.annotations = Some(labels_of(&[(DELETION_COST, "-5")]));
        assert_eq!(sync(&r2, &[&a, &b, &c], NOW, &|_| true).delete, vec!["c"]);
    }

    #[test]
    fn orphans_matching_the_selector_are_adopted_instead_of_created() {
        let r = rs(2);
        let template = r.spec.as_ref().unwrap().template.clone().unwrap();
        let orphan = |name: &str| Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: template.metadata.as_ref().unwrap().labels.clone(),
                ..Default::default()
            },
            ..Default::default()
        };
        let a = running_on(orphan("web-a"), "n1", 0);
        let mut other_ns = orphan("web-b");
        other_ns.metadata.namespace = Some("elsewhere".into());
        let mut unlabelled = orphan("web-c");
        unlabelled.metadata.labels = Some(labels_of(&[("app", "web")]));
        let s = sync(&r, &[&a, &other_ns, &unlabelled], NOW, &|_| false);
        assert_eq!(s.adopt, vec!["web-a"]);
        assert_eq!(s.create.len(), 1);
        assert_eq!(s.status.replicas, 1);
    }

    #[test]
    fn an_owned_pod_whose_labels_no_longer_match_is_released_and_replaced() {
        let r = rs(1);
        let mut p = sync(&r, &[], NOW, &|_| false).create.remove(0);
        p.metadata.labels = Some(labels_of(&[("app", "debug")]));
        let s = sync(&r, &[&p], NOW, &|_| false);
        assert_eq!(s.release, names(std::slice::from_ref(&p)));
        assert_eq!(s.create.len(), 1);
    }

    #[test]
    fn a_replicaset_without_a_matching_selector_is_refused_and_does_nothing() {
        let mut r = rs(2);
        r.spec.as_mut().unwrap().selector = LabelSelector::default();
        assert_eq!(
            validate(Some(&r.spec.as_ref().unwrap().selector), None)
                .unwrap_err()
                .0,
            "spec.selector"
        );
        assert!(sync(&r, &[], NOW, &|_| false).create.is_empty());
        let mut r = rs(2);
        r.spec.as_mut().unwrap().selector.match_labels = Some(labels_of(&[("app", "other")]));
        let spec = r.spec.as_ref().unwrap();
        assert_eq!(
            validate(Some(&spec.selector), spec.template.as_ref())
                .unwrap_err()
                .0,
            "spec.template.metadata.labels"
        );
        assert!(sync(&r, &[], NOW, &|_| false).create.is_empty());
    }

    fn deployment(replicas: i32, image: &str) -> Deployment {
        let l = labels_of(&[("app", "web")]);
        Deployment {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("default".into()),
                uid: Some("d-uid".into()),
                ..Default::default()
            },
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                selector: LabelSelector {
                    match_labels: Some(l.clone()),
                    ..Default::default()
                },
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some(l),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![k8s_openapi::api::core::v1::Container {
                            name: "c".into(),
                            image: Some(image.into()),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn a_deployment_runs_one_replicaset_named_by_its_template_hash() {
        let d = deployment(4, "v1");
        let s = sync_deployment(&d, &[], &[]);
        let mut made = s.create.expect("a ReplicaSet for the template");
        let hash = template_hash(&d.spec.as_ref().unwrap().template, None);
        assert_eq!(
            made.metadata.name.as_deref(),
            Some(format!("web-{hash}").as_str())
        );
        assert!(hash.len() >= 6 && hash.chars().all(|c| c.is_ascii_alphanumeric()));
        let spec = made.spec.clone().unwrap();
        assert_eq!(spec.replicas, Some(4));
        for l in [
            spec.selector.match_labels.clone().unwrap(),
            spec.template
                .clone()
                .unwrap()
                .metadata
                .unwrap()
                .labels
                .unwrap(),
            made.metadata.labels.clone().unwrap(),
        ] {
            assert_eq!(l.get(POD_TEMPLATE_HASH), Some(&hash));
        }
        assert!(replicaset_owned_by(&made, &d));
        // Its pods carry the hash: the gang derivation finds the Deployment from them.
        made.metadata.uid = Some("rs-1".into());
        let pods = sync(&made, &[], NOW, &|_| false).create;
        assert_eq!(pods.len(), 4);
        assert_eq!(
            pods[0].metadata.labels.as_ref().unwrap()[POD_TEMPLATE_HASH],
            hash
        );
        // Stable: synced again with its ReplicaSet, nothing to do.
        let again = sync_deployment(&d, &[&made], &[]);
        assert!(again.create.is_none() && again.scale.is_empty());
        // Scaled: the ReplicaSet follows.
        let again = sync_deployment(&deployment(2, "v1"), &[&made], &[]);
        assert_eq!(again.scale, vec![(format!("web-{hash}"), 2)]);
    }

    fn with_status(mut rs: ReplicaSet, uid: &str, created_ms: i64, available: i32) -> ReplicaSet {
        rs.metadata.uid = Some(uid.into());
        rs.metadata.creation_timestamp = at(created_ms);
        rs.status = Some(ReplicaSetStatus {
            replicas: spec_replicas(&rs),
            available_replicas: Some(available),
            ..Default::default()
        });
        rs
    }

    fn scaled_to(rs: &mut ReplicaSet, s: &DeploymentSync) {
        let name = rs.metadata.name.clone().unwrap();
        if let Some((_, n)) = s.scale.iter().find(|(m, _)| *m == name) {
            rs.spec.as_mut().unwrap().replicas = Some(*n);
        }
    }

    #[test]
    fn a_rolling_update_surges_then_scales_the_old_replicaset_down_as_pods_become_available() {
        // 4 replicas: maxSurge 25% = 1, maxUnavailable 25% = 1.
        let old_d = deployment(4, "v1");
        let mut old = with_status(
            sync_deployment(&old_d, &[], &[]).create.unwrap(),
            "rs-old",
            0,
            4,
        );
        let new_d = deployment(4, "v2");
        let s = sync_deployment(&new_d, &[&old], &[]);
        let new = s.create.clone().expect("a ReplicaSet for the new template");
        assert_ne!(new.metadata.name, old.metadata.name);
        assert_eq!(
            new.spec.as_ref().unwrap().replicas,
            Some(1),
            "4 + 1 surge − 4"
        );
        assert!(
            s.scale.is_empty(),
            "a sync that scales up scales nothing down"
        );
        let mut new = with_status(new, "rs-new", 1000, 0);
        // Nothing more to surge: the old one goes down by what maxUnavailable allows.
        let s = sync_deployment(&new_d, &[&old, &new], &[]);
        assert_eq!(s.scale, vec![(old.metadata.name.clone().unwrap(), 3)]);
        scaled_to(&mut old, &s);
        // Room again: the new one grows.
        let s = sync_deployment(&new_d, &[&old, &new], &[]);
        assert_eq!(s.scale, vec![(new.metadata.name.clone().unwrap(), 2)]);
        scaled_to(&mut new, &s);
        // Its two pods not available yet: the old one stays (3 available, 3 needed).
        old.status.as_mut().unwrap().available_replicas = Some(3);
        let s = sync_deployment(&new_d, &[&old, &new], &[]);
        assert!(s.scale.is_empty(), "{:?}", s.scale);
        // Available: the old one goes down by 2.
        new.status.as_mut().unwrap().available_replicas = Some(2);
        let s = sync_deployment(&new_d, &[&old, &new], &[]);
        assert_eq!(s.scale, vec![(old.metadata.name.clone().unwrap(), 1)]);
    }

    #[test]
    fn recreate_scales_old_to_zero_and_waits_for_its_pods_to_go() {
        let mut old_d = deployment(2, "v1");
        old_d.spec.as_mut().unwrap().strategy =
            Some(k8s_openapi::api::apps::v1::DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            });
        let old = with_status(
            sync_deployment(&old_d, &[], &[]).create.unwrap(),
            "rs-old",
            0,
            2,
        );
        let mut pods = sync(&old, &[], NOW, &|_| false).create;
        let mut new_d = old_d.clone();
        new_d
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0]
            .image = Some("v2".into());
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = sync_deployment(&new_d, &[&old], &refs);
        assert_eq!(s.scale, vec![(old.metadata.name.clone().unwrap(), 0)]);
        assert!(s.create.is_none(), "old pods still there");
        // Terminating still counts.
        for p in pods.iter_mut() {
            p.metadata.deletion_timestamp = at(NOW.0);
        }
        let refs: Vec<&Pod> = pods.iter().collect();
        assert!(sync_deployment(&new_d, &[&old], &refs).create.is_none());
        let s = sync_deployment(&new_d, &[&old], &[]);
        let new = s.create.expect("made once the old pods are gone");
        assert_eq!(new.spec.unwrap().replicas, Some(2));
    }

    #[test]
    fn the_disruption_controller_counts_the_deployment_scale_through_its_replicaset() {
        let d = deployment(6, "v1");
        let mut r = sync_deployment(&d, &[], &[]).create.unwrap();
        r.metadata.uid = Some("rs-1".into());
        let owner = controller_ref(&r);
        let rs_name = r.metadata.name.clone().unwrap();
        let find_rs = |n: &str| (n == rs_name).then(|| r.clone());
        assert_eq!(scale_of(&owner, &find_rs, &|_| Some(d.clone())), Some(6));
        assert_eq!(
            scale_of(&owner, &find_rs, &|_| None),
            None,
            "its Deployment is gone"
        );
        let mut alone = rs(3);
        alone.metadata.owner_references = None;
        let owner = controller_ref(&alone);
        assert_eq!(
            scale_of(&owner, &|_| Some(alone.clone()), &|_| None),
            Some(3)
        );
        let mut stale = owner.clone();
        stale.uid = "another".into();
        assert_eq!(scale_of(&stale, &|_| Some(alone.clone()), &|_| None), None);
    }
}
