//! `--mode inflation`: the protocol of "Beware of Fragmentation" and its public simulator
//! (hkust-adsl/kubernetes-scheduler-simulator, `experiments/`): no job ends; the trace's pods,
//! in an order the seed shuffles, then pods drawn from the trace with replacement, arrive one
//! by one until the GPUs asked for reach `--arrival` × the cluster's GPUs; after each pod the
//! allocated GPUs and the fragmentation are recorded; a pod that fits nowhere fails and is
//! deleted, and the run goes on.
//!
//! The simulator's exact steps, followed here: the trace sorted by name and shuffled; if it
//! asks for less than the target, draws (uniform, with replacement, from the trace sorted by
//! name) are appended while the requested total plus the drawn pod's per-GPU share stays
//! within the target (its check, which adds the pod's whole request); if it asks for more,
//! random pods are removed until it does not. Arrived GPUs count every pod that arrived,
//! placed or not. The published table maps each arrival percent (rounded) to the mean
//! allocation over the pods that arrived at that percent, or within ±1 when none did.
//!
//! Sessions take the pods in arrival order: one session over `batch` consecutive arrivals
//! places them in that order, each seeing the placements before it, exactly as one session
//! per pod would (the jobs are single pods of one queue and priority, ordered by creation,
//! then name; a test compares the two). The real scheduler decides every placement.

use crate::cluster::{self, NAMESPACE};
use crate::error::{Error, Result};
use crate::frag::{NodeRoom, Typical};
use crate::rng::Rng;
use crate::timeline::{simulation, Inputs};
use crate::trace::JobSpec;
use caldera_sim::manifest::{Kind, Object};
use caldera_sim::Simulation;
use std::collections::{BTreeMap, HashMap};

/// Arrivals per session: a session over consecutive arrivals places them in arrival order
/// exactly as one session each would (see the module docs), at a fraction of the cost.
pub const BATCH: usize = 256;

/// One arrival's record.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// GPUs (thousandths) asked for by the pods arrived so far, this one included.
    pub arrived_milli: u64,
    /// GPUs (thousandths) allocated after it.
    pub allocated_milli: u64,
    /// Fragmented GPU thousandths after it.
    pub frag_milli: f64,
    /// Idle GPU thousandths after it.
    pub idle_milli: u64,
}

/// An inflation replay's record.
#[derive(Debug, Clone, Default)]
pub struct Inflation {
    /// One point per arrival, in order.
    pub points: Vec<Point>,
    /// The cluster's GPUs, thousandths.
    pub total_gpu_milli: u64,
    /// Pods that arrived.
    pub submitted: u64,
    /// Pods placed.
    pub placed: u64,
    /// Pods that fit nowhere.
    pub failed: u64,
    /// Pods refused, per reason.
    pub refused: BTreeMap<String, u64>,
    /// Sessions run.
    pub sessions: u64,
    /// Free GPUs at the end.
    pub unallocated_end_gpus: u64,
    /// The arrival target, percent of the cluster's GPUs.
    pub arrival_percent: u32,
}

/// The pods of the protocol, in arrival order: `trace` shuffled by `seed`, then inflated (or
/// deflated) to `arrival` × `capacity_milli`.
pub fn arrivals(trace: &[JobSpec], capacity_milli: u64, arrival: f64, seed: u64) -> Vec<JobSpec> {
    let mut rng = Rng::new(seed);
    let mut sorted: Vec<JobSpec> = trace.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut pods = sorted.clone();
    rng.shuffle(&mut pods);
    let target = arrival * capacity_milli as f64;
    let mut total: u64 = pods.iter().map(JobSpec::gpu_milli_total).sum();
    if (total as f64) > target {
        while (total as f64) > target && !pods.is_empty() {
            let i = rng.below(pods.len());
            total -= pods.remove(i).gpu_milli_total();
        }
    } else if sorted.iter().any(|p| p.gpu.milli() > 0) {
        // (Draws only add what asks GPUs: a trace of CPU pods alone would never reach the
        // target, and is replayed as it is.)
        let mut i = 0;
        loop {
            let mut pod = sorted[rng.below(sorted.len())].clone();
            if (total + u64::from(pod.gpu.milli())) as f64 > target {
                break;
            }
            total += pod.gpu_milli_total();
            pod.name = format!("{}-tuned-{i}", pod.name);
            pods.push(pod);
            i += 1;
        }
    }
    pods
}

