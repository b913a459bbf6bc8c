//! Property tests of the core's invariants over random clusters and workloads: gangs are bound
//! all or nothing, no node is over-committed, every bind passes every predicate, plans are
//! deterministic, a discarded statement leaves the session unchanged, and a queue never
//! exceeds its capability.

use caldera_config::SchedulerConfig;
use caldera_model::{Snapshot, TaintEffect, Time};
use caldera_plugins::predicates::{dynamic_check, static_check};
use caldera_plugins::scheduler;
use caldera_session::session::Statement;
use caldera_testkit::builders::{hypernode, node, pod, podgroup, queue, Cluster, PodBuilder, GPU};
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Debug, Clone)]
struct NodeSpec {
    gpus: i64,
    cpu: i64,
    tainted: bool,
    cordoned: bool,
    zone: u8,
    busy_gpus: i64,
}

#[derive(Debug, Clone)]
struct GroupSpec {
    min: u32,
    members: usize,
    gpus: i64,
    cpu_milli: i64,
    queue: u8,
    priority: i32,
    gated: usize,
    /// 0: none; 1/2: `spec.topology` required/preferred over zones; 3/4: hard
    /// `networkTopology` up to tier 1/2 (racks of two nodes, spines of two racks); 5: soft.
    topology: u8,
    tolerate: bool,
    zone: Option<u8>,
    min_gpus: Option<i64>,
    /// Inter-pod constraint of the members (see `constrain`).
    interpod: u8,
    /// 0: no sub-groups; else members split into two sub-groups by the label `part`
    /// (alternating): 1: subGroupSize 2, hard up to tier 1; 2: subGroupSize 1,
    /// minSubGroups 2, hard up to tier 1; 3: subGroupSize 2, minSubGroups 1, hard up to
    /// tier 2; 4: subGroupSize 2, soft.
    sub_groups: u8,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        prop_oneof![Just(0i64), Just(4), Just(8)],
        prop_oneof![Just(8i64), Just(64)],
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.1),
        0u8..3,
        0i64..6,
    )
        .prop_map(|(gpus, cpu, tainted, cordoned, zone, busy)| NodeSpec {
            gpus,
            cpu,
            tainted,
            cordoned,
            zone,
            busy_gpus: busy.min(gpus),
        })
}

fn group_spec() -> impl Strategy<Value = GroupSpec> {
    (
        (1u32..6, 1usize..7, 0i64..4, 0i64..6000),
        (0u8..3, 0i32..3, 0usize..2),
        (
            prop_oneof![Just(0u8), 1u8..6],
            prop::bool::weighted(0.3),
            prop_oneof![Just(None), (0u8..3).prop_map(Some)],
            prop_oneof![Just(None), (1i64..20).prop_map(Some)],
            prop_oneof![Just(0u8), 1u8..8],
        ),
        prop_oneof![Just(0u8), 1u8..5],
    )
        .prop_map(
            |(
                (min, members, gpus, cpu),
                (queue, priority, gated),
                (topology, tolerate, zone, min_gpus, interpod),
                sub_groups,
            )| {
                GroupSpec {
                    min,
                    members,
                    gpus,
                    cpu_milli: cpu,
                    queue,
                    priority: priority * 100,
                    gated,
                    topology,
                    tolerate,
                    zone,
                    min_gpus,
                    interpod,
                    sub_groups,
                }
            },
        )
}

