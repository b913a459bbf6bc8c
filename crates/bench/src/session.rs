//! `caldera bench session`: one full scheduling session on a large synthetic cluster.

use crate::gen::{self, Rng, Shape};
use caldera_cache::{ClusterIndex, SnapshotOptions};
use caldera_config::SchedulerConfig;
use caldera_model::Time;
use serde::Serialize;
use std::time::Instant;

/// Figures for one node count.
#[derive(Debug, Clone, Serialize)]
pub struct SessionResult {
    /// Nodes.
    pub nodes: usize,
    /// Running pods.
    pub running_pods: usize,
    /// Pending pods.
    pub pending_pods: usize,
    /// Time to assemble the snapshot from the cache.
    pub snapshot_seconds: f64,
    /// Time of one full session (enqueue, allocate, backfill, close).
    pub session_seconds: f64,
    /// Members placed in that session.
    pub placements: u64,
    /// placements / session_seconds.
    pub placements_per_second: f64,
    /// A session over a backlog of gangs that cannot fit (the cluster full), once their
    /// conditions are written: the steady state of a full cluster.
    pub backlog_session_seconds: f64,
    /// The first session over that backlog, which writes every pending pod's condition.
    pub backlog_first_session_seconds: f64,
    /// Status writes the steady-state backlog session planned (expected 0).
    pub backlog_writes: usize,
    /// Gangs in that backlog.
    pub backlog_gangs: usize,
    /// The same cluster and workload with 20% of the pending gangs constrained (required
    /// anti-affinity on hostname, or a DoNotSchedule zone spread) and 5% of the pending pods
    /// mounting a claim (half bound to a zonal volume, half to be provisioned in two of the
    /// three zones): members placed (those waiting for their claims included).
    pub constrained_placements: u64,
    /// Session time of that run.
    pub constrained_session_seconds: f64,
    /// constrained_placements / constrained_session_seconds.
    pub constrained_placements_per_second: f64,
    /// One session that decides every eviction: the cluster full with low-priority gangs
    /// and [`PREEMPTORS`] pending high-priority gangs of 1–64 members, actions
    /// `enqueue, allocate, preempt, backfill`.
    pub preempt_session_seconds: f64,
    /// Pods that session chose as victims.
    pub preempt_victims: u64,
    /// Gangs that found victims in it.
    pub preemptors_served: u64,
    /// The consolidation figure: the nodes full of single-GPU pods of ReplicaSets at one
    /// priority, fragmented so that [`CONSOLIDATORS`] pending one-node gangs of 4 or 8 GPUs each
    /// need a move (free room in pieces of 3 + 1 or 7 + 1 GPUs), actions
    /// `enqueue, allocate, consolidate, backfill` with the per-session limits lifted.
    pub consolidate_session_seconds: f64,
    /// Pods that session moved.
    pub consolidate_moves: u64,
    /// Gangs it made room for.
    pub consolidate_served: u64,
    /// The hierarchical-queue figure: the same cluster and workload spread over
    /// [`TREE_LEAVES`] leaf queues, one session under the `capacity` plugin with flat queues.
    pub flat_queues_session_seconds: f64,
    /// Members placed in that session.
    pub flat_queues_placements: u64,
    /// The same leaves in a 3-level tree ([`TREE_DIVISIONS`] divisions of
    /// [`TREE_GROUPS`]` / `[`TREE_DIVISIONS`] groups of leaves, with deserved shares and
    /// group capabilities), `capacity` with `enableHierarchy: true`.
    pub hierarchical_session_seconds: f64,
    /// Members placed in that session.
    pub hierarchical_placements: u64,
    /// hierarchical_session_seconds / flat_queues_session_seconds (same run).
    pub hierarchical_ratio: f64,
    /// The fairness-over-time figure ([`fairshare_figure`]): the same cluster and workload
    /// over [`TREE_LEAVES`] weighted queues, each with a usage record in its status, one
    /// session under `proportion` alone (the faster of two).
    pub proportion_queues_session_seconds: f64,
    /// The same with `fairshare` on (usage adjusting the weighted split, tenants, aging).
    pub fairshare_queues_session_seconds: f64,
    /// Members placed in the `proportion` session.
    pub proportion_queues_placements: u64,
    /// Members placed in the `fairshare` session (usage moves the split, so it may differ).
    pub fairshare_queues_placements: u64,
    /// fairshare_queues_session_seconds / proportion_queues_session_seconds (same run).
    pub fairshare_ratio: f64,
    /// The network-topology figure: the nodes in three tiers of HyperNodes (8 nodes per
    /// NVLink domain, 16 domains per spine, 8 spines per pod), nodes/5 pending gangs of 8–512
    /// one-GPU members, half with a hard `networkTopology` (the lowest tier that can hold the
    /// gang: 1 up to 64 members, else 2), half soft; a quarter of them (hard and soft alike)
    /// split into sub-groups of 16 members, each hard within one NVLink domain: members
    /// placed in one session.
    pub topology_placements: u64,
    /// Session time of that run.
    pub topology_session_seconds: f64,
    /// topology_placements / topology_session_seconds.
    pub topology_placements_per_second: f64,
    /// The same cluster and gangs without any topology rule, in the same run: the
    /// unconstrained figure the topology one is compared with.
    pub topology_unconstrained_placements_per_second: f64,
    /// The DRA figure: the nodes publish 8 GPUs each as devices (attributes `productName`,
    /// `architecture`, `index`, `cliqueID`, capacity `memory`; no `nvidia.com/gpu` in their
    /// allocatable), and nodes × 4 pending members in gangs of 1–64 each use a one-GPU claim
    /// made from a template whose CEL selector asks for the product: members placed (with
    /// their devices) in one session.
    pub dra_placements: u64,
    /// Session time of that run.
    pub dra_session_seconds: f64,
    /// dra_placements / dra_session_seconds.
    pub dra_placements_per_second: f64,
    /// The shared-GPU figure: the same nodes' 8 GPUs each as devices that allow multiple
    /// allocations (one capacity `share` of 1), and nodes × 8 pending members in gangs of 1–16,
    /// each with a one-GPU claim: half ask a fraction (`share` 0.25 or 0.5), the rest a whole
    /// GPU (`share` 1). Members placed (with their shares) in one session.
    pub shared_gpu_placements: u64,
    /// Session time of that run.
    pub shared_gpu_session_seconds: f64,
    /// shared_gpu_placements / shared_gpu_session_seconds.
    pub shared_gpu_placements_per_second: f64,
    /// Peak resident set size so far.
    pub peak_rss_bytes: u64,
}

