//! PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes: their conversion,
//! and how a pending pod's claims resolve into what they ask of a node.
//!
//! The rules are kube-scheduler 1.36's (VolumeBinding's PreFilter and Filter, VolumeRestrictions
//! for `ReadWriteOncePod`, NodeVolumeLimits for CSI attach limits), with its messages. A claim
//! is *fully bound* when `spec.volumeName` is set and it carries
//! `pv.kubernetes.io/bind-completed` (the PV controller's mark); a pod is bound only once all
//! its claims are.

use crate::convert::PodInfo;
use crate::error::{ObjectKind, Problem, Result};
use crate::fields::{label_selector, selector_term, Ctx, PodClaims};
use caldera_model::volume::{access, PV_NOT_EXIST, SELECTED_AT, SELECTED_NODE, UNBOUND_IMMEDIATE};
use caldera_model::{
    parse_quantity, ClaimNeed, LabelSelector, NodeAttach, Requirement, Scale, SelectorOp,
    SelectorTerm, TaskVolumes, Time, Volume, VolumeCatalog, VolumeNeeds,
};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The PV controller's mark on a claim whose binding is complete.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// The provisioner name of classes that never provision (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The annotation that named a claim's class before `spec.storageClassName`.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// A claim, as far as scheduling needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimInfo {
    /// `metadata.uid`.
    pub uid: Arc<str>,
    /// The storage class (`spec.storageClassName`, or the beta annotation; empty for none).
    pub class: Arc<str>,
    /// `spec.volumeName`.
    pub volume: Option<Arc<str>>,
    /// Carries `pv.kubernetes.io/bind-completed`.
    pub bind_completed: bool,
    /// `status.phase: Lost`.
    pub lost: bool,
    /// Being deleted.
    pub deleting: bool,
    /// `spec.resources.requests.storage` in bytes.
    pub size: i64,
    /// `spec.accessModes`.
    pub modes: u8,
    /// `spec.volumeMode: Block`.
    pub block: bool,
    /// `spec.selector`.
    pub selector: Option<LabelSelector>,
    /// `volume.kubernetes.io/selected-node`.
    pub selected_node: Option<Arc<str>>,
    /// Caldera's [`SELECTED_AT`].
    pub selected_at: Option<Time>,
    /// The uid of its controller (a pod, for a generic ephemeral volume's claim).
    pub owner: Option<Arc<str>>,
}

impl ClaimInfo {
    fn fully_bound(&self) -> bool {
        self.volume.is_some() && self.bind_completed
    }
}

/// A volume, as far as scheduling needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    /// Converted for matching.
    pub volume: Volume,
    /// `spec.claimRef`: namespace, name, uid (empty when unset).
    pub claim_ref: Option<(Arc<str>, Arc<str>, Arc<str>)>,
    /// Being deleted, or phase Released/Failed: not available.
    pub unavailable: bool,
    /// `spec.csi`: driver and volume handle.
    pub csi: Option<(Arc<str>, Arc<str>)>,
    /// Caldera's [`SELECTED_AT`] (it pre-bound the volume).
    pub selected_at: Option<Time>,
}

/// A storage class, as far as scheduling needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassInfo {
    /// `provisioner`.
    pub provisioner: Arc<str>,
    /// `volumeBindingMode: WaitForFirstConsumer`.
    pub wait_for_consumer: bool,
    /// `allowedTopologies` as node selector terms (`None`: any node).
    pub allowed: Option<Vec<SelectorTerm>>,
}

fn storage(ctx: &Ctx, field: &str, q: Option<&Quantity>) -> Result<i64> {
    q.map(|q| parse_quantity(&q.0, Scale::Units).map_err(|e| ctx.err(field, e)))
        .transpose()
        .map(|v| v.unwrap_or(0))
}

fn modes(list: Option<&Vec<String>>) -> u8 {
    list.into_iter()
        .flatten()
        .fold(0, |m, s| m | access::parse(s))
}

