//! The PersistentVolume controller of kube-controller-manager (`persistentvolume` binder), as
//! far as a scheduler can tell: which claims and volumes become Bound to each other, and the
//! phases both go through. Plus what kube-apiserver fills in when either is created.
//!
//! The rules follow `pkg/controller/volume/persistentvolume/pv_controller.go` (`syncClaim`,
//! `syncVolume`, `bind`) and `component-helpers/storage/volume` (`FindMatchingVolume`):
//!
//! - A claim that names a volume (`spec.volumeName`) is bound to it when the volume is free and
//!   satisfies the claim (size, class, volume mode, access modes), or when the volume's
//!   `claimRef` already points at the claim. Otherwise the claim stays `Pending`.
//! - A claim that names none is matched to the best available volume: one pre-bound to it by
//!   `claimRef` (name, namespace, and uid when set), else the smallest `Available` volume of the
//!   claim's class whose capacity, access modes, volume mode, volume attributes class and the
//!   claim's `selector` fit, preferring volumes with the fewest extra access modes. For a class
//!   in `WaitForFirstConsumer` mode only a pre-bound volume is taken: binding any other is the
//!   scheduler's decision (it pre-binds by `claimRef` or annotates
//!   `volume.kubernetes.io/selected-node`).
//! - Binding writes what the controller writes: the volume's `claimRef` (with the claim's uid
//!   and resourceVersion), `pv.kubernetes.io/bound-by-controller` on the volume when the
//!   controller chose it and on the claim when the controller set `volumeName`,
//!   `pv.kubernetes.io/bind-completed` on the claim, phase `Bound` on both, and the volume's
//!   access modes and capacity in the claim's status.
//! - A bound claim whose volume is gone, or bound elsewhere, is `Lost`; a volume whose claim is
//!   gone is `Released` (nothing reclaims it here); a volume the controller bound to a claim that
//!   went to another volume is unbound again.
//! - Nothing provisions volumes. A claim that would be provisioned (its class has a provisioner
//!   other than `kubernetes.io/no-provisioner`, and binding is immediate or the scheduler has
//!   selected a node) gets the `volume.kubernetes.io/storage-provisioner` annotations an external
//!   provisioner waits for, and stays `Pending` until a volume appears (created by whoever plays
//!   the provisioner) that it can bind to.
//!
//! Events the real controller emits are not modelled. Everything here is a pure function of the
//! objects and the time, so the simulator and the API stand-in run the same rules.

use std::collections::{BTreeMap, BTreeSet};

use caldera_model::quantity::{parse_quantity, Scale};
use caldera_model::Time;
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus,
    PersistentVolumeStatus,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::meta::{name, namespace};
use crate::time::to_kube;

/// Claim annotation: binding has been completed once (`pv.kubernetes.io/bind-completed`).
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Volume and claim annotation: the controller made the binding, not the user.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// Claim annotation written by a scheduler to have the claim provisioned for a node.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Claim annotation naming the provisioner expected to create its volume.
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// The deprecated spelling of [`STORAGE_PROVISIONER`], still written by the controller.
pub const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// Volume annotation: dynamically provisioned by this provisioner.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The provisioner of classes that are never provisioned (local volumes made by hand).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";
/// The deprecated claim annotation naming its class (still honoured before `storageClassName`).
pub const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// StorageClass annotation marking the cluster's default class.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// The deprecated spelling of [`DEFAULT_CLASS`].
pub const BETA_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";

/// An object the controller writes back, in its new, whole form (metadata annotations, spec and
/// status as they are after the controller's updates).
// Not boxed: a sync writes a handful of objects, each moved once into a store.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A claim changed.
    Claim(PersistentVolumeClaim),
    /// A volume changed.
    Volume(PersistentVolume),
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    annotation(meta, key).is_some()
}

fn set_annotation(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(key.to_string(), value.to_string());
}

fn remove_annotation(meta: &mut ObjectMeta, key: &str) {
    if let Some(a) = meta.annotations.as_mut() {
        a.remove(key);
        if a.is_empty() {
            meta.annotations = None;
        }
    }
}