/// Leaf queues in the hierarchical figure.
pub const TREE_LEAVES: usize = 1_000;
/// Middle-level queues (groups) in the hierarchical figure.
pub const TREE_GROUPS: usize = 100;
/// Top-level queues (divisions) in the hierarchical figure.
pub const TREE_DIVISIONS: usize = 10;

/// The shipped config's plugins with `share` (the queue-share plugin lines) in place of
/// `proportion`.
fn config_with(share: &str) -> SchedulerConfig {
    let text = format!(
        "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
{share}  - name: nodeorder
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.resources: nvidia.com/gpu
      binpack.resources.nvidia.com/gpu: 5
"
    );
    // A fixed text known to parse; a failure is a bug worth a loud stop.
    caldera_config::parse(&text, None).expect("bench config parses")
}

/// The shipped config with `capacity` in place of `proportion` (and its hierarchy on or off).
fn capacity_config(hierarchy: bool) -> SchedulerConfig {
    config_with(&format!(
        "  - name: capacity\n    enableHierarchy: {hierarchy}\n"
    ))
}

/// Gives `q` an explicit deserved share of `gpus` GPUs (and, if set, a capability).
fn share_queue(q: &mut caldera_api::Queue, gpus: usize, capability: Option<usize>) {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let list = |n: usize| {
        std::collections::BTreeMap::from([("nvidia.com/gpu".to_string(), Quantity(n.to_string()))])
    };
    q.spec.deserved = Some(list(gpus));
    q.spec.capability = capability.map(list);
}

/// The shipped config's plugins with `proportion`, and `fairshare` with the recommended
/// values (docs/queues.md) when `fair`.
fn proportion_config(fair: bool) -> SchedulerConfig {
    let fairshare = if fair {
        "  - name: fairshare
    arguments:
      halfLife: 24h
      kValue: 1
      maxWait: 2h
      tenantKey: namespace
"
    } else {
        ""
    };
    config_with(&format!("  - name: proportion\n{fairshare}"))
}

/// The fairness-over-time figure: the session's cluster and workload over [`TREE_LEAVES`]
/// weighted queues (weights 1–4), each with a usage record in its status (up to a day old,
/// the queues' past use spread over 0–2% of the cluster), one session with `proportion`
/// alone and one with `fairshare` as well, each the faster of two runs alternating.
/// Returns (proportion seconds, placements, fairshare seconds, placements).
pub fn fairshare_figure(shape: &Shape, now: Time) -> (f64, u64, f64, u64) {
    let opts = SnapshotOptions::default();
    let leaves = Shape {
        queues: TREE_LEAVES,
        ..shape.clone()
    };
    let mut objects = gen::cluster(&leaves);
    for (i, q) in objects.queues.iter_mut().enumerate() {
        let mut v = serde_json::to_value(&*q).expect("a queue serializes");
        v["spec"]["weight"] = serde_json::json!(1 + i % 4);
        let used = (i * 7_919) % 20_000;
        v["status"]["usage"] = serde_json::json!({
            "lastUpdateTime": format!("2025-12-31T{:02}:{:02}:00Z", i % 24, i % 60),
            "decayed": {"nvidia.com/gpu": used, "cpu": used / 2},
            "held": {"nvidia.com/gpu": used / 4, "cpu": used / 8},
        });
        *q = serde_json::from_value(v).expect("a queue with usage deserializes");
    }
    let idx = index_of(&objects);
    drop(objects);
    let schedulers = [false, true].map(|fair| {
        caldera_plugins::scheduler(&proportion_config(fair)).expect("bench config builds")
    });
    let mut best = [(f64::INFINITY, 0u64); 2];
    for _ in 0..2 {
        for (k, scheduler) in schedulers.iter().enumerate() {
            let snapshot = idx.snapshot(&opts);
            let t = Instant::now();
            let outcome = scheduler.run_owned(snapshot, now);
            let seconds = t.elapsed().as_secs_f64();
            if seconds < best[k].0 {
                best[k] = (seconds, outcome.stats.placements);
            }
        }
    }
    (best[0].0, best[0].1, best[1].0, best[1].1)
}