fn annotation<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// Converts a PersistentVolumeClaim.
pub fn claim(pvc: &PersistentVolumeClaim) -> Result<ClaimInfo> {
    let meta = &pvc.metadata;
    let ctx = Ctx::new(ObjectKind::PersistentVolumeClaim, meta);
    let name = ctx.name(meta)?;
    let spec = pvc.spec.clone().unwrap_or_default();
    let class = spec
        .storage_class_name
        .as_deref()
        .or_else(|| annotation(meta, BETA_CLASS))
        .unwrap_or_default();
    let size = storage(
        &ctx,
        "spec.resources.requests.storage",
        spec.resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage")),
    )?;
    let selector = spec
        .selector
        .as_ref()
        .map(|s| label_selector(&ctx, "spec.selector", s, Vec::new()))
        .transpose()?;
    Ok(ClaimInfo {
        uid: meta.uid.as_deref().map(Arc::from).unwrap_or_else(|| {
            format!("{}/{name}", meta.namespace.as_deref().unwrap_or("default")).into()
        }),
        class: class.into(),
        volume: spec
            .volume_name
            .as_deref()
            .filter(|v| !v.is_empty())
            .map(Arc::from),
        bind_completed: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(BIND_COMPLETED)),
        lost: pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost"),
        deleting: meta.deletion_timestamp.is_some(),
        size,
        modes: modes(spec.access_modes.as_ref()),
        block: spec.volume_mode.as_deref() == Some("Block"),
        selector,
        selected_node: annotation(meta, SELECTED_NODE).map(Arc::from),
        selected_at: annotation(meta, SELECTED_AT).and_then(Time::parse_rfc3339),
        owner: meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| Arc::from(o.uid.as_str())),
    })
}

