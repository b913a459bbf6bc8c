//! `caldera bench cold-start`: how long a freshly started scheduler takes to place a new job
//! on a big cluster (the in-process API stand-in).
//!
//! Setup (not timed): the stand-in is filled straight through its store with `nodes` nodes
//! and `pods` bound, Running pods — the synthetic cluster of `caldera bench session`: half
//! Caldera's, in Running gangs of 8 with their PodGroups, half another scheduler's. Then a
//! first runtime runs until it has nothing left to write (the previous leader: PodGroup and
//! Queue statuses are as Caldera leaves them) and is stopped.
//!
//! Timed: a new runtime is started with a fresh client (what a process start amounts to; the
//! shipped config, leader election off), a one-pod job (a PodGroup of one and its pod) is
//! created right after, and the clock stops when the store shows the pod bound.

use crate::live::Result;
use serde::Serialize;
use std::time::Duration;

/// What to run.
#[derive(Debug, Clone)]
pub struct ColdStartOptions {
    /// Nodes (8 GPUs each).
    pub nodes: usize,
    /// Existing pods, bound and Running.
    pub pods: usize,
    /// Seed of the synthetic cluster.
    pub seed: u64,
    /// The previous leader is stopped once it has written nothing for this long.
    pub settle: Duration,
    /// Give up after this long.
    pub timeout: Duration,
}

impl Default for ColdStartOptions {
    fn default() -> Self {
        ColdStartOptions {
            nodes: 5000,
            pods: 140_000,
            seed: 1,
            settle: Duration::from_secs(2),
            timeout: Duration::from_secs(900),
        }
    }
}

/// Figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct ColdStartResult {
    /// Nodes.
    pub nodes: usize,
    /// Existing pods.
    pub pods: usize,
    /// Existing PodGroups.
    pub podgroups: usize,
    /// Start → the new job's pod bound.
    pub cold_start_seconds: f64,
    /// Start → every watched kind listed (`/readyz`'s "caches synced").
    pub caches_synced_seconds: f64,
    /// Start → the first session done.
    pub first_session_seconds: f64,
    /// The same objects listed bare, with a fresh client, as the runtime's watches list them
    /// (pages of 500, `limit`/`continue`, into the typed objects): nodes, pods, PodGroups and
    /// Queues, one kind after another. Measured before the cold start, in the same run.
    pub bare_list_seconds: f64,
    /// cold_start_seconds / bare_list_seconds (target ≤ 1.2).
    pub cold_start_ratio: f64,
    /// Filling the stand-in and the previous leader's run (not part of the figures above).
    pub setup_seconds: f64,
}

/// Runs the benchmark.
#[cfg(feature = "stand-in")]
pub async fn run(opts: &ColdStartOptions) -> Result<ColdStartResult> {
    imp::run(opts).await
}

/// Without the stand-in (the shipped binary), says so: this benchmark runs on it only.
#[cfg(not(feature = "stand-in"))]
pub async fn run(_opts: &ColdStartOptions) -> Result<ColdStartResult> {
    Err(crate::live::Error::NoStandIn)
}

/// The benchmark on the stand-in (`stand-in` feature).
#[cfg(feature = "stand-in")]
mod imp {
    use super::{ColdStartOptions, ColdStartResult};
    use crate::gen::{self, Shape};
    use crate::live::{self, Backend, Error, Result};
    use caldera_runtime::{ConfigSource, Options, Runtime};
    use caldera_testkit::apiserver::{ApiServer, Store};
    use serde::Serialize;
    use serde_json::{json, Value};
    use std::time::Duration;
    use tokio::time::Instant;

    /// Runs the benchmark.
    pub(super) async fn run(opts: &ColdStartOptions) -> Result<ColdStartResult> {
        let setup = Instant::now();
        // Nobody resumes a watch from an old resourceVersion here: keep little history.
        let backend = Backend::stand_in(caldera_testkit::apiserver::Options {
            history_window: 10_000,
            ..caldera_testkit::apiserver::Options::default()
        })
        .await?;
        let Some(server) = backend.stand_in_server() else {
            return Err(Error::Other("cold-start runs on the stand-in only".into()));
        };
        let shape = Shape {
            nodes: opts.nodes.max(1),
            running_pods: opts.pods,
            pending_pods: 0,
            queues: 10,
            seed: opts.seed,
        };
        let store = server.store().clone();
        let podgroups = tokio::task::spawn_blocking(move || fill(&store, &shape))
            .await
            .map_err(|e| Error::Other(format!("filling the stand-in: {e}")))??;

        // The previous leader: runs until it has nothing left to write.
        let previous = Runtime::start(options(), server.kube_client()?).await?;
        live::poll(
            opts.timeout,
            Duration::from_millis(20),
            "the previous leader's first session",
            || previous.sessions() > 0,
        )
        .await?;
        let _ = live::settle(&backend, opts.settle, opts.timeout).await;
        previous.shutdown().await;
        let setup_seconds = setup.elapsed().as_secs_f64();

        let bare = Instant::now();
        bare_list(server.kube_client()?).await?;
        let bare_list_seconds = bare.elapsed().as_secs_f64();

        // The cold start.
        let started = Instant::now();
        let handle = Runtime::start(options(), server.kube_client()?).await?;
        let store = server.store();
        create(store, "podgroups", gen_podgroup())?;
        create(store, "pods", gen_probe())?;
        let (mut synced, mut session, mut bound) = (None, None, None);
        live::poll(
            opts.timeout,
            Duration::from_millis(2),
            "the new job's bind",
            || {
                // Each instant is read after its check: the check waits for the cluster's lock,
                // which the watches hold while they convert a first list.
                if synced.is_none() && handle.is_synced() {
                    synced = Some(Instant::now());
                }
                if session.is_none() && handle.sessions() > 0 {
                    session = Some(Instant::now());
                }
                if bound.is_none() && probe_bound(server) {
                    bound = Some(Instant::now());
                }
                bound.is_some()
            },
        )
        .await?;
        handle.shutdown().await;
        let secs = |t: Option<Instant>| t.map_or(0.0, |t| (t - started).as_secs_f64());
        Ok(ColdStartResult {
            nodes: opts.nodes,
            pods: opts.pods,
            podgroups,
            cold_start_seconds: secs(bound),
            caches_synced_seconds: secs(synced),
            first_session_seconds: secs(session),
            bare_list_seconds,
            cold_start_ratio: secs(bound) / bare_list_seconds.max(1e-9),
            setup_seconds,
        })
    }

