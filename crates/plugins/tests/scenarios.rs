//! Scenario-level tests of the scheduling core, built with the testkit builders: every public
//! scenario of `scenarios/` plus Volcano's classic cases. Each runs real sessions with the
//! shipped config and checks the binds and statuses the plan carries.

use caldera_config::SchedulerConfig;
use caldera_model::{Plan, PodGroupPhase, SelectorOp, Snapshot, TaintEffect, Time};
use caldera_plugins::scheduler;
use caldera_session::Outcome;
use caldera_testkit::builders::{hypernode, node, pod, podgroup, queue, Cluster, GPU};
use std::collections::BTreeMap;

fn config(text: &str) -> SchedulerConfig {
    caldera_config::parse(text, None).expect("test config parses")
}

fn run_with(cfg: &SchedulerConfig, snapshot: &Snapshot, secs: i64) -> Outcome {
    scheduler(cfg)
        .expect("scheduler builds")
        .run(snapshot, Time::from_secs(secs))
}

fn run(snapshot: &Snapshot) -> Outcome {
    run_with(&SchedulerConfig::default(), snapshot, 1)
}

/// Runs `sessions` sessions one second apart, applying binds in between; returns every plan.
fn run_sessions(snapshot: &mut Snapshot, sessions: i64) -> Vec<Plan> {
    let s = scheduler(&SchedulerConfig::default()).expect("scheduler builds");
    let mut plans = Vec::new();
    for i in 1..=sessions {
        let plan = s.run(snapshot, Time::from_secs(i)).plan;
        snapshot.record(&plan);
        plans.push(plan);
    }
    plans
}

fn binds(plan: &Plan) -> BTreeMap<String, String> {
    plan.binds
        .iter()
        .map(|b| (b.pod.to_string(), b.node.to_string()))
        .collect()
}

fn bound_to(plan: &Plan, prefix: &str) -> Vec<String> {
    plan.binds
        .iter()
        .filter(|b| b.pod.name.starts_with(prefix))
        .map(|b| b.node.to_string())
        .collect()
}

fn gpu_node(name: &str) -> caldera_testkit::builders::NodeBuilder {
    node(name).gpus(8)
}

fn pg_condition<'a>(plan: &'a Plan, name: &str) -> Option<&'a caldera_model::Condition> {
    plan.podgroups
        .iter()
        .find(|u| &*u.name == name)
        .and_then(|u| u.status.conditions.first())
}

fn pod_reason(plan: &Plan, name: &str) -> Option<String> {
    plan.pod_conditions
        .iter()
        .find(|c| &*c.pod.name == name)
        .map(|c| c.reason.clone())
}

// ----- the public scenarios -----

