//! The kinds the store keeps, each in a map of its own, and what an apply keeps of each: one
//! generic path (`Store::upsert`, `Store::put`, `Store::remove`) applies, stores and deletes
//! them all.

use super::*;

/// A kind the store keeps in a map of its own: its key, what an apply keeps of the stored
/// object, and its entry in the scheduler's index. [`Store::upsert`], [`Store::put`] and
/// [`Store::remove`] apply, store and delete every kind through these, and [`Store::list`]
/// reads them. Public but not nameable outside the store (sealed).
pub trait Kept: Clone + PartialEq + Sized + 'static {
    /// `name`, or `(namespace, name)` for a namespaced kind.
    type Key: KeyOf;
    fn meta(&self) -> &ObjectMeta;
    fn meta_mut(&mut self) -> &mut ObjectMeta;
    fn map(store: &Store) -> &BTreeMap<Self::Key, Self>;
    fn map_mut(store: &mut Store) -> &mut BTreeMap<Self::Key, Self>;
    /// An update: what the applied object takes from the stored one, besides the server-owned
    /// metadata (status a controller owns, fields a controller or scheduler wrote).
    fn keep(&mut self, _old: &Self) {}
    /// A create: what kube-apiserver drops or defaults.
    fn create(&mut self, _now: Time) {}
    /// Shows the object to the index; refused when the scheduler's conversion fails. Storage
    /// objects are indexed all together instead ([`Store::pv_controller`]).
    fn index(&self, _index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
        Ok(())
    }
    /// Takes the object out of the index.
    fn unindex(_key: &Self::Key, _index: &mut ClusterIndex) {}
}

/// The key of a stored object: its name, or its namespace (`default` when unset) and name.
pub trait KeyOf: Ord + Clone + 'static {
    const NAMESPACED: bool;
    fn of(meta: &ObjectMeta) -> Self;
    fn at(namespace: &str, name: &str) -> Self;
}

impl KeyOf for String {
    const NAMESPACED: bool = false;
    fn of(meta: &ObjectMeta) -> Self {
        name_of(meta)
    }
    fn at(_: &str, name: &str) -> Self {
        name.to_string()
    }
}

impl KeyOf for Key {
    const NAMESPACED: bool = true;
    fn of(meta: &ObjectMeta) -> Self {
        (ns_of(meta), name_of(meta))
    }
    fn at(namespace: &str, name: &str) -> Self {
        (namespace.to_string(), name.to_string())
    }
}

/// `impl Kept for $kind`, stored in `Store::$map` under `$key`, with the given overrides.
macro_rules! kept {
    ($kind:ty, $map:ident, $key:ty $(; $($body:tt)*)?) => {
        impl Kept for $kind {
            type Key = $key;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            fn map(store: &Store) -> &BTreeMap<$key, Self> {
                &store.$map
            }
            fn map_mut(store: &mut Store) -> &mut BTreeMap<$key, Self> {
                &mut store.$map
            }
            $($($body)*)?
        }
    };
}

/// [`Kept::keep`] for a status that an apply without one leaves as it is.
macro_rules! status_kept_unless_given {
    () => {
        fn keep(&mut self, old: &Self) {
            if self.status.is_none() {
                self.status = old.status.clone();
            }
        }
    };
}

/// [`Kept::keep`] and [`Kept::create`] for a status only its controller writes (a status
/// subresource): an apply keeps the stored one, a create starts with none.
macro_rules! status_of_the_controller {
    () => {
        fn keep(&mut self, old: &Self) {
            self.status = old.status.clone();
        }
        fn create(&mut self, _now: Time) {
            self.status = None;
        }
    };
}

/// [`Kept::index`] and [`Kept::unindex`] through the index's one generic path
/// (`ClusterIndex::apply`, `ClusterIndex::delete`), keyed by name or by namespace and name; a
/// kind marked `infallible` always converts.
macro_rules! indexed {
    (infallible $($key:ident),+) => {
        fn index(&self, index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
            let _ = index.apply(self);
            Ok(())
        }
        indexed!(@unindex $($key),+);
    };
    (@unindex name) => {
        fn unindex(key: &String, index: &mut ClusterIndex) {
            index.delete::<Self>(key);
        }
    };
    (@unindex namespace, name) => {
        fn unindex(key: &Key, index: &mut ClusterIndex) {
            index.delete::<Self>((&key.0, &key.1));
        }
    };
    ($($key:ident),+) => {
        fn index(&self, index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
            index.apply(self)
        }
        indexed!(@unindex $($key),+);
    };
}

kept!(Namespace, namespaces, String;
    status_kept_unless_given!();
    indexed!(infallible name););
