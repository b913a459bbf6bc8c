//! Scenario-level behaviour: what `caldera run` must do around a scenario, not only inside one.
//! Each test runs a real scenario through the live driver and interferes at a chosen step.
//!
//! The runtime's own tests (`crates/runtime/tests/live.rs`) cover the same mechanisms on
//! hand-made objects (election, restart, reload, malformed objects, steady state); these check
//! them where they matter to a user: the scenario still comes out right.
//!
//! Tests that need the stand-in's request counters or failure injection are reported as
//! ignored against a real cluster.

use crate::support::{block_on, config_text, ensure, eventually, eventually_async, load, BindHook};
use caldera_e2e::cluster::{
    delete_lease, scenario_scheduler, scheduler_options, start_scheduler, LEASE_NAMESPACE,
};
use caldera_e2e::driver::new_run_id;
use caldera_e2e::objects::RUN_LABEL;
use caldera_e2e::{run_scenario, Cluster, DriverOptions, LiveRun, Target};
use caldera_runtime::{ConfigSource, LeaderElection, RetryPolicy, RunningHandle, Runtime};
use caldera_sim::expect::Expect;
use caldera_sim::scenario::Step;
use caldera_testkit::apiserver::{ApiServer, Verb};
use futures::future::LocalBoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DynamicObject, ListParams};
use libtest_mimic::{Completion, Failed, Trial};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

type Body = fn(Target) -> LocalBoxFuture<'static, Result<(), Failed>>;

fn trial(name: &str, target: &Target, needs_stand_in: bool, body: Body) -> Trial {
    let target = target.clone();
    Trial::ignorable_test(name, move || {
        if needs_stand_in && target.is_real() {
            return Ok(Completion::ignored_with(
                "needs the stand-in's request counters or failure injection",
            ));
        }
        block_on(body(target))?;
        Ok(Completion::Completed)
    })
}

/// The trials.
pub fn trials(target: &Target) -> Vec<Trial> {
    vec![
        trial(
            "behaviour::leader_failover_mid_scenario_binds_each_pod_once",
            target,
            true,
            |t| Box::pin(leader_failover(t)),
        ),
        trial(
            "behaviour::restart_mid_gang_binds_completes_the_gang",
            target,
            true,
            |t| Box::pin(restart_mid_gang(t)),
        ),
        trial(
            "behaviour::config_reload_mid_scenario_takes_effect",
            target,
            false,
            |t| Box::pin(config_reload(t)),
        ),
        trial(
            "behaviour::malformed_podgroup_is_reported_and_the_scenario_passes",
            target,
            false,
            |t| Box::pin(malformed_podgroup(t)),
        ),
        trial(
            "behaviour::unschedulable_gang_writes_nothing_in_steady_state",
            target,
            true,
            |t| Box::pin(steady_state(t)),
        ),
        trial(
            "behaviour::fairshare_usage_survives_a_restart",
            target,
            false,
            |t| Box::pin(usage_survives_a_restart(t)),
        ),
        trial(
            "behaviour::gang_status_and_events_read_right",
            target,
            false,
            |t| Box::pin(what_a_user_sees(t)),
        ),
        trial(
            "driver::failing_expectation_is_reported_expected_versus_got",
            target,
            false,
            |t| Box::pin(failing_expectation(t)),
        ),
        trial(
            "driver::acts_as_node_lifecycle_controller_and_cleans_up",
            target,
            false,
            |t| Box::pin(node_lifecycle_and_cleanup(t)),
        ),
    ]
}

fn failed(e: impl std::fmt::Display) -> Failed {
    Failed::from(e.to_string())
}

/// Runs steps until `until` (exclusive) or the end; fails at the first failing step.
async fn steps(run: &mut LiveRun, until: usize) -> Result<(), Failed> {
    while run.next_step() < until && !run.is_done() {
        let report = run.step().await.map_err(failed)?;
        if !report.passed() {
            return Err(Failed::from(format!(
                "{}: step {} ({}) failed:\n  - {}",
                run.scenario().name,
                report.index + 1,
                report.label,
                report.problems.join("\n  - ")
            )));
        }
    }
    Ok(())
}

