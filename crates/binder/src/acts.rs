//! Acts (the [`crate::Class::Act`] class): writes that change what runs where, sent at once and
//! ahead of everything else: binds (in gate mode, releases to kube-scheduler), volume binder
//! writes, DRA claim writes (each gang's before any of its members binds: `claims.rs`), and
//! evictions.
//!
//! **Evictions** go a victim gang at a time: an act per victim job takes a slot for each of its
//! members (up to `bind_concurrency`), so the next gang starts once this one's are all out, and
//! every victim of a plan is sent as fast as the slots and the rate limit allow. Within a gang
//! the members a PodDisruptionBudget covers go first, one at a time: only they can be refused
//! (429), and the first refusal stops the rest, so a refusal leaves the gang whole. The members
//! no budget covers then go together (the API server cannot refuse them; one that fails for
//! another reason after its retries is reported dropped, and the next session plans again).
//!
//! Every act holds an [`ActTicket`] from the moment its plan is dispatched until it is
//! answered (or given up); while any ticket is out, reports and events wait (see `follow.rs`).
//! Volume binder writes (claims annotated with their member's node, volumes pre-bound) are
//! acts too: the binds of their members wait for them (in a later plan, once the claims are
//! bound).
//! To add a kind of act (a write that must precede a bind, such as a PVC pre-bind): a variant of [`Act`], its request in `writes.rs`, its outcome
//! hooks on [`crate::Observer`], and a ticket taken in [`crate::Binder::dispatch`] before any
//! report of the same plan is queued.

use crate::claims::{ClaimStep, Outcome};
use crate::events::{Group, QueuedEvent};
use crate::follow::Gate;
use crate::{backoff, lock, wall_clock, writes, Dropped, Inner, WriteKind};
use caldera_model::{Bind, Event, Time};
use serde_json::Value;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, warn};

/// Held by an act from dispatch until answered; while any is held, reports and events wait.
#[derive(Debug)]
pub(crate) struct ActTicket {
    gate: Arc<Gate>,
}

impl ActTicket {
    pub fn new(gate: &Arc<Gate>) -> Self {
        gate.act_started();
        ActTicket { gate: gate.clone() }
    }
}

impl Drop for ActTicket {
    fn drop(&mut self) {
        self.gate.act_done();
    }
}

/// An act to carry out.
#[derive(Debug)]
pub(crate) enum Act {
    /// `POST pods/binding`, then the pod's `Scheduled` event (queued behind).
    Bind(BindJob),
    /// A volume binder write (a claim's selected node, a volume's pre-bind), at the plan's
    /// time.
    Volume(caldera_model::VolumeWrite, Time),
    /// `POST pods/eviction` of the victims of one job, in the plan's order (members a
    /// PodDisruptionBudget covers first); see the module docs.
    Evictions(Vec<caldera_model::Eviction>),
    /// DRA claim writes that precede no bind of the plan (`claims.rs`).
    Claims(Arc<ClaimStep>),
}

/// A bind to carry out, with what goes with it.
#[derive(Debug, Clone)]
pub(crate) struct BindJob {
    pub bind: Bind,
    /// The DRA claim writes of its gang, done before any member binds (`claims.rs`).
    pub claims: Option<Arc<ClaimStep>>,
    /// Gate mode: the release patch (see [`crate::Options::release`]).
    pub release: Option<Value>,
    pub created: Option<Time>,
    /// The pod's `Scheduled` event, and its PodGroup (for folding).
    pub event: Option<(Event, Option<Arc<Group>>)>,
    pub round: u32,
}

/// A bind waiting for its next round.
#[derive(Debug, Clone)]
pub(crate) struct RetryEntry {
    pub job: BindJob,
    pub due: Instant,
}

/// Starts the acts in order: each waits for a slot before the next is started, so the slots
/// (a fair semaphore) are handed out in plan order across concurrent dispatches too.
pub(crate) async fn run(inner: Arc<Inner>, acts: Vec<(Act, ActTicket)>, epoch: u64) {
    let mut set = JoinSet::new();
    for (act, ticket) in acts {
        // A victim gang's members go out together: a slot each.
        let slots = match &act {
            Act::Evictions(gang) => gang.len().clamp(1, inner.options.bind_concurrency.max(1)),
            _ => 1,
        };
        let Ok(permit) = inner
            .bind_slots
            .clone()
            .acquire_many_owned(u32::try_from(slots).unwrap_or(u32::MAX))
            .await
        else {
            break;
        };
        match act {
            Act::Bind(job) => {
                set.spawn(bind_task(inner.clone(), job, permit, ticket, epoch));
            }
            Act::Volume(w, now) => {
                set.spawn(volume_task(inner.clone(), w, now, permit, ticket, epoch));
            }
            Act::Evictions(gang) => {
                set.spawn(evict_task(inner.clone(), gang, permit, ticket, epoch));
            }
            Act::Claims(step) => {
                let inner = inner.clone();
                set.spawn(async move {
                    step.run(&inner, epoch).await;
                    drop(permit);
                    drop(ticket);
                });
            }
        }
    }
    while set.join_next().await.is_some() {}
}