/// The hierarchical-queue figure: (flat seconds, flat placements, tree seconds, tree
/// placements) for the session's cluster and workload over [`TREE_LEAVES`] queues.
fn hierarchy_figure(shape: &Shape, now: Time) -> (f64, u64, f64, u64) {
    let opts = SnapshotOptions::default();
    let leaves = Shape {
        queues: TREE_LEAVES,
        ..shape.clone()
    };
    let gpus = shape.nodes * 8;
    let per_leaf = gpus / TREE_LEAVES;
    let per_group = gpus / TREE_GROUPS;
    let per_division = gpus / TREE_DIVISIONS;
    let run = |hierarchy: bool| {
        let mut objects = gen::cluster(&leaves);
        for (i, q) in objects.queues.iter_mut().enumerate() {
            share_queue(q, per_leaf, None);
            if hierarchy {
                q.spec.parent = Some(format!("group-{}", i * TREE_GROUPS / TREE_LEAVES));
            }
        }
        if hierarchy {
            for g in 0..TREE_GROUPS {
                let mut q = gen::queue(&format!("group-{g}"), 1);
                // Groups may borrow half again their share from their division (at least
                // the largest gang, 64 GPUs, so a small cluster still places gangs).
                share_queue(&mut q, per_group, Some((per_group * 3 / 2).max(64)));
                q.spec.parent = Some(format!("division-{}", g * TREE_DIVISIONS / TREE_GROUPS));
                objects.queues.push(q);
            }
            for d in 0..TREE_DIVISIONS {
                let mut q = gen::queue(&format!("division-{d}"), 1);
                share_queue(&mut q, per_division, None);
                objects.queues.push(q);
            }
        }
        let scheduler =
            caldera_plugins::scheduler(&capacity_config(hierarchy)).expect("bench config builds");
        let idx = index_of(&objects);
        drop(objects);
        let snapshot = idx.snapshot(&opts);
        let t = Instant::now();
        let outcome = scheduler.run_owned(snapshot, now);
        (t.elapsed().as_secs_f64(), outcome.stats.placements)
    };
    let (flat_seconds, flat_placements) = run(false);
    let (tree_seconds, tree_placements) = run(true);
    (flat_seconds, flat_placements, tree_seconds, tree_placements)
}

/// The queue figures on their own (`caldera bench session --only queues`): the first
/// session (10 queues, the shipped config) and the hierarchical-queue figure's two sessions
/// over [`TREE_LEAVES`] queues, on the same cluster and workload.
#[derive(Debug, Clone, Serialize)]
pub struct QueuesResult {
    /// Nodes.
    pub nodes: usize,
    /// Session time with 10 queues (the first session of [`SessionResult`]).
    pub session_seconds: f64,
    /// Members placed in it.
    pub placements: u64,
    /// See [`SessionResult::flat_queues_session_seconds`].
    pub flat_queues_session_seconds: f64,
    /// Members placed in that session.
    pub flat_queues_placements: u64,
    /// See [`SessionResult::hierarchical_session_seconds`].
    pub hierarchical_session_seconds: f64,
    /// Members placed in that session.
    pub hierarchical_placements: u64,
    /// flat_queues_session_seconds / session_seconds: what 1,000 queues cost over 10.
    pub queues_ratio: f64,
    /// See [`SessionResult::proportion_queues_session_seconds`].
    pub proportion_queues_session_seconds: f64,
    /// See [`SessionResult::fairshare_queues_session_seconds`].
    pub fairshare_queues_session_seconds: f64,
    /// See [`SessionResult::fairshare_ratio`].
    pub fairshare_ratio: f64,
}

/// Runs only the queue figures at `nodes` nodes.
pub fn queues(nodes: usize, running_pods: usize, pending_pods: usize, seed: u64) -> QueuesResult {
    let shape = Shape {
        nodes,
        running_pods,
        pending_pods,
        queues: 10,
        seed,
    };
    let now = Time::from_secs(1_767_225_600);
    let scheduler =
        caldera_plugins::scheduler(&SchedulerConfig::default()).expect("shipped config builds");
    let idx = index_of(&gen::cluster(&shape));
    let snapshot = idx.snapshot(&SnapshotOptions::default());
    drop(idx);
    let t = Instant::now();
    let outcome = scheduler.run_owned(snapshot, now);
    let session_seconds = t.elapsed().as_secs_f64();
    let placements = outcome.stats.placements;
    drop(outcome);
    let (flat_seconds, flat_placements, tree_seconds, tree_placements) =
        hierarchy_figure(&shape, now);
    let (plain_seconds, _, fair_seconds, _) = fairshare_figure(&shape, now);
    QueuesResult {
        nodes,
        session_seconds,
        placements,
        flat_queues_session_seconds: flat_seconds,
        flat_queues_placements: flat_placements,
        hierarchical_session_seconds: tree_seconds,
        hierarchical_placements: tree_placements,
        queues_ratio: flat_seconds / session_seconds.max(1e-9),
        proportion_queues_session_seconds: plain_seconds,
        fairshare_queues_session_seconds: fair_seconds,
        fairshare_ratio: fair_seconds / plain_seconds.max(1e-9),
    }
}

