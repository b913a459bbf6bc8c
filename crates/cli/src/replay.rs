//! `caldera replay TRACE`: a job trace through the real scheduler on the simulator, with the
//! figures (docs/replay.md): a table, `-o json`, `--plot`, `--jobs-out`, `--compare`.

use crate::CommandResult;
use caldera_config::SchedulerConfig;
use caldera_replay::{cluster, inflation, input, metrics, report, timeline};
use caldera_sim::manifest::{self, Object};
use clap::{Args, ValueEnum};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A table for people.
    Text,
    /// One JSON object (deterministic but for `wall_seconds`).
    Json,
}

/// Experiment mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Jobs arrive at `submit` and run `duration`; the clock jumps between events.
    Timeline,
    /// "Beware of Fragmentation": pods drawn until `--arrival` × the GPUs, none ends.
    Inflation,
}

/// Arguments of `caldera replay`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  caldera replay examples/replay/knavigator-gang.csv --nodes examples/replay/knavigator-nodes.csv
  caldera replay trace.csv -f cluster.yaml --queues queues.csv -o json --plot out.svg
  caldera replay $CALDERA_OPENB_DIR/openb_pod_list_default.csv --mode inflation --seed 42
  caldera replay trace.csv --nodes nodes.csv --compare my-config.yaml")]
pub struct ReplayArgs {
    /// The trace: Caldera's job CSV, or an Alibaba openb_pod_list_*.csv (`-` reads stdin).
    pub trace: String,
    /// Nodes CSV (columns node, cpu, memory, gpu; optional gpu_model, pods and label columns) or
    /// an openb node list.
    /// Default for an openb pod list: openb_node_list_gpu_node.csv beside it.
    #[arg(long, value_name = "FILE")]
    pub nodes: Option<PathBuf>,
    /// Manifests (Nodes, Queues, PriorityClasses, ...), as `caldera simulate -f` reads them.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Queues CSV (columns queue, weight; optional parent, capability_gpu).
    #[arg(long, value_name = "FILE")]
    pub queues: Option<PathBuf>,
    /// The scheduler config. Default: the shipped one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Replay the same trace under this second config too, side by side.
    #[arg(long, value_name = "CONFIG_B")]
    pub compare: Option<PathBuf>,
    /// Seed of every random choice (inflation: the order and the draws).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Experiment mode.
    #[arg(long, value_enum, default_value_t = Mode::Timeline)]
    pub mode: Mode,
    /// Inflation: requested GPUs ÷ the cluster's GPUs to reach (1.3 = 130%).
    #[arg(long, default_value_t = 1.3)]
    pub arrival: f64,
    /// Fair-share window (Go duration: 1h, 30m).
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub fair_window: Duration,
    /// Timeline: stop the replay at this time of the trace (Go duration: 168h), cutting what
    /// runs then and replaying no later arrival; default: run until every job has ended.
    #[arg(long, value_parser = parse_duration)]
    pub until: Option<Duration>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Draw the figures into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Write one line per job (timeline) to this CSV file.
    #[arg(long, value_name = "FILE.csv")]
    pub jobs_out: Option<PathBuf>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    caldera_config::parse_duration(s).map_err(|e| e.to_string())
}

fn read(path: &str) -> Result<String, Box<dyn std::error::Error>> {
    crate::simulate::read(path)
}

/// The cluster objects from `--nodes`, `-f` and `--queues`.
fn cluster_objects(
    args: &ReplayArgs,
    trace: &str,
) -> Result<Vec<Object>, Box<dyn std::error::Error>> {
    let mut objects = Vec::new();
    let nodes = args.nodes.clone().or_else(|| {
        if args.files.is_empty() {
            let beside = Path::new(trace)
                .parent()?
                .join("openb_node_list_gpu_node.csv");
            beside.exists().then_some(beside)
        } else {
            None
        }
    });
    if let Some(path) = &nodes {
        let file = path.display().to_string();
        for n in input::read_nodes(&read(&file)?, &file)? {
            objects.push(cluster::node_object(&n)?);
        }
    }
    for path in &args.files {
        let file = path.display().to_string();
        let parsed = manifest::parse_stream(&read(&file)?, &file)?;
        for notice in &parsed.notices.messages {
            eprintln!("caldera: {notice}");
        }
        objects.extend(parsed.objects.into_iter().map(|(_, o)| o));
    }
    if let Some(path) = &args.queues {
        let file = path.display().to_string();
        for q in cluster::read_queues(&read(&file)?, &file)? {
            objects.push(cluster::queue_object(&q)?);
        }
    }
    Ok(objects)
}

