//! Plugin options as the scheduler sees them: name, per-hook switches, checked arguments.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;

/// One plugin in a tier, e.g. `{name: binpack, arguments: {binpack.weight: 10}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginOption {
    /// The plugin's name, one of the names Caldera supports (`gang`, `binpack`, …).
    pub name: String,
    /// Which of the plugin's hooks the config switched on or off.
    pub flags: PluginFlags,
    /// The plugin's arguments, type-checked: a plugin can trust that a key it declares has the
    /// type it declares (see the crate docs for the table).
    pub arguments: Arguments,
}

impl PluginOption {
    /// Whether this plugin's `hook` is switched on (see [`PluginFlags::enabled`]).
    pub fn enabled(&self, hook: Hook) -> bool {
        self.flags.enabled(hook)
    }
}

/// An extension point a plugin option can switch off with Volcano's `enable…` flags.
///
/// Volcano spells most flags `enableX` and a few `enabledX`; [`Hook::key`] has the exact
/// spelling. Absent flags default as in Volcano (see [`Hook::default_enabled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Hook {
    /// `enableJobOrder`: the plugin's job ordering.
    JobOrder,
    /// `enableHierarchy`: hierarchical queues (drf, capacity). Off unless set.
    Hierarchy,
    /// `enableJobReady`: whether a job has enough allocated to commit.
    JobReady,
    /// `enableJobPipelined`: whether a job counts as pipelined.
    JobPipelined,
    /// `enableTaskOrder`: task ordering within a job.
    TaskOrder,
    /// `enablePreemptable`: victim selection for preempt.
    Preemptable,
    /// `enableReclaimable`: victim selection for reclaim.
    Reclaimable,
    /// `enablePreemptive`: whether a queue may preempt.
    Preemptive,
    /// `enableQueueOrder`: queue ordering.
    QueueOrder,
    /// `enabledClusterOrder`: cluster ordering (multi-cluster). Off unless set.
    ClusterOrder,
    /// `enablePredicate`: node filtering.
    Predicate,
    /// `enableBestNode`: picking the best node directly.
    BestNode,
    /// `enableNodeOrder`: node scoring.
    NodeOrder,
    /// `enableTargetJob`: reservation target job.
    TargetJob,
    /// `enableReservedNodes`: reserved nodes.
    ReservedNodes,
    /// `enableJobEnqueued`: bookkeeping after a job is enqueued (also gates enqueueable).
    JobEnqueued,
    /// `enabledVictim`: victim filtering.
    Victim,
    /// `enableJobStarving`: whether a job is starving.
    JobStarving,
    /// `enabledOverused`: whether a queue is over its share.
    Overused,
    /// `enabledAllocatable`: whether a queue may take more.
    Allocatable,
    /// `enabledHyperNodeOrder`: hypernode (network topology) ordering. Off unless set.
    HyperNodeOrder,
    /// `enabledSubJobReady`: sub-job readiness. Off unless set.
    SubJobReady,
    /// `enabledSubJobPipelined`: sub-job pipelining. Off unless set.
    SubJobPipelined,
    /// `enabledSubJobOrder`: sub-job ordering. Off unless set.
    SubJobOrder,
    /// `enabledHyperNodeGradient`: hypernode gradients. Off unless set.
    HyperNodeGradient,
}

impl Hook {
    /// Every hook, in Volcano's field order.
    pub const ALL: [Hook; 25] = [
        Hook::JobOrder,
        Hook::Hierarchy,
        Hook::JobReady,
        Hook::JobPipelined,
        Hook::TaskOrder,
        Hook::Preemptable,
        Hook::Reclaimable,
        Hook::Preemptive,
        Hook::QueueOrder,
        Hook::ClusterOrder,
        Hook::Predicate,
        Hook::BestNode,
        Hook::NodeOrder,
        Hook::TargetJob,
        Hook::ReservedNodes,
        Hook::JobEnqueued,
        Hook::Victim,
        Hook::JobStarving,
        Hook::Overused,
        Hook::Allocatable,
        Hook::HyperNodeOrder,
        Hook::SubJobReady,
        Hook::SubJobPipelined,
        Hook::SubJobOrder,
        Hook::HyperNodeGradient,
    ];

