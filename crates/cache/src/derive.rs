//! Gangs derived from workloads beyond `batch/v1` Jobs (docs/workloads.md, "Derivation"):
//! JobSet, LeaderWorkerSet, Kubeflow PyTorchJob / MPIJob / TrainJob, Ray RayCluster / RayJob,
//! and — only when annotated — StatefulSet and Deployment.
//!
//! Their objects are read untyped ([`Workload`]: apiVersion, kind, metadata, spec as JSON), so
//! Caldera has no dependency on their CRDs: a kind that is not served is simply not watched,
//! and its pods are scheduled as before. Pure functions from objects to group facts, like
//! [`crate::workload`]: which gang a pod belongs to ([`pod_candidate`]), and the Volcano
//! PodGroup that gang should have ([`workload_gang`]).

use crate::error::ObjectKind;
use crate::fields::{group_name, spec_request, Ctx};
use crate::workload::{add_times, JobGang, Owner};
use caldera_api::workload::{
    ANNOTATION_AUTO_GROUP, ANNOTATION_MIN_MEMBER, ANNOTATION_SCHEDULE_TIMEOUT,
    LABEL_KUEUE_QUEUE_NAME,
};
use caldera_api::{PodGroup, PodGroupSpec, ANNOTATION_QUEUE_NAME};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// On a JobSet: `"true"` makes one gang per replicated job instead of one for the whole
/// JobSet.
pub const ANNOTATION_GANG_PER_REPLICATED_JOB: &str =
    "scheduling.caldera.sh/gang-per-replicated-job";
/// Pod label the JobSet controller sets: the JobSet's name.
pub const LABEL_JOBSET_NAME: &str = "jobset.sigs.k8s.io/jobset-name";
/// Pod label the JobSet controller sets: the replicated job's name.
pub const LABEL_JOBSET_REPLICATED_JOB: &str = "jobset.sigs.k8s.io/replicatedjob-name";
/// Pod label the LeaderWorkerSet controller sets: the LeaderWorkerSet's name.
pub const LABEL_LWS_NAME: &str = "leaderworkerset.sigs.k8s.io/name";
/// Pod label the LeaderWorkerSet controller (and its pod webhook, for leaders) sets: the
/// group's index.
pub const LABEL_LWS_GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";
/// Pod label the LeaderWorkerSet controller sets: the pod's index in its group (0 = leader).
pub const LABEL_LWS_WORKER_INDEX: &str = "leaderworkerset.sigs.k8s.io/worker-index";
/// Pod label the Deployment controller sets, also the suffix of the ReplicaSet's name.
pub const LABEL_POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// The kinds gangs are derived from here (a `batch/v1` Job is [`crate::workload`]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadKind {
    /// `jobset.x-k8s.io` JobSet.
    JobSet,
    /// `leaderworkerset.x-k8s.io` LeaderWorkerSet.
    LeaderWorkerSet,
    /// `kubeflow.org` PyTorchJob.
    PyTorchJob,
    /// `kubeflow.org` MPIJob.
    MpiJob,
    /// `trainer.kubeflow.org` TrainJob (top owner of a JobSet).
    TrainJob,
    /// `ray.io` RayCluster.
    RayCluster,
    /// `ray.io` RayJob (top owner of a RayCluster).
    RayJob,
    /// `apps/v1` StatefulSet (only when annotated).
    StatefulSet,
    /// `apps/v1` Deployment (only when annotated).
    Deployment,
}

impl WorkloadKind {
    /// Every kind, in order.
    pub const ALL: [WorkloadKind; 9] = [
        WorkloadKind::JobSet,
        WorkloadKind::LeaderWorkerSet,
        WorkloadKind::PyTorchJob,
        WorkloadKind::MpiJob,
        WorkloadKind::TrainJob,
        WorkloadKind::RayCluster,
        WorkloadKind::RayJob,
        WorkloadKind::StatefulSet,
        WorkloadKind::Deployment,
    ];

    /// The kinds whose objects are read: every kind but the top-owner-only ones (a TrainJob's
    /// or RayJob's gang is its JobSet's or RayCluster's, owned by it).
    pub const READ: [WorkloadKind; 7] = [
        WorkloadKind::JobSet,
        WorkloadKind::LeaderWorkerSet,
        WorkloadKind::PyTorchJob,
        WorkloadKind::MpiJob,
        WorkloadKind::RayCluster,
        WorkloadKind::StatefulSet,
        WorkloadKind::Deployment,
    ];

