//! The scheduling plugins: gang, priority, drf, proportion, capacity, fairshare, predicates,
//! nodeorder, binpack, fgd, overcommit, conformance, network-topology-aware — with Volcano's names
//! and arguments.
//!
//! Each plugin is built fresh for every session from its config arguments (see
//! [`registry`]); it reads the session's state through the hooks of
//! [`caldera_session::plugin::Plugin`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod binpack;
pub mod capacity;
pub mod conformance;
pub mod drf;
pub mod fairshare;
pub mod fgd;
pub mod gang;
pub mod network_topology;
pub mod nodeorder;
pub mod overcommit;
pub mod predicates;
pub mod priority;
pub mod proportion;

use caldera_config::SchedulerConfig;
use caldera_session::{Registry, Scheduler, SessionError};

/// Every plugin Caldera ships, by its config name.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    let all: [(&'static str, caldera_session::PluginFactory); 13] = [
        ("capacity", capacity::build),
        ("gang", gang::build),
        ("priority", priority::build),
        ("drf", drf::build),
        ("proportion", proportion::build),
        ("predicates", predicates::build),
        ("nodeorder", nodeorder::build),
        ("binpack", binpack::build),
        ("fgd", fgd::build),
        ("overcommit", overcommit::build),
        ("conformance", conformance::build),
        ("network-topology-aware", network_topology::build),
        ("fairshare", fairshare::build),
    ];
    for (name, factory) in all {
        // The names above are distinct, so registration cannot fail.
        let _ = r.register(name, factory);
    }
    r
}

/// A scheduler for `config` with every shipped plugin available.
pub fn scheduler(config: &SchedulerConfig) -> Result<Scheduler, SessionError> {
    Scheduler::new(config, &registry())
}

/// Reads a non-negative integer weight argument, with a default.
pub(crate) fn weight(
    option: &caldera_config::PluginOption,
    key: &str,
    default: i64,
) -> Result<f64, String> {
    match option.arguments.get_i64(key) {
        None if option.arguments.contains_key(key) => {
            Err(format!("argument {key:?} must be an integer"))
        }
        None => Ok(default as f64),
        Some(v) if v < 0 => Err(format!("argument {key:?} must not be negative")),
        Some(v) => Ok(v as f64),
    }
}

/// Volcano's per-resource weights under `prefix` (`binpack`, `hypernode.binpack`):
/// `<prefix>.cpu` and `<prefix>.memory` (default 1), then each resource listed in
/// `<prefix>.resources` (a list or a comma-separated string) with its
/// `<prefix>.resources.<name>` weight (default 1).
pub(crate) fn resource_weights(
    option: &caldera_config::PluginOption,
    prefix: &str,
) -> Result<std::collections::BTreeMap<String, f64>, String> {
    let mut weights = std::collections::BTreeMap::new();
    weights.insert(
        caldera_model::CPU.to_string(),
        weight(option, &format!("{prefix}.cpu"), 1)?,
    );
    weights.insert(
        caldera_model::MEMORY.to_string(),
        weight(option, &format!("{prefix}.memory"), 1)?,
    );
    let key = format!("{prefix}.resources");
    let listed: Vec<String> = match option.arguments.get_list(&key) {
        Some(list) => list.to_vec(),
        None => option
            .arguments
            .get_str(&key)
            .map(|s| {
                s.split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    };
    for name in listed {
        let w = weight(option, &format!("{key}.{name}"), 1)?;
        weights.insert(name, w);
    }
    Ok(weights)
}