/// The class a claim asks for (`GetPersistentVolumeClaimClass`): the beta annotation, else
/// `spec.storageClassName`, else `""` (no class).
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(c) = annotation(&claim.metadata, BETA_STORAGE_CLASS) {
        return c;
    }
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// Whether the claim states a class at all (an empty `storageClassName` counts: it asks for
/// volumes without a class).
fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    has_annotation(&claim.metadata, BETA_STORAGE_CLASS)
        || claim
            .spec
            .as_ref()
            .is_some_and(|s| s.storage_class_name.is_some())
}

/// The class of a volume (`GetPersistentVolumeClass`): the beta annotation, else
/// `spec.storageClassName`, else `""`.
pub fn volume_class(volume: &PersistentVolume) -> &str {
    if let Some(c) = annotation(&volume.metadata, BETA_STORAGE_CLASS) {
        return c;
    }
    volume
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        .unwrap_or("")
}

/// Whether a class delays binding until a pod uses the claim (`WaitForFirstConsumer`).
pub fn waits_for_first_consumer(class: &StorageClass) -> bool {
    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

/// The cluster's default StorageClass, as the DefaultStorageClass admission plugin and the
/// controller pick it: among classes annotated default, the most recently created (then by
/// name, as kube-apiserver breaks ties).
pub fn default_class(classes: &[StorageClass]) -> Option<&StorageClass> {
    classes
        .iter()
        .filter(|c| {
            [DEFAULT_CLASS, BETA_DEFAULT_CLASS]
                .iter()
                .any(|k| annotation(&c.metadata, k) == Some("true"))
        })
        .max_by(|a, b| {
            let time = |c: &StorageClass| c.metadata.creation_timestamp.clone();
            time(a)
                .cmp(&time(b))
                .then_with(|| name(&b.metadata).cmp(name(&a.metadata)))
        })
}

/// What kube-apiserver does to a claim being created: the DefaultStorageClass admission plugin
/// gives a claim that names no class the default one; defaulting sets `volumeMode: Filesystem`
/// and phase `Pending`.
pub fn admit_claim(claim: &mut PersistentVolumeClaim, classes: &[StorageClass]) {
    let default = (!claim_has_class(claim))
        .then(|| default_class(classes))
        .flatten()
        .and_then(|c| c.metadata.name.clone());
    let spec = claim.spec.get_or_insert_with(Default::default);
    if let Some(class) = default {
        spec.storage_class_name = Some(class);
    }
    if spec.volume_mode.is_none() {
        spec.volume_mode = Some("Filesystem".into());
    }
    let status = claim.status.get_or_insert_with(Default::default);
    if status.phase.is_none() {
        status.phase = Some("Pending".into());
    }
}

/// What kube-apiserver does to a volume being created: `volumeMode: Filesystem` and reclaim
/// policy `Retain` when unset, and status phase `Pending` since `now` (the controller then makes
/// it `Available` or `Bound`).
pub fn admit_volume(volume: &mut PersistentVolume, now: Time) {
    let spec = volume.spec.get_or_insert_with(Default::default);
    if spec.volume_mode.is_none() {
        spec.volume_mode = Some("Filesystem".into());
    }
    if spec.persistent_volume_reclaim_policy.is_none() {
        spec.persistent_volume_reclaim_policy = Some("Retain".into());
    }
    volume.status = Some(PersistentVolumeStatus {
        phase: Some("Pending".into()),
        last_phase_transition_time: to_kube(now),
        ..Default::default()
    });
}

/// Whether `volume` is pre-bound or bound to `claim` (`IsVolumeBoundToClaim`): its `claimRef`
/// names the claim, and its uid when the reference carries one.
pub fn is_volume_bound_to_claim(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return false;
    };
    if r.name.as_deref() != Some(name(&claim.metadata))
        || r.namespace.as_deref().unwrap_or("default") != namespace(&claim.metadata)
    {
        return false;
    }
    match r.uid.as_deref().filter(|u| !u.is_empty()) {
        Some(uid) => claim.metadata.uid.as_deref() == Some(uid),
        None => true,
    }
}

/// The bytes a storage quantity stands for (`Quantity.Value()`); an absent or malformed one
/// counts as 0, as an absent map entry does in Go.
fn storage(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> i64 {
    map.and_then(|m| m.get("storage"))
        .and_then(|q| parse_quantity(&q.0, Scale::Units).ok())
        .unwrap_or(0)
}

/// The storage a claim requests.
pub fn requested(claim: &PersistentVolumeClaim) -> i64 {
    storage(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref()),
    )
}