    /// `(API group, version read, kind, plural resource)`.
    pub fn gvk(self) -> (&'static str, &'static str, &'static str, &'static str) {
        match self {
            WorkloadKind::JobSet => ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"),
            WorkloadKind::LeaderWorkerSet => (
                "leaderworkerset.x-k8s.io",
                "v1",
                "LeaderWorkerSet",
                "leaderworkersets",
            ),
            WorkloadKind::PyTorchJob => ("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
            WorkloadKind::MpiJob => ("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
            WorkloadKind::TrainJob => ("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"),
            WorkloadKind::RayCluster => ("ray.io", "v1", "RayCluster", "rayclusters"),
            WorkloadKind::RayJob => ("ray.io", "v1", "RayJob", "rayjobs"),
            WorkloadKind::StatefulSet => ("apps", "v1", "StatefulSet", "statefulsets"),
            WorkloadKind::Deployment => ("apps", "v1", "Deployment", "deployments"),
        }
    }

    /// Its entry in the list of what `caldera run` watches ([`caldera_api::calls`]).
    pub fn watch(self) -> &'static caldera_api::calls::Watch {
        use caldera_api::calls;
        match self {
            WorkloadKind::JobSet => &calls::JOBSETS,
            WorkloadKind::LeaderWorkerSet => &calls::LEADER_WORKER_SETS,
            WorkloadKind::PyTorchJob => &calls::PYTORCH_JOBS,
            WorkloadKind::MpiJob => &calls::MPI_JOBS,
            WorkloadKind::RayCluster => &calls::RAY_CLUSTERS,
            WorkloadKind::StatefulSet => &calls::STATEFUL_SETS,
            WorkloadKind::Deployment => &calls::DEPLOYMENTS,
            // Top owners only: never watched; their gangs are their JobSet's or RayCluster's.
            WorkloadKind::TrainJob => &calls::JOBSETS,
            WorkloadKind::RayJob => &calls::RAY_CLUSTERS,
        }
    }

    /// `group/version` of the version read.
    pub fn api_version(self) -> String {
        let (g, v, _, _) = self.gvk();
        format!("{g}/{v}")
    }

    /// The kind's name (`JobSet`).
    pub fn kind(self) -> &'static str {
        self.gvk().2
    }

    /// The kind of an owner reference or object: matched by API group and kind, any version.
    pub fn of(api_version: &str, kind: &str) -> Option<WorkloadKind> {
        let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.gvk().0 == group && k.gvk().2 == kind)
    }

    /// Prefix of derived PodGroup names (`jobset-`).
    fn prefix(self) -> &'static str {
        match self {
            WorkloadKind::JobSet => "jobset-",
            WorkloadKind::LeaderWorkerSet => "lws-",
            WorkloadKind::PyTorchJob => "pytorchjob-",
            WorkloadKind::MpiJob => "mpijob-",
            WorkloadKind::TrainJob => "trainjob-",
            WorkloadKind::RayCluster => "raycluster-",
            WorkloadKind::RayJob => "rayjob-",
            WorkloadKind::StatefulSet => "statefulset-",
            WorkloadKind::Deployment => "deployment-",
        }
    }

    /// How `kubectl` names the resource (`jobset.jobset.x-k8s.io`), for
    /// [`caldera_api::workload::ANNOTATION_DERIVED_FROM`].
    fn kubectl(self) -> String {
        let (g, _, _, plural) = self.gvk();
        format!("{}.{g}", plural.trim_end_matches('s'))
    }

    /// Whether gangs are derived only when the workload asks (`auto-group: "true"`).
    pub fn opt_in(self) -> bool {
        matches!(self, WorkloadKind::StatefulSet | WorkloadKind::Deployment)
    }

    /// Whether the kind's operator can group its pods itself: the training-operator, the
    /// mpi-operator and KubeRay, with their Volcano integration (`gangSchedulerName: volcano`,
    /// `batchScheduler` `volcano`), make their own PodGroup and write
    /// `scheduling.k8s.io/group-name` on the pods they create, not on the templates. Once a pod
    /// of such a workload names a group, no gang is derived for it (the operator's stands).
    pub fn operator_groups_pods(self) -> bool {
        matches!(
            self,
            WorkloadKind::PyTorchJob | WorkloadKind::MpiJob | WorkloadKind::RayCluster
        )
    }
}

/// An object of a [`WorkloadKind`], read untyped (no dependency on its CRD).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// `apiVersion`.
    #[serde(rename = "apiVersion", default)]
    pub api_version: String,
    /// `kind`.
    #[serde(default)]
    pub kind: String,
    /// `metadata`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec`, as JSON.
    #[serde(default)]
    pub spec: Value,
}

impl Workload {
    /// Its kind, when it is one gangs are derived from.
    pub fn workload_kind(&self) -> Option<WorkloadKind> {
        WorkloadKind::of(&self.api_version, &self.kind)
    }
}

