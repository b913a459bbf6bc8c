//! Scheduler configuration: Volcano's actions-and-tiers format plus Caldera's keys, parsed and validated.
//!
//! The file format is Volcano's `volcano-scheduler.conf`, and a Volcano config loads
//! unchanged (arguments Caldera does not use come back as [`SchedulerConfig::warnings`]):
//!
//! ```yaml
//! actions: "enqueue, allocate, backfill"   # run in this order every session
//! tiers:
//! - plugins:
//!   - name: priority
//!   - name: gang
//!     enablePreemptable: false              # Volcano's per-hook switches
//! - plugins:
//!   - name: binpack
//!     arguments:
//!       binpack.weight: 10
//! configurations:                           # per-action arguments (none used yet)
//! - name: allocate
//!   arguments: {}
//! schedulerNames: [caldera, volcano]        # Caldera's own keys, all optional
//! schedulePeriod: 1s
//! sessionDebounce: 50ms
//! gangScheduleTimeout: 10m
//! bindConcurrency: 64
//! autoscaler:                               # off unless present (docs/autoscaler.md)
//!   provisioningRequest:
//!     className: best-effort-atomic-scale-up.autoscaling.x-k8s.io
//!     retry: 1m                             # back-off after a failed request, doubling
//!     bookingTimeout: 10m                   # how long new nodes stay booked for their gang
//!     maxWait: 1h                           # bound of a gang's wait for a live request
//! podScheduledEvents: true
//! autoGroup:                                # gangs derived from workloads (docs/workloads.md)
//!   enabled: true                           # default true
//!   namespaces: [team-a, team-b]            # default: every namespace
//! networkTopologyDiscovery:                 # off unless present (docs/network-topology.md)
//! - source: label
//!   config:
//!     labels: [nvidia.com/gpu.clique, example.com/rack]   # lowest tier first
//! ```
//!
//! [`parse`] and [`load`] check everything: action and plugin names, flag and argument
//! names and types, durations and integers. Each [`ConfigError`] is one line naming the file,
//! line, column and key path:
//!
//! ```
//! use std::path::Path;
//!
//! let text = caldera_config::SHIPPED_CONFIG.replace("binpack.weight: 10", "binpack.weight: ten");
//! let error = caldera_config::parse(&text, Some(Path::new("config/scheduler.yaml"))).unwrap_err();
//! assert_eq!(
//!     error.to_string(),
//!     r#"config/scheduler.yaml:50:23: tiers[1].plugins[5].arguments["binpack.weight"]: expected an integer, got "ten""#
//! );
//! ```
//!
//! Key paths count list items from 0.
//!
//! Plugin arguments Caldera reads, and their types (numbers may also be written as numeric
//! strings, as Volcano configs often do):
//!
//! | plugin | argument | type |
//! |---|---|---|
//! | overcommit | `overcommit-factor` | number |
//! | nodeorder | `nodeaffinity.weight`, `podaffinity.weight`, `leastrequested.weight`, `balancedresource.weight`, `mostrequested.weight`, `tainttoleration.weight`, `imagelocality.weight`, `podtopologyspread.weight` | integer ≥ 0 |
//! | binpack | `binpack.weight`, `binpack.cpu`, `binpack.memory`, `binpack.resources.<resource>` | integer ≥ 0 |
//! | binpack | `binpack.resources` | comma-separated resource names ([`ArgValue::List`]) |
//! | fgd | `fgd.weight`, `fgd.workloadCoverage` | integer ≥ 0 |
//! | network-topology-aware | `weight`, `hypernode.binpack.cpu`, `hypernode.binpack.memory`, `hypernode.binpack.resources.<resource>` | integer ≥ 0 |
//! | network-topology-aware | `hypernode.binpack.resources` | comma-separated resource names ([`ArgValue::List`]) |
//! | predicates | `predicate.NodeAffinityEnable`, `predicate.NodePortsEnable`, `predicate.TaintTolerationEnable`, `predicate.PodAffinityEnable`, `predicate.PodTopologySpreadEnable` | boolean ([`ArgValue::Bool`]) |
//! | fairshare | `halfLife`, `minRuntime`, `preemptionDelay`, `maxWait` | Go duration, 0 allowed (the text, [`ArgValue::Str`]) |
//! | fairshare | `usageWritePeriod`, `window` | Go duration > 0 (the text) |
//! | fairshare | `kValue` | number ≥ 0 |
//! | fairshare | `resourceWeights` | mapping of resources to numbers ≥ 0 (one `resourceWeights.<resource>` each) |
//! | fairshare | `tenantKey` | `namespace` or a label key ([`ArgValue::Str`]) |
//!
//! gang, priority, drf, proportion and conformance take no arguments. Volcano's other
//! arguments of these plugins (the other `predicate.*Enable`, `predicate.resources…`,
//! `volumebinding.*`, `overcommit-factor.<resource>`, `hypernode.binpack.normal-pod.*`,
//! `hypernode.gradient.evict.max-hypernodes`) are accepted and ignored with a warning.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod catalog;
mod duration;
mod error;
mod plugin;
mod raw;
mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::time::Duration;

