//! Scale: kube-runtime's default watcher lists 150,000 pods in pages of 500, each page costing
//! O(page) on the server, in seconds even in a debug build.

use std::time::{Duration, Instant};

use caldera_testkit::apiserver::{ApiServer, Verb};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::json;

#[tokio::test]
async fn watcher_lists_150k_pods_in_pages_of_500() -> Result<(), Box<dyn std::error::Error>> {
    let server = ApiServer::start().await?;
    let started = Instant::now();
    for i in 0..150_000 {
        server.store().create(
            "pods",
            json!({
                "metadata": {"name": format!("w-{i:06}"), "namespace": format!("ns-{}", i % 50),
                             "labels": {"app": "train"}},
                "spec": {"schedulerName": "caldera", "containers": [{"name": "main", "image": "trainer:1.0",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}
            }),
        )?;
    }
    eprintln!("created 150,000 pods in {:?}", started.elapsed());
    let started = Instant::now();
    let pods: Api<Pod> = Api::all(server.kube_client()?);
    let mut stream = watcher(pods, watcher::Config::default()).boxed();
    let mut seen = 0usize;
    loop {
        let event = tokio::time::timeout(Duration::from_secs(300), stream.next())
            .await?
            .ok_or("the watcher stream ended")??;
        match event {
            watcher::Event::InitApply(_) => seen += 1,
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    eprintln!("kube-runtime listed them in {:?}", started.elapsed());
    assert_eq!(seen, 150_000);
    assert_eq!(server.request_counts().get(Verb::List, "pods", ""), 300);
    Ok(())
}
