//! Watches of APIs a cluster may not serve: a CRD that may not be installed (Volcano's
//! HyperNodes, cluster-autoscaler's ProvisioningRequests) or a built-in alpha API behind a
//! feature gate (Kubernetes' own `scheduling.k8s.io/v1alpha2` Workloads and PodGroups). One
//! helper for all of them: asked at start whether the API is served; not served (a 404, or a
//! group version without the resource) means nothing to watch (and nothing logged per
//! session); served means a watch that lists, marks the kind synced and follows changes,
//! retrying with backoff, until stopped. A discovery request that fails otherwise (a timeout,
//! a 5xx, a 429) is no answer: it is asked again with backoff (1 s doubling to 30 s) in a task
//! of its own, so the other watches start meanwhile, and the watch starts once it is served.

use crate::cluster::Cluster;
use crate::Shared;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The first wait before asking again after a failed discovery request.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two discovery requests.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// What one discovery answer says: `Some(served)`, or `None` when it is no answer (the request
/// failed otherwise than with a 404) and must be asked again.
fn decide(answer: Result<bool, &kube::Error>) -> Option<bool> {
    match answer {
        Ok(served) => Some(served),
        Err(kube::Error::Api(s)) if s.code == 404 => Some(false),
        Err(_) => None,
    }
}

/// The wait after `delay`: doubled, at most [`MAX_RETRY`].
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(MAX_RETRY)
}

/// Asks `ask` until it answers ([`decide`]), waiting `first` and then twice as long each time
/// (at most [`MAX_RETRY`]) after a failure; `None` when stopped first.
async fn answer<F, Fut>(
    what: &str,
    mut ask: F,
    first: Duration,
    stop: &CancellationToken,
) -> Option<bool>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, kube::Error>>,
{
    let mut delay = first;
    loop {
        let result = ask().await;
        if let Some(served) = decide(result.as_ref().map(|b| *b)) {
            return Some(served);
        }
        if let Err(e) = &result {
            warn!(error = %e, "could not ask the API server whether it serves {what}; asking again in {delay:?}");
        }
        tokio::select! {
            _ = stop.cancelled() => return None,
            _ = tokio::time::sleep(delay) => {}
        }
        delay = next_delay(delay);
    }
}

/// One discovery request: whether the API server serves `plural` in `group_version`.
async fn ask(client: &Client, group_version: &str, plural: &str) -> Result<bool, kube::Error> {
    let list = client.list_api_group_resources(group_version).await?;
    Ok(list.resources.iter().any(|r| r.name == plural))
}

