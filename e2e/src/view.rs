//! The live cluster read into the simulator's store, so the simulator's expectation checker
//! ([`caldera_sim::expect::check`]) and invariant checks ([`caldera_sim::invariants`]) run
//! unchanged on live objects: what a scenario means does not depend on where it runs.
//!
//! A [`View`] is a [`Simulation`] whose scheduler is never run; the objects are applied to
//! its store as read from the API server (status included), in dependency order. An object
//! the scheduler could not convert either (a malformed PodGroup) is left out and named in
//! [`View::skipped`].

use crate::error::{Error, Result};
use crate::objects::{api, ObjectKey};
use caldera_api::{PodGroup, ProvisioningRequest, Queue};
use caldera_cache::SnapshotOptions;
use caldera_config::SchedulerConfig;
use caldera_model::{Bind, Plan};
use caldera_sim::driver::{FnScheduling, SessionOutput};
use caldera_sim::expect::{self, Checked, Expect};
use caldera_sim::invariants;
use caldera_sim::manifest::{Kind, Object};
use caldera_sim::Simulation;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha2::{PodGroup as NativePodGroup, Workload};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, ListParams};
use kube::Client;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// Everything the scheduler looks at, as listed from the API server.
#[derive(Debug, Clone, Default)]
pub struct LiveObjects {
    /// PriorityClasses.
    pub priority_classes: Vec<PriorityClass>,
    /// Queues, as JSON (a custom resource may not decode).
    pub queues: Vec<serde_json::Value>,
    /// Nodes.
    pub nodes: Vec<Node>,
    /// HyperNodes, as JSON (none when the API does not serve them).
    pub hypernodes: Vec<serde_json::Value>,
    /// PodGroups, as JSON (a custom resource may not decode).
    pub podgroups: Vec<serde_json::Value>,
    /// Native `scheduling.k8s.io/v1alpha2` Workloads (none when the API is not served).
    pub workloads: Vec<Workload>,
    /// Native `scheduling.k8s.io/v1alpha2` PodGroups (none when the API is not served).
    pub native_podgroups: Vec<NativePodGroup>,
    /// Pods, all namespaces.
    pub pods: Vec<Pod>,
    /// ProvisioningRequests, all namespaces (none when the API does not serve them).
    pub provisioning_requests: Vec<ProvisioningRequest>,
    /// Requests ever created per PodGroup `namespace/name`, as the autoscaler saw them.
    pub requests_created: BTreeMap<String, usize>,
    /// StorageClasses.
    pub storage_classes: Vec<StorageClass>,
    /// CSINodes.
    pub csinodes: Vec<CSINode>,
    /// PersistentVolumes.
    pub volumes: Vec<PersistentVolume>,
    /// PersistentVolumeClaims, all namespaces.
    pub claims: Vec<PersistentVolumeClaim>,
    /// DRA DeviceClasses (none when `resource.k8s.io/v1` is not served).
    pub device_classes: Vec<DeviceClass>,
    /// DRA ResourceSlices.
    pub resource_slices: Vec<ResourceSlice>,
    /// DRA ResourceClaims, all namespaces.
    pub resource_claims: Vec<ResourceClaim>,
    /// DRA ResourceClaimTemplates, all namespaces.
    pub resource_claim_templates: Vec<ResourceClaimTemplate>,
}

async fn list_typed<K>(api: Api<K>, what: &str) -> Result<Vec<K>>
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| Error::api("list", what, e))
}

/// Lists an API the server may not serve (404: none).
async fn list_optional<K>(api: Api<K>, what: &str) -> Result<Vec<K>>
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.list(&ListParams::default()).await {
        Ok(l) => Ok(l.items),
        Err(e) if crate::error::status_code(&e) == Some(404) => Ok(Vec::new()),
        Err(e) => Err(Error::api("list", what, e)),
    }
}

async fn list_json(client: &Client, kind: Kind) -> Result<Vec<serde_json::Value>> {
    let list = api(client, kind, None)
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::api("list", format!("{kind}s"), e))?;
    list.items
        .into_iter()
        .map(|o| {
            serde_json::to_value(&o).map_err(|source| Error::Json {
                object: format!("{kind} {}", o.metadata.name.as_deref().unwrap_or("")),
                source,
            })
        })
        .collect()
}