kept!(PriorityClass, priority_classes, String;
    indexed!(name););
kept!(Queue, queues, String;
    status_kept_unless_given!();
    indexed!(name););
kept!(HyperNode, hypernodes, String;
    status_kept_unless_given!();
    indexed!(name););
kept!(Node, nodes, String;
    status_kept_unless_given!();
    indexed!(name););
kept!(PodGroup, podgroups, Key;
    status_kept_unless_given!();
    indexed!(namespace, name););
kept!(Pod, pods, Key; indexed!(namespace, name););
kept!(NativePodGroup, native_podgroups, Key;
    status_kept_unless_given!();
    indexed!(namespace, name););
kept!(NativeWorkload, native_workloads, Key;
    indexed!(infallible namespace, name););
kept!(Job, jobs, Key;
    status_of_the_controller!();
    indexed!(infallible namespace, name););
kept!(ReplicaSet, replicasets, Key; status_of_the_controller!(););
kept!(ProvisioningRequest, requests, Key;
    indexed!(infallible namespace, name););
kept!(StorageClass, storage_classes, String);
kept!(StatefulSet, statefulsets, Key);
kept!(CSINode, csinodes, String);
kept!(DeviceClass, device_classes, String;
    indexed!(name););
kept!(ResourceSlice, resource_slices, String;
    indexed!(name););
kept!(ResourceClaimTemplate, claim_templates, Key;
    indexed!(namespace, name););

kept!(Deployment, deployments, Key;
status_of_the_controller!();
// Opted-in Deployments are gangs (docs/workloads.md): the index reads them untyped, as
// the runtime's watch does.
fn index(&self, index: &mut ClusterIndex) -> Result<(), caldera_cache::Error> {
    if let Some(w) = serde_json::to_value(self)
        .ok()
        .and_then(|v| serde_json::from_value::<Workload>(v).ok())
    {
        let _ = index.apply(&w);
    }
    Ok(())
}
fn unindex(key: &Key, index: &mut ClusterIndex) {
    let kind = caldera_cache::derive::WorkloadKind::Deployment;
    index.delete::<Workload>((kind, &key.0, &key.1));
});

kept!(PodDisruptionBudget, budgets, Key;
    // Status belongs to the disruption controller; the generation moves with the spec.
    fn keep(&mut self, old: &Self) {
        let generation = old.metadata.generation.unwrap_or(1);
        self.metadata.generation = Some(generation + i64::from(self.spec != old.spec));
        self.status = old.status.clone();
    }
    fn create(&mut self, _now: Time) {
        self.metadata.generation = Some(1);
        self.status = None;
    }
    indexed!(infallible namespace, name););

kept!(ResourceClaim, resource_claims, Key;
    // Status is written through the status subresource only; a manifest may give one (a claim
    // allocated before the scenario).
    fn keep(&mut self, old: &Self) {
        if self.metadata.finalizers.is_none() {
            self.metadata.finalizers = old.metadata.finalizers.clone();
        }
        self.status = old.status.clone();
    }
    indexed!(namespace, name););

kept!(PersistentVolume, volumes, String;
// Status belongs to the PV controller; what it and schedulers wrote stays.
fn keep(&mut self, old: &Self) {
    merge_annotations(&mut self.metadata, &old.metadata);
    let spec = self.spec.get_or_insert_with(Default::default);
    let old_spec = old.spec.clone().unwrap_or_default();
    spec.claim_ref = spec.claim_ref.take().or(old_spec.claim_ref);
    spec.volume_mode = spec.volume_mode.take().or(old_spec.volume_mode);
    spec.persistent_volume_reclaim_policy = spec
        .persistent_volume_reclaim_policy
        .take()
        .or(old_spec.persistent_volume_reclaim_policy);
    self.status = old.status.clone();
}
fn create(&mut self, now: Time) {
    pv_controller::admit_volume(self, now);
});

kept!(PersistentVolumeClaim, claims, Key;
// Status belongs to the PV controller; what it and schedulers wrote stays. A create's
// admission needs the classes: [`Store::apply`] runs it.
fn keep(&mut self, old: &Self) {
    merge_annotations(&mut self.metadata, &old.metadata);
    let spec = self.spec.get_or_insert_with(Default::default);
    let old_spec = old.spec.clone().unwrap_or_default();
    spec.volume_name = spec.volume_name.take().or(old_spec.volume_name);
    spec.storage_class_name = spec.storage_class_name.take().or(old_spec.storage_class_name);
    spec.volume_mode = spec.volume_mode.take().or(old_spec.volume_mode);
    self.status = old.status.clone();
});
