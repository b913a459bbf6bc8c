//! preempt and reclaim: evict whole-gang units so a starving gang can run (see
//! [`crate::evict`]).

use super::Action;
use crate::evict::{self, Mode};
use crate::session::Session;

/// The preempt action (SPEC §5.4): within a queue, by priority.
#[derive(Debug, Default)]
pub struct Preempt;

impl Action for Preempt {
    fn name(&self) -> &'static str {
        "preempt"
    }

    fn execute(&self, ssn: &mut Session) {
        evict::run(ssn, Mode::Preempt);
    }
}

/// The reclaim action (SPEC §5.4): across queues, by deserved share.
#[derive(Debug, Default)]
pub struct Reclaim;

impl Action for Reclaim {
    fn name(&self) -> &'static str {
        "reclaim"
    }

    fn execute(&self, ssn: &mut Session) {
        evict::run(ssn, Mode::Reclaim);
    }
}