#[test]
fn alike_gangs_failing_from_the_cache_say_how_many_of_their_own_fit() {
    // Two gangs of one-GPU members, 6 GPUs free in all: the second fails from the first's
    // cached result (alike members, same queue) but counts against its own size.
    let before = Cluster::new()
        .node(gpu_node("node-a"))
        .node(gpu_node("node-b"))
        .pod(pod("default", "busy-a").gpus(2).on("node-a").foreign())
        .pod(pod("default", "busy-b").gpus(8).on("node-b").foreign())
        .queue(queue("default"))
        .group(podgroup("default", "big").min_member(8))
        .members("default", "big", 8, |p| p.gpus(1))
        .group(podgroup("default", "seven").min_member(7))
        .members("default", "seven", 7, |p| p.gpus(1));
    let out = run(&before.snapshot());
    assert!(out.plan.binds.is_empty(), "{:?}", out.plan.binds);
    let message = |pg: &str| {
        pg_condition(&out.plan, pg)
            .expect("condition")
            .message
            .clone()
    };
    assert_eq!(
        message("big"),
        "8/8 members in gang unschedulable: 6 of 8 members fit: node-a 6, node-b 0; \
         the gang needs 8 nvidia.com/gpu, 6 are free; \
         0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    );
    assert_eq!(
        message("seven"),
        "7/7 members in gang unschedulable: 6 of 7 members fit: node-a 6, node-b 0; \
         the gang needs 7 nvidia.com/gpu, 6 are free; \
         0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    );
}

#[test]
fn seed1_gang_short_of_gpus_binds_nothing_then_binds_whole_packed() {
    let before = Cluster::new()
        .node(gpu_node("node-a"))
        .node(gpu_node("node-b"))
        .pod(pod("default", "busy-a").gpus(2).on("node-a").foreign())
        .pod(pod("default", "busy-b").gpus(8).on("node-b").foreign())
        .queue(queue("ai-training"))
        .group(
            podgroup("default", "tp8")
                .min_member(8)
                .queue("ai-training")
                .min_gpus(1),
        )
        .members("default", "tp8", 8, |p| p.gpus(1));
    let out = run(&before.snapshot());
    assert!(
        out.plan.binds.is_empty(),
        "no member may be bound: {:?}",
        out.plan.binds
    );
    let c = pg_condition(&out.plan, "tp8").expect("condition written");
    assert_eq!(
        (c.type_.as_str(), c.reason.as_str()),
        ("Unschedulable", "NotEnoughResources")
    );
    // How many members fit and where, what the gang needs of the scarce resource, then
    // kube-scheduler's summary for the member that found no node (issue 23: it used to say
    // only the last, while node-a has room for 6).
    let said = "8/8 members in gang unschedulable: 6 of 8 members fit: node-a 6, node-b 0; \
                the gang needs 8 nvidia.com/gpu, 6 are free; \
                0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";
    assert_eq!(c.message, said);
    assert_eq!(out.plan.pod_conditions.len(), 8);
    assert!(out
        .plan
        .pod_conditions
        .iter()
        .all(|c| c.reason == "Unschedulable" && c.message == said));

    // busy-b goes away: all 8 in one session, node-a filled first.
    let after = Cluster::new()
        .node(gpu_node("node-a"))
        .node(gpu_node("node-b"))
        .pod(pod("default", "busy-a").gpus(2).on("node-a").foreign())
        .queue(queue("ai-training"))
        .group(
            podgroup("default", "tp8")
                .min_member(8)
                .queue("ai-training")
                .min_gpus(1),
        )
        .members("default", "tp8", 8, |p| p.gpus(1));
    let out = run(&after.snapshot());
    let nodes = bound_to(&out.plan, "tp8-");
    assert_eq!(nodes.len(), 8);
    assert_eq!(nodes.iter().filter(|n| *n == "node-a").count(), 6);
    let st = &out
        .plan
        .podgroups
        .iter()
        .find(|u| &*u.name == "tp8")
        .unwrap()
        .status;
    assert_eq!(st.phase, PodGroupPhase::Running);
    assert_eq!(st.conditions[0].type_, "Scheduled");
}

#[test]
fn seed2_two_gangs_on_five_free_gpus_one_gets_all_the_other_none() {
    let cluster = Cluster::new()
        .node(gpu_node("gpu-1"))
        .node(gpu_node("gpu-2"))
        .pod(pod("default", "busy-1").gpus(5).on("gpu-1").foreign())
        .pod(pod("default", "busy-2").gpus(6).on("gpu-2").foreign())
        .queue(queue("gpu-inference"))
        .group(
            podgroup("default", "infer-a")
                .min_member(4)
                .queue("gpu-inference")
                .min_gpus(4)
                .priority(1000),
        )
        .group(
            podgroup("default", "infer-b")
                .min_member(4)
                .queue("gpu-inference")
                .min_gpus(4)
                .priority(1000),
        )
        .members("default", "infer-a", 4, |p| p.gpus(1).priority(1000))
        .members("default", "infer-b", 4, |p| p.gpus(1).priority(1000));
    let mut snap = cluster.snapshot();
    let plans = run_sessions(&mut snap, 3);
    let all: Vec<_> = plans.iter().flat_map(|p| p.binds.iter()).collect();
    assert_eq!(all.len(), 4);
    assert!(
        all.iter().all(|b| b.pod.name.starts_with("infer-a-")),
        "tie breaks by name"
    );
    let last = plans
        .iter()
        .rev()
        .find_map(|p| pg_condition(p, "infer-b"))
        .unwrap();
    assert_eq!(last.reason, "NotEnoughResources");
}

#[test]
fn fragmentation_required_topology_waits_for_one_whole_node() {
    let base = |busy3: bool| {
        let mut c = Cluster::new();
        for i in 0..5 {
            let n = format!("gpu-{i}");
            c = c.node(gpu_node(&n));
            if i != 3 || busy3 {
                c = c.pod(
                    pod("default", &format!("busy-{i}"))
                        .gpus(7)
                        .on(&n)
                        .foreign(),
                );
            }
        }
        c.group(
            podgroup("default", "tp4")
                .min_member(4)
                .topology(true, "kubernetes.io/hostname"),
        )
        .members("default", "tp4", 4, |p| p.gpus(1))
        .pod(pod("default", "big-4gpu").gpus(4))
    };
    let out = run(&base(true).snapshot());
    assert!(
        out.plan.binds.is_empty(),
        "5 free GPUs on 5 nodes fit neither"
    );
    assert_eq!(
        pg_condition(&out.plan, "tp4").unwrap().type_,
        "Unschedulable"
    );
    assert_eq!(
        pod_reason(&out.plan, "big-4gpu").as_deref(),
        Some("Unschedulable")
    );
    let out = run(&base(false).snapshot());
    let b = binds(&out.plan);
    assert_eq!(b.len(), 5);
    assert!(b.values().all(|n| n == "gpu-3"), "{b:?}");
}

#[test]
fn gang_without_topology_spreads_over_four_nodes() {
    let mut c = Cluster::new();
    for i in 0..5 {
        let n = format!("gpu-{i}");
        c = c.node(gpu_node(&n)).pod(
            pod("default", &format!("busy-{i}"))
                .gpus(7)
                .on(&n)
                .foreign(),
        );
    }
    let c = c
        .group(podgroup("default", "tp4").min_member(4))
        .members("default", "tp4", 4, |p| p.gpus(1));
    let out = run(&c.snapshot());
    let nodes: std::collections::BTreeSet<_> = bound_to(&out.plan, "tp4-").into_iter().collect();
    assert_eq!(out.plan.binds.len(), 4);
    assert_eq!(nodes.len(), 4);
}

#[test]
fn binpack_fills_one_node_and_keeps_the_other_whole() {
    let c = Cluster::new()
        .node(gpu_node("node-a"))
        .node(gpu_node("node-b"));
    let c = (0..8).fold(c, |c, i| {
        c.pod(pod("default", &format!("small-{i}")).gpus(1))
    });
    let mut snap = c.snapshot();
    let plans = run_sessions(&mut snap, 2);
    let b: Vec<_> = plans.iter().flat_map(|p| p.binds.iter()).collect();
    assert_eq!(b.len(), 8);
    assert!(b.iter().all(|b| &*b.node == "node-a"));
}

#[test]
fn enqueue_holds_gangs_over_cluster_or_queue_limits() {
    let c = Cluster::new()
        .node(gpu_node("node-a"))
        .node(gpu_node("node-b"))
        .queue(queue("small-q").capability_gpus(4))
        .group(podgroup("default", "huge").min_member(4).min_gpus(32))
        .group(
            podgroup("default", "capped")
                .min_member(2)
                .queue("small-q")
                .min_gpus(8),
        )
        .group(podgroup("default", "fits").min_member(2).min_gpus(4))
        .members("default", "huge", 4, |p| p.gpus(8))
        .members("default", "capped", 2, |p| p.gpus(4))
        .members("default", "fits", 2, |p| p.gpus(2));
    let out = run(&c.snapshot());
    let b = binds(&out.plan);
    assert_eq!(b.len(), 2);
    assert!(b.keys().all(|k| k.starts_with("default/fits-")));
    let phase = |n: &str| {
        out.plan
            .podgroups
            .iter()
            .find(|u| &*u.name == n)
            .map(|u| u.status.phase)
    };
    assert_eq!(phase("huge"), Some(PodGroupPhase::Pending));
    assert_eq!(phase("capped"), Some(PodGroupPhase::Pending));
    assert_eq!(phase("fits"), Some(PodGroupPhase::Running));
    assert_eq!(
        pod_reason(&out.plan, "huge-0").as_deref(),
        Some("Unschedulable")
    );
    assert_eq!(
        pod_reason(&out.plan, "capped-0").as_deref(),
        Some("QueueQuotaExceeded")
    );
    // The limit that held each gang is told in a Normal event.
    let ev = out
        .plan
        .events
        .iter()
        .find(|e| &*e.name == "capped")
        .expect("event for capped");
    assert!(!ev.warning && ev.message.contains("small-q"), "{ev:?}");
}

#[test]
fn gang_timeout_fails_pending_members_and_a_patient_gang_waits() {
    let c = Cluster::new()
        .node(gpu_node("node-a"))
        .pod(pod("default", "busy").gpus(4).on("node-a").foreign())
        .group(podgroup("default", "impatient").min_member(8).timeout(30))
        .group(podgroup("default", "patient").min_member(8))
        .members("default", "impatient", 8, |p| p.gpus(1))
        .members("default", "patient", 8, |p| p.gpus(1));
    let mut snap = c.snapshot();
    let s = scheduler(&SchedulerConfig::default()).unwrap();
    let mut failed_at = None;
    for t in 1..=40 {
        let plan = s.run(&snap, Time::from_secs(t)).plan;
        assert!(plan.binds.is_empty());
        if !plan.pod_failures.is_empty() && failed_at.is_none() {
            failed_at = Some(t);
            assert_eq!(plan.pod_failures.len(), 8);
            assert!(plan
                .pod_failures
                .iter()
                .all(|f| f.reason == "GangScheduleTimeout"
                    && f.pod.name.starts_with("impatient")
                    && f.message.contains("default/impatient")));
            let c = pg_condition(&plan, "impatient").unwrap();
            assert_eq!(c.reason, "ScheduleTimeout");
            assert!(plan
                .events
                .iter()
                .any(|e| e.warning && &*e.name == "impatient"));
        }
        snap.record(&plan);
    }
    assert_eq!(
        failed_at,
        Some(31),
        "30s after the first session that saw it valid"
    );
    let j = snap.jobs.iter().find(|j| &*j.name == "impatient").unwrap();
    let c = &j.status.as_ref().unwrap().conditions[0];
    assert_eq!(c.reason, "ScheduleTimeout", "the timeout condition stays");
    assert!(snap
        .tasks
        .iter()
        .filter(|t| t.name.starts_with("patient"))
        .all(|t| t.status == caldera_model::TaskStatus::Pending));
}

#[test]
fn pods_wait_for_a_missing_podgroup_then_bind_whole() {
    let pods = |c: Cluster| {
        c.pod(pod("default", "late-0").group("late-pg").gpus(1))
            .pod(pod("default", "late-1").group("late-pg").gpus(1))
    };
    let out = run(&pods(Cluster::new().node(gpu_node("node-a"))).snapshot());
    assert!(out.plan.binds.is_empty());
    let c = &out.plan.pod_conditions[0];
    assert!(c.message.contains("default/late-pg"), "{c:?}");
    let out = run(&pods(
        Cluster::new()
            .node(gpu_node("node-a"))
            .group(podgroup("default", "late-pg").min_member(2)),
    )
    .snapshot());
    assert_eq!(out.plan.binds.len(), 2);
}

#[test]
fn predicates_selector_affinity_taints_cordon_and_not_ready() {
    let c = Cluster::new()
        .node(node("cpu-1").label("pool", "cpu"))
        .node(
            gpu_node("gpu-1")
                .label("pool", "gpu")
                .taint(GPU, "present", TaintEffect::NoSchedule),
        )
        .node(gpu_node("gpu-2").label("pool", "gpu").unschedulable())
        .node(gpu_node("gpu-3").label("pool", "gpu").not_ready())
        .pod(pod("default", "tolerates-gpu-taint").gpus(1).tolerate(GPU))
        .pod(pod("default", "no-toleration").gpus(1))
        .pod(pod("default", "cpu-selector").selector("pool", "cpu"))
        .pod(pod("default", "not-cpu-affinity").tolerate(GPU).affinity(
            "pool",
            SelectorOp::NotIn,
            &["cpu"],
        ));
    let out = run(&c.snapshot());
    let b = binds(&out.plan);
    assert_eq!(
        b.get("default/tolerates-gpu-taint").map(String::as_str),
        Some("gpu-1")
    );
    assert_eq!(
        b.get("default/cpu-selector").map(String::as_str),
        Some("cpu-1")
    );
    assert_eq!(
        b.get("default/not-cpu-affinity").map(String::as_str),
        Some("gpu-1")
    );
    assert!(!b.contains_key("default/no-toleration"));
    let msg = &out
        .plan
        .pod_conditions
        .iter()
        .find(|c| &*c.pod.name == "no-toleration")
        .unwrap()
        .message;
    assert!(msg.contains("0/4 nodes are available"), "{msg}");
    assert!(msg.contains("1 Insufficient nvidia.com/gpu"), "{msg}");
    assert!(
        msg.contains("1 node(s) had untolerated taint {nvidia.com/gpu: present}"),
        "{msg}"
    );
    assert!(msg.contains("1 node(s) were unschedulable"), "{msg}");
    assert!(msg.contains("1 node(s) were not ready"), "{msg}");
}

#[test]
fn higher_priority_gang_wins_the_only_free_node() {
    let c = Cluster::new()
        .node(gpu_node("node-a"))
        .group(podgroup("default", "low-job").min_member(8).priority(100))
        .group(podgroup("default", "high-job").min_member(8).priority(1000))
        .members("default", "low-job", 8, |p| p.gpus(1))
        .members("default", "high-job", 8, |p| p.gpus(1));
    let out = run(&c.snapshot());
    assert_eq!(out.plan.binds.len(), 8);
    assert!(out
        .plan
        .binds
        .iter()
        .all(|b| b.pod.name.starts_with("high-job-")));
}

#[test]
fn weighted_queues_split_sixteen_gpus_four_and_twelve() {
    let c = Cluster::new()
        .node(gpu_node("node-a"))
        .node(gpu_node("node-b"))
        .queue(queue("team-a").weight(1))
        .queue(queue("team-b").weight(3))
        .group(podgroup("default", "job-a").queue("team-a"))
        .group(podgroup("default", "job-b").queue("team-b"))
        .members("default", "job-a", 16, |p| p.gpus(1))
        .members("default", "job-b", 16, |p| p.gpus(1));
    let mut snap = c.snapshot();
    let plans = run_sessions(&mut snap, 5);
    let all: Vec<_> = plans.iter().flat_map(|p| p.binds.iter()).collect();
    assert_eq!(
        all.iter()
            .filter(|b| b.pod.name.starts_with("job-a-"))
            .count(),
        4
    );
    assert_eq!(
        all.iter()
            .filter(|b| b.pod.name.starts_with("job-b-"))
            .count(),
        12
    );
    let extra = &plans.last().unwrap().pod_conditions;
    assert!(
        extra.iter().all(|c| c.reason == "QueueQuotaExceeded"),
        "{extra:?}"
    );
}

#[test]
fn gated_member_makes_the_gang_invalid_until_the_gate_lifts() {
    let gated = |gate: bool| {
        Cluster::new()
            .node(gpu_node("node-a"))
            .group(podgroup("default", "gated-job").min_member(4))
            .members("default", "gated-job", 4, |p| {
                if gate && p.clone().gpus(1).gated().snapshot_name() == "gated-job-3" {
                    p.gpus(1).gated()
                } else {
                    p.gpus(1)
                }
            })
    };
    let out = run(&gated(true).snapshot());
    assert!(out.plan.binds.is_empty());
    let c = pg_condition(&out.plan, "gated-job").unwrap();
    assert_eq!(c.reason, "NotEnoughTasks");
    assert!(c.message.contains("3 of 4"), "{}", c.message);
    assert_eq!(run(&gated(false).snapshot()).plan.binds.len(), 4);
}

trait Named {
    fn snapshot_name(&self) -> String;
}

impl Named for caldera_testkit::builders::PodBuilder {
    fn snapshot_name(&self) -> String {
        let s = Cluster::new().pod(self.clone()).snapshot();
        s.tasks
            .first()
            .map(|t| t.name.to_string())
            .or_else(|| s.waiting.first().map(|w| w.name.to_string()))
            .unwrap_or_default()
    }
}

// ----- Volcano's classic cases -----

#[test]
fn gang_that_fits_is_bound_in_one_session() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(podgroup("ns", "g").min_member(3))
        .members("ns", "g", 3, |p| p.gpus(2));
    assert_eq!(run(&c.snapshot()).plan.binds.len(), 3);
}

#[test]
fn second_gang_on_a_full_cluster_waits_without_disturbing_the_first() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(podgroup("ns", "first").min_member(4).created(1))
        .group(podgroup("ns", "second").min_member(4).created(2))
        .members("ns", "first", 4, |p| p.gpus(2))
        .members("ns", "second", 4, |p| p.gpus(2));
    let mut snap = c.snapshot();
    let plans = run_sessions(&mut snap, 3);
    let all: Vec<_> = plans.iter().flat_map(|p| p.binds.iter()).collect();
    assert_eq!(all.len(), 4);
    assert!(all.iter().all(|b| b.pod.name.starts_with("first-")));
}

