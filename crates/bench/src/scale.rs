//! `caldera bench scale`: what one scheduler holds and how fast it decides on the largest
//! clusters (issue 35's figures, in-process: the cache's index and the session's model, no API
//! server).
//!
//! **The cluster** (from a seed): `nodes` nodes (8 GPUs, 64 CPU, 512Gi each) and `pods` pods
//! bound and Running on them, spread evenly; a tenth of the pods are Caldera's, in Running
//! gangs of 8 one-GPU members with their PodGroups, the rest another scheduler's, small on CPU
//! and memory and without GPUs. Then `pending` one-GPU pods in gangs of 1–512 members
//! (`minMember` = size), round-robin over `queues` queues of weights 1–4. Objects are made one
//! at a time and applied to the index at once, so the generator holds none of them: the
//! memory figures are the index's and the model's alone.
//!
//! **Memory** is the process's resident set (Linux `VmRSS`), read between steps, so it counts
//! what the allocator holds, fragmentation included:
//! - per node: the index's growth when the nodes are applied to an empty index, plus the
//!   model's growth when a snapshot of those nodes alone is built (kept until the end);
//! - per pod: the index's growth when the pods and PodGroups are applied, plus the model's
//!   growth when the full snapshot is built, less the nodes' part of it (measured above).
//!
//! **Time**: the fill of the index; the snapshot; the session over the pending backlog (the
//! shipped config); and a steady session with nothing new: a fresh snapshot of the unchanged
//! index, with the first session's binds recorded as the runtime's overlay records binds in
//! flight, and a session over it.
//!
//! Not measured here: the cold start from a paged list (`caldera bench cold-start`, on the
//! API stand-in) and the runtime's watch stores beside the index.

use crate::gen::{self, Rng, Until};
use caldera_cache::{ClusterIndex, SnapshotOptions};
use caldera_config::SchedulerConfig;
use caldera_model::Time;
use serde::Serialize;
use std::time::Instant;

/// What to build.
#[derive(Debug, Clone)]
pub struct ScaleOptions {
    /// Nodes.
    pub nodes: usize,
    /// Pods bound and Running.
    pub pods: usize,
    /// Pending one-GPU pods, in gangs of 1–512.
    pub pending: usize,
    /// Queues.
    pub queues: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for ScaleOptions {
    fn default() -> Self {
        ScaleOptions {
            nodes: 100_000,
            pods: 1_000_000,
            pending: 10_000,
            queues: 100,
            seed: 1,
        }
    }
}

/// Figures of one run.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleResult {
    /// Nodes.
    pub nodes: usize,
    /// Pods bound and Running.
    pub pods: usize,
    /// Of them, members of Caldera's Running gangs.
    pub gang_pods: usize,
    /// PodGroups (running and pending gangs).
    pub podgroups: usize,
    /// Pending pods.
    pub pending_pods: usize,
    /// Pending gangs.
    pub pending_gangs: usize,
    /// Queues.
    pub queues: usize,
    /// Index and model, per node (see the module doc).
    pub bytes_per_node: f64,
    /// Of it, the index's.
    pub index_bytes_per_node: f64,
    /// Index and model, per pod (bound or pending; PodGroups counted with their pods).
    pub bytes_per_pod: f64,
    /// Of it, the index's.
    pub index_bytes_per_pod: f64,
    /// Applying every object to an empty index.
    pub index_seconds: f64,
    /// Building the full snapshot from the index.
    pub snapshot_seconds: f64,
    /// The session over the pending backlog.
    pub session_seconds: f64,
    /// Members placed in it.
    pub placements: u64,
    /// placements / session_seconds.
    pub placements_per_second: f64,
    /// A steady session with nothing new: snapshot of the unchanged index, binds in flight
    /// recorded, session.
    pub steady_session_seconds: f64,
    /// Of it, the snapshot.
    pub steady_snapshot_seconds: f64,
    /// Peak resident set size of the process.
    pub peak_rss_bytes: u64,
}

/// Members of one Running gang.
const GANG: usize = 8;

