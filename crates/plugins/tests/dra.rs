//! Property tests of Dynamic Resource Allocation in the gang decision, over random clusters of
//! devices and gangs with claims: after any session no device is allocated twice, every bound
//! pod's claims are allocated on (for) its node, no gang is bound with a member's claim
//! unallocated, and nothing is written for a pod that is not bound; with shared GPUs and their
//! partitions, no capacity or counter set is overdrawn and a gang that does not fit gives back
//! exactly the shares it took.

use caldera_config::SchedulerConfig;
use caldera_model::{
    AllocationMode, AttributeValue, Claim, ConstraintKind, Consumer, Device, DeviceClass,
    DeviceConstraint, DeviceNodes, DeviceRequest, ExactRequest, PodClaim, RequestKind, Snapshot,
    TaskClaims, Time,
};
use caldera_plugins::scheduler;
use caldera_testkit::builders::{node, podgroup, queue, Cluster};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const DRIVER: &str = "gpu.example.com";
const CLASS: &str = "gpu";

#[derive(Debug, Clone)]
struct NodeSpec {
    devices: u32,
    /// Devices (from the first) already allocated to a claim of a running pod elsewhere.
    busy: u32,
}

#[derive(Debug, Clone)]
struct GangSpec {
    members: usize,
    min: u32,
    /// Devices per member's claim (from a template).
    count: u32,
    /// Only model "a" devices.
    model_a: bool,
    /// All of a claim's devices in one clique.
    clique: bool,
    /// Every member also uses one claim shared by the gang (one device).
    shared: bool,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (0u32..9, 0u32..5).prop_map(|(devices, busy)| NodeSpec {
        devices,
        busy: busy.min(devices),
    })
}

fn gang_spec() -> impl Strategy<Value = GangSpec> {
    (
        1usize..6,
        1u32..6,
        1u32..4,
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(members, min, count, model_a, clique, shared)| GangSpec {
            members,
            min: min.min(members as u32),
            count,
            model_a,
            clique,
            shared,
        })
}

fn attr(name: &str) -> Arc<str> {
    Arc::from(format!("{DRIVER}/{name}"))
}

fn request(name: &str, count: u32, model_a: bool) -> DeviceRequest {
    DeviceRequest {
        name: name.into(),
        kind: RequestKind::Exactly(ExactRequest {
            class: CLASS.into(),
            selectors: if model_a {
                vec![Arc::from(format!(
                    "device.attributes[\"{DRIVER}\"].model == \"a\""
                ))]
            } else {
                Vec::new()
            },
            mode: AllocationMode::ExactCount(count),
            admin_access: false,
            capacity: BTreeMap::new(),
        }),
    }
}

fn claim(name: &str, requests: Vec<DeviceRequest>, clique: bool) -> Claim {
    Claim {
        namespace: "ns".into(),
        name: name.into(),
        uid: Arc::from(format!("uid-{name}")),
        requests,
        constraints: if clique {
            vec![DeviceConstraint {
                requests: Vec::new(),
                attribute: attr("clique"),
                kind: ConstraintKind::Match,
            }]
        } else {
            Vec::new()
        },
        config: Vec::new(),
        allocation: None,
        reserved_for: Vec::new(),
        deleting: false,
        owner: None,
        unsupported: None,
    }
}

/// Makes `c` allocated `devices` on `node` and reserved for the running pod `elsewhere-<k>`.
fn held_elsewhere(c: &mut Claim, devices: Vec<caldera_model::DeviceResult>, node: &str, k: usize) {
    c.allocation = Some(caldera_model::Allocation {
        devices,
        config: Vec::new(),
        node_selector: Some(vec![caldera_model::SelectorTerm {
            expressions: Vec::new(),
            fields: vec![caldera_model::Requirement {
                key: "metadata.name".into(),
                op: caldera_model::SelectorOp::In,
                values: vec![node.to_string()],
            }],
        }]),
    });
    c.reserved_for.push(Consumer {
        resource: "pods".into(),
        name: Arc::from(format!("elsewhere-{k}")),
        uid: Arc::from(format!("uid-elsewhere-{k}")),
    });
}

fn cluster() -> impl Strategy<Value = Snapshot> {
    (
        prop::collection::vec(node_spec(), 1..6),
        prop::collection::vec(gang_spec(), 1..6),
    )
        .prop_map(|(nodes, gangs)| build(&nodes, &gangs))
}

