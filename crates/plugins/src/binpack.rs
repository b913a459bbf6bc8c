//! binpack: prefer nodes that the member fills most, weighted per resource, so whole nodes
//! stay free for whole-node gangs (SPEC §6).
//!
//! score = Σ over requested resources with a weight of weight × (used + request)/allocatable,
//! divided by Σ of those weights, × 10 × `binpack.weight`; a resource that would not fit
//! scores the node 0.

use caldera_config::PluginOption;
use caldera_model::{Node, Task, CPU, MEMORY};
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
    let mut resources = BTreeMap::new();
    resources.insert(CPU.to_string(), crate::weight(option, "binpack.cpu", 1)?);
    resources.insert(
        MEMORY.to_string(),
        crate::weight(option, "binpack.memory", 1)?,
    );
    let listed: Vec<String> = match option.arguments.get_list("binpack.resources") {
        Some(list) => list.to_vec(),
        None => option
            .arguments
            .get_str("binpack.resources")
            .map(|s| {
                s.split(',')
                    .map(|x| x.trim().to_string())
                    .filter(|x| !x.is_empty())
                    .collect()
            })
            .unwrap_or_default(),
    };
    for name in listed {
        let key = format!("binpack.resources.{name}");
        let w = crate::weight(option, &key, 1)?;
        resources.insert(name, w);
    }
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

    fn score(&self, _state: &State, task: &Task, node: &Node) -> f64 {
        let mut score = 0.0;
        let mut weights = 0.0;
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
