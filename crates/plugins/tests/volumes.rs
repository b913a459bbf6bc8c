//! The volume binder in the scheduling core: bound volumes' node affinity, volumes chosen for
//! `WaitForFirstConsumer` claims (smallest that fits, never twice, given back on rollback),
//! provisioning within `allowedTopologies`, `ReadWriteOncePod`, CSI attach limits, and the
//! gang rule (volume writes first, members keep their nodes, binds once every claim is bound;
//! released after the bind timeout).

use caldera_config::SchedulerConfig;
use caldera_model::volume::{
    access, BIND_CONFLICT, MAX_VOLUME_COUNT, NODE_CONFLICT, RWOP_CONFLICT,
};
use caldera_model::{
    ClaimNeed, NodeAttach, Plan, Requirement, SelectorOp, SelectorTerm, Snapshot, TaskVolumes,
    Time, Volume, VolumeNeeds, VolumeWrite,
};
use caldera_plugins::scheduler;
use caldera_testkit::builders::{node, pod, podgroup, Cluster};
use std::sync::Arc;

const GI: i64 = 1 << 30;

fn run(snapshot: &Snapshot, secs: i64) -> Plan {
    scheduler(&SchedulerConfig::default())
        .expect("scheduler builds")
        .run(snapshot, Time::from_secs(secs))
        .plan
}

fn host(name: &str) -> SelectorTerm {
    SelectorTerm {
        expressions: vec![Requirement {
            key: "kubernetes.io/hostname".into(),
            op: SelectorOp::In,
            values: vec![name.into()],
        }],
        fields: vec![],
    }
}

fn zone(z: &str) -> SelectorTerm {
    SelectorTerm {
        expressions: vec![Requirement {
            key: "zone".into(),
            op: SelectorOp::In,
            values: vec![z.into()],
        }],
        fields: vec![],
    }
}

fn local_pv(name: &str, node: &str, gi: i64) -> Volume {
    Volume {
        name: name.into(),
        class: "local".into(),
        size: gi * GI,
        modes: access::RWO,
        block: false,
        labels: Default::default(),
        terms: Some(vec![host(node)]),
        claim_ref: None,
    }
}

fn claim(class: &str, gi: i64) -> ClaimNeed {
    ClaimNeed {
        class: class.into(),
        size: gi * GI,
        modes: access::RWO,
        block: false,
        selector: None,
        provision: None,
        driver: None,
        selected: None,
        prebound: None,
    }
}

/// Gives pod `name` the claims `needs` (named `data-<pod>`, ...), not bound.
fn mount(snap: &mut Snapshot, name: &str, needs: VolumeNeeds, all_bound: bool) {
    let t = snap
        .tasks
        .iter_mut()
        .find(|t| &*t.name == name)
        .expect("pod exists");
    let claims = (0..needs.claims.len())
        .map(|i| {
            let n: Arc<str> = format!("data{i}-{name}").into();
            (n.clone(), format!("uid-{n}").into())
        })
        .collect();
    let mut spec = (*t.spec).clone();
    spec.volumes = needs;
    t.spec = Arc::new(spec);
    t.volumes = Some(Arc::new(TaskVolumes {
        claims,
        all_bound,
        ..TaskVolumes::default()
    }));
}

fn unbound(claims: Vec<ClaimNeed>) -> VolumeNeeds {
    VolumeNeeds {
        claims,
        ..VolumeNeeds::default()
    }
}

fn nominated(plan: &Plan) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = plan
        .nominations
        .iter()
        .map(|n| {
            (
                n.pod.name.to_string(),
                n.node.as_deref().unwrap_or("-").to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn local_volume_pins_its_pod_and_is_prebound_before_any_bind() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8).label("kubernetes.io/hostname", "a"))
        .node(node("b").gpus(8).label("kubernetes.io/hostname", "b"))
        .pod(pod("default", "db-0").gpus(1))
        .snapshot();
    snap.volumes.volumes = vec![local_pv("pv-b", "b", 10)];
    mount(&mut snap, "db-0", unbound(vec![claim("local", 5)]), false);
    let plan = run(&snap, 1);
    assert!(plan.binds.is_empty(), "no bind before the claim is bound");
    assert_eq!(
        plan.volume_writes,
        vec![VolumeWrite::PreBind {
            volume: "pv-b".into(),
            namespace: "default".into(),
            claim: "data0-db-0".into(),
            uid: "uid-data0-db-0".into(),
        }]
    );
    assert_eq!(nominated(&plan), vec![("db-0".into(), "b".into())]);
}

