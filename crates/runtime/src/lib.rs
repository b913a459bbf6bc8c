//! The wiring of `caldera run`: watches, the assumed overlay, the scheduling loop, leader
//! election, metrics.
//!
//! [`Runtime::start`] takes [`Options`] and a `kube::Client` and returns a
//! [`RunningHandle`]; `caldera run` is a thin layer over it, and tests and the e2e suite run
//! the scheduler in-process the same way:
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), caldera_runtime::Error> {
//! let handle = caldera_runtime::Runtime::start(caldera_runtime::Options::default(), client).await?;
//! // ... the scheduler binds pods ...
//! handle.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! What runs, each as a task:
//!
//! - **Watches** of Pods (all namespaces, every scheduler's: other pods count on
//!   their nodes), Nodes, PodGroups, Queues and PriorityClasses feed the cache crate's
//!   `ClusterIndex`. Ready once every kind has been listed.
//! - **Leader election** ([`leader`]) on the Lease `caldera` (optional). Only the leader runs
//!   sessions and writes; losing the lease pauses the binder at once.
//! - **The scheduling loop**: a session every `schedulePeriod`, and `sessionDebounce` after a
//!   change that may let something be placed. Its plan goes to the `caldera-binder`; binds
//!   in flight stay "assumed" on their nodes in an overlay until the watch shows them, so the
//!   next session does not place them twice.
//! - **ProvisioningRequests** (when the API server serves them): Caldera's own are watched
//!   by label (the `capacity` module); a plan's autoscaler requests are written by the binder,
//!   behind the binds (docs/autoscaler.md).
//! - **The config file** is polled every second; a valid change is used by the next session.
//! - **HTTP** on `--metrics-addr`: `/healthz`, `/readyz`, `/metrics`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod capacity;
mod cluster;
mod config;
mod discovery;
mod dra;
mod http;
mod hypernodes;
pub mod leader;
pub mod manifests;
mod metrics;
mod native;
#[cfg(test)]
mod one_writer;
mod optional;
mod overlay;
mod rbac;
mod schedule;
mod watch;
mod workloads;

pub use caldera_binder::{Follow, RetryPolicy};
pub use cluster::{Invalid, Watched};
pub use config::ConfigSource;
pub use leader::LeaderElection;
pub use metrics::Metrics;

use caldera_api::calls;
use caldera_binder::{Binder, Dropped, Observer, Target, WriteKind};
use caldera_model::{Bind, Time};
use cluster::Cluster;
use config::Active;
use kube::Client;
use overlay::Kind;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{watch as channel, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// The API client to give [`Runtime::start`]: built from `config` with kube's own retry
/// layer off (`caldera run`, `caldera gate` and the e2e suite use it).
///
/// kube's default client retries every 429, 503 and 504 answer by itself, up to 15 times with
/// a doubling back-off — about 2.7 minutes in all — before its caller sees the answer. Every
/// request the runtime makes has its own retry already: the binder's [`RetryPolicy`] for
/// writes, the watches' back-off, the leader loop's retry period. The hidden second layer only
/// delays what must be seen at once, above all a 429 on an eviction: a
/// PodDisruptionBudget's refusal, which no retry turns into a yes, while the preemptor waits
/// on room that is not coming.
pub fn client(mut config: kube::Config) -> Result<Client, kube::Error> {
    config.default_retry = false;
    Client::try_from(config)
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config could not be read or is invalid (the message names the line and key).
    #[error(transparent)]
    Config(#[from] caldera_config::ConfigError),
    /// The config is valid YAML but the scheduler cannot be built from it.
    #[error("building the scheduler from the config: {0}")]
    Scheduler(caldera_session::SessionError),
    /// The metrics address cannot be listened on.
    #[error("listening on {addr} for /metrics, /healthz and /readyz: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
}

/// How to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The scheduler config (default: the shipped one).
    pub config: ConfigSource,
    /// `--scheduler-name`: overrides the config's `schedulerNames` when not empty.
    pub scheduler_names: Vec<String>,
    /// Leader election (default: on, Lease `caldera` in `POD_NAMESPACE` or
    /// `caldera-system`); `None` makes this replica lead unconditionally.
    pub leader_election: Option<LeaderElection>,
    /// Where to serve `/healthz`, `/readyz`, `/metrics` (`None`: not at all).
    pub metrics_addr: Option<SocketAddr>,
    /// Client-side rate limit of API writes (`--kube-api-qps`, default 1000).
    pub kube_api_qps: f64,
    /// Its burst (`--kube-api-burst`, default 2000).
    pub kube_api_burst: u32,
    /// `--bind-concurrency`: overrides the config's `bindConcurrency`.
    pub bind_concurrency: Option<usize>,
    /// How often the config file is checked for changes (1s).
    pub config_poll_interval: Duration,
    /// How long shutdown waits for writes in flight (10s).
    pub shutdown_timeout: Duration,
    /// How failed binds and writes are retried.
    pub retry: RetryPolicy,
    /// How status writes and events follow behind the binds.
    pub follow: Follow,
    /// This replica's identity (default: the pod or host name plus a random suffix).
    pub identity: Option<String>,
    /// `caldera gate` instead of `caldera run`: release gated gangs to kube-scheduler.
    pub gate: Option<GateOptions>,
}

/// What `caldera gate` adds to the options of `caldera run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateOptions {
    /// How long a released member may stay unbound before it is reported (60s).
    pub release_timeout: Duration,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            release_timeout: Duration::from_secs(60),
        }
    }
}

