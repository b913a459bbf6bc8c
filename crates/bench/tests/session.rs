//! The session benchmark on a tiny cluster: it runs, and the preemption figure evicts.

#[test]
fn session_bench_runs_and_the_full_cluster_preempts() {
    let r = caldera_bench::session::run(40, 200, 100, 20, 7);
    assert!(r.session_seconds > 0.0);
    assert!(r.preempt_session_seconds > 0.0);
    assert!(r.preempt_victims > 0, "{r:?}");
    assert!(r.preemptors_served > 0, "{r:?}");
}
