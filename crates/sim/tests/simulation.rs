//! The simulator's own behaviour: API-server defaults, the clock, carrying out plans, the
//! invariant checks, expectation diffs, and determinism.

use caldera_api::HyperNode;
use caldera_cache::SnapshotOptions;
use caldera_model::{Bind, Plan, PodConditionUpdate, PodFailure, Snapshot, Time};
use caldera_sim::driver::{FnScheduling, PodSelector, SessionOutput, START};
use caldera_sim::manifest::{parse_stream, Kind, Object};
use caldera_sim::selector::LabelSelector;
use caldera_sim::store::node_name;
use caldera_sim::{report, scenario, Simulation};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use std::sync::Arc;
use std::time::Duration;

const CLUSTER: &str = "
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status:
  allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '4'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: v1
kind: Node
metadata: {name: tainted}
spec:
  taints: [{key: dedicated, value: x, effect: NoSchedule}]
status:
  allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '4'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: gang}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: gang-0, labels: {app: g}, annotations: {scheduling.k8s.io/group-name: gang}}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '2'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: gang-1, labels: {app: g}, annotations: {scheduling.k8s.io/group-name: gang}}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '2'}}}]
";

fn objects(text: &str) -> Vec<Object> {
    parse_stream(text, "test.yaml")
        .unwrap()
        .objects
        .into_iter()
        .map(|(_, o)| o)
        .collect()
}

/// A simulation whose scheduler is `decide`, with a 1s period and the default names.
fn fake(decide: impl FnMut(&Snapshot, Time) -> Plan + 'static) -> Simulation {
    let mut decide = decide;
    Simulation::with_scheduler(
        Box::new(FnScheduling(move |snap: &Snapshot, now: Time| {
            SessionOutput {
                plan: decide(snap, now),
                queues: Vec::new(),
            }
        })),
        Duration::from_secs(1),
        SnapshotOptions::default(),
    )
}

fn bind(snap: &Snapshot, pod: &str, node: &str) -> Bind {
    let t = snap.tasks.iter().find(|t| &*t.name == pod).unwrap();
    Bind {
        pod: t.object_ref(),
        node: Arc::from(node),
        job: snap.jobs[t.job].id.clone(),
    }
}

#[test]
fn store_fills_defaults_like_the_api_server() {
    let mut sim = fake(|_, _| Plan::default());
    sim.apply(objects(
        "
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 100
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  priorityClassName: high
  containers: [{name: main, resources: {limits: {cpu: '2'}}}]
",
    ))
    .unwrap();
    let pod = sim.store().pod("default", "p").unwrap().clone();
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(
        pod.metadata.uid.as_deref(),
        Some("00000000-0000-4000-8000-000000000002")
    );
    assert_eq!(
        pod.metadata
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        Some("2026-01-01T00:00:00Z".into())
    );
    assert_eq!(spec.scheduler_name.as_deref(), Some("default-scheduler"));
    assert_eq!(spec.priority, Some(100), "priority admission");
    let requests = spec.containers[0]
        .resources
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap();
    assert_eq!(requests["cpu"].0, "2", "requests default from limits");
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
}

#[test]
fn reapply_updates_spec_and_keeps_server_fields() {
    let mut sim = fake(|snap, _| Plan {
        binds: snap
            .tasks
            .iter()
            .filter(|t| t.node.is_none())
            .map(|t| bind(snap, &t.name, "node-a"))
            .collect(),
        ..Plan::default()
    });
    sim.apply(objects(CLUSTER)).unwrap();
    sim.run_for(Duration::from_secs(1));
    let before = sim.store().pod("default", "gang-0").unwrap().clone();
    assert_eq!(node_name(&before), Some("node-a"));
    let cond = &before.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(
        (cond.type_.as_str(), cond.status.as_str()),
        ("PodScheduled", "True")
    );
    sim.run_for(Duration::from_secs(5));
    // The same manifest again, with a new label.
    let mut again = objects(CLUSTER);
    for o in &mut again {
        if let Object::Pod(p) = o {
            p.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("v".into(), "2".into());
        }
    }
    sim.apply(again).unwrap();
    let after = sim.store().pod("default", "gang-0").unwrap();
    assert_eq!(after.metadata.uid, before.metadata.uid);
    assert_eq!(
        after.metadata.creation_timestamp,
        before.metadata.creation_timestamp
    );
    assert_eq!(node_name(after), Some("node-a"), "nodeName is kept");
    assert_eq!(after.status, before.status, "status is kept");
    assert_eq!(after.metadata.labels.as_ref().unwrap()["v"], "2");
}

#[test]
fn sessions_run_at_every_period_boundary() {
    let mut sim = fake(|_, _| Plan::default());
    let times: Vec<String> = sim
        .run_for(Duration::from_secs(3))
        .iter()
        .map(|s| s.time.to_rfc3339())
        .collect();
    assert_eq!(
        times,
        [
            "2026-01-01T00:00:01Z",
            "2026-01-01T00:00:02Z",
            "2026-01-01T00:00:03Z"
        ]
    );
    assert_eq!(sim.run_for(Duration::from_millis(2500)).len(), 2);
    assert_eq!(sim.now(), START.plus_millis(5500));
    assert_eq!(sim.run_for(Duration::from_millis(400)).len(), 0);
    assert_eq!(
        sim.run_for(Duration::from_secs(1)).len(),
        1,
        "at 6.9s: periods count from each call"
    );
    assert_eq!(sim.sessions(), 6);
}

