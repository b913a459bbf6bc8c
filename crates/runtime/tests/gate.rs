//! `caldera gate` in-process against the API stand-in and its kube-scheduler loop: gangs are
//! released whole (pin in every required term, gate lifted, nomination) and kube-scheduler
//! binds them; a gang that does not fit stays gated; released members kube-scheduler does
//! not bind are reported after the release timeout.

mod common;

use caldera_runtime::{GateOptions, Options, Runtime};
use caldera_testkit::apiserver::{ApiServer, Verb};
use common::*;
use serde_json::{json, Value};
use std::time::Duration;

fn gate_options(timeout: Duration) -> Options {
    Options {
        gate: Some(GateOptions {
            release_timeout: timeout,
        }),
        ..options()
    }
}

/// A gang member as gate mode's admission policy leaves it: `default-scheduler`, gated.
fn gated_pod(ns: &str, name: &str, group: &str, gpus: u32, affinity: Option<Value>) -> Value {
    let mut p = pod(ns, name, Some(group), gpus);
    p["spec"]["schedulerName"] = json!("default-scheduler");
    p["spec"]["schedulingGates"] = json!([{"name": caldera_api::GANG_GATE}]);
    if let Some(a) = affinity {
        p["spec"]["affinity"] = a;
    }
    p
}

fn create_gated_gang(
    server: &ApiServer,
    name: &str,
    members: u32,
    gpus: u32,
    affinity: Option<Value>,
) {
    server
        .store()
        .create("podgroups", podgroup("ml", name, members))
        .unwrap();
    for i in 0..members {
        server
            .store()
            .create(
                "pods",
                gated_pod("ml", &format!("{name}-{i}"), name, gpus, affinity.clone()),
            )
            .unwrap();
    }
}

