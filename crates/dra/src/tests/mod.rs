//! The allocator's cases, ported from upstream's shared table
//! (`structured/internal/allocatortesting/allocator_testing.go`, names kept): the same
//! classes, slices, claims and node, and the same results or error text. `table` holds the
//! cases of the stable allocator's features, `sharing` those of consumable capacity and
//! `distinctAttribute` (KEP-5075), `partitionable` those of counters (KEP-4815). Cases about
//! features Caldera refuses (device taints, binding conditions, list attributes) are not
//! ported; `docs/dra.md` lists them.

use crate::allocator::{Allocator, Found, NodeView, CANNOT_ALLOCATE};
use caldera_model::dra::{
    Allocation, AllocationMode, AttributeValue, Capacity, CapacityRange, Claim, ConfigSource,
    ConstraintKind, CounterConsumption, CounterSet, Device, DeviceClass, DeviceConfig,
    DeviceConstraint, DeviceInventory, DeviceNodes, DeviceRequest, DeviceResult, ExactRequest,
    ExtendedRequest, Quantity, RequestKind, RequestPolicy, SubRequest, UnusablePool,
};
use caldera_model::{parse_quantity, Requirement, Scale, SelectorOp, SelectorTerm, Time};
use std::collections::BTreeMap;
use std::sync::Arc;

mod partitionable;
mod sharing;
mod table;

const DRIVER_A: &str = "driver-a";
const DRIVER_B: &str = "driver-b";
const CLASS_A: &str = "class-a";
const CLASS_B: &str = "class-b";

fn a(s: &str) -> Arc<str> {
    Arc::from(s)
}