/// The storage a volume holds.
pub fn capacity(volume: &PersistentVolume) -> i64 {
    storage(volume.spec.as_ref().and_then(|s| s.capacity.as_ref()))
}

fn claim_modes(claim: &PersistentVolumeClaim) -> &[String] {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default()
}

fn volume_modes(volume: &PersistentVolume) -> &[String] {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.access_modes.as_deref())
        .unwrap_or_default()
}

/// Whether the volume offers every access mode the claim asks for (`CheckAccessModes`).
pub fn access_modes_fit(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let offered = volume_modes(volume);
    claim_modes(claim).iter().all(|m| offered.contains(m))
}

/// Whether claim and volume differ in `volumeMode` (unset means `Filesystem`).
pub fn volume_mode_mismatch(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let c = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
    let v = volume.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
    c.unwrap_or("Filesystem") != v.unwrap_or("Filesystem")
}

fn attributes_class_mismatch(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    let c = claim
        .spec
        .as_ref()
        .and_then(|s| s.volume_attributes_class_name.as_deref());
    let v = volume
        .spec
        .as_ref()
        .and_then(|s| s.volume_attributes_class_name.as_deref());
    c.unwrap_or("") != v.unwrap_or("")
}

fn volume_phase(volume: &PersistentVolume) -> &str {
    volume
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Why `volume` cannot be bound to `claim` when the claim names it (`checkVolumeSatisfyClaim`),
/// in the controller's words; `None` when it can.
pub fn unsatisfied(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<String> {
    if volume.metadata.deletion_timestamp.is_some() {
        return Some(format!(
            "the volume is marked for deletion {:?}",
            name(&volume.metadata)
        ));
    }
    if capacity(volume) < requested(claim) {
        return Some("requested PV is too small".into());
    }
    if volume_class(volume) != claim_class(claim) {
        return Some("storageClassName does not match".into());
    }
    if volume_mode_mismatch(claim, volume) {
        return Some("incompatible volumeMode".into());
    }
    if !access_modes_fit(claim, volume) {
        return Some("incompatible accessMode".into());
    }
    None
}

/// The volume the controller binds an unbound claim without `volumeName` to
/// (`findBestMatchForClaim`): volumes offering the claim's access modes, grouped by their set of
/// modes, fewest modes first; in the first group with a match, a volume pre-bound to the claim,
/// else (unless `delay_binding`) the smallest available one that fits. Ties go by name.
pub fn find_best_match<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &[&'a PersistentVolume],
    delay_binding: bool,
) -> Option<&'a PersistentVolume> {
    let mut groups: BTreeMap<(usize, BTreeSet<&str>), Vec<&'a PersistentVolume>> = BTreeMap::new();
    for v in volumes
        .iter()
        .copied()
        .filter(|v| access_modes_fit(claim, v))
    {
        let modes: BTreeSet<&str> = volume_modes(v).iter().map(String::as_str).collect();
        groups.entry((modes.len(), modes)).or_default().push(v);
    }
    groups.into_values().find_map(|mut group| {
        group.sort_by(|a, b| name(&a.metadata).cmp(name(&b.metadata)));
        find_matching_volume(claim, &group, delay_binding)
    })
}

/// `FindMatchingVolume` on the controller's path (no node, nothing excluded).
fn find_matching_volume<'a>(
    claim: &PersistentVolumeClaim,
    volumes: &[&'a PersistentVolume],
    delay_binding: bool,
) -> Option<&'a PersistentVolume> {
    let wanted = requested(claim);
    let class = claim_class(claim);
    let selector = claim.spec.as_ref().and_then(|s| s.selector.as_ref());
    let mut best: Option<(&'a PersistentVolume, i64)> = None;
    for &v in volumes {
        let has_ref = v.spec.as_ref().is_some_and(|s| s.claim_ref.is_some());
        let bound_here = is_volume_bound_to_claim(v, claim);
        if has_ref && !bound_here {
            continue;
        }
        let size = capacity(v);
        if size < wanted
            || volume_mode_mismatch(claim, v)
            || attributes_class_mismatch(claim, v)
            || v.metadata.deletion_timestamp.is_some()
        {
            continue;
        }
        if bound_here {
            return Some(v);
        }
        if delay_binding {
            continue;
        }
        if volume_phase(v) != "Available"
            || selector
                .is_some_and(|s| !caldera_cache::labels::matches(s, v.metadata.labels.as_ref()))
            || volume_class(v) != class
        {
            continue;
        }
        if best.is_none_or(|(_, s)| s > size) {
            best = Some((v, size));
        }
    }
    best.map(|(v, _)| v)
}

type ClaimKey = (String, String);

fn claim_key(claim: &PersistentVolumeClaim) -> ClaimKey {
    (
        namespace(&claim.metadata).to_string(),
        name(&claim.metadata).to_string(),
    )
}

/// The controller's working copies, changed in place by the sync rules.
struct World<'a> {
    claims: BTreeMap<ClaimKey, PersistentVolumeClaim>,
    volumes: BTreeMap<String, PersistentVolume>,
    classes: &'a [StorageClass],
    now: Time,
}

