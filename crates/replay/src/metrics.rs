//! The figures of a replay, as `-o json` prints them (one object, keys in a fixed order,
//! numbers rounded to the millisecond or to 4 decimals, so two runs of the same inputs print
//! the same bytes; only `wall_seconds` differs).
//!
//! Definitions (docs/replay.md has them with examples):
//! - `gpu_allocation_ratio`: allocated ÷ total GPUs, averaged over time from the first arrival
//!   to the last job's end, or to `--until` when the replay was stopped there (timeline).
//! - `allocation_ratio_at` / `fragmentation_ratio`: per arrival percent (inflation), as the
//!   paper's table ([`crate::inflation`], [`crate::frag`]).
//! - `wait_seconds`: arrival to the bind of the job's last member (once the gang minimum is
//!   bound; after an eviction, of the final run); p50/p95/p99
//!   (nearest rank) and max, over jobs that started; in total, per queue, per gang size
//!   (`1`, `2-8`, `9-64`, `65+` members), per GPUs the job asks for in all (`0`, `<1`, `1`,
//!   `2-8`, `9-31`, `32+`).
//! - `jct_seconds`: arrival to end, over jobs that ended.
//! - `makespan_seconds`: first arrival to the last end (or to `--until`).
//! - `fairness`: per window of `--fair-window`, Jain's index (Σx)²/(n·Σx²) of x = each
//!   queue's GPU-seconds ÷ its weight, over the n queues with a job waiting or running in the
//!   window; averaged over the windows where such queues got any GPU time (from the first
//!   arrival to the end of the run: `--until` ends it, e.g. at the end of a trace's week).
//! - `longest_starvation_seconds`: per queue, the longest time it had a GPU job waiting and
//!   held no GPU.
//! - `preemptions`: members evicted; `evicted_gpu_seconds`: GPU-seconds they had run.
//! - `partial_gang_seconds`: time gangs spent with some member holding a node while fewer than
//!   their minimum had one, summed over gangs (must be 0).

use crate::inflation::Inflation;
use crate::run::Run;
use serde::Serialize;
use std::collections::BTreeMap;

/// p50/p95/p99/max, seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Jobs counted.
    pub count: usize,
    /// Median.
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Maximum.
    pub max: Option<f64>,
}

/// Nearest-rank percentile `p` of sorted `v`.
fn rank(v: &[i64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(secs(v[i.clamp(1, v.len()) - 1]))
}

/// Milliseconds as seconds.
pub fn secs(ms: i64) -> f64 {
    ms as f64 / 1000.0
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

impl Spread {
    /// The spread of `ms` values.
    pub fn of(mut ms: Vec<i64>) -> Spread {
        ms.sort_unstable();
        Spread {
            count: ms.len(),
            p50: rank(&ms, 50.0),
            p95: rank(&ms, 95.0),
            p99: rank(&ms, 99.0),
            max: ms.last().map(|&m| secs(m)),
        }
    }
}

/// Waits in total, per queue and per gang size.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Waits {
    /// Every job that started.
    pub total: Spread,
    /// Per queue.
    pub per_queue: BTreeMap<String, Spread>,
    /// Per gang size bucket.
    pub per_gang_size: BTreeMap<&'static str, Spread>,
    /// Per bucket of the GPUs the whole job asks for ([`gpu_bucket`]).
    pub per_gang_gpus: BTreeMap<&'static str, Spread>,
}

/// Job counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Jobs {
    /// Arrived (refused ones included).
    pub submitted: u64,
    /// Placed (started).
    pub placed: u64,
    /// Ran to their end.
    pub completed: u64,
    /// Submitted, not refused, never started.
    pub never_placed: u64,
    /// Not replayed (see `refused_reasons`).
    pub refused: u64,
}

