//! Tests of `derive.rs`: which PodGroups each owner kind derives.
use super::*;
use crate::workload::DerivedWrite;
use crate::{ClusterIndex, SnapshotOptions};
use caldera_api::workload::ANNOTATION_DERIVED_FROM;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn names() -> Vec<String> {
    vec!["caldera".into()]
}

fn template(gpus: u32) -> Value {
    json!({"spec": {"schedulerName": "caldera", "containers": [{"name": "c",
        "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]}})
}

fn workload(v: Value) -> Workload {
    serde_json::from_value(v).unwrap()
}

fn jobset(annotations: Value) -> Workload {
    workload(
        json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"namespace": "ml", "name": "train", "uid": "u-js", "annotations": annotations},
        "spec": {"replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": {"spec": {"template": template(0)}}},
            {"name": "workers", "replicas": 2, "template": {"spec": {
                "parallelism": 2, "completions": 2, "template": template(1)}}}]}}),
    )
}

fn lws(size: i64, replicas: i64) -> Workload {
    workload(
        json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"namespace": "ml", "name": "infer", "uid": "u-lws"},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size,
            "workerTemplate": template(1)}}}),
    )
}

fn gang(w: &Workload, part: Option<&str>) -> PodGroup {
    match workload_gang(w, w.workload_kind().unwrap(), part, &names()) {
        JobGang::Gang(pg) => *pg,
        other => panic!("{other:?}"),
    }
}

#[test]
fn derivation_table() {
    let pg = gang(&jobset(json!({})), None);
    assert_eq!(pg.metadata.name.as_deref(), Some("jobset-train"));
    assert_eq!(pg.spec.min_member, Some(5), "1 driver + 2 jobs x 2 pods");
    assert_eq!(
        pg.spec.min_resources.as_ref().unwrap()["nvidia.com/gpu"].0,
        "4"
    );
    assert_eq!(
        pg.metadata.owner_references.as_ref().unwrap()[0].uid,
        "u-js"
    );

    let per = jobset(json!({ANNOTATION_GANG_PER_REPLICATED_JOB: "true"}));
    assert_eq!(
        gang_parts(&per, WorkloadKind::JobSet),
        vec![Some("driver".to_string()), Some("workers".to_string())]
    );
    let workers = gang(&per, Some("workers"));
    assert_eq!(
        workers.metadata.name.as_deref(),
        Some("jobset-train-workers")
    );
    assert_eq!(workers.spec.min_member, Some(4));

    let l = lws(4, 2);
    assert_eq!(
        gang_parts(&l, WorkloadKind::LeaderWorkerSet),
        vec![Some("0".to_string()), Some("1".to_string())]
    );
    let g1 = gang(&l, Some("1"));
    assert_eq!(g1.metadata.name.as_deref(), Some("lws-infer-1"));
    assert_eq!(g1.spec.min_member, Some(4));
    assert_eq!(
        g1.spec.min_resources.as_ref().unwrap()["nvidia.com/gpu"].0,
        "4"
    );

    let torch = workload(
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"namespace": "ml", "name": "pt", "uid": "u-pt"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template(1)},
            "Worker": {"replicas": 3, "template": template(1)}}}}),
    );
    assert_eq!(gang(&torch, None).spec.min_member, Some(4));
    let mpi = workload(
        json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
        "metadata": {"namespace": "ml", "name": "m", "uid": "u-m"},
        "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1, "template": template(0)},
            "Worker": {"replicas": 2, "template": template(1)}}}}),
    );
    assert_eq!(gang(&mpi, None).spec.min_member, Some(3));

    let ray = workload(json!({"apiVersion": "ray.io/v1", "kind": "RayCluster",
        "metadata": {"namespace": "ml", "name": "rc", "uid": "u-rc",
            "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob", "name": "rj",
                "uid": "u-rj", "controller": true}]},
        "spec": {"headGroupSpec": {"template": template(0)}, "workerGroupSpecs": [
            {"groupName": "gpu", "replicas": 5, "minReplicas": 2, "numOfHosts": 2, "template": template(1)},
            {"groupName": "cpu", "minReplicas": 0, "template": template(0)}]}}));
    let rg = gang(&ray, None);
    assert_eq!(rg.spec.min_member, Some(5), "head + 2 x 2 hosts");
    let owner = &rg.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("RayJob", "u-rj")
    );
    assert_eq!(
        rg.metadata.annotations.as_ref().unwrap()[ANNOTATION_DERIVED_FROM],
        "rayjob.ray.io/rj"
    );

    let sts = |annotations: Value| {
        workload(json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"namespace": "ml", "name": "s", "uid": "u-s", "annotations": annotations},
            "spec": {"replicas": 3, "template": template(1)}}))
    };
    assert!(matches!(
        workload_gang(&sts(json!({})), WorkloadKind::StatefulSet, None, &names()),
        JobGang::NotGrouped(_)
    ));
    assert_eq!(
        gang(&sts(json!({ANNOTATION_AUTO_GROUP: "true"})), None)
            .spec
            .min_member,
        Some(3)
    );
}

