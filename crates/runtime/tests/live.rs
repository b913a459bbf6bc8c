//! `caldera run` in-process against the API stand-in, through a real kube client: binds,
//! concurrency, conflicts, retries, steady-state writes, leader election, restarts, config
//! reload, malformed objects and watch relists.

mod common;

use caldera_runtime::{ConfigSource, LeaderElection, Options, Runtime};
use caldera_testkit::apiserver::{ApiServer, Verb};
use common::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

async fn start(options: Options, client: kube::Client) -> caldera_runtime::RunningHandle {
    init_logs();
    Runtime::start(options, client)
        .await
        .expect("runtime starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_is_bound_whole_and_default_queue_is_created() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 2, 4);
    create_gang(&server, "ml", "train", 8, 1);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(10, "all 8 members bound", || {
        bound(&server, "ml", "train", 8) == 8
    })
    .await;
    assert_eq!(
        server.request_counts().get(Verb::Create, "pods", "binding"),
        8
    );
    assert!(server.store().get("queues", "", "default").is_some());
    eventually(5, "PodGroup Running", || {
        server.store().get("podgroups", "ml", "train").unwrap()["status"]["phase"] == "Running"
    })
    .await;
    eventually(5, "Scheduled events", || {
        server
            .store()
            .list("events.events.k8s.io")
            .iter()
            .filter(|e| e["reason"] == "Scheduled" && e["regarding"]["kind"] == "Pod")
            .count()
            == 8
    })
    .await;
    let metrics = handle.metrics_text();
    assert!(metrics.contains("caldera_pods_bound_total 8"), "{metrics}");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_short_of_gpus_binds_nothing() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "big", 8, 1);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(10, "PodGroup says Unschedulable", || {
        let pg = server.store().get("podgroups", "ml", "big").unwrap();
        pg["status"]["conditions"][0]["type"] == "Unschedulable"
    })
    .await;
    let sessions = handle.sessions();
    eventually(5, "three more sessions", || {
        handle.sessions() >= sessions + 3
    })
    .await;
    assert_eq!(bound(&server, "ml", "big", 8), 0);
    assert_eq!(
        server.request_counts().get(Verb::Create, "pods", "binding"),
        0
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_run_concurrently() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 2, 8);
    create_gang(&server, "ml", "wide", 16, 1);
    let tap = BindTap::default();
    // Each bind waits until 4 are in flight: only concurrent binds get past it quickly.
    tap.barrier(4);
    let handle = start(options(), tap.client(&server)).await;
    eventually(20, "all 16 bound", || {
        bound(&server, "ml", "wide", 16) == 16
    })
    .await;
    assert!(
        tap.max_in_flight() >= 4,
        "max in flight {}",
        tap.max_in_flight()
    );
    assert!(handle.binder().max_in_flight() >= 4);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflict_on_bind_is_not_retried_and_pod_is_not_placed_twice() {
    let server = Arc::new(ApiServer::start().await.unwrap());
    create_nodes(&server, 2, 8);
    create_gang(&server, "ml", "solo", 1, 1);
    let tap = BindTap::default();
    // Someone else binds the pod to n1 just before our bind reaches the server.
    let other = server.clone();
    tap.on_bind(move |n, _| {
        if n == 1 {
            other
                .store()
                .modify("pods", "ml", "solo-0", |p| {
                    p["spec"]["nodeName"] = "n1".into()
                })
                .unwrap();
        }
    });
    let handle = start(options(), tap.client(&server)).await;
    eventually(10, "one bind attempt", || tap.seen() >= 1).await;
    let sessions = handle.sessions();
    eventually(5, "five more sessions", || {
        handle.sessions() >= sessions + 5
    })
    .await;
    assert_eq!(
        tap.seen(),
        1,
        "a 409 is not retried and the pod is not placed again"
    );
    assert_eq!(node_of(&server, "ml", "solo-0").as_deref(), Some("n1"));
    eventually(5, "the watch shows the pod bound elsewhere", || {
        handle.assumed() == 0
    })
    .await;
    assert!(handle
        .metrics_text()
        .contains("caldera_bind_errors_total{code=\"409\"} 1"));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_500s_are_retried_and_the_gang_completes() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    create_gang(&server, "ml", "flaky", 4, 1);
    server.fail_next(Verb::Create, "pods", "binding", 500, 5);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(15, "all 4 bound", || bound(&server, "ml", "flaky", 4) == 4).await;
    assert_eq!(
        server.request_counts().get(Verb::Create, "pods", "binding"),
        9
    );
    assert!(handle
        .metrics_text()
        .contains("caldera_bind_errors_total{code=\"500\"} 5"));
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binds_failing_every_attempt_go_to_the_retry_list_and_complete_later() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    create_gang(&server, "ml", "stubborn", 4, 1);
    // Three attempts per bind in `options()`: every member exhausts them once.
    server.fail_next(Verb::Create, "pods", "binding", 500, 12);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(15, "all 4 bound", || {
        bound(&server, "ml", "stubborn", 4) == 4
    })
    .await;
    assert_eq!(
        server.request_counts().get(Verb::Create, "pods", "binding"),
        16
    );
    eventually(5, "retry list empty", || handle.binder().retry_len() == 0).await;
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_with_an_unschedulable_gang_writes_nothing() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "stuck", 8, 1);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(10, "conditions written", || {
        let pg = server.store().get("podgroups", "ml", "stuck").unwrap();
        let pod = server.store().get("pods", "ml", "stuck-7").unwrap();
        let queue = server.store().get("queues", "", "default");
        pg["status"]["conditions"][0]["type"] == "Unschedulable"
            && queue.is_some_and(|q| q["status"]["inqueue"] == 1)
            && pod["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "PodScheduled"))
    })
    .await;
    // Let the writes of the first sessions settle, then count.
    let sessions = handle.sessions();
    eventually(5, "two more sessions", || handle.sessions() >= sessions + 2).await;
    let before = server.request_counts();
    let sessions = handle.sessions();
    eventually(5, "ten more sessions", || {
        handle.sessions() >= sessions + 10
    })
    .await;
    let since = server.request_counts().since(&before);
    assert_eq!(
        since.writes(),
        0,
        "writes in steady state: {:?}",
        since.iter().collect::<Vec<_>>()
    );
    handle.shutdown().await;
}

fn elected(identity: &str) -> Options {
    Options {
        leader_election: Some(LeaderElection {
            namespace: "caldera-system".into(),
            name: "caldera".into(),
            lease_duration: Duration::from_secs(3),
            renew_period: Duration::from_millis(500),
            retry_period: Duration::from_millis(200),
        }),
        identity: Some(identity.into()),
        ..options()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_binds_and_the_other_takes_over_when_it_stops() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 2, 8);
    let a = start(elected("a"), server.kube_client().unwrap()).await;
    let b = start(elected("b"), server.kube_client().unwrap()).await;
    eventually(10, "one leader", || a.is_leader() != b.is_leader()).await;
    let (leader, follower) = if a.is_leader() { (a, b) } else { (b, a) };
    let lease = server
        .store()
        .get("leases", "caldera-system", "caldera")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], leader.identity());

    create_gang(&server, "ml", "first", 4, 1);
    eventually(10, "first gang bound", || {
        bound(&server, "ml", "first", 4) == 4
    })
    .await;
    eventually(5, "the leader counted them", || {
        leader.metrics_text().contains("caldera_pods_bound_total 4")
    })
    .await;
    assert!(follower
        .metrics_text()
        .contains("caldera_pods_bound_total 0"));
    assert!(follower.metrics_text().contains("caldera_leader 0"));

    leader.shutdown().await;
    let lease = server
        .store()
        .get("leases", "caldera-system", "caldera")
        .unwrap();
    assert!(
        lease["spec"]["holderIdentity"].is_null(),
        "released: {lease}"
    );
    eventually(5, "the other leads", || follower.is_leader()).await;
    create_gang(&server, "ml", "second", 4, 1);
    eventually(10, "second gang bound", || {
        bound(&server, "ml", "second", 4) == 4
    })
    .await;
    eventually(5, "the new leader counted them", || {
        follower
            .metrics_text()
            .contains("caldera_pods_bound_total 4")
    })
    .await;
    follower.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leaders_lease_expires_and_the_other_takes_over() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    let a = start(elected("a"), server.kube_client().unwrap()).await;
    eventually(10, "a leads", || a.is_leader()).await;
    let b = start(elected("b"), server.kube_client().unwrap()).await;
    a.abort();
    eventually(15, "b leads after the lease expires", || b.is_leader()).await;
    create_gang(&server, "ml", "after", 2, 1);
    eventually(10, "bound by b", || bound(&server, "ml", "after", 2) == 2).await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_in_the_middle_of_a_gangs_binds_completes_the_gang() {
    let server = Arc::new(ApiServer::start().await.unwrap());
    create_nodes(&server, 1, 8);
    create_gang(&server, "ml", "half", 4, 2);
    // The first runtime gets two binds through; the others hang until it crashes.
    let tap = BindTap::default();
    tap.hold_after(2);
    let first = start(options(), tap.client(&server)).await;
    eventually(10, "two bound, two in flight", || {
        bound(&server, "ml", "half", 4) == 2 && tap.held() == 2
    })
    .await;
    eventually(5, "the two bound ones seen in the watch", || {
        first.assumed() == 2
    })
    .await;
    first.abort();
    let bound_before: Vec<Option<String>> = (0..4)
        .map(|i| node_of(&server, "ml", &format!("half-{i}")))
        .collect();

    let second = start(options(), server.kube_client().unwrap()).await;
    eventually(10, "the gang is completed", || {
        bound(&server, "ml", "half", 4) == 4
    })
    .await;
    for (i, before) in bound_before.iter().enumerate() {
        if let Some(n) = before {
            assert_eq!(
                node_of(&server, "ml", &format!("half-{i}")).as_ref(),
                Some(n)
            );
        }
    }
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_reload_takes_effect_and_a_bad_config_is_rejected() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    let dir = std::env::temp_dir().join(format!("caldera-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("scheduler.yaml");
    let base = "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: predicates\n  - name: proportion\n  - name: nodeorder\nschedulePeriod: 100ms\nsessionDebounce: 10ms\n".to_string();
    std::fs::write(&path, base.clone() + "schedulerNames: [caldera]\n").unwrap();
    let mut opts = options();
    opts.config = ConfigSource::File(path.clone());
    opts.config_poll_interval = Duration::from_millis(100);
    let handle = start(opts, server.kube_client().unwrap()).await;

    let mut p = pod("ml", "other", None, 1);
    p["spec"]["schedulerName"] = "batch".into();
    server.store().create("pods", p).unwrap();
    let sessions = handle.sessions();
    eventually(10, "sessions run", || handle.sessions() >= sessions + 3).await;
    assert_eq!(node_of(&server, "ml", "other"), None, "not ours yet");

    std::fs::write(&path, base.clone() + "schedulerNames: [caldera, batch]\n").unwrap();
    eventually(10, "reloaded", || handle.config_generation() == 1).await;
    eventually(10, "bound after the reload", || {
        node_of(&server, "ml", "other").is_some()
    })
    .await;

    std::fs::write(
        &path,
        base + "schedulerNames: [caldera, batch]\nbindConcurrency: many\n",
    )
    .unwrap();
    let sessions = handle.sessions();
    eventually(10, "sessions go on", || handle.sessions() >= sessions + 5).await;
    assert_eq!(handle.config_generation(), 1, "the bad config is not used");
    server
        .store()
        .create("pods", pod("ml", "late", None, 1))
        .unwrap();
    eventually(10, "still scheduling", || {
        node_of(&server, "ml", "late").is_some()
    })
    .await;
    handle.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_podgroup_is_reported_and_scheduling_goes_on() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    let mut bad = podgroup("ml", "bad", 1);
    bad["spec"]["minResources"] = serde_json::json!({"cpu": "lots"});
    server.store().create("podgroups", bad).unwrap();
    server
        .store()
        .create("pods", pod("ml", "bad-0", Some("bad"), 1))
        .unwrap();
    let mut worse = podgroup("ml", "worse", 1);
    worse["spec"]["minMember"] = "two".into();
    server.store().create("podgroups", worse).unwrap();
    create_gang(&server, "ml", "good", 2, 1);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(10, "the good gang is bound", || {
        bound(&server, "ml", "good", 2) == 2
    })
    .await;
    let invalid = handle.invalid_objects();
    let messages: Vec<&str> = invalid.iter().map(|i| i.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("spec.minResources.cpu")),
        "{messages:?}"
    );
    assert!(invalid.iter().any(|i| i.key == "ml/worse"), "{messages:?}");
    eventually(10, "warning events on both PodGroups", || {
        let events = server.store().list("events.events.k8s.io");
        ["bad", "worse"].iter().all(|name| {
            events.iter().any(|e| {
                e["reason"] == "InvalidObject"
                    && e["type"] == "Warning"
                    && e["regarding"]["name"] == *name
            })
        })
    })
    .await;
    assert_eq!(node_of(&server, "ml", "bad-0"), None);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_410_relists_without_losing_binds_in_flight() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    let tap = BindTap::default();
    tap.hold();
    let handle = start(options(), tap.client(&server)).await;
    eventually(10, "synced", || handle.is_synced()).await;
    create_gang(&server, "ml", "held", 4, 1);
    eventually(10, "four binds held", || tap.held() == 4).await;

    let lists = server.request_counts().get(Verb::List, "pods", "");
    // A write elsewhere, so the pods watch's resourceVersion is older than the server's and
    // resuming from it after the compaction is `410 Gone`.
    server
        .store()
        .create(
            "namespaces",
            serde_json::json!({"metadata": {"name": "bump"}}),
        )
        .unwrap();
    server.store().compact();
    server.store().close_watches();
    eventually(15, "pods relisted", || {
        server.request_counts().get(Verb::List, "pods", "") > lists
    })
    .await;
    let sessions = handle.sessions();
    eventually(5, "sessions after the relist", || {
        handle.sessions() >= sessions + 3
    })
    .await;
    assert_eq!(tap.seen(), 4, "no member placed twice");
    assert_eq!(handle.assumed(), 4, "binds in flight stay assumed");

    tap.release();
    eventually(10, "all bound", || bound(&server, "ml", "held", 4) == 4).await;
    let sessions = handle.sessions();
    eventually(5, "sessions after", || handle.sessions() >= sessions + 3).await;
    assert_eq!(tap.seen(), 4);
    assert_eq!(handle.assumed(), 0);
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_stops_scheduling_at_once() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    let a = start(elected("a"), server.kube_client().unwrap()).await;
    eventually(10, "a leads", || a.is_leader()).await;
    // Another replica takes the lease (as after a long pause of this one).
    let now = "2099-01-01T00:00:00.000000Z";
    server
        .store()
        .modify("leases", "caldera-system", "caldera", |l| {
            l["spec"]["holderIdentity"] = "intruder".into();
            l["spec"]["renewTime"] = now.into();
            l["spec"]["leaseDurationSeconds"] = 3600.into();
        })
        .unwrap();
    eventually(10, "a steps down", || !a.is_leader()).await;
    let sessions = a.sessions();
    create_gang(&server, "ml", "orphan", 2, 1);
    let gets = server.request_counts().get(Verb::Get, "leases", "");
    eventually(10, "a few more election rounds", || {
        server.request_counts().get(Verb::Get, "leases", "") >= gets + 5
    })
    .await;
    assert_eq!(a.sessions(), sessions, "no session without the lease");
    assert_eq!(bound(&server, "ml", "orphan", 2), 0);
    assert!(a.metrics_text().contains("caldera_leader 0"));
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gang_that_times_out_has_its_pending_members_failed() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 4);
    let mut pg = podgroup("ml", "late", 8);
    pg["spec"]["scheduleTimeoutSeconds"] = 1.into();
    server.store().create("podgroups", pg).unwrap();
    for i in 0..8 {
        server
            .store()
            .create("pods", pod("ml", &format!("late-{i}"), Some("late"), 1))
            .unwrap();
    }
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(15, "members failed with GangScheduleTimeout", || {
        (0..8).all(|i| {
            let p = server
                .store()
                .get("pods", "ml", &format!("late-{i}"))
                .unwrap();
            p["status"]["phase"] == "Failed" && p["status"]["reason"] == "GangScheduleTimeout"
        })
    })
    .await;
    eventually(5, "PodGroup says ScheduleTimeout", || {
        let pg = server.store().get("podgroups", "ml", "late").unwrap();
        pg["status"]["conditions"][0]["reason"] == "ScheduleTimeout"
    })
    .await;
    assert_eq!(bound(&server, "ml", "late", 8), 0);
    handle.shutdown().await;
}