async fn prepare(cluster: &Cluster, file: &str, what: &str) -> Result<LiveRun, Failed> {
    let scenario = load(file)?;
    LiveRun::prepare(
        cluster.client(),
        scenario,
        DriverOptions::new(new_run_id(what)),
    )
    .await
    .map_err(failed)
}

fn stand_in(cluster: &Cluster) -> Result<Arc<ApiServer>, Failed> {
    cluster
        .stand_in_server()
        .ok_or_else(|| Failed::from("needs the stand-in"))
}

/// Pods of this run (label) in `default`, by name → node.
async fn pod_nodes(run: &LiveRun) -> Result<BTreeMap<String, Option<String>>, Failed> {
    let api: Api<Pod> = Api::namespaced(run.client().clone(), "default");
    let pods = api
        .list(&ListParams::default().labels(&format!("{RUN_LABEL}={}", run.run_id())))
        .await
        .map_err(failed)?;
    Ok(pods
        .items
        .into_iter()
        .map(|p| {
            let node = p.spec.and_then(|s| s.node_name);
            (p.metadata.name.unwrap_or_default(), node)
        })
        .collect())
}

async fn finish(
    cluster: &Cluster,
    mut run: LiveRun,
    handles: Vec<RunningHandle>,
    lease: Option<LeaderElection>,
    result: Result<(), Failed>,
) -> Result<(), Failed> {
    for h in handles {
        h.shutdown().await;
    }
    if let Some(le) = lease {
        delete_lease(&cluster.client(), &le.namespace, &le.name)
            .await
            .map_err(failed)?;
    }
    let cleaned = run.cleanup().await.map_err(failed);
    result?;
    cleaned
}

/// Two replicas with leader election on one stand-in; the leader crashes between the
/// scenario's first expectation and its delete step; the other takes over and finishes the
/// scenario; every pod got exactly one bind request (a second one would be a 409).
async fn leader_failover(_target: Target) -> Result<(), Failed> {
    let cluster = Cluster::stand_in().await.map_err(failed)?;
    let server = stand_in(&cluster)?;
    let mut run = prepare(&cluster, "seed2-no-deadlock.yaml", "failover").await?;
    let config = run.scenario().config.clone();
    let elected = |identity: &str| {
        scheduler_options(
            config.clone(),
            Some(LeaderElection {
                namespace: LEASE_NAMESPACE.into(),
                name: caldera_e2e::rbac::lease_name(false).into(),
                lease_duration: Duration::from_secs(3),
                renew_period: Duration::from_millis(500),
                retry_period: Duration::from_millis(200),
            }),
            identity,
        )
    };
    let (a_opts, b_opts) = (elected("a"), elected("b"));
    steps(&mut run, 1).await?;
    let a = Runtime::start(a_opts, cluster.scheduler_client())
        .await
        .map_err(failed)?;
    let b = Runtime::start(b_opts, cluster.scheduler_client())
        .await
        .map_err(failed)?;
    let mut handles = vec![a, b];
    let result = async {
        eventually(10, "one leader", || {
            handles[0].is_leader() != handles[1].is_leader()
        })
        .await?;
        // Up to and including the expectation that service A holds all 4 GPUs.
        steps(&mut run, 3).await?;
        let leader = if handles[0].is_leader() { 0 } else { 1 };
        handles.remove(leader).abort();
        eventually(15, "the other replica leads", || handles[0].is_leader()).await?;
        steps(&mut run, usize::MAX).await?;
        let binds = server.request_counts().get(Verb::Create, "pods", "binding");
        ensure(binds == 8, || {
            format!("expected one bind request per pod (8: A's 4, then B's 4), got {binds}")
        })
    }
    .await;
    finish(&cluster, run, handles, None, result).await
}

