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
    let mut weights = crate::resource_weights(option, "hypernode.binpack")?;
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
