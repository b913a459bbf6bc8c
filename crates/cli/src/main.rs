//! The `caldera` binary: a gang scheduler for Kubernetes that speaks Volcano's API.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

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
enum Command {}

fn main() {
    let cli = Cli::parse();
    match cli.command {}
}
