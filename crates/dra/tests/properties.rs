//! Property tests of the allocator on small random inventories: every solution it returns is
//! one (devices reachable, free, distinct, of the request's class and selectors, constraints
//! kept, counts exact), and when it finds none, an exhaustive search independent of its code
//! finds none either; and however shared and partitioned devices are allocated one claim after
//! another, no capacity and no counter is ever overdrawn.

use caldera_dra::{Allocator, NodeView};
use caldera_model::dra::{
    Allocation, AllocationMode, AttributeValue, Capacity, Claim, ConstraintKind, Device,
    DeviceClass, DeviceConstraint, DeviceInventory, DeviceNodes, DeviceRequest, DeviceResult,
    ExactRequest, RequestKind, SubRequest,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const NODES: [&str; 2] = ["node-0", "node-1"];
const GI: i64 = 1 << 30;

#[derive(Debug, Clone)]
struct Dev {
    driver: usize,
    node: Option<usize>,
    numa: i64,
    memory_gi: i64,
    in_use: bool,
}

#[derive(Debug, Clone)]
struct Req {
    /// (class index, count, minimum memory in Gi) per alternative; more than one:
    /// `firstAvailable`.
    alts: Vec<(usize, u32, i64)>,
}

#[derive(Debug, Clone)]
struct Cl {
    requests: Vec<Req>,
    same_numa: bool,
}

fn driver(i: usize) -> &'static str {
    ["driver-a", "driver-b"][i]
}

fn dev_strategy() -> impl Strategy<Value = Dev> {
    (
        0..2usize,
        prop_oneof![3 => (0..2usize).prop_map(Some), 1 => Just(None)],
        0..2i64,
        1..4i64,
        prop::bool::weighted(0.2),
    )
        .prop_map(|(driver, node, numa, memory_gi, in_use)| Dev {
            driver,
            node,
            numa,
            memory_gi,
            in_use,
        })
}

fn req_strategy() -> impl Strategy<Value = Req> {
    prop::collection::vec((0..2usize, 1..3u32, 0..4i64), 1..3).prop_map(|alts| Req { alts })
}

fn claim_strategy() -> impl Strategy<Value = Cl> {
    (
        prop::collection::vec(req_strategy(), 1..3),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(requests, same_numa)| Cl {
            requests,
            same_numa,
        })
}

fn build(devs: &[Dev], claims: &[Cl]) -> (DeviceInventory, Vec<Claim>) {
    let mut devices: Vec<Device> = devs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut attributes = BTreeMap::new();
            attributes.insert(
                Arc::from(format!("{}/numa", driver(d.driver))),
                AttributeValue::Int(d.numa),
            );
            let mut capacity = BTreeMap::new();
            capacity.insert(
                Arc::from(format!("{}/memory", driver(d.driver))),
                Capacity::new(
                    "memory",
                    d.memory_gi * GI * 1000,
                    &format!("{}Gi", d.memory_gi),
                ),
            );
            Device {
                driver: Arc::from(driver(d.driver)),
                pool: Arc::from("pool"),
                name: Arc::from(format!("dev-{i:02}")),
                attributes,
                capacity,
                nodes: match d.node {
                    Some(n) => DeviceNodes::Node(Arc::from(NODES[n])),
                    None => DeviceNodes::All,
                },
                shared: false,
                consumes: Vec::new(),
                unsupported: None,
            }
        })
        .collect();
    devices.sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
    let classes = (0..2)
        .map(|c| DeviceClass {
            name: Arc::from(format!("class-{c}")),
            selectors: vec![Arc::from(format!(r#"device.driver == "{}""#, driver(c)))],
            config: Vec::new(),
            extended_resource_name: None,
            created: Default::default(),
        })
        .collect();
    let used = Claim {
        allocation: Some(Allocation {
            devices: devs
                .iter()
                .enumerate()
                .filter(|(_, d)| d.in_use)
                .map(|(i, d)| {
                    DeviceResult::whole("r", driver(d.driver), "pool", &format!("dev-{i:02}"))
                })
                .collect(),
            ..Allocation::default()
        }),
        ..claim("earlier", Vec::new(), Vec::new())
    };
    let exact = |(class, count, min): (usize, u32, i64)| ExactRequest {
        class: Arc::from(format!("class-{class}")),
        selectors: if min > 0 {
            vec![Arc::from(format!(
                r#"device.capacity["{}"].memory.compareTo(quantity("{min}Gi")) >= 0"#,
                driver(class)
            ))]
        } else {
            Vec::new()
        },
        mode: AllocationMode::ExactCount(count),
        admin_access: false,
        capacity: BTreeMap::new(),
    };
    let out: Vec<Claim> = claims
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            let requests = c
                .requests
                .iter()
                .enumerate()
                .map(|(ri, r)| DeviceRequest {
                    name: Arc::from(format!("req-{ri}")),
                    kind: if r.alts.len() == 1 {
                        RequestKind::Exactly(exact(r.alts[0]))
                    } else {
                        RequestKind::FirstAvailable(
                            r.alts
                                .iter()
                                .enumerate()
                                .map(|(si, &a)| SubRequest {
                                    name: Arc::from(format!("sub-{si}")),
                                    spec: exact(a),
                                })
                                .collect(),
                        )
                    },
                })
                .collect();
            // Both drivers publish `numa` under their own domain; the constraint reads one.
            let constraints = if c.same_numa {
                vec![DeviceConstraint {
                    requests: Vec::new(),
                    attribute: Arc::from("driver-a/numa"),
                    kind: ConstraintKind::Match,
                }]
            } else {
                Vec::new()
            };
            claim(&format!("claim-{ci}"), requests, constraints)
        })
        .collect();
    let inv = DeviceInventory {
        devices,
        classes,
        claims: vec![used],
        unusable_pools: Vec::new(),
        counter_sets: Vec::new(),
    };
    (inv, out)
}

