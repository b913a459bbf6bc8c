//! What Caldera knows about Volcano's names: actions, plugins, and each plugin's arguments.
//!
//! The Volcano names here come from volcano-sh/volcano (`pkg/scheduler/plugins/*`,
//! `pkg/scheduler/actions/*`). A name Volcano has but Caldera does not implement gets a
//! clearer message than a name nobody has; an argument Volcano has but Caldera ignores is
//! accepted with a warning so that Volcano configs load unchanged.

use crate::Action;

/// How an action name is known.
pub(crate) enum ActionName {
    /// Caldera runs it.
    Implemented(Action),
    /// Volcano has it; Caldera does not yet.
    Unimplemented,
    /// Neither.
    Unknown,
}

/// Volcano actions Caldera does not implement yet.
pub(crate) const UNIMPLEMENTED_ACTIONS: [&str; 1] = ["shuffle"];

pub(crate) fn action(name: &str) -> ActionName {
    if let Some(action) = Action::ALL.into_iter().find(|action| action.name() == name) {
        ActionName::Implemented(action)
    } else if UNIMPLEMENTED_ACTIONS.contains(&name) {
        ActionName::Unimplemented
    } else {
        ActionName::Unknown
    }
}

/// Every action name Volcano knows, for "did you mean" suggestions.
pub(crate) fn all_action_names() -> Vec<&'static str> {
    Action::ALL
        .into_iter()
        .map(Action::name)
        .chain(UNIMPLEMENTED_ACTIONS)
        .collect()
}

/// Plugins Caldera implements, in the order the shipped config lists them.
pub(crate) const SUPPORTED_PLUGINS: [&str; 13] = [
    "priority",
    "gang",
    "conformance",
    "overcommit",
    "drf",
    "predicates",
    "proportion",
    "nodeorder",
    "binpack",
    "fgd",
    "capacity",
    "network-topology-aware",
    "fairshare",
];

/// Volcano's other plugins.
const VOLCANO_ONLY_PLUGINS: [&str; 14] = [
    "cdp",
    "deviceshare",
    "dynamicresources",
    "extender",
    "nodegroup",
    "numa-aware",
    "pdb",
    "rescheduling",
    "resource-strategy-fit",
    "resourcequota",
    "sla",
    "task-topology",
    "tdm",
    "usage",
];

/// How a plugin name is known.
pub(crate) enum PluginName {
    Supported,
    VolcanoOnly,
    Unknown,
}

pub(crate) fn plugin(name: &str) -> PluginName {
    if SUPPORTED_PLUGINS.contains(&name) {
        PluginName::Supported
    } else if VOLCANO_ONLY_PLUGINS.contains(&name) {
        PluginName::VolcanoOnly
    } else {
        PluginName::Unknown
    }
}

/// The type an argument must have.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ArgKind {
    /// An integer at least `min`; a number or a numeric string.
    Int { min: i64 },
    /// A finite number; a number or a numeric string.
    Number,
    /// A comma-separated list of resource names.
    ResourceList,
    /// `true` or `false`.
    Bool,
    /// A number of at least 0; a number or a numeric string.
    NonNegative,
    /// A Go duration (`168h`, `1m30s`); `zero` says whether 0 is allowed.
    Duration { zero: bool },
    /// A mapping of resource names to non-negative numbers; handed to the plugin as one
    /// argument `<key>.<resource>` per entry.
    ResourceWeights,
    /// `namespace`, or a label key (`team`, `example.com/team`): whose usage orders a queue's
    /// jobs (fairshare's `tenantKey`).
    TenantKey,
}

/// What Caldera does with an argument.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ArgUse {
    /// Checked and handed to the plugin.
    Used(ArgKind),
    /// A Volcano argument Caldera does not use: accepted with a warning, not checked.
    Ignored,
}

/// One accepted argument key, or a family of keys sharing a prefix.
pub(crate) struct ArgSpec {
    /// The key, or the prefix when `prefix` is true.
    pub(crate) key: &'static str,
    /// Whether `key` is a prefix that needs a non-empty rest (`binpack.resources.<name>`).
    pub(crate) prefix: bool,
    /// How it reads in a list of known keys.
    pub(crate) shown: &'static str,
    pub(crate) usage: ArgUse,
}

const fn used(key: &'static str, kind: ArgKind) -> ArgSpec {
    ArgSpec {
        key,
        prefix: false,
        shown: key,
        usage: ArgUse::Used(kind),
    }
}

const fn ignored(key: &'static str) -> ArgSpec {
    ArgSpec {
        key,
        prefix: false,
        shown: key,
        usage: ArgUse::Ignored,
    }
}

