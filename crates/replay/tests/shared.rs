//! Inflation replays of traces with fractions of a GPU: the nodes' GPUs become shared DRA
//! devices, each member's claim asks its share, and the real session places them (a GPU holds
//! shares up to one GPU; a whole-GPU member never lands on a GPU that holds a share).

mod common;

use caldera_config::SchedulerConfig;
use caldera_replay::inflation;
use caldera_replay::timeline::Inputs;
use caldera_replay::trace::{Gpu, JobSpec};
use common::nodes;

fn pod(name: &str, gpu: Gpu) -> JobSpec {
    let mut j = JobSpec::new(name, 0, 0, 1, gpu);
    j.cpu_milli = 1000;
    j
}

fn run(gpus: u32, jobs: Vec<JobSpec>, arrival: f64, seed: u64) -> inflation::Inflation {
    let inputs = Inputs {
        config: SchedulerConfig::default(),
        objects: nodes(&[gpus]),
        jobs,
    };
    inflation::run(&inputs, arrival, seed, inflation::BATCH).unwrap()
}

#[test]
fn four_quarter_gpus_share_one_gpu() {
    let jobs = (0..4)
        .map(|i| pod(&format!("q{i}"), Gpu::from_milli(250).unwrap()))
        .collect();
    let r = run(1, jobs, 1.0, 7);
    assert_eq!((r.placed, r.failed), (4, 0));
    let last = r.points.last().unwrap();
    assert_eq!((last.allocated_milli, last.idle_milli), (1000, 0));
}

#[test]
fn a_whole_gpu_member_is_refused_every_gpu_holding_a_share() {
    // 0.6 + 0.6 + 1 on two GPUs, whatever the order: the shares cannot share a GPU, so one of
    // the three never fits, and the record of what each GPU holds (read back from the claims'
    // allocations) agrees with the GPUs allocated.
    for seed in 0..8 {
        let jobs = vec![
            pod("a", Gpu::from_milli(600).unwrap()),
            pod("b", Gpu::from_milli(600).unwrap()),
            pod("c", Gpu::whole(1)),
        ];
        let r = run(2, jobs, 1.1, seed);
        assert_eq!((r.submitted, r.placed, r.failed), (3, 2, 1), "seed {seed}");
        let last = r.points.last().unwrap();
        assert!(
            last.allocated_milli == 1200 || last.allocated_milli == 1600,
            "seed {seed}: {last:?}"
        );
        assert_eq!(last.idle_milli, 2000 - last.allocated_milli, "seed {seed}");
    }
}

#[test]
fn shares_pack_beside_a_whole_gpu_member() {
    // 1 + 0.25 + 0.25 on two GPUs: all placed in any order (the shares go to one GPU).
    for seed in 0..8 {
        let jobs = vec![
            pod("w", Gpu::whole(1)),
            pod("q0", Gpu::from_milli(250).unwrap()),
            pod("q1", Gpu::from_milli(250).unwrap()),
        ];
        let r = run(2, jobs, 0.75, seed);
        assert_eq!((r.placed, r.failed), (3, 0), "seed {seed}");
        assert!(r.refused.is_empty());
        assert_eq!(r.points.last().unwrap().idle_milli, 500);
    }
}

fn fgd() -> SchedulerConfig {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/replay/fgd-scheduler.conf"
    ))
    .unwrap();
    caldera_config::parse(&text, None).unwrap()
}

#[test]
fn fgd_puts_shares_together_so_whole_gpus_stay_whole() {
    // Two one-GPU nodes; two half-GPU pods and a whole-GPU pod, in every order the seeds
    // give. fgd sends the second half to the GPU already half used (a whole GPU split in two
    // halves on two nodes would leave no node for the whole-GPU pod): all three are placed.
    // Spreading (nodeorder's least-allocated alone) splits them for some orders.
    let spread = caldera_config::parse(
        "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n\
         - plugins:\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\n",
        None,
    )
    .unwrap();
    let mut orders = std::collections::BTreeSet::new();
    let mut spread_failed = 0;
    for seed in 0..12 {
        let jobs = vec![
            pod("h0", Gpu::from_milli(500).unwrap()),
            pod("h1", Gpu::from_milli(500).unwrap()),
            pod("w", Gpu::whole(1)),
        ];
        let inputs = Inputs {
            config: fgd(),
            objects: nodes(&[1, 1]),
            jobs: jobs.clone(),
        };
        let order: Vec<String> = inflation::arrivals(&jobs, 2000, 1.0, seed)
            .into_iter()
            .map(|j| j.name)
            .collect();
        orders.insert(order);
        let r = inflation::run(&inputs, 1.0, seed, 1).unwrap();
        assert_eq!((r.placed, r.failed), (3, 0), "seed {seed}");
        let inputs = Inputs {
            config: spread.clone(),
            ..inputs
        };
        spread_failed += inflation::run(&inputs, 1.0, seed, 1).unwrap().failed;
    }
    assert!(orders.len() > 1, "the seeds gave one order only");
    assert!(spread_failed > 0, "spreading never split the halves");
}

/// `examples/replay/bestfit-scheduler.conf`, with its weight on the GPUs' DeviceClass set to
/// `class_weight`.
fn bestfit(class_weight: u32) -> SchedulerConfig {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/replay/bestfit-scheduler.conf"
    ))
    .unwrap();
    let line = "binpack.resources.gpu.nvidia.com: 1";
    assert!(
        text.contains(line),
        "the example config weighs the GPU class"
    );
    let text = text.replace(
        line,
        &format!("binpack.resources.gpu.nvidia.com: {class_weight}"),
    );
    caldera_config::parse(&text, None).unwrap()
}

#[test]
fn binpack_weighs_shared_gpus_by_what_their_devices_hold() {
    // A 4-GPU node and a 2-GPU node, their GPUs shared DRA devices (the trace has a fraction);
    // a 1-GPU and a 0.5-GPU member, then a 4-GPU one, in every order the seeds give. Binpack
    // weighing the GPU class sends the small ones to the 2-GPU node (fuller by GPUs, equal by
    // CPU), so the 4-GPU member finds its node whole. Weighing CPU alone, the small ones tie
    // on CPU and some orders split the 4-GPU node.
    let jobs = vec![
        pod("one", Gpu::whole(1)),
        pod("half", Gpu::from_milli(500).unwrap()),
        pod("four", Gpu::whole(4)),
    ];
    let mut cpu_only_failed = 0;
    for seed in 0..12 {
        let inputs = Inputs {
            config: bestfit(1),
            objects: nodes(&[4, 2]),
            jobs: jobs.clone(),
        };
        let r = inflation::run(&inputs, 0.92, seed, 1).unwrap();
        assert_eq!((r.placed, r.failed), (3, 0), "seed {seed}: {:?}", r.refused);
        let inputs = Inputs {
            config: bestfit(0),
            ..inputs
        };
        cpu_only_failed += inflation::run(&inputs, 0.92, seed, 1).unwrap().failed;
    }
    assert!(cpu_only_failed > 0, "CPU alone never split the 4-GPU node");
}
