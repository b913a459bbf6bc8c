//! How a replay is printed: a summary table for people, the per-job CSV (`--jobs-out`), and
//! two configs side by side with their ratio (`--compare`).

use crate::metrics::{secs, Metrics, Spread};
use crate::run::Run;
use crate::trace::decimal;
use caldera_sim::report::table;
use serde::Serialize;

fn num(x: Option<f64>) -> String {
    x.map_or("-".into(), |v| format!("{v}"))
}

fn spread(s: &Spread) -> String {
    format!(
        "{} / {} / {} / {}",
        num(s.p50),
        num(s.p95),
        num(s.p99),
        num(s.max)
    )
}

/// The rows of the summary: (figure, value).
fn rows(m: &Metrics) -> Vec<(String, String)> {
    let mut out = vec![
        ("mode".to_string(), m.mode.to_string()),
        ("config".into(), m.config.clone()),
        ("GPUs".into(), m.total_gpus.to_string()),
        (
            "jobs submitted / placed / completed / never placed / refused".into(),
            format!(
                "{} / {} / {} / {} / {}",
                m.jobs.submitted,
                m.jobs.placed,
                m.jobs.completed,
                m.jobs.never_placed,
                m.jobs.refused
            ),
        ),
    ];
    if let Some(r) = m.gpu_allocation_ratio {
        let what = if m.mode == "inflation" {
            "GPU allocation at the end"
        } else {
            "GPU allocation (time-weighted mean)"
        };
        out.push((what.into(), format!("{:.2}%", r * 100.0)));
    }
    if let Some(at) = &m.allocation_ratio_at {
        for p in [50u32, 80, 90, 100, 110, 120, 130] {
            if let Some(v) = at.get(&p) {
                let frag = m
                    .fragmentation_ratio
                    .as_ref()
                    .and_then(|f| f.get(&p))
                    .map_or("-".into(), |f| format!("{f:.2}%"));
                out.push((
                    format!("allocated at {p}% arrival (fragmented)"),
                    format!("{v:.2}% ({frag})"),
                ));
            }
        }
    }
    if let Some(w) = &m.wait_seconds {
        out.push(("wait s p50 / p95 / p99 / max".into(), spread(&w.total)));
        for (q, s) in &w.per_queue {
            out.push((format!("  queue {q}"), spread(s)));
        }
        for (b, s) in &w.per_gang_size {
            out.push((format!("  gang size {b}"), spread(s)));
        }
        for (b, s) in &w.per_gang_gpus {
            out.push((format!("  gang GPUs {b}"), spread(s)));
        }
    }
    if let Some(j) = &m.jct_seconds {
        out.push((
            "JCT s p50 / p95".into(),
            format!(
                "{} / {}",
                num(j.get("p50").copied().flatten()),
                num(j.get("p95").copied().flatten())
            ),
        ));
    }
    if let Some(ms) = m.makespan_seconds {
        out.push(("makespan s".into(), format!("{ms}")));
    }
    if let Some(f) = m.fairness {
        out.push(("fairness (Jain, mean over windows)".into(), format!("{f}")));
    }
    if let Some(starved) = &m.longest_starvation_seconds {
        if let Some((q, s)) = starved.iter().max_by(|a, b| a.1.total_cmp(b.1)) {
            out.push(("longest starvation s (queue)".into(), format!("{s} ({q})")));
        }
    }
    out.push((
        "free GPUs at the end".into(),
        m.unallocated_gpus_at_end.to_string(),
    ));
    out.push((
        "preemptions / evicted GPU-s".into(),
        format!("{} / {}", m.preemptions, m.evicted_gpu_seconds),
    ));
    out.push((
        "partial gang s (must be 0)".into(),
        format!("{}", m.partial_gang_seconds),
    ));
    out.push(("sessions".into(), m.sessions.to_string()));
    out.push(("wall s".into(), format!("{:.3}", m.wall_seconds)));
    for (why, n) in &m.refused_reasons {
        out.push((format!("refused: {why}"), n.to_string()));
    }
    out
}

/// The summary table of one replay.
pub fn text(m: &Metrics) -> String {
    let rows: Vec<Vec<String>> = rows(m).into_iter().map(|(k, v)| vec![k, v]).collect();
    table(&["figure", "value"], &rows)
}

/// Two replays of the same trace side by side, with the ratio second ÷ first where both are
/// numbers.
pub fn compare_text(a: &Metrics, b: &Metrics) -> String {
    let (ra, rb) = (rows(a), rows(b));
    let mut out = Vec::new();
    for (k, va) in &ra {
        let vb = rb
            .iter()
            .find(|(kb, _)| kb == k)
            .map_or("-".to_string(), |(_, v)| v.clone());
        let ratio = match (parse_num(va), parse_num(&vb)) {
            (Some(x), Some(y)) if x != 0.0 => format!("{:.3}", y / x),
            _ => String::new(),
        };
        out.push(vec![k.clone(), va.clone(), vb, ratio]);
    }
    table(&["figure", &a.config, &b.config, "ratio"], &out)
}

fn parse_num(s: &str) -> Option<f64> {
    s.trim_end_matches('%').parse().ok()
}

/// `--compare` as JSON: both figures.
#[derive(Debug, Serialize)]
pub struct Comparison<'a> {
    /// The first config's.
    pub baseline: &'a Metrics,
    /// The second config's.
    pub compare: &'a Metrics,
}

/// The per-job CSV: `job,queue,submit,start,end,wait,members_bound,nodes,preempted` (seconds;
/// empty where a job never started or ended; nodes `|`-separated; refused jobs have `refused`
/// as their start).
pub fn jobs_csv(run: &Run) -> String {
    let mut out = String::from("job,queue,submit,start,end,wait,members_bound,nodes,preempted\n");
    for j in &run.jobs {
        let opt = |v: Option<i64>| v.map_or(String::new(), decimal);
        let start = if j.refused.is_some() {
            "refused".to_string()
        } else {
            opt(j.start_ms)
        };
        let nodes: Vec<&str> = j.nodes.iter().map(String::as_str).collect();
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            crate::csv::quote(&j.name),
            crate::csv::quote(&j.queue),
            decimal(j.submit_ms),
            start,
            opt(j.end_ms),
            j.wait_ms()
                .map_or(String::new(), |w| format!("{}", secs(w))),
            j.members_bound,
            crate::csv::quote(&nodes.join("|")),
            j.preempted
        ));
    }
    out
}
