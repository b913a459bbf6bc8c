//! The conversions of `resource.k8s.io/v1` objects, pool assembly (generations, counter sets)
//! and the resolution of a pod's claims, with small objects and no cluster.

use super::*;
use crate::tests::merge;
use crate::{ClusterIndex, SnapshotOptions};
use caldera_model::{Snapshot, Task};
use serde_json::{json, Value};

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("test object")
}

fn gpu_slice(
    name: &str,
    node: &str,
    generation: i64,
    count: i64,
    devices: &[&str],
) -> api::ResourceSlice {
    let devices: Vec<Value> = devices
        .iter()
        .map(|d| {
            json!({"name": d,
                "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"},
                               "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
                               "index": {"int": 0}, "driverVersion": {"version": "550.54.15"}},
                "capacity": {"memory": {"value": "80Gi"}}})
        })
        .collect();
    obj(json!({"metadata": {"name": name},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                 "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
                 "devices": devices}}))
}

fn gpu_class() -> api::DeviceClass {
    obj(
        json!({"metadata": {"name": "gpu.nvidia.com", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.nvidia.com\""}}],
                 "extendedResourceName": "nvidia.com/gpu",
                 "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"sharing": "none"}}}]}}),
    )
}

fn rc(name: &str, patch: Value) -> api::ResourceClaim {
    let mut v = json!({"metadata": {"namespace": "default", "name": name, "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}});
    merge(&mut v, patch);
    obj(v)
}

fn pod(name: &str, patch: Value) -> Pod {
    let mut v = json!({"metadata": {"namespace": "default", "name": name, "uid": format!("uid-{name}")},
        "spec": {"schedulerName": "caldera", "containers": [{"name": "main"}]}});
    merge(&mut v, patch);
    obj(v)
}

fn snap(index: &ClusterIndex) -> Snapshot {
    index.snapshot(&SnapshotOptions::default())
}

fn task<'a>(s: &'a Snapshot, name: &str) -> &'a Task {
    s.tasks.iter().find(|t| &*t.name == name).expect("task")
}

#[test]
fn a_slice_becomes_devices_with_qualified_attributes_and_capacity() {
    let s = slice(&gpu_slice("a-gpus", "node-a", 1, 1, &["gpu-0"])).unwrap();
    assert_eq!(s.nodes, DeviceNodes::Node("node-a".into()));
    let d = &s.devices[0];
    assert_eq!(d.id(), "gpu.nvidia.com/node-a/gpu-0");
    assert_eq!(
        d.attributes.get("gpu.nvidia.com/productName"),
        Some(&AttributeValue::String("NVIDIA H100 80GB HBM3".into()))
    );
    assert_eq!(
        d.attributes.get("resource.kubernetes.io/pcieRoot"),
        Some(&AttributeValue::String("pci0000:00".into())),
        "a qualified name keeps its own domain"
    );
    assert_eq!(
        d.attributes.get("gpu.nvidia.com/driverVersion"),
        Some(&AttributeValue::Version("550.54.15".into()))
    );
    let mem = d.capacity.get("gpu.nvidia.com/memory").unwrap();
    assert_eq!(mem.milli, 80 * (1i64 << 30) * 1000);
    assert!(d.unsupported.is_none());
}

#[test]
fn devices_using_inputs_caldera_does_not_evaluate_are_never_usable() {
    let v = json!({"metadata": {"name": "s"},
        "spec": {"driver": "d", "allNodes": true, "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                 "devices": [
                    {"name": "tainted", "taints": [{"key": "k", "effect": "NoSchedule"}]},
                    {"name": "informational", "taints": [{"key": "k", "effect": "None"}]},
                    {"name": "list", "attributes": {"ids": {"ints": [1, 2]}}},
                    {"name": "bound", "bindsToNode": true},
                    {"name": "shared", "allowMultipleAllocations": true},
                    {"name": "partition", "consumesCounters": [{"counterSet": "c", "counters": {}}]}]}});
    let s = slice(&obj(v)).unwrap();
    let why: Vec<(&str, bool)> = s
        .devices
        .iter()
        .map(|d| (&*d.name, d.unsupported.is_some()))
        .collect();
    assert_eq!(
        why,
        [
            ("tainted", true),
            ("informational", false),
            ("list", true),
            ("bound", true),
            ("shared", false),
            ("partition", false)
        ]
    );
    assert_eq!(s.nodes, DeviceNodes::All);
}