#[test]
fn the_smallest_volume_that_fits_is_chosen_and_never_twice() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8).label("kubernetes.io/hostname", "a"))
        .group(podgroup("default", "g").min_member(2))
        .members("default", "g", 2, |p| p.gpus(1))
        .snapshot();
    snap.volumes.volumes = vec![
        local_pv("big", "a", 100),
        local_pv("medium", "a", 8),
        local_pv("small", "a", 5),
        local_pv("tiny", "a", 1),
    ];
    let names: Vec<String> = snap.tasks.iter().map(|t| t.name.to_string()).collect();
    for n in &names {
        mount(&mut snap, n, unbound(vec![claim("local", 4)]), false);
    }
    let plan = run(&snap, 1);
    let mut chosen: Vec<String> = plan
        .volume_writes
        .iter()
        .map(|w| match w {
            VolumeWrite::PreBind { volume, .. } => volume.to_string(),
            other => panic!("unexpected write {other:?}"),
        })
        .collect();
    chosen.sort();
    assert_eq!(
        chosen,
        vec!["medium", "small"],
        "4Gi claims: 5Gi first, then 8Gi; 1Gi and 100Gi never"
    );
    assert!(plan.binds.is_empty());
}

#[test]
fn a_gang_short_of_volumes_takes_none_and_says_why() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8).label("kubernetes.io/hostname", "a"))
        .node(node("b").gpus(8).label("kubernetes.io/hostname", "b"))
        .group(podgroup("default", "g").min_member(2))
        .members("default", "g", 2, |p| p.gpus(1))
        .pod(pod("default", "solo").gpus(1).created(5))
        .snapshot();
    snap.volumes.volumes = vec![local_pv("only", "b", 10)];
    let names: Vec<String> = snap.tasks.iter().map(|t| t.name.to_string()).collect();
    for n in &names {
        mount(&mut snap, n, unbound(vec![claim("local", 1)]), false);
    }
    let plan = run(&snap, 1);
    // The gang placed one member (taking the volume), failed the second, and gave the volume
    // back: the lone pod after it gets it.
    let writes: Vec<String> = plan.volume_writes.iter().map(|w| w.claim_key()).collect();
    assert_eq!(writes, vec!["default/data0-solo"]);
    let cond = plan
        .podgroups
        .iter()
        .find(|u| &*u.name == "g")
        .and_then(|u| u.status.conditions.first().cloned())
        .expect("gang has a condition");
    assert!(cond.message.contains(BIND_CONFLICT), "{}", cond.message);
}

#[test]
fn provisioning_stays_in_allowed_topologies_and_binds_wait_for_every_member() {
    let mut snap = Cluster::new()
        .node(node("a0").gpus(8).label("zone", "a"))
        .node(node("b0").gpus(8).label("zone", "b"))
        .node(node("b1").gpus(8).label("zone", "b"))
        .group(podgroup("default", "g").min_member(3))
        .members("default", "g", 3, |p| p.gpus(8))
        .snapshot();
    let names: Vec<String> = snap.tasks.iter().map(|t| t.name.to_string()).collect();
    // Two members mount a claim of a class provisioning only in zone b; the third none.
    for n in &names[..2] {
        let mut c = claim("fast", 10);
        c.provision = Some(Some(vec![zone("b")]));
        mount(&mut snap, n, unbound(vec![c]), false);
    }
    let plan = run(&snap, 1);
    assert!(plan.binds.is_empty(), "nobody binds while claims wait");
    let mut selected: Vec<(String, String)> = plan
        .volume_writes
        .iter()
        .map(|w| match w {
            VolumeWrite::SelectNode { claim, node, .. } => (claim.to_string(), node.to_string()),
            other => panic!("unexpected write {other:?}"),
        })
        .collect();
    selected.sort();
    let nodes: Vec<&str> = selected.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n.starts_with('b')), "{selected:?}");
    // Every member keeps its node, the claim-less one too.
    assert_eq!(nominated(&plan).len(), 3);
    let cond = plan.podgroups[0].status.conditions[0].clone();
    assert_eq!(cond.reason, "WaitingForVolumes");
}

#[test]
fn bound_volumes_affinity_is_a_predicate_and_bound_claims_bind_at_once() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8).label("kubernetes.io/hostname", "a"))
        .node(node("b").gpus(8).label("kubernetes.io/hostname", "b"))
        .pod(pod("default", "ok").gpus(1))
        .pod(pod("default", "nowhere").gpus(1))
        .snapshot();
    mount(
        &mut snap,
        "ok",
        VolumeNeeds {
            bound_terms: vec![vec![host("b")]],
            ..VolumeNeeds::default()
        },
        true,
    );
    mount(
        &mut snap,
        "nowhere",
        VolumeNeeds {
            bound_terms: vec![vec![host("c")]],
            ..VolumeNeeds::default()
        },
        true,
    );
    let plan = run(&snap, 1);
    assert_eq!(plan.binds.len(), 1);
    assert_eq!(&*plan.binds[0].node, "b");
    let cond = plan
        .pod_conditions
        .iter()
        .find(|c| &*c.pod.name == "nowhere")
        .expect("condition");
    assert!(
        cond.message.contains(&format!("2 {NODE_CONFLICT}")),
        "{}",
        cond.message
    );
}

