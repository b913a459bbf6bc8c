//! Unit tests of conversion and the index, with small `mk_*` helpers and no cluster.

use crate::{ClusterIndex, PodInfo, SnapshotOptions};
use caldera_api::{PodGroup, Queue as ApiQueue};
use caldera_model::{PodGroupPhase, Resources, Snapshot, TaskStatus, Time, CPU, MEMORY};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use serde_json::{json, Value};
use std::time::Duration;

const GPU: &str = "nvidia.com/gpu";

/// JSON merge patch (RFC 7386): objects merge, everything else replaces.
pub(crate) fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(b), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    b.remove(&k);
                } else {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (b, p) => *b = p,
    }
}

fn mk_pod(ns: &str, name: &str, patch: Value) -> Pod {
    let mut v = json!({
        "metadata": {"namespace": ns, "name": name, "uid": format!("uid-{name}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"schedulerName": "caldera", "containers": [{"name": "main"}]},
    });
    merge(&mut v, patch);
    serde_json::from_value(v).unwrap()
}

/// A caldera pod with one container requesting `gpus` GPUs (by limit) and 1 cpu.
fn gpu_pod(ns: &str, name: &str, gpus: i64, patch: Value) -> Pod {
    let mut pod = json!({"spec": {"containers": [{"name": "main", "resources": {
        "limits": {GPU: gpus.to_string()}, "requests": {"cpu": "1"}}}]}});
    merge(&mut pod, patch);
    mk_pod(ns, name, pod)
}

fn in_group(group: &str) -> Value {
    json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": group}}})
}

fn mk_node(name: &str, gpus: i64, patch: Value) -> Node {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: gpus.to_string()},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    });
    merge(&mut v, patch);
    serde_json::from_value(v).unwrap()
}

fn mk_podgroup(ns: &str, name: &str, spec: Value) -> PodGroup {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"namespace": ns, "name": name, "uid": format!("pg-{name}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
    }))
    .unwrap()
}

fn mk_queue(name: &str, spec: Value) -> ApiQueue {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name}, "spec": spec,
    }))
    .unwrap()
}

fn mk_priority_class(name: &str, value: i32, global_default: bool) -> PriorityClass {
    serde_json::from_value(json!({
        "metadata": {"name": name}, "value": value, "globalDefault": global_default,
    }))
    .unwrap()
}

fn request(pod: &Pod) -> Resources {
    crate::pod_request(pod).unwrap()
}

fn snapshot(index: &ClusterIndex) -> Snapshot {
    let snap = index.snapshot(&SnapshotOptions::default());
    snap.check().unwrap();
    snap
}

fn job<'a>(snap: &'a Snapshot, id: &str) -> &'a caldera_model::Job {
    snap.jobs.iter().find(|j| &*j.id == id).unwrap()
}

#[test]
fn request_sums_containers_and_falls_back_to_limits() {
    let pod = mk_pod(
        "default",
        "p",
        json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "2", "memory": "1Gi", GPU: "1"}}},
            {"name": "b", "resources": {"limits": {"memory": "1Gi"}}},
        ]}}),
    );
    let r = request(&pod);
    assert_eq!(r.cpu, 500, "an explicit request wins over the limit");
    assert_eq!(r.memory, 2 << 30, "limits stand in for missing requests");
    assert_eq!(r.get(GPU), 1);
}

#[test]
fn request_maxes_init_containers_and_adds_sidecars_and_overhead() {
    let pod = mk_pod(
        "default",
        "p",
        json!({"spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [
                {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
                {"name": "setup", "resources": {"requests": {"cpu": "1", "memory": "4Gi"}}},
            ],
            "overhead": {"cpu": "100m"},
        }}),
    );
    let r = request(&pod);
    // containers 1 cpu + sidecar 0.5 = 1.5; init "setup" runs beside the sidecar: 1.5 cpu, 4Gi.
    assert_eq!(r.cpu, 1500 + 100);
    assert_eq!(r.memory, 4 << 30);
}

#[test]
fn pod_level_resources_replace_the_container_sum_for_cpu_and_memory() {
    let pod = mk_pod(
        "default",
        "p",
        json!({"spec": {
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", GPU: "2"}}}],
            "resources": {"requests": {"cpu": "3"}},
        }}),
    );
    let r = request(&pod);
    assert_eq!(r.cpu, 3000);
    assert_eq!(r.get(GPU), 2);
}

