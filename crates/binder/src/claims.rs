//! DRA claim writes (`Plan::claim_writes`, `Plan::extended_claims`), carried out as
//! kube-scheduler's DynamicResources PreBind does but for a whole gang: every member's claims
//! are written (concurrently, each under the retry policy) before any member binds, and if one
//! is refused, none of the gang binds and the writes that went through are undone (its
//! Unreserve), so the next session decides again.
//!
//! The writes of one gang are a [`ClaimStep`] that every member's bind act shares: the first
//! member to get a slot runs it, the others wait for its outcome.

use crate::{backoff, writes, Inner, WriteKind};
use caldera_model::dra::{ClaimWrite, ExtendedResourceClaim};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::OnceCell;
use tokio::task::JoinSet;
use tracing::warn;

/// How a gang's claim writes ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every claim is written: the members may bind.
    Written,
    /// A write was refused or kept failing: no member binds.
    Failed,
    /// Leadership was lost (or the binder paused) before they were done.
    Cancelled,
}

/// The claim writes of one gang in one plan.
#[derive(Debug)]
pub(crate) struct ClaimStep {
    writes: Vec<ClaimWrite>,
    extended: Vec<ExtendedResourceClaim>,
    /// The bridge claims this step made: (index in `extended`, claim name).
    made: Mutex<Vec<(usize, String)>>,
    outcome: OnceCell<Outcome>,
}

impl ClaimStep {
    pub fn new(writes: Vec<ClaimWrite>, extended: Vec<ExtendedResourceClaim>) -> Self {
        ClaimStep {
            writes,
            extended,
            made: Mutex::new(Vec::new()),
            outcome: OnceCell::new(),
        }
    }

    /// Undoes the writes of this step for one member whose bind did not go through after the
    /// step was written (kube-scheduler's Unreserve for that pod): its uid leaves `reservedFor`
    /// of every claim the step wrote for it, and a claim the decision allocated is deallocated
    /// (finalizer removed) once no user is left. Nothing happens unless the step was written.
    pub async fn undo_member(&self, inner: &Arc<Inner>, pod_uid: &str) {
        if self.outcome.get() != Some(&Outcome::Written) {
            return;
        }
        for w in &self.writes {
            let mine: Vec<_> = w
                .reserved_for
                .iter()
                .filter(|c| &*c.uid == pod_uid)
                .cloned()
                .collect();
            if mine.is_empty() {
                continue;
            }
            let w = ClaimWrite {
                reserved_for: mine,
                ..w.clone()
            };
            if let Err(e) = writes::unclaim(&inner.client, &w, &inner.options.field_manager).await {
                warn!(error = %e, "could not undo the claim write of a member that did not bind");
            }
            // The runtime's overlay no longer lays it over the next snapshots.
            inner.observer.claim_write_dropped(&w);
        }
        let bridges: Vec<(usize, String)> = {
            let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
            let (mine, others) = made.drain(..).partition(|(k, _)| {
                self.extended
                    .get(*k)
                    .is_some_and(|e| &*e.pod_uid == pod_uid)
            });
            *made = others;
            mine
        };
        for (k, name) in bridges {
            self.delete_bridge(inner, k, &name).await;
            if let Some(e) = self.extended.get(k) {
                inner.observer.extended_claim_dropped(e);
            }
        }
    }

    /// Runs the writes once (later callers wait for the first one's outcome).
    pub async fn run(&self, inner: &Arc<Inner>, epoch: u64) -> Outcome {
        *self
            .outcome
            .get_or_init(|| self.write_all(inner.clone(), epoch))
            .await
    }

    async fn write_all(&self, inner: Arc<Inner>, epoch: u64) -> Outcome {
        let mut set = JoinSet::new();
        for (i, w) in self.writes.iter().enumerate() {
            let (inner, w) = (inner.clone(), w.clone());
            set.spawn(async move {
                let done = attempt(&inner, epoch, || {
                    writes::claim(&inner.client, &w, &inner.options.field_manager)
                })
                .await;
                (i, done, None)
            });
        }
        for (k, e) in self.extended.iter().enumerate() {
            let (inner, e) = (inner.clone(), e.clone());
            set.spawn(async move {
                // Not repeated after a create that may have gone through (a second claim).
                inner.limiter.acquire().await;
                inner.observer.request(WriteKind::ResourceClaim);
                let done = match writes::extended_claim(
                    &inner.client,
                    &e,
                    &inner.options.field_manager,
                )
                .await
                {
                    Ok(name) => (Some(true), Some((k, name))),
                    Err(err) => {
                        inner.observer.failed_attempt(WriteKind::ResourceClaim, &err);
                        warn!(error = %err, "extended-resource claim not made; the gang is placed again");
                        (Some(false), None)
                    }
                };
                (usize::MAX, done.0, done.1)
            });
        }
        let mut written = vec![false; self.writes.len()];
        let mut outcome = Outcome::Written;
        let mut made = Vec::new();
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((i, Some(true), bridge)) => {
                    if let Some(slot) = written.get_mut(i) {
                        *slot = true;
                    }
                    made.extend(bridge);
                }
                Ok((_, Some(false), _)) | Err(_) => {
                    if outcome == Outcome::Written {
                        outcome = Outcome::Failed;
                    }
                }
                Ok((_, None, _)) => outcome = Outcome::Cancelled,
            }
        }
        if outcome != Outcome::Written {
            for (w, done) in self.writes.iter().zip(&written) {
                if *done {
                    if let Err(e) =
                        writes::unclaim(&inner.client, w, &inner.options.field_manager).await
                    {
                        warn!(error = %e, "could not undo a claim write of a gang that did not bind");
                    }
                }
                inner.observer.claim_write_dropped(w);
            }
            // The bridge claims made go again: the next session decides afresh.
            for (k, name) in made.drain(..) {
                self.delete_bridge(&inner, k, &name).await;
            }
            for e in &self.extended {
                inner.observer.extended_claim_dropped(e);
            }
        }
        *self.made.lock().unwrap_or_else(|p| p.into_inner()) = made;
        outcome
    }

    async fn delete_bridge(&self, inner: &Inner, k: usize, name: &str) {
        let Some(e) = self.extended.get(k) else {
            return;
        };
        if let Err(err) =
            writes::delete_extended_claim(&inner.client, e, name, &inner.options.field_manager)
                .await
        {
            warn!(error = %err, "could not delete the extended-resource claim of a pod that did not bind");
        }
    }
}