#[test]
fn a_missing_claim_holds_the_whole_gang_with_kube_schedulers_message() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8))
        .group(podgroup("default", "g").min_member(2))
        .members("default", "g", 2, |p| p.gpus(1))
        .snapshot();
    let first = snap.tasks[0].name.to_string();
    mount(
        &mut snap,
        &first,
        VolumeNeeds {
            blocked: Some("persistentvolumeclaim \"data\" not found".into()),
            ..VolumeNeeds::default()
        },
        false,
    );
    let plan = run(&snap, 1);
    assert!(plan.binds.is_empty());
    let msg = &plan.pod_conditions[0].message;
    assert!(
        msg.contains("0/1 nodes are available: persistentvolumeclaim \"data\" not found."),
        "{msg}"
    );
    // `explain` says the same node by node: the member fits nowhere, for that reason.
    let explanation = scheduler(&SchedulerConfig::default())
        .expect("scheduler builds")
        .explain(&snap, Time::from_secs(1), "default/g")
        .expect("the job is explained");
    let why = Some("persistentvolumeclaim \"data\" not found");
    let (blocked, free): (Vec<_>, Vec<_>) = explanation.kinds.iter().partition(|k| {
        k.nodes
            .iter()
            .all(|n| n.fit == 0 && n.reason.as_deref() == why)
    });
    assert_eq!(
        (blocked.len(), free.len()),
        (1, 1),
        "the member with the claim fits nowhere, the other on a: {:?}",
        explanation.kinds
    );
    assert!(free[0].nodes.iter().all(|n| n.fit > 0), "{:?}", free[0]);
}

#[test]
fn a_read_write_once_pod_claim_in_use_keeps_its_pod_off_every_node() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8))
        .pod(pod("default", "second").gpus(1))
        .snapshot();
    snap.volumes.rwop_in_use = vec!["default/shared".into()];
    mount(
        &mut snap,
        "second",
        VolumeNeeds {
            rwop: vec!["default/shared".into()],
            ..VolumeNeeds::default()
        },
        true,
    );
    let plan = run(&snap, 1);
    assert!(plan.binds.is_empty());
    assert!(plan.pod_conditions[0].message.contains(RWOP_CONFLICT));
}

#[test]
fn csi_attach_limits_count_volumes_placed_earlier_in_the_session() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8))
        .pod(pod("default", "p1").gpus(1))
        .pod(pod("default", "p2").gpus(1).created(2))
        .snapshot();
    let mut attach = NodeAttach::default();
    attach.limits.insert("ebs.csi".into(), 2);
    attach
        .attached
        .insert("ebs.csi".into(), vec!["vol-existing".into()]);
    snap.volumes.attach.insert("a".into(), attach);
    for n in ["p1", "p2"] {
        mount(
            &mut snap,
            n,
            VolumeNeeds {
                attach: vec![("ebs.csi".into(), Some(format!("vol-{n}").into()))],
                ..VolumeNeeds::default()
            },
            true,
        );
    }
    let plan = run(&snap, 1);
    assert_eq!(plan.binds.len(), 1, "one attach left under the limit of 2");
    let cond = plan
        .pod_conditions
        .iter()
        .find(|c| &*c.pod.name == "p2")
        .expect("p2 waits");
    assert!(cond.message.contains(MAX_VOLUME_COUNT), "{}", cond.message);
}

#[test]
fn claims_not_bound_within_the_bind_timeout_release_the_gang() {
    let mut snap = Cluster::new()
        .node(node("a").gpus(8).label("zone", "a"))
        .pod(pod("default", "w").gpus(1))
        .snapshot();
    let mut c = claim("fast", 1);
    c.provision = Some(None);
    c.selected = Some("a".into());
    mount(&mut snap, "w", unbound(vec![c]), false);
    snap.tasks[0].nominated = Some("a".into());
    let t = &mut snap.tasks[0];
    let mut tv = (**t.volumes.as_ref().expect("mounted")).clone();
    tv.selected_at = Some(Time::from_secs(0));
    t.volumes = Some(Arc::new(tv));
    // Within the timeout: still waiting, nothing written again.
    let plan = run(&snap, 599);
    assert!(plan.volume_writes.is_empty() && plan.binds.is_empty());
    assert!(plan.nominations.is_empty(), "already nominated there");
    // Past it: the selection is undone and the node released, saying why.
    let plan = run(&snap, 601);
    assert_eq!(
        plan.volume_writes,
        vec![VolumeWrite::Unselect {
            namespace: "default".into(),
            claim: "data0-w".into()
        }]
    );
    assert_eq!(nominated(&plan), vec![("w".into(), "-".into())]);
    let msg = &plan.pod_conditions[0].message;
    assert!(msg.contains("were not bound within 600s"), "{msg}");
}

