//! Dynamic Resource Allocation in `caldera run` and `caldera gate`: `resource.k8s.io/v1`
//! DeviceClasses, ResourceSlices, ResourceClaims and ResourceClaimTemplates, watched into the
//! index ([`crate::watch::fed`]; their conversion is `caldera_cache`'s) when the API server
//! serves them ([`crate::optional`]; GA since 1.34). Without them there is nothing to watch,
//! and a pod with claims waits, saying its claim is not found, as kube-scheduler's would. The
//! claim allocations Caldera decides go through the binder (`caldera_binder`'s `claims.rs`).

use crate::watch::{fed, spawn};
use caldera_api::calls;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::Client;

/// The four kinds, all served or none.
pub(crate) const KINDS: [&calls::Watch; 4] = [
    &calls::DEVICE_CLASSES,
    &calls::RESOURCE_SLICES,
    &calls::RESOURCE_CLAIMS,
    &calls::RESOURCE_CLAIM_TEMPLATES,
];

/// Spawns the four watches; each kind counts as synced after its first list, so a pod's claim
/// is not said to be missing before the claims are in.
pub(crate) fn spawn_all(
    shared: &std::sync::Arc<crate::Shared>,
    client: Client,
    stop: &tokio_util::sync::CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        spawn(shared, fed::<DeviceClass>(&client), stop),
        spawn(shared, fed::<ResourceSlice>(&client), stop),
        spawn(shared, fed::<ResourceClaim>(&client), stop),
        spawn(shared, fed::<ResourceClaimTemplate>(&client), stop),
    ]
}
