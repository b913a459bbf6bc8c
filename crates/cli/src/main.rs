//! The `caldera` binary: a gang scheduler for Kubernetes that speaks Volcano's API.
#![forbid(unsafe_code)]

use std::error::Error;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod explain;
mod record;
mod replay;
mod run;
mod simulate;
mod snapshot;

#[derive(Parser)]
#[command(
    name = "caldera",
    version,
    about = "Gang/batch scheduler for Kubernetes, Volcano-compatible"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the PodGroup and Queue CustomResourceDefinitions as YAML (what `crds/` holds).
    Crd,
    /// Explain why a gang is (or is not) placed, node by node.
    Explain(explain::ExplainArgs),
    /// Run a benchmark on a synthetic cluster and print its figures.
    Bench(bench::BenchArgs),
    /// Run the scheduler against an in-memory cluster with a virtual clock: a scenario file,
    /// plain manifests (-f), or with no arguments a bundled example.
    Simulate(simulate::SimulateArgs),
    /// Run the scheduler against a Kubernetes API server (until SIGTERM/SIGINT).
    Run(run::RunArgs),
    /// Gate mode, beside kube-scheduler: release gangs held by the gate
    /// scheduling.caldera.sh/gang only when they fit whole, each member pinned to its node
    /// (docs/gate-mode.md). Same config, flags, leader election and endpoints as `run`.
    Gate(run::GateArgs),
    /// Watch a live cluster's pods and PodGroups (read-only) and write the jobs that finish as
    /// a trace that `caldera replay` reads.
    Record(record::RecordArgs),
    /// Replay a job trace through the real scheduler on the simulator and print the figures
    /// operators judge a scheduler by (docs/replay.md).
    Replay(replay::ReplayArgs),
    /// Write the live cluster as manifests that `simulate -f` and `explain -f` accept.
    Snapshot(snapshot::SnapshotArgs),
}

/// What a subcommand returns; `main` prints the error and exits non-zero.
type CommandResult = Result<(), Box<dyn Error>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crd => crd(),
        Command::Bench(args) => bench::run(args),
        Command::Explain(args) => explain::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Run(args) => run::run(args),
        Command::Gate(args) => run::gate(args),
        Command::Snapshot(args) => snapshot::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Record(args) => record::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("caldera: {err}");
            ExitCode::FAILURE
        }
    }
}

/// `caldera crd`: print the CRDs to stdout.
fn crd() -> CommandResult {
    let yaml = caldera_api::crds_yaml()?;
    // `write_all` rather than `print!`, so a closed pipe (`caldera crd | head`) is an error, not a panic.
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(())
}
