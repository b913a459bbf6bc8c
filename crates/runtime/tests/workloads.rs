//! Gangs derived from owners other than Jobs in `caldera run` (docs/workloads.md), against the
//! API stand-in: a LeaderWorkerSet's group is one gang when its API is served, and without the
//! CRD its pods are scheduled as before (no dependency on the CRD).

mod common;

use caldera_runtime::Runtime;
use caldera_testkit::apiserver::ApiServer;
use common::*;
use serde_json::{json, Value};

fn lws_pod(group: u32, worker: u32, gpus: u32) -> Value {
    let (name, owner) = if worker == 0 {
        (format!("infer-{group}"), "infer".to_string())
    } else {
        (format!("infer-{group}-{worker}"), format!("infer-{group}"))
    };
    let mut p = pod("ml", &name, None, gpus);
    p["metadata"]["labels"] = json!({
        "leaderworkerset.sigs.k8s.io/name": "infer",
        "leaderworkerset.sigs.k8s.io/group-index": group.to_string(),
        "leaderworkerset.sigs.k8s.io/worker-index": worker.to_string(),
    });
    p["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet",
        "name": owner, "uid": format!("uid-sts-{owner}"), "controller": true}]);
    p
}

fn create_group(server: &ApiServer) {
    for w in 0..4 {
        server
            .store()
            .create("pods", lws_pod(0, w, 1))
            .expect("create pod");
    }
}

fn bound_pods(server: &ApiServer) -> usize {
    server
        .store()
        .list("pods")
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_string())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_crd_lws_pods_are_scheduled_one_by_one() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 3);
    create_group(&server);
    init_logs();
    let handle = Runtime::start(options(), server.kube_client().unwrap())
        .await
        .expect("runtime starts");
    eventually(10, "3 of the 4 pods bound, one by one", || {
        bound_pods(&server) == 3
    })
    .await;
    assert!(server.store().list("podgroups").is_empty());
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_crd_an_lws_group_is_one_gang_owned_by_the_lws() {
    let server = ApiServer::start().await.unwrap();
    server
        .store()
        .create(
            "customresourcedefinitions",
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
                "spec": {"group": "leaderworkerset.x-k8s.io", "scope": "Namespaced",
                    "names": {"kind": "LeaderWorkerSet", "plural": "leaderworkersets",
                        "singular": "leaderworkerset", "listKind": "LeaderWorkerSetList"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object",
                            "x-kubernetes-preserve-unknown-fields": true}}}]}}),
        )
        .expect("create CRD");
    let lws = server
        .store()
        .create(
            "leaderworkersets",
            json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                "metadata": {"namespace": "ml", "name": "infer"},
                "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 4,
                    "workerTemplate": {"spec": pod("ml", "t", None, 1)["spec"]}}}}),
        )
        .expect("create LWS");
    create_nodes(&server, 1, 3);
    create_group(&server);
    init_logs();
    let handle = Runtime::start(options(), server.kube_client().unwrap())
        .await
        .expect("runtime starts");
    eventually(10, "PodGroup lws-infer-0 made and Unschedulable", || {
        server
            .store()
            .get("podgroups", "ml", "lws-infer-0")
            .is_some_and(|pg| pg["status"]["conditions"][0]["type"] == "Unschedulable")
    })
    .await;
    let pg = server
        .store()
        .get("podgroups", "ml", "lws-infer-0")
        .unwrap();
    assert_eq!(pg["spec"]["minMember"], 4);
    assert_eq!(
        pg["metadata"]["ownerReferences"][0]["uid"],
        lws["metadata"]["uid"]
    );
    let sessions = handle.sessions();
    eventually(5, "three more sessions", || {
        handle.sessions() >= sessions + 3
    })
    .await;
    assert_eq!(bound_pods(&server), 0, "3 GPUs for a gang of 4: none bound");
    server
        .store()
        .create("nodes", node("n9", 1))
        .expect("create node");
    eventually(10, "all 4 bound together", || bound_pods(&server) == 4).await;
    handle.shutdown().await;
}