#[test]
fn best_effort_members_are_placed() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(podgroup("ns", "be").min_member(2))
        .members("ns", "be", 3, |p| p.best_effort());
    assert_eq!(run(&c.snapshot()).plan.binds.len(), 3);
}

#[test]
fn drf_lets_the_smaller_job_go_first_within_a_queue() {
    // job "big" already holds 6 GPUs; "small" holds none. Two free GPUs: small gets them.
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(
            podgroup("ns", "big")
                .min_member(1)
                .phase(PodGroupPhase::Running)
                .created(0),
        )
        .group(podgroup("ns", "small").min_member(1).created(5))
        .members("ns", "big", 6, |p| p.gpus(1).on("n1"))
        .pod(pod("ns", "big-x").group("big").gpus(1).created(0))
        .pod(pod("ns", "big-y").group("big").gpus(1).created(0))
        .members("ns", "small", 2, |p| p.gpus(1).created(5));
    let out = run(&c.snapshot());
    let placed: Vec<_> = out
        .plan
        .binds
        .iter()
        .map(|b| b.pod.name.to_string())
        .collect();
    assert_eq!(placed.len(), 2);
    assert!(placed.iter().all(|n| n.starts_with("small-")), "{placed:?}");
}

#[test]
fn queue_capability_caps_and_guarantee_reserves() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .node(gpu_node("n2"))
        .queue(queue("capped").capability_gpus(3))
        .queue(queue("reserved").guarantee_gpus(6))
        .group(podgroup("ns", "c").queue("capped"))
        .members("ns", "c", 16, |p| p.gpus(1));
    let mut snap = c.snapshot();
    let plans = run_sessions(&mut snap, 4);
    let n = plans.iter().map(|p| p.binds.len()).sum::<usize>();
    assert_eq!(n, 3, "capability 3");
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .node(gpu_node("n2"))
        .queue(queue("other"))
        .queue(queue("reserved").guarantee_gpus(6))
        .group(podgroup("ns", "o").queue("other"))
        .members("ns", "o", 16, |p| p.gpus(1));
    let mut snap = c.snapshot();
    let plans = run_sessions(&mut snap, 4);
    let n = plans.iter().map(|p| p.binds.len()).sum::<usize>();
    assert_eq!(n, 10, "6 of 16 GPUs are reserved for the other queue");
}

