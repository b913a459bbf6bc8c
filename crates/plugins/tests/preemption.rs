//! Property tests of preempt and reclaim over random full clusters: no gang is left with
//! 0 < running members < minMember by an eviction, every victim has lower priority than its
//! preemptor in the same queue (preempt) or belongs to another, reclaimable queue (reclaim),
//! no node is over-committed counting terminating pods, and the plan is deterministic.

use caldera_model::{Plan, Snapshot, TaskStatus, Time};
use caldera_plugins::scheduler;
use caldera_testkit::builders::{node, pod, podgroup, queue, Cluster};
use proptest::prelude::*;
use std::collections::BTreeMap;

const CONFIG: &str = r#"
actions: "enqueue, allocate, preempt, reclaim, backfill"
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

#[derive(Debug, Clone)]
struct Running {
    members: usize,
    min: u32,
    gpus: i64,
    priority: i32,
    queue: u8,
}

#[derive(Debug, Clone)]
struct Waiting {
    members: usize,
    gpus: i64,
    priority: i32,
    queue: u8,
    one_node: bool,
}

fn running() -> impl Strategy<Value = Running> {
    (1usize..5, 1i64..5, 0i32..3, 0u8..2, 0u32..5).prop_map(
        |(members, gpus, priority, queue, m)| Running {
            members,
            min: m.clamp(1, members as u32),
            gpus,
            priority,
            queue,
        },
    )
}

fn waiting() -> impl Strategy<Value = Waiting> {
    (
        1usize..5,
        1i64..5,
        1i32..5,
        0u8..3,
        prop::bool::weighted(0.3),
    )
        .prop_map(|(members, gpus, priority, queue, one_node)| Waiting {
            members,
            gpus,
            priority,
            queue,
            one_node,
        })
}

/// A cluster of 8-GPU nodes filled (first fit) with the running gangs, plus waiting gangs.
fn cluster(nodes: usize, run: &[Running], wait: &[Waiting]) -> Snapshot {
    let mut c = Cluster::new()
        .queue(queue("q0"))
        .queue(queue("q1"))
        .queue(queue("q2"));
    let mut free: Vec<i64> = vec![8; nodes];
    for i in 0..nodes {
        c = c.node(node(&format!("n{i}")).gpus(8).cpu(64));
    }
    for (g, r) in run.iter().enumerate() {
        let name = format!("run{g}");
        // Place the whole gang first fit, or skip it.
        let mut spots = Vec::new();
        let mut left = free.clone();
        for _ in 0..r.members {
            match (0..nodes).find(|&n| left[n] >= r.gpus) {
                Some(n) => {
                    left[n] -= r.gpus;
                    spots.push(n);
                }
                None => break,
            }
        }
        if spots.len() < r.members {
            continue;
        }
        free = left;
        c = c.group(
            podgroup("ns", &name)
                .min_member(r.min)
                .priority(r.priority)
                .queue(&format!("q{}", r.queue)),
        );
        for (m, n) in spots.into_iter().enumerate() {
            c = c.pod(
                pod("ns", &format!("{name}-{m}"))
                    .group(&name)
                    .gpus(r.gpus)
                    .priority(r.priority)
                    .on(&format!("n{n}"))
                    .running()
                    .created(m as i64),
            );
        }
    }
    for (g, w) in wait.iter().enumerate() {
        let name = format!("wait{g}");
        let mut pg = podgroup("ns", &name)
            .min_member(w.members as u32)
            .priority(w.priority)
            .queue(&format!("q{}", w.queue));
        if w.one_node {
            pg = pg.topology(true, "kubernetes.io/hostname");
        }
        c = c.group(pg);
        for m in 0..w.members {
            c = c.pod(
                pod("ns", &format!("{name}-{m}"))
                    .group(&name)
                    .gpus(w.gpus)
                    .priority(w.priority)
                    .created(100 + m as i64),
            );
        }
    }
    c.snapshot()
}