fn autoscaling_options() -> Options {
    let mut config = fast_config();
    config.autoscaler = Some(Box::default());
    Options {
        config: ConfigSource::Fixed(config),
        ..options()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_provisioning_request_crd_a_gang_waits_as_before() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "big", 8, 1);
    let handle = start(autoscaling_options(), server.kube_client().unwrap()).await;
    eventually(10, "PodGroup says NotEnoughResources", || {
        let pg = server.store().get("podgroups", "ml", "big").unwrap();
        pg["status"]["conditions"][0]["reason"] == "NotEnoughResources"
    })
    .await;
    let sessions = handle.sessions();
    eventually(5, "three more sessions", || {
        handle.sessions() >= sessions + 3
    })
    .await;
    assert_eq!(server.store().count("podtemplates"), 0);
    let pod = server.store().get("pods", "ml", "big-0").unwrap();
    assert!(pod["metadata"]["annotations"]
        .get("autoscaling.x-k8s.io/consume-provisioning-request")
        .is_none());
    handle.shutdown().await;
}

/// A PodTemplate the API server refuses as invalid (422) is reported once — a Warning event
/// and the PodGroup's condition naming why — and not sent again every session: the request
/// counts as failed, and the next attempt waits for the request back-off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_autoscaler_request_is_reported_on_the_podgroup_and_not_resent() {
    let server = ApiServer::start().await.unwrap();
    let crd = serde_json::to_value(caldera_api::provisioning_request_crd()).unwrap();
    server
        .store()
        .create("customresourcedefinitions", crd)
        .unwrap();
    create_nodes(&server, 1, 4);
    server.fail_next(Verb::Create, "podtemplates", "", 422, 1);
    create_gang(&server, "ml", "big", 8, 1);
    let handle = start(autoscaling_options(), server.kube_client().unwrap()).await;
    eventually(
        10,
        "PodGroup says ProvisioningFailed, naming the refusal",
        || {
            let pg = server.store().get("podgroups", "ml", "big").unwrap();
            let c = &pg["status"]["conditions"][0];
            c["reason"] == "ProvisioningFailed"
                && c["message"].as_str().is_some_and(|m| {
                    m.contains("refused by the API server as invalid")
                        && m.contains("injected failure")
                })
        },
    )
    .await;
    let sessions = handle.sessions();
    eventually(5, "five more sessions", || {
        handle.sessions() >= sessions + 5
    })
    .await;
    assert_eq!(
        server
            .request_counts()
            .get(Verb::Create, "podtemplates", ""),
        1,
        "the refused template is not sent again"
    );
    assert_eq!(server.store().count("provisioningrequests"), 0);
    let warnings = || -> Vec<serde_json::Value> {
        server
            .store()
            .list("events.events.k8s.io")
            .into_iter()
            .filter(|e| e["reason"] == "ProvisioningRequestInvalid")
            .collect()
    };
    eventually(5, "the Warning event", || !warnings().is_empty()).await;
    let warnings = warnings();
    assert_eq!(warnings.len(), 1, "one Warning event: {warnings:?}");
    assert_eq!(warnings[0]["regarding"]["name"], "big");
    assert_eq!(warnings[0]["type"], "Warning");
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_crd_a_gang_short_of_nodes_gets_one_request_found_again_after_a_restart() {
    let server = ApiServer::start().await.unwrap();
    let crd = serde_json::to_value(caldera_api::provisioning_request_crd()).unwrap();
    server
        .store()
        .create("customresourcedefinitions", crd)
        .unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "big", 8, 1);
    let handle = start(autoscaling_options(), server.kube_client().unwrap()).await;
    eventually(10, "a ProvisioningRequest for the gang", || {
        server.store().count("provisioningrequests") == 1
    })
    .await;
    let pr = server
        .store()
        .get("provisioningrequests", "ml", "big-cap-1")
        .unwrap();
    assert_eq!(pr["spec"]["podSets"][0]["count"], 8);
    assert_eq!(
        pr["spec"]["provisioningClassName"],
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    );
    assert!(server
        .store()
        .get("podtemplates", "ml", "big-cap-1-0")
        .is_some());
    eventually(5, "members annotated to consume it", || {
        (0..8).all(|i| {
            let pod = server
                .store()
                .get("pods", "ml", &format!("big-{i}"))
                .unwrap();
            pod["metadata"]["annotations"]["autoscaling.x-k8s.io/consume-provisioning-request"]
                == "big-cap-1"
        })
    })
    .await;
    eventually(5, "PodGroup says WaitingForCapacity", || {
        let pg = server.store().get("podgroups", "ml", "big").unwrap();
        pg["status"]["conditions"][0]["reason"] == "WaitingForCapacity"
    })
    .await;
    // A restarted scheduler finds the request by its label and makes no second one.
    handle.shutdown().await;
    let again = start(autoscaling_options(), server.kube_client().unwrap()).await;
    let sessions = again.sessions();
    eventually(5, "three sessions", || again.sessions() >= sessions + 3).await;
    assert_eq!(server.store().count("provisioningrequests"), 1);
    // Capacity frees up: the gang is placed without the autoscaler, and its request goes.
    server.store().create("nodes", node("big-a", 8)).unwrap();
    eventually(10, "the gang bound", || bound(&server, "ml", "big", 8) == 8).await;
    eventually(10, "the request and its PodTemplate deleted", || {
        server.store().count("provisioningrequests") == 0
            && server.store().count("podtemplates") == 0
    })
    .await;
    again.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_deleted_while_members_wait_leaves_them_unannotated() {
    let server = ApiServer::start().await.unwrap();
    let crd = serde_json::to_value(caldera_api::provisioning_request_crd()).unwrap();
    server
        .store()
        .create("customresourcedefinitions", crd)
        .unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "big", 8, 1);
    // Someone else's pod with the same annotation is none of Caldera's business.
    let mut other = pod("ml", "other", None, 1);
    other["spec"]["schedulerName"] = "default-scheduler".into();
    other["metadata"]["annotations"] =
        json!({"autoscaling.x-k8s.io/consume-provisioning-request": "big-cap-1"});
    server.store().create("pods", other).unwrap();
    let handle = start(autoscaling_options(), server.kube_client().unwrap()).await;
    let consumes = |name: &str| {
        server.store().get("pods", "ml", name).unwrap()["metadata"]["annotations"]
            ["autoscaling.x-k8s.io/consume-provisioning-request"]
            .clone()
    };
    eventually(
        10,
        "a request, and the members annotated to consume it",
        || {
            server.store().count("provisioningrequests") == 1
                && (0..8).all(|i| consumes(&format!("big-{i}")) == "big-cap-1")
        },
    )
    .await;
    // The PodGroup opts out while its members still wait: the request goes, and so do the
    // annotations (cluster-autoscaler would otherwise leave the members to it forever).
    server
        .store()
        .modify("podgroups", "ml", "big", |pg| {
            pg["metadata"]["annotations"] =
                json!({"scheduling.caldera.sh/provisioning-request": "false"});
        })
        .unwrap();
    eventually(10, "the request and its PodTemplate deleted", || {
        server.store().count("provisioningrequests") == 0
            && server.store().count("podtemplates") == 0
    })
    .await;
    eventually(10, "no member consumes it any more", || {
        (0..8).all(|i| {
            let p = server
                .store()
                .get("pods", "ml", &format!("big-{i}"))
                .unwrap();
            let a = &p["metadata"]["annotations"];
            a.get("autoscaling.x-k8s.io/consume-provisioning-request")
                .is_none()
                && a.get("autoscaling.x-k8s.io/provisioning-class-name")
                    .is_none()
                && a["scheduling.k8s.io/group-name"] == "big"
        })
    })
    .await;
    assert_eq!(consumes("other"), "big-cap-1", "not Caldera's pod");
    handle.shutdown().await;
}