fn load_config(
    path: Option<&Path>,
) -> Result<(SchedulerConfig, String), Box<dyn std::error::Error>> {
    Ok(match path {
        Some(p) => {
            let config = caldera_config::load(p)?;
            for warning in &config.warnings {
                eprintln!("caldera: {warning}");
            }
            (config, p.display().to_string())
        }
        None => (SchedulerConfig::default(), "shipped".into()),
    })
}

/// One replay's figures, and the timeline record (for `--jobs-out` and plots).
pub struct Replayed {
    /// The figures.
    pub metrics: metrics::Metrics,
    /// Timeline mode's record.
    pub run: Option<caldera_replay::run::Run>,
    /// Inflation mode's record.
    pub inflation: Option<inflation::Inflation>,
}

fn replay_once(
    args: &ReplayArgs,
    inputs: &timeline::Inputs,
    name: &str,
) -> Result<Replayed, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let mut out = match args.mode {
        Mode::Timeline => {
            let until = args
                .until
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let run = timeline::run_until(inputs, timeline::SessionPolicy::Events, until)?;
            let window = i64::try_from(args.fair_window.as_millis()).unwrap_or(i64::MAX);
            Replayed {
                metrics: metrics::timeline(&run, window, name),
                run: Some(run),
                inflation: None,
            }
        }
        Mode::Inflation => {
            let run = inflation::run(inputs, args.arrival, args.seed, inflation::BATCH)?;
            Replayed {
                metrics: metrics::inflation(&run, name),
                run: None,
                inflation: Some(run),
            }
        }
    };
    out.metrics.wall_seconds = (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
    Ok(out)
}

/// Runs `caldera replay`.
pub fn run(args: ReplayArgs) -> CommandResult {
    if args.until.is_some() && args.mode != Mode::Timeline {
        return Err("--until is for --mode timeline (inflation ends when the arrivals do)".into());
    }
    if !(args.arrival > 0.0 && args.arrival.is_finite()) {
        return Err(format!("--arrival {} must be a positive number", args.arrival).into());
    }
    let jobs = input::read_trace(&read(&args.trace)?, &args.trace)?;
    let objects = cluster_objects(&args, &args.trace)?;
    let (config, name) = load_config(args.config.as_deref())?;
    let inputs = timeline::Inputs {
        config,
        objects,
        jobs,
    };
    let first = replay_once(&args, &inputs, &name)?;
    let second = match &args.compare {
        Some(path) => {
            let (config, name) = load_config(Some(path))?;
            let inputs = timeline::Inputs {
                config,
                ..inputs.clone()
            };
            Some(replay_once(&args, &inputs, &name)?)
        }
        None => None,
    };
    if let Some(path) = &args.jobs_out {
        let Some(run) = &first.run else {
            return Err("--jobs-out applies to --mode timeline".into());
        };
        std::fs::write(path, report::jobs_csv(run))
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let svg = caldera_replay::plot::svg(
            &first_view(&first),
            second.as_ref().map(first_view).as_ref(),
        )?;
        std::fs::write(path, svg).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    let text = match (&second, args.output) {
        (None, Output::Text) => report::text(&first.metrics),
        (None, Output::Json) => metrics::to_json(&first.metrics),
        (Some(b), Output::Text) => report::compare_text(&first.metrics, &b.metrics),
        (Some(b), Output::Json) => {
            let c = report::Comparison {
                baseline: &first.metrics,
                compare: &b.metrics,
            };
            serde_json::to_string_pretty(&c)? + "\n"
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    let broken: Vec<&String> = [Some(&first), second.as_ref()]
        .into_iter()
        .flatten()
        .filter_map(|r| r.run.as_ref())
        .flat_map(|r| &r.violations)
        .collect();
    if broken.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "invariants broken: {}",
            broken
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        )
        .into())
    }
}

fn first_view(r: &Replayed) -> caldera_replay::plot::View<'_> {
    caldera_replay::plot::View {
        metrics: &r.metrics,
        run: r.run.as_ref(),
        inflation: r.inflation.as_ref(),
    }
}
