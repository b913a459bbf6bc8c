//! Upstream's allocator cases for exact requests, `All`, admin access, `firstAvailable`,
//! `matchAttribute`, configuration and node selectors (names kept).

use super::*;

#[test]
fn simple() {
    let inv = inventory(classes_ab(), vec![device(DRIVER_A, "pool-1", "device-1")]);
    let (out, allocs) = run_on(
        inv,
        &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])],
        "node-1",
        "region-1",
    );
    assert_eq!(
        out,
        Ok(Some(vec![vec![r("req-0", DRIVER_A, "pool-1", "device-1")]]))
    );
    let alloc = &allocs.unwrap()[0];
    assert_eq!(
        alloc.node().as_deref(),
        Some("node-1"),
        "local devices limit the claim to the node"
    );
}

#[test]
fn other_node() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_B, "pool-1", "device-1"),
            on(
                device(DRIVER_A, "pool-2", "device-1"),
                DeviceNodes::Node(a("node-2")),
            ),
        ],
    );
    let (out, allocs) = run_on(
        inv,
        &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])],
        "node-2",
        "region-2",
    );
    assert_eq!(
        out,
        Ok(Some(vec![vec![r("req-0", DRIVER_A, "pool-2", "device-1")]]))
    );
    assert_eq!(allocs.unwrap()[0].node().as_deref(), Some("node-2"));
}

fn small_and_large_devices() -> Vec<Device> {
    vec![
        memory(device(DRIVER_A, "pool-1", "device-1"), "1Gi"),
        memory(device(DRIVER_A, "pool-1", "device-2"), "2Gi"),
    ]
}

/// The large device first: a search taking the first fit must undo its choice.
fn large_and_small_devices() -> Vec<Device> {
    vec![
        memory(device(DRIVER_A, "pool-1", "device-1"), "2Gi"),
        memory(device(DRIVER_A, "pool-1", "device-2"), "1Gi"),
    ]
}

/// A request for a device of at least 1Gi, then one of at least 2Gi.
fn small_and_large_requests() -> Vec<DeviceRequest> {
    vec![
        with_selector(
            request("req-0", CLASS_A, 1),
            &memory_at_least(DRIVER_A, "1Gi"),
        ),
        with_selector(
            request("req-1", CLASS_A, 1),
            &memory_at_least(DRIVER_A, "2Gi"),
        ),
    ]
}

#[test]
fn small_and_large() {
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], small_and_large_devices());
    let c = claim("claim-0", small_and_large_requests());
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-1"),
            r("req-1", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

#[test]
fn small_and_large_backtrack_requests() {
    // The large device comes first: the small request takes it, the large one fails, and the
    // search must undo the first choice.
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], large_and_small_devices());
    let c = claim("claim-0", small_and_large_requests());
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-2"),
            r("req-1", DRIVER_A, "pool-1", "device-1"),
        ]]))
    );
}

#[test]
fn small_and_large_backtrack_claims() {
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], large_and_small_devices());
    let claims = [
        claim(
            "claim-0",
            vec![with_selector(
                request("req-0", CLASS_A, 1),
                &memory_at_least(DRIVER_A, "1Gi"),
            )],
        ),
        claim(
            "claim-1",
            vec![with_selector(
                request("req-1", CLASS_A, 1),
                &memory_at_least(DRIVER_A, "2Gi"),
            )],
        ),
    ];
    assert_eq!(
        run(inv, &claims),
        Ok(Some(vec![
            vec![r("req-0", DRIVER_A, "pool-1", "device-2")],
            vec![r("req-1", DRIVER_A, "pool-1", "device-1")],
        ]))
    );
}

#[test]
fn devices_split_across_different_slices() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-2", "device-1"),
        ],
    );
    assert_eq!(
        run(inv, &[claim("claim-0", vec![request("req-0", CLASS_A, 2)])]),
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-1"),
            r("req-0", DRIVER_A, "pool-2", "device-1"),
        ]]))
    );
}

#[test]
fn no_slices() {
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], vec![]);
    assert_eq!(
        run(inv, &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])]),
        Ok(None)
    );
}

#[test]
fn not_enough_suitable_devices() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    let claims = [
        claim("claim-0", vec![request("req-0", CLASS_A, 1)]),
        claim("claim-0", vec![request("req-1", CLASS_A, 1)]),
    ];
    assert_eq!(run(inv, &claims), Ok(None));
}