/// The figures of one replay.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// `timeline` or `inflation`.
    pub mode: &'static str,
    /// The scheduler config's name (its file, or `shipped`).
    pub config: String,
    /// The cluster's GPUs.
    pub total_gpus: u64,
    /// Time-weighted mean allocated ÷ total GPUs (timeline).
    pub gpu_allocation_ratio: Option<f64>,
    /// Per arrival percent, allocated ÷ total GPUs, percent (inflation).
    pub allocation_ratio_at: Option<BTreeMap<u32, f64>>,
    /// Per arrival percent, fragmented ÷ idle GPUs, percent (inflation).
    pub fragmentation_ratio: Option<BTreeMap<u32, f64>>,
    /// Free GPUs at the end.
    pub unallocated_gpus_at_end: u64,
    /// Arrival to start.
    pub wait_seconds: Option<Waits>,
    /// Arrival to end: p50, p95.
    pub jct_seconds: Option<BTreeMap<&'static str, Option<f64>>>,
    /// First arrival to last end.
    pub makespan_seconds: Option<f64>,
    /// Job counts.
    pub jobs: Jobs,
    /// Refused jobs per reason.
    pub refused_reasons: BTreeMap<String, u64>,
    /// Mean Jain's index over fair-share windows (timeline).
    pub fairness: Option<f64>,
    /// Per queue, the longest time with a GPU job waiting and no GPU held, seconds
    /// (timeline).
    pub longest_starvation_seconds: Option<BTreeMap<String, f64>>,
    /// Members evicted.
    pub preemptions: u64,
    /// GPU-seconds of work lost to evictions.
    pub evicted_gpu_seconds: f64,
    /// Seconds gangs spent bound in part (must be 0).
    pub partial_gang_seconds: f64,
    /// Sessions run.
    pub sessions: u64,
    /// Wall-clock seconds the replay took (the one field that differs between runs).
    pub wall_seconds: f64,
}

/// The gang size bucket of a job of `members`.
pub fn bucket(members: u32) -> &'static str {
    match members {
        0 | 1 => "1",
        2..=8 => "2-8",
        9..=64 => "9-64",
        _ => "65+",
    }
}

/// The bucket of a job asking for `gpu_milli` thousandths of a GPU in all (every member's):
/// `0`, `<1` (a fraction of one), `1`, `2-8`, `9-31`, `32+`.
pub fn gpu_bucket(gpu_milli: u64) -> &'static str {
    match gpu_milli {
        0 => "0",
        1..=999 => "<1",
        1000 => "1",
        1001..=8000 => "2-8",
        8001..=31999 => "9-31",
        _ => "32+",
    }
}

/// The figures of a timeline run; `window_ms` is the fair-share window.
pub fn timeline(run: &Run, window_ms: i64, config: &str) -> Metrics {
    let mut jobs = Jobs {
        submitted: run.submitted,
        ..Jobs::default()
    };
    let mut refused_reasons: BTreeMap<String, u64> = BTreeMap::new();
    let mut all = Vec::new();
    let mut per_queue: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut per_size: BTreeMap<&'static str, Vec<i64>> = BTreeMap::new();
    let mut per_gpus: BTreeMap<&'static str, Vec<i64>> = BTreeMap::new();
    let mut jct = Vec::new();
    for j in &run.jobs {
        if let Some(r) = &j.refused {
            jobs.refused += 1;
            *refused_reasons.entry(r.clone()).or_default() += 1;
            continue;
        }
        if j.submit_ms > run.last_ms {
            continue;
        }
        match j.wait_ms() {
            Some(w) => {
                jobs.placed += 1;
                all.push(w);
                per_queue.entry(j.queue.clone()).or_default().push(w);
                per_size.entry(bucket(j.members)).or_default().push(w);
                let gpus = u64::from(j.gpu_milli) * u64::from(j.members);
                per_gpus.entry(gpu_bucket(gpus)).or_default().push(w);
            }
            None => jobs.never_placed += 1,
        }
        if let Some(end) = j.end_ms {
            jobs.completed += 1;
            jct.push(end - j.submit_ms);
        }
    }
    let replayed = run.jobs.iter().filter(|j| j.refused.is_none());
    let first = replayed.clone().map(|j| j.submit_ms).min();
    // Cut by `--until`: the run ends there, whatever was still running.
    let last = if run.cut {
        Some(run.last_ms)
    } else {
        replayed.filter_map(|j| j.end_ms).max()
    };
    let makespan = match (first, last) {
        (Some(a), Some(b)) if b > a => Some((a, b)),
        _ => None,
    };
    let ratio = makespan.map(|(a, b)| {
        let area = area(&run.allocation, a, b);
        round(area / (run.total_gpu_milli as f64 * (b - a) as f64), 4)
    });
    let jct_spread = Spread::of(jct);
    Metrics {
        mode: "timeline",
        config: config.to_string(),
        total_gpus: run.total_gpu_milli / 1000,
        gpu_allocation_ratio: ratio,
        allocation_ratio_at: None,
        fragmentation_ratio: None,
        unallocated_gpus_at_end: run.unallocated_end_gpus,
        wait_seconds: Some(Waits {
            total: Spread::of(all),
            per_queue: per_queue
                .into_iter()
                .map(|(q, v)| (q, Spread::of(v)))
                .collect(),
            per_gang_size: per_size
                .into_iter()
                .map(|(b, v)| (b, Spread::of(v)))
                .collect(),
            per_gang_gpus: per_gpus
                .into_iter()
                .map(|(b, v)| (b, Spread::of(v)))
                .collect(),
        }),
        jct_seconds: Some(BTreeMap::from([
            ("p50", jct_spread.p50),
            ("p95", jct_spread.p95),
        ])),
        makespan_seconds: makespan.map(|(a, b)| secs(b - a)),
        jobs,
        refused_reasons,
        fairness: first.and_then(|f| fairness(run, f, run.last_ms, window_ms)),
        longest_starvation_seconds: Some(starvation(run)),
        preemptions: run.preemptions,
        evicted_gpu_seconds: round(run.evicted_gpu_milli_ms as f64 / 1e6, 3),
        partial_gang_seconds: secs(run.partial_gang_ms),
        sessions: run.sessions,
        wall_seconds: 0.0,
    }
}

