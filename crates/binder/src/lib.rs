//! Carries a plan out against the Kubernetes API: **binds first; everything users only read
//! follows behind, coalesced, and nothing is lost.**
//!
//! A session's [`Plan`] holds only changes. [`Binder::dispatch`] sorts each write into one of
//! three [`Class`]es, and that order is the binder's structure:
//!
//! 1. **Acts** ([`Class::Act`], `acts.rs`): writes that change what runs where — binds through
//!    `pods/binding`, with the pod's uid as a precondition, and evictions (a victim gang per
//!    act), at most `bind_concurrency` at a
//!    time, started in plan order (a committed gang's binds are adjacent, so they go back to
//!    back). `409`/`404` mean the pod is already bound or gone: the watch settles it. A bind
//!    that fails otherwise goes to the **retry list**, due after its pod's own backoff step
//!    (`outage.rs`: 1 s doubling to 30 s, stretched by up to 25%, at least a 429's
//!    `Retry-After`), dispatched before anything else once due (the caller keeps the member
//!    "assumed" meanwhile); when a bind succeeds after failures (the server is back), every
//!    retry is due at once. Every act holds a ticket from dispatch until answered.
//!
//! Every other write backs off per object the same way (a status write or an eviction whose
//! object is still backing off is not sent; the next session plans it again), the logs say
//! once per outage and kind of write that writes are failing and once how many waited when
//! they go through again, and a write the server refuses as invalid (422) is not sent again
//! until its content changes (said once: a warning, and for an autoscaler request a Warning
//! event on its PodGroup naming the fields).
//! 2. **Reports** ([`Class::Report`], `reports.rs`): status writes users and controllers read —
//!    the `PodScheduled` condition and gang-timeout failures (`pods/status`, strategic merge),
//!    PodGroup and Queue status (`status` subresource, merge patch: no resourceVersion, never
//!    a conflict); also nominations and autoscaler requests (`capacity.rs`). They wait, **one per object**: a newer write to an object replaces the
//!    waiting one (a PodGroup's status is written once, with its final state), and writes to
//!    one object are sent one at a time, newest last.
//! 3. **Events** ([`Class::Event`], `events.rs`): `events.k8s.io/v1`, in a bounded queue that
//!    folds same-reason events of one PodGroup into one Event with `series.count` under load,
//!    and drops (counted) only past a cap on its memory. A bound pod's `Scheduled` event is queued once
//!    its bind succeeded.
//!
//! Reports and events are sent (`follow.rs`) only while no act is queued or in flight and none
//! has been for [`Follow::report_quiet`]; while acts are queued they get at most
//! [`Follow::report_share`] of the QPS, so a backlog of binds goes through at the rate the
//! API server can bind, and what follows is still never starved. Nothing is dropped on the
//! way except by leadership loss ([`Binder::pause`]: the next leader recomputes statuses from
//! the cluster) or the events' memory cap.
//!
//! Binds and status writes take a token from a client-side [`TokenBucket`]
//! (`--kube-api-qps`, `--kube-api-burst`); events take theirs from a second bucket of the same
//! size, as kube-scheduler's event broadcaster has its own client. What happens to each write
//! is reported to an [`Observer`] (the runtime keeps its overlay of in-flight work and its
//! metrics there).
//!
//! **Adding a kind of write**: give it a [`WriteKind`] and its [`Class`] in
//! [`WriteKind::class`], its request in `writes.rs`, and then either an `Act` variant in
//! `acts.rs` (it holds an act ticket; anything that must precede a bind, such as a PVC
//! pre-bind, is a step of that bind's act) or a `StatusWrite` variant in `reports.rs` (with the
//! object it coalesces on, and how a newer write coalesces with a waiting one). Autoscaler
//! requests (`capacity.rs`) are reports: they ask for nodes minutes away. Then sort it in [`Binder::dispatch`]; the plan is destructured
//! there field by field, so a new field of [`Plan`] does not compile until it is sorted.
// Unit tests count allocations with a global allocator of their own (events.rs); nothing else
// may use `unsafe`.
#![cfg_attr(not(test), forbid(unsafe_code))]
#![cfg_attr(test, deny(unsafe_code))]
#![warn(missing_docs)]

