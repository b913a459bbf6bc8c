//! Checks the raw YAML tree key by key and builds the typed [`SchedulerConfig`].
//!
//! Every check names the node it is about with a [`Ptr`]: the key path shown to people and
//! the [`Step`]s that [`raw::locate`] follows to find the line and column. Positions are
//! looked up only for the problem actually reported and for warnings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use crate::catalog::{self, ActionName, ArgKind, ArgUse, PluginName};
use crate::error::{ConfigError, Location};
use crate::plugin::{ArgValue, Arguments, Hook, PluginFlags, PluginOption};
use crate::raw::{self, Raw, Step};
use crate::{
    Action, SchedulerConfig, Tier, DEFAULT_BIND_CONCURRENCY, DEFAULT_SCHEDULER_NAMES,
    DEFAULT_SCHEDULE_PERIOD, DEFAULT_SESSION_DEBOUNCE,
};

/// Keys allowed at the top level, in the order they are listed in messages.
pub const TOP_LEVEL_KEYS: [&str; 13] = [
    "actions",
    "tiers",
    "configurations",
    "metrics",
    "schedulerNames",
    "schedulePeriod",
    "sessionDebounce",
    "gangScheduleTimeout",
    "bindConcurrency",
    "autoscaler",
    "podScheduledEvents",
    "autoGroup",
    "networkTopologyDiscovery",
];

/// `enableNamespaceOrder`: in Volcano up to 1.3, since removed; accepted and ignored.
const LEGACY_NAMESPACE_ORDER: &str = "enableNamespaceOrder";

const EMPTY_DOCUMENT: &str =
    "the config is empty; it needs at least `actions`, e.g. actions: \"enqueue, allocate, backfill\"";

const DURATION_EXAMPLES: &str = "a duration such as \"1s\", \"500ms\" or \"1m30s\"";

/// A node of the document: its key path for people and its steps for the locator.
#[derive(Debug, Clone, Default)]
struct Ptr {
    steps: Vec<Step>,
    path: String,
}

impl Ptr {
    /// The value of the mapping entry at `index`, whose key is `key`.
    fn entry(&self, index: usize, key: &str) -> Ptr {
        let mut steps = self.steps.clone();
        steps.push(Step::Value(index));
        Ptr {
            steps,
            path: join_key(&self.path, key),
        }
    }

    /// The element at `index` of a sequence.
    fn item(&self, index: usize) -> Ptr {
        let mut steps = self.steps.clone();
        steps.push(Step::Index(index));
        Ptr {
            steps,
            path: format!("{}[{index}]", self.path),
        }
    }

    /// The same key path, located at the entry's key rather than its value.
    fn at_key(&self) -> Ptr {
        let mut steps = self.steps.clone();
        if let Some(last) = steps.last_mut() {
            if let Step::Value(index) = *last {
                *last = Step::Key(index);
            }
        }
        Ptr {
            steps,
            path: self.path.clone(),
        }
    }

    /// A key that is missing from this mapping: named by its path, located at the mapping.
    fn missing(&self, key: &str) -> Ptr {
        Ptr {
            steps: self.steps.clone(),
            path: join_key(&self.path, key),
        }
    }
}

/// `tiers[1].plugins[5].arguments["binpack.weight"]`: plain keys join with dots, keys with
/// dots or other punctuation go in brackets so the path stays unambiguous.
fn join_key(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        format!("{parent}[{key:?}]")
    } else if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// A problem (or warning) found in the tree, not yet given a position.
#[derive(Debug)]
struct Problem {
    ptr: Ptr,
    message: String,
    /// Point at the n-th appearance of this text inside the node rather than at its start.
    needle: Option<(String, usize)>,
}

/// The capacity plugin's argument choosing which ancestors reclaim checks.
const RECLAIM_LEVEL: &str = "ancestorReclaimLevel";

fn problem(ptr: &Ptr, message: impl Into<String>) -> Problem {
    Problem {
        ptr: ptr.clone(),
        message: message.into(),
        needle: None,
    }
}

impl Problem {
    fn render(&self, text: &str, origin: Option<&Path>) -> ConfigError {
        let position = raw::locate(text, &self.ptr.steps).map(|start| {
            self.needle
                .as_ref()
                .and_then(|(needle, occurrence)| raw::find_after(text, start, needle, *occurrence))
                .unwrap_or(start)
        });
        ConfigError::Invalid {
            location: Location {
                file: origin.map(Path::to_path_buf),
                line: position.map(|position| position.line),
                column: position.map(|position| position.column),
            },
            key_path: self.ptr.path.clone(),
            message: self.message.clone(),
        }
    }
}

type Checked<T> = Result<T, Problem>;

/// Validates `root` (parsed from `text`) into a config, warnings rendered with positions.
pub(crate) fn validate(
    root: &Raw,
    text: &str,
    origin: Option<&Path>,
) -> Result<SchedulerConfig, ConfigError> {
    if matches!(root, Raw::Null) {
        // Nothing to point at: the parser would place an empty document at its end.
        return Err(ConfigError::Invalid {
            location: Location {
                file: origin.map(Path::to_path_buf),
                line: None,
                column: None,
            },
            key_path: String::new(),
            message: EMPTY_DOCUMENT.to_string(),
        });
    }
    let mut validator = Validator::default();
    match validator.config(root) {
        Ok(mut config) => {
            let mut warnings: Vec<ConfigError> = validator
                .warnings
                .iter()
                .map(|warning| warning.render(text, origin))
                .collect();
            // Checks run key by key in a fixed order; people read top to bottom.
            warnings.sort_by_key(|warning| (warning.line(), warning.column()));
            config.warnings = warnings.iter().map(ToString::to_string).collect();
            Ok(config)
        }
        Err(problem) => Err(problem.render(text, origin)),
    }
}

/// A mapping entry with its key as text.
struct Entry<'r> {
    key: String,
    value: &'r Raw,
    /// Points at the value.
    ptr: Ptr,
}