#[test]
fn shared_devices_keep_their_policy_and_partitions_their_counters() {
    let v = json!({"metadata": {"name": "s"},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
                 "devices": [
                    {"name": "gpu-0", "allowMultipleAllocations": true, "capacity": {
                        "memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi",
                            "validRange": {"min": "10Gi", "step": "10Gi"}}},
                        "cores": {"value": "100", "requestPolicy": {"default": "0", "validValues": ["0", "50", "100"]}}}},
                    {"name": "gpu-0-mig-1g", "consumesCounters": [
                        {"counterSet": "gpu-0-slices", "counters": {"memory": {"value": "1"}}}]}]}});
    let s = slice(&obj(v)).unwrap();
    let gpu = &s.devices[0];
    assert!(gpu.shared);
    let memory = &gpu.capacity["gpu.nvidia.com/memory"];
    assert_eq!(&*memory.name, "memory", "the name as the slice wrote it");
    let policy = memory.policy.as_ref().unwrap();
    assert_eq!(policy.default.as_ref().map(|q| &*q.text), Some("10Gi"));
    assert_eq!(
        policy
            .valid_range
            .as_ref()
            .and_then(|r| r.step.as_ref())
            .map(|q| q.milli),
        Some(10 * (1i64 << 30) * 1000)
    );
    let cores = gpu.capacity["gpu.nvidia.com/cores"]
        .policy
        .as_ref()
        .unwrap();
    assert_eq!(cores.valid_values.len(), 3);
    let mig = &s.devices[1];
    assert!(!mig.shared && mig.unsupported.is_none());
    assert_eq!(&*mig.consumes[0].counter_set, "gpu-0-slices");
    assert_eq!(mig.consumes[0].counters["memory"].milli, 1000);
}