/// The cluster of `nodes` (n0, n1, ...) publishing devices, and `gangs` (g0, g1, ...) whose
/// members each use a claim made from their gang's template (and the gang's shared claim).
fn build(nodes: &[NodeSpec], gangs: &[GangSpec]) -> Snapshot {
    {
        let mut c = Cluster::new();
        for (i, _) in nodes.iter().enumerate() {
            let name = format!("n{i}");
            c = c.node(node(&name).cpu(64).label("kubernetes.io/hostname", &name));
        }
        for (g, spec) in gangs.iter().enumerate() {
            let name = format!("g{g}");
            c = c.group(podgroup("ns", &name).min_member(spec.min).created(g as i64));
            c = c.members("ns", &name, spec.members, move |p| {
                p.cpu_milli(100).created(g as i64)
            });
        }
        let mut s = c.snapshot();
        let inv = &mut s.dra;
        inv.classes.push(DeviceClass {
            name: CLASS.into(),
            selectors: vec![Arc::from(format!("device.driver == \"{DRIVER}\""))],
            config: Vec::new(),
            extended_resource_name: None,
            created: Time::from_secs(0),
        });
        let mut busy_claims = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            let node_name: Arc<str> = Arc::from(format!("n{i}"));
            for d in 0..n.devices {
                inv.devices.push(Device {
                    driver: DRIVER.into(),
                    pool: node_name.clone(),
                    name: Arc::from(format!("gpu-{d}")),
                    attributes: BTreeMap::from([
                        (
                            attr("model"),
                            AttributeValue::String(if d % 3 == 0 { "b" } else { "a" }.into()),
                        ),
                        (attr("clique"), AttributeValue::Int(i64::from(d / 4))),
                    ]),
                    capacity: BTreeMap::new(),
                    nodes: DeviceNodes::Node(node_name.clone()),
                    shared: false,
                    consumes: Vec::new(),
                    unsupported: None,
                });
            }
            if n.busy > 0 {
                let mut c = claim(
                    &format!("busy-n{i}"),
                    vec![request("gpus", n.busy, false)],
                    false,
                );
                let devices = (0..n.busy)
                    .map(|d| {
                        caldera_model::DeviceResult::whole(
                            "gpus",
                            DRIVER,
                            &node_name,
                            &format!("gpu-{d}"),
                        )
                    })
                    .collect();
                held_elsewhere(&mut c, devices, &node_name, i);
                busy_claims.push(c);
            }
        }
        inv.devices
            .sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
        inv.claims.extend(busy_claims);
        // Each member: a claim made from its gang's template; some gangs share one more.
        for t in s.tasks.iter_mut() {
            let job = &s.jobs[t.job];
            let g: usize = job.name.trim_start_matches('g').parse().unwrap_or(0);
            let spec = &gangs[g];
            let own = format!("{}-gpu", t.name);
            let mut c = claim(
                &own,
                vec![request("gpu", spec.count, spec.model_a)],
                spec.clique,
            );
            c.owner = Some(("Pod".into(), t.uid.clone()));
            s.dra.claims.push(c);
            let mut claims = vec![PodClaim {
                pod_claim: "gpu".into(),
                claim: own.into(),
                from_template: true,
            }];
            if spec.shared {
                claims.push(PodClaim {
                    pod_claim: "shared".into(),
                    claim: Arc::from(format!("shared-{}", job.name)),
                    from_template: false,
                });
            }
            t.claims = Some(Arc::new(TaskClaims {
                claims,
                ..TaskClaims::default()
            }));
        }
        for (g, spec) in gangs.iter().enumerate() {
            if spec.shared {
                s.dra.claims.push(claim(
                    &format!("shared-g{g}"),
                    vec![request("gpu", 1, false)],
                    false,
                ));
            }
        }
        s.dra
            .claims
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        s
    }
}

/// What every plan must be: the model's own check of its DRA rules is clean, and no gang is
/// partly bound.
fn sound(s: &Snapshot, plan: &caldera_model::Plan) -> Result<(), TestCaseError> {
    let broken = caldera_model::check::dra::check_plan(s, plan);
    prop_assert!(broken.is_empty(), "{broken:?}");
    let mut new: BTreeMap<&str, u32> = BTreeMap::new();
    for b in &plan.binds {
        *new.entry(&b.job).or_default() += 1;
    }
    for j in &s.jobs {
        let added = new.get(&*j.id).copied().unwrap_or(0);
        prop_assert!(
            added == 0 || added >= j.min_member,
            "job {} got {added} members bound, needs {}",
            j.id,
            j.min_member
        );
    }
    Ok(())
}

