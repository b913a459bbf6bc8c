//! `consolidate`: pods their controllers re-create are moved only when the move is proven to
//! let a fragmented gang run and every moved pod has a place held; tables of the rules, and
//! property tests over random fragmented clusters and over runs of sessions.

use caldera_model::{Budget, MoveHold, Plan, Snapshot, Task, TaskStatus, Time};
use caldera_plugins::scheduler;
use caldera_testkit::builders::{node, pod, podgroup, queue, Cluster, PodBuilder};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const CONFIG: &str = r#"
actions: "enqueue, allocate, preempt, consolidate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"#;

/// Ten minutes and a bit after the pods started at 0.
fn now() -> Time {
    Time::from_secs(1_000)
}

fn run_with(snap: &Snapshot, config: &str) -> Plan {
    let config = caldera_config::parse(config, None).expect("test config parses");
    scheduler(&config)
        .expect("scheduler builds")
        .run(snap, now())
        .plan
}

fn run(snap: &Snapshot) -> Plan {
    run_with(snap, CONFIG)
}

/// A ReplicaSet's pod of `gpus` GPUs running on `node` since 0.
fn web(name: &str, gpus: i64, on: &str) -> PodBuilder {
    pod("ns", name)
        .gpus(gpus)
        .on(on)
        .running()
        .controlled_by("ReplicaSet", "web-7d9", Some("7d9"))
}

/// Load of another scheduler.
fn busy(name: &str, gpus: i64, on: &str) -> PodBuilder {
    pod("ns", name).gpus(gpus).on(on).foreign()
}

/// Three 8-GPU nodes; the TP=4 gang (4 × 1 GPU, one node) waits. n0 has 4 GPUs of others'
/// load plus `on_n0`; n1 has 7 of others' (1 free); n2 is full.
fn fragmented(on_n0: Vec<PodBuilder>) -> Cluster {
    let mut c = Cluster::new()
        .queue(queue("default"))
        .node(
            node("n0")
                .gpus(8)
                .cpu(64)
                .label("kubernetes.io/hostname", "n0"),
        )
        .node(
            node("n1")
                .gpus(8)
                .cpu(64)
                .label("kubernetes.io/hostname", "n1"),
        )
        .node(
            node("n2")
                .gpus(8)
                .cpu(64)
                .label("kubernetes.io/hostname", "n2"),
        )
        .pod(busy("busy-0", 4, "n0"))
        .pod(busy("busy-1", 7, "n1"))
        .pod(busy("busy-2", 8, "n2"))
        .group(
            podgroup("ns", "tp4")
                .min_member(4)
                .topology(true, "kubernetes.io/hostname"),
        );
    for i in 0..4 {
        c = c.pod(pod("ns", &format!("tp4-{i}")).group("tp4").gpus(1));
    }
    for p in on_n0 {
        c = c.pod(p);
    }
    c
}

fn evicted(plan: &Plan) -> Vec<(&str, &str)> {
    plan.evictions
        .iter()
        .map(|e| (&*e.pod.name, e.action))
        .collect()
}

#[test]
fn one_pod_moves_so_a_one_node_gang_fits_and_its_replacement_has_a_place() {
    let snap = fragmented(vec![web("web-a", 1, "n0")]).snapshot();
    let plan = run(&snap);
    assert_eq!(evicted(&plan), vec![("web-a", "consolidate")]);
    assert_eq!(plan.evictions[0].preemptor.as_ref(), "ns/tp4");
    let nominated: BTreeSet<(&str, Option<&str>)> = plan
        .nominations
        .iter()
        .map(|n| (&*n.pod.name, n.node.as_deref()))
        .collect();
    assert_eq!(nominated.len(), 4);
    assert!(
        nominated.iter().all(|(_, n)| *n == Some("n0")),
        "{nominated:?}"
    );
    assert!(
        plan.binds.is_empty(),
        "nothing binds while web-a terminates"
    );
    assert_eq!(plan.move_holds.len(), 1);
    let w = &plan.move_holds[0];
    assert_eq!((&*w.namespace, &*w.name), ("ns", "tp4"));
    assert_eq!(w.holds.len(), 1);
    let h = &w.holds[0];
    assert_eq!(
        (&*h.owner, h.slot.as_deref(), &*h.pod, &*h.node),
        ("uid-ReplicaSet-web-7d9", Some("7d9"), "web-a", "n1")
    );
    assert!(plan.events.iter().any(|e| e.reason == "Consolidated"
        && &*e.name == "web-a"
        && e.message.contains("ns/tp4")
        && e.message.contains("expected on node n1")));
    assert_eq!(plan, run(&snap), "the plan is deterministic");
}