    /// The YAML key of the flag, spelled exactly as Volcano's `PluginOption` spells it.
    pub const fn key(self) -> &'static str {
        match self {
            Hook::JobOrder => "enableJobOrder",
            Hook::Hierarchy => "enableHierarchy",
            Hook::JobReady => "enableJobReady",
            Hook::JobPipelined => "enableJobPipelined",
            Hook::TaskOrder => "enableTaskOrder",
            Hook::Preemptable => "enablePreemptable",
            Hook::Reclaimable => "enableReclaimable",
            Hook::Preemptive => "enablePreemptive",
            Hook::QueueOrder => "enableQueueOrder",
            Hook::ClusterOrder => "enabledClusterOrder",
            Hook::Predicate => "enablePredicate",
            Hook::BestNode => "enableBestNode",
            Hook::NodeOrder => "enableNodeOrder",
            Hook::TargetJob => "enableTargetJob",
            Hook::ReservedNodes => "enableReservedNodes",
            Hook::JobEnqueued => "enableJobEnqueued",
            Hook::Victim => "enabledVictim",
            Hook::JobStarving => "enableJobStarving",
            Hook::Overused => "enabledOverused",
            Hook::Allocatable => "enabledAllocatable",
            Hook::HyperNodeOrder => "enabledHyperNodeOrder",
            Hook::SubJobReady => "enabledSubJobReady",
            Hook::SubJobPipelined => "enabledSubJobPipelined",
            Hook::SubJobOrder => "enabledSubJobOrder",
            Hook::HyperNodeGradient => "enabledHyperNodeGradient",
        }
    }

    /// The hook whose flag has this YAML key.
    pub fn from_key(key: &str) -> Option<Hook> {
        Hook::ALL.into_iter().find(|hook| hook.key() == key)
    }

    /// Whether the hook is on when the config does not mention it: true, except for the
    /// opt-in features Volcano leaves off by default (hierarchy, cluster order and the
    /// hypernode / sub-job hooks), mirroring Volcano's `ApplyPluginConfDefaults`.
    pub const fn default_enabled(self) -> bool {
        !matches!(
            self,
            Hook::Hierarchy
                | Hook::ClusterOrder
                | Hook::HyperNodeOrder
                | Hook::SubJobReady
                | Hook::SubJobPipelined
                | Hook::SubJobOrder
                | Hook::HyperNodeGradient
        )
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// A plugin option's `enable…` flags as written: `None` where the config does not mention one.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
pub struct PluginFlags {
    values: [Option<bool>; Hook::ALL.len()],
}

impl PluginFlags {
    /// The flag as written in the config.
    pub fn get(&self, hook: Hook) -> Option<bool> {
        self.values[hook as usize]
    }

    /// Sets (or with `None`, clears) a flag.
    pub fn set(&mut self, hook: Hook, value: Option<bool>) {
        self.values[hook as usize] = value;
    }

    /// Builder form of [`PluginFlags::set`], for tests and code-built configs.
    pub fn with(mut self, hook: Hook, value: bool) -> Self {
        self.set(hook, Some(value));
        self
    }

    /// Whether `hook` is on: the flag as written, else [`Hook::default_enabled`].
    pub fn enabled(&self, hook: Hook) -> bool {
        self.get(hook).unwrap_or(hook.default_enabled())
    }

    /// The flags the config sets, in [`Hook::ALL`] order.
    pub fn explicit(&self) -> impl Iterator<Item = (Hook, bool)> + '_ {
        Hook::ALL
            .into_iter()
            .filter_map(|hook| self.get(hook).map(|value| (hook, value)))
    }
}

/// Lists only the flags the config sets, under their YAML keys.
impl fmt::Debug for PluginFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (hook, value) in self.explicit() {
            map.entry(&hook.key(), &value);
        }
        map.finish()
    }
}

/// One checked argument value.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    /// An integer (also what numeric strings such as `"10"` become for integer arguments).
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
    /// A comma-separated list, split and trimmed (e.g. `binpack.resources`).
    List(Vec<String>),
}

/// A plugin's or action's arguments, keyed by name (`binpack.weight`, …).
///
/// Plugin arguments have been checked against the plugin's declared keys and types, so the
/// typed getters return `None` only when the key is absent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Arguments {
    values: BTreeMap<String, ArgValue>,
}