/// Pending high-priority gangs in the preemption figure.
pub const PREEMPTORS: usize = 1_000;

/// The preemption figure: every node (8 GPUs) full with low-priority gangs of 1–8 one-GPU
/// members (first fit, so gangs span nodes), and [`PREEMPTORS`] high-priority gangs of 1–64
/// one-GPU members waiting. Returns (seconds of the one session, victims, gangs served).
fn preempt_figure(nodes: usize, seed: u64) -> (f64, u64, u64) {
    use caldera_testkit::builders::{node, pod, podgroup, Cluster};
    let config = caldera_config::parse(
        "actions: \"enqueue, allocate, preempt, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n  - name: binpack\n",
        None,
    )
    .expect("the preemption bench config parses");
    let scheduler =
        caldera_plugins::scheduler(&config).expect("the preemption bench config builds");
    let mut rng = Rng::new(seed ^ 0x9E3_7001);
    let mut c = Cluster::new();
    for n in 0..nodes {
        c = c.node(node(&format!("n{n:05}")).gpus(8).cpu(128).memory_gi(1024));
    }
    let (mut at, mut used, mut gang) = (0usize, 0i64, 0usize);
    while at < nodes {
        let size = rng.range(1, 9) as usize;
        let name = format!("low-{gang:06}");
        c = c.group(podgroup("bench", &name).min_member(size as u32).priority(0));
        for m in 0..size {
            if used == 8 {
                at += 1;
                used = 0;
            }
            if at >= nodes {
                break;
            }
            c = c.pod(
                pod("bench", &format!("{name}-{m}"))
                    .group(&name)
                    .gpus(1)
                    .cpu_milli(1000)
                    .on(&format!("n{at:05}"))
                    .running()
                    .created(gang as i64),
            );
            used += 1;
        }
        gang += 1;
    }
    for g in 0..PREEMPTORS {
        let size = rng.range(1, 65) as usize;
        let name = format!("high-{g:05}");
        c = c.group(
            podgroup("bench", &name)
                .min_member(size as u32)
                .priority(100),
        );
        for m in 0..size {
            c = c.pod(
                pod("bench", &format!("{name}-{m}"))
                    .group(&name)
                    .gpus(1)
                    .cpu_milli(1000)
                    .priority(100)
                    .created(1_000_000 + g as i64),
            );
        }
    }
    let snapshot = c.snapshot();
    let t = Instant::now();
    let outcome = scheduler.run_owned(snapshot, Time::from_secs(1_767_225_600));
    let seconds = t.elapsed().as_secs_f64();
    let victims = outcome.stats.victims.values().sum();
    let served = outcome
        .stats
        .preemption_attempts
        .get("evicted")
        .copied()
        .unwrap_or(0);
    (seconds, victims, served)
}

/// Pending one-node gangs in the consolidation figure.
pub const CONSOLIDATORS: usize = 500;

/// The consolidation figure: `nodes` 8-GPU nodes full of single-GPU ReplicaSet pods (running
/// an hour, priority 0), except that for each of [`CONSOLIDATORS`] gangs (4 or 8 one-GPU
/// members, one node, priority 0) one node has one GPU less than it needs free and another one
/// GPU free: the gang fits once one pod moves, and there is no room to spare. Returns (seconds of the one session, pods
/// moved, gangs served).
pub fn consolidate_figure(nodes: usize, seed: u64) -> (f64, u64, u64) {
    use caldera_testkit::builders::{node, pod, podgroup, Cluster};
    let config = caldera_config::parse(
        "actions: \"enqueue, allocate, consolidate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n  - name: binpack\nconfigurations:\n- name: consolidate\n  arguments:\n    maxPods: 100000\n    maxGPUs: 100000\n",
        None,
    )
    .expect("the consolidation bench config parses");
    let scheduler =
        caldera_plugins::scheduler(&config).expect("the consolidation bench config builds");
    let mut rng = Rng::new(seed ^ 0xC0_7501);
    let mut c = Cluster::new();
    let gangs = CONSOLIDATORS.min(nodes / 2);
    let mut sizes = Vec::with_capacity(gangs);
    for n in 0..nodes {
        c = c.node(
            node(&format!("n{n:05}"))
                .gpus(8)
                .cpu(128)
                .memory_gi(1024)
                .label("kubernetes.io/hostname", &format!("n{n:05}")),
        );
    }
    for _ in 0..gangs {
        sizes.push(if rng.range(0, 1) == 0 { 4 } else { 8 });
    }
    let mut pods = 0usize;
    for n in 0..nodes {
        // Node 2g is one GPU short for gang g, node 2g+1 has the GPU its moved pod takes. An
        // 8-GPU gang's node holds one pod of 125 CPUs (so a 4-GPU gang cannot take the 7 free
        // GPUs beside it), which only its partner node, of light pods, has the CPUs for.
        let size = sizes.get(n / 2).copied().unwrap_or(0);
        let (free, cpu) = match n {
            n if n < 2 * gangs && n % 2 == 0 => (size - 1, if size == 8 { 125_000 } else { 1000 }),
            n if n < 2 * gangs => (1, if size == 8 { 100 } else { 1000 }),
            _ => (0, 1000),
        };
        for p in 0..(8 - free) {
            c = c.pod(
                pod("bench", &format!("web-{n:05}-{p}"))
                    .gpus(1)
                    .cpu_milli(cpu)
                    .on(&format!("n{n:05}"))
                    .running()
                    .controlled_by("ReplicaSet", &format!("web-{}", pods % 97), Some("h")),
            );
            pods += 1;
        }
    }
    for (g, &size) in sizes.iter().enumerate() {
        let name = format!("tp-{g:05}");
        c = c.group(
            podgroup("bench", &name)
                .min_member(size as u32)
                .topology(true, "kubernetes.io/hostname"),
        );
        for m in 0..size {
            c = c.pod(
                pod("bench", &format!("{name}-{m}"))
                    .group(&name)
                    .gpus(1)
                    .cpu_milli(1000)
                    .created(1_000_000 + g as i64),
            );
        }
    }
    let snapshot = c.snapshot();
    let t = Instant::now();
    let outcome = scheduler.run_owned(snapshot, Time::from_secs(1_767_225_600));
    let seconds = t.elapsed().as_secs_f64();
    let served = outcome
        .stats
        .consolidation_attempts
        .get("moved")
        .copied()
        .unwrap_or(0);
    (seconds, outcome.stats.consolidation_moves, served)
}

