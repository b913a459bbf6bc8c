//! One module per watched kind: how [`ClusterIndex`](crate::index::ClusterIndex) keys it,
//! converts it, and what else it keeps up to date when an object of the kind comes or goes.
//! The index's `apply`, `delete` and `reset` are written once over [`Indexed`] (defined with
//! the index: the index does not depend on its kinds); each module here fills in the hooks,
//! next to the queries that read what it keeps.

pub(crate) use crate::index::Indexed;

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
