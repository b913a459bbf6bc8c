//! `caldera bench KIND`: benchmarks that print figures (a table, or JSON with `-o json`).

use crate::CommandResult;
use caldera_bench::cold_start::{self, ColdStartOptions, ColdStartResult};
use caldera_bench::e2e::{self, E2eOptions, E2eResult};
use caldera_bench::live::Backend;
use caldera_bench::perf::{self, format::Source, PerfOptions, WorkloadResult};
use caldera_bench::scale::{self, ScaleOptions, ScaleResult};
use caldera_bench::session::{self, SessionResult};
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::PathBuf;

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
    /// The runtime against an API server: gangs created → bound, against a plain binder.
    E2e,
    /// A fresh runtime on a big cluster: start → first bind of a new job.
    ColdStart,
    /// `caldera replay`: a synthetic timeline trace, and an openb trace in inflation mode.
    Replay,
    /// kube-scheduler's scheduler_perf workloads (CONFIG: a `performance-config.yaml`, or
    /// `basicscheduling`, `gangscheduling`, `tas` for the shipped ones) run in-process:
    /// SchedulingThroughput per workload.
    Perf,
    /// The largest clusters in-process: memory per node and per pod (the index and the
    /// model), the session over a pending backlog, a steady session, peak RSS.
    Scale,
}

/// A figure of `caldera bench session` run on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Figure {
    /// The network-topology figure (`topology_placements_per_second` and its unconstrained
    /// pair).
    Topology,
    /// The first session (10 queues), the hierarchical-queue figure (1,000 queues, flat and
    /// as a tree) and the fairness-over-time figure (1,000 queues with usage, `proportion`
    /// with and without `fairshare`) on the same cluster and workload.
    Queues,
    /// The DRA figures (`dra_placements_per_second`, `shared_gpu_placements_per_second`).
    Dra,
}

/// `caldera bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark.
    kind: Kind,
    /// `perf`: the scheduler_perf config (a path, or a shipped one: `basicscheduling`,
    /// `gangscheduling`, `tas`).
    #[arg(value_name = "CONFIG")]
    config: Option<String>,
    /// `perf`: run the workloads carrying every one of these labels (scheduler_perf's
    /// `performance`, `integration-test`, `short`).
    #[arg(long = "label", default_value = "performance")]
    labels: Vec<String>,
    /// `perf`: run only this workload (`Name` or `TestCase/Name`), whatever its labels.
    #[arg(long)]
    workload: Option<String>,
    /// `perf`: runs of each workload, each on a fresh cluster (samples pooled).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Node counts to run (each 8 GPUs, 64 CPU, 512Gi), comma-separated. Default: 5000
    /// (`e2e`: 1000; `replay`: 4000; `scale`: 100000).
    #[arg(long, value_delimiter = ',')]
    nodes: Vec<usize>,
    /// Running pods (they hold half the GPUs).
    #[arg(long, default_value_t = 100_000)]
    running_pods: usize,
    /// Pending pods, one GPU each: `session`, in gangs of 1–64 across 10 queues (default
    /// 50000); `scale`, in gangs of 1–512 across `--queues` (default 10000).
    #[arg(long)]
    pending_pods: Option<usize>,
    /// `scale`: queues the gangs are spread over.
    #[arg(long, default_value_t = 100)]
    queues: usize,
    /// Gangs in the unplaceable backlog.
    #[arg(long, default_value_t = 10_000)]
    backlog_gangs: usize,
    /// Pod events for `cache`.
    #[arg(long, default_value_t = 150_000)]
    pod_events: usize,
    /// Node events for `cache`.
    #[arg(long, default_value_t = 10_000)]
    node_events: usize,
    /// `e2e`: gangs to create.
    #[arg(long, default_value_t = 1000)]
    gangs: usize,
    /// `e2e`: one-GPU pods per gang.
    #[arg(long, default_value_t = 8)]
    gang_size: usize,
    /// Existing pods, bound and Running: `cold-start` (default 140000), `scale` (default
    /// 1000000, a tenth in gangs of 8 with PodGroups).
    #[arg(long)]
    pods: Option<usize>,
    /// `e2e`: run against this cluster instead of the in-process API stand-in (objects go to
    /// a namespace and nodes of their own, deleted afterwards).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// `e2e`: client-side QPS limit of the runtime's writes and of the raw binder (0: none).
    #[arg(long, default_value_t = 1000.0)]
    kube_api_qps: f64,
    /// `e2e`: its burst.
    #[arg(long, default_value_t = 2000)]
    kube_api_burst: u32,
    /// `e2e`: binds in flight (default: the config's `bindConcurrency`, 64).
    #[arg(long)]
    bind_concurrency: Option<usize>,
    /// `e2e`: create the gangs before the scheduler starts, and time from its caches synced.
    #[arg(long)]
    backlog: bool,
    /// `e2e`: `podScheduledEvents` of the scheduler's config.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pod_scheduled_events: bool,
    /// `session`: run only this figure (the others take minutes on a big cluster).
    #[arg(long)]
    only: Option<Figure>,
    /// `replay`: jobs in the synthetic timeline trace (on `--nodes`, default 4000).
    #[arg(long, default_value_t = 100_000)]
    jobs: usize,
    /// `replay`: the directory of Alibaba's cluster-trace-gpu-v2023 CSVs (default:
    /// $CALDERA_OPENB_DIR); without it the inflation figure is left out.
    #[arg(long, value_name = "DIR")]
    openb_dir: Option<PathBuf>,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs the benchmark and prints its figures.
