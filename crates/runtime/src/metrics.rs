//! Prometheus metrics (`/metrics`), through the `prometheus-client` crate.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `caldera_session_duration_seconds` | histogram | |
//! | `caldera_action_duration_seconds` | histogram | `action` |
//! | `caldera_pods_bound_total` | counter | |
//! | `caldera_pods_released_total` | counter | (gate mode) |
//! | `caldera_released_unbound` | gauge | (gate mode, past the release timeout) |
//! | `caldera_bind_errors_total` | counter | `code` (HTTP status, or `transport`) |
//! | `caldera_pending_gangs` | gauge | |
//! | `caldera_queue_deserved` | gauge | `queue`, `resource` (cpu in cores, memory in bytes) |
//! | `caldera_queue_allocated` | gauge | `queue`, `resource` |
//! | `caldera_queue_share` | gauge | `queue` (max over resources of allocated/deserved) |
//! | `caldera_queue_usage` | gauge | `queue`, `resource` (with `fairshare`: decayed usage, a fraction of the cluster) |
//! | `caldera_pod_schedule_latency_seconds` | histogram | (pod creation → bind) |
//! | `caldera_api_writes_total` | counter | `kind` (`binding`, `pod_status`, `podgroup_status`, `queue_status`, `event`, `lease`, `queue`, `release`, … — see docs/metrics.md) |
//! | `caldera_leader` | gauge | (1 while this replica holds the lease) |
//! | `caldera_events_folded_total` | counter | (events folded into a queued one of the same reason and PodGroup: the event queue was over 1000) |
//! | `caldera_events_dropped_total` | counter | (events dropped: the queue was at its memory cap, 128 MiB, with nothing to fold into) |
//! | `caldera_preemption_victims_total` | counter | `action` (`preempt`, `reclaim`): pods chosen as victims |
//! | `caldera_preemption_attempts_total` | counter | `result` (`evicted`, `held`, `no_victims`): victim searches |
//! | `caldera_consolidation_moves_total` | counter | (pods `consolidate` moved) |
//! | `caldera_consolidation_attempts_total` | counter | `result` (`moved`, `not_fragmented`, `no_move`, `no_room_for_moved`, `limit`, `no_podgroup`): consolidate's tries per waiting gang |
//! | `caldera_topology_placements_total` | counter | `tier` (`1`, `2`, …, `root`): gangs with a network topology rule placed, by the tier of their domain |

use caldera_model::{Resources, CPU};
use caldera_session::QueueReport;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;

