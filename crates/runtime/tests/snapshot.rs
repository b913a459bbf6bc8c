//! `caldera snapshot`'s manifests read back by the simulator: same nodes, pods, groups.

mod common;

use caldera_testkit::apiserver::ApiServer;
use common::*;

#[tokio::test]
async fn snapshot_manifests_replay_in_the_simulator() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 2, 8);
    create_gang(&server, "ml", "train", 3, 2);
    server
        .store()
        .modify("pods", "ml", "train-0", |p| {
            p["spec"]["nodeName"] = "n1".into()
        })
        .unwrap();
    let client = server.kube_client().unwrap();
    let yaml = caldera_runtime::manifests::cluster_manifests(&client)
        .await
        .unwrap();
    assert!(!yaml.contains("managedFields") && !yaml.contains("resourceVersion"));
    // The uids stay (owner references name their owners by uid) and are kept on replay.
    let train0_uid = server.store().get("pods", "ml", "train-0").unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(yaml.contains(&format!("uid: {train0_uid}")), "{yaml}");

    let manifests = caldera_sim::manifest::parse_stream(&yaml, "snapshot.yaml").unwrap();
    let mut sim = caldera_sim::Simulation::new(&fast_config()).unwrap();
    for (origin, object) in manifests.objects {
        sim.apply([object])
            .unwrap_or_else(|e| panic!("{origin}: {e}"));
    }
    let snap = sim.snapshot();
    assert_eq!(snap.nodes.len(), 2);
    let job = snap.jobs.iter().find(|j| &*j.id == "ml/train").unwrap();
    assert_eq!(job.min_member, 3);
    assert_eq!(job.tasks.len(), 3);
    assert!(job.tasks.iter().any(|&t| *snap.tasks[t].uid == *train0_uid));
    let n1 = snap.nodes.iter().find(|n| &*n.name == "n1").unwrap();
    assert_eq!(
        n1.used.get("nvidia.com/gpu"),
        2,
        "the bound pod counts on its node"
    );
}