#[test]
fn no_classes_and_unknown_class() {
    let inv = inventory(vec![], vec![device(DRIVER_A, "pool-1", "device-1")]);
    expect_error(
        run(inv, &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])]),
        "could not retrieve device class class-a",
    );
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    expect_error(
        run(
            inv,
            &[claim("claim-0", vec![request("req-0", "unknown-class", 1)])],
        ),
        "could not retrieve device class unknown-class",
    );
}

#[test]
fn empty_class() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    expect_error(
        run(inv, &[claim("claim-0", vec![request("req-0", "", 1)])]),
        "claim default/claim-0, request req-0: missing device class name (unsupported request type?)",
    );
}

#[test]
fn no_claims_to_allocate() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    assert_eq!(run(inv, &[]), Ok(Some(vec![])));
}

#[test]
fn all_devices_single_and_many() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    assert_eq!(
        run(inv, &[claim("claim-0", vec![all("req-0", CLASS_A)])]),
        Ok(Some(vec![vec![r("req-0", DRIVER_A, "pool-1", "device-1")]]))
    );
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-2", "device-1"),
        ],
    );
    assert_eq!(
        run(inv, &[claim("claim-0", vec![all("req-0", CLASS_A)])]),
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-1"),
            r("req-0", DRIVER_A, "pool-2", "device-1"),
        ]]))
    );
}

#[test]
fn all_devices_of_the_incomplete_pool() {
    let mut inv = inventory(vec![class(CLASS_A, DRIVER_A)], vec![]);
    inv.unusable_pools.push(UnusablePool {
        driver: a(DRIVER_A),
        pool: a("pool-1"),
        nodes: vec![DeviceNodes::Node(a("node-1"))],
        invalid: false,
    });
    expect_error(
        run(inv, &[claim("claim-0", vec![all("req-0", CLASS_A)])]),
        "claim default/claim-0, request req-0: asks for all devices, but resource pool driver-a/pool-1 is currently being updated",
    );
}

#[test]
fn all_devices_plus_another_in_both_orders() {
    let devices = || {
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
            device(DRIVER_B, "pool-1", "device-1"),
        ]
    };
    let all_a = || claim("claim-0", vec![all("req-0", CLASS_A)]);
    let one_b = || claim("claim-1", vec![request("req-0", CLASS_B, 1)]);
    assert_eq!(
        run(inventory(classes_ab(), devices()), &[all_a(), one_b()]),
        Ok(Some(vec![
            vec![
                r("req-0", DRIVER_A, "pool-1", "device-1"),
                r("req-0", DRIVER_A, "pool-1", "device-2")
            ],
            vec![r("req-0", DRIVER_B, "pool-1", "device-1")],
        ]))
    );
    assert_eq!(
        run(inventory(classes_ab(), devices()), &[one_b(), all_a()]),
        Ok(Some(vec![
            vec![r("req-0", DRIVER_B, "pool-1", "device-1")],
            vec![
                r("req-0", DRIVER_A, "pool-1", "device-1"),
                r("req-0", DRIVER_A, "pool-1", "device-2")
            ],
        ]))
    );
}

#[test]
fn all_devices_no_solution_in_both_orders() {
    // One device, two claims both trying to allocate it.
    let inv = || {
        inventory(
            vec![class(CLASS_A, DRIVER_A)],
            vec![device(DRIVER_A, "pool-1", "device-1")],
        )
    };
    let one = || claim("claim-1", vec![request("req-0", CLASS_A, 1)]);
    let every = || claim("claim-0", vec![all("req-0", CLASS_A)]);
    assert_eq!(run(inv(), &[one(), every()]), Ok(None));
    assert_eq!(run(inv(), &[every(), one()]), Ok(None));
}

#[test]
fn all_devices_without_devices_or_slices() {
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], vec![]);
    assert_eq!(
        run(inv, &[claim("claim-0", vec![all("req-0", CLASS_A)])]),
        Ok(None)
    );
}

#[test]
fn all_devices_some_allocated() {
    let mut inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
        ],
    );
    allocated(&mut inv, &[(DRIVER_A, "pool-1", "device-1")]);
    assert_eq!(
        run(inv, &[claim("claim-0", vec![all("req-0", CLASS_A)])]),
        Ok(None)
    );
}