#[test]
fn opt_out_overrides_and_clashes() {
    let out = jobset(json!({ANNOTATION_AUTO_GROUP: "false"}));
    assert!(matches!(
        workload_gang(&out, WorkloadKind::JobSet, None, &names()),
        JobGang::NotGrouped(_)
    ));
    let over = jobset(json!({ANNOTATION_MIN_MEMBER: "2", ANNOTATION_SCHEDULE_TIMEOUT: "30"}));
    let pg = gang(&over, None);
    assert_eq!(
        (pg.spec.min_member, pg.spec.schedule_timeout_seconds),
        (Some(2), Some(30))
    );
    let bad = jobset(json!({ANNOTATION_MIN_MEMBER: "-1"}));
    assert!(matches!(
        workload_gang(&bad, WorkloadKind::JobSet, None, &names()),
        JobGang::Invalid(m) if m.contains(ANNOTATION_MIN_MEMBER)
    ));
    // One replicated job's pods name a PodGroup of their own: refused, not guessed.
    let mut clash = jobset(json!({}));
    clash.spec["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] =
        json!({"annotations": {"scheduling.k8s.io/group-name": "mine"}});
    match workload_gang(&clash, WorkloadKind::JobSet, None, &names()) {
        JobGang::Invalid(m) => assert!(m.contains("PodGroup mine"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Mixed schedulers: refused.
    let mut mixed = jobset(json!({}));
    mixed.spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["schedulerName"] =
        json!("default-scheduler");
    assert!(matches!(
        workload_gang(&mixed, WorkloadKind::JobSet, None, &names()),
        JobGang::Invalid(_)
    ));
}

fn pod(name: &str, labels: Value, owner: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ml", "name": name, "uid": format!("u-{name}"),
            "labels": labels, "ownerReferences": [owner]},
        "spec": template(1)["spec"],
    }))
    .unwrap()
}

fn lws_pod(group: u32, worker: u32) -> Pod {
    let (name, owner) = if worker == 0 {
        (
            format!("infer-{group}"),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "name": "infer", "uid": "u-sts", "controller": true}),
        )
    } else {
        (
            format!("infer-{group}-{worker}"),
            json!({"apiVersion": "apps/v1",
            "kind": "StatefulSet", "name": format!("infer-{group}"),
            "uid": format!("u-sts-{group}"), "controller": true}),
        )
    };
    pod(
        &name,
        json!({LABEL_LWS_NAME: "infer", LABEL_LWS_GROUP_INDEX: group.to_string(),
        LABEL_LWS_WORKER_INDEX: worker.to_string()}),
        owner,
    )
}

