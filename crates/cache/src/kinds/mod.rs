//! One module per watched kind: how [`ClusterIndex`] keys it, converts it, and what else it
//! keeps up to date when an object of the kind comes or goes. [`ClusterIndex::apply`],
//! [`ClusterIndex::delete`] and [`ClusterIndex::reset`] are written once over [`Indexed`];
//! each module here fills in the hooks, next to the queries that read what it keeps.

use crate::error::Result;
use crate::index::ClusterIndex;

mod budget;
mod dra;
mod hypernode;
mod job;
mod namespace;
mod native;
mod node;
mod pod;
mod podgroup;
mod priority_class;
mod provisioning;
mod queue;
mod volume;
mod workload;

pub(crate) use provisioning::Booking;

/// A kind [`ClusterIndex`] keeps (implemented here, once per watched kind). The index calls
/// the hooks in this order: `apply` = `remove(key)`, `insert`, `changed`; `delete` =
/// `remove(key)`, `changed`; `reset` = `clear`, then `apply` for each object, then `changed`.
/// So `insert` may assume no earlier version of its object is kept.
pub trait Indexed: Sized {
    /// How the index names an object of the kind: its name, or its namespace and name.
    type Key<'a>: Copy;

    /// The key of `self`; `None` when the object has none (it is then only converted, so a
    /// malformed object still gets its error).
    fn key(&self) -> Option<Self::Key<'_>>;

    /// Converts `self` and keeps it, with everything derived from it. On a conversion error
    /// nothing is kept and the error names the object and field.
    fn insert(&self, index: &mut ClusterIndex) -> Result<()>;

    /// Forgets the object `key` and everything derived from it; an unknown key is ignored.
    fn remove(index: &mut ClusterIndex, key: Self::Key<'_>);

    /// Forgets every object of the kind (the start of a relist).
    fn clear(index: &mut ClusterIndex);

    /// Brings what is derived from all objects of the kind together up to date, after any
    /// change. Most kinds derive nothing across objects.
    fn changed(_index: &mut ClusterIndex) {}
}

/// `(namespace, name)` of a namespaced object, `default` when it has no namespace; `None`
/// without a name.
pub(crate) fn namespaced(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<(&str, &str)> {
    Some((
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref()?,
    ))
}

/// [`namespaced`], with an empty name when it has none (the kinds whose earlier version is
/// forgotten under that key even so).
pub(crate) fn namespaced_or_empty(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}
