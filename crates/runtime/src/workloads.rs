//! The owner workloads gangs are derived from beyond `batch/v1` Jobs (docs/workloads.md,
//! [`caldera_cache::derive`]): JobSets, LeaderWorkerSets, PyTorchJobs, MPIJobs, RayClusters,
//! StatefulSets and Deployments, each read untyped through a dynamic watch of its kind only.
//!
//! No dependency on their CRDs: at start each kind's API is asked for ([`crate::optional`]); a
//! kind not served is not watched (one info line, no errors), and its pods are scheduled as
//! before. A kind that is served is marked watched before its first list arrives, so its pods
//! wait ("waiting for LeaderWorkerSet …") rather than being scheduled one by one meanwhile. A
//! discovery request that fails (not a 404) is asked again with backoff in the background; the
//! kind is watched once it answers "served".

use crate::Shared;
use caldera_cache::derive::{Workload, WorkloadKind};
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Decodes one object (an object that does not decode is left out with a warning).
fn decode(kind: WorkloadKind, obj: DynamicObject) -> Option<Workload> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let decoded = serde_json::to_value(&obj).and_then(|mut v| {
        v["apiVersion"] = kind.api_version().into();
        v["kind"] = kind.kind().into();
        serde_json::from_value::<Workload>(v)
    });
    match decoded {
        Ok(w) => Some(w),
        Err(e) => {
            warn!(kind = kind.kind(), name = %name, error = %e, "cannot decode; no gang is derived from it");
            None
        }
    }
}

/// Starts a watch for every served kind of [`WorkloadKind::READ`].
pub(crate) async fn spawn_served(
    shared: Arc<Shared>,
    client: Client,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::new();
    let mut absent = Vec::new();
    for kind in WorkloadKind::READ {
        let (group, version, _, plural) = kind.gvk();
        let run = {
            let (shared, client, stop) = (shared.clone(), client.clone(), stop.clone());
            async move {
                shared.lock_cluster().index.reset_workloads(kind, []);
                watch(shared, client, kind, stop).await;
            }
        };
        let apis = vec![(format!("{group}/{version}"), plural)];
        match crate::optional::start_when_served(&client, apis, &stop, run).await {
            crate::optional::Start::NotServed => absent.push(kind.kind()),
            start => tasks.extend(start.task()),
        }
    }
    if !absent.is_empty() {
        info!(kinds = ?absent, "not served (their CRDs are not installed): no gangs derived from them");
    }
    tasks
}

async fn watch(shared: Arc<Shared>, client: Client, kind: WorkloadKind, stop: CancellationToken) {
    let (group, version, k, plural) = kind.gvk();
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, k), plural);
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer = Vec::new();
    let mut synced = false;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else {
            warn!(kind = k, "watch ended");
            return;
        };
        match event {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(obj)) => buffer.extend(decode(kind, obj)),
            Ok(Event::InitDone) => {
                let objects = std::mem::take(&mut buffer);
                shared
                    .lock_cluster()
                    .index
                    .reset_workloads(kind, objects.iter());
                if !synced {
                    info!(kind = k, objects = objects.len(), "cache synced");
                    synced = true;
                }
                shared.trigger();
            }
            Ok(Event::Apply(obj)) => {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                let mut cluster = shared.lock_cluster();
                match decode(kind, obj) {
                    Some(w) => cluster.index.apply_workload(&w),
                    None => cluster.index.delete_workload(kind, &ns, &name),
                }
                drop(cluster);
                shared.trigger();
            }
            Ok(Event::Delete(obj)) => {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let ns = obj.metadata.namespace.clone().unwrap_or_default();
                shared
                    .lock_cluster()
                    .index
                    .delete_workload(kind, &ns, &name);
                shared.trigger();
            }
            Err(e) => warn!(kind = k, error = %e, "watch failed; retrying with backoff"),
        }
    }
}