/// LWS pods resolve per group by their labels; a kind not watched leaves pods alone; a
/// pod with a group of its own and an owner deriving a gang makes that gang wait.
#[test]
fn index_resolves_lws_groups_and_reports_clashes() {
    let opts = SnapshotOptions {
        scheduler_names: names(),
        ..SnapshotOptions::default()
    };
    let mut index = ClusterIndex::new();
    for g in 0..2 {
        for w in 0..4 {
            index.apply(&lws_pod(g, w)).unwrap();
        }
    }
    // Not watched (no CRD): scheduled alone, as before.
    assert_eq!(index.snapshot(&opts).jobs.len(), 8);
    index.reset_workloads(WorkloadKind::LeaderWorkerSet, []);
    let snap = index.snapshot(&opts);
    assert_eq!(snap.waiting.len(), 8);
    assert!(snap.waiting[0]
        .why
        .as_deref()
        .unwrap()
        .contains("waiting for LeaderWorkerSet ml/infer"));
    index.apply(&lws(4, 2)).unwrap();
    let writes = index.derived_podgroups(&opts);
    let names: Vec<_> = writes
        .iter()
        .map(|w| w.podgroup().metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["lws-infer-0", "lws-infer-1"]);
    for w in writes {
        let mut pg = w.podgroup().clone();
        pg.metadata.uid = Some(format!("u-{}", pg.metadata.name.as_deref().unwrap()));
        index.apply(&pg).unwrap();
    }
    let snap = index.snapshot(&opts);
    assert_eq!(snap.jobs.len(), 2);
    assert!(snap
        .jobs
        .iter()
        .all(|j| j.tasks.len() == 4 && j.min_member == 4));

    // A worker that names a PodGroup of its own: its group keeps it, the LWS group waits.
    let mut own = lws_pod(1, 3);
    own.metadata.annotations = Some(
        [(
            "scheduling.k8s.io/group-name".to_string(),
            "mine".to_string(),
        )]
        .into(),
    );
    index.apply(&own).unwrap();
    let snap = index.snapshot(&opts);
    let waiting: Vec<_> = snap
        .waiting
        .iter()
        .filter(|w| &*w.group == "ml/lws-infer-1")
        .collect();
    assert_eq!(waiting.len(), 3);
    let why = waiting[0].why.as_deref().unwrap();
    assert!(
        why.contains("never in two gangs") && why.contains("infer-1-3"),
        "{why}"
    );
}

/// Deployments are kept only when opted in; the pods of the others are scheduled alone,
/// never held waiting for an object that is not kept.
#[test]
fn deployments_are_grouped_only_when_opted_in() {
    let opts = SnapshotOptions {
        scheduler_names: names(),
        ..SnapshotOptions::default()
    };
    let deploy = |name: &str, annotations: Value| {
        workload(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "ml", "name": name, "uid": format!("u-{name}"),
                "annotations": annotations},
            "spec": {"replicas": 2, "template": template(1)}}))
    };
    let rs_pod = |deploy: &str, i: u32| {
        pod(
            &format!("{deploy}-7f9c-{i}"),
            json!({LABEL_POD_TEMPLATE_HASH: "7f9c"}),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{deploy}-7f9c"),
                "uid": format!("u-rs-{deploy}"), "controller": true}),
        )
    };
    let mut index = ClusterIndex::new();
    index.reset_workloads(
        WorkloadKind::Deployment,
        [
            &deploy("web", json!({})),
            &deploy("ring", json!({ANNOTATION_AUTO_GROUP: "true"})),
        ],
    );
    assert!(index
        .workload(WorkloadKind::Deployment, "ml", "web")
        .is_none());
    for d in ["web", "ring"] {
        for i in 0..2 {
            index.apply(&rs_pod(d, i)).unwrap();
        }
    }
    let writes = index.derived_podgroups(&opts);
    assert_eq!(writes.len(), 1);
    let pg = writes[0].podgroup().clone();
    assert_eq!(pg.metadata.name.as_deref(), Some("deployment-ring"));
    assert_eq!(pg.spec.min_member, Some(2));
    let snap = index.snapshot(&opts);
    assert_eq!(snap.jobs.len(), 2, "web's 2 pods alone");
    assert_eq!(
        snap.waiting.len(),
        2,
        "ring's 2 pods wait for their PodGroup"
    );
    assert!(snap
        .waiting
        .iter()
        .all(|w| &*w.group == "ml/deployment-ring"));
}