#[test]
fn closed_queue_admits_nothing() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .queue(queue("shut").closed())
        .group(podgroup("ns", "g").queue("shut"))
        .members("ns", "g", 1, |p| p.gpus(1));
    let out = run(&c.snapshot());
    assert!(out.plan.binds.is_empty());
    assert_eq!(
        pod_reason(&out.plan, "g-0").as_deref(),
        Some("QueueQuotaExceeded")
    );
}

#[test]
fn overcommit_factor_admits_up_to_allocatable_times_factor() {
    let mk = |factor: &str| {
        let cfg = config(&format!(
            "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: gang\n  - name: overcommit\n    arguments:\n      overcommit-factor: {factor}\n  - name: predicates\n  - name: proportion\n"
        ));
        let c = Cluster::new()
            .node(gpu_node("n1"))
            .pod(pod("ns", "busy").gpus(4).on("n1").foreign())
            .group(podgroup("ns", "g").min_member(1).min_gpus(6))
            .members("ns", "g", 1, |p| p.gpus(1));
        run_with(&cfg, &c.snapshot(), 1).plan.binds.len()
    };
    assert_eq!(mk("1.2"), 0, "8 × 1.2 − 4 used = 5 < 6");
    assert_eq!(mk("1.5"), 1, "8 × 1.5 − 4 used = 8 ≥ 6");
}