#[test]
fn all_devices_some_allocated_admin_access() {
    let mut inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
        ],
    );
    allocated(&mut inv, &[(DRIVER_A, "pool-1", "device-1")]);
    assert_eq!(
        run(inv, &[claim("claim-0", vec![admin(all("req-0", CLASS_A))])]),
        Ok(Some(vec![vec![
            r_admin("req-0", DRIVER_A, "pool-1", "device-1"),
            r_admin("req-0", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

#[test]
fn all_devices_some_allocating_admin_access() {
    // The second request (`All`) cannot be satisfied: the first takes a device in this claim.
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
        ],
    );
    let c = claim(
        "claim-0",
        vec![
            admin(request("req-0", CLASS_A, 1)),
            admin(all("req-1", CLASS_A)),
        ],
    );
    assert_eq!(run(inv, &[c]), Ok(None));
}

#[test]
fn count_devices_some_allocated_admin_access() {
    let mut inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
        ],
    );
    allocated(&mut inv, &[(DRIVER_A, "pool-1", "device-1")]);
    assert_eq!(
        run(
            inv,
            &[claim("claim-0", vec![admin(request("req-0", CLASS_A, 2))])]
        ),
        Ok(Some(vec![vec![
            r_admin("req-0", DRIVER_A, "pool-1", "device-1"),
            r_admin("req-0", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

#[test]
fn separate_claims_share_device_admin_access() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
        ],
    );
    let claims = [
        claim("claim-0", vec![admin(request("req-0", CLASS_A, 1))]),
        claim("claim-1", vec![admin(request("req-0", CLASS_A, 1))]),
    ];
    assert_eq!(
        run(inv, &claims),
        Ok(Some(vec![
            vec![r_admin("req-0", DRIVER_A, "pool-1", "device-1")],
            vec![r_admin("req-0", DRIVER_A, "pool-1", "device-1")],
        ]))
    );
}

#[test]
fn admin_access_claims_device_allocating_for_non_admin_access() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
        ],
    );
    let claims = [
        claim("claim-0", vec![request("req-0", CLASS_A, 1)]),
        claim("claim-1", vec![admin(request("req-0", CLASS_A, 1))]),
    ];
    assert_eq!(
        run(inv, &claims),
        Ok(Some(vec![
            vec![r("req-0", DRIVER_A, "pool-1", "device-1")],
            vec![r_admin("req-0", DRIVER_A, "pool-1", "device-1")],
        ]))
    );
}

#[test]
fn prioritized_list_all_devices_fall_back() {
    // all-devices-slice-without-devices-prioritized-list, all-devices-no-slices-prioritized-list
    // and all-devices-some-allocated-prioritized-list: `All` of class A has nothing (or a
    // device in use), so the second subrequest wins.
    let sub_all = || ExactRequest {
        mode: AllocationMode::All,
        ..exact(CLASS_A, 0)
    };
    let c = || {
        claim(
            "claim-0",
            vec![first_available(
                "req-0",
                vec![("subReq-0", sub_all()), ("subReq-1", exact(CLASS_B, 1))],
            )],
        )
    };
    let want = Ok(Some(vec![vec![r(
        "req-0/subReq-1",
        DRIVER_B,
        "pool-2",
        "device-1",
    )]]));
    let b = || device(DRIVER_B, "pool-2", "device-1");
    assert_eq!(run(inventory(classes_ab(), vec![b()]), &[c()]), want);
    let mut inv = inventory(
        classes_ab(),
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
            b(),
        ],
    );
    allocated(&mut inv, &[(DRIVER_A, "pool-1", "device-1")]);
    assert_eq!(run(inv, &[c()]), want);
}

#[test]
fn network_attached_device() {
    let region = |r: &str| {
        DeviceNodes::Selector(vec![SelectorTerm {
            expressions: vec![Requirement {
                key: "region".into(),
                op: SelectorOp::In,
                values: vec![r.into()],
            }],
            fields: vec![],
        }])
    };
    let inv = || {
        inventory(
            vec![class(CLASS_A, DRIVER_A)],
            vec![on(
                device(DRIVER_A, "pool-1", "device-1"),
                region("region-1"),
            )],
        )
    };
    let c = || claim("claim-0", vec![request("req-0", CLASS_A, 1)]);
    let (out, allocs) = run_on(inv(), &[c()], "node-1", "region-1");
    assert_eq!(
        out,
        Ok(Some(vec![vec![r("req-0", DRIVER_A, "pool-1", "device-1")]]))
    );
    let DeviceNodes::Selector(terms) = region("region-1") else {
        unreachable!()
    };
    assert_eq!(
        allocs.unwrap()[0].node_selector,
        Some(terms),
        "the slice's selector carries over"
    );
    // unsuccessful-allocation-network-attached-device: wrong region.
    assert_eq!(run_on(inv(), &[c()], "node-2", "region-2").0, Ok(None));
}

#[test]
fn many_network_attached_devices_union_their_selectors() {
    let label = |k: &str, v: &str| {
        DeviceNodes::Selector(vec![SelectorTerm {
            expressions: vec![Requirement {
                key: k.into(),
                op: SelectorOp::In,
                values: vec![v.into()],
            }],
            fields: vec![],
        }])
    };
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            on(
                device(DRIVER_A, "pool-1", "device-1"),
                label("region", "region-1"),
            ),
            on(device(DRIVER_A, "pool-2", "device-1"), DeviceNodes::All),
            on(
                device(DRIVER_A, "pool-3", "device-1"),
                label("planet", "earth"),
            ),
        ],
    );
    let (out, allocs) = run_on(
        inv,
        &[claim("claim-0", vec![request("req-0", CLASS_A, 3)])],
        "node-1",
        "region-1",
    );
    assert_eq!(out.unwrap().unwrap()[0].len(), 3);
    let terms = allocs.unwrap()[0].node_selector.clone().unwrap();
    assert_eq!(terms.len(), 1);
    let keys: Vec<&str> = terms[0]
        .expressions
        .iter()
        .map(|e| e.key.as_str())
        .collect();
    assert_eq!(keys, ["region", "planet"]);
}