impl Entry<'_> {
    /// Where to point for a problem with the value: the value itself, or the key when the
    /// value is empty (an empty value has no text of its own; the parser would place it on
    /// whatever comes next).
    fn target(&self) -> Ptr {
        target(self.value, &self.ptr)
    }
}

fn target(raw: &Raw, ptr: &Ptr) -> Ptr {
    if matches!(raw, Raw::Null) {
        ptr.at_key()
    } else {
        ptr.clone()
    }
}

/// The entries of a mapping; rejects other node kinds, non-scalar keys and duplicate keys.
fn mapping<'r>(raw: &'r Raw, ptr: &Ptr, what: &str) -> Checked<Vec<Entry<'r>>> {
    let Raw::Map(pairs) = raw else {
        return Err(problem(
            &target(raw, ptr),
            format!("expected {what}, got {}", raw.describe()),
        ));
    };
    let mut seen = BTreeSet::new();
    let mut entries = Vec::with_capacity(pairs.len());
    for (index, (key, value)) in pairs.iter().enumerate() {
        let Some(key_text) = key.as_key() else {
            let mut key_ptr = ptr.clone();
            key_ptr.steps.push(Step::Key(index));
            return Err(problem(
                &key_ptr,
                format!("expected a string key, got {}", key.describe()),
            ));
        };
        let entry_ptr = ptr.entry(index, &key_text);
        if !seen.insert(key_text.clone()) {
            return Err(problem(
                &entry_ptr.at_key(),
                format!("duplicate key {key_text:?}"),
            ));
        }
        entries.push(Entry {
            key: key_text,
            value,
            ptr: entry_ptr,
        });
    }
    Ok(entries)
}

/// The items of a list; an empty value is an empty list.
fn list<'r>(entry: &Entry<'r>, what: &str) -> Checked<&'r [Raw]> {
    match entry.value {
        Raw::Null => Ok(&[]),
        Raw::Seq(items) => Ok(items),
        other => Err(problem(
            &entry.target(),
            format!("expected {what}, got {}", other.describe()),
        )),
    }
}

fn unknown_key(entry: &Entry, context: &str, known: &[&str]) -> Problem {
    let hint = did_you_mean(&entry.key, known);
    problem(
        &entry.ptr.at_key(),
        format!(
            "unknown key {:?} {context}{hint}; known keys: {}",
            entry.key,
            known.join(", ")
        ),
    )
}

fn did_you_mean(input: &str, candidates: &[&str]) -> String {
    catalog::suggest(input, candidates)
        .map(|found| format!(" (did you mean {found:?}?)"))
        .unwrap_or_default()
}

fn boolean(entry: &Entry) -> Checked<bool> {
    match entry.value {
        Raw::Bool(value) => Ok(*value),
        other => Err(problem(
            &entry.target(),
            format!("expected true or false, got {}", other.describe()),
        )),
    }
}

/// An integer of at least `min`, from a YAML integer or a numeric string.
fn integer(entry: &Entry, min: i64) -> Checked<i64> {
    let parsed = match entry.value {
        Raw::Int(value) => Some(*value),
        Raw::Str(text) => text.trim().parse::<i128>().ok(),
        _ => None,
    };
    let Some(value) = parsed else {
        return Err(problem(
            &entry.target(),
            format!("expected an integer, got {}", entry.value.describe()),
        ));
    };
    match i64::try_from(value) {
        Ok(value) if value >= min => Ok(value),
        _ if value < i128::from(min) => Err(problem(
            &entry.target(),
            format!(
                "expected an integer of at least {min}, got {}",
                entry.value.describe()
            ),
        )),
        _ => Err(problem(
            &entry.target(),
            format!("integer {} is too large", entry.value.describe()),
        )),
    }
}

/// A switch, from a YAML boolean or the strings `true`/`false` (as Volcano reads them).
fn switch(entry: &Entry) -> Checked<bool> {
    match entry.value {
        Raw::Str(text) if text.trim().eq_ignore_ascii_case("true") => Ok(true),
        Raw::Str(text) if text.trim().eq_ignore_ascii_case("false") => Ok(false),
        _ => boolean(entry),
    }
}

/// A finite number, from a YAML number or a numeric string.
fn number(entry: &Entry) -> Checked<f64> {
    let parsed = match entry.value {
        // Config numbers are small factors; the conversion is exact for them.
        Raw::Int(value) => Some(*value as f64),
        Raw::Float(value) => Some(*value),
        Raw::Str(text) => text.trim().parse::<f64>().ok(),
        _ => None,
    };
    match parsed {
        Some(value) if value.is_finite() => Ok(value),
        _ => Err(problem(
            &entry.target(),
            format!("expected a number, got {}", entry.value.describe()),
        )),
    }
}

