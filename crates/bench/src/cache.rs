//! `caldera bench cache`: how fast watch events go into the cache, and what a cached pod costs.

use crate::gen::{self, Shape};
use caldera_cache::ClusterIndex;
use serde::Serialize;
use std::time::Instant;

/// Figures of the cache benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct CacheResult {
    /// Pod events applied (adds, then updates of the same pods).
    pub pod_events: usize,
    /// Node events applied (adds, then updates).
    pub node_events: usize,
    /// Pod events per second.
    pub pod_events_per_second: f64,
    /// Node events per second.
    pub node_events_per_second: f64,
    /// Resident memory the index grew by, per cached pod.
    pub bytes_per_pod: f64,
    /// Time to assemble a snapshot from the filled index.
    pub snapshot_seconds: f64,
}

/// Applies `pod_events` pod events (two thirds adds, one third updates) and `node_events` node
/// events (half adds, half updates) into an empty index.
pub fn run(pod_events: usize, node_events: usize, seed: u64) -> CacheResult {
    let adds = pod_events * 2 / 3;
    let nodes = (node_events / 2).max(1);
    let shape = Shape {
        nodes,
        running_pods: adds / 2,
        pending_pods: adds - adds / 2,
        queues: 10,
        seed,
    };
    let objects = gen::cluster(&shape);
    let updates: Vec<_> = objects
        .pods
        .iter()
        .take(pod_events - objects.pods.len().min(pod_events))
        .cloned()
        .map(|mut p| {
            // A status change, as a kubelet would report.
            if let Some(s) = p.status.as_mut() {
                s.phase = Some("Running".into());
            }
            p
        })
        .collect();
    let mut idx = ClusterIndex::new();
    let t = Instant::now();
    for n in &objects.nodes {
        let _ = idx.apply(n);
    }
    for n in objects
        .nodes
        .iter()
        .take(node_events - objects.nodes.len().min(node_events))
    {
        let _ = idx.apply(n);
    }
    let node_seconds = t.elapsed().as_secs_f64();
    let node_count = objects.nodes.len() + (node_events - objects.nodes.len().min(node_events));
    for q in &objects.queues {
        let _ = idx.apply(q);
    }
    for pg in &objects.podgroups {
        let _ = idx.apply(pg);
    }
    let rss_before = crate::rss_bytes();
    let t = Instant::now();
    for p in &objects.pods {
        let _ = idx.apply(p);
    }
    let add_seconds = t.elapsed().as_secs_f64();
    let rss_after = crate::rss_bytes();
    let t = Instant::now();
    for p in &updates {
        let _ = idx.apply(p);
    }
    let update_seconds = t.elapsed().as_secs_f64();
    let applied = objects.pods.len() + updates.len();
    let t = Instant::now();
    let snapshot = idx.snapshot(&caldera_cache::SnapshotOptions::default());
    let snapshot_seconds = t.elapsed().as_secs_f64();
    drop(snapshot);
    CacheResult {
        pod_events: applied,
        node_events: node_count,
        pod_events_per_second: applied as f64 / (add_seconds + update_seconds).max(1e-9),
        node_events_per_second: node_count as f64 / node_seconds.max(1e-9),
        bytes_per_pod: rss_after.saturating_sub(rss_before) as f64
            / objects.pods.len().max(1) as f64,
        snapshot_seconds,
    }
}
