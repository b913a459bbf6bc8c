//! The watches: one kube-runtime watcher per kind, each built from its entry in
//! [`caldera_api::calls::WATCHES`], feeding the runtime's cluster view through one loop
//! ([`follow`]). `Init`…`InitDone` (the first list, and every relist after a `410 Gone`) is
//! buffered and replaces the kind's contents at once; `Apply` and `Delete` apply one object.
//!
//! A failed request is retried after a back-off of our own, not kube-runtime's: a failure
//! (timeout, 5xx, 429) waits 1 s doubling to 30 s; a refusal (403) is no outage but missing
//! RBAC, which no retry fixes, so it waits 10 s doubling to 5 minutes, and is asked again at
//! once when [`crate::Shared::retry_refused`] is notified (SIGHUP, or a SelfSubjectAccessReview
//! saying the permission is there now: [`crate::rbac`]). A refused kind Caldera cannot live
//! without ([`Need::Required`]) stops `caldera run` with the rule to add; a refused optional
//! kind is reported once (error log, `caldera_watch_forbidden{kind}`, a Warning event on the
//! leader Lease) and only its dependants wait (`ClusterIndex::set_refused`).

use crate::cluster::{Cluster, Fed, Untyped, Watched};
use crate::Shared;
use caldera_api::calls::{Need, Watch};
use caldera_api::{PodGroup, Queue};
use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::{self, Event};
use kube::Client;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

/// How events of one kind land in the cluster state (each runs under the cluster lock).
type Reset<K> = Box<dyn Fn(&mut Cluster, Vec<K>) + Send + Sync>;
/// An object added or changed; whether a session should follow.
type Apply<K> = Box<dyn Fn(&mut Cluster, K, &[String]) -> bool + Send + Sync>;
/// An object deleted; whether a session should follow.
type Delete<K> = Box<dyn Fn(&mut Cluster, K) -> bool + Send + Sync>;

/// One watched kind: what is listed and watched, and how each event lands.
pub(crate) struct KindWatch<K> {
    /// Its entry in the list of what `caldera run` calls.
    pub watch: &'static Watch,
    /// The objects to list and watch.
    pub api: Api<K>,
    /// Watch options (a label selector).
    pub config: watcher::Config,
    /// The first list, and every relist: replaces every object of the kind.
    pub reset: Reset<K>,
    /// An object added or changed.
    pub apply: Apply<K>,
    /// An object deleted.
    pub delete: Delete<K>,
}

/// An optional kind's `apply`: every change may let a session place something.
pub(crate) fn changed<K>(f: impl Fn(&mut Cluster, K) + Send + Sync + 'static) -> Apply<K> {
    Box::new(move |c, o, _| {
        f(c, o);
        true
    })
}

/// An optional kind's `delete`: every change may let a session place something.
pub(crate) fn gone<K>(f: impl Fn(&mut Cluster, K) + Send + Sync + 'static) -> Delete<K> {
    Box::new(move |c, o| {
        f(c, o);
        true
    })
}

/// The untyped API of `w` (custom resources, and kinds read without their types).
pub(crate) fn dynamic(client: Client, w: &Watch) -> Api<DynamicObject> {
    let r = &w.resource;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(r.group, r.version, r.kind),
        r.plural,
    );
    Api::all_with(client, &resource)
}

/// The first wait after a failed request, and the longest.
const FAILED: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(30));
/// The first wait after a refusal (403), and the longest.
const REFUSED: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(300));

/// The next wait: `(first, max)`, doubled from `last`.
fn next(last: Option<Duration>, (first, max): (Duration, Duration)) -> Duration {
    last.map_or(first, |d| (d * 2).clamp(first, max))
}

/// The server's message when `e` is a refusal (403 Forbidden).
fn refusal(e: &watcher::Error) -> Option<&str> {
    let status = match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s,
        watcher::Error::WatchError(s) => s,
        _ => return None,
    };
    (status.code == 403).then_some(status.message.as_str())
}

/// What a refusal of `w` means, for the log, the event and the dependants' pods.
pub(crate) fn refused_message(w: &Watch, server: &str) -> String {
    format!(
        "the API server refuses to list {} to Caldera (403 Forbidden: {server}); {}",
        w.resource,
        w.missing_rule()
    )
}

