//! Autoscaler requests in `caldera run`: whether the API server serves ProvisioningRequests,
//! and the watch that finds Caldera's requests again (by label, after a restart or a leader
//! change). The writes that carry out a plan's `capacity_requests` and `capacity_releases`
//! go through the binder like every other write (`caldera_binder`'s `capacity.rs`: behind the
//! binds, in order per PodGroup, idempotent).

use crate::Shared;
use caldera_api::{
    ProvisioningRequest, PROVISIONING_GROUP, PROVISIONING_PLURAL, PROVISIONING_VERSION,
};
use caldera_cache::provisioning::SELECTOR;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Whether the API server serves `autoscaling.x-k8s.io/v1` `provisioningrequests`.
pub(crate) async fn served(client: &Client) -> bool {
    let gv = format!("{PROVISIONING_GROUP}/{PROVISIONING_VERSION}");
    match client.list_api_group_resources(&gv).await {
        Ok(list) => list.resources.iter().any(|r| r.name == PROVISIONING_PLURAL),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            warn!(error = %e, "could not ask the API server whether it serves {gv}; assuming it does not");
            false
        }
    }
}

/// Watches Caldera's ProvisioningRequests into the index; marks them synced after the first
/// list, so sessions ask for requests only once the ones that exist are known.
pub(crate) async fn watch(shared: Arc<Shared>, client: Client, stop: CancellationToken) {
    let api: Api<ProvisioningRequest> = Api::all(client);
    let config = watcher::Config::default().labels(SELECTOR);
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer = Vec::new();
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else {
            warn!("ProvisioningRequest watch ended");
            return;
        };
        match event {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(pr)) => buffer.push(pr),
            Ok(Event::InitDone) => {
                let requests = std::mem::take(&mut buffer);
                let mut cluster = shared.lock_cluster();
                cluster.index.reset_provisioning_requests(&requests);
                if !cluster.provisioning_synced {
                    info!(requests = requests.len(), "ProvisioningRequests synced");
                }
                cluster.provisioning_synced = true;
                drop(cluster);
                shared.trigger();
            }
            Ok(Event::Apply(pr)) => {
                shared.lock_cluster().index.apply_provisioning_request(&pr);
                shared.trigger();
            }
            Ok(Event::Delete(pr)) => {
                let ns = pr.metadata.namespace.as_deref().unwrap_or("default");
                let name = pr.metadata.name.as_deref().unwrap_or_default();
                shared
                    .lock_cluster()
                    .index
                    .delete_provisioning_request(ns, name);
                shared.trigger();
            }
            Err(e) => warn!(error = %e, "ProvisioningRequest watch failed; retrying with backoff"),
        }
    }
}