/// Seed 1's gang: when node-b frees up, the first replica gets 3 of the 8 binds through and
/// then every bind fails (500); it is killed with the gang bound in part. A new replica
/// completes the gang without moving the members already bound, and the scenario's last
/// expectation holds.
async fn restart_mid_gang(_target: Target) -> Result<(), Failed> {
    let cluster = Cluster::stand_in().await.map_err(failed)?;
    let server = stand_in(&cluster)?;
    let mut run = prepare(&cluster, "seed1-partial-gang.yaml", "restart").await?;
    let config = run.scenario().config.clone();
    let hook = BindHook::default();
    let fast = |identity: &str| {
        let mut options = scheduler_options(config.clone(), None, identity);
        options.retry = RetryPolicy {
            attempts: 3,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(200),
            rounds: 100,
        };
        options
    };
    let (first_opts, second_opts) = (fast("first"), fast("second"));
    steps(&mut run, 1).await?;
    let first = start_scheduler(
        first_opts,
        hook.client(&server.url())?,
        Duration::from_secs(30),
    )
    .await
    .map_err(failed)?;
    let mut handles = vec![first];
    let result = async {
        steps(&mut run, 3).await?;
        // Every bind request after the third fails: each arms one failure before it is sent,
        // so exactly three of them succeed whatever order they arrive in.
        let arm = server.clone();
        hook.on_bind(move |n| {
            if n > 3 {
                arm.fail_next(Verb::Create, "pods", "binding", 500, 1);
            }
        });
        // The replica is about to break the partial-gang invariant on purpose.
        run.set_check_invariants(false);
        steps(&mut run, 4).await?;
        let train_bound = |nodes: &BTreeMap<String, Option<String>>| {
            nodes
                .iter()
                .filter(|(name, node)| name.starts_with("train-") && node.is_some())
                .count()
        };
        let mut nodes = BTreeMap::new();
        eventually_async(20, "3 of 8 bound and failing binds retried", async || {
            nodes = pod_nodes(&run).await.unwrap_or_default();
            train_bound(&nodes) == 3 && hook.seen() >= 8
        })
        .await?;
        handles.remove(0).abort();
        // The failures armed for requests the dead replica sent are left in place: if such a
        // request still arrives it fails as intended, and if it never does the new replica's
        // first binds fail instead and are retried. Either way the three binds stay three.
        let before = pod_nodes(&run).await?;
        ensure(train_bound(&before) == 3, || {
            format!("3 of 8 members should be bound before the restart: {before:?}")
        })?;
        run.set_check_invariants(true);
        let second = start_scheduler(
            second_opts,
            cluster.scheduler_client(),
            Duration::from_secs(30),
        )
        .await
        .map_err(failed)?;
        handles.push(second);
        steps(&mut run, usize::MAX).await?;
        let after = pod_nodes(&run).await?;
        for (name, node) in &before {
            if node.is_some() {
                ensure(after.get(name) == Some(node), || {
                    format!("{name} moved from {node:?} to {:?}", after.get(name))
                })?;
            }
        }
        Ok(())
    }
    .await;
    finish(&cluster, run, handles, None, result).await
}

