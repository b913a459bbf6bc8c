//! enqueue: admits Pending PodGroups whose minResources fit their queue and the cluster.

use super::{job_heaps, next_queue, Action};
use crate::plugin::Verdict;
use crate::session::Session;
use crate::state::Holdup;
use caldera_model::PodGroupPhase;

/// The enqueue action (SPEC §5.1).
#[derive(Debug, Default)]
pub struct Enqueue;

impl Action for Enqueue {
    fn name(&self) -> &'static str {
        "enqueue"
    }

    fn execute(&self, ssn: &mut Session) {
        let candidates: Vec<usize> = (0..ssn.state.jobs.len())
            .filter(|&j| {
                let run = &ssn.state.job_runs[j];
                !run.admitted
                    && run.invalid.is_none()
                    && ssn.state.jobs[j].phase() == PodGroupPhase::Pending
            })
            .collect();
        let mut heaps = job_heaps(ssn, candidates.into_iter());
        let mut evictable = None;
        while let Some(q) = next_queue(ssn, &heaps) {
            let less = |a: usize, b: usize| ssn.job_order(a, b).is_lt();
            let Some(job) = heaps[q].pop(&less) else {
                continue;
            };
            // A hard topology no domain could satisfy even empty is refused here, with why,
            // rather than admitted to wait (or to preempt) for room that can never be.
            if let Some(message) = crate::topology::never_fits(ssn, job) {
                ssn.hold(
                    job,
                    Holdup::NotAdmitted {
                        quota: false,
                        message,
                    },
                );
                continue;
            }
            match ssn.enqueueable(job) {
                // A full cluster does not keep out a job that can run by evicting: preempt or
                // reclaim will find its victims (Volcano's "never enqueued, never preempts").
                Verdict::Reject { quota: false, .. }
                    if crate::evict::could_run_by_evicting(ssn, job, &mut evictable) =>
                {
                    ssn.admit(job)
                }
                Verdict::Reject { quota, message } => {
                    ssn.hold(job, Holdup::NotAdmitted { quota, message });
                }
                Verdict::Permit | Verdict::Abstain => ssn.admit(job),
            }
        }
    }
}