/// Carries out the writes as the runtime does (creates get a uid) and returns them as
/// `C name`, `U name`, `D name`.
fn settle(index: &mut ClusterIndex, opts: &SnapshotOptions) -> Vec<String> {
    let mut done = Vec::new();
    for w in index.derived_podgroups(opts) {
        let name = w.podgroup().metadata.name.clone().unwrap();
        let ns = w.podgroup().metadata.namespace.clone().unwrap();
        match &w {
            DerivedWrite::Create(pg) => {
                let mut pg = pg.clone();
                pg.metadata.uid = Some(format!("u-{name}"));
                index.apply(&pg).unwrap();
                done.push(format!("C {name}"));
            }
            DerivedWrite::Update { .. } => panic!("no update expected: {w:?}"),
            DerivedWrite::Delete(pg) => {
                assert_eq!(pg.metadata.uid, Some(format!("u-{name}")));
                index.delete::<PodGroup>((&ns, &name));
                done.push(format!("D {name}"));
            }
        }
    }
    done
}

/// A PodGroup Caldera derived that its workload no longer derives is deleted: an LWS
/// scaled down, a JobSet regrouped, a Deployment no longer opted in. Never one Caldera did
/// not derive, one a pod names, or a finished Job's.
#[test]
fn podgroups_no_longer_derived_are_deleted() {
    let opts = SnapshotOptions {
        scheduler_names: names(),
        ..SnapshotOptions::default()
    };
    let mut index = ClusterIndex::new();
    index.reset_workloads(WorkloadKind::LeaderWorkerSet, [&lws(2, 4)]);
    assert_eq!(
        settle(&mut index, &opts),
        [
            "C lws-infer-0",
            "C lws-infer-1",
            "C lws-infer-2",
            "C lws-infer-3"
        ]
    );
    // A hand-written PodGroup the LWS owns, not derived: never deleted.
    let mut own = gang(&lws(2, 8), Some("5"));
    own.metadata.annotations = None;
    own.metadata.uid = Some("u-own".into());
    index.apply(&own).unwrap();
    index.apply(&lws(2, 2)).unwrap();
    assert_eq!(
        settle(&mut index, &opts),
        ["D lws-infer-2", "D lws-infer-3"]
    );
    assert!(settle(&mut index, &opts).is_empty());
    assert!(index
        .snapshot(&opts)
        .jobs
        .iter()
        .any(|j| &*j.id == "ml/lws-infer-5"));
    // Scaled down while a pod names the group: it stays.
    index.apply(&lws(2, 1)).unwrap();
    let mut naming = lws_pod(1, 0);
    naming.metadata.annotations = Some(
        [(
            "scheduling.k8s.io/group-name".to_string(),
            "lws-infer-1".to_string(),
        )]
        .into(),
    );
    index.apply(&naming).unwrap();
    assert!(settle(&mut index, &opts).is_empty());

    // A JobSet regrouped both ways.
    let per_job = json!({ANNOTATION_GANG_PER_REPLICATED_JOB: "true"});
    index.reset_workloads(WorkloadKind::JobSet, [&jobset(per_job)]);
    assert_eq!(
        settle(&mut index, &opts),
        ["C jobset-train-driver", "C jobset-train-workers"]
    );
    index.apply(&jobset(json!({}))).unwrap();
    assert_eq!(
        settle(&mut index, &opts),
        [
            "C jobset-train",
            "D jobset-train-driver",
            "D jobset-train-workers"
        ]
    );
    index
        .apply(&jobset(json!({ANNOTATION_GANG_PER_REPLICATED_JOB: "true"})))
        .unwrap();
    assert_eq!(
        settle(&mut index, &opts),
        [
            "D jobset-train",
            "C jobset-train-driver",
            "C jobset-train-workers"
        ]
    );

    // A Deployment no longer opted in (then not kept here).
    let ring = |annotations: Value| {
        workload(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"namespace": "ml", "name": "ring", "uid": "u-ring",
                "annotations": annotations},
            "spec": {"replicas": 2, "template": template(1)}}))
    };
    index.reset_workloads(
        WorkloadKind::Deployment,
        [&ring(json!({ANNOTATION_AUTO_GROUP: "true"}))],
    );
    assert_eq!(settle(&mut index, &opts), ["C deployment-ring"]);
    index.apply(&ring(json!({}))).unwrap();
    assert_eq!(settle(&mut index, &opts), ["D deployment-ring"]);
}

