//! `caldera explain NS/PODGROUP -f FILE...`: why a gang is (or is not) placed, node by node,
//! on a cluster given as manifests (for a live cluster: `caldera snapshot | caldera explain
//! NS/PG -f -`).

use crate::CommandResult;
use caldera_config::SchedulerConfig;
use caldera_sim::{manifest, Simulation};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `caldera explain`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  caldera explain default/training-job-tp8 -f cluster.yaml -f jobs.yaml
  caldera snapshot | caldera explain default/training-job-tp8 -f -")]
pub struct ExplainArgs {
    /// The PodGroup, as NAMESPACE/NAME (a pod without a group: NAMESPACE/pod:NAME).
    pub podgroup: String,
    /// Manifests describing the cluster (multi-document YAML; `-` reads stdin). Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "FILE", required = true)]
    pub files: Vec<String>,
    /// The scheduler config. Default: the shipped one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Runs `caldera explain`.
pub fn run(args: ExplainArgs) -> CommandResult {
    if !args.podgroup.contains('/') {
        return Err(format!(
            "expected NAMESPACE/NAME, got {:?} (e.g. default/{})",
            args.podgroup, args.podgroup
        )
        .into());
    }
    let config = match &args.config {
        Some(path) => caldera_config::load(path)?,
        None => SchedulerConfig::default(),
    };
    let mut sim = Simulation::new(&config)?;
    for file in &args.files {
        let text = crate::simulate::read(file)?;
        let manifests = manifest::parse_stream(&text, file)?;
        for notice in &manifests.notices.messages {
            eprintln!("caldera: {notice}");
        }
        for (origin, object) in manifests.objects {
            sim.apply([object])
                .map_err(|e| format!("{origin}: rejected: {e}"))?;
        }
    }
    let scheduler = caldera_plugins::scheduler(&config)?;
    let snapshot = sim.snapshot();
    let Some(explanation) = scheduler.explain(&snapshot, sim.now(), &args.podgroup) else {
        let known: Vec<&str> = snapshot
            .jobs
            .iter()
            .filter(|j| j.has_podgroup())
            .map(|j| &*j.id)
            .take(10)
            .collect();
        return Err(format!(
            "no PodGroup {} in the given manifests (PodGroups: {})",
            args.podgroup,
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )
        .into());
    };
    std::io::stdout()
        .lock()
        .write_all(explanation.to_string().as_bytes())?;
    Ok(())
}