pub fn run(args: BenchArgs) -> CommandResult {
    let nodes = if args.nodes.is_empty() {
        vec![match args.kind {
            Kind::E2e => 1000,
            Kind::Replay => 4000,
            Kind::Scale => 100_000,
            _ => 5000,
        }]
    } else {
        args.nodes.clone()
    };
    if args.config.is_some() && args.kind != Kind::Perf {
        return Err("CONFIG is read by `caldera bench perf` only".into());
    }
    match args.kind {
        Kind::Perf => {
            let config = args
                .config
                .as_deref()
                .ok_or("caldera bench perf needs CONFIG: a performance-config.yaml, or basicscheduling, gangscheduling or tas")?;
            let opts = PerfOptions {
                labels: args.labels.clone(),
                workload: args.workload.clone(),
                runs: args.runs,
            };
            let results = perf::run(Source::of(config), &opts)?;
            print_figure(&results, args.output, perf_table)
        }
        Kind::E2e => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let results = rt.block_on(run_e2e(&args, &nodes))?;
            print_figure(&results, args.output, e2e_table)
        }
        Kind::ColdStart => {
            if args.kubeconfig.is_some() {
                return Err("cold-start runs on the in-process API stand-in only".into());
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let mut results = Vec::new();
            for &n in &nodes {
                let opts = ColdStartOptions {
                    nodes: n,
                    pods: args.pods.unwrap_or(140_000),
                    seed: args.seed,
                    ..ColdStartOptions::default()
                };
                results.push(rt.block_on(cold_start::run(&opts))?);
            }
            print_figure(&results, args.output, cold_start_table)
        }
        Kind::Replay => {
            let dir = args
                .openb_dir
                .clone()
                .or_else(|| std::env::var_os("CALDERA_OPENB_DIR").map(PathBuf::from));
            let mut results = Vec::new();
            for &n in &nodes {
                results.push(caldera_bench::replay::run(
                    args.jobs,
                    n,
                    args.seed,
                    dir.as_deref(),
                )?);
            }
            print_figure(&results, args.output, replay_table)
        }
        Kind::Scale => {
            let results: Vec<ScaleResult> = nodes
                .iter()
                .map(|&n| {
                    scale::run(&ScaleOptions {
                        nodes: n,
                        pods: args.pods.unwrap_or(1_000_000),
                        pending: args.pending_pods.unwrap_or(10_000),
                        queues: args.queues,
                        seed: args.seed,
                    })
                })
                .collect();
            print_figure(&results, args.output, scale_table)
        }
        Kind::Cache => {
            let r = caldera_bench::cache::run(args.pod_events, args.node_events, args.seed);
            print_figure(&[r], args.output, cache_table)
        }
        Kind::Session if args.only == Some(Figure::Topology) => {
            let results: Vec<session::TopologyResult> = nodes
                .iter()
                .map(|&n| session::topology(n, args.seed))
                .collect();
            print_figure(&results, args.output, topology_table)
        }
        Kind::Session if args.only == Some(Figure::Queues) => {
            let results: Vec<session::QueuesResult> = nodes
                .iter()
                .map(|&n| {
                    session::queues(
                        n,
                        args.running_pods,
                        args.pending_pods.unwrap_or(50_000),
                        args.seed,
                    )
                })
                .collect();
            print_figure(&results, args.output, queues_table)
        }
        Kind::Session if args.only == Some(Figure::Dra) => {
            let results: Vec<session::DraResult> =
                nodes.iter().map(|&n| session::dra(n, args.seed)).collect();
            print_figure(&results, args.output, dra_table)
        }
        Kind::Session => {
            let mut results: Vec<SessionResult> = Vec::new();
            for &n in &nodes {
                results.push(session::run(
                    n,
                    args.running_pods,
                    args.pending_pods.unwrap_or(50_000),
                    args.backlog_gangs,
                    args.seed,
                ));
            }
            print_figure(&results, args.output, session_table)
        }
    }
}

