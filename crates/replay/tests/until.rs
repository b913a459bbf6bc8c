//! `--until`: a timeline replay stopped part way, as for a trace's first week.

mod common;

use caldera_config::SchedulerConfig;
use caldera_replay::trace::{Gpu, JobSpec};
use caldera_replay::{metrics, timeline};

fn job(name: &str, submit_s: i64, duration_s: i64, gpus: u32) -> JobSpec {
    let mut j = JobSpec::new(
        name,
        submit_s * 1000,
        duration_s * 1000,
        1,
        Gpu::whole(gpus),
    );
    j.cpu_milli = 1000;
    j
}

#[test]
fn a_replay_until_a_time_cuts_what_runs_and_replays_no_later_arrival() {
    // One 4-GPU node: `first` runs 0-100 s, `second` waits for it from 10 s, `late` comes at
    // 500 s. Until 60 s: `first` is cut at 60 s, `second` never started, `late` never came.
    let inputs = timeline::Inputs {
        config: SchedulerConfig::default(),
        objects: common::nodes(&[4]),
        jobs: vec![
            job("first", 0, 100, 4),
            job("second", 10, 50, 4),
            job("late", 500, 10, 1),
        ],
    };
    let run = timeline::run_until(&inputs, timeline::SessionPolicy::Events, Some(60_000))
        .expect("replays");
    assert_eq!(run.last_ms, 60_000);
    let m = metrics::timeline(&run, 3_600_000, "shipped");
    assert_eq!(m.jobs.submitted, 2, "{:?}", m.jobs);
    assert_eq!(
        (m.jobs.placed, m.jobs.completed, m.jobs.never_placed),
        (1, 0, 1)
    );
    // The run ends at 60 s: the cluster was full from the first bind (a session's delay
    // after 0 s) to the end.
    assert_eq!(m.makespan_seconds, Some(60.0));
    assert!(m.gpu_allocation_ratio > Some(0.97), "{m:?}");
    let held: i64 = run.usage.iter().map(|u| u.end_ms - u.start_ms).sum();
    assert!(
        (59_000..=60_000).contains(&held),
        "first held its GPUs until 60 s: {held} ms"
    );
    // The same trace to the end runs all three.
    let all = timeline::run(&inputs, timeline::SessionPolicy::Events).expect("replays");
    let m = metrics::timeline(&all, 3_600_000, "shipped");
    assert_eq!((m.jobs.submitted, m.jobs.completed), (3, 3));
}