/// The scheduler starts with the scenario's config file naming no scheduler of the pods, so
/// nothing binds; the file is rewritten to the scenario's config and the rest of the scenario
/// (GPU bin-packing, from the reloaded plugin arguments) comes out as written.
async fn config_reload(target: Target) -> Result<(), Failed> {
    let file = "binpack-keeps-nodes-whole.yaml";
    let cluster = Cluster::connect(&target).await.map_err(failed)?;
    let mut run = prepare(&cluster, file, "reload").await?;
    let text = config_text(file)?;
    let dir = std::env::temp_dir().join(format!("caldera-e2e-{}", run.run_id()));
    std::fs::create_dir_all(&dir).map_err(failed)?;
    let path = dir.join("scheduler.yaml");
    std::fs::write(&path, format!("{text}schedulerNames: [e2e-nobody]\n")).map_err(failed)?;
    let run_id = run.run_id().to_string();
    let (mut options, lease) =
        scenario_scheduler(&cluster, run.scenario().config.clone(), &run_id, false);
    options.config = ConfigSource::File(path.clone());
    options.config_poll_interval = Duration::from_millis(100);
    steps(&mut run, 1).await?;
    let handle = start_scheduler(options, cluster.scheduler_client(), Duration::from_secs(30))
        .await
        .map_err(failed)?;
    let result = async {
        let sessions = handle.sessions();
        eventually(15, "three sessions", || handle.sessions() >= sessions + 3).await?;
        let nodes = pod_nodes(&run).await?;
        ensure(nodes.values().all(Option::is_none), || {
            format!("no pod is the scheduler's yet, yet some are bound: {nodes:?}")
        })?;
        std::fs::write(&path, &text).map_err(failed)?;
        eventually(15, "the config reloaded", || {
            handle.config_generation() == 1
        })
        .await?;
        steps(&mut run, usize::MAX).await
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    finish(&cluster, run, vec![handle], lease, result).await
}

/// A PodGroup whose `minResources` the API server accepts (it matches the CRD's quantity
/// pattern) but no scheduler can use (`1e300` GPUs) sits beside seed 2's services: the
/// scheduler says so with a Warning event on it, leaves its pod alone, and the scenario passes.
async fn malformed_podgroup(target: Target) -> Result<(), Failed> {
    let cluster = Cluster::connect(&target).await.map_err(failed)?;
    let scenario = load("seed2-no-deadlock.yaml")?;
    let run_id = new_run_id("malformed");
    let (options, lease) = scenario_scheduler(&cluster, scenario.config.clone(), &run_id, false);
    let mut run = LiveRun::prepare(cluster.client(), scenario, DriverOptions::new(&run_id))
        .await
        .map_err(failed)?;
    let refused = run
        .apply_values(vec![
            json!({
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": {"name": "broken", "namespace": "default"},
                "spec": {"minMember": 1, "minResources": {"nvidia.com/gpu": "1e300"}}
            }),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "broken-0", "namespace": "default",
                             "annotations": {"scheduling.k8s.io/group-name": "broken"}},
                "spec": {"schedulerName": "caldera", "containers": [{
                    "name": "main", "image": "registry.example/worker:1",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "1"}}}]}
            }),
        ])
        .await
        .map_err(failed)?;
    let mut handle: Option<RunningHandle> = None;
    let client = cluster.client();
    let result = async {
        ensure(refused.is_empty(), || {
            format!("the API server should take the PodGroup: {refused:?}")
        })?;
        let outcome = run
            .run_to_end(async || {
                handle = Some(
                    start_scheduler(
                        options.clone(),
                        cluster.scheduler_client(),
                        Duration::from_secs(30),
                    )
                    .await?,
                );
                Ok(())
            })
            .await
            .map_err(failed)?;
        ensure(outcome.passed(), || format!("\n{outcome}"))?;
        let events: Api<Event> = Api::namespaced(client.clone(), "default");
        eventually_async(10, "a Warning event on PodGroup broken", async || {
            events.list(&ListParams::default()).await.is_ok_and(|l| {
                l.items.iter().any(|e| {
                    e.reason.as_deref() == Some("InvalidObject")
                        && e.type_.as_deref() == Some("Warning")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("broken")
                })
            })
        })
        .await?;
        let nodes = pod_nodes(&run).await?;
        ensure(nodes.get("broken-0") == Some(&None), || {
            format!("broken-0 should stay unbound: {nodes:?}")
        })
    }
    .await;
    finish(&cluster, run, handle.into_iter().collect(), lease, result).await
}

/// Seed 1's gang cannot fit; once the scheduler has said so (conditions, events), further
/// sessions write nothing at all. Then the scenario goes on and the gang is bound.
async fn steady_state(_target: Target) -> Result<(), Failed> {
    let cluster = Cluster::stand_in().await.map_err(failed)?;
    let server = stand_in(&cluster)?;
    let mut run = prepare(&cluster, "seed1-partial-gang.yaml", "steady").await?;
    let options = scheduler_options(run.scenario().config.clone(), None, "steady");
    steps(&mut run, 1).await?;
    let handle = start_scheduler(options, cluster.scheduler_client(), Duration::from_secs(30))
        .await
        .map_err(failed)?;
    let result = async {
        // Up to the expectation that the gang waits, Unschedulable.
        steps(&mut run, 3).await?;
        let sessions = handle.sessions();
        eventually(10, "two more sessions", || {
            handle.sessions() >= sessions + 2
        })
        .await?;
        let before = server.request_counts();
        let sessions = handle.sessions();
        eventually(15, "five more sessions", || {
            handle.sessions() >= sessions + 5
        })
        .await?;
        let since = server.request_counts().since(&before);
        ensure(since.writes() == 0, || {
            let writes: Vec<String> = since
                .iter()
                .filter(|(k, _)| k.verb.is_write())
                .map(|(k, n)| format!("{} {}/{} ×{n}", k.verb, k.resource, k.subresource))
                .collect();
            format!("writes during five idle sessions: {writes:?}")
        })?;
        steps(&mut run, usize::MAX).await
    }
    .await;
    finish(&cluster, run, vec![handle], None, result).await
}

