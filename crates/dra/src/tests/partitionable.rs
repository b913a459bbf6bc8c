//! Upstream's cases for partitionable devices (KEP-4815: counter sets of a pool and the
//! counters devices draw from them), alone and with consumable capacity, names kept. The
//! counter sets of upstream's extra ResourceSlices are the inventory's `counter_sets` here (the
//! cache assembles them from a pool's slices). The cases about how pools are checked (a counter
//! set name twice, an unknown counter set or counter, a counter set of another pool) are the
//! cache's and ported there (`caldera_cache::dra`); the `*-disabled-*` and binding-condition
//! cases are not ported (no feature gates; binding conditions are refused).

use super::*;

const A: &str = DRIVER_A;

fn one(name: &str) -> Device {
    device(A, "pool-1", name)
}

fn capacity_at_least(q: &str) -> ExactRequest {
    ExactRequest {
        selectors: vec![memory_at_least(A, q)],
        ..exact(CLASS_A, 1)
    }
}

/// device-1, device-2, device-3 drawing 4Gi, 6Gi, 4Gi of `memory` from counter-set-1 (8Gi).
fn three_partitions(shared: bool) -> DeviceInventory {
    let part = |name: &str, q: &str| {
        let d = from_counters(consumes(one(name), "counter-set-1", &[("memory", q)]));
        if shared {
            multi(d)
        } else {
            d
        }
    };
    let class = if shared {
        multi_class(CLASS_A, A, true)
    } else {
        class(CLASS_A, A)
    };
    with_counter_sets(
        inventory(
            vec![class],
            vec![
                part("device-1", "4Gi"),
                part("device-2", "6Gi"),
                part("device-3", "4Gi"),
            ],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("memory", "8Gi")],
        )],
    )
}

fn prefer_6gi_then_4gi() -> DeviceRequest {
    first_available(
        "req-1",
        vec![
            ("subReq-0", capacity_at_least("6Gi")),
            ("subReq-1", capacity_at_least("4Gi")),
        ],
    )
}

/// claim-0 with requests req-0 and req-1, one device each.
fn two_requests() -> Claim {
    claim(
        "claim-0",
        vec![request("req-0", CLASS_A, 1), request("req-1", CLASS_A, 1)],
    )
}

/// device-1 drawing 4Gi of `memory` from counter-set-1 (8Gi).
fn one_partition() -> DeviceInventory {
    with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![consumes(
                one("device-1"),
                "counter-set-1",
                &[("memory", "4Gi")],
            )],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("memory", "8Gi")],
        )],
    )
}

#[test]
fn all_devices_with_consumed_counters() {
    let inv = one_partition();
    assert_eq!(
        run(inv, &[claim("claim-0", vec![all("req-0", CLASS_A)])]),
        Ok(Some(vec![vec![r("req-0", A, "pool-1", "device-1")]]))
    );
}

#[test]
fn partitionable_devices_single_device() {
    let inv = one_partition();
    let (out, allocs) = run_on(
        inv,
        &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])],
        "node-1",
        "region-1",
    );
    assert_eq!(
        out,
        Ok(Some(vec![vec![r("req-0", A, "pool-1", "device-1")]]))
    );
    assert_eq!(allocs.unwrap()[0].node().as_deref(), Some("node-1"));
}

