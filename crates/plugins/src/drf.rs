//! drf: within a queue, the job with the smallest dominant share goes first.

use caldera_config::PluginOption;
use caldera_session::plugin::Plugin;
use caldera_session::state::State;
use std::cmp::Ordering;

/// The drf plugin. Shares are derived from the session's per-job allocation, which the
/// session keeps current through every placement and undo, so the plugin holds no state.
#[derive(Debug, Default)]
pub struct Drf;

/// Builds the plugin (it takes no arguments beyond Volcano's flags).
pub fn build(_: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(Drf))
}

/// max over resources of job allocated / cluster total.
pub fn dominant_share(state: &State, job: usize) -> f64 {
    let mut share: f64 = 0.0;
    for (name, v) in state.job_runs[job].allocated.iter() {
        let total = state.total.get(name);
        if total > 0 {
            share = share.max(v as f64 / total as f64);
        }
    }
    share
}

impl Plugin for Drf {
    fn name(&self) -> &'static str {
        "drf"
    }

    fn job_order(&self, state: &State, a: usize, b: usize) -> Ordering {
        dominant_share(state, a).total_cmp(&dominant_share(state, b))
    }
}