/// A Queue's `status.usage` as the scheduler wrote it (`Null` when it has written none).
async fn queue_usage(run: &LiveRun, queue: &str) -> Result<Value, Failed> {
    let api = caldera_e2e::objects::api(run.client(), caldera_sim::manifest::Kind::Queue, None);
    let q = api.get(queue).await.map_err(failed)?;
    Ok(q.data["status"]["usage"].clone())
}

/// The scheduler's decayed GPU usage of `queue` (`caldera_queue_usage`), if it exports one.
fn exported_usage(handle: &RunningHandle, queue: &str) -> Option<f64> {
    let prefix = format!("caldera_queue_usage{{queue=\"{queue}\",resource=\"nvidia.com/gpu\"}} ");
    handle
        .metrics_text()
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).and_then(|v| v.trim().parse().ok()))
}

/// fairshare keeps each queue's usage on its Queue's status, and a new scheduler resumes from
/// it. `past-use-goes-last.yaml` binds team-b's 16 GPUs (the whole cluster); the scheduler
/// writes team-b's record (`held`: the whole cluster, from then on) and, with a half-life of
/// one hour, team-b's decayed usage grows by about 0.000192 of the cluster a second. Once it
/// exports at least 0.002 (over ten seconds held), the scheduler stops and a new one starts:
/// the usage it exports is at least that. One that did not read the record back would start
/// from nothing and, within the 8 seconds allowed, reach at most ~0.0015.
async fn usage_survives_a_restart(target: Target) -> Result<(), Failed> {
    let file = "fairshare/past-use-goes-last.yaml";
    let cluster = Cluster::connect(&target).await.map_err(failed)?;
    let mut run = prepare(&cluster, file, "usage").await?;
    let text =
        config_text(file)?.replace("{halfLife: 168h}", "{halfLife: 1h, usageWritePeriod: 1s}");
    let config = caldera_config::parse(&text, None).map_err(failed)?;
    let run_id = run.run_id().to_string();
    let (options, lease) = scenario_scheduler(&cluster, config.clone(), &run_id, false);
    let (second_options, _) = scenario_scheduler(&cluster, config, &run_id, false);
    steps(&mut run, 1).await?;
    let first = start_scheduler(options, cluster.scheduler_client(), Duration::from_secs(30))
        .await
        .map_err(failed)?;
    let mut handles = vec![first];
    let result = async {
        // Up to the expectation that team-b holds the 16 GPUs.
        steps(&mut run, 3).await?;
        let mut written = Value::Null;
        eventually_async(15, "team-b's usage record on its Queue", async || {
            written = queue_usage(&run, "team-b").await.unwrap_or_default();
            written["held"]["nvidia.com/gpu"].as_i64() == Some(1_000_000)
        })
        .await?;
        ensure(written["lastUpdateTime"].is_string(), || {
            format!("team-b's usage record has no lastUpdateTime: {written}")
        })?;
        eventually(30, "team-b's usage to reach 0.002", || {
            exported_usage(&handles[0], "team-b").is_some_and(|u| u >= 0.002)
        })
        .await?;
        let before = exported_usage(&handles[0], "team-b").unwrap_or_default();
        handles.remove(0).shutdown().await;
        let second = start_scheduler(
            second_options,
            cluster.scheduler_client(),
            Duration::from_secs(8),
        )
        .await
        .map_err(failed)?;
        let after = exported_usage(&second, "team-b");
        handles.push(second);
        ensure(after.is_some_and(|u| u >= before), || {
            format!(
                "after the restart team-b's usage is {after:?}, less than the {before} before \
                 it: the new scheduler did not resume from the Queue's status.usage ({written})"
            )
        })?;
        steps(&mut run, usize::MAX).await
    }
    .await;
    finish(&cluster, run, handles, lease, result).await
}