/// Sets node `name`'s GPUs in use (others' load changed).
fn gpus_used(snap: &mut Snapshot, name: &str, gpus: i64) {
    let n = snap.nodes.iter().position(|n| &*n.name == name).unwrap();
    snap.nodes[n].used.set("nvidia.com/gpu", gpus);
}

#[test]
fn the_fewest_pods_move_and_of_equals_the_most_recently_started() {
    let two = || {
        fragmented(vec![
            web("web-a", 1, "n0").started(Time::from_secs(0)),
            web("web-b", 1, "n0").started(Time::from_secs(100)),
        ])
        .snapshot()
    };
    // n0: 4 + 2 used, 2 free; the gang needs 4: both must go, and n1 has room for one only.
    assert!(run(&two()).evictions.is_empty());
    // n1 with 3 free: both go.
    let mut snap = two();
    gpus_used(&mut snap, "n1", 5);
    let mut names: Vec<&str> = Vec::new();
    let plan = run(&snap);
    names.extend(evicted(&plan).into_iter().map(|(n, _)| n));
    names.sort_unstable();
    assert_eq!(names, vec!["web-a", "web-b"]);
    // n0 with 3 free: one move is enough, the most recently started.
    let mut snap = two();
    gpus_used(&mut snap, "n0", 5);
    assert_eq!(evicted(&run(&snap)), vec![("web-b", "consolidate")]);
    // One pod of 2 GPUs rather than two of 1 on another node.
    let mut c = fragmented(vec![web("web-a", 1, "n0"), web("web-b", 1, "n0")]);
    c = c.pod(web("web-c", 2, "n2"));
    let mut snap = c.snapshot();
    // n0 and n2 have 2 free each, n1 2: moving web-c (1 pod) or web-a and web-b (2) both work.
    gpus_used(&mut snap, "n2", 6);
    gpus_used(&mut snap, "n1", 6);
    let plan = run(&snap);
    assert_eq!(
        evicted(&plan),
        vec![("web-c", "consolidate")],
        "{:?}",
        plan.nominations
    );
}

#[test]
fn nothing_moves_when_the_moved_pod_fits_nowhere_else() {
    // web-a asks 2 GPUs: moving it frees n0 for the gang, but only 1 GPU is free elsewhere.
    let mut snap = fragmented(vec![web("web-a", 2, "n0")]).snapshot();
    // n0: 3 of others' + 2 used, 3 free; n1 1 free.
    gpus_used(&mut snap, "n0", 5);
    let plan = run(&snap);
    assert!(plan.evictions.is_empty(), "{:?}", evicted(&plan));
    assert!(plan.move_holds.is_empty());
}

#[test]
fn a_disruption_budget_that_allows_none_forbids_the_move() {
    let mut snap = fragmented(vec![web("web-a", 1, "n0")]).snapshot();
    snap.budgets.push(Budget {
        id: "ns/web".into(),
        allowed: 0,
    });
    task_mut(&mut snap, "web-a").budget = Some(0);
    assert!(run(&snap).evictions.is_empty());
    snap.budgets[0].allowed = 1;
    assert_eq!(evicted(&run(&snap)), vec![("web-a", "consolidate")]);
}

#[test]
fn a_gang_moves_whole() {
    let mut c = fragmented(vec![]).group(podgroup("ns", "pair").min_member(2));
    // n0: others' 4 + the pair's two members of 1 → 2 free; n1 gets room for both.
    for i in 0..2 {
        c = c.pod(
            pod("ns", &format!("pair-{i}"))
                .group("pair")
                .gpus(1)
                .on("n0")
                .running()
                .controlled_by("Job", "pair", Some(&i.to_string())),
        );
    }
    let mut snap = c.snapshot();
    gpus_used(&mut snap, "n1", 6);
    let plan = run(&snap);
    let mut names: Vec<&str> = evicted(&plan).into_iter().map(|(n, _)| n).collect();
    names.sort_unstable();
    assert_eq!(names, vec!["pair-0", "pair-1"]);
    assert!(plan.events.iter().any(|e| e.reason == "Consolidated"
        && &*e.name == "pair"
        && e.message.starts_with("2 member(s)")));
    // One member alone may not move: with one of them not re-created, neither moves.
    task_mut(&mut snap, "pair-1").controller = None;
    assert!(run(&snap).evictions.is_empty());
}