/// A comma-separated list of resource names, e.g. `nvidia.com/gpu, example.com/foo`.
fn resource_list(entry: &Entry) -> Checked<Vec<String>> {
    let Raw::Str(text) = entry.value else {
        return Err(problem(
            &entry.target(),
            format!(
                "expected a comma-separated list of resource names, got {}",
                entry.value.describe()
            ),
        ));
    };
    let mut names = Vec::new();
    for name in text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        if name.chars().any(char::is_whitespace) {
            return Err(problem(
                &entry.target(),
                format!("invalid resource name {name:?}: resource names have no spaces (separate them with commas)"),
            ));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// fairshare's `tenantKey`: `namespace`, or a label key as Kubernetes accepts one (an
/// optional DNS-subdomain prefix and `/`, then a name of at most 63 characters: letters,
/// digits, `-`, `_`, `.`, starting and ending with a letter or digit).
fn tenant_key(entry: &Entry) -> Checked<String> {
    let Raw::Str(text) = entry.value else {
        return Err(problem(
            &entry.target(),
            format!(
                "expected `namespace` or a label key (example.com/team), got {}",
                entry.value.describe()
            ),
        ));
    };
    let key = text.trim();
    if key == "namespace" || is_label_key(key) {
        Ok(key.to_string())
    } else {
        Err(problem(
            &entry.target(),
            format!("{key:?} is neither `namespace` nor a label key (example.com/team)"),
        ))
    }
}

/// Whether `key` is a valid label key (apimachinery's `IsQualifiedName`).
fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let alnum = |c: char| c.is_ascii_alphanumeric();
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name
            .chars()
            .all(|c| alnum(c) || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.len() <= 63
                    && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

/// A Go-style duration; zero allowed only when `allow_zero`.
fn duration(entry: &Entry, allow_zero: bool) -> Checked<Duration> {
    // Go accepts a bare "0"; YAML reads an unquoted 0 as an integer.
    let text: &str = match entry.value {
        Raw::Str(text) => text,
        Raw::Int(0) => "0",
        _ => {
            return Err(problem(
                &entry.target(),
                format!(
                    "expected {DURATION_EXAMPLES}, got {}",
                    entry.value.describe()
                ),
            ))
        }
    };
    let value = crate::parse_duration(text.trim())
        .map_err(|error| problem(&entry.target(), error.to_string()))?;
    if value.is_zero() && !allow_zero {
        return Err(problem(
            &entry.target(),
            format!("must be longer than zero, got {text:?}"),
        ));
    }
    Ok(value)
}

#[derive(Default)]
struct Validator {
    warnings: Vec<Problem>,
    /// The `consolidate` action's arguments, once read.
    consolidate: Option<crate::ConsolidateConfig>,
}

impl Validator {
    fn warn(&mut self, ptr: &Ptr, message: impl Into<String>) {
        self.warnings.push(problem(ptr, message));
    }

    fn config(&mut self, root: &Raw) -> Checked<SchedulerConfig> {
        let root_ptr = Ptr::default();
        let entries = mapping(root, &root_ptr, "a mapping of config keys")?;
        let mut known: BTreeMap<&str, &Entry> = BTreeMap::new();
        for entry in &entries {
            match entry.key.as_str() {
                "metrics" => self.warn(
                    &entry.ptr.at_key(),
                    "Volcano's metrics settings are not used by Caldera; ignored",
                ),
                key if key.to_lowercase().replace('-', "") == "overcommitfactor" => {
                    return Err(problem(
                        &entry.ptr.at_key(),
                        "not a top-level key: set `overcommit-factor` in the arguments of the overcommit plugin",
                    ))
                }
                key if TOP_LEVEL_KEYS.contains(&key) => {
                    known.insert(key, entry);
                }
                _ => return Err(unknown_key(entry, "at the top level", &TOP_LEVEL_KEYS)),
            }
        }

        let Some(actions_entry) = known.get("actions") else {
            return Err(problem(
                &root_ptr.missing("actions"),
                "missing required key; list the actions to run, e.g. actions: \"enqueue, allocate, backfill\"",
            ));
        };
        let actions = self.actions(actions_entry)?;
        let tiers = match known.get("tiers") {
            Some(entry) => self.tiers(entry)?,
            None => Vec::new(),
        };
        let configurations = match known.get("configurations") {
            Some(entry) => self.configurations(entry, &actions)?,
            None => BTreeMap::new(),
        };
        let scheduler_names = match known.get("schedulerNames") {
            Some(entry) => scheduler_names(entry)?,
            None => DEFAULT_SCHEDULER_NAMES.map(String::from).to_vec(),
        };
        let schedule_period = match known.get("schedulePeriod") {
            Some(entry) => duration(entry, false)?,
            None => DEFAULT_SCHEDULE_PERIOD,
        };
        let session_debounce = match known.get("sessionDebounce") {
            Some(entry) => duration(entry, true)?,
            None => DEFAULT_SESSION_DEBOUNCE,
        };
        let gang_schedule_timeout = match known.get("gangScheduleTimeout") {
            Some(entry) if !matches!(entry.value, Raw::Null) => Some(duration(entry, false)?),
            _ => None,
        };
        let bind_concurrency = match known.get("bindConcurrency") {
            // At least 1, so positive; an i64 that large does not fit a 32-bit usize only.
            Some(entry) => usize::try_from(integer(entry, 1)?).map_err(|_| {
                problem(
                    &entry.target(),
                    format!("integer {} is too large", entry.value.describe()),
                )
            })?,
            None => DEFAULT_BIND_CONCURRENCY,
        };
        let pod_scheduled_events = match known.get("podScheduledEvents") {
            Some(entry) => boolean(entry)?,
            None => true,
        };

        let autoscaler = match known.get("autoscaler") {
            Some(entry) => autoscaler(entry)?,
            None => None,
        };
        let auto_group = match known.get("autoGroup") {
            Some(entry) => auto_group(entry)?,
            None => crate::AutoGroupConfig::default(),
        };

        let network_topology_discovery = match known.get("networkTopologyDiscovery") {
            Some(entry) => discovery(entry)?,
            None => None,
        };

        let consolidate = self.consolidate.take().unwrap_or_default();
        Ok(SchedulerConfig {
            consolidate,
            autoscaler,
            auto_group,
            network_topology_discovery,
            actions,
            tiers,
            configurations,
            scheduler_names,
            schedule_period,
            session_debounce,
            gang_schedule_timeout,
            bind_concurrency,
            pod_scheduled_events,
            warnings: Vec::new(),
        })
    }

    /// `actions: "enqueue, allocate, backfill"`: names in run order, each once.
    fn actions(&mut self, entry: &Entry) -> Checked<Vec<Action>> {
        let Raw::Str(text) = entry.value else {
            return Err(problem(
                &entry.target(),
                format!(
                    "expected a comma-separated string of action names such as \"enqueue, allocate, backfill\", got {}",
                    entry.value.describe()
                ),
            ));
        };
        if text.trim().is_empty() {
            return Err(problem(
                &entry.target(),
                "no actions listed; e.g. \"enqueue, allocate, backfill\"",
            ));
        }
        let implemented = Action::ALL.map(Action::name).join(", ");
        let mut actions = Vec::new();
        let mut offset = 0;
        for part in text.split(',') {
            let name = part.trim();
            let name_offset = offset + (part.len() - part.trim_start().len());
            offset += part.len() + 1;
            let at_name = |message: String| Problem {
                ptr: entry.ptr.clone(),
                message,
                needle: Some((name.to_string(), text[..name_offset].matches(name).count())),
            };
            if name.is_empty() {
                return Err(problem(
                    &entry.ptr,
                    format!("empty action name in {text:?} (a stray comma?)"),
                ));
            }
            match catalog::action(name) {
                ActionName::Implemented(action) if actions.contains(&action) => {
                    return Err(at_name(format!("action {name:?} is listed twice")));
                }
                ActionName::Implemented(action) => actions.push(action),
                ActionName::Unimplemented => {
                    return Err(at_name(format!(
                        "action {name:?} is a Volcano action that Caldera does not implement yet; implemented actions: {implemented}"
                    )));
                }
                ActionName::Unknown => {
                    let hint = did_you_mean(name, &catalog::all_action_names());
                    return Err(at_name(format!(
                        "unknown action {name:?}{hint}; known actions: {implemented} (Volcano's {} is not implemented yet)",
                        catalog::UNIMPLEMENTED_ACTIONS.join(", ")
                    )));
                }
            }
        }
        Ok(actions)
    }

    /// `tiers: [{plugins: [...]}, ...]`.
    fn tiers(&mut self, entry: &Entry) -> Checked<Vec<Tier>> {
        let items = list(entry, "a list of tiers, each a mapping with `plugins`")?;
        let mut seen: BTreeMap<String, Ptr> = BTreeMap::new();
        let mut tiers = Vec::with_capacity(items.len());
        let mut drf_hierarchy: Option<Ptr> = None;
        for (index, raw) in items.iter().enumerate() {
            let tier_ptr = entry.ptr.item(index);
            let mut plugins = Vec::new();
            for tier_entry in mapping(raw, &tier_ptr, "a tier (a mapping with `plugins`)")? {
                if tier_entry.key != "plugins" {
                    return Err(unknown_key(&tier_entry, "in a tier", &["plugins"]));
                }
                let items = list(
                    &tier_entry,
                    "a list of plugin options, each a mapping with `name`",
                )?;
                for (index, raw) in items.iter().enumerate() {
                    let plugin_ptr = tier_entry.ptr.item(index);
                    let (option, hierarchy) = self.plugin(raw, &plugin_ptr, &mut seen)?;
                    if option.name == "drf" {
                        drf_hierarchy = hierarchy;
                    }
                    plugins.push(option);
                }
            }
            tiers.push(Tier { plugins });
        }
        if let (Some(capacity), Some(proportion)) = (seen.get("capacity"), seen.get("proportion")) {
            // Volcano's capacity and proportion are alternatives: both would own the queues'
            // deserved shares, capabilities and order.
            return Err(problem(
                capacity,
                format!(
                    "the capacity and proportion plugins cannot both be enabled (proportion is at {}): they are alternative queue-share plugins; keep one",
                    proportion.path
                ),
            ));
        }
        if let Some(fair) = seen.get("fairshare") {
            // Usage adjusts a queue-share plugin's split: proportion's weighted split, or
            // what capacity hands out beyond the deserved shares. Alone there is nothing to
            // adjust.
            if !seen.contains_key("proportion") && !seen.contains_key("capacity") {
                return Err(problem(
                    fair,
                    "the fairshare plugin adjusts the proportion or capacity plugin's split; enable one of them too",
                ));
            }
        }
        if let Some(flag) = drf_hierarchy {
            if seen.contains_key("proportion") {
                // Volcano refuses this pair too: both would own the queues' shares.
                return Err(problem(
                    &flag,
                    "drf with enableHierarchy: true cannot be combined with the proportion plugin",
                ));
            }
        }
        Ok(tiers)
    }

    /// One plugin option; also returns where `enableHierarchy: true` was set, if it was.
    fn plugin(
        &mut self,
        raw: &Raw,
        ptr: &Ptr,
        seen: &mut BTreeMap<String, Ptr>,
    ) -> Checked<(PluginOption, Option<Ptr>)> {
        let entries = mapping(raw, ptr, "a plugin option (a mapping with `name`)")?;
        let Some(name_entry) = entries.iter().find(|entry| entry.key == "name") else {
            return Err(problem(
                &ptr.missing("name"),
                "missing required key; every plugin option needs a `name`",
            ));
        };
        let Raw::Str(name) = name_entry.value else {
            return Err(problem(
                &name_entry.target(),
                format!(
                    "expected a plugin name, got {}",
                    name_entry.value.describe()
                ),
            ));
        };
        let supported = catalog::SUPPORTED_PLUGINS.join(", ");
        match catalog::plugin(name) {
            PluginName::Supported => {}
            PluginName::VolcanoOnly => {
                return Err(problem(
                    &name_entry.ptr,
                    format!("plugin {name:?} is a Volcano plugin not supported by Caldera; supported plugins: {supported}"),
                ));
            }
            PluginName::Unknown => {
                let hint = did_you_mean(name, &catalog::SUPPORTED_PLUGINS);
                return Err(problem(
                    &name_entry.ptr,
                    format!("unknown plugin {name:?}{hint}; supported plugins: {supported}"),
                ));
            }
        }
        if let Some(first) = seen.get(name) {
            return Err(problem(
                &name_entry.ptr,
                format!("plugin {name:?} is listed twice (first at {})", first.path),
            ));
        }
        seen.insert(name.clone(), ptr.clone());

        let mut flags = PluginFlags::default();
        let mut arguments = Arguments::new();
        let mut hierarchy = None;
        for entry in &entries {
            match entry.key.as_str() {
                "name" => {}
                "arguments" => {
                    arguments = self.arguments(name, entry)?;
                    // A window over no memory changes nothing: said, not refused (the pair
                    // is consistent, only idle).
                    let no_memory = match arguments.get("halfLife") {
                        Some(ArgValue::Int(0)) => true,
                        Some(ArgValue::Str(t)) => {
                            crate::parse_duration(t.trim()).is_ok_and(|d| d.is_zero())
                        }
                        _ => false,
                    };
                    if name == "fairshare" && no_memory && arguments.contains_key("window") {
                        self.warn(
                            &entry.ptr.at_key(),
                            "window has no effect with halfLife 0 (no memory of past use)",
                        );
                    }
                }
                LEGACY_NAMESPACE_ORDER => {
                    boolean(entry)?;
                    self.warn(
                        &entry.ptr.at_key(),
                        "flag of Volcano 1.3 and earlier, not used by Caldera; ignored",
                    );
                }
                key => {
                    let Some(hook) = Hook::from_key(key) else {
                        let known: Vec<&str> = ["name", "arguments"]
                            .into_iter()
                            .chain(Hook::ALL.map(Hook::key))
                            .collect();
                        return Err(unknown_key(entry, "in a plugin option", &known));
                    };
                    let value = boolean(entry)?;
                    flags.set(hook, Some(value));
                    if hook == Hook::Hierarchy && value && name != "capacity" {
                        self.warn(
                            &entry.ptr,
                            "hierarchical queues are not implemented by Caldera; shares are computed flat",
                        );
                        hierarchy = Some(entry.ptr.clone());
                    }
                }
            }
        }
        if name == "capacity" && arguments.contains_key(RECLAIM_LEVEL) {
            let level = arguments.get_i64(RECLAIM_LEVEL).unwrap_or(0);
            if level > 0 || flags.enabled(Hook::Hierarchy) {
                let at = entries
                    .iter()
                    .find(|e| e.key == "arguments")
                    .map(|e| e.ptr.clone())
                    .unwrap_or_else(|| ptr.clone());
                // Volcano's level N adds, on N ancestor levels, a deserved check on the victim
                // side and a reclaimer side that may reclaim while an ancestor is below its
                // share; level 0 checks the victim's own queue only. Caldera does neither
                // exactly: it checks every queue on the victim's path below the common
                // ancestor, at any level, and reclaims only for a queue below its own share.
                let what = if level > 0 {
                    format!("Volcano's level {level} lets a queue at its deserved share reclaim while one of its {level} nearest ancestors is below its own, which Caldera does not do")
                } else {
                    "Volcano's 0 checks the victim's own queue only".to_string()
                };
                return Err(problem(
                    &at,
                    format!("{RECLAIM_LEVEL} {level} is not supported: {what}; with hierarchical queues Caldera's reclaim keeps every queue on a victim's path below the reclaimer's family at or above its deserved share, whatever the level (docs/queues.md); remove the argument"),
                ));
            }
        }
        let option = PluginOption {
            name: name.clone(),
            flags,
            arguments,
        };
        Ok((option, hierarchy))
    }

    /// A plugin's `arguments`, checked against what the plugin accepts.
    fn arguments(&mut self, plugin: &str, entry: &Entry) -> Checked<Arguments> {
        if matches!(entry.value, Raw::Null) {
            return Ok(Arguments::new());
        }
        let specs = catalog::argument_specs(plugin);
        let entries = mapping(
            entry.value,
            &entry.ptr,
            "a mapping of argument names to values",
        )?;
        let mut arguments = Arguments::new();
        for argument in &entries {
            let Some(spec) = catalog::lookup(specs, &argument.key) else {
                let message = if specs.is_empty() {
                    format!(
                        "unknown argument {:?}: the {plugin} plugin takes no arguments",
                        argument.key
                    )
                } else {
                    let known: Vec<&str> = specs.iter().map(|spec| spec.shown).collect();
                    format!(
                        "unknown argument {:?} for the {plugin} plugin{}; known arguments: {}",
                        argument.key,
                        did_you_mean(&argument.key, &known),
                        known.join(", ")
                    )
                };
                return Err(problem(&argument.ptr.at_key(), message));
            };
            let value = match spec.usage {
                ArgUse::Ignored => {
                    self.warn(
                        &argument.ptr.at_key(),
                        format!("Volcano argument of the {plugin} plugin that Caldera does not use; ignored"),
                    );
                    continue;
                }
                ArgUse::Used(ArgKind::Int { min }) => ArgValue::Int(integer(argument, min)?),
                ArgUse::Used(ArgKind::Number) => ArgValue::Float(number(argument)?),
                ArgUse::Used(ArgKind::Bool) => ArgValue::Bool(switch(argument)?),
                ArgUse::Used(ArgKind::ResourceList) => ArgValue::List(resource_list(argument)?),
                ArgUse::Used(ArgKind::NonNegative) => {
                    let value = number(argument)?;
                    if value < 0.0 {
                        return Err(problem(
                            &argument.target(),
                            format!("{} must not be negative, got {value}", argument.key),
                        ));
                    }
                    ArgValue::Float(value)
                }
                ArgUse::Used(ArgKind::Duration { zero }) => {
                    duration(argument, zero)?;
                    let text = match argument.value {
                        Raw::Str(text) => text.trim().to_string(),
                        _ => "0".to_string(),
                    };
                    ArgValue::Str(text)
                }
                ArgUse::Used(ArgKind::TenantKey) => ArgValue::Str(tenant_key(argument)?),
                ArgUse::Used(ArgKind::ResourceWeights) => {
                    let weights = mapping(
                        argument.value,
                        &argument.ptr,
                        "a mapping of resource names to weights (nvidia.com/gpu: 1, cpu: 0.1)",
                    )?;
                    for weight in &weights {
                        let value = number(weight)?;
                        if value < 0.0 {
                            return Err(problem(
                                &weight.target(),
                                format!(
                                    "the weight of {} must not be negative, got {value}",
                                    weight.key
                                ),
                            ));
                        }
                        arguments.insert(
                            format!("{}.{}", argument.key, weight.key),
                            ArgValue::Float(value),
                        );
                    }
                    continue;
                }
            };
            arguments.insert(argument.key.clone(), value);
        }
        if plugin == "binpack" {
            let listed = arguments.get_list("binpack.resources").unwrap_or(&[]);
            for argument in &entries {
                if let Some(resource) = argument.key.strip_prefix("binpack.resources.") {
                    if !listed.iter().any(|name| name == resource) {
                        self.warn(
                            &argument.ptr.at_key(),
                            format!("{resource:?} is not listed in binpack.resources, so this weight is ignored (as in Volcano)"),
                        );
                    }
                }
            }
        }
        Ok(arguments)
    }

    /// `configurations: [{name: <action>, arguments: {...}}]`: per-action arguments.
    fn configurations(
        &mut self,
        entry: &Entry,
        actions: &[Action],
    ) -> Checked<BTreeMap<String, Arguments>> {
        let items = list(
            entry,
            "a list of action configurations, each a mapping with `name` and `arguments`",
        )?;
        let mut configurations: BTreeMap<String, Arguments> = BTreeMap::new();
        let mut first_at: BTreeMap<String, Ptr> = BTreeMap::new();
        for (index, raw) in items.iter().enumerate() {
            let ptr = entry.ptr.item(index);
            let entries = mapping(raw, &ptr, "an action configuration (a mapping with `name`)")?;
            let Some(name_entry) = entries.iter().find(|entry| entry.key == "name") else {
                return Err(problem(
                    &ptr.missing("name"),
                    "missing required key; every action configuration needs the action's `name`",
                ));
            };
            let Raw::Str(name) = name_entry.value else {
                return Err(problem(
                    &name_entry.target(),
                    format!(
                        "expected an action name, got {}",
                        name_entry.value.describe()
                    ),
                ));
            };
            let in_use = match catalog::action(name) {
                ActionName::Implemented(action) => actions.contains(&action),
                ActionName::Unimplemented => false,
                ActionName::Unknown => {
                    let hint = did_you_mean(name, &catalog::all_action_names());
                    return Err(problem(
                        &name_entry.ptr,
                        format!(
                            "unknown action {name:?}{hint}; known actions: {}",
                            catalog::all_action_names().join(", ")
                        ),
                    ));
                }
            };
            if let Some(first) = first_at.get(name) {
                return Err(problem(
                    &name_entry.ptr,
                    format!(
                        "action {name:?} is configured twice (first at {})",
                        first.path
                    ),
                ));
            }
            first_at.insert(name.clone(), ptr.clone());
            if !in_use {
                self.warn(
                    &name_entry.ptr,
                    format!("action {name:?} is not run (not in `actions`); this configuration is ignored"),
                );
            }

            let mut arguments = Arguments::new();
            for config_entry in &entries {
                match config_entry.key.as_str() {
                    "name" => {}
                    "arguments" => {
                        arguments = self.action_arguments(name, config_entry, in_use)?;
                    }
                    _ => {
                        return Err(unknown_key(
                            config_entry,
                            "in an action configuration",
                            &["name", "arguments"],
                        ))
                    }
                }
            }
            configurations.insert(name.clone(), arguments);
        }
        Ok(configurations)
    }

    /// An action's arguments: kept as given (scalars only). Caldera's actions read none yet,
    /// so each one is also reported as ignored.
    fn action_arguments(
        &mut self,
        action: &str,
        entry: &Entry,
        in_use: bool,
    ) -> Checked<Arguments> {
        if matches!(entry.value, Raw::Null) {
            return Ok(Arguments::new());
        }
        let mut arguments = Arguments::new();
        let mut consolidate = crate::ConsolidateConfig::default();
        for argument in mapping(
            entry.value,
            &entry.ptr,
            "a mapping of argument names to values",
        )? {
            if action == "consolidate" {
                match argument.key.as_str() {
                    "minRuntime" => consolidate.min_runtime = duration(&argument, true)?,
                    "holdTimeout" => consolidate.hold_timeout = duration(&argument, false)?,
                    "maxPods" | "maxGPUs" => {
                        let min = i64::from(argument.key == "maxPods");
                        let n = u32::try_from(integer(&argument, min)?).map_err(|_| {
                            problem(
                                &argument.target(),
                                format!("integer {} is too large", argument.value.describe()),
                            )
                        })?;
                        if argument.key == "maxPods" {
                            consolidate.max_pods = n;
                        } else {
                            consolidate.max_gpus = n;
                        }
                    }
                    _ => {
                        return Err(unknown_key(
                            &argument,
                            "in the consolidate action's arguments",
                            &["minRuntime", "maxPods", "maxGPUs", "holdTimeout"],
                        ))
                    }
                }
                if in_use {
                    self.consolidate = Some(consolidate.clone());
                }
                continue;
            }
            let value = match argument.value {
                Raw::Bool(value) => ArgValue::Bool(*value),
                Raw::Int(value) => ArgValue::Int(i64::try_from(*value).map_err(|_| {
                    problem(&argument.ptr, format!("integer {value} is too large"))
                })?),
                Raw::Float(value) => ArgValue::Float(*value),
                Raw::Str(value) => ArgValue::Str(value.clone()),
                other => {
                    return Err(problem(
                        &argument.target(),
                        format!(
                            "expected a string, number or boolean, got {}",
                            other.describe()
                        ),
                    ))
                }
            };
            if in_use {
                self.warn(
                    &argument.ptr.at_key(),
                    format!("Caldera's {action} action takes no arguments; ignored"),
                );
            }
            arguments.insert(argument.key.clone(), value);
        }
        Ok(arguments)
    }
}

/// `schedulerNames: [caldera, volcano]`: the pods' `schedulerName`s this scheduler serves.
fn scheduler_names(entry: &Entry) -> Checked<Vec<String>> {
    let items = match entry.value {
        Raw::Seq(items) => items,
        other => {
            return Err(problem(
                &entry.target(),
                format!(
                    "expected a list of scheduler names, got {}",
                    other.describe()
                ),
            ))
        }
    };
    if items.is_empty() {
        return Err(problem(
            &entry.ptr,
            "empty list: Caldera would schedule no pods; list at least one scheduler name",
        ));
    }
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let ptr = entry.ptr.item(index);
        let Raw::Str(name) = item else {
            return Err(problem(
                &ptr,
                format!("expected a scheduler name, got {}", item.describe()),
            ));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(problem(&ptr, "empty scheduler name"));
        }
        if names.iter().any(|known| known == name) {
            return Err(problem(
                &ptr,
                format!("scheduler name {name:?} is listed twice"),
            ));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

/// Keys of `autoGroup`.
const AUTO_GROUP_KEYS: [&str; 2] = ["enabled", "namespaces"];

/// `autoGroup: {enabled, namespaces}`: gangs derived from workloads (docs/workloads.md).
fn auto_group(entry: &Entry) -> Checked<crate::AutoGroupConfig> {
    let mut out = crate::AutoGroupConfig::default();
    if matches!(entry.value, Raw::Null) {
        return Ok(out);
    }
    for e in mapping(
        entry.value,
        &entry.ptr,
        "a mapping with the keys enabled and namespaces",
    )? {
        match e.key.as_str() {
            "enabled" => out.enabled = boolean(&e)?,
            "namespaces" => {
                out.namespaces = match e.value {
                    Raw::Null => None,
                    Raw::Seq(items) => {
                        let mut names = Vec::with_capacity(items.len());
                        for (index, item) in items.iter().enumerate() {
                            let ptr = e.ptr.item(index);
                            let Raw::Str(name) = item else {
                                return Err(problem(
                                    &ptr,
                                    format!("expected a namespace name, got {}", item.describe()),
                                ));
                            };
                            let name = name.trim();
                            if name.is_empty() {
                                return Err(problem(&ptr, "empty namespace name"));
                            }
                            names.push(name.to_string());
                        }
                        names.sort();
                        names.dedup();
                        Some(names)
                    }
                    other => {
                        return Err(problem(
                            &e.target(),
                            format!(
                                "expected a list of namespace names, got {}",
                                other.describe()
                            ),
                        ))
                    }
                }
            }
            _ => return Err(unknown_key(&e, "in autoGroup", &AUTO_GROUP_KEYS)),
        }
    }
    Ok(out)
}

/// Keys of a `networkTopologyDiscovery` entry (Volcano's).
const DISCOVERY_KEYS: [&str; 5] = ["source", "enabled", "interval", "config", "credentials"];
/// Keys of a label source's `config`.
const LABEL_SOURCE_KEYS: [&str; 2] = ["labels", "networkTopologyTypes"];

/// One label key of a discovery level list.
fn label_key(raw: &Raw, ptr: &Ptr) -> Checked<String> {
    let Raw::Str(key) = raw else {
        return Err(problem(
            &target(raw, ptr),
            format!("expected a node label key, got {}", raw.describe()),
        ));
    };
    let key = key.trim();
    if key.is_empty() {
        return Err(problem(ptr, "empty node label key"));
    }
    Ok(key.to_string())
}

/// A level list, lowest tier first: no key twice, at least one key.
fn levels_checked(levels: Vec<String>, ptr: &Ptr) -> Checked<Vec<String>> {
    let mut seen = BTreeSet::new();
    for key in &levels {
        if !seen.insert(key) {
            return Err(problem(ptr, format!("node label {key:?} is listed twice")));
        }
    }
    if levels.is_empty() {
        return Err(problem(
            ptr,
            "no node label keys: list at least one (the lowest tier's first)",
        ));
    }
    Ok(levels)
}

/// `networkTopologyDiscovery`: Volcano's list of discovery sources. Caldera discovers from
/// node labels (`source: label`); an enabled `ufm` or `roce` source is refused, since
/// Caldera cannot honour it. The label source's `config` takes Caldera's `labels` (keys,
/// lowest tier first) or Volcano's `networkTopologyTypes` (per type, keys from the highest
/// tier down to the node-level label, which makes no HyperNode), or both.
fn discovery(entry: &Entry) -> Checked<Option<Box<crate::NetworkTopologyDiscovery>>> {
    let items = list(entry, "a list of discovery sources, e.g. - source: label")?;
    let mut out = crate::NetworkTopologyDiscovery::default();
    let mut any = false;
    for (index, item) in items.iter().enumerate() {
        let ptr = entry.ptr.item(index);
        let mut source = None;
        let mut enabled = true;
        let mut interval = None;
        let mut config = None;
        for e in mapping(item, &ptr, "a discovery source, e.g. source: label")? {
            match e.key.as_str() {
                "source" => match e.value {
                    Raw::Str(s) => source = Some((s.trim().to_string(), e.target())),
                    other => {
                        return Err(problem(
                            &e.target(),
                            format!(
                                "expected a source name such as label, got {}",
                                other.describe()
                            ),
                        ))
                    }
                },
                "enabled" => enabled = boolean(&e)?,
                "interval" => interval = Some(duration(&e, false)?),
                "config" => config = Some(e),
                "credentials" => {}
                _ => {
                    return Err(unknown_key(
                        &e,
                        "in a networkTopologyDiscovery source",
                        &DISCOVERY_KEYS,
                    ))
                }
            }
        }
        let Some((source, source_ptr)) = source else {
            return Err(problem(
                &ptr.missing("source"),
                "missing key source (label)",
            ));
        };
        if !enabled {
            continue;
        }
        if source != "label" {
            return Err(problem(
                &source_ptr,
                format!(
                    "discovery source {source:?} is not supported: Caldera discovers HyperNodes from node labels only (source: label); set enabled: false or remove it"
                ),
            ));
        }
        let Some(config) = config else {
            return Err(problem(
                &ptr.missing("config"),
                "missing key config: the label source needs labels (node label keys, lowest tier first)",
            ));
        };
        let before = out.label_levels.len();
        for c in mapping(
            config.value,
            &config.ptr,
            "a mapping with labels or networkTopologyTypes",
        )? {
            match c.key.as_str() {
                "labels" => {
                    let keys = list(&c, "a list of node label keys, lowest tier first")?;
                    let mut levels = Vec::with_capacity(keys.len());
                    for (i, k) in keys.iter().enumerate() {
                        levels.push(label_key(k, &c.ptr.item(i))?);
                    }
                    out.label_levels.push(levels_checked(levels, &c.target())?);
                }
                "networkTopologyTypes" => {
                    for t in mapping(
                        c.value,
                        &c.ptr,
                        "a mapping of topology type names to label lists",
                    )? {
                        let entries = list(&t, "a list of {nodeLabel: key}, highest tier first, ending with the node-level label")?;
                        let mut keys = Vec::with_capacity(entries.len());
                        for (i, raw) in entries.iter().enumerate() {
                            let iptr = t.ptr.item(i);
                            let mut key = None;
                            for l in mapping(raw, &iptr, "a mapping {nodeLabel: key}")? {
                                if l.key != "nodeLabel" {
                                    return Err(unknown_key(
                                        &l,
                                        "in a networkTopologyTypes level",
                                        &["nodeLabel"],
                                    ));
                                }
                                key = Some(label_key(l.value, &l.ptr)?);
                            }
                            let Some(key) = key else {
                                return Err(problem(
                                    &iptr.missing("nodeLabel"),
                                    "missing key nodeLabel",
                                ));
                            };
                            keys.push(key);
                        }
                        // The last level is the node itself (kubernetes.io/hostname in
                        // Volcano's examples): it makes no HyperNode.
                        let keys_ptr = t.target();
                        if keys.len() < 2 {
                            return Err(problem(
                                &keys_ptr,
                                "needs at least two levels: the domains' label, then the node-level label (kubernetes.io/hostname)",
                            ));
                        }
                        let mut seen = BTreeSet::new();
                        if let Some(dup) = keys.iter().find(|k| !seen.insert(*k)) {
                            return Err(problem(
                                &keys_ptr,
                                format!("node label {dup:?} is listed twice"),
                            ));
                        }
                        keys.pop();
                        keys.reverse();
                        out.label_levels.push(levels_checked(keys, &keys_ptr)?);
                    }
                }
                _ => {
                    return Err(unknown_key(
                        &c,
                        "in the label source's config",
                        &LABEL_SOURCE_KEYS,
                    ))
                }
            }
        }
        if out.label_levels.len() == before {
            return Err(problem(
                &config.target(),
                "the label source lists no labels: give labels (node label keys, lowest tier first)",
            ));
        }
        if let Some(i) = interval {
            out.interval = i;
        }
        any = true;
    }
    Ok(any.then(|| Box::new(out)))
}

/// Keys of `autoscaler`.
const AUTOSCALER_KEYS: [&str; 1] = ["provisioningRequest"];
/// Keys of `autoscaler.provisioningRequest`.
const PROVISIONING_KEYS: [&str; 6] = [
    "enabled",
    "className",
    "retry",
    "bookingTimeout",
    "maxWait",
    "allGangs",
];

/// `autoscaler: {provisioningRequest: {...}}`: on when the section is there, unless
/// `enabled: false`.
fn autoscaler(entry: &Entry) -> Checked<Option<Box<crate::ProvisioningRequestConfig>>> {
    if matches!(entry.value, Raw::Null) {
        return Ok(None);
    }
    let mut out = None;
    for e in mapping(
        entry.value,
        &entry.ptr,
        "a mapping with the key provisioningRequest",
    )? {
        if e.key != "provisioningRequest" {
            return Err(unknown_key(&e, "in autoscaler", &AUTOSCALER_KEYS));
        }
        if matches!(e.value, Raw::Null) {
            out = Some(Box::default());
            continue;
        }
        let mut c = crate::ProvisioningRequestConfig::default();
        let mut enabled = true;
        for k in mapping(e.value, &e.ptr, "a mapping of provisioningRequest settings")? {
            match k.key.as_str() {
                "enabled" => enabled = boolean(&k)?,
                "allGangs" => c.all_gangs = boolean(&k)?,
                "retry" => c.retry = duration(&k, false)?,
                "bookingTimeout" => c.booking_timeout = duration(&k, false)?,
                "maxWait" => {
                    c.max_wait = match k.value {
                        Raw::Null => None,
                        _ => Some(duration(&k, false)?),
                    }
                }
                "className" => {
                    let Raw::Str(name) = k.value else {
                        return Err(problem(
                            &k.target(),
                            format!(
                                "expected a provisioning class name, got {}",
                                k.value.describe()
                            ),
                        ));
                    };
                    let name = name.trim();
                    let valid = !name.is_empty()
                        && name.len() <= 253
                        && name.split('.').all(|part| {
                            !part.is_empty()
                                && part.bytes().all(|b| {
                                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'
                                })
                                && !part.starts_with('-')
                                && !part.ends_with('-')
                        });
                    if !valid {
                        return Err(problem(
                            &k.target(),
                            format!("{name:?} is not a valid provisioning class name (lower-case DNS subdomain, e.g. best-effort-atomic-scale-up.autoscaling.x-k8s.io)"),
                        ));
                    }
                    c.class_name = name.to_string();
                }
                _ => {
                    return Err(unknown_key(
                        &k,
                        "in autoscaler.provisioningRequest",
                        &PROVISIONING_KEYS,
                    ))
                }
            }
        }
        out = enabled.then(|| Box::new(c));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths() {
        assert_eq!(join_key("", "tiers"), "tiers");
        assert_eq!(join_key("tiers[0]", "plugins"), "tiers[0].plugins");
        assert_eq!(
            join_key("a.arguments", "binpack.weight"),
            "a.arguments[\"binpack.weight\"]"
        );
        assert_eq!(
            join_key("a.arguments", "overcommit-factor"),
            "a.arguments.overcommit-factor"
        );
    }
}
