//! An object's namespace and name as the controllers read them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The object's namespace; absent or empty reads as `default`.
pub(crate) fn namespace(meta: &ObjectMeta) -> &str {
    meta.namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// The object's name; absent reads as empty.
pub(crate) fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}