pub use duration::{parse_duration, ParseDurationError};
pub use error::{ConfigError, Location};
pub use plugin::{ArgValue, Arguments, Hook, PluginFlags, PluginOption};
pub use validate::TOP_LEVEL_KEYS;

/// The shipped default config, `config/scheduler.yaml`, as text.
pub const SHIPPED_CONFIG: &str = include_str!("../../../config/scheduler.yaml");

/// `schedulerNames` when the config does not set it.
pub const DEFAULT_SCHEDULER_NAMES: [&str; 2] = ["caldera", "volcano"];
/// `schedulePeriod` when the config does not set it.
pub const DEFAULT_SCHEDULE_PERIOD: Duration = Duration::from_secs(1);
/// `sessionDebounce` when the config does not set it.
pub const DEFAULT_SESSION_DEBOUNCE: Duration = Duration::from_millis(50);
/// `bindConcurrency` when the config does not set it.
pub const DEFAULT_BIND_CONCURRENCY: usize = 64;

/// A validated scheduler config.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedulerConfig {
    /// The actions to run each session, in order, each at most once.
    pub actions: Vec<Action>,
    /// The plugin tiers, in order; each plugin name appears at most once across all tiers.
    pub tiers: Vec<Tier>,
    /// Per-action arguments from `configurations`, keyed by action name. Caldera's actions
    /// read none yet; they are kept so nothing in a Volcano config is silently lost.
    pub configurations: BTreeMap<String, Arguments>,
    /// The pod `schedulerName`s this scheduler serves (`schedulerNames`; default
    /// `[caldera, volcano]`). Never empty, no duplicates.
    pub scheduler_names: Vec<String>,
    /// How often a session runs when nothing triggers one sooner (`schedulePeriod`; default
    /// 1s). Never zero.
    pub schedule_period: Duration,
    /// How long to wait after a watch event before starting a session, so a burst of events
    /// makes one session (`sessionDebounce`; default 50ms).
    pub session_debounce: Duration,
    /// How long a gang may stay unscheduled before its pods are failed (`gangScheduleTimeout`;
    /// default none: wait forever). Never zero.
    pub gang_schedule_timeout: Option<Duration>,
    /// How many bind calls may be in flight at once (`bindConcurrency`; default 64; at least 1).
    pub bind_concurrency: usize,
    /// `autoscaler.provisioningRequest`: ask cluster-autoscaler for capacity for whole gangs
    /// (default: off).
    pub autoscaler: Option<Box<ProvisioningRequestConfig>>,
    /// Whether each bound pod gets its `Scheduled` event ("Successfully assigned ns/pod to
    /// node", what `kubectl describe pod` shows) (`podScheduledEvents`; default true). Off, a
    /// gang's binds cost one write per pod; the PodGroup's own `Scheduled` event stays.
    pub pod_scheduled_events: bool,
    /// `autoGroup`: where gangs are derived from workloads (`batch/v1` Jobs) whose pods name
    /// no group (default: on in every namespace).
    pub auto_group: AutoGroupConfig,
    /// `networkTopologyDiscovery`: HyperNodes Caldera makes and keeps up to date from node
    /// labels (default: off; docs/network-topology.md).
    pub network_topology_discovery: Option<Box<NetworkTopologyDiscovery>>,
    /// The `consolidate` action's arguments (`configurations`; defaults when not given).
    pub consolidate: ConsolidateConfig,
    /// Things accepted but ignored (Volcano arguments Caldera does not use, configurations of
    /// actions that do not run, …), each a one-line message with file, line and key path.
    pub warnings: Vec<String>,
}

