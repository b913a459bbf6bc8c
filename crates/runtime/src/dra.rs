//! Dynamic Resource Allocation in `caldera run` and `caldera gate`: `resource.k8s.io/v1`
//! DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates, watched into the
//! index ([`caldera_cache::ClusterIndex`]'s DRA methods) when the API server serves them
//! ([`crate::optional`]; GA since 1.34). Without them there is nothing to watch, and a pod with
//! claims waits, saying its claim is not found, as kube-scheduler's would. The claim
//! allocations Caldera decides go through the binder (`caldera_binder`'s `claims.rs`).

use crate::watch::{changed, gone, KindWatch};
use caldera_api::calls;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::Api;
use kube::runtime::watcher;
use kube::Client;
use tracing::warn;

fn ns_name(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (&str, &str) {
    (
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// The four watches, with their plurals (for discovery); each marks its kind synced after the
/// first list, so a pod's claim is not said to be missing before the claims are in.
pub(crate) struct Watches {
    pub classes: KindWatch<DeviceClass>,
    pub slices: KindWatch<ResourceSlice>,
    pub claims: KindWatch<ResourceClaim>,
    pub templates: KindWatch<ResourceClaimTemplate>,
}

/// The four kinds, all served or none.
pub(crate) const KINDS: [&calls::Watch; 4] = [
    &calls::DEVICE_CLASSES,
    &calls::RESOURCE_SLICES,
    &calls::RESOURCE_CLAIMS,
    &calls::RESOURCE_CLAIM_TEMPLATES,
];

/// Spawns the four watches ([`crate::watch::spawn`]).
pub(crate) fn spawn(
    shared: &std::sync::Arc<crate::Shared>,
    client: Client,
    stop: &tokio_util::sync::CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let Watches {
        classes,
        slices,
        claims,
        templates,
    } = watches(client);
    vec![
        crate::watch::spawn(shared, classes, stop),
        crate::watch::spawn(shared, slices, stop),
        crate::watch::spawn(shared, claims, stop),
        crate::watch::spawn(shared, templates, stop),
    ]
}

fn watches(client: Client) -> Watches {
    Watches {
        classes: KindWatch {
            watch: &calls::DEVICE_CLASSES,
            api: Api::all(client.clone()),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, classes| {
                for e in cluster.index.reset(&classes) {
                    warn!(error = %e, "DeviceClass left out");
                }
            }),
            apply: changed(|cluster, c: DeviceClass| {
                if let Err(e) = cluster.index.apply(&c) {
                    warn!(error = %e, "DeviceClass left out");
                }
            }),
            delete: gone(|cluster, c: DeviceClass| {
                cluster
                    .index
                    .delete::<DeviceClass>(c.metadata.name.as_deref().unwrap_or_default());
            }),
        },
        slices: KindWatch {
            watch: &calls::RESOURCE_SLICES,
            api: Api::all(client.clone()),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, slices| {
                for e in cluster.index.reset(&slices) {
                    warn!(error = %e, "ResourceSlice left out");
                }
            }),
            apply: changed(|cluster, s: ResourceSlice| {
                if let Err(e) = cluster.index.apply(&s) {
                    warn!(error = %e, "ResourceSlice left out");
                }
            }),
            delete: gone(|cluster, s: ResourceSlice| {
                cluster
                    .index
                    .delete::<ResourceSlice>(s.metadata.name.as_deref().unwrap_or_default());
            }),
        },
        claims: KindWatch {
            watch: &calls::RESOURCE_CLAIMS,
            api: Api::all(client.clone()),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, claims| {
                for e in cluster.index.reset(&claims) {
                    warn!(error = %e, "ResourceClaim left out");
                }
            }),
            apply: changed(|cluster, c: ResourceClaim| {
                if let Err(e) = cluster.index.apply(&c) {
                    warn!(error = %e, "ResourceClaim left out");
                }
            }),
            delete: gone(|cluster, c: ResourceClaim| {
                let (ns, name) = ns_name(&c.metadata);
                cluster.index.delete::<ResourceClaim>((ns, name));
            }),
        },
        templates: KindWatch {
            watch: &calls::RESOURCE_CLAIM_TEMPLATES,
            api: Api::all(client),
            config: watcher::Config::default(),
            reset: Box::new(|cluster, templates| {
                for e in cluster.index.reset(&templates) {
                    warn!(error = %e, "ResourceClaimTemplate left out");
                }
            }),
            apply: changed(|cluster, t: ResourceClaimTemplate| {
                if let Err(e) = cluster.index.apply(&t) {
                    warn!(error = %e, "ResourceClaimTemplate left out");
                }
            }),
            delete: gone(|cluster, t: ResourceClaimTemplate| {
                let (ns, name) = ns_name(&t.metadata);
                cluster.index.delete::<ResourceClaimTemplate>((ns, name));
            }),
        },
    }
}