/// The training-operator with its Volcano integration writes its own group on the pods it
/// creates (not on the templates): once a pod names one, no `pytorchjob-` PodGroup is
/// derived beside the operator's, one derived before is deleted, and no pod waits on a
/// clash.
#[test]
fn no_gang_is_derived_for_a_workload_its_operator_groups() {
    let opts = SnapshotOptions {
        scheduler_names: names(),
        ..SnapshotOptions::default()
    };
    let torch = workload(
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"namespace": "ml", "name": "pt", "uid": "u-pt"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template(1)},
            "Worker": {"replicas": 1, "template": template(1)}}}}),
    );
    let owner = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pt",
        "uid": "u-pt", "controller": true});
    let mut index = ClusterIndex::new();
    index.reset_workloads(WorkloadKind::PyTorchJob, [&torch]);
    // Before the operator's pods exist the gang is derived (no pod says otherwise).
    assert_eq!(settle(&mut index, &opts), ["C pytorchjob-pt"]);
    for i in 0..2 {
        let mut p = pod(&format!("pt-{i}"), json!({}), owner.clone());
        p.metadata.annotations =
            Some([("scheduling.k8s.io/group-name".to_string(), "pt".to_string())].into());
        index.apply(&p).unwrap();
    }
    assert_eq!(settle(&mut index, &opts), ["D pytorchjob-pt"]);
    assert!(settle(&mut index, &opts).is_empty());
    let snap = index.snapshot(&opts);
    assert!(
        snap.waiting.iter().all(|w| w.why.is_none()),
        "{:?}",
        snap.waiting
    );
    assert!(snap.jobs.iter().all(|j| &*j.id != "ml/pytorchjob-pt"));
}

#[test]
fn jobset_and_deployment_pods_are_candidates() {
    let job_owner = Owner {
        api_version: "batch/v1".into(),
        kind: "Job".into(),
        name: "train-workers-0".into(),
        uid: "u-j".into(),
    };
    let labels = BTreeMap::from([
        (LABEL_JOBSET_NAME.to_string(), "train".to_string()),
        (
            LABEL_JOBSET_REPLICATED_JOB.to_string(),
            "workers".to_string(),
        ),
    ]);
    let c = pod_candidate(&labels, Some(&job_owner)).unwrap();
    assert_eq!(
        (c.kind, &*c.name, c.part.as_deref()),
        (WorkloadKind::JobSet, "train", Some("workers"))
    );
    assert_eq!(
        pod_candidate(&BTreeMap::new(), Some(&job_owner)),
        None,
        "a plain Job's pod"
    );
    let rs = Owner {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web-5d4f8c".into(),
        uid: "u-rs".into(),
    };
    let hash = BTreeMap::from([(LABEL_POD_TEMPLATE_HASH.to_string(), "5d4f8c".to_string())]);
    let c = pod_candidate(&hash, Some(&rs)).unwrap();
    assert_eq!((c.kind, &*c.name), (WorkloadKind::Deployment, "web"));
}

