//! The scheduler under the RBAC `deploy/` ships (every trial runs so; see `caldera_e2e::rbac`),
//! and what happens when a rule is missing: a kind Caldera can live without is reported once
//! and holds only its own pods, which go on as soon as the rule is back; a kind it cannot
//! live without stops it with the rule to add.
//!
//! On a real cluster the missing-rule trials are ignored: they edit the RBAC the stand-in
//! enforces (`ApiServer::set_rbac`); `deploy/`'s objects on a shared cluster stay as shipped.

use crate::support::block_on;
use caldera_e2e::cluster::{scheduler_options, LEASE_NAMESPACE};
use caldera_e2e::driver::new_run_id;
use caldera_e2e::rbac;
use caldera_e2e::{Cluster, DriverOptions, LiveRun, Target};
use caldera_runtime::{LeaderElection, RunningHandle, Runtime};
use caldera_testkit::apiserver::ApiServer;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use libtest_mimic::{Completion, Failed, Trial};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The trials.
pub fn trials(target: &Target) -> Vec<Trial> {
    let stand_in_only = |name: &str, body: fn() -> Result<(), Failed>| {
        let real = target.is_real();
        Trial::ignorable_test(name, move || {
            if real {
                return Ok(Completion::ignored_with(
                    "edits the RBAC the stand-in enforces",
                ));
            }
            body()?;
            Ok(Completion::Completed)
        })
    };
    vec![
        stand_in_only(
            "rbac::an_optional_kind_refused_holds_only_its_pods_until_granted",
            || block_on(optional_kind_refused()),
        ),
        stand_in_only(
            "rbac::a_required_kind_refused_stops_the_scheduler_naming_the_rule",
            || block_on(required_kind_refused()),
        ),
    ]
}

fn failed(e: impl std::fmt::Display) -> Failed {
    Failed::from(e.to_string())
}

/// A Volcano gang and a pod of a native PodGroup, on one node.
const SCENARIO: &str = r#"
apiVersion: caldera.sh/v1alpha1
kind: Scenario
metadata:
  name: refused-native-podgroups
  description: a Volcano gang beside a pod of a native PodGroup, while native PodGroups are refused
spec:
  steps:
  - apply:
    - apiVersion: v1
      kind: Node
      metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
      status:
        capacity: {cpu: '64', memory: 512Gi, pods: '110', nvidia.com/gpu: '8'}
        allocatable: {cpu: '64', memory: 512Gi, pods: '110', nvidia.com/gpu: '8'}
        conditions:
        - {type: Ready, status: 'True', reason: KubeletReady, lastHeartbeatTime: '2026-11-29T00:00:00Z', lastTransitionTime: '2026-11-29T00:00:00Z'}
    - apiVersion: scheduling.volcano.sh/v1beta1
      kind: PodGroup
      metadata: {name: train, namespace: default}
      spec: {minMember: 2}
    - apiVersion: v1
      kind: Pod
      metadata:
        name: train-0
        namespace: default
        annotations: {scheduling.k8s.io/group-name: train}
      spec:
        schedulerName: caldera
        containers:
        - {name: main, image: registry.example/worker:1, resources: {limits: {nvidia.com/gpu: '1'}}}
    - apiVersion: v1
      kind: Pod
      metadata:
        name: train-1
        namespace: default
        annotations: {scheduling.k8s.io/group-name: train}
      spec:
        schedulerName: caldera
        containers:
        - {name: main, image: registry.example/worker:1, resources: {limits: {nvidia.com/gpu: '1'}}}
    - apiVersion: scheduling.k8s.io/v1alpha2
      kind: Workload
      metadata: {name: serve, namespace: default}
      spec:
        podGroupTemplates:
        - name: replicas
          schedulingPolicy: {basic: {}}
    - apiVersion: scheduling.k8s.io/v1alpha2
      kind: PodGroup
      metadata: {name: serve-replicas, namespace: default}
      spec:
        podGroupTemplateRef: {workload: {workloadName: serve, podGroupTemplateName: replicas}}
        schedulingPolicy: {basic: {}}
    - apiVersion: v1
      kind: Pod
      metadata: {name: serve-0, namespace: default}
      spec:
        schedulerName: caldera
        schedulingGroup: {podGroupName: serve-replicas}
        containers:
        - {name: main, image: registry.example/worker:1, resources: {limits: {nvidia.com/gpu: '1'}}}
  - run: 4s
  - expect:
      podGroups:
      - {name: default/train, bound: 2}
      pods:
      - {name: default/serve-0, node: null, conditionReason: Unschedulable}
"#;

