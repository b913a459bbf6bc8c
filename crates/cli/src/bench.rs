//! `caldera bench KIND`: benchmarks that print figures (a table, or JSON with `-o json`).

use crate::CommandResult;
use caldera_bench::session::{self, SessionResult};
use clap::{Args, ValueEnum};
use std::io::Write;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people.
    Table,
    /// A JSON array of result objects.
    Json,
}

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// One full session on a synthetic cluster (and one over a backlog of unplaceable gangs).
    Session,
    /// Watch events into the cache: events per second and memory per cached pod.
    Cache,
}

/// `caldera bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark.
    kind: Kind,
    /// Node counts to run (each 8 GPUs, 64 CPU, 512Gi), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "5000")]
    nodes: Vec<usize>,
    /// Running pods (they hold half the GPUs).
    #[arg(long, default_value_t = 100_000)]
    running_pods: usize,
    /// Pending pods, one GPU each, in gangs of 1–64 across 10 queues.
    #[arg(long, default_value_t = 50_000)]
    pending_pods: usize,
    /// Gangs in the unplaceable backlog.
    #[arg(long, default_value_t = 10_000)]
    backlog_gangs: usize,
    /// Pod events for `cache`.
    #[arg(long, default_value_t = 150_000)]
    pod_events: usize,
    /// Node events for `cache`.
    #[arg(long, default_value_t = 10_000)]
    node_events: usize,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs the benchmark and prints its figures.
pub fn run(args: BenchArgs) -> CommandResult {
    match args.kind {
        Kind::Cache => {
            let r = caldera_bench::cache::run(args.pod_events, args.node_events, args.seed);
            let mut out = std::io::stdout().lock();
            match args.output {
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&[&r])?)?,
                Format::Table => {
                    writeln!(
                        out,
                        "{:>10} {:>10} {:>14} {:>14} {:>12} {:>10}",
                        "pod-events",
                        "node-events",
                        "pod-events/s",
                        "node-events/s",
                        "bytes/pod",
                        "snapshot"
                    )?;
                    writeln!(
                        out,
                        "{:>10} {:>10} {:>14.0} {:>14.0} {:>12.0} {:>9.3}s",
                        r.pod_events,
                        r.node_events,
                        r.pod_events_per_second,
                        r.node_events_per_second,
                        r.bytes_per_pod,
                        r.snapshot_seconds
                    )?;
                }
            }
            Ok(())
        }
        Kind::Session => {
            let mut results: Vec<SessionResult> = Vec::new();
            for &n in &args.nodes {
                results.push(session::run(
                    n,
                    args.running_pods,
                    args.pending_pods,
                    args.backlog_gangs,
                    args.seed,
                ));
            }
            let mut out = std::io::stdout().lock();
            match args.output {
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&results)?)?,
                Format::Table => {
                    writeln!(
                        out,
                        "{:>7} {:>8} {:>8} {:>10} {:>10} {:>10} {:>12} {:>12} {:>9}",
                        "nodes",
                        "running",
                        "pending",
                        "snapshot",
                        "session",
                        "placed",
                        "placed/s",
                        "backlog",
                        "peakRSS"
                    )?;
                    for r in &results {
                        writeln!(
                            out,
                            "{:>7} {:>8} {:>8} {:>9.3}s {:>9.3}s {:>10} {:>12.0} {:>11.3}s {:>8}M",
                            r.nodes,
                            r.running_pods,
                            r.pending_pods,
                            r.snapshot_seconds,
                            r.session_seconds,
                            r.placements,
                            r.placements_per_second,
                            r.backlog_session_seconds,
                            r.peak_rss_bytes >> 20
                        )?;
                    }
                    if results.len() > 1 {
                        let first = &results[0];
                        for r in &results[1..] {
                            writeln!(
                                out,
                                "session time {}→{} nodes: ×{:.2} for ×{:.1} nodes",
                                first.nodes,
                                r.nodes,
                                r.session_seconds / first.session_seconds.max(1e-9),
                                r.nodes as f64 / first.nodes.max(1) as f64
                            )?;
                        }
                    }
                }
            }
            Ok(())
        }
    }
}