#[test]
fn plans_are_carried_out_against_the_store() {
    let mut sim = fake(|snap, now| {
        if now != START.plus_millis(1000) {
            return Plan::default();
        }
        let t0 = snap.tasks.iter().find(|t| &*t.name == "gang-0").unwrap();
        let t1 = snap.tasks.iter().find(|t| &*t.name == "gang-1").unwrap();
        Plan {
            binds: vec![
                bind(snap, "gang-0", "node-a"),
                bind(snap, "gang-1", "node-a"),
            ],
            pod_conditions: vec![PodConditionUpdate {
                pod: t0.object_ref(),
                reason: "Unschedulable".into(),
                message: "too late: bound first".into(),
            }],
            pod_failures: vec![PodFailure {
                pod: caldera_model::ObjectRef {
                    namespace: t1.namespace.clone(),
                    name: t1.name.clone(),
                    uid: "someone-else".into(),
                },
                reason: "GangScheduleTimeout".into(),
                message: "stale uid".into(),
            }],
            ..Plan::default()
        }
    });
    sim.apply(objects(CLUSTER)).unwrap();
    let reports = sim.run_for(Duration::from_secs(1));
    assert_eq!(reports[0].bound.len(), 2);
    assert!(
        reports[0].failed.is_empty(),
        "a failure naming another uid does not land"
    );
    assert!(
        reports[0].violations.is_empty(),
        "{:?}",
        reports[0].violations
    );
    let pod = sim.store().pod("default", "gang-0").unwrap();
    let cond = &pod.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(
        cond.status, "True",
        "a bound pod does not take a PodScheduled=False"
    );
    assert!(
        sim.store().queue("default").is_some(),
        "the default queue is created before the first session"
    );

    // Binding the same pods again, as a scheduler with a stale view would: 409s, recorded.
    let mut again = fake(|snap, _| Plan {
        binds: vec![
            bind(snap, "gang-0", "node-a"),
            bind(snap, "gang-1", "node-a"),
        ],
        ..Plan::default()
    });
    again.apply(objects(CLUSTER)).unwrap();
    again.run_for(Duration::from_secs(2));
    let conflicts: Vec<_> = again
        .events()
        .iter()
        .filter(|e| e.event.reason == "FailedBinding")
        .map(|e| e.event.message.as_str())
        .collect();
    assert_eq!(
        conflicts,
        [
            "pod default/gang-0 is already bound to node-a",
            "pod default/gang-1 is already bound to node-a"
        ]
    );
}

#[test]
fn invariants_catch_partial_gangs_overcommit_and_failed_predicates() {
    // Binds one member of a 2-member gang: a partial gang.
    let mut partial = fake(|snap, _| Plan {
        binds: vec![bind(snap, "gang-0", "node-a")],
        ..Plan::default()
    });
    partial.apply(objects(CLUSTER)).unwrap();
    let v = &partial.run_for(Duration::from_secs(1))[0].violations;
    assert_eq!(
        v,
        &["podgroup default/gang is bound in part (fewer than minMember members have a node)"]
    );

    // Binds both members to the tainted node: a predicate failure each.
    let mut tainted = fake(|snap, _| Plan {
        binds: vec![
            bind(snap, "gang-0", "tainted"),
            bind(snap, "gang-1", "tainted"),
        ],
        ..Plan::default()
    });
    tainted.apply(objects(CLUSTER)).unwrap();
    let v = &tainted.run_for(Duration::from_secs(1))[0].violations;
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[0].contains("taint dedicated=x:NoSchedule is not tolerated"),
        "{v:?}"
    );

    // Three 2-GPU pods on a 4-GPU node.
    let extra = "
apiVersion: v1
kind: Pod
metadata: {name: extra}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '2'}}}]
";
    let mut over = fake(|snap, _| Plan {
        binds: ["gang-0", "gang-1", "extra"]
            .iter()
            .map(|p| bind(snap, p, "node-a"))
            .collect(),
        ..Plan::default()
    });
    over.apply(objects(CLUSTER)).unwrap();
    over.apply(objects(extra)).unwrap();
    let v = &over.run_for(Duration::from_secs(1))[0].violations;
    assert!(
        v.iter()
            .any(|m| m.contains("pod default/extra bound to node-a: insufficient nvidia.com/gpu")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|m| m == "node node-a is over-committed: nvidia.com/gpu 6 > 4"),
        "{v:?}"
    );
    assert_eq!(over.violations().len(), v.len());
}

