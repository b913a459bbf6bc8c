//! Watches of APIs a cluster may not serve ([`caldera_api::calls::Need::Optional`]): a CRD
//! that may not be installed (Volcano's HyperNodes, cluster-autoscaler's ProvisioningRequests)
//! or a built-in alpha API behind a feature gate (Kubernetes' own `scheduling.k8s.io/v1alpha2`
//! Workloads and PodGroups). One helper for all of them: asked at start whether the API is
//! served; not served (a 404, or a group version without the resource) means nothing to watch
//! (and nothing logged per session); served means the kinds are marked served (sessions wait
//! for their first list, or their refusal) and their watches run ([`crate::watch::follow`]). A discovery request that fails otherwise (a timeout,
//! a 5xx, a 429) is no answer: it is asked again with backoff (1 s doubling to 30 s) in a task
//! of its own, so the other watches start meanwhile, and the watch starts once it is served.

use crate::Shared;
use caldera_api::calls::Watch;
use kube::Client;
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

/// Whether `kinds` are served, as far as known at once.
pub(crate) enum Start {
    /// Served: their watches are started.
    Served(Vec<tokio::task::JoinHandle<()>>),
    /// Not served: nothing to watch.
    NotServed,
    /// No answer yet (a discovery request failed otherwise than with a 404): a task asks again
    /// with backoff and starts the watches once they are served.
    Later(tokio::task::JoinHandle<()>),
}

impl Start {
    /// The tasks started, if any.
    pub(crate) fn tasks(self) -> Vec<tokio::task::JoinHandle<()>> {
        match self {
            Start::Served(t) => t,
            Start::Later(t) => vec![t],
            Start::NotServed => Vec::new(),
        }
    }
}

/// Asks once whether every one of `kinds` is served; when they are, marks them served and
/// calls `start` (which spawns their watches, [`crate::watch::spawn`]). Without an answer,
/// spawns a task that asks again with backoff and then does the same, so the caller goes on
/// starting the other watches. `start` builds the watches only when they are wanted (a
/// closure, so no watch future is built, and none sits in the caller's frame, before then).
pub(crate) async fn start_when_served<S>(
    shared: &Arc<Shared>,
    client: &Client,
    kinds: Vec<&'static Watch>,
    stop: &CancellationToken,
    start: S,
) -> Start
where
    S: FnOnce() -> Vec<tokio::task::JoinHandle<()>> + Send + 'static,
{
    let apis: Vec<(String, &'static str)> = kinds
        .iter()
        .map(|w| (w.resource.api_version(), w.resource.plural))
        .collect();
    let serve = {
        let shared = shared.clone();
        move || {
            let mut cluster = shared.lock_cluster();
            for w in &kinds {
                cluster.serve(w);
            }
        }
    };
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
        serve();
        return Start::Served(start());
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
                serve();
                for task in start() {
                    let _ = task.await;
                }
            }
            Some(false) => info!(apis = ?apis, "not served: nothing to watch"),
            None => {}
        }
    }))
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