#[test]
fn slice_inputs_kube_apiserver_would_refuse_are_errors_naming_the_field() {
    let base = |devices: Value, counters: Value| {
        obj::<api::ResourceSlice>(json!({"metadata": {"name": "s"},
            "spec": {"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                     "devices": devices, "sharedCounters": counters}}))
    };
    let both = base(
        json!([{"name": "x"}]),
        json!([{"name": "c", "counters": {"m": {"value": "1"}}}]),
    );
    assert_eq!(slice(&both).unwrap_err().field, "spec.sharedCounters");
    let policy_unshared = base(
        json!([{"name": "x", "capacity": {"m": {"value": "2", "requestPolicy": {"default": "1"}}}}]),
        Value::Null,
    );
    assert_eq!(
        slice(&policy_unshared).unwrap_err().field,
        "spec.devices[0].capacity[m].requestPolicy"
    );
    let no_default = base(
        json!([{"name": "x", "allowMultipleAllocations": true,
            "capacity": {"m": {"value": "2", "requestPolicy": {"validValues": ["1"]}}}}]),
        Value::Null,
    );
    assert_eq!(
        slice(&no_default).unwrap_err().field,
        "spec.devices[0].capacity[m].requestPolicy.default"
    );
    let zero_step = base(
        json!([{"name": "x", "allowMultipleAllocations": true,
            "capacity": {"m": {"value": "2", "requestPolicy": {"default": "1",
                "validRange": {"min": "1", "step": "0"}}}}}]),
        Value::Null,
    );
    assert_eq!(
        slice(&zero_step).unwrap_err().field,
        "spec.devices[0].capacity[m].requestPolicy.validRange.step"
    );
}

/// The pool `pool-1` of driver `driver-a` on node-1 as upstream's partitionable cases
/// publish it: slices of devices and slices of counter sets.
fn partition_slices(slices: &[(&str, &str, Value, Value)], count: i64) -> Vec<api::ResourceSlice> {
    slices
        .iter()
        .map(|(name, pool, devices, counters)| {
            obj(json!({"metadata": {"name": name},
                "spec": {"driver": "driver-a", "nodeName": "node-1",
                         "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
                         "devices": devices, "sharedCounters": counters}}))
        })
        .collect()
}

fn pools_after(slices: Vec<api::ResourceSlice>) -> Snapshot {
    let mut index = ClusterIndex::new();
    for s in &slices {
        index.apply(s).unwrap();
    }
    snap(&index)
}

fn draws(set: &str, counter: &str) -> Value {
    json!([{"name": "device-1", "consumesCounters": [
        {"counterSet": set, "counters": {counter: {"value": "8Gi"}}}]}])
}

fn counter_sets(set: &str, counter: &str) -> Value {
    json!([{"name": set, "counters": {counter: {"value": "8Gi"}}}])
}

#[test]
fn a_pool_with_counter_sets_carries_them_and_its_devices() {
    let s = pools_after(partition_slices(
        &[
            (
                "slice-1",
                "pool-1",
                draws("counter-set-1", "memory"),
                Value::Null,
            ),
            (
                "slice-2",
                "pool-1",
                Value::Null,
                counter_sets("counter-set-1", "memory"),
            ),
        ],
        2,
    ));
    assert_eq!(s.dra.devices.len(), 1);
    assert_eq!(s.dra.counter_sets.len(), 1);
    assert_eq!(s.dra.counter_sets[0].id(), "driver-a/pool-1/counter-set-1");
    assert!(s.dra.unusable_pools.is_empty());
}

fn invalid(s: &Snapshot, pool: &str) -> bool {
    s.dra.devices.is_empty()
        && s.dra
            .unusable_pools
            .iter()
            .any(|p| p.invalid && &*p.pool == pool)
}

#[test]
fn partitionable_devices_same_counter_set_name_in_different_resource_slices() {
    let s = pools_after(partition_slices(
        &[
            (
                "slice-1",
                "pool-1",
                json!([{"name": "device-1"}]),
                Value::Null,
            ),
            (
                "slice-2",
                "pool-1",
                Value::Null,
                counter_sets("counter-set-1", "m"),
            ),
            (
                "slice-3",
                "pool-1",
                json!([{"name": "device-2"}]),
                Value::Null,
            ),
            (
                "slice-4",
                "pool-1",
                Value::Null,
                counter_sets("counter-set-1", "m"),
            ),
        ],
        4,
    ));
    assert!(invalid(&s, "pool-1"));
}

/// Pool `pool-1`'s slice-1 with device-1 drawing `draw` (counter set, counter), and slice-2
/// of pool `set.0` with counter set `set.1` holding counter `set.2`; `count` slices a pool.
fn drawing(draw: (&str, &str), set: (&str, &str, &str), count: i64) -> Snapshot {
    pools_after(partition_slices(
        &[
            ("slice-1", "pool-1", draws(draw.0, draw.1), Value::Null),
            ("slice-2", set.0, Value::Null, counter_sets(set.1, set.2)),
        ],
        count,
    ))
}

#[test]
fn partitionable_devices_device_counter_consumption_references_unknown_counter_set() {
    let s = drawing(
        ("counter-set-2", "memory"),
        ("pool-1", "counter-set-1", "memory"),
        2,
    );
    assert!(invalid(&s, "pool-1"));
}

#[test]
fn partitionable_devices_device_counter_consumption_references_unknown_counter_in_counter_set() {
    let s = drawing(
        ("counter-set-1", "memory"),
        ("pool-1", "counter-set-1", "other-memory"),
        2,
    );
    assert!(invalid(&s, "pool-1"));
}

#[test]
fn partitionable_devices_device_counter_consumption_references_counter_set_in_other_pool() {
    let s = drawing(
        ("counter-set-1", "memory"),
        ("pool-2", "counter-set-1", "memory"),
        1,
    );
    assert!(invalid(&s, "pool-1"));
    assert_eq!(s.dra.counter_sets.len(), 1, "pool-2 is fine on its own");
}

#[test]
fn partitionable_devices_validation_error_on_non_targeting_slice() {
    // A device of another node draws from a counter set the pool lacks: the whole pool is
    // invalid, for every node.
    let mut slices = partition_slices(
        &[
            (
                "slice-1",
                "pool-1",
                Value::Null,
                counter_sets("counter-set-1", "memory"),
            ),
            (
                "slice-2",
                "pool-1",
                draws("counter-set-1", "memory"),
                Value::Null,
            ),
            (
                "slice-3",
                "pool-1",
                draws("counter-set-2", "memory"),
                Value::Null,
            ),
        ],
        3,
    );
    slices[2].spec.node_name = Some("node-2".into());
    slices[2].spec.devices.as_mut().unwrap()[0].name = "device-3".into();
    assert!(invalid(&pools_after(slices), "pool-1"));
}

#[test]
fn a_slice_with_two_node_selections_is_refused_naming_the_field() {
    let v = json!({"metadata": {"name": "s"},
        "spec": {"driver": "d", "nodeName": "n", "allNodes": true,
                 "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}}});
    let err = slice(&obj(v)).unwrap_err();
    assert_eq!(err.kind, ObjectKind::ResourceSlice);
    assert_eq!(err.field, "spec.nodeName");
    let bad_capacity = json!({"metadata": {"name": "s"},
        "spec": {"driver": "d", "nodeName": "n", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "x", "capacity": {"memory": {"value": "12xyz"}}}]}});
    let err = slice(&obj(bad_capacity)).unwrap_err();
    assert_eq!(err.field, "spec.devices[0].capacity[memory].value");
}

#[test]
fn only_the_newest_complete_generation_of_a_pool_is_used() {
    let mut index = ClusterIndex::new();
    index.apply(&gpu_class()).unwrap();
    // Generation 1, complete.
    index
        .apply(&gpu_slice("old", "node-a", 1, 1, &["gpu-0"]))
        .unwrap();
    assert_eq!(snap(&index).dra.devices.len(), 1);
    // Generation 2 announces two slices; only one is there: the pool is being updated and
    // neither generation is used.
    index
        .apply(&gpu_slice("new-1", "node-a", 2, 2, &["gpu-1"]))
        .unwrap();
    let s = snap(&index);
    assert!(s.dra.devices.is_empty());
    assert_eq!(s.dra.unusable_pools.len(), 1);
    assert!(!s.dra.unusable_pools[0].invalid);
    // Its second slice arrives: both of generation 2's devices, none of generation 1's.
    index
        .apply(&gpu_slice("new-2", "node-a", 2, 2, &["gpu-2"]))
        .unwrap();
    let s = snap(&index);
    let names: Vec<&str> = s.dra.devices.iter().map(|d| &*d.name).collect();
    assert_eq!(names, ["gpu-1", "gpu-2"]);
    assert!(s.dra.unusable_pools.is_empty());
    // A device listed twice makes the pool invalid.
    index
        .apply(&gpu_slice("new-2", "node-a", 2, 2, &["gpu-1"]))
        .unwrap();
    let s = snap(&index);
    assert!(s.dra.devices.is_empty());
    assert!(s.dra.unusable_pools[0].invalid);
    // Deleting and resetting follow the watch.
    index.delete::<k8s_openapi::api::resource::v1::ResourceSlice>("new-2");
    index.delete::<k8s_openapi::api::resource::v1::ResourceSlice>("new-1");
    assert_eq!(
        snap(&index).dra.devices.len(),
        1,
        "generation 1 is the newest again"
    );
    let errors = index.reset(&[gpu_slice("x", "node-b", 1, 1, &["gpu-0", "gpu-1"])]);
    assert!(errors.is_empty());
    let s = snap(&index);
    assert_eq!(s.dra.devices.len(), 2);
    assert_eq!(s.dra.devices[0].nodes, DeviceNodes::Node("node-b".into()));
}

#[test]
fn a_device_class_keeps_selectors_bridge_name_and_config() {
    let c = device_class(&gpu_class()).unwrap();
    assert_eq!(c.selectors.len(), 1);
    assert_eq!(c.extended_resource_name.as_deref(), Some("nvidia.com/gpu"));
    assert_eq!(&*c.config[0].parameters, r#"{"sharing":"none"}"#);
    assert!(c.created > caldera_model::Time::default());
    let no_cel: api::DeviceClass =
        obj(json!({"metadata": {"name": "x"}, "spec": {"selectors": [{}]}}));
    let err = device_class(&no_cel).unwrap_err();
    assert_eq!(err.field, "spec.selectors[0].cel");
}

#[test]
fn a_claim_converts_requests_constraints_config_and_status() {
    let c = claim(&rc(
        "train",
        json!({"spec": {"devices": {
            "requests": [
                {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 4,
                    "selectors": [{"cel": {"expression": "device.attributes[\"gpu.nvidia.com\"].index >= 0"}}]}},
                {"name": "nic", "firstAvailable": [
                    {"name": "fast", "deviceClassName": "nic", "allocationMode": "All"},
                    {"name": "any", "deviceClassName": "nic"}]}],
            "constraints": [{"requests": ["gpus"], "matchAttribute": "gpu.nvidia.com/clique"}],
            "config": [{"requests": ["gpus"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {"a": 1}}}]}},
          "status": {"allocation": {"devices": {"results": [
                {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}]},
              "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}}),
    ))
    .unwrap();
    let RequestKind::Exactly(e) = &c.requests[0].kind else {
        panic!("exactly")
    };
    assert_eq!(e.mode, AllocationMode::ExactCount(4));
    assert_eq!(e.selectors.len(), 1);
    let RequestKind::FirstAvailable(subs) = &c.requests[1].kind else {
        panic!("firstAvailable")
    };
    assert_eq!(subs[0].spec.mode, AllocationMode::All);
    assert_eq!(
        subs[1].spec.mode,
        AllocationMode::ExactCount(1),
        "count defaults to 1"
    );
    assert_eq!(&*c.constraints[0].attribute, "gpu.nvidia.com/clique");
    assert_eq!(c.config[0].requests, [Arc::from("gpus")]);
    let a = c.allocation.as_ref().unwrap();
    assert_eq!(a.node().as_deref(), Some("node-a"));
    assert_eq!(&*a.devices[0].device, "gpu-0");
    assert!(c.reserved_for_pod("uid-p"));
    assert!(c.unsupported.is_none());
}

#[test]
fn a_claim_converts_capacity_requests_distinct_attributes_and_shares() {
    let c = claim(&rc(
        "infer",
        json!({"spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                "capacity": {"requests": {"memory": "20Gi"}}}}],
            "constraints": [{"distinctAttribute": "gpu.nvidia.com/uuid"}]}},
          "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0",
                 "shareID": "0b7f5f0e-3c1a-8d2e-9f00-123456789abc",
                 "consumedCapacity": {"memory": "20Gi"}}]}}}}),
    ))
    .unwrap();
    let RequestKind::Exactly(e) = &c.requests[0].kind else {
        panic!("exactly")
    };
    assert_eq!(&*e.capacity["memory"].text, "20Gi");
    assert_eq!(c.constraints[0].kind, ConstraintKind::Distinct);
    let r = &c.allocation.as_ref().unwrap().devices[0];
    assert_eq!(
        r.share_id.as_deref(),
        Some("0b7f5f0e-3c1a-8d2e-9f00-123456789abc")
    );
    assert_eq!(r.consumed["memory"].milli, 20 * (1i64 << 30) * 1000);
}

#[test]
fn claim_inputs_caldera_does_not_evaluate_make_it_unallocatable_or_refused() {
    let tolerations = claim(&rc(
        "t",
        json!({"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "tolerations": [{"operator": "Exists"}]}}]}}}),
    ))
    .unwrap();
    assert!(tolerations
        .unsupported
        .as_deref()
        .is_some_and(|m| m.contains("tolerations")));
    let both = claim(&rc(
        "d",
        json!({"spec": {"devices": {"constraints": [{"distinctAttribute": "x/y", "matchAttribute": "x/y"}]}}}),
    ))
    .unwrap_err();
    assert_eq!(both.field, "spec.devices.constraints[0]");
    let negative = claim(&rc(
        "n",
        json!({"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "capacity": {"requests": {"memory": "-1Gi"}}}}]}}}),
    ))
    .unwrap_err();
    assert_eq!(
        negative.field,
        "spec.devices.requests[0].exactly.capacity.requests[memory]"
    );
    let mode = claim(&rc(
        "m",
        json!({"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"}}]}}}),
    ))
    .unwrap_err();
    assert_eq!(
        mode.field,
        "spec.devices.requests[0].exactly.allocationMode"
    );
    assert_eq!(mode.object, "default/m");
    let unqualified = claim(&rc(
        "u",
        json!({"spec": {"devices": {"constraints": [{"matchAttribute": "clique"}]}}}),
    ))
    .unwrap_err();
    assert_eq!(
        unqualified.field,
        "spec.devices.constraints[0].matchAttribute"
    );
}

#[test]
fn a_pods_claims_resolve_as_kube_scheduler_resolves_them() {
    let mut index = ClusterIndex::new();
    index.apply(&gpu_class()).unwrap();
    let named =
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}});
    let templated = |status: Value| {
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]},
               "status": status})
    };
    index.apply(&pod("named", named)).unwrap();
    index.apply(&pod("waiting", templated(json!({})))).unwrap();
    index
        .apply(&pod(
            "made",
            templated(json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "made-gpu-x7k2p"}]})),
        ))
        .unwrap();
    index
        .apply(&pod(
            "none-needed",
            templated(json!({"resourceClaimStatuses": [{"name": "gpu"}]})),
        ))
        .unwrap();
    let s = snap(&index);
    let waiting = |n: &str| task(&s, n).claims.as_ref().and_then(|c| c.waiting.clone());
    assert_eq!(
        waiting("named").as_deref(),
        Some("resourceclaim.resource.k8s.io \"shared\" not found")
    );
    assert!(
        waiting("waiting").is_some_and(|m| m.contains("ResourceClaim not created yet")
            && m.contains("resourceclaimtemplate \"one-gpu\" not found"))
    );
    assert!(task(&s, "none-needed")
        .claims
        .as_ref()
        .is_some_and(|c| c.claims.is_empty() && c.waiting.is_none()));
    // The template's claim exists but another pod owns it.
    let owner = |uid: &str| {
        json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "x",
            "uid": uid, "controller": true}]}})
    };
    index
        .apply(&rc("made-gpu-x7k2p", owner("uid-other")))
        .unwrap();
    index.apply(&rc("shared", json!({}))).unwrap();
    let s = snap(&index);
    let waiting = |n: &str| task(&s, n).claims.as_ref().and_then(|c| c.waiting.clone());
    assert!(waiting("made").is_some_and(|m| m.contains("(pod is not owner)")));
    assert_eq!(waiting("named"), None);
    let c = task(&s, "named").claims.clone().unwrap();
    assert_eq!(&*c.claims[0].claim, "shared");
    assert!(!c.claims[0].from_template);
    // Owned by the pod: resolved.
    index
        .apply(&rc("made-gpu-x7k2p", owner("uid-made")))
        .unwrap();
    let s = snap(&index);
    let c = task(&s, "made").claims.clone().unwrap();
    assert!(c.waiting.is_none() && c.claims[0].from_template);
    assert_eq!(s.dra.claims.len(), 2);
    // A claim being deleted is not used.
    index
        .apply(&rc(
            "shared",
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        ))
        .unwrap();
    let s = snap(&index);
    assert!(task(&s, "named")
        .claims
        .as_ref()
        .and_then(|c| c.waiting.clone())
        .is_some_and(|m| m.contains("is being deleted")));
    index.delete::<k8s_openapi::api::resource::v1::ResourceClaim>(("default", "shared"));
    assert_eq!(snap(&index).dra.claims.len(), 1);
}