#[test]
fn kubelet_steps_set_phases_of_bound_pods() {
    let mut sim = fake(|snap, _| Plan {
        binds: snap
            .tasks
            .iter()
            .filter(|t| t.node.is_none() && &*t.name == "gang-0")
            .map(|t| bind(snap, &t.name, "node-a"))
            .chain(
                snap.tasks
                    .iter()
                    .filter(|t| t.node.is_none() && &*t.name == "gang-1")
                    .map(|t| bind(snap, &t.name, "node-a")),
            )
            .collect(),
        ..Plan::default()
    });
    sim.apply(objects(CLUSTER)).unwrap();
    let app = PodSelector {
        namespace: Some("default".into()),
        selector: LabelSelector::parse("app=g").unwrap(),
    };
    assert_eq!(sim.mark(&app, "Running"), 0, "unbound pods are left alone");
    sim.run_for(Duration::from_secs(1));
    assert_eq!(sim.mark(&app, "Running"), 2);
    assert_eq!(sim.mark(&app, "Succeeded"), 2);
    assert_eq!(sim.mark(&app, "Running"), 0, "finished pods stay finished");
    let used = &sim.snapshot().nodes[0].used;
    assert_eq!(
        used.get("nvidia.com/gpu"),
        0,
        "finished pods free their node"
    );
    assert!(sim.delete(Kind::Pod, Some("default"), "gang-0"));
    assert!(!sim.delete(Kind::Pod, Some("default"), "gang-0"));
}

#[test]
fn run_until_stable_stops_after_two_quiet_sessions() {
    let mut sim = fake(|snap, _| Plan {
        binds: snap
            .tasks
            .iter()
            .filter(|t| t.node.is_none())
            .map(|t| bind(snap, &t.name, "node-a"))
            .collect(),
        ..Plan::default()
    });
    sim.apply(objects(CLUSTER)).unwrap();
    let reports = sim.run_until_stable(None);
    assert_eq!(reports.len(), 3, "one session binds, two change nothing");
    let limited = fake(|_, _| Plan::default());
    let mut limited = limited;
    assert_eq!(
        limited.run_until_stable(Some(Duration::from_secs(1))).len(),
        1
    );
}

fn seed1() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/seed1-partial-gang.yaml"
    ))
    .unwrap()
}

#[test]
fn a_wrong_expectation_fails_with_a_readable_diff() {
    let text = seed1().replacen("bound: 0", "bound: 3", 1).replacen(
        "reason: NotEnoughResources",
        "reason: NotEnoughTasks",
        1,
    );
    let scenario = scenario::load(&text, "wrong.yaml").unwrap();
    let (outcome, _) = scenario.run().unwrap();
    assert!(!outcome.passed());
    let diff = outcome.to_string();
    let expected_head = "\
FAIL seed1-partial-gang (wrong.yaml)
step 3 of 6 (spec.steps[2]: expect) at 2026-01-01T00:00:03Z: 2 of 19 checks failed
  - podGroup default/training-job-tp8 bound: expected 3, got 0
  - podGroup default/training-job-tp8 condition: expected Unschedulable reason=NotEnoughTasks message containing \"nvidia.com/gpu\", got Unschedulable=True reason=NotEnoughResources message=";
    assert!(diff.starts_with(expected_head), "{diff}");
    assert!(diff.ends_with("steps 4..6 were not run\n"), "{diff}");
}

#[test]
fn the_same_input_gives_byte_identical_json() {
    let run = || {
        let scenario = scenario::load(&seed1(), "seed1.yaml").unwrap();
        let (outcome, sim) = scenario.run().unwrap();
        assert!(outcome.passed(), "{outcome}");
        report::to_json(&report::report(&sim)).unwrap()
    };
    let first = run();
    assert_eq!(first, run());
    assert!(first.contains("\"podGroups\""), "{first}");
    assert!(first.contains("\"nvidia.com/gpu\": \"8\""), "{first}");
}

#[test]
fn reports_show_gangs_and_gpu_bars() {
    let scenario = scenario::load(&seed1(), "seed1.yaml").unwrap();
    let (_, sim) = scenario.run().unwrap();
    let text = report::render_text(&sim);
    assert!(
        text.contains("default/training-job-tp8  ai-training  8    8      Running"),
        "{text}"
    );
    assert!(
        text.contains("node-a  [########]  8/8 nvidia.com/gpu"),
        "{text}"
    );
    assert!(
        text.contains("node-b  [##......]  2/8 nvidia.com/gpu"),
        "{text}"
    );
}

/// Runs the project's scenario at `path` (under `scenarios/`), which must pass; its simulation.
fn passing_scenario(path: &str) -> Simulation {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(path);
    let text = std::fs::read_to_string(&file).unwrap();
    let name = path.rsplit('/').next().unwrap_or(path);
    let scenario = scenario::load(&text, name).unwrap();
    let (outcome, sim) = scenario.run().unwrap();
    assert!(outcome.passed(), "{outcome}");
    sim
}

#[test]
fn reports_draw_each_shared_gpu_with_the_fraction_its_shares_hold() {
    // At its end gpu-0 (80Gi) holds three 20Gi shares and one of 10Gi: 70Gi, 0.87.
    let sim = passing_scenario("dra/shared-gpu-quarter-gang.yaml");
    let view = report::gpu_view(&sim).unwrap();
    assert!(
        view.contains(
            "node-a   [#]         1/1 gpu.nvidia.com\n  gpu-0  [#######.]  0.87 (4 claims)\n"
        ),
        "{view}"
    );
}

