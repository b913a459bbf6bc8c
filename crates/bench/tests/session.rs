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
    // The fairness-over-time figure runs both sessions and places in both.
    assert!(r.proportion_queues_placements > 0, "{r:?}");
    assert!(r.fairshare_queues_placements > 0, "{r:?}");
    assert!(r.fairshare_ratio > 0.0, "{r:?}");
}

/// The consolidation figure serves every fragmented gang with one move each.
#[test]
fn consolidation_figure_moves_one_pod_per_gang() {
    let (seconds, moves, served) = caldera_bench::session::consolidate_figure(40, 7);
    assert!(seconds > 0.0);
    assert_eq!(served, 20, "every gang served");
    assert_eq!(moves, 20, "one pod moved per gang");
}

/// Timing at the size, in debug: `cargo test -p caldera-bench --test session -- --ignored`.
#[test]
#[ignore = "slow in debug; run with --ignored (the figure in `caldera bench session` is the release one)"]
fn consolidation_figure_at_5000_nodes() {
    let (seconds, moves, served) = caldera_bench::session::consolidate_figure(5_000, 7);
    eprintln!("consolidate_session_seconds {seconds:.3} moves {moves} served {served}");
    assert_eq!(served, 500);
}

/// The DRA figure places every member with its device when the devices suffice (40 nodes ×
/// 8 GPUs, 160 one-GPU members): each gang whole, none left over.
#[test]
fn dra_figure_places_every_member_with_a_device() {
    let (placed, seconds) = caldera_bench::session::dra_figure(40, 7);
    assert_eq!(placed, 160);
    assert!(seconds > 0.0);
}

/// The shared-GPU figure places every member with its share when the GPUs suffice (40 nodes ×
/// 8 shared GPUs, 320 members, half a quarter or a half of a GPU, the rest a whole one).
#[test]
fn shared_gpu_figure_places_every_member_with_its_share() {
    let (placed, seconds) = caldera_bench::session::shared_gpu_figure(40, 7);
    assert_eq!(placed, 320);
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