impl LiveObjects {
    /// Lists every kind (fifteen requests).
    pub async fn read(client: &Client) -> Result<LiveObjects> {
        Ok(LiveObjects {
            priority_classes: list_typed(Api::all(client.clone()), "priorityclasses").await?,
            queues: list_json(client, Kind::Queue).await?,
            nodes: list_typed(Api::all(client.clone()), "nodes").await?,
            hypernodes: match list_json(client, Kind::HyperNode).await {
                Err(Error::Api { ref source, .. })
                    if crate::error::status_code(source) == Some(404) =>
                {
                    Vec::new()
                }
                other => other?,
            },
            podgroups: list_json(client, Kind::PodGroup).await?,
            workloads: list_optional(Api::all(client.clone()), "workloads").await?,
            native_podgroups: list_optional(
                Api::all(client.clone()),
                "podgroups.scheduling.k8s.io",
            )
            .await?,
            pods: list_typed(Api::all(client.clone()), "pods").await?,
            provisioning_requests: match Api::<ProvisioningRequest>::all(client.clone())
                .list(&ListParams::default())
                .await
            {
                Ok(l) => l.items,
                Err(e) if crate::error::status_code(&e) == Some(404) => Vec::new(),
                Err(e) => return Err(Error::api("list", "provisioningrequests", e)),
            },
            requests_created: BTreeMap::new(),
            storage_classes: list_typed(Api::all(client.clone()), "storageclasses").await?,
            csinodes: list_typed(Api::all(client.clone()), "csinodes").await?,
            volumes: list_typed(Api::all(client.clone()), "persistentvolumes").await?,
            claims: list_typed(Api::all(client.clone()), "persistentvolumeclaims").await?,
            device_classes: list_optional(Api::all(client.clone()), "deviceclasses").await?,
            resource_slices: list_optional(Api::all(client.clone()), "resourceslices").await?,
            resource_claims: list_optional(Api::all(client.clone()), "resourceclaims").await?,
            resource_claim_templates: list_optional(
                Api::all(client.clone()),
                "resourceclaimtemplates",
            )
            .await?,
        })
    }

    /// The pod `namespace/name`.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Pod> {
        self.pods.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(namespace)
                && p.metadata.name.as_deref() == Some(name)
        })
    }
}

/// A pod the scheduler bound since the invariants were last checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NewBind {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The node it is bound to.
    pub node: String,
}

/// The live cluster as the simulator's store.
pub struct View {
    sim: Simulation,
    /// Objects left out because they do not convert, with the reason.
    pub skipped: Vec<String>,
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View")
            .field("skipped", &self.skipped)
            .finish_non_exhaustive()
    }
}

fn snapshot_options(config: &SchedulerConfig) -> SnapshotOptions {
    SnapshotOptions {
        scheduler_names: config.scheduler_names.clone(),
        default_gang_timeout: config.gang_schedule_timeout,
        gate: false,
        provisioning: config.autoscaler.as_ref().map(|a| a.policy()),
        predict: None,
        auto_group: caldera_cache::workload::AutoGroup::new(
            config.auto_group.enabled,
            config.auto_group.namespaces.as_deref(),
        ),
    }
}

impl View {
    /// The objects as they are.
    pub fn new(config: &SchedulerConfig, objects: &LiveObjects) -> View {
        View::build(config, objects, &HashSet::new())
    }