#[test]
fn reports_give_each_queues_usage_with_fairshare() {
    // team-a held all 16 GPUs for one hour with a half-life of one hour, then nothing for
    // another hour: its GPU usage went 0.500 at the record, 0.250 an hour later.
    let sim = passing_scenario("fairshare/usage-halves-over-a-half-life.yaml");
    let table = report::queue_usage_table(&sim).expect("fairshare is configured");
    let row = table
        .lines()
        .find(|l| l.starts_with("team-a "))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[2], "0.250", "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("default ") && l.ends_with("never")),
        "{table}"
    );
    assert!(report::render_text(&sim).contains(&table));
}

#[test]
fn reports_draw_the_queue_tree() {
    let sim = passing_scenario("hierarchy/idle-to-sibling-first.yaml");
    let text = report::render_text(&sim);
    // Without fairshare, no usage table.
    assert_eq!(report::queue_usage_table(&sim), None);
    // Each queue under its parent, with deserved, allocated over its subtree, and share.
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("nvidia.com/gpu"))
        .collect();
    let find = |q: &str| {
        lines
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{q} ")))
            .copied()
            .unwrap_or_else(|| panic!("no row for {q}:\n{text}"))
    };
    assert!(find("language").starts_with("language "), "{text}");
    assert!(find("lang-a").starts_with("  lang-a "), "{text}");
    assert!(
        find("vision").contains("1.00"),
        "vision holds 8 of 8: {text}"
    );
    assert!(find("vision-a").contains("0.00"), "{text}");
    let json = report::to_json(&report::report(&sim)).unwrap();
    assert!(json.contains("\"parent\": \"vision\""), "{json}");
}

#[test]
fn reports_show_the_hypernode_tree_with_free_gpus_and_placed_gangs() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/topology/tier2-one-spine.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let scenario = scenario::load(&text, "tier2-one-spine.yaml").unwrap();
    let (_, sim) = scenario.run().unwrap();
    let tree = report::topology_view(&sim).expect("HyperNodes exist");
    assert!(
        tree.contains("spine-a (tier 2): 4 nodes, 2/16 nvidia.com/gpu free; gangs: default/gang-a\n  rack-a1 (tier 1): 2 nodes, 0/8 nvidia.com/gpu free\n"),
        "{tree}"
    );
    assert!(report::render_text(&sim).ends_with(&tree));
}

#[test]
fn discovery_makes_owned_hypernodes_from_labels_and_every_one_gets_its_node_count() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scenarios/topology/discovery-from-labels.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let scenario = scenario::load(&text, "discovery-from-labels.yaml").unwrap();
    let (outcome, sim) = scenario.run().unwrap();
    assert!(outcome.passed(), "{outcome}");
    // (name, tier, tierName, status.nodeCount, owned by Caldera)
    type Seen = (String, i64, Option<String>, Option<i64>, bool);
    let seen: Vec<Seen> = sim
        .store()
        .list::<HyperNode>()
        .map(|h| {
            (
                h.metadata.name.clone().unwrap_or_default(),
                h.spec.tier,
                h.spec.tier_name.clone(),
                h.status.as_ref().and_then(|s| s.node_count),
                caldera_cache::discovery::owned(h),
            )
        })
        .collect();
    let rack = Some("example.com/rack".to_string());
    let spine = Some("example.com/spine".to_string());
    assert_eq!(
        seen,
        [
            ("rack-r-a".to_string(), 1, rack.clone(), Some(2), true),
            // c-0 joined rack r-b by its label after the first gang was placed.
            ("rack-r-b".to_string(), 1, rack, Some(3), true),
            ("spine-s-0".to_string(), 2, spine, Some(5), true),
        ]
    );
    assert!(sim.discovery_problems().is_empty());
}

const BOUND: &str = "
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '4'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: never}
value: 100
preemptionPolicy: Never
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: v1
kind: Pod
metadata: {name: web-0, labels: {app: web}}
spec:
  schedulerName: caldera
  nodeName: node-a
  terminationGracePeriodSeconds: 10
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '1'}}}]
status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web-1, labels: {app: web}}
spec:
  schedulerName: caldera
  nodeName: node-a
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '1'}}}]
status: {phase: Running, conditions: [{type: Ready, status: 'True'}]}
---
apiVersion: v1
kind: Pod
metadata: {name: waiting}
spec:
  schedulerName: caldera
  priorityClassName: never
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '1'}}}]
";

fn evict(snap: &Snapshot, pod: &str) -> caldera_model::Eviction {
    let t = snap.tasks.iter().find(|t| &*t.name == pod).unwrap();
    caldera_model::Eviction {
        pod: t.object_ref(),
        node: t.node.clone().unwrap(),
        job: snap.jobs[t.job].id.clone(),
        preemptor: Arc::from("default/waiting"),
        action: "preempt",
        budgeted: t.budget.is_some(),
    }
}

