//! Fairness over time: decayed usage per queue and the weights it adjusts (`fairshare`).
//!
//! A queue's usage is the exponentially decayed mean of the fraction of the cluster it held
//! (per resource, normalised to the cluster's capacity), recorded on the Queue's status as a
//! [`QueueUsage`] so that a restart resumes it. Usage turns weights into shares with KAI's
//! formula `P = max(W' + k(W' − U'), 0)` (`W'`: the queue's weight over the weights of the
//! queues compared with it; `U'`: its usage over theirs), which the water-filling then splits
//! by in place of the weights. Only the weight split changes: explicit `deserved` and
//! `guarantee` are applied as before.

use crate::tree::QueueTree;
use caldera_model::{QueueUsage, Resources, Time, USAGE_SCALE};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The `fairshare` plugin's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct FairSettings {
    /// Usage half-life in milliseconds; 0 keeps no memory (shares as without the plugin).
    pub half_life_ms: i64,
    /// KAI's `k`: how strongly usage moves a share; 0 keeps the weights.
    pub k: f64,
    /// Weight of each resource in a queue's usage (resources absent weigh 0).
    pub resource_weights: BTreeMap<String, f64>,
    /// Least time between two usage records of a queue, in milliseconds.
    pub write_period_ms: i64,
    /// A tumbling window in milliseconds (`window`; 0: none): usage starts again from nothing
    /// at each multiple of it since the Unix epoch, and decays within it by the half-life.
    pub window_ms: i64,
    /// A pod that has run less than this (milliseconds) is never a victim of preempt, reclaim
    /// or consolidate; 0: off.
    pub min_runtime_ms: i64,
    /// A starving job evicts nothing until it has waited this long (milliseconds, from its
    /// `pending_since`), so room that frees meanwhile is used instead; 0: off.
    pub preemption_delay_ms: i64,
    /// Aging against starvation: a gang that has waited longer than this (milliseconds, from
    /// its `pending_since`) is ordered ahead of its queue's jobs of equal priority and, when
    /// it still does not fit, room is held for it; 0: off.
    pub max_wait_ms: i64,
    /// Whose usage orders the jobs of a queue (`tenantKey`); `None`: today's order.
    pub tenant_key: Option<TenantKey>,
}

/// fairshare's `tenantKey`: what a job's tenant is, whose usage orders a queue's jobs
/// (Kueue's Admission Fair Sharing, where the tenant is the LocalQueue).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantKey {
    /// The job's namespace (`tenantKey: namespace`).
    Namespace,
    /// The value of this label on the job's pods; a job whose pods lack it counts as its
    /// namespace's.
    Label(String),
}

impl Default for FairSettings {
    fn default() -> Self {
        FairSettings {
            half_life_ms: DEFAULT_HALF_LIFE_MS,
            k: DEFAULT_K,
            resource_weights: default_resource_weights(),
            write_period_ms: DEFAULT_WRITE_PERIOD_MS,
            window_ms: 0,
            min_runtime_ms: 0,
            preemption_delay_ms: 0,
            max_wait_ms: 0,
            tenant_key: None,
        }
    }
}

/// Default half-life: 7 days (Slurm's `PriorityDecayHalfLife` default).
pub const DEFAULT_HALF_LIFE_MS: i64 = 7 * 24 * 3600 * 1000;
/// Default `kValue` (KAI's default).
pub const DEFAULT_K: f64 = 1.0;
/// Default `usageWritePeriod`: one minute.
pub const DEFAULT_WRITE_PERIOD_MS: i64 = 60 * 1000;

/// GPUs count fully; cpu and memory a tenth each, so a CPU-only cluster still has usage.
pub fn default_resource_weights() -> BTreeMap<String, f64> {
    BTreeMap::from([
        ("nvidia.com/gpu".to_string(), 1.0),
        (caldera_model::CPU.to_string(), 0.1),
        (caldera_model::MEMORY.to_string(), 0.1),
    ])
}

impl FairSettings {
    /// Whether a job waiting since `pending_since` (`None`: not seen waiting yet) may evict at
    /// `now` under `preemptionDelay`.
    pub fn may_preempt(&self, pending_since: Option<Time>, now: Time) -> bool {
        self.preemption_delay_ms <= 0
            || pending_since.is_some_and(|t| now.millis_since(t) >= self.preemption_delay_ms)
    }

