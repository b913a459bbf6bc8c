//! Session, statement, plugin traits, tiers and actions: snapshot + time + config → plan.
//!
//! This crate is the scheduling core's engine. It is synchronous and deterministic: no I/O,
//! no clock (time is an input), no randomness; ties break by name. The same snapshot, time and
//! config give an equal plan.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actions;
pub mod aging;
pub mod attempt;
pub mod close;
pub mod consolidate;
pub mod devices;
pub mod evict;
pub mod explain;
pub mod fair;
pub mod interpod;
pub mod place;
pub mod plugin;
pub mod reserve;
pub mod run;
pub mod session;
pub mod shortfall;
pub mod state;
pub mod topology;
pub mod track;
pub mod volumes;

use actions::{Action, Allocate, Backfill, Consolidate, Enqueue, Preempt, Reclaim};
use caldera_config::{Hook, PluginOption, SchedulerConfig};
use caldera_model::{Plan, Resources, Snapshot, Time};
use plugin::{Hooks, Plugin};
use session::{Session, Slot, Stats};
use state::State;
use std::collections::BTreeMap;
use std::sync::Arc;

pub use explain::Explanation;
pub use plugin::Verdict;

/// Builds a plugin for one session from its config arguments.
pub type PluginFactory = fn(&PluginOption) -> Result<Box<dyn Plugin>, String>;

/// Errors building a scheduler from a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionError {
    /// The config names a plugin the registry does not have.
    UnknownPlugin(String),
    /// The config names an action the registry does not have.
    UnknownAction(String),
    /// A plugin rejected its arguments.
    BadArguments {
        /// Plugin name.
        plugin: String,
        /// What is wrong.
        message: String,
    },
    /// A name was registered twice.
    Duplicate(String),
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownPlugin(p) => write!(f, "unknown plugin {p:?}"),
            Self::UnknownAction(a) => write!(f, "unknown action {a:?}"),
            Self::BadArguments { plugin, message } => {
                write!(f, "plugin {plugin:?}: {message}")
            }
            Self::Duplicate(n) => write!(f, "{n:?} is registered twice"),
        }
    }
}

impl std::error::Error for SessionError {}

/// Plugins and actions by their config names. Registering a name twice is an error.
#[derive(Clone, Default)]
pub struct Registry {
    plugins: BTreeMap<&'static str, PluginFactory>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("plugins", &self.plugins.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a plugin factory under `name`.
    pub fn register(
        &mut self,
        name: &'static str,
        factory: PluginFactory,
    ) -> Result<(), SessionError> {
        if self.plugins.insert(name, factory).is_some() {
            return Err(SessionError::Duplicate(name.to_string()));
        }
        Ok(())
    }

    /// Names of the registered plugins.
    pub fn plugin_names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.plugins.keys().copied()
    }
}

/// The actions Caldera implements, by config name.
pub fn action(name: &str) -> Option<Arc<dyn Action>> {
    match name {
        "enqueue" => Some(Arc::new(Enqueue)),
        "allocate" => Some(Arc::new(Allocate)),
        "backfill" => Some(Arc::new(Backfill)),
        "preempt" => Some(Arc::new(Preempt)),
        "reclaim" => Some(Arc::new(Reclaim)),
        "consolidate" => Some(Arc::new(Consolidate::default())),
        _ => None,
    }
}

/// A queue's share at session close, for status output and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueReport {
    /// Queue name.
    pub name: Arc<str>,
    /// Deserved share, if a plugin computed one.
    pub deserved: Option<Resources>,
    /// Σ requests of members holding a node, this session's placements included, summed
    /// over the queue's subtree (`spec.parent`).
    pub allocated: Resources,
    /// With `fairshare` (and a half-life): the queue's decayed usage at the session's time,
    /// per resource, in millionths of the cluster ([`caldera_model::QueueUsage`]).
    pub usage: Option<BTreeMap<Arc<str>, u32>>,
}