fn run(s: &Snapshot) -> caldera_session::Outcome {
    scheduler(&SchedulerConfig::default())
        .expect("default config builds")
        .run(s, Time::from_secs(10))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn devices_are_never_allocated_twice_and_bound_pods_hold_theirs(s in cluster()) {
        let out = run(&s);
        let plan = &out.plan;
        // The model's own check of a plan's DRA rules agrees; gangs all or nothing (devices
        // included: a bound member has its claims, below).
        sound(&s, plan)?;
        // No device allocated twice: the snapshot's allocations and this plan's together.
        let mut taken: BTreeSet<(String, String)> = BTreeSet::new();
        for a in s.dra.claims.iter().filter_map(|c| c.allocation.as_ref()) {
            for r in &a.devices {
                prop_assert!(taken.insert((r.pool.to_string(), r.device.to_string())));
            }
        }
        for w in plan.claim_writes.iter().filter(|w| w.allocate) {
            for r in &w.devices {
                prop_assert!(
                    taken.insert((r.pool.to_string(), r.device.to_string())),
                    "device {}/{} allocated twice (claim {})", r.pool, r.device, w.key()
                );
            }
        }
        let writes: BTreeMap<&str, &caldera_model::ClaimWrite> =
            plan.claim_writes.iter().map(|w| (&*w.name, w)).collect();
        let bound: BTreeMap<&str, &str> =
            plan.binds.iter().map(|b| (&*b.pod.name, &*b.node)).collect();
        // Every bound pod's claims are allocated for its node and reserved for it.
        for b in &plan.binds {
            let t = s.tasks.iter().find(|t| t.name == b.pod.name).expect("bound task exists");
            for pc in &t.claims.as_ref().expect("every member has claims").claims {
                let w = writes.get(&*pc.claim);
                prop_assert!(w.is_some(), "pod {} bound without its claim {} written", b.pod.name, pc.claim);
                let w = w.expect("checked");
                prop_assert!(w.node.as_deref().is_none_or(|n| n == &*b.node),
                    "claim {} allocated for {:?}, pod {} bound to {}", w.name, w.node, b.pod.name, b.node);
                prop_assert!(w.reserved_for.iter().any(|c| c.uid == t.uid),
                    "claim {} not reserved for pod {}", w.name, b.pod.name);
                if let RequestKind::Exactly(e) = &s.dra.claims[s.dra.claim_index("ns", &pc.claim).expect("claim exists")].requests[0].kind {
                    if let AllocationMode::ExactCount(k) = e.mode {
                        prop_assert_eq!(w.devices.len(), k as usize);
                    }
                }
                for r in &w.devices {
                    prop_assert_eq!(&*r.pool, &*b.node, "device on another node than the pod");
                }
            }
        }
        // Nothing is written for a pod that is not bound.
        for w in &plan.claim_writes {
            for c in &w.reserved_for {
                prop_assert!(bound.contains_key(&*c.name), "claim {} reserved for unbound {}", w.name, c.name);
            }
        }
    }
}

/// `explain` says why a gang short of devices waits: its members' claims are not allocated,
/// and the session's reason is kube-scheduler's `cannot allocate all claims`.
#[test]
fn explain_names_the_claims_a_gang_cannot_get() {
    let s = build(
        &[NodeSpec {
            devices: 2,
            busy: 0,
        }],
        &[GangSpec {
            members: 3,
            min: 3,
            count: 1,
            model_a: false,
            clique: false,
            shared: false,
        }],
    );
    let scheduler = scheduler(&SchedulerConfig::default()).expect("default config builds");
    let out = scheduler.run(&s, Time::from_secs(10));
    assert!(out.plan.binds.is_empty() && out.plan.claim_writes.is_empty());
    let e = scheduler
        .explain(&s, Time::from_secs(10), "ns/g0")
        .expect("the job exists");
    let text = e.to_string();
    assert!(
        text.contains("ns/g0-0 claim gpu (ns/g0-0-gpu): not allocated"),
        "{text}"
    );
    assert!(
        e.held
            .as_deref()
            .is_some_and(|h| h.contains("cannot allocate all claims")),
        "{text}"
    );
}