/// The evictions of one victim gang (see the module docs): covered members one at a time,
/// stopping at the first not evicted; then the others together. Each victim's outcome goes to
/// the observer as a pod write: [`crate::Observer::written`] once evicted,
/// [`crate::Observer::write_dropped`] when not (its victim runs after all).
async fn evict_task(
    inner: Arc<Inner>,
    gang: Vec<caldera_model::Eviction>,
    permit: OwnedSemaphorePermit,
    ticket: ActTicket,
    epoch: u64,
) {
    let (covered, free): (Vec<_>, Vec<_>) = gang.into_iter().partition(|e| e.budgeted);
    let mut stopped = false;
    for e in &covered {
        let evicted = !stopped && evict_one(&inner, e, epoch).await;
        stopped |= !evicted;
        evicted_or_not(&inner, e, evicted);
    }
    if stopped {
        for e in &free {
            evicted_or_not(&inner, e, false);
        }
    } else {
        let mut set = JoinSet::new();
        for e in free {
            let inner = inner.clone();
            set.spawn(async move {
                let evicted = evict_one(&inner, &e, epoch).await;
                evicted_or_not(&inner, &e, evicted);
            });
        }
        while set.join_next().await.is_some() {}
    }
    inner
        .gate
        .hold_for(inner.options.follow.hold_after_evictions);
    drop(permit);
    drop(ticket);
}

fn evicted_or_not(inner: &Inner, e: &caldera_model::Eviction, evicted: bool) {
    let target = crate::Target::Pod {
        namespace: e.pod.namespace.clone(),
        name: e.pod.name.clone(),
    };
    if evicted {
        inner.stats.status_written.fetch_add(1, Ordering::Relaxed);
        inner.observer.written(&target, None);
    } else {
        inner.stats.status_failed.fetch_add(1, Ordering::Relaxed);
        inner.observer.write_dropped(&target);
    }
}