/// The namespace of the Lease: `POD_NAMESPACE`, else `caldera-system`.
pub fn default_lease_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "caldera-system".to_string())
}

impl Default for Options {
    fn default() -> Self {
        Options {
            config: ConfigSource::Fixed(caldera_config::SchedulerConfig::default()),
            scheduler_names: Vec::new(),
            leader_election: Some(LeaderElection::new(default_lease_namespace())),
            metrics_addr: Some(SocketAddr::from(([0, 0, 0, 0], 8080))),
            kube_api_qps: 1000.0,
            kube_api_burst: 2000,
            bind_concurrency: None,
            config_poll_interval: Duration::from_secs(1),
            shutdown_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            follow: Follow::default(),
            identity: None,
            gate: None,
        }
    }
}

/// `<pod or host name>-<6 random hex digits>`: unique even when two replicas share a name.
pub fn default_identity() -> String {
    use std::hash::BuildHasher;
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| hostname::get().ok().and_then(|h| h.into_string().ok()))
        .unwrap_or_else(|| "caldera".to_string());
    // `RandomState` is seeded from the OS's randomness: enough for a suffix.
    let random = std::collections::hash_map::RandomState::new().hash_one(SystemTime::now());
    format!("{base}-{:06x}", random & 0xff_ffff)
}