    /// The objects, with the pods in `unbind` (`(namespace, name)`) taken back to pending and
    /// unbound: the cluster as the scheduler saw it before it bound them.
    fn build(
        config: &SchedulerConfig,
        objects: &LiveObjects,
        unbind: &HashSet<(String, String)>,
    ) -> View {
        let nothing = FnScheduling(|_: &caldera_model::Snapshot, _| SessionOutput::default());
        let mut sim = Simulation::with_scheduler(
            Box::new(nothing),
            config.schedule_period,
            snapshot_options(config),
        );
        let mut skipped = Vec::new();
        let mut add = |object: Object, skipped: &mut Vec<String>| {
            let what = object.describe();
            // Claims, volumes and classes as read: the live PV controller's work, not the
            // simulator's.
            let Some(object) = sim.store_mut().insert_read(object) else {
                return;
            };
            if let Err(e) = sim.apply([object]) {
                skipped.push(format!("{what}: {e}"));
            }
        };
        for pc in &objects.priority_classes {
            add(Object::PriorityClass(pc.clone()), &mut skipped);
        }
        for q in &objects.queues {
            match serde_json::from_value::<Queue>(q.clone()) {
                Ok(q) => add(Object::Queue(q), &mut skipped),
                Err(e) => skipped.push(format!("Queue {}: {e}", q["metadata"]["name"])),
            }
        }
        for n in &objects.nodes {
            add(Object::Node(n.clone()), &mut skipped);
        }
        for h in &objects.hypernodes {
            match serde_json::from_value::<caldera_api::HyperNode>(h.clone()) {
                Ok(h) => add(Object::HyperNode(h), &mut skipped),
                Err(e) => skipped.push(format!("HyperNode {}: {e}", h["metadata"]["name"])),
            }
        }
        let storage = (objects
            .storage_classes
            .iter()
            .cloned()
            .map(Object::StorageClass))
        .chain(objects.csinodes.iter().cloned().map(Object::CSINode))
        .chain(
            objects
                .volumes
                .iter()
                .cloned()
                .map(Object::PersistentVolume),
        )
        .chain(
            objects
                .claims
                .iter()
                .cloned()
                .map(Object::PersistentVolumeClaim),
        );
        for object in storage {
            add(object, &mut skipped);
        }
        // DRA objects as read: the live allocations and the live resource-claim controller's
        // claims; for the pods taken back to pending, the claims as before their binds (their
        // reservations gone, an allocation only they used cleared, the bridge's claim made for
        // them gone).
        let unbound_uids: HashSet<String> = objects
            .pods
            .iter()
            .filter(|p| {
                unbind.contains(&(
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default(),
                ))
            })
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let resource_claims: Vec<_> = objects
            .resource_claims
            .iter()
            .filter_map(|c| before_binds(c, &unbound_uids))
            .collect();
        let dra = (objects
            .device_classes
            .iter()
            .cloned()
            .map(Object::DeviceClass))
        .chain(
            objects
                .resource_slices
                .iter()
                .cloned()
                .map(Object::ResourceSlice),
        )
        .chain(
            objects
                .resource_claim_templates
                .iter()
                .cloned()
                .map(Object::ResourceClaimTemplate),
        )
        .chain(resource_claims.into_iter().map(Object::ResourceClaim));
        for object in dra {
            add(object, &mut skipped);
        }
        for pg in &objects.podgroups {
            match serde_json::from_value::<PodGroup>(pg.clone()) {
                Ok(pg) => add(Object::PodGroup(pg), &mut skipped),
                Err(e) => skipped.push(format!(
                    "PodGroup {}/{}: {e}",
                    pg["metadata"]["namespace"].as_str().unwrap_or(""),
                    pg["metadata"]["name"].as_str().unwrap_or("")
                )),
            }
        }
        for w in &objects.workloads {
            add(Object::Workload(w.clone()), &mut skipped);
        }
        for pg in &objects.native_podgroups {
            add(Object::NativePodGroup(pg.clone()), &mut skipped);
        }
        for p in &objects.pods {
            let mut pod = p.clone();
            let key = (
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default(),
            );
            if unbind.contains(&key) {
                if let Some(spec) = pod.spec.as_mut() {
                    spec.node_name = None;
                }
                if let Some(status) = pod.status.as_mut() {
                    status.phase = Some("Pending".into());
                    status.extended_resource_claim_status = None;
                }
            }
            add(Object::Pod(pod), &mut skipped);
        }
        for pr in &objects.provisioning_requests {
            sim.store_mut().insert_request(pr.clone());
        }
        sim.store_mut()
            .set_requests_created(objects.requests_created.clone());
        View { sim, skipped }
    }

    /// The simulation holding the objects (its clock and scheduler are not used).
    pub fn simulation(&self) -> &Simulation {
        &self.sim
    }

    /// Checks an `expect` step against the objects.
    pub fn check(&self, expect: &Expect) -> Checked {
        expect::check(expect, &self.sim)
    }
}

/// What the invariant checks found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Broken {
    /// Problems no amount of waiting undoes: an over-committed node, a bind that breaks a
    /// predicate.
    pub lasting: Vec<String>,
    /// Gangs bound in part: binds of a gang are asynchronous, so this may be a gang whose last
    /// binds are still in flight. The driver re-checks before reporting them.
    pub partial: Vec<String>,
}

impl Broken {
    /// Nothing broken.
    pub fn is_empty(&self) -> bool {
        self.lasting.is_empty() && self.partial.is_empty()
    }

    /// Every problem, one line each.
    pub fn lines(&self) -> Vec<String> {
        self.lasting.iter().chain(&self.partial).cloned().collect()
    }
}