#[test]
fn pod_count_and_host_ports_are_enforced() {
    let c = Cluster::new()
        .node(node("n1").max_pods(2))
        .pod(pod("ns", "a").created(1))
        .pod(pod("ns", "b").created(2))
        .pod(pod("ns", "c").created(3));
    let out = run(&c.snapshot());
    assert_eq!(out.plan.binds.len(), 2);
    let msg = &out.plan.pod_conditions[0].message;
    assert!(msg.contains("Too many pods"), "{msg}");

    let c = Cluster::new()
        .node(node("n1"))
        .node(node("n2"))
        .pod(pod("ns", "p1").host_port(8080))
        .pod(pod("ns", "p2").host_port(8080))
        .pod(pod("ns", "p3").host_port(8080));
    let out = run(&c.snapshot());
    let nodes: std::collections::BTreeSet<_> =
        out.plan.binds.iter().map(|b| b.node.to_string()).collect();
    assert_eq!(out.plan.binds.len(), 2);
    assert_eq!(nodes.len(), 2, "one port user per node");
}

#[test]
fn gang_with_roles_places_every_role_minimum() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(
            podgroup("ns", "mpi")
                .min_member(3)
                .min_task("master", 1)
                .min_task("worker", 2),
        )
        .pod(pod("ns", "mpi-master-0").group("mpi").role("master"))
        .members("ns", "mpi", 4, |p| p.gpus(2).role("worker"));
    let out = run(&c.snapshot());
    let names: Vec<_> = out
        .plan
        .binds
        .iter()
        .map(|b| b.pod.name.to_string())
        .collect();
    assert!(names.contains(&"mpi-master-0".to_string()), "{names:?}");
    assert_eq!(names.len(), 5, "gang of 3, then the 2 extra workers");
}

