//! `caldera bench e2e`: end-to-end bind throughput of the real runtime against an API server
//! (the in-process stand-in, or a real cluster), compared with a plain client that only binds.
//!
//! 1. Setup (not timed): `nodes` nodes of 8 GPUs; the runtime started in-process (leader
//!    election off, the shipped config, scheduler name [`SCHEDULER`]) and synced.
//! 2. Caldera (timed): `gangs` PodGroups of `gang_size` one-GPU pods are created, gang by gang
//!    (PodGroup first). A watch of the namespace sees every pod get its node. The window runs
//!    from the first pod's creation to the last bind seen; the API requests of the runtime are
//!    counted from the first creation until no write has been made for `settle` (so the
//!    `Scheduled` events and PodGroup statuses that follow the last binds are counted too).
//! 3. Raw (timed): the runtime is stopped; a fresh set of as many pods is created (setup, not
//!    timed), each with a node decided beforehand, and a plain client POSTs `pods/binding`
//!    for them with the same concurrency (`bindConcurrency`) and the same client-side token
//!    bucket ([`caldera_binder::TokenBucket`], `--kube-api-qps`/`--kube-api-burst`) as the
//!    runtime's binder. Its rate is what the API server allows a binder at those limits.
//!
//! `ratio` = `bind_rate` / `raw_bind_rate`.
//!
//! With `backlog`, the gangs are created before the runtime starts (as after an outage or a
//! deploy), and the window runs from the runtime's caches being synced to the last bind;
//! `synced_to_first_bind_seconds` is then how long a fresh scheduler takes to start binding.
//!
//! What else is measured: the writes between the first and the last bind seen (the binds
//! should be nearly all of them: events and statuses follow behind), when the last event and
//! the last write of any kind were seen, and at the end the bench reads back what the plans
//! must have written — every PodGroup `Running` with `Scheduled=True`, a `Scheduled` event
//! for every pod (counting the `series.count` of folded ones) unless `podScheduledEvents` is
//! off, a `Scheduled` event for every PodGroup, the Queue's `running` count — and lists what
//! is missing.

use crate::live::{self, Backend, Counts, Error, Kind, Result, SET_LABEL};
use caldera_binder::TokenBucket;
use caldera_config::SchedulerConfig;
use caldera_model::Bind;
use caldera_runtime::{ConfigSource, Options, Runtime};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The scheduler name of the benchmark's pods (so that a Caldera already running in a real
/// cluster leaves them alone).
pub const SCHEDULER: &str = "caldera-bench";
/// The scheduler name of the raw binder's pods (no scheduler looks at them).
pub const RAW_SCHEDULER: &str = "caldera-bench-raw";

/// What to run.
#[derive(Debug, Clone)]
pub struct E2eOptions {
    /// Nodes (8 GPUs each).
    pub nodes: usize,
    /// Gangs.
    pub gangs: usize,
    /// One-GPU pods per gang (`minMember` = this).
    pub gang_size: usize,
    /// Binds in flight at once (default: the config's `bindConcurrency`, 64).
    pub bind_concurrency: Option<usize>,
    /// Client-side rate limit of the runtime's writes and of the raw binder (0: none).
    pub kube_api_qps: f64,
    /// Its burst.
    pub kube_api_burst: u32,
    /// Counting ends once no write was made for this long after the last bind.
    pub settle: Duration,
    /// Give up waiting for binds (or for the caches to sync) after this long.
    pub timeout: Duration,
    /// Create the gangs before the runtime starts; the window starts at caches synced.
    pub backlog: bool,
    /// `podScheduledEvents` of the runtime's config.
    pub pod_scheduled_events: bool,
}

impl Default for E2eOptions {
    fn default() -> Self {
        E2eOptions {
            nodes: 1000,
            gangs: 1000,
            gang_size: 8,
            bind_concurrency: None,
            kube_api_qps: 1000.0,
            kube_api_burst: 2000,
            settle: Duration::from_secs(2),
            timeout: Duration::from_secs(600),
            backlog: false,
            pod_scheduled_events: true,
        }
    }
}

/// Figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct E2eResult {
    /// `stand-in` or `cluster`.
    pub target: String,
    /// Always `false`: the runtime leads unconditionally (no Lease).
    pub leader_election: bool,
    /// Nodes.
    pub nodes: usize,
    /// Gangs.
    pub gangs: usize,
    /// Pods per gang.
    pub gang_size: usize,
    /// Pods bound by Caldera (= pods created).
    pub pods: usize,
    /// Binds in flight at most (the runtime's and the raw binder's).
    pub bind_concurrency: usize,
    /// Client-side QPS limit (0: none).
    pub kube_api_qps: f64,
    /// Client-side burst.
    pub kube_api_burst: u32,
    /// Whether the gangs were created before the runtime started.
    pub backlog: bool,
    /// `podScheduledEvents` of the runtime's config.
    pub pod_scheduled_events: bool,
    /// Time to create all the gangs (without `backlog`, the window starts with the first pod).
    pub creation_seconds: f64,
    /// With `backlog`: runtime started → every watched kind listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_to_synced_seconds: Option<f64>,
    /// With `backlog`: caches synced → first bind seen (target ≤ 0.5 s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synced_to_first_bind_seconds: Option<f64>,
    /// Window start (first pod created; with `backlog`, caches synced) → first bind seen.
    pub first_create_to_first_bind_seconds: f64,
    /// Window start → last bind seen.
    pub first_create_to_last_bind_seconds: f64,
    /// pods / first_create_to_last_bind_seconds.
    pub bind_rate: f64,
    /// Pods the raw binder bound.
    pub raw_pods: usize,
    /// First raw bind sent → last answered.
    pub raw_seconds: f64,
    /// raw_pods / raw_seconds.
    pub raw_bind_rate: f64,
    /// Raw binds that failed.
    pub raw_errors: usize,
    /// bind_rate / raw_bind_rate.
    pub ratio: f64,
    /// Every API request of the runtime from the first creation until settled, per bound pod.
    pub api_requests_per_bound_pod: f64,
    /// Write requests of the runtime (creates, patches, …) from the first creation until
    /// settled, per bound pod.
    pub api_writes_per_bound_pod: f64,
    /// The same, counting only until the last bind was seen.
    pub api_writes_per_bound_pod_until_last_bind: f64,
    /// Writes of the runtime from the first bind seen to the last, per pod bound in between
    /// (target ≤ 1.1: binds, and little else).
    pub bind_window_writes_per_bound_pod: f64,
    /// Those writes that were not binds.
    pub bind_window_other_writes: u64,
    /// Last bind seen → last event written (0 if none came after).
    pub events_done_seconds: f64,
    /// Window start → last write of any kind.
    pub all_written_seconds: f64,
    /// Event objects the runtime created.
    pub events_written: u64,
    /// Events of the plans they stand for (more when folded).
    pub events_represented: u64,
    /// Events folded into another (the event queue was over its bound).
    pub events_folded: u64,
    /// Events dropped (the event queue's memory cap).
    pub events_dropped: u64,
    /// Status writes replaced by a newer one to the same object before they were sent.
    pub status_coalesced: u64,
    /// Status writes and events sent under the token share while binds were queued.
    pub share_writes: u64,
    /// Whether every event and status the plans asked for is there at the end.
    pub plan_writes_present: bool,
    /// What is missing (at most 20 lines).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_writes: Vec<String>,
    /// The writes by kind (`verb resource[.group][/subresource]`), until settled.
    pub writes: BTreeMap<String, u64>,
    /// `stand-in` (the server's counters) or `client` (a counting layer in the runtime's
    /// client; kube's internal retries are not seen).
    pub counts_source: String,
    /// Sessions the runtime ran in the window.
    pub sessions: u64,
    /// The most binds the runtime had in flight at once.
    pub max_binds_in_flight: usize,
    /// What could not be cleaned up on a real cluster (empty on the stand-in).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cleanup_errors: Vec<String>,
}

/// Runs the benchmark on the in-process stand-in.
#[cfg(feature = "stand-in")]
pub async fn run_stand_in(opts: &E2eOptions) -> Result<E2eResult> {
    let backend = Backend::stand_in(caldera_testkit::apiserver::Options::default()).await?;
    run(opts, &backend).await
}

/// Without the stand-in (the shipped binary), says so.
#[cfg(not(feature = "stand-in"))]
pub async fn run_stand_in(_opts: &E2eOptions) -> Result<E2eResult> {
    Err(Error::NoStandIn)
}