/// Runs the benchmark.
pub fn run(opts: &ScaleOptions) -> ScaleResult {
    let config = SchedulerConfig::default();
    // The shipped config is known to build; a failure here is a bug worth a loud stop.
    let scheduler = caldera_plugins::scheduler(&config).expect("shipped config builds");
    let snapshot_opts = SnapshotOptions::default();
    let now = Time::from_secs(1_767_225_600);
    let queues = opts.queues.max(1);
    let nodes = opts.nodes.max(1);
    let node_name = |i: usize| format!("node-{i:06}");

    let mut idx = ClusterIndex::new();
    let rss0 = crate::rss_bytes();
    let fill = Instant::now();
    for i in 0..nodes {
        let _ = idx.apply(&gen::node(&node_name(i), i / 16));
    }
    let mut fill_seconds = fill.elapsed().as_secs_f64();
    let rss_nodes = crate::rss_bytes();
    let nodes_only = idx.snapshot(&snapshot_opts);
    let rss_node_model = crate::rss_bytes();

    let fill = Instant::now();
    for q in 0..queues {
        let _ = idx.apply(&gen::queue(&format!("queue-{q}"), (q % 4 + 1) as u32));
    }
    // A tenth of the bound pods in Running gangs of 8 (whole gangs), spread over the nodes.
    let gangs = opts.pods / 10 / GANG;
    let gang_pods = gangs * GANG;
    let per_node = opts.pods.div_ceil(nodes).max(1);
    let mut podgroups = 0;
    for i in 0..opts.pods {
        let node = node_name((i / per_node).min(nodes - 1));
        // Every tenth pod is a gang member, so gangs spread over the nodes as the rest do.
        let member = i % 10 == 0 && i / 10 < gang_pods;
        let pod = if member {
            let g = i / 10 / GANG;
            let group = format!("run-{g}");
            if i / 10 % GANG == 0 {
                let queue = format!("queue-{}", g % queues);
                let _ = idx.apply(&gen::podgroup("running", &group, GANG, &queue, "Running"));
                podgroups += 1;
            }
            gen::pod(
                "running",
                &format!("run-{i}"),
                "caldera",
                1,
                Some(&group),
                Some(&node),
                true,
            )
        } else {
            gen::pod(
                "other",
                &format!("other-{i}"),
                "default-scheduler",
                0,
                None,
                Some(&node),
                true,
            )
        };
        let _ = idx.apply(&pod);
    }
    let mut rng = Rng::new(opts.seed);
    let (mut pending_pods, mut pending_gangs) = (0, 0);
    gen::each_pending_gang(
        &mut rng,
        queues,
        "pending",
        Until::Pods(opts.pending),
        1,
        512,
        |pg, pods| {
            let _ = idx.apply(&pg);
            for pod in &pods {
                let _ = idx.apply(pod);
            }
            podgroups += 1;
            pending_pods += pods.len();
            pending_gangs += 1;
        },
    );
    fill_seconds += fill.elapsed().as_secs_f64();
    let rss_pods = crate::rss_bytes();

    let t = Instant::now();
    let snapshot = idx.snapshot(&snapshot_opts);
    let snapshot_seconds = t.elapsed().as_secs_f64();
    let rss_model = crate::rss_bytes();

    let t = Instant::now();
    let outcome = scheduler.run_owned(snapshot, now);
    let session_seconds = t.elapsed().as_secs_f64();
    let placements = outcome.stats.placements;

    // Steady: nothing new since; the binds of the first session are in flight.
    let t = Instant::now();
    let mut steady = idx.snapshot(&snapshot_opts);
    let steady_snapshot_seconds = t.elapsed().as_secs_f64();
    steady.record(&outcome.plan);
    let t = Instant::now();
    let again = scheduler.run_owned(steady, Time(now.0 + 1000));
    let steady_session_seconds = steady_snapshot_seconds + t.elapsed().as_secs_f64();
    drop((again, outcome, nodes_only));

    let per = |bytes: u64, n: usize| bytes as f64 / n.max(1) as f64;
    let index_node = rss_nodes.saturating_sub(rss0);
    let model_node = rss_node_model.saturating_sub(rss_nodes);
    let index_pod = rss_pods.saturating_sub(rss_node_model);
    let model_pod = rss_model
        .saturating_sub(rss_pods)
        .saturating_sub(model_node);
    let all_pods = opts.pods + pending_pods;
    ScaleResult {
        nodes,
        pods: opts.pods,
        gang_pods,
        podgroups,
        pending_pods,
        pending_gangs,
        queues,
        bytes_per_node: per(index_node + model_node, nodes),
        index_bytes_per_node: per(index_node, nodes),
        bytes_per_pod: per(index_pod + model_pod, all_pods),
        index_bytes_per_pod: per(index_pod, all_pods),
        index_seconds: fill_seconds,
        snapshot_seconds,
        session_seconds,
        placements,
        placements_per_second: placements as f64 / session_seconds.max(1e-9),
        steady_session_seconds,
        steady_snapshot_seconds,
        peak_rss_bytes: crate::peak_rss_bytes(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_cluster_places_its_backlog_and_counts_its_objects() {
        let r = run(&ScaleOptions {
            nodes: 64,
            pods: 640,
            pending: 100,
            queues: 4,
            seed: 3,
        });
        assert_eq!((r.nodes, r.pods, r.pending_pods), (64, 640, 100));
        // 640 / 10 = 64 gang members: 8 Running gangs of 8.
        assert_eq!(r.gang_pods, 64);
        assert_eq!(r.podgroups, 8 + r.pending_gangs);
        // 512 GPUs, 64 of them held: every pending one-GPU pod fits (gangs of at most 100).
        assert_eq!(r.placements, 100);
        assert!(r.peak_rss_bytes > 0 || !cfg!(target_os = "linux"));
    }
}