/// One claim write under the retry policy: `Some(true)` written, `Some(false)` refused or
/// given up, `None` cancelled (the binder's epoch moved on).
async fn attempt<F, Fut>(inner: &Inner, epoch: u64, mut send: F) -> Option<bool>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = crate::Result<()>>,
{
    let policy = &inner.options.retry;
    let mut failures = 0u32;
    loop {
        if !inner.current(epoch) {
            return None;
        }
        inner.limiter.acquire().await;
        if !inner.current(epoch) {
            return None;
        }
        inner.observer.request(WriteKind::ResourceClaim);
        match send().await {
            Ok(()) => return Some(true),
            Err(e) => {
                inner.observer.failed_attempt(WriteKind::ResourceClaim, &e);
                failures += 1;
                if !e.is_retryable() || failures >= policy.attempts.max(1) {
                    warn!(error = %e, "claim write failed; the gang is placed again");
                    return Some(false);
                }
                tokio::time::sleep(backoff(policy, failures)).await;
            }
        }
    }
}

/// A plan's claim writes sorted into steps: one per job with binds in the plan (a write goes
/// with the job of a pod it reserves the claim for), and one for the writes no bind of the plan
/// needs.
pub(crate) struct Steps {
    /// By job (`Bind::job`).
    pub by_job: HashMap<Arc<str>, Arc<ClaimStep>>,
    /// Writes for pods with no bind in the plan.
    pub unbound: Option<Arc<ClaimStep>>,
}

pub(crate) fn steps(
    binds: &[caldera_model::Bind],
    writes: Vec<ClaimWrite>,
    extended: Vec<ExtendedResourceClaim>,
) -> Steps {
    let job_of: HashMap<&str, &Arc<str>> = binds.iter().map(|b| (&*b.pod.uid, &b.job)).collect();
    let mut by_job: HashMap<Arc<str>, (Vec<ClaimWrite>, Vec<ExtendedResourceClaim>)> =
        HashMap::new();
    let mut unbound = (Vec::new(), Vec::new());
    for w in writes {
        // A claim shared by members of several jobs goes with each, carrying only that job's
        // users (the first writes the allocation, the others find it written and add theirs),
        // so no member binds before it is written and a job that fails takes back only its own
        // users. Users with no bind in the plan go on their own.
        let mut parts: Vec<(Option<&Arc<str>>, Vec<caldera_model::dra::Consumer>)> = Vec::new();
        for c in &w.reserved_for {
            let job = job_of.get(&*c.uid).copied();
            match parts.iter_mut().find(|(j, _)| *j == job) {
                Some((_, users)) => users.push(c.clone()),
                None => parts.push((job, vec![c.clone()])),
            }
        }
        if parts.is_empty() {
            unbound.0.push(w);
            continue;
        }
        for (job, users) in parts {
            let part = ClaimWrite {
                reserved_for: users,
                ..w.clone()
            };
            match job {
                Some(job) => by_job.entry(job.clone()).or_default().0.push(part),
                None => unbound.0.push(part),
            }
        }
    }
    for e in extended {
        match job_of.get(&*e.pod_uid).copied() {
            Some(job) => by_job.entry(job.clone()).or_default().1.push(e),
            None => unbound.1.push(e),
        }
    }
    let by_job = by_job
        .into_iter()
        .map(|(job, (w, e))| (job, Arc::new(ClaimStep::new(w, e))))
        .collect();
    let unbound = (!unbound.0.is_empty() || !unbound.1.is_empty())
        .then(|| Arc::new(ClaimStep::new(unbound.0, unbound.1)));
    Steps { by_job, unbound }
}