/// Runs the benchmark on `backend`. On a real cluster everything is created in a namespace
/// of its own (`caldera-bench-<id>`) and on nodes named `caldera-bench-<id>-<n>`, all deleted
/// afterwards (also when the run fails).
pub async fn run(opts: &E2eOptions, backend: &Backend) -> Result<E2eResult> {
    if opts.nodes == 0 || opts.gangs == 0 || opts.gang_size == 0 {
        return Err(Error::Other(
            "--nodes, --gangs and --gang-size must be at least 1".into(),
        ));
    }
    let pods = opts.gangs * opts.gang_size;
    if pods > opts.nodes * 8 {
        return Err(Error::Other(format!(
            "{pods} one-GPU pods do not fit {} nodes of 8 GPUs; use --nodes {} or more",
            opts.nodes,
            pods.div_ceil(8)
        )));
    }
    let run_id = match backend {
        #[cfg(feature = "stand-in")]
        Backend::StandIn(_) => "standin".to_string(),
        Backend::Cluster(_) => live::run_id(),
    };
    let ns = format!("caldera-bench-{run_id}");
    let mut result = match live::prepare_namespace(backend, &ns, &run_id).await {
        Ok(()) => measure(opts, backend, &ns, &run_id).await,
        Err(e) => Err(e),
    };
    let errors = live::clean_up(backend, &ns, &run_id).await;
    if let Ok(r) = result.as_mut() {
        r.cleanup_errors = errors;
    } else if !errors.is_empty() {
        result = result.map_err(|e| Error::Other(format!("{e}; cleanup: {}", errors.join("; "))));
    }
    result
}

fn node_name(run: &str, i: usize) -> String {
    format!("caldera-bench-{run}-{i:05}")
}