/// Converts a PersistentVolume.
pub fn volume(pv: &PersistentVolume) -> Result<VolumeInfo> {
    let meta = &pv.metadata;
    let ctx = Ctx::new(ObjectKind::PersistentVolume, meta);
    let name = ctx.name(meta)?;
    let spec = pv.spec.clone().unwrap_or_default();
    let size = storage(
        &ctx,
        "spec.capacity.storage",
        spec.capacity.as_ref().and_then(|c| c.get("storage")),
    )?;
    let field = "spec.nodeAffinity.required.nodeSelectorTerms";
    let terms = spec
        .node_affinity
        .as_ref()
        .and_then(|a| a.required.as_ref())
        .map(|r| {
            r.node_selector_terms
                .iter()
                .enumerate()
                .map(|(i, t)| selector_term(&ctx, &format!("{field}[{i}]"), t))
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    let claim_ref = spec.claim_ref.as_ref().and_then(|r| {
        let name = r.name.as_deref().filter(|n| !n.is_empty())?;
        Some((
            Arc::from(r.namespace.as_deref().unwrap_or("default")),
            Arc::from(name),
            Arc::from(r.uid.as_deref().unwrap_or_default()),
        ))
    });
    let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref());
    Ok(VolumeInfo {
        volume: Volume {
            name: name.into(),
            class: spec
                .storage_class_name
                .as_deref()
                .unwrap_or_default()
                .into(),
            size,
            modes: modes(spec.access_modes.as_ref()),
            block: spec.volume_mode.as_deref() == Some("Block"),
            labels: meta.labels.clone().unwrap_or_default(),
            terms,
            claim_ref: claim_ref
                .as_ref()
                .map(|(ns, n, _)| Arc::from(format!("{ns}/{n}"))),
        },
        claim_ref,
        unavailable: meta.deletion_timestamp.is_some()
            || matches!(phase, Some("Released") | Some("Failed")),
        csi: spec.csi.as_ref().map(|c| {
            (
                Arc::from(c.driver.as_str()),
                Arc::from(c.volume_handle.as_str()),
            )
        }),
        selected_at: annotation(meta, SELECTED_AT).and_then(Time::parse_rfc3339),
    })
}

/// Converts a StorageClass.
pub fn class(sc: &StorageClass) -> Result<ClassInfo> {
    let meta = &sc.metadata;
    let ctx = Ctx::new(ObjectKind::StorageClass, meta);
    ctx.name(meta)?;
    let allowed: Vec<SelectorTerm> = sc
        .allowed_topologies
        .iter()
        .flatten()
        .map(|t| SelectorTerm {
            expressions: t
                .match_label_expressions
                .iter()
                .flatten()
                .map(|r| Requirement {
                    key: r.key.clone(),
                    op: SelectorOp::In,
                    values: r.values.clone(),
                })
                .collect(),
            fields: Vec::new(),
        })
        .collect();
    let wait_for_consumer = match sc.volume_binding_mode.as_deref() {
        None | Some("") | Some("Immediate") => false,
        Some("WaitForFirstConsumer") => true,
        Some(other) => {
            return Err(ctx.err(
                "volumeBindingMode",
                Problem::UnknownValue {
                    value: other.to_string(),
                    expected: "Immediate, WaitForFirstConsumer",
                },
            ))
        }
    };
    Ok(ClassInfo {
        provisioner: sc.provisioner.as_str().into(),
        wait_for_consumer,
        allowed: (!allowed.is_empty()).then_some(allowed),
    })
}

/// A CSINode's attach limits: driver → `allocatable.count` (drivers without a count have no
/// limit).
pub fn csinode_limits(n: &CSINode) -> BTreeMap<Arc<str>, u32> {
    n.spec
        .drivers
        .iter()
        .filter_map(|d| {
            let count = d.allocatable.as_ref()?.count?;
            Some((Arc::from(d.name.as_str()), count.max(0) as u32))
        })
        .collect()
}

type Key = (Arc<str>, Arc<str>);
/// A claim's name and uid.
type ClaimId = (Arc<str>, Arc<str>);
/// Volume handles by driver.
type Handles = BTreeMap<Arc<str>, Vec<Arc<str>>>;

/// The converted storage objects, and which pods on nodes use which claims.
#[derive(Debug, Default)]
pub(crate) struct VolumeIndex {
    pub(crate) claims: BTreeMap<Key, ClaimInfo>,
    pub(crate) volumes: BTreeMap<Arc<str>, VolumeInfo>,
    pub(crate) classes: BTreeMap<Arc<str>, ClassInfo>,
    pub(crate) csinodes: BTreeMap<Arc<str>, BTreeMap<Arc<str>, u32>>,
    /// Pods on nodes that use claims: (namespace, pod) → (node, claim names).
    pub(crate) users: BTreeMap<Key, (Arc<str>, PodClaims)>,
    /// A claim as last watched, while a volume write to it is assumed and not yet watched.
    pub(crate) watched_claims: BTreeMap<Key, ClaimInfo>,
    /// A volume as last watched, while a pre-bind of it is assumed and not yet watched.
    pub(crate) watched_volumes: BTreeMap<Arc<str>, VolumeInfo>,
}

impl VolumeIndex {
    /// The claim a volume write is assumed on, its watched version kept first.
    pub(crate) fn assumed_claim(
        &mut self,
        namespace: &Arc<str>,
        name: &Arc<str>,
    ) -> Option<&mut ClaimInfo> {
        let key = (namespace.clone(), name.clone());
        let c = self.claims.get_mut(&key)?;
        self.watched_claims.entry(key).or_insert_with(|| c.clone());
        Some(c)
    }

    /// The volume a pre-bind is assumed on, its watched version kept first.
    pub(crate) fn assumed_volume(&mut self, name: &Arc<str>) -> Option<&mut VolumeInfo> {
        let v = self.volumes.get_mut(name)?;
        self.watched_volumes
            .entry(name.clone())
            .or_insert_with(|| v.clone());
        Some(v)
    }

    /// Puts back the watched version of what a failed volume write was assumed on (nothing if
    /// the watch has delivered the object since).
    pub(crate) fn write_failed(&mut self, w: &caldera_model::VolumeWrite) {
        use caldera_model::VolumeWrite;
        match w {
            VolumeWrite::SelectNode {
                namespace, claim, ..
            }
            | VolumeWrite::Unselect { namespace, claim } => {
                let key = (namespace.clone(), claim.clone());
                if let Some(watched) = self.watched_claims.remove(&key) {
                    self.claims.insert(key, watched);
                }
            }
            VolumeWrite::PreBind { volume, .. } => {
                if let Some(watched) = self.watched_volumes.remove(volume) {
                    self.volumes.insert(volume.clone(), watched);
                }
            }
        }
    }

    /// Drivers with an attach limit on some node.
    fn limited_drivers(&self) -> BTreeSet<&Arc<str>> {
        self.csinodes.values().flat_map(|m| m.keys()).collect()
    }

    /// The volume pre-bound to claim `ns/name` (its claimRef names the claim, with its uid if
    /// the ref has one), while the claim is not bound.
    fn prebound(&self, ns: &str, name: &str, uid: &str) -> Option<&VolumeInfo> {
        self.volumes.values().find(|v| {
            !v.unavailable
                && v.claim_ref.as_ref().is_some_and(|(rns, rn, ru)| {
                    **rns == *ns && **rn == *name && (ru.is_empty() || **ru == *uid)
                })
        })
    }

    /// What pod `p`'s claims ask of a node, and their names and state. `None` when it mounts
    /// no claim.
    pub(crate) fn resolve(&self, p: &PodInfo) -> Option<(VolumeNeeds, TaskVolumes)> {
        if p.claims.is_empty() {
            return None;
        }
        let ns = &p.namespace;
        let mut needs = VolumeNeeds::default();
        let mut tv = TaskVolumes {
            all_bound: true,
            ..TaskVolumes::default()
        };
        // kube-scheduler's PreFilter: every claim must exist, not be lost or being deleted,
        // and (generic ephemeral) belong to the pod.
        let mut found: Vec<&ClaimInfo> = Vec::new();
        for (name, ephemeral) in p.claims.iter() {
            let Some(c) = self.claims.get(&(ns.clone(), name.clone())) else {
                needs.blocked = Some(if *ephemeral {
                    format!("waiting for ephemeral volume controller to create the persistentvolumeclaim {name:?}")
                } else {
                    format!("persistentvolumeclaim {name:?} not found")
                });
                tv.all_bound = false;
                return Some((needs, tv));
            };
            let problem = if c.lost {
                Some(format!(
                    "persistentvolumeclaim {name:?} bound to non-existent persistentvolume {:?}",
                    c.volume.as_deref().unwrap_or_default()
                ))
            } else if c.deleting {
                Some(format!("persistentvolumeclaim {name:?} is being deleted"))
            } else if *ephemeral && c.owner.as_deref() != Some(&*p.uid) {
                Some(format!(
                    "PVC {ns}/{name} was not created for pod {ns}/{} (pod is not owner)",
                    p.name
                ))
            } else {
                None
            };
            if let Some(problem) = problem {
                needs.blocked = Some(problem);
                tv.all_bound = false;
                return Some((needs, tv));
            }
            found.push(c);
        }
        let limited = self.limited_drivers();
        let mut unbound: Vec<(ClaimNeed, ClaimId)> = Vec::new();
        for ((name, _), c) in p.claims.iter().zip(found) {
            if c.modes & access::RWOP != 0 {
                needs.rwop.push(format!("{ns}/{name}").into());
            }
            if c.fully_bound() {
                let pv = c.volume.as_ref().and_then(|v| self.volumes.get(v));
                match pv {
                    None => needs.every_node = Some(PV_NOT_EXIST),
                    Some(pv) => {
                        if let Some(t) = &pv.volume.terms {
                            needs.bound_terms.push(t.clone());
                        }
                        if let Some((d, h)) = pv.csi.as_ref().filter(|(d, _)| limited.contains(d)) {
                            needs.attach.push((d.clone(), Some(h.clone())));
                        }
                    }
                }
                continue;
            }
            tv.all_bound = false;
            let class = self.classes.get(&c.class);
            if !class.is_some_and(|k| k.wait_for_consumer) || c.volume.is_some() {
                needs.blocked = Some(UNBOUND_IMMEDIATE.into());
                continue;
            }
            let class = class.cloned();
            let provisions = class
                .as_ref()
                .filter(|k| !k.provisioner.is_empty() && *k.provisioner != *NO_PROVISIONER);
            let prebound = self.prebound(ns, name, &c.uid);
            let at = c.selected_at.or(prebound.and_then(|v| v.selected_at));
            if let Some(at) = at {
                tv.selected_at = Some(tv.selected_at.map_or(at, |s: Time| s.min(at)));
            }
            if c.selected_at.is_some() && c.selected_node.is_none() && prebound.is_none() {
                tv.failed.push(name.clone());
            }
            let driver = provisions.map(|k| k.provisioner.clone());
            if let Some(d) = driver.as_ref().filter(|d| limited.contains(d)) {
                needs.attach.push((d.clone(), None));
            }
            unbound.push((
                ClaimNeed {
                    class: c.class.clone(),
                    size: c.size,
                    modes: c.modes,
                    block: c.block,
                    selector: c.selector.clone(),
                    provision: provisions.map(|k| k.allowed.clone()),
                    driver,
                    selected: c.selected_node.clone(),
                    prebound: prebound.map(|v| v.volume.name.clone()),
                },
                (name.clone(), c.uid.clone()),
            ));
        }
        if needs.blocked.is_some() {
            return Some((needs, tv));
        }
        // kube-scheduler matches unbound claims smallest first.
        unbound.sort_by_key(|(c, _)| c.size);
        for (need, names) in unbound {
            needs.claims.push(need);
            tv.claims.push(names);
        }
        needs.rwop.sort();
        needs.attach.sort();
        Some((needs, tv))
    }

    /// What claim `ns/name` of a pod on a node counts as against CSI attach limits (driver,
    /// volume handle), as kube-scheduler's NodeVolumeLimits counts it: its volume's CSI driver
    /// and handle; or, when it names no volume or its volume does not exist, its class's
    /// provisioner with a handle of its own (a volume still to be provisioned or bound counts
    /// once, however many pods use the claim); nothing for a claim without a class or a
    /// non-CSI volume.
    fn attached_as(&self, ns: &str, name: &str, c: &ClaimInfo) -> Option<(Arc<str>, Arc<str>)> {
        match c.volume.as_ref().and_then(|v| self.volumes.get(v)) {
            Some(v) => v.csi.clone(),
            None => {
                let class = self.classes.get(&c.class)?;
                (!class.provisioner.is_empty()).then(|| {
                    (
                        class.provisioner.clone(),
                        Arc::from(format!("pending claim {ns}/{name}")),
                    )
                })
            }
        }
    }

    /// The volumes `WaitForFirstConsumer` claims may take, the `ReadWriteOncePod` claims in use
    /// and the attach limits with what is attached per node.
    pub(crate) fn catalog(&self) -> VolumeCatalog {
        let mut volumes: Vec<Volume> = self
            .volumes
            .values()
            .filter(|v| !v.unavailable)
            .filter(|v| match &v.claim_ref {
                None => true,
                // Pre-bound to a claim that is not bound yet.
                Some((ns, n, _)) => self
                    .claims
                    .get(&(ns.clone(), n.clone()))
                    .is_some_and(|c| c.volume.as_deref() != Some(&*v.volume.name)),
            })
            .map(|v| v.volume.clone())
            .collect();
        volumes.sort_by(|a, b| (&a.class, a.size, &a.name).cmp(&(&b.class, b.size, &b.name)));
        let mut rwop_in_use = Vec::new();
        let mut attached: HashMap<&Arc<str>, Handles> = HashMap::new();
        for ((ns, _), (node, claims)) in &self.users {
            for (name, _) in claims.iter() {
                let Some(c) = self.claims.get(&(ns.clone(), name.clone())) else {
                    continue;
                };
                if c.modes & access::RWOP != 0 {
                    rwop_in_use.push(Arc::from(format!("{ns}/{name}")));
                }
                if !self.csinodes.contains_key(node) {
                    continue;
                }
                if let Some((driver, handle)) = self.attached_as(ns, name, c) {
                    let list = attached.entry(node).or_default().entry(driver).or_default();
                    if !list.contains(&handle) {
                        list.push(handle);
                    }
                }
            }
        }
        rwop_in_use.sort();
        let attach = self
            .csinodes
            .iter()
            .filter(|(_, limits)| !limits.is_empty())
            .map(|(node, limits)| {
                (
                    node.clone(),
                    NodeAttach {
                        limits: limits.clone(),
                        attached: attached.remove(node).unwrap_or_default(),
                    },
                )
            })
            .collect();
        VolumeCatalog {
            volumes,
            rwop_in_use,
            attach,
            left_to_kube_scheduler: false,
        }
    }
}

/// The time a claim's selection was recorded, as written in [`SELECTED_AT`].
pub fn selected_at_value(t: Time) -> String {
    t.to_rfc3339()
}

#[cfg(test)]
mod tests {
    use crate::{ClusterIndex, SnapshotOptions};
    use caldera_model::volume::{access, PV_NOT_EXIST, UNBOUND_IMMEDIATE};
    use caldera_model::{Snapshot, Task, Time};
    use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
    use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
    use serde_json::{json, Value};

    fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("test object")
    }

    fn node(name: &str) -> Node {
        obj(
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "8", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}),
        )
    }

    fn pod(name: &str, volumes: Value, node: Option<&str>) -> Pod {
        obj(
            json!({"metadata": {"namespace": "default", "name": name, "uid": format!("uid-{name}")},
            "spec": {"schedulerName": "caldera", "nodeName": node,
                     "containers": [{"name": "main"}], "volumes": volumes}}),
        )
    }

    fn claim_vol(claim: &str) -> Value {
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])
    }

    fn pvc(name: &str, class: &str, extra: Value) -> PersistentVolumeClaim {
        let mut v = json!({"metadata": {"namespace": "default", "name": name, "uid": format!("uid-{name}")},
            "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "5Gi"}}}});
        merge(&mut v, extra);
        obj(v)
    }

    fn merge(base: &mut Value, patch: Value) {
        match (base, patch) {
            (Value::Object(b), Value::Object(p)) => {
                for (k, v) in p {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
            (b, p) => *b = p,
        }
    }

    fn class(name: &str, provisioner: &str, mode: &str) -> StorageClass {
        obj(
            json!({"metadata": {"name": name}, "provisioner": provisioner,
            "volumeBindingMode": mode}),
        )
    }

    fn pv(name: &str, class: &str, node: &str, extra: Value) -> PersistentVolume {
        let mut v = json!({"metadata": {"name": name},
            "spec": {"storageClassName": class, "capacity": {"storage": "10Gi"},
                     "accessModes": ["ReadWriteOnce"],
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}});
        merge(&mut v, extra);
        obj(v)
    }

    fn snap(index: &ClusterIndex) -> Snapshot {
        index.snapshot(&SnapshotOptions::default())
    }

    fn task<'a>(s: &'a Snapshot, name: &str) -> &'a Task {
        s.tasks.iter().find(|t| &*t.name == name).expect("task")
    }

    #[test]
    fn missing_and_ephemeral_claims_block_with_kube_schedulers_messages() {
        let mut index = ClusterIndex::new();
        index.apply(&node("a")).unwrap();
        index.apply(&pod("p", claim_vol("data-p"), None)).unwrap();
        let eph = json!([{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]);
        index.apply(&pod("e", eph, None)).unwrap();
        let s = snap(&index);
        assert_eq!(
            task(&s, "p").spec.volumes.blocked.as_deref(),
            Some("persistentvolumeclaim \"data-p\" not found")
        );
        assert_eq!(
            task(&s, "e").spec.volumes.blocked.as_deref(),
            Some("waiting for ephemeral volume controller to create the persistentvolumeclaim \"e-scratch\"")
        );
        // Once the claim exists (owned by another pod): not the pod's.
        let owned = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
            "name": "other", "uid": "uid-other", "controller": true}]}});
        index.apply(&pvc("e-scratch", "fast", owned)).unwrap();
        index
            .apply(&class("fast", "csi.x", "WaitForFirstConsumer"))
            .unwrap();
        let s = snap(&index);
        assert!(task(&s, "e")
            .spec
            .volumes
            .blocked
            .as_deref()
            .is_some_and(|m| m.contains("(pod is not owner)")));
    }

    #[test]
    fn an_unbound_immediate_claim_blocks_and_a_bound_one_pins_to_its_volume() {
        let mut index = ClusterIndex::new();
        index.apply(&node("a")).unwrap();
        index.apply(&pod("p", claim_vol("c"), None)).unwrap();
        index.apply(&class("std", "csi.x", "Immediate")).unwrap();
        index.apply(&pvc("c", "std", json!({}))).unwrap();
        let s = snap(&index);
        assert_eq!(
            task(&s, "p").spec.volumes.blocked.as_deref(),
            Some(UNBOUND_IMMEDIATE)
        );
        assert!(!task(&s, "p").volumes_bound());
        // Bound by the PV controller (volumeName and bind-completed): pinned to the volume.
        let bound = json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"volumeName": "pv-a"}});
        index.apply(&pvc("c", "std", bound)).unwrap();
        let s = snap(&index);
        assert_eq!(task(&s, "p").spec.volumes.every_node, Some(PV_NOT_EXIST));
        index.apply(&pv("pv-a", "std", "a", json!({}))).unwrap();
        let s = snap(&index);
        let t = task(&s, "p");
        assert!(t.volumes_bound());
        assert_eq!(t.spec.volumes.blocked, None);
        assert_eq!(t.spec.volumes.bound_terms.len(), 1);
        let mut labels = std::collections::BTreeMap::new();
        labels.insert("kubernetes.io/hostname".to_string(), "a".to_string());
        assert!(t.spec.volumes.bound_terms[0][0].matches("a", &labels));
        labels.insert("kubernetes.io/hostname".to_string(), "b".to_string());
        assert!(!t.spec.volumes.bound_terms[0][0].matches("b", &labels));
    }

    #[test]
    fn a_wait_for_first_consumer_claim_resolves_to_its_candidates() {
        let mut index = ClusterIndex::new();
        index.apply(&node("a")).unwrap();
        index.apply(&node("b")).unwrap();
        index
            .apply(&class(
                "local",
                super::NO_PROVISIONER,
                "WaitForFirstConsumer",
            ))
            .unwrap();
        index.apply(&pod("p", claim_vol("c"), None)).unwrap();
        index.apply(&pvc("c", "local", json!({}))).unwrap();
        index.apply(&pv("free", "local", "b", json!({}))).unwrap();
        let taken = json!({"spec": {"claimRef": {"namespace": "default", "name": "other"}}});
        index.apply(&pv("taken", "local", "a", taken)).unwrap();
        index
            .apply(&pvc(
                "other",
                "local",
                json!({"spec": {"volumeName": "taken"},
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}}),
            ))
            .unwrap();
        let s = snap(&index);
        let t = task(&s, "p");
        assert_eq!(t.spec.volumes.claims.len(), 1);
        let c = &t.spec.volumes.claims[0];
        assert_eq!(c.provision, None, "no-provisioner classes never provision");
        assert_eq!(c.size, 5 << 30);
        assert_eq!(c.modes, access::RWO);
        let names: Vec<&str> = s.volumes.volumes.iter().map(|v| &*v.name).collect();
        assert_eq!(
            names,
            vec!["free"],
            "a volume bound to another claim is not a candidate"
        );
        // Annotated by Caldera with a node, then that annotation removed by a provisioner:
        // the choice failed.
        let at = Time::from_secs(100).to_rfc3339();
        let sel = json!({"metadata": {"annotations": {
            "volume.kubernetes.io/selected-node": "b", super::SELECTED_AT: at.clone()}}});
        index.apply(&pvc("c", "local", sel)).unwrap();
        let s = snap(&index);
        let t = task(&s, "p");
        assert_eq!(t.spec.volumes.claims[0].selected.as_deref(), Some("b"));
        assert_eq!(
            t.volumes.as_ref().unwrap().selected_at,
            Some(Time::from_secs(100))
        );
        let lost = json!({"metadata": {"annotations": {super::SELECTED_AT: at}}});
        index.apply(&pvc("c", "local", lost)).unwrap();
        let s = snap(&index);
        assert_eq!(
            task(&s, "p").volumes.as_ref().unwrap().failed,
            vec!["c".into()]
        );
    }

    #[test]
    fn claims_in_use_count_for_read_write_once_pod_and_attach_limits() {
        let mut index = ClusterIndex::new();
        index.apply(&node("a")).unwrap();
        index.apply(&class("std", "ebs.csi", "Immediate")).unwrap();
        let bound = |pv: &str| {
            json!({"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
                "spec": {"volumeName": pv, "accessModes": ["ReadWriteOncePod"]}})
        };
        index.apply(&pvc("c", "std", bound("pv-c"))).unwrap();
        let csi = json!({"spec": {"csi": {"driver": "ebs.csi", "volumeHandle": "vol-c"}}});
        index.apply(&pv("pv-c", "std", "a", csi)).unwrap();
        index
            .apply(&pod("user", claim_vol("c"), Some("a")))
            .unwrap();
        index.apply(&pod("next", claim_vol("c"), None)).unwrap();
        let limits: CSINode = obj(json!({"metadata": {"name": "a"}, "spec": {"drivers": [
            {"name": "ebs.csi", "nodeID": "a", "allocatable": {"count": 1}}]}}));
        index.apply(&limits).unwrap();
        let s = snap(&index);
        assert_eq!(s.volumes.rwop_in_use, vec!["default/c".into()]);
        let t = task(&s, "next");
        assert_eq!(t.spec.volumes.rwop, vec!["default/c".into()]);
        assert_eq!(
            t.spec.volumes.attach,
            vec![("ebs.csi".into(), Some("vol-c".into()))]
        );
        let a = &s.volumes.attach["a"];
        assert_eq!(a.limits["ebs.csi"], 1);
        assert_eq!(a.attached["ebs.csi"], vec!["vol-c".into()]);
        // The user goes: the claim is free again.
        index.delete::<Pod>(("default", "user"));
        assert!(snap(&index).volumes.rwop_in_use.is_empty());
    }

    #[test]
    fn claims_without_a_volume_count_against_attach_limits_by_their_class() {
        // kube-scheduler's NodeVolumeLimits: a pod's claim that names no volume, or one that
        // does not exist, counts under its class's provisioner, once however many pods use it;
        // a claim without a class does not count.
        let mut index = ClusterIndex::new();
        index.apply(&node("a")).unwrap();
        index
            .apply(&class("csi-sc", "ebs.csi", "WaitForFirstConsumer"))
            .unwrap();
        index.apply(&pvc("pending", "csi-sc", json!({}))).unwrap();
        let missing = json!({"spec": {"volumeName": "missing-in-action"}});
        index.apply(&pvc("lost-pv", "csi-sc", missing)).unwrap();
        index.apply(&pvc("no-class", "", json!({}))).unwrap();
        for (pod_name, claim) in [
            ("p1", "pending"),
            ("p2", "pending"),
            ("p3", "lost-pv"),
            ("p4", "no-class"),
        ] {
            index
                .apply(&pod(pod_name, claim_vol(claim), Some("a")))
                .unwrap();
        }
        // A pending pod with a claim: the snapshot carries the volume catalog.
        index
            .apply(&pod("next", claim_vol("pending"), None))
            .unwrap();
        let limits: CSINode = obj(json!({"metadata": {"name": "a"}, "spec": {"drivers": [
            {"name": "ebs.csi", "nodeID": "a", "allocatable": {"count": 2}}]}}));
        index.apply(&limits).unwrap();
        let s = snap(&index);
        let attached = &s.volumes.attach["a"].attached["ebs.csi"];
        assert_eq!(attached.len(), 2, "{attached:?}");
        assert!(attached.iter().any(|h| h.contains("default/pending")));
        assert!(attached.iter().any(|h| h.contains("default/lost-pv")));
    }
}