fn cluster() -> impl Strategy<Value = Snapshot> {
    (
        prop::collection::vec(node_spec(), 1..7),
        prop::collection::vec(group_spec(), 1..7),
        prop::collection::vec((1u32..4, prop::option::of(1i64..12)), 3),
    )
        .prop_map(|(nodes, groups, queues)| {
            let mut c = Cluster::new();
            for (i, q) in queues.iter().enumerate() {
                let mut b = queue(&format!("q{i}")).weight(q.0);
                if let Some(cap) = q.1 {
                    b = b.capability_gpus(cap);
                }
                c = c.queue(b);
            }
            for (i, n) in nodes.iter().enumerate() {
                let name = format!("n{i}");
                let mut b = node(&name)
                    .gpus(n.gpus)
                    .cpu(n.cpu)
                    .label("kubernetes.io/hostname", &name)
                    .label("zone", &format!("z{}", n.zone));
                if n.tainted {
                    b = b.taint("dedicated", "x", TaintEffect::NoSchedule);
                }
                if n.cordoned {
                    b = b.unschedulable();
                }
                c = c.node(b);
                if n.busy_gpus > 0 {
                    // Some running pods carry labels members select, or anti-affinity of their own.
                    let mut busy = pod("ns", &format!("busy-{i}"))
                        .gpus(n.busy_gpus)
                        .on(&name)
                        .label("group", &format!("g{}", i % 3))
                        .foreign();
                    if n.busy_gpus % 3 == 0 {
                        busy = busy.anti_affinity("group", &format!("g{}", (i + 1) % 3), "zone");
                    }
                    c = c.pod(busy);
                }
            }
            // HyperNodes: racks of two nodes (tier 1) under spines of two racks (tier 2).
            for r in 0..nodes.len().div_ceil(2) {
                let members: Vec<String> = (2 * r..(2 * r + 2).min(nodes.len()))
                    .map(|i| format!("n{i}"))
                    .collect();
                c = c.hypernode(
                    hypernode(&format!("rack-{r}"), 1).nodes(members.iter().map(String::as_str)),
                );
            }
            for s in 0..nodes.len().div_ceil(4) {
                let racks: Vec<String> = (2 * s..(2 * s + 2).min(nodes.len().div_ceil(2)))
                    .map(|r| format!("rack-{r}"))
                    .collect();
                c = c.hypernode(
                    hypernode(&format!("spine-{s}"), 2).children(racks.iter().map(String::as_str)),
                );
            }
            for (i, g) in groups.iter().enumerate() {
                let name = format!("g{i}");
                let mut pg = podgroup("ns", &name)
                    .min_member(g.min)
                    .queue(&format!("q{}", g.queue))
                    .priority(g.priority)
                    .created(i as i64);
                pg = match g.topology {
                    1 => pg.topology(true, "zone"),
                    2 => pg.topology(false, "zone"),
                    3 => pg.network_topology(true, 1),
                    4 => pg.network_topology(true, 2),
                    5 => pg.network_topology(false, 1),
                    _ => pg,
                };
                if let Some(m) = g.min_gpus {
                    pg = pg.min_gpus(m);
                }
                pg = match g.sub_groups {
                    1 => pg.sub_groups("part", "part", 2, 0, Some((true, 1))),
                    2 => pg.sub_groups("part", "part", 1, 2, Some((true, 1))),
                    3 => pg.sub_groups("part", "part", 2, 1, Some((true, 2))),
                    4 => pg.sub_groups("part", "part", 2, 0, Some((false, 1))),
                    _ => pg,
                };
                c = c.group(pg);
                let g = g.clone();
                let group = name.clone();
                let member = std::cell::Cell::new(0usize);
                c = c.members("ns", &name, g.members, move |p| {
                    let part = member.replace(member.get() + 1) % 2;
                    let p = p
                        .gpus(g.gpus)
                        .cpu_milli(g.cpu_milli)
                        .created(i as i64)
                        .label("part", &format!("p{part}"));
                    let mut p = constrain(p.label("group", &group), &group, g.interpod);
                    if g.tolerate {
                        p = p.tolerate("dedicated");
                    }
                    if let Some(z) = g.zone {
                        p = p.selector("zone", &format!("z{z}"));
                    }
                    p
                });
                for k in 0..g.gated.min(g.members) {
                    c = c.pod(pod("ns", &format!("{name}-gated-{k}")).group(&name).gated());
                }
            }
            c.snapshot()
        })
}

/// Inter-pod constraints by number: none, one per node, one per zone, with its own group in a
/// zone, hard zone spread, soft zone spread, away from group g0's zone, near group g1.
fn constrain(p: PodBuilder, group: &str, kind: u8) -> PodBuilder {
    const HOST: &str = "kubernetes.io/hostname";
    match kind {
        1 => p.anti_affinity("group", group, HOST),
        2 => p.anti_affinity("group", group, "zone"),
        3 => p.pod_affinity("group", group, "zone"),
        4 => p.spread(1, "zone", "group", group, true),
        5 => p.spread(1, "zone", "group", group, false),
        6 => p.anti_affinity("group", "g0", "zone"),
        7 => p.pod_affinity("group", "g1", HOST),
        _ => p,
    }
}