#[test]
fn partitionable_devices_prioritized_list() {
    // device-1 (4Gi) for req-0 leaves 4Gi: device-2 (6Gi) would overdraw, so req-1 falls back
    // to its 4Gi subrequest and device-3.
    let c = claim(
        "claim-0",
        vec![request("req-0", CLASS_A, 1), prefer_6gi_then_4gi()],
    );
    assert_eq!(
        run(three_partitions(false), &[c]),
        Ok(Some(vec![vec![
            r("req-0", A, "pool-1", "device-1"),
            r("req-1/subReq-1", A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_multiple_devices() {
    let c = two_requests();
    assert_eq!(
        run(three_partitions(false), &[c]),
        Ok(Some(vec![vec![
            r("req-0", A, "pool-1", "device-1"),
            r("req-1", A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_multiple_capacity_pools() {
    let part = |name: &str, memory: &str, cpus: &str| {
        let d = consumes(one(name), "counter-set-1", &[("memory", memory)]);
        from_counters(consumes(d, "counter-set-2", &[("cpus", cpus)]))
    };
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                part("device-1", "4Gi", "4"),
                part("device-2", "6Gi", "6"),
                part("device-3", "4Gi", "4"),
            ],
        ),
        vec![
            counter_set(A, "pool-1", "counter-set-1", &[("memory", "18Gi")]),
            counter_set(A, "pool-1", "counter-set-2", &[("cpus", "8")]),
        ],
    );
    let c = claim(
        "claim-0",
        vec![request("req-0", CLASS_A, 1), prefer_6gi_then_4gi()],
    );
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", A, "pool-1", "device-1"),
            r("req-1/subReq-1", A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_multiple_counters() {
    let part = |name: &str, one_: [&str; 2], two: [&str; 2]| {
        let d = consumes(
            one(name),
            "counter-set-1",
            &[("memory", one_[0]), ("cpus", one_[1])],
        );
        from_counters(consumes(
            d,
            "counter-set-2",
            &[("cpus", two[0]), ("memory", two[1])],
        ))
    };
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                part("device-1", ["4Gi", "6"], ["4", "2Gi"]),
                part("device-2", ["6Gi", "4"], ["6", "6Gi"]),
                part("device-3", ["4Gi", "4"], ["4", "4Gi"]),
            ],
        ),
        vec![
            counter_set(
                A,
                "pool-1",
                "counter-set-1",
                &[("cpus", "8"), ("memory", "18Gi")],
            ),
            counter_set(
                A,
                "pool-1",
                "counter-set-2",
                &[("cpus", "12"), ("memory", "18Gi")],
            ),
        ],
    );
    let c = two_requests();
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", A, "pool-1", "device-2"),
            r("req-1", A, "pool-1", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_multiple_pools() {
    let part = |pool: &str, name: &str, cpus: &str, memory: &str| {
        from_counters(consumes(
            device(A, pool, name),
            "counter-set-1",
            &[("cpus", cpus), ("memory", memory)],
        ))
    };
    let mut inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                part("pool-1", "device-1", "6", "4Gi"),
                part("pool-1", "device-2", "4", "6Gi"),
                part("pool-1", "device-3", "4", "4Gi"),
                part("pool-2", "device-1", "6", "4Gi"),
                part("pool-2", "device-2", "1", "7Gi"),
                part("pool-2", "device-3", "1", "7Gi"),
            ],
        ),
        ["pool-1", "pool-2"]
            .into_iter()
            .map(|p| counter_set(A, p, "counter-set-1", &[("cpus", "8"), ("memory", "18Gi")]))
            .collect(),
    );
    allocated(
        &mut inv,
        &[
            (A, "pool-1", "device-2"),
            (A, "pool-1", "device-3"),
            (A, "pool-2", "device-1"),
        ],
    );
    let c = two_requests();
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", A, "pool-2", "device-2"),
            r("req-1", A, "pool-2", "device-3"),
        ]]))
    );
}

#[test]
fn partitionable_devices_unused_counters_in_counter_set() {
    let part = |name: &str, q: &str| consumes(one(name), "counter-set-1", &[("memory", q)]);
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                part("device-1", "5Gi"),
                part("device-2", "4Gi"),
                part("device-3", "4Gi"),
            ],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("memory", "8Gi"), ("unused", "1Gi")],
        )],
    );
    assert_eq!(
        run(inv, &[claim("claim-0", vec![request("req-0", CLASS_A, 2)])]),
        Ok(Some(vec![vec![
            r("req-0", A, "pool-1", "device-2"),
            r("req-0", A, "pool-1", "device-3"),
        ]]))
    );
}

fn one_left_after(second: &str) -> DeviceInventory {
    let part =
        |name: &str, q: &str| from_counters(consumes(one(name), "counter-set-1", &[("memory", q)]));
    let mut inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![part("device-1", "4Gi"), part("device-2", second)],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("memory", "18Gi")],
        )],
    );
    allocated(&mut inv, &[(A, "pool-1", "device-2")]);
    inv
}

#[test]
fn partitionable_devices_no_capacity_available() {
    let c = claim("claim-0", vec![request("req-0", CLASS_A, 1)]);
    assert_eq!(run(one_left_after("16Gi"), &[c]), Ok(None));
}

#[test]
fn partitionable_devices_overallocated_capacity_pool() {
    let c = claim("claim-0", vec![request("req-0", CLASS_A, 1)]);
    assert_eq!(run(one_left_after("20Gi"), &[c]), Ok(None));
}

