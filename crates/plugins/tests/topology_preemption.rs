//! Preemption under a hard network topology (issue 19): after any session, the victims of a
//! hard-topology preemptor lie in one domain of a tier its rule allows — the domain its
//! members are nominated to. The one exception is a victim gang spanning domains: it goes
//! whole (part of a gang is useless), so its members outside the domain go too, but only
//! when it has a member inside; a unit with no member there is never taken.

use caldera_model::{Snapshot, Time, TopologyTree};
use caldera_plugins::scheduler;
use caldera_testkit::builders::{hypernode, node, pod, podgroup, queue, Cluster};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const CONFIG: &str = r#"
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
  - name: network-topology-aware
"#;

/// A low-priority running gang: its members' GPUs, its rack, whether it alternates between
/// that rack and the next, its priority and whether it is elastic (`minMember` 1).
#[derive(Debug, Clone)]
struct Low {
    members: Vec<i64>,
    rack: usize,
    spans: bool,
    priority: i32,
    elastic: bool,
}

/// A pending high-priority gang with a hard rule of tier `tier`.
#[derive(Debug, Clone)]
struct High {
    members: usize,
    gpus: i64,
    tier: u32,
}

fn low() -> impl Strategy<Value = Low> {
    (
        prop::collection::vec(prop::sample::select(vec![2i64, 4, 8]), 1..=3),
        0usize..4,
        prop::bool::weighted(0.25),
        prop::sample::select(vec![10, 20, 30]),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(members, rack, spans, priority, elastic)| Low {
            members,
            rack,
            spans,
            priority,
            elastic,
        })
}

fn high() -> impl Strategy<Value = High> {
    (1usize..=3, prop::sample::select(vec![4i64, 8]), 1u32..=2).prop_map(|(members, gpus, tier)| {
        High {
            members,
            gpus,
            tier,
        }
    })
}

/// Racks of `per_rack` 8-GPU nodes (tier 1), two racks to a spine (tier 2), filled first fit
/// by the low gangs (members that fit nowhere in their racks are left out), then the high
/// gangs, pending.
fn cluster(racks: usize, per_rack: usize, lows: &[Low], highs: &[High]) -> Snapshot {
    let mut c = Cluster::new().queue(queue("default"));
    let name = |r: usize, i: usize| format!("r{r}-n{i}");
    let mut free = vec![vec![8i64; per_rack]; racks];
    for r in 0..racks {
        for i in 0..per_rack {
            c = c.node(node(&name(r, i)).gpus(8).cpu(64));
        }
        let members: Vec<String> = (0..per_rack).map(|i| name(r, i)).collect();
        c = c.hypernode(
            hypernode(&format!("rack-{r}"), 1).nodes(members.iter().map(String::as_str)),
        );
    }
    for s in 0..racks.div_ceil(2) {
        let children: Vec<String> = (2 * s..(2 * s + 2).min(racks))
            .map(|r| format!("rack-{r}"))
            .collect();
        c = c.hypernode(
            hypernode(&format!("spine-{s}"), 2).children(children.iter().map(String::as_str)),
        );
    }
    for (g, l) in lows.iter().enumerate() {
        let gang = format!("low-{g}");
        let mut placed = Vec::new();
        for (i, &gpus) in l.members.iter().enumerate() {
            let r = if l.spans {
                (l.rack + i) % racks
            } else {
                l.rack % racks
            };
            if let Some(n) = (0..per_rack).find(|&n| free[r][n] >= gpus) {
                free[r][n] -= gpus;
                placed.push((gpus, name(r, n)));
            }
        }
        if placed.is_empty() {
            continue;
        }
        let min = if l.elastic { 1 } else { placed.len() as u32 };
        c = c.group(
            podgroup("ns", &gang)
                .min_member(min)
                .priority(l.priority)
                .queue("default"),
        );
        for (i, (gpus, on)) in placed.into_iter().enumerate() {
            c = c.pod(
                pod("ns", &format!("{gang}-{i}"))
                    .group(&gang)
                    .gpus(gpus)
                    .priority(l.priority)
                    .on(&on)
                    .running()
                    .created(g as i64),
            );
        }
    }
    for (g, h) in highs.iter().enumerate() {
        let gang = format!("high-{g}");
        c = c.group(
            podgroup("ns", &gang)
                .min_member(h.members as u32)
                .priority(1000)
                .queue("default")
                .network_topology(true, h.tier)
                .created(100 + g as i64),
        );
        for i in 0..h.members {
            c = c.pod(
                pod("ns", &format!("{gang}-{i}"))
                    .group(&gang)
                    .gpus(h.gpus)
                    .priority(1000)
                    .created(100 + g as i64),
            );
        }
    }
    c.snapshot()
}

