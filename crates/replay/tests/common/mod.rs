//! What the replay's property and shared-GPU tests both build.

use caldera_replay::cluster::{self, NodeSpec};
use std::collections::BTreeMap;

/// Nodes `n0`, `n1`, … with 64 CPUs, 512 GiB and the given GPUs each.
pub fn nodes(gpus: &[u32]) -> Vec<caldera_sim::manifest::Object> {
    gpus.iter()
        .enumerate()
        .map(|(i, &g)| {
            cluster::node_object(&NodeSpec {
                name: format!("n{i}"),
                cpu_milli: 64_000,
                memory: 512 << 30,
                gpus: g,
                gpu_model: None,
                pods: 110,
                labels: BTreeMap::new(),
            })
            .unwrap()
        })
        .collect()
}