#[test]
fn evictions_respect_budgets_and_evicted_pods_keep_their_node_for_their_grace() {
    let mut round = 0;
    let mut sim = fake(move |snap, _| {
        round += 1;
        match round {
            // Both at once: the budget (minAvailable 1 of 2 ready) lets only the first go.
            1 => Plan {
                evictions: vec![evict(snap, "web-0"), evict(snap, "web-1")],
                ..Plan::default()
            },
            _ => Plan::default(),
        }
    });
    sim.apply(objects(BOUND)).unwrap();
    let store = sim.store();
    let waiting = store
        .pod("default", "waiting")
        .unwrap()
        .spec
        .clone()
        .unwrap();
    assert_eq!(waiting.priority, Some(100));
    assert_eq!(waiting.preemption_policy.as_deref(), Some("Never"));
    let budget = store
        .list::<PodDisruptionBudget>()
        .next()
        .unwrap()
        .status
        .clone()
        .unwrap();
    assert_eq!(budget.disruptions_allowed, Some(1));

    let reports = sim.run_for(Duration::from_secs(1));
    assert_eq!(reports[0].evicted, ["default/web-0"]);
    let refused: Vec<_> = sim
        .events()
        .iter()
        .filter(|e| e.event.reason == "FailedEviction")
        .map(|e| e.event.name.to_string())
        .collect();
    assert_eq!(refused, ["web-1"]);
    let web0 = sim.store().pod("default", "web-0").unwrap();
    assert!(web0.metadata.deletion_timestamp.is_some());
    let conditions = web0.status.as_ref().unwrap().conditions.as_ref().unwrap();
    assert!(conditions
        .iter()
        .any(|c| c.type_ == "DisruptionTarget"
            && c.reason.as_deref() == Some("EvictionByEvictionAPI")));
    // Terminating, it still holds its GPU for its 10 s grace; then the kubelet removes it.
    assert_eq!(sim.snapshot().nodes[0].used.get("nvidia.com/gpu"), 2);
    sim.run_for(Duration::from_secs(8));
    assert!(sim.store().pod("default", "web-0").is_some());
    sim.run_for(Duration::from_secs(2));
    assert!(sim.store().pod("default", "web-0").is_none());
    assert_eq!(sim.snapshot().nodes[0].used.get("nvidia.com/gpu"), 1);
    let budget = sim
        .store()
        .list::<PodDisruptionBudget>()
        .next()
        .unwrap()
        .status
        .clone()
        .unwrap();
    assert_eq!(
        (budget.current_healthy, budget.disruptions_allowed),
        (Some(1), Some(0))
    );
}

const VOLUMES: &str = "
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: wait}
provisioner: csi.example.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: disk-big}
spec:
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/a}
status: {phase: Bound}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: disk-small}
spec:
  capacity: {storage: 20Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: local
  local: {path: /mnt/b}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: ckpt}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources: {requests: {storage: 10Gi}}
status: {phase: Bound}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: wait
  resources: {requests: {storage: 10Gi}}
";

#[test]
fn the_pv_controller_binds_claims_as_kube_controller_manager_does() {
    let mut sim = fake(|_, _| Plan::default());
    sim.apply(objects(VOLUMES)).unwrap();
    let store = sim.store();
    // Status in a manifest is dropped on create; the controller binds the Immediate claim to
    // the smallest volume that fits.
    let ckpt = store.claim("default", "ckpt").unwrap();
    assert_eq!(
        ckpt.spec.as_ref().unwrap().volume_name.as_deref(),
        Some("disk-small")
    );
    assert_eq!(
        ckpt.status.as_ref().unwrap().phase.as_deref(),
        Some("Bound")
    );
    let phase = |v: &str| {
        let v = store.volume(v).unwrap();
        v.status.as_ref().unwrap().phase.clone().unwrap()
    };
    assert_eq!(phase("disk-small"), "Bound");
    assert_eq!(phase("disk-big"), "Available");
    // The WaitForFirstConsumer claim waits for a scheduler.
    let data = store.claim("default", "data").unwrap();
    assert_eq!(
        data.status.as_ref().unwrap().phase.as_deref(),
        Some("Pending")
    );
    assert_eq!(store.list::<StorageClass>().count(), 2);

    // A scheduler selects a node: the claim asks for its provisioner.
    let uid = data.metadata.uid.clone();
    assert!(sim.store_mut().annotate_claim(
        "default",
        "data",
        uid.as_deref(),
        "volume.kubernetes.io/selected-node",
        Some("node-a"),
        START
    ));
    let data = sim.store().claim("default", "data").unwrap();
    let ann = data.metadata.annotations.as_ref().unwrap();
    assert_eq!(
        ann["volume.kubernetes.io/storage-provisioner"],
        "csi.example.com"
    );

    // The provisioner, played by a later apply: the claim binds. A re-apply of the claim
    // keeps what the controller and the scheduler wrote.
    sim.apply(objects(
        "
apiVersion: v1
kind: PersistentVolume
metadata: {name: pvc-data}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: wait
  claimRef: {namespace: default, name: data}
  csi: {driver: csi.example.com, volumeHandle: h1}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: wait
  resources: {requests: {storage: 10Gi}}
",
    ))
    .unwrap();
    let data = sim.store().claim("default", "data").unwrap();
    assert_eq!(
        data.spec.as_ref().unwrap().volume_name.as_deref(),
        Some("pvc-data")
    );
    assert_eq!(
        data.status.as_ref().unwrap().phase.as_deref(),
        Some("Bound")
    );
    let ann = data.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann["volume.kubernetes.io/selected-node"], "node-a");

    // Deleting the volume loses the claim.
    assert!(sim.delete(Kind::PersistentVolume, None, "pvc-data"));
    let data = sim.store().claim("default", "data").unwrap();
    assert_eq!(data.status.as_ref().unwrap().phase.as_deref(), Some("Lost"));
}

