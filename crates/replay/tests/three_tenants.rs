//! Fairness over time on the committed three-tenant week (examples/replay/three-tenants.csv,
//! docs/replay.md): with `fairshare-scheduler.conf` the week's GPU-hours per queue ÷ weight
//! are fairer than under the shipped config (Jain's index over the whole run, 168 h windows:
//! ≥ 0.98 and higher), and every 32-GPU gang starts, where the shipped config starts none of
//! those its queue's weighted share cannot hold.

use caldera_replay::{cluster, metrics, timeline};

fn example(name: &str) -> String {
    let path = format!(
        "{}/../../examples/replay/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap()
}

fn replay(config: caldera_config::SchedulerConfig) -> metrics::Metrics {
    let jobs = caldera_replay::input::read_trace(&example("three-tenants.csv"), "trace").unwrap();
    let mut objects = Vec::new();
    for n in
        caldera_replay::input::read_nodes(&example("three-tenants-nodes.csv"), "nodes").unwrap()
    {
        objects.push(cluster::node_object(&n).unwrap());
    }
    for q in cluster::read_queues(&example("three-tenants-queues.csv"), "queues").unwrap() {
        objects.push(cluster::queue_object(&q).unwrap());
    }
    let inputs = timeline::Inputs {
        config,
        objects,
        jobs,
    };
    let run = timeline::run(&inputs, timeline::SessionPolicy::Events).unwrap();
    assert!(run.violations.is_empty(), "{:?}", run.violations);
    metrics::timeline(&run, 168 * 3_600_000, "")
}

#[test]
fn fairshare_is_fairer_over_the_week_and_starts_every_big_gang() {
    let shipped = replay(caldera_config::SchedulerConfig::default());
    let path = format!(
        "{}/../../examples/replay/fairshare-scheduler.conf",
        env!("CARGO_MANIFEST_DIR")
    );
    let fair = replay(caldera_config::load(std::path::Path::new(&path)).unwrap());
    let (before, after) = (shipped.fairness.unwrap(), fair.fairness.unwrap());
    assert!(after >= 0.98 && after > before, "Jain {before} -> {after}");
    let big = |m: &metrics::Metrics| {
        let waits = m.wait_seconds.as_ref().unwrap();
        waits.per_gang_gpus.get("32+").map_or(0, |s| s.count)
    };
    assert_eq!(fair.jobs.never_placed, 0);
    assert_eq!(big(&fair), 11, "every 32-GPU gang starts");
    assert!(big(&shipped) < 11 && shipped.jobs.never_placed > 0);
    // The run ends within the week, so one 168 h window is the whole run.
    assert!(fair.makespan_seconds.unwrap() < 168.0 * 3600.0);
    assert_eq!(fair.partial_gang_seconds, 0.0);
}