#[test]
fn extended_requests_are_kept_only_when_a_class_serves_them() {
    let mut index = ClusterIndex::new();
    let gpus = json!({"spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "1"}}}]}});
    index.apply(&pod("p", gpus)).unwrap();
    assert!(
        task(&snap(&index), "p").claims.is_none(),
        "no class names nvidia.com/gpu"
    );
    index.apply(&gpu_class()).unwrap();
    let s = snap(&index);
    let c = task(&s, "p").claims.clone().unwrap();
    assert_eq!(
        c.extended,
        [ExtendedRequest {
            container: "main".into(),
            resource: "nvidia.com/gpu".into(),
            count: 2
        }]
    );
    assert!(c.claims.is_empty() && c.waiting.is_none());
    index.delete::<k8s_openapi::api::resource::v1::DeviceClass>("gpu.nvidia.com");
    assert!(task(&snap(&index), "p").claims.is_none());
}

#[test]
fn a_pod_claim_entry_with_both_sources_is_refused() {
    let bad = pod(
        "p",
        json!({"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}]}}),
    );
    let err = crate::PodInfo::try_from(&bad).unwrap_err();
    assert_eq!(err.field, "spec.resourceClaims[0]");
}

#[test]
fn extended_names_follow_kubernetes() {
    for (name, extended) in [
        ("nvidia.com/gpu", true),
        ("deviceclass.resource.kubernetes.io/gpu", true),
        ("cpu", false),
        ("kubernetes.io/something", false),
        ("hugepages-2Mi", false),
        ("requests.nvidia.com/gpu", false),
    ] {
        assert_eq!(is_extended(name), extended, "{name}");
    }
}