#[test]
fn pvc_expectations_fail_with_a_readable_diff() {
    let text = format!(
        "
apiVersion: caldera.sh/v1alpha1
kind: Scenario
metadata: {{name: pvcs}}
spec:
  steps:
  - apply:
{}
  - expect:
      pvcs:
      - {{name: default/data, selectedNode: null, phase: Pending}}
      - {{name: ckpt, phase: Bound, volumeName: disk-small}}
      - {{name: default/data, selectedNode: n1, volumeName: x}}
      - {{name: default/nothing, phase: Bound}}
",
        VOLUMES
            .split("\n---\n")
            .map(|doc| {
                let doc = doc.trim().replace('\n', "\n      ");
                format!("    - {doc}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    );
    let scenario = scenario::load(&text, "pvcs.yaml").unwrap();
    let (outcome, _) = scenario.run().unwrap();
    let diff = outcome.to_string();
    assert!(!outcome.passed(), "{diff}");
    assert!(
        diff.contains("3 of 7 checks failed\n  - pvc default/data selectedNode: expected n1, got null (none)\n  - pvc default/data volumeName: expected x, got null (none)\n  - pvc default/nothing: not found"),
        "{diff}"
    );
}

#[test]
fn plain_manifests_get_their_statefulset_and_ephemeral_claims_made() {
    let text = "
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: '8', memory: 64Gi, pods: '110'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, resources: {requests: {cpu: '1'}}}]
      volumes:
      - name: scratch
        ephemeral:
          volumeClaimTemplate:
            spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
";
    let m = parse_stream(text, "sts.yaml").unwrap();
    assert_eq!(m.statefulsets.len(), 1);
    assert!(m.notices.messages.is_empty(), "{:?}", m.notices.messages);
    let mut sim = fake(|_, _| Plan::default());
    sim.apply(m.objects.into_iter().map(|(_, o)| o)).unwrap();
    let (_, set) = m.statefulsets.into_iter().next().unwrap();
    // OrderedReady (the default): one pod, with its claim and its ephemeral claim.
    let created = sim.add_statefulset(set).unwrap();
    assert_eq!(created.pods.len(), 1);
    let store = sim.store();
    assert!(store.pod("default", "db-0").is_some());
    assert!(store.pod("default", "db-1").is_none());
    assert!(store.claim("default", "data-db-0").is_some());
    let scratch = store.claim("default", "db-0-scratch").unwrap();
    let owner = &scratch.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        Some(&owner.uid),
        store.pod("default", "db-0").unwrap().metadata.uid.as_ref()
    );

    // Nothing more until db-0 is Running and Ready; then the next session makes db-1.
    sim.run_for(Duration::from_secs(2));
    assert!(sim.store().pod("default", "db-1").is_none());
    let uid = uid_of(&sim, "db-0");
    sim.store_mut()
        .bind("default", "db-0", &uid, "node-a", START)
        .unwrap();
    let which = PodSelector {
        namespace: None,
        selector: LabelSelector::parse("app=db").unwrap(),
    };
    assert_eq!(sim.mark(&which, "Running"), 1);
    sim.run_for(Duration::from_secs(1));
    assert!(sim.store().pod("default", "db-1").is_some());
    assert!(sim.store().claim("default", "data-db-1").is_some());

    // A scenario's StatefulSet is skipped with a notice, as before.
    let mut scenario = caldera_sim::manifest::Manifests::default();
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str("{apiVersion: apps/v1, kind: StatefulSet, metadata: {name: x}}")
            .unwrap();
    caldera_sim::manifest::parse_value(
        value,
        &caldera_sim::error::Origin::new("s.yaml", 1),
        &mut scenario,
    )
    .unwrap();
    assert!(scenario.statefulsets.is_empty());
    assert_eq!(scenario.notices.messages.len(), 1);
}

fn uid_of(sim: &Simulation, pod: &str) -> String {
    sim.store()
        .pod("default", pod)
        .and_then(|p| p.metadata.uid.clone())
        .unwrap()
}

/// A `caldera snapshot` keeps uids, so a generic ephemeral claim read back still names its pod
/// as owner (the volume rules refuse a claim the pod does not own); a uid some object already
/// has is not given twice.
#[test]
fn a_manifests_uid_is_kept_so_owner_references_hold() {
    let text = "
apiVersion: caldera.sh/v1alpha1
kind: Scenario
metadata: {name: snapshot-uids}
spec:
  steps:
  - apply:
    - apiVersion: v1
      kind: Node
      metadata: {name: n0, labels: {kubernetes.io/hostname: n0}}
      status:
        allocatable: {cpu: '8', memory: 64Gi, pods: '110'}
        conditions: [{type: Ready, status: 'True'}]
    - apiVersion: v1
      kind: PersistentVolume
      metadata: {name: pv-scratch}
      spec:
        capacity: {storage: 1Gi}
        accessModes: [ReadWriteOnce]
        hostPath: {path: /scratch}
    - apiVersion: v1
      kind: PersistentVolumeClaim
      metadata:
        name: p-scratch
        ownerReferences:
        - {apiVersion: v1, kind: Pod, name: p, uid: 6f1c2a9e-0000-4000-8000-000000000abc, controller: true}
      spec:
        accessModes: [ReadWriteOnce]
        storageClassName: ''
        volumeName: pv-scratch
        resources: {requests: {storage: 1Gi}}
    - apiVersion: v1
      kind: Pod
      metadata: {name: p, uid: 6f1c2a9e-0000-4000-8000-000000000abc}
      spec:
        schedulerName: caldera
        containers: [{name: c, resources: {requests: {cpu: '1'}}}]
        volumes:
        - name: scratch
          ephemeral:
            volumeClaimTemplate:
              spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
    - apiVersion: v1
      kind: Pod
      metadata: {name: twin, uid: 6f1c2a9e-0000-4000-8000-000000000abc}
      spec:
        containers: [{name: c, resources: {requests: {cpu: '1'}}}]
  - run: 2s
  - expect:
      pods:
      - {name: default/p, node: n0}
";
    let scenario = scenario::load(text, "uids.yaml").unwrap();
    let (outcome, sim) = scenario.run().unwrap();
    assert!(outcome.passed(), "{outcome}");
    assert_eq!(uid_of(&sim, "p"), "6f1c2a9e-0000-4000-8000-000000000abc");
    assert_ne!(uid_of(&sim, "twin"), uid_of(&sim, "p"));
}

const TEMPLATE_CLAIMS: &str = "
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: v1
kind: Pod
metadata: {name: train-0}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
";

#[test]
fn the_resource_claim_controller_makes_template_claims_and_removes_them_with_the_pod() {
    let mut sim = fake(|_, _| Plan::default());
    sim.apply(objects(TEMPLATE_CLAIMS)).unwrap();
    // Before the first session the controller has made the claim and named it.
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let record = seen.clone();
    let mut sim_seen = fake(move |snap: &Snapshot, _| {
        record.borrow_mut().push(
            snap.tasks
                .iter()
                .map(|t| t.claims.as_ref().map(|c| c.claims.len()).unwrap_or(0))
                .sum::<usize>(),
        );
        Plan::default()
    });
    sim_seen.apply(objects(TEMPLATE_CLAIMS)).unwrap();
    sim_seen.session();
    assert_eq!(*seen.borrow(), [1], "the member sees its generated claim");
    sim.session();
    let pod = sim.store().pod("default", "train-0").unwrap();
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.clone())
        .unwrap_or_default();
    assert_eq!(statuses.len(), 1);
    let claim_name = statuses[0].resource_claim_name.clone().unwrap();
    assert!(claim_name.starts_with("train-0-gpu-"), "{claim_name}");
    let claim = sim.store().resource_claim("default", &claim_name).unwrap();
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("Pod", "train-0")
    );
    // A second session makes no second claim.
    sim.session();
    assert_eq!(sim.store().list::<ResourceClaim>().count(), 1);
    // The pod goes: so does its claim.
    assert!(sim.delete(Kind::Pod, Some("default"), "train-0"));
    sim.session();
    assert_eq!(sim.store().list::<ResourceClaim>().count(), 0);
}