#[test]
fn opted_out_young_and_higher_priority_pods_stay() {
    let cases: Vec<(&str, PodBuilder)> = vec![
        ("no-consolidate", web("web-a", 1, "n0").no_consolidate()),
        (
            "running five minutes only (minRuntime 10m)",
            web("web-a", 1, "n0").started(Time::from_secs(700)),
        ),
        ("higher priority", web("web-a", 1, "n0").priority(5)),
        (
            "no controller re-creates it",
            pod("ns", "web-a").gpus(1).on("n0").running(),
        ),
    ];
    for (why, p) in cases {
        let plan = run(&fragmented(vec![p]).snapshot());
        assert!(plan.evictions.is_empty(), "{why}: {:?}", evicted(&plan));
    }
    // Equal priority moves (the common case: a fleet at one priority).
    let plan = run(&fragmented(vec![web("web-a", 1, "n0").priority(0)]).snapshot());
    assert_eq!(evicted(&plan).len(), 1);
}

#[test]
fn off_by_default_and_bounded_by_its_arguments() {
    let snap = fragmented(vec![web("web-a", 1, "n0")]).snapshot();
    let without = CONFIG.replace("consolidate, ", "");
    assert!(run_with(&snap, &without).evictions.is_empty());
    let none =
        format!("{CONFIG}configurations:\n- name: consolidate\n  arguments:\n    maxGPUs: 0\n");
    assert!(run_with(&snap, &none).evictions.is_empty());
    let young =
        format!("{CONFIG}configurations:\n- name: consolidate\n  arguments:\n    minRuntime: 1h\n");
    assert!(run_with(&snap, &young).evictions.is_empty());
    let bad =
        format!("{CONFIG}configurations:\n- name: consolidate\n  arguments:\n    maxPod: 3\n");
    let err = caldera_config::parse(&bad, None).unwrap_err().to_string();
    assert!(err.contains("maxPod") && err.contains("maxPods"), "{err}");
    let bad =
        format!("{CONFIG}configurations:\n- name: consolidate\n  arguments:\n    maxPods: 0\n");
    assert!(caldera_config::parse(&bad, None).is_err());
}

#[test]
fn nothing_moves_for_a_gang_short_of_capacity_or_one_that_fits() {
    // Free in total 3 < 4: not fragmentation, the cluster is too small.
    let mut snap = fragmented(vec![web("web-a", 1, "n0")]).snapshot();
    gpus_used(&mut snap, "n1", 8);
    assert!(run(&snap).evictions.is_empty());
}

/// What the next session sees once the plan is carried out: moved pods gone and their
/// controllers' replacements pending, holds on the PodGroups, nominations set.
fn after(snap: &Snapshot, plan: &Plan) -> Snapshot {
    let mut next = snap.clone();
    next.record(plan);
    for w in &plan.move_holds {
        let id = format!("{}/{}", w.namespace, w.name);
        if let Some(j) = next.jobs.iter_mut().find(|j| *j.id == *id) {
            j.moves = w.holds.clone();
        }
    }
    for n in &plan.nominations {
        if let Some(t) = next.tasks.iter_mut().find(|t| t.name == n.pod.name) {
            t.nominated = n.node.clone();
        }
    }
    // Evicted pods are gone (grace over) and re-created pending by their controllers, under
    // new names (a job of one each).
    for e in &plan.evictions {
        let i = next
            .tasks
            .iter()
            .position(|t| t.name == e.pod.name)
            .unwrap();
        let t = next.tasks[i].clone();
        if let Some(node) = t.node.as_deref() {
            let n = next.nodes.iter().position(|x| &*x.name == node).unwrap();
            next.nodes[n].remove_pod(&t.request, &t.spec.host_ports);
        }
        let job = t.job;
        let replacement = Task {
            uid: format!("{}-new", t.uid).into(),
            name: format!("{}-new", t.name).into(),
            status: TaskStatus::Pending,
            node: None,
            created: now(),
            started: now(),
            nominated: None,
            budget: None,
            ..t
        };
        next.tasks[i] = replacement;
        let _ = job;
    }
    next
}