async fn eventually<T>(
    what: &str,
    within: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Result<T, Failed> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(Failed::from(format!(
                "timed out after {within:?} waiting for {what}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn server(cluster: &Cluster) -> Result<Arc<ApiServer>, Failed> {
    cluster
        .stand_in_server()
        .ok_or_else(|| Failed::from("needs the stand-in"))
}

/// Native PodGroups refused: the Volcano gang is bound, the native pod waits with a message
/// naming the permission; one error event on the Lease, `caldera_watch_forbidden` 1, a few
/// refused requests (not one every second); once the rule is back, the pod is bound within the
/// RBAC probe's period, and the gauge drops to 0.
async fn optional_kind_refused() -> Result<(), Failed> {
    let cluster = Cluster::stand_in().await.map_err(failed)?;
    let server = server(&cluster)?;
    let full = rbac::stand_in(false).map_err(failed)?;
    server.set_rbac(Some(full.clone().without(
        "scheduling.k8s.io",
        "podgroups",
        "list",
    )));
    let scenario = caldera_sim::scenario::load(SCENARIO, "refused-native").map_err(failed)?;
    let mut run = LiveRun::prepare(
        cluster.client(),
        scenario,
        DriverOptions::new(new_run_id("rbac")),
    )
    .await
    .map_err(failed)?;
    let lease = LeaderElection {
        namespace: LEASE_NAMESPACE.into(),
        name: rbac::lease_name(false).into(),
        lease_duration: Duration::from_secs(3),
        renew_period: Duration::from_millis(500),
        retry_period: Duration::from_millis(200),
    };
    let options = scheduler_options(run.scenario().config.clone(), Some(lease), "rbac");
    run.step().await.map_err(failed)?;
    let handle = Runtime::start(options, cluster.scheduler_client())
        .await
        .map_err(failed)?;
    let result = async {
        while !run.is_done() {
            let report = run.step().await.map_err(failed)?;
            if !report.passed() {
                return Err(Failed::from(format!(
                    "step {} ({}) failed:\n  - {}",
                    report.index + 1,
                    report.label,
                    report.problems.join("\n  - ")
                )));
            }
        }
        check_refused(&cluster, &server, &handle).await?;
        // The rule is back: the probe notices within its period and the pod is placed.
        server.set_rbac(Some(full));
        let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
        eventually(
            "serve-0 bound once the rule is back",
            Duration::from_secs(40),
            async || {
                let pod = pods.get("serve-0").await.ok()?;
                pod.spec?.node_name
            },
        )
        .await?;
        let metrics = handle.metrics_text();
        if !metrics.contains("caldera_watch_forbidden{kind=\"podgroups.scheduling.k8s.io\"} 0") {
            return Err(Failed::from(format!(
                "the gauge is not back to 0:\n{metrics}"
            )));
        }
        Ok(())
    }
    .await;
    handle.shutdown().await;
    let cleaned = run.cleanup().await.map_err(failed);
    result?;
    cleaned
}

async fn check_refused(
    cluster: &Cluster,
    server: &ApiServer,
    handle: &RunningHandle,
) -> Result<(), Failed> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
    let pod = pods.get("serve-0").await.map_err(failed)?;
    let message = pod
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "PodScheduled")
        .and_then(|c| c.message)
        .unwrap_or_default();
    if !(message.contains("refuses to list podgroups.scheduling.k8s.io")
        && message.contains("`list` and `watch` on `podgroups` in API group \"scheduling.k8s.io\""))
    {
        return Err(Failed::from(format!(
            "serve-0's PodScheduled message does not name the missing permission: {message:?}"
        )));
    }
    let metrics = handle.metrics_text();
    if !metrics.contains("caldera_watch_forbidden{kind=\"podgroups.scheduling.k8s.io\"} 1") {
        return Err(Failed::from(format!(
            "no caldera_watch_forbidden 1:\n{metrics}"
        )));
    }
    let events: Api<Event> = Api::namespaced(cluster.client(), LEASE_NAMESPACE);
    let events = eventually(
        "the WatchForbidden event",
        Duration::from_secs(10),
        async || {
            let list = events.list(&ListParams::default()).await.ok()?;
            let found: Vec<Event> = list
                .items
                .into_iter()
                .filter(|e| e.reason.as_deref() == Some("WatchForbidden"))
                .collect();
            (!found.is_empty()).then_some(found)
        },
    )
    .await?;
    let [event] = events.as_slice() else {
        return Err(Failed::from(format!(
            "{} WatchForbidden events, not one",
            events.len()
        )));
    };
    let regarding = event.regarding.as_ref();
    if event.type_.as_deref() != Some("Warning")
        || regarding.and_then(|r| r.kind.as_deref()) != Some("Lease")
        || regarding.and_then(|r| r.name.as_deref()) != Some(rbac::lease_name(false))
    {
        return Err(Failed::from(format!(
            "not a Warning on the Lease: {event:?}"
        )));
    }
    // Refused requests: only native PodGroups, and few (10 s doubling back-off), not one a
    // second as with kube-runtime's default back-off.
    let refused = server.forbidden();
    if refused
        .iter()
        .any(|(k, _)| k.group != "scheduling.k8s.io" || k.resource != "podgroups")
    {
        return Err(Failed::from(format!("other requests refused: {refused:?}")));
    }
    if refused.is_empty() || refused.len() > 3 {
        return Err(Failed::from(format!(
            "{} refused requests in the first seconds: {refused:?}",
            refused.len()
        )));
    }
    Ok(())
}

/// Pods refused: the runtime gives up at once with the rule to add (`caldera run` exits
/// non-zero with it: `crates/cli/tests/run.rs`).
async fn required_kind_refused() -> Result<(), Failed> {
    let cluster = Cluster::stand_in().await.map_err(failed)?;
    let server = server(&cluster)?;
    let rules = rbac::stand_in(false)
        .map_err(failed)?
        .without("", "pods", "list");
    server.set_rbac(Some(rules));
    let options = scheduler_options(
        caldera_config::SchedulerConfig::default(),
        None,
        "rbac-pods",
    );
    let handle = Runtime::start(options, cluster.scheduler_client())
        .await
        .map_err(failed)?;
    let why = tokio::time::timeout(Duration::from_secs(20), handle.failure()).await;
    handle.shutdown().await;
    let why = why.map_err(|_| Failed::from("the scheduler did not give up within 20 s"))?;
    if !(why.contains("cannot schedule without pods")
        && why.contains("`list` and `watch` on `pods`"))
    {
        return Err(Failed::from(format!(
            "the failure does not name the rule: {why}"
        )));
    }
    Ok(())
}
