//! HyperNodes (`topology.volcano.sh/v1alpha1`) in `caldera run`: whether the API server serves
//! them (Volcano's CRD, also shipped by `caldera crd`), and the watch that keeps them in the
//! index. Without the CRD there are no HyperNodes: gangs with a hard `networkTopology` wait
//! with a message saying so, and soft ones place as without topology.

use crate::Shared;
use caldera_api::HyperNode;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

const GROUP_VERSION: &str = "topology.volcano.sh/v1alpha1";

/// Whether the API server serves `topology.volcano.sh/v1alpha1` `hypernodes`.
pub(crate) async fn served(client: &Client) -> bool {
    match client.list_api_group_resources(GROUP_VERSION).await {
        Ok(list) => list.resources.iter().any(|r| r.name == "hypernodes"),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            warn!(error = %e, "could not ask the API server whether it serves {GROUP_VERSION}; assuming it does not");
            false
        }
    }
}

/// Decodes one HyperNode, or says why it cannot be used (logged; the object is left out).
fn decode(obj: DynamicObject) -> Option<HyperNode> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let mut value = match serde_json::to_value(&obj) {
        Ok(v) => v,
        Err(e) => {
            warn!(hypernode = %name, error = %e, "cannot encode HyperNode; left out of the topology");
            return None;
        }
    };
    value["apiVersion"] = GROUP_VERSION.into();
    value["kind"] = "HyperNode".into();
    match serde_json::from_value(value) {
        Ok(h) => Some(h),
        Err(e) => {
            warn!(hypernode = %name, error = %e, "cannot decode HyperNode; left out of the topology");
            None
        }
    }
}

/// Watches HyperNodes into the index; marks them synced after the first list, so sessions
/// place topology-constrained gangs only once the tree is known. A malformed HyperNode is
/// left out of the tree with a warning; it cannot stop the watch.
pub(crate) async fn watch(shared: Arc<Shared>, client: Client, stop: CancellationToken) {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("topology.volcano.sh", "v1alpha1", "HyperNode"),
        "hypernodes",
    );
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer = Vec::new();
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else {
            warn!("HyperNode watch ended");
            return;
        };
        match event {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(obj)) => buffer.extend(decode(obj)),
            Ok(Event::InitDone) => {
                let hypernodes = std::mem::take(&mut buffer);
                let mut cluster = shared.lock_cluster();
                for e in cluster.index.reset_hypernodes(&hypernodes) {
                    warn!(error = %e, "HyperNode left out of the topology");
                }
                if !cluster.hypernodes_synced {
                    info!(hypernodes = hypernodes.len(), "HyperNodes synced");
                }
                cluster.hypernodes_synced = true;
                drop(cluster);
                shared.trigger();
            }
            Ok(Event::Apply(obj)) => {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let mut cluster = shared.lock_cluster();
                match decode(obj) {
                    Some(h) => {
                        if let Err(e) = cluster.index.apply_hypernode(&h) {
                            warn!(error = %e, "HyperNode left out of the topology");
                        }
                    }
                    None => cluster.index.delete_hypernode(&name),
                }
                drop(cluster);
                shared.trigger();
            }
            Ok(Event::Delete(obj)) => {
                let name = obj.metadata.name.clone().unwrap_or_default();
                shared.lock_cluster().index.delete_hypernode(&name);
                shared.trigger();
            }
            Err(e) => warn!(error = %e, "HyperNode watch failed; retrying with backoff"),
        }
    }
}