/// The next session after `first`, with a newcomer `zz-other` of one GPU (the moved pod's
/// size) arrived meanwhile: its snapshot and plan.
fn with_newcomer(snap: &Snapshot, first: &Plan) -> (Snapshot, Plan) {
    let newcomer = Cluster::new()
        .queue(queue("default"))
        .pod(pod("ns", "zz-other").gpus(1));
    let next = merge(&after(snap, first), newcomer, now());
    let plan = run(&next);
    (next, plan)
}

/// A plan's binds: node by pod name.
fn bound(plan: &Plan) -> BTreeMap<&str, &str> {
    plan.binds
        .iter()
        .map(|b| (&*b.pod.name, &*b.node))
        .collect()
}

#[test]
fn the_replacement_lands_on_its_held_node_and_the_gang_binds_where_it_was_nominated() {
    let snap = fragmented(vec![web("web-a", 1, "n0")]).snapshot();
    let first = run(&snap);
    assert_eq!(evicted(&first), vec![("web-a", "consolidate")]);
    // Another pod of the same size arrives meanwhile: the held room on n1 is not its.
    let (next, plan) = with_newcomer(&snap, &first);
    let binds = bound(&plan);
    assert_eq!(binds.get("web-a-new"), Some(&"n1"), "{binds:?}");
    for i in 0..4 {
        assert_eq!(
            binds.get(format!("tp4-{i}").as_str()),
            Some(&"n0"),
            "{binds:?}"
        );
    }
    assert_eq!(
        binds.get("zz-other"),
        None,
        "the held room was not the newcomer's"
    );
    assert_eq!(plan.move_holds.len(), 1, "the used hold is dropped");
    assert!(plan.move_holds[0].holds.is_empty());
    // Expired holds count for nothing and are dropped.
    let mut late = next.clone();
    for j in &mut late.jobs {
        for h in &mut j.moves {
            h.until = now();
        }
    }
    let plan = run(&late);
    assert!(plan.move_holds.iter().all(|w| w.holds.is_empty()));
}

#[test]
fn a_pod_moved_from_another_namespace_has_its_replacement_held() {
    // The moved pod runs in namespace `serving`, the gang waits in `ns`.
    let other = pod("serving", "web-a")
        .gpus(1)
        .on("n0")
        .running()
        .controlled_by("ReplicaSet", "web-7d9", Some("7d9"));
    let snap = fragmented(vec![other]).snapshot();
    let first = run(&snap);
    assert_eq!(evicted(&first), vec![("web-a", "consolidate")]);
    let h = &first.move_holds[0].holds[0];
    assert_eq!(
        (&*h.namespace, &*h.pod, &*h.node),
        ("serving", "web-a", "n1")
    );
    // Its replacement (in `serving`) takes the held room, not a newcomer of the same size.
    let (_, plan) = with_newcomer(&snap, &first);
    let binds = bound(&plan);
    assert_eq!(binds.get("web-a-new"), Some(&"n1"), "{binds:?}");
    assert_eq!(binds.get("zz-other"), None, "{binds:?}");
    assert_eq!(plan.move_holds.len(), 1, "the used hold is dropped");
    assert!(plan.move_holds[0].holds.is_empty());
}

