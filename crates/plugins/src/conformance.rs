//! conformance: keeps kube-system and system-critical pods from ever being chosen as victims.
//!
//! Caldera has no preempt or reclaim action yet, so no victims are chosen and this plugin has
//! no hook to answer; it is accepted so Volcano configs load, and will filter victims when
//! those actions arrive.

use caldera_config::PluginOption;
use caldera_session::plugin::Plugin;

/// The conformance plugin.
#[derive(Debug, Default)]
pub struct Conformance;

/// Builds the plugin (it takes no arguments).
pub fn build(_: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(Conformance))
}

impl Plugin for Conformance {
    fn name(&self) -> &'static str {
        "conformance"
    }
}