/// Which derived gang a pod belongs to, read from its labels and owner (no object looked up).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Candidate {
    /// The kind of the workload the gang is derived from.
    pub kind: WorkloadKind,
    /// Its name.
    pub name: Arc<str>,
    /// The part of it that is one gang: a LeaderWorkerSet's group index, a JobSet's
    /// replicated job (used only when the JobSet is annotated for a gang per replicated job).
    pub part: Option<Arc<str>>,
    /// The uid the workload must have (from the pod's owner reference), when known.
    pub uid: Option<Arc<str>>,
}

fn label<'a>(labels: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    labels.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The derived gang a pod belongs to by its labels and controller (`owner`), when it belongs
/// to one of the kinds here:
/// - a LeaderWorkerSet's pod (labels `leaderworkerset.sigs.k8s.io/name` and `group-index`;
///   leaders are owned by the LWS's StatefulSet, workers by their group's StatefulSet);
/// - a JobSet's pod (owned by a `batch/v1` Job, labels `jobset.sigs.k8s.io/jobset-name` and
///   `replicatedjob-name`);
/// - a pod owned by a PyTorchJob, an MPIJob, a RayCluster or a StatefulSet;
/// - a pod owned by a ReplicaSet `<deployment>-<pod-template-hash>` (a Deployment's).
///
/// A pod of a plain Job is not a candidate here ([`crate::workload::job_gang`]); neither is
/// an MPIJob's launcher (owned by a Job the MPIJob owns): the index follows that Job's owner.
pub fn pod_candidate(
    labels: &BTreeMap<String, String>,
    owner: Option<&Owner>,
) -> Option<Candidate> {
    if let Some(name) = label(labels, LABEL_LWS_NAME) {
        return Some(Candidate {
            kind: WorkloadKind::LeaderWorkerSet,
            name: name.into(),
            part: Some(label(labels, LABEL_LWS_GROUP_INDEX).unwrap_or("").into()),
            uid: None,
        });
    }
    let owner = owner?;
    if owner.is_job() {
        let name = label(labels, LABEL_JOBSET_NAME)?;
        return Some(Candidate {
            kind: WorkloadKind::JobSet,
            name: name.into(),
            part: label(labels, LABEL_JOBSET_REPLICATED_JOB).map(Arc::from),
            uid: None,
        });
    }
    if &*owner.kind == "ReplicaSet" && owner.api_version.starts_with("apps/") {
        let hash = label(labels, LABEL_POD_TEMPLATE_HASH)?;
        let name = owner.name.strip_suffix(hash)?.strip_suffix('-')?;
        return Some(Candidate {
            kind: WorkloadKind::Deployment,
            name: name.into(),
            part: None,
            uid: None,
        });
    }
    let kind = WorkloadKind::of(&owner.api_version, &owner.kind)?;
    matches!(
        kind,
        WorkloadKind::PyTorchJob
            | WorkloadKind::MpiJob
            | WorkloadKind::RayCluster
            | WorkloadKind::StatefulSet
    )
    .then(|| Candidate {
        kind,
        name: owner.name.clone(),
        part: None,
        uid: Some(owner.uid.clone()),
    })
}

/// The names the PodGroup of a candidate's gang can have, without the workload at hand: a
/// JobSet's whole or per replicated job, a LeaderWorkerSet's group, else the workload's.
pub fn candidate_podgroup_names(c: &Candidate) -> Vec<String> {
    match (c.kind, c.part.as_deref()) {
        (WorkloadKind::JobSet, Some(p)) => vec![
            gang_podgroup_name(c.kind, &c.name, None),
            gang_podgroup_name(c.kind, &c.name, Some(p)),
        ],
        (WorkloadKind::LeaderWorkerSet, p) => {
            vec![gang_podgroup_name(c.kind, &c.name, Some(p.unwrap_or("")))]
        }
        _ => vec![gang_podgroup_name(c.kind, &c.name, None)],
    }
}

/// Whether a workload asks to be grouped (`scheduling.caldera.sh/auto-group: "true"`), which a
/// StatefulSet or Deployment must.
pub fn opted_in(w: &Workload) -> bool {
    annotation(&w.metadata, ANNOTATION_AUTO_GROUP) == Some("true")
}

/// Whether a JobSet asks for a gang per replicated job.
pub fn per_replicated_job(w: &Workload) -> bool {
    annotation(&w.metadata, ANNOTATION_GANG_PER_REPLICATED_JOB) == Some("true")
}

/// The name of the PodGroup derived for `part` of the workload `name` of `kind`:
/// `<prefix><name>[-<part>]` (`jobset-train`, `jobset-train-workers`, `lws-infer-0`).
pub fn gang_podgroup_name(kind: WorkloadKind, name: &str, part: Option<&str>) -> String {
    match part {
        Some(p) => format!("{}{name}-{p}", kind.prefix()),
        None => format!("{}{name}", kind.prefix()),
    }
}