    /// Whether a job waiting since `pending_since` (`None`: not seen waiting yet) is aged at
    /// `now`: `maxWait` is on and the job has waited at least that long.
    pub fn aged(&self, pending_since: Option<Time>, now: Time) -> bool {
        self.max_wait_ms > 0
            && pending_since.is_some_and(|t| now.millis_since(t) >= self.max_wait_ms)
    }

    /// The fraction of the cluster (`total`) that `request` is, as one number (0..=1): the
    /// weighted mean over the weighted resources the cluster has, as [`Self::usage`] counts.
    pub fn share_of(&self, request: &Resources, total: &Resources) -> f64 {
        self.weighted_mean(total, |name, cap| {
            (request.get(name).max(0) as f64 / cap as f64).min(1.0)
        })
    }

    /// The resources usage counts: each weighted one the cluster (`total`) has, with its
    /// weight and the cluster's amount of it.
    fn counted<'a>(&'a self, total: &'a Resources) -> impl Iterator<Item = (&'a str, f64, i64)> {
        self.resource_weights
            .iter()
            .map(|(name, &weight)| (name.as_str(), weight, total.get(name)))
            .filter(|&(_, weight, cap)| weight > 0.0 && cap > 0)
    }

    /// The weighted mean of `fraction(resource, cluster's amount)` over [`Self::counted`]
    /// (0 when nothing is counted).
    fn weighted_mean(&self, total: &Resources, fraction: impl Fn(&str, i64) -> f64) -> f64 {
        let (mut sum, mut weights) = (0.0, 0.0);
        for (name, weight, cap) in self.counted(total) {
            sum += weight * fraction(name, cap);
            weights += weight;
        }
        if weights > 0.0 {
            sum / weights
        } else {
            0.0
        }
    }

    /// Kueue's entry penalty, per unit of what a placed pod holds: the usage it adds over one
    /// `usageWritePeriod`, `1 − 2^(−usageWritePeriod / halfLife)` (1 with half-life 0).
    pub fn entry_penalty(&self) -> f64 {
        if self.remembers() {
            1.0 - (-(self.write_period_ms as f64 / self.half_life_ms as f64)).exp2()
        } else {
            1.0
        }
    }

    /// How much a pod that has held its share since `started` adds to its tenant's usage at
    /// `now`, per unit held: the decayed mean it has built up, `1 − 2^(−age / halfLife)`, and
    /// never less than [`Self::entry_penalty`]; with half-life 0, 1 (what is held now).
    /// Within a `window`, the pod counts only from the window's start.
    pub fn tenant_weight(&self, started: Time, now: Time) -> f64 {
        if !self.remembers() {
            return 1.0;
        }
        let since = self
            .window_start(now)
            .map_or(started, |start| Time(started.0.max(start.0)));
        let age = now.millis_since(since).max(0) as f64;
        (1.0 - (-(age / self.half_life_ms as f64)).exp2()).max(self.entry_penalty())
    }

    /// Whether usage is kept at all (a half-life of 0 keeps no memory).
    pub fn remembers(&self) -> bool {
        self.half_life_ms > 0
    }

    /// The start of the `window` that holds `now` (the last multiple of the window since the
    /// Unix epoch at or before it); `None` without a window.
    pub fn window_start(&self, now: Time) -> Option<Time> {
        (self.window_ms > 0).then(|| Time(now.0.div_euclid(self.window_ms) * self.window_ms))
    }

    /// `record`'s decayed fractions per resource at `now` (0..=1). Within the record's window
    /// (or without one) its decay by the half-life; when a window has started since the
    /// record, usage started again from nothing at the window's start, with what the record
    /// says was held since then.
    pub fn decayed(&self, record: &QueueUsage, now: Time) -> BTreeMap<Arc<str>, f64> {
        match self.window_start(now) {
            Some(start) if start > record.at => QueueUsage {
                at: start,
                decayed: BTreeMap::new(),
                held: record.held.clone(),
            }
            .decayed_at(now, self.half_life_ms),
            _ => record.decayed_at(now, self.half_life_ms),
        }
    }

    /// The fraction of `total` that `allocated` is, per weighted resource the cluster has, in
    /// millionths (capped at one whole cluster).
    pub fn held(&self, allocated: &Resources, total: &Resources) -> BTreeMap<Arc<str>, u32> {
        let mut out = BTreeMap::new();
        for (name, _, cap) in self.counted(total) {
            let fraction = (allocated.get(name).max(0) as f64 / cap as f64).min(1.0);
            let ppm = (fraction * f64::from(USAGE_SCALE)).round() as u32;
            if ppm > 0 {
                out.insert(Arc::from(name), ppm);
            }
        }
        out
    }

    /// A queue's usage at `now` as one number (0..=1): the weighted mean, over the weighted
    /// resources the cluster has (`total`), of its decayed fractions. No record, or no memory:
    /// 0.
    pub fn usage(&self, record: Option<&QueueUsage>, now: Time, total: &Resources) -> f64 {
        let Some(record) = record.filter(|_| self.remembers()) else {
            return 0.0;
        };
        let decayed = self.decayed(record, now);
        self.weighted_mean(total, |name, _| decayed.get(name).copied().unwrap_or(0.0))
    }

    /// The record to write at `now` for a queue that holds `held` (from [`Self::held`]) after
    /// the session, given its last record: `None` when the last one still describes it (what it
    /// holds has not changed, or the last record is younger than the write period, or it never
    /// held anything).
    pub fn next_record(
        &self,
        last: Option<&QueueUsage>,
        held: BTreeMap<Arc<str>, u32>,
        now: Time,
    ) -> Option<QueueUsage> {
        if !self.remembers() {
            return None;
        }
        let Some(last) = last else {
            return (!held.is_empty()).then(|| QueueUsage {
                at: now,
                decayed: BTreeMap::new(),
                held,
            });
        };
        if last.held == held || now.millis_since(last.at) < self.write_period_ms {
            return None;
        }
        let scale = f64::from(USAGE_SCALE);
        let decayed = self
            .decayed(last, now)
            .into_iter()
            .map(|(name, v)| (name, (v * scale).round() as u32))
            .filter(|(_, v)| *v > 0)
            .collect();
        Some(QueueUsage {
            at: now,
            decayed,
            held,
        })
    }
}