#[test]
fn malformed_quantity_names_object_and_field() {
    let pod = mk_pod(
        "default",
        "x",
        json!({"spec": {"containers": [{"name": "main", "resources": {"requests": {"cpu": "abc"}}}]}}),
    );
    let err = PodInfo::try_from(&pod).unwrap_err();
    assert_eq!(
        err.to_string(),
        "pod default/x: spec.containers[0].resources.requests.cpu: invalid quantity \"abc\": no digits"
    );
    let mut index = ClusterIndex::new();
    assert!(index.apply(&pod).is_err());
    assert_eq!(index.pod_count(), 0);

    let node = mk_node("n", 8, json!({"status": {"allocatable": {GPU: "eight"}}}));
    let err = crate::node(&node).unwrap_err().to_string();
    assert!(
        err.starts_with("node n: status.allocatable.nvidia.com/gpu: invalid quantity \"eight\""),
        "{err}"
    );
    let bad_op = mk_pod(
        "default",
        "y",
        json!({"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "Near"}]}]}}}}}),
    );
    let err = PodInfo::try_from(&bad_op).unwrap_err().to_string();
    assert!(
        err.contains("nodeSelectorTerms[0].matchExpressions[0].operator: unknown value \"Near\""),
        "{err}"
    );
}

#[test]
fn group_comes_from_annotation_then_volcano_label_then_coscheduling_label() {
    let both = mk_pod(
        "ns",
        "p",
        json!({"metadata": {
            "annotations": {"scheduling.k8s.io/group-name": "from-annotation"},
            "labels": {"scheduling.volcano.sh/podgroup": "from-label", "scheduling.x-k8s.io/pod-group": "cosched"},
        }}),
    );
    assert_eq!(
        PodInfo::try_from(&both).unwrap().job_id.as_ref(),
        "ns/from-annotation"
    );
    let labels = mk_pod(
        "ns",
        "p",
        json!({"metadata": {"labels": {"scheduling.volcano.sh/podgroup": "from-label", "scheduling.x-k8s.io/pod-group": "cosched"}}}),
    );
    assert_eq!(
        PodInfo::try_from(&labels).unwrap().job_id.as_ref(),
        "ns/from-label"
    );
    let cosched = mk_pod(
        "ns",
        "p",
        json!({"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "cosched"}}}),
    );
    assert_eq!(
        PodInfo::try_from(&cosched).unwrap().job_id.as_ref(),
        "ns/cosched"
    );
    let none = mk_pod("ns", "p", json!({}));
    assert_eq!(
        PodInfo::try_from(&none).unwrap().job_id.as_ref(),
        "ns/pod:p"
    );
}

#[test]
fn pod_without_group_is_an_implicit_job_of_one() {
    let mut index = ClusterIndex::new();
    let pod = gpu_pod(
        "ns",
        "solo",
        1,
        json!({
            "metadata": {"annotations": {"scheduling.volcano.sh/queue-name": "team-a"}},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/1 nodes", "lastTransitionTime": "2026-01-01T00:00:05Z"}]},
        }),
    );
    index.apply(&pod).unwrap();
    let snap = snapshot(&index);
    let job = job(&snap, "ns/pod:solo");
    assert_eq!(&*job.name, "solo");
    assert_eq!(&*job.queue, "team-a");
    assert_eq!(job.min_member, 1);
    assert_eq!(job.status, None);
    assert_eq!(
        job.pending_since,
        Some(Time::parse_rfc3339("2026-01-01T00:00:05Z").unwrap())
    );
    let task = &snap.tasks[job.tasks[0]];
    assert_eq!(
        task.pending_reason.as_ref().unwrap().reason,
        "Unschedulable"
    );
    let q = snap.queues.iter().find(|q| &*q.name == "team-a").unwrap();
    assert!(
        !q.exists && !q.open,
        "a missing queue is stood in for, closed"
    );
    let d = snap.queues.iter().find(|q| &*q.name == "default").unwrap();
    assert!(!d.exists && d.open, "default is synthesised open");
}

#[test]
fn pods_of_a_missing_podgroup_wait() {
    let mut index = ClusterIndex::new();
    index
        .apply(&gpu_pod("ns", "late-0", 1, in_group("late")))
        .unwrap();
    index
        .apply(&gpu_pod("ns", "late-1", 1, in_group("late")))
        .unwrap();
    let snap = snapshot(&index);
    assert!(snap.jobs.is_empty());
    let waiting: Vec<_> = snap.waiting.iter().map(|w| (&*w.name, &*w.group)).collect();
    assert_eq!(waiting, [("late-0", "ns/late"), ("late-1", "ns/late")]);

    index
        .apply(&mk_podgroup("ns", "late", json!({"minMember": 2})))
        .unwrap();
    let snap = snapshot(&index);
    assert!(snap.waiting.is_empty());
    let job = job(&snap, "ns/late");
    assert_eq!(job.tasks.len(), 2);
    assert_eq!(
        job.phase(),
        PodGroupPhase::Pending,
        "phase absent reads as Pending"
    );
}

#[test]
fn task_status_follows_pod_state() {
    let cases = [
        (json!({}), TaskStatus::Pending),
        (json!({"spec": {"nodeName": "n"}}), TaskStatus::Bound),
        (
            json!({"spec": {"nodeName": "n"}, "status": {"phase": "Running"}}),
            TaskStatus::Running,
        ),
        (
            json!({"spec": {"nodeName": "n"}, "status": {"phase": "Succeeded"}}),
            TaskStatus::Succeeded,
        ),
        (json!({"status": {"phase": "Failed"}}), TaskStatus::Failed),
        (
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:09Z"}, "spec": {"nodeName": "n"},
                   "status": {"phase": "Running"}}),
            TaskStatus::Releasing,
        ),
    ];
    for (patch, want) in cases {
        let info = PodInfo::try_from(&mk_pod("ns", "p", patch.clone())).unwrap();
        assert_eq!(info.status(), want, "{patch}");
    }
    let gated = mk_pod(
        "ns",
        "g",
        json!({"spec": {"schedulingGates": [{"name": "example.com/wait"}]}}),
    );
    assert!(PodInfo::try_from(&gated).unwrap().gated);
}

#[test]
fn priority_resolves_through_classes_and_global_default() {
    let mut index = ClusterIndex::new();
    index
        .apply(&mk_priority_class("high", 1000, false))
        .unwrap();
    index
        .apply(&mk_pod(
            "ns",
            "explicit",
            json!({"spec": {"priority": 7, "priorityClassName": "high"}}),
        ))
        .unwrap();
    index
        .apply(&mk_pod(
            "ns",
            "by-class",
            json!({"spec": {"priorityClassName": "high"}}),
        ))
        .unwrap();
    index.apply(&mk_pod("ns", "plain", json!({}))).unwrap();
    index
        .apply(&mk_podgroup(
            "ns",
            "pg",
            json!({"priorityClassName": "high"}),
        ))
        .unwrap();
    index
        .apply(&mk_podgroup("ns", "pg-plain", json!({})))
        .unwrap();
    let prio = |snap: &Snapshot, name: &str| {
        snap.tasks
            .iter()
            .find(|t| &*t.name == name)
            .unwrap()
            .priority
    };
    let snap = snapshot(&index);
    assert_eq!(prio(&snap, "explicit"), 7);
    assert_eq!(prio(&snap, "by-class"), 1000);
    assert_eq!(prio(&snap, "plain"), 0);
    assert_eq!(
        job(&snap, "ns/pod:by-class").priority,
        1000,
        "an implicit job takes its pod's"
    );
    assert_eq!(job(&snap, "ns/pg").priority, 1000);
    assert_eq!(job(&snap, "ns/pg-plain").priority, 0);

    index
        .apply(&mk_priority_class("fallback", 50, true))
        .unwrap();
    let snap = snapshot(&index);
    assert_eq!(prio(&snap, "plain"), 50);
    assert_eq!(job(&snap, "ns/pg-plain").priority, 50);
    index.delete::<PriorityClass>("fallback");
    assert_eq!(prio(&snapshot(&index), "plain"), 0);
}

#[test]
fn critical_pods_are_marked() {
    let sys = PodInfo::try_from(&mk_pod("kube-system", "dns", json!({}))).unwrap();
    let crit = PodInfo::try_from(&mk_pod(
        "ns",
        "agent",
        json!({"spec": {"priorityClassName": "system-node-critical"}}),
    ))
    .unwrap();
    let plain = PodInfo::try_from(&mk_pod("ns", "app", json!({}))).unwrap();
    assert!(sys.critical && crit.critical && !plain.critical);
}

#[test]
fn node_conversion_takes_pods_out_of_allocatable() {
    let n = crate::node(&mk_node(
        "n1",
        8,
        json!({"spec": {"unschedulable": true, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
    ))
    .unwrap();
    assert_eq!(n.allocatable.get("pods"), 0);
    assert_eq!(n.max_pods, 110);
    assert_eq!(n.allocatable.get(GPU), 8);
    assert_eq!(n.allocatable.memory, 512 << 30);
    assert!(n.ready && n.unschedulable);
    assert_eq!(n.taints.len(), 1);
    let not_ready = crate::node(&mk_node(
        "n2",
        0,
        json!({"status": {"allocatable": {"pods": "20"}, "conditions": [{"type": "Ready", "status": "False"}]}}),
    ))
    .unwrap();
    assert!(!not_ready.ready);
    assert_eq!(not_ready.max_pods, 20);
    let bad = mk_node(
        "n3",
        1,
        json!({"spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}}),
    );
    assert!(crate::node(&bad)
        .unwrap_err()
        .to_string()
        .contains("spec.taints[0].effect"));
}

#[test]
fn node_usage_follows_pods_incrementally() {
    let mut index = ClusterIndex::new();
    // A pod may arrive before its node.
    let other = gpu_pod(
        "ns",
        "other",
        2,
        json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "n1"}}),
    );
    index.apply(&other).unwrap();
    index.apply(&mk_node("n1", 8, json!({}))).unwrap();
    let used = |index: &ClusterIndex| {
        let snap = snapshot(index);
        let n = &snap.nodes[0];
        (n.used.get(GPU), n.pod_count)
    };
    assert_eq!(used(&index), (2, 1));
    let ours = gpu_pod(
        "ns",
        "ours",
        3,
        json!({"spec": {"nodeName": "n1", "containers": [{"name": "main",
        "ports": [{"containerPort": 80, "hostPort": 8080}],
        "resources": {"limits": {GPU: "3"}}}]}}),
    );
    index.apply(&ours).unwrap();
    assert_eq!(used(&index), (5, 2));
    assert_eq!(snapshot(&index).nodes[0].host_ports.len(), 1);
    // Terminating pods still count.
    let mut terminating = ours.clone();
    terminating.metadata.deletion_timestamp = other.metadata.creation_timestamp.clone();
    index.apply(&terminating).unwrap();
    assert_eq!(used(&index), (5, 2));
    // Finished pods do not.
    let mut done = other.clone();
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    index.apply(&done).unwrap();
    assert_eq!(used(&index), (3, 1));
    // A node changed, or deleted and back, still carries its pods' usage; a relist of the
    // pods counts afresh.
    index
        .apply(&mk_node(
            "n1",
            8,
            json!({"metadata": {"labels": {"zone": "a"}}}),
        ))
        .unwrap();
    assert_eq!(used(&index), (3, 1));
    index.delete::<Node>("n1");
    index.apply(&mk_node("n1", 8, json!({}))).unwrap();
    assert_eq!(used(&index), (3, 1));
    index.reset::<Pod>([]);
    assert_eq!(used(&index), (0, 0));
    index.reset::<Pod>([&terminating, &done]);
    assert_eq!(used(&index), (3, 1));
    index.delete::<Pod>(("ns", "ours"));
    assert_eq!(used(&index), (0, 0));
    assert!(snapshot(&index).nodes[0].host_ports.is_empty());
    assert!(index.usage.is_empty(), "empty usage entries are dropped");
}

#[test]
fn podgroup_fields_convert_with_defaults() {
    let mut index = ClusterIndex::new();
    index
        .apply(&mk_podgroup(
            "ns",
            "pg",
            json!({"minMember": 0, "minTaskMember": {"worker": 2, "bad": -1},
                   "minResources": {GPU: "4", "cpu": "2"}, "topology": {"mode": "required", "key": "rack"}}),
        ))
        .unwrap();
    let mut timed = mk_podgroup(
        "ns",
        "timed",
        json!({"minMember": 3, "scheduleTimeoutSeconds": 30, "queue": "q"}),
    );
    timed.status = Some(
        serde_json::from_value(json!({"phase": "Inqueue", "conditions": [
            {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
             "lastTransitionTime": "2026-01-01T00:00:10Z"}]}))
        .unwrap(),
    );
    index.apply(&timed).unwrap();
    let mut tasks = mk_podgroup("ns", "few", json!({"minMember": 3}));
    tasks.status = Some(
        serde_json::from_value(json!({"conditions": [
            {"type": "Unschedulable", "status": "True", "reason": "NotEnoughTasks",
             "lastTransitionTime": "2026-01-01T00:00:10Z"}]}))
        .unwrap(),
    );
    index.apply(&tasks).unwrap();
    index.apply(&mk_queue("q", json!({}))).unwrap();
    let opts = SnapshotOptions {
        default_gang_timeout: Some(Duration::from_millis(1500)),
        ..SnapshotOptions::default()
    };
    let snap = index.snapshot(&opts);
    snap.check().unwrap();
    let pg = job(&snap, "ns/pg");
    assert_eq!(pg.min_member, 1);
    assert_eq!(pg.min_task_member.get("worker"), Some(&2));
    assert_eq!(pg.min_task_member.get("bad"), Some(&0));
    let min = pg.min_resources.as_ref().unwrap();
    assert_eq!((min.cpu, min.get(GPU)), (2000, 4));
    assert!(pg.topology.as_ref().unwrap().required);
    assert_eq!(&*pg.queue, "default");
    assert_eq!(
        pg.timeout_seconds,
        Some(2),
        "the default rounds up to whole seconds"
    );
    assert!(
        pg.tasks.is_empty(),
        "a PodGroup without pods is still a job"
    );
    let timed = job(&snap, "ns/timed");
    assert_eq!(timed.timeout_seconds, Some(30));
    assert_eq!(timed.phase(), PodGroupPhase::Inqueue);
    assert_eq!(
        timed.pending_since,
        Some(Time::parse_rfc3339("2026-01-01T00:00:10Z").unwrap())
    );
    assert_eq!(
        timed.condition("Unschedulable").unwrap().reason,
        "NotEnoughResources"
    );
    assert_eq!(
        job(&snap, "ns/few").pending_since,
        None,
        "NotEnoughTasks does not start the clock"
    );
}

#[test]
fn min_runtime_annotation_converts_and_a_malformed_one_is_kept_as_refused() {
    let mut index = ClusterIndex::new();
    for (name, value) in [
        ("half", Some("30m")),
        ("off", Some("0s")),
        ("bad", Some("ten")),
        ("none", None),
    ] {
        let mut pg = mk_podgroup("ns", name, json!({"minMember": 1}));
        if let Some(v) = value {
            pg.metadata.annotations = Some(
                [(
                    caldera_model::MIN_RUNTIME_ANNOTATION.to_string(),
                    v.to_string(),
                )]
                .into(),
            );
        }
        index.apply(&pg).unwrap();
    }
    let snap = snapshot(&index);
    assert_eq!(job(&snap, "ns/half").min_runtime, Some(Ok(30 * 60 * 1000)));
    assert_eq!(job(&snap, "ns/off").min_runtime, Some(Ok(0)));
    assert_eq!(job(&snap, "ns/none").min_runtime, None);
    let Some(Err(why)) = &job(&snap, "ns/bad").min_runtime else {
        panic!("a malformed value is refused, not ignored");
    };
    assert!(
        why.contains("caldera.sh/min-runtime") && why.contains("\"ten\""),
        "{why}"
    );
}

#[test]
fn queues_convert_with_defaults_and_state() {
    let mut index = ClusterIndex::new();
    let mut closed = mk_queue(
        "closed",
        json!({"weight": 3, "capability": {GPU: "4"},
        "guarantee": {"resource": {"cpu": "2"}}, "deserved": {MEMORY: "1Gi"}, "reclaimable": false, "priority": 5}),
    );
    closed.status = Some(
        serde_json::from_value(json!({"state": "Closed", "allocated": {GPU: "2"}, "running": 1}))
            .unwrap(),
    );
    index.apply(&closed).unwrap();
    index
        .apply(&mk_queue("default", json!({"weight": 0})))
        .unwrap();
    let snap = snapshot(&index);
    let names: Vec<_> = snap.queues.iter().map(|q| &*q.name).collect();
    assert_eq!(names, ["closed", "default"]);
    let q = &snap.queues[0];
    assert_eq!(q.weight, 3);
    assert_eq!(q.capability.as_ref().unwrap().get(GPU), 4);
    assert_eq!(q.guarantee.get(CPU), 2000);
    assert_eq!(q.deserved.as_ref().unwrap().memory, 1 << 30);
    assert!(!q.reclaimable && !q.open && q.exists);
    assert_eq!(q.priority, 5);
    let status = q.status.as_ref().unwrap();
    assert_eq!(
        (
            status.state.as_str(),
            status.running,
            status.allocated.get(GPU)
        ),
        ("Closed", 1, 2)
    );
    assert_eq!(snap.queues[1].weight, 1, "out-of-range weight reads as 1");
    assert!(snap.queues[1].exists);
    assert_eq!(q.parent, None);
}

#[test]
fn queue_parent_and_zero_capabilities_convert() {
    let mut index = ClusterIndex::new();
    index
        .apply(&mk_queue(
            "vision",
            json!({"parent": "research", "capability": {GPU: "0", "cpu": "0", "example.com/fpga": "2"}}),
        ))
        .unwrap();
    index
        .apply(&mk_queue("top", json!({"parent": ""})))
        .unwrap();
    let snap = snapshot(&index);
    let find = |n: &str| snap.queues.iter().find(|q| &*q.name == n).unwrap();
    let (top, vision) = (find("top"), find("vision"));
    assert_eq!(vision.parent.as_deref(), Some("research"));
    assert_eq!(
        vision.zero_capability,
        [std::sync::Arc::<str>::from(GPU)],
        "a GPU bound of 0 is kept; cpu 0 means unset, as in Volcano"
    );
    assert_eq!(top.parent, None, "an empty parent is the root");
}

#[test]
fn only_our_pods_become_tasks_but_all_count_on_nodes() {
    let mut index = ClusterIndex::new();
    index.apply(&mk_node("n1", 8, json!({}))).unwrap();
    index
        .apply(&mk_podgroup("ns", "theirs", json!({})))
        .unwrap();
    let foreign = gpu_pod(
        "ns",
        "foreign",
        1,
        json!({"metadata": {"annotations": {"scheduling.k8s.io/group-name": "theirs"}},
               "spec": {"schedulerName": "other", "nodeName": "n1"}}),
    );
    index.apply(&foreign).unwrap();
    let snap = snapshot(&index);
    assert!(snap.tasks.is_empty());
    assert!(
        snap.jobs.is_empty(),
        "a PodGroup whose pods all belong to another scheduler is left alone"
    );
    assert_eq!(snap.nodes[0].used.get(GPU), 1);
    let opts = SnapshotOptions {
        scheduler_names: vec!["other".into(), "caldera".into(), "other".into()],
        ..SnapshotOptions::default()
    };
    assert_eq!(index.snapshot(&opts).tasks.len(), 1);
}

#[test]
fn jobs_merge_pods_of_several_scheduler_names_in_name_order() {
    let mut index = ClusterIndex::new();
    index
        .apply(&mk_podgroup("ns", "g", json!({"minMember": 3})))
        .unwrap();
    for (name, sched) in [("m-2", "volcano"), ("m-0", "caldera"), ("m-1", "volcano")] {
        let mut patch = in_group("g");
        merge(&mut patch, json!({"spec": {"schedulerName": sched}}));
        index.apply(&mk_pod("ns", name, patch)).unwrap();
    }
    let snap = snapshot(&index);
    let names: Vec<_> = job(&snap, "ns/g")
        .tasks
        .iter()
        .map(|&t| &*snap.tasks[t].name)
        .collect();
    assert_eq!(names, ["m-0", "m-1", "m-2"]);
}

#[test]
fn snapshot_is_deterministic_and_reset_replaces_everything() {
    let build = |order: &[usize]| {
        let mut index = ClusterIndex::new();
        let pods: Vec<Pod> = (0..6)
            .map(|i| gpu_pod(&format!("ns{}", i % 2), &format!("p{i}"), 1, in_group("g")))
            .collect();
        for &i in order {
            index.apply(&pods[i]).unwrap();
        }
        index.apply(&mk_podgroup("ns0", "g", json!({}))).unwrap();
        index.apply(&mk_podgroup("ns1", "g", json!({}))).unwrap();
        for n in ["b", "a", "c"] {
            index.apply(&mk_node(n, 8, json!({}))).unwrap();
        }
        index
    };
    let a = snapshot(&build(&[0, 1, 2, 3, 4, 5]));
    let b = snapshot(&build(&[5, 3, 1, 0, 2, 4]));
    assert_eq!(a, b, "arrival order does not matter");
    let names: Vec<_> = a.nodes.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["a", "b", "c"]);

    let mut index = build(&[0, 1, 2]);
    let errors = index.reset(&[gpu_pod("ns0", "only", 1, in_group("g"))]);
    assert!(errors.is_empty());
    let snap = snapshot(&index);
    assert_eq!(snap.tasks.len(), 1);
    let errors = index.reset(&[
        mk_node("z", 1, json!({})),
        mk_node("bad", 1, json!({"status": {"allocatable": {"cpu": "x"}}})),
    ]);
    assert_eq!(errors.len(), 1);
    assert_eq!(snapshot(&index).nodes.len(), 1);
}

#[test]
fn only_pending_pods_wait_for_a_missing_podgroup() {
    let mut index = ClusterIndex::new();
    let mut bound = in_group("gone");
    merge(&mut bound, json!({"spec": {"nodeName": "n1"}}));
    index.apply(&gpu_pod("ns", "bound", 1, bound)).unwrap();
    index
        .apply(&gpu_pod("ns", "pending", 1, in_group("gone")))
        .unwrap();
    let snap = snapshot(&index);
    let waiting: Vec<_> = snap.waiting.iter().map(|w| &*w.name).collect();
    assert_eq!(waiting, ["pending"]);
}

#[test]
fn incremental_index_equals_one_built_from_scratch() {
    // A fixed pseudo-random sequence of applies and deletes (an LCG keeps it deterministic).
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut index = ClusterIndex::new();
    let mut live: std::collections::BTreeMap<String, Pod> = std::collections::BTreeMap::new();
    for n in 0..4 {
        index
            .apply(&mk_node(&format!("n{n}"), 8, json!({})))
            .unwrap();
    }
    for step in 0..2000 {
        let name = format!("p{}", next(60));
        if next(4) == 0 {
            index.delete::<Pod>(("ns", &name));
            live.remove(&name);
            continue;
        }
        let mut patch = match next(3) {
            0 => in_group(&format!("g{}", next(5))),
            _ => json!({}),
        };
        let node = match next(3) {
            0 => Value::Null,
            n => json!(format!("n{}", n + next(2))),
        };
        let phase = ["Pending", "Running", "Succeeded", "Failed"][next(4) as usize];
        let scheduler = ["caldera", "volcano", "default-scheduler"][next(3) as usize];
        merge(
            &mut patch,
            json!({"spec": {"nodeName": node, "schedulerName": scheduler,
                            "containers": [{"name": "main", "ports": [{"containerPort": 1, "hostPort": 9000 + next(3)}],
                                            "resources": {"requests": {"cpu": format!("{}m", next(900) + 100)}, "limits": {GPU: next(3).to_string()}}}]},
                   "status": {"phase": phase}}),
        );
        if next(10) == 0 {
            merge(
                &mut patch,
                json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:09Z"}}),
            );
        }
        let pod = gpu_pod("ns", &name, 0, patch);
        index.apply(&pod).unwrap();
        live.insert(name, pod);
        if step % 500 == 0 {
            index
                .apply(&mk_podgroup("ns", &format!("g{}", next(5)), json!({})))
                .unwrap();
        }
    }
    let mut fresh = ClusterIndex::new();
    for n in 0..4 {
        fresh
            .apply(&mk_node(&format!("n{n}"), 8, json!({})))
            .unwrap();
    }
    for g in 0..5 {
        fresh
            .apply(&mk_podgroup("ns", &format!("g{g}"), json!({})))
            .unwrap();
        index
            .apply(&mk_podgroup("ns", &format!("g{g}"), json!({})))
            .unwrap();
    }
    assert!(fresh.reset(live.values()).is_empty());
    let (a, b) = (snapshot(&index), snapshot(&fresh));
    assert_eq!(a, b);
    assert!(
        a.nodes.iter().any(|n| n.pod_count > 0),
        "the sequence put pods on nodes"
    );
    assert!(!a.jobs.is_empty());
}

mod provisioning {
    use super::*;
    use crate::provisioning::{build, request_info, state_of};
    use caldera_api::ProvisioningRequest;
    use caldera_model::{CapacityNeed, CapacityState, PodSetNeed, ProvisioningPolicy};
    use std::sync::Arc;

    fn need(podgroup: &str, uid: &str, attempt: u32) -> CapacityNeed {
        CapacityNeed {
            namespace: "ns".into(),
            podgroup: podgroup.into(),
            podgroup_uid: uid.into(),
            name: caldera_model::request_name(podgroup, attempt).into(),
            attempt,
            class_name: "best-effort-atomic-scale-up.autoscaling.x-k8s.io".into(),
            pod_sets: vec![PodSetNeed {
                request: Resources::from_pairs([(GPU, 1)]),
                spec: Arc::default(),
                count: 8,
            }],
            pods: vec![],
        }
    }

    fn with_conditions(mut pr: ProvisioningRequest, conditions: Value) -> ProvisioningRequest {
        pr.metadata.creation_timestamp =
            serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap();
        pr.status = serde_json::from_value(json!({ "conditions": conditions })).unwrap();
        pr
    }

    fn opts() -> SnapshotOptions {
        SnapshotOptions {
            provisioning: Some(ProvisioningPolicy {
                class_name: "c".into(),
                retry_ms: 1000,
                booking_ms: 600_000,
                max_wait_ms: None,
                all_gangs: true,
            }),
            ..SnapshotOptions::default()
        }
    }

    #[test]
    fn templates_limit_what_a_container_may_not_overcommit() {
        // kube-apiserver refuses a container requesting an extended resource or huge pages
        // without an equal limit; cpu and memory need none.
        let mut n = need("train", "pg-train", 1);
        n.pod_sets[0].request = Resources::from_pairs([
            (GPU, 2),
            ("cpu", 1500),
            ("memory", 1 << 30),
            ("hugepages-2Mi", 4 << 20),
        ]);
        let (_, templates) = build(&n);
        let spec = templates[0]
            .template
            .as_ref()
            .unwrap()
            .spec
            .as_ref()
            .unwrap();
        let resources = spec.containers[0].resources.as_ref().unwrap();
        let text = |l: &Option<
            std::collections::BTreeMap<
                String,
                k8s_openapi::apimachinery::pkg::api::resource::Quantity,
            >,
        >| {
            l.iter()
                .flatten()
                .map(|(k, v)| format!("{k}={}", v.0))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            text(&resources.requests),
            [
                "cpu=1500m",
                "hugepages-2Mi=4Mi",
                "memory=1Gi",
                "nvidia.com/gpu=2"
            ]
        );
        assert_eq!(
            text(&resources.limits),
            ["hugepages-2Mi=4Mi", "nvidia.com/gpu=2"]
        );
    }

    #[test]
    fn built_requests_read_back_and_point_at_their_podgroup() {
        let (pr, templates) = build(&need("train", "pg-train", 2));
        assert_eq!(pr.spec.pod_sets.len(), 1);
        assert_eq!(pr.spec.pod_sets[0].count, 8);
        assert_eq!(
            pr.spec.pod_sets[0].pod_template_ref.name,
            templates[0].metadata.name.clone().unwrap()
        );
        let owner = &templates[0].metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("PodGroup", "pg-train")
        );
        let labels = pr.metadata.labels.clone().unwrap();
        assert_eq!(labels["scheduling.caldera.sh/podgroup"], "train");
        let info = request_info(&pr).unwrap();
        assert_eq!(
            (&*info.podgroup, &*info.podgroup_uid, info.request.attempt),
            ("train", "pg-train", 2)
        );
        assert_eq!(info.request.state, CapacityState::Pending);
        // Someone else's request is not Caldera's.
        let mut foreign = pr.clone();
        foreign.metadata.labels = None;
        assert!(request_info(&foreign).is_none());
    }

    #[test]
    fn failed_wins_over_provisioned_which_wins_over_accepted() {
        let (pr, _) = build(&need("train", "pg-train", 1));
        let c = |t: &str, at: &str| {
            json!({"type": t, "status": "True", "reason": "R", "message": "m",
                                          "lastTransitionTime": at})
        };
        let accepted = with_conditions(pr.clone(), json!([c("Accepted", "2026-01-01T00:00:01Z")]));
        assert_eq!(state_of(&accepted, Time(0)).0, CapacityState::Accepted);
        let provisioned = with_conditions(
            pr.clone(),
            json!([
                c("Accepted", "2026-01-01T00:00:01Z"),
                c("Provisioned", "2026-01-01T00:00:09Z")
            ]),
        );
        let (state, since, message) = state_of(&provisioned, Time(0));
        assert_eq!(
            (state, message.as_str()),
            (CapacityState::Provisioned, "R: m")
        );
        assert_eq!(since.to_rfc3339(), "2026-01-01T00:00:09Z");
        let failed = with_conditions(
            pr.clone(),
            json!([
                c("Provisioned", "2026-01-01T00:00:09Z"),
                c("CapacityRevoked", "2026-01-01T00:00:10Z")
            ]),
        );
        assert_eq!(state_of(&failed, Time(0)).0, CapacityState::Failed);
    }

    #[test]
    fn a_job_gets_its_newest_request_and_the_rest_are_stale() {
        let mut index = ClusterIndex::new();
        index
            .apply(&mk_podgroup("ns", "train", json!({"minMember": 8})))
            .unwrap();
        for (group, uid, attempt) in [
            ("train", "pg-train", 1),
            ("train", "pg-train", 2),
            ("gone", "pg-gone", 1),
        ] {
            let (pr, _) = build(&need(group, uid, attempt));
            index.apply(&with_conditions(pr, json!([]))).unwrap();
        }
        // Off: nothing attached, nothing stale.
        let snap = snapshot(&index);
        assert!(job(&snap, "ns/train").capacity.is_none() && snap.stale_capacity.is_empty());
        let snap = index.snapshot(&opts());
        assert_eq!(
            &*job(&snap, "ns/train").capacity.as_ref().unwrap().name,
            "train-cap-2"
        );
        assert!(job(&snap, "ns/train").autoscale);
        let stale: Vec<&str> = snap.stale_capacity.iter().map(|r| &*r.name).collect();
        assert_eq!(stale, ["gone-cap-1", "train-cap-1"]);
    }

    #[test]
    fn provisioned_requests_book_nodes_created_after_them() {
        let mut index = ClusterIndex::new();
        index
            .apply(&mk_podgroup("ns", "train", json!({"minMember": 2})))
            .unwrap();
        for i in 0..2 {
            index
                .apply(&gpu_pod("ns", &format!("t-{i}"), 4, in_group("train")))
                .unwrap();
        }
        let at = |t: &str| json!({"metadata": {"creationTimestamp": t}});
        index
            .apply(&mk_node("old", 8, at("2025-12-31T00:00:00Z")))
            .unwrap();
        index
            .apply(&mk_node("new-1", 8, at("2026-01-01T00:00:30Z")))
            .unwrap();
        index
            .apply(&mk_node("new-2", 8, at("2026-01-01T00:00:31Z")))
            .unwrap();
        let (pr, _) = build(&need("train", "pg-train", 1));
        let c = json!([{"type": "Provisioned", "status": "True", "reason": "R", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:40Z"}]);
        index.apply(&with_conditions(pr, c)).unwrap();
        let snap = index.snapshot(&opts());
        let booked: Vec<(&str, Option<&str>)> = snap
            .nodes
            .iter()
            .map(|n| (&*n.name, n.booked_for.as_deref()))
            .collect();
        // 8 GPUs are needed: the first new node holds them; the old node is never booked.
        assert_eq!(
            booked,
            [("new-1", Some("ns/train")), ("new-2", None), ("old", None)]
        );
    }

    #[test]
    fn a_node_from_the_same_second_as_the_request_is_not_booked() {
        // Timestamps have whole seconds: a node created in the second the request was (the
        // cluster's nodes, when a gang's request follows them at once) may be older than it.
        // Booking it would take an old node from everyone else and let the gang spread over
        // it before its new node.
        let mut index = ClusterIndex::new();
        index
            .apply(&mk_podgroup("ns", "train", json!({"minMember": 2})))
            .unwrap();
        for i in 0..2 {
            index
                .apply(&gpu_pod("ns", &format!("t-{i}"), 4, in_group("train")))
                .unwrap();
        }
        let at = |t: &str| json!({"metadata": {"creationTimestamp": t}});
        index
            .apply(&mk_node("same-second", 8, at("2026-01-01T00:00:00Z")))
            .unwrap();
        let (pr, _) = build(&need("train", "pg-train", 1));
        let c = json!([{"type": "Accepted", "status": "True", "reason": "R", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:01Z"}]);
        index.apply(&with_conditions(pr, c)).unwrap();
        let booked = |index: &ClusterIndex| -> Vec<(String, Option<String>)> {
            index
                .snapshot(&opts())
                .nodes
                .iter()
                .map(|n| {
                    (
                        n.name.to_string(),
                        n.booked_for.as_deref().map(String::from),
                    )
                })
                .collect()
        };
        assert_eq!(booked(&index), [("same-second".to_string(), None)]);
        // The autoscaler's node, a second later or more, is the gang's.
        index
            .apply(&mk_node("new", 8, at("2026-01-01T00:00:01Z")))
            .unwrap();
        assert_eq!(
            booked(&index),
            [
                ("new".to_string(), Some("ns/train".to_string())),
                ("same-second".to_string(), None)
            ]
        );
    }

    #[test]
    fn a_provisioned_request_books_before_an_accepted_one() {
        // b was accepted first; a was accepted later and is provisioned now: the node that
        // appeared is a's (b's is still coming), whatever the order of the state changes.
        let mut index = ClusterIndex::new();
        for g in ["a", "b"] {
            index
                .apply(&mk_podgroup("ns", g, json!({"minMember": 2})))
                .unwrap();
            for i in 0..2 {
                index
                    .apply(&gpu_pod("ns", &format!("{g}-{i}"), 4, in_group(g)))
                    .unwrap();
            }
        }
        let at = |t: &str| json!({"metadata": {"creationTimestamp": t}});
        index
            .apply(&mk_node("new", 8, at("2026-01-01T00:00:30Z")))
            .unwrap();
        let cond = |type_: &str, t: &str| {
            json!([{"type": type_, "status": "True", "reason": "R", "message": "",
                    "lastTransitionTime": t}])
        };
        let (a, _) = build(&need("a", "pg-a", 1));
        index
            .apply(&with_conditions(
                a,
                cond("Provisioned", "2026-01-01T00:00:31Z"),
            ))
            .unwrap();
        let (b, _) = build(&need("b", "pg-b", 1));
        index
            .apply(&with_conditions(
                b,
                cond("Accepted", "2026-01-01T00:00:01Z"),
            ))
            .unwrap();
        let snap = index.snapshot(&opts());
        assert_eq!(
            job(&snap, "ns/a").capacity.as_ref().unwrap().state,
            CapacityState::Provisioned
        );
        let booked: Vec<(&str, Option<&str>)> = snap
            .nodes
            .iter()
            .map(|n| (&*n.name, n.booked_for.as_deref()))
            .collect();
        assert_eq!(booked, [("new", Some("ns/a"))]);
    }

    #[test]
    fn a_provisioned_gangs_booked_node_stays_its_own() {
        // a is provisioned and books the first new node. Then b's request is seen provisioned
        // with an earlier state change, and a second new node appears. Derived afresh, b would
        // come first and take a's node; booked nodes stick, so b gets the other one.
        let mut index = ClusterIndex::new();
        for g in ["a", "b"] {
            index
                .apply(&mk_podgroup("ns", g, json!({"minMember": 2})))
                .unwrap();
            for i in 0..2 {
                index
                    .apply(&gpu_pod("ns", &format!("{g}-{i}"), 4, in_group(g)))
                    .unwrap();
            }
        }
        let at = |t: &str| json!({"metadata": {"creationTimestamp": t}});
        let cond = |type_: &str, t: &str| {
            json!([{"type": type_, "status": "True", "reason": "R", "message": "",
                    "lastTransitionTime": t}])
        };
        index
            .apply(&mk_node("first", 8, at("2026-01-01T00:00:30Z")))
            .unwrap();
        let (a, _) = build(&need("a", "pg-a", 1));
        index
            .apply(&with_conditions(
                a,
                cond("Provisioned", "2026-01-01T00:00:40Z"),
            ))
            .unwrap();
        let booked = |index: &ClusterIndex| -> Vec<(String, Option<String>)> {
            index
                .snapshot(&opts())
                .nodes
                .iter()
                .map(|n| {
                    (
                        n.name.to_string(),
                        n.booked_for.as_deref().map(String::from),
                    )
                })
                .collect()
        };
        let own = |n: &str, j: Option<&str>| (n.to_string(), j.map(String::from));
        assert_eq!(booked(&index), [own("first", Some("ns/a"))]);

        let (b, _) = build(&need("b", "pg-b", 1));
        index
            .apply(&with_conditions(
                b,
                cond("Provisioned", "2026-01-01T00:00:35Z"),
            ))
            .unwrap();
        index
            .apply(&mk_node("second", 8, at("2026-01-01T00:00:31Z")))
            .unwrap();
        for _ in 0..2 {
            assert_eq!(
                booked(&index),
                [own("first", Some("ns/a")), own("second", Some("ns/b"))]
            );
        }
        // Once a's request is gone, its node is free for anyone; b keeps its own.
        index.delete::<ProvisioningRequest>(("ns", "a-cap-1"));
        assert_eq!(
            booked(&index),
            [own("first", None), own("second", Some("ns/b"))]
        );
    }
}

#[test]
fn namespace_selectors_are_resolved_against_current_namespace_labels() {
    use caldera_model::Namespaces;
    use k8s_openapi::api::core::v1::Namespace;
    let mut index = ClusterIndex::new();
    index.apply(&mk_node("n0", 8, json!({}))).unwrap();
    let ns = |name: &str, env: &str| -> Namespace {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"env": env}}})).unwrap()
    };
    index.apply(&ns("prod-a", "prod")).unwrap();
    index.apply(&ns("dev", "dev")).unwrap();
    let term = |selector: Value| {
        json!({"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "ps"}},
            "namespaceSelector": selector,
            "namespaces": ["listed"],
            "topologyKey": "kubernetes.io/hostname"}]}}}})
    };
    index
        .apply(&mk_pod(
            "ml",
            "w",
            term(json!({"matchLabels": {"env": "prod"}})),
        ))
        .unwrap();
    // A pod's namespace without a Namespace object still has its name label.
    index
        .apply(&mk_pod(
            "other",
            "x",
            term(
                json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                "operator": "In", "values": ["other"]}]}),
            ),
        ))
        .unwrap();
    let namespaces = |snap: &Snapshot, pod: &str| {
        let t = snap.tasks.iter().find(|t| &*t.name == pod).unwrap();
        t.spec.pods.anti_affinity[0].namespaces.clone()
    };
    let snap = snapshot(&index);
    assert_eq!(
        namespaces(&snap, "w"),
        Namespaces::Only(vec!["listed".into(), "prod-a".into()])
    );
    assert_eq!(
        namespaces(&snap, "x"),
        Namespaces::Only(vec!["listed".into(), "other".into()])
    );
    assert!(PodInfo::try_from(&mk_pod(
        "ml",
        "w",
        term(json!({"matchLabels": {"env": "prod"}}))
    ))
    .unwrap()
    .spec
    .unsupported
    .is_none());

    index.apply(&ns("dev", "prod")).unwrap();
    let snap = snapshot(&index);
    assert_eq!(
        namespaces(&snap, "w"),
        Namespaces::Only(vec!["dev".into(), "listed".into(), "prod-a".into()])
    );
}

