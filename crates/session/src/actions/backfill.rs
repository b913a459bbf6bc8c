//! backfill: places best-effort members (requesting nothing) of admitted jobs.

use super::Action;
use crate::attempt::{attempt, Attempt};
use crate::session::Session;

/// The backfill action (SPEC §5.3).
#[derive(Debug, Default)]
pub struct Backfill;

impl Action for Backfill {
    fn name(&self) -> &'static str {
        "backfill"
    }

    fn execute(&self, ssn: &mut Session) {
        for job in 0..ssn.state.jobs.len() {
            let run = &ssn.state.job_runs[job];
            if !run.admitted || run.invalid.is_some() {
                continue;
            }
            // Each attempt either completes the gang in one statement or places one more
            // member of a satisfied gang; stop at the first attempt that places nothing.
            while let Attempt::Placed(_) = attempt(ssn, job, &|t| t.best_effort()) {}
        }
    }
}