/// Follows `w` into the cluster state until `stop`, waking the scheduler after each change
/// that may let a session place something. Never ends early but for a refused required kind.
pub(crate) async fn follow<K>(shared: Arc<Shared>, w: KindWatch<K>, stop: CancellationToken)
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    let kind = w.watch.resource;
    let stream = watcher::watcher(w.api.clone(), w.config.clone());
    futures::pin_mut!(stream);
    let mut buffer = Vec::new();
    let mut synced_once = false;
    let mut wait: (Option<Duration>, Option<Duration>) = (None, None);
    loop {
        let next_event = tokio::select! {
            _ = stop.cancelled() => return,
            next_event = stream.next() => next_event,
        };
        let Some(event) = next_event else {
            warn!(%kind, "watch stream ended");
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
                wait = (None, None);
                let objects = std::mem::take(&mut buffer);
                let count = objects.len();
                let was_refused = {
                    let mut cluster = shared.lock_cluster();
                    (w.reset)(&mut cluster, objects);
                    w.watch.need == Need::Optional && cluster.listed(w.watch)
                };
                if was_refused {
                    shared.metrics.forbidden(kind.qualified(), false);
                    info!(%kind, objects = count, "the API server lists it again: its dependants are scheduled");
                } else if !synced_once {
                    info!(%kind, objects = count, "cache synced");
                } else {
                    debug!(%kind, objects = count, "relisted");
                }
                synced_once = true;
                true
            }
            Ok(Event::Apply(o)) => {
                let active = shared.active();
                let names = &active.snapshot_options.scheduler_names;
                (w.apply)(&mut shared.lock_cluster(), o, names)
            }
            Ok(Event::Delete(o)) => (w.delete)(&mut shared.lock_cluster(), o),
            Err(e) => {
                let delay = match refusal(&e) {
                    Some(server) => {
                        let message = refused_message(w.watch, server);
                        if w.watch.need == Need::Required {
                            error!(%kind, "{message}; Caldera cannot schedule without it");
                            shared
                                .fail(format!("Caldera cannot schedule without {kind}: {message}"));
                            return;
                        }
                        if shared
                            .lock_cluster()
                            .refused(w.watch, message.clone().into())
                        {
                            error!(%kind, waiting = w.watch.dependants, "{message}; only its dependants wait");
                            shared.metrics.forbidden(kind.qualified(), true);
                            shared.trigger();
                        }
                        wait.1 = Some(next(wait.1, REFUSED));
                        wait.1
                    }
                    None => {
                        warn!(%kind, error = %e, "watch failed; retrying with backoff");
                        wait.0 = Some(next(wait.0, FAILED));
                        wait.0
                    }
                };
                let delay = delay.unwrap_or(FAILED.0);
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(delay) => {}
                    _ = shared.retry_refused.notified() => {}
                }
                false
            }
        };
        if trigger {
            shared.trigger();
        }
    }
}

