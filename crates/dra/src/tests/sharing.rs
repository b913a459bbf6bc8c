//! Upstream's cases for consumable capacity (KEP-5075: devices with `allowMultipleAllocations`,
//! capacity requests, request policies) and `distinctAttribute`, names kept. Upstream's results
//! carry a fixed share ID; here every share must carry a normalized UUID ([`shown`]) and the
//! same consumed capacity. The two `consumable-capacity-disabled-feature*` cases are not ported:
//! Caldera has no feature gates, consumable capacity is always on.

use super::*;

const A: &str = DRIVER_A;

fn one(name: &str) -> Device {
    device(A, "pool-1", name)
}

fn req(class: &str) -> DeviceRequest {
    request("req-0", class, 1)
}

/// Upstream's most common shape: class `class-a` selecting devices that allow multiple
/// allocations, `devices`, and one claim per entry of `asks` (`claim-<i>` with one request
/// `req-0` asking that much of `capacity-0`, or nothing); the results as [`shown`].
fn shares(devices: Vec<Device>, asks: &[Option<&str>]) -> Result<Option<Vec<Vec<String>>>, String> {
    let inv = inventory(vec![multi_class(CLASS_A, A, true)], devices);
    let claims: Vec<Claim> = asks
        .iter()
        .enumerate()
        .map(|(i, ask)| {
            let r = match ask {
                Some(q) => asking(req(CLASS_A), q),
                None => req(CLASS_A),
            };
            claim(&format!("claim-{i}"), vec![r])
        })
        .collect();
    run_shown(inv, &claims)
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_missing_capacity_request() {
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![multi(with_capacity(one("device-1"), "capacity-1", "1"))],
    );
    let c = claim("claim-0", vec![asking(req(CLASS_A), "1")]);
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_with_missing_capacity_request()
{
    let inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![multi(with_capacity(one("device-1"), "capacity-1", "1"))],
    );
    let c = claim("claim-0", vec![asking(all("req-0", CLASS_A), "1")]);
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_capacity_without_capacity_request() {
    // Both share the same device; no capacity is consumed since none is defined.
    let inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![multi(one("device-1"))],
    );
    let claims = [
        claim("claim-0", vec![req(CLASS_A)]),
        claim("claim-1", vec![req(CLASS_A)]),
    ];
    let out = found(inv, &claims).unwrap().unwrap();
    assert_eq!(
        out.iter()
            .map(|f| f.allocation.devices.iter().map(shown).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        [
            ["req-0 pool-1/device-1 share"],
            ["req-0 pool-1/device-1 share"]
        ]
    );
    assert_ne!(
        out[0].allocation.devices[0].share_id, out[1].allocation.devices[0].share_id,
        "each share has its own ID"
    );
    assert_eq!(out[0].hold.shares.len(), 1, "a share holds no device whole");
    assert!(out[0].hold.devices.is_empty());
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_without_capacity_request() {
    // Both get the full capacity, of different devices.
    let devices = vec![
        multi(with_capacity(one("device-1"), "capacity-0", "1")),
        multi(with_capacity(one("device-2"), "capacity-0", "1")),
    ];
    assert_eq!(
        shares(devices, &[None, None]),
        results(&[
            &["req-0 pool-1/device-1 share capacity-0=1"],
            &["req-0 pool-1/device-2 share capacity-0=1"],
        ])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_without_capacity_request_block() {
    let devices = vec![multi(with_capacity(one("device-1"), "capacity-0", "2"))];
    assert_eq!(
        shares(devices, &[None, None]),
        Ok(None),
        "should not satisfy both"
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_without_policy_with_capacity_request() {
    let devices = vec![multi(with_capacity(one("device-1"), "capacity-0", "2"))];
    assert_eq!(
        shares(devices, &[Some("1"), Some("1")]),
        results(&[
            &["req-0 pool-1/device-1 share capacity-0=1"],
            &["req-0 pool-1/device-1 share capacity-0=1"],
        ])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_policy_without_capacity_request() {
    // Both requests consume the default (2).
    let devices = vec![multi(range_policy(one("device-1"), "capacity-0", "4"))];
    assert_eq!(
        shares(devices, &[None, None]),
        results(&[
            &["req-0 pool-1/device-1 share capacity-0=2"],
            &["req-0 pool-1/device-1 share capacity-0=2"],
        ])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_zero_request_policy() {
    let devices = vec![multi(values_policy(
        one("device-1"),
        "0",
        "capacity-0",
        "1",
        &[],
    ))];
    assert_eq!(
        shares(devices, &[None, None]),
        results(&[
            &["req-0 pool-1/device-1 share capacity-0=0"],
            &["req-0 pool-1/device-1 share capacity-0=0"],
        ])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_violates_zero_request_policy() {
    let devices = vec![multi(values_policy(
        one("device-1"),
        "0",
        "capacity-0",
        "1",
        &[],
    ))];
    assert_eq!(shares(devices, &[Some("1")]), Ok(None));
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_range_policy_with_capacity_request() {
    // Both on the same device, each rounded up to the minimum (2).
    let devices = vec![multi(range_policy(one("device-1"), "capacity-0", "4"))];
    assert_eq!(
        shares(devices, &[Some("1"), Some("1")]),
        results(&[
            &["req-0 pool-1/device-1 share capacity-0=2"],
            &["req-0 pool-1/device-1 share capacity-0=2"],
        ])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_range_policy_step() {
    // 3 is rounded up with the step: 2 + 2 = 4.
    let devices = vec![multi(range_policy(one("device-1"), "capacity-0", "4"))];
    assert_eq!(
        shares(devices, &[Some("3")]),
        results(&[&["req-0 pool-1/device-1 share capacity-0=4"]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_valid_values_policy() {
    let devices = vec![multi(values_policy(
        one("device-1"),
        "1",
        "capacity-0",
        "4",
        &["2"],
    ))];
    assert_eq!(
        shares(devices, &[Some("2")]),
        results(&[&["req-0 pool-1/device-1 share capacity-0=2"]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_valid_values_policy_round_up() {
    let devices = vec![multi(values_policy(
        one("device-1"),
        "1",
        "capacity-0",
        "3",
        &["3"],
    ))];
    assert_eq!(
        shares(devices, &[Some("2")]),
        results(&[&["req-0 pool-1/device-1 share capacity-0=3"]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_exceeded_consumable_capacity_request() {
    let devices = vec![multi(range_policy(one("device-1"), "capacity-0", "2"))];
    assert_eq!(shares(devices, &[Some("1"), Some("2")]), Ok(None));
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_request_over_max_sharing_policy() {
    // The policy's max is 4: 6 is refused although the device has 10.
    let devices = vec![multi(range_policy(one("device-1"), "capacity-0", "10"))];
    assert_eq!(shares(devices, &[Some("6")]), Ok(None));
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_allocated_capacity_use_remaining() {
    let mut inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![multi(range_policy(one("device-1"), "capacity-0", "4"))],
    );
    allocated_shares(
        &mut inv,
        &[(A, "pool-1", "device-1", &[("capacity-0", "2")])],
    );
    let c = claim("claim-0", vec![asking(req(CLASS_A), "2")]);
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&["req-0 pool-1/device-1 share capacity-0=2"]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_allocated_capacity_next_device() {
    let mut inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![
            multi(range_policy(one("device-1"), "capacity-0", "2")),
            multi(range_policy(one("device-2"), "capacity-0", "2")),
        ],
    );
    allocated_shares(
        &mut inv,
        &[(A, "pool-1", "device-1", &[("capacity-0", "2")])],
    );
    let c = claim("claim-0", vec![asking(req(CLASS_A), "2")]);
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&["req-0 pool-1/device-2 share capacity-0=2"]])
    );
}

#[test]
fn consumable_capacity_with_multi_allocatable_device_backtrack() {
    let string = |d: Device, v: &str| attr(d, "stringAttribute", AttributeValue::String(a(v)));
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![
            multi(range_policy(
                string(one("device-2"), "stringAttributeValue1"),
                "capacity-0",
                "2",
            )),
            multi(range_policy(
                string(one("device-1"), "stringAttributeValue2"),
                "capacity-0",
                "4",
            )),
        ],
    );
    let claims = [
        match_attribute(
            claim(
                "claim-0",
                vec![
                    asking(request("req-0", CLASS_A, 1), "2"),
                    asking(request("req-1", CLASS_A, 1), "2"),
                ],
            ),
            &[],
            "driver-a/stringAttribute",
        ),
        claim("claim-1", vec![asking(req(CLASS_A), "2")]),
    ];
    assert_eq!(
        run_shown(inv, &claims),
        results(&[
            &[
                "req-0 pool-1/device-1 share capacity-0=2",
                "req-1 pool-1/device-1 share capacity-0=2",
            ],
            &["req-0 pool-1/device-2 share capacity-0=2"],
        ])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_subrequest() {
    let inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![multi(range_policy(one("device-1"), "capacity-0", "2"))],
    );
    let c = claim(
        "claim-0",
        vec![first_available(
            "req-0",
            vec![
                ("subReq-0", asking_exact(exact(CLASS_A, 1), "4")),
                ("subReq-1", asking_exact(exact(CLASS_A, 1), "2")),
                ("subReq-1", exact(CLASS_A, 1)),
            ],
        )],
    );
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&["req-0/subReq-1 pool-1/device-1 share capacity-0=2"]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_with_no_available_consumable_capacity() {
    let mut inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![multi(range_policy(one("device-1"), "capacity-0", "2"))],
    );
    allocated_shares(
        &mut inv,
        &[(A, "pool-1", "device-1", &[("capacity-0", "2")])],
    );
    let c = claim("claim-0", vec![asking(req(CLASS_A), "2")]);
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_filter_out_no_capacity() {
    // Only the device with the capacity is one of "all".
    let inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![
            multi(with_capacity(one("device-1"), "capacity-0", "2")),
            multi(one("device-2")),
        ],
    );
    let c = claim("claim-0", vec![asking(all("req-0", CLASS_A), "2")]);
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&["req-0 pool-1/device-1 share capacity-0=2"]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_filter_out_insufficient_capacity(
) {
    let inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![
            multi(with_capacity(one("device-1"), "capacity-0", "2")),
            multi(with_capacity(one("device-2"), "capacity-0", "1")),
        ],
    );
    let c = claim("claim-0", vec![asking(all("req-0", CLASS_A), "2")]);
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&["req-0 pool-1/device-1 share capacity-0=2"]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_allocating_sufficient() {
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![
            multi(with_capacity(one("device-1"), "capacity-0", "2")),
            multi(with_capacity(one("device-2"), "capacity-0", "1")),
        ],
    );
    let c = claim(
        "claim-0",
        vec![
            asking(request("req-0", CLASS_A, 1), "1"),
            asking(all("req-1", CLASS_A), "1"),
        ],
    );
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&[
            "req-0 pool-1/device-1 share capacity-0=1",
            "req-1 pool-1/device-1 share capacity-0=1",
            "req-1 pool-1/device-2 share capacity-0=1",
        ]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_in_use_sufficient() {
    let mut inv = inventory(
        vec![class(CLASS_A, A)],
        vec![
            multi(with_capacity(one("device-1"), "capacity-0", "2")),
            multi(with_capacity(one("device-2"), "capacity-0", "1")),
        ],
    );
    allocated_shares(
        &mut inv,
        &[(A, "pool-1", "device-1", &[("capacity-0", "1")])],
    );
    let c = claim("claim-0", vec![asking(all("req-0", CLASS_A), "1")]);
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&[
            "req-0 pool-1/device-1 share capacity-0=1",
            "req-0 pool-1/device-2 share capacity-0=1",
        ]])
    );
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_allocating_insufficient() {
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![
            multi(with_capacity(one("device-1"), "capacity-0", "1")),
            multi(with_capacity(one("device-2"), "capacity-0", "1")),
        ],
    );
    let c = claim(
        "claim-0",
        vec![
            asking(request("req-0", CLASS_A, 1), "1"),
            asking(all("req-1", CLASS_A), "1"),
        ],
    );
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn consumable_capacity_multi_allocatable_device_allocation_mode_all_in_use_insufficient() {
    let mut inv = inventory(
        vec![class(CLASS_A, A)],
        vec![
            multi(with_capacity(one("device-1"), "capacity-0", "1")),
            multi(with_capacity(one("device-2"), "capacity-0", "1")),
        ],
    );
    allocated_shares(
        &mut inv,
        &[(A, "pool-1", "device-1", &[("capacity-0", "1")])],
    );
    let c = claim("claim-0", vec![asking(all("req-0", CLASS_A), "1")]);
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&["req-0 pool-1/device-2 share capacity-0=1"]])
    );
}

#[test]
fn consumable_capacity_dedicated_device_with_consumable_capacity_request() {
    // A device that is not shared is allocated whole: no share, no consumed capacity.
    let inv = inventory(
        vec![multi_class(CLASS_A, A, false)],
        vec![with_capacity(one("device-1"), "capacity-0", "1")],
    );
    let c = claim("claim-0", vec![asking(req(CLASS_A), "1")]);
    let out = found(inv, &[c]).unwrap().unwrap();
    assert_eq!(
        out[0]
            .allocation
            .devices
            .iter()
            .map(shown)
            .collect::<Vec<_>>(),
        ["req-0 pool-1/device-1"]
    );
    assert_eq!(out[0].hold.devices, [0]);
}

#[test]
fn consumable_capacity_dedicated_device_with_multiple_consumable_capacity_request() {
    let inv = inventory(
        vec![multi_class(CLASS_A, A, false)],
        vec![range_policy(one("device-1"), "capacity-0", "2")],
    );
    let claims = [
        claim("claim-0", vec![asking(req(CLASS_A), "1")]),
        claim("claim-1", vec![asking(req(CLASS_A), "1")]),
    ];
    assert_eq!(run_shown(inv, &claims), Ok(None));
}

#[test]
fn allow_multiple_allocations_exclude_multi_allocatable_device_by_class_selector() {
    let inv = inventory(
        vec![multi_class(CLASS_A, A, false)],
        vec![multi(with_capacity(one("device-1"), "capacity-0", "1"))],
    );
    let c = claim("claim-0", vec![asking(req(CLASS_A), "1")]);
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn allow_multiple_allocations_not_allocate_multi_allocatable_device_which_already_dedicated() {
    let mut inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![multi(range_policy(one("device-1"), "capacity-0", "2"))],
    );
    allocated(&mut inv, &[(A, "pool-1", "device-1")]);
    let c = claim("claim-0", vec![asking(req(CLASS_A), "1")]);
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn allow_multiple_allocations_not_allocate_dedicated_device_which_change_from_multi_allocatable() {
    // Shares of the device are allocated; it no longer allows multiple allocations. Upstream
    // refuses it because its capacity is short; Caldera never takes a device whole while it has
    // shares (docs/dra.md).
    let mut inv = inventory(
        vec![class(CLASS_A, A)],
        vec![range_policy(one("device-1"), "capacity-0", "2")],
    );
    allocated_shares(
        &mut inv,
        &[(A, "pool-1", "device-1", &[("capacity-0", "1")])],
    );
    let c = claim("claim-0", vec![asking(req(CLASS_A), "1")]);
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

fn distinct_devices() -> Vec<Device> {
    [
        ("device-1", "1.0.0", 0, true),
        ("device-2", "1.0.1", 1, false),
        ("device-3", "1.0.2", 2, true),
        ("device-4", "1.0.0", 3, true),
    ]
    .into_iter()
    .map(|(name, version, numa, boolean)| {
        let d = attr(
            one(name),
            "driverVersion",
            AttributeValue::Version(a(version)),
        );
        let d = attr(d, "numa", AttributeValue::Int(numa));
        multi(attr(d, "boolAttribute", AttributeValue::Bool(boolean)))
    })
    .collect()
}

#[test]
fn with_distinct_constraints() {
    let inv = inventory(vec![class(CLASS_A, A)], distinct_devices());
    let c = claim(
        "claim-0",
        vec![
            request("req-0", CLASS_A, 1),
            request("req-1", CLASS_A, 1),
            request("req-2", CLASS_A, 1),
            request("req-3", CLASS_A, 1),
        ],
    );
    let c = distinct_attribute(c, &["req-0", "req-1"], "driver-a/boolAttribute");
    let c = distinct_attribute(c, &["req-0", "req-1", "req-2"], "driver-a/driverVersion");
    let c = distinct_attribute(c, &["req-0", "req-1", "req-2", "req-3"], "driver-a/numa");
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&[
            "req-0 pool-1/device-1 share",
            "req-1 pool-1/device-2 share",
            "req-2 pool-1/device-3 share",
            "req-3 pool-1/device-4 share",
        ]])
    );
}

#[test]
fn with_distinct_constraints_attribute_not_set() {
    let inv = inventory(vec![class(CLASS_A, A)], vec![multi(one("device-1"))]);
    let c = distinct_attribute(
        claim("claim-0", vec![req(CLASS_A)]),
        &["req-0"],
        "driver-a/boolAttribute",
    );
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn with_distinct_constraints_with_subrequests() {
    // The constraint applies to req-0 and req-1 only: req-1 cannot take device-1 again through
    // subReq-0 and falls back to device-2; req-2 may use device-1.
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![
            multi(attr(
                one("device-1"),
                "boolAttribute",
                AttributeValue::Bool(true),
            )),
            multi(attr(
                one("device-2"),
                "boolAttribute",
                AttributeValue::Bool(false),
            )),
        ],
    );
    let prefers = |name: &str| {
        first_available(
            name,
            vec![
                (
                    "subReq-0",
                    ExactRequest {
                        selectors: vec![a(r#"device.attributes["driver-a"].boolAttribute"#)],
                        ..exact(CLASS_A, 1)
                    },
                ),
                ("subReq-1", exact(CLASS_A, 1)),
            ],
        )
    };
    let c = distinct_attribute(
        claim(
            "claim-0",
            vec![prefers("req-0"), prefers("req-1"), prefers("req-2")],
        ),
        &["req-0", "req-1"],
        "driver-a/boolAttribute",
    );
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&[
            "req-0/subReq-0 pool-1/device-1 share",
            "req-1/subReq-1 pool-1/device-2 share",
            "req-2/subReq-0 pool-1/device-1 share",
        ]])
    );
}

#[test]
fn distinct_constraint_one_multi_allocatable_device_with_distinct_constraint() {
    let inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![multi(range_policy(
            attr(
                one("device-1"),
                "stringAttribute",
                AttributeValue::String(a("stringAttributeValue")),
            ),
            "capacity-0",
            "2",
        ))],
    );
    let c = distinct_attribute(
        claim(
            "claim-0",
            vec![
                asking(request("req-0", CLASS_A, 1), "1"),
                asking(request("req-1", CLASS_A, 1), "1"),
            ],
        ),
        &[],
        "driver-a/stringAttribute",
    );
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn distinct_constraint_two_multi_allocatable_devices_with_distinct_constraint() {
    let string = |name: &str, v: &str| {
        multi(range_policy(
            attr(one(name), "stringAttribute", AttributeValue::String(a(v))),
            "capacity-0",
            "4",
        ))
    };
    let inv = inventory(
        vec![multi_class(CLASS_A, A, true)],
        vec![
            string("device-1", "stringAttributeValue1"),
            string("device-2", "stringAttributeValue2"),
        ],
    );
    let c = distinct_attribute(
        claim(
            "claim-0",
            vec![
                asking(request("req-0", CLASS_A, 1), "2"),
                asking(request("req-1", CLASS_A, 1), "2"),
            ],
        ),
        &[],
        "driver-a/stringAttribute",
    );
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&[
            "req-0 pool-1/device-1 share capacity-0=2",
            "req-1 pool-1/device-2 share capacity-0=2",
        ]])
    );
}

#[test]
fn distinct_attribute_keeps_every_device_of_a_request_apart() {
    // Not an upstream case: with two devices per request, upstream compares a new device only
    // with the last device of each request; Caldera keeps every pair apart (docs/dra.md).
    let numa = |name: &str, n: i64| attr(one(name), "numa", AttributeValue::Int(n));
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![
            numa("device-1", 0),
            numa("device-2", 1),
            numa("device-3", 0),
        ],
    );
    let c = distinct_attribute(
        claim(
            "claim-0",
            vec![request("req-0", CLASS_A, 2), request("req-1", CLASS_A, 1)],
        ),
        &[],
        "driver-a/numa",
    );
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn the_same_shared_device_serves_a_request_at_most_once() {
    // Slots of one request take devices after one another (combinations): two devices asked
    // of one request are two devices, even when one could hold both shares.
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![multi(with_capacity(one("device-1"), "capacity-0", "4"))],
    );
    let c = claim("claim-0", vec![asking(request("req-0", CLASS_A, 2), "1")]);
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn take_and_release_of_shares_follow_placements() {
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![multi(with_capacity(one("device-1"), "capacity-0", "4"))],
    );
    let mut alloc = Allocator::new(inv);
    let l = labels("region-1");
    let node = NodeView {
        name: "node-1",
        labels: &l,
    };
    let c = claim("claim-0", vec![asking(req(CLASS_A), "3")]);
    let f = alloc.allocate(&[&c], node).unwrap().unwrap();
    alloc.take(&f[0].hold);
    assert!(alloc.in_use(0));
    assert_eq!(alloc.allocate(&[&c], node), Ok(None), "1 of 4 is left");
    let small = claim("claim-1", vec![asking(req(CLASS_A), "1")]);
    assert!(alloc.fits(&[&small], node).unwrap());
    // Read back from the allocation written, a share holds what the search took.
    assert_eq!(alloc.devices_of(&f[0].allocation), f[0].hold);
    alloc.release(&f[0].hold);
    assert!(!alloc.in_use(0));
    assert!(alloc.allocate(&[&c], node).unwrap().is_some());
}

#[test]
fn a_capacity_named_with_the_driver_domain_is_the_unqualified_one() {
    // Not an upstream case (1.36 compares names as written): `driver-a/capacity-0` asks of the
    // device's `capacity-0`.
    let inv = inventory(
        vec![class(CLASS_A, A)],
        vec![multi(with_capacity(one("device-1"), "capacity-0", "4"))],
    );
    let mut r = req(CLASS_A);
    if let RequestKind::Exactly(e) = &mut r.kind {
        e.capacity.insert(a("driver-a/capacity-0"), qty("3"));
    }
    assert_eq!(
        run_shown(inv, &[claim("claim-0", vec![r])]),
        results(&[&["req-0 pool-1/device-1 share capacity-0=3"]])
    );
}

/// Caldera's own (not upstream's): with `set_pack_shares`, a node's devices are tried fullest
/// first, so a share goes to the device with the least room that serves it; without, in
/// inventory order, as upstream.
#[test]
fn packing_shares_tries_the_fullest_device_first() {
    let devices = vec![
        multi(with_capacity(one("device-1"), "capacity-0", "1")),
        multi(with_capacity(one("device-2"), "capacity-0", "1")),
    ];
    let inv = inventory(vec![multi_class(CLASS_A, A, true)], devices);
    let ask = claim("claim-0", vec![asking(req(CLASS_A), "300m")]);
    let l = labels("region-1");
    let view = NodeView {
        name: "node-1",
        labels: &l,
    };
    for pack in [false, true] {
        let mut alloc = Allocator::new(inv.clone());
        // device-2 already holds 0.6.
        alloc.take(&crate::Hold {
            devices: Vec::new(),
            shares: vec![crate::Share {
                device: 1,
                consumed: vec![600],
            }],
        });
        assert_eq!((alloc.room(0), alloc.room(1)), (1000, 400));
        alloc.set_pack_shares(pack);
        let found = alloc.allocate(&[&ask], view).unwrap().unwrap();
        let got: Vec<String> = found[0].allocation.devices.iter().map(shown).collect();
        let want = if pack { "device-2" } else { "device-1" };
        assert_eq!(got, [format!("req-0 pool-1/{want} share capacity-0=300m")]);
    }
}

/// Not upstream's: claims of one search asking different amounts of devices alike (equal
/// capacities) each consume what they ask — what a search keeps of one request's consumption
/// of such a device is not another's — and the second sees what the first took of the device.
#[test]
fn alike_devices_consumed_per_request_in_one_search() {
    let devices = || {
        vec![
            multi(with_capacity(one("device-1"), "capacity-0", "4")),
            multi(with_capacity(one("device-2"), "capacity-0", "4")),
        ]
    };
    assert_eq!(
        shares(devices(), &[Some("1"), Some("3")]),
        results(&[
            &["req-0 pool-1/device-1 share capacity-0=1"],
            &["req-0 pool-1/device-1 share capacity-0=3"],
        ])
    );
    assert_eq!(
        shares(devices(), &[Some("3"), Some("2")]),
        results(&[
            &["req-0 pool-1/device-1 share capacity-0=3"],
            &["req-0 pool-1/device-2 share capacity-0=2"],
        ])
    );
}