/// Two DRA-only nodes publishing two GPUs each through a class naming `nvidia.com/gpu`, and a
/// one-member gang asking `nvidia.com/gpu: 1` whose pod already names its bridge claim
/// (`bridge`, allocated on `allocated_on` if given).
fn bridged(allocated_on: Option<&str>) -> Snapshot {
    let mut c = Cluster::new();
    for n in ["n0", "n1"] {
        c = c.node(node(n).cpu(64).label("kubernetes.io/hostname", n));
    }
    c = c.group(podgroup("ns", "g0").min_member(1));
    c = c.members("ns", "g0", 1, |p| p.cpu_milli(100).gpus(1));
    let mut s = c.snapshot();
    s.dra.classes.push(DeviceClass {
        name: CLASS.into(),
        selectors: vec![Arc::from(format!("device.driver == \"{DRIVER}\""))],
        config: Vec::new(),
        extended_resource_name: Some("nvidia.com/gpu".into()),
        created: Time::from_secs(0),
    });
    for n in ["n0", "n1"] {
        for d in 0..2 {
            s.dra.devices.push(Device {
                driver: DRIVER.into(),
                pool: n.into(),
                name: Arc::from(format!("gpu-{d}")),
                attributes: BTreeMap::new(),
                capacity: BTreeMap::new(),
                nodes: DeviceNodes::Node(n.into()),
                shared: false,
                consumes: Vec::new(),
                unsupported: None,
            });
        }
    }
    let t = &mut s.tasks[0];
    let mut bridge = claim(
        "bridge",
        vec![request("container-0-request-0", 1, false)],
        false,
    );
    bridge.owner = Some(("Pod".into(), t.uid.clone()));
    if let Some(n) = allocated_on {
        bridge.allocation = Some(caldera_model::Allocation {
            devices: vec![caldera_model::DeviceResult::whole(
                "container-0-request-0",
                DRIVER,
                n,
                "gpu-1",
            )],
            config: Vec::new(),
            node_selector: Some(vec![caldera_model::SelectorTerm {
                expressions: Vec::new(),
                fields: vec![caldera_model::Requirement {
                    key: "metadata.name".into(),
                    op: caldera_model::SelectorOp::In,
                    values: vec![n.to_string()],
                }],
            }]),
        });
    }
    s.dra.claims.push(bridge);
    t.claims = Some(Arc::new(TaskClaims {
        claims: Vec::new(),
        waiting: None,
        extended: vec![caldera_model::ExtendedRequest {
            container: "main".into(),
            resource: "nvidia.com/gpu".into(),
            count: 1,
        }],
        extended_claim: Some("bridge".into()),
    }));
    s
}

#[test]
fn a_pod_that_names_its_bridge_claim_gets_it_allocated_in_place_not_a_new_one() {
    let s = bridged(None);
    let out = run(&s);
    assert_eq!(out.plan.binds.len(), 1, "{:?}", out.plan);
    assert!(
        out.plan.extended_claims.is_empty(),
        "no second bridge claim: {:?}",
        out.plan.extended_claims
    );
    let w: Vec<_> = out.plan.claim_writes.iter().collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(&*w[0].name, "bridge");
    assert!(w[0].allocate);
    assert_eq!(w[0].devices.len(), 1);
    assert_eq!(&*w[0].devices[0].pool, &*out.plan.binds[0].node);
    assert!(w[0].reserved_for.iter().any(|c| c.uid == s.tasks[0].uid));
}

#[test]
fn a_pod_whose_bridge_claim_is_allocated_lands_where_it_is() {
    let s = bridged(Some("n1"));
    let out = run(&s);
    assert_eq!(out.plan.binds.len(), 1, "{:?}", out.plan);
    assert_eq!(&*out.plan.binds[0].node, "n1");
    assert!(out.plan.extended_claims.is_empty());
    assert!(out
        .plan
        .claim_writes
        .iter()
        .all(|w| !w.allocate && &*w.name == "bridge"));
}

