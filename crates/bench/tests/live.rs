//! The live benchmarks end to end at tiny sizes: they run, and their figures are sane (every
//! pod bound, rates positive). No timing is asserted. They need the `stand-in` feature
//! (`cargo test -p caldera-bench --features stand-in`; the workspace's tests turn it on).
#![cfg(feature = "stand-in")]

use caldera_bench::cold_start::{self, ColdStartOptions};
use caldera_bench::e2e::{self, E2eOptions};
use caldera_bench::live::Backend;
use caldera_testkit::apiserver::ApiServer;
use std::time::Duration;

fn tiny() -> E2eOptions {
    E2eOptions {
        nodes: 2,
        gangs: 3,
        gang_size: 2,
        settle: Duration::from_millis(300),
        timeout: Duration::from_secs(60),
        ..E2eOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_on_the_stand_in_binds_every_pod_and_compares_with_raw_binds() {
    let r = e2e::run_stand_in(&tiny()).await.unwrap();
    assert_eq!(r.target, "stand-in");
    assert_eq!(r.pods, 6, "pods bound == pods created");
    assert_eq!(r.raw_pods, 6);
    assert_eq!(r.raw_errors, 0);
    assert!(
        r.bind_rate > 0.0 && r.raw_bind_rate > 0.0 && r.ratio > 0.0,
        "{r:?}"
    );
    assert!(
        r.first_create_to_first_bind_seconds <= r.first_create_to_last_bind_seconds,
        "{r:?}"
    );
    assert_eq!(r.writes.get("create pods/binding"), Some(&6), "{r:?}");
    assert!(r.api_writes_per_bound_pod >= 1.0, "{r:?}");
    assert!(r.api_requests_per_bound_pod >= r.api_writes_per_bound_pod);
    assert!(r.sessions >= 1);
    assert!(r.cleanup_errors.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e2e_through_a_kubeconfig_counts_in_the_client_and_cleans_up() {
    // The real-cluster path (API creates, a counting layer, cleanup), against a stand-in.
    let server = ApiServer::start().await.unwrap();
    let config = kube::Config::new(server.url().parse().unwrap());
    let backend = Backend::cluster(config).unwrap();
    let r = e2e::run(&tiny(), &backend).await.unwrap();
    assert_eq!(r.target, "cluster");
    assert_eq!(r.counts_source, "client");
    assert_eq!(r.pods, 6);
    assert_eq!(r.raw_pods, 6);
    assert!(r.ratio > 0.0, "{r:?}");
    assert_eq!(r.writes.get("create pods/binding"), Some(&6), "{r:?}");
    assert!(r.cleanup_errors.is_empty(), "{:?}", r.cleanup_errors);
    let store = server.store();
    assert_eq!(store.count("nodes"), 0, "the run's nodes are deleted");
    assert!(store
        .list("namespaces")
        .iter()
        .all(|n| !n["metadata"]["name"]
            .as_str()
            .unwrap()
            .starts_with("caldera-bench-")));
    assert!(store
        .list("pods")
        .iter()
        .all(|p| !p["metadata"]["namespace"]
            .as_str()
            .unwrap()
            .starts_with("caldera-bench-")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_start_binds_the_new_job() {
    let r = cold_start::run(&ColdStartOptions {
        nodes: 4,
        pods: 40,
        settle: Duration::from_millis(300),
        timeout: Duration::from_secs(60),
        ..ColdStartOptions::default()
    })
    .await
    .unwrap();
    assert_eq!((r.nodes, r.pods), (4, 40));
    assert!(r.podgroups > 0);
    assert!(r.cold_start_seconds > 0.0, "{r:?}");
    assert!(r.caches_synced_seconds <= r.cold_start_seconds, "{r:?}");
    assert!(r.first_session_seconds <= r.cold_start_seconds, "{r:?}");
}