fn podgroup_api(run: &LiveRun) -> Api<DynamicObject> {
    caldera_e2e::objects::api(
        run.client(),
        caldera_sim::manifest::Kind::PodGroup,
        Some("default"),
    )
}

fn conditions(object: &Value) -> Vec<Value> {
    object["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn condition<'a>(list: &'a [Value], type_: &str) -> Option<&'a Value> {
    list.iter().find(|c| c["type"] == type_)
}

/// Events about `uid` with `reason`.
fn events_about<'a>(events: &'a [Event], uid: &str, reason: &str) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.uid.as_deref()) == Some(uid)
        })
        .collect()
}

/// Seed 1 as a user reads it with kubectl: while the gang waits, the PodGroup is Inqueue with
/// `Unschedulable`/`NotEnoughResources` and a message naming the short resource, each member
/// says `PodScheduled=False`/`Unschedulable`, and each of these was announced by one event;
/// once bound, the PodGroup is Running and `Scheduled`, every member has one `Scheduled`
/// event "Successfully assigned default/<pod> to <node>", and nothing was announced twice.
async fn what_a_user_sees(target: Target) -> Result<(), Failed> {
    let cluster = Cluster::connect(&target).await.map_err(failed)?;
    let scenario = load("seed1-partial-gang.yaml")?;
    let run_id = new_run_id("user-view");
    let (options, lease) = scenario_scheduler(&cluster, scenario.config.clone(), &run_id, false);
    let mut run = LiveRun::prepare(cluster.client(), scenario, DriverOptions::new(&run_id))
        .await
        .map_err(failed)?;
    steps(&mut run, 1).await?;
    let handle = start_scheduler(options, cluster.scheduler_client(), Duration::from_secs(30))
        .await
        .map_err(failed)?;
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    let result = async {
        steps(&mut run, 3).await?;
        let pg = podgroup_api(&run).get("training-job-tp8").await.map_err(failed)?;
        let pg = serde_json::to_value(&pg).map_err(failed)?;
        let pg_uid = pg["metadata"]["uid"].as_str().unwrap_or_default().to_string();
        let conds = conditions(&pg);
        ensure(pg["status"]["phase"] == "Inqueue", || {
            format!("a waiting gang with no minResources is admitted, Inqueue: {pg}")
        })?;
        let unschedulable = condition(&conds, "Unschedulable");
        ensure(
            unschedulable.is_some_and(|c| {
                c["status"] == "True"
                    && c["reason"] == "NotEnoughResources"
                    && c["message"].as_str().is_some_and(|m| {
                        m.contains("members in gang unschedulable") && m.contains("nvidia.com/gpu")
                    })
            }),
            || format!("Unschedulable/NotEnoughResources with a fit message: {conds:?}"),
        )?;
        let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
        let mut members = Vec::new();
        for i in 0..8 {
            let p = pods.get(&format!("train-{i}")).await.map_err(failed)?;
            let scheduled = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled").cloned());
            ensure(
                scheduled.as_ref().is_some_and(|c| {
                    c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                        && c.message.as_deref().is_some_and(|m| !m.is_empty())
                }),
                || format!("train-{i}: PodScheduled=False/Unschedulable with a message: {scheduled:?}"),
            )?;
            members.push(p.metadata.uid.unwrap_or_default());
        }
        let mut listed = Vec::new();
        eventually_async(10, "the waiting gang's events", async || {
            listed = events.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
            events_about(&listed, &pg_uid, "Unschedulable").len() == 1
                && members
                    .iter()
                    .all(|uid| events_about(&listed, uid, "FailedScheduling").len() == 1)
        })
        .await
        .map_err(|e| {
            Failed::from(format!(
                "{}: one Unschedulable event on the PodGroup, one FailedScheduling per member; events: {:#?}",
                e.message().unwrap_or_default(),
                listed
                    .iter()
                    .map(|e| {
                        let about = e.regarding.as_ref().and_then(|r| r.name.clone());
                        (e.reason.clone(), about, e.note.clone())
                    })
                    .collect::<Vec<_>>()
            ))
        })?;

        steps(&mut run, usize::MAX).await?;
        let pg = podgroup_api(&run).get("training-job-tp8").await.map_err(failed)?;
        let pg = serde_json::to_value(&pg).map_err(failed)?;
        let conds = conditions(&pg);
        ensure(pg["status"]["phase"] == "Running", || format!("Running once bound: {pg}"))?;
        ensure(
            condition(&conds, "Scheduled").is_some_and(|c| c["status"] == "True"),
            || format!("a Scheduled=True condition: {conds:?}"),
        )?;
        ensure(
            condition(&conds, "Unschedulable").is_none_or(|c| c["status"] != "True"),
            || format!("no Unschedulable=True condition left: {conds:?}"),
        )?;
        let nodes = pod_nodes(&run).await?;
        let mut listed = Vec::new();
        eventually_async(10, "the bound gang's events", async || {
            listed = events.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
            events_about(&listed, &pg_uid, "Scheduled").len() == 1
                && members.iter().all(|uid| events_about(&listed, uid, "Scheduled").len() == 1)
        })
        .await?;
        for (i, uid) in members.iter().enumerate() {
            let name = format!("train-{i}");
            let node = nodes.get(&name).cloned().flatten().unwrap_or_default();
            let scheduled = events_about(&listed, uid, "Scheduled");
            let e = scheduled[0];
            let want = format!("Successfully assigned default/{name} to {node}");
            ensure(
                e.note.as_deref() == Some(want.as_str())
                    && e.type_.as_deref() == Some("Normal")
                    && e.reporting_controller.as_deref() == Some("caldera"),
                || format!("{name}: a Normal event from caldera saying {want:?}: {e:?}"),
            )?;
            ensure(events_about(&listed, uid, "FailedScheduling").len() == 1, || {
                format!("{name}: FailedScheduling announced more than once")
            })?;
            let p = pods.get(&name).await.map_err(failed)?;
            let scheduled = p
                .status
                .and_then(|s| s.conditions)
                .and_then(|cs| cs.into_iter().find(|c| c.type_ == "PodScheduled"));
            ensure(scheduled.as_ref().is_some_and(|c| c.status == "True"), || {
                format!("{name}: PodScheduled=True once bound: {scheduled:?}")
            })?;
        }
        ensure(events_about(&listed, &pg_uid, "Unschedulable").len() == 1, || {
            "the PodGroup's Unschedulable event was repeated".to_string()
        })
    }
    .await;
    finish(&cluster, run, vec![handle], lease, result).await
}