const WEIGHT: ArgKind = ArgKind::Int { min: 0 };

const OVERCOMMIT: &[ArgSpec] = &[
    used("overcommit-factor", ArgKind::Number),
    // Newer Volcano: per-resource factors, `overcommit-factor.nvidia.com/gpu: 1.0`.
    ArgSpec {
        key: "overcommit-factor.",
        prefix: true,
        shown: "overcommit-factor.<resource>",
        usage: ArgUse::Ignored,
    },
];

const NODEORDER: &[ArgSpec] = &[
    used("nodeaffinity.weight", WEIGHT),
    used("podaffinity.weight", WEIGHT),
    used("leastrequested.weight", WEIGHT),
    used("balancedresource.weight", WEIGHT),
    used("mostrequested.weight", WEIGHT),
    used("tainttoleration.weight", WEIGHT),
    used("imagelocality.weight", WEIGHT),
    used("podtopologyspread.weight", WEIGHT),
];

const BINPACK: &[ArgSpec] = &[
    used("binpack.weight", WEIGHT),
    used("binpack.cpu", WEIGHT),
    used("binpack.memory", WEIGHT),
    used("binpack.resources", ArgKind::ResourceList),
    ArgSpec {
        key: "binpack.resources.",
        prefix: true,
        shown: "binpack.resources.<resource>",
        usage: ArgUse::Used(WEIGHT),
    },
];

/// fgd's arguments (Caldera's own plugin; see `caldera_plugins::fgd`).
const FGD: &[ArgSpec] = &[
    used("fgd.weight", WEIGHT),
    used("fgd.workloadCoverage", WEIGHT),
];

/// Volcano's network-topology-aware arguments: the HyperNode binpack weights order the
/// domains a gang may go to. Binpacking of pods without a topology rule across HyperNodes
/// (`normal-pod`) and the eviction search's cap are not done: accepted with a warning.
const NETWORK_TOPOLOGY: &[ArgSpec] = &[
    used("weight", WEIGHT),
    used("hypernode.binpack.cpu", WEIGHT),
    used("hypernode.binpack.memory", WEIGHT),
    used("hypernode.binpack.resources", ArgKind::ResourceList),
    ArgSpec {
        key: "hypernode.binpack.resources.",
        prefix: true,
        shown: "hypernode.binpack.resources.<resource>",
        usage: ArgUse::Used(WEIGHT),
    },
    ignored("hypernode.binpack.normal-pod.enable"),
    ignored("hypernode.binpack.normal-pod.fading"),
    ignored("hypernode.gradient.evict.max-hypernodes"),
];

/// Volcano's predicate switches and extras. The switches of checks Caldera makes turn them
/// off as in Volcano; the rest are accepted and reported as ignored.
const PREDICATES: &[ArgSpec] = &[
    used("predicate.NodeAffinityEnable", ArgKind::Bool),
    used("predicate.NodePortsEnable", ArgKind::Bool),
    used("predicate.TaintTolerationEnable", ArgKind::Bool),
    used("predicate.PodAffinityEnable", ArgKind::Bool),
    used("predicate.NodeVolumeLimitsEnable", ArgKind::Bool),
    ignored("predicate.VolumeZoneEnable"),
    used("predicate.PodTopologySpreadEnable", ArgKind::Bool),
    used("predicate.VolumeBindingEnable", ArgKind::Bool),
    ignored("predicate.DynamicResourceAllocationEnable"),
    ignored("predicate.CacheEnable"),
    ignored("predicate.ProportionalEnable"),
    ignored("predicate.GPUSharingEnable"),
    ignored("predicate.GPUNumberEnable"),
    ignored("predicate.resources"),
    ArgSpec {
        key: "predicate.resources.",
        prefix: true,
        shown: "predicate.resources.<resource>.cpu|memory",
        usage: ArgUse::Ignored,
    },
    ArgSpec {
        key: "volumebinding.",
        prefix: true,
        shown: "volumebinding.<setting>",
        usage: ArgUse::Ignored,
    },
    ArgSpec {
        key: "dynamicresources.",
        prefix: true,
        shown: "dynamicresources.<setting>",
        usage: ArgUse::Ignored,
    },
];

/// Volcano's capacity plugin (`pkg/scheduler/plugins/capacity`): `ancestorReclaimLevel` is
/// checked (only 0, Volcano's default, is implemented: the validator refuses more); the DRA
/// quota switches are accepted and ignored: DRA is always on, and how allocated devices count
/// toward queues is not switchable (docs/dra.md).
const CAPACITY: &[ArgSpec] = &[
    used("ancestorReclaimLevel", ArgKind::Int { min: 0 }),
    ignored("capacity.DynamicResourceAllocationEnable"),
    ignored("capacity.DRAConsumableCapacityEnable"),
];

