//! Watches of APIs a cluster may not serve: a CRD that may not be installed (Volcano's
//! HyperNodes, cluster-autoscaler's ProvisioningRequests) or a built-in alpha API behind a
//! feature gate (Kubernetes' own `scheduling.k8s.io/v1alpha2` Workloads and PodGroups). One
//! helper for all of them: asked once at start whether the API is served; not served means
//! nothing to watch (and nothing logged per session); served means a watch that lists, marks
//! the kind synced and follows changes, retrying with backoff, until stopped.

use crate::cluster::Cluster;
use crate::Shared;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::fmt::Debug;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Whether the API server serves `plural` in `group_version` (`group/version`). A 404 for the
/// group version is "no"; any other failure is logged once and read as "no".
pub(crate) async fn served(client: &Client, group_version: &str, plural: &str) -> bool {
    match client.list_api_group_resources(group_version).await {
        Ok(list) => list.resources.iter().any(|r| r.name == plural),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            warn!(error = %e, "could not ask the API server whether it serves {group_version}; assuming it does not");
            false
        }
    }
}

/// One optional kind: what the watch lists and how each event lands in the cluster state.
/// The functions run under the cluster lock.
pub(crate) struct OptionalWatch<K> {
    /// The kind, for logs (`HyperNode`).
    pub what: &'static str,
    /// The objects to list and watch.
    pub api: Api<K>,
    /// Watch options (a label selector).
    pub config: watcher::Config,
    /// The first list, and every relist: replaces every object of the kind and marks it
    /// synced.
    pub reset: fn(&mut Cluster, Vec<K>),
    /// An object added or changed.
    pub apply: fn(&mut Cluster, K),
    /// An object deleted.
    pub delete: fn(&mut Cluster, K),
}

/// Follows `w` into the cluster state until `stop`, waking the scheduler after each change.
/// A failing watch is retried with backoff; it never ends the task early.
pub(crate) async fn watch<K>(shared: Arc<Shared>, w: OptionalWatch<K>, stop: CancellationToken)
where
    K: kube::Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let stream = watcher::watcher(w.api.clone(), w.config.clone()).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer = Vec::new();
    let mut synced_once = false;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else {
            warn!("{} watch ended", w.what);
            return;
        };
        match event {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(obj)) => buffer.push(obj),
            Ok(Event::InitDone) => {
                let objects = std::mem::take(&mut buffer);
                let count = objects.len();
                (w.reset)(&mut shared.lock_cluster(), objects);
                if !synced_once {
                    info!(objects = count, "{}s synced", w.what);
                    synced_once = true;
                }
                shared.trigger();
            }
            Ok(Event::Apply(obj)) => {
                (w.apply)(&mut shared.lock_cluster(), obj);
                shared.trigger();
            }
            Ok(Event::Delete(obj)) => {
                (w.delete)(&mut shared.lock_cluster(), obj);
                shared.trigger();
            }
            Err(e) => warn!(error = %e, "{} watch failed; retrying with backoff", w.what),
        }
    }
}

/// Starts the watch of `w` when `group_version`'s `plural` is served; returns whether it is.
pub(crate) async fn spawn_if_served<K>(
    shared: &Arc<Shared>,
    client: &Client,
    group_version: &str,
    plural: &str,
    w: OptionalWatch<K>,
    stop: &CancellationToken,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) -> bool
where
    K: kube::Resource + Clone + Debug + serde::de::DeserializeOwned + Send + 'static,
{
    if !served(client, group_version, plural).await {
        return false;
    }
    tasks.push(tokio::spawn(watch(shared.clone(), w, stop.clone())));
    true
}