#[test]
fn partitionable_devices_per_device_node_selection_nodename() {
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                from_counters(consumes(
                    one("device-1"),
                    "counter-set-1",
                    &[("memory", "4Gi")],
                )),
                on(
                    from_counters(consumes(
                        one("device-2"),
                        "counter-set-1",
                        &[("memory", "6Gi")],
                    )),
                    DeviceNodes::Node(a("node-2")),
                ),
            ],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("memory", "18Gi")],
        )],
    );
    let c = claim(
        "claim-0",
        vec![first_available(
            "req-0",
            vec![
                ("subReq-0", capacity_at_least("6Gi")),
                ("subReq-1", capacity_at_least("4Gi")),
            ],
        )],
    );
    let (out, allocs) = run_on(inv, &[c], "node-1", "region-1");
    assert_eq!(
        out,
        Ok(Some(vec![vec![r(
            "req-0/subReq-1",
            A,
            "pool-1",
            "device-1"
        )]]))
    );
    assert_eq!(allocs.unwrap()[0].node().as_deref(), Some("node-1"));
}

fn region(value: &str) -> DeviceNodes {
    DeviceNodes::Selector(vec![SelectorTerm {
        expressions: vec![Requirement {
            key: "region".into(),
            op: SelectorOp::In,
            values: vec![value.into()],
        }],
        fields: Vec::new(),
    }])
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector() {
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![on(
                from_counters(consumes(
                    one("device-1"),
                    "counter-set-1",
                    &[("memory", "4Gi")],
                )),
                region("region-1"),
            )],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("memory", "18Gi")],
        )],
    );
    let (out, allocs) = run_on(
        inv,
        &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])],
        "node-1",
        "region-1",
    );
    assert_eq!(
        out,
        Ok(Some(vec![vec![r("req-0", A, "pool-1", "device-1")]]))
    );
    let DeviceNodes::Selector(want) = region("region-1") else {
        unreachable!("region() is a selector")
    };
    assert_eq!(allocs.unwrap()[0].node_selector, Some(want));
}

#[test]
fn partitionable_devices_per_device_node_selection_node_selector_multiple_devices() {
    let part = |driver: &str, pool: &str, set: &str, name: &str, nodes: DeviceNodes| {
        on(
            from_counters(consumes(
                device(driver, pool, name),
                set,
                &[("memory", "4Gi")],
            )),
            nodes,
        )
    };
    let inv = with_counter_sets(
        inventory(
            classes_ab(),
            vec![
                part(A, "pool-1", "counter-set-1", "device-1", region("region-1")),
                part(
                    A,
                    "pool-1",
                    "counter-set-1",
                    "device-2",
                    DeviceNodes::Node(a("node-1")),
                ),
                part(A, "pool-1", "counter-set-1", "device-3", DeviceNodes::All),
                part(
                    DRIVER_B,
                    "pool-2",
                    "counter-set-2",
                    "device-1",
                    DeviceNodes::Node(a("node-1")),
                ),
                part(
                    DRIVER_B,
                    "pool-2",
                    "counter-set-2",
                    "device-2",
                    DeviceNodes::Node(a("node-1")),
                ),
                part(
                    DRIVER_B,
                    "pool-2",
                    "counter-set-2",
                    "device-3",
                    DeviceNodes::Node(a("node-1")),
                ),
            ],
        ),
        vec![
            counter_set(A, "pool-1", "counter-set-1", &[("memory", "18Gi")]),
            counter_set(DRIVER_B, "pool-2", "counter-set-2", &[("memory", "12Gi")]),
        ],
    );
    let c = claim(
        "claim-0",
        vec![request("req-0", CLASS_A, 3), request("req-1", CLASS_B, 3)],
    );
    let (out, allocs) = run_on(inv, &[c], "node-1", "region-1");
    assert_eq!(
        out,
        Ok(Some(vec![vec![
            r("req-0", A, "pool-1", "device-1"),
            r("req-0", A, "pool-1", "device-2"),
            r("req-0", A, "pool-1", "device-3"),
            r("req-1", DRIVER_B, "pool-2", "device-1"),
            r("req-1", DRIVER_B, "pool-2", "device-2"),
            r("req-1", DRIVER_B, "pool-2", "device-3"),
        ]]))
    );
    assert_eq!(allocs.unwrap()[0].node().as_deref(), Some("node-1"));
}

