//! The knavigator gang-scheduling workload (examples/replay/) under the shipped config:
//! makespan within 1.15 × the ideal 270 s and mean GPU allocation ≥ 0.85.

use caldera_replay::{cluster, metrics, timeline};

fn example(name: &str) -> String {
    let path = format!(
        "{}/../../examples/replay/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn knavigator_gang_benchmark_meets_its_targets_under_the_shipped_config() {
    let jobs =
        caldera_replay::input::read_trace(&example("knavigator-gang.csv"), "knavigator-gang.csv")
            .unwrap();
    let nodes =
        caldera_replay::input::read_nodes(&example("knavigator-nodes.csv"), "knavigator-nodes.csv")
            .unwrap();
    let objects = nodes
        .iter()
        .map(|n| cluster::node_object(n).unwrap())
        .collect();
    let inputs = timeline::Inputs {
        config: caldera_config::SchedulerConfig::default(),
        objects,
        jobs,
    };
    let run = timeline::run(&inputs, timeline::SessionPolicy::Events).unwrap();
    let m = metrics::timeline(&run, 3_600_000, "shipped");
    eprintln!("{}", metrics::to_json(&m));
    assert!(run.violations.is_empty(), "{:?}", run.violations);
    assert_eq!(m.jobs.completed, 53);
    assert_eq!(m.partial_gang_seconds, 0.0);
    let makespan = m.makespan_seconds.unwrap();
    assert!(makespan <= 1.15 * 270.0, "makespan {makespan}");
    assert!(
        m.gpu_allocation_ratio.unwrap() >= 0.85,
        "{:?}",
        m.gpu_allocation_ratio
    );
}
