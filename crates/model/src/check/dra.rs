//! The DRA rules of a plan, checked against the snapshot it was made from.

use crate::dra::*;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Re-checks a plan's binds and claim writes against the snapshot it was made from, for the DRA
/// rules, independently of the session and the allocator: no device is allocated whole to two
/// claims (admin access aside), nor whole and in shares at once; the shares of a device never
/// consume more of a capacity than it has, and only a device with `allowMultipleAllocations` is
/// shared; the devices in use never draw more from a counter set than it holds; a written
/// allocation names only published devices reachable from its node, is written once and only for
/// a claim not allocated yet; and every pod bound has each of its claims allocated where it
/// lands (already, or by a write of this plan) and reserved for it, and no pod waiting for a
/// claim is bound. Only what this plan's writes take part in is reported (a cluster already
/// overdrawn is not the plan's doing). Returns what is broken (empty: nothing).
pub fn check_plan(snapshot: &crate::Snapshot, plan: &crate::Plan) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    let inv = &snapshot.dra;
    let mut out = Vec::new();
    type Id = (Arc<str>, Arc<str>, Arc<str>);
    let mut holder: BTreeMap<Id, String> = BTreeMap::new();
    let mut hold = |r: &DeviceResult, claim: String, out: &mut Vec<String>| {
        if r.admin_access || r.share_id.is_some() {
            return;
        }
        let id = (r.driver.clone(), r.pool.clone(), r.device.clone());
        if let Some(other) = holder.get(&id) {
            if *other != claim {
                out.push(format!(
                    "device {}/{}/{} allocated to {other} and {claim}",
                    r.driver, r.pool, r.device
                ));
            }
        } else {
            holder.insert(id, claim);
        }
    };
    for c in &inv.claims {
        for r in c.allocation.iter().flat_map(|a| &a.devices) {
            // Two claims already holding one device is the cluster's state, not this plan's
            // doing: recorded, not reported.
            let mut ignore = Vec::new();
            hold(r, c.key(), &mut ignore);
        }
    }
    let node_of = |name: &str| snapshot.node_index(name).map(|i| &snapshot.nodes[i]);
    let mut written: HashMap<String, &ClaimWrite> = HashMap::new();
    for w in &plan.claim_writes {
        let key = w.key();
        let existing = inv
            .claim_index(&w.namespace, &w.name)
            .map(|i| &inv.claims[i]);
        let Some(claim) = existing else {
            out.push(format!("write for claim {key}, which does not exist"));
            continue;
        };
        if written.insert(key.clone(), w).is_some() && w.allocate {
            out.push(format!("claim {key} allocated twice in one plan"));
        }
        if !w.allocate {
            continue;
        }
        if claim.allocation.is_some() {
            out.push(format!("claim {key} allocated again"));
        }
        for r in &w.devices {
            match inv.device_index(&r.driver, &r.pool, &r.device) {
                None => out.push(format!(
                    "claim {key} got device {}/{}/{}, which is not published",
                    r.driver, r.pool, r.device
                )),
                Some(i) => {
                    if let Some(n) = w.node.as_deref() {
                        let reaches = node_of(n).is_some_and(|node| {
                            inv.devices[i].nodes.reaches(&node.name, &node.labels)
                        });
                        if !reaches {
                            out.push(format!(
                                "claim {key} got device {}, which node {n} does not reach",
                                inv.devices[i].id()
                            ));
                        }
                    }
                }
            }
            hold(r, key.clone(), &mut out);
        }
    }
    let written_allocations = plan
        .claim_writes
        .iter()
        .filter(|w| w.allocate)
        .map(|w| (w.key(), &w.devices));
    out.extend(check_sharing(inv, written_allocations));
    let task_of: HashMap<(&str, &str), &crate::Task> = snapshot
        .tasks
        .iter()
        .map(|t| ((&*t.namespace, &*t.name), t))
        .collect();
    let mut reserved: BTreeSet<(String, &str)> = BTreeSet::new();
    for w in &plan.claim_writes {
        for c in &w.reserved_for {
            reserved.insert((w.key(), &c.uid));
        }
    }
    for b in &plan.binds {
        let Some(t) = task_of.get(&(&*b.pod.namespace, &*b.pod.name)) else {
            continue;
        };
        let Some(claims) = t.claims.as_deref() else {
            continue;
        };
        let pod = t.key();
        if let Some(why) = &claims.waiting {
            out.push(format!("{pod} bound although {why}"));
            continue;
        }
        let Some(node) = node_of(&b.node) else {
            continue;
        };
        for pc in &claims.claims {
            let key = format!("{}/{}", t.namespace, pc.claim);
            let claim = inv
                .claim_index(&t.namespace, &pc.claim)
                .map(|i| &inv.claims[i]);
            let admits = match (claim.and_then(|c| c.allocation.as_ref()), written.get(&key)) {
                (Some(a), _) => a.admits(&node.name, &node.labels),
                (None, Some(w)) if w.allocate => w.node_selector.as_ref().is_none_or(|terms| {
                    terms
                        .iter()
                        .any(|term| term.matches(&node.name, &node.labels))
                }),
                _ => {
                    out.push(format!(
                        "{pod} bound to {} with claim {key} unallocated",
                        b.node
                    ));
                    continue;
                }
            };
            if !admits {
                out.push(format!(
                    "{pod} bound to {}, where claim {key}'s allocation does not allow it",
                    b.node
                ));
            }
            let already = claim.is_some_and(|c| c.reserved_for_pod(&t.uid));
            if !already && !reserved.contains(&(key.clone(), &*t.uid)) {
                out.push(format!("{pod} bound without claim {key} reserved for it"));
            }
        }
    }
    out
}

