//! `caldera record`: watches a live cluster's pods and PodGroups (list and watch only, as the
//! shipped ClusterRole grants) and appends each job to a trace in Caldera's format once all
//! its members have finished, so `caldera replay` can run last week under another config.
//! The bookkeeping is `caldera_replay::record`; here are the watches and the files.

use crate::CommandResult;
use caldera_api::PodGroup;
use caldera_replay::record::{self, Recorder};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `caldera record`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Example:
  caldera record --kubeconfig ~/.kube/config --out week.csv --nodes-out nodes.csv
  caldera replay week.csv --nodes nodes.csv --config candidate.yaml")]
pub struct RecordArgs {
    /// Path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, or in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The trace to write (Caldera's job CSV); a job is appended once all its members ended.
    #[arg(long, value_name = "TRACE.csv")]
    pub out: PathBuf,
    /// Also write the cluster's nodes as a nodes CSV (listed at start).
    #[arg(long, value_name = "NODES.csv")]
    pub nodes_out: Option<PathBuf>,
    /// Pods of these schedulers are recorded (repeatable).
    #[arg(long = "scheduler-name", default_values_t = ["caldera".to_string(), "volcano".to_string()])]
    pub scheduler_names: Vec<String>,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    caldera_config::parse_duration(s).map_err(|e| e.to_string())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

enum Seen {
    Pod(Pod),
    PodGone(Pod),
    Group(PodGroup),
    Failed(String),
}

/// Runs `caldera record`.
pub fn run(args: RecordArgs) -> CommandResult {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(record(args))
}

async fn record(args: RecordArgs) -> CommandResult {
    let client = crate::run::client(args.kubeconfig.as_ref()).await?;
    // Creation timestamps have whole seconds: a job created in the second the recording
    // started arrived during it.
    let start = now_ms() / 1000 * 1000;
    let mut out = std::fs::File::create(&args.out)
        .map_err(|e| format!("{}: cannot write: {e}", args.out.display()))?;
    out.write_all(format!("{}\n", caldera_replay::trace::JOB_COLUMNS.join(",")).as_bytes())?;
    if let Some(path) = &args.nodes_out {
        let nodes = Api::<Node>::all(client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| format!("listing nodes: {e}"))?;
        let specs: Vec<_> = nodes.items.iter().filter_map(record::node_spec).collect();
        std::fs::write(path, record::write_nodes(&specs))
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    let pods = watcher::watcher(Api::<Pod>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .map(|e| match e {
            Ok(Event::Apply(p) | Event::InitApply(p)) => Some(Seen::Pod(p)),
            Ok(Event::Delete(p)) => Some(Seen::PodGone(p)),
            Ok(_) => None,
            Err(e) => Some(Seen::Failed(format!("pods: {e}"))),
        });
    let groups = watcher::watcher(Api::<PodGroup>::all(client), watcher::Config::default())
        .default_backoff()
        .map(|e| match e {
            Ok(Event::Apply(g) | Event::InitApply(g)) => Some(Seen::Group(g)),
            Ok(_) => None,
            Err(e) => Some(Seen::Failed(format!("podgroups: {e}"))),
        });
    let events = futures::stream::select(pods, groups).filter_map(|e| async move { e });
    futures::pin_mut!(events);
    let mut recorder = Recorder::new(start, &args.scheduler_names);
    let stop = async {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => {
                let _ = crate::run::wait_for_signal(None).await;
            }
        }
    };
    tokio::pin!(stop);
    let mut written = 0usize;
    loop {
        let seen = tokio::select! {
            _ = &mut stop => break,
            seen = events.next() => seen,
        };
        let Some(seen) = seen else { break };
        match seen {
            Seen::Pod(p) => recorder.pod(&p, now_ms()),
            Seen::PodGone(p) => recorder.pod_gone(&p, now_ms()),
            Seen::Group(g) => recorder.podgroup(&g),
            Seen::Failed(e) => eprintln!("caldera: watch failed, retrying: {e}"),
        }
        let done = recorder.take_finished();
        if !done.is_empty() {
            for job in &done {
                out.write_all(format!("{}\n", caldera_replay::trace::job_line(job)).as_bytes())?;
            }
            out.flush()?;
            written += done.len();
        }
    }
    eprintln!(
        "caldera: recorded {written} jobs to {}; {} still running (not written), {} started before the recording (left out)",
        args.out.display(),
        recorder.unfinished(),
        recorder.skipped.len()
    );
    Ok(())
}
