//! fairshare: fairness over time. Its arguments (`halfLife`, `kValue`, `resourceWeights`,
//! `usageWritePeriod`, `minRuntime`, `preemptionDelay`, `maxWait`) are read by the session
//! ([`caldera_session::fair`]): usage adjusts proportion's weighted split, or with capacity
//! the order in which queues take what is over their deserved shares (siblings compared
//! within their parent), and is recorded on the Queues' status at close; `maxWait` ages starving gangs ([`caldera_session::aging`]). The plugin
//! itself orders queues that the share plugin leaves tied (equal priority and share, e.g. two
//! idle queues at the start of a day) by usage per weight, lowest first; with `tenantKey` it
//! orders the jobs of a queue by their tenant's usage, lowest first (Kueue's Admission Fair
//! Sharing), each placement adding Kueue's entry penalty to its tenant at once.

use caldera_config::PluginOption;
use caldera_session::plugin::Plugin;
use caldera_session::state::State;
use std::cmp::Ordering;

/// The fairshare plugin.
#[derive(Debug, Default)]
pub struct FairShare {
    /// Usage per weight of each queue at session open (empty without memory).
    usage_per_weight: Vec<f64>,
    /// With `tenantKey`: each tenant's usage, kept current with this session's placements.
    tenant_usage: Vec<f64>,
}

/// Builds the plugin. Its arguments are read (and a bad one refused) once per config by
/// `Scheduler::new` into the session's settings ([`caldera_session::fair::settings`]), which
/// `on_open` reads; the plugin keeps none of its own.
pub fn build(_option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(FairShare::default()))
}

impl FairShare {
    /// Adds (`sign` 1) or takes back (-1) the entry penalty of `task`'s placement.
    fn penalise(&mut self, state: &State, task: usize, sign: f64) {
        let (Some(fair), Some(tenants)) = (state.fair.as_ref(), state.tenants.as_ref()) else {
            return;
        };
        let t = &state.tasks[task];
        if let Some(u) = self.tenant_usage.get_mut(tenants.of(t.job)) {
            *u += sign * fair.share_of(&t.request, &state.total) * fair.entry_penalty();
        }
    }

    /// Tenant `tenant`'s usage now (with `tenantKey`; see [`caldera_session::fair::Tenants`]).
    pub fn tenant_usage(&self, tenant: usize) -> Option<f64> {
        self.tenant_usage.get(tenant).copied()
    }

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
        if let (Some(fair), Some(tenants)) = (state.fair.as_ref(), state.tenants.as_ref()) {
            self.tenant_usage = caldera_session::fair::tenant_usage(state, fair, tenants);
        }
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

    /// With `tenantKey`: within a queue, the job whose tenant has used less goes first.
    fn job_order(&self, state: &State, a: usize, b: usize) -> Ordering {
        let Some(tenants) = state.tenants.as_ref() else {
            return Ordering::Equal;
        };
        let (ta, tb) = (tenants.of(a), tenants.of(b));
        if ta == tb || state.job_queue[a] != state.job_queue[b] {
            return Ordering::Equal;
        }
        match (self.tenant_usage.get(ta), self.tenant_usage.get(tb)) {
            (Some(x), Some(y)) => x.total_cmp(y),
            _ => Ordering::Equal,
        }
    }

    /// A placement adds Kueue's entry penalty to its tenant at once, so the tenant's other
    /// jobs do not pass others' on usage that has not caught up yet.
    fn on_allocate(&mut self, state: &State, task: usize) {
        self.penalise(state, task, 1.0);
    }

    fn on_deallocate(&mut self, state: &State, task: usize) {
        self.penalise(state, task, -1.0);
    }

    fn queue_order(&self, _state: &State, a: usize, b: usize) -> Ordering {
        match (self.usage_per_weight.get(a), self.usage_per_weight.get(b)) {
            (Some(x), Some(y)) => x.total_cmp(y),
            _ => Ordering::Equal,
        }
    }
}
