//! The session benchmark on a tiny cluster: it runs, the preemption figure evicts, and the
//! hierarchical-queue figure runs.

#[test]
fn session_bench_runs_and_the_full_cluster_preempts() {
    let r = caldera_bench::session::run(40, 200, 100, 20, 7);
    assert!(r.session_seconds > 0.0);
    assert!(r.preempt_session_seconds > 0.0);
    assert!(r.preempt_victims > 0, "{r:?}");
    assert!(r.preemptors_served > 0, "{r:?}");
    // The hierarchical-queue figure runs both sessions (on so small a cluster the groups'
    // capabilities hold the tree's few large gangs back, so only flat is sure to place).
    assert!(r.flat_queues_placements > 0, "{r:?}");
    assert!(r.hierarchical_session_seconds > 0.0, "{r:?}");
    assert!(r.hierarchical_ratio > 0.0, "{r:?}");
}

#[test]
fn figures_run_alone_place_what_the_full_bench_places() {
    // `caldera bench session --only topology|queues` measure the same sessions as the full
    // bench: same seed, same members placed.
    let full = caldera_bench::session::run(40, 200, 100, 20, 7);
    let topology = caldera_bench::session::topology(40, 7);
    assert!(topology.topology_placements > 0, "{topology:?}");
    assert_eq!(topology.topology_placements, full.topology_placements);
    assert!(topology.topology_unconstrained_session_seconds > 0.0);
    let queues = caldera_bench::session::queues(40, 200, 100, 7);
    assert_eq!(queues.placements, full.placements);
    assert_eq!(queues.flat_queues_placements, full.flat_queues_placements);
    assert_eq!(queues.hierarchical_placements, full.hierarchical_placements);
}