fn invalid(w: &Workload, part: Option<&str>) -> String {
    match workload_gang(w, w.workload_kind().unwrap(), part, &names()) {
        JobGang::Invalid(m) => m,
        other => panic!("{other:?}"),
    }
}

#[test]
fn huge_replicas_are_refused_or_multiplied_never_enumerated() {
    // An LWS with i32::MAX groups: no PodGroup per group is enumerated, and its pods are
    // told which field and limit refuse it.
    let l = lws(2, i32::MAX as i64);
    let m = invalid(&l, Some("0"));
    assert!(
        m.contains("spec.replicas 2147483647") && m.contains(&MAX_LWS_GROUPS.to_string()),
        "{m}"
    );
    assert!(gang_parts(&l, WorkloadKind::LeaderWorkerSet).is_empty());
    assert_eq!(
        gang_parts(&lws(2, MAX_LWS_GROUPS), WorkloadKind::LeaderWorkerSet).len(),
        MAX_LWS_GROUPS as usize
    );
    // replicas x parallelism overflowing i64 is refused, not a panic or a wrap.
    let js = |replicas: i64, parallelism: i64| {
        workload(
            json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"namespace": "ml", "name": "big", "uid": "u-big"},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas,
                "template": {"spec": {"parallelism": parallelism, "template": template(1)}}}]}}),
        )
    };
    let m = invalid(&js(i64::MAX, i64::MAX), None);
    assert!(
        m.contains("replicatedJobs[w]") && m.contains(&MAX_GANG_MEMBERS.to_string()),
        "{m}"
    );
    // Within the limit minResources is request x count, every member counted (the old
    // loop stopped at 100000 per role).
    let pg = gang(&js(500, 1000), None);
    assert_eq!(pg.spec.min_member, Some(500_000));
    assert_eq!(
        pg.spec.min_resources.as_ref().unwrap()["nvidia.com/gpu"].0,
        "500000"
    );
}

#[test]
fn staged_startup_is_refused_for_one_gang() {
    let mut l = lws(4, 1);
    l.spec["startupPolicy"] = json!("LeaderReady");
    let m = invalid(&l, Some("0"));
    assert!(m.contains("spec.startupPolicy: LeaderReady"), "{m}");
    l.spec["startupPolicy"] = json!("LeaderCreated");
    assert_eq!(gang(&l, Some("0")).spec.min_member, Some(4));

    let mut in_order = jobset(json!({}));
    in_order.spec["startupPolicy"] = json!({"startupPolicyOrder": "InOrder"});
    let m = invalid(&in_order, None);
    assert!(m.contains("startupPolicyOrder: InOrder"), "{m}");
    let mut depends = jobset(json!({}));
    depends.spec["replicatedJobs"][1]["dependsOn"] = json!([{"name": "driver", "status": "Ready"}]);
    let m = invalid(&depends, None);
    assert!(m.contains("replicatedJobs[workers].dependsOn"), "{m}");
    // A gang per replicated job is created at once: each stage is its own gang.
    depends.metadata.annotations = Some(BTreeMap::from([(
        ANNOTATION_GANG_PER_REPLICATED_JOB.to_string(),
        "true".to_string(),
    )]));
    assert_eq!(gang(&depends, Some("workers")).spec.min_member, Some(4));
    in_order.metadata.annotations = depends.metadata.annotations.clone();
    assert_eq!(gang(&in_order, Some("driver")).spec.min_member, Some(1));

    let mpi = |policy: &str| {
        workload(
            json!({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"namespace": "ml", "name": "m", "uid": "u-m"},
            "spec": {"launcherCreationPolicy": policy, "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template(0)},
                "Worker": {"replicas": 2, "template": template(1)}}}}),
        )
    };
    let m = invalid(&mpi("WaitForWorkersReady"), None);
    assert!(
        m.contains("spec.launcherCreationPolicy: WaitForWorkersReady"),
        "{m}"
    );
    assert_eq!(gang(&mpi("AtStartup"), None).spec.min_member, Some(3));
}

