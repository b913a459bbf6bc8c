//! The API server failing every bind for a while: each pod is tried once per backoff step of
//! its own (not once per session or per inline retry), and once the server answers again the
//! whole backlog goes through at once.

mod common;

use caldera_binder::{Binder, NoObserver, Options, RetryPolicy};
use caldera_model::{Bind, Plan, Snapshot, Time};
use caldera_testkit::apiserver::{ApiServer, Verb};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PODS: u32 = 12;

fn binds(server: &ApiServer) -> Plan {
    let mut plan = Plan::default();
    for i in 0..PODS {
        let name = format!("g-{i}");
        let pod = server.store().get("pods", "ns", &name).expect("pod exists");
        plan.binds.push(Bind {
            pod: caldera_model::ObjectRef {
                namespace: "ns".into(),
                name: name.into(),
                uid: pod["metadata"]["uid"].as_str().unwrap_or_default().into(),
            },
            node: "n0".into(),
            job: "ns/g".into(),
        });
    }
    plan
}

fn bind_requests(server: &ApiServer) -> u64 {
    server.request_counts().get(Verb::Create, "pods", "binding")
}

#[tokio::test]
async fn binds_back_off_per_pod_through_an_outage_and_go_together_when_it_ends() {
    let server = ApiServer::start().await.expect("stand-in starts");
    common::create_nodes(&server, 1, 16);
    common::create_gang(&server, "ns", "g", PODS, 1);
    server.fail_next(Verb::Create, "pods", "binding", 503, 1_000_000);
    let policy = RetryPolicy {
        attempts: 1,
        initial_backoff: Duration::from_millis(200),
        max_backoff: Duration::from_millis(800),
        rounds: 1_000,
    };
    let binder = Binder::new(
        // Caldera's client: no retries of its own under the binder's.
        caldera_runtime::client(kube::Config::new(server.url().parse().expect("url")))
            .expect("client"),
        Options {
            retry: policy,
            ..Options::default()
        },
        Arc::new(NoObserver),
    );
    let started = Instant::now();
    binder.dispatch(binds(&server), &Snapshot::default(), Time::from_secs(1));
    // Sessions every 20 ms for 1.5 s, as the runtime dispatches (its retry list included).
    while started.elapsed() < Duration::from_millis(1_500) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        binder.dispatch(Plan::default(), &Snapshot::default(), Time::from_secs(1));
    }
    let during = bind_requests(&server);
    // Steps of 200, 400, 800 ms (stretched by up to 25%) from the first attempt: at most four
    // attempts a pod in 1.5 s, against 75 sessions.
    assert!(
        during >= u64::from(PODS) && during <= 4 * u64::from(PODS),
        "{during} bind requests for {PODS} pods"
    );
    // A bind sent in the last step may still be in flight: it joins the list once refused.
    common::eventually(5, "all waiting on the retry list", || {
        binder.retry_len() == PODS as usize
    })
    .await;
    // The server answers again: once one pod's next step finds it back, the rest follow at
    // once, not each at its own next step.
    server.clear_failures();
    let back = Instant::now();
    common::eventually(5, "every pod bound", || {
        binder.dispatch(Plan::default(), &Snapshot::default(), Time::from_secs(1));
        common::bound(&server, "ns", "g", PODS) == PODS as usize
    })
    .await;
    assert!(
        // One step (800 ms, +25%) after the server came back, with room for a loaded machine.
        back.elapsed() < Duration::from_millis(3_000),
        "recovered in {:?}: at most one step (800 ms, +25%) after the server came back",
        back.elapsed()
    );
    assert!(bind_requests(&server) <= during + 2 * u64::from(PODS));
}

fn podgroup_status(running: u32) -> Plan {
    let mut plan = Plan::default();
    plan.podgroups.push(caldera_model::PodGroupStatusUpdate {
        namespace: "ns".into(),
        name: "g".into(),
        status: caldera_model::PodGroupStatus {
            phase: caldera_model::PodGroupPhase::Running,
            conditions: Vec::new(),
            running,
            succeeded: 0,
            failed: 0,
        },
        native: false,
    });
    plan
}

fn status_patches(server: &ApiServer) -> u64 {
    server
        .request_counts()
        .get(Verb::Patch, "podgroups.scheduling.volcano.sh", "status")
}

/// A write the server refuses as invalid (422) is not sent again unchanged, however often a
/// session plans it; a changed one is.
#[tokio::test]
async fn a_write_refused_as_invalid_is_not_resent_until_it_changes() {
    let server = ApiServer::start().await.expect("stand-in starts");
    common::create_gang(&server, "ns", "g", 1, 1);
    server.fail_next(
        Verb::Patch,
        "podgroups.scheduling.volcano.sh",
        "status",
        422,
        1,
    );
    let binder = Binder::new(
        caldera_runtime::client(kube::Config::new(server.url().parse().expect("url")))
            .expect("client"),
        Options::default(),
        Arc::new(NoObserver),
    );
    for _ in 0..3 {
        binder.dispatch(podgroup_status(1), &Snapshot::default(), Time::from_secs(1));
        assert!(binder.drain(Duration::from_secs(10)).await, "answered");
    }
    assert_eq!(
        status_patches(&server),
        1,
        "refused once, not sent again unchanged"
    );
    binder.dispatch(podgroup_status(2), &Snapshot::default(), Time::from_secs(1));
    assert!(binder.drain(Duration::from_secs(10)).await, "answered");
    assert_eq!(status_patches(&server), 2, "the changed write goes");
}
