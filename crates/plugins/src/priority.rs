//! priority: higher job priority first; within a job, higher pod priority first.

use caldera_config::PluginOption;
use caldera_model::Task;
use caldera_session::plugin::Plugin;
use caldera_session::state::State;
use std::cmp::Ordering;

/// The priority plugin.
#[derive(Debug, Default)]
pub struct Priority;

/// Builds the plugin (it takes no arguments).
pub fn build(_: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(Priority))
}

impl Plugin for Priority {
    fn name(&self) -> &'static str {
        "priority"
    }

    fn job_order(&self, state: &State, a: usize, b: usize) -> Ordering {
        state.jobs[b].priority.cmp(&state.jobs[a].priority)
    }

    fn task_order(&self, _state: &State, a: &Task, b: &Task) -> Ordering {
        b.priority.cmp(&a.priority)
    }
}