async fn run_e2e(
    args: &BenchArgs,
    nodes: &[usize],
) -> Result<Vec<E2eResult>, Box<dyn std::error::Error>> {
    let mut results = Vec::new();
    for &n in nodes {
        let opts = E2eOptions {
            nodes: n,
            gangs: args.gangs,
            gang_size: args.gang_size,
            bind_concurrency: args.bind_concurrency,
            kube_api_qps: args.kube_api_qps,
            kube_api_burst: args.kube_api_burst,
            backlog: args.backlog,
            pod_scheduled_events: args.pod_scheduled_events,
            ..E2eOptions::default()
        };
        let result = match &args.kubeconfig {
            None => e2e::run_stand_in(&opts).await?,
            Some(path) => {
                let backend = Backend::cluster(kube_config(path).await?)?;
                e2e::run(&opts, &backend).await?
            }
        };
        for e in &result.cleanup_errors {
            eprintln!("caldera: cleanup: {e}");
        }
        results.push(result);
    }
    Ok(results)
}

/// The client configuration of a kubeconfig file.
async fn kube_config(path: &PathBuf) -> Result<kube::Config, Box<dyn std::error::Error>> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("reading kubeconfig {}: {e}", path.display()))?;
    Ok(
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?,
    )
}

/// Prints a figure's results to stdout: a JSON array, or the table `table` writes.
fn print_figure<T: serde::Serialize>(
    results: &[T],
    format: Format,
    table: fn(&mut dyn Write, &[T]) -> CommandResult,
) -> CommandResult {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(results)?)?,
        Format::Table => table(&mut out, results)?,
    }
    Ok(())
}

fn replay_table(
    out: &mut dyn Write,
    results: &[caldera_bench::replay::ReplayResult],
) -> CommandResult {
    for r in results {
        writeln!(
            out,
            "timeline: {} jobs on {} nodes: {:.1}s ({} sessions, {:.2} ms each), GPU allocation {}",
            r.jobs,
            r.nodes,
            r.replay_timeline_seconds,
            r.timeline_sessions,
            r.timeline_ms_per_session,
            r.timeline_gpu_allocation_ratio
                .map_or("-".into(), |a| format!("{:.1}%", a * 100.0))
        )?;
        match (&r.openb_trace, r.replay_inflation_seconds) {
            (Some(t), Some(s)) => writeln!(
                out,
                "inflation 130%: {t}: {s:.1}s ({} pods, {} sessions)",
                r.inflation_pods.unwrap_or(0),
                r.inflation_sessions.unwrap_or(0)
            )?,
            _ => writeln!(
                out,
                "inflation 130%: skipped (give --openb-dir or CALDERA_OPENB_DIR)"
            )?,
        }
    }
    Ok(())
}

fn scale_table(out: &mut dyn Write, results: &[ScaleResult]) -> CommandResult {
    for r in results {
        writeln!(
            out,
            "{} nodes, {} pods bound ({} in {} gangs), {} pending in {} gangs, {} queues",
            r.nodes,
            r.pods,
            r.gang_pods,
            r.podgroups - r.pending_gangs,
            r.pending_pods,
            r.pending_gangs,
            r.queues
        )?;
        writeln!(
            out,
            "  memory: {:.0} bytes/node ({:.0} index), {:.0} bytes/pod ({:.0} index), peak RSS {} MiB",
            r.bytes_per_node,
            r.index_bytes_per_node,
            r.bytes_per_pod,
            r.index_bytes_per_pod,
            r.peak_rss_bytes >> 20
        )?;
        writeln!(
            out,
            "  index fill {:.2}s, snapshot {:.3}s, session {:.3}s ({} placed, {:.0}/s), steady session {:.3}s (snapshot {:.3}s)",
            r.index_seconds,
            r.snapshot_seconds,
            r.session_seconds,
            r.placements,
            r.placements_per_second,
            r.steady_session_seconds,
            r.steady_snapshot_seconds
        )?;
    }
    Ok(())
}