/// The claim `c` as it was before the pods `unbound` (uids) were bound: none of them in
/// `reservedFor`, the allocation gone when only they used it, and `None` for the
/// extended-resource bridge's claim made for one of them.
fn before_binds(c: &ResourceClaim, unbound: &HashSet<String>) -> Option<ResourceClaim> {
    let mut c = c.clone();
    if unbound.is_empty() {
        return Some(c);
    }
    let bridge =
        c.metadata.annotations.as_ref().is_some_and(|a| {
            a.contains_key(caldera_model::dra::EXTENDED_RESOURCE_CLAIM_ANNOTATION)
        });
    let owner_unbound = c
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| unbound.contains(&o.uid));
    if bridge && owner_unbound {
        return None;
    }
    if let Some(status) = c.status.as_mut() {
        let users = status.reserved_for.take().unwrap_or_default();
        let before = users.len();
        let kept: Vec<_> = users
            .into_iter()
            .filter(|u| !unbound.contains(&u.uid))
            .collect();
        if kept.is_empty() && before > 0 {
            status.allocation = None;
        }
        status.reserved_for = (!kept.is_empty()).then_some(kept);
    }
    Some(c)
}

/// The scenario invariants for the pods bound since the last check (`new_binds`): each passes
/// every predicate on its node (judged against the cluster without those binds, by the
/// simulator's [`invariants::check_binds`]); no node they landed on is over-committed; no
/// gang they belong to has `0 < bound < minMember`.
pub fn check_invariants(
    config: &SchedulerConfig,
    objects: &LiveObjects,
    new_binds: &[NewBind],
) -> Broken {
    let mut broken = Broken::default();
    if new_binds.is_empty() {
        return broken;
    }
    let unbind: HashSet<(String, String)> = new_binds
        .iter()
        .map(|b| (b.namespace.clone(), b.name.clone()))
        .collect();
    let before = View::build(config, objects, &unbind);
    let after = View::build(config, objects, &HashSet::new());

    let mut plan = Plan::default();
    for b in new_binds {
        let uid = before
            .sim
            .store()
            .pod(&b.namespace, &b.name)
            .and_then(|p| p.metadata.uid.clone())
            .unwrap_or_default();
        plan.binds.push(Bind {
            pod: caldera_model::ObjectRef {
                namespace: Arc::from(b.namespace.as_str()),
                name: Arc::from(b.name.as_str()),
                uid: Arc::from(uid.as_str()),
            },
            node: Arc::from(b.node.as_str()),
            job: Arc::from(""),
        });
    }
    // Devices count as the resources their classes name, as in the simulator's checks.
    let mut seen_before = before.sim.snapshot();
    caldera_session::devices::fold_snapshot(&mut seen_before);
    broken
        .lasting
        .extend(invariants::check_binds(&seen_before, &plan));
    // DRA devices count as the resources their classes name, as the session counts them.
    let seen = before.sim.session_view();
    broken.lasting.extend(invariants::check_binds(&seen, &plan));

    let nodes: BTreeSet<String> = new_binds.iter().map(|b| b.node.clone()).collect();
    // Devices count as the resources their classes name, as in the simulator's check.
    let mut folded = after.sim.snapshot();
    caldera_session::devices::fold_snapshot(&mut folded);
    broken.lasting.extend(invariants::overcommitted(
        after.sim.store(),
        &nodes,
        &folded,
    ));
    let now = after.sim.session_view();
    broken
        .lasting
        .extend(invariants::overcommitted(after.sim.store(), &nodes, &now));

    let mut gangs: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for b in new_binds {
        let group = objects
            .pod(&b.namespace, &b.name)
            .and_then(|p| after.sim.store().group_of(p));
        if let Some(group) = group {
            gangs
                .entry(format!("{}/{group}", b.namespace))
                .or_default()
                .push(&b.name);
        }
    }
    for gang in invariants::partial_gangs(after.sim.store()) {
        if let Some(members) = gangs.get(&gang) {
            broken.partial.push(format!(
                "podgroup {gang} is bound in part (fewer than minMember members have a node) after binds of {}",
                members.join(", ")
            ));
        }
    }
    broken
}