/// One DRA-only node publishing four GPUs through a class naming `nvidia.com/gpu`, a queue
/// capped at one `nvidia.com/gpu`, gang `a` (two pods sharing claim `s`, one device) and gang
/// `b` (one pod with its own named claim `c`, one device), `a` first.
fn named_claims_in_a_capped_queue() -> Snapshot {
    let mut c = Cluster::new()
        .node(node("n0").cpu(64).label("kubernetes.io/hostname", "n0"))
        .queue(queue("q").capability_gpus(1))
        .group(podgroup("ns", "a").min_member(2).queue("q").created(0))
        .group(podgroup("ns", "b").min_member(1).queue("q").created(1));
    c = c.members("ns", "a", 2, |p| p.cpu_milli(100).created(0));
    c = c.members("ns", "b", 1, |p| p.cpu_milli(100).created(1));
    let mut s = c.snapshot();
    s.dra.classes.push(DeviceClass {
        name: CLASS.into(),
        selectors: vec![Arc::from(format!("device.driver == \"{DRIVER}\""))],
        config: Vec::new(),
        extended_resource_name: Some("nvidia.com/gpu".into()),
        created: Time::from_secs(0),
    });
    for d in 0..4 {
        s.dra.devices.push(Device {
            driver: DRIVER.into(),
            pool: "n0".into(),
            name: Arc::from(format!("gpu-{d}")),
            attributes: BTreeMap::new(),
            capacity: BTreeMap::new(),
            nodes: DeviceNodes::Node("n0".into()),
            shared: false,
            consumes: Vec::new(),
            unsupported: None,
        });
    }
    s.dra
        .claims
        .push(claim("c", vec![request("gpu", 1, false)], false));
    s.dra
        .claims
        .push(claim("s", vec![request("gpu", 1, false)], false));
    for t in s.tasks.iter_mut() {
        let job = &s.jobs[t.job];
        let name = if &*job.name == "a" { "s" } else { "c" };
        t.claims = Some(Arc::new(TaskClaims {
            claims: vec![PodClaim {
                pod_claim: "gpu".into(),
                claim: name.into(),
                from_template: false,
            }],
            ..TaskClaims::default()
        }));
    }
    s
}

#[test]
fn named_claims_count_in_queue_accounting_a_shared_one_once() {
    let s = named_claims_in_a_capped_queue();
    let out = run(&s);
    let mut bound: Vec<&str> = out.plan.binds.iter().map(|b| &*b.pod.name).collect();
    bound.sort();
    // `a`'s shared claim is one GPU (charged once, to a-0): the queue's one GPU is used up,
    // so `b`'s named claim must wait.
    assert_eq!(bound, ["a-0", "a-1"], "{:?}", out.plan.binds);
}

const GI: i64 = 1 << 30;

fn gi(n: i64) -> caldera_model::dra::Quantity {
    caldera_model::dra::Quantity::from_milli(n * GI * 1000)
}

/// A GPU of node `node` as a DRA driver for shared and partitioned GPUs publishes it: `gpu-i`
/// with `allowMultipleAllocations` and 80Gi of memory, drawing all 8 memory slices of counter
/// set `gpu-i`, and its two halves `gpu-i-half-a`/`-b` (40Gi, 4 slices each).
fn sharable_gpu(node: &str, i: usize) -> (Vec<Device>, caldera_model::CounterSet) {
    let set = format!("gpu-{i}");
    let device = |name: String, memory: i64, slices: i64, shared: bool| Device {
        driver: DRIVER.into(),
        pool: node.into(),
        name: name.into(),
        attributes: BTreeMap::new(),
        capacity: BTreeMap::from([(
            attr("memory"),
            caldera_model::Capacity::new("memory", memory * GI * 1000, &format!("{memory}Gi")),
        )]),
        nodes: DeviceNodes::Node(node.into()),
        shared,
        consumes: vec![caldera_model::CounterConsumption {
            counter_set: set.as_str().into(),
            counters: BTreeMap::from([(Arc::from("slices"), gi(slices))]),
        }],
        unsupported: None,
    };
    (
        vec![
            device(format!("gpu-{i}"), 80, 8, true),
            device(format!("gpu-{i}-half-a"), 40, 4, false),
            device(format!("gpu-{i}-half-b"), 40, 4, false),
        ],
        caldera_model::CounterSet {
            driver: DRIVER.into(),
            pool: node.into(),
            name: set.as_str().into(),
            counters: BTreeMap::from([(Arc::from("slices"), gi(8))]),
        },
    )
}

/// What a member of a sharing gang asks: a share of `memory` Gi of a shared GPU, or a half.
#[derive(Debug, Clone, Copy)]
enum Ask {
    Share(i64),
    Half,
}

