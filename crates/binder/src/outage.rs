//! When the API server is unreachable or overloaded: each object's writes back off on their
//! own, and the logs say so once per outage per kind of write.
//!
//! **Backoff.** Every object (a pod to bind, a status to write) keeps the number of its
//! writes that failed in a row; its next attempt waits `initial_backoff × 2^(failures-1)`, at
//! most `max_backoff` (1 s doubling to 30 s by default, as client-go's workqueues back off an
//! item), stretched by a random 0–25% so a backlog that failed together does not come back
//! together, and never less than what the server asked for (`retryAfterSeconds` of a 429).
//! A success forgets the object's failures. So an object is tried at most once per step, not
//! once per session or per inline retry: in a 15 s outage, five attempts at most.
//!
//! **Recovery.** When a write of a kind succeeds after failures of that kind (the server
//! answers again), everything of that kind waiting for its next step is due at once: the
//! backlog goes through as soon as the server is back, not up to 30 s later.
//!
//! **Logs.** The first failure of a kind opens an outage and is logged as a warning; later
//! failures are counted, not logged; the first success closes it with one line that says how
//! many objects waited and how many attempts failed (`... 1,204 binds waited for the API
//! server ...`).

use crate::{lock, RetryPolicy, WriteKind};
use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use tracing::warn;

/// Per-object backoff and per-kind outages (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Outages {
    /// Failures in a row, and when the next attempt is due, by (kind, object key).
    failures: Mutex<HashMap<(WriteKind, String), (u32, Instant)>>,
    /// Open outages by kind.
    open: Mutex<HashMap<WriteKind, Outage>>,
}

#[derive(Debug)]
struct Outage {
    since: Instant,
    attempts: u64,
    objects: HashSet<String>,
}

/// `n` with thousands separated by commas.
fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `kind`'s writes, plural, for the log lines.
fn plural(kind: WriteKind) -> &'static str {
    match kind {
        WriteKind::Binding => "binds",
        WriteKind::Release => "releases",
        WriteKind::Eviction => "evictions",
        WriteKind::Nomination => "nominations",
        WriteKind::Event => "events",
        WriteKind::PodStatus => "pod status writes",
        WriteKind::PodGroupStatus => "PodGroup status writes",
        WriteKind::QueueStatus => "Queue status writes",
        WriteKind::ProvisioningRequest => "ProvisioningRequest writes",
        WriteKind::PodTemplate => "PodTemplate writes",
        WriteKind::ConsumeAnnotations => "consume-annotation writes",
        WriteKind::ClaimSelection => "claim selections",
        WriteKind::VolumePreBind => "volume pre-binds",
        WriteKind::ResourceClaim => "resource claim allocations",
        WriteKind::ConsolidationHolds => "consolidation hold writes",
        WriteKind::Queue => "Queue writes",
        WriteKind::PodGroup => "derived PodGroup writes",
        WriteKind::HyperNode => "HyperNode writes",
        WriteKind::HyperNodeStatus => "HyperNode status writes",
    }
}

/// The wait after `failures` failures in a row: the policy's doubling, stretched by 0–25%.
pub(crate) fn step(policy: &RetryPolicy, failures: u32, key: &str) -> Duration {
    let base = crate::backoff(policy, failures);
    // A random fraction from the process's hashing keys (seeded from the OS): enough to
    // spread a backlog; no dependency for it.
    let r =
        std::collections::hash_map::RandomState::new().hash_one((key, failures, Instant::now()));
    let stretch = (r % 1000) as f64 / 4000.0;
    base.mul_f64(1.0 + stretch)
}

impl Outages {
    /// A write of `kind` to object `key` failed and will be tried again: counts it (the first
    /// failure of an outage is logged) and says how long the object waits.
    pub fn failed(
        &self,
        policy: &RetryPolicy,
        kind: WriteKind,
        key: &str,
        error: &crate::Error,
    ) -> Duration {
        let failures = {
            let map = lock(&self.failures);
            map.get(&(kind, key.to_string())).map_or(0, |&(n, _)| n) + 1
        };
        let wait = step(policy, failures, key);
        let wait = error.retry_after().map_or(wait, |asked| wait.max(asked));
        lock(&self.failures).insert((kind, key.to_string()), (failures, Instant::now() + wait));
        {
            let mut open = lock(&self.open);
            let outage = open.entry(kind).or_insert_with(|| {
                warn!(
                    kind = %kind,
                    error = %error,
                    "{} failing: the API server is unreachable or overloaded; each is retried with backoff ({:?} doubling to {:?}), said once until they go through",
                    plural(kind),
                    policy.initial_backoff,
                    policy.max_backoff,
                );
                Outage {
                    since: Instant::now(),
                    attempts: 0,
                    objects: HashSet::new(),
                }
            });
            outage.attempts += 1;
            outage.objects.insert(key.to_string());
        }
        wait
    }

    /// Whether object `key` waits for its next step now (a write of it failed and its
    /// backoff has not run out): it is not sent before.
    pub fn backing_off(&self, kind: WriteKind, key: &str) -> bool {
        let map = lock(&self.failures);
        if map.is_empty() {
            return false;
        }
        map.get(&(kind, key.to_string()))
            .is_some_and(|&(_, due)| due > Instant::now())
    }

    /// A write of `kind` to `key` succeeded: its failures are forgotten. `true` when this
    /// ends an outage of the kind (logged with what waited).
    pub fn succeeded(&self, kind: WriteKind, key: &str) -> bool {
        {
            let mut map = lock(&self.failures);
            if !map.is_empty() {
                map.remove(&(kind, key.to_string()));
            }
        }
        let ended = lock(&self.open).remove(&kind);
        match ended {
            Some(o) => {
                // The server is back: whatever of the kind waits for its next step is due.
                let now = Instant::now();
                for ((k, _), (_, due)) in lock(&self.failures).iter_mut() {
                    if *k == kind {
                        *due = now;
                    }
                }
                warn!(
                    kind = %kind,
                    "the API server answers again: {} {} waited for it over {:.1}s ({} attempts failed)",
                    count(o.objects.len()),
                    plural(kind),
                    o.since.elapsed().as_secs_f64(),
                    count(o.attempts as usize),
                );
                true
            }
            None => false,
        }
    }

    /// The object will not be tried again (given up, or refused): its failures are forgotten.
    pub fn forget(&self, kind: WriteKind, key: &str) {
        lock(&self.failures).remove(&(kind, key.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_with_thousands_separated() {
        assert_eq!(count(7), "7");
        assert_eq!(count(1204), "1,204");
        assert_eq!(count(5_504_000), "5,504,000");
    }

    #[test]
    fn a_step_is_the_doubling_stretched_by_at_most_a_quarter() {
        let p = RetryPolicy::default();
        for failures in 1..8 {
            let base = crate::backoff(&p, failures);
            let s = step(&p, failures, "ns/p");
            assert!(
                s >= base && s <= base.mul_f64(1.25),
                "{failures}: {s:?} vs {base:?}"
            );
        }
        assert_eq!(crate::backoff(&p, 1), Duration::from_secs(1));
        assert_eq!(crate::backoff(&p, 6), Duration::from_secs(30));
    }
}