mod acts;
mod capacity;
mod claims;
mod error;
mod events;
mod follow;
pub mod limiter;
mod outage;
mod owned;
mod reports;
pub mod writes;

pub use error::{Class, Error, Result, WriteKind};
pub use events::Group;
pub use limiter::TokenBucket;
pub use owned::{ObjectOp, ObjectWrite, Owned};
pub use writes::Reporter;

use acts::{Act, ActTicket, BindJob, RetryEntry};
use caldera_model::{Bind, Event, EventObject, Plan, QueueStatus, Snapshot, Time};
use capacity::CapacityWrites;
use events::{EventQueue, Pushed, QueuedEvent};
use follow::Gate;
use kube::Client;
use reports::{ReportQueue, StatusWrite, Waiting};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;
use tracing::debug;

/// How failed writes are retried (see `outage.rs`: each object backs off on its own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per write, one per backoff step, before a bind goes to the retry list (or
    /// another write is given up until a later session plans it again); at least 1.
    pub attempts: u32,
    /// Wait after an object's first failure; doubled after each further failure in a row (and
    /// stretched by up to 25%), at least what the server asks for (`Retry-After`).
    pub initial_backoff: Duration,
    /// Longest wait between two attempts of one object.
    pub max_backoff: Duration,
    /// Retry-list rounds before a bind is given up (the member is then placed afresh).
    pub rounds: u32,
}