/// ∫ of the step function `steps` over [from, to), in value × ms.
pub fn area(steps: &[(i64, u64)], from: i64, to: i64) -> f64 {
    let mut total = 0.0;
    for (i, &(t, v)) in steps.iter().enumerate() {
        let next = steps.get(i + 1).map_or(to, |s| s.0);
        let (a, b) = (t.max(from), next.min(to));
        if b > a {
            total += v as f64 * (b - a) as f64;
        }
    }
    total
}

/// Mean Jain's index over windows of `window_ms` from `from` to `to`.
pub fn fairness(run: &Run, from: i64, to: i64, window_ms: i64) -> Option<f64> {
    let window = window_ms.max(1);
    if to <= from {
        return None;
    }
    let windows = ((to - from) + window - 1) / window;
    let windows = usize::try_from(windows).ok()?;
    let queues: Vec<&String> = run.queue_weights.keys().collect();
    let qi: BTreeMap<&str, usize> = queues
        .iter()
        .enumerate()
        .map(|(i, q)| (q.as_str(), i))
        .collect();
    let mut used = vec![vec![0f64; queues.len()]; windows];
    let mut demand = vec![vec![false; queues.len()]; windows];
    let window_of = |t: i64| (((t - from).max(0)) / window).min(windows as i64 - 1) as usize;
    for u in &run.usage {
        let Some(&q) = qi.get(u.queue.as_str()) else {
            continue;
        };
        let (mut a, b) = (u.start_ms.max(from), u.end_ms.min(to));
        while a < b {
            let w = window_of(a);
            let edge = (from + (w as i64 + 1) * window).min(b);
            used[w][q] += u.gpu_milli as f64 * (edge - a) as f64;
            a = edge;
        }
    }
    for j in run.jobs.iter().filter(|j| j.refused.is_none()) {
        let Some(&q) = qi.get(j.queue.as_str()) else {
            continue;
        };
        if j.submit_ms >= to {
            continue;
        }
        let end = j.end_ms.unwrap_or(to).min(to);
        if end <= from {
            continue;
        }
        let (a, b) = (
            window_of(j.submit_ms),
            window_of((end - 1).max(j.submit_ms)),
        );
        for row in demand.iter_mut().take(b + 1).skip(a) {
            row[q] = true;
        }
    }
    let mut sum = 0.0;
    let mut n = 0usize;
    for (w, row) in used.iter().enumerate() {
        let xs: Vec<f64> = row
            .iter()
            .enumerate()
            .filter(|(q, _)| demand[w][*q])
            .map(|(q, v)| v / f64::from(run.queue_weights[queues[q]]))
            .collect();
        let s: f64 = xs.iter().sum();
        let s2: f64 = xs.iter().map(|x| x * x).sum();
        if xs.is_empty() || s2 == 0.0 {
            continue;
        }
        sum += s * s / (xs.len() as f64 * s2);
        n += 1;
    }
    (n > 0).then(|| round(sum / n as f64, 4))
}