/// A scenario whose last expectation is wrong fails at that step, with each mismatch as
/// expected-versus-got: the driver's passes are not vacuous.
async fn failing_expectation(target: Target) -> Result<(), Failed> {
    let mut cluster = Cluster::connect(&target).await.map_err(failed)?;
    let mut scenario = load("podgroup-arrives-late.yaml")?;
    let last = scenario.steps.len() - 1;
    let wrong: Expect = serde_yaml_ng::from_str(
        "podGroups:\n- {name: default/late-pg, bound: 3, phase: Completed}\npods:\n- {name: default/late-0, node: node-z}\n",
    )
    .map_err(failed)?;
    scenario.steps[last] = Step::Expect(wrong);
    let outcome = run_scenario(&mut cluster, scenario).await.map_err(failed)?;
    let failure = outcome
        .failure
        .as_ref()
        .ok_or_else(|| Failed::from("the wrong expectation passed"))?;
    ensure(failure.index == last, || {
        format!("failed at the wrong step:\n{outcome}")
    })?;
    let problems = failure.problems.join("\n");
    for want in [
        "podGroup default/late-pg bound: expected 3, got 2",
        "podGroup default/late-pg phase: expected Completed, got Running",
        "pod default/late-0 node: expected node-z, got node-a",
    ] {
        ensure(problems.contains(want), || {
            format!("missing {want:?} in:\n{outcome}")
        })?;
    }
    ensure(failure.checks == 3, || format!("three checks: {outcome}"))
}

