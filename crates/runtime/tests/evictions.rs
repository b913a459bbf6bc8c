//! Evictions against the API stand-in, through the client `caldera run` builds
//! (`caldera_runtime::client`): a PodDisruptionBudget's refusal reaches the binder at once,
//! and it leaves the victim gang whole.

mod common;

use caldera_binder::{Binder, Follow, Observer, Options, Target};
use caldera_model::{Eviction, Plan, Snapshot, Time};
use caldera_testkit::apiserver::{ApiServer, Verb};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// Records the binder's verdict on each pod it was asked to evict.
#[derive(Default)]
struct Seen {
    evicted: Mutex<Vec<String>>,
    dropped: Mutex<Vec<String>>,
    changed: Notify,
}

fn pod_name(t: &Target) -> String {
    match t {
        Target::Pod { name, .. } => name.to_string(),
        other => format!("{other:?}"),
    }
}

impl Observer for Seen {
    fn written(&self, target: &Target, _resource_version: Option<&str>) {
        self.evicted.lock().unwrap().push(pod_name(target));
        self.changed.notify_one();
    }

    fn write_dropped(&self, target: &Target) {
        self.dropped.lock().unwrap().push(pod_name(target));
        self.changed.notify_one();
    }
}

impl Seen {
    fn answered(&self) -> usize {
        self.evicted.lock().unwrap().len() + self.dropped.lock().unwrap().len()
    }
}

/// `ns/<name>`, bound to `n1`, running and ready; `covered` pods carry the label the budget
/// selects.
async fn running_pod(pods: &Api<Pod>, name: &str, covered: bool) -> TestResult {
    let labels = if covered {
        json!({"app": "train"})
    } else {
        json!({"app": "other"})
    };
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"schedulerName": "caldera",
            "containers": [{"name": "main", "image": "trainer:1.0"}]}
    }))?;
    pods.create(&PostParams::default(), &pod).await?;
    let binding: k8s_openapi::api::core::v1::Binding = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    }))?;
    pods.create_subresource::<_, k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>(
        "binding",
        name,
        &PostParams::default(),
        &binding,
    )
    .await?;
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await?;
    Ok(())
}

fn eviction(pod: &Pod) -> Eviction {
    let name = pod.metadata.name.clone().unwrap_or_default();
    Eviction {
        pod: caldera_model::ObjectRef {
            namespace: "ns".into(),
            name: name.into(),
            uid: pod.metadata.uid.clone().unwrap_or_default().into(),
        },
        node: "n1".into(),
        job: "ns/train".into(),
        preemptor: "ns/urgent".into(),
        action: "preempt",
        budgeted: pod
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.get("app").map(String::as_str) == Some("train")),
    }
}

#[tokio::test]
async fn a_refused_eviction_is_seen_at_once_and_stops_the_rest_of_its_gang() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    // Two members the budget covers (both must stay: it allows no disruption), one it does
    // not.
    running_pod(&pods, "train-0", true).await?;
    running_pod(&pods, "train-1", true).await?;
    running_pod(&pods, "train-2", false).await?;
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(admin, "ns");
    let budget: PodDisruptionBudget = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "train"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}}
    }))?;
    budgets.create(&PostParams::default(), &budget).await?;
    let allowed = budgets
        .get("train")
        .await?
        .status
        .and_then(|s| s.disruptions_allowed)
        .unwrap_or(-1);
    assert_eq!(allowed, 0, "the stand-in's disruption controller");

    let seen = Arc::new(Seen::default());
    let client = caldera_runtime::client(kube::Config::new(server.url().parse()?))?;
    let binder = Binder::new(
        client,
        Options {
            follow: Follow {
                report_quiet: Duration::ZERO,
                ..Follow::default()
            },
            ..Options::default()
        },
        seen.clone(),
    );
    let before = server.request_counts();
    // The plan's order, covered members first, as close writes it.
    let mut plan = Plan::default();
    for name in ["train-0", "train-1", "train-2"] {
        plan.evictions.push(eviction(&pods.get(name).await?));
    }
    binder.dispatch(plan, &Snapshot::default(), Time::from_secs(1_000));
    // kube's own retry layer would resend the refused eviction for minutes before the binder
    // saw the 429; without it the answer is there at once.
    tokio::time::timeout(Duration::from_secs(1), async {
        while seen.answered() < 3 {
            seen.changed.notified().await;
        }
    })
    .await?;
    let evictions = server
        .request_counts()
        .since(&before)
        .get(Verb::Create, "pods", "eviction");
    assert_eq!(
        evictions, 1,
        "one request: refused, not retried, nothing after it"
    );
    assert!(seen.evicted.lock().unwrap().is_empty());
    assert_eq!(
        *seen.dropped.lock().unwrap(),
        ["train-0", "train-1", "train-2"]
    );
    for name in ["train-0", "train-1", "train-2"] {
        let pod = pods.get(name).await?;
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "{name} still runs: the gang stays whole"
        );
    }
    Ok(())
}

/// Every victim of a plan goes out at once: the members of a victim gang no budget covers are
/// evicted together (the API server cannot refuse them), and the next gang's follow without
/// waiting for the answers. Each eviction request here waits until ten are in flight: sent one
/// at a time per gang (as the binder used to), they never are.
#[tokio::test]
async fn a_plans_victims_are_evicted_together_gang_after_gang() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin, "ns");
    let mut plan = Plan::default();
    for (gang, members) in [("train", 6), ("tune", 4)] {
        for i in 0..members {
            let name = format!("{gang}-{i}");
            running_pod(&pods, &name, false).await?;
            let mut e = eviction(&pods.get(&name).await?);
            e.job = format!("ns/{gang}").into();
            plan.evictions.push(e);
        }
    }
    let tap = common::BindTap::default();
    tap.evictions();
    tap.barrier(10);
    let seen = Arc::new(Seen::default());
    let binder = Binder::new(tap.client(&server), Options::default(), seen.clone());
    binder.dispatch(plan, &Snapshot::default(), Time::from_secs(1_000));
    tokio::time::timeout(Duration::from_secs(30), async {
        while seen.answered() < 10 {
            seen.changed.notified().await;
        }
    })
    .await?;
    assert_eq!(seen.evicted.lock().unwrap().len(), 10, "{:?}", seen.dropped);
    assert_eq!(tap.max_in_flight(), 10, "all ten in flight together");
    for i in 0..6 {
        let pod = pods.get(&format!("train-{i}")).await?;
        assert!(
            pod.metadata.deletion_timestamp.is_some(),
            "train-{i} terminating"
        );
    }
    Ok(())
}