#[test]
fn a_try_that_fails_keeps_the_room_held_before_it() {
    // svc (a gang, priority as tp4's) runs two pods on n0, started last, and its third member
    // waits for a preempted pod on n3, room held there. big (two pods of 40 CPUs, started
    // first) also runs on n0. tp4 needs both moved off n0; svc's pods find room on n1 and n2,
    // big's do not (the GPUs free there have too few CPUs beside them).
    let rs = |name: &str, group: &str, started: i64| {
        pod("ns", name)
            .group(group)
            .gpus(1)
            .on("n0")
            .running()
            .started(Time::from_secs(started))
            .controlled_by("ReplicaSet", group, Some(name))
    };
    let gpu_node = |name: &str| {
        node(name)
            .gpus(8)
            .cpu(64)
            .label("kubernetes.io/hostname", name)
    };
    let mut c = Cluster::new()
        .queue(queue("default"))
        .node(gpu_node("n0"))
        .node(gpu_node("n1"))
        .node(gpu_node("n2"))
        .node(gpu_node("n3"))
        .pod(busy("busy-0", 4, "n0"))
        .pod(busy("busy-1", 6, "n1").cpu_milli(40_000))
        .pod(busy("busy-2", 6, "n2").cpu_milli(40_000))
        .pod(busy("busy-3", 5, "n3"))
        .pod(pod("ns", "victim").gpus(3).on("n3").terminating())
        .group(
            podgroup("ns", "tp4")
                .min_member(4)
                .topology(true, "kubernetes.io/hostname"),
        )
        .group(podgroup("ns", "svc").min_member(2))
        .group(podgroup("ns", "big").min_member(2))
        .pod(rs("svc-0", "svc", 100))
        .pod(rs("svc-1", "svc", 100))
        .pod(pod("ns", "svc-2").group("svc").gpus(3))
        .pod(rs("big-0", "big", 0).cpu_milli(40_000))
        .pod(rs("big-1", "big", 0).cpu_milli(40_000));
    for i in 0..4 {
        c = c.pod(pod("ns", &format!("tp4-{i}")).group("tp4").gpus(1));
    }
    let mut snap = c.snapshot();
    task_mut(&mut snap, "svc-2").nominated = Some("n3".into());
    let plan = run(&snap);
    assert!(plan.evictions.is_empty(), "{:?}", evicted(&plan));
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    let text = scheduler(&config)
        .expect("scheduler builds")
        .explain(&snap, now(), "ns/svc")
        .expect("the job exists")
        .to_string();
    assert!(
        text.contains("room held while victims terminate on: n3"),
        "{text}"
    );
    assert!(
        plan.nominations.iter().all(|n| &*n.pod.name != "svc-2"),
        "svc-2 keeps its nomination: {:?}",
        plan.nominations
    );
}

fn explain(snap: &Snapshot, job: &str) -> String {
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    scheduler(&config)
        .expect("scheduler builds")
        .explain(snap, now(), job)
        .expect("the job exists")
        .to_string()
}

#[test]
fn gangs_bound_by_topology_or_sub_groups_are_not_moved() {
    // web-a alone would move (see the first test), but its gang has a rule over all its members.
    let hard = fragmented(vec![web("web-a", 1, "n0").group("svc")])
        .group(podgroup("ns", "svc").topology(true, "kubernetes.io/hostname"))
        .snapshot();
    let plan = run(&hard);
    assert!(plan.evictions.is_empty(), "{:?}", evicted(&plan));
    let text = explain(&hard, "ns/svc");
    assert!(
        text.contains("consolidate never moves its pods: its hard topology rule"),
        "{text}"
    );
    let sub = fragmented(vec![web("web-a", 1, "n0").group("svc")])
        .group(podgroup("ns", "svc").sub_groups("rank", "rank", 1, 1, Some((true, 1))))
        .snapshot();
    let plan = run(&sub);
    assert!(plan.evictions.is_empty(), "{:?}", evicted(&plan));
    let text = explain(&sub, "ns/svc");
    assert!(text.contains("its sub-groups (subGroupPolicy)"), "{text}");
    // A soft rule binds nothing: the gang moves.
    let soft = fragmented(vec![web("web-a", 1, "n0").group("svc")])
        .group(podgroup("ns", "svc").topology(false, "kubernetes.io/hostname"))
        .snapshot();
    assert_eq!(evicted(&run(&soft)), vec![("web-a", "consolidate")]);
}

#[test]
fn pods_with_claims_made_for_them_are_not_moved() {
    let mut snap = fragmented(vec![web("web-a", 1, "n0")]).snapshot();
    task_mut(&mut snap, "web-a").claims =
        Some(std::sync::Arc::new(caldera_model::dra::TaskClaims {
            claims: vec![caldera_model::dra::PodClaim {
                pod_claim: "gpu".into(),
                claim: "web-a-gpu-x7k2p".into(),
                from_template: true,
            }],
            ..Default::default()
        }));
    let plan = run(&snap);
    assert!(plan.evictions.is_empty(), "{:?}", evicted(&plan));
    let text = explain(&snap, "ns/pod:web-a");
    assert!(
        text.contains("consolidate never moves its pods: pod ns/web-a has DRA claim web-a-gpu-x7k2p made for it"),
        "{text}"
    );
}