#[test]
fn local_and_network_attached_devices() {
    // Once there is any node-local device, the selector is for that node.
    let region = DeviceNodes::Selector(vec![SelectorTerm {
        expressions: vec![Requirement {
            key: "region".into(),
            op: SelectorOp::In,
            values: vec!["region-1".into()],
        }],
        fields: vec![],
    }]);
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            on(device(DRIVER_A, "pool-1", "device-1"), region),
            device(DRIVER_A, "pool-2", "device-1"),
        ],
    );
    let (out, allocs) = run_on(
        inv,
        &[claim("claim-0", vec![request("req-0", CLASS_A, 2)])],
        "node-1",
        "region-1",
    );
    assert_eq!(
        out,
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-1"),
            r("req-0", DRIVER_A, "pool-2", "device-1"),
        ]]))
    );
    assert_eq!(allocs.unwrap()[0].node().as_deref(), Some("node-1"));
}

#[test]
fn several_different_drivers() {
    let inv = inventory(
        classes_ab(),
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_A, "pool-1", "device-2"),
            device(DRIVER_B, "pool-1", "device-1"),
        ],
    );
    let claims = [
        claim("claim-0", vec![request("req-0", CLASS_A, 1)]),
        claim("claim-0", vec![request("req-0", CLASS_B, 1)]),
    ];
    assert_eq!(
        run(inv, &claims),
        Ok(Some(vec![
            vec![r("req-0", DRIVER_A, "pool-1", "device-1")],
            vec![r("req-0", DRIVER_B, "pool-1", "device-1")],
        ]))
    );
}

#[test]
fn already_allocated_devices_are_never_reused() {
    let mut inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    allocated(
        &mut inv,
        &[
            (DRIVER_A, "pool-1", "device-1"),
            (DRIVER_A, "pool-1", "device-2"),
        ],
    );
    assert_eq!(
        run(inv, &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])]),
        Ok(None)
    );
}

#[test]
fn admin_access_enabled_uses_a_device_in_use() {
    let mut inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    allocated(
        &mut inv,
        &[
            (DRIVER_A, "pool-1", "device-1"),
            (DRIVER_A, "pool-1", "device-2"),
        ],
    );
    assert_eq!(
        run(
            inv,
            &[claim("claim-0", vec![admin(request("req-0", CLASS_A, 1))])]
        ),
        Ok(Some(vec![vec![r_admin(
            "req-0", DRIVER_A, "pool-1", "device-1"
        )]]))
    );
}

fn attributed(name: &str, version: &str, numa: i64, string: &str, boolean: bool) -> Device {
    let d = device(DRIVER_A, "pool-1", name);
    let d = attr(d, "driverVersion", AttributeValue::Version(a(version)));
    let d = attr(d, "numa", AttributeValue::Int(numa));
    let d = attr(d, "stringAttribute", AttributeValue::String(a(string)));
    attr(d, "boolAttribute", AttributeValue::Bool(boolean))
}