fn cache_table(
    out: &mut dyn Write,
    results: &[caldera_bench::cache::CacheResult],
) -> CommandResult {
    writeln!(
        out,
        "{:>10} {:>10} {:>14} {:>14} {:>12} {:>10}",
        "pod-events", "node-events", "pod-events/s", "node-events/s", "bytes/pod", "snapshot"
    )?;
    for r in results {
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
    Ok(())
}

fn session_table(out: &mut dyn Write, results: &[SessionResult]) -> CommandResult {
    writeln!(
        out,
        "{:>7} {:>8} {:>8} {:>10} {:>10} {:>10} {:>12} {:>14} {:>12} {:>12} {:>8} {:>12} {:>12} {:>9}",
        "nodes",
        "running",
        "pending",
        "snapshot",
        "session",
        "placed",
        "placed/s",
        "constrained/s",
        "backlog",
        "preempt",
        "victims",
        "topology/s",
        "untopo/s",
        "peakRSS"
    )?;
    for r in results {
        writeln!(
            out,
            "{:>7} {:>8} {:>8} {:>9.3}s {:>9.3}s {:>10} {:>12.0} {:>14.0} {:>11.3}s {:>11.3}s {:>8} {:>12.0} {:>12.0} {:>8}M",
            r.nodes,
            r.running_pods,
            r.pending_pods,
            r.snapshot_seconds,
            r.session_seconds,
            r.placements,
            r.placements_per_second,
            r.constrained_placements_per_second,
            r.backlog_session_seconds,
            r.preempt_session_seconds,
            r.preempt_victims,
            r.topology_placements_per_second,
            r.topology_unconstrained_placements_per_second,
            r.peak_rss_bytes >> 20
        )?;
    }
    for r in results {
        writeln!(
            out,
            "{} nodes, {} fragmented one-node gangs: consolidate_session_seconds {:.3}s ({} pods moved, {} gangs served)",
            r.nodes,
            session::CONSOLIDATORS.min(r.nodes / 2),
            r.consolidate_session_seconds,
            r.consolidate_moves,
            r.consolidate_served
        )?;
    }
    let dra: Vec<session::DraResult> = results.iter().map(SessionResult::dra).collect();
    dra_table(out, &dra)?;
    for r in results {
        writeln!(
            out,
            "{} nodes, {} leaf queues: flat {:.3}s ({} placed), 3-level tree {:.3}s ({} placed): ×{:.2}",
            r.nodes,
            session::TREE_LEAVES,
            r.flat_queues_session_seconds,
            r.flat_queues_placements,
            r.hierarchical_session_seconds,
            r.hierarchical_placements,
            r.hierarchical_ratio
        )?;
        writeln!(
            out,
            "{} nodes, {} weighted queues with usage: proportion {:.3}s ({} placed), with fairshare {:.3}s ({} placed): ×{:.2}",
            r.nodes,
            session::TREE_LEAVES,
            r.proportion_queues_session_seconds,
            r.proportion_queues_placements,
            r.fairshare_queues_session_seconds,
            r.fairshare_queues_placements,
            r.fairshare_ratio
        )?;
    }
    if results.len() > 1 {
        let first = &results[0];
        for r in &results[1..] {
            write_growth(out, "session time", first, r, |r| r.session_seconds)?;
            write_growth(out, "preempt_session_seconds", first, r, |r| {
                r.preempt_session_seconds
            })?;
        }
    }
    Ok(())
}

/// How a time grew from the first run to a larger one: `what a→b nodes: ×t for ×n nodes`.
fn write_growth(
    out: &mut dyn Write,
    what: &str,
    first: &SessionResult,
    r: &SessionResult,
    seconds: fn(&SessionResult) -> f64,
) -> std::io::Result<()> {
    writeln!(
        out,
        "{what} {}→{} nodes: ×{:.2} for ×{:.1} nodes",
        first.nodes,
        r.nodes,
        seconds(r) / seconds(first).max(1e-9),
        r.nodes as f64 / first.nodes.max(1) as f64
    )
}

fn e2e_table(out: &mut dyn Write, results: &[E2eResult]) -> CommandResult {
    writeln!(
        out,
        "{:>8} {:>6} {:>7} {:>10} {:>10} {:>10} {:>6} {:>11} {:>11} {:>9}",
        "target",
        "nodes",
        "pods",
        "create",
        "bind/s",
        "raw bind/s",
        "ratio",
        "first→last",
        "writes/pod",
        "sessions"
    )?;
    for r in results {
        writeln!(
            out,
            "{:>8} {:>6} {:>7} {:>9.3}s {:>10.0} {:>10.0} {:>6.2} {:>10.3}s {:>11.2} {:>9}",
            r.target,
            r.nodes,
            r.pods,
            r.creation_seconds,
            r.bind_rate,
            r.raw_bind_rate,
            r.ratio,
            r.first_create_to_last_bind_seconds,
            r.api_writes_per_bound_pod,
            r.sessions
        )?;
    }
    for r in results {
        let writes: Vec<String> = r.writes.iter().map(|(k, n)| format!("{k} {n}")).collect();
        writeln!(
            out,
            "{} nodes: writes by kind ({} counts): {}",
            r.nodes,
            r.counts_source,
            writes.join(", ")
        )?;
        writeln!(
            out,
            "{} nodes: bind window {:.3} writes per bound pod ({} not binds, {} under the token \
             share); last bind → events done {:.3}s; all written {:.3}s; events {} written for \
             {} ({} folded, {} dropped); {} status writes coalesced",
            r.nodes,
            r.bind_window_writes_per_bound_pod,
            r.bind_window_other_writes,
            r.share_writes,
            r.events_done_seconds,
            r.all_written_seconds,
            r.events_written,
            r.events_represented,
            r.events_folded,
            r.events_dropped,
            r.status_coalesced
        )?;
        if let (Some(synced), Some(first)) =
            (r.start_to_synced_seconds, r.synced_to_first_bind_seconds)
        {
            writeln!(
                out,
                "{} nodes: backlog: start → caches synced {synced:.3}s; synced → first bind \
                 {first:.3}s (target ≤ 0.5s: {})",
                r.nodes,
                met(first <= 0.5)
            )?;
        }
        for m in &r.missing_writes {
            writeln!(out, "{} nodes: missing: {m}", r.nodes)?;
        }
        writeln!(
            out,
            "{} nodes: targets: ratio ≥ 0.9 {}; ≤ 1.1 writes per bound pod in the bind window \
             {}; every event and status of the plans present {} (gangs of {}, QPS {}, burst {}, \
             {} binds in flight at most, leader election off)",
            r.nodes,
            met(r.ratio >= 0.9),
            met(r.bind_window_writes_per_bound_pod <= 1.1),
            met(r.plan_writes_present),
            r.gang_size,
            r.kube_api_qps,
            r.kube_api_burst,
            r.bind_concurrency
        )?;
    }
    Ok(())
}

fn topology_table(out: &mut dyn Write, results: &[session::TopologyResult]) -> CommandResult {
    writeln!(
        out,
        "{:>7} {:>10} {:>10} {:>12} {:>10} {:>10} {:>12} {:>9}",
        "nodes", "placed", "session", "topology/s", "placed", "session", "untopo/s", "peakRSS"
    )?;
    for r in results {
        writeln!(
            out,
            "{:>7} {:>10} {:>9.3}s {:>12.0} {:>10} {:>9.3}s {:>12.0} {:>8}M",
            r.nodes,
            r.topology_placements,
            r.topology_session_seconds,
            r.topology_placements_per_second,
            r.topology_unconstrained_placements,
            r.topology_unconstrained_session_seconds,
            r.topology_unconstrained_placements_per_second,
            r.peak_rss_bytes >> 20
        )?;
    }
    Ok(())
}

fn dra_table(out: &mut dyn Write, results: &[session::DraResult]) -> CommandResult {
    for r in results {
        writeln!(
            out,
            "{} nodes × 8 DRA GPUs, {} members with one-GPU claims (CEL): {} placed in {:.3}s, dra_placements_per_second {:.0}",
            r.nodes,
            r.nodes * 4,
            r.dra_placements,
            r.dra_session_seconds,
            r.dra_placements_per_second,
        )?;
        writeln!(
            out,
            "{} nodes × 8 shared DRA GPUs, {} members (half a 0.25 or 0.5 share, half a whole GPU) in gangs of 1–16: {} placed in {:.3}s, shared_gpu_placements_per_second {:.0}",
            r.nodes,
            r.nodes * 8,
            r.shared_gpu_placements,
            r.shared_gpu_session_seconds,
            r.shared_gpu_placements_per_second,
        )?;
    }
    Ok(())
}

fn queues_table(out: &mut dyn Write, results: &[session::QueuesResult]) -> CommandResult {
    writeln!(
        out,
        "{:>7} {:>12} {:>8} {:>12} {:>8} {:>12} {:>8} {:>10} {:>10} {:>12} {:>12} {:>10}",
        "nodes",
        "10 queues",
        "placed",
        "1000 flat",
        "placed",
        "1000 tree",
        "placed",
        "flat/10q",
        "tree/flat",
        "1000 prop",
        "+fairshare",
        "fair/prop"
    )?;
    for r in results {
        writeln!(
            out,
            "{:>7} {:>11.3}s {:>8} {:>11.3}s {:>8} {:>11.3}s {:>8} {:>9.2}× {:>9.2}× {:>11.3}s {:>11.3}s {:>9.2}×",
            r.nodes,
            r.session_seconds,
            r.placements,
            r.flat_queues_session_seconds,
            r.flat_queues_placements,
            r.hierarchical_session_seconds,
            r.hierarchical_placements,
            r.queues_ratio,
            r.hierarchical_session_seconds / r.flat_queues_session_seconds.max(1e-9),
            r.proportion_queues_session_seconds,
            r.fairshare_queues_session_seconds,
            r.fairshare_ratio
        )?;
    }
    Ok(())
}

fn perf_table(out: &mut dyn Write, results: &[WorkloadResult]) -> CommandResult {
    writeln!(
        out,
        "{:<46} {:>6} {:>6} {:>6} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}",
        "workload",
        "nodes",
        "pods",
        "gangs",
        "all-bound",
        "avg pods/s",
        "p50",
        "p90",
        "p95",
        "p99",
        "seconds",
        "session/s"
    )?;
    for r in results {
        writeln!(
            out,
            "{:<46} {:>6} {:>6} {:>6} {:>9} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>10.0} {:>7.3}s {:>9.0}",
            format!("{}/{}", r.test_case, r.workload),
            r.nodes,
            r.pods,
            r.gangs,
            if r.all_bound { "yes" } else { "NO" },
            r.throughput_average,
            r.throughput_p50,
            r.throughput_p90,
            r.throughput_p95,
            r.throughput_p99,
            r.seconds,
            r.session_pods_per_second
        )?;
    }
    if let Some(r) = results.first() {
        writeln!(
            out,
            "SchedulingThroughput: one sample per session that bound pods (pods bound / the session's snapshot, \
             session and binds into the in-memory store), {} run(s) per workload pooled; average = mean of the \
             samples, pN = nearest rank, as scheduler_perf computes them over its 1 s samples. seconds: per run. \
             session/s: pods / Caldera's session time alone. docs/scale.md",
            r.runs
        )?;
    }
    for r in results.iter().filter(|r| !r.all_bound) {
        writeln!(
            out,
            "{}/{}: {} pods unbound, {} gangs bound in part, {} gangs across topology domains",
            r.test_case, r.workload, r.unbound_pods, r.partial_gangs, r.topology_violations
        )?;
    }
    Ok(())
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "missed"
    }
}

fn cold_start_table(out: &mut dyn Write, results: &[ColdStartResult]) -> CommandResult {
    writeln!(
        out,
        "{:>7} {:>8} {:>10} {:>10} {:>14} {:>11} {:>10} {:>6} {:>9}",
        "nodes",
        "pods",
        "podgroups",
        "synced",
        "first session",
        "cold start",
        "bare list",
        "ratio",
        "setup"
    )?;
    for r in results {
        writeln!(
            out,
            "{:>7} {:>8} {:>10} {:>9.3}s {:>13.3}s {:>10.3}s {:>9.3}s {:>6.2} {:>8.1}s",
            r.nodes,
            r.pods,
            r.podgroups,
            r.caches_synced_seconds,
            r.first_session_seconds,
            r.cold_start_seconds,
            r.bare_list_seconds,
            r.cold_start_ratio,
            r.setup_seconds
        )?;
    }
    Ok(())
}
