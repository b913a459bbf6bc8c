//! Carries a plan out against the Kubernetes API.
//!
//! A session's [`Plan`] holds only changes; the [`Binder`] writes exactly what it says:
//!
//! - **Binds** through the `pods/binding` subresource, with the pod's uid as a precondition, at
//!   most `bind_concurrency` at a time. Binds are started in plan order, and a plan lists a
//!   committed gang's binds together, so a gang's binds are issued back to back. `409
//!   Conflict` and `404 NotFound` mean the pod is already bound or gone: the watch settles
//!   it, nothing is retried. Other failures are retried with exponential backoff a few times;
//!   a bind that still fails goes to the **retry list**, which is dispatched before anything
//!   else in the next [`Binder::dispatch`] (so before any new gang of its queue). The caller
//!   keeps such a member "assumed" on its node meanwhile, so its gang is not broken.
//! - **Status**: the `PodScheduled` condition and gang-timeout failures through `pods/status`
//!   (strategic merge patch), PodGroup and Queue status through their `status` subresource
//!   (merge patch of `status`). Merge patches carry no resourceVersion, so they never
//!   conflict.
//! - **Events** in `events.k8s.io/v1`. The `Scheduled` event of a bound pod is sent only once
//!   its bind succeeded.
//!
//! Every bind and status write first takes a token from a client-side [`TokenBucket`]
//! (`--kube-api-qps`, `--kube-api-burst`). Events take theirs from a second bucket of the same
//! size, as kube-scheduler's event broadcaster has its own client: a burst of events never
//! delays a bind. What happens to each write is reported to an [`Observer`] (the
//! runtime keeps its overlay of in-flight work and its metrics there).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod error;
pub mod limiter;
pub mod writes;

pub use error::{Error, Result, WriteKind};
pub use limiter::TokenBucket;
pub use writes::Reporter;

use caldera_model::{Bind, Event, EventObject, Plan, QueueStatus, Snapshot, Time};
use kube::Client;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

/// How failed writes are retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per write before a bind goes to the retry list (or a status write is given
    /// up); at least 1.
    pub attempts: u32,
    /// Wait after the first failure; doubled after each further failure.
    pub initial_backoff: Duration,
    /// Longest wait between two attempts (and between two retry-list rounds).
    pub max_backoff: Duration,
    /// Retry-list rounds before a bind is given up (the member is then placed afresh).
    pub rounds: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            rounds: 10,
        }
    }
}

/// How the binder talks to the API server.
#[derive(Debug, Clone)]
pub struct Options {
    /// Binds in flight at once (`bindConcurrency`); at least 1.
    pub bind_concurrency: usize,
    /// Status patches and events in flight at once; at least 1.
    pub write_concurrency: usize,
    /// Client-side rate limit (`--kube-api-qps`); 0 means none.
    pub qps: f64,
    /// Burst of the rate limit (`--kube-api-burst`).
    pub burst: u32,
    /// `fieldManager` of the patches.
    pub field_manager: String,
    /// Who the events say reported them.
    pub reporter: Reporter,
    /// Retries.
    pub retry: RetryPolicy,
    /// Gate mode (`caldera gate`): a planned bind is carried out as a release —
    /// `pods/status` with `nominatedNodeName`, then one merge patch of the pod adding the pin
    /// to its required node affinity and removing its gates — and kube-scheduler binds.
    pub release: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bind_concurrency: 64,
            write_concurrency: 64,
            qps: 1000.0,
            burst: 2000,
            field_manager: "caldera".into(),
            reporter: Reporter {
                controller: "caldera".into(),
                instance: "caldera".into(),
            },
            retry: RetryPolicy::default(),
            release: false,
        }
    }
}

/// The object a status write is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A pod's status (its `PodScheduled` condition, or phase Failed).
    Pod {
        /// Namespace.
        namespace: Arc<str>,
        /// Name.
        name: Arc<str>,
    },
    /// A PodGroup's status.
    PodGroup {
        /// Namespace.
        namespace: Arc<str>,
        /// Name.
        name: Arc<str>,
    },
    /// A Queue's status.
    Queue {
        /// Name.
        name: Arc<str>,
    },
}