#[test]
fn with_constraint() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            attributed("device-1", "1.0.0", 1, "s", true),
            attributed("device-2", "1.0.0", 1, "s", true),
        ],
    );
    let mut c = claim(
        "claim-0",
        vec![request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1)],
    );
    for attribute in ["numa", "driverVersion", "stringAttribute", "boolAttribute"] {
        c = match_attribute(c, &[], &format!("{DRIVER_A}/{attribute}"));
    }
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-1"),
            r("req-1", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

#[test]
fn with_constraint_non_existent_attribute() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    let c = match_attribute(
        claim("claim-0", vec![request("req-0", CLASS_A, 1)]),
        &[],
        "driver-a/NonExistentAttribute",
    );
    assert_eq!(run(inv, &[c]), Ok(None));
}

#[test]
fn with_constraint_not_matching_attributes() {
    for (attribute, d1, d2) in [
        (
            "numa",
            attributed("device-1", "1.0.0", 1, "s", true),
            attributed("device-2", "1.0.0", 2, "s", true),
        ),
        (
            "stringAttribute",
            attributed("device-1", "1.0.0", 1, "s", true),
            attributed("device-2", "1.0.0", 1, "t", true),
        ),
        (
            "boolAttribute",
            attributed("device-1", "1.0.0", 1, "s", true),
            attributed("device-2", "1.0.0", 1, "s", false),
        ),
        (
            "driverVersion",
            attributed("device-1", "1.0.0", 1, "s", true),
            attributed("device-2", "2.0.0", 1, "s", true),
        ),
    ] {
        let inv = inventory(classes_ab(), vec![d1, d2]);
        let c = match_attribute(
            claim("claim-0", vec![request("req-0", CLASS_A, 2)]),
            &[],
            &format!("{DRIVER_A}/{attribute}"),
        );
        assert_eq!(run(inv, &[c]), Ok(None), "{attribute}");
    }
}

#[test]
fn with_constraint_not_matching_int_attribute_all_devices() {
    let inv = inventory(
        classes_ab(),
        vec![
            attributed("device-1", "1.0.0", 1, "s", true),
            attributed("device-2", "1.0.0", 2, "s", true),
        ],
    );
    let c = match_attribute(
        claim("claim-0", vec![all("req-0", CLASS_A)]),
        &[],
        "driver-a/numa",
    );
    expect_error(
        run(inv, &[c]),
        "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied",
    );
}