fn class(name: &str, driver: &str) -> DeviceClass {
    DeviceClass {
        name: a(name),
        selectors: vec![a(&format!(r#"device.driver == "{driver}""#))],
        config: Vec::new(),
        extended_resource_name: None,
        created: Time::default(),
    }
}

fn config(driver: &str, attribute: &str, requests: &[&str]) -> DeviceConfig {
    DeviceConfig {
        requests: requests.iter().map(|r| a(r)).collect(),
        driver: a(driver),
        parameters: a(&format!(r#"{{"{attribute}":"{attribute}Value"}}"#)),
    }
}

fn class_with_config(name: &str, driver: &str, attribute: &str) -> DeviceClass {
    DeviceClass {
        config: vec![config(driver, attribute, &[])],
        ..class(name, driver)
    }
}

/// A device of `driver`'s pool `pool`, local to `node-1` unless moved with [`on`].
fn device(driver: &str, pool: &str, name: &str) -> Device {
    Device {
        driver: a(driver),
        pool: a(pool),
        name: a(name),
        attributes: BTreeMap::new(),
        capacity: BTreeMap::new(),
        nodes: DeviceNodes::Node(a("node-1")),
        shared: false,
        consumes: Vec::new(),
        unsupported: None,
    }
}

fn on(mut d: Device, nodes: DeviceNodes) -> Device {
    d.nodes = nodes;
    d
}

fn memory(d: Device, q: &str) -> Device {
    with_capacity(d, "memory", q)
}

/// A quantity written `text`.
fn qty(text: &str) -> Quantity {
    Quantity {
        milli: parse_quantity(text, Scale::Milli).unwrap(),
        text: a(text),
    }
}

/// Capacity `name` (unqualified, as upstream's cases publish it) of value `q`.
fn with_capacity(mut d: Device, name: &str, q: &str) -> Device {
    let key = a(&format!("{}/{name}", d.driver));
    d.capacity.insert(key, Capacity::new(name, qty(q).milli, q));
    d
}

fn attr(mut d: Device, name: &str, v: AttributeValue) -> Device {
    d.attributes.insert(a(&format!("{}/{name}", d.driver)), v);
    d
}

fn exact(class: &str, count: u32) -> ExactRequest {
    ExactRequest {
        class: a(class),
        selectors: Vec::new(),
        mode: AllocationMode::ExactCount(count),
        admin_access: false,
        capacity: BTreeMap::new(),
    }
}

fn request(name: &str, class: &str, count: u32) -> DeviceRequest {
    DeviceRequest {
        name: a(name),
        kind: RequestKind::Exactly(exact(class, count)),
    }
}

fn with_selector(mut r: DeviceRequest, expression: &str) -> DeviceRequest {
    if let RequestKind::Exactly(e) = &mut r.kind {
        e.selectors.push(a(expression));
    }
    r
}

fn all(name: &str, class: &str) -> DeviceRequest {
    DeviceRequest {
        name: a(name),
        kind: RequestKind::Exactly(ExactRequest {
            mode: AllocationMode::All,
            ..exact(class, 0)
        }),
    }
}

fn admin(mut r: DeviceRequest) -> DeviceRequest {
    if let RequestKind::Exactly(e) = &mut r.kind {
        e.admin_access = true;
    }
    r
}

fn first_available(name: &str, subs: Vec<(&str, ExactRequest)>) -> DeviceRequest {
    DeviceRequest {
        name: a(name),
        kind: RequestKind::FirstAvailable(
            subs.into_iter()
                .map(|(n, spec)| SubRequest { name: a(n), spec })
                .collect(),
        ),
    }
}

fn memory_at_least(driver: &str, q: &str) -> Arc<str> {
    a(&format!(
        r#"device.capacity["{driver}"].memory.compareTo(quantity("{q}")) >= 0"#
    ))
}

fn claim(name: &str, requests: Vec<DeviceRequest>) -> Claim {
    Claim {
        namespace: a("default"),
        name: a(name),
        uid: a(&format!("uid-{name}")),
        requests,
        constraints: Vec::new(),
        config: Vec::new(),
        allocation: None,
        reserved_for: Vec::new(),
        deleting: false,
        owner: None,
        unsupported: None,
    }
}

fn match_attribute(mut c: Claim, requests: &[&str], attribute: &str) -> Claim {
    c.constraints.push(DeviceConstraint {
        requests: requests.iter().map(|r| a(r)).collect(),
        attribute: a(attribute),
        kind: ConstraintKind::Match,
    });
    c
}

fn inventory(classes: Vec<DeviceClass>, devices: Vec<Device>) -> DeviceInventory {
    let mut inv = DeviceInventory {
        devices,
        classes,
        ..DeviceInventory::default()
    };
    inv.devices
        .sort_by(|x, y| (&x.driver, &x.pool, &x.name).cmp(&(&y.driver, &y.pool, &y.name)));
    inv.classes.sort_by(|x, y| x.name.cmp(&y.name));
    inv
}

/// `inventory` with counter sets.
fn with_counter_sets(mut inv: DeviceInventory, mut sets: Vec<CounterSet>) -> DeviceInventory {
    sets.sort_by(|x, y| (&x.driver, &x.pool, &x.name).cmp(&(&y.driver, &y.pool, &y.name)));
    inv.counter_sets = sets;
    inv
}

/// Devices allocated to claims before the call (upstream's `allocatedDevices`).
fn allocated(inv: &mut DeviceInventory, ids: &[(&str, &str, &str)]) {
    let mut c = claim("earlier", vec![]);
    c.allocation = Some(Allocation {
        devices: ids
            .iter()
            .map(|(driver, pool, device)| DeviceResult::whole("req-0", driver, pool, device))
            .collect(),
        ..Allocation::default()
    });
    inv.claims.push(c);
}

fn labels(region: &str) -> BTreeMap<String, String> {
    [("region", region), ("planet", "earth")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `(request, driver, pool, device, admin)` per claim, or the error, or `None`.
type Outcome = Result<Option<Vec<Vec<(String, String, String, String, bool)>>>, String>;

fn run_on(
    inv: DeviceInventory,
    claims: &[Claim],
    node: &str,
    region: &str,
) -> (Outcome, Option<Vec<Allocation>>) {
    let mut alloc = Allocator::new(inv);
    let l = labels(region);
    let refs: Vec<&Claim> = claims.iter().collect();
    match alloc.allocate(
        &refs,
        NodeView {
            name: node,
            labels: &l,
        },
    ) {
        Err(e) => (Err(e), None),
        Ok(None) => (Ok(None), None),
        Ok(Some(found)) => {
            let shown = found
                .iter()
                .map(|f| {
                    f.allocation
                        .devices
                        .iter()
                        .map(|r| {
                            (
                                r.request.to_string(),
                                r.driver.to_string(),
                                r.pool.to_string(),
                                r.device.to_string(),
                                r.admin_access,
                            )
                        })
                        .collect()
                })
                .collect();
            (
                Ok(Some(shown)),
                Some(found.into_iter().map(|f| f.allocation).collect()),
            )
        }
    }
}

fn run(inv: DeviceInventory, claims: &[Claim]) -> Outcome {
    run_on(inv, claims, "node-1", "region-1").0
}

fn r(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
) -> (String, String, String, String, bool) {
    (
        request.into(),
        driver.into(),
        pool.into(),
        device.into(),
        false,
    )
}

fn r_admin(
    request: &str,
    driver: &str,
    pool: &str,
    device: &str,
) -> (String, String, String, String, bool) {
    (
        request.into(),
        driver.into(),
        pool.into(),
        device.into(),
        true,
    )
}

fn expect_error(out: Outcome, contains: &str) {
    match out {
        Err(e) => assert!(e.contains(contains), "error {e:?} lacks {contains:?}"),
        other => panic!("expected an error containing {contains:?}, got {other:?}"),
    }
}

fn classes_ab() -> Vec<DeviceClass> {
    vec![class(CLASS_A, DRIVER_A), class(CLASS_B, DRIVER_B)]
}

/// Allocates `claims` on `node-1` (region-1) and returns what [`Allocator::allocate`] found.
fn found(inv: DeviceInventory, claims: &[Claim]) -> Result<Option<Vec<Found>>, String> {
    let mut alloc = Allocator::new(inv);
    let l = labels("region-1");
    let refs: Vec<&Claim> = claims.iter().collect();
    alloc.allocate(
        &refs,
        NodeView {
            name: "node-1",
            labels: &l,
        },
    )
}

/// One result as text: `request pool/device`, then for a share ` share` and what it consumes
/// (`name=value`, names as published), in upstream's expected-results style.
fn shown(r: &DeviceResult) -> String {
    let mut out = format!("{} {}/{}", r.request, r.pool, r.device);
    if let Some(id) = &r.share_id {
        assert_eq!(id.len(), 36, "shareID is a normalized UUID: {id}");
        out.push_str(" share");
    }
    for (name, q) in &r.consumed {
        out.push_str(&format!(" {name}={}", Quantity::from_milli(q.milli)));
    }
    out
}

/// Every claim's results as [`shown`], or the error, or `None` (no solution).
fn run_shown(inv: DeviceInventory, claims: &[Claim]) -> Result<Option<Vec<Vec<String>>>, String> {
    found(inv, claims).map(|f| {
        f.map(|all| {
            all.iter()
                .map(|f| f.allocation.devices.iter().map(shown).collect())
                .collect()
        })
    })
}

/// Expected results of [`run_shown`].
fn results(claims: &[&[&str]]) -> Result<Option<Vec<Vec<String>>>, String> {
    Ok(Some(
        claims
            .iter()
            .map(|c| c.iter().map(|r| r.to_string()).collect())
            .collect(),
    ))
}

/// `withAllowMultipleAllocations`.
fn multi(mut d: Device) -> Device {
    d.shared = true;
    d
}

/// Capacity `name` of `value` with `policy`.
fn with_policy(d: Device, name: &str, value: &str, policy: RequestPolicy) -> Device {
    let mut d = with_capacity(d, name, value);
    let key = format!("{}/{name}", d.driver);
    if let Some(c) = d.capacity.get_mut(key.as_str()) {
        c.policy = Some(Arc::new(policy));
    }
    d
}

/// `withCapacityRequestPolicyRange`: capacity `name` of `value` with the default policy of
/// upstream's cases: default 2, valid range min 2, step 2, max 4.
fn range_policy(d: Device, name: &str, value: &str) -> Device {
    let policy = RequestPolicy {
        default: Some(qty("2")),
        valid_values: Vec::new(),
        valid_range: Some(CapacityRange {
            min: qty("2"),
            max: Some(qty("4")),
            step: Some(qty("2")),
        }),
    };
    with_policy(d, name, value, policy)
}

/// `withCapacityRequestPolicyValidValues`: capacity `name` of `value`, default `default`,
/// valid values the default and `more`.
fn values_policy(d: Device, default: &str, name: &str, value: &str, more: &[&str]) -> Device {
    let policy = RequestPolicy {
        default: Some(qty(default)),
        valid_values: std::iter::once(default)
            .chain(more.iter().copied())
            .map(qty)
            .collect(),
        valid_range: None,
    };
    with_policy(d, name, value, policy)
}

/// `withCapacityRequest`: the request asks `q` of `capacity-0`.
fn asking(mut r: DeviceRequest, q: &str) -> DeviceRequest {
    let set = |e: &mut ExactRequest| {
        e.capacity.insert(a("capacity-0"), qty(q));
    };
    match &mut r.kind {
        RequestKind::Exactly(e) => set(e),
        RequestKind::FirstAvailable(subs) => subs.iter_mut().for_each(|s| set(&mut s.spec)),
    }
    r
}

/// `withCapacityRequest` on one `ExactRequest` (a subrequest).
fn asking_exact(mut e: ExactRequest, q: &str) -> ExactRequest {
    e.capacity.insert(a("capacity-0"), qty(q));
    e
}

/// `classWithAllowMultipleAllocations`.
fn multi_class(name: &str, driver: &str, multi: bool) -> DeviceClass {
    DeviceClass {
        selectors: vec![a(&format!(
            r#"device.driver == "{driver}" && device.allowMultipleAllocations == {multi}"#
        ))],
        ..class(name, driver)
    }
}

/// Capacity already consumed by shares allocated before (upstream's
/// `allocatedCapacityDevices`): one earlier claim with a share of each device.
/// A share allocated before: driver, pool, device and what it consumed (name, quantity).
type EarlierShare<'a> = (&'a str, &'a str, &'a str, &'a [(&'a str, &'a str)]);

fn allocated_shares(inv: &mut DeviceInventory, shares: &[EarlierShare]) {
    let mut c = claim("earlier-shares", vec![]);
    c.allocation = Some(Allocation {
        devices: shares
            .iter()
            .enumerate()
            .map(|(i, (driver, pool, device, consumed))| DeviceResult {
                share_id: Some(a(&format!("aaaaaaaa-aaaa-aaaa-aaaa-{i:012}"))),
                consumed: consumed.iter().map(|(n, q)| (a(n), qty(q))).collect(),
                ..DeviceResult::whole("req-0", driver, pool, device)
            })
            .collect(),
        ..Allocation::default()
    });
    inv.claims.push(c);
}

/// `deviceCounterConsumption`.
fn consumes(mut d: Device, set: &str, counters: &[(&str, &str)]) -> Device {
    d.consumes.push(CounterConsumption {
        counter_set: a(set),
        counters: counters.iter().map(|(n, q)| (a(n), qty(q))).collect(),
    });
    d
}

/// `fromCounters`: a device whose capacity is what it draws from its counter sets.
fn from_counters(mut d: Device) -> Device {
    let draws: Vec<(Arc<str>, Quantity)> = d
        .consumes
        .iter()
        .flat_map(|c| c.counters.iter().map(|(n, q)| (n.clone(), q.clone())))
        .collect();
    for (n, q) in draws {
        d = with_capacity(d, &n, &q.text);
    }
    d
}

/// `counterSet` of `driver`'s pool `pool`.
fn counter_set(driver: &str, pool: &str, name: &str, counters: &[(&str, &str)]) -> CounterSet {
    CounterSet {
        driver: a(driver),
        pool: a(pool),
        name: a(name),
        counters: counters.iter().map(|(n, q)| (a(n), qty(q))).collect(),
    }
}

fn distinct_attribute(mut c: Claim, requests: &[&str], attribute: &str) -> Claim {
    c.constraints.push(DeviceConstraint {
        requests: requests.iter().map(|r| a(r)).collect(),
        attribute: a(attribute),
        kind: ConstraintKind::Distinct,
    });
    c
}