fn mk_hypernode(name: &str, tier: i64, members: Value) -> caldera_api::HyperNode {
    serde_json::from_value(json!({
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
        "metadata": {"name": name}, "spec": {"tier": tier, "members": members},
    }))
    .unwrap()
}

fn domain<'a>(snap: &'a Snapshot, name: &str) -> &'a caldera_model::Domain {
    snap.topology
        .domains
        .iter()
        .find(|d| &*d.name == name)
        .unwrap()
}

fn node_names(snap: &Snapshot, d: &caldera_model::Domain) -> Vec<String> {
    d.nodes
        .iter()
        .map(|&n| snap.nodes[n as usize].name.to_string())
        .collect()
}

#[test]
fn hypernodes_resolve_exact_unanchored_regex_and_label_members_into_a_tree() {
    let mut index = ClusterIndex::default();
    for (name, patch) in [
        ("a-0", json!({})),
        ("ga-7", json!({})),
        ("b-0", json!({"metadata": {"labels": {"rack": "b"}}})),
        ("c-0", json!({})),
    ] {
        index.apply(&mk_node(name, 4, patch)).unwrap();
    }
    let hypernodes = [
        mk_hypernode(
            "rack-a",
            1,
            json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "a-[0-9]"}}}]),
        ),
        mk_hypernode(
            "rack-b",
            1,
            json!([{"type": "Node", "selector": {"labelMatch": {"matchLabels": {"rack": "b"}}}}]),
        ),
        // c-0 is claimed by rack-a too: the first tier-1 claim by name keeps it.
        mk_hypernode(
            "rack-c",
            1,
            json!([
            {"type": "Node", "selector": {"exactMatch": {"name": "c-0"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "a-0"}}}]),
        ),
        mk_hypernode(
            "spine",
            2,
            json!([
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-a"}}},
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "rack-b"}}}]),
        ),
    ];
    assert!(index.reset(hypernodes.iter()).is_empty());
    let snap = snapshot(&index);
    let tree = &snap.topology;
    assert_eq!(node_names(&snap, domain(&snap, "rack-a")), ["a-0", "ga-7"]);
    assert_eq!(node_names(&snap, domain(&snap, "rack-b")), ["b-0"]);
    assert_eq!(node_names(&snap, domain(&snap, "rack-c")), ["c-0"]);
    assert_eq!(
        node_names(&snap, domain(&snap, "spine")),
        ["a-0", "b-0", "ga-7"]
    );
    let spine = tree.domain_named("spine");
    assert_eq!(domain(&snap, "rack-a").parent, spine);
    assert_eq!(domain(&snap, "rack-c").parent, None);
    assert_eq!(tree.root_tier(), 3);
    assert_eq!(
        tree.problems,
        ["node a-0 is in two tier-1 HyperNodes, rack-a and rack-c; rack-a is kept"]
    );
}