impl SchedulerConfig {
    /// The option of the plugin called `name`, if the config lists it.
    pub fn plugin(&self, name: &str) -> Option<&PluginOption> {
        self.plugins().find(|option| option.name == name)
    }

    /// Every plugin the config lists, in tier order, then in order within the tier.
    pub fn plugins(&self) -> impl Iterator<Item = &PluginOption> {
        self.tiers.iter().flat_map(|tier| tier.plugins.iter())
    }

    /// The plugins whose `hook` is switched on, in tier order: the ones the session asks at
    /// that extension point.
    pub fn plugins_enabled_for(&self, hook: Hook) -> impl Iterator<Item = &PluginOption> {
        self.plugins().filter(move |option| option.enabled(hook))
    }

    /// Whether `action` runs.
    pub fn runs(&self, action: Action) -> bool {
        self.actions.contains(&action)
    }
}

impl Default for SchedulerConfig {
    /// The shipped `config/scheduler.yaml`.
    fn default() -> Self {
        // Infallible in practice: the text is compiled in, and the tests `shipped_config_*`
        // (here and in tests/shipped.rs) parse it on every build of the test suite.
        #[allow(clippy::expect_used)]
        parse(SHIPPED_CONFIG, None).expect("the shipped config/scheduler.yaml is valid")
    }
}

/// `networkTopologyDiscovery` with a `label` source: the HyperNodes node labels imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkTopologyDiscovery {
    /// Lists of node label keys, each lowest tier first: a node with a value for the first
    /// key of a list is in the tier-1 HyperNode of that value, whose parent is the tier-2
    /// HyperNode of the node's value of the second key, and so on up.
    pub label_levels: Vec<Vec<String>>,
    /// `interval`: how often `caldera run` reconciles the HyperNodes when no node changed
    /// (default 1m); a node's labels changing reconciles at the next session.
    pub interval: Duration,
}

impl Default for NetworkTopologyDiscovery {
    fn default() -> Self {
        NetworkTopologyDiscovery {
            label_levels: Vec::new(),
            interval: Duration::from_secs(60),
        }
    }
}

/// The `consolidate` action's arguments (docs/consolidation.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsolidateConfig {
    /// `minRuntime`: a pod is moved only once it has run this long (default 10m); its
    /// replacement starts the count afresh, so no pod moves twice within it.
    pub min_runtime: Duration,
    /// `maxPods`: at most this many pods moved per session (default 8; at least 1).
    pub max_pods: u32,
    /// `maxGPUs`: at most this many GPUs (`nvidia.com/gpu`) moved per session (default 16).
    pub max_gpus: u32,
    /// `holdTimeout`: how long the room held for a moved pod's replacement stands (default
    /// 5m).
    pub hold_timeout: Duration,
}

impl Default for ConsolidateConfig {
    fn default() -> Self {
        ConsolidateConfig {
            min_runtime: Duration::from_secs(600),
            max_pods: 8,
            max_gpus: 16,
            hold_timeout: Duration::from_secs(300),
        }
    }
}

/// `autoGroup`: gangs derived from workloads (docs/workloads.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoGroupConfig {
    /// `enabled` (default true).
    pub enabled: bool,
    /// `namespaces`: only workloads in these namespaces (sorted, no duplicates); absent or
    /// `null` (the default): every namespace.
    pub namespaces: Option<Vec<String>>,
}

impl Default for AutoGroupConfig {
    fn default() -> Self {
        AutoGroupConfig {
            enabled: true,
            namespaces: None,
        }
    }
}

