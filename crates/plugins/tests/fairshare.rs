//! fairshare: fairness over time. Past use (Queue `status.usage`, decayed with the
//! half-life on the session's clock) adjusts proportion's weighted split by KAI's formula;
//! explicit deserved shares and guarantees are never cut; half-life 0 or `kValue` 0 leave
//! every decision as it is without the plugin.

use caldera_config::SchedulerConfig;
use caldera_model::{Plan, QueueUsage, Snapshot, Time};
use caldera_plugins::scheduler;
use caldera_session::Outcome;
use caldera_testkit::builders::{node, pod, podgroup, queue, Cluster, QueueBuilder};
use proptest::prelude::*;

const HOUR: i64 = 3600;
/// The sessions' clock: day 30, so records twelve hours old are after the epoch.
const NOW: i64 = 30 * 24 * HOUR;

fn config(fairshare: Option<&str>) -> SchedulerConfig {
    let fair = fairshare
        .map(|args| format!("  - name: fairshare\n    arguments: {{{args}}}\n"))
        .unwrap_or_default();
    let text = format!(
        "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: predicates\n  - name: proportion\n{fair}  - name: nodeorder\n"
    );
    caldera_config::parse(&text, None).expect("test config parses")
}

fn run(cfg: &SchedulerConfig, snapshot: &Snapshot, secs: i64) -> Plan {
    outcome(cfg, snapshot, secs).plan
}

fn outcome(cfg: &SchedulerConfig, snapshot: &Snapshot, secs: i64) -> Outcome {
    scheduler(cfg)
        .expect("scheduler builds")
        .run(snapshot, Time::from_secs(secs))
}

/// Queue `q`'s deserved GPUs as the session computed them.
fn deserved_gpus(out: &Outcome, q: &str) -> i64 {
    out.queues
        .iter()
        .find(|r| &*r.name == q)
        .and_then(|r| r.deserved.as_ref())
        .map_or(0, |d| d.get("nvidia.com/gpu"))
}

/// Eight 8-GPU nodes, and in each queue eight gangs of eight 1-GPU members: both queues
/// want the whole cluster.
fn contended(a: QueueBuilder, b: QueueBuilder) -> Cluster {
    let mut c = Cluster::new().queue(a).queue(b);
    for i in 0..8 {
        c = c.node(node(&format!("n{i}")).gpus(8));
    }
    for q in ["a", "b"] {
        for g in 0..8 {
            let name = format!("{q}-train-{g}");
            c = c
                .group(podgroup("ml", &name).min_member(8).queue(q).created(g))
                .members("ml", &name, 8, |p| p.gpus(1).created(g));
        }
    }
    c
}

fn gpus_bound(plan: &Plan, prefix: &str) -> usize {
    plan.binds
        .iter()
        .filter(|b| b.pod.name.starts_with(prefix))
        .count()
}

/// Queue a held all 64 GPUs for the last twelve hours; b held nothing.
fn a_ran_the_night() -> Snapshot {
    contended(
        queue("a").gpu_usage(Time::from_secs(NOW - 12 * HOUR), 0.0, 1.0),
        queue("b"),
    )
    .snapshot()
}

#[test]
fn the_queue_that_waited_gets_the_over_quota_gpus_first() {
    let plan = run(&config(Some("halfLife: 168h")), &a_ran_the_night(), NOW);
    assert_eq!(
        gpus_bound(&plan, "b-"),
        64,
        "b waited: the whole split is b's"
    );
    assert_eq!(gpus_bound(&plan, "a-"), 0);
}

#[test]
fn explain_gives_the_queues_usage_and_the_jobs_place() {
    // a held the whole cluster for 12 h of a 168 h half-life: 1 - 2^(-12/168) = 0.048 of
    // its GPUs, weighed with cpu and memory (which it did not hold) to 0.040.
    let explained = scheduler(&config(Some("halfLife: 168h")))
        .expect("scheduler builds")
        .explain(&a_ran_the_night(), Time::from_secs(NOW), "ml/a-train-2")
        .expect("a-train-2 is explained");
    let line = explained.fairness.clone().expect("a fairshare line");
    assert!(
        line.starts_with("queue a has used 0.040 of the cluster (decayed, half-life 168h"),
        "{line}"
    );
    assert!(line.contains("3 of 8 waiting jobs in its queue"), "{line}");
    assert!(explained.to_string().contains(&line));
    // Without fairshare there is no such line.
    let plain = scheduler(&config(None))
        .expect("scheduler builds")
        .explain(&a_ran_the_night(), Time::from_secs(NOW), "ml/a-train-2")
        .expect("a-train-2 is explained");
    assert_eq!(plain.fairness, None);
}

#[test]
fn a_smaller_k_moves_the_split_less() {
    // W' = 1/2 each, U' = (1, 0): P = 1/2 ± k/2 = (1/4, 3/4) with k = 1/2.
    let plan = run(
        &config(Some("halfLife: 168h, kValue: 0.5")),
        &a_ran_the_night(),
        NOW,
    );
    assert_eq!(gpus_bound(&plan, "b-"), 48);
    assert_eq!(gpus_bound(&plan, "a-"), 16);
}

#[test]
fn half_life_zero_is_todays_split() {
    let snapshot = a_ran_the_night();
    let today = run(&config(None), &snapshot, NOW);
    assert_eq!(gpus_bound(&today, "a-"), 32);
    assert_eq!(gpus_bound(&today, "b-"), 32);
    let plan = run(&config(Some("halfLife: 0")), &snapshot, NOW);
    assert_eq!(plan.binds, today.binds);
    let plan = run(&config(Some("halfLife: 168h, kValue: 0")), &snapshot, NOW);
    assert_eq!(plan.binds, today.binds);
}

#[test]
fn guarantees_and_explicit_deserved_shares_are_not_cut_by_usage() {
    let snapshot = contended(
        queue("a")
            .guarantee_gpus(16)
            .gpu_usage(Time::from_secs(NOW - 12 * HOUR), 0.9, 1.0),
        queue("b"),
    )
    .snapshot();
    let plan = run(&config(Some("halfLife: 168h")), &snapshot, NOW);
    assert_eq!(gpus_bound(&plan, "a-"), 16, "a keeps its guarantee");
    assert_eq!(gpus_bound(&plan, "b-"), 48);

    let snapshot = contended(
        queue("a")
            .deserved_gpus(24)
            .gpu_usage(Time::from_secs(NOW - 12 * HOUR), 0.9, 1.0),
        queue("b"),
    )
    .snapshot();
    let out = outcome(&config(Some("halfLife: 168h")), &snapshot, NOW);
    assert_eq!(deserved_gpus(&out, "a"), 24, "a keeps its explicit share");
    assert_eq!(deserved_gpus(&out, "b"), 40);
}