/// Runs the protocol: `inputs.jobs` is the trace (jobs of one member), drawn with `seed` up to
/// `arrival` (1.3 = 130%) of the cluster's GPUs; `batch` arrivals per session (1 = a session
/// per pod).
pub fn run(inputs: &Inputs, arrival: f64, seed: u64, batch: usize) -> Result<Inflation> {
    if let Some(j) = inputs.jobs.iter().find(|j| j.members != 1) {
        return Err(Error::Invalid(format!(
            "--mode inflation replays pods one at a time; job {} has {} members",
            j.name, j.members
        )));
    }
    let capacity = crate::cluster::gpu_capacity(&inputs.objects);
    let total: u64 = capacity.values().sum();
    if total == 0 {
        return Err(Error::Invalid("the cluster has no GPUs".into()));
    }
    let pods = arrivals(&inputs.jobs, total, arrival, seed);
    let shared = cluster::needs_sharing(&inputs.jobs);
    let objects = if shared {
        cluster::share_gpus(&inputs.objects)?
    } else {
        inputs.objects.clone()
    };
    let (mut sim, _) = simulation(&inputs.config, &objects, &pods)?;
    let typical = Typical::of(&inputs.jobs);
    let mut rooms: BTreeMap<String, NodeRoom> = BTreeMap::new();
    for o in &inputs.objects {
        if let Object::Node(n) = o {
            let name = n.metadata.name.clone().unwrap_or_default();
            let alloc = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
            let cpu = alloc
                .and_then(|a| a.get("cpu"))
                .and_then(|q| {
                    caldera_model::quantity::parse_quantity(
                        &q.0,
                        caldera_model::quantity::Scale::Milli,
                    )
                    .ok()
                })
                .unwrap_or(0);
            let gpus = capacity.get(&name).copied().unwrap_or(0) / 1000;
            let model = n
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(cluster::GPU_MODEL_LABEL))
                .cloned();
            rooms.insert(
                name,
                NodeRoom {
                    gpu_left: vec![1000; gpus as usize],
                    cpu_left: cpu,
                    model,
                },
            );
        }
    }
    let mut frag_of: BTreeMap<String, f64> = rooms
        .iter()
        .map(|(n, r)| (n.clone(), typical.node_frag(r)))
        .collect();
    let mut frag: f64 = frag_of.values().sum();
    let mut idle: u64 = rooms.values().map(NodeRoom::idle).sum();
    let mut out = Inflation {
        total_gpu_milli: total,
        arrival_percent: (arrival * 100.0).round() as u32,
        ..Inflation::default()
    };
    let (mut arrived, mut allocated) = (0u64, 0u64);
    let mut priorities = std::collections::BTreeSet::new();
    let batch = batch.max(1);
    let mut next = 0;
    while next < pods.len() {
        let end = (next + batch).min(pods.len());
        // This batch's pods, created 1 ms apart so creation order is arrival order.
        let mut names: HashMap<String, usize> = HashMap::new();
        for (i, pod) in pods.iter().enumerate().take(end).skip(next) {
            if priorities.insert(pod.priority) {
                let now = sim.now();
                sim.store_mut()
                    .apply(cluster::priority_class(pod.priority)?, now)
                    .map_err(|e| Error::Invalid(e.to_string()))?;
            }
            let name = format!("p{i:07}");
            let now = sim.now();
            let object = if shared {
                if let Some(claim) = cluster::claim_object(&name, pod)? {
                    sim.store_mut()
                        .apply(claim, now)
                        .map_err(|e| Error::Invalid(format!("claim of {}: {e}", pod.name)))?;
                }
                cluster::shared_pod_object(&name, &name, pod, false)?
            } else {
                cluster::pod_object(&name, &name, pod, false)?
            };
            sim.store_mut()
                .apply(Object::Pod(object), now)
                .map_err(|e| Error::Invalid(format!("pod {}: {e}", pod.name)))?;
            names.insert(name, i);
            sim.advance_to(now.plus_millis(1));
        }
        let mut bound: HashMap<usize, String> = HashMap::new();
        if !names.is_empty() {
            let report = sim.session();
            out.sessions += 1;
            for (pod, node) in report.bound {
                let name = pod.rsplit('/').next().unwrap_or(&pod);
                if let Some(&i) = names.get(name) {
                    bound.insert(i, node);
                }
            }
            let failed: Vec<String> = names
                .iter()
                .filter(|(_, i)| !bound.contains_key(i))
                .map(|(n, _)| n.clone())
                .collect();
            let now = sim.now();
            sim.store_mut().force_delete_pods(NAMESPACE, &failed, now);
            if shared {
                for name in &failed {
                    sim.store_mut()
                        .delete(Kind::ResourceClaim, Some(NAMESPACE), name, now);
                }
            }
        }
        for (i, pod) in pods.iter().enumerate().take(end).skip(next) {
            out.submitted += 1;
            arrived += pod.gpu_milli_total();
            if let Some(node) = bound.get(&i) {
                out.placed += 1;
                allocated += pod.gpu_milli_total();
                if let Some(room) = rooms.get_mut(node) {
                    let before = room.idle();
                    if shared {
                        let taken = shares_taken(&sim, &format!("p{i:07}"))?;
                        room.take_shares(&taken, pod.cpu_milli).map_err(|e| {
                            Error::Invalid(format!("{node}: GPU over-allocated: {e}"))
                        })?;
                    } else {
                        room.take_whole(pod.gpu.whole_gpus().unwrap_or(0), pod.cpu_milli);
                    }
                    idle = idle + room.idle() - before;
                    let f = typical.node_frag(room);
                    let old = frag_of.insert(node.clone(), f).unwrap_or(0.0);
                    frag += f - old;
                }
            } else {
                out.failed += 1;
            }
            out.points.push(Point {
                arrived_milli: arrived,
                allocated_milli: allocated,
                frag_milli: frag.max(0.0),
                idle_milli: idle,
            });
        }
        next = end;
    }
    out.unallocated_end_gpus = idle / 1000;
    Ok(out)
}

