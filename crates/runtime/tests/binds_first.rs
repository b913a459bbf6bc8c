//! Binds first: with a backlog, the binds go through back to back and everything users only
//! read (statuses, events) follows behind, coalesced, and nothing is lost — checked on the API
//! stand-in through its ordered log of write requests.

mod common;

use caldera_runtime::{ConfigSource, Follow, LeaderElection, Options, Runtime};
use caldera_testkit::apiserver::{ApiServer, RequestKey, Verb};
use common::*;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use kube::api::{Api, ListParams};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

async fn start(options: Options, client: kube::Client) -> caldera_runtime::RunningHandle {
    Runtime::start(options, client)
        .await
        .expect("runtime starts")
}

fn follow(report_share: f64) -> Follow {
    Follow {
        report_share,
        ..Follow::default()
    }
}

fn is_bind(k: &RequestKey) -> bool {
    k.verb == Verb::Create && k.resource == "pods" && k.subresource == "binding"
}

fn describe(k: &RequestKey) -> String {
    let group = if k.group.is_empty() {
        String::new()
    } else {
        format!(".{}", k.group)
    };
    let sub = if k.subresource.is_empty() {
        String::new()
    } else {
        format!("/{}", k.subresource)
    };
    format!("{} {}{group}{sub}", k.verb, k.resource)
}

/// The writes between the first and the last bind that are not binds.
fn between_binds(log: &[RequestKey]) -> Vec<String> {
    let first = log.iter().position(is_bind).expect("a bind");
    let last = log.iter().rposition(is_bind).expect("a bind");
    log[first..=last]
        .iter()
        .filter(|k| !is_bind(k))
        .map(describe)
        .collect()
}

fn count(log: &[RequestKey], verb: Verb, resource: &str, sub: &str) -> usize {
    log.iter()
        .filter(|k| k.verb == verb && k.resource == resource && k.subresource == sub)
        .count()
}

fn create_backlog(server: &ApiServer, gangs: usize, size: u32) {
    for g in 0..gangs {
        create_gang(server, "ml", &format!("g{g}"), size, 1);
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

/// Every PodGroup Running with `Scheduled=True`.
fn podgroups_final(server: &ApiServer) -> Result<(), String> {
    for pg in server.store().list("podgroups") {
        let s = &pg["status"];
        let scheduled = s["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Scheduled" && c["status"] == "True")
        });
        if s["phase"] != "Running" || !scheduled {
            return Err(format!("{}: {s}", pg["metadata"]["name"]));
        }
    }
    Ok(())
}