const REPLICASET_WITH_BUDGET: &str = "
apiVersion: v1
kind: Node
metadata: {name: node-a, labels: {kubernetes.io/hostname: node-a}}
status:
  allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '4'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-a, labels: {app: web, pod-template-hash: h1}}
spec:
  schedulerName: caldera
  nodeName: node-a
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '1'}}}]
status:
  phase: Running
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: v1
kind: Pod
metadata: {name: web-b, labels: {app: web, pod-template-hash: h1}}
spec:
  schedulerName: caldera
  nodeName: node-a
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: '1'}}}]
status:
  phase: Running
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web-h1}
spec:
  replicas: 2
  selector: {matchLabels: {app: web, pod-template-hash: h1}}
  template:
    metadata: {labels: {app: web, pod-template-hash: h1}}
    spec:
      schedulerName: caldera
      containers: [{name: main, resources: {limits: {nvidia.com/gpu: '1'}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
";

/// Evictions of `consolidate` go the way of every eviction: judged by the PodDisruptionBudget
/// (whose `maxUnavailable` counts the ReplicaSet's scale), the first charging it so the second
/// is refused; the ReplicaSet replaces the evicted pod at once, while it still terminates.
#[test]
fn consolidation_evictions_are_judged_by_budgets_and_replaced_by_the_replicaset() {
    let mut sim = fake(|snap, now| {
        if now != START.plus_millis(1000) {
            return Plan::default();
        }
        let evict = |name: &str| {
            let t = snap.tasks.iter().find(|t| &*t.name == name).unwrap();
            caldera_model::Eviction {
                pod: t.object_ref(),
                node: "node-a".into(),
                job: format!("default/{name}").into(),
                preemptor: "default/tp4".into(),
                action: "consolidate",
                budgeted: true,
            }
        };
        Plan {
            evictions: vec![evict("web-a"), evict("web-b")],
            ..Plan::default()
        }
    });
    sim.apply(objects(REPLICASET_WITH_BUDGET)).unwrap();
    let adopted = sim.store().pod("default", "web-a").unwrap();
    assert_eq!(
        adopted.metadata.owner_references.as_ref().unwrap()[0].kind,
        "ReplicaSet"
    );
    let budget = sim
        .store()
        .list::<PodDisruptionBudget>()
        .next()
        .unwrap()
        .status
        .clone()
        .unwrap();
    assert_eq!(
        (budget.expected_pods, budget.disruptions_allowed),
        (Some(2), Some(1))
    );
    let reports = sim.run_for(Duration::from_secs(1));
    assert_eq!(reports[0].evicted, ["default/web-a"]);
    let refused: Vec<&str> = sim
        .events()
        .iter()
        .filter(|e| e.event.reason == "FailedEviction")
        .map(|e| &*e.event.name)
        .collect();
    assert_eq!(refused, ["web-b"]);
    assert!(sim
        .store()
        .pod("default", "web-a")
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());
    sim.run_for(Duration::from_secs(1));
    let web = LabelSelector::parse("app=web").unwrap();
    let live: Vec<&str> = sim
        .store()
        .list::<Pod>()
        .filter(|p| web.matches(p.metadata.labels.as_ref()))
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(live.len(), 2, "{live:?}");
    assert!(live.contains(&"web-b"));
    assert!(live.iter().all(|n| *n != "web-a"), "a new name: {live:?}");
}

const DRA: &str = "
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors: [{cel: {expression: 'device.driver == \"gpu.nvidia.com\"'}}]
  extendedResourceName: nvidia.com/gpu
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-a-gpus}
spec:
  driver: gpu.nvidia.com
  nodeName: node-a
  pool: {name: node-a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {productName: {string: H100}}, capacity: {memory: {value: 80Gi}}}
  - {name: gpu-1, attributes: {productName: {string: H100}}, capacity: {memory: {value: 80Gi}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.nvidia.com, pool: node-a, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [node-a]}]}]
  reservedFor: [{resource: pods, name: user, uid: uid-user}]