#[test]
fn min_member_override_shrinks_min_resources_in_role_order() {
    let torch = |annotations: Value| {
        workload(
            json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"namespace": "ml", "name": "pt", "uid": "u-pt", "annotations": annotations},
            "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template(2)},
                "Worker": {"replicas": 3, "template": template(1)}}}}),
        )
    };
    let gpus = |pg: PodGroup| pg.spec.min_resources.unwrap()["nvidia.com/gpu"].0.clone();
    assert_eq!(gpus(gang(&torch(json!({})), None)), "5", "2 + 3 x 1");
    // The first 2 members: the master (2) and one worker (1).
    let pg = gang(&torch(json!({ANNOTATION_MIN_MEMBER: "2"})), None);
    assert_eq!(pg.spec.min_member, Some(2));
    assert_eq!(gpus(pg), "3");
    // More than the members: every member, no more.
    assert_eq!(
        gpus(gang(&torch(json!({ANNOTATION_MIN_MEMBER: "9"})), None)),
        "5"
    );
}

#[test]
fn kubeflow_scheduling_policy_is_read_below_calderas_annotations() {
    let torch = |annotations: Value, policy: Value| {
        workload(
            json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"namespace": "ml", "name": "pt", "uid": "u-pt", "annotations": annotations},
            "spec": {"runPolicy": {"schedulingPolicy": policy},
                "pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": template(1)},
                "Worker": {"replicas": 3, "template": template(1)}}}}),
        )
    };
    let policy = json!({"minAvailable": 2, "queue": "team-a", "priorityClass": "high",
        "scheduleTimeoutSeconds": 30, "minResources": {"nvidia.com/gpu": "7"}});
    let pg = gang(&torch(json!({}), policy.clone()), None);
    assert_eq!(
        (
            pg.spec.min_member,
            pg.spec.queue.as_deref(),
            pg.spec.priority_class_name.as_deref(),
            pg.spec.schedule_timeout_seconds
        ),
        (Some(2), Some("team-a"), Some("high"), Some(30))
    );
    assert_eq!(pg.spec.min_resources.unwrap()["nvidia.com/gpu"].0, "7");
    // Caldera's annotations win.
    let pg = gang(
        &torch(
            json!({ANNOTATION_MIN_MEMBER: "3", ANNOTATION_SCHEDULE_TIMEOUT: "90",
                ANNOTATION_QUEUE_NAME: "mine"}),
            policy,
        ),
        None,
    );
    assert_eq!(
        (
            pg.spec.min_member,
            pg.spec.queue.as_deref(),
            pg.spec.schedule_timeout_seconds
        ),
        (Some(3), Some("mine"), Some(90))
    );
    // minAvailable alone shrinks minResources to the first members.
    let pg = gang(&torch(json!({}), json!({"minAvailable": 2})), None);
    assert_eq!(pg.spec.min_resources.unwrap()["nvidia.com/gpu"].0, "2");
    // What is not read, or malformed, is refused naming it.
    for (policy, field) in [
        (json!({"minAvailable": 0}), "schedulingPolicy.minAvailable"),
        (
            json!({"minAvailable": "two"}),
            "schedulingPolicy.minAvailable",
        ),
        (json!({"gangMode": "strict"}), "schedulingPolicy.gangMode"),
        (
            json!({"minResources": {"cpu": "lots"}}),
            "schedulingPolicy.minResources.cpu",
        ),
    ] {
        let m = invalid(&torch(json!({}), policy), None);
        assert!(m.contains(field), "{field}: {m}");
    }
}