fn usage_of(plan: &Plan, q: &str) -> Option<QueueUsage> {
    plan.queues
        .iter()
        .find(|u| &*u.name == q)
        .and_then(|u| u.status.usage.clone())
}

#[test]
fn usage_is_recorded_at_close_and_halves_over_a_half_life() {
    let cfg = config(Some("halfLife: 24h, usageWritePeriod: 1m"));
    let busy = |c: Cluster| {
        c.node(node("n0").gpus(8))
            .node(node("n1").gpus(8))
            .group(podgroup("ml", "a-run").min_member(8).queue("a"))
            .members("ml", "a-run", 8, |p| p.gpus(1).on("n0").running())
    };
    // a holds half the cluster; its first record says so.
    let mut snapshot = busy(Cluster::new().queue(queue("a"))).snapshot();
    let plan = run(&cfg, &snapshot, NOW);
    let first = usage_of(&plan, "a").expect("a's usage is recorded");
    assert_eq!(first.at, Time::from_secs(NOW));
    assert_eq!(first.held.get("nvidia.com/gpu"), Some(&500_000));
    snapshot.record(&plan);
    // Still held an hour later: the record still describes it, nothing is written.
    let plan = run(&cfg, &snapshot, NOW + HOUR);
    assert!(plan
        .queues
        .iter()
        .all(|u| u.status.usage.as_ref() == Some(&first)));
    // a's run ends after a day: the next record has half a day's... a half-life's worth.
    let mut done = Cluster::new()
        .queue(queue("a"))
        .node(node("n0").gpus(8))
        .node(node("n1").gpus(8))
        .snapshot();
    done.queues = snapshot.queues.clone();
    let plan = run(&cfg, &done, NOW + 24 * HOUR);
    let second = usage_of(&plan, "a").expect("a new record");
    assert_eq!(second.decayed.get("nvidia.com/gpu"), Some(&250_000));
    assert!(second.held.is_empty());
    // Without work it halves again over the next half-life.
    let settings = caldera_queue::fair::FairSettings {
        half_life_ms: 24 * HOUR * 1000,
        ..Default::default()
    };
    let total = caldera_model::Resources::from_pairs([("nvidia.com/gpu", 16)]);
    let later = settings.usage(Some(&second), Time::from_secs(NOW + 48 * HOUR), &total);
    assert!((later - 0.125).abs() < 1e-6, "{later}");
}

#[test]
fn without_fairshare_a_usage_record_is_kept_as_found() {
    let snapshot = a_ran_the_night();
    let plan = run(&config(None), &snapshot, NOW);
    for u in &plan.queues {
        let found = snapshot
            .queues
            .iter()
            .find(|q| q.name == u.name)
            .and_then(|q| q.status.as_ref())
            .and_then(|s| s.usage.clone());
        assert_eq!(u.status.usage, found);
    }
}

#[test]
fn a_window_forgets_the_use_before_it_started() {
    // NOW is day 30, 00:00. A 168 h window holding NOW began 48 h before it (day 28; windows
    // count from the Unix epoch), so the night is in it: b gets the whole split.
    let night = a_ran_the_night();
    let weekly = config(Some("halfLife: 168h, window: 168h"));
    assert_eq!(gpus_bound(&run(&weekly, &night, NOW), "b-"), 64);
    // A 24 h window began at NOW: the night is forgotten and the split is today's.
    let daily = config(Some("halfLife: 168h, window: 24h"));
    let today = run(&config(None), &night, NOW);
    let plan = run(&daily, &night, NOW);
    assert_eq!(plan.binds, today.binds);
    assert_eq!(gpus_bound(&plan, "a-"), 32);
    // Twelve hours into the window, a's holding (its record says it still holds the cluster)
    // has counted again since the window began: b goes first again.
    assert_eq!(gpus_bound(&run(&daily, &night, NOW + 12 * HOUR), "b-"), 64);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Usage never moves a queue below its guarantee or off its explicit deserved share, and
    /// with half-life 0 or kValue 0 every bind is today's.
    #[test]
    fn quotas_hold_and_no_memory_changes_nothing(
        weights in proptest::collection::vec(1u32..5, 3),
        used in proptest::collection::vec(0.0f64..1.0, 3),
        guarantee in 0i64..12,
        explicit in proptest::option::of(0i64..20),
        gangs in proptest::collection::vec(1usize..6, 3),
        k in 0.0f64..3.0,
    ) {
        let names = ["a", "b", "c"];
        let mut c = Cluster::new();
        for i in 0..6 {
            c = c.node(node(&format!("n{i}")).gpus(8));
        }
        for (i, q) in names.iter().enumerate() {
            let mut b = queue(q)
                .weight(weights[i])
                .gpu_usage(Time::from_secs(NOW - 6 * HOUR), used[i], used[i] / 2.0);
            if i == 0 {
                b = b.guarantee_gpus(guarantee);
            }
            if i == 1 {
                if let Some(d) = explicit {
                    b = b.deserved_gpus(d);
                }
            }
            c = c.queue(b);
            for g in 0..gangs[i] {
                let name = format!("{q}-job-{g}");
                c = c
                    .group(podgroup("ml", &name).min_member(4).queue(q).created(g as i64))
                    .members("ml", &name, 4, |p| p.gpus(1).created(g as i64));
            }
        }
        let snapshot = c.snapshot();
        let today = outcome(&config(None), &snapshot, NOW);
        let fair = outcome(&config(Some(&format!("halfLife: 24h, kValue: {k}"))), &snapshot, NOW);
        prop_assert!(deserved_gpus(&fair, "a") >= guarantee.min(4 * gangs[0] as i64),
            "a deserves {} with guarantee {}", deserved_gpus(&fair, "a"), guarantee);
        prop_assert!(deserved_gpus(&fair, "a") >= deserved_gpus(&today, "a").min(guarantee));
        if explicit.is_some() {
            prop_assert_eq!(deserved_gpus(&fair, "b"), deserved_gpus(&today, "b"));
        }
        for off in ["halfLife: 0", "halfLife: 24h, kValue: 0"] {
            let plan = run(&config(Some(off)), &snapshot, NOW);
            prop_assert_eq!(&plan.binds, &today.plan.binds);
        }
    }

    /// With `maxWait` off (0 or absent), or longer than any job has waited, every decision
    /// (binds, nominations, PodGroup conditions) is today's, whatever the jobs have waited.
    #[test]
    fn max_wait_off_or_not_reached_changes_nothing(
        running in proptest::collection::vec(0usize..5, 4),
        gangs in proptest::collection::vec((1u32..4, 1i64..5, 0i64..4), 1..6),
        waited in proptest::collection::vec(proptest::option::of(0i64..48), 6),
    ) {
        let mut c = Cluster::new().queue(queue("a")).queue(queue("b"));
        for (i, &r) in running.iter().enumerate() {
            let n = format!("n{i}");
            c = c.node(node(&n).gpus(4).cpu(64));
            for k in 0..r.min(4) {
                let name = format!("run-{i}-{k}");
                c = c
                    .group(podgroup("ml", &name).min_member(1).queue("a"))
                    .pod(pod("ml", &format!("{name}-0")).group(&name).gpus(1).on(&n).running());
            }
        }
        for (g, &(members, gpus, priority)) in gangs.iter().enumerate() {
            let name = format!("job-{g}");
            let mut group = podgroup("ml", &name)
                .min_member(members)
                .queue(if g % 2 == 0 { "a" } else { "b" })
                .priority(priority as i32)
                .created(g as i64);
            if let Some(hours) = waited[g] {
                group = group.pending_since(NOW - hours * HOUR);
            }
            c = c.group(group).members("ml", &name, members as usize, |p| {
                p.gpus(gpus).priority(priority as i32).created(g as i64)
            });
        }
        let snapshot = c.snapshot();
        let today = run(&config(Some("halfLife: 0")), &snapshot, NOW);
        for off in ["halfLife: 0, maxWait: 0", "halfLife: 0, maxWait: \"0s\"", "halfLife: 0, maxWait: 100h"] {
            let plan = run(&config(Some(off)), &snapshot, NOW);
            prop_assert_eq!(&plan.binds, &today.binds, "{}", off);
            prop_assert_eq!(&plan.nominations, &today.nominations, "{}", off);
            prop_assert_eq!(&plan.podgroups, &today.podgroups, "{}", off);
        }
    }

    /// Usage is never negative, and without new work it only decays.
    #[test]
    fn usage_decays_monotonically_without_work(
        decayed in 0.0f64..1.0,
        held in 0.0f64..1.0,
        hours in proptest::collection::vec(0i64..500, 1..12),
    ) {
        let settings = caldera_queue::fair::FairSettings {
            half_life_ms: 24 * HOUR * 1000,
            ..Default::default()
        };
        let total = caldera_model::Resources::from_pairs([("nvidia.com/gpu", 64)]);
        let record = queue("a")
            .gpu_usage(Time::from_secs(NOW), decayed, held)
            .0
            .status
            .and_then(|s| s.usage)
            .expect("record");
        // The queue stops: the next record holds nothing.
        let stopped = settings
            .next_record(Some(&record), Default::default(), Time::from_secs(NOW + 3600))
            .unwrap_or(record);
        let mut times: Vec<i64> = hours.iter().map(|h| NOW + 3600 + h * HOUR).collect();
        times.sort_unstable();
        let mut last = f64::INFINITY;
        for t in times {
            let u = settings.usage(Some(&stopped), Time::from_secs(t), &total);
            prop_assert!(u >= 0.0);
            prop_assert!(u <= last + 1e-12, "{u} after {last}");
            last = u;
        }
    }
}

