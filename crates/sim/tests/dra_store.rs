//! The simulator's store keeps the four `resource.k8s.io/v1` kinds as kube-apiserver does
//! (a claim's status only through its status subresource) and shows them to the scheduler.

use caldera_cache::SnapshotOptions;
use caldera_model::{Plan, Snapshot, Time};
use caldera_sim::driver::{FnScheduling, SessionOutput};
use caldera_sim::manifest::{parse_stream, Kind, Object};
use caldera_sim::Simulation;
use std::time::Duration;

const CLUSTER: &str = "
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: '8', memory: 64Gi, pods: '110'}
  conditions: [{type: Ready, status: 'True'}]
";

fn objects(text: &str) -> Vec<Object> {
    parse_stream(text, "test.yaml")
        .unwrap()
        .objects
        .into_iter()
        .map(|(_, o)| o)
        .collect()
}

/// A simulation whose scheduler is `decide`, with a 1s period.
fn fake(decide: impl FnMut(&Snapshot, Time) -> Plan + 'static) -> Simulation {
    let mut decide = decide;
    Simulation::with_scheduler(
        Box::new(FnScheduling(move |snap: &Snapshot, now: Time| {
            SessionOutput {
                plan: decide(snap, now),
                queues: Vec::new(),
            }
        })),
        Duration::from_secs(1),
        SnapshotOptions::default(),
    )
}

const DRA: &str = "
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors: [{cel: {expression: 'device.driver == \"gpu.nvidia.com\"'}}]
  extendedResourceName: nvidia.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.nvidia.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {productName: {string: H100}}, capacity: {memory: {value: 80Gi}}}
  - {name: gpu-1, attributes: {productName: {string: H100}}, capacity: {memory: {value: 80Gi}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.nvidia.com, pool: node-a, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [node-a]}]}]
  reservedFor: [{resource: pods, name: user, uid: uid-user}]
---
apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: shared}]
";

#[test]
fn the_dra_kinds_are_stored_and_reach_the_scheduler() {
    let seen: std::rc::Rc<std::cell::RefCell<Option<Snapshot>>> = Default::default();
    let keep = seen.clone();
    let mut sim = fake(move |snap, _| {
        *keep.borrow_mut() = Some(snap.clone());
        Plan::default()
    });
    sim.apply(objects(CLUSTER)).unwrap();
    sim.apply(objects(DRA)).unwrap();
    sim.run_for(Duration::from_secs(1));
    let snap = seen.borrow().clone().expect("a session ran");
    let dra = &snap.dra;
    assert_eq!(dra.devices.len(), 2);
    assert_eq!(
        dra.classes[0].extended_resource_name.as_deref(),
        Some("nvidia.com/gpu")
    );
    let shared = &dra.claims[dra.claim_index("default", "shared").unwrap()];
    assert_eq!(
        shared.allocation.as_ref().unwrap().node().as_deref(),
        Some("node-a")
    );
    let user = snap.tasks.iter().find(|t| &*t.name == "user").unwrap();
    let claims = user.claims.as_ref().unwrap();
    assert_eq!(&*claims.claims[0].claim, "shared");
    assert!(claims.waiting.is_none());
    // Re-applying a claim keeps its status (written only through the status subresource).
    let mut again = objects(DRA);
    for o in &mut again {
        if let Object::ResourceClaim(c) = o {
            c.status = None;
        }
    }
    sim.apply(again).unwrap();
    let stored = sim.store().resource_claim("default", "shared").unwrap();
    assert!(stored
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .is_some());
    // Deleting a slice takes its devices away.
    assert!(sim.delete(Kind::ResourceSlice, None, "node-a-gpus"));
    sim.run_for(Duration::from_secs(1));
    assert!(seen.borrow().as_ref().unwrap().dra.devices.is_empty());
}

#[test]
fn a_dra_object_the_scheduler_cannot_read_is_refused_at_load() {
    let bad = "
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: d
  nodeName: n
  allNodes: true
  pool: {name: p, generation: 1, resourceSliceCount: 1}
";
    let err = parse_stream(bad, "bad.yaml").unwrap_err().to_string();
    assert!(err.contains("spec.nodeName"), "{err}");
}