/// Wall-clock time as the scheduling core takes it.
pub(crate) fn wall_clock() -> Time {
    Time(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent before anything can panic in it.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// State shared by the tasks.
pub(crate) struct Shared {
    cluster: Mutex<Cluster>,
    active: RwLock<Arc<Active>>,
    pub(crate) metrics: Arc<Metrics>,
    changes: AtomicU64,
    pub(crate) wake: Notify,
    leader: channel::Receiver<bool>,
    last_session: Mutex<Option<Instant>>,
    sessions: AtomicU64,
    /// `caldera gate`.
    pub(crate) gate: Option<GateOptions>,
    /// Wakes the watches waiting after a refusal (403): SIGHUP, or the RBAC probe saw the
    /// permission granted ([`rbac`]).
    pub(crate) retry_refused: Notify,
    /// Why the runtime cannot go on (a required kind refused): `caldera run` exits with it.
    failure: channel::Sender<Option<Arc<str>>>,
    /// The leader Lease (namespace, name), where the scheduler reports on itself.
    pub(crate) lease: Option<(String, String)>,
}

impl Shared {
    pub(crate) fn lock_cluster(&self) -> MutexGuard<'_, Cluster> {
        lock(&self.cluster)
    }

    pub(crate) fn active(&self) -> Arc<Active> {
        self.active
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn set_active(&self, active: Active) {
        *self.active.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(active);
    }

    /// Something changed that may let a session place something.
    pub(crate) fn trigger(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.wake.notify_one();
    }

    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    pub(crate) fn session_done(&self) {
        *lock(&self.last_session) = Some(Instant::now());
        self.sessions.fetch_add(1, Ordering::SeqCst);
    }

    /// The runtime cannot go on: [`RunningHandle::failure`] answers with `why`.
    pub(crate) fn fail(&self, why: String) {
        self.failure.send_replace(Some(why.into()));
    }

    /// A new leadership term starts from the caches alone.
    pub(crate) fn new_term(&self) {
        let mut cluster = self.lock_cluster();
        cluster.overlay.clear();
        cluster.unreport_all();
        drop(cluster);
        *lock(&self.last_session) = None;
    }

    /// `Ok` when the caches are synced and, if leading, sessions are running.
    pub(crate) fn readiness(&self) -> Result<(), String> {
        let cluster = self.lock_cluster();
        let unsynced: Vec<&str> = Watched::ALL
            .iter()
            .filter(|k| !cluster.is_synced(**k))
            .map(|k| k.as_str())
            .collect();
        drop(cluster);
        if !unsynced.is_empty() {
            return Err(format!("caches not synced: {}", unsynced.join(", ")));
        }
        if *self.leader.borrow() {
            let period = self.active().config.schedule_period;
            let limit = (period * 3).max(Duration::from_secs(10));
            match *lock(&self.last_session) {
                Some(t) if t.elapsed() <= limit => {}
                Some(t) => return Err(format!("leader, but no session for {:?}", t.elapsed())),
                None => return Err("leader, but no session yet".to_string()),
            }
        }
        Ok(())
    }
}

/// The binder's observer: keeps the overlay and the metrics.
struct RuntimeObserver {
    shared: Arc<Shared>,
}

/// The overlay's key of a status write's object (`None`: not a status the overlay follows).
fn target_key(t: &Target) -> Option<(Kind, String)> {
    match t {
        Target::Pod { .. } => Some((Kind::Pod, t.key())),
        Target::PodGroup { .. } => Some((Kind::PodGroup, t.key())),
        // Native PodGroups are not in the overlay: a repeated write says the same again.
        Target::NativePodGroup { .. } => None,
        Target::Queue { .. } => Some((Kind::Queue, t.key())),
        // Autoscaler writes are idempotent: a session repeats them until the watch shows them.
        Target::Capacity { .. } => None,
        // So are the controllers' writes: each round states what the object must be.
        Target::Object { .. } => None,
    }
}

impl Observer for RuntimeObserver {
    fn request(&self, kind: WriteKind) {
        self.shared.metrics.api_write(kind.as_str());
    }

    fn failed_attempt(&self, kind: WriteKind, error: &caldera_binder::Error) {
        if kind == WriteKind::Binding {
            self.shared
                .metrics
                .bind_errors
                .get_or_create(&vec![("code", error.code_label())])
                .inc();
        }
    }

    fn bound(&self, bind: &Bind, latency: Option<Duration>) {
        if self.shared.active().snapshot_options.gate {
            // Released, not bound: kube-scheduler binds; the gate loop follows it.
            self.shared.metrics.pods_released.inc();
            self.shared
                .lock_cluster()
                .overlay
                .bind_accepted(&bind.pod.uid);
            return;
        }
        self.shared.metrics.pods_bound.inc();
        if let Some(l) = latency {
            self.shared
                .metrics
                .schedule_latency
                .observe(l.as_secs_f64());
        }
        self.shared
            .lock_cluster()
            .overlay
            .bind_accepted(&bind.pod.uid);
    }

    fn bind_settled(&self, bind: &Bind, _error: &caldera_binder::Error) {
        self.shared
            .lock_cluster()
            .overlay
            .bind_settled(&bind.pod.uid);
    }

    fn bind_dropped(&self, bind: &Bind, why: Dropped) {
        self.shared
            .lock_cluster()
            .overlay
            .forget_bind(&bind.pod.uid);
        if why != Dropped::Cancelled {
            // The member is placed afresh by the next session.
            self.shared.trigger();
        }
    }

    fn still_wanted(&self, bind: &Bind) -> bool {
        self.shared.lock_cluster().overlay.is_assumed(&bind.pod.uid)
    }

    fn written(&self, target: &Target, resource_version: Option<&str>) {
        if let Target::Capacity {
            namespace,
            podgroup,
        } = target
        {
            // The PodGroup's requests went through: a refusal recorded before is over.
            self.shared
                .lock_cluster()
                .index
                .forget_refused_provisioning_request(namespace, podgroup);
        }
        let Some(key) = target_key(target) else {
            return;
        };
        let mut cluster = self.shared.lock_cluster();
        let seen = cluster.resource_version(&key).map(str::to_string);
        cluster
            .overlay
            .write_done(&key, resource_version, seen.as_deref());
    }

    fn write_dropped(&self, target: &Target) {
        if let Some(key) = target_key(target) {
            self.shared.lock_cluster().overlay.write_failed(&key);
        }
    }

    fn capacity_refused(&self, need: &caldera_model::CapacityNeed, why: &str) {
        self.shared
            .lock_cluster()
            .index
            .refuse_provisioning_request(need, why, wall_clock());
        self.shared.trigger();
    }

    fn claim_write_dropped(&self, write: &caldera_model::dra::ClaimWrite) {
        self.shared.lock_cluster().overlay.forget_claim(write);
        self.shared.trigger();
    }

    fn extended_claim_dropped(&self, claim: &caldera_model::dra::ExtendedResourceClaim) {
        self.shared
            .lock_cluster()
            .overlay
            .forget_extended(&claim.pod_uid);
    }

    fn volume_write_dropped(&self, write: &caldera_model::VolumeWrite) {
        self.shared.lock_cluster().index.volume_write_failed(write);
        self.shared.trigger();
    }

    fn event_folded(&self) {
        self.shared.metrics.events_folded.inc();
    }

    fn event_dropped(&self) {
        self.shared.metrics.events_dropped.inc();
    }
}

/// Starts runtimes.
#[derive(Debug)]
pub struct Runtime;

impl Runtime {
    /// Loads the config, starts every task and returns at once (the caches sync in the
    /// background; see [`RunningHandle::is_ready`]). Fails only on a bad config or an
    /// unusable metrics address.
    pub async fn start(options: Options, client: Client) -> Result<RunningHandle, Error> {
        let (config, text) = config::load(&options.config)?;
        for w in &config.warnings {
            warn!("{w}");
        }
        let gate = options.gate.is_some();
        let active = config::activate(config, &options.scheduler_names, 0, gate)?;
        let listener = match options.metrics_addr {
            Some(addr) => Some(
                tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|source| Error::Listen { addr, source })?,
            ),
            None => None,
        };
        let metrics_addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let identity = options.identity.clone().unwrap_or_else(default_identity);
        let (leader_tx, leader_rx) = channel::channel(false);
        let bind_concurrency = options
            .bind_concurrency
            .unwrap_or(active.config.bind_concurrency)
            .max(1);
        let shared = Arc::new(Shared {
            cluster: Mutex::new(Cluster::default()),
            active: RwLock::new(Arc::new(active)),
            metrics: Arc::new(Metrics::new()),
            changes: AtomicU64::new(0),
            wake: Notify::new(),
            leader: leader_rx.clone(),
            last_session: Mutex::new(None),
            sessions: AtomicU64::new(0),
            gate: options.gate.clone(),
            retry_refused: Notify::new(),
            failure: channel::channel(None).0,
            lease: options
                .leader_election
                .as_ref()
                .map(|le| (le.namespace.clone(), le.name.clone())),
        });
        let binder = Binder::new(
            client.clone(),
            caldera_binder::Options {
                bind_concurrency,
                write_concurrency: bind_concurrency,
                qps: options.kube_api_qps,
                burst: options.kube_api_burst,
                field_manager: "caldera".into(),
                reporter: caldera_binder::Reporter {
                    controller: "caldera".into(),
                    instance: identity.clone(),
                },
                retry: options.retry.clone(),
                release: gate,
                follow: options.follow.clone(),
            },
            Arc::new(RuntimeObserver {
                shared: shared.clone(),
            }),
        );
        binder.pause();

        let stop_scheduling = CancellationToken::new();
        let stop_lease = CancellationToken::new();
        let stop_rest = CancellationToken::new();
        let mut tasks = watch::spawn_all(shared.clone(), client.clone(), stop_rest.clone());
        // Optional APIs (crate::optional): watched only when served. A discovery request that
        // fails (not a 404) is asked again in the background; the watch starts once served.
        // HyperNodes belong to Volcano's CRD (`caldera crd` ships it).
        let start = {
            let (shared, client, stop) = (shared.clone(), client.clone(), stop_rest.clone());
            move || vec![watch::spawn(&shared, hypernodes::optional(client), &stop)]
        };
        let kinds = vec![&calls::HYPERNODES];
        tasks.extend(
            optional::start_when_served(&shared, &client, kinds, &stop_rest, start)
                .await
                .tasks(),
        );
        // Kubernetes' own gang API (1.36 with GenericWorkload): gang gates of its own.
        let start = {
            let (shared, client, stop) = (shared.clone(), client.clone(), stop_rest.clone());
            move || native::spawn_all(&shared, client, &stop)
        };
        let kinds = vec![&calls::NATIVE_PODGROUPS, &calls::NATIVE_WORKLOADS];
        tasks.extend(
            optional::start_when_served(&shared, &client, kinds, &stop_rest, start)
                .await
                .tasks(),
        );
        // Dynamic Resource Allocation (resource.k8s.io/v1): the four kinds, when served.
        let start = {
            let (shared, client, stop) = (shared.clone(), client.clone(), stop_rest.clone());
            move || dra::spawn_all(&shared, client, &stop)
        };
        tasks.extend(
            optional::start_when_served(&shared, &client, dra::KINDS.to_vec(), &stop_rest, start)
                .await
                .tasks(),
        );
        // Discovery from node labels: idle unless the config (as reloaded) asks for it.
        tasks.push(tokio::spawn(discovery::run(
            shared.clone(),
            binder.clone(),
            stop_rest.clone(),
        )));
        // The owners gangs are derived from (JobSet, LeaderWorkerSet, ...): each watched only
        // when served, and only when auto-grouping is on somewhere.
        if shared.active().snapshot_options.auto_group.enabled && !gate {
            tasks.extend(
                workloads::spawn_served(shared.clone(), client.clone(), stop_rest.clone()).await,
            );
        }
        // ProvisioningRequests belong to cluster-autoscaler's CRD.
        let start = {
            let (shared, client, stop) = (shared.clone(), client.clone(), stop_rest.clone());
            move || vec![watch::spawn(&shared, capacity::optional(client), &stop)]
        };
        let kinds = vec![&calls::PROVISIONING_REQUESTS];
        match optional::start_when_served(&shared, &client, kinds, &stop_rest, start).await {
            optional::Start::NotServed if shared.active().config.autoscaler.is_some() => {
                warn!("autoscaler.provisioningRequest is set, but the API server does not serve autoscaling.x-k8s.io/v1 provisioningrequests (is cluster-autoscaler's CRD installed?); gangs wait for nodes as without it");
            }
            start => tasks.extend(start.tasks()),
        }
        // While a kind is refused: SIGHUP-free retry when a SelfSubjectAccessReview says the
        // permission is there now.
        tasks.push(tokio::spawn(rbac::probe(
            shared.clone(),
            client.clone(),
            stop_rest.clone(),
        )));
        if let (ConfigSource::File(path), Some(text)) = (&options.config, text) {
            tasks.push(tokio::spawn(config::watch_file(
                shared.clone(),
                path.clone(),
                text,
                options.scheduler_names.clone(),
                gate,
                options.config_poll_interval,
                stop_rest.clone(),
            )));
        }
        if let Some(listener) = listener {
            tasks.push(tokio::spawn(http::serve(
                listener,
                shared.clone(),
                stop_rest.clone(),
            )));
        }
        // Leadership → binder and metrics, at once (not at the loop's next turn).
        {
            let mut rx = leader_rx.clone();
            let binder = binder.clone();
            let shared = shared.clone();
            let stop = stop_rest.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let leading = *rx.borrow_and_update();
                    shared.metrics.leader.set(i64::from(leading));
                    if !leading {
                        binder.pause();
                    }
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        changed = rx.changed() => if changed.is_err() { return },
                    }
                }
            }));
        }
        let (lease_task, static_leader) = match options.leader_election.clone() {
            Some(le) => (
                Some(tokio::spawn(leader::run(
                    client.clone(),
                    le,
                    identity.clone(),
                    leader_tx,
                    shared.metrics.clone(),
                    stop_lease.clone(),
                ))),
                None,
            ),
            None => {
                leader_tx.send_replace(true);
                (None, Some(leader_tx))
            }
        };
        let schedule_task = tokio::spawn(schedule::run(
            shared.clone(),
            binder.clone(),
            leader_rx.clone(),
            stop_scheduling.clone(),
        ));
        info!(identity = %identity, metrics = ?metrics_addr, bind_concurrency, "caldera runtime started");
        Ok(RunningHandle {
            shared,
            binder,
            identity,
            metrics_addr,
            leader: leader_rx,
            static_leader,
            stop_scheduling,
            stop_lease,
            stop_rest,
            schedule_task: Some(schedule_task),
            lease_task,
            tasks,
            shutdown_timeout: options.shutdown_timeout,
        })
    }
}