/// A config with preempt and reclaim, and fairshare's `minRuntime` when given.
fn evicting(min_runtime: Option<&str>) -> SchedulerConfig {
    evicting_with(min_runtime.map(|m| format!("minRuntime: {m}")).as_deref())
}

/// A config with preempt and reclaim, and fairshare with `args` when given.
fn evicting_with(args: Option<&str>) -> SchedulerConfig {
    let fair = args
        .map(|a| format!("  - name: fairshare\n    arguments: {{{a}}}\n"))
        .unwrap_or_default();
    let text = format!(
        "actions: \"enqueue, allocate, preempt, reclaim, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n{fair}  - name: nodeorder\n"
    );
    caldera_config::parse(&text, None).expect("test config parses")
}

/// One 8-GPU node: `low` (priority 0) has run on it since `started`; `high` (priority 5,
/// same queue) waits for the whole node.
fn low_running_since(started: i64) -> Snapshot {
    Cluster::new()
        .queue(queue("q"))
        .node(node("n0").gpus(8).cpu(64))
        .group(podgroup("ns", "low").min_member(1).priority(0).queue("q"))
        .pod(
            caldera_testkit::builders::pod("ns", "low-0")
                .group("low")
                .gpus(8)
                .on("n0")
                .running()
                .started(Time::from_secs(started)),
        )
        .group(
            podgroup("ns", "high")
                .min_member(1)
                .priority(5)
                .queue("q")
                .created(NOW - 60),
        )
        .pod(
            caldera_testkit::builders::pod("ns", "high-0")
                .group("high")
                .gpus(8)
                .priority(5)
                .created(NOW - 60),
        )
        .snapshot()
}

fn evicted(plan: &Plan) -> Vec<&str> {
    plan.evictions.iter().map(|e| &*e.pod.name).collect()
}

#[test]
fn a_victim_younger_than_min_runtime_is_not_evicted() {
    let young = low_running_since(NOW - 5 * 60);
    assert_eq!(
        evicted(&run(&evicting(None), &young, NOW)),
        vec!["low-0"],
        "without minRuntime the younger, lower-priority run is the victim"
    );
    assert!(evicted(&run(&evicting(Some("10m")), &young, NOW)).is_empty());
    // Once it has run minRuntime it may be evicted.
    assert_eq!(
        evicted(&run(&evicting(Some("10m")), &young, NOW + 5 * 60)),
        vec!["low-0"]
    );
    // 0 turns it off.
    assert_eq!(
        evicted(&run(&evicting(Some("\"0\"")), &young, NOW)),
        vec!["low-0"]
    );
}

/// [`low_running_since`] with `low`'s PodGroup annotated `caldera.sh/min-runtime`.
fn annotated_low_running_since(started: i64, min_runtime: Result<i64, &str>) -> Snapshot {
    let mut snapshot = low_running_since(started);
    let low = snapshot
        .jobs
        .iter()
        .position(|j| &*j.id == "ns/low")
        .expect("low exists");
    snapshot.jobs[low].min_runtime = Some(min_runtime.map_err(Into::into));
    snapshot
}