impl World<'_> {
    fn class(&self, name: &str) -> Option<&StorageClass> {
        self.classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }

    /// Sets the volume's phase (and its transition time, as kube-apiserver does). Returns
    /// whether it changed.
    fn volume_phase(&mut self, volume: &str, phase: &str) -> bool {
        let now = self.now;
        let Some(v) = self.volumes.get_mut(volume) else {
            return false;
        };
        let status = v.status.get_or_insert_with(Default::default);
        if status.phase.as_deref() == Some(phase) {
            return false;
        }
        status.phase = Some(phase.to_string());
        status.message = None;
        status.last_phase_transition_time = to_kube(now);
        true
    }

    /// `updateClaimStatus`: the phase, and the volume's access modes and capacity when bound
    /// (capacity only as the claim becomes Bound), cleared otherwise.
    fn claim_status(&mut self, key: &ClaimKey, phase: &str, volume: Option<&str>) -> bool {
        let from = volume.and_then(|v| self.volumes.get(v)).cloned();
        let Some(c) = self.claims.get_mut(key) else {
            return false;
        };
        let before = c.status.clone();
        let status = c
            .status
            .get_or_insert_with(PersistentVolumeClaimStatus::default);
        let becoming = status.phase.as_deref() != Some(phase);
        status.phase = Some(phase.to_string());
        match from {
            None => {
                status.access_modes = None;
                status.capacity = None;
            }
            Some(v) => {
                let spec = v.spec.unwrap_or_default();
                status.access_modes = spec.access_modes;
                if becoming {
                    let wanted = spec.capacity.as_ref().and_then(|m| m.get("storage"));
                    let have = status.capacity.as_ref().and_then(|m| m.get("storage"));
                    if wanted.is_some() && wanted != have {
                        status.capacity = spec.capacity.clone();
                    }
                }
            }
        }
        c.status != before
    }

    /// `bind`: volume → claim reference and Bound, then claim → volume name and Bound.
    fn bind(&mut self, volume: &str, key: &ClaimKey) -> bool {
        let Some(claim) = self.claims.get(key).cloned() else {
            return false;
        };
        let mut changed = false;
        if let Some(v) = self.volumes.get_mut(volume) {
            let before = v.clone();
            let by_controller = !is_volume_bound_to_claim(v, &claim);
            let spec = v.spec.get_or_insert_with(Default::default);
            let same = spec.claim_ref.as_ref().is_some_and(|r| {
                r.name.as_deref() == Some(key.1.as_str())
                    && r.namespace.as_deref() == Some(key.0.as_str())
                    && r.uid == claim.metadata.uid
            });
            if !same {
                spec.claim_ref = Some(ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(key.0.clone()),
                    name: Some(key.1.clone()),
                    uid: claim.metadata.uid.clone(),
                    resource_version: claim.metadata.resource_version.clone(),
                    field_path: None,
                });
            }
            if by_controller && !has_annotation(&v.metadata, BOUND_BY_CONTROLLER) {
                set_annotation(&mut v.metadata, BOUND_BY_CONTROLLER, "yes");
            }
            changed |= *v != before;
        } else {
            return false;
        }
        changed |= self.volume_phase(volume, "Bound");
        if let Some(c) = self.claims.get_mut(key) {
            let before = c.clone();
            let spec = c.spec.get_or_insert_with(Default::default);
            if spec.volume_name.as_deref() != Some(volume) {
                spec.volume_name = Some(volume.to_string());
                if !has_annotation(&c.metadata, BOUND_BY_CONTROLLER) {
                    set_annotation(&mut c.metadata, BOUND_BY_CONTROLLER, "yes");
                }
            }
            if !has_annotation(&c.metadata, BIND_COMPLETED) {
                set_annotation(&mut c.metadata, BIND_COMPLETED, "yes");
            }
            changed |= *c != before;
        }
        changed |= self.claim_status(key, "Bound", Some(volume));
        changed
    }

    fn sync_claim(&mut self, key: &ClaimKey) -> bool {
        let Some(claim) = self.claims.get(key).cloned() else {
            return false;
        };
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .filter(|v| !v.is_empty());
        if has_annotation(&claim.metadata, BIND_COMPLETED) {
            return self.sync_bound_claim(key, &claim, volume_name);
        }
        let Some(wanted) = volume_name else {
            return self.sync_unbound_claim(key, &claim);
        };
        let Some(volume) = self.volumes.get(&wanted) else {
            return self.claim_status(key, "Pending", None);
        };
        let has_ref = volume.spec.as_ref().is_some_and(|s| s.claim_ref.is_some());
        if !has_ref {
            if unsatisfied(volume, &claim).is_some() {
                return self.claim_status(key, "Pending", None);
            }
            return self.bind(&wanted, key);
        }
        if is_volume_bound_to_claim(volume, &claim) {
            return self.bind(&wanted, key);
        }
        self.claim_status(key, "Pending", None)
    }

    fn sync_unbound_claim(&mut self, key: &ClaimKey, claim: &PersistentVolumeClaim) -> bool {
        let class = claim_class(claim).to_string();
        let delay = self.class(&class).is_some_and(waits_for_first_consumer);
        let found = {
            let volumes: Vec<&PersistentVolume> = self.volumes.values().collect();
            find_best_match(claim, &volumes, delay).and_then(|v| v.metadata.name.clone())
        };
        if let Some(volume) = found {
            return self.bind(&volume, key);
        }
        let mut changed = false;
        if !claim_has_class(claim) {
            // assignDefaultStorageClass: a claim created before any default class existed gets
            // it retroactively (then the next sync tries again with it).
            if let Some(default) = default_class(self.classes).and_then(|c| c.metadata.name.clone())
            {
                if let Some(c) = self.claims.get_mut(key) {
                    c.spec
                        .get_or_insert_with(Default::default)
                        .storage_class_name = Some(default);
                    return true;
                }
            }
        }
        let selected = has_annotation(&claim.metadata, SELECTED_NODE);
        let provisioner = self
            .class(&class)
            .map(|c| c.provisioner.clone())
            .filter(|p| p != NO_PROVISIONER && !p.is_empty());
        if let Some(p) = provisioner.filter(|_| !delay || selected) {
            if let Some(c) = self.claims.get_mut(key) {
                for k in [STORAGE_PROVISIONER, BETA_STORAGE_PROVISIONER] {
                    if annotation(&c.metadata, k) != Some(p.as_str()) {
                        set_annotation(&mut c.metadata, k, &p);
                        changed = true;
                    }
                }
            }
        }
        changed | self.claim_status(key, "Pending", None)
    }

    fn sync_bound_claim(
        &mut self,
        key: &ClaimKey,
        claim: &PersistentVolumeClaim,
        volume_name: Option<String>,
    ) -> bool {
        let Some(wanted) = volume_name else {
            return self.claim_status(key, "Lost", None);
        };
        let Some(volume) = self.volumes.get(&wanted) else {
            return self.claim_status(key, "Lost", None);
        };
        match volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
            None => self.bind(&wanted, key),
            Some(r) if r.uid.is_some() && r.uid == claim.metadata.uid => self.bind(&wanted, key),
            Some(_) => self.claim_status(key, "Lost", None),
        }
    }

    fn sync_volume(&mut self, volume_name: &str) -> bool {
        let Some(volume) = self.volumes.get(volume_name).cloned() else {
            return false;
        };
        let Some(r) = volume.spec.as_ref().and_then(|s| s.claim_ref.clone()) else {
            return self.volume_phase(volume_name, "Available");
        };
        let uid = r.uid.clone().filter(|u| !u.is_empty());
        let Some(uid) = uid else {
            // Pre-bound by the user; the claim's sync binds it.
            return self.volume_phase(volume_name, "Available");
        };
        let key: ClaimKey = (
            r.namespace.clone().unwrap_or_else(|| "default".into()),
            r.name.clone().unwrap_or_default(),
        );
        let claim = self
            .claims
            .get(&key)
            .filter(|c| c.metadata.uid.as_deref() == Some(uid.as_str()))
            .cloned();
        let Some(claim) = claim else {
            // The claim is gone: Released (the reclaim policy's work is not modelled).
            let phase = volume_phase(&volume);
            if phase != "Released" && phase != "Failed" {
                return self.volume_phase(volume_name, "Released");
            }
            return false;
        };
        let claim_volume = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty());
        match claim_volume {
            // The claim's sync finishes the binding.
            None => false,
            Some(v) if v == volume_name => self.volume_phase(volume_name, "Bound"),
            Some(_) => {
                let provisioned = has_annotation(&volume.metadata, PROVISIONED_BY)
                    && volume
                        .spec
                        .as_ref()
                        .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
                        == Some("Delete");
                if provisioned {
                    let phase = volume_phase(&volume);
                    if phase != "Released" && phase != "Failed" {
                        return self.volume_phase(volume_name, "Released");
                    }
                    return false;
                }
                self.unbind_volume(volume_name)
            }
        }
    }

    /// `unbindVolume`: a binding the controller made is removed; a user's pre-binding keeps its
    /// name but loses the uid. The volume is Available again.
    fn unbind_volume(&mut self, volume_name: &str) -> bool {
        let Some(v) = self.volumes.get_mut(volume_name) else {
            return false;
        };
        let before = v.clone();
        if has_annotation(&v.metadata, BOUND_BY_CONTROLLER) {
            if let Some(spec) = v.spec.as_mut() {
                spec.claim_ref = None;
            }
            remove_annotation(&mut v.metadata, BOUND_BY_CONTROLLER);
        } else if let Some(r) = v.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
            r.uid = None;
        }
        let changed = *v != before;
        changed | self.volume_phase(volume_name, "Available")
    }
}