/// What the claim `name` (a replayed member's) took, as its allocation in the store says:
/// (GPU index on its node, thousandths of that GPU) per device.
fn shares_taken(sim: &Simulation, name: &str) -> Result<Vec<(usize, u32)>> {
    let Some(claim) = sim.store().resource_claim(NAMESPACE, name) else {
        return Ok(Vec::new());
    };
    let results = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    let mut out = Vec::with_capacity(results.len());
    for r in results {
        let index = r
            .device
            .strip_prefix("gpu-")
            .and_then(|k| k.parse::<usize>().ok())
            .ok_or_else(|| {
                Error::Invalid(format!("claim {name} holds device {}, not a GPU", r.device))
            })?;
        let milli = match r
            .consumed_capacity
            .as_ref()
            .and_then(|c| c.get(cluster::SHARE_CAPACITY))
        {
            Some(q) => {
                caldera_model::quantity::parse_quantity(&q.0, caldera_model::quantity::Scale::Milli)
                    .map_err(|e| Error::Invalid(format!("claim {name}: {e}")))?
            }
            None => 1000,
        };
        out.push((index, u32::try_from(milli.clamp(0, 1000)).unwrap_or(1000)));
    }
    Ok(out)
}

impl Inflation {
    /// The published table's view of a per-arrival series: for each arrival percent 0..=the
    /// target, the mean of `value` over the arrivals whose arrived GPUs round to that percent
    /// (or within ±1 when none do), rounded to 2 decimals.
    pub fn discrete(&self, value: impl Fn(&Point) -> f64) -> BTreeMap<u32, f64> {
        let total = self.total_gpu_milli as f64;
        let percent = |p: &Point| (p.arrived_milli as f64 / total * 100.0).round() as i64;
        let mut out = BTreeMap::new();
        for target in 0..=i64::from(self.arrival_percent) {
            let mut pick: Vec<f64> = self
                .points
                .iter()
                .filter(|p| percent(p) == target)
                .map(&value)
                .collect();
            if pick.is_empty() {
                pick = self
                    .points
                    .iter()
                    .filter(|p| (percent(p) - target).abs() <= 1)
                    .map(&value)
                    .collect();
            }
            if pick.is_empty() {
                continue;
            }
            let mean = pick.iter().sum::<f64>() / pick.len() as f64;
            out.insert(target as u32, (mean * 100.0).round() / 100.0);
        }
        out
    }

    /// Allocated ÷ total GPUs, percent, per arrival percent.
    pub fn allocation_ratio_at(&self) -> BTreeMap<u32, f64> {
        let total = self.total_gpu_milli as f64;
        self.discrete(|p| p.allocated_milli as f64 / total * 100.0)
    }

    /// Fragmented ÷ idle GPUs, percent, per arrival percent.
    pub fn fragmentation_ratio_at(&self) -> BTreeMap<u32, f64> {
        self.discrete(|p| {
            if p.idle_milli == 0 {
                0.0
            } else {
                p.frag_milli / p.idle_milli as f64 * 100.0
            }
        })
    }
}
