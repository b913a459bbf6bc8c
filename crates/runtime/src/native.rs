//! Kubernetes' own gang API in `caldera run`: `scheduling.k8s.io/v1alpha2` Workloads and
//! PodGroups (1.36, feature gates `GenericWorkload` and `GangScheduling`), watched only when
//! the API server serves them ([`crate::optional`]); without them there is nothing to watch,
//! and a pod naming a native PodGroup (which such a server would not accept either) waits with
//! a message. The `PodGroupScheduled` condition Caldera writes goes through the binder.

use crate::watch::{changed, gone, KindWatch};
use caldera_api::calls;
use k8s_openapi::api::scheduling::v1alpha2::{PodGroup, Workload};
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

/// The native PodGroup watch: marks them synced after the first list, so pods naming one are
/// not told it is missing before the list is in.
pub(crate) fn podgroups(client: Client) -> KindWatch<PodGroup> {
    KindWatch {
        watch: &calls::NATIVE_PODGROUPS,
        api: Api::all(client),
        config: watcher::Config::default(),
        reset: Box::new(|cluster, podgroups| {
            for e in cluster.index.reset(&podgroups) {
                warn!(error = %e, "native PodGroup left out");
            }
        }),
        apply: changed(|cluster, pg: PodGroup| {
            if let Err(e) = cluster.index.apply(&pg) {
                warn!(error = %e, "native PodGroup left out");
            }
        }),
        delete: gone(|cluster, pg: PodGroup| {
            let (ns, name) = ns_name(&pg.metadata);
            cluster.index.delete::<PodGroup>((ns, name));
        }),
    }
}

/// The native Workload watch (read for the queue a Workload names).
pub(crate) fn workloads(client: Client) -> KindWatch<Workload> {
    KindWatch {
        watch: &calls::NATIVE_WORKLOADS,
        api: Api::all(client),
        config: watcher::Config::default(),
        reset: Box::new(|cluster, workloads| {
            cluster.index.reset(&workloads);
        }),
        apply: changed(|cluster, w: Workload| {
            let _ = cluster.index.apply(&w);
        }),
        delete: gone(|cluster, w: Workload| {
            let (ns, name) = ns_name(&w.metadata);
            cluster.index.delete::<Workload>((ns, name));
        }),
    }
}