/// Applying nodes: a Ready node loses the admission's `not-ready` taint and keeps its own
/// taints; a NotReady node keeps `not-ready`. A pod in a missing namespace gets the namespace
/// made. A Namespace manifest for `default` (which existed before) relabels it, and applied
/// again without a label removes that label. Cleanup removes all of it and puts `default`'s
/// labels back (on the stand-in: nothing of the run is left, events included).
async fn node_lifecycle_and_cleanup(target: Target) -> Result<(), Failed> {
    let cluster = Cluster::connect(&target).await.map_err(failed)?;
    let mut run = prepare(&cluster, "predicates-basic.yaml", "lifecycle").await?;
    let namespace = format!("e2e-{}", run.run_id());
    let result = async {
        steps(&mut run, 1).await?;
        let refused = run
            .apply_values(vec![json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "elsewhere", "namespace": namespace},
                "spec": {"containers": [{"name": "main", "image": "registry.example/worker:1"}]}
            })])
            .await
            .map_err(failed)?;
        ensure(refused.is_empty(), || format!("refused: {refused:?}"))?;
        let labelled = |labels: Value| {
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "default", "labels": labels}})
        };
        let applied = run
            .apply_values(vec![labelled(json!({"e2e-a": "1", "e2e-b": "2"}))])
            .await
            .map_err(failed)?;
        ensure(applied.is_empty(), || format!("refused: {applied:?}"))?;
        let applied = run
            .apply_values(vec![labelled(json!({"e2e-a": "1"}))])
            .await
            .map_err(failed)?;
        ensure(applied.is_empty(), || format!("refused: {applied:?}"))?;
        let now = labels_of_namespace(&cluster, "default").await?;
        ensure(
            now.get("e2e-a").map(String::as_str) == Some("1") && !now.contains_key("e2e-b"),
            || format!("default's labels after two applies: {now:?}"),
        )?;
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client());
        let taints = async |name: &str| -> Result<Vec<String>, Failed> {
            let n = nodes.get(name).await.map_err(failed)?;
            Ok(n.spec
                .and_then(|s| s.taints)
                .unwrap_or_default()
                .into_iter()
                .map(|t| format!("{}:{}", t.key, t.effect))
                .collect())
        };
        let want: [(&str, &[&str]); 3] = [
            ("cpu-1", &[]),
            ("gpu-1", &["nvidia.com/gpu:NoSchedule"]),
            ("gpu-3", &["node.kubernetes.io/not-ready:NoSchedule"]),
        ];
        for (name, expected) in want {
            let got = taints(name).await?;
            ensure(got == expected, || {
                format!("node {name} taints: expected {expected:?}, got {got:?}")
            })?;
        }
        Ok(())
    }
    .await;
    let before = labels_of_namespace(&cluster, "default").await;
    finish(&cluster, run, Vec::new(), None, result).await?;
    let after = labels_of_namespace(&cluster, "default").await?;
    ensure(!after.keys().any(|k| k.starts_with("e2e-")), || {
        format!("default's labels after cleanup: {after:?} (during the run: {before:?})")
    })?;
    let annotations = Api::<k8s_openapi::api::core::v1::Namespace>::all(cluster.client())
        .get("default")
        .await
        .map_err(failed)?
        .metadata
        .annotations
        .unwrap_or_default();
    ensure(
        !annotations.contains_key(caldera_e2e::namespaces::LABELS_BEFORE),
        || format!("default's annotations after cleanup: {annotations:?}"),
    )?;
    let Some(server) = cluster.stand_in_server() else {
        return Ok(());
    };
    let store = server.store();
    for resource in [
        "pods",
        "nodes",
        "podgroups",
        "queues",
        "events.events.k8s.io",
    ] {
        ensure(store.count(resource) == 0, || {
            format!("{resource} left after cleanup: {:?}", store.list(resource))
        })?;
    }
    let left = store.get("namespaces", "", &namespace);
    ensure(left.is_none(), || {
        format!("namespace left after cleanup: {left:?}")
    })
}

async fn labels_of_namespace(
    cluster: &Cluster,
    name: &str,
) -> Result<BTreeMap<String, String>, Failed> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(cluster.client());
    let ns = api.get(name).await.map_err(failed)?;
    Ok(ns.metadata.labels.unwrap_or_default())
}