#[test]
fn hypernode_cycles_are_broken_and_bad_members_are_named() {
    let mut index = ClusterIndex::default();
    index.apply(&mk_node("n", 4, json!({}))).unwrap();
    let cycle = [
        mk_hypernode(
            "x",
            2,
            json!([{"type": "HyperNode", "selector": {"exactMatch": {"name": "y"}}}]),
        ),
        mk_hypernode(
            "y",
            2,
            json!([
            {"type": "HyperNode", "selector": {"exactMatch": {"name": "x"}}},
            {"type": "Node", "selector": {"exactMatch": {"name": "n"}}}]),
        ),
    ];
    assert!(index.reset(cycle.iter()).is_empty());
    let snap = snapshot(&index);
    assert_eq!(
        snap.topology.problems.len(),
        1,
        "{:?}",
        snap.topology.problems
    );
    assert!(snap.topology.problems[0].contains("form a cycle"));

    let bad = mk_hypernode(
        "bad",
        1,
        json!([{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]),
    );
    let err = index.apply(&bad).unwrap_err().to_string();
    assert!(
        err.starts_with("hypernode bad: spec.members[0].selector.regexMatch.pattern:"),
        "{err}"
    );
    let two = mk_hypernode(
        "two",
        1,
        json!([{"type": "Node", "selector": {
        "exactMatch": {"name": "n"}, "regexMatch": {"pattern": "n"}}}]),
    );
    let err = index.apply(&two).unwrap_err().to_string();
    assert!(
        err.contains("exactly one of exactMatch, regexMatch, labelMatch"),
        "{err}"
    );
}

#[test]
fn network_topology_becomes_the_rule_and_sub_groups_their_policies() {
    let mut index = ClusterIndex::default();
    index
        .apply(&mk_podgroup(
            "ns",
            "hard",
            json!({"minMember": 2,
            "networkTopology": {"highestTierName": "spine"}}),
        ))
        .unwrap();
    index
        .apply(&mk_podgroup(
            "ns",
            "split",
            json!({"minMember": 2,
            "networkTopology": {"mode": "soft"},
            "subGroupPolicy": [{"name": "w", "subGroupSize": 4, "minSubGroups": 2,
                "labelSelector": {"matchLabels": {"role": "worker"}},
                "matchLabelKeys": ["part"],
                "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
                {"name": "rest"}]}),
        ))
        .unwrap();
    index
        .apply(&mk_podgroup(
            "ns",
            "newer",
            json!({"minMember": 1, "subGroupPolicy": [{"name": "w", "subGroupPriority": 3}]}),
        ))
        .unwrap();
    let snap = snapshot(&index);
    let hard = job(&snap, "ns/hard");
    let rule = hard.topology.as_ref().unwrap();
    assert!(rule.required, "Volcano's default mode is hard");
    assert_eq!(rule.highest, caldera_model::TierLimit::Name("spine".into()));
    assert_eq!(rule.source, caldera_model::TopologySource::HyperNodes);
    assert!(hard.unsupported.is_none());
    let split = job(&snap, "ns/split");
    assert!(!split.topology.as_ref().unwrap().required);
    assert!(split.unsupported.is_none());
    let [w, rest] = &split.sub_group_policies[..] else {
        panic!("two policies: {:?}", split.sub_group_policies)
    };
    assert_eq!((&*w.name, w.size, w.min), ("w", 4, 2));
    assert_eq!(w.match_label_keys, ["part"]);
    assert!(w.topology.as_ref().unwrap().required);
    let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        w.key_of(&labels(&[("role", "worker"), ("part", "3")]))
            .as_deref(),
        Some("3")
    );
    assert_eq!(
        w.key_of(&labels(&[("role", "worker")])),
        None,
        "no part label"
    );
    assert_eq!(w.key_of(&labels(&[("role", "ps"), ("part", "3")])), None);
    assert_eq!((rest.size, rest.min, rest.topology.is_none()), (1, 0, true));
    assert_eq!(
        rest.key_of(&labels(&[])).as_deref(),
        Some(""),
        "takes every member"
    );
    // A field of a newer Volcano is refused by name, never ignored.
    let newer = job(&snap, "ns/newer");
    assert!(newer
        .unsupported
        .as_deref()
        .unwrap()
        .contains("spec.subGroupPolicy[0].subGroupPriority"));
}

#[test]
fn sub_group_size_below_one_is_an_error_naming_the_field() {
    let mut index = ClusterIndex::default();
    let err = index
        .apply(&mk_podgroup(
            "ns",
            "bad",
            json!({"minMember": 1, "subGroupPolicy": [{"name": "w", "subGroupSize": 0}]}),
        ))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.subGroupPolicy[0].subGroupSize"),
        "{err}"
    );
}