#[test]
fn the_min_runtime_annotation_protects_its_gang_and_overrides_the_argument() {
    const MIN: i64 = 60 * 1000;
    // Run for 5 minutes, annotated 10m: spared, with or without fairshare.
    let young = annotated_low_running_since(NOW - 5 * 60, Ok(10 * MIN));
    assert!(evicted(&run(&evicting(None), &young, NOW)).is_empty());
    assert!(evicted(&run(&evicting(Some("1m")), &young, NOW)).is_empty());
    // Once it has run that long it may be evicted.
    assert_eq!(
        evicted(&run(&evicting(None), &young, NOW + 5 * 60)),
        vec!["low-0"]
    );
    // The annotation overrides the argument both ways: longer than it ...
    let half_hour = annotated_low_running_since(NOW - 20 * 60, Ok(30 * MIN));
    assert!(evicted(&run(&evicting(Some("10m")), &half_hour, NOW)).is_empty());
    // ... and shorter: 0s turns the protection off for this gang.
    let off = annotated_low_running_since(NOW - 60, Ok(0));
    assert_eq!(
        evicted(&run(&evicting(Some("10m")), &off, NOW)),
        vec!["low-0"]
    );
    // Without the annotation the argument decides, as before.
    assert!(evicted(&run(
        &evicting(Some("10m")),
        &low_running_since(NOW - 60),
        NOW
    ))
    .is_empty());
}

#[test]
fn a_malformed_min_runtime_annotation_is_refused_loudly() {
    let why = "annotation caldera.sh/min-runtime: invalid duration \"ten\": missing unit";
    // A pending gang with a malformed value waits, its condition naming the annotation.
    let mut snapshot = Cluster::new()
        .queue(queue("q"))
        .node(node("n0").gpus(8).cpu(64))
        .group(
            podgroup("ns", "bad")
                .min_member(1)
                .queue("q")
                .min_runtime(Err(why)),
        )
        .pod(
            caldera_testkit::builders::pod("ns", "bad-0")
                .group("bad")
                .gpus(1),
        )
        .snapshot();
    let plan = run(&evicting(None), &snapshot, NOW);
    assert!(plan.binds.is_empty(), "refused, never ignored");
    let status = plan
        .podgroups
        .iter()
        .find(|u| &*u.name == "bad")
        .expect("its status is written");
    let message = status
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Unschedulable")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("caldera.sh/min-runtime"), "{message}");
    // Fixed, the gang binds.
    snapshot.jobs[0].min_runtime = Some(Ok(0));
    assert_eq!(gpus_bound(&run(&evicting(None), &snapshot, NOW), "bad-"), 1);
    // A running gang with a malformed value is protected as the argument says.
    let young = annotated_low_running_since(NOW - 60, Err(why));
    assert!(evicted(&run(&evicting(Some("10m")), &young, NOW)).is_empty());
    assert_eq!(evicted(&run(&evicting(None), &young, NOW)), vec!["low-0"]);
}

#[test]
fn reclaim_spares_runs_younger_than_min_runtime() {
    // team-a holds both nodes (over its share); team-b asks for one node's worth.
    let snapshot = |started: i64| {
        let mut c = Cluster::new()
            .queue(queue("a"))
            .queue(queue("b"))
            .node(node("n0").gpus(8).cpu(64))
            .node(node("n1").gpus(8).cpu(64));
        for (i, n) in ["n0", "n1"].iter().enumerate() {
            let name = format!("a-run-{i}");
            c = c.group(podgroup("ns", &name).min_member(1).queue("a")).pod(
                caldera_testkit::builders::pod("ns", &format!("{name}-0"))
                    .group(&name)
                    .gpus(8)
                    .on(n)
                    .running()
                    .started(Time::from_secs(started)),
            );
        }
        c.group(
            podgroup("ns", "b-job")
                .min_member(1)
                .queue("b")
                .created(NOW - 60),
        )
        .pod(
            caldera_testkit::builders::pod("ns", "b-job-0")
                .group("b-job")
                .gpus(8)
                .created(NOW - 60),
        )
        .snapshot()
    };
    let young = snapshot(NOW - 60);
    assert_eq!(evicted(&run(&evicting(None), &young, NOW)).len(), 1);
    assert!(evicted(&run(&evicting(Some("10m")), &young, NOW)).is_empty());
    let old = snapshot(NOW - 3600);
    assert_eq!(evicted(&run(&evicting(Some("10m")), &old, NOW)).len(), 1);
}

#[test]
fn reclaim_spares_a_gang_younger_than_its_min_runtime_annotation() {
    // team-a holds both nodes (over its share) since 20 minutes; team-b asks for one node.
    // a-run-0 is annotated 1h, a-run-1 30m: with the argument at 10m both would be victims,
    // by their annotations neither is; at 0s, a-run-1 alone is.
    let snapshot = |annotations: [i64; 2]| {
        let mut c = Cluster::new()
            .queue(queue("a"))
            .queue(queue("b"))
            .node(node("n0").gpus(8).cpu(64))
            .node(node("n1").gpus(8).cpu(64));
        for (i, n) in ["n0", "n1"].iter().enumerate() {
            let name = format!("a-run-{i}");
            c = c
                .group(
                    podgroup("ns", &name)
                        .min_member(1)
                        .queue("a")
                        .min_runtime(Ok(annotations[i] * 60 * 1000)),
                )
                .pod(
                    pod("ns", &format!("{name}-0"))
                        .group(&name)
                        .gpus(8)
                        .on(n)
                        .running()
                        .started(Time::from_secs(NOW - 20 * 60)),
                );
        }
        c.group(
            podgroup("ns", "b-job")
                .min_member(1)
                .queue("b")
                .created(NOW - 60),
        )
        .pod(
            pod("ns", "b-job-0")
                .group("b-job")
                .gpus(8)
                .created(NOW - 60),
        )
        .snapshot()
    };
    let protected = snapshot([60, 30]);
    assert!(evicted(&run(&evicting(Some("10m")), &protected, NOW)).is_empty());
    let one_off = snapshot([60, 0]);
    assert_eq!(
        evicted(&run(&evicting(Some("10m")), &one_off, NOW)),
        vec!["a-run-1-0"]
    );
}

/// `low` (priority 0) has run for an hour on the only node; `high` (priority 5, same queue)
/// has waited since `waiting_since` (its PodGroup's Unschedulable condition).
fn high_waiting_since(waiting_since: i64) -> Snapshot {
    let mut snapshot = low_running_since(NOW - 3600);
    let high = snapshot
        .jobs
        .iter()
        .position(|j| &*j.id == "ns/high")
        .expect("high exists");
    snapshot.jobs[high].pending_since = Some(Time::from_secs(waiting_since));
    snapshot
}

