//! Autoscaler requests in `caldera run`: whether the API server serves ProvisioningRequests,
//! and the watch that finds Caldera's requests again (by label, after a restart or a leader
//! change). The writes that carry out a plan's `capacity_requests` and `capacity_releases`
//! go through the binder like every other write (`caldera_binder`'s `capacity.rs`: behind the
//! binds, in order per PodGroup, idempotent).

use crate::watch::{fed, KindWatch};
use caldera_api::ProvisioningRequest;
use caldera_cache::provisioning::SELECTOR;
use kube::runtime::watcher;
use kube::Client;

/// The watch of Caldera's ProvisioningRequests ([`crate::optional`]), by label: marks them
/// synced after the first list, so sessions ask for requests only once the ones that exist are
/// known.
pub(crate) fn optional(client: Client) -> KindWatch<ProvisioningRequest> {
    KindWatch {
        config: watcher::Config::default().labels(SELECTOR),
        ..fed(&client)
    }
}