/// The DRA figure on its own (`caldera bench session --only dra`): the `dra_*` fields of
/// [`SessionResult`].
#[derive(Debug, Clone, Serialize)]
pub struct DraResult {
    /// Nodes.
    pub nodes: usize,
    /// Members placed with their devices.
    pub dra_placements: u64,
    /// Session time.
    pub dra_session_seconds: f64,
    /// dra_placements / dra_session_seconds.
    pub dra_placements_per_second: f64,
    /// Members placed with their shares ([`SessionResult::shared_gpu_placements`]).
    pub shared_gpu_placements: u64,
    /// Session time.
    pub shared_gpu_session_seconds: f64,
    /// shared_gpu_placements / shared_gpu_session_seconds.
    pub shared_gpu_placements_per_second: f64,
    /// Peak resident set size so far.
    pub peak_rss_bytes: u64,
}

impl SessionResult {
    /// Its DRA figure, as `--only dra` reports it.
    pub fn dra(&self) -> DraResult {
        DraResult {
            nodes: self.nodes,
            dra_placements: self.dra_placements,
            dra_session_seconds: self.dra_session_seconds,
            dra_placements_per_second: self.dra_placements_per_second,
            shared_gpu_placements: self.shared_gpu_placements,
            shared_gpu_session_seconds: self.shared_gpu_session_seconds,
            shared_gpu_placements_per_second: self.shared_gpu_placements_per_second,
            peak_rss_bytes: self.peak_rss_bytes,
        }
    }
}

/// Runs only the DRA figure at `nodes` nodes.
pub fn dra(nodes: usize, seed: u64) -> DraResult {
    let (placements, seconds) = dra_figure(nodes, seed);
    let (shared_placements, shared_seconds) = shared_gpu_figure(nodes, seed);
    DraResult {
        nodes,
        dra_placements: placements,
        dra_session_seconds: seconds,
        dra_placements_per_second: placements as f64 / seconds.max(1e-9),
        shared_gpu_placements: shared_placements,
        shared_gpu_session_seconds: shared_seconds,
        shared_gpu_placements_per_second: shared_placements as f64 / shared_seconds.max(1e-9),
        peak_rss_bytes: crate::peak_rss_bytes(),
    }
}

/// The DRA bench's driver.
const DRA_DRIVER: &str = "gpu.nvidia.com";

/// The DRA figure (see [`SessionResult::dra_placements`]): (placements, session seconds).
pub fn dra_figure(nodes: usize, seed: u64) -> (u64, f64) {
    claims_figure(nodes, seed, false)
}

/// The shared-GPU figure (see [`SessionResult::shared_gpu_placements`]): (placements,
/// session seconds).
pub fn shared_gpu_figure(nodes: usize, seed: u64) -> (u64, f64) {
    claims_figure(nodes, seed, true)
}