/// Whether every one of `apis` (`group/version`, plural) is served, asking each again with
/// backoff until it answers; `None` when stopped first.
async fn all_served(
    client: &Client,
    apis: &[(String, &'static str)],
    first: Duration,
    stop: &CancellationToken,
) -> Option<bool> {
    for (gv, plural) in apis {
        let what = format!("{gv} {plural}");
        if !answer(&what, || ask(client, gv, plural), first, stop).await? {
            return Some(false);
        }
    }
    Some(true)
}

/// Whether `apis` are served, as far as known at once.
pub(crate) enum Start {
    /// Served: `run` is started.
    Served(tokio::task::JoinHandle<()>),
    /// Not served: nothing to watch.
    NotServed,
    /// No answer yet (a discovery request failed otherwise than with a 404): a task asks again
    /// with backoff and starts `run` once they are served.
    Later(tokio::task::JoinHandle<()>),
}

impl Start {
    /// The task started, if any.
    pub(crate) fn task(self) -> Option<tokio::task::JoinHandle<()>> {
        match self {
            Start::Served(t) | Start::Later(t) => Some(t),
            Start::NotServed => None,
        }
    }
}

/// Asks once whether every one of `apis` is served; when they are, spawns `run` (which marks
/// the kind served and runs its watches). Without an answer, spawns a task that asks again with
/// backoff and then does the same, so the caller goes on starting the other watches.
pub(crate) async fn start_when_served<R>(
    client: &Client,
    apis: Vec<(String, &'static str)>,
    stop: &CancellationToken,
    run: R,
) -> Start
where
    R: Future<Output = ()> + Send + 'static,
{
    let mut first_try = Vec::new();
    for (gv, plural) in &apis {
        let result = ask(client, gv, plural).await;
        match decide(result.as_ref().map(|b| *b)) {
            Some(true) => first_try.push(true),
            Some(false) => return Start::NotServed,
            None => {
                if let Err(e) = &result {
                    warn!(error = %e, "could not ask the API server whether it serves {gv} {plural}; asking again with backoff meanwhile");
                }
                break;
            }
        }
    }
    if first_try.len() == apis.len() {
        return Start::Served(tokio::spawn(run));
    }
    let client = client.clone();
    let stop = stop.clone();
    Start::Later(tokio::spawn(async move {
        // The first request failed: ask again after FIRST_RETRY, then 2 s, 4 s, ...
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(FIRST_RETRY) => {}
        }
        match all_served(&client, &apis, next_delay(FIRST_RETRY), &stop).await {
            Some(true) => {
                info!(apis = ?apis, "served after all: starting the watch");
                run.await;
            }
            Some(false) => info!(apis = ?apis, "not served: nothing to watch"),
            None => {}
        }
    }))
}

/// How an event of an optional kind lands in the cluster state (run under the cluster lock). A
/// closure, so it can carry data such as the kind it is for.
pub(crate) type Handler<T> = Box<dyn Fn(&mut Cluster, T) + Send + Sync>;

/// One optional kind: what the watch lists and how each event lands in the cluster state.
/// The functions run under the cluster lock.
pub(crate) struct OptionalWatch<K> {
    /// The kind, for logs (`HyperNode`).
    pub what: String,
    /// The objects to list and watch.
    pub api: Api<K>,
    /// Watch options (a label selector).
    pub config: watcher::Config,
    /// The first list, and every relist: replaces every object of the kind and marks it
    /// synced.
    pub reset: Handler<Vec<K>>,
    /// An object added or changed.
    pub apply: Handler<K>,
    /// An object deleted.
    pub delete: Handler<K>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn status(code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(&format!("code {code}"), "")
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn only_a_404_or_a_list_is_an_answer() {
        assert_eq!(decide(Ok(true)), Some(true));
        assert_eq!(decide(Ok(false)), Some(false));
        assert_eq!(decide(Err(&status(404))), Some(false));
        for code in [500, 503, 429, 403] {
            assert_eq!(decide(Err(&status(code))), None, "{code}");
        }
    }

    #[test]
    fn the_wait_doubles_from_one_second_to_thirty() {
        let mut waits = vec![FIRST_RETRY];
        for _ in 0..6 {
            waits.push(next_delay(*waits.last().expect("one")));
        }
        let secs: Vec<u64> = waits.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[tokio::test]
    async fn a_failing_discovery_is_asked_again_until_it_answers() {
        let stop = CancellationToken::new();
        // A 503 and a 429, then the list: served, after three requests.
        let calls = Cell::new(0);
        let served = answer(
            "x",
            || {
                calls.set(calls.get() + 1);
                let n = calls.get();
                async move {
                    match n {
                        1 => Err(status(503)),
                        2 => Err(status(429)),
                        _ => Ok(true),
                    }
                }
            },
            Duration::ZERO,
            &stop,
        )
        .await;
        assert_eq!((served, calls.get()), (Some(true), 3));
        // A 404 is "not served" at once.
        let calls = Cell::new(0);
        let served = answer(
            "x",
            || {
                calls.set(calls.get() + 1);
                async { Err(status(404)) }
            },
            Duration::ZERO,
            &stop,
        )
        .await;
        assert_eq!((served, calls.get()), (Some(false), 1));
        // Stopped while failing: no answer.
        stop.cancel();
        let served = answer("x", || async { Err(status(500)) }, Duration::ZERO, &stop).await;
        assert_eq!(served, None);
    }
}