async fn measure(opts: &E2eOptions, backend: &Backend, ns: &str, run: &str) -> Result<E2eResult> {
    let config = SchedulerConfig::default();
    let concurrency = opts
        .bind_concurrency
        .unwrap_or(config.bind_concurrency)
        .max(1);
    let pods = opts.gangs * opts.gang_size;
    let setup_concurrency = 32;

    // Nodes.
    let nodes: Vec<Value> = (0..opts.nodes)
        .map(|i| live::node(&node_name(run, i), run))
        .collect();
    backend
        .create_all(Kind::Node, nodes, setup_concurrency)
        .await?;

    // The bind watch, listed before anything is counted.
    let (mut progress, watch_task) =
        live::watch_binds(backend.client()?, ns, &format!("{SET_LABEL}=caldera"));
    live::wait_progress(&mut progress, opts.timeout, "the bind watch to list", |p| {
        p.listed
    })
    .await?;

    let mut objects = Vec::with_capacity(opts.gangs);
    for g in 0..opts.gangs {
        let name = format!("gang-{g:05}");
        let members: Vec<Value> = (0..opts.gang_size)
            .map(|m| {
                live::pod(
                    ns,
                    &format!("{name}-{m}"),
                    SCHEDULER,
                    "caldera",
                    Some(&name),
                )
            })
            .collect();
        objects.push((live::podgroup(ns, &name, opts.gang_size), members));
    }

    let mut config = config;
    config.pod_scheduled_events = opts.pod_scheduled_events;
    let options = Options {
        config: ConfigSource::Fixed(config),
        scheduler_names: vec![SCHEDULER.to_string()],
        leader_election: None,
        metrics_addr: None,
        kube_api_qps: opts.kube_api_qps,
        kube_api_burst: opts.kube_api_burst,
        bind_concurrency: Some(concurrency),
        ..Options::default()
    };
    let first_bind = |progress: &mut tokio::sync::watch::Receiver<live::BindProgress>| {
        let mut progress = progress.clone();
        async move {
            let p = live::wait_progress(&mut progress, opts.timeout, "the first bind", |p| {
                p.bound >= 1
            })
            .await?;
            Ok::<_, Error>((p, backend.counts()))
        }
    };
    let (handle, before, started, creation_seconds, synced, at_first, sessions_before) = if opts
        .backlog
    {
        // The gangs first; then a fresh runtime, timed from its start.
        let created_at = Instant::now();
        create_gangs(backend, objects).await?;
        let creation_seconds = created_at.elapsed().as_secs_f64();
        let before = backend.counts();
        let launched = Instant::now();
        let handle = Runtime::start(options, backend.counted_client()?).await?;
        let waiting = first_bind(&mut progress);
        let synced = async {
            live::poll(
                opts.timeout,
                Duration::from_millis(2),
                "the runtime's caches to sync",
                || handle.is_synced(),
            )
            .await?;
            Ok::<_, Error>(Instant::now())
        };
        let (synced, at_first) = tokio::try_join!(synced, waiting)?;
        let start_to_synced = (synced - launched).as_secs_f64();
        (
            handle,
            before,
            synced,
            creation_seconds,
            Some(start_to_synced),
            at_first,
            0,
        )
    } else {
        // The runtime, synced and through its first session.
        let handle = Runtime::start(options, backend.counted_client()?).await?;
        live::poll(
            opts.timeout,
            Duration::from_millis(10),
            "the runtime's caches to sync and its first session",
            || handle.is_synced() && handle.sessions() > 0,
        )
        .await?;
        // Whatever the first sessions write (the Queue `default`, its status) is not the gangs'.
        let _ = live::settle(backend, Duration::from_millis(300), Duration::from_secs(10)).await;
        let sessions_before = handle.sessions();
        let before = backend.counts();
        let started = Instant::now();
        let waiting = first_bind(&mut progress);
        let creating = async {
            create_gangs(backend, objects).await?;
            Ok::<_, Error>(started.elapsed().as_secs_f64())
        };
        let (creation_seconds, at_first) = tokio::try_join!(creating, waiting)?;
        (
            handle,
            before,
            started,
            creation_seconds,
            None,
            at_first,
            sessions_before,
        )
    };

    // Caldera: wait for the last bind, then for the writes to settle.
    let seen = live::wait_progress(&mut progress, opts.timeout, "every pod to be bound", |p| {
        p.bound >= pods
    })
    .await?;
    let at_last_bind = backend.counts();
    let settled = live::settle(backend, opts.settle, opts.settle * 10 + opts.timeout / 10).await;
    let sessions = handle.sessions() - sessions_before;
    let max_binds_in_flight = handle.binder().max_in_flight();
    let stats = handle.binder().stats();
    handle.shutdown().await;
    watch_task.abort();
    let missing = check_plan_writes(backend, ns, opts).await?;
    let first = seen
        .first
        .map_or(0.0, |t| t.saturating_duration_since(started).as_secs_f64());
    let last = seen
        .last
        .map_or(0.0, |t| t.saturating_duration_since(started).as_secs_f64());
    let window = settled.counts.since(&before);
    let until_last = at_last_bind.since(&before);
    let (first_progress, at_first_bind) = at_first;
    let bind_window = at_last_bind.since(&at_first_bind);
    let bind_window_binds = bind_window
        .writes_by_kind()
        .get("create pods/binding")
        .copied()
        .unwrap_or(0);
    let bound_in_window = seen.bound.saturating_sub(first_progress.bound);
    let last_bind = seen.last.unwrap_or(started);
    let events_done = settled.last_of("events").map_or(0.0, |t| {
        t.saturating_duration_since(last_bind).as_secs_f64()
    });
    let all_written = settled
        .last_write
        .map_or(last, |t| t.saturating_duration_since(started).as_secs_f64());

    // Raw: a fresh set of pods, each with a node decided beforehand, bound by a plain client.
    let raw_objects: Vec<Value> = (0..pods)
        .map(|i| live::pod(ns, &format!("raw-{i:06}"), RAW_SCHEDULER, "raw", None))
        .collect();
    let created = backend
        .create_all(Kind::Pod, raw_objects, setup_concurrency)
        .await?;
    let mut binds: Vec<Bind> = created.iter().map(|p| raw_bind(p, run)).collect();
    binds.sort_by(|a, b| a.pod.name.cmp(&b.pod.name));
    for (i, b) in binds.iter_mut().enumerate() {
        b.node = node_name(run, (i / 8) % opts.nodes).into();
    }
    let raw = raw_binds(
        backend.client()?,
        binds,
        concurrency,
        opts.kube_api_qps,
        opts.kube_api_burst,
    )
    .await;

    let bind_rate = pods as f64 / last.max(1e-9);
    let raw_bind_rate = raw.bound as f64 / raw.seconds.max(1e-9);
    Ok(E2eResult {
        target: backend.name().to_string(),
        leader_election: false,
        nodes: opts.nodes,
        gangs: opts.gangs,
        gang_size: opts.gang_size,
        pods: seen.bound,
        bind_concurrency: concurrency,
        kube_api_qps: opts.kube_api_qps,
        kube_api_burst: opts.kube_api_burst,
        backlog: opts.backlog,
        pod_scheduled_events: opts.pod_scheduled_events,
        creation_seconds,
        start_to_synced_seconds: synced,
        synced_to_first_bind_seconds: opts.backlog.then_some(first),
        first_create_to_first_bind_seconds: first,
        first_create_to_last_bind_seconds: last,
        bind_rate,
        raw_pods: raw.bound,
        raw_seconds: raw.seconds,
        raw_bind_rate,
        raw_errors: raw.errors,
        ratio: bind_rate / raw_bind_rate.max(1e-9),
        api_requests_per_bound_pod: per_pod(&window, Counts::total, seen.bound),
        api_writes_per_bound_pod: per_pod(&window, Counts::writes, seen.bound),
        api_writes_per_bound_pod_until_last_bind: per_pod(&until_last, Counts::writes, seen.bound),
        bind_window_writes_per_bound_pod: per_pod(&bind_window, Counts::writes, bound_in_window),
        bind_window_other_writes: bind_window.writes().saturating_sub(bind_window_binds),
        events_done_seconds: events_done,
        all_written_seconds: all_written,
        events_written: stats.events_written,
        events_represented: stats.events_represented,
        events_folded: stats.events_folded,
        events_dropped: stats.events_dropped,
        status_coalesced: stats.status_coalesced,
        share_writes: stats.share_writes,
        plan_writes_present: missing.is_empty(),
        missing_writes: missing,
        writes: window.writes_by_kind(),
        counts_source: backend.counts_source().to_string(),
        sessions,
        max_binds_in_flight,
        cleanup_errors: Vec::new(),
    })
}