#[test]
fn explain_names_the_moves() {
    let snap = fragmented(vec![web("web-a", 1, "n0")]).snapshot();
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    let sched = scheduler(&config).expect("scheduler builds");
    let text = sched
        .explain(&snap, now(), "ns/tp4")
        .expect("the job exists")
        .to_string();
    assert!(
        text.contains("consolidation: consolidate moves ns/pod:web-a (1 pod"),
        "{text}"
    );
    assert!(text.contains("move ns/web-a off n0"), "{text}");
    assert!(text.contains("replacement held on n1"), "{text}");
}

fn task_mut<'a>(snap: &'a mut Snapshot, name: &str) -> &'a mut Task {
    snap.tasks.iter_mut().find(|t| &*t.name == name).unwrap()
}

// ----- properties -----

#[derive(Debug, Clone)]
struct Load {
    gpus: i64,
    movable: bool,
    started: i64,
    priority: i32,
}

fn load() -> impl Strategy<Value = Load> {
    (1i64..4, prop::bool::weighted(0.7), 0i64..1_000, 0i32..2).prop_map(
        |(gpus, movable, started, priority)| Load {
            gpus,
            movable,
            started,
            priority,
        },
    )
}

/// 8-GPU nodes filled first fit with single pods (movable ones owned by ReplicaSets), and
/// waiting one-node gangs of `gpus` × 1-GPU members at priority 0 (pods run at 0 and 1: preempt
/// has nothing to take, consolidate may move those at 0 only).
fn random_cluster(nodes: usize, loads: &[Load], gangs: &[i64]) -> Snapshot {
    let mut c = Cluster::new().queue(queue("default"));
    for n in 0..nodes {
        let name = format!("n{n}");
        c = c.node(
            node(&name)
                .gpus(8)
                .cpu(64)
                .label("kubernetes.io/hostname", &name),
        );
    }
    let mut free = vec![8i64; nodes];
    for (i, l) in loads.iter().enumerate() {
        // Spread: the emptiest node that fits, so free room ends up in pieces.
        let Some(n) = (0..nodes)
            .filter(|&n| free[n] >= l.gpus)
            .max_by_key(|&n| (free[n], n))
        else {
            continue;
        };
        free[n] -= l.gpus;
        let mut p = pod("ns", &format!("p{i:03}"))
            .gpus(l.gpus)
            .on(&format!("n{n}"))
            .running()
            .priority(l.priority)
            .started(Time::from_secs(l.started.min(300)));
        if l.movable {
            p = p.controlled_by("ReplicaSet", &format!("rs{}", i % 3), Some("h"));
        }
        c = c.pod(p);
    }
    for (g, &size) in gangs.iter().enumerate() {
        let name = format!("g{g}");
        c = c.group(
            podgroup("ns", &name)
                .min_member(size as u32)
                .topology(true, "kubernetes.io/hostname"),
        );
        for m in 0..size {
            c = c.pod(pod("ns", &format!("{name}-{m}")).group(&name).gpus(1));
        }
    }
    c.snapshot()
}