fn mk_native_podgroup(
    ns: &str,
    name: &str,
    spec: Value,
    meta: Value,
) -> k8s_openapi::api::scheduling::v1alpha2::PodGroup {
    let mut v = json!({
        "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
        "metadata": {"namespace": ns, "name": name, "uid": format!("npg-{name}"),
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
    });
    merge(&mut v, json!({"metadata": meta}));
    serde_json::from_value(v).unwrap()
}

fn in_native_group(group: &str) -> Value {
    json!({"spec": {"schedulingGroup": {"podGroupName": group}}})
}

#[test]
fn native_podgroup_members_form_one_gang_with_its_workloads_queue_and_their_priority() {
    let mut index = ClusterIndex::new();
    index
        .apply(&mk_native_podgroup(
            "ml",
            "train-workers",
            json!({"schedulingPolicy": {"gang": {"minCount": 2}},
                   "podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}}}),
            json!({}),
        ))
        .unwrap();
    index.apply::<k8s_openapi::api::scheduling::v1alpha2::Workload>(
        &serde_json::from_value(json!({
            "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "Workload",
            "metadata": {"namespace": "ml", "name": "train",
                         "labels": {"kueue.x-k8s.io/queue-name": "team-a"}},
            "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]},
        }))
        .unwrap(),
    ).unwrap();
    let mut high = in_native_group("train-workers");
    merge(&mut high, json!({"spec": {"priority": 7}}));
    index
        .apply(&gpu_pod("ml", "w-0", 1, in_native_group("train-workers")))
        .unwrap();
    index.apply(&gpu_pod("ml", "w-1", 1, high)).unwrap();
    let snap = snapshot(&index);
    let j = job(&snap, "ml/train-workers");
    assert_eq!(j.min_member, 2);
    assert_eq!(j.tasks.len(), 2);
    assert_eq!(&*j.queue, "team-a", "the Workload names the queue");
    assert_eq!(j.priority, 7, "the highest member's priority");
    assert_eq!(
        j.native.as_ref().and_then(|n| n.display()).as_deref(),
        Some("Workload train (template workers)")
    );
    // The PodGroup's own queue wins over its Workload's.
    index
        .apply(&mk_native_podgroup(
            "ml",
            "train-workers",
            json!({"schedulingPolicy": {"gang": {"minCount": 2}},
                   "podGroupTemplateRef": {"workload": {"workloadName": "train", "podGroupTemplateName": "workers"}}}),
            json!({"annotations": {"scheduling.volcano.sh/queue-name": "team-b"}}),
        ))
        .unwrap();
    assert_eq!(&*job(&snapshot(&index), "ml/train-workers").queue, "team-b");
}

#[test]
fn a_pod_naming_a_missing_native_podgroup_waits_with_a_message() {
    let mut index = ClusterIndex::new();
    index
        .apply(&gpu_pod("ml", "w-0", 1, in_native_group("nope")))
        .unwrap();
    let snap = snapshot(&index);
    assert!(snap.jobs.is_empty());
    let waiting = &snap.waiting[0];
    assert_eq!(&*waiting.name, "w-0");
    assert!(waiting
        .why
        .as_deref()
        .is_some_and(|w| w.contains("PodGroup ml/nope (scheduling.k8s.io/v1alpha2")));
    // A Volcano PodGroup of that name is not the one the pod names.
    index
        .apply(&mk_podgroup("ml", "nope", json!({"minMember": 1})))
        .unwrap();
    let snap = snapshot(&index);
    assert!(snap.jobs.iter().all(|j| j.tasks.is_empty()));
    assert_eq!(snap.waiting.len(), 1);
}

#[test]
fn gate_mode_leaves_native_gangs_to_kube_scheduler() {
    let mut index = ClusterIndex::new();
    index
        .apply(&mk_native_podgroup(
            "ml",
            "g",
            json!({"schedulingPolicy": {"gang": {"minCount": 1}}}),
            json!({}),
        ))
        .unwrap();
    let mut bound = in_native_group("g");
    merge(
        &mut bound,
        json!({"spec": {"schedulerName": "default-scheduler", "nodeName": "n1"}}),
    );
    index.apply(&gpu_pod("ml", "w-0", 1, bound)).unwrap();
    let snap = index.snapshot(&SnapshotOptions::gate(None));
    assert!(
        snap.jobs.iter().all(|j| j.native.is_none()),
        "{:?}",
        snap.jobs
    );
}

#[test]
fn kai_gpu_share_annotations_are_refused_naming_the_supported_way() {
    for key in ["gpu-fraction", "gpu-memory"] {
        let pod = mk_pod(
            "ml",
            "infer",
            json!({"metadata": {"annotations": {key: "0.5"}}}),
        );
        let what = PodInfo::try_from(&pod).unwrap().spec.unsupported.clone();
        let what = what.expect("a KAI share annotation is not ignored");
        assert!(what.starts_with(&format!("annotation {key} ")), "{what}");
        assert!(
            what.contains("DRA ResourceClaim's capacity request"),
            "{what}"
        );
    }
    let plain = mk_pod("ml", "infer", json!({}));
    assert!(PodInfo::try_from(&plain)
        .unwrap()
        .spec
        .unsupported
        .is_none());
}