impl Target {
    /// `namespace/name`, or the name of a Queue.
    pub fn key(&self) -> String {
        match self {
            Target::Pod { namespace, name } | Target::PodGroup { namespace, name } => {
                format!("{namespace}/{name}")
            }
            Target::Queue { name } => name.to_string(),
        }
    }
}

/// Why a bind was given up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dropped {
    /// The server refused it for good (403, 422, ...).
    Rejected,
    /// It kept failing through every retry round.
    Exhausted,
    /// The binder was paused (leadership lost) or the caller no longer wants it.
    Cancelled,
}

/// What happens to each write, for the caller's bookkeeping. Every hook has a no-op default.
/// Hooks are called from binder tasks and must not block.
pub trait Observer: Send + Sync {
    /// A request is about to be sent (one per attempt).
    fn request(&self, _kind: WriteKind) {}
    /// An attempt failed (each failed attempt, including 404/409 on binds).
    fn failed_attempt(&self, _kind: WriteKind, _error: &Error) {}
    /// The pod is bound; `latency` is the time since the pod's creation.
    fn bound(&self, _bind: &Bind, _latency: Option<Duration>) {}
    /// 404 or 409: the pod is gone or already bound; the watch will show which.
    fn bind_settled(&self, _bind: &Bind, _error: &Error) {}
    /// Still failing after every attempt: on the retry list; keep the member where it is.
    fn bind_deferred(&self, _bind: &Bind, _error: &Error) {}
    /// Given up: the member should be placed afresh.
    fn bind_dropped(&self, _bind: &Bind, _why: Dropped) {}
    /// Asked before a retry-list entry is retried: `false` drops it silently (the pod was
    /// bound or deleted meanwhile).
    fn still_wanted(&self, _bind: &Bind) -> bool {
        true
    }
    /// A status patch succeeded; the object now has `resource_version`.
    fn written(&self, _target: &Target, _resource_version: Option<&str>) {}
    /// A status patch was given up (failed, or cancelled); the next session may write it
    /// again.
    fn write_dropped(&self, _target: &Target) {}
}

/// An [`Observer`] that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// What one [`Binder::dispatch`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Pods bound.
    pub bound: usize,
    /// Binds answered 404/409.
    pub settled: usize,
    /// Binds put on the retry list.
    pub deferred: usize,
    /// Binds given up.
    pub dropped: usize,
    /// Status patches that succeeded.
    pub written: usize,
    /// Status patches given up.
    pub write_failures: usize,
    /// Events recorded.
    pub events: usize,
    /// Events that could not be recorded.
    pub event_failures: usize,
}

impl Report {
    fn add(&mut self, other: &Report) {
        self.bound += other.bound;
        self.settled += other.settled;
        self.deferred += other.deferred;
        self.dropped += other.dropped;
        self.written += other.written;
        self.write_failures += other.write_failures;
        self.events += other.events;
        self.event_failures += other.event_failures;
    }
}

/// A bind waiting for its next round.
#[derive(Debug, Clone)]
struct RetryEntry {
    bind: Bind,
    release: Option<Value>,
    created: Option<Time>,
    event: Option<Event>,
    round: u32,
    due: Instant,
}

/// A bind to carry out, with what goes with it.
#[derive(Debug, Clone)]
struct BindJob {
    bind: Bind,
    /// Gate mode: the release patch (see [`Options::release`]).
    release: Option<Value>,
    created: Option<Time>,
    event: Option<Event>,
    round: u32,
}

/// The newest write generation to one object, and the lock that keeps its writes in order.
type WriteOrder = (u64, Arc<tokio::sync::Mutex<()>>);

/// A status write to carry out.
#[derive(Debug, Clone)]
enum StatusJob {
    Condition(caldera_model::PodConditionUpdate, bool),
    Failure(caldera_model::PodFailure),
    PodGroup(caldera_model::PodGroupStatusUpdate),
    Queue(caldera_model::QueueStatusUpdate, Option<QueueStatus>),
    Event(Event),
}