#[test]
fn a_preemptor_waits_preemption_delay_before_evicting() {
    let cfg = evicting_with(Some("preemptionDelay: 30s"));
    let snapshot = high_waiting_since(NOW - 10);
    assert!(
        evicted(&run(&cfg, &snapshot, NOW)).is_empty(),
        "waited 10 s of 30"
    );
    assert_eq!(evicted(&run(&cfg, &snapshot, NOW + 20)), vec!["low-0"]);
    // Not yet seen waiting (no Unschedulable condition): the delay has not started.
    let mut fresh = snapshot.clone();
    for j in &mut fresh.jobs {
        j.pending_since = None;
    }
    assert!(evicted(&run(&cfg, &fresh, NOW + 3600)).is_empty());
    // Without the delay the same snapshot evicts at once.
    assert_eq!(evicted(&run(&evicting(None), &fresh, NOW)), vec!["low-0"]);
}

#[test]
fn room_that_frees_within_the_delay_is_taken_and_nothing_is_evicted() {
    let cfg = evicting_with(Some("preemptionDelay: 30s"));
    // Session 1: high has waited 10 s; nothing is evicted.
    let mut snapshot = high_waiting_since(NOW - 10);
    let plan = run(&cfg, &snapshot, NOW);
    assert!(evicted(&plan).is_empty());
    // low ends 15 s later, before the delay is over: high binds, nothing was evicted.
    let low = snapshot
        .tasks
        .iter()
        .position(|t| &*t.name == "low-0")
        .expect("low-0 exists");
    snapshot.tasks[low].status = caldera_model::TaskStatus::Succeeded;
    let request = snapshot.tasks[low].request.clone();
    snapshot.nodes[0].remove_pod(&request, &[]);
    let plan = run(&cfg, &snapshot, NOW + 15);
    assert!(evicted(&plan).is_empty());
    assert_eq!(gpus_bound(&plan, "high-"), 1);
}

// ----- maxWait: aging against starvation -----

/// Three 4-GPU nodes with `running[i]` 1-GPU pods running on node `n{i}`; `big`, a gang of two
/// 4-GPU members (two whole nodes) waiting since two hours ago; and `small` 1-GPU jobs
/// created after it, each fitting first. `nominated`: big's members' `nominatedNodeName`.
fn starving(running: [usize; 3], small: usize, nominated: &[(&str, &str)]) -> Snapshot {
    starving_gang(2, running, small, nominated)
}

/// [`starving`] with a gang of `members` 4-GPU members.
fn starving_gang(
    members: u32,
    running: [usize; 3],
    small: usize,
    nominated: &[(&str, &str)],
) -> Snapshot {
    let mut c = Cluster::new().queue(queue("q"));
    for (i, &r) in running.iter().enumerate() {
        let n = format!("n{i}");
        c = c.node(node(&n).gpus(4).cpu(64));
        for k in 0..r {
            let name = format!("run-{i}-{k}");
            c = c.group(podgroup("ns", &name).min_member(1).queue("q")).pod(
                pod("ns", &format!("{name}-0"))
                    .group(&name)
                    .gpus(1)
                    .on(&n)
                    .running(),
            );
        }
    }
    c = c
        .group(
            podgroup("ns", "big")
                .min_member(members)
                .queue("q")
                .created(NOW - 3 * HOUR)
                .pending_since(NOW - 2 * HOUR),
        )
        .members("ns", "big", members as usize, |p| {
            p.gpus(4).created(NOW - 3 * HOUR)
        });
    for k in 0..small {
        let name = format!("small-{k}");
        let created = NOW - 60 + k as i64;
        c = c
            .group(
                podgroup("ns", &name)
                    .min_member(1)
                    .queue("q")
                    .created(created),
            )
            .pod(
                pod("ns", &format!("{name}-0"))
                    .group(&name)
                    .gpus(1)
                    .created(created),
            );
    }
    let mut snapshot = c.snapshot();
    for (task, n) in nominated {
        let t = snapshot
            .tasks
            .iter_mut()
            .find(|t| &*t.name == *task)
            .expect("task exists");
        t.nominated = Some((*n).into());
    }
    snapshot
}

fn binds_of(plan: &Plan) -> Vec<(&str, &str)> {
    let mut out: Vec<(&str, &str)> = plan
        .binds
        .iter()
        .map(|b| (&*b.pod.name, &*b.node))
        .collect();
    out.sort_unstable();
    out
}

fn nominations_of(plan: &Plan) -> Vec<(&str, Option<&str>)> {
    let mut out: Vec<(&str, Option<&str>)> = plan
        .nominations
        .iter()
        .map(|n| (&*n.pod.name, n.node.as_deref()))
        .collect();
    out.sort_unstable();
    out
}

/// One free 4-GPU node and queue `q` with two jobs: `small` (created first, asking
/// `small_gpus`, of priority `small_priority`, waiting since `small_since` seconds when given)
/// and the 4-GPU gang `big` (waiting 2 h).
fn small_and_big(small_gpus: i64, small_priority: i32, small_since: Option<i64>) -> Snapshot {
    let mut small = podgroup("ns", "small")
        .min_member(1)
        .queue("q")
        .priority(small_priority)
        .created(0);
    if let Some(since) = small_since {
        small = small.pending_since(since);
    }
    Cluster::new()
        .queue(queue("q"))
        .node(node("n0").gpus(4).cpu(64))
        .group(small)
        .pod(
            pod("ns", "small-0")
                .group("small")
                .gpus(small_gpus)
                .priority(small_priority)
                .created(0),
        )
        .group(
            podgroup("ns", "big")
                .min_member(1)
                .queue("q")
                .created(10)
                .pending_since(NOW - 2 * HOUR),
        )
        .pod(pod("ns", "big-0").group("big").gpus(4).created(10))
        .snapshot()
}