/// Per queue, the longest stretch with a GPU job waiting (arrived, not started, not refused)
/// and no GPU held, seconds; 0 for a queue never starved. Up to the end of the run.
pub fn starvation(run: &Run) -> BTreeMap<String, f64> {
    // Per queue: (time, change in waiting jobs, change in held runs), swept in time order.
    let mut events: BTreeMap<&str, Vec<(i64, i64, i64)>> = BTreeMap::new();
    for q in run.queue_weights.keys() {
        events.entry(q.as_str()).or_default();
    }
    for j in run
        .jobs
        .iter()
        .filter(|j| j.refused.is_none() && j.gpu_milli > 0)
    {
        // Until it started, or failed (a gang timeout ends the wait), or the run ended.
        let until = j
            .start_ms
            .or(j.end_ms)
            .unwrap_or(run.last_ms)
            .min(run.last_ms);
        if until > j.submit_ms {
            let e = events.entry(j.queue.as_str()).or_default();
            e.push((j.submit_ms, 1, 0));
            e.push((until, -1, 0));
        }
    }
    for u in run
        .usage
        .iter()
        .filter(|u| u.gpu_milli > 0 && u.end_ms > u.start_ms)
    {
        let e = events.entry(u.queue.as_str()).or_default();
        e.push((u.start_ms, 0, 1));
        e.push((u.end_ms, 0, -1));
    }
    events
        .into_iter()
        .map(|(q, mut e)| {
            e.sort_unstable();
            let (mut waiting, mut held, mut longest) = (0i64, 0i64, 0i64);
            let mut since: Option<i64> = None;
            let mut i = 0;
            while i < e.len() {
                let t = e[i].0;
                while i < e.len() && e[i].0 == t {
                    waiting += e[i].1;
                    held += e[i].2;
                    i += 1;
                }
                let starved = waiting > 0 && held == 0;
                match (since, starved) {
                    (None, true) => since = Some(t),
                    (Some(s), false) => {
                        longest = longest.max(t - s);
                        since = None;
                    }
                    _ => {}
                }
            }
            if let Some(s) = since {
                longest = longest.max(run.last_ms - s);
            }
            (q.to_string(), secs(longest))
        })
        .collect()
}

/// The figures of an inflation run.
pub fn inflation(run: &Inflation, config: &str) -> Metrics {
    Metrics {
        mode: "inflation",
        config: config.to_string(),
        total_gpus: run.total_gpu_milli / 1000,
        gpu_allocation_ratio: run
            .points
            .last()
            .map(|p| round(p.allocated_milli as f64 / run.total_gpu_milli as f64, 4)),
        allocation_ratio_at: Some(run.allocation_ratio_at()),
        fragmentation_ratio: Some(run.fragmentation_ratio_at()),
        unallocated_gpus_at_end: run.unallocated_end_gpus,
        wait_seconds: None,
        jct_seconds: None,
        makespan_seconds: None,
        jobs: Jobs {
            submitted: run.submitted,
            placed: run.placed,
            completed: 0,
            never_placed: run.failed,
            refused: run.refused.values().sum(),
        },
        refused_reasons: run.refused.clone(),
        fairness: None,
        longest_starvation_seconds: None,
        preemptions: 0,
        evicted_gpu_seconds: 0.0,
        partial_gang_seconds: 0.0,
        sessions: run.sessions,
        wall_seconds: 0.0,
    }
}