#[test]
fn unchanged_statuses_are_not_written_again() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(podgroup("ns", "g").min_member(9))
        .members("ns", "g", 9, |p| p.gpus(1));
    let mut snap = c.snapshot();
    let plans = run_sessions(&mut snap, 3);
    assert!(!plans[0].is_empty());
    assert!(
        plans[1].is_empty(),
        "second session writes nothing: {:?}",
        plans[1]
    );
    assert!(plans[2].is_empty());
}

#[test]
fn same_snapshot_gives_the_same_plan() {
    let c = Cluster::new()
        .nodes("n", 6, |n| n.gpus(8))
        .group(podgroup("ns", "a").min_member(5))
        .group(podgroup("ns", "b").min_member(7))
        .members("ns", "a", 5, |p| p.gpus(3))
        .members("ns", "b", 7, |p| p.gpus(2));
    let s = c.snapshot();
    assert_eq!(run(&s).plan, run(&s).plan);
}

#[test]
fn explain_shows_node_by_node_how_many_members_fit() {
    let c = Cluster::new()
        .node(gpu_node("node-a"))
        .node(gpu_node("node-b").taint("dedicated", "infer", TaintEffect::NoSchedule))
        .pod(pod("default", "busy-a").gpus(2).on("node-a").foreign())
        .group(podgroup("default", "tp8").min_member(8))
        .members("default", "tp8", 8, |p| p.gpus(1));
    let s = scheduler(&SchedulerConfig::default()).unwrap();
    let e = s
        .explain(&c.snapshot(), Time::from_secs(1), "default/tp8")
        .expect("job exists");
    assert_eq!(e.placed, 0);
    assert!(
        e.held
            .as_deref()
            .unwrap_or("")
            .contains("Insufficient nvidia.com/gpu"),
        "{e}"
    );
    let nodes = &e.kinds[0].nodes;
    assert_eq!((nodes[0].node.as_str(), nodes[0].fit), ("node-a", 6));
    assert_eq!(nodes[1].fit, 0);
    assert!(nodes[1]
        .reason
        .as_deref()
        .unwrap_or("")
        .contains("untolerated taint"));
    let text = e.to_string();
    assert!(text.contains("8 pending members"), "{text}");
    assert!(s
        .explain(&c.snapshot(), Time::from_secs(1), "default/nope")
        .is_none());
}