/// With the queue tree in use (`capacity` with `enableHierarchy: true`), the runtime creates
/// the `root` Queue (Volcano does too) and reports queues out of the tree on the Queue: a
/// `Schedulable=False` condition and a Warning event about the Queue in `default`. The
/// shipped (flat) config creates no `root`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_tree_creates_root_and_reports_a_cycle_on_the_queues() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 4);
    for (name, parent) in [("x", "y"), ("y", "x")] {
        server
            .store()
            .create(
                "queues",
                json!({
                    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": name},
                    "spec": {"weight": 1, "parent": parent}
                }),
            )
            .expect("create queue");
    }
    let config = caldera_config::parse(
        "actions: \"enqueue, allocate, backfill\"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: predicates\n  - name: capacity\n    enableHierarchy: true\n  - name: nodeorder\n",
        None,
    )
    .unwrap();
    let mut opts = options();
    opts.config = caldera_runtime::ConfigSource::Fixed(caldera_config::SchedulerConfig {
        schedule_period: Duration::from_millis(100),
        session_debounce: Duration::from_millis(10),
        ..config
    });
    let handle = start(opts, server.kube_client().unwrap()).await;
    eventually(10, "root created, x and y report the cycle", || {
        let root = server.store().get("queues", "", "root");
        let cycle = |q: &str| {
            let q = server.store().get("queues", "", q).unwrap();
            q["status"]["conditions"][0]["type"] == "Schedulable"
                && q["status"]["conditions"][0]["status"] == "False"
                && q["status"]["conditions"][0]["reason"] == "ParentCycle"
        };
        root.is_some_and(|r| r["spec"]["reclaimable"] == false) && cycle("x") && cycle("y")
    })
    .await;
    eventually(5, "one Warning event about each Queue, in default", || {
        let events = server.store().list("events.events.k8s.io");
        let about = |q: &str| {
            events
                .iter()
                .filter(|e| {
                    e["regarding"]["kind"] == "Queue"
                        && e["regarding"]["name"] == q
                        && e["reason"] == "ParentCycle"
                        && e["type"] == "Warning"
                        && e["metadata"]["namespace"] == "default"
                })
                .count()
        };
        about("x") == 1 && about("y") == 1
    })
    .await;
    handle.shutdown().await;

    // The shipped config: flat queues, no root.
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 4);
    create_gang(&server, "ml", "flat", 1, 1);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(10, "the gang bound", || {
        bound(&server, "ml", "flat", 1) == 1
    })
    .await;
    assert!(server.store().get("queues", "", "default").is_some());
    assert!(server.store().get("queues", "", "root").is_none());
    handle.shutdown().await;
}
