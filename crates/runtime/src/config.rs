//! The active configuration, and the task that watches the config file: a valid change takes
//! effect at the next session; an invalid one is logged with its line and key, and the last
//! good config stays.

use crate::{Error, Shared};
use caldera_cache::SnapshotOptions;
use caldera_config::SchedulerConfig;
use caldera_session::Scheduler;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// Where the scheduler config comes from.
// Made once at start and read once: the size of a config held inline costs nothing, and
// boxing it would change every caller that names one.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ConfigSource {
    /// A file, read at start and polled for changes.
    File(PathBuf),
    /// A fixed config (tests, or no `--config`: the shipped default).
    Fixed(SchedulerConfig),
}

/// A config in force, with the scheduler built from it.
#[derive(Debug)]
pub(crate) struct Active {
    pub config: SchedulerConfig,
    pub scheduler: Scheduler,
    pub snapshot_options: SnapshotOptions,
    /// Bumped at each reload.
    pub generation: u64,
}

/// Builds the scheduler for `config`; `names` (from `--scheduler-name`) override the config's
/// `schedulerNames` when not empty. In gate mode the names are kube-scheduler's profiles
/// whose gated pods Caldera releases (default `default-scheduler`), never the config's.
pub(crate) fn activate(
    config: SchedulerConfig,
    names: &[String],
    generation: u64,
    gate: bool,
) -> Result<Active, Error> {
    let scheduler = caldera_plugins::scheduler(&config).map_err(Error::Scheduler)?;
    let mut snapshot_options = if gate {
        SnapshotOptions {
            predict: Some(caldera_cache::Predictor(
                caldera_actors::kube_scheduler::predict,
            )),
            ..SnapshotOptions::gate(config.gang_schedule_timeout)
        }
    } else {
        SnapshotOptions {
            scheduler_names: config.scheduler_names.clone(),
            default_gang_timeout: config.gang_schedule_timeout,
            gate: false,
            provisioning: None,
            predict: None,
            auto_group: caldera_cache::workload::AutoGroup::new(
                config.auto_group.enabled,
                config.auto_group.namespaces.as_deref(),
            ),
        }
    };
    if !names.is_empty() {
        snapshot_options.scheduler_names = names.to_vec();
    }
    // Used only while the API server serves ProvisioningRequests (see `capacity`).
    snapshot_options.provisioning = config.autoscaler.as_ref().map(|a| a.policy());
    Ok(Active {
        snapshot_options,
        scheduler,
        config,
        generation,
    })
}

/// Loads the config at start; any error is fatal.
pub(crate) fn load(source: &ConfigSource) -> Result<(SchedulerConfig, Option<String>), Error> {
    match source {
        ConfigSource::Fixed(c) => Ok((c.clone(), None)),
        ConfigSource::File(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| {
                Error::Config(caldera_config::ConfigError::Read {
                    path: path.clone(),
                    source,
                })
            })?;
            let config = caldera_config::parse(&text, Some(path))?;
            Ok((config, Some(text)))
        }
    }
}

/// Polls `path` every `interval`; on a change of content, parses it and swaps it in.
pub(crate) async fn watch_file(
    shared: Arc<Shared>,
    path: PathBuf,
    mut last_text: String,
    names: Vec<String>,
    gate: bool,
    interval: Duration,
    stop: CancellationToken,
) {
    let mut read_error_logged = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(interval) => {}
        }
        let text = match tokio::fs::read_to_string(&path).await {
            Ok(t) => {
                read_error_logged = false;
                t
            }
            Err(e) => {
                if !read_error_logged {
                    warn!(path = %path.display(), error = %e, "cannot read the config file; keeping the last good config");
                    read_error_logged = true;
                }
                continue;
            }
        };
        if text == last_text {
            continue;
        }
        last_text = text;
        let generation = shared.active().generation + 1;
        let parsed = caldera_config::parse(&last_text, Some(&path))
            .map_err(Error::Config)
            .and_then(|config| activate(config, &names, generation, gate));
        match parsed {
            Ok(active) => {
                for w in &active.config.warnings {
                    warn!("{w}");
                }
                info!(path = %path.display(), generation, "config reloaded; the next session uses it");
                shared.set_active(active);
                shared.trigger();
            }
            Err(e) => {
                error!(error = %e, "config change rejected; keeping the last good config");
            }
        }
    }
}