struct Inner {
    client: Client,
    options: Options,
    limiter: TokenBucket,
    /// Events only (see the module docs).
    event_limiter: TokenBucket,
    /// Per status-write target: the generation of the newest write dispatched, and a lock
    /// that keeps writes to one object in order.
    write_order: Mutex<HashMap<(WriteKind, String), WriteOrder>>,
    write_generation: AtomicU64,
    bind_slots: Arc<Semaphore>,
    write_slots: Arc<Semaphore>,
    observer: Arc<dyn Observer>,
    active: AtomicBool,
    epoch: AtomicU64,
    retries: Mutex<Vec<RetryEntry>>,
    tracker: TaskTracker,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// Carries plans out; cheap to clone (clones share everything).
#[derive(Clone)]
pub struct Binder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Binder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binder")
            .field("options", &self.inner.options)
            .field("active", &self.is_active())
            .field("retries", &self.retry_len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values (a list of retries) stay consistent at every await-free step.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wall_clock() -> Time {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    Time(ms)
}

fn backoff(policy: &RetryPolicy, failures: u32) -> Duration {
    let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
    policy
        .initial_backoff
        .saturating_mul(factor)
        .min(policy.max_backoff)
}

impl Binder {
    /// A binder writing through `client`, reporting to `observer`. Starts active.
    pub fn new(client: Client, options: Options, observer: Arc<dyn Observer>) -> Self {
        let limiter = TokenBucket::new(options.qps, options.burst);
        let event_limiter = TokenBucket::new(options.qps, options.burst);
        Binder {
            inner: Arc::new(Inner {
                client,
                limiter,
                event_limiter,
                write_order: Mutex::new(HashMap::new()),
                write_generation: AtomicU64::new(0),
                bind_slots: Arc::new(Semaphore::new(options.bind_concurrency.max(1))),
                write_slots: Arc::new(Semaphore::new(options.write_concurrency.max(1))),
                options,
                observer,
                active: AtomicBool::new(true),
                epoch: AtomicU64::new(0),
                retries: Mutex::new(Vec::new()),
                tracker: TaskTracker::new(),
                in_flight: AtomicUsize::new(0),
                max_in_flight: AtomicUsize::new(0),
            }),
        }
    }

    /// The options it was built with.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// Whether plans are carried out (see [`Binder::pause`]).
    pub fn is_active(&self) -> bool {
        self.inner.active.load(Ordering::SeqCst)
    }

    /// Stops at once: requests not yet sent are dropped (their binds reported
    /// [`Dropped::Cancelled`]), the retry list is emptied, and [`Binder::dispatch`] does nothing
    /// until [`Binder::resume`]. Requests already sent finish. Used when leadership is lost.
    pub fn pause(&self) {
        self.inner.active.store(false, Ordering::SeqCst);
        self.inner.epoch.fetch_add(1, Ordering::SeqCst);
        let dropped: Vec<RetryEntry> = std::mem::take(&mut *lock(&self.inner.retries));
        for r in dropped {
            self.inner
                .observer
                .bind_dropped(&r.bind, Dropped::Cancelled);
        }
    }

    /// Carries out plans again.
    pub fn resume(&self) {
        self.inner.epoch.fetch_add(1, Ordering::SeqCst);
        self.inner.active.store(true, Ordering::SeqCst);
    }

    /// Binds waiting on the retry list.
    pub fn retry_len(&self) -> usize {
        lock(&self.inner.retries).len()
    }

    /// Bind requests in flight right now.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::SeqCst)
    }

    /// The most bind requests ever in flight at once.
    pub fn max_in_flight(&self) -> usize {
        self.inner.max_in_flight.load(Ordering::SeqCst)
    }

    /// Waits until every dispatched write has finished, at most `timeout`. Returns whether
    /// everything finished.
    pub async fn drain(&self, timeout: Duration) -> bool {
        let tracker = &self.inner.tracker;
        tracker.close();
        let done = tokio::time::timeout(timeout, tracker.wait()).await.is_ok();
        tracker.reopen();
        done
    }

    /// Starts carrying out `plan`, decided on `snapshot` at `now`, and returns at once; the
    /// handle resolves to what was done. Due retry-list binds go first, then the plan's binds
    /// in plan order; status patches and events run alongside. Does nothing while paused.
    pub fn dispatch(&self, plan: Plan, snapshot: &Snapshot, now: Time) -> JoinHandle<Report> {
        let inner = self.inner.clone();
        if !self.is_active() {
            return tokio::spawn(async { Report::default() });
        }
        let epoch = inner.epoch.load(Ordering::SeqCst);

        // What the plan needs from the snapshot, taken now while we have it.
        let wanted: HashSet<&str> = plan
            .binds
            .iter()
            .map(|b| &*b.uid)
            .chain(plan.pod_conditions.iter().map(|c| &*c.uid))
            .collect();
        let mut created: HashMap<Arc<str>, Time> = HashMap::new();
        let mut specs: HashMap<Arc<str>, &caldera_model::PlacementSpec> = HashMap::new();
        let mut unschedulable: HashSet<Arc<str>> = HashSet::new();
        for t in snapshot.tasks.iter().filter(|t| wanted.contains(&*t.uid)) {
            created.insert(t.uid.clone(), t.created);
            specs.insert(t.uid.clone(), &t.spec);
            if t.pending_reason.is_some() {
                unschedulable.insert(t.uid.clone());
            }
        }
        for w in snapshot
            .waiting
            .iter()
            .filter(|w| w.pending_reason.is_some())
        {
            unschedulable.insert(w.uid.clone());
        }
        let old_queues: HashMap<&str, Option<&QueueStatus>> = snapshot
            .queues
            .iter()
            .map(|q| (&*q.name, q.status.as_ref()))
            .collect();

        let Plan {
            binds,
            pod_conditions,
            pod_failures,
            podgroups,
            queues,
            events,
            // No action plans evictions or nominations yet (preempt and reclaim do, next).
            evictions: _,
            nominations: _,
            // Autoscaler requests are written by the runtime's capacity writer, not here.
            capacity_requests: _,
            capacity_releases: _,
        } = plan;

        // The `Scheduled` event of a pod waits for its bind.
        let mut scheduled: HashMap<(Arc<str>, Arc<str>), Event> = HashMap::new();
        let mut other_events = Vec::new();
        for e in events {
            if e.object == EventObject::Pod && e.reason == "Scheduled" {
                scheduled.insert((e.namespace.clone(), e.name.clone()), e);
            } else {
                other_events.push(e);
            }
        }

        let mut bind_jobs: Vec<BindJob> = Vec::new();
        {
            let now_instant = Instant::now();
            let mut retries = lock(&inner.retries);
            let (due, later): (Vec<RetryEntry>, Vec<RetryEntry>) =
                retries.drain(..).partition(|r| r.due <= now_instant);
            *retries = later;
            drop(retries);
            for r in due {
                if inner.observer.still_wanted(&r.bind) {
                    bind_jobs.push(BindJob {
                        bind: r.bind,
                        release: r.release,
                        created: r.created,
                        event: r.event,
                        round: r.round,
                    });
                }
            }
        }
        for b in binds {
            let mut event = scheduled.remove(&(b.namespace.clone(), b.name.clone()));
            let release = inner.options.release.then(|| {
                let spec = specs.get(&b.uid).copied().cloned().unwrap_or_default();
                writes::release_patch(&spec, &b.uid, &b.node)
            });
            if release.is_some() {
                // kube-scheduler reports the bind; Caldera reports the release.
                if let Some(e) = event.as_mut() {
                    e.reason = "Released".into();
                    e.message = format!(
                        "Gang fits whole: gate {} lifted, pinned to {} and nominated there for kube-scheduler",
                        writes::GANG_GATE, b.node
                    );
                }
            }
            bind_jobs.push(BindJob {
                release,
                created: created.get(&b.uid).copied(),
                bind: b,
                event,
                round: 0,
            });
        }
        // A `Scheduled` event without a bind (should not happen) is still recorded.
        other_events.extend(scheduled.into_values());

        let mut status_jobs: Vec<StatusJob> = Vec::new();
        for c in pod_conditions {
            let keep = unschedulable.contains(&c.uid);
            status_jobs.push(StatusJob::Condition(c, keep));
        }
        status_jobs.extend(pod_failures.into_iter().map(StatusJob::Failure));
        status_jobs.extend(podgroups.into_iter().map(StatusJob::PodGroup));
        for q in queues {
            let old = old_queues.get(&*q.name).copied().flatten().cloned();
            status_jobs.push(StatusJob::Queue(q, old));
        }
        status_jobs.extend(other_events.into_iter().map(StatusJob::Event));
        // Generations in dispatch order: a newer write to an object supersedes an older one
        // not yet sent, and writes to one object are sent one at a time, in order.
        let status_jobs: Vec<(StatusJob, u64)> = status_jobs
            .into_iter()
            .map(|job| {
                let generation = match target_of(&job) {
                    Some((target, kind)) => inner.newest_write(kind, target.key()),
                    None => 0,
                };
                (job, generation)
            })
            .collect();

        let tracker = inner.tracker.clone();
        tracker.spawn(async move {
            let binds = tokio::spawn(run_binds(inner.clone(), bind_jobs, epoch));
            let writes = tokio::spawn(run_writes(inner.clone(), status_jobs, epoch, now));
            let mut report = binds.await.unwrap_or_default();
            report.add(&writes.await.unwrap_or_default());
            report
        })
    }
}

impl Inner {
    fn current(&self, epoch: u64) -> bool {
        self.active.load(Ordering::SeqCst) && self.epoch.load(Ordering::SeqCst) == epoch
    }