/// A running scheduler. [`RunningHandle::shutdown`] stops it gracefully; dropping the handle
/// (or [`RunningHandle::abort`]) stops it at once, as a crash would.
pub struct RunningHandle {
    shared: Arc<Shared>,
    binder: Binder,
    identity: String,
    metrics_addr: Option<SocketAddr>,
    leader: channel::Receiver<bool>,
    /// Keeps "always leader" alive when leader election is off.
    static_leader: Option<channel::Sender<bool>>,
    stop_scheduling: CancellationToken,
    stop_lease: CancellationToken,
    stop_rest: CancellationToken,
    schedule_task: Option<JoinHandle<()>>,
    lease_task: Option<JoinHandle<()>>,
    tasks: Vec<JoinHandle<()>>,
    shutdown_timeout: Duration,
}

impl std::fmt::Debug for RunningHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningHandle")
            .field("identity", &self.identity)
            .field("metrics_addr", &self.metrics_addr)
            .field("leader", &self.is_leader())
            .finish()
    }
}

impl RunningHandle {
    /// This replica's identity (the Lease holder name and events' `reportingInstance`).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The address `/metrics` is served on (the real port when `:0` was asked for).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// Whether this replica leads (and so schedules).
    pub fn is_leader(&self) -> bool {
        *self.leader.borrow()
    }

