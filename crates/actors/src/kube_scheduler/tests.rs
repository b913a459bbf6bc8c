//! The kube-scheduler model against hand-made clusters.

use super::*;
use serde_json::json;

fn node(name: &str, gpus: i64) -> KubeNode {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
    .unwrap()
}

fn pod(name: &str, gpus: i64, created_s: i64) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "creationTimestamp": format!("2026-01-01T00:00:{created_s:02}Z")
        },
        "spec": {
            "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]
        }
    }))
    .unwrap()
}

fn with(mut p: Pod, f: impl FnOnce(&mut Pod)) -> Pod {
    f(&mut p);
    p
}

fn default_scheduler(p: &Pod) -> bool {
    p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some("default-scheduler")
}

fn run(nodes: &[KubeNode], pods: &[Pod]) -> Cycle {
    schedule(nodes, pods, &default_scheduler, Time(0))
}

fn bound(c: &Cycle) -> Vec<(&str, &str)> {
    c.binds
        .iter()
        .map(|b| (b.name.as_str(), b.node.as_str()))
        .collect()
}

#[test]
fn one_pod_at_a_time_binds_a_gang_in_part() {
    // Seed 1: 6 GPUs free over two nodes, eight 1-GPU pods: six land, two wait.
    let nodes = [node("a", 8), node("b", 8)];
    let mut pods = vec![
        with(pod("busy-a", 2, 0), |p| {
            p.spec.as_mut().unwrap().node_name = Some("a".into())
        }),
        with(pod("busy-b", 8, 0), |p| {
            p.spec.as_mut().unwrap().node_name = Some("b".into())
        }),
    ];
    pods.extend((0..8).map(|i| pod(&format!("w-{i}"), 1, 1 + i)));
    let c = run(&nodes, &pods);
    assert_eq!(c.binds.len(), 6);
    assert_eq!(c.unschedulable.len(), 2);
    assert_eq!(
        c.unschedulable[0].message,
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    );
    assert_eq!(
        c.unschedulable
            .iter()
            .map(|u| u.name.as_str())
            .collect::<Vec<_>>(),
        ["w-6", "w-7"],
        "creation order"
    );
}

#[test]
fn priority_first_then_creation_then_least_allocated() {
    let nodes = [node("a", 1), node("b", 2)];
    let pods = [
        pod("old", 1, 1),
        with(pod("high", 1, 5), |p| {
            p.spec.as_mut().unwrap().priority = Some(10)
        }),
        pod("young", 1, 9),
        pod("youngest", 1, 10),
    ];
    let c = run(&nodes, &pods);
    // Every node has the same cpu and memory: least allocated ties break by name.
    assert_eq!(bound(&c), [("high", "a"), ("old", "b"), ("young", "b")]);
    assert_eq!(c.unschedulable[0].name, "youngest");
}

#[test]
fn nominations_hold_against_lower_or_equal_priority_only() {
    let nodes = [node("a", 4)];
    let nominated = with(pod("member", 4, 5), |p| {
        p.status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some("a".into());
        // Still gated: it holds nothing yet, and is not scheduled.
        p.spec.as_mut().unwrap().scheduling_gates =
            Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: "g".into(),
            }]);
    });
    let c = run(&nodes, &[pod("racer", 1, 1), nominated.clone()]);
    assert_eq!(
        bound(&c),
        [("racer", "a")],
        "a gated pod's nomination holds nothing"
    );

    let released = with(nominated, |p| {
        p.spec.as_mut().unwrap().scheduling_gates = None
    });
    let c = run(&nodes, &[pod("racer", 1, 1), released.clone()]);
    assert_eq!(
        bound(&c),
        [("member", "a")],
        "the older racer waits for the nominee"
    );
    assert_eq!(c.unschedulable[0].name, "racer");

    let urgent = with(pod("urgent", 1, 1), |p| {
        p.spec.as_mut().unwrap().priority = Some(5)
    });
    let c = run(&nodes, &[urgent, released]);
    assert_eq!(
        bound(&c),
        [("urgent", "a")],
        "higher priority ignores the nomination"
    );
    assert_eq!(c.unschedulable[0].name, "member");
}

#[test]
fn affinity_selector_taints_and_cordons_are_honoured() {
    let mut tainted = node("t", 8);
    tainted.spec = Some(
        serde_json::from_value(json!({
            "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
        }))
        .unwrap(),
    );
    let mut cordoned = node("c", 8);
    cordoned.spec = Some(serde_json::from_value(json!({"unschedulable": true})).unwrap());
    let nodes = [node("a", 8), node("b", 8), tainted, cordoned];
    let pinned = with(pod("pinned", 1, 1), |p| {
        p.spec.as_mut().unwrap().affinity = Some(serde_json::from_value(json!({
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}
            ]}}
        })).unwrap())
    });
    let selected = with(pod("selected", 1, 2), |p| {
        p.spec.as_mut().unwrap().node_selector =
            Some([("kubernetes.io/hostname".to_string(), "t".to_string())].into())
    });
    let c = run(&nodes, &[pinned, selected]);
    assert_eq!(bound(&c), [("pinned", "b")]);
    assert_eq!(
        c.unschedulable[0].message,
        "0/4 nodes are available: 1 node(s) had untolerated taint {gpu: true}, 1 node(s) were unschedulable, 2 node(s) didn't match Pod's node affinity/selector."
    );
}

#[test]
fn other_schedulers_gated_and_finished_pods_are_left_alone() {
    let nodes = [node("a", 8)];
    let caldera = with(pod("ours", 1, 1), |p| {
        p.spec.as_mut().unwrap().scheduler_name = Some("caldera".into())
    });
    let gated = with(pod("gated", 1, 1), |p| {
        p.spec.as_mut().unwrap().scheduling_gates =
            Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
                name: "g".into(),
            }])
    });
    let done = with(pod("done", 1, 1), |p| {
        p.status.get_or_insert_with(Default::default).phase = Some("Failed".into())
    });
    assert_eq!(run(&nodes, &[caldera, gated, done]), Cycle::default());
}

#[test]
fn predict_takes_the_room_the_queue_is_about_to_use() {
    let info = |p: &Pod| PodInfo::try_from(p).unwrap();
    let mut nodes: Vec<Node> = [node("a", 8), node("b", 2)]
        .iter()
        .map(|n| caldera_cache::node(n).unwrap())
        .collect();
    let low = with(pod("low", 4, 1), |p| {
        p.spec.as_mut().unwrap().priority = Some(0)
    });
    let high = with(pod("high", 2, 9), |p| {
        p.spec.as_mut().unwrap().priority = Some(5)
    });
    let (low, high) = (info(&low), info(&high));
    predict(&mut nodes, &[(&low, 0), (&high, 5)]);
    // Higher priority first: `high` (2 GPUs) goes to the least allocated node by cpu and
    // memory, a tie broken by name (a); then `low` (4) fits only on a.
    assert_eq!(nodes[0].used.get("nvidia.com/gpu"), 6);
    assert_eq!(nodes[1].used.get("nvidia.com/gpu"), 0);
    // A pod that fits nowhere takes nothing.
    let huge = info(&pod("huge", 16, 1));
    predict(&mut nodes, &[(&huge, 0)]);
    assert_eq!(nodes[0].used.get("nvidia.com/gpu"), 6);
}