/// The DRA figures: nodes × 8 GPUs published as devices and members with one-GPU claims in one
/// session. Unshared: nodes × 4 members in gangs of 1–64, each a whole device. Shared: the
/// devices allow multiple allocations with one capacity `share` of 1, and nodes × 8 members in
/// gangs of 1–16, half of them asking a fraction (`share` 0.25 or 0.5), the rest a whole GPU
/// (`share` 1).
fn claims_figure(nodes: usize, seed: u64, shared: bool) -> (u64, f64) {
    use caldera_model::dra::{
        AllocationMode, AttributeValue, Capacity, Claim, Device, DeviceClass, DeviceNodes,
        DeviceRequest, ExactRequest, PodClaim, Quantity, RequestKind, TaskClaims,
    };
    use caldera_testkit::builders::{node, pod, podgroup, Cluster};
    use std::collections::BTreeMap;
    use std::sync::Arc;
    let scheduler =
        caldera_plugins::scheduler(&SchedulerConfig::default()).expect("shipped config builds");
    let mut rng = Rng::new(seed ^ 0xD7A_0001);
    let mut c = Cluster::new();
    for n in 0..nodes {
        c = c.node(node(&format!("n{n:05}")).cpu(128).memory_gi(1024));
    }
    let (members, largest) = if shared {
        (nodes * 8, 16)
    } else {
        (nodes * 4, 64)
    };
    let (mut made, mut gang) = (0usize, 0usize);
    while made < members {
        let size = (rng.range(1, largest + 1) as usize).min(members - made);
        let name = format!("train-{gang:05}");
        c = c.group(podgroup("bench", &name).min_member(size as u32));
        for m in 0..size {
            c = c.pod(
                pod("bench", &format!("{name}-{m}"))
                    .group(&name)
                    .cpu_milli(1000)
                    .created(gang as i64),
            );
        }
        made += size;
        gang += 1;
    }
    let mut snapshot = c.snapshot();
    let q = |name: &str| -> Arc<str> { Arc::from(format!("{DRA_DRIVER}/{name}")) };
    let product = "NVIDIA H100 80GB HBM3";
    let inv = &mut snapshot.dra;
    inv.classes.push(DeviceClass {
        name: DRA_DRIVER.into(),
        selectors: vec![Arc::from(format!("device.driver == '{DRA_DRIVER}'"))],
        config: Vec::new(),
        extended_resource_name: Some("nvidia.com/gpu".into()),
        created: Time::from_secs(0),
    });
    let memory = Capacity::new("memory", 80 * (1i64 << 30) * 1000, "80Gi");
    for n in 0..nodes {
        let pool: Arc<str> = Arc::from(format!("n{n:05}"));
        for i in 0..8i64 {
            inv.devices.push(Device {
                driver: DRA_DRIVER.into(),
                pool: pool.clone(),
                name: Arc::from(format!("gpu-{i}")),
                attributes: BTreeMap::from([
                    (q("productName"), AttributeValue::String(product.into())),
                    (q("architecture"), AttributeValue::String("Hopper".into())),
                    (q("index"), AttributeValue::Int(i)),
                    (
                        q("cliqueID"),
                        AttributeValue::String(format!("{pool}-{}", i / 4).into()),
                    ),
                ]),
                capacity: if shared {
                    BTreeMap::from([(q("share"), Capacity::new("share", 1000, "1"))])
                } else {
                    BTreeMap::from([(q("memory"), memory.clone())])
                },
                nodes: DeviceNodes::Node(pool.clone()),
                shared,
                consumes: Vec::new(),
                unsupported: None,
            });
        }
    }
    let selector: Arc<str> = Arc::from(format!(
        "device.attributes['{DRA_DRIVER}'].productName == '{product}'"
    ));
    let mut shares = Rng::new(seed ^ 0x5A4_0001);
    for t in snapshot.tasks.iter_mut() {
        let claim: Arc<str> = Arc::from(format!("{}-gpu-x7k2q", t.name));
        // Half the members a fraction of one GPU (a quarter or a half), the rest a whole one.
        let capacity = if shared {
            let milli = match shares.range(0, 4) {
                0 => 250,
                1 => 500,
                _ => 1000,
            };
            BTreeMap::from([(Arc::from("share"), Quantity::from_milli(milli))])
        } else {
            BTreeMap::new()
        };
        snapshot.dra.claims.push(Claim {
            namespace: t.namespace.clone(),
            name: claim.clone(),
            uid: Arc::from(format!("uid-{claim}")),
            requests: vec![DeviceRequest {
                name: "gpu".into(),
                kind: RequestKind::Exactly(ExactRequest {
                    class: DRA_DRIVER.into(),
                    selectors: vec![selector.clone()],
                    mode: AllocationMode::ExactCount(1),
                    admin_access: false,
                    capacity,
                }),
            }],
            constraints: Vec::new(),
            config: Vec::new(),
            allocation: None,
            reserved_for: Vec::new(),
            deleting: false,
            owner: Some(("Pod".into(), t.uid.clone())),
            unsupported: None,
        });
        t.claims = Some(Arc::new(TaskClaims {
            claims: vec![PodClaim {
                pod_claim: "gpu".into(),
                claim,
                from_template: true,
            }],
            ..TaskClaims::default()
        }));
    }
    let inv = &mut snapshot.dra;
    inv.devices
        .sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
    inv.claims
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let t = Instant::now();
    let outcome = scheduler.run_owned(snapshot, Time::from_secs(1_767_225_600));
    (outcome.stats.placements, t.elapsed().as_secs_f64())
}

fn index_of(objects: &gen::Objects) -> ClusterIndex {
    let mut idx = ClusterIndex::new();
    for n in &objects.nodes {
        let _ = idx.apply(n);
    }
    for q in &objects.queues {
        let _ = idx.apply(q);
    }
    for pg in &objects.podgroups {
        let _ = idx.apply(pg);
    }
    for c in &objects.classes {
        let _ = idx.apply(c);
    }
    for v in &objects.volumes {
        let _ = idx.apply(v);
    }
    for c in &objects.claims {
        let _ = idx.apply(c);
    }
    for p in &objects.pods {
        let _ = idx.apply(p);
    }
    idx
}

/// Members per sub-group in the network-topology figure.
const SUB_GROUP: u32 = 16;

