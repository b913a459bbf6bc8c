//! What follows behind the acts: one pump task sends the waiting reports (status writes) and
//! events once no act is queued or in flight, and has not been for `report_quiet` (the next
//! session's binds are usually on their way by then). While acts are queued, a report or event
//! goes only when it gets a token from the share bucket (`report_share` of the QPS), so they
//! are never starved by an endless stream of binds. Reports go before events; both take their
//! usual tokens too (reports from the main bucket, events from the events' own).
//!
//! After a victim gang's evictions the gate stays shut for `hold_after_evictions` more, so
//! the victims' kubelets and the preemptors' binds have the API server to themselves while the
//! victims terminate; a preemptor's nomination is the one report that does not wait for the
//! hold (it says where the preemptor is going, and kube-scheduler writes it with the
//! preemption), only for the acts, so a plan's evictions go out first.

use crate::events::QueuedEvent;
use crate::reports::{ReportKey, StatusWrite, Waiting};
use crate::{backoff, lock, writes, Inner, WriteKind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{Notify, OwnedSemaphorePermit};
use tokio::time::Instant;
use tracing::{debug, warn};

/// Whether acts are queued or in flight, and since when none are.
#[derive(Debug)]
pub(crate) struct Gate {
    acts: AtomicUsize,
    idle_since: Mutex<Instant>,
    /// Shut until then whatever the acts (`hold_for`).
    hold_until: Mutex<Option<Instant>>,
    wake: Arc<Notify>,
}

impl Gate {
    pub fn new(wake: Arc<Notify>) -> Self {
        Gate {
            acts: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            hold_until: Mutex::new(None),
            wake,
        }
    }

    pub fn act_started(&self) {
        self.acts.fetch_add(1, Ordering::SeqCst);
    }

    pub fn act_done(&self) {
        if self.acts.fetch_sub(1, Ordering::SeqCst) == 1 {
            *lock(&self.idle_since) = Instant::now();
            self.wake.notify_one();
        }
    }

    /// Acts queued or in flight.
    pub fn acts(&self) -> usize {
        self.acts.load(Ordering::SeqCst)
    }

    /// Keeps the gate shut for `d` from now (or longer, if held longer already).
    pub fn hold_for(&self, d: Duration) {
        let until = Instant::now() + d;
        let mut held = lock(&self.hold_until);
        if held.is_none_or(|h| h < until) {
            *held = Some(until);
        }
    }

    /// `None` while acts are out; otherwise how long until the gate opens (zero: open).
    fn opens_in(&self, quiet: Duration) -> Option<Duration> {
        if self.acts() > 0 {
            return None;
        }
        let since = *lock(&self.idle_since);
        let held = lock(&self.hold_until).map_or(Duration::ZERO, |until| {
            until.saturating_duration_since(Instant::now())
        });
        Some(quiet.saturating_sub(since.elapsed()).max(held))
    }
}

/// What the pump sends next.
enum Next {
    Report(ReportKey, Box<Waiting>),
    Event(Box<QueuedEvent>),
}

enum Step {
    Send(Next, u64),
    /// Nothing to send now; look again when woken or after this long (`None`: when woken).
    Wait(Option<Duration>),
}

impl Inner {
    /// Before each request of a follower write that makes several (an autoscaler request):
    /// the first was paid for by the pump; each later one, while acts are queued, waits for a
    /// token of the share too, so a write of many requests does not cut into the binds. Then a
    /// token of the client's bucket. `false`: leadership was lost meanwhile, stop.
    pub(crate) async fn follower_token(
        &self,
        kind: WriteKind,
        first: &mut bool,
        epoch: u64,
    ) -> bool {
        if !std::mem::take(first) && self.gate.acts() > 0 {
            if let Some(share) = &self.share {
                share.acquire().await;
                self.stats.share_writes.fetch_add(1, Ordering::Relaxed);
            }
        }
        if !self.current(epoch) {
            return false;
        }
        self.limiter.acquire().await;
        self.observer.request(kind);
        true
    }

    fn next_follower(&self) -> Step {
        if !self.active.load(Ordering::SeqCst) {
            return Step::Wait(None);
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let mut reports = lock(&self.reports);
        let mut events = lock(&self.events);
        if !reports.has_ready() && events.is_empty() {
            return Step::Wait(None);
        }
        // Nominations wait for the acts (a plan's evictions go first) but not for a hold.
        if self.gate.acts() == 0 {
            if let Some((key, w)) = reports.take_nomination() {
                return Step::Send(Next::Report(key, Box::new(w)), epoch);
            }
        }
        let wait = match self.gate.opens_in(self.options.follow.report_quiet) {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(Duration::MAX),
        };
        if let Some(d) = wait {
            let shared = self.share.as_ref().is_some_and(|s| s.try_acquire());
            if !shared {
                let refill = self
                    .share
                    .as_ref()
                    .map_or(Duration::MAX, |s| s.until_available());
                let d = d.min(refill);
                return Step::Wait((d != Duration::MAX).then_some(d));
            }
            self.stats.share_writes.fetch_add(1, Ordering::Relaxed);
        }
        let next = match reports.take() {
            Some((key, w)) => Next::Report(key, Box::new(w)),
            None => match events.pop() {
                Some(e) => Next::Event(Box::new(e)),
                None => return Step::Wait(None),
            },
        };
        Step::Send(next, epoch)
    }
}

/// The pump: runs until the binder is dropped.
pub(crate) async fn pump(binder: Weak<Inner>, wake: Arc<Notify>) {
    loop {
        let Some(slots) = binder.upgrade().map(|i| i.write_slots.clone()) else {
            return;
        };
        let Ok(permit) = slots.acquire_owned().await else {
            return;
        };
        loop {
            let Some(inner) = binder.upgrade() else {
                return;
            };
            match inner.next_follower() {
                Step::Send(next, epoch) => {
                    tokio::spawn(send(inner, next, epoch, permit));
                    break;
                }
                Step::Wait(d) => {
                    drop(inner);
                    match d {
                        Some(d) => {
                            tokio::select! {
                                _ = wake.notified() => {}
                                _ = tokio::time::sleep(d) => {}
                            }
                        }
                        None => wake.notified().await,
                    }
                }
            }
        }
    }
}

async fn send(inner: Arc<Inner>, next: Next, epoch: u64, permit: OwnedSemaphorePermit) {
    match next {
        Next::Report(key, w) => send_report(&inner, key, *w, epoch).await,
        Next::Event(e) => send_event(&inner, *e, epoch).await,
    }
    drop(permit);
    inner.wake.notify_one();
}

async fn send_report(inner: &Inner, key: ReportKey, w: Waiting, epoch: u64) {
    let (target, kind) = w.write.target();
    let outcome = send_one(inner, &key, &w.write, w.now, epoch).await;
    // A newer write to the object waits meanwhile: it reports instead, so the runtime's
    // overlay matches the newest content with its resourceVersion.
    let newest = {
        let mut reports = lock(&inner.reports);
        reports.done(&key);
        !reports.is_waiting(&key)
    };
    inner.written.notify_waiters();
    match outcome {
        Some(rv) => {
            debug!(kind = %kind, object = %key.1, resource_version = ?rv, "status written");
            inner.stats.status_written.fetch_add(1, Ordering::Relaxed);
            if newest {
                inner.observer.written(&target, rv.as_deref());
            }
        }
        None => {
            inner.stats.status_failed.fetch_add(1, Ordering::Relaxed);
            if newest {
                inner.observer.write_dropped(&target);
            }
        }
    }
}

/// Sends `write` (waiting under `key`) under the retry policy: `Some` (the new
/// resourceVersion, if any) once done, `None` when given up, refused, or no longer this
/// leader's to send. A write whose object is still backing off from earlier failures is not
/// sent (`outage.rs`), nor is one the server refused as invalid with the same content (a
/// later session plans it again; a changed one goes).
async fn send_one(
    inner: &Inner,
    key: &ReportKey,
    write: &StatusWrite,
    now: caldera_model::Time,
    epoch: u64,
) -> Option<Option<String>> {
    let kind = write.target().1;
    let policy = &inner.options.retry;
    if inner.outages.backing_off(kind, &key.1) {
        return None;
    }
    let content = format!("{write:?}");
    if lock(&inner.refused).get(key) == Some(&content) {
        debug!(kind = %kind, object = %key.1, "refused as invalid before, unchanged: not sent again");
        return None;
    }
    let mut failures = 0u32;
    loop {
        if !inner.current(epoch) {
            return None;
        }
        match write.send(inner, now, epoch).await {
            Ok(rv) => {
                inner.outages.succeeded(kind, &key.1);
                lock(&inner.refused).remove(key);
                return Some(rv);
            }
            Err(e) => {
                inner.observer.failed_attempt(kind, &e);
                failures += 1;
                if let Some(fields) = e.invalid() {
                    inner.outages.forget(kind, &key.1);
                    lock(&inner.refused).insert(key.clone(), content);
                    refused(inner, write, &e, &fields, epoch);
                    return None;
                }
                if !e.is_retryable() {
                    if e.is_settled() {
                        debug!(error = %e, "status write target is gone");
                    } else {
                        warn!(error = %e, "status write refused; the next session may retry");
                    }
                    inner.outages.forget(kind, &key.1);
                    return None;
                }
                let wait = inner.outages.failed(policy, kind, &key.1, &e);
                if failures >= policy.attempts.max(1) {
                    return None;
                }
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// Says once that the server refused `write` as invalid (422), naming the fields: a warning
/// in the log and, for a PodGroup's autoscaler request, a Warning event on the PodGroup and
/// the request reported to the observer as refused (the PodGroup's condition then says so).
/// The same write is not sent again (see [`send_one`]).
fn refused(inner: &Inner, write: &StatusWrite, e: &crate::Error, fields: &str, epoch: u64) {
    warn!(error = %e, fields, "the API server refused a write as invalid; it is not sent again until what it is made from changes");
    let StatusWrite::Capacity(c) = write else {
        return;
    };
    // The request being made when the server refused (a write releases older ones first).
    let Some(need) = c.ops.iter().rev().find_map(|op| match op {
        crate::capacity::CapacityOp::Create(n) => Some(n),
        crate::capacity::CapacityOp::Release(_) => None,
    }) else {
        return;
    };
    let uid = need.podgroup_uid.clone();
    inner
        .observer
        .capacity_refused(need, &format!("{fields} ({e})"));
    let group = Arc::new(crate::Group {
        namespace: c.namespace.clone(),
        name: c.podgroup.clone(),
        uid: uid.clone(),
        native: false,
    });
    let event = caldera_model::Event {
        object: caldera_model::EventObject::PodGroup,
        namespace: c.namespace.clone(),
        name: c.podgroup.clone(),
        uid,
        warning: true,
        reason: "ProvisioningRequestInvalid".into(),
        message: format!(
            "the API server refused the autoscaler request's objects as invalid ({fields}): {e}; not sent again unchanged: the request counts as failed and the next attempt waits for its back-off"
        ),
    };
    inner.queue_event(QueuedEvent::new(event, "Provisioning", Some(group)), epoch);
}

async fn send_event(inner: &Inner, e: QueuedEvent, epoch: u64) {
    let policy = &inner.options.retry;
    let mut failures = 0u32;
    loop {
        if !inner.current(epoch) {
            inner
                .stats
                .events_failed
                .fetch_add(u64::from(e.count), Ordering::Relaxed);
            return;
        }
        inner.event_limiter.acquire().await;
        inner.observer.request(WriteKind::Event);
        match writes::event(&inner.client, &inner.options.reporter, &e).await {
            Ok(()) => {
                inner.stats.events_written.fetch_add(1, Ordering::Relaxed);
                inner
                    .stats
                    .events_represented
                    .fetch_add(u64::from(e.count), Ordering::Relaxed);
                return;
            }
            Err(err) => {
                inner.observer.failed_attempt(WriteKind::Event, &err);
                failures += 1;
                if !err.is_retryable() || failures >= policy.attempts.max(1) {
                    debug!(error = %err, "event not recorded");
                    inner
                        .stats
                        .events_failed
                        .fetch_add(u64::from(e.count), Ordering::Relaxed);
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
    fn a_hold_keeps_the_gate_shut_after_the_acts() {
        let gate = Gate::new(Arc::new(Notify::new()));
        assert_eq!(gate.opens_in(Duration::ZERO), Some(Duration::ZERO));
        gate.act_started();
        assert_eq!(
            gate.opens_in(Duration::ZERO),
            None,
            "shut while acts are out"
        );
        gate.hold_for(Duration::from_secs(2));
        gate.act_done();
        let left = gate.opens_in(Duration::from_millis(100)).unwrap();
        assert!(
            left > Duration::from_millis(1500) && left <= Duration::from_secs(2),
            "{left:?}"
        );
        gate.hold_for(Duration::from_millis(10));
        assert!(
            gate.opens_in(Duration::ZERO).unwrap() > Duration::from_millis(1500),
            "a shorter hold does not shorten a longer one"
        );
    }
}