/// Spawns the watch `w` ([`follow`]); a plain function, so the watch's future is built in its
/// frame and moved to the heap at once, never into a caller's async frame.
pub(crate) fn spawn<K>(
    shared: &Arc<Shared>,
    w: KindWatch<K>,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<()>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + 'static,
{
    tokio::spawn(follow(shared.clone(), w, stop.clone()))
}

/// The watch of a kind read with its own type ([`Fed`]): every event goes through
/// [`Cluster::apply`], [`Cluster::delete`] or [`Cluster::reset`].
pub(crate) fn fed<K: Fed>(client: &Client) -> KindWatch<K> {
    KindWatch {
        watch: K::WATCH,
        api: Api::all(client.clone()),
        config: watcher::Config::default(),
        reset: Box::new(|c, objects| c.reset(&objects)),
        apply: Box::new(|c, o, _| c.apply(&o)),
        delete: Box::new(|c, o| c.delete(&o)),
    }
}

/// The watch of Volcano's PodGroups or Queues, read untyped ([`Untyped`]).
fn untyped<K: Untyped>(client: &Client) -> KindWatch<DynamicObject> {
    KindWatch {
        watch: K::WATCHED.watch(),
        api: dynamic(client.clone(), K::WATCHED.watch()),
        config: watcher::Config::default(),
        reset: Box::new(|c, objects| c.reset_untyped::<K>(&objects)),
        apply: Box::new(|c, o, _| c.apply_untyped::<K>(&o)),
        delete: Box::new(|c, o| c.delete_untyped::<K>(&o)),
    }
}

/// Spawns the watches of the required kinds ([`Watched::ALL`]).
pub(crate) fn spawn_all(
    shared: Arc<Shared>,
    client: Client,
    stop: CancellationToken,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (s, c, t) = (&shared, &client, &stop);
    let pods = KindWatch {
        watch: Watched::Pods.watch(),
        api: Api::<Pod>::all(client.clone()),
        config: watcher::Config::default(),
        reset: Box::new(|c, pods| c.reset_pods(&pods)),
        apply: Box::new(|c, pod, names| c.apply_pod(&pod, names)),
        delete: Box::new(|c, pod| c.delete_pod(&pod)),
    };
    vec![
        spawn(s, pods, t),
        spawn(s, fed::<Node>(c), t),
        spawn(s, untyped::<PodGroup>(c), t),
        spawn(s, untyped::<Queue>(c), t),
        spawn(s, fed::<PriorityClass>(c), t),
        spawn(s, fed::<PodDisruptionBudget>(c), t),
        spawn(s, fed::<Namespace>(c), t),
        spawn(s, fed::<PersistentVolumeClaim>(c), t),
        spawn(s, fed::<PersistentVolume>(c), t),
        spawn(s, fed::<StorageClass>(c), t),
        spawn(s, fed::<CSINode>(c), t),
        spawn(s, fed::<Job>(c), t),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_api::calls::WATCHES;
    use kube::Resource;

    /// Each typed watch reads the resource its entry in the list names (the untyped ones are
    /// built from the entry itself).
    #[test]
    fn typed_watches_read_the_resource_their_entry_names() {
        fn check<K: Resource<DynamicType = ()>>(w: &Watch) {
            let r = w.resource;
            assert_eq!(
                (
                    K::group(&()).as_ref(),
                    K::version(&()).as_ref(),
                    K::kind(&()).as_ref(),
                    K::plural(&()).as_ref()
                ),
                (r.group, r.version, r.kind, r.plural),
                "{}",
                r
            );
        }
        check::<Pod>(Watched::Pods.watch());
        check::<Node>(Watched::Nodes.watch());
        check::<PriorityClass>(Watched::PriorityClasses.watch());
        check::<PodDisruptionBudget>(Watched::Budgets.watch());
        check::<Namespace>(Watched::Namespaces.watch());
        check::<PersistentVolumeClaim>(Watched::Claims.watch());
        check::<PersistentVolume>(Watched::Volumes.watch());
        check::<StorageClass>(Watched::StorageClasses.watch());
        check::<CSINode>(Watched::CsiNodes.watch());
        check::<Job>(Watched::Jobs.watch());
        check::<k8s_openapi::api::resource::v1::DeviceClass>(&caldera_api::calls::DEVICE_CLASSES);
        check::<k8s_openapi::api::resource::v1::ResourceSlice>(
            &caldera_api::calls::RESOURCE_SLICES,
        );
        check::<k8s_openapi::api::resource::v1::ResourceClaim>(
            &caldera_api::calls::RESOURCE_CLAIMS,
        );
        check::<k8s_openapi::api::resource::v1::ResourceClaimTemplate>(
            &caldera_api::calls::RESOURCE_CLAIM_TEMPLATES,
        );
        check::<caldera_api::ProvisioningRequest>(&caldera_api::calls::PROVISIONING_REQUESTS);
        check::<k8s_openapi::api::scheduling::v1alpha2::PodGroup>(
            &caldera_api::calls::NATIVE_PODGROUPS,
        );
        check::<k8s_openapi::api::scheduling::v1alpha2::Workload>(
            &caldera_api::calls::NATIVE_WORKLOADS,
        );
        // Each kind fed to the index reads the resource its own entry names.
        fn check_fed<K: Fed>() {
            check::<K>(K::WATCH);
        }
        check_fed::<Node>();
        check_fed::<PriorityClass>();
        check_fed::<PodDisruptionBudget>();
        check_fed::<Namespace>();
        check_fed::<PersistentVolumeClaim>();
        check_fed::<PersistentVolume>();
        check_fed::<StorageClass>();
        check_fed::<CSINode>();
        check_fed::<Job>();
        check_fed::<k8s_openapi::api::resource::v1::DeviceClass>();
        check_fed::<k8s_openapi::api::resource::v1::ResourceSlice>();
        check_fed::<k8s_openapi::api::resource::v1::ResourceClaim>();
        check_fed::<k8s_openapi::api::resource::v1::ResourceClaimTemplate>();
        check_fed::<caldera_api::ProvisioningRequest>();
        check_fed::<k8s_openapi::api::scheduling::v1alpha2::PodGroup>();
        check_fed::<k8s_openapi::api::scheduling::v1alpha2::Workload>();
    }

    #[test]
    fn the_required_kinds_are_exactly_those_always_watched() {
        let required: Vec<&str> = WATCHES
            .iter()
            .filter(|w| w.need == Need::Required)
            .map(|w| w.resource.plural)
            .collect();
        let watched: Vec<&str> = Watched::ALL
            .iter()
            .map(|k| k.watch().resource.plural)
            .collect();
        assert_eq!(required, watched);
    }

    #[test]
    fn a_refusal_waits_minutes_a_failure_seconds() {
        let mut waits = vec![next(None, REFUSED)];
        for _ in 0..6 {
            waits.push(next(waits.last().copied(), REFUSED));
        }
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300]);
        let mut waits = vec![next(None, FAILED)];
        for _ in 0..6 {
            waits.push(next(waits.last().copied(), FAILED));
        }
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn only_a_403_is_a_refusal() {
        let status = |code: u16| {
            kube::Error::Api(
                kube::core::Status::failure("podgroups is forbidden", "Forbidden")
                    .with_code(code)
                    .boxed(),
            )
        };
        assert_eq!(
            refusal(&watcher::Error::InitialListFailed(status(403))),
            Some("podgroups is forbidden")
        );
        assert_eq!(
            refusal(&watcher::Error::InitialListFailed(status(500))),
            None
        );
        assert_eq!(refusal(&watcher::Error::WatchFailed(status(401))), None);
        assert!(refusal(&watcher::Error::WatchStartFailed(status(403))).is_some());
        assert!(refusal(&watcher::Error::NoResourceVersion).is_none());
    }
}