/// One eviction under the retry policy: whether the pod was evicted. A refusal (429: a
/// PodDisruptionBudget allows no disruption) is not retried: the victim stays, its
/// preemptor's nomination no longer fits, and the next session plans again.
async fn evict_one(inner: &Inner, e: &caldera_model::Eviction, epoch: u64) -> bool {
    let policy = &inner.options.retry;
    let key = e.pod.to_string();
    // Still backing off from earlier failures: not sent (the next session plans again).
    if inner.outages.backing_off(WriteKind::Eviction, &key) {
        return false;
    }
    let mut failures = 0u32;
    loop {
        if !inner.current(epoch) {
            return false;
        }
        inner.limiter.acquire().await;
        if !inner.current(epoch) {
            return false;
        }
        inner.observer.request(WriteKind::Eviction);
        match writes::evict(&inner.client, e).await {
            Ok(_) => {
                inner.outages.succeeded(WriteKind::Eviction, &key);
                return true;
            }
            Err(err) => {
                inner.observer.failed_attempt(WriteKind::Eviction, &err);
                failures += 1;
                // A budget's refusal: not the server failing, and never retried.
                if err.is_budget_refusal() {
                    debug!(error = %err, "eviction refused by a PodDisruptionBudget");
                    return false;
                }
                if !err.is_retryable() {
                    if err.is_settled() {
                        debug!(error = %err, "eviction target is gone");
                    } else {
                        warn!(error = %err, "eviction refused; the next session plans again");
                    }
                    inner.outages.forget(WriteKind::Eviction, &key);
                    return false;
                }
                let wait = inner
                    .outages
                    .failed(policy, WriteKind::Eviction, &key, &err);
                if failures >= policy.attempts.max(1) {
                    return false;
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// A volume write: retried like a bind's attempts; a write given up is logged and reported
/// (`Observer::volume_write_dropped`), so the cache forgets what it assumed and the next
/// session decides again.
async fn volume_task(
    inner: Arc<Inner>,
    w: caldera_model::VolumeWrite,
    now: Time,
    permit: OwnedSemaphorePermit,
    ticket: ActTicket,
    epoch: u64,
) {
    let policy = &inner.options.retry;
    let kind = match w {
        caldera_model::VolumeWrite::PreBind { .. } => WriteKind::VolumePreBind,
        _ => WriteKind::ClaimSelection,
    };
    let mut failures = 0u32;
    let mut done = false;
    while inner.current(epoch) {
        inner.limiter.acquire().await;
        if !inner.current(epoch) {
            break;
        }
        inner.observer.request(kind);
        match writes::volume(&inner.client, &w, now, &inner.options.field_manager).await {
            Ok(()) => {
                done = true;
                break;
            }
            Err(e) => {
                inner.observer.failed_attempt(kind, &e);
                failures += 1;
                if !e.is_retryable() || failures >= policy.attempts.max(1) {
                    warn!(error = %e, "volume write failed; the next sessions decide again");
                    break;
                }
                tokio::time::sleep(backoff(policy, failures)).await;
            }
        }
    }
    if !done {
        inner.observer.volume_write_dropped(&w);
    }
    drop(permit);
    drop(ticket);
}

async fn bind_task(
    inner: Arc<Inner>,
    job: BindJob,
    permit: OwnedSemaphorePermit,
    ticket: ActTicket,
    epoch: u64,
) {
    let policy = &inner.options.retry;
    let obs = &inner.observer;
    let b = &job.bind;
    if let Some(step) = &job.claims {
        match step.run(&inner, epoch).await {
            Outcome::Written => {}
            Outcome::Failed => {
                drop(permit);
                obs.bind_dropped(b, Dropped::Rejected);
                drop(ticket);
                return;
            }
            Outcome::Cancelled => {
                drop(permit);
                obs.bind_dropped(b, Dropped::Cancelled);
                drop(ticket);
                return;
            }
        }
    }
    if job.release.is_none() {
        let key = crate::reports::pod_status_key(&b.pod.namespace, &b.pod.name);
        inner.status_landed(&key).await;
    }
    let mut failures = 0u32;
    let mut wait = std::time::Duration::ZERO;
    let outcome = loop {
        if !inner.current(epoch) {
            undo_claims(&inner, &job).await;
            obs.bind_dropped(b, Dropped::Cancelled);
            return;
        }
        inner.limiter.acquire().await;
        if !inner.current(epoch) {
            undo_claims(&inner, &job).await;
            obs.bind_dropped(b, Dropped::Cancelled);
            return;
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
            Ok(()) => {
                if inner.outages.succeeded(kind, &b.pod.uid) {
                    // The server answers again: binds waiting on the retry list go now.
                    let now = Instant::now();
                    for r in lock(&inner.retries).iter_mut() {
                        r.due = r.due.min(now);
                    }
                }
                break Ok(());
            }
            Err(e) => {
                obs.failed_attempt(kind, &e);
                if e.is_settled() || !e.is_retryable() {
                    inner.outages.forget(kind, &b.pod.uid);
                    break Err(e);
                }
                // One attempt per backoff step of this pod (see `outage.rs`).
                wait = inner.outages.failed(policy, kind, &b.pod.uid, &e);
                failures += 1;
                if failures >= policy.attempts.max(1) {
                    break Err(e);
                }
                debug!(error = %e, attempt = failures, "bind failed; retrying");
                tokio::time::sleep(wait).await;
            }
        }
    };
    drop(permit);
    match outcome {
        Ok(()) => {
            let latency = job.created.and_then(|c| {
                let ms = wall_clock().millis_since(c);
                (ms >= 0).then(|| std::time::Duration::from_millis(ms as u64))
            });
            obs.bound(b, latency);
            inner.stats.bound.fetch_add(1, Ordering::Relaxed);
            if let Some((e, group)) = job.event {
                inner.queue_event(QueuedEvent::new(e, "Binding", group), epoch);
            }
        }
        Err(e) if e.is_settled() => {
            debug!(error = %e, "bind settled by the server; the watch will show the pod");
            obs.bind_settled(b, &e);
        }
        Err(e) if !e.is_retryable() => {
            warn!(error = %e, "bind rejected; the member will be placed again");
            undo_claims(&inner, &job).await;
            obs.bind_dropped(b, Dropped::Rejected);
        }
        Err(e) => {
            let round = job.round + 1;
            if round > policy.rounds || !inner.current(epoch) {
                warn!(error = %e, rounds = job.round, "bind keeps failing; giving up");
                inner.outages.forget(WriteKind::Binding, &b.pod.uid);
                undo_claims(&inner, &job).await;
                obs.bind_dropped(b, Dropped::Exhausted);
            } else {
                // Logged once per outage (`outage.rs`), not per attempt.
                debug!(error = %e, round, "bind failed; on the retry list");
                obs.bind_deferred(b, &e);
                lock(&inner.retries).push(RetryEntry {
                    job: BindJob { round, ..job },
                    due: Instant::now() + wait,
                });
            }
        }
    }
    drop(ticket);
}

/// A member whose bind will not go through gives back what its gang's claim step wrote for it
/// (`ClaimStep::undo_member`), so the next session is not pinned to a node it never reached.
async fn undo_claims(inner: &Arc<Inner>, job: &BindJob) {
    if let Some(step) = &job.claims {
        step.undo_member(inner, &job.bind.pod.uid).await;
    }
}