#[test]
fn with_constraint_for_request() {
    let inv = inventory(
        classes_ab(),
        vec![
            attributed("device-1", "1.0.0", 1, "s", true),
            attributed("device-2", "2.0.0", 1, "s", true),
        ],
    );
    let c = match_attribute(
        claim(
            "claim-0",
            vec![request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1)],
        ),
        &["req-0"],
        "driver-a/driverVersion",
    );
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-1"),
            r("req-1", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

#[test]
fn with_constraint_for_request_retry() {
    // device-1 does not satisfy the second constraint, so the search must backtrack.
    let inv = inventory(
        classes_ab(),
        vec![
            attributed("device-1", "1.0.0", 1, "a", true),
            attributed("device-2", "2.0.0", 1, "b", true),
            attributed("device-3", "3.0.0", 1, "b", true),
        ],
    );
    let c = claim(
        "claim-0",
        vec![request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1)],
    );
    let c = match_attribute(c, &["req-0"], "driver-a/driverVersion");
    let c = match_attribute(c, &[], "driver-a/stringAttribute");
    // upstream's devices are listed 1, 2, 3 as here.
    let out = run(inv, &[c]);
    assert_eq!(
        out,
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-2"),
            r("req-1", DRIVER_A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn with_class_device_config() {
    let inv = inventory(
        vec![class_with_config(CLASS_A, DRIVER_A, "classAttribute")],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    let (_, allocs) = run_on(
        inv,
        &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])],
        "node-1",
        "region-1",
    );
    let cfg = &allocs.unwrap()[0].config;
    assert_eq!(cfg.len(), 1);
    assert_eq!(cfg[0].source, ConfigSource::Class);
    // The config names every request of the claim, so upstream writes it for all (empty).
    assert!(cfg[0].config.requests.is_empty());
    assert_eq!(
        &*cfg[0].config.parameters,
        r#"{"classAttribute":"classAttributeValue"}"#
    );
}

#[test]
fn with_class_device_config_with_multiple_request_and_configs() {
    let inv = inventory(
        vec![
            class_with_config(CLASS_A, DRIVER_A, "classAttribute-A"),
            class_with_config(CLASS_B, DRIVER_B, "classAttribute-B"),
        ],
        vec![
            device(DRIVER_A, "pool-1", "device-0"),
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_B, "pool-1", "device-1"),
        ],
    );
    let c = claim(
        "claim-0",
        vec![
            request("req-0", CLASS_A, 1),
            request("req-1", CLASS_A, 1),
            request("req-2", CLASS_B, 1),
        ],
    );
    let (out, allocs) = run_on(inv, &[c], "node-1", "region-1");
    assert_eq!(
        out,
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-0"),
            r("req-1", DRIVER_A, "pool-1", "device-1"),
            r("req-2", DRIVER_B, "pool-1", "device-1"),
        ]]))
    );
    let cfg: Vec<(String, Vec<String>)> = allocs.unwrap()[0]
        .config
        .iter()
        .map(|c| {
            (
                c.config.driver.to_string(),
                c.config.requests.iter().map(|r| r.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(
        cfg,
        [
            (
                "driver-a".to_string(),
                vec!["req-0".to_string(), "req-1".to_string()]
            ),
            ("driver-b".to_string(), vec!["req-2".to_string()]),
        ]
    );
}

#[test]
fn claim_with_device_config() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    let mut c = claim("claim-0", vec![request("req-0", CLASS_A, 1)]);
    c.config.push(config(DRIVER_A, "deviceAttribute", &[]));
    let (_, allocs) = run_on(inv, &[c], "node-1", "region-1");
    let cfg = &allocs.unwrap()[0].config;
    assert_eq!(cfg.len(), 1);
    assert_eq!(cfg[0].source, ConfigSource::Claim);
}

#[test]
fn invalid_cel_makes_the_claim_unallocatable_with_the_error() {
    // invalid-CEL-one-device
    let inv = || {
        inventory(
            vec![class(CLASS_A, DRIVER_A)],
            vec![device(DRIVER_A, "pool-1", "device-1")],
        )
    };
    let bad = with_selector(request("req-0", CLASS_A, 1), "noSuchVar");
    expect_error(
        run(inv(), &[claim("claim-0", vec![bad])]),
        "claim default/claim-0: selector #0 on device driver-a/pool-1/device-1: CEL runtime error",
    );
    // invalid-CEL-one-device-class
    let mut c = class(CLASS_A, DRIVER_A);
    c.selectors = vec![a("noSuchVar")];
    let inv2 = inventory(vec![c], vec![device(DRIVER_A, "pool-1", "device-1")]);
    expect_error(
        run(
            inv2,
            &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])],
        ),
        "class class-a: selector #0",
    );
    // invalid-CEL-all-devices
    let mut bad_all = all("req-0", CLASS_A);
    if let RequestKind::Exactly(e) = &mut bad_all.kind {
        e.selectors.push(a("noSuchVar"));
    }
    expect_error(
        run(inv(), &[claim("claim-0", vec![bad_all])]),
        "CEL runtime error",
    );
    // A selector that does not compile names the compile error.
    let broken = with_selector(request("req-0", CLASS_A, 1), "device.driver ==");
    expect_error(
        run(inv(), &[claim("claim-0", vec![broken])]),
        "CEL compile error",
    );
}

#[test]
fn too_many_devices() {
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], vec![]);
    expect_error(
        run(
            inv,
            &[claim("claim-0", vec![request("req-0", CLASS_A, 500)])],
        ),
        "exceeds the claim limit",
    );
    // many-devices-okay: exactly the limit is fine (no devices: simply no solution).
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], vec![]);
    assert_eq!(
        run(
            inv,
            &[claim("claim-0", vec![request("req-0", CLASS_A, 32)])]
        ),
        Ok(None)
    );
    // too-many-devices-total
    let devices = (0..33)
        .map(|i| device(DRIVER_A, "pool-1", &format!("device-{i:02}")))
        .collect();
    let inv = inventory(vec![class(CLASS_A, DRIVER_A)], devices);
    expect_error(
        run(
            inv,
            &[claim(
                "claim-0",
                vec![request("req-0", CLASS_A, 32), request("req-1", CLASS_A, 1)],
            )],
        ),
        "exceeds the claim limit",
    );
}

#[test]
fn prioritized_list_first_unavailable() {
    let inv = inventory(classes_ab(), vec![device(DRIVER_A, "pool-1", "device-1")]);
    let c = claim(
        "claim-0",
        vec![first_available(
            "req-0",
            vec![
                ("subReq-0", exact(CLASS_B, 1)),
                ("subReq-1", exact(CLASS_A, 1)),
            ],
        )],
    );
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![r(
            "req-0/subReq-1",
            DRIVER_A,
            "pool-1",
            "device-1"
        )]]))
    );
}