/// Per gang: the pod `Scheduled` events (counting `series.count`) and the PodGroup ones.
async fn scheduled_events(
    client: kube::Client,
) -> (BTreeMap<String, u64>, BTreeMap<String, u64>, Vec<KubeEvent>) {
    let events: Api<KubeEvent> = Api::namespaced(client, "ml");
    let events = events.list(&ListParams::default()).await.unwrap().items;
    let mut pods = BTreeMap::new();
    let mut groups = BTreeMap::new();
    for e in &events {
        if e.reason.as_deref() != Some("Scheduled") {
            continue;
        }
        let about = e.regarding.as_ref().unwrap();
        let name = about.name.clone().unwrap();
        let n = e.series.as_ref().map_or(1, |s| s.count as u64);
        match about.kind.as_deref() {
            Some("Pod") => {
                let gang = name.rsplit_once('-').unwrap().0.to_string();
                *pods.entry(gang).or_default() += n;
            }
            Some("PodGroup") => *groups.entry(name).or_default() += n,
            _ => {}
        }
    }
    (pods, groups, events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_binds_back_to_back_and_each_podgroup_status_is_written_once_after() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 40, 8);
    create_backlog(&server, 40, 8);
    let handle = start(
        Options {
            follow: follow(0.0),
            ..options()
        },
        server.kube_client().unwrap(),
    )
    .await;
    eventually(30, "every pod bound", || bound_pods(&server) == 320).await;
    eventually(10, "every PodGroup Running and Scheduled", || {
        podgroups_final(&server).is_ok()
    })
    .await;
    let (pods, groups, _) = scheduled_events(server.kube_client().unwrap()).await;
    assert!(handle.binder().drain(Duration::from_secs(10)).await);
    let (pods_after, groups_after, _) = scheduled_events(server.kube_client().unwrap()).await;
    let log = server.write_log();
    assert_eq!(
        between_binds(&log),
        Vec::<String>::new(),
        "with no token share, nothing but binds between the first and the last"
    );
    assert_eq!(count(&log, Verb::Create, "pods", "binding"), 320);
    assert_eq!(
        count(&log, Verb::Patch, "podgroups", "status"),
        40,
        "each PodGroup's status once, with its final state"
    );
    assert!(pods.len() <= pods_after.len() && groups.len() <= groups_after.len());
    for g in 0..40 {
        let name = format!("g{g}");
        assert_eq!(
            pods_after.get(&name),
            Some(&8),
            "{name}: a Scheduled event per pod"
        );
        assert_eq!(
            groups_after.get(&name),
            Some(&1),
            "{name}: one PodGroup Scheduled event"
        );
    }
    let queue = server.store().get("queues", "", "default").unwrap();
    assert_eq!(queue["status"]["running"], 40, "{queue}");
    let stats = handle.binder().stats();
    assert_eq!(
        (stats.events_folded, stats.events_dropped),
        (0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.share_writes, 0);
    handle.shutdown().await;
}

/// A ProvisioningRequest asks for nodes that take minutes to come: its writes (PodTemplates,
/// the request, the members' consume annotations) wait behind the binds like status writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autoscaler_requests_wait_behind_the_binds() {
    let server = ApiServer::start().await.unwrap();
    let crd = serde_json::to_value(caldera_api::provisioning_request_crd()).unwrap();
    server
        .store()
        .create("customresourcedefinitions", crd)
        .unwrap();
    create_nodes(&server, 20, 8);
    create_backlog(&server, 20, 8);
    // Members of 16 GPUs fit no node: the gang is short of nodes and asks for some.
    create_gang(&server, "ml", "big", 2, 16);
    let mut config = fast_config();
    config.autoscaler = Some(Box::default());
    let handle = start(
        Options {
            config: ConfigSource::Fixed(config),
            follow: follow(0.0),
            ..options()
        },
        server.kube_client().unwrap(),
    )
    .await;
    eventually(30, "the backlog bound", || bound_pods(&server) == 160).await;
    eventually(
        10,
        "a request, and both members annotated to consume it",
        || {
            server.store().count("provisioningrequests") == 1
                && (0..2).all(|i| {
                    let p = server
                        .store()
                        .get("pods", "ml", &format!("big-{i}"))
                        .unwrap();
                    p["metadata"]["annotations"]
                        ["autoscaling.x-k8s.io/consume-provisioning-request"]
                        == "big-cap-1"
                })
        },
    )
    .await;
    assert!(handle.binder().drain(Duration::from_secs(10)).await);
    let log = server.write_log();
    assert_eq!(
        between_binds(&log),
        Vec::<String>::new(),
        "no request, PodTemplate or annotation between the binds"
    );
    let last_bind = log.iter().rposition(is_bind).unwrap();
    let request = log
        .iter()
        .position(|k| k.verb == Verb::Create && k.resource == "provisioningrequests")
        .expect("the request was created");
    assert!(request > last_bind, "after the binds");
    // A session that ran before the watch showed the request may have sent it again (409).
    assert_eq!(server.store().count("podtemplates"), 1);
    assert_eq!(server.store().count("provisioningrequests"), 1);
    let sent = count(&log, Verb::Create, "provisioningrequests", "");
    let metrics = handle.metrics_text();
    assert!(
        metrics.contains(&format!(
            "caldera_api_writes_total{{kind=\"provisioningrequest\"}} {sent}"
        )),
        "{metrics}"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_share_only_that_share_goes_between_the_binds() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 40, 8);
    create_backlog(&server, 40, 8);
    let handle = start(
        Options {
            follow: follow(0.1),
            ..options()
        },
        server.kube_client().unwrap(),
    )
    .await;
    eventually(30, "every pod bound", || bound_pods(&server) == 320).await;
    eventually(10, "every PodGroup Running and Scheduled", || {
        podgroups_final(&server).is_ok()
    })
    .await;
    assert!(handle.binder().drain(Duration::from_secs(10)).await);
    let stats = handle.binder().stats();
    let others = between_binds(&server.write_log());
    assert!(stats.share_writes >= 1, "the share was used: {stats:?}");
    assert!(
        others.len() as u64 <= stats.share_writes,
        "only what the share allowed went between the binds: {others:?}, {stats:?}"
    );
    handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_over_the_queue_bound_are_folded_with_the_right_count() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 6, 8);
    create_backlog(&server, 6, 8);
    let handle = start(
        Options {
            follow: Follow {
                report_share: 0.0,
                event_queue: 4,
                event_queue_bytes: 1 << 20,
                ..Follow::default()
            },
            ..options()
        },
        server.kube_client().unwrap(),
    )
    .await;
    eventually(30, "every pod bound", || bound_pods(&server) == 48).await;
    assert!(handle.binder().drain(Duration::from_secs(10)).await);
    let (pods, groups, events) = scheduled_events(server.kube_client().unwrap()).await;
    for g in 0..6 {
        let name = format!("g{g}");
        assert_eq!(
            pods.get(&name),
            Some(&8),
            "{name}: 8 pod Scheduled events counted"
        );
        assert_eq!(groups.get(&name), Some(&1), "{name}");
    }
    assert!(
        events.len() < 54,
        "folded: {} Event objects for 54 events",
        events.len()
    );
    let folded: Vec<&KubeEvent> = events.iter().filter(|e| e.series.is_some()).collect();
    assert!(!folded.is_empty());
    for e in folded {
        let about = e.regarding.as_ref().unwrap();
        let gang = about.name.as_deref().unwrap().rsplit_once('-').unwrap().0;
        let related = e
            .related
            .as_ref()
            .expect("a folded pod event names its PodGroup");
        assert_eq!(related.kind.as_deref(), Some("PodGroup"));
        assert_eq!(related.name.as_deref(), Some(gang));
        let note = e.note.as_deref().unwrap();
        let n = e.series.as_ref().unwrap().count;
        assert!(
            note.contains(&format!(
                "and {} more Scheduled on members of PodGroup ml/{gang}",
                n - 1
            )),
            "{note}"
        );
    }
    let stats = handle.binder().stats();
    assert_eq!(stats.events_represented, 54, "{stats:?}");
    assert_eq!(stats.events_dropped, 0);
    let metrics = handle.metrics_text();
    assert!(
        metrics.contains(&format!(
            "caldera_events_folded_total {}",
            stats.events_folded
        )),
        "{metrics}"
    );
    assert!(metrics.contains("caldera_events_dropped_total 0"));
    handle.shutdown().await;
}