/// The network-topology figure on its own (`caldera bench session --only topology`): the
/// `topology_*` fields of [`SessionResult`], with the unconstrained run's counts.
#[derive(Debug, Clone, Serialize)]
pub struct TopologyResult {
    /// Nodes.
    pub nodes: usize,
    /// Members placed in the session with the topology rules.
    pub topology_placements: u64,
    /// Session time of that run.
    pub topology_session_seconds: f64,
    /// topology_placements / topology_session_seconds.
    pub topology_placements_per_second: f64,
    /// Members placed in the same run without any rule.
    pub topology_unconstrained_placements: u64,
    /// Session time of that run.
    pub topology_unconstrained_session_seconds: f64,
    /// topology_unconstrained_placements / topology_unconstrained_session_seconds.
    pub topology_unconstrained_placements_per_second: f64,
    /// Peak resident set size so far.
    pub peak_rss_bytes: u64,
}

/// Runs only the network-topology figure at `nodes` nodes.
pub fn topology(nodes: usize, seed: u64) -> TopologyResult {
    let ((placements, seconds), (plain_placements, plain_seconds)) = topology_figure(nodes, seed);
    TopologyResult {
        nodes,
        topology_placements: placements,
        topology_session_seconds: seconds,
        topology_placements_per_second: placements as f64 / seconds.max(1e-9),
        topology_unconstrained_placements: plain_placements,
        topology_unconstrained_session_seconds: plain_seconds,
        topology_unconstrained_placements_per_second: plain_placements as f64
            / plain_seconds.max(1e-9),
        peak_rss_bytes: crate::peak_rss_bytes(),
    }
}

/// The network-topology figure (see [`SessionResult::topology_placements`]). Returns
/// (placements, seconds) with the topology rules, then (placements, seconds) without them.
fn topology_figure(nodes: usize, seed: u64) -> ((u64, f64), (u64, f64)) {
    use caldera_testkit::builders::{hypernode, node, podgroup, Cluster};
    let scheduler =
        caldera_plugins::scheduler(&SchedulerConfig::default()).expect("shipped config builds");
    let build = |with_topology: bool| {
        let mut rng = Rng::new(seed ^ 0x70_9010);
        let mut c = Cluster::new();
        for n in 0..nodes {
            c = c.node(node(&format!("n{n:05}")).gpus(8).cpu(128).memory_gi(1024));
        }
        let domains = nodes.div_ceil(8);
        for d in 0..domains {
            let members: Vec<String> = (d * 8..(d * 8 + 8).min(nodes))
                .map(|n| format!("n{n:05}"))
                .collect();
            c = c.hypernode(
                hypernode(&format!("nvl-{d:04}"), 1).nodes(members.iter().map(String::as_str)),
            );
        }
        let spines = domains.div_ceil(16);
        for s in 0..spines {
            let members: Vec<String> = (s * 16..(s * 16 + 16).min(domains))
                .map(|d| format!("nvl-{d:04}"))
                .collect();
            c = c.hypernode(
                hypernode(&format!("spine-{s:03}"), 2).children(members.iter().map(String::as_str)),
            );
        }
        for p in 0..spines.div_ceil(8) {
            let members: Vec<String> = (p * 8..(p * 8 + 8).min(spines))
                .map(|s| format!("spine-{s:03}"))
                .collect();
            c = c.hypernode(
                hypernode(&format!("pod-{p:02}"), 3).children(members.iter().map(String::as_str)),
            );
        }
        for g in 0..(nodes / 5).max(1) {
            let mut size = rng.range(8, 512) as u32;
            // A quarter of the gangs (both hard and soft ones) are split into sub-groups of
            // SUB_GROUP members, each hard within one NVLink domain (tier 1).
            let split = g % 4 >= 2 && g % 8 < 4;
            if split {
                size = (size / SUB_GROUP).max(1) * SUB_GROUP;
            }
            let name = format!("gang-{g:05}");
            let mut group = podgroup("bench", &name).min_member(size).created(g as i64);
            if with_topology {
                group = if g % 2 == 0 {
                    group.network_topology(true, if size <= 64 { 1 } else { 2 })
                } else {
                    group.network_topology(false, 1)
                };
                if split {
                    group = group.sub_groups("part", "part", SUB_GROUP, 0, Some((true, 1)));
                }
            }
            c = c.group(group);
            let member = std::cell::Cell::new(0u32);
            c = c.members("bench", &name, size as usize, |p| {
                let part = member.replace(member.get() + 1) / SUB_GROUP;
                p.gpus(1)
                    .cpu_milli(1000)
                    .created(g as i64)
                    .label("part", &part.to_string())
            });
        }
        c.snapshot()
    };
    let now = Time::from_secs(1_767_225_600);
    let figure = |with_topology: bool| {
        let snapshot = build(with_topology);
        let t = Instant::now();
        let outcome = scheduler.run_owned(snapshot, now);
        (outcome.stats.placements, t.elapsed().as_secs_f64())
    };
    let topology = figure(true);
    let plain = figure(false);
    (topology, plain)
}