/// The part of a workload a candidate pod's gang is: per group for a LeaderWorkerSet, per
/// replicated job for an annotated JobSet, the whole workload otherwise.
pub fn gang_part(w: &Workload, kind: WorkloadKind, candidate_part: Option<&str>) -> Option<String> {
    match kind {
        WorkloadKind::LeaderWorkerSet => Some(candidate_part.unwrap_or("").to_string()),
        WorkloadKind::JobSet if per_replicated_job(w) => {
            Some(candidate_part.unwrap_or("").to_string())
        }
        _ => None,
    }
}

/// The most groups a LeaderWorkerSet may have for Caldera to derive their gangs: each group is
/// a PodGroup derived before every session, so `spec.replicas` is user input that must not
/// size that work unbounded. Above it, the groups' pods wait with a message naming the field
/// and this limit ([`workload_gang`]).
pub const MAX_LWS_GROUPS: i64 = 1_000;

/// The most members one derived gang may have (`minMember` is an `int32`); above it, its pods
/// wait with a message naming the field that counts them.
pub const MAX_GANG_MEMBERS: i64 = 1_000_000;

/// The parts of a workload that are gangs, each its own PodGroup: a LeaderWorkerSet's groups
/// `0..replicas` (none above [`MAX_LWS_GROUPS`]: its pods are refused), an annotated JobSet's
/// replicated jobs, else the whole workload (`None`).
pub fn gang_parts(w: &Workload, kind: WorkloadKind) -> Vec<Option<String>> {
    match kind {
        WorkloadKind::LeaderWorkerSet => {
            let replicas = int(&w.spec, "/replicas").unwrap_or(1).max(0);
            if replicas > MAX_LWS_GROUPS {
                return Vec::new();
            }
            (0..replicas).map(|i| Some(i.to_string())).collect()
        }
        WorkloadKind::JobSet if per_replicated_job(w) => w
            .spec
            .pointer("/replicatedJobs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| r.get("name").and_then(Value::as_str))
            .map(|n| Some(n.to_string()))
            .collect(),
        _ => vec![None],
    }
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(|v| v.trim())
}

fn int(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_i64)
}

/// Why a workload whose pods start in stages cannot be one gang counting all of them: the
/// first stage's pods would wait for pods their controller creates only once the first ones
/// are Ready, forever. `None` when its gang (`part`) is created at once.
fn staged_startup(w: &Workload, kind: WorkloadKind, part: Option<&str>) -> Option<String> {
    let spec = &w.spec;
    let text = |p: &str| spec.pointer(p).and_then(Value::as_str).map(str::trim);
    match kind {
        WorkloadKind::LeaderWorkerSet => ["/startupPolicy", "/leaderWorkerTemplate/startupPolicy"]
            .into_iter()
            .find(|p| text(p) == Some("LeaderReady"))
            .map(|p| {
                format!(
                    "spec{}: LeaderReady creates a group's workers only once its leader is Ready, so a gang of the leader and its workers would never be whole (use LeaderCreated, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\")",
                    p.replace('/', ".")
                )
            }),
        WorkloadKind::JobSet if part.is_none() => {
            if text("/startupPolicy/startupPolicyOrder") == Some("InOrder") {
                return Some(format!(
                    "spec.startupPolicy.startupPolicyOrder: InOrder creates each replicated job only once the ones before it are Ready, so one gang of them all would never be whole (annotate {ANNOTATION_GANG_PER_REPLICATED_JOB}: \"true\" for a gang per replicated job, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\")"
                ));
            }
            spec.pointer("/replicatedJobs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|r| {
                    r.get("dependsOn")
                        .and_then(Value::as_array)
                        .is_some_and(|d| !d.is_empty())
                })
                .map(|r| {
                    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
                    format!(
                        "spec.replicatedJobs[{name}].dependsOn: its Jobs are created only once the ones it depends on are Ready or Complete, so one gang of them all would never be whole (annotate {ANNOTATION_GANG_PER_REPLICATED_JOB}: \"true\" for a gang per replicated job, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\")"
                    )
                })
        }
        WorkloadKind::MpiJob => (text("/launcherCreationPolicy") == Some("WaitForWorkersReady")).then(|| {
            format!(
                "spec.launcherCreationPolicy: WaitForWorkersReady creates the launcher only once the workers are Ready, so a gang of the launcher and the workers would never be whole (use AtStartup, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\")"
            )
        }),
        _ => None,
    }
}