impl Default for RetryPolicy {
    /// client-go's workqueue shape: 1 s doubling to 30 s per object; a bind is given up
    /// (placed afresh) after about eight minutes of failures.
    fn default() -> Self {
        RetryPolicy {
            attempts: 1,
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            rounds: 20,
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
    /// How status writes and events follow the binds.
    pub follow: Follow,
    /// `fieldManager` of the patches.
    pub field_manager: String,
    /// Who the events say reported them.
    pub reporter: Reporter,
    /// Retries.
    pub retry: RetryPolicy,
    /// Gate mode (`caldera gate`): a planned bind is carried out as a release —
    /// `pods/status` with `nominatedNodeName`, then one merge patch of the pod adding the pin
    /// to its required node affinity and removing its gates — and kube-scheduler binds. A
    /// release is an act, like the bind it stands for.
    pub release: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bind_concurrency: 64,
            write_concurrency: 64,
            qps: 1000.0,
            burst: 2000,
            follow: Follow::default(),
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
    /// A native `scheduling.k8s.io/v1alpha2` PodGroup's status (its `PodGroupScheduled`
    /// condition).
    NativePodGroup {
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
    /// An object one of Caldera's controllers keeps (see [`ObjectWrite`]).
    Object {
        /// Namespace (`None`: cluster-scoped).
        namespace: Option<Arc<str>>,
        /// Name.
        name: Arc<str>,
    },
    /// A PodGroup's autoscaler requests (ProvisioningRequests, their PodTemplates, the
    /// members' consume annotations).
    Capacity {
        /// Namespace.
        namespace: Arc<str>,
        /// The PodGroup's name.
        podgroup: Arc<str>,
    },
}

impl Target {
    /// `namespace/name`, or the name of a Queue.
    pub fn key(&self) -> String {
        match self {
            Target::Pod { namespace, name }
            | Target::PodGroup { namespace, name }
            | Target::NativePodGroup { namespace, name } => {
                format!("{namespace}/{name}")
            }
            Target::Capacity {
                namespace,
                podgroup,
            } => format!("{namespace}/{podgroup}"),
            Target::Queue { name } => name.to_string(),
            Target::Object {
                namespace: Some(namespace),
                name,
            } => format!("{namespace}/{name}"),
            Target::Object {
                namespace: None,
                name,
            } => name.to_string(),
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
    /// A volume write was given up (refused, failed every attempt, or cancelled): the claim
    /// or volume is not as the plan assumed.
    fn volume_write_dropped(&self, _write: &caldera_model::VolumeWrite) {}
    /// A DRA claim write of a gang that will not bind (one of its claim writes was refused or
    /// given up, or the binder stopped): what the plan assumed of the claim does not hold,
    /// and whatever of it went through was undone.
    fn claim_write_dropped(&self, _write: &caldera_model::dra::ClaimWrite) {}
    /// The extended-resource bridge's claim of a gang that will not bind was not made (or
    /// its gang's other writes failed).
    fn extended_claim_dropped(&self, _claim: &caldera_model::dra::ExtendedResourceClaim) {}
    /// The API server refused to make a PodGroup's autoscaler request `need` (its
    /// ProvisioningRequest or a PodTemplate) as invalid (422); `why` names the fields. It is
    /// not sent again unchanged; the scheduler should see the request as failed, so the
    /// PodGroup's condition says why and the next attempt waits for its back-off.
    fn capacity_refused(&self, _need: &caldera_model::CapacityNeed, _why: &str) {}
    /// An event was folded into a queued one (the queue is over its soft cap).
    fn event_folded(&self) {}
    /// An event was dropped (the queue is at its memory cap and nothing to fold it into).
    fn event_dropped(&self) {}
}

/// An [`Observer`] that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// How status writes and events follow behind the binds (see the crate docs).
#[derive(Debug, Clone, PartialEq)]
pub struct Follow {
    /// The share of the QPS that status writes and events may use while binds are queued
    /// (0: none, they wait until the binds are done). With no rate limit, the share is of
    /// 1000 QPS.
    pub report_share: f64,
    /// Status writes and events wait until no bind has been queued for this long.
    pub report_quiet: Duration,
    /// After a victim gang's evictions, status writes and events wait this long too (the
    /// preemptors' nominations do not): while victims terminate and their preemptors bind, the
    /// API server's writes go to the victims' kubelets and the binds. Statuses and events are
    /// late by as much after a preemption, never lost.
    pub hold_after_evictions: Duration,
    /// Queued events beyond which events of one reason on one PodGroup are folded into one
    /// (client-go's broadcaster queues 1000).
    pub event_queue: usize,
    /// Memory the queued events may take (estimated, see `events.rs`); beyond it an event with
    /// nothing to fold into is dropped and counted. 128 MiB: about 150,000 events of some 900
    /// bytes that fold into nothing (the `Scheduled` events of a backlog of single-pod gangs).
    pub event_queue_bytes: usize,
}

impl Default for Follow {
    fn default() -> Self {
        Follow {
            report_share: 0.02,
            report_quiet: Duration::from_millis(100),
            hold_after_evictions: Duration::from_secs(3),
            event_queue: 1000,
            event_queue_bytes: 128 << 20,
        }
    }
}

/// What the binder has done so far (counters since it was built).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Pods bound.
    pub bound: u64,
    /// Status writes that succeeded.
    pub status_written: u64,
    /// Status writes replaced by a newer one to the same object before they were sent.
    pub status_coalesced: u64,
    /// Status writes given up (failed, or cancelled by leadership loss).
    pub status_failed: u64,
    /// Event objects created.
    pub events_written: u64,
    /// Events of the plans those objects stand for (more than `events_written` when folded).
    pub events_represented: u64,
    /// Events folded into another queued one.
    pub events_folded: u64,
    /// Events dropped at the queue's memory cap.
    pub events_dropped: u64,
    /// Events not recorded (the server refused, or leadership was lost).
    pub events_failed: u64,
    /// Status writes and events sent under the token share while binds were queued.
    pub share_writes: u64,
}

#[derive(Debug, Default)]
struct Counters {
    bound: AtomicU64,
    status_written: AtomicU64,
    status_coalesced: AtomicU64,
    status_failed: AtomicU64,
    events_written: AtomicU64,
    events_represented: AtomicU64,
    events_folded: AtomicU64,
    events_dropped: AtomicU64,
    events_failed: AtomicU64,
    share_writes: AtomicU64,
}

impl Counters {
    fn get(&self) -> Stats {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            bound: g(&self.bound),
            status_written: g(&self.status_written),
            status_coalesced: g(&self.status_coalesced),
            status_failed: g(&self.status_failed),
            events_written: g(&self.events_written),
            events_represented: g(&self.events_represented),
            events_folded: g(&self.events_folded),
            events_dropped: g(&self.events_dropped),
            events_failed: g(&self.events_failed),
            share_writes: g(&self.share_writes),
        }
    }
}

struct Inner {
    client: Client,
    options: Options,
    limiter: TokenBucket,
    /// Events only (see the crate docs).
    event_limiter: TokenBucket,
    /// Reports and events while acts are queued (`None`: no share).
    share: Option<TokenBucket>,
    gate: Arc<Gate>,
    reports: Mutex<ReportQueue>,
    events: Mutex<EventQueue>,
    /// Wakes the pump (new reports or events, acts done, a write slot free).
    wake: Arc<Notify>,
    pump_started: AtomicBool,
    bind_slots: Arc<Semaphore>,
    write_slots: Arc<Semaphore>,
    observer: Arc<dyn Observer>,
    active: AtomicBool,
    epoch: AtomicU64,
    retries: Mutex<Vec<RetryEntry>>,
    tracker: TaskTracker,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    stats: Counters,
    /// Per-object backoff and outages (`outage.rs`).
    outages: outage::Outages,
    /// Writes the server refused as invalid (422), by what they write, with their content:
    /// the same content is not sent again (a changed one is).
    refused: Mutex<HashMap<reports::ReportKey, String>>,
    /// Notified whenever a status write is answered (or given up): see
    /// [`Inner::status_landed`].
    written: Notify,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The pump holds only a weak reference: woken, it finds the binder gone and ends.
        self.wake.notify_one();
    }
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
    // Every guarded value (queues, a list of retries, an instant) stays consistent at every
    // await-free step.
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
        let base_qps = if options.qps.is_finite() && options.qps > 0.0 {
            options.qps
        } else {
            1000.0
        };
        let follow = &options.follow;
        let share = (follow.report_share.is_finite() && follow.report_share > 0.0)
            .then(|| TokenBucket::new(base_qps * follow.report_share.min(1.0), 1));
        let wake = Arc::new(Notify::new());
        Binder {
            inner: Arc::new(Inner {
                client,
                limiter,
                event_limiter,
                share,
                gate: Arc::new(Gate::new(wake.clone())),
                reports: Mutex::new(ReportQueue::default()),
                events: Mutex::new(EventQueue::new(
                    follow.event_queue,
                    follow.event_queue_bytes,
                )),
                wake,
                pump_started: AtomicBool::new(false),
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
                stats: Counters::default(),
                outages: outage::Outages::default(),
                refused: Mutex::new(HashMap::new()),
                written: Notify::new(),
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
    /// [`Dropped::Cancelled`], their status writes [`Observer::write_dropped`]), the retry
    /// list and the event queue are emptied, and [`Binder::dispatch`] does nothing until
    /// [`Binder::resume`]. Requests already sent finish. Used when leadership is lost.
    pub fn pause(&self) {
        let inner = &self.inner;
        inner.active.store(false, Ordering::SeqCst);
        inner.epoch.fetch_add(1, Ordering::SeqCst);
        let dropped: Vec<RetryEntry> = std::mem::take(&mut *lock(&inner.retries));
        for r in dropped {
            inner.observer.bind_dropped(&r.job.bind, Dropped::Cancelled);
        }
        let targets = lock(&inner.reports).clear();
        inner
            .stats
            .status_failed
            .fetch_add(targets.len() as u64, Ordering::Relaxed);
        for t in &targets {
            inner.observer.write_dropped(t);
        }
        let events = lock(&inner.events).clear();
        inner
            .stats
            .events_failed
            .fetch_add(events, Ordering::Relaxed);
        if !targets.is_empty() || events > 0 {
            debug!(
                status_writes = targets.len(),
                events, "paused: waiting writes dropped; the next leader recomputes statuses"
            );
        }
    }

    /// Carries out plans again.
    pub fn resume(&self) {
        self.inner.epoch.fetch_add(1, Ordering::SeqCst);
        self.inner.active.store(true, Ordering::SeqCst);
        self.inner.wake.notify_one();
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

    /// Acts (binds) queued or in flight.
    pub fn acts_pending(&self) -> usize {
        self.inner.gate.acts()
    }

    /// Status writes and events waiting behind the acts.
    pub fn followers_waiting(&self) -> usize {
        lock(&self.inner.reports).len() + lock(&self.inner.events).len()
    }

    /// What the binder has done so far.
    pub fn stats(&self) -> Stats {
        self.inner.stats.get()
    }

    /// Waits until every dispatched write has been sent and answered (status writes and
    /// events included), at most `timeout`. Returns whether everything finished.
    pub async fn drain(&self, timeout: Duration) -> bool {
        let tracker = &self.inner.tracker;
        tracker.close();
        let done = tokio::time::timeout(timeout, tracker.wait()).await.is_ok();
        tracker.reopen();
        done
    }

    /// Queues writes of the objects Caldera's controllers keep (the default Queue, derived
    /// PodGroups, discovered HyperNodes), decided at `now`, as reports: behind the binds, one
    /// per object and kind of write, a newer one replacing one still waiting (see `owned.rs`).
    /// Does nothing while paused (the next leader decides them again).
    pub fn write_objects(&self, writes: Vec<ObjectWrite>, now: Time) {
        if writes.is_empty() || !self.is_active() {
            return;
        }
        self.ensure_pump();
        let inner = &self.inner;
        inner.queue_reports(writes.into_iter().map(StatusWrite::Object).collect(), now);
        inner.wake.notify_one();
    }

    /// Starts carrying out `plan`, decided on `snapshot` at `now`, and returns at once. Due
    /// retry-list binds go first, then the plan's binds in plan order; its status writes and
    /// events are queued behind them (see the crate docs). Does nothing while paused.
    pub fn dispatch(&self, plan: Plan, snapshot: &Snapshot, now: Time) {
        let inner = self.inner.clone();
        if !self.is_active() {
            return;
        }
        self.ensure_pump();
        let epoch = inner.epoch.load(Ordering::SeqCst);

        // What the plan needs from the snapshot, taken now while we have it.
        let wanted: HashSet<&str> = plan
            .binds
            .iter()
            .map(|b| &*b.pod.uid)
            .chain(plan.pod_conditions.iter().map(|c| &*c.pod.uid))
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
        let groups = Groups::build(snapshot, &plan.events);

        let Plan {
            binds,
            pod_conditions,
            pod_failures,
            podgroups,
            queues,
            events,
            evictions,
            nominations,
            capacity_requests,
            capacity_releases,
            volume_writes,
            claim_writes,
            extended_claims,
            move_holds,
        } = plan;
        // DRA claim writes: one step per gang, shared by its members' binds (`claims.rs`).
        // In gate mode kube-scheduler allocates the claims of the pods Caldera releases (and
        // the gate's RBAC cannot write them): the release goes alone.
        let (claim_writes, extended_claims) = if inner.options.release {
            (Vec::new(), Vec::new())
        } else {
            (claim_writes, extended_claims)
        };
        let claim_steps = claims::steps(&binds, claim_writes, extended_claims);

        // Acts first: their tickets are out before any report of this plan is queued.
        let mut acts: Vec<(Act, ActTicket)> = Vec::new();
        {
            let now_instant = Instant::now();
            let mut retries = lock(&inner.retries);
            let (due, later): (Vec<RetryEntry>, Vec<RetryEntry>) =
                retries.drain(..).partition(|r| r.due <= now_instant);
            *retries = later;
            drop(retries);
            for r in due {
                if inner.observer.still_wanted(&r.job.bind) {
                    acts.push((Act::Bind(r.job), ActTicket::new(&inner.gate)));
                }
            }
        }
        // Volume writes are acts, ahead of this plan's binds.
        for w in volume_writes {
            acts.push((Act::Volume(w, now), ActTicket::new(&inner.gate)));
        }
        // Claim writes of no bind in this plan go on their own.
        if let Some(step) = claim_steps.unbound {
            acts.push((Act::Claims(step), ActTicket::new(&inner.gate)));
        }
        // Evictions too: victims terminate for their grace period, so the sooner the better.
        // One act per victim job, its members in the plan's order (see `acts::evict_task`).
        let mut by_job: Vec<Vec<caldera_model::Eviction>> = Vec::new();
        let mut job_at: HashMap<Arc<str>, usize> = HashMap::new();
        for e in evictions {
            match job_at.get(&e.job) {
                Some(&i) => by_job[i].push(e),
                None => {
                    job_at.insert(e.job.clone(), by_job.len());
                    by_job.push(vec![e]);
                }
            }
        }
        for gang in by_job {
            acts.push((Act::Evictions(gang), ActTicket::new(&inner.gate)));
        }
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
        for b in binds {
            let mut event = scheduled.remove(&(b.pod.namespace.clone(), b.pod.name.clone()));
            let release = inner.options.release.then(|| {
                let spec = specs.get(&b.pod.uid).copied().cloned().unwrap_or_default();
                writes::release_patch(&spec, &b.pod.uid, &b.node)
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
            let event = event.map(|e| {
                let g = groups.of(&e);
                (e, g)
            });
            let job = BindJob {
                claims: claim_steps.by_job.get(&b.job).cloned(),
                created: created.get(&b.pod.uid).copied(),
                bind: b,
                release,
                event,
                round: 0,
            };
            acts.push((Act::Bind(job), ActTicket::new(&inner.gate)));
        }
        // A `Scheduled` event without a bind (should not happen) is still recorded.
        other_events.extend(scheduled.into_values());

        // A pod about to be bound no longer wants its waiting `PodScheduled=False`: sent after
        // the bind, it would undo the `PodScheduled=True` the server sets.
        let superseded: Vec<Waiting> = {
            let mut reports = lock(&inner.reports);
            acts.iter()
                .filter_map(|(act, _)| match act {
                    Act::Bind(job) => {
                        let b = &job.bind;
                        reports.cancel(&reports::pod_status_key(&b.pod.namespace, &b.pod.name))
                    }
                    Act::Volume(..) | Act::Evictions(..) | Act::Claims(..) => None,
                })
                .collect()
        };
        for w in superseded {
            inner.stats.status_coalesced.fetch_add(1, Ordering::Relaxed);
            inner.observer.write_dropped(&w.write.target().0);
        }

        // Reports, one per object.
        let mut status: Vec<StatusWrite> = Vec::new();
        status.extend(nominations.into_iter().map(StatusWrite::Nomination));
        for c in pod_conditions {
            let keep = unschedulable.contains(&c.pod.uid);
            status.push(StatusWrite::Condition(c, keep));
        }
        status.extend(pod_failures.into_iter().map(StatusWrite::Failure));
        status.extend(podgroups.into_iter().map(StatusWrite::PodGroup));
        for q in queues {
            let old = old_queues.get(&*q.name).copied().flatten().cloned();
            status.push(StatusWrite::Queue(Box::new((q, old))));
        }
        // Autoscaler requests, per PodGroup in plan order: releases first (a retry deletes the
        // old request before it creates the next).
        let capacity = capacity_releases
            .into_iter()
            .map(CapacityWrites::release)
            .chain(capacity_requests.into_iter().map(CapacityWrites::create));
        status.extend(capacity.map(StatusWrite::Capacity));
        status.extend(move_holds.into_iter().map(StatusWrite::MoveHolds));
        inner.queue_reports(status, now);
        // Events.
        for e in other_events {
            let g = groups.of(&e);
            inner.queue_event(QueuedEvent::new(e, "Scheduling", g), epoch);
        }
        inner.wake.notify_one();

        if !acts.is_empty() {
            let tracker = inner.tracker.clone();
            tracker.spawn(acts::run(inner, acts, epoch));
        }
    }

    fn ensure_pump(&self) {
        let inner = &self.inner;
        if !inner.pump_started.swap(true, Ordering::SeqCst) {
            tokio::spawn(follow::pump(Arc::downgrade(inner), inner.wake.clone()));
        }
    }
}

/// The PodGroup of each object the plan's events are about.
struct Groups {
    by_pod: HashMap<(Arc<str>, Arc<str>), Arc<Group>>,
    by_podgroup: HashMap<(Arc<str>, Arc<str>), Arc<Group>>,
}

impl Groups {
    fn of_job(j: &caldera_model::Job) -> Option<Arc<Group>> {
        j.has_podgroup().then(|| {
            Arc::new(Group {
                namespace: j.namespace.clone(),
                name: j.name.clone(),
                uid: j.uid.clone(),
                native: j.native.is_some(),
            })
        })
    }

    fn build(snapshot: &Snapshot, events: &[Event]) -> Groups {
        let mut groups = Groups {
            by_pod: HashMap::new(),
            by_podgroup: HashMap::new(),
        };
        if events.is_empty() {
            return groups;
        }
        let pods: HashSet<(&str, &str)> = events
            .iter()
            .filter(|e| e.object == EventObject::Pod)
            .map(|e| (&*e.namespace, &*e.name))
            .collect();
        let mut per_job: Vec<Option<Option<Arc<Group>>>> = vec![None; snapshot.jobs.len()];
        for t in &snapshot.tasks {
            if !pods.contains(&(&*t.namespace, &*t.name)) {
                continue;
            }
            let Some(j) = snapshot.jobs.get(t.job) else {
                continue;
            };
            let g = per_job[t.job]
                .get_or_insert_with(|| Self::of_job(j))
                .clone();
            if let Some(g) = g {
                groups
                    .by_pod
                    .insert((t.namespace.clone(), t.name.clone()), g);
            }
        }
        for e in events.iter().filter(|e| {
            matches!(
                e.object,
                EventObject::PodGroup | EventObject::NativePodGroup
            )
        }) {
            groups.by_podgroup.insert(
                (e.namespace.clone(), e.name.clone()),
                Arc::new(Group {
                    namespace: e.namespace.clone(),
                    name: e.name.clone(),
                    uid: e.uid.clone(),
                    native: e.object == EventObject::NativePodGroup,
                }),
            );
        }
        groups
    }

    fn of(&self, e: &Event) -> Option<Arc<Group>> {
        let key = (e.namespace.clone(), e.name.clone());
        match e.object {
            EventObject::Pod => self.by_pod.get(&key).cloned(),
            EventObject::PodGroup | EventObject::NativePodGroup => {
                self.by_podgroup.get(&key).cloned()
            }
            EventObject::Queue | EventObject::Lease => None,
        }
    }
}

impl Inner {
    /// Queues reports, each replacing a write waiting for its object (counted as coalesced).
    fn queue_reports(&self, writes: Vec<StatusWrite>, now: Time) {
        if writes.is_empty() {
            return;
        }
        let mut reports = lock(&self.reports);
        for write in writes {
            let replaced = reports.push(Waiting {
                write,
                now,
                _pending: Some(self.tracker.token()),
            });
            if replaced {
                self.stats.status_coalesced.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn current(&self, epoch: u64) -> bool {
        self.active.load(Ordering::SeqCst) && self.epoch.load(Ordering::SeqCst) == epoch
    }

    /// Waits until no write to `key` is in flight. A bind waits so for its pod's
    /// `PodScheduled=False` already sent: answered after the bind, that write would undo the
    /// `PodScheduled=True` the server sets when it binds (a waiting one is cancelled instead).
    async fn status_landed(&self, key: &reports::ReportKey) {
        loop {
            let written = self.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            if !lock(&self.reports).in_flight(key) {
                return;
            }
            written.await;
        }
    }

    /// Queues an event behind the acts (folded or dropped when the queue is over its caps).
    fn queue_event(&self, mut e: QueuedEvent, epoch: u64) {
        if !self.current(epoch) {
            self.stats.events_failed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        e._pending = Some(self.tracker.token());
        let pushed = lock(&self.events).push(e);
        match pushed {
            Pushed::Queued => self.wake.notify_one(),
            Pushed::Folded => {
                self.stats.events_folded.fetch_add(1, Ordering::Relaxed);
                self.observer.event_folded();
            }
            Pushed::Dropped => {
                self.stats.events_dropped.fetch_add(1, Ordering::Relaxed);
                self.observer.event_dropped();
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
        assert_eq!(backoff(&p, 1), Duration::from_secs(1));
        assert_eq!(backoff(&p, 2), Duration::from_secs(2));
        assert_eq!(backoff(&p, 4), Duration::from_secs(8));
        assert_eq!(backoff(&p, 30), Duration::from_secs(30));
    }
}