/// Caldera's fairshare plugin (fairness over time, docs/queues.md). `maxWait` (aging against
/// starvation: a gang waiting longer is ordered ahead of its queue and room is held for it;
/// 0, the default, is off). `tenantKey` (`namespace` or a label key) orders a queue's jobs by
/// their tenant's usage, Kueue's Admission Fair Sharing. `window` (a Go duration > 0) makes
/// usage tumble: it starts again from nothing at each multiple of the window since the Unix
/// epoch.
const FAIRSHARE: &[ArgSpec] = &[
    used("halfLife", ArgKind::Duration { zero: true }),
    used("kValue", ArgKind::NonNegative),
    used("resourceWeights", ArgKind::ResourceWeights),
    used("usageWritePeriod", ArgKind::Duration { zero: false }),
    used("window", ArgKind::Duration { zero: false }),
    used("tenantKey", ArgKind::TenantKey),
    used("maxWait", ArgKind::Duration { zero: true }),
    used("minRuntime", ArgKind::Duration { zero: true }),
    used("preemptionDelay", ArgKind::Duration { zero: true }),
];

/// The arguments a supported plugin accepts. gang, priority, drf, proportion and conformance
/// take none in Volcano either (hierarchy is the `enableHierarchy` flag).
pub(crate) fn argument_specs(plugin: &str) -> &'static [ArgSpec] {
    match plugin {
        "capacity" => CAPACITY,
        "overcommit" => OVERCOMMIT,
        "nodeorder" => NODEORDER,
        "binpack" => BINPACK,
        "fgd" => FGD,
        "predicates" => PREDICATES,
        "network-topology-aware" => NETWORK_TOPOLOGY,
        "fairshare" => FAIRSHARE,
        _ => &[],
    }
}

/// The spec that accepts `key`: an exact key first, then the longest matching prefix.
pub(crate) fn lookup<'s>(specs: &'s [ArgSpec], key: &str) -> Option<&'s ArgSpec> {
    specs
        .iter()
        .find(|spec| !spec.prefix && spec.key == key)
        .or_else(|| {
            specs
                .iter()
                .filter(|spec| spec.prefix && key.len() > spec.key.len())
                .filter(|spec| key.starts_with(spec.key))
                .max_by_key(|spec| spec.key.len())
        })
}

/// The candidate `input` was most likely meant to be: same letters ignoring case, Volcano's
/// `enable`/`enabled` mix-up, or at most two edits away.
pub(crate) fn suggest<'c>(input: &str, candidates: &[&'c str]) -> Option<&'c str> {
    let folded = fold(input);
    if let Some(found) = candidates.iter().find(|c| fold(c) == folded) {
        return Some(found);
    }
    if input.chars().count() < 4 {
        return None;
    }
    candidates
        .iter()
        .map(|candidate| (edit_distance(input, candidate), *candidate))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

fn fold(text: &str) -> String {
    let lower = text.to_lowercase();
    match lower.strip_prefix("enabled") {
        Some(rest) => format!("enable{rest}"),
        None => lower,
    }
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, a_char) in a.chars().enumerate() {
        let mut current = Vec::with_capacity(b.len() + 1);
        current.push(i + 1);
        for (j, b_char) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(a_char != *b_char);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_prefers_exact_keys() {
        let exact = lookup(BINPACK, "binpack.resources").map(|spec| spec.shown);
        assert_eq!(exact, Some("binpack.resources"));
        let family = lookup(BINPACK, "binpack.resources.nvidia.com/gpu").map(|spec| spec.shown);
        assert_eq!(family, Some("binpack.resources.<resource>"));
        assert!(lookup(BINPACK, "binpack.resources.").is_none());
        assert!(lookup(BINPACK, "binpack.wieght").is_none());
    }

    #[test]
    fn suggestions() {
        let flags = ["enableJobOrder", "enabledVictim", "enabledClusterOrder"];
        assert_eq!(suggest("enableVictim", &flags), Some("enabledVictim"));
        assert_eq!(
            suggest("EnabledClusterOrder", &flags),
            Some("enabledClusterOrder")
        );
        assert_eq!(suggest("enableJobOrdr", &flags), Some("enableJobOrder"));
        assert_eq!(suggest("nothing", &flags), None);
        assert_eq!(suggest("Gang", &SUPPORTED_PLUGINS), Some("gang"));
        assert_eq!(suggest("bin", &SUPPORTED_PLUGINS), None);
    }
}