#[test]
fn prioritized_list_non_available() {
    let inv = inventory(
        classes_ab(),
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_B, "pool-2", "device-1"),
        ],
    );
    let c = claim(
        "claim-0",
        vec![first_available(
            "req-0",
            vec![
                ("subReq-0", exact(CLASS_B, 2)),
                ("subReq-1", exact(CLASS_A, 2)),
            ],
        )],
    );
    assert_eq!(run(inv, &[c]), Ok(None));
}

#[test]
fn prioritized_list_device_and_class_config() {
    let inv = inventory(
        vec![
            class_with_config(CLASS_A, DRIVER_A, "foo"),
            class_with_config(CLASS_B, DRIVER_B, "bar"),
        ],
        vec![
            device(DRIVER_B, "pool-1", "device-1"),
            device(DRIVER_B, "pool-1", "device-2"),
        ],
    );
    let mut c = claim(
        "claim-0",
        vec![first_available(
            "req-0",
            vec![
                ("subReq-0", exact(CLASS_A, 1)),
                ("subReq-1", exact(CLASS_B, 2)),
            ],
        )],
    );
    c.config.push(config(DRIVER_A, "foo", &["req-0/subReq-0"]));
    c.config.push(config(DRIVER_B, "bar", &["req-0/subReq-1"]));
    let (out, allocs) = run_on(inv, &[c], "node-1", "region-1");
    assert_eq!(
        out,
        Ok(Some(vec![vec![
            r("req-0/subReq-1", DRIVER_B, "pool-1", "device-1"),
            r("req-0/subReq-1", DRIVER_B, "pool-1", "device-2"),
        ]]))
    );
    // The chosen subrequest's class config and the claim config naming it; nothing of the
    // subrequest not chosen.
    let cfg: Vec<(ConfigSource, String)> = allocs.unwrap()[0]
        .config
        .iter()
        .map(|c| (c.source, c.config.driver.to_string()))
        .collect();
    assert_eq!(
        cfg,
        [
            (ConfigSource::Class, "driver-b".to_string()),
            (ConfigSource::Claim, "driver-b".to_string())
        ]
    );
}

#[test]
fn prioritized_list_subrequests_with_expressions() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![
            memory(device(DRIVER_A, "pool-1", "device-1"), "2Gi"),
            memory(device(DRIVER_A, "pool-1", "device-2"), "2Gi"),
            memory(device(DRIVER_A, "pool-1", "device-3"), "1Gi"),
        ],
    );
    let sub = |gi: &str, n| ExactRequest {
        selectors: vec![memory_at_least(DRIVER_A, gi)],
        ..exact(CLASS_A, n)
    };
    let c = claim(
        "claim-0",
        vec![
            with_selector(
                request("req-0", CLASS_A, 1),
                &memory_at_least(DRIVER_A, "1Gi"),
            ),
            first_available(
                "req-1",
                vec![("subReq-0", sub("4Gi", 1)), ("subReq-1", sub("2Gi", 2))],
            ),
        ],
    );
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", DRIVER_A, "pool-1", "device-3"),
            r("req-1/subReq-1", DRIVER_A, "pool-1", "device-1"),
            r("req-1/subReq-1", DRIVER_A, "pool-1", "device-2"),
        ]]))
    );
}

#[test]
fn prioritized_list_subrequests_with_constraints_ref_parent_and_sub_request() {
    let dev = |name: &str, gi: &str, v: &str| {
        attr(
            memory(device(DRIVER_A, "pool-1", name), gi),
            "driverVersion",
            AttributeValue::Version(a(v)),
        )
    };
    let inv = || {
        inventory(
            vec![class(CLASS_A, DRIVER_A)],
            vec![
                dev("device-1", "8Gi", "1.0.0"),
                dev("device-2", "2Gi", "2.0.0"),
                dev("device-3", "1Gi", "1.0.0"),
            ],
        )
    };
    let sub = |gi: &str| ExactRequest {
        selectors: vec![memory_at_least(DRIVER_A, gi)],
        ..exact(CLASS_A, 1)
    };
    let mk = |refs: &[&str]| {
        match_attribute(
            claim(
                "claim-0",
                vec![
                    with_selector(
                        request("req-0", CLASS_A, 1),
                        &memory_at_least(DRIVER_A, "8Gi"),
                    ),
                    first_available(
                        "req-1",
                        vec![("subReq-0", sub("2Gi")), ("subReq-1", sub("1Gi"))],
                    ),
                ],
            ),
            refs,
            "driver-a/driverVersion",
        )
    };
    // device-2 (2Gi) has another version, so the 2Gi subrequest cannot be used: the 1Gi one
    // takes device-3.
    let want = Ok(Some(vec![vec![
        r("req-0", DRIVER_A, "pool-1", "device-1"),
        r("req-1/subReq-1", DRIVER_A, "pool-1", "device-3"),
    ]]));
    assert_eq!(run(inv(), &[mk(&["req-0", "req-1"])]), want);
    assert_eq!(
        run(inv(), &[mk(&["req-0", "req-1/subReq-0", "req-1/subReq-1"])]),
        want
    );
}

