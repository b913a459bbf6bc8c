//! Volume binding writes against the API stand-in: a claim selection the server refuses is
//! forgotten, so the next session selects again instead of waiting for a write that never
//! landed.

mod common;

use caldera_runtime::Runtime;
use caldera_testkit::apiserver::{ApiServer, Verb};
use common::*;
use serde_json::json;

const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_claim_selection_is_chosen_again() {
    init_logs();
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    let store = server.store();
    store
        .create(
            "storageclasses",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                   "metadata": {"name": "local"}, "provisioner": "example.com/local",
                   "volumeBindingMode": "WaitForFirstConsumer"}),
        )
        .unwrap();
    store
        .create(
            "persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "data", "namespace": "ml"},
                   "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .unwrap();
    store
        .create("podgroups", podgroup("ml", "train", 1))
        .unwrap();
    let mut member = pod("ml", "train-0", Some("train"), 1);
    member["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    store.create("pods", member).unwrap();
    // The first selection is refused for good (403 is not retried).
    server.fail_next(Verb::Patch, "persistentvolumeclaims", "", 403, 1);

    let handle = Runtime::start(options(), server.kube_client().unwrap())
        .await
        .expect("runtime starts");
    eventually(10, "the claim selected for n0 after the refusal", || {
        server
            .store()
            .get("persistentvolumeclaims", "ml", "data")
            .unwrap()["metadata"]["annotations"][SELECTED_NODE]
            == "n0"
    })
    .await;
    let patches = server
        .request_counts()
        .get(Verb::Patch, "persistentvolumeclaims", "");
    assert!(patches >= 2, "{patches} patch(es) of the claim");
    // Nothing provisions here: the member waits for its volume, unbound.
    assert_eq!(node_of(&server, "ml", "train-0"), None);
    handle.shutdown().await;
}
