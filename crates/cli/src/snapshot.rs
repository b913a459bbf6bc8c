//! `caldera snapshot`: the live cluster as manifests that `caldera simulate -f` and
//! `caldera explain -f` read back (what-if runs with another config).

use crate::CommandResult;
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `caldera snapshot`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  caldera snapshot -o cluster.yaml && caldera simulate -f cluster.yaml --config other.yaml
  caldera snapshot | caldera explain default/training-job-tp8 -f -")]
pub struct SnapshotArgs {
    /// Kubeconfig file. Default: `$KUBECONFIG`, `~/.kube/config`, or the in-cluster config.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Write to FILE instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Runs `caldera snapshot`.
pub fn run(args: SnapshotArgs) -> CommandResult {
    crate::run::init_logging(crate::run::LogFormat::Text);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let yaml = rt.block_on(async {
        let client = crate::run::client(args.kubeconfig.as_ref()).await?;
        let yaml = caldera_runtime::manifests::cluster_manifests(&client).await?;
        Ok::<_, Box<dyn std::error::Error>>(yaml)
    })?;
    match &args.output {
        Some(path) => {
            std::fs::write(path, yaml).map_err(|e| format!("writing {}: {e}", path.display()))?
        }
        None => std::io::stdout().lock().write_all(yaml.as_bytes())?,
    }
    Ok(())
}
