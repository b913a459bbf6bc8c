//! network-topology-aware: how the domains a topology-constrained gang may go to are ordered
//! (Volcano's HyperNode binpack score). The topology rule itself (`networkTopology`,
//! `spec.topology`) is honoured by the session with or without this plugin; the plugin only
//! sets the weights.
//!
//! Arguments, as Volcano's: `weight` (default 1; 0 turns the fullest-first order off, so
//! domains are tried by name), `hypernode.binpack.cpu` and `hypernode.binpack.memory` (1),
//! `hypernode.binpack.resources` (comma-separated extra resources) and
//! `hypernode.binpack.resources.<name>` (1 for each listed). As in Volcano, a resource not
//! listed does not count.

use caldera_config::PluginOption;
use caldera_model::{CPU, MEMORY};
use caldera_session::plugin::Plugin;
use std::collections::BTreeMap;

/// The network-topology-aware plugin.
#[derive(Debug)]
pub struct NetworkTopologyAware {
    /// Weight per resource name, each already multiplied by the plugin's `weight`.
    weights: BTreeMap<String, f64>,
}

/// Builds the plugin from its Volcano arguments.
pub fn build(option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    let global = crate::weight(option, "weight", 1)?;
    let mut weights = BTreeMap::new();
    weights.insert(
        CPU.to_string(),
        crate::weight(option, "hypernode.binpack.cpu", 1)?,
    );
    weights.insert(
        MEMORY.to_string(),
        crate::weight(option, "hypernode.binpack.memory", 1)?,
    );
    let listed: Vec<String> = match option.arguments.get_list("hypernode.binpack.resources") {
        Some(list) => list.to_vec(),
        None => option
            .arguments
            .get_str("hypernode.binpack.resources")
            .map(|s| {
                s.split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    };
    for name in listed {
        let key = format!("hypernode.binpack.resources.{name}");
        let w = crate::weight(option, &key, 1)?;
        weights.insert(name, w);
    }
    for w in weights.values_mut() {
        *w *= global;
    }
    Ok(Box::new(NetworkTopologyAware { weights }))
}

impl Plugin for NetworkTopologyAware {
    fn name(&self) -> &'static str {
        "network-topology-aware"
    }

    fn domain_weights(&self) -> Option<&BTreeMap<String, f64>> {
        Some(&self.weights)
    }
}