/// A small deterministic generator (xorshift), so a failing seed reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

/// A random cluster: nodes over two zones, local volumes on random nodes, gangs whose members
/// mount local claims, provisioned claims (some zones only), bound volumes pinned to a node,
/// `ReadWriteOncePod` claims (some in use) and CSI volumes under attach limits.
fn random_cluster(seed: u64) -> Snapshot {
    let mut r = Rng(seed | 1);
    let nodes = 2 + r.next(4) as usize;
    let mut c = Cluster::new();
    for n in 0..nodes {
        c = c.node(
            node(&format!("n{n}"))
                .gpus(8)
                .label("kubernetes.io/hostname", &format!("n{n}"))
                .label("zone", &format!("z{}", n % 2)),
        );
    }
    let gangs = 1 + r.next(4) as usize;
    let mut sizes = Vec::new();
    for g in 0..gangs {
        let members = 1 + r.next(3) as usize;
        let gpus = 1 + r.next(8) as i64;
        let name = format!("g{g}");
        c = c
            .group(podgroup("default", &name).min_member(members as u32))
            .members("default", &name, members, move |p| {
                p.gpus(gpus).created(g as i64)
            });
        sizes.push(members);
    }
    let mut snap = c.snapshot();
    let mut volumes = Vec::new();
    for v in 0..r.next(7) {
        let host = format!("n{}", r.next(nodes as u64));
        volumes.push(local_pv(&format!("pv{v}"), &host, 1 + r.next(20) as i64));
    }
    volumes.sort_by(|a, b| (&a.class, a.size, &a.name).cmp(&(&b.class, b.size, &b.name)));
    snap.volumes.volumes = volumes;
    snap.volumes.rwop_in_use = vec!["default/busy".into()];
    for n in 0..nodes {
        if r.next(2) == 0 {
            let mut a = NodeAttach::default();
            a.limits.insert("csi.x".into(), r.next(3) as u32);
            snap.volumes.attach.insert(format!("n{n}").into(), a);
        }
    }
    let names: Vec<String> = snap.tasks.iter().map(|t| t.name.to_string()).collect();
    for name in names {
        let (needs, bound) = match r.next(7) {
            0 | 1 => (unbound(vec![claim("local", 1 + r.next(10) as i64)]), false),
            2 => {
                let mut c = claim("fast", 5);
                c.provision = Some((r.next(2) == 0).then(|| vec![zone_term("z0")]));
                c.driver = Some("csi.x".into());
                let mut n = unbound(vec![c]);
                n.attach = vec![("csi.x".into(), None)];
                (n, false)
            }
            3 => (
                VolumeNeeds {
                    bound_terms: vec![vec![host(&format!("n{}", r.next(nodes as u64)))]],
                    attach: vec![("csi.x".into(), Some(format!("vol-{name}").into()))],
                    ..VolumeNeeds::default()
                },
                true,
            ),
            4 => (
                VolumeNeeds {
                    rwop: vec![if r.next(2) == 0 {
                        "default/busy"
                    } else {
                        "default/shared"
                    }
                    .into()],
                    ..VolumeNeeds::default()
                },
                true,
            ),
            _ => continue,
        };
        mount(&mut snap, &name, needs, bound);
    }
    snap
}

fn zone_term(z: &str) -> SelectorTerm {
    SelectorTerm {
        expressions: vec![Requirement {
            key: "zone".into(),
            op: SelectorOp::In,
            values: vec![z.into()],
        }],
        fields: vec![],
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, .. Default::default() })]

    /// Every bind and every volume write of a plan passes the volume rules, checked by an
    /// independent checker (`caldera_model::check::volume::check_plan`); gangs bind all or nothing.
    #[test]
    fn every_bind_and_volume_write_passes_the_volume_rules(seed in proptest::prelude::any::<u64>()) {
        let snap = random_cluster(seed);
        let plan = run(&snap, 1);
        let broken = caldera_model::check::volume::check_plan(&snap, &plan);
        proptest::prop_assert!(broken.is_empty(), "seed {seed}: {broken:#?}");
        for j in &snap.jobs {
            let bound = plan.binds.iter().filter(|b| b.job == j.id).count() as u32;
            proptest::prop_assert!(bound == 0 || bound >= j.min_member, "seed {seed}: {} bound {bound}", j.id);
        }
    }
}