#[test]
fn partitionable_devices_with_attribute_selector() {
    let part = |name: &str, special: bool, cpu: &str| {
        let d = attr(one(name), "special", AttributeValue::Bool(special));
        let d = consumes(d, "counter-set-1", &[(cpu, "1")]);
        consumes(d, "counter-set-2", &[("mem", "10Gi")])
    };
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                part("device-1", true, "cpu1"),
                part("device-2", false, "cpu2"),
                part("device-3", false, "cpu3"),
            ],
        ),
        vec![
            counter_set(
                A,
                "pool-1",
                "counter-set-1",
                &[("cpu1", "1"), ("cpu2", "1"), ("cpu3", "1")],
            ),
            counter_set(A, "pool-1", "counter-set-2", &[("mem", "30Gi")]),
        ],
    );
    let c = claim(
        "claim-0",
        vec![
            request("req-0", CLASS_A, 2),
            with_selector(
                request("req-1", CLASS_A, 1),
                r#"device.attributes["driver-a"].special"#,
            ),
        ],
    );
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![
            r("req-0", A, "pool-1", "device-2"),
            r("req-0", A, "pool-1", "device-3"),
            r("req-1", A, "pool-1", "device-1"),
        ]]))
    );
}

#[test]
fn partitionable_devices_devices_on_different_nodes_consume_same_counter_set() {
    // device-3 on node-2 is allocated and draws 6Gi of the pool's 8Gi: on node-1 only the 2Gi
    // device fits.
    let mut inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                from_counters(consumes(
                    one("device-1"),
                    "counter-set-1",
                    &[("memory", "6Gi")],
                )),
                from_counters(consumes(
                    one("device-2"),
                    "counter-set-1",
                    &[("memory", "2Gi")],
                )),
                on(
                    consumes(one("device-3"), "counter-set-1", &[("memory", "6Gi")]),
                    DeviceNodes::Node(a("node-2")),
                ),
            ],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("memory", "8Gi")],
        )],
    );
    allocated(&mut inv, &[(A, "pool-1", "device-3")]);
    let c = claim(
        "claim-0",
        vec![first_available(
            "req-0",
            vec![
                ("subReq-0", capacity_at_least("6Gi")),
                ("subReq-1", capacity_at_least("2Gi")),
            ],
        )],
    );
    assert_eq!(
        run(inv, &[c]),
        Ok(Some(vec![vec![r(
            "req-0/subReq-1",
            A,
            "pool-1",
            "device-2"
        )]]))
    );
}

#[test]
fn allow_multiple_allocations_with_partitionable_device() {
    // Shared partitions: each consumes all of its capacity (no request, no policy), and the
    // counters are drawn once per device in use.
    let c = claim(
        "claim-0",
        vec![request("req-0", CLASS_A, 1), prefer_6gi_then_4gi()],
    );
    assert_eq!(
        run_shown(three_partitions(true), &[c]),
        results(&[&[
            "req-0 pool-1/device-1 share memory=4Gi",
            "req-1/subReq-1 pool-1/device-3 share memory=4Gi",
        ]])
    );
}

#[test]
fn allow_multiple_allocations_with_shared_device_counter_cross_cycle() {
    // device-1 (mode a) has a share allocated in an earlier cycle and drew the counter set's
    // only unit: device-2 (mode b) cannot draw it.
    let part = |name: &str, mode: &str| {
        let d = attr(one(name), "mode", AttributeValue::String(a(mode)));
        multi(from_counters(consumes(
            d,
            "counter-set-1",
            &[("capacity-0", "1")],
        )))
    };
    let mut inv = with_counter_sets(
        inventory(
            vec![multi_class(CLASS_A, A, true)],
            vec![part("device-1", "a"), part("device-2", "b")],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "counter-set-1",
            &[("capacity-0", "1")],
        )],
    );
    allocated_shares(
        &mut inv,
        &[(A, "pool-1", "device-1", &[("capacity-0", "1")])],
    );
    let c = claim(
        "claim-0",
        vec![asking(
            with_selector(
                request("req-0", CLASS_A, 1),
                r#"device.attributes["driver-a"].mode == "b""#,
            ),
            "1",
        )],
    );
    assert_eq!(run_shown(inv, &[c]), Ok(None));
}