fn elected(identity: &str, share: f64) -> Options {
    Options {
        leader_election: Some(LeaderElection {
            namespace: "caldera-system".into(),
            name: "caldera".into(),
            lease_duration: Duration::from_secs(3),
            renew_period: Duration::from_millis(500),
            retry_period: Duration::from_millis(200),
        }),
        identity: Some(identity.into()),
        follow: follow(share),
        ..options()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_lost_across_a_leader_change_in_the_middle_of_a_backlog() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 6, 8);
    create_backlog(&server, 6, 8);
    // The first leader gets two gangs' binds through; the rest hang until it crashes, with its
    // statuses and events queued behind them.
    let tap = BindTap::default();
    tap.hold_after(16);
    let a = start(elected("a", 0.0), tap.client(&server)).await;
    eventually(10, "a leads", || a.is_leader()).await;
    let b = start(elected("b", 0.0), server.kube_client().unwrap()).await;
    eventually(10, "two gangs bound, the rest held", || {
        bound_pods(&server) == 16 && tap.held() > 0
    })
    .await;
    let log = server.write_log();
    assert_eq!(
        count(&log, Verb::Patch, "podgroups", "status"),
        0,
        "statuses wait behind the binds"
    );
    assert_eq!(count(&log, Verb::Create, "events", ""), 0, "events too");
    a.abort();

    eventually(15, "b leads", || b.is_leader()).await;
    eventually(20, "every pod bound", || bound_pods(&server) == 48).await;
    eventually(10, "every PodGroup Running and Scheduled", || {
        podgroups_final(&server).is_ok()
    })
    .await;
    assert!(b.binder().drain(Duration::from_secs(10)).await);
    // The new leader writes the Queue's status in a session after the gangs run, which may
    // come after the drain above (the Queue it created may have no status yet).
    eventually(10, "the default Queue counts 6 running", || {
        server
            .store()
            .get("queues", "", "default")
            .is_some_and(|q| q["status"]["running"] == 6)
    })
    .await;
    let (_, groups, _) = scheduled_events(server.kube_client().unwrap()).await;
    for g in 0..6 {
        let name = format!("g{g}");
        assert_eq!(
            groups.get(&name),
            Some(&1),
            "{name}: its Scheduled event, once"
        );
    }
    let pg: Value = server.store().get("podgroups", "ml", "g0").unwrap();
    assert_eq!(pg["status"]["phase"], "Running", "{pg}");
    b.shutdown().await;
}