#[test]
fn explain_draws_the_queue_path_with_shares() {
    let config = caldera_config::parse(
        "actions: enqueue, allocate\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n  - name: capacity\n    enableHierarchy: true\n",
        None,
    )
    .unwrap();
    let c = Cluster::new()
        .node(gpu_node("node-a"))
        .queue(queue("research").deserved_gpus(8).capability_gpus(4))
        .queue(queue("vision").parent("research").deserved_gpus(6))
        .pod(
            pod("default", "run-0")
                .group("run")
                .gpus(2)
                .on("node-a")
                .running(),
        )
        .group(podgroup("default", "run").min_member(1).queue("vision"))
        .group(podgroup("default", "tp4").min_member(4).queue("vision"))
        .members("default", "tp4", 4, |p| p.gpus(1));
    let s = scheduler(&config).unwrap();
    let e = s
        .explain(&c.snapshot(), Time::from_secs(1), "default/tp4")
        .expect("job exists");
    let text = e.to_string();
    let line = |q: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("{q}: deserved")))
            .unwrap_or_else(|| panic!("no line for {q}: {text}"))
            .to_string()
    };
    let (research, vision) = (line("research"), line("vision"));
    assert!(
        research.starts_with("      research: deserved {nvidia.com/gpu: 8}"),
        "{text}"
    );
    assert!(research.ends_with("share 0.25"), "{text}");
    assert!(
        vision.starts_with("        vision: deserved {nvidia.com/gpu: 6}"),
        "{text}"
    );
    assert!(vision.ends_with("share 0.33"), "{text}");
    // vision inherits research's capability of 4 GPUs: 2 run, so the gang of 4 is held.
    assert!(
        text.contains(
            "queue vision would exceed its capability {cpu: 64, memory: 512Gi, nvidia.com/gpu: 4}"
        ),
        "{text}"
    );
}

#[test]
fn full_cluster_with_one_queue_says_unschedulable_not_quota() {
    // The default queue deserves the whole cluster: when it is full, a waiting gang is short
    // of nodes, not of quota, so cluster-autoscaler must see Unschedulable.
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(
            podgroup("ns", "first")
                .min_member(8)
                .phase(PodGroupPhase::Running),
        )
        .members("ns", "first", 8, |p| p.gpus(1).on("n1"))
        .group(podgroup("ns", "second").min_member(2))
        .members("ns", "second", 2, |p| p.gpus(1));
    let out = run(&c.snapshot());
    assert!(out.plan.binds.is_empty());
    assert_eq!(
        pod_reason(&out.plan, "second-0").as_deref(),
        Some("Unschedulable")
    );
    let msg = &out.plan.pod_conditions[0].message;
    assert!(msg.contains("Insufficient nvidia.com/gpu"), "{msg}");
}

#[test]
fn a_missing_member_or_podgroup_is_reported_only_after_a_grace_second() {
    // Pods and PodGroups arrive through separate watches: for a moment one may be seen
    // without the other. Nothing is written about it until that lasts a second.
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .group(podgroup("ns", "g").min_member(4).created(10))
        .members("ns", "g", 2, |p| p.gpus(1).created(10))
        .pod(pod("ns", "orphan-0").group("not-yet").created(10));
    let s = c.snapshot();
    let early = run_with(&SchedulerConfig::default(), &s, 10).plan;
    assert!(
        early.podgroups.is_empty() && early.pod_conditions.is_empty(),
        "{early:?}"
    );
    let late = run_with(&SchedulerConfig::default(), &s, 11).plan;
    assert_eq!(pg_condition(&late, "g").unwrap().reason, "NotEnoughTasks");
    assert!(late
        .pod_conditions
        .iter()
        .any(|c| &*c.pod.name == "orphan-0"));
}

#[test]
fn members_of_a_half_bound_required_topology_gang_join_their_domain() {
    // After a restart, 2 of 4 members are bound on n1 (the gang is not ready yet); the other 2
    // must go to n1 too, although n2 is the tighter fit for 2 more.
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .node(gpu_node("n2"))
        .pod(pod("other", "busy").gpus(6).on("n2").foreign())
        .group(
            podgroup("ns", "tp")
                .min_member(4)
                .topology(true, "kubernetes.io/hostname")
                .phase(PodGroupPhase::Inqueue),
        )
        .pod(pod("ns", "tp-0").group("tp").gpus(1).on("n1"))
        .pod(pod("ns", "tp-1").group("tp").gpus(1).on("n1"))
        .pod(pod("ns", "tp-2").group("tp").gpus(1))
        .pod(pod("ns", "tp-3").group("tp").gpus(1))
        .pod(pod("ns", "tp-4").group("tp").gpus(1));
    let out = run(&c.snapshot());
    let b = binds(&out.plan);
    assert!(b.len() >= 2, "{b:?}");
    assert!(
        b.values().all(|n| n == "n1"),
        "every member stays on n1: {b:?}"
    );
}