fn claim(name: &str, requests: Vec<DeviceRequest>, constraints: Vec<DeviceConstraint>) -> Claim {
    Claim {
        namespace: Arc::from("default"),
        name: Arc::from(name),
        uid: Arc::from(name),
        requests,
        constraints,
        config: Vec::new(),
        allocation: None,
        reserved_for: Vec::new(),
        deleting: false,
        owner: None,
        unsupported: None,
    }
}

/// Whether device `d` may serve alternative `alt` on node `node` (independent of the allocator).
fn fits(d: &Dev, alt: (usize, u32, i64), node: usize) -> bool {
    d.node.is_none_or(|n| n == node) && !d.in_use && d.driver == alt.0 && d.memory_gi >= alt.2
}

/// Exhaustive search: some choice of alternatives and of distinct devices satisfies every
/// request of every claim, with each `same_numa` claim's devices sharing `driver-a/numa`.
fn solvable(devs: &[Dev], claims: &[Cl], node: usize) -> bool {
    // Claim by claim, request by request, alternative by alternative, slot by slot.
    #[allow(clippy::too_many_arguments)]
    fn go(
        devs: &[Dev],
        claims: &[Cl],
        node: usize,
        c: usize,
        r: usize,
        left: u32,
        alt: Option<(usize, u32, i64)>,
        taken: &mut Vec<bool>,
        numa: &mut Option<i64>,
    ) -> bool {
        if c == claims.len() {
            return true;
        }
        let claim = &claims[c];
        if r == claim.requests.len() {
            let mut fresh = None;
            return go(devs, claims, node, c + 1, 0, 0, None, taken, &mut fresh);
        }
        let Some(a) = alt else {
            // Choose an alternative for request r.
            for &a in &claim.requests[r].alts {
                let saved = *numa;
                if go(devs, claims, node, c, r, a.1, Some(a), taken, numa) {
                    return true;
                }
                *numa = saved;
            }
            return false;
        };
        if left == 0 {
            return go(devs, claims, node, c, r + 1, 0, None, taken, numa);
        }
        for (i, d) in devs.iter().enumerate() {
            if taken[i] || !fits(d, a, node) {
                continue;
            }
            let saved = *numa;
            if claim.same_numa {
                // Only driver-a devices carry `driver-a/numa`.
                if d.driver != 0 || numa.is_some_and(|n| n != d.numa) {
                    continue;
                }
                *numa = Some(d.numa);
            }
            taken[i] = true;
            if go(devs, claims, node, c, r, left - 1, alt, taken, numa) {
                return true;
            }
            taken[i] = false;
            *numa = saved;
        }
        false
    }
    let mut taken = vec![false; devs.len()];
    let mut numa = None;
    go(devs, claims, node, 0, 0, 0, None, &mut taken, &mut numa)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn solutions_are_valid_and_none_is_returned_only_when_none_exists(
        devs in prop::collection::vec(dev_strategy(), 0..7),
        claims in prop::collection::vec(claim_strategy(), 1..3),
        node in 0..2usize,
    ) {
        let (inv, model_claims) = build(&devs, &claims);
        let by_name: BTreeMap<String, &Dev> = devs.iter().enumerate().map(|(i, d)| (format!("dev-{i:02}"), d)).collect();
        let mut alloc = Allocator::new(inv);
        let labels = BTreeMap::new();
        let refs: Vec<&Claim> = model_claims.iter().collect();
        let out = alloc.allocate(&refs, NodeView { name: NODES[node], labels: &labels });
        let out = out.map_err(|e| TestCaseError::fail(format!("unexpected error: {e}")))?;
        match out {
            None => prop_assert!(!solvable(&devs, &claims, node), "a solution exists but none was found"),
            Some(found) => {
                prop_assert_eq!(found.len(), claims.len());
                let mut seen = BTreeSet::new();
                for (f, c) in found.iter().zip(&claims) {
                    let mut numa = BTreeSet::new();
                    for (ri, r) in c.requests.iter().enumerate() {
                        let results: Vec<&DeviceResult> = f.allocation.devices.iter()
                            .filter(|d| d.request.split('/').next() == Some(&format!("req-{ri}")))
                            .collect();
                        prop_assert!(!results.is_empty());
                        let alt = if r.alts.len() == 1 {
                            r.alts[0]
                        } else {
                            let sub: usize = results[0].request.rsplit("sub-").next().unwrap().parse().unwrap();
                            prop_assert!(results.iter().all(|d| d.request == results[0].request), "one subrequest per request");
                            r.alts[sub]
                        };
                        prop_assert_eq!(results.len(), alt.1 as usize, "count");
                        for d in results {
                            let dev = by_name[&*d.device];
                            prop_assert!(fits(dev, alt, node), "{:?} does not fit {:?}", dev, alt);
                            prop_assert!(seen.insert(d.device.clone()), "{} given twice", d.device);
                            if c.same_numa {
                                prop_assert_eq!(dev.driver, 0);
                                numa.insert(dev.numa);
                            }
                        }
                    }
                    prop_assert!(numa.len() <= 1, "matchAttribute broken");
                    let local = f.allocation.devices.iter().any(|d| by_name[&*d.device].node.is_some());
                    prop_assert_eq!(f.allocation.node().is_some(), local, "node-local devices pin the claim");
                }
            }
        }
    }
}

