//! fairshare: fairness over time. Its arguments (`halfLife`, `kValue`, `resourceWeights`,
//! `usageWritePeriod`, `minRuntime`, `preemptionDelay`, `maxWait`) are read by the session
//! ([`caldera_session::fair`]): usage adjusts proportion's weighted split and is recorded on
//! the Queues' status at close; `maxWait` ages starving gangs ([`caldera_session::aging`]). The plugin
//! itself orders queues that the share plugin leaves tied (equal priority and share, e.g. two
//! idle queues at the start of a day) by usage per weight, lowest first.

use caldera_config::PluginOption;
use caldera_session::plugin::Plugin;
use caldera_session::state::State;
use std::cmp::Ordering;

/// The fairshare plugin.
#[derive(Debug, Default)]
pub struct FairShare {
    /// Usage per weight of each queue at session open (empty without memory).
    usage_per_weight: Vec<f64>,
}

/// Builds the plugin. Its arguments are read (and a bad one refused) once per config by
/// `Scheduler::new` into the session's settings ([`caldera_session::fair::settings`]), which
/// `on_open` reads; the plugin keeps none of its own.
pub fn build(_option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(FairShare::default()))
}

impl FairShare {
    /// Queue `q`'s decayed usage over its weight at session open.
    pub fn usage_per_weight(&self, q: usize) -> Option<f64> {
        self.usage_per_weight.get(q).copied()
    }
}

impl Plugin for FairShare {
    fn name(&self) -> &'static str {
        "fairshare"
    }

    fn on_open(&mut self, state: &State) {
        // No memory or kValue 0: usage moves nothing, the order is today's.
        let Some(fair) = state.fair.as_ref().filter(|f| f.remembers() && f.k > 0.0) else {
            return;
        };
        self.usage_per_weight = (0..state.queues.len())
            .map(|q| {
                caldera_session::fair::queue_usage(state, fair, q)
                    / f64::from(state.queues[q].weight.max(1))
            })
            .collect();
    }

    fn queue_order(&self, _state: &State, a: usize, b: usize) -> Ordering {
        match (self.usage_per_weight.get(a), self.usage_per_weight.get(b)) {
            (Some(x), Some(y)) => x.total_cmp(y),
            _ => Ordering::Equal,
        }
    }
}