/// A Kubeflow job's `spec.runPolicy.schedulingPolicy`, read as defaults below Caldera's own
/// annotations.
#[derive(Default)]
struct SchedulingPolicy {
    min_available: Option<i32>,
    queue: Option<String>,
    priority_class: Option<String>,
    timeout: Option<i32>,
    min_resources: Option<caldera_model::Resources>,
}

/// The `spec.runPolicy.schedulingPolicy` of a PyTorchJob or MPIJob; a field Caldera does not
/// read, or a value of the wrong type, is an error naming it.
fn scheduling_policy(w: &Workload, kind: WorkloadKind) -> Result<SchedulingPolicy, String> {
    let mut p = SchedulingPolicy::default();
    if !matches!(kind, WorkloadKind::PyTorchJob | WorkloadKind::MpiJob) {
        return Ok(p);
    }
    let Some(policy) = w.spec.pointer("/runPolicy/schedulingPolicy") else {
        return Ok(p);
    };
    const AT: &str = "spec.runPolicy.schedulingPolicy";
    let Some(fields) = policy.as_object() else {
        return Err(format!("{AT}: not an object"));
    };
    let positive = |key: &str, v: &Value| -> Result<i32, String> {
        v.as_i64()
            .filter(|n| *n > 0)
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("{AT}.{key}: {v} is not a positive int32"))
    };
    let text = |key: &str, v: &Value| -> Result<Option<String>, String> {
        v.as_str()
            .map(|t| Some(t.trim().to_string()).filter(|t| !t.is_empty()))
            .ok_or_else(|| format!("{AT}.{key}: {v} is not a string"))
    };
    for (key, v) in fields {
        if v.is_null() {
            continue;
        }
        match key.as_str() {
            "minAvailable" => p.min_available = Some(positive(key, v)?),
            "scheduleTimeoutSeconds" => p.timeout = Some(positive(key, v)?),
            "queue" => p.queue = text(key, v)?,
            "priorityClass" => p.priority_class = text(key, v)?,
            "minResources" => {
                let list: BTreeMap<String, String> = serde_json::from_value(v.clone())
                    .map_err(|e| format!("{AT}.minResources: {e}"))?;
                let r = caldera_model::Resources::parse_list(
                    list.iter().map(|(k, q)| (k.as_str(), q.as_str())),
                )
                .map_err(|(n, e)| format!("{AT}.minResources.{n}: {e}"))?;
                p.min_resources = Some(r);
            }
            _ => {
                return Err(format!(
                    "{AT}.{key}: not read by Caldera (it reads minAvailable, queue, priorityClass, minResources, scheduleTimeoutSeconds); remove it, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\""
                ))
            }
        }
    }
    Ok(p)
}

/// One kind of member of a gang: how many, and the pod template they are made from.
struct Role {
    /// Where it is in the spec, for messages (`replicatedJobs[workers]`).
    name: String,
    count: i64,
    template: Value,
}

/// A Job spec's members, as [`crate::workload::job_gang`] counts them: `parallelism`
/// (default 1), or `completions` when smaller, at least 1.
fn job_members(job_spec: &Value) -> i64 {
    let parallelism = int(job_spec, "/parallelism").unwrap_or(1);
    int(job_spec, "/completions")
        .map_or(parallelism, |c| c.min(parallelism))
        .max(1)
}

fn map_roles(spec: &Value, key: &str) -> Vec<Role> {
    spec.get(key)
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(role, r)| Role {
            name: format!("{key}.{role}"),
            count: int(r, "/replicas").unwrap_or(1),
            template: r.get("template").cloned().unwrap_or(Value::Null),
        })
        .collect()
}