fn run(s: &Snapshot) -> caldera_session::Outcome {
    scheduler(&SchedulerConfig::default())
        .expect("default config builds")
        .run(s, Time::from_secs(10))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn gangs_are_bound_all_or_nothing(s in cluster()) {
        let out = run(&s);
        let mut new: BTreeMap<&str, u32> = BTreeMap::new();
        for b in &out.plan.binds {
            *new.entry(&b.job).or_default() += 1;
        }
        for j in &s.jobs {
            let before = j.tasks.iter().filter(|&&t| s.tasks[t].status.is_ready()).count() as u32;
            let added = new.get(&*j.id).copied().unwrap_or(0);
            if added > 0 && before < j.min_member {
                prop_assert!(before + added >= j.min_member,
                    "job {} had {before}, got {added}, needs {}", j.id, j.min_member);
            }
        }
    }

    #[test]
    fn no_node_is_overcommitted_and_every_bind_passes_every_predicate(s in cluster()) {
        let out = run(&s);
        let mut nodes = s.nodes.clone();
        for b in &out.plan.binds {
            let t = s.tasks.iter().find(|t| t.namespace == b.pod.namespace && t.name == b.pod.name).unwrap();
            let i = s.node_index(&b.node).unwrap();
            prop_assert!(nodes[i].ready, "{} bound to NotReady {}", b.pod.name, b.node);
            prop_assert!(static_check(t, &nodes[i]).is_ok(), "{} on {}: {:?}", b.pod.name, b.node, static_check(t, &nodes[i]));
            prop_assert!(dynamic_check(t, &nodes[i]).is_ok());
            prop_assert!(t.request.fits_in(&nodes[i].idle()), "{} does not fit {}", b.pod.name, b.node);
            nodes[i].add_pod(&t.request, &t.spec.host_ports);
        }
        for n in &nodes {
            prop_assert!(n.used.fits_in(&n.allocatable), "{} over-committed", n.name);
        }
        let broken = caldera_model::check::interpod::check_binds(&s, &out.plan);
        prop_assert!(broken.is_empty(), "{broken:#?}");
    }

    #[test]
    fn sessions_back_to_back_keep_inter_pod_constraints(s in cluster()) {
        // Bound members of one session are existing pods for the next.
        let mut s = s;
        for _ in 0..2 {
            let out = run(&s);
            let broken = caldera_model::check::interpod::check_binds(&s, &out.plan);
            prop_assert!(broken.is_empty(), "{broken:#?}");
            s.record(&out.plan);
        }
    }

    #[test]
    fn hard_topology_gangs_lie_in_one_allowed_domain(s in cluster()) {
        // After each of two sessions back to back, every member holding a node of a gang with
        // a hard rule lies in one domain of an allowed tier (its earlier members included),
        // and every member of a sub-group with a hard rule in one domain of its allowed tier.
        let mut s = s;
        for _ in 0..2 {
            let out = run(&s);
            let broken = caldera_model::check::topology::check_binds(&s, &out.plan);
            prop_assert!(broken.is_empty(), "{broken:#?}");
            s.record(&out.plan);
            // minSubGroups is a gang over sub-groups: a job with any member bound has as many
            // full sub-groups as each policy asks (no member held a node before the first session).
            for j in &s.jobs {
                let holds = |t: &usize| s.tasks[*t].status.occupies_node();
                if j.sub_group_policies.is_empty() || !j.tasks.iter().any(holds) {
                    continue;
                }
                let members = j.tasks.iter().map(|&t| (t, &*s.tasks[t].labels));
                let groups = caldera_model::split_sub_groups(&j.sub_group_policies, members);
                for (p, policy) in j.sub_group_policies.iter().enumerate() {
                    let full = groups
                        .iter()
                        .filter(|g| g.policy as usize == p)
                        .filter(|g| g.tasks.iter().filter(|t| holds(t)).count() as u32 >= policy.size)
                        .count() as u32;
                    prop_assert!(full >= policy.min, "{}: {full} of {} sub-groups full", j.id, policy.min);
                }
            }
        }
    }

    #[test]
    fn the_same_input_gives_the_same_plan(s in cluster()) {
        prop_assert_eq!(run(&s).plan, run(&s).plan);
    }

    #[test]
    fn a_queue_never_exceeds_its_capability(s in cluster()) {
        let out = run(&s);
        for q in &s.queues {
            let Some(cap) = &q.capability else { continue };
            let mut gpus = 0;
            for t in &s.tasks {
                let in_queue = s.jobs[t.job].queue == q.name;
                if in_queue && caldera_session::state::holds_node(t) {
                    gpus += t.request.get(GPU);
                }
            }
            for b in &out.plan.binds {
                let t = s.tasks.iter().find(|t| t.namespace == b.pod.namespace && t.name == b.pod.name).unwrap();
                if s.jobs[t.job].queue == q.name {
                    gpus += t.request.get(GPU);
                }
            }
            prop_assert!(gpus <= cap.get(GPU), "queue {} holds {gpus} GPUs over capability {}", q.name, cap.get(GPU));
        }
    }

    #[test]
    fn a_discarded_statement_leaves_the_session_unchanged(s in cluster(), picks in prop::collection::vec((0usize..64, 0usize..16), 1..8)) {
        let sched = scheduler(&SchedulerConfig::default()).unwrap();
        let mut ssn = sched.open(&s, Time::from_secs(10));
        let before_state = ssn.state.clone();
        let before_plugins = format!("{:?}", ssn.slots);
        let mut stmt = Statement::new();
        for (t, n) in picks {
            if s.tasks.is_empty() || s.nodes.is_empty() { break; }
            let t = t % s.tasks.len();
            let n = n % s.nodes.len();
            if ssn.state.tasks[t].schedulable_pending() {
                ssn.allocate(&mut stmt, t, n);
            }
        }
        ssn.discard(stmt);
        prop_assert!(ssn.state == before_state, "state changed");
        prop_assert_eq!(format!("{:?}", ssn.slots), before_plugins);
    }
}
