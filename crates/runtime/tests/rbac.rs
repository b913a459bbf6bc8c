//! `caldera run` under the shipped RBAC (`deploy/rbac.yaml`), on the API stand-in enforcing it:
//! a refused optional kind does not hold other gangs, and is asked again at once on request
//! (SIGHUP in `caldera run`), not only at the end of its minutes-long back-off.

mod common;

use caldera_runtime::Runtime;
use caldera_testkit::apiserver::{yaml_documents, ApiServer, Options as ServerOptions, Rbac};
use common::*;
use std::time::{Duration, Instant};

const TOKEN: &str = "sa-token";

fn shipped() -> Rbac {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let mut docs = Vec::new();
    for file in ["serviceaccount.yaml", "rbac.yaml"] {
        let text = std::fs::read_to_string(root.join(file)).expect("deploy/");
        docs.extend(yaml_documents(&text).expect("yaml"));
    }
    Rbac::service_account(&docs, "caldera-system", "caldera", TOKEN).expect("rbac")
}

fn client(server: &ApiServer) -> kube::Client {
    let mut config = kube::Config::new(server.url().parse().expect("url"));
    config.auth_info.token = Some(TOKEN.to_string().into());
    caldera_runtime::client(config).expect("client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_optional_kind_holds_nothing_else_and_is_asked_again_on_request() {
    init_logs();
    let server = ApiServer::start_with(ServerOptions {
        rbac: Some(shipped().without("resource.k8s.io", "resourceslices", "list")),
        ..ServerOptions::default()
    })
    .await
    .unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "train", 4, 1);
    let handle = Runtime::start(options(), client(&server))
        .await
        .expect("runtime starts");
    eventually(
        10,
        "the gang bound although ResourceSlices are refused",
        || bound(&server, "ml", "train", 4) == 4,
    )
    .await;
    let gauge = "caldera_watch_forbidden{kind=\"resourceslices.resource.k8s.io\"}";
    assert!(handle.metrics_text().contains(&format!("{gauge} 1")));
    let refused = server.forbidden();
    assert!(
        refused.iter().all(|(k, _)| k.resource == "resourceslices"),
        "{refused:?}"
    );
    // The operator fixes the ClusterRole and sends SIGHUP: the watch lists at once, well
    // before its 10 s back-off ends.
    server.set_rbac(Some(shipped()));
    let asked = Instant::now();
    handle.retry_refused();
    eventually(5, "the gauge back to 0", || {
        handle.metrics_text().contains(&format!("{gauge} 0"))
    })
    .await;
    assert!(asked.elapsed() < Duration::from_secs(5));
    assert!(
        server.forbidden().len() == refused.len(),
        "no refusal after the fix"
    );
    handle.shutdown().await;
}