/// What the plans must have written, read back: every PodGroup `Running` with
/// `Scheduled=True` and its `Scheduled` event, every pod's `Scheduled` event (unless
/// `podScheduledEvents` is off; a folded event counts `series.count`), and the Queue's
/// `running` count. Returns what is missing, at most 20 lines.
async fn check_plan_writes(backend: &Backend, ns: &str, opts: &E2eOptions) -> Result<Vec<String>> {
    use k8s_openapi::api::events::v1::Event as KubeEvent;
    use kube::api::{Api, DynamicObject, ListParams};
    let client = backend.client()?;
    let kube_err = |what: &'static str| {
        move |source| Error::Kube {
            what: what.to_string(),
            source,
        }
    };
    let events: Api<KubeEvent> = Api::namespaced(client.clone(), ns);
    let events = events
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing the events"))?
        .items;
    let podgroups: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), ns, &Kind::PodGroup.api_resource());
    let podgroups = podgroups
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing the PodGroups"))?
        .items;
    let queue = live::get_queue(&client, caldera_api::DEFAULT_QUEUE)
        .await
        .map_err(kube_err("reading the Queue default"))?;

    // Events the plans asked for, per gang: pod `Scheduled` (counted) and PodGroup `Scheduled`.
    let mut pod_scheduled: BTreeMap<String, u64> = BTreeMap::new();
    let mut group_scheduled: BTreeMap<String, u64> = BTreeMap::new();
    for e in &events {
        if e.reason.as_deref() != Some("Scheduled") {
            continue;
        }
        let Some(about) = e.regarding.as_ref() else {
            continue;
        };
        let name = about.name.clone().unwrap_or_default();
        let count = e
            .series
            .as_ref()
            .map_or(1, |s| u64::try_from(s.count).unwrap_or(0));
        match about.kind.as_deref() {
            Some("Pod") => {
                let gang = name.rsplit_once('-').map_or(name.as_str(), |(g, _)| g);
                *pod_scheduled.entry(gang.to_string()).or_default() += count;
            }
            Some("PodGroup") => *group_scheduled.entry(name).or_default() += count,
            _ => {}
        }
    }
    let mut missing = Vec::new();
    let mut found = 0usize;
    for pg in &podgroups {
        let name = pg.metadata.name.clone().unwrap_or_default();
        if !name.starts_with("gang-") {
            continue;
        }
        found += 1;
        let status = &pg.data["status"];
        let scheduled = status["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Scheduled" && c["status"] == "True")
        });
        if status["phase"] != "Running" || !scheduled {
            missing.push(format!(
                "PodGroup {name}: phase {} and Scheduled=True wanted, got {status}",
                status["phase"]
            ));
        }
        if group_scheduled.get(&name).copied().unwrap_or(0) == 0 {
            missing.push(format!("PodGroup {name}: no Scheduled event"));
        }
        let pods = pod_scheduled.get(&name).copied().unwrap_or(0);
        if opts.pod_scheduled_events && pods != opts.gang_size as u64 {
            missing.push(format!(
                "PodGroup {name}: {pods} pod Scheduled events, {} wanted",
                opts.gang_size
            ));
        }
        if !opts.pod_scheduled_events && pods != 0 {
            missing.push(format!(
                "PodGroup {name}: {pods} pod Scheduled events with podScheduledEvents off"
            ));
        }
    }
    if found != opts.gangs {
        missing.push(format!("{found} PodGroups found, {} created", opts.gangs));
    }
    let running = queue["status"]["running"].as_u64().unwrap_or(0);
    if running < opts.gangs as u64 {
        missing.push(format!(
            "Queue default: status.running {running}, at least {} wanted",
            opts.gangs
        ));
    }
    let total = missing.len();
    missing.truncate(20);
    if total > 20 {
        missing.push(format!("… and {} more", total - 20));
    }
    Ok(missing)
}