/// Gangs with a topology rule that members were committed for in `ssn`, by the tier of the
/// domain they were placed in (`"1"`, `"2"`, …; a one-tier label rule is tier 1), or `"root"`
/// when the rule let them reach the cluster root.
fn topology_placements(ssn: &Session) -> std::collections::BTreeMap<String, u64> {
    let mut jobs: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
    for &(task, _) in &ssn.decisions.committed {
        let job = ssn.state.tasks[task].job;
        if ssn.state.jobs[job].topology.is_some() {
            jobs.insert(job);
        }
    }
    let mut out = std::collections::BTreeMap::new();
    for job in jobs {
        let tier = match (
            &ssn.state.job_runs[job].domain,
            &ssn.state.jobs[job].topology,
        ) {
            (Some(name), Some(rule)) => match rule.source {
                caldera_model::TopologySource::HyperNodes => ssn
                    .state
                    .topology
                    .domain_named(name)
                    .map(|d| ssn.state.topology.domains[d as usize].tier.to_string()),
                caldera_model::TopologySource::Label(_) => Some("1".to_string()),
            },
            _ => Some("root".to_string()),
        };
        if let Some(tier) = tier {
            *out.entry(tier).or_insert(0) += 1;
        }
    }
    out
}

/// Queue `q`'s decayed usage at the session's time from its newest record (the one `plan`
/// writes, else the one it had), when `fairshare` keeps usage.
fn usage_now(state: &State, plan: &Plan, q: usize) -> Option<BTreeMap<Arc<str>, u32>> {
    let fair = state.fair.as_ref().filter(|f| f.remembers())?;
    let queue = &state.queues[q];
    let written = plan
        .queues
        .iter()
        .find(|u| u.name == queue.name)
        .and_then(|u| u.status.usage.as_ref());
    let record = written.or_else(|| queue.status.as_ref().and_then(|s| s.usage.as_ref()));
    let scale = f64::from(caldera_model::USAGE_SCALE);
    Some(
        record
            .map(|r| fair.decayed(r, state.now))
            .unwrap_or_default()
            .into_iter()
            .map(|(name, v)| (name, (v * scale).round() as u32))
            .collect(),
    )
}

/// What a session produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The changes to carry out.
    pub plan: Plan,
    /// Queue shares.
    pub queues: Vec<QueueReport>,
    /// Counters.
    pub stats: Stats,
}

/// A configured scheduler: runs sessions.
#[derive(Debug, Clone)]
pub struct Scheduler {
    plugins: Vec<(PluginOption, PluginFactory, Hooks)>,
    actions: Vec<Arc<dyn Action>>,
    eviction: evict::Switches,
    fair: Option<Arc<caldera_queue::fair::FairSettings>>,
}

fn hooks_of(option: &PluginOption) -> Hooks {
    Hooks {
        job_order: option.enabled(Hook::JobOrder),
        queue_order: option.enabled(Hook::QueueOrder),
        task_order: option.enabled(Hook::TaskOrder),
        job_ready: option.enabled(Hook::JobReady),
        enqueue: option.enabled(Hook::JobEnqueued),
        predicate: option.enabled(Hook::Predicate),
        node_order: option.enabled(Hook::NodeOrder),
        overused: option.enabled(Hook::Overused),
        allocatable: option.enabled(Hook::Allocatable),
    }
}

impl Scheduler {
    /// Builds a scheduler for `config` from the plugins in `registry`. Every plugin is built
    /// once here to check its arguments.
    pub fn new(config: &SchedulerConfig, registry: &Registry) -> Result<Self, SessionError> {
        let mut plugins = Vec::new();
        for tier in &config.tiers {
            for option in &tier.plugins {
                let factory = *registry
                    .plugins
                    .get(option.name.as_str())
                    .ok_or_else(|| SessionError::UnknownPlugin(option.name.clone()))?;
                factory(option).map_err(|message| SessionError::BadArguments {
                    plugin: option.name.clone(),
                    message,
                })?;
                plugins.push((option.clone(), factory, hooks_of(option)));
            }
        }
        let mut actions = Vec::new();
        for a in &config.actions {
            let name = a.name();
            let built: Arc<dyn Action> = match a {
                caldera_config::Action::Consolidate => {
                    Arc::new(Consolidate::new(config.consolidate.clone()))
                }
                _ => action(name).ok_or_else(|| SessionError::UnknownAction(name.to_string()))?,
            };
            actions.push(built);
        }
        // Volcano's per-plugin switches: victims are chosen only while some plugin keeps
        // `enablePreemptable` (preempt) or `enableReclaimable` (reclaim) on, and a plugin that
        // turns `enablePreemptive` off stops queues from reclaiming.
        let options = || config.tiers.iter().flat_map(|t| t.plugins.iter());
        let named = |name: &str| actions.iter().any(|a| a.name() == name);
        let eviction = evict::Switches {
            preempt: named("preempt") && options().any(|o| o.enabled(Hook::Preemptable)),
            reclaim: named("reclaim") && options().any(|o| o.enabled(Hook::Reclaimable)),
            preemptive: options().all(|o| o.enabled(Hook::Preemptive)),
            explicit_deserved: options().any(|o| o.name == "capacity"),
            tree: options().any(|o| o.name == "capacity" && o.enabled(Hook::Hierarchy)),
        };
        let fair = match options().find(|o| o.name == "fairshare") {
            Some(option) => Some(Arc::new(fair::settings(option).map_err(|message| {
                SessionError::BadArguments {
                    plugin: option.name.clone(),
                    message,
                }
            })?)),
            None => None,
        };
        Ok(Scheduler {
            plugins,
            actions,
            eviction,
            fair,
        })
    }