fn run(snap: &Snapshot) -> Plan {
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    let sched = scheduler(&config).expect("scheduler builds");
    sched.run(snap, Time::from_secs(1_000)).plan
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn evictions_keep_gangs_whole_pick_lower_or_over_share_and_overcommit_nothing(
        nodes in 2usize..7,
        run_specs in prop::collection::vec(running(), 1..14),
        wait_specs in prop::collection::vec(waiting(), 1..4),
    ) {
        let snap = cluster(nodes, &run_specs, &wait_specs);
        let plan = run(&snap);
        prop_assert_eq!(&plan, &run(&snap), "the plan is deterministic");

        let job_of = |id: &str| snap.jobs.iter().position(|j| &*j.id == id).unwrap();
        let mut evicted: BTreeMap<usize, usize> = BTreeMap::new();
        for e in &plan.evictions {
            let victim = job_of(&e.job);
            let preemptor = job_of(&e.preemptor);
            *evicted.entry(victim).or_insert(0) += 1;
            let (v, p) = (&snap.jobs[victim], &snap.jobs[preemptor]);
            match e.action {
                "preempt" => {
                    prop_assert!(v.priority < p.priority, "{} evicted for {} of no higher priority", v.id, p.id);
                    prop_assert_eq!(&v.queue, &p.queue);
                }
                "reclaim" => {
                    prop_assert_ne!(&v.queue, &p.queue);
                }
                other => prop_assert!(false, "unknown action {}", other),
            }
        }
        // No gang is left with 0 < running < minMember by an eviction.
        for (victim, n) in &evicted {
            let job = &snap.jobs[*victim];
            let running = job
                .tasks
                .iter()
                .filter(|&&t| matches!(snap.tasks[t].status, TaskStatus::Bound | TaskStatus::Running))
                .count();
            let left = running - n;
            prop_assert!(left == 0 || left >= job.min_member as usize,
                "{} left with {} of minMember {}", job.id, left, job.min_member);
        }
        // Terminating victims still hold their nodes: binds of this session must fit beside them.
        let mut after = snap.clone();
        after.record(&plan);
        for n in &after.nodes {
            prop_assert!(n.used.fits_in(&n.allocatable), "node {} over-committed: {} > {}", n.name, n.used, n.allocatable);
        }
        // A preemptor is nominated, never bound in the session that evicts for it.
        for e in &plan.evictions {
            prop_assert!(plan.binds.iter().all(|b| b.job != e.preemptor));
        }
    }
}

#[test]
fn explain_names_the_victims_and_why() {
    let snap = cluster(
        1,
        &[Running {
            members: 2,
            min: 2,
            gpus: 4,
            priority: 0,
            queue: 0,
        }],
        &[Waiting {
            members: 1,
            gpus: 8,
            priority: 3,
            queue: 0,
            one_node: false,
        }],
    );
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    let sched = scheduler(&config).expect("scheduler builds");
    let e = sched
        .explain(&snap, Time::from_secs(1_000), "ns/wait0")
        .expect("the job exists");
    let text = e.to_string();
    assert!(
        text.contains("victims: preempt evicts ns/run0 (2 pods, the whole gang, priority 0"),
        "{text}"
    );
    assert!(text.contains("evict ns/run0-0 on n0"), "{text}");
    assert!(
        text.contains("room held while victims terminate on: n0"),
        "{text}"
    );
    let plan = sched.run(&snap, Time::from_secs(1_000)).plan;
    assert_eq!(plan.evictions.len(), 2);
    assert_eq!(plan.nominations.len(), 1);
    assert_eq!(plan.nominations[0].node.as_deref(), Some("n0"));
    assert!(plan.events.iter().any(
        |e| e.reason == "Preempted" && e.message.contains("preempted by ns/wait0 (priority 3)")
    ));
}