fn pod_json(server: &ApiServer, name: &str) -> Value {
    server.store().get("pods", "ml", name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_fits_is_released_pinned_and_bound_by_kube_scheduler() {
    init_logs();
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 2, 4);
    let zone = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n0", "n1"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "Exists"}]}
    ]}}});
    create_gated_gang(&server, "train", 8, 1, Some(zone));
    let _kube_scheduler = server.start_kube_scheduler(Duration::from_millis(50));
    let handle = Runtime::start(
        gate_options(Duration::from_secs(60)),
        server.kube_client().unwrap(),
    )
    .await
    .unwrap();
    eventually(10, "all 8 members bound by kube-scheduler", || {
        bound(&server, "ml", "train", 8) == 8
    })
    .await;
    for i in 0..8 {
        let p = pod_json(&server, &format!("train-{i}"));
        let node = p["spec"]["nodeName"].as_str().unwrap().to_string();
        assert!(p["spec"]["schedulingGates"].is_null(), "{p}");
        let terms = p["spec"]["affinity"]["nodeAffinity"]
            ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            .as_array()
            .unwrap()
            .clone();
        assert_eq!(terms.len(), 2, "the pod's own terms are kept");
        for t in &terms {
            assert!(!t["matchExpressions"].as_array().unwrap().is_empty(), "{t}");
            assert_eq!(
                t["matchFields"],
                json!([{"key": "metadata.name", "operator": "In", "values": [node]}]),
                "the pin is in every term"
            );
        }
    }
    // kube-scheduler may bind a member before its nomination is written: wait for all 8.
    eventually(10, "every release done, nomination included", || {
        handle
            .metrics_text()
            .contains("caldera_pods_released_total 8")
    })
    .await;
    let counts = server.request_counts();
    assert_eq!(
        counts.get(Verb::Create, "pods", "binding"),
        0,
        "Caldera binds nothing itself"
    );
    assert_eq!(
        counts.get(Verb::Patch, "pods", ""),
        8,
        "one release patch per member"
    );
    assert!(
        counts.get(Verb::Patch, "pods", "status") >= 8,
        "nominations"
    );
    let metrics = handle.metrics_text();
    assert!(metrics.contains("caldera_pods_bound_total 0"), "{metrics}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_does_not_fit_stays_gated() {
    init_logs();
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 2, 4);
    create_gated_gang(&server, "big", 12, 1, None);
    let _kube_scheduler = server.start_kube_scheduler(Duration::from_millis(50));
    let handle = Runtime::start(
        gate_options(Duration::from_secs(60)),
        server.kube_client().unwrap(),
    )
    .await
    .unwrap();
    eventually(10, "the PodGroup says why", || {
        pod_json(&server, "big-0")["status"]["conditions"][0]["reason"] == "Unschedulable"
            && server.store().get("podgroups", "ml", "big").unwrap()["status"]["conditions"][0]
                ["reason"]
                == "NotEnoughResources"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..12 {
        let p = pod_json(&server, &format!("big-{i}"));
        assert_eq!(
            p["spec"]["schedulingGates"][0]["name"],
            caldera_api::GANG_GATE,
            "{p}"
        );
        assert!(p["spec"]["nodeName"].is_null());
    }
    assert_eq!(server.request_counts().get(Verb::Patch, "pods", ""), 0);
    handle.shutdown().await;
}

const KUBE_SCHEDULER_SAYS: &str =
    "0/1 nodes are available: 1 node(s) had untolerated taint {example.com/maintenance: }.";

fn podgroup_condition(server: &ApiServer, name: &str) -> Value {
    server.store().get("podgroups", "ml", name).unwrap()["status"]["conditions"][0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn released_members_not_bound_in_time_are_reported_never_regated() {
    init_logs();
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 4);
    create_gated_gang(&server, "slow", 4, 1, None);
    // No kube-scheduler at first: nothing binds the released members.
    let handle = Runtime::start(
        gate_options(Duration::from_secs(2)),
        server.kube_client().unwrap(),
    )
    .await
    .unwrap();
    eventually(10, "the gang released", || {
        (0..4).all(|i| pod_json(&server, &format!("slow-{i}"))["spec"]["schedulingGates"].is_null())
    })
    .await;
    // What kube-scheduler writes on a pod it cannot place.
    for i in 0..4 {
        server
            .store()
            .modify("pods", "ml", &format!("slow-{i}"), |p| {
                p["status"]["conditions"] = json!([{
                    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": KUBE_SCHEDULER_SAYS,
                    "lastTransitionTime": "2026-01-01T00:00:00Z"
                }]);
            })
            .unwrap();
    }
    eventually(10, "a warning on the PodGroup", || {
        server
            .store()
            .list("events.events.k8s.io")
            .iter()
            .any(|e| e["reason"] == "NotBoundAfterRelease" && e["regarding"]["kind"] == "PodGroup")
    })
    .await;
    // The status write and the events of one session are sent apart, not in order: the event
    // may be in before the condition. Wait for the condition, then check all of it.
    eventually(5, "the PodGroup's condition says not bound", || {
        podgroup_condition(&server, "slow")["type"] == "Unschedulable"
    })
    .await;
    let condition = podgroup_condition(&server, "slow");
    assert_eq!(condition["type"], "Unschedulable", "{condition}");
    assert_eq!(condition["status"], "True", "{condition}");
    assert_eq!(condition["reason"], "NotBoundAfterRelease", "{condition}");
    let message = condition["message"].as_str().unwrap();
    assert!(
        message.starts_with("4 released member(s) not bound by kube-scheduler within 2s")
            && message.contains(&format!(
                "ml/slow-0 on n0: Unschedulable: {KUBE_SCHEDULER_SAYS}"
            )),
        "kube-scheduler's own reason: {message}"
    );
    // The events of one session are sent together, not in order: wait for the members' too.
    let pod_warnings = || {
        server
            .store()
            .list("events.events.k8s.io")
            .iter()
            .filter(|e| e["reason"] == "NotBoundAfterRelease" && e["regarding"]["kind"] == "Pod")
            .count()
    };
    eventually(5, "a warning on each member", || pod_warnings() >= 4).await;
    assert_eq!(pod_warnings(), 4);
    for i in 0..4 {
        let p = pod_json(&server, &format!("slow-{i}"));
        assert!(
            p["spec"]["schedulingGates"].is_null(),
            "never gated again: {p}"
        );
        assert_eq!(p["status"]["nominatedNodeName"], "n0");
        assert!(p["metadata"]["deletionTimestamp"].is_null());
    }
    let metrics = handle.metrics_text();
    assert!(metrics.contains("caldera_released_unbound 4"), "{metrics}");
    // Reported once, not every session: no more events, no more PodGroup writes.
    let writes = server
        .request_counts()
        .get(Verb::Patch, "podgroups", "status");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let again = server
        .store()
        .list("events.events.k8s.io")
        .iter()
        .filter(|e| e["reason"] == "NotBoundAfterRelease")
        .count();
    assert_eq!(again, 5);
    assert_eq!(
        server
            .request_counts()
            .get(Verb::Patch, "podgroups", "status"),
        writes,
        "steady state writes nothing"
    );
    // kube-scheduler comes back and binds them: the condition clears.
    let _kube_scheduler = server.start_kube_scheduler(Duration::from_millis(50));
    eventually(10, "bound, and the PodGroup says Scheduled again", || {
        bound(&server, "ml", "slow", 4) == 4
            && podgroup_condition(&server, "slow")["type"] == "Scheduled"
    })
    .await;
    eventually(10, "nothing unbound any more", || {
        handle.metrics_text().contains("caldera_released_unbound 0")
    })
    .await;
    handle.shutdown().await;
}