#[test]
fn prioritized_list_with_backtracking_across_claims() {
    // The first claim's first choice leaves the second claim nothing; its second subrequest
    // works for both.
    let inv = inventory(
        classes_ab(),
        vec![
            device(DRIVER_A, "pool-1", "device-1"),
            device(DRIVER_B, "pool-1", "device-1"),
        ],
    );
    let claims = [
        claim(
            "claim-0",
            vec![first_available(
                "req-0",
                vec![
                    ("subReq-0", exact(CLASS_A, 1)),
                    ("subReq-1", exact(CLASS_B, 1)),
                ],
            )],
        ),
        claim("claim-1", vec![request("req-0", CLASS_A, 1)]),
    ];
    assert_eq!(
        run(inv, &claims),
        Ok(Some(vec![
            vec![r("req-0/subReq-1", DRIVER_B, "pool-1", "device-1")],
            vec![r("req-0", DRIVER_A, "pool-1", "device-1")],
        ]))
    );
}

#[test]
fn invalid_pool_is_an_error_only_without_a_solution() {
    let mut inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-2", "device-1")],
    );
    inv.unusable_pools.push(UnusablePool {
        driver: a(DRIVER_A),
        pool: a("pool-1"),
        nodes: vec![DeviceNodes::Node(a("node-1"))],
        invalid: true,
    });
    let one = || claim("claim-0", vec![request("req-0", CLASS_A, 1)]);
    assert!(matches!(run(inv.clone(), &[one()]), Ok(Some(_))));
    expect_error(
        run(inv, &[claim("claim-0", vec![request("req-0", CLASS_A, 2)])]),
        "invalid resource pools were encountered",
    );
}

#[test]
fn take_and_release_follow_placements() {
    let inv = inventory(
        vec![class(CLASS_A, DRIVER_A)],
        vec![device(DRIVER_A, "pool-1", "device-1")],
    );
    let mut alloc = Allocator::new(inv);
    let l = labels("region-1");
    let node = NodeView {
        name: "node-1",
        labels: &l,
    };
    let c = claim("claim-0", vec![request("req-0", CLASS_A, 1)]);
    let found = alloc.allocate(&[&c], node).unwrap().unwrap();
    alloc.take(&found[0].hold);
    assert!(alloc.in_use(0));
    assert_eq!(alloc.usage(node)[0].used, 1);
    assert_eq!(alloc.allocate(&[&c], node), Ok(None), "{CANNOT_ALLOCATE}");
    alloc.release(&found[0].hold);
    assert!(alloc.allocate(&[&c], node).unwrap().is_some());
}

#[test]
fn the_bridge_serves_extended_resources_the_node_lacks() {
    let mut gpu = class("gpu.nvidia.com", "gpu.nvidia.com");
    gpu.extended_resource_name = Some(a("nvidia.com/gpu"));
    let inv = inventory(
        vec![gpu],
        (0..2)
            .map(|i| device("gpu.nvidia.com", "node-1", &format!("gpu-{i}")))
            .collect(),
    );
    let ext = [
        ExtendedRequest {
            container: a("main"),
            resource: a("nvidia.com/gpu"),
            count: 2,
        },
        ExtendedRequest {
            container: a("main"),
            resource: a("example.com/foo"),
            count: 1,
        },
    ];
    let (c, mappings) = crate::extended_claim(&inv, &a("default"), "p", &ext, |_| false).unwrap();
    assert_eq!(mappings.len(), 1, "only resources a class serves");
    assert_eq!(&*mappings[0].request, "container-0-request-0");
    assert!(
        crate::extended_claim(&inv, &a("default"), "p", &ext, |r| r == "nvidia.com/gpu").is_none(),
        "a node listing the resource serves it itself"
    );
    let (out, _) = run_on(inv, &[c], "node-1", "region-1");
    assert_eq!(out.unwrap().unwrap()[0].len(), 2);
}
