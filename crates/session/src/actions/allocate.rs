//! allocate: places admitted gangs, queue by queue in fair-share order, all or nothing; an
//! aged gang that finds no room gets room held ([`crate::aging`]).

use super::{job_heaps, next_queue, Action};
use crate::attempt::{attempt, Attempt};
use crate::session::Session;
use crate::state::Holdup;

/// The allocate action (SPEC §5.2).
#[derive(Debug, Default)]
pub struct Allocate;

impl Action for Allocate {
    fn name(&self) -> &'static str {
        "allocate"
    }

    fn execute(&self, ssn: &mut Session) {
        let jobs: Vec<usize> = (0..ssn.state.jobs.len())
            .filter(|&j| {
                let run = &ssn.state.job_runs[j];
                run.admitted && run.invalid.is_none() && ssn.state.pending_tasks(j).next().is_some()
            })
            .collect();
        let mut heaps = job_heaps(ssn, jobs.into_iter());
        while let Some(q) = next_queue(ssn, &heaps) {
            if ssn.overused(q) {
                let name = ssn.state.queues[q].name.clone();
                for job in heaps[q].drain() {
                    ssn.hold(
                        job,
                        Holdup::Quota(format!("queue {name} has reached its deserved share")),
                    );
                }
                continue;
            }
            let less = |a: usize, b: usize| ssn.job_order(a, b).is_lt();
            let Some(job) = heaps[q].pop(&less) else {
                continue;
            };
            match attempt(ssn, job, &|_| true) {
                Attempt::Placed(_) => {
                    ssn.aging.placed(job);
                    // A satisfied gang with members left goes back for another turn.
                    if ssn.state.pending_tasks(job).next().is_some() {
                        let less = |a: usize, b: usize| ssn.job_order(a, b).is_lt();
                        heaps[q].push(job, &less);
                    }
                }
                // An aged gang that found no room (not one its queue's quota holds) gets
                // room held where it will fit (fairshare's maxWait).
                Attempt::Held
                    if ssn.aging.is_aged(job)
                        && matches!(ssn.state.job_runs[job].holdup, Some(Holdup::Fit(_))) =>
                {
                    crate::aging::hold(ssn, job);
                }
                _ => {}
            }
        }
    }
}