#[test]
fn consumable_capacity_with_partitionable_device_multiple_capacity_pools() {
    // Counter sets (capacity-0: 4, capacity-1: 8); device-1, device-2, device-3 draw (2, 4),
    // (4, 4), (2, 4): only [device-1, device-3] or [device-2] fit together. capacity-1 is
    // consumed by the range policy (min 2, step 2, max 4).
    let part = |name: &str, c0: &str| {
        let d = consumes(one(name), "counter-set-1", &[("capacity-0", c0)]);
        let d = from_counters(consumes(d, "counter-set-2", &[("capacity-1", "4")]));
        multi(range_policy(d, "capacity-1", "4"))
    };
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                part("device-1", "2"),
                part("device-2", "4"),
                part("device-3", "2"),
            ],
        ),
        vec![
            counter_set(A, "pool-1", "counter-set-1", &[("capacity-0", "4")]),
            counter_set(A, "pool-1", "counter-set-2", &[("capacity-1", "8")]),
        ],
    );
    let at_least = |q: &str| ExactRequest {
        selectors: vec![a(&format!(
            r#"device.capacity["driver-a"]["capacity-0"].compareTo(quantity("{q}")) >= 0"#
        ))],
        ..asking_exact(exact(CLASS_A, 1), "1")
    };
    let c = claim(
        "claim-0",
        vec![
            asking(request("req-0", CLASS_A, 1), "1"),
            asking(request("req-2", CLASS_A, 1), "2"),
            first_available(
                "req-1",
                vec![("subReq-0", at_least("4")), ("subReq-1", at_least("2"))],
            ),
        ],
    );
    assert_eq!(
        run_shown(inv, &[c]),
        results(&[&[
            "req-0 pool-1/device-1 share capacity-0=1 capacity-1=2",
            "req-2 pool-1/device-3 share capacity-0=2 capacity-1=2",
            "req-1/subReq-1 pool-1/device-1 share capacity-0=1 capacity-1=2",
        ]])
    );
}

#[test]
fn a_whole_gpu_and_its_partitions_exclude_each_other() {
    // Not an upstream case: MIG as a driver publishes it. gpu-0 draws all 8 memory slices and
    // 7 compute slices; 1g.10gb draws 1 and 1, 3g.40gb 4 and 3.
    let gpu = |name: &str, memory: &str, compute: &str| {
        consumes(
            one(name),
            "gpu-0",
            &[("memory-slices", memory), ("compute-slices", compute)],
        )
    };
    let inv = with_counter_sets(
        inventory(
            vec![class(CLASS_A, A)],
            vec![
                gpu("gpu-0", "8", "7"),
                gpu("gpu-0-mig-1g-0", "1", "1"),
                gpu("gpu-0-mig-1g-1", "1", "1"),
                gpu("gpu-0-mig-3g-0", "4", "3"),
                gpu("gpu-0-mig-3g-1", "4", "3"),
            ],
        ),
        vec![counter_set(
            A,
            "pool-1",
            "gpu-0",
            &[("memory-slices", "8"), ("compute-slices", "7")],
        )],
    );
    let whole = |c: &str| {
        claim(
            c,
            vec![with_selector(
                request("gpu", CLASS_A, 1),
                r#"device.attributes["driver-a"].whole"#,
            )],
        )
    };
    let mut inv_whole = inv.clone();
    inv_whole.devices[0] = attr(
        inv_whole.devices[0].clone(),
        "whole",
        AttributeValue::Bool(true),
    );
    for d in &mut inv_whole.devices[1..] {
        *d = attr(d.clone(), "whole", AttributeValue::Bool(false));
    }
    // A 1g partition allocated: the whole GPU is refused.
    let mut with_part = inv_whole.clone();
    allocated(&mut with_part, &[(A, "pool-1", "gpu-0-mig-1g-0")]);
    assert_eq!(run(with_part, &[whole("claim-0")]), Ok(None));
    // The whole GPU allocated: no partition fits.
    let mut with_whole = inv.clone();
    allocated(&mut with_whole, &[(A, "pool-1", "gpu-0")]);
    assert_eq!(
        run(
            with_whole,
            &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])]
        ),
        Ok(None)
    );
    // Two 3g partitions take every memory slice: a 1g one more does not fit.
    let mut two_3g = inv;
    allocated(
        &mut two_3g,
        &[
            (A, "pool-1", "gpu-0-mig-3g-0"),
            (A, "pool-1", "gpu-0-mig-3g-1"),
        ],
    );
    assert_eq!(
        run(
            two_3g,
            &[claim("claim-0", vec![request("req-0", CLASS_A, 1)])]
        ),
        Ok(None)
    );
}