/// One run of the controller over every claim and volume at `now`, repeated until nothing
/// changes (the real controller gets there through its work queues): the objects it writes,
/// volumes (by name) then claims (by namespace and name), each once in its final form.
pub fn sync(
    claims: &[PersistentVolumeClaim],
    volumes: &[PersistentVolume],
    classes: &[StorageClass],
    now: Time,
) -> Vec<Write> {
    let mut world = World {
        claims: claims.iter().map(|c| (claim_key(c), c.clone())).collect(),
        volumes: volumes
            .iter()
            .map(|v| (name(&v.metadata).to_string(), v.clone()))
            .collect(),
        classes,
        now,
    };
    // Each round settles at least one object for good; the bound keeps a malformed cycle from
    // spinning.
    let rounds = 4 + 2 * (claims.len() + volumes.len());
    for _ in 0..rounds {
        let mut changed = false;
        let names: Vec<String> = world.volumes.keys().cloned().collect();
        for v in &names {
            changed |= world.sync_volume(v);
        }
        let keys: Vec<ClaimKey> = world.claims.keys().cloned().collect();
        for k in &keys {
            changed |= world.sync_claim(k);
        }
        if !changed {
            break;
        }
    }
    let mut out = Vec::new();
    for v in volumes {
        if let Some(new) = world.volumes.get(name(&v.metadata)) {
            if new != v {
                out.push(Write::Volume(new.clone()));
            }
        }
    }
    out.sort_by_key(write_key);
    let mut claim_writes: Vec<Write> = claims
        .iter()
        .filter_map(|c| {
            let new = world.claims.get(&claim_key(c))?;
            (new != c).then(|| Write::Claim(new.clone()))
        })
        .collect();
    claim_writes.sort_by_key(write_key);
    out.extend(claim_writes);
    out
}

fn write_key(w: &Write) -> (String, String) {
    match w {
        Write::Claim(c) => claim_key(c),
        Write::Volume(v) => (String::new(), name(&v.metadata).to_string()),
    }
}

#[cfg(test)]
mod tests;