/// One 4-GPU node free: without maxWait the older 1-GPU job goes first and the 4-GPU gang
/// no longer fits; aged (waited 2 h of maxWait 1h), the gang goes ahead of its queue.
#[test]
fn an_aged_gang_goes_ahead_of_its_queue() {
    let snapshot = |small_priority: i32| small_and_big(1, small_priority, None);
    let today = run(&config(None), &snapshot(0), NOW);
    assert_eq!(binds_of(&today), [("small-0", "n0")]);
    let plan = run(&config(Some("maxWait: 1h")), &snapshot(0), NOW);
    assert_eq!(binds_of(&plan), [("big-0", "n0")]);
    // Not aged yet: today's order.
    let plan = run(&config(Some("maxWait: 3h")), &snapshot(0), NOW);
    assert_eq!(binds_of(&plan), [("small-0", "n0")]);
    // The PodGroup's priority still comes first.
    let plan = run(&config(Some("maxWait: 1h")), &snapshot(1), NOW);
    assert_eq!(binds_of(&plan), [("small-0", "n0")]);
}

/// Two aged jobs of one queue and one 4-GPU node free: the 4-GPU gang goes before the 1-GPU
/// job that has waited longer (the small one fits into the next room that frees; the gang
/// would otherwise wait behind every older small job). Of two aged jobs of one size the
/// longer-waiting goes first.
#[test]
fn the_largest_aged_gang_goes_first() {
    let snapshot = |small_gpus: i64| small_and_big(small_gpus, 0, Some(NOW - 3 * HOUR));
    let plan = run(&config(Some("maxWait: 1h")), &snapshot(1), NOW);
    assert_eq!(binds_of(&plan), [("big-0", "n0")]);
    // Not aged: the older job first, as today.
    let plan = run(&config(Some("maxWait: 4h")), &snapshot(1), NOW);
    assert_eq!(binds_of(&plan), [("small-0", "n0")]);
    // Both ask for 4 GPUs: the longer-waiting first.
    let plan = run(&config(Some("maxWait: 1h")), &snapshot(4), NOW);
    assert_eq!(binds_of(&plan), [("small-0", "n0")]);
}

/// Every node has one GPU free: the aged gang, which needs two whole nodes, gets room held
/// (and its members nominated) on two of them, and the 1-GPU jobs backfill only on the third.
/// Without maxWait they take every free GPU and nothing is held.
#[test]
fn room_is_held_for_an_aged_gang_and_small_jobs_backfill_around_it() {
    let snapshot = starving([3, 3, 3], 3, &[]);
    let today = run(&config(None), &snapshot, NOW);
    assert_eq!(
        binds_of(&today),
        [
            ("small-0-0", "n0"),
            ("small-1-0", "n1"),
            ("small-2-0", "n2")
        ]
    );
    assert!(today.nominations.is_empty());
    let off = run(&config(Some("maxWait: 0")), &snapshot, NOW);
    assert_eq!(binds_of(&off), binds_of(&today));
    assert!(off.nominations.is_empty(), "no hold when maxWait is off");

    let plan = run(&config(Some("maxWait: 1h")), &snapshot, NOW);
    assert_eq!(binds_of(&plan), [("small-0-0", "n2")]);
    assert_eq!(
        nominations_of(&plan),
        [("big-0", Some("n0")), ("big-1", Some("n1"))]
    );
    let condition = plan
        .podgroups
        .iter()
        .find(|u| &*u.name == "big")
        .and_then(|u| {
            u.status
                .conditions
                .iter()
                .find(|c| c.type_ == "Unschedulable")
        })
        .expect("big has a condition");
    assert_eq!(condition.reason, "NotEnoughResources");
    assert!(
        condition
            .message
            .contains("waiting longer than maxWait 1h0m0s: room is held on node(s) n0, n1"),
        "{}",
        condition.message
    );
}

/// The next session starts with the room held (from the nominations, before any action), even
/// though the pods there have not all ended: a 1-GPU job does not take the GPUs freed on `n0`.
/// Once the pods on both nodes have ended the gang binds there. A nomination of a job that is
/// not aged is judged as before: dropped while its node has no room.
#[test]
fn held_room_is_kept_across_sessions_until_the_gang_binds() {
    let held = [("big-0", "n0"), ("big-1", "n1")];
    // Two of n0's three pods have ended (n2 is full: the backfilled job runs there); a new
    // 1-GPU job arrives.
    let snapshot = starving([1, 3, 4], 1, &held);
    let scheduler = scheduler(&config(Some("maxWait: 1h"))).expect("scheduler builds");
    let ssn = scheduler.open(&snapshot, Time::from_secs(NOW));
    let big = ssn
        .state
        .jobs
        .iter()
        .position(|j| &*j.id == "ns/big")
        .expect("big exists");
    assert_eq!(caldera_session::reserve::of_job_tasks(&ssn, big).len(), 2);
    let plan = run(&config(Some("maxWait: 1h")), &snapshot, NOW);
    assert!(plan.binds.is_empty(), "{:?}", binds_of(&plan));
    assert!(plan.nominations.is_empty(), "the nominations stand");
    let explained = scheduler
        .explain(&snapshot, Time::from_secs(NOW), "ns/big")
        .expect("big is explained");
    let aged = explained.aged.clone().expect("big is aged");
    assert!(aged.starts_with("aged: waiting since "), "{aged}");
    assert!(aged.contains("(2h0m0s ≥ maxWait 1h0m0s)"), "{aged}");
    assert!(
        aged.contains("room held since an earlier session for 2 member(s)")
            && aged.contains("on n0 ×1, n1 ×1"),
        "{aged}"
    );
    assert!(explained.to_string().contains(&aged));

    // maxWait off: the same nominations are dropped (their nodes have no room), and the new
    // job takes a GPU freed on n0.
    let plan = run(&config(None), &snapshot, NOW);
    assert_eq!(nominations_of(&plan), [("big-0", None), ("big-1", None)]);
    assert_eq!(binds_of(&plan), [("small-0-0", "n0")]);

    // Everything on n0 and n1 has ended: the gang binds on the room held for it.
    let snapshot = starving([0, 0, 4], 1, &held);
    let plan = run(&config(Some("maxWait: 1h")), &snapshot, NOW);
    assert_eq!(binds_of(&plan), [("big-0", "n0"), ("big-1", "n1")]);
}

/// A gang that would not fit even with every running pod gone holds nothing: the small jobs
/// keep running (no deadlock), and explain says why.
#[test]
fn a_gang_larger_than_the_cluster_holds_no_room() {
    // Four whole nodes' worth on three nodes.
    let snapshot = starving_gang(4, [3, 3, 3], 3, &[]);
    let cfg = config(Some("maxWait: 1h"));
    let plan = run(&cfg, &snapshot, NOW);
    assert!(plan.nominations.is_empty());
    assert_eq!(binds_of(&plan).len(), 3);
    let explained = scheduler(&cfg)
        .expect("scheduler builds")
        .explain(&snapshot, Time::from_secs(NOW), "ns/big")
        .expect("big is explained");
    assert!(
        explained
            .aged
            .as_deref()
            .is_some_and(|a| a.contains("no room held")),
        "{explained}"
    );
}

