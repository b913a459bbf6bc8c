//! The watches: one kube-runtime watcher per kind (default list+watch config, backoff on
//! errors), feeding the runtime's cluster view. `Init`…`InitDone` (the first list, and every
//! relist after a `410 Gone`) is buffered and replaces the kind's contents at once; `Apply`
//! and `Delete` apply one object.

use crate::cluster::{Cluster, Watched};
use crate::Shared;
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// How one kind is fed into the cluster view.
struct Handler<K> {
    kind: Watched,
    apply: fn(&mut Cluster, &K, &[String]) -> bool,
    delete: fn(&mut Cluster, &K) -> bool,
    reset: fn(&mut Cluster, &[K]),
}

async fn run<K>(shared: Arc<Shared>, api: Api<K>, handler: Handler<K>, stop: CancellationToken)
where
    K: kube::Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let stream = watcher::watcher(api, watcher::Config::default()).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer: Vec<K> = Vec::new();
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else {
            warn!(kind = %handler.kind, "watch stream ended");
            return;
        };
        let trigger = match event {
            Ok(Event::Init) => {
                buffer.clear();
                false
            }
            Ok(Event::InitApply(o)) => {
                buffer.push(o);
                false
            }
            Ok(Event::InitDone) => {
                let objects = std::mem::take(&mut buffer);
                let first = {
                    let mut cluster = shared.lock_cluster();
                    let first = !cluster.is_synced(handler.kind);
                    (handler.reset)(&mut cluster, &objects);
                    first
                };
                if first {
                    info!(kind = %handler.kind, objects = objects.len(), "cache synced");
                } else {
                    debug!(kind = %handler.kind, objects = objects.len(), "relisted");
                }
                true
            }
            Ok(Event::Apply(o)) => {
                let active = shared.active();
                let names = &active.snapshot_options.scheduler_names;
                (handler.apply)(&mut shared.lock_cluster(), &o, names)
            }
            Ok(Event::Delete(o)) => (handler.delete)(&mut shared.lock_cluster(), &o),
            Err(e) => {
                warn!(kind = %handler.kind, error = %e, "watch failed; retrying with backoff");
                false
            }
        };
        if trigger {
            shared.trigger();
        }
    }
}

fn volcano(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", kind),
        plural,
    )
}

/// Spawns the twelve watches.
pub(crate) fn spawn_all(
    shared: Arc<Shared>,
    client: Client,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(run(
            shared.clone(),
            Api::<Pod>::all(client.clone()),
            Handler {
                kind: Watched::Pods,
                apply: Cluster::apply_pod,
                delete: Cluster::delete_pod,
                reset: Cluster::reset_pods,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<Node>::all(client.clone()),
            Handler {
                kind: Watched::Nodes,
                apply: |c, n, _| c.apply_node(n),
                delete: Cluster::delete_node,
                reset: Cluster::reset_nodes,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<DynamicObject>::all_with(client.clone(), &volcano("PodGroup", "podgroups")),
            Handler {
                kind: Watched::PodGroups,
                apply: |c, o, _| c.apply_podgroup(o),
                delete: Cluster::delete_podgroup,
                reset: Cluster::reset_podgroups,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<DynamicObject>::all_with(client.clone(), &volcano("Queue", "queues")),
            Handler {
                kind: Watched::Queues,
                apply: |c, o, _| c.apply_queue(o),
                delete: Cluster::delete_queue,
                reset: Cluster::reset_queues,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<PriorityClass>::all(client.clone()),
            Handler {
                kind: Watched::PriorityClasses,
                apply: |c, p, _| c.apply_priority_class(p),
                delete: Cluster::delete_priority_class,
                reset: Cluster::reset_priority_classes,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<PodDisruptionBudget>::all(client.clone()),
            Handler {
                kind: Watched::Budgets,
                apply: |c, p, _| c.apply_budget(p),
                delete: Cluster::delete_budget,
                reset: Cluster::reset_budgets,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<Namespace>::all(client.clone()),
            Handler {
                kind: Watched::Namespaces,
                apply: |c, n, _| c.apply_namespace(n),
                delete: Cluster::delete_namespace,
                reset: Cluster::reset_namespaces,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<PersistentVolumeClaim>::all(client.clone()),
            Handler {
                kind: Watched::Claims,
                apply: |c, o, _| c.apply_claim(o),
                delete: Cluster::delete_claim,
                reset: Cluster::reset_claims,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<PersistentVolume>::all(client.clone()),
            Handler {
                kind: Watched::Volumes,
                apply: |c, o, _| c.apply_volume(o),
                delete: Cluster::delete_volume,
                reset: Cluster::reset_volumes,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<StorageClass>::all(client.clone()),
            Handler {
                kind: Watched::StorageClasses,
                apply: |c, o, _| c.apply_storage_class(o),
                delete: Cluster::delete_storage_class,
                reset: Cluster::reset_storage_classes,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared.clone(),
            Api::<CSINode>::all(client.clone()),
            Handler {
                kind: Watched::CsiNodes,
                apply: |c, o, _| c.apply_csinode(o),
                delete: Cluster::delete_csinode,
                reset: Cluster::reset_csinodes,
            },
            stop.clone(),
        )),
        tokio::spawn(run(
            shared,
            Api::<Job>::all(client),
            Handler {
                kind: Watched::Jobs,
                apply: |c, o, _| c.apply_job(o),
                delete: Cluster::delete_job,
                reset: Cluster::reset_jobs,
            },
            stop,
        )),
    ]
}

/// The resource of Volcano's Queue, for creating the `default` queue.
pub(crate) fn queue_resource() -> ApiResource {
    volcano("Queue", "queues")
}