/// Checks the guarantees of one session's plan; returns the moves.
fn check_plan(snap: &Snapshot, plan: &Plan) -> Result<usize, TestCaseError> {
    let moved: Vec<&caldera_model::Eviction> = plan
        .evictions
        .iter()
        .filter(|e| e.action == "consolidate")
        .collect();
    if moved.is_empty() {
        return Ok(0);
    }
    let holds: Vec<&MoveHold> = plan.move_holds.iter().flat_map(|w| &w.holds).collect();
    // Every moved pod has a held place, and its controller re-creates it.
    for e in &moved {
        let t = snap.tasks.iter().find(|t| t.name == e.pod.name).unwrap();
        prop_assert!(t.controller.is_some(), "{} has no controller", t.name);
        let waiting = snap.jobs.iter().find(|j| *j.id == *e.preemptor).unwrap();
        prop_assert!(
            t.priority <= waiting.priority,
            "{} of higher priority moved",
            t.name
        );
        prop_assert!(
            holds.iter().any(|h| h.pod == e.pod.name),
            "{} has no held place",
            e.pod.name
        );
    }
    // Once carried out: replacements on their held nodes and every waiting job the moves were
    // for on its nominated nodes all fit at once, nothing over-committed.
    let mut end = snap.clone();
    for e in &moved {
        let t = end
            .tasks
            .iter()
            .find(|t| t.name == e.pod.name)
            .unwrap()
            .clone();
        let n = end.nodes.iter().position(|x| *x.name == *e.node).unwrap();
        end.nodes[n].remove_pod(&t.request, &t.spec.host_ports);
        let h = holds.iter().find(|h| h.pod == e.pod.name).unwrap();
        prop_assert_ne!(&*h.node, &*e.node, "{} held where it was", e.pod.name);
        let n = end.nodes.iter().position(|x| *x.name == *h.node).unwrap();
        end.nodes[n].add_pod(&t.request, &t.spec.host_ports);
    }
    for nm in plan.nominations.iter().filter(|n| n.node.is_some()) {
        let t = end
            .tasks
            .iter()
            .find(|t| t.name == nm.pod.name)
            .unwrap()
            .clone();
        let node = nm.node.as_deref().unwrap();
        let n = end.nodes.iter().position(|x| &*x.name == node).unwrap();
        end.nodes[n].add_pod(&t.request, &t.spec.host_ports);
    }
    for b in &plan.binds {
        let t = end
            .tasks
            .iter()
            .find(|t| t.name == b.pod.name)
            .unwrap()
            .clone();
        let n = end.nodes.iter().position(|x| x.name == b.node).unwrap();
        end.nodes[n].add_pod(&t.request, &t.spec.host_ports);
    }
    for n in &end.nodes {
        prop_assert!(
            n.used.fits_in(&n.allocatable),
            "{} over-committed once moved: {} > {}",
            n.name,
            n.used,
            n.allocatable
        );
    }
    // Nothing moves for a job that could not then run: each preemptor is nominated whole.
    let preemptors: BTreeSet<&str> = moved.iter().map(|e| &*e.preemptor).collect();
    for p in preemptors {
        let job = snap.jobs.iter().find(|j| &*j.id == p).unwrap();
        let nominated = job
            .tasks
            .iter()
            .filter(|&&t| {
                plan.nominations
                    .iter()
                    .any(|n| n.pod.name == snap.tasks[t].name && n.node.is_some())
            })
            .count();
        prop_assert!(
            nominated as u32 >= job.min_member,
            "{} moved for, nominated {} of {}",
            p,
            nominated,
            job.min_member
        );
    }
    Ok(moved.len())
}

proptest! {
    // About one case in ten of the first property needs moves (measured: 5 of 49), the second
    // makes 1-6 moves in most cases (about 70 over 48 cases).
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn moves_have_held_places_and_let_the_waiting_job_run(
        nodes in 3usize..7,
        loads in prop::collection::vec(load(), 8..30),
        gangs in prop::collection::vec(2i64..5, 1..3),
    ) {
        let snap = random_cluster(nodes, &loads, &gangs);
        let plan = run(&snap);
        prop_assert_eq!(&plan, &run(&snap), "the plan is deterministic");
        check_plan(&snap, &plan)?;
    }

    /// 50 sessions of random arrivals and departures: each move's replacement lands on its
    /// held node, no pod is moved twice within minRuntime, and the moves are bounded by the
    /// gangs they let run (a consolidation never undoes another).
    #[test]
    fn fifty_sessions_of_arrivals_and_departures_do_not_thrash(
        nodes in 3usize..6,
        loads in prop::collection::vec(load(), 8..24),
        events in prop::collection::vec((0u8..4, 2i64..6, 0usize..64), 50),
    ) {
        let mut snap = random_cluster(nodes, &loads, &[]);
        let mut t = now();
        let mut moves = 0usize;
        let mut moved_for: BTreeSet<String> = BTreeSet::new();
        // Per pod lineage (a pod and its replacements): the last move, from and to, and for whom.
        let mut history: BTreeMap<String, (String, String, String)> = BTreeMap::new();
        // Gangs that were bound at some point.
        let mut ran: BTreeSet<String> = BTreeSet::new();
        let config = caldera_config::parse(CONFIG, None).expect("test config parses");
        let sched = scheduler(&config).expect("scheduler builds");
        for (step, (kind, size, pick)) in events.into_iter().enumerate() {
            t = t.plus_millis(60_000);
            match kind {
                // A one-node gang arrives.
                0 => {
                    let name = format!("s{step}");
                    snap = add_gang(&snap, &name, size, t);
                }
                // A running pod leaves.
                1 => {
                    let running: Vec<usize> = (0..snap.tasks.len())
                        .filter(|&i| snap.tasks[i].status == TaskStatus::Running)
                        .collect();
                    if !running.is_empty() {
                        snap = remove_task(&snap, running[pick % running.len()]);
                    }
                }
                _ => {}
            }
            let plan = sched.run(&snap, t).plan;
            let n = check_plan(&snap, &plan)?;
            for e in plan.evictions.iter().filter(|e| e.action == "consolidate") {
                // A replacement starts its runtime afresh: no pod moves twice within it.
                let task = snap.tasks.iter().find(|x| x.name == e.pod.name).unwrap();
                prop_assert!(t.millis_since(task.started) >= 600_000,
                    "{} moved after running {} ms only", e.pod.name, t.millis_since(task.started));
                // Never back onto the node it left for a gang that has not started yet.
                let lineage = e.pod.name.trim_end_matches("-new").to_string();
                let to = plan.move_holds.iter().flat_map(|w| &w.holds)
                    .find(|h| h.pod == e.pod.name).map(|h| h.node.to_string()).unwrap_or_default();
                if let Some((from, _, gang)) = history.get(&lineage) {
                    let started = ran.contains(gang);
                    prop_assert!(started || *from != to,
                        "{} moved back to {} while {} still waits for the room it left", e.pod.name, to, gang);
                }
                history.insert(lineage, (e.node.to_string(), to, e.preemptor.to_string()));
                moved_for.insert(e.preemptor.to_string());
            }
            moves += n;
            ran.extend(plan.binds.iter().map(|b| b.job.to_string()));
            snap = carry_out(&snap, &plan, t);
        }
        // Each move was for a gang that could then run; at most maxPods moves per gang.
        prop_assert!(moves <= moved_for.len() * 8, "{} moves for {} gangs", moves, moved_for.len());

    }
}

