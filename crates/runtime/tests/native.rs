//! Kubernetes' own gang API (`scheduling.k8s.io/v1alpha2`) in `caldera run`, against the API
//! stand-in: watched when served, nothing to watch when not (docs/workloads.md).

mod common;

use caldera_runtime::Runtime;
use caldera_testkit::apiserver::{ApiServer, Options as ServerOptions, Verb};
use common::*;
use serde_json::json;

/// A cluster without `GenericWorkload`: the runtime becomes ready without the native watches
/// (it never lists them) and schedules Volcano gangs as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_native_api_nothing_is_watched_and_gangs_still_bind() {
    init_logs();
    let server = ApiServer::start_with(ServerOptions {
        native_gang_api: false,
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "train", 4, 1);
    let handle = Runtime::start(options(), server.kube_client().unwrap())
        .await
        .expect("runtime starts");
    eventually(10, "all 4 members bound", || {
        bound(&server, "ml", "train", 4) == 4
    })
    .await;
    assert!(handle.is_ready());
    assert_eq!(
        server
            .request_counts()
            .get(Verb::List, "podgroups.scheduling.k8s.io", ""),
        0
    );
    handle.shutdown().await;
}

/// With the API served, a native gang is bound whole once it fits, and its PodGroup gets
/// `PodGroupScheduled` as kube-scheduler writes it, merged by type beside other conditions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_gang_binds_whole_and_its_podgroup_says_so() {
    init_logs();
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 3);
    let store = server.store();
    store
        .create(
            "podgroups.scheduling.k8s.io",
            json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                   "metadata": {"name": "train", "namespace": "ml"},
                   "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}),
        )
        .expect("create native podgroup");
    store
        .modify("podgroups.scheduling.k8s.io", "ml", "train", |pg| {
            pg["status"] = json!({"conditions": [{"type": "Other", "status": "True",
                "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]});
        })
        .expect("a condition of someone else's");
    for i in 0..4 {
        let mut p = pod("ml", &format!("train-{i}"), None, 1);
        p["spec"]["schedulingGroup"] = json!({"podGroupName": "train"});
        store.create("pods", p).expect("create pod");
    }
    let handle = Runtime::start(options(), server.kube_client().unwrap())
        .await
        .expect("runtime starts");
    let condition = |status: &str| {
        let pg = server
            .store()
            .get("podgroups.scheduling.k8s.io", "ml", "train")
            .unwrap_or_default();
        pg["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "PodGroupScheduled" && c["status"] == status)
    };
    eventually(10, "PodGroupScheduled=False", || condition("False")).await;
    assert_eq!(bound(&server, "ml", "train", 4), 0);
    server
        .store()
        .create("nodes", node("n9", 1))
        .expect("create node");
    eventually(10, "all 4 members bound", || {
        bound(&server, "ml", "train", 4) == 4
    })
    .await;
    eventually(10, "PodGroupScheduled=True", || condition("True")).await;
    let pg = server
        .store()
        .get("podgroups.scheduling.k8s.io", "ml", "train")
        .unwrap_or_default();
    assert!(
        pg["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Other"),
        "{pg}"
    );
    handle.shutdown().await;
}
