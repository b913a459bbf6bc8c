//! Scale check: 5,000 nodes and 150,000 pods, timing `snapshot()`.
//!
//! Ignored by default (it wants a release build):
//! `cargo test --release -p caldera-cache --test scale -- --ignored --nocapture`.

use caldera_cache::{ClusterIndex, SnapshotOptions};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, NodeStatus, Pod, PodSpec, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::BTreeMap;
use std::time::Instant;

fn list(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect()
}

fn node(i: usize) -> Node {
    let name = format!("node-{i:05}");
    Node {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name),
                ("rack".to_string(), format!("rack-{}", i / 40)),
            ])),
            ..Default::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(NodeStatus {
            allocatable: Some(list(&[
                ("cpu", "96"),
                ("memory", "1Ti"),
                ("pods", "110"),
                ("nvidia.com/gpu", "8"),
            ])),
            conditions: Some(vec![serde_json::from_value(
                serde_json::json!({"type": "Ready", "status": "True"}),
            )
            .unwrap()]),
            ..Default::default()
        }),
    }
}

fn pod(i: usize, nodes: usize) -> Pod {
    // One pod in 15 is ours, in gangs of 8; the rest belong to kube-scheduler and are bound.
    let ours = i.is_multiple_of(15);
    let mut annotations = BTreeMap::new();
    if ours {
        annotations.insert(
            "scheduling.k8s.io/group-name".to_string(),
            format!("gang-{}", i / (15 * 8)),
        );
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("pod-{i:06}")),
            namespace: Some(format!("ns-{}", i % 20)),
            uid: Some(format!("uid-{i}")),
            annotations: Some(annotations),
            ..Default::default()
        },
        spec: Some(PodSpec {
            scheduler_name: Some(if ours { "caldera" } else { "default-scheduler" }.to_string()),
            node_name: (!ours || i.is_multiple_of(2)).then(|| format!("node-{:05}", i % nodes)),
            containers: vec![Container {
                name: "main".into(),
                resources: Some(ResourceRequirements {
                    requests: Some(list(&[("cpu", "500m"), ("memory", "1Gi")])),
                    limits: ours.then(|| list(&[("nvidia.com/gpu", "1")])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

#[test]
#[ignore = "scale check; run in release with --ignored"]
fn snapshot_of_5000_nodes_and_150000_pods_is_fast() {
    const NODES: usize = 5_000;
    const PODS: usize = 150_000;
    let mut index = ClusterIndex::new();
    let start = Instant::now();
    for i in 0..NODES {
        index.apply(&node(i)).unwrap();
    }
    let pods: Vec<Pod> = (0..PODS).map(|i| pod(i, NODES)).collect();
    for p in &pods {
        index.apply(p).unwrap();
    }
    for g in 0..=PODS / (15 * 8) {
        for ns in 0..20 {
            let pg: caldera_api::PodGroup = serde_json::from_value(serde_json::json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": format!("gang-{g}"), "namespace": format!("ns-{ns}")},
                "spec": {"minMember": 1},
            }))
            .unwrap();
            index.apply(&pg).unwrap();
        }
    }
    println!("load: {:?}", start.elapsed());
    let opts = SnapshotOptions::default();
    let mut best = std::time::Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        let snap = index.snapshot(&opts);
        best = best.min(start.elapsed());
        assert_eq!(snap.nodes.len(), NODES);
        assert_eq!(snap.tasks.len(), PODS.div_ceil(15));
    }
    println!("snapshot: {best:?}");
    let start = Instant::now();
    for p in pods.iter().take(10_000) {
        index.apply(p).unwrap();
    }
    println!("10,000 pod updates: {:?}", start.elapsed());
    assert!(best.as_millis() < 1000, "snapshot took {best:?}");
}