/// `nodes` nodes each with `gpus[n]` sharable GPUs; `busy` (node, gpu, ask) allocated before to
/// a running pod elsewhere; gangs (g0, g1, ...) of members asking `asks`, `min` of them needed.
fn sharing_cluster(
    gpus: &[usize],
    busy: &[(usize, usize, Ask)],
    gangs: &[(Vec<Ask>, u32)],
) -> Snapshot {
    let mut c = Cluster::new();
    for (n, _) in gpus.iter().enumerate() {
        let name = format!("n{n}");
        c = c.node(node(&name).cpu(64).label("kubernetes.io/hostname", &name));
    }
    for (g, (asks, min)) in gangs.iter().enumerate() {
        let name = format!("g{g}");
        c = c.group(podgroup("ns", &name).min_member(*min).created(g as i64));
        c = c.members("ns", &name, asks.len(), move |p| {
            p.cpu_milli(100).created(g as i64)
        });
    }
    let mut s = c.snapshot();
    for (class, shared) in [("gpu", true), ("half", false)] {
        s.dra.classes.push(DeviceClass {
            name: class.into(),
            selectors: vec![Arc::from(format!(
                "device.driver == \"{DRIVER}\" && device.allowMultipleAllocations == {shared}"
            ))],
            config: Vec::new(),
            extended_resource_name: None,
            created: Time::from_secs(0),
        });
    }
    for (n, &count) in gpus.iter().enumerate() {
        for i in 0..count {
            let (devices, set) = sharable_gpu(&format!("n{n}"), i);
            s.dra.devices.extend(devices);
            s.dra.counter_sets.push(set);
        }
    }
    let ask_request = |ask: Ask| match ask {
        Ask::Share(m) => {
            let mut r = request("gpu", 1, false);
            if let RequestKind::Exactly(e) = &mut r.kind {
                e.class = "gpu".into();
                e.capacity.insert("memory".into(), gi(m));
            }
            r
        }
        Ask::Half => {
            let mut r = request("gpu", 1, false);
            if let RequestKind::Exactly(e) = &mut r.kind {
                e.class = "half".into();
            }
            r
        }
    };
    for (k, &(n, i, ask)) in busy.iter().enumerate() {
        let node_name = format!("n{n}");
        let mut c = claim(&format!("busy-{k}"), vec![ask_request(ask)], false);
        let result = match ask {
            Ask::Share(m) => caldera_model::DeviceResult {
                share_id: Some(Arc::from(format!("00000000-0000-8000-8000-{k:012}"))),
                consumed: BTreeMap::from([(Arc::from("memory"), gi(m))]),
                ..caldera_model::DeviceResult::whole("gpu", DRIVER, &node_name, &format!("gpu-{i}"))
            },
            Ask::Half => caldera_model::DeviceResult::whole(
                "gpu",
                DRIVER,
                &node_name,
                &format!("gpu-{i}-half-a"),
            ),
        };
        held_elsewhere(&mut c, vec![result], &node_name, k);
        s.dra.claims.push(c);
    }
    for t in s.tasks.iter_mut() {
        let job = &s.jobs[t.job];
        let g: usize = job.name.trim_start_matches('g').parse().unwrap_or(0);
        let m: usize = t
            .name
            .rsplit('-')
            .next()
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        let own = format!("{}-gpu", t.name);
        let mut c = claim(&own, vec![ask_request(gangs[g].0[m])], false);
        c.owner = Some(("Pod".into(), t.uid.clone()));
        s.dra.claims.push(c);
        t.claims = Some(Arc::new(TaskClaims {
            claims: vec![PodClaim {
                pod_claim: "gpu".into(),
                claim: own.into(),
                from_template: true,
            }],
            ..TaskClaims::default()
        }));
    }
    s.dra
        .devices
        .sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
    s.dra
        .counter_sets
        .sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
    s.dra
        .claims
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    s
}

fn ask() -> impl Strategy<Value = Ask> {
    prop_oneof![3 => (1i64..7).prop_map(|m| Ask::Share(m * 10)), 1 => Just(Ask::Half)]
}