/// Two aged gangs in one queue that cannot fit: only the longer-waiting one holds room (one
/// hold per queue), so the 1-GPU jobs still backfill on the third node.
#[test]
fn one_aged_gang_per_queue_holds_room() {
    let snapshot = {
        let mut c = Cluster::new().queue(queue("q"));
        for i in 0..3 {
            let n = format!("n{i}");
            c = c.node(node(&n).gpus(4).cpu(64));
            for k in 0..3 {
                let name = format!("run-{i}-{k}");
                c = c.group(podgroup("ns", &name).min_member(1).queue("q")).pod(
                    pod("ns", &format!("{name}-0"))
                        .group(&name)
                        .gpus(1)
                        .on(&n)
                        .running(),
                );
            }
        }
        for (name, members, since) in [("big", 2, 2 * HOUR), ("big2", 1, 90 * 60)] {
            c = c
                .group(
                    podgroup("ns", name)
                        .min_member(members)
                        .queue("q")
                        .created(NOW - 3 * HOUR)
                        .pending_since(NOW - since),
                )
                .members("ns", name, members as usize, |p| {
                    p.gpus(4).created(NOW - 3 * HOUR)
                });
        }
        c.group(
            podgroup("ns", "small")
                .min_member(1)
                .queue("q")
                .created(NOW - 60),
        )
        .pod(
            pod("ns", "small-0")
                .group("small")
                .gpus(1)
                .created(NOW - 60),
        )
        .snapshot()
    };
    let plan = run(&config(Some("maxWait: 1h")), &snapshot, NOW);
    assert_eq!(
        nominations_of(&plan),
        [("big-0", Some("n0")), ("big-1", Some("n1"))],
        "only the longer-waiting gang holds room"
    );
    assert_eq!(binds_of(&plan), [("small-0", "n2")]);
}

// ----- tenantKey: a queue's jobs ordered by their tenant's usage -----

/// One 4-GPU node, free; queue q. `burst` lone 1-GPU pods in namespace `burst` (created at
/// 0..), then one in namespace `steady` created after them; `running` pods of `burst`
/// already on a second node since an hour ago.
fn tenants_cluster(burst: usize, running: usize) -> Cluster {
    let mut c = Cluster::new()
        .queue(queue("q"))
        .node(node("n0").gpus(4).cpu(64));
    if running > 0 {
        c = c.node(node("n1").gpus(running as i64).cpu(64));
        for i in 0..running {
            c = c.pod(
                pod("burst", &format!("old-{i}"))
                    .queue("q")
                    .gpus(1)
                    .on("n1")
                    .running()
                    .started(Time::from_secs(NOW - HOUR)),
            );
        }
    }
    for i in 0..burst {
        c = c.pod(
            pod("burst", &format!("job-{i:02}"))
                .queue("q")
                .gpus(1)
                .label("team", "a")
                .created(NOW - 100 + i as i64),
        );
    }
    c.pod(
        pod("steady", "job-0")
            .queue("q")
            .gpus(1)
            .label("team", "b")
            .created(NOW - 10),
    )
}

fn bound_in(plan: &Plan, ns: &str) -> usize {
    plan.binds
        .iter()
        .filter(|b| &*b.pod.namespace == ns)
        .count()
}

#[test]
fn a_tenant_who_submitted_fifty_jobs_does_not_pass_one_who_submitted_one() {
    let snapshot = tenants_cluster(50, 0).snapshot();
    // Today: creation time alone; burst's four oldest take the node.
    let today = run(&config(Some("halfLife: 168h")), &snapshot, NOW);
    assert_eq!(
        (bound_in(&today, "burst"), bound_in(&today, "steady")),
        (4, 0)
    );
    // By tenant: burst's oldest first (nobody has used anything), then its entry penalty
    // puts steady's job ahead of burst's other 49.
    for args in [
        "halfLife: 168h, tenantKey: namespace",
        "halfLife: 0, tenantKey: namespace",
        "tenantKey: team",
    ] {
        let plan = run(&config(Some(args)), &snapshot, NOW);
        assert_eq!(
            (bound_in(&plan, "burst"), bound_in(&plan, "steady")),
            (3, 1),
            "{args}"
        );
        assert!(
            plan.binds.iter().any(|b| &*b.pod.name == "job-00"),
            "{args}"
        );
    }
}

#[test]
fn a_tenant_with_running_pods_goes_after_one_without() {
    // burst has held two GPUs for an hour: steady's job, though newer, goes first, and
    // burst's jobs take the rest in their creation order.
    let snapshot = tenants_cluster(4, 2).snapshot();
    let plan = run(&config(Some("tenantKey: namespace")), &snapshot, NOW);
    let mut names: Vec<(&str, &str)> = plan
        .binds
        .iter()
        .map(|b| (&*b.pod.namespace, &*b.pod.name))
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        vec![
            ("burst", "job-00"),
            ("burst", "job-01"),
            ("burst", "job-02"),
            ("steady", "job-0")
        ]
    );
    let today = run(&config(None), &snapshot, NOW);
    assert_eq!(bound_in(&today, "steady"), 0);
}

#[test]
fn priority_still_comes_before_tenant_usage() {
    // burst's jobs have priority 5: however much burst has used, they go first.
    let mut c = Cluster::new()
        .queue(queue("q"))
        .node(node("n0").gpus(2).cpu(64))
        .node(node("n1").gpus(2).cpu(64));
    for i in 0..2 {
        c = c.pod(
            pod("burst", &format!("old-{i}"))
                .queue("q")
                .gpus(1)
                .on("n1")
                .running()
                .started(Time::from_secs(NOW - HOUR)),
        );
    }
    for i in 0..2 {
        c = c.pod(
            pod("burst", &format!("job-{i}"))
                .queue("q")
                .gpus(1)
                .priority(5)
                .created(NOW - 50 + i),
        );
    }
    let snapshot = c
        .pod(pod("steady", "job-0").queue("q").gpus(1).created(NOW - 100))
        .snapshot();
    let plan = run(&config(Some("tenantKey: namespace")), &snapshot, NOW);
    assert_eq!(
        (bound_in(&plan, "burst"), bound_in(&plan, "steady")),
        (2, 0)
    );
}

