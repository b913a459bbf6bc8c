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

use crate::watch::{changed, gone, KindWatch};
use crate::Shared;
use caldera_cache::derive::{Workload, WorkloadKind};
use kube::api::DynamicObject;
use kube::runtime::watcher;
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
        let start = {
            let (shared, client, stop) = (shared.clone(), client.clone(), stop.clone());
            move || {
                shared.lock_cluster().index.reset_workloads(kind, []);
                vec![crate::watch::spawn(&shared, optional(client, kind), &stop)]
            }
        };
        match crate::optional::start_when_served(&shared, &client, vec![kind.watch()], &stop, start)
            .await
        {
            crate::optional::Start::NotServed => absent.push(kind.kind()),
            start => tasks.extend(start.tasks()),
        }
    }
    if !absent.is_empty() {
        info!(kinds = ?absent, "not served (their CRDs are not installed): no gangs derived from them");
    }
    tasks
}

/// The watch of `kind` ([`crate::optional`]), untyped: each object decoded into a
/// [`Workload`] (one that does not decode is left out, and forgotten if it was known).
fn optional(client: Client, kind: WorkloadKind) -> KindWatch<DynamicObject> {
    KindWatch {
        watch: kind.watch(),
        api: crate::watch::dynamic(client, kind.watch()),
        config: watcher::Config::default(),
        reset: Box::new(move |cluster, objects| {
            let workloads: Vec<Workload> = objects
                .into_iter()
                .filter_map(|o| decode(kind, o))
                .collect();
            cluster.index.reset_workloads(kind, workloads.iter());
        }),
        apply: changed(move |cluster, obj: DynamicObject| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            let ns = obj.metadata.namespace.clone().unwrap_or_default();
            match decode(kind, obj) {
                Some(w) => {
                    let _ = cluster.index.apply(&w);
                }
                None => cluster.index.delete::<Workload>((kind, &ns, &name)),
            }
        }),
        delete: gone(move |cluster, obj: DynamicObject| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            let ns = obj.metadata.namespace.clone().unwrap_or_default();
            cluster.index.delete::<Workload>((kind, &ns, &name));
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Cluster;

    fn object(api_version: &str, kind: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": api_version, "kind": kind,
            "metadata": {"namespace": "ml", "name": name}, "spec": spec,
        }))
        .expect("object")
    }

    #[tokio::test]
    async fn each_watch_carries_its_kind() {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = Client::try_from(config).expect("client");
        let lws = optional(client.clone(), WorkloadKind::LeaderWorkerSet);
        let jobsets = optional(client, WorkloadKind::JobSet);
        assert_eq!(
            (lws.watch.resource.kind, jobsets.watch.resource.kind),
            ("LeaderWorkerSet", "JobSet")
        );
        let mut cluster = Cluster::default();
        let infer = object(
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            "infer",
            serde_json::json!({"replicas": 1, "leaderWorkerTemplate": {"size": 4}}),
        );
        (lws.reset)(&mut cluster, vec![infer.clone()]);
        let train = object(
            "jobset.x-k8s.io/v1alpha2",
            "JobSet",
            "train",
            serde_json::json!({"replicatedJobs": []}),
        );
        (jobsets.apply)(&mut cluster, train.clone(), &[]);
        let index = &cluster.index;
        assert!(index
            .workload(WorkloadKind::LeaderWorkerSet, "ml", "infer")
            .is_some());
        assert!(index
            .workload(WorkloadKind::JobSet, "ml", "train")
            .is_some());
        assert!(index
            .workload(WorkloadKind::JobSet, "ml", "infer")
            .is_none());
        (lws.delete)(&mut cluster, infer);
        (jobsets.delete)(&mut cluster, train);
        assert!(cluster
            .index
            .workload(WorkloadKind::LeaderWorkerSet, "ml", "infer")
            .is_none());
        assert!(cluster
            .index
            .workload(WorkloadKind::JobSet, "ml", "train")
            .is_none());
    }
}