#[test]
fn a_required_topology_gang_kept_out_by_its_own_anti_affinity_is_told_both_causes() {
    // Four one-per-node members that must share one node: every node has the room, none the
    // fit. The message names the topology and, from the domains with room, the anti-affinity.
    let mut c = Cluster::new();
    for i in 0..3 {
        c = c.node(gpu_node(&format!("n{i}")));
    }
    let c = c
        .group(
            podgroup("ns", "ps")
                .min_member(4)
                .topology(true, "kubernetes.io/hostname"),
        )
        .members("ns", "ps", 4, |p| {
            p.gpus(1)
                .label("app", "ps")
                .anti_affinity("app", "ps", "kubernetes.io/hostname")
        });
    let out = run(&c.snapshot());
    assert!(out.plan.binds.is_empty(), "{:?}", out.plan.binds);
    let msg = pg_condition(&out.plan, "ps").map(|c| c.message.clone());
    let msg = msg.unwrap_or_default();
    assert!(
        msg.contains("0/3 kubernetes.io/hostname domains can hold all 4 members"),
        "{msg}"
    );
    assert!(
        msg.contains("3 had room for it, but its members do not all fit there: 0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules."),
        "{msg}"
    );
}

#[test]
fn a_job_naming_a_missing_queue_takes_no_share_from_real_queues() {
    let c = Cluster::new()
        .node(gpu_node("n1"))
        .node(gpu_node("n2"))
        .queue(queue("a"))
        .group(podgroup("ns", "real").min_member(16).queue("a"))
        .members("ns", "real", 16, |p| p.gpus(1))
        .group(podgroup("ns", "typo").min_member(16).queue("tpyo"))
        .members("ns", "typo", 16, |p| p.gpus(1));
    let out = run(&c.snapshot());
    assert_eq!(bound_to(&out.plan, "real-").len(), 16);
    assert!(bound_to(&out.plan, "typo-").is_empty());
}

/// Two racks: rack-a fuller in GPUs, rack-b fuller in cpu. Which rack a hard tier-1 gang of
/// two (1 GPU, 1 cpu each) gets depends on the network-topology-aware weights.
fn racks_full_in_different_resources() -> Snapshot {
    let mut c = Cluster::new();
    for n in ["a-0", "a-1", "b-0", "b-1"] {
        c = c.node(node(n).gpus(4).cpu(32));
    }
    c.hypernode(hypernode("rack-a", 1).nodes(["a-0", "a-1"]))
        .hypernode(hypernode("rack-b", 1).nodes(["b-0", "b-1"]))
        .pod(pod("default", "busy-gpu").gpus(2).on("a-0").foreign())
        .pod(
            pod("default", "busy-cpu")
                .cpu_milli(30_000)
                .on("b-0")
                .foreign(),
        )
        .group(
            podgroup("default", "tp2")
                .min_member(2)
                .network_topology(true, 1),
        )
        .members("default", "tp2", 2, |p| p.gpus(1).cpu_milli(1000))
        .snapshot()
}

fn topology_config(arguments: &str) -> SchedulerConfig {
    config(&format!(
        "actions: \"enqueue, allocate, backfill\"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: binpack
  - name: network-topology-aware
    arguments: {{{arguments}}}
"
    ))
}

#[test]
fn network_topology_aware_weights_choose_the_fullest_domain() {
    let snap = racks_full_in_different_resources();
    let racks = |cfg: &SchedulerConfig| -> Vec<String> {
        let out = run_with(cfg, &snap, 10);
        let mut racks: Vec<String> = bound_to(&out.plan, "tp2")
            .iter()
            .map(|n| n[..1].to_string())
            .collect();
        racks.dedup();
        racks
    };
    // Without the plugin every requested resource weighs 1: rack-b is fuller on average.
    assert_eq!(racks(&SchedulerConfig::default()), ["b"]);
    // Volcano's defaults count cpu and memory only: rack-b again.
    assert_eq!(racks(&topology_config("")), ["b"]);
    // GPUs listed with weight 10: rack-a, the fuller in GPUs.
    let gpus = "hypernode.binpack.resources: nvidia.com/gpu, hypernode.binpack.resources.nvidia.com/gpu: 10";
    assert_eq!(racks(&topology_config(gpus)), ["a"]);
    // weight 0 turns the fullest-first order off: domains by name.
    assert_eq!(racks(&topology_config("weight: 0")), ["a"]);
}
