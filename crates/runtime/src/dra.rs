//! Dynamic Resource Allocation in `caldera run` and `caldera gate`: `resource.k8s.io/v1`
//! DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates, watched into the
//! index ([`caldera_cache::ClusterIndex`]'s DRA methods) when the API server serves them
//! ([`crate::optional`]; GA since 1.34). Without them there is nothing to watch, and a pod with
//! claims waits, saying its claim is not found, as kube-scheduler's would. The claim
//! allocations Caldera decides go through the binder (`caldera_binder`'s `claims.rs`).

use crate::optional::OptionalWatch;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::Api;
use kube::runtime::watcher;
use kube::Client;
use tracing::warn;

/// The group version of the four kinds.
pub(crate) const GROUP_VERSION: &str = "resource.k8s.io/v1";

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// The four watches, with their plurals (for discovery); each marks its kind synced after the
/// first list, so a pod's claim is not said to be missing before the claims are in.
pub(crate) struct Watches {
    pub classes: OptionalWatch<DeviceClass>,
    pub slices: OptionalWatch<ResourceSlice>,
    pub claims: OptionalWatch<ResourceClaim>,
    pub templates: OptionalWatch<ResourceClaimTemplate>,
}

/// The plurals the four watches need served.
pub(crate) const PLURALS: [&str; 4] = [
    "deviceclasses",
    "resourceslices",
    "resourceclaims",
    "resourceclaimtemplates",
];

pub(crate) fn watches(client: Client) -> Watches {
    Watches {
        classes: OptionalWatch {
            what: "DeviceClass".into(),
            api: Api::all(client.clone()),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, classes| {
                for e in cluster.index.reset_device_classes(&classes) {
                    warn!(error = %e, "DeviceClass left out");
                }
                cluster.dra_synced[0] = true;
            }),
            apply: Box::new(|cluster, c| {
                if let Err(e) = cluster.index.apply_device_class(&c) {
                    warn!(error = %e, "DeviceClass left out");
                }
            }),
            delete: Box::new(|cluster, c| {
                cluster
                    .index
                    .delete_device_class(c.metadata.name.as_deref().unwrap_or_default());
            }),
        },
        slices: OptionalWatch {
            what: "ResourceSlice".into(),
            api: Api::all(client.clone()),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, slices| {
                for e in cluster.index.reset_resource_slices(&slices) {
                    warn!(error = %e, "ResourceSlice left out");
                }
                cluster.dra_synced[1] = true;
            }),
            apply: Box::new(|cluster, s| {
                if let Err(e) = cluster.index.apply_resource_slice(&s) {
                    warn!(error = %e, "ResourceSlice left out");
                }
            }),
            delete: Box::new(|cluster, s| {
                cluster
                    .index
                    .delete_resource_slice(s.metadata.name.as_deref().unwrap_or_default());
            }),
        },
        claims: OptionalWatch {
            what: "ResourceClaim".into(),
            api: Api::all(client.clone()),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, claims| {
                for e in cluster.index.reset_resource_claims(&claims) {
                    warn!(error = %e, "ResourceClaim left out");
                }
                cluster.dra_synced[2] = true;
            }),
            apply: Box::new(|cluster, c| {
                if let Err(e) = cluster.index.apply_resource_claim(&c) {
                    warn!(error = %e, "ResourceClaim left out");
                }
            }),
            delete: Box::new(|cluster, c| {
                let (ns, name) = ns_name(&c.metadata);
                cluster.index.delete_resource_claim(ns, name);
            }),
        },
        templates: OptionalWatch {
            what: "ResourceClaimTemplate".into(),
            api: Api::all(client),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, templates| {
                for e in cluster.index.reset_resource_claim_templates(&templates) {
                    warn!(error = %e, "ResourceClaimTemplate left out");
                }
                cluster.dra_synced[3] = true;
            }),
            apply: Box::new(|cluster, t| {
                if let Err(e) = cluster.index.apply_resource_claim_template(&t) {
                    warn!(error = %e, "ResourceClaimTemplate left out");
                }
            }),
            delete: Box::new(|cluster, t| {
                let (ns, name) = ns_name(&t.metadata);
                cluster.index.delete_resource_claim_template(ns, name);
            }),
        },
    }
}