impl Arguments {
    /// No arguments.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces an argument, returning the previous value.
    pub fn insert(&mut self, key: impl Into<String>, value: ArgValue) -> Option<ArgValue> {
        self.values.insert(key.into(), value)
    }

    /// The value of `key`, whatever its type.
    pub fn get(&self, key: &str) -> Option<&ArgValue> {
        self.values.get(key)
    }

    /// Whether `key` is set.
    pub fn contains_key(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    /// An integer argument.
    pub fn get_i64(&self, key: &str) -> Option<i64> {
        match self.get(key)? {
            ArgValue::Int(value) => Some(*value),
            _ => None,
        }
    }

    /// A number argument; integers widen.
    pub fn get_f64(&self, key: &str) -> Option<f64> {
        match self.get(key)? {
            ArgValue::Float(value) => Some(*value),
            // Integers in arguments are weights and factors, far below 2^53.
            ArgValue::Int(value) => Some(*value as f64),
            _ => None,
        }
    }

    /// A boolean argument.
    pub fn get_bool(&self, key: &str) -> Option<bool> {
        match self.get(key)? {
            ArgValue::Bool(value) => Some(*value),
            _ => None,
        }
    }

    /// A string argument.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        match self.get(key)? {
            ArgValue::Str(value) => Some(value),
            _ => None,
        }
    }

    /// A list argument (a comma-separated string in the YAML).
    pub fn get_list(&self, key: &str) -> Option<&[String]> {
        match self.get(key)? {
            ArgValue::List(value) => Some(value),
            _ => None,
        }
    }

    /// The arguments whose key starts with `prefix`, as `(rest of the key, value)` in key
    /// order. `with_prefix("binpack.resources.")` yields `("nvidia.com/gpu", Int(5))`.
    pub fn with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a ArgValue)> + 'a {
        self.values
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(key, _)| key.starts_with(prefix))
            .map(move |(key, value)| (&key[prefix.len()..], value))
    }

    /// All arguments in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ArgValue)> {
        self.values.iter().map(|(key, value)| (key.as_str(), value))
    }

    /// How many arguments there are.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl<K: Into<String>> FromIterator<(K, ArgValue)> for Arguments {
    fn from_iter<I: IntoIterator<Item = (K, ArgValue)>>(iter: I) -> Self {
        Arguments {
            values: iter
                .into_iter()
                .map(|(key, value)| (key.into(), value))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_keys_round_trip_and_are_distinct() {
        for hook in Hook::ALL {
            assert_eq!(Hook::from_key(hook.key()), Some(hook));
            assert_eq!(Hook::ALL[hook as usize], hook);
        }
        assert_eq!(Hook::from_key("enableVictim"), None);
    }

    #[test]
    fn flags_default_like_volcano() {
        let flags = PluginFlags::default().with(Hook::Preemptable, false);
        assert!(!flags.enabled(Hook::Preemptable));
        assert!(flags.enabled(Hook::JobOrder));
        assert!(!flags.enabled(Hook::Hierarchy));
        assert_eq!(
            flags.explicit().collect::<Vec<_>>(),
            [(Hook::Preemptable, false)]
        );
    }

    #[test]
    fn typed_getters_and_prefix_iteration() {
        let arguments: Arguments = [
            ("binpack.weight", ArgValue::Int(10)),
            (
                "binpack.resources",
                ArgValue::List(vec!["nvidia.com/gpu".into()]),
            ),
            ("binpack.resources.nvidia.com/gpu", ArgValue::Int(5)),
            ("overcommit-factor", ArgValue::Float(1.5)),
        ]
        .into_iter()
        .collect();
        assert_eq!(arguments.get_i64("binpack.weight"), Some(10));
        assert_eq!(arguments.get_f64("binpack.weight"), Some(10.0));
        assert_eq!(arguments.get_f64("overcommit-factor"), Some(1.5));
        assert_eq!(arguments.get_i64("overcommit-factor"), None);
        assert_eq!(
            arguments.get_list("binpack.resources"),
            Some(&["nvidia.com/gpu".to_string()][..])
        );
        assert_eq!(
            arguments
                .with_prefix("binpack.resources.")
                .collect::<Vec<_>>(),
            [("nvidia.com/gpu", &ArgValue::Int(5))]
        );
    }
}