fn sharing() -> impl Strategy<Value = Snapshot> {
    (
        prop::collection::vec(0usize..3, 1..4),
        prop::collection::vec((0usize..3, 0usize..3, ask()), 0..3),
        prop::collection::vec((prop::collection::vec(ask(), 1..5), 1u32..5), 1..5),
    )
        .prop_map(|(gpus, busy, gangs)| {
            // At most one earlier allocation per GPU: the cluster starts sound.
            let mut seen = BTreeSet::new();
            let busy: Vec<_> = busy
                .into_iter()
                .filter(|&(n, i, _)| n < gpus.len() && i < gpus[n] && seen.insert((n, i)))
                .collect();
            let gangs: Vec<_> = gangs
                .into_iter()
                .map(|(asks, min)| {
                    let min = min.min(asks.len() as u32);
                    (asks, min)
                })
                .collect();
            sharing_cluster(&gpus, &busy, &gangs)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, .. ProptestConfig::default() })]

    /// Shared GPUs and their halves (partitions drawing the same counter set) under gangs of
    /// fractional members: after the session no GPU's memory is promised twice (shares within
    /// 80Gi, never whole and shared at once), no counter set is overdrawn (a GPU in shares and a
    /// half of it exclude each other), every bound member's claim is written, and no gang is
    /// partly bound.
    #[test]
    fn shared_and_partitioned_gpus_are_never_overdrawn(s in sharing()) {
        let out = run(&s);
        let plan = &out.plan;
        sound(&s, plan)?;
        let mut memory: BTreeMap<(String, String), i64> = BTreeMap::new();
        let mut whole: BTreeMap<(String, String), u32> = BTreeMap::new();
        let results = s
            .dra
            .claims
            .iter()
            .filter_map(|c| c.allocation.as_ref())
            .flat_map(|a| &a.devices)
            .chain(plan.claim_writes.iter().filter(|w| w.allocate).flat_map(|w| &w.devices));
        for r in results {
            let key = (r.pool.to_string(), r.device.to_string());
            match &r.share_id {
                Some(_) => *memory.entry(key).or_default() += r.consumed.get("memory").map_or(0, |q| q.milli),
                None => *whole.entry(key).or_default() += 1,
            }
        }
        let mut slices: BTreeMap<(String, String), i64> = BTreeMap::new();
        for ((pool, device), used) in &memory {
            prop_assert!(*used <= 80 * GI * 1000, "{pool}/{device}: {used} of 80Gi");
            prop_assert!(!whole.contains_key(&(pool.clone(), device.clone())), "{pool}/{device} whole and shared");
            *slices.entry((pool.clone(), device.clone())).or_default() += 8;
        }
        for ((pool, device), n) in &whole {
            prop_assert_eq!(*n, 1, "{}/{} whole twice", pool, device);
            let gpu = device.split("-half").next().unwrap_or(device).to_string();
            *slices.entry((pool.clone(), gpu)).or_default() += 4;
        }
        for ((pool, gpu), drawn) in &slices {
            prop_assert!(*drawn <= 8, "{pool}/{gpu}: {drawn} of 8 slices");
        }
        let written: BTreeSet<&str> = plan.claim_writes.iter().map(|w| &*w.name).collect();
        for b in &plan.binds {
            prop_assert!(written.contains(format!("{}-gpu", b.pod.name).as_str()), "{} bound without its claim", b.pod.name);
        }
    }
}

/// A gang whose members do not all fit gives back the shares its first members took: the gang
/// after it finds the GPU's memory whole.
#[test]
fn a_gang_that_does_not_fit_gives_back_its_shares() {
    let s = sharing_cluster(
        &[1],
        &[],
        &[
            (vec![Ask::Share(30); 4], 4),
            (vec![Ask::Share(40), Ask::Share(40)], 2),
        ],
    );
    let out = run(&s);
    let mut bound: Vec<&str> = out.plan.binds.iter().map(|b| &*b.pod.name).collect();
    bound.sort();
    assert_eq!(bound, ["g1-0", "g1-1"], "{:?}", out.plan);
    for w in &out.plan.claim_writes {
        let r = &w.devices[0];
        assert_eq!(&*r.device, "gpu-0");
        assert!(r.share_id.is_some());
        assert_eq!(r.consumed["memory"].milli, 40 * GI * 1000);
    }
}