/// A device of the sharing property: shared or not, with `memory_gi` of memory (a shared one
/// maybe with a range policy: min 1Gi, step 2Gi), drawing `draw` from counter set `set`.
#[derive(Debug, Clone)]
struct SharedDev {
    shared: bool,
    memory_gi: i64,
    policy: bool,
    counter: Option<(usize, i64)>,
}

fn shared_dev_strategy() -> impl Strategy<Value = SharedDev> {
    (
        prop::bool::weighted(0.6),
        1..9i64,
        prop::bool::weighted(0.4),
        prop_oneof![1 => Just(None), 2 => (0..2usize, 1..4i64).prop_map(Some)],
    )
        .prop_map(|(shared, memory_gi, policy, counter)| SharedDev {
            shared,
            memory_gi,
            policy: policy && shared,
            counter,
        })
}

fn gi(n: i64) -> caldera_model::dra::Quantity {
    caldera_model::dra::Quantity::from_milli(n * GI * 1000)
}

fn shared_inventory(devs: &[SharedDev], sets: &[i64]) -> DeviceInventory {
    use caldera_model::dra::{CapacityRange, CounterConsumption, CounterSet, RequestPolicy};
    let devices = devs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let mut memory = Capacity::new(
                "memory",
                d.memory_gi * GI * 1000,
                &format!("{}Gi", d.memory_gi),
            );
            if d.policy {
                memory.policy = Some(Arc::new(RequestPolicy {
                    default: Some(gi(1)),
                    valid_values: Vec::new(),
                    valid_range: Some(CapacityRange {
                        min: gi(1),
                        max: Some(gi(d.memory_gi)),
                        step: Some(gi(2)),
                    }),
                }));
            }
            Device {
                driver: Arc::from("driver-a"),
                pool: Arc::from("pool"),
                name: Arc::from(format!("dev-{i:02}")),
                attributes: BTreeMap::new(),
                capacity: [(Arc::from("driver-a/memory"), memory)]
                    .into_iter()
                    .collect(),
                nodes: DeviceNodes::Node(Arc::from(NODES[0])),
                shared: d.shared,
                consumes: d
                    .counter
                    .map(|(set, draw)| CounterConsumption {
                        counter_set: Arc::from(format!("set-{set}")),
                        counters: [(Arc::from("slices"), gi(draw))].into_iter().collect(),
                    })
                    .into_iter()
                    .collect(),
                unsupported: None,
            }
        })
        .collect();
    DeviceInventory {
        devices,
        classes: vec![DeviceClass {
            name: Arc::from("class-0"),
            selectors: vec![Arc::from(r#"device.driver == "driver-a""#)],
            config: Vec::new(),
            extended_resource_name: None,
            created: Default::default(),
        }],
        claims: Vec::new(),
        unusable_pools: Vec::new(),
        counter_sets: sets
            .iter()
            .enumerate()
            .map(|(s, &total)| CounterSet {
                driver: Arc::from("driver-a"),
                pool: Arc::from("pool"),
                name: Arc::from(format!("set-{s}")),
                counters: [(Arc::from("slices"), gi(total))].into_iter().collect(),
            })
            .collect(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Pods placed one after another, each taking what its claim got: no shared device's
    /// shares consume more memory than it has, no device is used whole and otherwise at once, a
    /// share consumes at least what it asked, and the devices in use never draw more from a
    /// counter set than it holds — checked from the allocations written, not the allocator's
    /// own books. And an allocation read back holds exactly what the search took.
    #[test]
    fn shares_and_partitions_never_overdraw_capacity_or_counters(
        devs in prop::collection::vec(shared_dev_strategy(), 1..6),
        sets in prop::collection::vec(1..7i64, 2),
        asks in prop::collection::vec((1..3u32, prop::option::of(1..6i64)), 1..9),
    ) {
        let inv = shared_inventory(&devs, &sets);
        let mut alloc = Allocator::new(inv.clone());
        let labels = BTreeMap::new();
        let node = NodeView { name: NODES[0], labels: &labels };
        let mut written: Vec<DeviceResult> = Vec::new();
        for (i, (count, ask)) in asks.iter().enumerate() {
            let mut spec = ExactRequest {
                class: Arc::from("class-0"),
                selectors: Vec::new(),
                mode: AllocationMode::ExactCount(*count),
                admin_access: false,
                capacity: BTreeMap::new(),
            };
            if let Some(g) = ask {
                spec.capacity.insert(Arc::from("memory"), gi(*g));
            }
            let c = claim(
                &format!("claim-{i}"),
                vec![DeviceRequest { name: Arc::from("req"), kind: RequestKind::Exactly(spec) }],
                Vec::new(),
            );
            let out = alloc.allocate(&[&c], node);
            let out = out.map_err(|e| TestCaseError::fail(format!("unexpected error: {e}")))?;
            let Some(found) = out else { continue };
            prop_assert_eq!(alloc.devices_of(&found[0].allocation), found[0].hold.clone());
            alloc.take(&found[0].hold);
            for r in &found[0].allocation.devices {
                let d = inv.device_index(&r.driver, &r.pool, &r.device).unwrap();
                prop_assert_eq!(r.share_id.is_some(), inv.devices[d].shared, "shares only of shared devices");
                if let (Some(g), Some(q)) = (ask, r.consumed.get("memory")) {
                    prop_assert!(q.milli >= g * GI * 1000, "a share consumes at least what it asks");
                }
                written.push(r.clone());
            }
        }
        let mut whole = vec![0; devs.len()];
        let mut shares = vec![0; devs.len()];
        let mut memory = vec![0i64; devs.len()];
        for r in &written {
            let d = inv.device_index(&r.driver, &r.pool, &r.device).unwrap();
            match &r.share_id {
                None => whole[d] += 1,
                Some(_) => {
                    shares[d] += 1;
                    memory[d] += r.consumed.get("memory").map_or(0, |q| q.milli);
                }
            }
        }
        let mut drawn = vec![0i64; sets.len()];
        for (d, dev) in devs.iter().enumerate() {
            prop_assert!(whole[d] <= 1, "dev-{d:02} allocated whole twice");
            prop_assert!(whole[d] == 0 || shares[d] == 0, "dev-{d:02} whole and shared");
            prop_assert!(memory[d] <= dev.memory_gi * GI * 1000, "dev-{d:02}'s memory overdrawn");
            if whole[d] + shares[d] > 0 {
                if let Some((set, draw)) = dev.counter {
                    drawn[set] += draw;
                }
            }
        }
        for (s, &total) in sets.iter().enumerate() {
            prop_assert!(drawn[s] <= total, "set-{s} overdrawn: {} of {total}", drawn[s]);
        }
    }
}
