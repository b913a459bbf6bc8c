//! Folding DRA devices into the snapshot before a session opens: devices count as the resources
//! their classes name (see the parent module's doc).

use super::*;

/// Counts devices as resources (see the module doc), in `snapshot` before a session opens it,
/// asking `allocator` (built from the snapshot's inventory, which it holds: `snapshot.dra`
/// itself is not read) which devices are of which class; returns,
/// per resource devices serve, the nodes (by index) where they serve it. The simulator's
/// checks call it too ([`fold_snapshot`]), to see what the session sees.
pub fn fold(snapshot: &mut Snapshot, allocator: &mut Allocator) -> BTreeMap<Arc<str>, Vec<bool>> {
    let inv = allocator.inventory_arc().clone();
    let inv = &*inv;
    let mut backed: BTreeMap<Arc<str>, Vec<bool>> = BTreeMap::new();
    if inv.devices.is_empty() {
        return backed;
    }
    let mut resources: Vec<Arc<str>> = inv
        .classes
        .iter()
        .filter_map(|c| c.extended_resource_name.clone())
        .collect();
    resources.sort();
    resources.dedup();
    if resources.is_empty() {
        return backed;
    }
    // Devices held by the bridge's claims are counted by their pods' requests already.
    let bridge: HashSet<(&str, &str)> = snapshot
        .tasks
        .iter()
        .filter_map(|t| {
            let c = t.claims.as_ref()?.extended_claim.as_deref()?;
            Some((&*t.namespace, c))
        })
        .collect();
    let mut held: HashMap<usize, bool> = HashMap::new();
    for c in &inv.claims {
        let is_bridge = bridge.contains(&(&*c.namespace, &*c.name));
        for r in c.allocation.iter().flat_map(|a| &a.devices) {
            if r.admin_access {
                continue;
            }
            if let Some(d) = inv.device_index(&r.driver, &r.pool, &r.device) {
                held.insert(d, is_bridge);
            }
        }
    }
    let n = snapshot.nodes.len();
    // Per device: the node it is local to.
    let local: Vec<Option<usize>> = inv
        .devices
        .iter()
        .map(|dev| match &dev.nodes {
            DeviceNodes::Node(node) => snapshot
                .nodes
                .binary_search_by(|x| (*x.name).cmp(node))
                .ok(),
            _ => None,
        })
        .collect();
    for resource in &resources {
        let Some(class) = inv.class_for_extended(resource) else {
            continue;
        };
        let fractional = (0..inv.devices.len()).any(|d| {
            let dev = &inv.devices[d];
            (dev.shared || !dev.consumes.is_empty()) && allocator.in_class(&class.name, d as u32)
        });
        if fractional {
            continue;
        }
        let mut count = vec![0i64; n];
        let mut used = vec![0i64; n];
        for (d, at) in local.iter().enumerate() {
            let Some(i) = *at else { continue };
            if !allocator.in_class(&class.name, d as u32) {
                continue;
            }
            count[i] += 1;
            if held.get(&d) == Some(&false) {
                used[i] += 1;
            }
        }
        let mut any = false;
        let mut on = vec![false; n];
        for (i, node) in snapshot.nodes.iter_mut().enumerate() {
            if count[i] > 0 && node.allocatable.get(resource) == 0 {
                node.allocatable.add_named(resource, count[i]);
                node.used.add_named(resource, used[i]);
                on[i] = true;
                any = true;
            }
        }
        if any {
            backed.insert(resource.clone(), on);
        }
    }
    if backed.is_empty() {
        return backed;
    }
    // A member's claims count as the resource their class names: a claim from a template,
    // or named by one pod only, to that pod; a named claim several pods share, once, to the
    // first of them by name.
    let ext_of = |class: &str| -> Option<Arc<str>> {
        let r = inv.class(class)?.extended_resource_name.clone()?;
        backed.contains_key(&r).then_some(r)
    };
    let mut first_user: HashMap<(Arc<str>, Arc<str>), Arc<str>> = HashMap::new();
    for t in &snapshot.tasks {
        for pc in t.claims.iter().flat_map(|tc| &tc.claims) {
            if pc.from_template {
                continue;
            }
            first_user
                .entry((t.namespace.clone(), pc.claim.clone()))
                .and_modify(|u| {
                    if t.name < *u {
                        *u = t.name.clone();
                    }
                })
                .or_insert_with(|| t.name.clone());
        }
    }
    for t in snapshot.tasks.iter_mut() {
        let Some(tc) = t.claims.clone() else {
            continue;
        };
        let charged = |pc: &&caldera_model::PodClaim| {
            pc.from_template
                || first_user
                    .get(&(t.namespace.clone(), pc.claim.clone()))
                    .is_some_and(|u| *u == t.name)
        };
        let mut seen: Vec<&Arc<str>> = Vec::new();
        for pc in tc.claims.iter().filter(charged) {
            // A claim listed twice in one pod counts once.
            if seen.contains(&&pc.claim) {
                continue;
            }
            seen.push(&pc.claim);
            let Some(c) = inv
                .claim_index(&t.namespace, &pc.claim)
                .map(|i| &inv.claims[i])
            else {
                continue;
            };
            match &c.allocation {
                // A pending member's claim allocated already holds its device on the node
                // (counted there as used): counting it again in the request would count it
                // twice where the member lands.
                Some(_) if t.status == caldera_model::TaskStatus::Pending => {}
                Some(a) => {
                    for r in a.devices.iter().filter(|r| !r.admin_access) {
                        if let Some(res) = result_class(c, r).and_then(&ext_of) {
                            t.request.add_named(&res, 1);
                        }
                    }
                }
                None => {
                    for req in &c.requests {
                        let first = match &req.kind {
                            RequestKind::Exactly(e) => Some(e),
                            RequestKind::FirstAvailable(subs) => subs.first().map(|s| &s.spec),
                        };
                        let Some(e) = first.filter(|e| !e.admin_access) else {
                            continue;
                        };
                        if let (caldera_model::AllocationMode::ExactCount(k), Some(res)) =
                            (e.mode, ext_of(&e.class))
                        {
                            t.request.add_named(&res, i64::from(k));
                        }
                    }
                }
            }
        }
    }
    backed
}

/// The class of the request a result names (`req` or `req/sub`).
pub(super) fn result_class<'a>(claim: &'a Claim, r: &DeviceResult) -> Option<&'a str> {
    let (name, sub) = match r.request.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (&*r.request, None),
    };
    let req = claim.requests.iter().find(|q| &*q.name == name)?;
    match (&req.kind, sub) {
        (RequestKind::Exactly(e), None) => Some(&e.class),
        (RequestKind::FirstAvailable(subs), Some(s)) => {
            subs.iter().find(|x| &*x.name == s).map(|x| &*x.spec.class)
        }
        _ => None,
    }
}

/// [`fold`] on its own (for checks outside a session).
pub fn fold_snapshot(snapshot: &mut Snapshot) {
    if snapshot.dra.devices.is_empty() {
        return;
    }
    let mut allocator = Allocator::new(snapshot.dra.clone());
    fold(snapshot, &mut allocator);
}