/// KAI's adjusted weights for queues compared with each other: `P = max(W' + k(W' − U'), 0)`
/// with `W'` each queue's weight over their sum and `U'` its usage over their sum (0 for all
/// when nobody has used anything). `k` 0, or no usage, gives weights proportional to the
/// given ones.
pub fn adjusted_weights(weights: &[f64], usage: &[f64], k: f64) -> Vec<f64> {
    let total_weight: f64 = weights.iter().sum();
    let total_usage: f64 = usage.iter().sum();
    weights
        .iter()
        .zip(usage)
        .map(|(w, u)| {
            let w = if total_weight > 0.0 {
                w / total_weight
            } else {
                0.0
            };
            let u = if total_usage > 0.0 {
                u / total_usage
            } else {
                w
            };
            (w + k * (w - u)).max(0.0)
        })
        .collect()
}

/// KAI's adjusted weights in a queue tree, per parent (Slurm's Fair Tree idea): the children
/// of one parent that `compete` (ask for something) are compared with each other only, by
/// [`adjusted_weights`] over their `weights` and `usage` (a node's usage covers its whole
/// subtree). Indexed by tree node; `None` where usage moves nothing: nodes that do not
/// compete, every child of a parent none of whose competing children has used anything, and
/// every node when `k` is 0.
pub fn sibling_weights(
    tree: &QueueTree,
    weights: &[f64],
    usage: &[f64],
    compete: &[bool],
    k: f64,
) -> Vec<Option<f64>> {
    let mut out = vec![None; tree.len()];
    if k <= 0.0 {
        return out;
    }
    for p in tree.top_down() {
        let kids: Vec<usize> = tree
            .children(p)
            .iter()
            .copied()
            .filter(|&c| compete[c])
            .collect();
        if kids.iter().all(|&c| usage[c] <= 0.0) {
            continue;
        }
        let w: Vec<f64> = kids.iter().map(|&c| weights[c]).collect();
        let u: Vec<f64> = kids.iter().map(|&c| usage[c]).collect();
        for (&c, p) in kids.iter().zip(adjusted_weights(&w, &u, k)) {
            out[c] = Some(p);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3600 * 1000;

    fn gpus(n: i64) -> Resources {
        Resources::from_pairs([("nvidia.com/gpu", n)])
    }

    fn settings(half_life_hours: i64) -> FairSettings {
        FairSettings {
            half_life_ms: half_life_hours * HOUR,
            ..FairSettings::default()
        }
    }

    #[test]
    fn usage_halves_over_one_half_life_without_work() {
        let s = settings(24);
        let total = gpus(64);
        let record = QueueUsage {
            at: Time(0),
            decayed: BTreeMap::from([(Arc::from("nvidia.com/gpu"), 800_000)]),
            held: BTreeMap::new(),
        };
        let at = |h: i64| s.usage(Some(&record), Time(h * HOUR), &total);
        assert!((at(0) - 0.8).abs() < 1e-9);
        assert!((at(24) - 0.4).abs() < 1e-9, "{}", at(24));
        assert!((at(48) - 0.2).abs() < 1e-9, "{}", at(48));
    }

    #[test]
    fn holding_the_whole_cluster_for_one_half_life_is_half_a_cluster() {
        let s = settings(12);
        let total = gpus(64);
        let held = s.held(&gpus(64), &total);
        let record = s.next_record(None, held, Time(0)).expect("first record");
        let u = s.usage(Some(&record), Time(12 * HOUR), &total);
        assert!((u - 0.5).abs() < 1e-9, "{u}");
    }

    #[test]
    fn records_are_written_only_when_what_is_held_changes_and_the_period_passed() {
        let s = settings(24);
        let total = gpus(64);
        let first = s
            .next_record(None, s.held(&gpus(32), &total), Time(0))
            .expect("first record");
        assert_eq!(
            s.next_record(Some(&first), s.held(&gpus(32), &total), Time(10 * HOUR)),
            None,
            "the same holding needs no record"
        );
        assert_eq!(
            s.next_record(Some(&first), s.held(&gpus(0), &total), Time(1000)),
            None,
            "younger than the write period"
        );
        let next = s
            .next_record(Some(&first), s.held(&gpus(0), &total), Time(24 * HOUR))
            .expect("changed after the period");
        assert_eq!(next.decayed.get("nvidia.com/gpu"), Some(&250_000));
        assert!(next.held.is_empty());
    }

    #[test]
    fn a_window_starts_usage_again_from_what_is_held() {
        let s = FairSettings {
            window_ms: 24 * HOUR,
            ..settings(24)
        };
        let total = gpus(64);
        let record = QueueUsage {
            at: Time(20 * HOUR),
            decayed: BTreeMap::from([(Arc::from("nvidia.com/gpu"), 800_000)]),
            held: BTreeMap::from([(Arc::from("nvidia.com/gpu"), 500_000)]),
        };
        let at = |h: i64| s.usage(Some(&record), Time(h * HOUR), &total);
        let unwindowed = |h: i64| settings(24).usage(Some(&record), Time(h * HOUR), &total);
        // Within the record's window it decays as without one.
        assert!((at(22) - unwindowed(22)).abs() < 1e-12);
        // The next window begins at 24 h with nothing, then what is held counts:
        // 0.5 × (1 − 2^(−12/24)) twelve hours in.
        assert!(at(24).abs() < 1e-12);
        let expected = 0.5 * (1.0 - (-0.5f64).exp2());
        assert!((at(36) - expected).abs() < 1e-9, "{}", at(36));
        assert!(at(36) < unwindowed(36));
        // The record written then starts from the window too.
        let next = s
            .next_record(Some(&record), s.held(&gpus(0), &total), Time(36 * HOUR))
            .expect("what is held changed");
        let ppm = (expected * f64::from(USAGE_SCALE)).round() as u32;
        assert_eq!(next.decayed.get("nvidia.com/gpu"), Some(&ppm));
        // A pod counts for its tenant from the window's start, not its own.
        let started = Time(HOUR);
        assert!(
            (s.tenant_weight(started, Time(36 * HOUR)) - (1.0 - (-0.5f64).exp2())).abs() < 1e-9
        );
        assert!(
            settings(24).tenant_weight(started, Time(36 * HOUR))
                > s.tenant_weight(started, Time(36 * HOUR))
        );
        assert_eq!(s.window_start(Time(36 * HOUR)), Some(Time(24 * HOUR)));
        assert_eq!(settings(24).window_start(Time(36 * HOUR)), None);
    }

    #[test]
    fn half_life_zero_keeps_no_usage() {
        let s = settings(0);
        let total = gpus(64);
        assert_eq!(
            s.next_record(None, s.held(&gpus(64), &total), Time(0)),
            None
        );
        let record = QueueUsage {
            at: Time(0),
            decayed: BTreeMap::from([(Arc::from("nvidia.com/gpu"), 800_000)]),
            held: BTreeMap::new(),
        };
        assert_eq!(s.usage(Some(&record), Time(HOUR), &total), 0.0);
    }

    #[test]
    fn kai_formula() {
        // Equal weights, one queue did all the using: with k = 1 it gets no over-quota share.
        let p = adjusted_weights(&[1.0, 1.0], &[0.3, 0.0], 1.0);
        assert_eq!(p, vec![0.0, 1.0]);
        let p = adjusted_weights(&[1.0, 1.0], &[0.3, 0.0], 0.5);
        assert_eq!(p, vec![0.25, 0.75]);
        // k = 0, or nobody used anything: proportional to the weights.
        let p = adjusted_weights(&[1.0, 3.0], &[0.3, 0.0], 0.0);
        assert_eq!(p, vec![0.25, 0.75]);
        let p = adjusted_weights(&[1.0, 3.0], &[0.0, 0.0], 2.0);
        assert_eq!(p, vec![0.25, 0.75]);
    }

    #[test]
    fn siblings_are_compared_within_their_parent_only() {
        // x ─ x1 (used a lot), x2      y ─ y1 (used a little), y2 (used more)
        let tree = QueueTree::named(&[
            ("x", None),
            ("x1", Some("x")),
            ("x2", Some("x")),
            ("y", None),
            ("y1", Some("y")),
            ("y2", Some("y")),
        ]);
        let n = tree.len();
        let weights = vec![1.0; n];
        // x's usage covers x1 and x2; y's covers y1 and y2.
        let mut usage = vec![0.0; n];
        usage[0] = 0.6;
        usage[1] = 0.6;
        usage[3] = 0.3;
        usage[4] = 0.1;
        usage[5] = 0.2;
        let compete = vec![true; n];
        let p = sibling_weights(&tree, &weights, &usage, &compete, 1.0);
        // Top level: U' = (2/3, 1/3), so x gets 1/2 − 1/6 and y 1/2 + 1/6.
        assert!((p[0].unwrap() - 1.0 / 3.0).abs() < 1e-12, "{p:?}");
        assert!((p[3].unwrap() - 2.0 / 3.0).abs() < 1e-12, "{p:?}");
        // Under x, x1 did all the using: (0, 1), whatever y's children used.
        assert_eq!((p[1], p[2]), (Some(0.0), Some(1.0)));
        // Under y, U' = (1/3, 2/3): y1 gets more than y2.
        assert!((p[4].unwrap() - 2.0 / 3.0).abs() < 1e-12, "{p:?}");
        assert!((p[5].unwrap() - 1.0 / 3.0).abs() < 1e-12, "{p:?}");
        assert_eq!(p[tree.root()], None, "the root has no siblings");

        // Under a parent whose children used nothing, nothing is adjusted; nor with k = 0;
        // a child that asks for nothing is left out of its parent's split.
        usage[4] = 0.0;
        usage[5] = 0.0;
        let p = sibling_weights(&tree, &weights, &usage, &compete, 1.0);
        assert_eq!((p[4], p[5]), (None, None));
        assert!(sibling_weights(&tree, &weights, &usage, &compete, 0.0)
            .iter()
            .all(Option::is_none));
        let mut asks = compete.clone();
        asks[2] = false;
        let p = sibling_weights(&tree, &weights, &usage, &asks, 1.0);
        assert_eq!((p[1], p[2]), (Some(1.0), None), "x1 alone in its split");
    }

    #[test]
    fn cpu_only_clusters_count_cpu_and_memory() {
        let s = settings(24);
        let total = Resources::from_pairs([("cpu", 1000), ("memory", 1000)]);
        let held = s.held(
            &Resources::from_pairs([("cpu", 500), ("memory", 500)]),
            &total,
        );
        let record = s.next_record(None, held, Time(0)).expect("record");
        let u = s.usage(Some(&record), Time(24 * HOUR), &total);
        assert!((u - 0.25).abs() < 1e-9, "{u}");
    }
}
