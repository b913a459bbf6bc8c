//! `caldera run`: the scheduler against a real API server, until SIGTERM or SIGINT.

use crate::CommandResult;
use caldera_runtime::{ConfigSource, LeaderElection, Options, Runtime};
use clap::{ArgAction, Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Arguments of `caldera run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig file. Default: `$KUBECONFIG`, `~/.kube/config`, or the in-cluster config.
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Scheduler config file (watched: valid changes take effect at the next session).
    /// Default: the shipped config.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A `schedulerName` to serve (repeatable); overrides the config's `schedulerNames`.
    #[arg(long = "scheduler-name", value_name = "NAME")]
    pub scheduler_names: Vec<String>,
    /// Elect a leader through the Lease `caldera` (`--leader-elect=false` to turn off).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub leader_elect: bool,
    /// Namespace of the Lease. Default: `$POD_NAMESPACE`, else `caldera-system`.
    #[arg(long, value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// Where to serve /healthz, /readyz and /metrics.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8080")]
    pub metrics_addr: SocketAddr,
    /// Client-side limit of API requests per second for writes (0: none).
    #[arg(long, value_name = "QPS", default_value_t = 1000.0)]
    pub kube_api_qps: f64,
    /// Burst above `--kube-api-qps`.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub kube_api_burst: u32,
    /// Binds in flight at once; overrides the config's `bindConcurrency` (default 64).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub bind_concurrency: Option<u64>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// The filter when `RUST_LOG` is unset: `info`, but kube-runtime's watcher only at `error`. The
/// runtime's watch loop reports every failed list or watch itself (a refusal once, naming the
/// rule; other failures with their back-off), so the watcher's own warning per retry would only
/// repeat it (a refused optional kind would log it every retry for as long as it is refused).
pub const DEFAULT_LOG_FILTER: &str = "info,kube_runtime::watcher=error";

/// Sets up `tracing` (filter from `RUST_LOG`, default [`DEFAULT_LOG_FILTER`]).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// The API config from `--kubeconfig`, or inferred (`$KUBECONFIG`, `~/.kube/config`,
/// in-cluster).
pub async fn kube_config(
    kubeconfig: Option<&PathBuf>,
) -> Result<kube::Config, Box<dyn std::error::Error>> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("reading kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("finding a cluster (use --kubeconfig): {e}"))?,
    })
}

/// A kube client for one-shot reads (`explain`, `snapshot`), with kube's default retries.
pub async fn client(
    kubeconfig: Option<&PathBuf>,
) -> Result<kube::Client, Box<dyn std::error::Error>> {
    let config = kube_config(kubeconfig).await?;
    Ok(kube::Client::try_from(config).map_err(|e| format!("building the API client: {e}"))?)
}

/// Arguments of `caldera gate`: those of `caldera run`, plus the release timeout.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// How long kube-scheduler may take to bind a released member before Caldera reports it
    /// (a Warning event on the pod and its PodGroup, the PodGroup condition `Unschedulable`
    /// reason `NotBoundAfterRelease` until bound, and `caldera_released_unbound`).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration)]
    pub release_timeout: std::time::Duration,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    caldera_config::parse_duration(s).map_err(|e| e.to_string())
}

/// The Lease gate mode elects its leader on (`caldera run` uses `caldera`), so the two modes
/// can run side by side, each serving its own pods.
pub const GATE_LEASE: &str = "caldera-gate";

/// Runs `caldera run`.
pub fn run(args: RunArgs) -> CommandResult {
    serve(args, None)
}

/// Runs `caldera gate`: the same process as `caldera run`, releasing gated gangs to
/// kube-scheduler instead of binding.
pub fn gate(args: GateArgs) -> CommandResult {
    serve(
        args.run,
        Some(caldera_runtime::GateOptions {
            release_timeout: args.release_timeout,
        }),
    )
}

fn serve(args: RunArgs, gate: Option<caldera_runtime::GateOptions>) -> CommandResult {
    init_logging(args.log_format);
    // An invalid config is reported before anything else, with its line and key.
    let config = match &args.config {
        Some(path) => {
            caldera_config::load(path)?;
            ConfigSource::File(path.clone())
        }
        None => ConfigSource::Fixed(caldera_config::SchedulerConfig::default()),
    };
    let options = Options {
        config,
        scheduler_names: args.scheduler_names.clone(),
        leader_election: args.leader_elect.then(|| {
            let mut le = LeaderElection::new(
                args.lease_namespace
                    .clone()
                    .unwrap_or_else(caldera_runtime::default_lease_namespace),
            );
            if gate.is_some() {
                le.name = GATE_LEASE.to_string();
            }
            le
        }),
        metrics_addr: Some(args.metrics_addr),
        kube_api_qps: args.kube_api_qps,
        kube_api_burst: args.kube_api_burst,
        bind_concurrency: args.bind_concurrency.map(|n| n as usize),
        gate,
        ..Options::default()
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        // The runtime retries its own requests; kube's retries would hide a refused eviction.
        let config = kube_config(args.kubeconfig.as_ref()).await?;
        let client =
            caldera_runtime::client(config).map_err(|e| format!("building the API client: {e}"))?;
        let handle = Runtime::start(options, client).await?;
        let outcome = tokio::select! {
            signal = wait_for_signal(Some(&handle)) => {
                signal?;
                tracing::info!("signal received; shutting down");
                Ok(())
            }
            why = handle.failure() => {
                tracing::error!("{why}");
                Err(why.to_string().into())
            }
        };
        handle.shutdown().await;
        outcome
    })
}

/// Waits for SIGTERM or SIGINT. On SIGHUP, asks every watch of `handle` the API server
/// refused (403) again at once (after an operator fixed the RBAC), and goes on waiting.
pub(crate) async fn wait_for_signal(
    handle: Option<&caldera_runtime::RunningHandle>,
) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut hup = signal(SignalKind::hangup())?;
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => return r,
                _ = term.recv() => return Ok(()),
                _ = hup.recv() => {
                    if let Some(handle) = handle {
                        tracing::info!("SIGHUP: asking the API server again for every refused kind");
                        handle.retry_refused();
                    }
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = handle;
        tokio::signal::ctrl_c().await
    }
}