---
apiVersion: v1
kind: Pod
metadata: {name: user}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {claims: [{name: gpu}]}}]
  resourceClaims: [{name: gpu, resourceClaimName: shared}]
";

#[test]
fn the_dra_kinds_are_stored_and_reach_the_scheduler() {
    let seen: std::rc::Rc<std::cell::RefCell<Option<Snapshot>>> = Default::default();
    let keep = seen.clone();
    let mut sim = fake(move |snap, _| {
        *keep.borrow_mut() = Some(snap.clone());
        Plan::default()
    });
    sim.apply(objects(CLUSTER)).unwrap();
    sim.apply(objects(DRA)).unwrap();
    sim.run_for(Duration::from_secs(1));
    let snap = seen.borrow().clone().expect("a session ran");
    let dra = &snap.dra;
    assert_eq!(dra.devices.len(), 2);
    assert_eq!(
        dra.classes[0].extended_resource_name.as_deref(),
        Some("nvidia.com/gpu")
    );
    let shared = &dra.claims[dra.claim_index("default", "shared").unwrap()];
    assert_eq!(
        shared.allocation.as_ref().unwrap().node().as_deref(),
        Some("node-a")
    );
    let user = snap.tasks.iter().find(|t| &*t.name == "user").unwrap();
    let claims = user.claims.as_ref().unwrap();
    assert_eq!(&*claims.claims[0].claim, "shared");
    assert!(claims.waiting.is_none());
    // Re-applying a claim keeps its status (written only through the status subresource).
    let mut again = objects(DRA);
    for o in &mut again {
        if let Object::ResourceClaim(c) = o {
            c.status = None;
        }
    }
    sim.apply(again).unwrap();
    let stored = sim.store().resource_claim("default", "shared").unwrap();
    assert!(stored
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .is_some());
    // Deleting a slice takes its devices away.
    assert!(sim.delete(Kind::ResourceSlice, None, "node-a-gpus"));
    sim.run_for(Duration::from_secs(1));
    assert!(seen.borrow().as_ref().unwrap().dra.devices.is_empty());
}

#[test]
fn a_dra_object_the_scheduler_cannot_read_is_refused_at_load() {
    let bad = "
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: d
  nodeName: n
  allNodes: true
  pool: {name: p, generation: 1, resourceSliceCount: 1}
";
    let err = parse_stream(bad, "bad.yaml").unwrap_err().to_string();
    assert!(err.contains("spec.nodeName"), "{err}");
}
