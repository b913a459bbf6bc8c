//! overcommit: admits a gang at enqueue only if its minResources fit what the cluster has
//! left, counting allocatable × `overcommit-factor` (default 1.2).

use caldera_config::PluginOption;
use caldera_model::{PodGroupPhase, Resources};
use caldera_session::plugin::{Plugin, Verdict};
use caldera_session::state::State;

/// Volcano's default overcommit factor.
pub const DEFAULT_FACTOR: f64 = 1.2;

/// The overcommit plugin.
#[derive(Debug)]
pub struct Overcommit {
    factor: f64,
    /// minResources of admitted gangs not yet holding them.
    admitted: Resources,
}

/// Builds the plugin from `overcommit-factor` (below 1.0 means the default, as in Volcano).
pub fn build(option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    let factor = match option.arguments.get_f64("overcommit-factor") {
        Some(f) if f >= 1.0 => f,
        Some(_) => DEFAULT_FACTOR,
        None if option.arguments.contains_key("overcommit-factor") => {
            return Err("argument \"overcommit-factor\" must be a number".into())
        }
        None => DEFAULT_FACTOR,
    };
    Ok(Box::new(Overcommit {
        factor,
        admitted: Resources::new(),
    }))
}

impl Plugin for Overcommit {
    fn name(&self) -> &'static str {
        "overcommit"
    }

    fn on_open(&mut self, state: &State) {
        for (j, job) in state.jobs.iter().enumerate() {
            if job.phase() == PodGroupPhase::Inqueue {
                if let Some(min) = &job.min_resources {
                    let rest = min.minus(&state.job_runs[j].allocated);
                    for (n, v) in rest.iter() {
                        if v > 0 {
                            self.admitted.add_named(n, v);
                        }
                    }
                }
            }
        }
    }

    fn enqueueable(&self, state: &State, job: usize) -> Verdict {
        let Some(min) = &state.jobs[job].min_resources else {
            return Verdict::Permit;
        };
        let idle = state
            .total
            .scaled(self.factor)
            .minus(&state.used)
            .minus(&self.admitted);
        if min.fits_in(&idle) {
            Verdict::Permit
        } else {
            let short: Vec<&str> = min.insufficient(&idle).collect();
            Verdict::Reject {
                quota: false,
                message: format!(
                    "minResources {} exceed what the cluster has left for new gangs ({} × {} allocatable − used − admitted) on {}",
                    min,
                    state.total,
                    self.factor,
                    short.join(", ")
                ),
            }
        }
    }

    fn on_enqueue(&mut self, state: &State, job: usize) {
        if let Some(min) = &state.jobs[job].min_resources {
            self.admitted.add(min);
        }
    }
}