/// The key of a pod.
pub fn pod_key(pod: &Pod) -> ObjectKey {
    ObjectKey::new(
        Kind::Pod,
        pod.metadata.namespace.as_deref(),
        pod.metadata.name.as_deref().unwrap_or(""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, gpus: u32) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110",
                                       "nvidia.com/gpu": gpus.to_string()},
                       "conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap()
    }

    fn pod(name: &str, group: &str, gpus: u32, node: Option<&str>) -> Pod {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"),
                         "annotations": {"scheduling.k8s.io/group-name": group}},
            "spec": {"schedulerName": "caldera", "containers": [{"name": "c", "image": "i",
                     "resources": {"requests": {"nvidia.com/gpu": gpus.to_string()},
                                   "limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": "Pending"}
        });
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        serde_json::from_value(p).unwrap()
    }

    fn podgroup(name: &str, min_member: u32) -> serde_json::Value {
        json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": "ml"},
               "spec": {"minMember": min_member}})
    }

    fn bind(name: &str, node: &str) -> NewBind {
        NewBind {
            namespace: "ml".into(),
            name: name.into(),
            node: node.into(),
        }
    }

    #[test]
    fn a_whole_gang_that_fits_breaks_nothing() {
        let objects = LiveObjects {
            nodes: vec![node("n1", 4)],
            podgroups: vec![podgroup("g", 2)],
            pods: vec![
                pod("g-0", "g", 2, Some("n1")),
                pod("g-1", "g", 2, Some("n1")),
            ],
            ..LiveObjects::default()
        };
        let binds = [bind("g-0", "n1"), bind("g-1", "n1")];
        let broken = check_invariants(&SchedulerConfig::default(), &objects, &binds);
        assert!(broken.is_empty(), "{broken:?}");
    }

    #[test]
    fn binds_past_a_nodes_capacity_are_over_commitment() {
        let objects = LiveObjects {
            nodes: vec![node("n1", 2)],
            podgroups: vec![podgroup("g", 2)],
            pods: vec![
                pod("g-0", "g", 2, Some("n1")),
                pod("g-1", "g", 2, Some("n1")),
            ],
            ..LiveObjects::default()
        };
        let binds = [bind("g-0", "n1"), bind("g-1", "n1")];
        let broken = check_invariants(&SchedulerConfig::default(), &objects, &binds);
        assert!(broken.partial.is_empty());
        let text = broken.lasting.join("\n");
        assert!(
            text.contains("pod ml/g-1 bound to n1: insufficient nvidia.com/gpu"),
            "{text}"
        );
        assert!(text.contains("node n1 is over-committed"), "{text}");
    }

    #[test]
    fn a_gang_bound_in_part_is_reported_only_for_new_binds() {
        let objects = LiveObjects {
            nodes: vec![node("n1", 8)],
            podgroups: vec![podgroup("g", 3)],
            pods: vec![
                pod("g-0", "g", 1, Some("n1")),
                pod("g-1", "g", 1, None),
                pod("g-2", "g", 1, None),
            ],
            ..LiveObjects::default()
        };
        let config = SchedulerConfig::default();
        let broken = check_invariants(&config, &objects, &[bind("g-0", "n1")]);
        assert_eq!(broken.partial.len(), 1, "{broken:?}");
        assert!(broken.partial[0].starts_with("podgroup ml/g is bound in part"));
        assert!(check_invariants(&config, &objects, &[]).is_empty());
    }

    #[test]
    fn a_bind_onto_a_tainted_node_breaks_a_predicate() {
        let mut tainted = node("n1", 8);
        tainted.spec = Some(
            serde_json::from_value(
                json!({"taints": [{"key": "dedicated", "effect": "NoSchedule"}]}),
            )
            .unwrap(),
        );
        let objects = LiveObjects {
            nodes: vec![tainted],
            podgroups: vec![podgroup("g", 1)],
            pods: vec![pod("g-0", "g", 1, Some("n1"))],
            ..LiveObjects::default()
        };
        let broken = check_invariants(&SchedulerConfig::default(), &objects, &[bind("g-0", "n1")]);
        assert!(
            broken.lasting.iter().any(|l| l.contains("taint dedicated")),
            "{broken:?}"
        );
    }

    #[test]
    fn a_podgroup_that_does_not_decode_is_skipped_and_named() {
        let mut bad = podgroup("bad", 1);
        bad["spec"]["minMember"] = json!("two");
        let objects = LiveObjects {
            podgroups: vec![bad, podgroup("good", 1)],
            ..LiveObjects::default()
        };
        let view = View::new(&SchedulerConfig::default(), &objects);
        assert_eq!(view.skipped.len(), 1, "{:?}", view.skipped);
        assert!(view.skipped[0].starts_with("PodGroup ml/bad"));
        assert!(view.simulation().store().podgroup("ml", "good").is_some());
    }
}