/// A pod's `PodScheduled=False` already on its way when the pod becomes placeable: its bind
/// waits for that write's answer, so the `PodScheduled=True` the server sets when it binds is
/// the last word (a bind that overtook the write had the pod bound and reading unschedulable).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_waits_for_its_pods_condition_already_sent() {
    let server = ApiServer::start().await.unwrap();
    create_nodes(&server, 1, 8);
    // Two members of 8 GPUs, one node of 8: unschedulable, and each member is told so slowly.
    create_gang(&server, "ml", "g", 2, 8);
    server.delay_next(Verb::Patch, "pods", "status", Duration::from_secs(2), 2);
    let handle = start(options(), server.kube_client().unwrap()).await;
    eventually(10, "the PodGroup reads unschedulable", || {
        server
            .store()
            .get("podgroups", "ml", "g")
            .is_some_and(|pg| {
                pg["status"]["conditions"].as_array().is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Unschedulable" && c["status"] == "True")
                })
            })
    })
    .await;
    // The members' conditions are in flight (held 2 s); the gang fits now.
    server
        .store()
        .create("nodes", node("n1", 8))
        .expect("create node");
    eventually(10, "both members bound", || {
        bound(&server, "ml", "g", 2) == 2
    })
    .await;
    assert!(handle.binder().drain(Duration::from_secs(10)).await);
    // Each bind waited for its own pod's condition: both conditions came first.
    let log = server.write_log();
    let is_condition =
        |k: &RequestKey| k.verb == Verb::Patch && k.resource == "pods" && k.subresource == "status";
    let shown = || log.iter().map(describe).collect::<Vec<_>>();
    let first_bind = log.iter().position(is_bind).unwrap();
    let last_bind = log.iter().rposition(is_bind).unwrap();
    assert!(
        log.iter().position(is_condition).unwrap() < first_bind,
        "{:?}",
        shown()
    );
    assert_eq!(
        log[..last_bind].iter().filter(|k| is_condition(k)).count(),
        2,
        "{:?}",
        shown()
    );
    for i in 0..2 {
        let pod = server.store().get("pods", "ml", &format!("g-{i}")).unwrap();
        let scheduled = pod["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "PodScheduled"))
            .cloned();
        assert_eq!(
            scheduled.as_ref().map(|c| c["status"].clone()),
            Some(Value::from("True")),
            "g-{i}: {scheduled:?}"
        );
    }
    handle.shutdown().await;
}