    /// Opens a session on `snapshot` at `now`, without running any action. For tests and
    /// `explain`.
    pub fn open(&self, snapshot: &Snapshot, now: Time) -> Session {
        self.open_owned(snapshot.clone(), now)
    }

    /// Like [`Scheduler::open`], taking the snapshot over instead of copying it.
    pub fn open_owned(&self, snapshot: Snapshot, now: Time) -> Session {
        let slots = self
            .plugins
            .iter()
            .filter_map(|(option, factory, hooks)| {
                // Arguments were checked in `new`, so building cannot fail here.
                factory(option).ok().map(|plugin| Slot {
                    plugin,
                    hooks: *hooks,
                })
            })
            .collect();
        let mut state = State::new(snapshot, now);
        // Before the session opens: proportion's split (at `on_open`) reads it.
        state.fair = self.fair.clone();
        if let Some(key) = self.fair.as_ref().and_then(|f| f.tenant_key.as_ref()) {
            state.tenants = Some(Arc::new(fair::tenants(&state, key)));
        }
        let mut ssn = Session::new(state, slots);
        ssn.eviction = self.eviction;
        let has_enqueue = self.actions.iter().any(|a| a.name() == "enqueue");
        for j in 0..ssn.state.jobs.len() {
            let invalid = ssn.job_invalid(j);
            let phase = ssn.state.jobs[j].phase();
            let run = &mut ssn.state.job_runs[j];
            run.invalid = invalid;
            // Without an enqueue action every job competes at once.
            run.admitted = phase != caldera_model::PodGroupPhase::Pending || !has_enqueue;
        }
        aging::open(&mut ssn);
        reserve::open(&mut ssn);
        consolidate::open(&mut ssn);
        ssn
    }

    /// The actions, in order, as the config built them (with their arguments: `consolidate`'s
    /// `minRuntime`, ...), for a caller that runs them one at a time.
    pub fn actions(&self) -> &[Arc<dyn Action>] {
        &self.actions
    }

    /// Runs one full session: open, every action in order, close.
    pub fn run(&self, snapshot: &Snapshot, now: Time) -> Outcome {
        self.run_owned(snapshot.clone(), now)
    }

    /// Like [`Scheduler::run`], taking the snapshot over instead of copying it: the caller that
    /// builds a fresh snapshot per session (the runtime, the simulator) saves a full copy.
    pub fn run_owned(&self, snapshot: Snapshot, now: Time) -> Outcome {
        let mut ssn = self.open_owned(snapshot, now);
        for a in &self.actions {
            a.execute(&mut ssn);
        }
        Self::finish(ssn)
    }

    /// Closes a session into an outcome.
    pub fn finish(mut ssn: Session) -> Outcome {
        ssn.stats.topology_placements = topology_placements(&ssn);
        let plan = close::close(&ssn);
        let queues = ssn
            .state
            .queues
            .iter()
            .enumerate()
            .map(|(i, q)| QueueReport {
                name: q.name.clone(),
                deserved: ssn.slots.iter().find_map(|s| s.plugin.deserved(i)),
                allocated: ssn.state.tree_allocated[i].clone(),
                usage: usage_now(&ssn.state, &plan, i),
            })
            .collect();
        Outcome {
            plan,
            queues,
            stats: ssn.stats,
        }
    }

    /// Names of the configured actions, in order.
    pub fn action_names(&self) -> Vec<&'static str> {
        self.actions.iter().map(|a| a.name()).collect()
    }
}