/// Runs the session benchmark at `nodes` nodes.
pub fn run(
    nodes: usize,
    running_pods: usize,
    pending_pods: usize,
    backlog_gangs: usize,
    seed: u64,
) -> SessionResult {
    let shape = Shape {
        nodes,
        running_pods,
        pending_pods,
        queues: 10,
        seed,
    };
    let config = SchedulerConfig::default();
    // The shipped config is known to build; a failure here is a bug worth a loud stop.
    let scheduler = caldera_plugins::scheduler(&config).expect("shipped config builds");
    let opts = SnapshotOptions::default();
    let now = Time::from_secs(1_767_225_600);

    let objects = gen::cluster(&shape);
    let idx = index_of(&objects);
    drop(objects);
    let t = Instant::now();
    let snapshot = idx.snapshot(&opts);
    let snapshot_seconds = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let outcome = scheduler.run_owned(snapshot, now);
    let session_seconds = t.elapsed().as_secs_f64();
    let placements = outcome.stats.placements;
    drop((idx, outcome));

    // The same workload with a fifth of the gangs constrained and 5% of the pods mounting
    // claims.
    let mut objects = gen::cluster(&shape);
    gen::constrain_gangs(&mut objects, "pending");
    gen::mount_claims(&mut objects, "pending");
    let idx = index_of(&objects);
    drop(objects);
    let snapshot = idx.snapshot(&opts);
    let t = Instant::now();
    let outcome = scheduler.run_owned(snapshot, now);
    let constrained_session_seconds = t.elapsed().as_secs_f64();
    let constrained_placements = outcome.stats.placements;
    drop((idx, outcome));

    // Backlog: every GPU taken, then gangs that cannot fit.
    let full = Shape {
        running_pods: nodes * 8,
        pending_pods: 0,
        ..shape.clone()
    };
    let mut objects = gen::cluster(&full);
    // Every running pod holds one GPU: 8 per node fills every node.
    let mut rng = Rng::new(seed ^ 0xB4C_106);
    gen::pending_gangs(
        &mut rng,
        &full,
        &mut objects,
        "backlog",
        gen::Until::Gangs(backlog_gangs),
        2,
        64,
    );
    for p in objects.pods.iter_mut() {
        // Fill the nodes completely: give every running pod a GPU.
        if p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
            if let Some(c) = p.spec.as_mut().and_then(|s| s.containers.first_mut()) {
                let res = c.resources.get_or_insert_with(Default::default);
                res.requests.get_or_insert_with(Default::default).insert(
                    "nvidia.com/gpu".into(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
                );
            }
        }
    }
    let idx = index_of(&objects);
    drop(objects);
    let mut snapshot = idx.snapshot(&opts);
    let t = Instant::now();
    let outcome = scheduler.run(&snapshot, now);
    let backlog_first_session_seconds = t.elapsed().as_secs_f64();
    // The steady state: the first session's conditions are written; the next one finds
    // nothing new to say.
    snapshot.record(&outcome.plan);
    let copy = snapshot.clone();
    let t = Instant::now();
    let outcome = scheduler.run_owned(copy, Time(now.0 + 1000));
    let backlog_session_seconds = t.elapsed().as_secs_f64();

    let backlog_writes = outcome.plan.pod_conditions.len() + outcome.plan.podgroups.len();
    drop((idx, outcome, snapshot));
    let (preempt_session_seconds, preempt_victims, preemptors_served) = preempt_figure(nodes, seed);
    let (consolidate_session_seconds, consolidate_moves, consolidate_served) =
        consolidate_figure(nodes, seed);
    let (
        flat_queues_session_seconds,
        flat_queues_placements,
        hierarchical_session_seconds,
        hierarchical_placements,
    ) = hierarchy_figure(&shape, now);
    let (
        proportion_queues_session_seconds,
        proportion_queues_placements,
        fairshare_queues_session_seconds,
        fairshare_queues_placements,
    ) = fairshare_figure(&shape, now);
    let ((topology_placements, topology_session_seconds), (plain_placements, plain_seconds)) =
        topology_figure(nodes, seed);
    let dra = dra(nodes, seed);

    SessionResult {
        nodes,
        running_pods,
        pending_pods,
        snapshot_seconds,
        session_seconds,
        placements,
        placements_per_second: placements as f64 / session_seconds.max(1e-9),
        backlog_session_seconds,
        backlog_first_session_seconds,
        backlog_writes,
        backlog_gangs,
        constrained_placements,
        constrained_session_seconds,
        constrained_placements_per_second: constrained_placements as f64
            / constrained_session_seconds.max(1e-9),
        preempt_session_seconds,
        preempt_victims,
        preemptors_served,
        consolidate_session_seconds,
        consolidate_moves,
        consolidate_served,
        flat_queues_session_seconds,
        flat_queues_placements,
        hierarchical_session_seconds,
        hierarchical_placements,
        hierarchical_ratio: hierarchical_session_seconds / flat_queues_session_seconds.max(1e-9),
        proportion_queues_session_seconds,
        fairshare_queues_session_seconds,
        proportion_queues_placements,
        fairshare_queues_placements,
        fairshare_ratio: fairshare_queues_session_seconds
            / proportion_queues_session_seconds.max(1e-9),
        topology_placements,
        topology_session_seconds,
        topology_placements_per_second: topology_placements as f64
            / topology_session_seconds.max(1e-9),
        topology_unconstrained_placements_per_second: plain_placements as f64
            / plain_seconds.max(1e-9),
        dra_placements: dra.dra_placements,
        dra_session_seconds: dra.dra_session_seconds,
        dra_placements_per_second: dra.dra_placements_per_second,
        shared_gpu_placements: dra.shared_gpu_placements,
        shared_gpu_session_seconds: dra.shared_gpu_session_seconds,
        shared_gpu_placements_per_second: dra.shared_gpu_placements_per_second,
        peak_rss_bytes: crate::peak_rss_bytes(),
    }
}
