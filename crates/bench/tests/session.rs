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

/// The DRA figure places every member with its device when the devices suffice (40 nodes ×
/// 8 GPUs, 160 one-GPU members): each gang whole, none left over.
#[test]
fn dra_figure_places_every_member_with_a_device() {
    let (placed, seconds) = caldera_bench::session::dra_figure(40, 7);
    assert_eq!(placed, 160);
    assert!(seconds > 0.0);
}

/// `dra_placements_per_second` at the size (5,000 nodes × 8 devices, 20,000 members).
/// Slow in a debug build: run with `--ignored --nocapture` (release for the real figure).
#[test]
#[ignore]
fn dra_figure_at_full_size() {
    let (placed, seconds) = caldera_bench::session::dra_figure(5_000, 7);
    println!(
        "dra: {placed} placed in {seconds:.3}s = {:.0} placements/s",
        placed as f64 / seconds
    );
    assert_eq!(placed, 20_000);
}