    const PROBE_NS: &str = "cold-start";

    /// Lists every object of the kinds that hold the cluster's bulk, page by page, as a
    /// watch's first list does (kube-runtime's watcher: pages of 500).
    async fn bare_list(client: kube::Client) -> Result<()> {
        use k8s_openapi::api::core::v1::{Node, Pod};
        async fn all<K>(api: kube::Api<K>) -> Result<usize>
        where
            K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
        {
            let mut params = kube::api::ListParams::default().limit(500);
            let mut n = 0;
            loop {
                let page = api
                    .list(&params)
                    .await
                    .map_err(|e| Error::Other(format!("bare list: {e}")))?;
                n += page.items.len();
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => return Ok(n),
                }
            }
        }
        all::<Node>(kube::Api::all(client.clone())).await?;
        all::<Pod>(kube::Api::all(client.clone())).await?;
        all::<caldera_api::PodGroup>(kube::Api::all(client.clone())).await?;
        all::<caldera_api::Queue>(kube::Api::all(client)).await?;
        Ok(())
    }

    fn options() -> Options {
        Options {
            config: ConfigSource::Fixed(caldera_config::SchedulerConfig::default()),
            leader_election: None,
            metrics_addr: None,
            ..Options::default()
        }
    }

    fn gen_podgroup() -> Value {
        live::podgroup(PROBE_NS, "probe", 1)
    }

    fn gen_probe() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe-0", "namespace": PROBE_NS,
                         "annotations": {"scheduling.k8s.io/group-name": "probe"}},
            "spec": {"schedulerName": "caldera", "containers": [{"name": "main", "image": "worker",
                "resources": {"requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}}}]}
        })
    }

    fn probe_bound(server: &ApiServer) -> bool {
        server
            .store()
            .get("pods", PROBE_NS, "probe-0")
            .is_some_and(|p| p["spec"]["nodeName"].is_string())
    }

    fn create(store: &Store, kind: &str, o: Value) -> Result<Value> {
        let what = format!("{kind} {}", o["metadata"]["name"]);
        store
            .create(kind, o)
            .map_err(|source| Error::Store { what, source })
    }

    fn to_json<T: Serialize>(o: &T) -> Result<Value> {
        serde_json::to_value(o)
            .map_err(|e| Error::Other(format!("encoding a generated object: {e}")))
    }

    /// Writes the synthetic cluster into the store: nodes, queues, PodGroups (status `Running`)
    /// and pods (created, then marked Running as a kubelet would). Returns the PodGroup count.
    fn fill(store: &Store, shape: &Shape) -> Result<usize> {
        let objects = gen::cluster(shape);
        for n in &objects.nodes {
            create(store, "nodes", to_json(n)?)?;
        }
        for q in &objects.queues {
            create(store, "queues", to_json(q)?)?;
        }
        for pg in &objects.podgroups {
            let v = create(store, "podgroups", to_json(pg)?)?;
            let (ns, name) = (
                v["metadata"]["namespace"].as_str().unwrap_or_default(),
                v["metadata"]["name"].as_str().unwrap_or_default(),
            );
            store
                .modify("podgroups", ns, name, |o| {
                    o["status"] = json!({"phase": "Running"});
                })
                .map_err(|source| Error::Store {
                    what: format!("podgroup {ns}/{name}"),
                    source,
                })?;
        }
        for p in &objects.pods {
            let v = create(store, "pods", to_json(p)?)?;
            let (ns, name) = (
                v["metadata"]["namespace"].as_str().unwrap_or_default(),
                v["metadata"]["name"].as_str().unwrap_or_default(),
            );
            store
                .modify("pods", ns, name, |o| {
                    o["status"] = json!({
                        "phase": "Running",
                        "conditions": [
                            {"type": "PodScheduled", "status": "True"},
                            {"type": "Ready", "status": "True"}
                        ]
                    });
                })
                .map_err(|source| Error::Store {
                    what: format!("pod {ns}/{name}"),
                    source,
                })?;
        }
        Ok(objects.podgroups.len())
    }
}