/// `autoscaler.provisioningRequest`: ProvisioningRequests for gangs that lack nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProvisioningRequestConfig {
    /// `className`: the `provisioningClassName` of the requests (default
    /// `best-effort-atomic-scale-up.autoscaling.x-k8s.io`).
    pub class_name: String,
    /// `retry`: back-off before a failed or expired request is replaced, doubling per attempt
    /// up to 16 times (default 1m).
    pub retry: Duration,
    /// `bookingTimeout`: how long provisioned nodes stay booked for their gang (default 10m,
    /// cluster-autoscaler's own booking time).
    pub booking_timeout: Duration,
    /// `maxWait`: the longest a gang waits while its request is live, whatever its
    /// `scheduleTimeoutSeconds` (default 1h; `null`: no bound).
    pub max_wait: Option<Duration>,
    /// `allGangs`: every gang may get a request unless its PodGroup is annotated
    /// `scheduling.caldera.sh/provisioning-request: "false"` (default true); when false, only
    /// PodGroups annotated `"true"` do.
    pub all_gangs: bool,
}

impl ProvisioningRequestConfig {
    /// The settings as the scheduling core takes them.
    pub fn policy(&self) -> caldera_model::ProvisioningPolicy {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        caldera_model::ProvisioningPolicy {
            class_name: self.class_name.clone(),
            retry_ms: ms(self.retry),
            booking_ms: ms(self.booking_timeout),
            max_wait_ms: self.max_wait.map(ms),
            all_gangs: self.all_gangs,
        }
    }
}

impl Default for ProvisioningRequestConfig {
    fn default() -> Self {
        ProvisioningRequestConfig {
            class_name: "best-effort-atomic-scale-up.autoscaling.x-k8s.io".into(),
            retry: Duration::from_secs(60),
            booking_timeout: Duration::from_secs(600),
            max_wait: Some(Duration::from_secs(3600)),
            all_gangs: true,
        }
    }
}

/// One tier: plugins consulted together, before the plugins of later tiers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tier {
    /// The plugins of this tier, in config order.
    pub plugins: Vec<PluginOption>,
}

/// An action Caldera implements. Volcano's `shuffle` is rejected with a message saying it is
/// not implemented yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// Admit pending jobs whose minimum resources fit (spec §5.1).
    Enqueue,
    /// Place admitted gangs all-or-nothing (spec §5.2).
    Allocate,
    /// Place best-effort tasks (spec §5.3).
    Backfill,
    /// Evict lower-priority units in the same queue for a starving job (spec §5.4).
    Preempt,
    /// Evict units of over-share reclaimable queues for a queue below its share (spec §5.4).
    Reclaim,
    /// Move restartable pods so a fragmented gang fits (docs/consolidation.md).
    Consolidate,
}

impl Action {
    /// Every implemented action.
    pub const ALL: [Action; 6] = [
        Action::Enqueue,
        Action::Allocate,
        Action::Backfill,
        Action::Preempt,
        Action::Reclaim,
        Action::Consolidate,
    ];

    /// The name used in `actions`.
    pub const fn name(self) -> &'static str {
        match self {
            Action::Enqueue => "enqueue",
            Action::Allocate => "allocate",
            Action::Backfill => "backfill",
            Action::Preempt => "preempt",
            Action::Reclaim => "reclaim",
            Action::Consolidate => "consolidate",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses and validates a config. `origin` is the file the text came from, used only in
/// messages.
pub fn parse(text: &str, origin: Option<&Path>) -> Result<SchedulerConfig, ConfigError> {
    let root = raw::parse(text).map_err(|error| error::from_yaml(&error, origin))?;
    validate::validate(&root, text, origin)
}

/// Reads, parses and validates the config file at `path`.
pub fn load(path: &Path) -> Result<SchedulerConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, Some(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_config_is_valid_and_warning_free() {
        let config = parse(SHIPPED_CONFIG, None).unwrap();
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        assert_eq!(config, SchedulerConfig::default());
    }
}