/// The room held for one preemptor (its victims still terminating on the node) over-commits
/// that node until they are gone; a later preemptor that can make room elsewhere still does
/// in the same session (the over-committed node counts as having nothing free, not less
/// than nothing).
#[test]
fn room_held_for_one_preemptor_does_not_stop_the_next() {
    let running = |_| Running {
        members: 4,
        min: 4,
        gpus: 2,
        priority: 0,
        queue: 0,
    };
    let waiting = |_| Waiting {
        members: 2,
        gpus: 4,
        priority: 3,
        queue: 0,
        one_node: false,
    };
    let snap = cluster(
        2,
        &(0..2).map(running).collect::<Vec<_>>(),
        &(0..2).map(waiting).collect::<Vec<_>>(),
    );
    let plan = run(&snap);
    let mut served: Vec<&str> = plan.evictions.iter().map(|e| &*e.preemptor).collect();
    served.dedup();
    assert_eq!(served, ["ns/wait0", "ns/wait1"], "{:?}", plan.evictions);
    assert_eq!(plan.evictions.len(), 8, "both running gangs go, whole");
    let nominated: Vec<(&str, Option<&str>)> = plan
        .nominations
        .iter()
        .map(|n| (&*n.pod.name, n.node.as_deref()))
        .collect();
    assert_eq!(
        nominated,
        [
            ("wait0-0", Some("n0")),
            ("wait0-1", Some("n0")),
            ("wait1-0", Some("n1")),
            ("wait1-1", Some("n1"))
        ]
    );
}

/// A cluster where room is held on `n0` (8 GPUs, its victims gone) for `mid` (priority 3, one
/// 8-GPU member nominated there), `n1` is full with a low-priority gang, and a job of
/// priority `other` needing 8 GPUs arrives.
fn held_room_and(other: i32) -> Snapshot {
    let mut c = Cluster::new()
        .queue(queue("q0"))
        .node(node("n0").gpus(8).cpu(64))
        .node(node("n1").gpus(8).cpu(64))
        .group(podgroup("ns", "low").min_member(1).priority(0).queue("q0"))
        .pod(
            pod("ns", "low-0")
                .group("low")
                .gpus(8)
                .priority(0)
                .on("n1")
                .running(),
        );
    for (name, priority, created) in [("mid", 3, 10), ("other", other, 20)] {
        c = c
            .group(
                podgroup("ns", name)
                    .min_member(1)
                    .priority(priority)
                    .queue("q0")
                    .created(created),
            )
            .pod(
                pod("ns", &format!("{name}-0"))
                    .group(name)
                    .gpus(8)
                    .priority(priority)
                    .created(created),
            );
    }
    let mut snap = c.snapshot();
    let mid = snap
        .tasks
        .iter()
        .position(|t| &*t.name == "mid-0")
        .expect("mid-0 exists");
    snap.tasks[mid].nominated = Some("n0".into());
    snap
}

fn binds(plan: &Plan) -> Vec<(&str, &str)> {
    plan.binds
        .iter()
        .map(|b| (&*b.pod.name, &*b.node))
        .collect()
}

fn nominations(plan: &Plan) -> Vec<(&str, Option<&str>)> {
    plan.nominations
        .iter()
        .map(|n| (&*n.pod.name, n.node.as_deref()))
        .collect()
}

/// Room held for a nominated preemptor is held from jobs of lower or equal priority only: a
/// job of strictly higher priority takes it (kube-scheduler adds only nominated pods of
/// greater or equal priority when it filters a pod). The displaced preemptor loses its
/// nomination and is planned again in the same session: it preempts the low gang on `n1`.
#[test]
fn held_room_goes_to_a_job_of_higher_priority_and_the_holder_is_planned_again() {
    let snap = held_room_and(5);
    let plan = run(&snap);
    assert_eq!(binds(&plan), [("other-0", "n0")], "{plan:#?}");
    let evicted: Vec<(&str, &str)> = plan
        .evictions
        .iter()
        .map(|e| (&*e.pod.name, &*e.preemptor))
        .collect();
    assert_eq!(evicted, [("low-0", "ns/mid")]);
    assert_eq!(nominations(&plan), [("mid-0", Some("n1"))]);
    // Nothing is over-committed once the evicted pod is gone.
    let mut after = snap.clone();
    after.record(&plan);
    for n in &after.nodes {
        assert!(n.used.fits_in(&n.allocatable), "{} over-committed", n.name);
    }
}

/// A job of equal (or lower) priority does not take the held room: the holder binds there,
/// and the other job preempts the low gang instead.
#[test]
fn held_room_is_kept_from_a_job_of_equal_or_lower_priority() {
    for other in [3, 2] {
        let plan = run(&held_room_and(other));
        assert_eq!(binds(&plan), [("mid-0", "n0")], "{plan:#?}");
        let evicted: Vec<(&str, &str)> = plan
            .evictions
            .iter()
            .map(|e| (&*e.pod.name, &*e.preemptor))
            .collect();
        assert_eq!(evicted, [("low-0", "ns/other")]);
        assert_eq!(nominations(&plan), [("other-0", Some("n1"))]);
    }
}