/// Checks one session's plan; returns how many preemptors evicted (for coverage).
fn check(snap: &Snapshot, highs: &[High]) -> Result<usize, TestCaseError> {
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    let sched = scheduler(&config).expect("scheduler builds");
    let plan = sched.run(snap, Time::from_secs(1_000)).plan;
    let tree: &TopologyTree = &snap.topology;
    let node_of = |name: &str| snap.node_index(name).map(|n| n as u32);
    // Where each task's job has members now, by job name.
    let mut members_on: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    for t in &snap.tasks {
        if let Some(n) = t.node.as_deref().and_then(node_of) {
            let job = &snap.jobs[t.job];
            members_on
                .entry(format!("{}/{}", job.namespace, job.name))
                .or_default()
                .insert(n);
        }
    }
    let mut evicting = 0;
    for (g, h) in highs.iter().enumerate() {
        let gang = format!("ns/high-{g}");
        let evictions: Vec<_> = plan
            .evictions
            .iter()
            .filter(|e| *e.preemptor == *gang)
            .collect();
        let nominated: Vec<u32> = plan
            .nominations
            .iter()
            .filter(|n| n.pod.name.starts_with(&format!("high-{g}-")))
            .filter_map(|n| n.node.as_deref().and_then(node_of))
            .collect();
        if evictions.is_empty() {
            continue;
        }
        evicting += 1;
        prop_assert_eq!(
            nominated.len(),
            h.members,
            "{} evicted {:?} but nominated {:?}",
            gang,
            evictions.iter().map(|e| &e.pod.name).collect::<Vec<_>>(),
            nominated
        );
        let mut held = nominated.clone();
        held.sort_unstable();
        held.dedup();
        let domain = tree.smallest_holding(&held);
        prop_assert!(
            domain.is_some_and(|d| tree.domains[d as usize].tier <= h.tier),
            "{} nominated to {:?}, in no domain of tier {} or lower",
            gang,
            held,
            h.tier
        );
        let Some(d) = domain else { continue };
        // The domain of the allowed tier around the nominations (they may sit in a rack of a
        // spine the rule allows).
        let within = tree
            .ancestors(d)
            .into_iter()
            .take_while(|&a| tree.domains[a as usize].tier <= h.tier)
            .last()
            .unwrap_or(d);
        let inside = |n: u32| {
            tree.domains[within as usize]
                .nodes
                .binary_search(&n)
                .is_ok()
        };
        for e in &evictions {
            let n = node_of(&e.node).expect("evicted from a known node");
            if inside(n) {
                continue;
            }
            let has_member_inside = members_on
                .get(&*e.job)
                .is_some_and(|nodes| nodes.iter().any(|&m| inside(m)));
            prop_assert!(
                has_member_inside,
                "{} (victim gang {}) evicted from {} outside {}, and its gang has no member there",
                e.pod.name,
                e.job,
                e.node,
                tree.domains[within as usize].name
            );
        }
    }
    Ok(evicting)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn hard_topology_preemptors_take_victims_in_one_allowed_domain(
        racks in 2usize..=4,
        per_rack in 2usize..=3,
        lows in prop::collection::vec(low(), 2..12),
        highs in prop::collection::vec(high(), 1..=2),
    ) {
        let snap = cluster(racks, per_rack, &lows, &highs);
        check(&snap, &highs)?;
    }
}

/// The property's clusters do make hard-topology preemptors evict (so it checks something).
#[test]
fn full_racks_make_a_hard_preemptor_evict() {
    let lows: Vec<Low> = (0..6)
        .map(|r| Low {
            members: vec![8, 8],
            rack: r % 3,
            spans: r == 1,
            priority: 10 + r as i32,
            elastic: false,
        })
        .collect();
    let highs = vec![High {
        members: 2,
        gpus: 8,
        tier: 1,
    }];
    let snap = cluster(3, 2, &lows, &highs);
    assert_eq!(check(&snap, &highs).expect("victims in one rack"), 1);
}

/// Placements are counted by the tier of the domain each gang got (the per-tier metric).
#[test]
fn placements_are_counted_by_the_tier_of_their_domain() {
    let highs = [
        High {
            members: 2,
            gpus: 8,
            tier: 1,
        },
        High {
            members: 4,
            gpus: 8,
            tier: 2,
        },
    ];
    // Two racks of two empty 8-GPU nodes under one spine: a gang of 2x8 fits a rack (tier
    // 1); one of 4x8 needs the spine (tier 2).
    let snap = cluster(2, 2, &[], &highs[..1]);
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    let sched = scheduler(&config).expect("scheduler builds");
    let stats = sched.run(&snap, Time::from_secs(1_000)).stats;
    assert_eq!(
        stats.topology_placements,
        BTreeMap::from([("1".to_string(), 1)])
    );
    let snap = cluster(2, 2, &[], &highs[1..]);
    let stats = sched.run(&snap, Time::from_secs(1_000)).stats;
    assert_eq!(
        stats.topology_placements,
        BTreeMap::from([("2".to_string(), 1)])
    );
}