    /// Records a new newest write to `key` and returns its generation.
    fn newest_write(&self, kind: WriteKind, key: String) -> u64 {
        let generation = self.write_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let mut order = lock(&self.write_order);
        let entry = order
            .entry((kind, key))
            .or_insert_with(|| (0, Arc::new(tokio::sync::Mutex::new(()))));
        entry.0 = generation;
        generation
    }

    /// The lock of `key`'s writes, and whether `generation` is still the newest.
    fn write_slot(
        &self,
        kind: WriteKind,
        key: &str,
        generation: u64,
    ) -> (Arc<tokio::sync::Mutex<()>>, bool) {
        let order = lock(&self.write_order);
        match order.get(&(kind, key.to_string())) {
            Some((newest, slot)) => (slot.clone(), *newest == generation),
            None => (Arc::new(tokio::sync::Mutex::new(())), true),
        }
    }

    /// Whether `generation` is still the newest write to `key`; forgets the key if so and
    /// `done`.
    fn still_newest(&self, kind: WriteKind, key: &str, generation: u64, done: bool) -> bool {
        let mut order = lock(&self.write_order);
        let k = (kind, key.to_string());
        let newest = order.get(&k).is_some_and(|(g, _)| *g == generation);
        if newest && done {
            order.remove(&k);
        }
        newest
    }
}

/// What a status job writes to, and its kind; `None` for events.
fn target_of(job: &StatusJob) -> Option<(Target, WriteKind)> {
    Some(match job {
        StatusJob::Condition(c, _) => (
            Target::Pod {
                namespace: c.namespace.clone(),
                name: c.name.clone(),
            },
            WriteKind::PodStatus,
        ),
        StatusJob::Failure(f) => (
            Target::Pod {
                namespace: f.namespace.clone(),
                name: f.name.clone(),
            },
            WriteKind::PodStatus,
        ),
        StatusJob::PodGroup(u) => (
            Target::PodGroup {
                namespace: u.namespace.clone(),
                name: u.name.clone(),
            },
            WriteKind::PodGroupStatus,
        ),
        StatusJob::Queue(u, _) => (
            Target::Queue {
                name: u.name.clone(),
            },
            WriteKind::QueueStatus,
        ),
        StatusJob::Event(_) => return None,
    })
}

/// Starts the binds in order: each waits for a slot before the next is started, so the
/// slots (a fair semaphore) are handed out in plan order across concurrent dispatches too.
async fn run_binds(inner: Arc<Inner>, jobs: Vec<BindJob>, epoch: u64) -> Report {
    let mut set = JoinSet::new();
    for job in jobs {
        let Ok(permit) = inner.bind_slots.clone().acquire_owned().await else {
            break;
        };
        set.spawn(bind_task(inner.clone(), job, permit, epoch));
    }
    let mut report = Report::default();
    while let Some(r) = set.join_next().await {
        report.add(&r.unwrap_or_default());
    }
    report
}

async fn bind_task(
    inner: Arc<Inner>,
    job: BindJob,
    permit: OwnedSemaphorePermit,
    epoch: u64,
) -> Report {
    let mut report = Report::default();
    let policy = &inner.options.retry;
    let obs = &inner.observer;
    let b = &job.bind;
    let mut failures = 0u32;
    let outcome = loop {
        if !inner.current(epoch) {
            obs.bind_dropped(b, Dropped::Cancelled);
            report.dropped += 1;
            return report;
        }
        inner.limiter.acquire().await;
        if !inner.current(epoch) {
            obs.bind_dropped(b, Dropped::Cancelled);
            report.dropped += 1;
            return report;
        }
        let kind = if job.release.is_some() {
            WriteKind::Release
        } else {
            WriteKind::Binding
        };
        obs.request(kind);
        let now_in_flight = inner.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        inner
            .max_in_flight
            .fetch_max(now_in_flight, Ordering::SeqCst);
        let result = match &job.release {
            Some(patch) => {
                writes::release(&inner.client, b, patch, &inner.options.field_manager).await
            }
            None => writes::bind(&inner.client, b).await,
        };
        inner.in_flight.fetch_sub(1, Ordering::SeqCst);
        match result {
            Ok(()) => break Ok(()),
            Err(e) => {
                obs.failed_attempt(kind, &e);
                if e.is_settled() || !e.is_retryable() {
                    break Err(e);
                }
                failures += 1;
                if failures >= policy.attempts.max(1) {
                    break Err(e);
                }
                debug!(error = %e, attempt = failures, "bind failed; retrying");
                tokio::time::sleep(backoff(policy, failures)).await;
            }
        }
    };
    drop(permit);
    match outcome {
        Ok(()) => {
            let latency = job.created.and_then(|c| {
                let ms = wall_clock().millis_since(c);
                (ms >= 0).then(|| Duration::from_millis(ms as u64))
            });
            obs.bound(b, latency);
            report.bound += 1;
            if let Some(e) = &job.event {
                record_event(&inner, e, "Binding", epoch, &mut report).await;
            }
        }
        Err(e) if e.is_settled() => {
            debug!(error = %e, "bind settled by the server; the watch will show the pod");
            obs.bind_settled(b, &e);
            report.settled += 1;
        }
        Err(e) if !e.is_retryable() => {
            warn!(error = %e, "bind rejected; the member will be placed again");
            obs.bind_dropped(b, Dropped::Rejected);
            report.dropped += 1;
        }
        Err(e) => {
            let round = job.round + 1;
            if round > policy.rounds || !inner.current(epoch) {
                warn!(error = %e, rounds = job.round, "bind keeps failing; giving up");
                obs.bind_dropped(b, Dropped::Exhausted);
                report.dropped += 1;
            } else {
                warn!(error = %e, round, "bind failed; on the retry list");
                obs.bind_deferred(b, &e);
                report.deferred += 1;
                lock(&inner.retries).push(RetryEntry {
                    bind: job.bind.clone(),
                    release: job.release.clone(),
                    created: job.created,
                    event: job.event.clone(),
                    round,
                    due: Instant::now() + backoff(policy, policy.attempts + round),
                });
            }
        }
    }
    report
}

async fn run_writes(
    inner: Arc<Inner>,
    jobs: Vec<(StatusJob, u64)>,
    epoch: u64,
    now: Time,
) -> Report {
    let mut set = JoinSet::new();
    for (job, generation) in jobs {
        let Ok(permit) = inner.write_slots.clone().acquire_owned().await else {
            break;
        };
        let inner = inner.clone();
        set.spawn(async move {
            let mut report = Report::default();
            match job {
                StatusJob::Event(e) => {
                    drop(permit);
                    record_event(&inner, &e, "Scheduling", epoch, &mut report).await;
                }
                job => {
                    write_status(&inner, job, generation, epoch, now, &mut report).await;
                    drop(permit);
                }
            }
            report
        });
    }
    let mut report = Report::default();
    while let Some(r) = set.join_next().await {
        report.add(&r.unwrap_or_default());
    }
    report
}

async fn write_status(
    inner: &Inner,
    job: StatusJob,
    generation: u64,
    epoch: u64,
    now: Time,
    report: &mut Report,
) {
    let fm = inner.options.field_manager.as_str();
    let client = &inner.client;
    let Some((target, kind)) = target_of(&job) else {
        return;
    };
    let key = target.key();
    // One write at a time per object, newest last; a write superseded before it is sent is
    // skipped (the newer one says everything it would have).
    let (slot, newest) = inner.write_slot(kind, &key, generation);
    if !newest {
        return;
    }
    let _in_order = slot.lock().await;
    if !inner.still_newest(kind, &key, generation, false) {
        return;
    }
    let policy = &inner.options.retry;
    let mut failures = 0u32;
    loop {
        if !inner.current(epoch) {
            if inner.still_newest(kind, &key, generation, true) {
                inner.observer.write_dropped(&target);
            }
            report.write_failures += 1;
            return;
        }
        inner.limiter.acquire().await;
        inner.observer.request(kind);
        let result = match &job {
            StatusJob::Condition(c, keep) => writes::pod_condition(client, fm, c, now, *keep).await,
            StatusJob::Failure(f) => writes::pod_failure(client, fm, f, now).await,
            StatusJob::PodGroup(u) => {
                writes::podgroup_status(client, fm, &u.namespace, &u.name, &u.status).await
            }
            StatusJob::Queue(u, old) => {
                writes::queue_status(client, fm, &u.name, &u.status, old.as_ref()).await
            }
            StatusJob::Event(_) => return,
        };
        match result {
            Ok(rv) => {
                debug!(kind = %kind, object = %key, resource_version = ?rv, "status written");
                report.written += 1;
                // A newer write to the object was dispatched meanwhile: it reports instead, so
                // the runtime's overlay matches the newest content with its resourceVersion.
                if inner.still_newest(kind, &key, generation, true) {
                    inner.observer.written(&target, rv.as_deref());
                }
                return;
            }
            Err(e) => {
                inner.observer.failed_attempt(kind, &e);
                failures += 1;
                if !e.is_retryable() || failures >= policy.attempts.max(1) {
                    if e.is_settled() {
                        debug!(error = %e, "status write target is gone");
                    } else {
                        warn!(error = %e, "status write failed; the next session may retry");
                    }
                    if inner.still_newest(kind, &key, generation, true) {
                        inner.observer.write_dropped(&target);
                    }
                    report.write_failures += 1;
                    return;
                }
                tokio::time::sleep(backoff(policy, failures)).await;
            }
        }
    }
}

async fn record_event(inner: &Inner, e: &Event, action: &str, epoch: u64, report: &mut Report) {
    let policy = &inner.options.retry;
    let mut failures = 0u32;
    loop {
        if !inner.current(epoch) {
            report.event_failures += 1;
            return;
        }
        inner.event_limiter.acquire().await;
        inner.observer.request(WriteKind::Event);
        match writes::event(&inner.client, &inner.options.reporter, e, action).await {
            Ok(()) => {
                report.events += 1;
                return;
            }
            Err(err) => {
                inner.observer.failed_attempt(WriteKind::Event, &err);
                failures += 1;
                if !err.is_retryable() || failures >= policy.attempts.max(1) {
                    debug!(error = %err, "event not recorded");
                    report.event_failures += 1;
                    return;
                }
                tokio::time::sleep(backoff(policy, failures)).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(backoff(&p, 1), Duration::from_millis(100));
        assert_eq!(backoff(&p, 2), Duration::from_millis(200));
        assert_eq!(backoff(&p, 4), Duration::from_millis(800));
        assert_eq!(backoff(&p, 30), Duration::from_secs(5));
    }
}