/// An elastic gang (3 members, minimum 2) runs two members; allocate places its third in the
/// session where a higher-priority gang needs the room. Preempt must not take the two bound
/// members as "the whole gang": the third would run alone below the minimum (found by the
/// replay's property test). Only the surplus member may go this session, which does not make
/// room, so nothing is evicted; the gang is a whole victim again once its bind has landed.
#[test]
fn a_gang_placed_in_this_session_is_not_taken_as_a_whole() {
    let mut c = Cluster::new()
        .queue(queue("q0"))
        .node(node("n0").gpus(8).cpu(64))
        .node(node("n1").gpus(4).cpu(64))
        .group(
            podgroup("ns", "low")
                .min_member(2)
                .priority(0)
                .queue("q0")
                .created(0),
        )
        .group(
            podgroup("ns", "high")
                .min_member(2)
                .priority(5)
                .queue("q0")
                .created(10),
        );
    for (i, on) in [Some("n0"), Some("n1"), None].into_iter().enumerate() {
        let mut p = pod("ns", &format!("low-{i}"))
            .group("low")
            .gpus(3)
            .priority(0);
        if let Some(n) = on {
            p = p.on(n).running();
        }
        c = c.pod(p);
    }
    for i in 0..2 {
        c = c.pod(
            pod("ns", &format!("high-{i}"))
                .group("high")
                .gpus(4)
                .priority(5)
                .created(10),
        );
    }
    let snap = c.snapshot();
    let plan = run(&snap);
    assert_eq!(binds(&plan), [("low-2", "n0")], "{plan:?}");
    let evicted: Vec<&str> = plan.evictions.iter().map(|e| &*e.pod.name).collect();
    assert!(evicted.is_empty(), "evicted {evicted:?} while low-2 binds");

    // The next session sees low-2 bound: the gang, all three members, is one victim.
    let mut next = snap.clone();
    next.record(&plan);
    let low2 = next
        .tasks
        .iter()
        .position(|t| &*t.name == "low-2")
        .expect("low-2");
    next.tasks[low2].status = TaskStatus::Running;
    let plan = run(&next);
    let mut evicted: Vec<&str> = plan.evictions.iter().map(|e| &*e.pod.name).collect();
    evicted.sort();
    assert_eq!(evicted, ["low-0", "low-1", "low-2"], "{plan:?}");
}

/// A preemptor kept off the only node by a lower-priority pod's required anti-affinity (and by
/// nothing else: the node has room) evicts that pod, as kube-scheduler's preemption does: an
/// eviction search takes a victim's inter-pod terms off its node with it. Before, the victim
/// still counted while the search took it off, so no victim set could help and the preemptor
/// waited for ever.
#[test]
fn a_victims_anti_affinity_goes_with_it_in_the_search() {
    let snap = Cluster::new()
        .queue(queue("q0"))
        .node(
            node("n0")
                .gpus(8)
                .cpu(64)
                .label("kubernetes.io/hostname", "n0"),
        )
        .group(podgroup("ns", "low").min_member(1).priority(0).queue("q0"))
        .pod(
            pod("ns", "low-0")
                .group("low")
                .gpus(1)
                .priority(0)
                .label("app", "low")
                .anti_affinity("app", "high", "kubernetes.io/hostname")
                .on("n0")
                .running(),
        )
        .group(
            podgroup("ns", "high")
                .min_member(1)
                .priority(5)
                .queue("q0")
                .created(10),
        )
        .pod(
            pod("ns", "high-0")
                .group("high")
                .gpus(1)
                .priority(5)
                .label("app", "high")
                .created(10),
        )
        .snapshot();
    let plan = run(&snap);
    let evicted: Vec<&str> = plan.evictions.iter().map(|e| &*e.pod.name).collect();
    assert_eq!(evicted, ["low-0"], "{plan:?}");
    assert_eq!(nominations(&plan), [("high-0", Some("n0"))]);
    assert!(
        plan.binds.is_empty(),
        "the preemptor waits for its victim to go"
    );
}