/// The capacity and counter part of [`check_plan`]: with the snapshot's allocations and
/// `written` (claim key, results) together, every device is used whole by one claim or in
/// shares, shares only of a shared device and within its capacity, and every counter set holds
/// what the devices in use draw. Problems are reported only where a written result takes part.
fn check_sharing<'w>(
    inv: &DeviceInventory,
    written: impl Iterator<Item = (String, &'w Vec<DeviceResult>)>,
) -> Vec<String> {
    use std::collections::BTreeSet;
    #[derive(Default)]
    struct Use {
        whole: Vec<String>,
        shares: Vec<String>,
        consumed: BTreeMap<Arc<str>, i64>,
        by_plan: bool,
    }
    let mut uses: BTreeMap<usize, Use> = BTreeMap::new();
    let mut out = Vec::new();
    let existing = inv
        .claims
        .iter()
        .filter_map(|c| c.allocation.as_ref().map(|a| (c.key(), &a.devices, false)));
    let written = written.map(|(k, d)| (k, d, true));
    for (claim, results, by_plan) in existing.chain(written) {
        for r in results.iter().filter(|r| !r.admin_access) {
            let Some(d) = inv.device_index(&r.driver, &r.pool, &r.device) else {
                continue;
            };
            let device = &inv.devices[d];
            let u = uses.entry(d).or_default();
            u.by_plan |= by_plan;
            if r.share_id.is_none() {
                u.whole.push(claim.clone());
                continue;
            }
            u.shares.push(claim.clone());
            if by_plan && !device.shared {
                out.push(format!(
                    "claim {claim} got a share of device {}, which does not allow multiple allocations",
                    device.id()
                ));
            }
            for (name, q) in &r.consumed {
                let key = if name.contains('/') {
                    name.clone()
                } else {
                    Arc::from(format!("{}/{name}", device.driver))
                };
                *u.consumed.entry(key).or_default() += q.milli;
            }
        }
    }
    let mut drawn: BTreeMap<(usize, Arc<str>), (i64, bool)> = BTreeMap::new();
    for (&d, u) in &uses {
        let device = &inv.devices[d];
        if u.by_plan && !u.whole.is_empty() && !u.shares.is_empty() {
            out.push(format!(
                "device {} allocated whole to {} and shared by {}",
                device.id(),
                u.whole.join(", "),
                u.shares.join(", ")
            ));
        }
        if u.by_plan {
            for (name, &milli) in &u.consumed {
                match device.capacity.get(name) {
                    Some(c) if milli > c.milli => out.push(format!(
                        "device {}: its shares consume {} of capacity {name}, which is {}",
                        device.id(),
                        Quantity::from_milli(milli),
                        c.text
                    )),
                    Some(_) => {}
                    None => out.push(format!(
                        "device {}: a share consumes capacity {name}, which it does not have",
                        device.id()
                    )),
                }
            }
        }
        for take in &device.consumes {
            let Some(set) = inv.counter_set_index(&device.driver, &device.pool, &take.counter_set)
            else {
                continue;
            };
            for (counter, q) in &take.counters {
                let e = drawn.entry((set, counter.clone())).or_default();
                e.0 += q.milli;
                e.1 |= u.by_plan;
            }
        }
    }
    let mut reported = BTreeSet::new();
    for ((set, counter), (milli, by_plan)) in drawn {
        let cs = &inv.counter_sets[set];
        let total = cs.counters.get(&counter).map_or(0, |q| q.milli);
        if by_plan && milli > total && reported.insert((set, counter.clone())) {
            out.push(format!(
                "counter set {}: the devices in use draw {} of counter {counter}, which is {}",
                cs.id(),
                Quantity::from_milli(milli),
                Quantity::from_milli(total)
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bind, Node, Plan, Snapshot, Task};

    fn gpu(node: &str, name: &str) -> Device {
        Device {
            driver: "gpu.nvidia.com".into(),
            pool: node.into(),
            name: name.into(),
            attributes: BTreeMap::new(),
            capacity: BTreeMap::new(),
            nodes: DeviceNodes::Node(node.into()),
            shared: false,
            consumes: Vec::new(),
            unsupported: None,
        }
    }

    fn result(node: &str, name: &str) -> DeviceResult {
        DeviceResult::whole("gpu", "gpu.nvidia.com", node, name)
    }

    fn q(text: &str) -> Quantity {
        Quantity {
            milli: crate::parse_quantity(text, crate::Scale::Milli).unwrap(),
            text: text.into(),
        }
    }

    fn claim(name: &str) -> Claim {
        Claim {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}").into(),
            requests: Vec::new(),
            constraints: Vec::new(),
            config: Vec::new(),
            allocation: None,
            reserved_for: Vec::new(),
            deleting: false,
            owner: None,
            unsupported: None,
        }
    }

    fn write(name: &str, node: &str, device: &str, pod_uid: &str) -> ClaimWrite {
        ClaimWrite {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}").into(),
            allocate: true,
            devices: vec![result(node, device)],
            config: Vec::new(),
            node: Some(node.into()),
            node_selector: None,
            reserved_for: vec![Consumer {
                resource: "pods".into(),
                name: "p".into(),
                uid: pod_uid.into(),
            }],
        }
    }

    fn snapshot(claims: Vec<Claim>, pod_claim: &str) -> Snapshot {
        let mut s = Snapshot::default();
        for n in ["node-a", "node-b"] {
            s.nodes.push(Node::new(n, Default::default()));
        }
        s.dra.devices = vec![gpu("node-a", "gpu-0"), gpu("node-a", "gpu-1")];
        s.dra.claims = claims;
        s.tasks.push(Task {
            uid: "uid-p".into(),
            namespace: "default".into(),
            name: "p".into(),
            job: 0,
            status: crate::TaskStatus::Pending,
            node: None,
            request: Default::default(),
            priority: 0,
            role: None,
            gated: false,
            spec: Default::default(),
            labels: Default::default(),
            created: Default::default(),
            pending_reason: None,
            critical: false,
            nominated: None,
            never_preempts: false,
            started: Default::default(),
            budget: None,
            consumes: None,
            volumes: None,
            claims: Some(Arc::new(TaskClaims {
                claims: vec![PodClaim {
                    pod_claim: "gpu".into(),
                    claim: pod_claim.into(),
                    from_template: false,
                }],
                ..TaskClaims::default()
            })),
            controller: None,
            no_consolidate: false,
        });
        s
    }

    fn bind(node: &str) -> Bind {
        Bind {
            pod: crate::ObjectRef {
                namespace: "default".into(),
                name: "p".into(),
                uid: "uid-p".into(),
            },
            node: node.into(),
            job: "default/j".into(),
        }
    }

    #[test]
    fn a_plan_allocating_and_reserving_before_binding_is_clean() {
        let s = snapshot(vec![claim("c")], "c");
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![write("c", "node-a", "gpu-0", "uid-p")],
            ..Plan::default()
        };
        assert_eq!(check_plan(&s, &plan), Vec::<String>::new());
    }

    #[test]
    fn broken_plans_are_reported() {
        let mut held = claim("held");
        held.allocation = Some(Allocation {
            devices: vec![result("node-a", "gpu-0")],
            ..Allocation::default()
        });
        let s = snapshot(vec![claim("c"), held], "c");
        // The device another claim holds, on a node it is not on, bound elsewhere unreserved.
        let mut w = write("c", "node-b", "gpu-0", "uid-other");
        w.devices = vec![result("node-a", "gpu-0")];
        w.node_selector = Some(vec![crate::SelectorTerm {
            expressions: Vec::new(),
            fields: vec![crate::Requirement {
                key: "metadata.name".into(),
                op: crate::SelectorOp::In,
                values: vec!["node-b".into()],
            }],
        }]);
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
        assert!(
            has("allocated to default/held and default/c"),
            "{problems:?}"
        );
        assert!(has("which node node-b does not reach"), "{problems:?}");
        assert!(has("does not allow it"), "{problems:?}");
        assert!(has("without claim default/c reserved"), "{problems:?}");
        // Bound with the claim never allocated.
        let plan = Plan {
            binds: vec![bind("node-a")],
            ..Plan::default()
        };
        assert!(check_plan(&s, &plan)[0].contains("unallocated"));
    }

    /// A share of `device` consuming `memory`.
    fn share(node: &str, device: &str, id: &str, memory: &str) -> DeviceResult {
        DeviceResult {
            share_id: Some(id.into()),
            consumed: [("memory".into(), q(memory))].into_iter().collect(),
            ..result(node, device)
        }
    }

    #[test]
    fn shares_within_capacity_and_counters_within_their_sets_are_clean() {
        let mut s = snapshot(vec![claim("c"), claim("held")], "c");
        let mut shared = gpu("node-a", "gpu-0");
        shared.shared = true;
        shared.capacity.insert(
            "gpu.nvidia.com/memory".into(),
            Capacity::new("memory", q("80Gi").milli, "80Gi"),
        );
        s.dra.devices[0] = shared;
        s.dra.claims[1].allocation = Some(Allocation {
            devices: vec![share("node-a", "gpu-0", "a", "60Gi")],
            ..Allocation::default()
        });
        let mut w = write("c", "node-a", "gpu-0", "uid-p");
        w.devices = vec![share("node-a", "gpu-0", "b", "20Gi")];
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w.clone()],
            ..Plan::default()
        };
        assert_eq!(check_plan(&s, &plan), Vec::<String>::new());
        // 60Gi + 40Gi of 80Gi.
        w.devices = vec![share("node-a", "gpu-0", "b", "40Gi")];
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w.clone()],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        assert!(
            problems[0].contains("consume 100Gi of capacity gpu.nvidia.com/memory, which is 80Gi"),
            "{problems:?}"
        );
        // The device whole while shared.
        w.devices = vec![result("node-a", "gpu-0")];
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        assert!(
            problems[0].contains("allocated whole to default/c and shared by default/held"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_partition_beside_its_whole_device_overdraws_the_counter_set() {
        let mut s = snapshot(vec![claim("c"), claim("held")], "c");
        let draw = |amount: &str| CounterConsumption {
            counter_set: "gpu-0".into(),
            counters: [("memory".into(), q(amount))].into_iter().collect(),
        };
        s.dra.devices[0].consumes = vec![draw("80Gi")];
        s.dra.devices[1].consumes = vec![draw("10Gi")];
        s.dra.counter_sets = vec![CounterSet {
            driver: "gpu.nvidia.com".into(),
            pool: "node-a".into(),
            name: "gpu-0".into(),
            counters: [("memory".into(), q("80Gi"))].into_iter().collect(),
        }];
        s.dra.claims[1].allocation = Some(Allocation {
            devices: vec![result("node-a", "gpu-0")],
            ..Allocation::default()
        });
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![write("c", "node-a", "gpu-1", "uid-p")],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        assert_eq!(
            problems,
            ["counter set gpu.nvidia.com/node-a/gpu-0: the devices in use draw 90Gi of counter memory, which is 80Gi"]
        );
    }
}