fn per_pod(c: &Counts, f: fn(&Counts) -> u64, pods: usize) -> f64 {
    f(c) as f64 / pods.max(1) as f64
}

/// Creates each gang's PodGroup, then its pods; on the stand-in straight into the store, on a
/// cluster through the API, 8 gangs at a time.
async fn create_gangs(backend: &Backend, gangs: Vec<(Value, Vec<Value>)>) -> Result<()> {
    #[cfg(feature = "stand-in")]
    if let Some(server) = backend.stand_in_server() {
        return {
            let store = server.store().clone();
            tokio::task::spawn_blocking(move || -> Result<()> {
                for (pg, members) in gangs {
                    for (kind, o) in std::iter::once(("podgroups", pg))
                        .chain(members.into_iter().map(|p| ("pods", p)))
                    {
                        let what = format!("{kind} {}", o["metadata"]["name"]);
                        store
                            .create(kind, o)
                            .map_err(|source| Error::Store { what, source })?;
                    }
                }
                Ok(())
            })
            .await
            .map_err(|e| Error::Other(format!("creating the gangs: {e}")))?
        };
    }
    use futures::{StreamExt, TryStreamExt};
    futures::stream::iter(gangs)
        .map(|(pg, members)| async move {
            backend.create_all(Kind::PodGroup, vec![pg], 1).await?;
            let n = members.len();
            backend.create_all(Kind::Pod, members, n).await?;
            Ok::<(), Error>(())
        })
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn raw_bind(p: &Value, run: &str) -> Bind {
    let m = &p["metadata"];
    let s = |v: &Value| -> Arc<str> { v.as_str().unwrap_or_default().into() };
    Bind {
        pod: caldera_model::ObjectRef {
            namespace: s(&m["namespace"]),
            name: s(&m["name"]),
            uid: s(&m["uid"]),
        },
        node: node_name(run, 0).into(),
        job: s(&m["name"]),
    }
}

struct Raw {
    bound: usize,
    errors: usize,
    seconds: f64,
}

/// Binds with `concurrency` in flight, each after a token from a bucket of `qps`/`burst`:
/// what the runtime's binder does, minus everything else.
async fn raw_binds(
    client: kube::Client,
    binds: Vec<Bind>,
    concurrency: usize,
    qps: f64,
    burst: u32,
) -> Raw {
    let bucket = Arc::new(TokenBucket::new(qps, burst));
    let slots = Arc::new(Semaphore::new(concurrency.max(1)));
    let started = Instant::now();
    let mut set = JoinSet::new();
    for b in binds {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let (client, bucket) = (client.clone(), bucket.clone());
        set.spawn(async move {
            bucket.acquire().await;
            let ok = caldera_binder::writes::bind(&client, &b).await.is_ok();
            drop(permit);
            (ok, Instant::now())
        });
    }
    let mut raw = Raw {
        bound: 0,
        errors: 0,
        seconds: 0.0,
    };
    let mut last = started;
    while let Some(r) = set.join_next().await {
        match r {
            Ok((true, at)) => {
                raw.bound += 1;
                last = last.max(at);
            }
            _ => raw.errors += 1,
        }
    }
    raw.seconds = (last - started).as_secs_f64();
    raw
}