fn add_gang(snap: &Snapshot, name: &str, size: i64, t: Time) -> Snapshot {
    let extra = Cluster::new().queue(queue("default")).group(
        podgroup("ns", name)
            .min_member(size as u32)
            .topology(true, "kubernetes.io/hostname"),
    );
    let mut extra = extra;
    for m in 0..size {
        extra = extra.pod(pod("ns", &format!("{name}-{m}")).group(name).gpus(1));
    }
    merge(snap, extra, t)
}

/// `snap` with the jobs and pods of `extra` added, created at `t`.
fn merge(snap: &Snapshot, extra: Cluster, t: Time) -> Snapshot {
    let mut next = snap.clone();
    let add = extra.snapshot();
    let base = next.tasks.len();
    for j in add.jobs {
        let mut j = j;
        j.created = t;
        j.tasks = j.tasks.iter().map(|x| x + base).collect();
        let ji = next.jobs.len();
        for &ti in &j.tasks {
            let mut task = add.tasks[ti - base].clone();
            task.job = ji;
            task.created = t;
            next.tasks.push(task);
        }
        next.jobs.push(j);
    }
    resort(next)
}

/// Re-sorts jobs by id (the snapshot's invariant) and re-points tasks.
fn resort(mut snap: Snapshot) -> Snapshot {
    let mut order: Vec<usize> = (0..snap.jobs.len()).collect();
    order.sort_by(|&a, &b| snap.jobs[a].id.cmp(&snap.jobs[b].id));
    let mut new_index = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let jobs: Vec<_> = order.iter().map(|&o| snap.jobs[o].clone()).collect();
    snap.jobs = jobs;
    for task in &mut snap.tasks {
        task.job = new_index[task.job];
    }
    snap.check().map_err(|e| e.to_string()).unwrap();
    snap
}

fn remove_task(snap: &Snapshot, i: usize) -> Snapshot {
    let mut next = snap.clone();
    let t = next.tasks[i].clone();
    if let Some(node) = t.node.as_deref() {
        let n = next.nodes.iter().position(|x| &*x.name == node).unwrap();
        next.nodes[n].remove_pod(&t.request, &t.spec.host_ports);
    }
    // Finished: it stays a member but holds nothing.
    next.tasks[i].status = TaskStatus::Succeeded;
    next
}

/// The plan carried out and the cluster a minute on: binds run, moved pods gone and
/// re-created pending, holds and nominations written.
fn carry_out(snap: &Snapshot, plan: &Plan, t: Time) -> Snapshot {
    let mut next = after(snap, plan);
    for task in &mut next.tasks {
        if task.status == TaskStatus::Bound {
            task.status = TaskStatus::Running;
        }
        if task.status == TaskStatus::Pending && task.created == now() {
            task.created = t;
            task.started = t;
        }
    }
    next
}