#[test]
fn a_label_tenant_spans_namespaces_and_unlabelled_jobs_count_as_their_namespace() {
    // Team a runs in two namespaces; its usage in one orders its jobs in the other.
    let mut c = Cluster::new()
        .queue(queue("q"))
        .node(node("n0").gpus(1).cpu(64))
        .node(node("n1").gpus(1).cpu(64))
        .pod(
            pod("a-dev", "old-0")
                .queue("q")
                .gpus(1)
                .label("team", "a")
                .on("n1")
                .running()
                .started(Time::from_secs(NOW - HOUR)),
        );
    c = c
        .pod(
            pod("a-prod", "job-0")
                .queue("q")
                .gpus(1)
                .label("team", "a")
                .created(NOW - 100),
        )
        .pod(
            pod("b", "job-0")
                .queue("q")
                .gpus(1)
                .label("team", "b")
                .created(NOW - 10),
        );
    let snapshot = c.snapshot();
    let by_team = run(&config(Some("tenantKey: team")), &snapshot, NOW);
    assert_eq!(
        (bound_in(&by_team, "a-prod"), bound_in(&by_team, "b")),
        (0, 1)
    );
    // By namespace, a-prod has used nothing: the older job goes first.
    let by_ns = run(&config(Some("tenantKey: namespace")), &snapshot, NOW);
    assert_eq!((bound_in(&by_ns, "a-prod"), bound_in(&by_ns, "b")), (1, 0));
    // A label nobody has: every job counts as its namespace's.
    let absent = run(&config(Some("tenantKey: example.com/none")), &snapshot, NOW);
    assert_eq!(absent.binds, by_ns.binds);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// tenantKey only reorders jobs of different tenants: with every job in one namespace,
    /// every decision equals today's; and without tenantKey, as with kValue 0 and half-life
    /// 0, fairshare orders jobs as without it.
    #[test]
    fn one_tenant_or_no_tenant_key_is_todays_order(
        running in proptest::collection::vec(0usize..3, 3),
        gangs in proptest::collection::vec((1u32..4, 1i64..4, 0i64..3, 0usize..2), 1..8),
    ) {
        let mut c = Cluster::new().queue(queue("a")).queue(queue("b"));
        for (i, &r) in running.iter().enumerate() {
            let n = format!("n{i}");
            c = c.node(node(&n).gpus(4).cpu(64));
            for k in 0..r {
                let name = format!("run-{i}-{k}");
                c = c
                    .group(podgroup("ml", &name).min_member(1).queue("a"))
                    .pod(pod("ml", &format!("{name}-0")).group(&name).gpus(1).on(&n).running()
                        .started(Time::from_secs(NOW - (k as i64 + 1) * HOUR)));
            }
        }
        for (g, &(members, gpus, priority, q)) in gangs.iter().enumerate() {
            let name = format!("job-{g}");
            let group = podgroup("ml", &name)
                .min_member(members)
                .queue(["a", "b"][q])
                .priority(priority as i32)
                .created(NOW - 100 + g as i64);
            c = c.group(group).members("ml", &name, members as usize, |p| {
                p.gpus(gpus).priority(priority as i32).created(NOW - 100 + g as i64)
            });
        }
        let snapshot = c.snapshot();
        let today = run(&config(Some("halfLife: 0")), &snapshot, NOW);
        for args in [
            "halfLife: 0, tenantKey: namespace",
            "halfLife: 168h, kValue: 0, tenantKey: namespace",
            "halfLife: 0, kValue: 0",
        ] {
            let plan = run(&config(Some(args)), &snapshot, NOW);
            prop_assert_eq!(&plan.binds, &today.binds, "{}", args);
            prop_assert_eq!(&plan.podgroups, &today.podgroups, "{}", args);
        }
        let without = run(&config(None), &snapshot, NOW);
        prop_assert_eq!(&without.binds, &today.binds);
    }
}

/// Three equal-weight queues on 8 × 8 GPUs, each with a gang of 8-GPU members: a's of 4
/// members, aged (waiting two hours, `maxWait` 1h); b's and c's of `bc_members`, aged too
/// unless `bc_members` is 8 (then waiting a minute: they neither fit nor hold room); queue a
/// already runs `a_running` 1-GPU pods.
fn three_big_gangs(a_running: usize, bc_members: usize) -> Snapshot {
    let mut c = Cluster::new()
        .queue(queue("a"))
        .queue(queue("b"))
        .queue(queue("c"));
    for i in 0..8 {
        c = c.node(node(&format!("n{i}")).gpus(8).cpu(64));
    }
    for k in 0..a_running {
        let name = format!("a-run-{k}");
        c = c.group(podgroup("ns", &name).min_member(1).queue("a")).pod(
            pod("ns", &format!("{name}-0"))
                .group(&name)
                .gpus(1)
                .on(&format!("n{}", k / 8))
                .running(),
        );
    }
    for (q, members) in [("a", 4), ("b", bc_members), ("c", bc_members)] {
        let name = format!("{q}-big");
        let since = if q != "a" && members == 8 {
            NOW - 60
        } else {
            NOW - 2 * HOUR
        };
        c = c
            .group(
                podgroup("ns", &name)
                    .min_member(members as u32)
                    .queue(q)
                    .created(NOW - 3 * HOUR)
                    .pending_since(since),
            )
            .members("ns", &name, members, |p| p.gpus(8).created(NOW - 3 * HOUR));
    }
    c.snapshot()
}

#[test]
fn an_aged_gang_takes_its_queue_past_its_share_only_from_below_it() {
    let aged = config(Some("maxWait: 1h"));
    // Nothing runs: each queue deserves 21-22 GPUs, and two aged 32-GPU gangs start.
    let plan = run(&aged, &three_big_gangs(0, 4), NOW);
    assert_eq!(
        plan.binds.len(),
        8,
        "two of the three gangs: {:?}",
        plan.binds
    );
    // Without maxWait none does (proportion's rule, Volcano's too).
    let plan = run(&config(None), &three_big_gangs(0, 4), NOW);
    assert_eq!(plan.binds.len(), 0);
    // a already holds 24 GPUs, past its share of 21-22; b's and c's gangs (8 x 8 GPUs) do not
    // fit in the 40 GPUs free. a's aged gang would fit there but gets no more than its share.
    let plan = run(&aged, &three_big_gangs(24, 8), NOW);
    assert_eq!(plan.binds.len(), 0, "{:?}", plan.binds);
    // Below its share (a holds 16), it may go past it.
    let plan = run(&aged, &three_big_gangs(16, 8), NOW);
    assert_eq!(gpus_bound(&plan, "a-big"), 4);
}
