//! How fast binds go against the API stand-in (run with `--ignored --nocapture`; prints the
//! figures). Not a pass/fail test: the stand-in and a debug build set the numbers.

mod common;

use caldera_runtime::Runtime;
use caldera_testkit::apiserver::{ApiServer, Verb};
use common::*;
use std::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run explicitly"]
async fn bind_throughput() {
    let server = ApiServer::start().await.unwrap();
    let (nodes, gangs, members) = (100, 100, 8);
    create_nodes(&server, nodes, 8);
    let handle = Runtime::start(options(), server.kube_client().unwrap())
        .await
        .unwrap();
    eventually(30, "synced", || handle.is_synced()).await;
    let started = Instant::now();
    for g in 0..gangs {
        create_gang(&server, "ml", &format!("g{g}"), members, 1);
    }
    let created = started.elapsed();
    eventually(120, "all bound", || {
        (0..gangs).all(|g| bound(&server, "ml", &format!("g{g}"), members) == members as usize)
    })
    .await;
    let took = started.elapsed();
    let pods = gangs * members;
    let binds = server.request_counts().get(Verb::Create, "pods", "binding");
    println!(
        "{pods} pods in {gangs} gangs on {nodes} nodes: created in {created:?}, all bound after {took:?} \
         ({:.0} binds/s end to end); {binds} bind requests; max {} binds in flight; {} sessions",
        pods as f64 / took.as_secs_f64(),
        handle.binder().max_in_flight(),
        handle.sessions()
    );
    handle.shutdown().await;
}