fn duration_histogram() -> Histogram {
    // 0.5ms .. ~16s
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

fn latency_histogram() -> Histogram {
    // 10ms .. ~5.7h
    Histogram::new(exponential_buckets(0.01, 2.0, 22))
}

/// Every metric the runtime exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub(crate) session_duration: Histogram,
    pub(crate) action_duration: Family<Labels, Histogram, fn() -> Histogram>,
    pub(crate) pods_bound: Counter,
    pub(crate) pods_released: Counter,
    pub(crate) released_unbound: Gauge,
    pub(crate) bind_errors: Family<Labels, Counter>,
    pub(crate) pending_gangs: Gauge,
    pub(crate) queue_deserved: Family<Labels, FloatGauge>,
    pub(crate) queue_allocated: Family<Labels, FloatGauge>,
    pub(crate) queue_share: Family<Labels, FloatGauge>,
    pub(crate) queue_usage: Family<Labels, FloatGauge>,
    pub(crate) schedule_latency: Histogram,
    pub(crate) api_writes: Family<Labels, Counter>,
    pub(crate) leader: Gauge,
    pub(crate) events_folded: Counter,
    pub(crate) events_dropped: Counter,
    pub(crate) preemption_victims: Family<Labels, Counter>,
    pub(crate) preemption_attempts: Family<Labels, Counter>,
    pub(crate) topology_placements: Family<Labels, Counter>,
    pub(crate) consolidation_moves: Counter,
    pub(crate) consolidation_attempts: Family<Labels, Counter>,
    pub(crate) watch_forbidden: Family<Labels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// A resource amount in the unit Prometheus users expect: cores for cpu, else as is.
fn value(name: &str, v: i64) -> f64 {
    if name == CPU {
        v as f64 / 1000.0
    } else {
        v as f64
    }
}

impl Metrics {
    /// Registers every metric in a fresh registry.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let session_duration = duration_histogram();
        let action_duration = Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(
            duration_histogram as fn() -> Histogram,
        );
        let pods_bound = Counter::default();
        let pods_released = Counter::default();
        let released_unbound = Gauge::default();
        let bind_errors = Family::<Labels, Counter>::default();
        let pending_gangs = Gauge::default();
        let queue_deserved = Family::<Labels, FloatGauge>::default();
        let queue_allocated = Family::<Labels, FloatGauge>::default();
        let queue_share = Family::<Labels, FloatGauge>::default();
        let queue_usage = Family::<Labels, FloatGauge>::default();
        let schedule_latency = latency_histogram();
        let api_writes = Family::<Labels, Counter>::default();
        let leader = Gauge::default();
        let events_folded = Counter::default();
        let events_dropped = Counter::default();
        let preemption_victims = Family::<Labels, Counter>::default();
        let preemption_attempts = Family::<Labels, Counter>::default();
        let topology_placements = Family::<Labels, Counter>::default();
        let consolidation_moves = Counter::default();
        let consolidation_attempts = Family::<Labels, Counter>::default();
        let watch_forbidden = Family::<Labels, Gauge>::default();
        registry.register(
            "caldera_consolidation_moves",
            "Pods moved by consolidate so that a fragmented gang fits",
            consolidation_moves.clone(),
        );
        registry.register(
            "caldera_consolidation_attempts",
            "Consolidate's tries per waiting gang, by result",
            consolidation_attempts.clone(),
        );
        registry.register(
            "caldera_topology_placements",
            "Gangs with a network topology rule placed, by the tier of the domain they got",
            topology_placements.clone(),
        );
        registry.register(
            "caldera_preemption_victims",
            "Pods chosen as victims by preempt and reclaim, by action",
            preemption_victims.clone(),
        );
        registry.register(
            "caldera_preemption_attempts",
            "Victim searches for starving gangs, by result",
            preemption_attempts.clone(),
        );
        registry.register(
            "caldera_session_duration_seconds",
            "Time from snapshot to plan, per session",
            session_duration.clone(),
        );
        registry.register(
            "caldera_action_duration_seconds",
            "Time spent in each action of a session",
            action_duration.clone(),
        );
        registry.register("caldera_pods_bound", "Pods bound", pods_bound.clone());
        registry.register(
            "caldera_pods_released",
            "Gate mode: gated members released to kube-scheduler (pinned, gate lifted, nominated)",
            pods_released.clone(),
        );
        registry.register(
            "caldera_released_unbound",
            "Gate mode: released members kube-scheduler has not bound within the release timeout",
            released_unbound.clone(),
        );
        registry.register(
            "caldera_bind_errors",
            "Failed bind attempts, by HTTP status",
            bind_errors.clone(),
        );
        registry.register(
            "caldera_pending_gangs",
            "Gangs with pending members that the last session could not make ready",
            pending_gangs.clone(),
        );
        registry.register(
            "caldera_queue_deserved",
            "Deserved share of each queue (cpu in cores)",
            queue_deserved.clone(),
        );
        registry.register(
            "caldera_queue_allocated",
            "Resources held by each queue's members (cpu in cores)",
            queue_allocated.clone(),
        );
        registry.register(
            "caldera_queue_share",
            "Max over resources of allocated/deserved",
            queue_share.clone(),
        );
        registry.register(
            "caldera_queue_usage",
            "With fairshare: each queue's decayed usage per resource, a fraction of the cluster",
            queue_usage.clone(),
        );
        registry.register(
            "caldera_pod_schedule_latency_seconds",
            "Time from pod creation to a successful bind",
            schedule_latency.clone(),
        );
        registry.register(
            "caldera_api_writes",
            "Write requests sent to the API server, by kind",
            api_writes.clone(),
        );
        registry.register(
            "caldera_leader",
            "1 while this replica holds the leader lease",
            leader.clone(),
        );
        registry.register(
            "caldera_events_folded",
            "Events folded into a queued event of the same reason on the same PodGroup (the event queue was over its bound)",
            events_folded.clone(),
        );
        registry.register(
            "caldera_events_dropped",
            "Events dropped because the event queue was full and nothing could be folded",
            events_dropped.clone(),
        );
        registry.register(
            "caldera_watch_forbidden",
            "1 while the API server refuses (403) to list this optional kind (`plural.group`) to Caldera's ServiceAccount: the pods that depend on it wait",
            watch_forbidden.clone(),
        );
        Metrics {
            registry,
            session_duration,
            action_duration,
            pods_bound,
            pods_released,
            released_unbound,
            bind_errors,
            pending_gangs,
            queue_deserved,
            queue_allocated,
            queue_share,
            queue_usage,
            schedule_latency,
            api_writes,
            leader,
            events_folded,
            events_dropped,
            preemption_victims,
            preemption_attempts,
            topology_placements,
            consolidation_moves,
            consolidation_attempts,
            watch_forbidden,
        }
    }

    /// Whether the API server refuses the optional kind `resource` (`plural.group`) now.
    pub(crate) fn forbidden(&self, resource: String, refused: bool) {
        self.watch_forbidden
            .get_or_create(&vec![("kind", resource)])
            .set(i64::from(refused));
    }

    /// Counts a session's preemption decisions.
    pub fn preemptions(&self, stats: &caldera_session::session::Stats) {
        for (action, n) in &stats.victims {
            self.preemption_victims
                .get_or_create(&vec![("action", action.to_string())])
                .inc_by(*n);
        }
        for (result, n) in &stats.preemption_attempts {
            self.preemption_attempts
                .get_or_create(&vec![("result", result.to_string())])
                .inc_by(*n);
        }
        self.consolidation_moves.inc_by(stats.consolidation_moves);
        for (result, n) in &stats.consolidation_attempts {
            self.consolidation_attempts
                .get_or_create(&vec![("result", result.to_string())])
                .inc_by(*n);
        }
        for (tier, n) in &stats.topology_placements {
            self.topology_placements
                .get_or_create(&vec![("tier", tier.clone())])
                .inc_by(*n);
        }
    }

    /// The metrics in the OpenMetrics text format (which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }

    pub(crate) fn api_write(&self, kind: &str) {
        self.api_writes
            .get_or_create(&vec![("kind", kind.to_string())])
            .inc();
    }

    pub(crate) fn session(&self, took: Duration, actions: &[(&'static str, Duration)]) {
        self.session_duration.observe(took.as_secs_f64());
        for (action, d) in actions {
            self.action_duration
                .get_or_create(&vec![("action", action.to_string())])
                .observe(d.as_secs_f64());
        }
    }

    pub(crate) fn queues(&self, reports: &[QueueReport]) {
        self.queue_deserved.clear();
        self.queue_allocated.clear();
        self.queue_share.clear();
        self.queue_usage.clear();
        let set = |family: &Family<Labels, FloatGauge>, queue: &str, r: &Resources| {
            for (name, v) in r.iter() {
                family
                    .get_or_create(&vec![
                        ("queue", queue.to_string()),
                        ("resource", name.to_string()),
                    ])
                    .set(value(name, v));
            }
        };
        for q in reports {
            set(&self.queue_allocated, &q.name, &q.allocated);
            for (resource, ppm) in q.usage.iter().flatten() {
                self.queue_usage
                    .get_or_create(&vec![
                        ("queue", q.name.to_string()),
                        ("resource", resource.to_string()),
                    ])
                    .set(f64::from(*ppm) / f64::from(caldera_model::USAGE_SCALE));
            }
            if let Some(d) = &q.deserved {
                set(&self.queue_deserved, &q.name, d);
                let share = q
                    .allocated
                    .iter()
                    .map(|(name, a)| {
                        let d = d.get(name);
                        if d > 0 {
                            a as f64 / d as f64
                        } else if a > 0 {
                            f64::INFINITY
                        } else {
                            0.0
                        }
                    })
                    .fold(0.0, f64::max);
                self.queue_share
                    .get_or_create(&vec![("queue", q.name.to_string())])
                    .set(share);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_output_names_every_metric() {
        let m = Metrics::new();
        m.pods_bound.inc();
        m.api_write("binding");
        m.bind_errors
            .get_or_create(&vec![("code", "500".to_string())])
            .inc();
        m.queues(&[QueueReport {
            name: "q".into(),
            deserved: Some(Resources::from_pairs([("cpu", 4000)])),
            allocated: Resources::from_pairs([("cpu", 1000)]),
            usage: Some([("nvidia.com/gpu".into(), 250_000)].into()),
        }]);
        m.session(
            Duration::from_millis(3),
            &[("allocate", Duration::from_millis(2))],
        );
        let stats = caldera_session::session::Stats {
            consolidation_moves: 2,
            consolidation_attempts: [("moved", 1)].into(),
            ..Default::default()
        };
        m.preemptions(&stats);
        let text = m.encode();
        for needle in [
            "caldera_consolidation_moves_total 2",
            "caldera_consolidation_attempts_total{result=\"moved\"} 1",
            "caldera_pods_bound_total 1",
            "caldera_api_writes_total{kind=\"binding\"} 1",
            "caldera_bind_errors_total{code=\"500\"} 1",
            "caldera_queue_share{queue=\"q\"} 0.25",
            "caldera_queue_usage{queue=\"q\",resource=\"nvidia.com/gpu\"} 0.25",
            "caldera_queue_deserved{queue=\"q\",resource=\"cpu\"} 4.0",
            "caldera_action_duration_seconds_count{action=\"allocate\"} 1",
            "caldera_session_duration_seconds_count 1",
            "caldera_leader 0",
            "caldera_pending_gangs 0",
            "caldera_events_dropped_total 0",
            "caldera_events_folded_total 0",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