/// The JSON of `m`, with a final line break.
pub fn to_json(m: &Metrics) -> String {
    let mut s =
        serde_json::to_string_pretty(m).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{JobOutcome, Usage};

    #[test]
    fn nearest_rank_percentiles() {
        let s = Spread::of((1..=100).map(|i| i * 1000).collect());
        assert_eq!(
            (s.p50, s.p95, s.p99, s.max),
            (Some(50.0), Some(95.0), Some(99.0), Some(100.0))
        );
        assert_eq!(Spread::of(vec![]).p50, None);
    }

    #[test]
    fn area_of_steps() {
        let steps = [(0, 2), (10, 4), (20, 0)];
        assert_eq!(area(&steps, 0, 30), 60.0);
        assert_eq!(area(&steps, 5, 15), 30.0);
    }

    fn job(queue: &str, submit_s: i64, start_s: Option<i64>, end_s: Option<i64>) -> JobOutcome {
        JobOutcome {
            name: format!("{queue}-{submit_s}"),
            queue: queue.into(),
            members: 1,
            min_members: 1,
            gpu_milli: 1000,
            submit_ms: submit_s * 1000,
            start_ms: start_s.map(|s| s * 1000),
            end_ms: end_s.map(|s| s * 1000),
            ..JobOutcome::default()
        }
    }

    fn held(queue: &str, from_s: i64, to_s: i64) -> Usage {
        Usage {
            job: 0,
            finished: true,
            queue: queue.into(),
            start_ms: from_s * 1000,
            end_ms: to_s * 1000,
            gpu_milli: 1000,
        }
    }

    #[allow(clippy::field_reassign_with_default)] // Run has private fields
    fn two_queues(jobs: Vec<JobOutcome>, usage: Vec<Usage>, last_s: i64) -> Run {
        let mut run = Run::default();
        run.jobs = jobs;
        run.usage = usage;
        run.queue_weights = BTreeMap::from([("a".into(), 1), ("b".into(), 1)]);
        run.last_ms = last_s * 1000;
        run.total_gpu_milli = 1000;
        run
    }

    #[test]
    fn starvation_is_the_longest_wait_with_no_gpu_held() {
        // a: one job waits 0-10 s, runs 10-20 s; the next arrives at 15 s (a holds a GPU
        // then) and starts at 35 s: starved 20-35 s. b waits 5-10 s while a waits too, then
        // holds a GPU the whole time its second job waits.
        let run = two_queues(
            vec![
                job("a", 0, Some(10), Some(20)),
                job("a", 15, Some(35), Some(40)),
                job("b", 5, Some(10), Some(40)),
                job("b", 12, Some(30), Some(40)),
            ],
            vec![held("a", 10, 20), held("a", 35, 40), held("b", 10, 40)],
            40,
        );
        let starved = starvation(&run);
        assert_eq!(starved["a"], 15.0);
        assert_eq!(starved["b"], 5.0);
        // A job never started is starved until the end of the run.
        let run = two_queues(vec![job("a", 30, None, None)], vec![], 100);
        assert_eq!(starvation(&run)["a"], 70.0);
        assert_eq!(starvation(&run)["b"], 0.0);
    }

    #[test]
    fn fairness_is_the_mean_over_windows_of_the_queues_with_demand() {
        // Both queues hold one GPU each from 0 to 100 s; then a's backlog runs alone to
        // 200 s while b's last job, arrived at 100 s, finishes at 110 s on its GPU.
        let run = two_queues(
            vec![
                job("a", 0, Some(0), Some(100)),
                job("b", 0, Some(0), Some(100)),
                job("a", 50, Some(100), Some(200)),
                job("b", 100, Some(100), Some(110)),
            ],
            vec![
                held("a", 0, 100),
                held("b", 0, 100),
                held("a", 100, 200),
                held("b", 100, 110),
            ],
            200,
        );
        // One window, the whole run: x = (200, 110): 310² / (2 · 52,100) = 0.9223.
        assert_eq!(timeline(&run, 1_000_000, "test").fairness, Some(0.9223));
        // Windows of 100 s: 1 for the first; x = (100, 10) in the second, 110² / (2 · 10,100)
        // = 0.599; the mean 0.7995.
        assert_eq!(timeline(&run, 100_000, "test").fairness, Some(0.7995));
        // A job that ended before a span starts is no demand in it: a alone from 150 s.
        assert_eq!(fairness(&run, 150, 200, 50), Some(1.0));
    }
}