/// Four members each asking a quarter of one GPU's memory land on that GPU together.
#[test]
fn four_quarter_members_share_one_gpu_all_or_nothing() {
    let s = sharing_cluster(&[1], &[], &[(vec![Ask::Share(20); 4], 4)]);
    let out = run(&s);
    assert_eq!(out.plan.binds.len(), 4, "{:?}", out.plan);
    let ids: BTreeSet<_> = out
        .plan
        .claim_writes
        .iter()
        .map(|w| w.devices[0].share_id.clone())
        .collect();
    assert_eq!(ids.len(), 4, "four shares of one device, four IDs");
    let e = scheduler(&SchedulerConfig::default())
        .expect("default config builds")
        .explain(&s, Time::from_secs(10), "ns/g0")
        .expect("the job exists");
    let text = e.to_string();
    assert!(
        text.contains("gpu.example.com/n0/gpu-0 (share: memory 20Gi)"),
        "{text}"
    );
    // Before the session nothing holds the GPU.
    assert!(
        text.contains("n0/gpu-0 [........] 0.00 (0 claims)"),
        "{text}"
    );
    // A gang waiting beside a GPU that running pods share: explain draws how full it is.
    let busy = sharing_cluster(
        &[1],
        &[(0, 0, Ask::Share(30)), (0, 0, Ask::Share(30))],
        &[(vec![Ask::Share(30)], 1)],
    );
    let text = scheduler(&SchedulerConfig::default())
        .expect("default config builds")
        .explain(&busy, Time::from_secs(10), "ns/g0")
        .expect("the job exists")
        .to_string();
    assert!(
        text.contains("shared GPUs (the fraction held, of the fullest capacity):\n    n0/gpu-0 [######..] 0.75 (2 claims)"),
        "{text}"
    );
    // A fifth asking 30Gi does not fit beside them.
    let s = sharing_cluster(
        &[1],
        &[],
        &[(vec![Ask::Share(20); 4], 4), (vec![Ask::Share(30)], 1)],
    );
    let out = run(&s);
    assert!(
        out.plan.binds.iter().all(|b| &*b.job != "ns/g1"),
        "{:?}",
        out.plan.binds
    );
}

/// Members of two namespaces whose claims are written alike — one `TaskClaims` for both, the
/// same claim name — each get their own namespace's claim: a member's claims resolved on one
/// node are given again on the next only to the same claims in the same namespace. Here `a`'s
/// claim asks a 30Gi share of the shared GPU and `b`'s a half, and each is placed (checked,
/// then allocated) right after the other's.
#[test]
fn alike_claims_in_two_namespaces_resolve_each_to_its_own() {
    let devices = sharing_cluster(&[2], &[], &[]).dra;
    let mut c = Cluster::new().node(node("n0").cpu(64).label("kubernetes.io/hostname", "n0"));
    for (g, ns) in ["a", "b"].into_iter().enumerate() {
        c = c.group(podgroup(ns, "g").min_member(1).created(g as i64));
        c = c.members(ns, "g", 1, move |p| p.cpu_milli(100).created(g as i64));
    }
    let mut s = c.snapshot();
    s.dra = devices;
    let shared = Arc::new(TaskClaims {
        claims: vec![PodClaim {
            pod_claim: "gpu".into(),
            claim: "gpu-claim".into(),
            from_template: true,
        }],
        ..TaskClaims::default()
    });
    for t in s.tasks.iter_mut() {
        let mut r = request("gpu", 1, false);
        if let RequestKind::Exactly(e) = &mut r.kind {
            if &*t.namespace == "a" {
                e.class = "gpu".into();
                e.capacity.insert("memory".into(), gi(30));
            } else {
                e.class = "half".into();
            }
        }
        let mut c = claim("gpu-claim", vec![r], false);
        c.namespace = t.namespace.clone();
        c.uid = Arc::from(format!("uid-{}-gpu-claim", t.namespace));
        c.owner = Some(("Pod".into(), t.uid.clone()));
        s.dra.claims.push(c);
        t.claims = Some(shared.clone());
    }
    s.dra
        .claims
        .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let out = run(&s);
    assert_eq!(out.plan.binds.len(), 2, "{:?}", out.plan);
    let mut got: Vec<(&str, bool, bool)> = out
        .plan
        .claim_writes
        .iter()
        .map(|w| {
            let r = &w.devices[0];
            (
                &*w.namespace,
                r.device.contains("half"),
                r.share_id.is_some(),
            )
        })
        .collect();
    got.sort();
    // `a`: a share of a shared GPU; `b`: a half, whole.
    assert_eq!(
        got,
        [("a", false, true), ("b", true, false)],
        "{:?}",
        out.plan
    );
}
