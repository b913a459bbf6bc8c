//! `caldera bench replay`: `caldera replay` timed on a synthetic timeline trace (by default
//! 100,000 jobs on 4,000 nodes of 8 GPUs) and on an openb pod list in inflation mode at 130%
//! (the published `openb_pod_list_default.csv`, from `--openb-dir` or `CALDERA_OPENB_DIR`;
//! the data is not shipped).
//!
//! The synthetic trace: Poisson arrivals at the rate that offers `load` (0.8) of the GPUs;
//! durations exponential (mean 30 min, at least 1 min); 60% single pods of 1 GPU, 20% single
//! pods of 2, 4 or 8 GPUs, 15% gangs of 2–8 whole-node members, 5% gangs of 9–64; 10 queues of
//! weights 1–10; priorities 0–2.

use caldera_replay::cluster::{self, NodeSpec, QueueSpec};
use caldera_replay::rng::Rng;
use caldera_replay::trace::{Gpu, JobSpec};
use caldera_replay::{inflation, metrics, openb, timeline};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Instant;

/// Figures of the replay benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayResult {
    /// Jobs in the synthetic trace.
    pub jobs: usize,
    /// Nodes of the synthetic cluster.
    pub nodes: usize,
    /// Wall-clock seconds of the timeline replay (reading excluded).
    pub replay_timeline_seconds: f64,
    /// Its sessions.
    pub timeline_sessions: u64,
    /// Mean wall-clock milliseconds per session.
    pub timeline_ms_per_session: f64,
    /// Its time-weighted GPU allocation.
    pub timeline_gpu_allocation_ratio: Option<f64>,
    /// The openb trace replayed in inflation mode (its file), if found.
    pub openb_trace: Option<String>,
    /// Wall-clock seconds of that inflation replay at 130%.
    pub replay_inflation_seconds: Option<f64>,
    /// Its sessions.
    pub inflation_sessions: Option<u64>,
    /// Pods that arrived in it.
    pub inflation_pods: Option<u64>,
}

/// The synthetic trace of `jobs` jobs for `nodes` nodes of 8 GPUs.
pub fn synthetic(
    jobs: usize,
    nodes: usize,
    load: f64,
    seed: u64,
) -> (Vec<JobSpec>, Vec<NodeSpec>, Vec<QueueSpec>) {
    let mut rng = Rng::new(seed);
    let unit = |rng: &mut Rng| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    let mean_duration_s = 1800.0;
    // Mean GPUs per job of the mix below: 0.6·1 + 0.2·14/3 + 0.15·5·8 + 0.05·36.5·8.
    let mean_gpus = 0.6 + 0.2 * 14.0 / 3.0 + 0.15 * 40.0 + 0.05 * 292.0;
    let capacity = nodes as f64 * 8.0;
    let rate = load * capacity / (mean_gpus * mean_duration_s);
    let mut t = 0.0f64;
    let mut out = Vec::with_capacity(jobs);
    for i in 0..jobs {
        t += -(1.0 - unit(&mut rng)).ln() / rate;
        let duration = (-(1.0 - unit(&mut rng)).ln() * mean_duration_s).max(60.0);
        let kind = unit(&mut rng);
        let (members, gpu) = if kind < 0.6 {
            (1, 1)
        } else if kind < 0.8 {
            (1, [2, 4, 8][rng.below(3)])
        } else if kind < 0.95 {
            (2 + rng.below(7) as u32, 8)
        } else {
            (9 + rng.below(56) as u32, 8)
        };
        let mut job = JobSpec::new(
            &format!("job-{i:06}"),
            (t * 1000.0) as i64,
            (duration * 1000.0) as i64,
            members,
            Gpu::whole(gpu),
        );
        job.cpu_milli = i64::from(gpu) * 8000;
        job.memory = i64::from(gpu) << 36;
        job.queue = format!("team-{}", rng.below(10));
        job.priority = rng.below(3) as i32;
        out.push(job);
    }
    let node_specs = (0..nodes)
        .map(|i| NodeSpec {
            name: format!("node-{i:05}"),
            cpu_milli: 96_000,
            memory: 1 << 40,
            gpus: 8,
            gpu_model: None,
            pods: 110,
            labels: BTreeMap::new(),
        })
        .collect();
    let queues = (0..10)
        .map(|q| QueueSpec {
            name: format!("team-{q}"),
            weight: q + 1,
            parent: None,
            capability_gpu: None,
        })
        .collect();
    (out, node_specs, queues)
}

/// Runs the benchmark: the synthetic timeline (`jobs` on `nodes`), then, if `openb_dir`
/// holds them, `openb_pod_list_default.csv` on `openb_node_list_gpu_node.csv` at 130%.
pub fn run(
    jobs: usize,
    nodes: usize,
    seed: u64,
    openb_dir: Option<&std::path::Path>,
) -> caldera_replay::Result<ReplayResult> {
    let config = caldera_config::SchedulerConfig::default();
    let (trace, node_specs, queues) = synthetic(jobs, nodes, 0.8, seed);
    let mut objects = Vec::new();
    for n in &node_specs {
        objects.push(cluster::node_object(n)?);
    }
    for q in &queues {
        objects.push(cluster::queue_object(q)?);
    }
    let inputs = timeline::Inputs {
        config: config.clone(),
        objects,
        jobs: trace,
    };
    let t = Instant::now();
    let run = timeline::run(&inputs, timeline::SessionPolicy::Events)?;
    let timeline_seconds = t.elapsed().as_secs_f64();
    let m = metrics::timeline(&run, 3_600_000, "shipped");
    let mut result = ReplayResult {
        jobs,
        nodes,
        replay_timeline_seconds: timeline_seconds,
        timeline_sessions: run.sessions,
        timeline_ms_per_session: timeline_seconds * 1000.0 / run.sessions.max(1) as f64,
        timeline_gpu_allocation_ratio: m.gpu_allocation_ratio,
        openb_trace: None,
        replay_inflation_seconds: None,
        inflation_sessions: None,
        inflation_pods: None,
    };
    if let Some(dir) = openb_dir {
        let pods = dir.join("openb_pod_list_default.csv");
        let nodes = dir.join("openb_node_list_gpu_node.csv");
        let read = |p: &std::path::Path| {
            std::fs::read_to_string(p).map_err(|e| caldera_replay::Error::Read {
                file: p.display().to_string(),
                source: e,
            })
        };
        let jobs = openb::read_pods(&read(&pods)?, &pods.display().to_string())?;
        let node_specs = openb::read_nodes(&read(&nodes)?, &nodes.display().to_string())?;
        let objects = node_specs
            .iter()
            .map(cluster::node_object)
            .collect::<caldera_replay::Result<Vec<_>>>()?;
        let inputs = timeline::Inputs {
            config,
            objects,
            jobs,
        };
        let t = Instant::now();
        let run = inflation::run(&inputs, 1.3, seed, inflation::BATCH)?;
        result.replay_inflation_seconds = Some(t.elapsed().as_secs_f64());
        result.inflation_sessions = Some(run.sessions);
        result.inflation_pods = Some(run.submitted);
        result.openb_trace = Some(pods.display().to_string());
    }
    Ok(result)
}