    /// What `/readyz` answers.
    pub fn is_ready(&self) -> bool {
        self.shared.readiness().is_ok()
    }

    /// Whether every watched kind has been listed.
    pub fn is_synced(&self) -> bool {
        self.shared.lock_cluster().all_synced()
    }

    /// Waits until the runtime cannot go on, and says why: the API server refuses to list a
    /// kind Caldera cannot schedule without (`caldera_api::calls::Need::Required`); the
    /// message names the rule to add. `caldera run` then exits non-zero.
    pub async fn failure(&self) -> Arc<str> {
        let mut rx = self.shared.failure.subscribe();
        loop {
            if let Some(why) = rx.borrow_and_update().clone() {
                return why;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `shared`, which this handle keeps alive.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Asks every watch the API server refused (403) again at once (`caldera run` does on
    /// SIGHUP, after an operator fixed the RBAC).
    pub fn retry_refused(&self) {
        self.shared.retry_refused.notify_waiters();
    }

    /// Sessions run so far.
    pub fn sessions(&self) -> u64 {
        self.shared.sessions.load(Ordering::SeqCst)
    }

    /// The config generation in force (0 at start, +1 per reload).
    pub fn config_generation(&self) -> u64 {
        self.shared.active().generation
    }

    /// The metrics, as `/metrics` serves them.
    pub fn metrics_text(&self) -> String {
        self.shared.metrics.encode()
    }

    /// The binder (its in-flight counters and retry list).
    pub fn binder(&self) -> &Binder {
        &self.binder
    }

    /// Members whose bind is in flight.
    pub fn assumed(&self) -> usize {
        self.shared.lock_cluster().overlay.assumed_len()
    }

    /// Objects the cache could not convert, with the reason.
    pub fn invalid_objects(&self) -> Vec<Invalid> {
        self.shared.lock_cluster().invalid().cloned().collect()
    }

    /// Stops gracefully: no new session, writes in flight finish (at most the shutdown
    /// timeout), the lease is released, then the watches and the HTTP endpoint stop.
    pub async fn shutdown(mut self) {
        self.stop_scheduling.cancel();
        if let Some(t) = self.schedule_task.take() {
            let _ = t.await;
        }
        if !self.binder.drain(self.shutdown_timeout).await {
            warn!(timeout = ?self.shutdown_timeout, "writes still in flight at shutdown; leaving them");
        }
        self.binder.pause();
        self.stop_lease.cancel();
        if let Some(t) = self.lease_task.take() {
            let _ = t.await;
        }
        self.static_leader.take();
        self.stop_rest.cancel();
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        info!(identity = %self.identity, "caldera runtime stopped");
    }

    /// Stops at once, as a crash would: no lease release, requests not yet sent are dropped.
    pub fn abort(self) {
        drop(self);
    }
}

impl Drop for RunningHandle {
    fn drop(&mut self) {
        self.binder.pause();
        for t in self
            .schedule_task
            .iter()
            .chain(self.lease_task.iter())
            .chain(self.tasks.iter())
        {
            t.abort();
        }
        self.stop_scheduling.cancel();
        self.stop_rest.cancel();
    }
}
