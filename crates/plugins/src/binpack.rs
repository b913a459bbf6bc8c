//! binpack: prefer nodes that the member fills most, weighted per resource, so whole nodes
//! stay free for whole-node gangs (SPEC §6).
//!
//! score = Σ over requested resources with a weight of weight × (used + request)/allocatable,
//! divided by Σ of those weights, × 10 × `binpack.weight`; a resource that would not fit
//! scores the node 0.
//!
//! **DRA devices**: a member whose one claim asks devices of one class, whole or a share of
//! each ([`caldera_session::devices::Devices::share_ask`]), is scored on that class as on a
//! resource named by the class (`binpack.resources: gpu.nvidia.com`): allocatable is the
//! node's devices of the class, used what they hold (a device half taken counts ½), the
//! request `count × share`. So binpack packs shared GPUs as it packs `nvidia.com/gpu`, which
//! a node whose GPUs are DRA devices does not list.

use caldera_config::PluginOption;
use caldera_model::{Node, Task};
use caldera_session::plugin::Plugin;
use caldera_session::state::State;
use std::collections::BTreeMap;

/// The binpack plugin.
#[derive(Debug)]
pub struct Binpack {
    weight: f64,
    /// Weight per resource name (cpu and memory included).
    resources: BTreeMap<String, f64>,
}

/// Builds the plugin from `binpack.weight` (default 1), `binpack.cpu` (1), `binpack.memory`
/// (1), `binpack.resources` (comma-separated extra resources) and
/// `binpack.resources.<name>` (default 1 for each listed resource).
pub fn build(option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    let resources = crate::resource_weights(option, "binpack")?;
    Ok(Box::new(Binpack {
        weight: crate::weight(option, "binpack.weight", 1)?,
        resources,
    }))
}

impl Plugin for Binpack {
    fn name(&self) -> &'static str {
        "binpack"
    }

    fn scores_nodes(&self) -> bool {
        self.weight > 0.0
    }

    fn score(&self, state: &State, task: &Task, node: &Node) -> f64 {
        let mut score = 0.0;
        let mut weights = 0.0;
        if let Some(ask) = state.trackers.devices.share_ask(task) {
            if let Some(&w) = self.resources.get(&*ask.class).filter(|&&w| w > 0.0) {
                let rooms = state.trackers.devices.rooms(node, &ask.class);
                let alloc = rooms.len() as u64 * 1000;
                let used: u64 = rooms.iter().map(|&r| 1000 - u64::from(r.min(1000))).sum();
                let req = u64::from(ask.count) * u64::from(ask.milli);
                if alloc == 0 || used + req > alloc {
                    return 0.0;
                }
                score += w * (used + req) as f64 / alloc as f64;
                weights += w;
            }
        }
        for (name, req) in task.request.iter() {
            let Some(&w) = self.resources.get(name) else {
                continue;
            };
            if w <= 0.0 || req <= 0 {
                continue;
            }
            let alloc = node.allocatable.get(name);
            let used = node.used.get(name);
            if alloc <= 0 || used.saturating_add(req) > alloc {
                return 0.0;
            }
            score += w * used.saturating_add(req) as f64 / alloc as f64;
            weights += w;
        }
        if weights <= 0.0 {
            return 0.0;
        }
        score / weights * 10.0 * self.weight
    }
}
