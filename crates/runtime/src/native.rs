//! Kubernetes' own gang API in `caldera run`: `scheduling.k8s.io/v1alpha2` Workloads (read for
//! the queue a Workload names) and PodGroups (1.36, feature gates `GenericWorkload` and
//! `GangScheduling`), watched into the index ([`crate::watch::fed`]) only when the API server
//! serves them ([`crate::optional`]); without them there is nothing to watch, and a pod naming
//! a native PodGroup (which such a server would not accept either) waits with a message. The
//! native PodGroups count as synced after their first list, so pods naming one are not told it
//! is missing before the list is in. The `PodGroupScheduled` condition Caldera writes goes
//! through the binder.

use crate::watch::{fed, spawn};
use k8s_openapi::api::scheduling::v1alpha2::{PodGroup, Workload};
use kube::Client;

/// Spawns the two watches.
pub(crate) fn spawn_all(
    shared: &std::sync::Arc<crate::Shared>,
    client: Client,
    stop: &tokio_util::sync::CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        spawn(shared, fed::<PodGroup>(&client), stop),
        spawn(shared, fed::<Workload>(&client), stop),
    ]
}