/// The members of a gang of `kind` (its `part`, if any), per pod template.
fn roles(w: &Workload, kind: WorkloadKind, part: Option<&str>) -> Vec<Role> {
    let spec = &w.spec;
    match kind {
        WorkloadKind::JobSet => spec
            .pointer("/replicatedJobs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|r| part.is_none_or(|p| r.get("name").and_then(Value::as_str) == Some(p)))
            .map(|r| {
                let name = r.get("name").and_then(Value::as_str).unwrap_or("");
                let job_spec = r.pointer("/template/spec").cloned().unwrap_or(Value::Null);
                Role {
                    name: format!("replicatedJobs[{name}]"),
                    count: int(r, "/replicas")
                        .unwrap_or(1)
                        .max(0)
                        .saturating_mul(job_members(&job_spec)),
                    template: job_spec.get("template").cloned().unwrap_or(Value::Null),
                }
            })
            .collect(),
        WorkloadKind::LeaderWorkerSet => {
            let lwt = spec
                .get("leaderWorkerTemplate")
                .cloned()
                .unwrap_or(Value::Null);
            let size = int(&lwt, "/size").unwrap_or(1).max(1);
            let worker = lwt.get("workerTemplate").cloned().unwrap_or(Value::Null);
            let leader = lwt
                .get("leaderTemplate")
                .filter(|t| !t.is_null())
                .cloned()
                .unwrap_or_else(|| worker.clone());
            let mut r = vec![Role {
                name: "leaderTemplate".into(),
                count: 1,
                template: leader,
            }];
            if size > 1 {
                r.push(Role {
                    name: "workerTemplate".into(),
                    count: size - 1,
                    template: worker,
                });
            }
            r
        }
        WorkloadKind::PyTorchJob => map_roles(spec, "pytorchReplicaSpecs"),
        WorkloadKind::MpiJob => map_roles(spec, "mpiReplicaSpecs"),
        WorkloadKind::RayCluster => {
            let mut r = vec![Role {
                name: "headGroupSpec".into(),
                count: 1,
                template: spec
                    .pointer("/headGroupSpec/template")
                    .cloned()
                    .unwrap_or(Value::Null),
            }];
            for g in spec
                .get("workerGroupSpecs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let name = g.get("groupName").and_then(Value::as_str).unwrap_or("");
                r.push(Role {
                    name: format!("workerGroupSpecs[{name}]"),
                    count: int(g, "/minReplicas")
                        .unwrap_or(0)
                        .max(0)
                        .saturating_mul(int(g, "/numOfHosts").unwrap_or(1).max(1)),
                    template: g.get("template").cloned().unwrap_or(Value::Null),
                });
            }
            r
        }
        WorkloadKind::StatefulSet | WorkloadKind::Deployment => vec![Role {
            name: "template".into(),
            count: int(spec, "/replicas").unwrap_or(1),
            template: spec.get("template").cloned().unwrap_or(Value::Null),
        }],
        WorkloadKind::TrainJob | WorkloadKind::RayJob => Vec::new(),
    }
}

/// The gang of `part` of the workload `w` (docs/workloads.md, "Derivation"):
/// - members: JobSet, every replicated job's `replicas` × its Job's members (`parallelism`,
///   or `completions` when smaller), or one replicated job's when annotated
///   [`ANNOTATION_GANG_PER_REPLICATED_JOB`]; LeaderWorkerSet, one group: the leader and
///   `size - 1` workers; PyTorchJob / MPIJob, every replica spec's `replicas`; RayCluster, the
///   head and each worker group's `minReplicas` × `numOfHosts`; StatefulSet / Deployment,
///   `replicas`, only with `scheduling.caldera.sh/auto-group: "true"`;
/// - `minMember` the members, or annotation `scheduling.caldera.sh/min-member`, else a
///   PyTorchJob's / MPIJob's `spec.runPolicy.schedulingPolicy.minAvailable` (its `queue`,
///   `priorityClass`, `scheduleTimeoutSeconds` and `minResources` are read likewise below
///   Caldera's annotations; any other field in it is refused);
///   `minResources` the requests of the first `minMember` members in role order (request ×
///   count per role, no loop per member); queue, priority class and timeout as for
///   a Job ([`crate::workload::job_gang`]);
/// - owned by the top owner: a JobSet owned by a TrainJob, or a RayCluster owned by a RayJob,
///   gives its PodGroup to that owner (read from its owner reference), so it goes with it.
///
/// Not grouped: no template names one of Caldera's schedulers, every template names a PodGroup
/// of its own (explicit groups keep precedence), opted out (`auto-group: "false"` on the
/// workload or a template), not opted in (StatefulSet, Deployment), or no members. Refused
/// (its pods wait with the message): templates that disagree — some name Caldera's scheduler
/// and some not, or some name a PodGroup of their own and some not (a pod is never in two
/// gangs; Caldera does not guess) — a malformed override, a template that does not convert,
/// more than [`MAX_LWS_GROUPS`] groups or [`MAX_GANG_MEMBERS`] members, or a staged start-up
/// (LWS `startupPolicy: LeaderReady`, a whole JobSet's `startupPolicyOrder: InOrder` or
/// `dependsOn`, MPIJob `launcherCreationPolicy: WaitForWorkersReady`) whose later pods are
/// created only once the first are Ready, so the gang would never be whole.
pub fn workload_gang(
    w: &Workload,
    kind: WorkloadKind,
    part: Option<&str>,
    scheduler_names: &[String],
) -> JobGang {
    let meta = &w.metadata;
    let Some(name) = meta.name.as_deref().filter(|n| !n.is_empty()) else {
        return JobGang::NotGrouped("the workload has no name");
    };
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    let what = format!("{} {namespace}/{name}", kind.kind());
    // Cheap checks first: this runs for every known workload before each session.
    if kind.opt_in() && !opted_in(w) {
        return JobGang::NotGrouped(
            "a StatefulSet or Deployment is grouped only with scheduling.caldera.sh/auto-group: \"true\"",
        );
    }
    if annotation(meta, ANNOTATION_AUTO_GROUP) == Some("false") {
        return JobGang::NotGrouped("opted out (scheduling.caldera.sh/auto-group: \"false\")");
    }
    let roles = roles(w, kind, part);
    let mut templates = Vec::with_capacity(roles.len());
    for r in &roles {
        match serde_json::from_value::<PodTemplateSpec>(r.template.clone()) {
            Ok(t) => templates.push(t),
            Err(e) => return JobGang::Invalid(format!("{what}: {}: {e}", r.name)),
        }
    }
    let ours = |t: &PodTemplateSpec| {
        let s = t
            .spec
            .as_ref()
            .and_then(|s| s.scheduler_name.as_deref())
            .filter(|s| !s.is_empty())
            .unwrap_or(caldera_api::KUBE_SCHEDULER_NAME);
        scheduler_names.iter().any(|n| n == s)
    };
    let n_ours = templates.iter().filter(|t| ours(t)).count();
    if n_ours == 0 {
        return JobGang::NotGrouped("its pods name another scheduler");
    }
    if n_ours < templates.len() {
        return JobGang::Invalid(format!(
            "{what}: some of its pod templates name Caldera's scheduler and some do not; its gang would never be whole (set schedulerName on every template, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\")"
        ));
    }
    let tmeta = |t: &'_ PodTemplateSpec| -> ObjectMeta { t.metadata.clone().unwrap_or_default() };
    let metas: Vec<ObjectMeta> = templates.iter().map(tmeta).collect();
    let own: Vec<(&Role, &str)> = roles
        .iter()
        .zip(&metas)
        .filter_map(|(r, m)| group_name(m).map(|g| (r, g)))
        .collect();
    if !own.is_empty() {
        if own.len() == templates.len() {
            return JobGang::NotGrouped("its pods name a PodGroup of their own");
        }
        let (r, g) = own[0];
        return JobGang::Invalid(format!(
            "{what}: the pods of {} name PodGroup {g} of their own and the others none; a pod is never in two gangs and Caldera does not guess (name a PodGroup in every template, or in none)",
            r.name
        ));
    }
    if std::iter::once(meta)
        .chain(&metas)
        .any(|m| annotation(m, ANNOTATION_AUTO_GROUP) == Some("false"))
    {
        return JobGang::NotGrouped("opted out (scheduling.caldera.sh/auto-group: \"false\")");
    }
    if kind == WorkloadKind::LeaderWorkerSet {
        let replicas = int(&w.spec, "/replicas").unwrap_or(1);
        if replicas > MAX_LWS_GROUPS {
            return JobGang::Invalid(format!(
                "{what}: spec.replicas {replicas} is above the {MAX_LWS_GROUPS} groups Caldera derives gangs for (each group is a PodGroup); lower it, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\""
            ));
        }
    }
    let positive = |key: &str| -> std::result::Result<Option<i32>, String> {
        match annotation(meta, key) {
            None => Ok(None),
            Some(v) => match v.parse::<i32>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(format!(
                    "{what}: annotation {key}: {v:?} is not a positive integer"
                )),
            },
        }
    };
    let (min_override, timeout) = match (
        positive(ANNOTATION_MIN_MEMBER),
        positive(ANNOTATION_SCHEDULE_TIMEOUT),
    ) {
        (Ok(m), Ok(t)) => (m, t),
        (Err(e), _) | (_, Err(e)) => return JobGang::Invalid(e),
    };
    // Kubeflow's own gang fields, below Caldera's annotations.
    let policy = match scheduling_policy(w, kind) {
        Ok(p) => p,
        Err(e) => return JobGang::Invalid(format!("{what}: {e}")),
    };
    let min_override = min_override.or(policy.min_available);
    let timeout = timeout.or(policy.timeout);
    if let Some(why) = staged_startup(w, kind, part) {
        return JobGang::Invalid(format!("{what}: {why}"));
    }
    let members: i64 = roles
        .iter()
        .fold(0i64, |n, r| n.saturating_add(r.count.max(0)));
    if members > MAX_GANG_MEMBERS {
        let r = roles.iter().max_by_key(|r| r.count).map_or("", |r| &r.name);
        return JobGang::Invalid(format!(
            "{what}: {members} members (most from {r}) are above the {MAX_GANG_MEMBERS} one gang may have; lower the replicas, or opt out with {ANNOTATION_AUTO_GROUP}: \"false\""
        ));
    }
    if members == 0 && min_override.is_none() {
        return JobGang::NotGrouped("no members (replicas 0)");
    }
    let min_member = min_override.unwrap_or(members.clamp(1, i32::MAX as i64) as i32);
    // minResources: the first `min_member` members in role order (all of them unless an
    // override shrinks the gang), as for a Job.
    let mut left = i64::from(min_member);
    let mut min_resources = caldera_model::Resources::new();
    for ((r, t), m) in roles.iter().zip(&templates).zip(&metas) {
        let mut pod_meta = m.clone();
        pod_meta.name = Some(format!("{name} ({} pod template)", r.name));
        pod_meta.namespace = Some(namespace.to_string());
        let ctx = Ctx::new(ObjectKind::Pod, &pod_meta);
        let request = match spec_request(&ctx, t.spec.as_ref().unwrap_or(&Default::default())) {
            Ok(q) => q,
            Err(e) => return JobGang::Invalid(format!("{what}: {e}")),
        };
        let n = r.count.clamp(0, left);
        add_times(&mut min_resources, &request, n);
        left -= n;
    }
    if let Some(r) = policy.min_resources {
        min_resources = r;
    }
    let queue = annotation(meta, ANNOTATION_QUEUE_NAME)
        .or(policy.queue.as_deref())
        .or_else(|| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(LABEL_KUEUE_QUEUE_NAME))
                .map(|q| q.trim())
        })
        .or_else(|| {
            metas
                .iter()
                .find_map(|m| annotation(m, ANNOTATION_QUEUE_NAME))
        })
        .filter(|q| !q.is_empty())
        .map(String::from);
    let priority_class_name = policy.priority_class.clone().or_else(|| {
        templates
            .iter()
            .filter_map(|t| t.spec.as_ref()?.priority_class_name.clone())
            .find(|c| !c.is_empty())
    });
    // The top owner: a TrainJob's JobSet, a RayJob's RayCluster.
    let top = Owner::of(meta).filter(|o| {
        matches!(
            (kind, WorkloadKind::of(&o.api_version, &o.kind)),
            (WorkloadKind::JobSet, Some(WorkloadKind::TrainJob))
                | (WorkloadKind::RayCluster, Some(WorkloadKind::RayJob))
        )
    });
    let (owner_kind, owner_name, owner_ref) = match (top, &meta.uid) {
        (Some(o), _) => (
            WorkloadKind::of(&o.api_version, &o.kind).unwrap_or(kind),
            o.name.to_string(),
            Some(OwnerReference {
                api_version: o.api_version.to_string(),
                kind: o.kind.to_string(),
                name: o.name.to_string(),
                uid: o.uid.to_string(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }),
        ),
        (None, Some(uid)) => (
            kind,
            name.to_string(),
            Some(OwnerReference {
                api_version: if w.api_version.is_empty() {
                    kind.api_version()
                } else {
                    w.api_version.clone()
                },
                kind: kind.kind().to_string(),
                name: name.to_string(),
                uid: uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }),
        ),
        (None, None) => (kind, name.to_string(), None),
    };
    let derived_from = match part {
        Some(p) => format!("{}/{owner_name} ({p})", owner_kind.kubectl()),
        None => format!("{}/{owner_name}", owner_kind.kubectl()),
    };
    let pg = PodGroup {
        metadata: crate::workload::derived_meta(
            gang_podgroup_name(kind, name, part),
            namespace,
            derived_from,
            owner_ref.map(|o| vec![o]),
            meta,
        ),
        spec: PodGroupSpec {
            min_member: Some(min_member),
            queue,
            priority_class_name,
            min_resources: crate::workload::min_resources_spec(&min_resources),
            schedule_timeout_seconds: timeout,
            ..Default::default()
        },
        status: None,
    };
    JobGang::Gang(Box::new(pg))
}

/// The group a pod counts in, for reports and checks over stored objects: its own group
/// ([`group_name`]), else the PodGroup derived from its workload of a kind in
/// this module when that exists with an owner, else the PodGroup derived from its Job
/// when that exists and the Job owns it (`owner_of(name)` gives the uid of the controller of the PodGroup `name` in the pod's
/// namespace).
pub fn member_group(
    meta: &ObjectMeta,
    owner_of: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    if let Some(g) = group_name(meta) {
        return Some(g.to_string());
    }
    let labels = meta.labels.clone().unwrap_or_default();
    if let Some(c) = pod_candidate(&labels, Owner::of(meta).as_ref()) {
        // A derived gang of another kind: its PodGroup, once made (owned by the workload).
        return candidate_podgroup_names(&c)
            .into_iter()
            .find(|name| owner_of(name).is_some());
    }
    let owner = Owner::of(meta).filter(Owner::is_job)?;
    let name = crate::workload::job_podgroup_name(&owner.name);
    (owner_of(&name).as_deref() == Some(&*owner.uid)).then_some(name)
}

#[cfg(test)]
#[path = "derive_tests.rs"]
mod tests;
