//! Gangs derived from workloads (docs/workloads.md): which workload a pod of ours that names
//! no group belongs to, and the Volcano PodGroup Caldera makes for that workload, so a plain
//! `batch/v1` Job is scheduled all or nothing without a hand-written PodGroup.
//!
//! Pure functions from objects to group facts. The index keeps the Jobs and resolves pods
//! through [`job_gang`] when it builds a snapshot ([`crate::ClusterIndex::snapshot`]); the
//! PodGroups that should exist and do not are listed by
//! [`crate::ClusterIndex::derived_podgroups`] for the binder (live) or the simulator to create.
//! Once the PodGroup exists the gang is an ordinary PodGroup's job: one model for the session.
//!
//! Which workloads are grouped (today): a `batch/v1` Job whose pod template names one of
//! Caldera's schedulers and no group, that is not opted out and is not part of a larger
//! workload (a Job owned by anything but a CronJob — a JobSet's child Jobs — is left alone, so
//! no workload is ever half-grouped). Other owners' pods are scheduled as before.

use crate::error::ObjectKind;
use crate::fields::{group_name, spec_request, Ctx};
use caldera_api::workload::{
    ANNOTATION_AUTO_GROUP, ANNOTATION_DERIVED_FROM, ANNOTATION_MIN_MEMBER,
    ANNOTATION_SCHEDULE_TIMEOUT, ANNOTATION_WORKLOAD_CREATED, JOB_PODGROUP_PREFIX,
    LABEL_KUEUE_QUEUE_NAME, LABEL_MANAGED_BY, MANAGED_BY_CALDERA,
};
use caldera_api::{PodGroup, PodGroupSpec, ANNOTATION_QUEUE_NAME};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    ObjectMeta, OwnerReference, Time as KubeTime,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Where auto-grouping applies (config `autoGroup`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoGroup {
    /// `autoGroup.enabled` (default true).
    pub enabled: bool,
    /// `autoGroup.namespaces`: only these namespaces; `None` (the default) for all.
    pub namespaces: Option<BTreeSet<String>>,
}

impl Default for AutoGroup {
    fn default() -> Self {
        AutoGroup {
            enabled: true,
            namespaces: None,
        }
    }
}

impl AutoGroup {
    /// On (or not) in `namespaces`, every namespace when `None`.
    pub fn new(enabled: bool, namespaces: Option<&[String]>) -> Self {
        AutoGroup {
            enabled,
            namespaces: namespaces.map(|n| n.iter().cloned().collect()),
        }
    }

    /// Auto-grouping switched off everywhere.
    pub fn off() -> Self {
        AutoGroup {
            enabled: false,
            namespaces: None,
        }
    }

    /// Whether workloads in `namespace` are auto-grouped.
    pub fn covers(&self, namespace: &str) -> bool {
        self.enabled
            && self
                .namespaces
                .as_ref()
                .is_none_or(|n| n.contains(namespace))
    }
}

/// A pod's controller (`ownerReferences[]` with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    /// `apiVersion`.
    pub api_version: Arc<str>,
    /// `kind`.
    pub kind: Arc<str>,
    /// `name`.
    pub name: Arc<str>,
    /// `uid`.
    pub uid: Arc<str>,
}

impl Owner {
    /// The object's controller, if it has one.
    pub fn of(meta: &ObjectMeta) -> Option<Owner> {
        meta.owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| Owner {
                api_version: o.api_version.as_str().into(),
                kind: o.kind.as_str().into(),
                name: o.name.as_str().into(),
                uid: o.uid.as_str().into(),
            })
    }

    /// Whether this is a `batch/v1` Job.
    pub fn is_job(&self) -> bool {
        &*self.api_version == "batch/v1" && &*self.kind == "Job"
    }
}

/// The name of the PodGroup derived from the Job `job`: `job-<job>`. It does not depend on the
/// uid, so users (and scenarios) can name it; a PodGroup of that name that the Job does not
/// own is a clash, reported on the pods and never adopted.
pub fn job_podgroup_name(job: &str) -> String {
    format!("{JOB_PODGROUP_PREFIX}{job}")
}

/// The controller of a PodGroup Caldera derived (annotation
/// `scheduling.caldera.sh/derived-from` and label `app.kubernetes.io/managed-by: caldera`, as
/// [`job_gang`] and [`crate::derive::workload_gang`] write them); `None` for any other.
pub fn derived_owner(meta: &ObjectMeta) -> Option<Owner> {
    annotation(meta, ANNOTATION_DERIVED_FROM)?;
    (label(meta, LABEL_MANAGED_BY) == Some(MANAGED_BY_CALDERA)).then(|| Owner::of(meta))?
}

/// When the workload a PodGroup was derived from was created (annotation
/// `scheduling.caldera.sh/workload-created`, read only on a PodGroup [`derived_owner`]
/// recognises); `None` for any other PodGroup, or one derived before Caldera wrote it.
pub fn workload_created(meta: &ObjectMeta) -> Option<caldera_model::Time> {
    derived_owner(meta)?;
    let t = annotation(meta, ANNOTATION_WORKLOAD_CREATED)?;
    let t: KubeTime = serde_json::from_value(serde_json::Value::String(t.to_string())).ok()?;
    Some(crate::fields::time(&t))
}

/// A write that brings a derived PodGroup up to date ([`crate::ClusterIndex::derived_podgroups`]).
#[derive(Debug, Clone, PartialEq)]
pub enum DerivedWrite {
    /// Create this PodGroup (it is missing).
    Create(PodGroup),
    /// Set the derived fields of the existing PodGroup's spec to this one's (`minMember`,
    /// `minResources`, `queue`, `priorityClassName`, `scheduleTimeoutSeconds`).
    Update {
        /// The PodGroup as derived now.
        podgroup: PodGroup,
        /// The resource names the existing PodGroup's `minResources` has and the derived one
        /// has not (a request dropped from the template): `null` in the merge patch, since a
        /// merge patch merges maps and would keep them.
        removed_resources: Vec<String>,
    },
    /// Delete this PodGroup (name, namespace and uid set): Caldera derived it, its workload
    /// no longer derives it (an LWS scaled down, a JobSet's gangs regrouped, a Deployment no
    /// longer opted in) and no pod names it.
    Delete(PodGroup),
}

impl DerivedWrite {
    /// The PodGroup written.
    pub fn podgroup(&self) -> &PodGroup {
        match self {
            DerivedWrite::Create(pg)
            | DerivedWrite::Update { podgroup: pg, .. }
            | DerivedWrite::Delete(pg) => pg,
        }
    }

    /// The merge patch (RFC 7386) of an update: the derived fields, `null` where the
    /// derivation has none, and `null` for each resource of `minResources` it no longer has.
    pub fn spec_patch(&self) -> serde_json::Value {
        let spec = &self.podgroup().spec;
        let mut min_resources = serde_json::to_value(&spec.min_resources).unwrap_or_default();
        // With no minResources derived the whole map goes (`null`); else the removed names.
        if let (
            DerivedWrite::Update {
                removed_resources, ..
            },
            Some(map),
        ) = (self, min_resources.as_object_mut())
        {
            for r in removed_resources {
                map.insert(r.clone(), serde_json::Value::Null);
            }
        }
        serde_json::json!({"spec": {
            "minMember": spec.min_member,
            "minResources": min_resources,
            "queue": spec.queue,
            "priorityClassName": spec.priority_class_name,
            "scheduleTimeoutSeconds": spec.schedule_timeout_seconds,
        }})
    }

    /// `existing` after the update's merge patch, as the API server writes it (a create or a
    /// delete gives the PodGroup itself): for the simulator's store.
    pub fn applied_to(&self, existing: &PodGroup) -> PodGroup {
        if let DerivedWrite::Create(pg) | DerivedWrite::Delete(pg) = self {
            return pg.clone();
        }
        let Ok(mut v) = serde_json::to_value(existing) else {
            return existing.clone();
        };
        merge_patch(&mut v, &self.spec_patch());
        serde_json::from_value(v).unwrap_or_else(|_| existing.clone())
    }
}

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let serde_json::Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = serde_json::Value::Object(Default::default());
    }
    if let serde_json::Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge_patch(t.entry(k.clone()).or_insert(serde_json::Value::Null), v);
            }
        }
    }
}

/// What Caldera makes of a Job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobGang {
    /// Its pods are one gang: the PodGroup that should exist for it (no status).
    Gang(Box<PodGroup>),
    /// Not auto-grouped; its pods are scheduled as before. Says why (for `explain`).
    NotGrouped(&'static str),
    /// Refused: an override annotation is malformed, or its pod template does not convert.
    /// Its pods wait with this message until the Job is fixed.
    Invalid(String),
}

/// The metadata of a PodGroup Caldera derives from a workload: the annotation naming its source
/// and the label saying Caldera manages it (what [`derived_owner`] recognises), owned by
/// `owners`, and the workload's creation time (`workload`'s), which orders the gang
/// ([`workload_created`]).
pub(crate) fn derived_meta(
    name: String,
    namespace: &str,
    derived_from: String,
    owners: Option<Vec<OwnerReference>>,
    workload: &ObjectMeta,
) -> ObjectMeta {
    let mut annotations = BTreeMap::from([(ANNOTATION_DERIVED_FROM.to_string(), derived_from)]);
    if let Some(Ok(serde_json::Value::String(t))) = workload
        .creation_timestamp
        .as_ref()
        .map(serde_json::to_value)
    {
        annotations.insert(ANNOTATION_WORKLOAD_CREATED.to_string(), t);
    }
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_string()),
        annotations: Some(annotations),
        labels: Some(BTreeMap::from([(
            LABEL_MANAGED_BY.to_string(),
            MANAGED_BY_CALDERA.to_string(),
        )])),
        owner_references: owners,
        ..Default::default()
    }
}

/// A derived PodGroup's `spec.minResources` (absent when nothing is requested).
pub(crate) fn min_resources_spec(
    min_resources: &caldera_model::Resources,
) -> Option<BTreeMap<String, Quantity>> {
    (!min_resources.is_empty()).then(|| {
        min_resources
            .to_quantities()
            .into_iter()
            .map(|(k, v)| (k, Quantity(v)))
            .collect()
    })
}

/// Whether the Job has finished (`Complete` or `Failed` condition True): no PodGroup is made
/// for it any more.
pub fn job_finished(job: &Job) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
        })
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(|v| v.trim())
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|a| a.get(key))
        .map(|v| v.trim())
}

/// A positive integer annotation, or a message naming it.
fn positive(meta: &ObjectMeta, key: &str, what: &str) -> std::result::Result<Option<i32>, String> {
    match annotation(meta, key) {
        None => Ok(None),
        Some(v) => match v.parse::<i32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "annotation {key}: {v:?} is not a positive integer ({what})"
            )),
        },
    }
}

/// The gang of a `batch/v1` Job (docs/workloads.md, "Derivation"):
/// - `minMember`: `spec.parallelism` (default 1), or `spec.completions` when smaller (at least
///   1); annotation `scheduling.caldera.sh/min-member` overrides it;
/// - `minResources`: `minMember` × the pod template's request;
/// - `queue`: the Job's annotation `scheduling.volcano.sh/queue-name`, else its label
///   `kueue.x-k8s.io/queue-name`, else the template's `scheduling.volcano.sh/queue-name`
///   annotation, else `default`;
/// - `priorityClassName`: the template's;
/// - `scheduleTimeoutSeconds`: annotation `scheduling.caldera.sh/schedule-timeout-seconds`.
///
/// Not grouped: a template naming another scheduler (`scheduler_names` are Caldera's) or a
/// PodGroup of its own (explicit groups keep precedence), annotation
/// `scheduling.caldera.sh/auto-group: "false"` on the Job or its template, or a Job owned by
/// another workload than a CronJob (a JobSet's child).
pub fn job_gang(job: &Job, scheduler_names: &[String]) -> JobGang {
    let meta = &job.metadata;
    let Some(name) = meta.name.as_deref().filter(|n| !n.is_empty()) else {
        return JobGang::NotGrouped("the Job has no name");
    };
    let namespace = meta.namespace.as_deref().unwrap_or("default");
    let Some(spec) = job.spec.as_ref() else {
        return JobGang::NotGrouped("the Job has no spec");
    };
    let default_spec = Default::default();
    let pod_spec = spec.template.spec.as_ref().unwrap_or(&default_spec);
    let scheduler = pod_spec
        .scheduler_name
        .as_deref()
        .filter(|s| !s.is_empty())
        .unwrap_or(caldera_api::KUBE_SCHEDULER_NAME);
    // First and cheap: most Jobs of a cluster are kube-scheduler's, and this runs for every
    // known Job before each session.
    if !scheduler_names.iter().any(|s| s == scheduler) {
        return JobGang::NotGrouped("its pods name another scheduler");
    }
    let template_meta = spec.template.metadata.clone().unwrap_or_default();
    if group_name(&template_meta).is_some() || pod_spec.scheduling_group.is_some() {
        return JobGang::NotGrouped("its pods name a PodGroup of their own");
    }
    if [meta, &template_meta]
        .iter()
        .any(|m| annotation(m, ANNOTATION_AUTO_GROUP) == Some("false"))
    {
        return JobGang::NotGrouped("opted out (scheduling.caldera.sh/auto-group: \"false\")");
    }
    if Owner::of(meta).is_some_and(|o| &*o.kind != "CronJob") {
        return JobGang::NotGrouped("the Job is part of a larger workload, not grouped yet");
    }
    let min_member = match positive(meta, ANNOTATION_MIN_MEMBER, "the gang's minMember") {
        Err(e) => return JobGang::Invalid(format!("Job {namespace}/{name}: {e}")),
        Ok(Some(n)) => n,
        Ok(None) => {
            let parallelism = spec.parallelism.unwrap_or(1);
            let n = spec.completions.map_or(parallelism, |c| c.min(parallelism));
            n.max(1)
        }
    };
    let timeout = match positive(meta, ANNOTATION_SCHEDULE_TIMEOUT, "seconds") {
        Err(e) => return JobGang::Invalid(format!("Job {namespace}/{name}: {e}")),
        Ok(t) => t,
    };
    let mut template_pod_meta = template_meta.clone();
    template_pod_meta.name = Some(format!("{name} (pod template)"));
    template_pod_meta.namespace = Some(namespace.to_string());
    let ctx = Ctx::new(ObjectKind::Pod, &template_pod_meta);
    let request = match spec_request(&ctx, pod_spec) {
        Ok(r) => r,
        Err(e) => return JobGang::Invalid(format!("Job {namespace}/{name}: {e}")),
    };
    let mut min_resources = caldera_model::Resources::new();
    add_times(&mut min_resources, &request, i64::from(min_member));
    let queue = annotation(meta, ANNOTATION_QUEUE_NAME)
        .or_else(|| label(meta, LABEL_KUEUE_QUEUE_NAME))
        .or_else(|| annotation(&template_meta, ANNOTATION_QUEUE_NAME))
        .filter(|q| !q.is_empty())
        .map(String::from);
    let owner = match (&meta.uid, &meta.name) {
        (Some(uid), Some(n)) => Some(vec![OwnerReference {
            api_version: "batch/v1".into(),
            kind: "Job".into(),
            name: n.clone(),
            uid: uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        _ => None,
    };
    let pg = PodGroup {
        metadata: derived_meta(
            job_podgroup_name(name),
            namespace,
            format!("job.batch/{name}"),
            owner,
            meta,
        ),
        spec: PodGroupSpec {
            min_member: Some(min_member),
            queue,
            priority_class_name: pod_spec
                .priority_class_name
                .clone()
                .filter(|c| !c.is_empty()),
            min_resources: min_resources_spec(&min_resources),
            schedule_timeout_seconds: timeout,
            ..Default::default()
        },
        status: None,
    };
    JobGang::Gang(Box::new(pg))
}

/// `total += request × n` without a loop per member, saturating.
pub(crate) fn add_times(
    total: &mut caldera_model::Resources,
    request: &caldera_model::Resources,
    n: i64,
) {
    if n <= 0 {
        return;
    }
    for (name, v) in request.iter() {
        total.add_named(name, v.saturating_mul(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::derive::member_group;
    use crate::tests::merge;
    use crate::{ClusterIndex, SnapshotOptions};
    use caldera_model::TaskStatus;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::{json, Value};

    fn names() -> Vec<String> {
        vec!["caldera".into(), "volcano".into()]
    }

    fn mk_job(name: &str, patch: Value) -> Job {
        let mut v = json!({
            "metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}")},
            "spec": {"parallelism": 4, "completions": 4, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"schedulerName": "caldera", "restartPolicy": "Never",
                    "priorityClassName": "high",
                    "containers": [{"name": "main", "resources": {
                        "limits": {"nvidia.com/gpu": "1"}, "requests": {"cpu": "2"}}}]}}},
        });
        merge(&mut v, patch);
        serde_json::from_value(v).unwrap()
    }

    fn gang(job: &Job) -> PodGroup {
        match job_gang(job, &names()) {
            JobGang::Gang(pg) => *pg,
            other => panic!("not a gang: {other:?}"),
        }
    }

    fn job_pod(job: &Job, name: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ml", "name": name, "uid": format!("uid-{name}"),
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                    "name": job.metadata.name, "uid": job.metadata.uid, "controller": true}]},
            "spec": job.spec.as_ref().unwrap().template.spec,
        }))
        .unwrap()
    }

    #[test]
    fn derivation_table_for_jobs() {
        // (parallelism, completions) → minMember
        for (p, c, want) in [
            (json!(8), json!(8), 8),
            (json!(8), json!(3), 3),
            (json!(4), Value::Null, 4),
            (Value::Null, Value::Null, 1),
            (json!(0), json!(5), 1),
        ] {
            let job = mk_job("t", json!({"spec": {"parallelism": p, "completions": c}}));
            assert_eq!(gang(&job).spec.min_member, Some(want), "{p} {c}");
        }
        let pg = gang(&mk_job("train", json!({})));
        assert_eq!(pg.metadata.name.as_deref(), Some("job-train"));
        assert_eq!(pg.metadata.namespace.as_deref(), Some("ml"));
        let owner = &pg.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Job", "uid-train")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(
            pg.metadata.annotations.as_ref().unwrap()[ANNOTATION_DERIVED_FROM],
            "job.batch/train"
        );
        assert_eq!(pg.spec.priority_class_name.as_deref(), Some("high"));
        assert_eq!(pg.spec.queue, None);
        let min = pg.spec.min_resources.unwrap();
        assert_eq!(min["nvidia.com/gpu"].0, "4");
        assert_eq!(min["cpu"].0, "8");
    }

    #[test]
    fn a_derived_gang_is_as_old_as_its_workload() {
        // Two Jobs submitted together: their PodGroups are created by Caldera's writes, which
        // may land in either order. The gang is ordered by the Job's creation, not the
        // PodGroup's.
        let job = mk_job(
            "a",
            json!({"metadata": {"creationTimestamp": "2026-12-07T04:00:00Z"}}),
        );
        let mut pg = gang(&job);
        assert_eq!(
            pg.metadata.annotations.as_ref().unwrap()[ANNOTATION_WORKLOAD_CREATED],
            "2026-12-07T04:00:00Z"
        );
        pg.metadata.creation_timestamp =
            serde_json::from_value(json!("2026-12-07T04:00:05Z")).unwrap();
        let info = crate::convert::GroupInfo::try_from(&pg).unwrap();
        let job_time = serde_json::from_value(json!("2026-12-07T04:00:00Z")).unwrap();
        assert_eq!(info.created, crate::fields::time(&job_time));
        // Only on a PodGroup Caldera derived: a hand-written one keeps its own time.
        pg.metadata.labels = None;
        let info = crate::convert::GroupInfo::try_from(&pg).unwrap();
        let own = pg.metadata.creation_timestamp.as_ref().unwrap();
        assert_eq!(info.created, crate::fields::time(own));
        // Derived before the annotation existed, or with a malformed one: its own time.
        let mut old = gang(&mk_job("b", json!({})));
        old.metadata.creation_timestamp = pg.metadata.creation_timestamp.clone();
        old.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ANNOTATION_WORKLOAD_CREATED.into(), "yesterday".into());
        let info = crate::convert::GroupInfo::try_from(&old).unwrap();
        assert_eq!(info.created, crate::fields::time(own));
    }

    #[test]
    fn huge_parallelism_min_resources_without_a_loop() {
        // parallelism is user input up to i32::MAX: minResources is request x minMember,
        // computed at once (a loop per member stalled every session).
        let job = mk_job(
            "t",
            json!({"spec": {"parallelism": i32::MAX, "completions": i32::MAX}}),
        );
        let pg = gang(&job);
        assert_eq!(pg.spec.min_member, Some(i32::MAX));
        assert_eq!(
            pg.spec.min_resources.unwrap()["nvidia.com/gpu"].0,
            i32::MAX.to_string()
        );
    }

    #[test]
    fn annotations_override_and_opt_out() {
        let job = mk_job(
            "t",
            json!({"metadata": {
                "annotations": {ANNOTATION_MIN_MEMBER: "2", ANNOTATION_SCHEDULE_TIMEOUT: "60",
                    "scheduling.volcano.sh/queue-name": "team-a"},
                "labels": {LABEL_KUEUE_QUEUE_NAME: "ignored-when-volcano-names-one"}}}),
        );
        let pg = gang(&job);
        assert_eq!(pg.spec.min_member, Some(2));
        assert_eq!(pg.spec.schedule_timeout_seconds, Some(60));
        assert_eq!(pg.spec.queue.as_deref(), Some("team-a"));
        let kueue = mk_job(
            "k",
            json!({"metadata": {"labels": {LABEL_KUEUE_QUEUE_NAME: "lq"}}}),
        );
        assert_eq!(gang(&kueue).spec.queue.as_deref(), Some("lq"));

        let out = mk_job(
            "o",
            json!({"metadata": {"annotations": {ANNOTATION_AUTO_GROUP: "false"}}}),
        );
        assert!(matches!(job_gang(&out, &names()), JobGang::NotGrouped(_)));
        let tmpl_out = mk_job(
            "o",
            json!({"spec": {"template": {"metadata": {"annotations": {ANNOTATION_AUTO_GROUP: "false"}}}}}),
        );
        assert!(matches!(
            job_gang(&tmpl_out, &names()),
            JobGang::NotGrouped(_)
        ));
        let bad = mk_job(
            "b",
            json!({"metadata": {"annotations": {ANNOTATION_MIN_MEMBER: "two"}}}),
        );
        match job_gang(&bad, &names()) {
            JobGang::Invalid(m) => assert!(m.contains(ANNOTATION_MIN_MEMBER), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn not_grouped_when_another_scheduler_an_own_group_or_a_larger_workload() {
        let other = mk_job(
            "x",
            json!({"spec": {"template": {"spec": {"schedulerName": "default-scheduler"}}}}),
        );
        assert!(matches!(job_gang(&other, &names()), JobGang::NotGrouped(_)));
        let own = mk_job(
            "x",
            json!({"spec": {"template": {"metadata": {"annotations": {"scheduling.k8s.io/group-name": "pg"}}}}}),
        );
        assert!(matches!(job_gang(&own, &names()), JobGang::NotGrouped(_)));
        let child = mk_job(
            "x",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet", "name": "js", "uid": "u-js", "controller": true}]}}),
        );
        assert!(matches!(job_gang(&child, &names()), JobGang::NotGrouped(_)));
        let cron = mk_job(
            "x",
            json!({"metadata": {"ownerReferences": [{"apiVersion": "batch/v1",
                "kind": "CronJob", "name": "c", "uid": "u-c", "controller": true}]}}),
        );
        assert!(matches!(job_gang(&cron, &names()), JobGang::Gang(_)));
    }

    /// `consolidate` moves a Job's pod only when the Job re-creates it without counting the
    /// eviction against `backoffLimit`.
    #[test]
    fn a_job_pod_counts_as_recreated_only_when_its_failure_policy_ignores_disruption() {
        let job = mk_job("train", json!({}));
        let mut index = ClusterIndex::new();
        index.reset([&job]);
        for i in 0..4 {
            index.apply(&job_pod(&job, &format!("train-{i}"))).unwrap();
        }
        let opts = SnapshotOptions::default();
        let mut pg = match &index.derived_podgroups(&opts)[..] {
            [DerivedWrite::Create(pg)] => pg.clone(),
            other => panic!("{other:?}"),
        };
        pg.metadata.uid = Some("uid-pg".into());
        index.apply(&pg).unwrap();
        let snap = index.snapshot(&opts);
        assert_eq!(snap.tasks.len(), 4);
        assert!(snap.tasks.iter().all(|t| t.controller.is_none()));
        let ignoring = mk_job(
            "train",
            json!({"spec": {"podFailurePolicy": {"rules": [
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}}),
        );
        index.apply(&ignoring).unwrap();
        let snap = index.snapshot(&opts);
        assert!(snap
            .tasks
            .iter()
            .all(|t| t.controller.as_ref().is_some_and(|c| &*c.kind == "Job")));
        // Without the Job object nothing tells: not moved.
        index.delete::<Job>(("ml", "train"));
        let snap = index.snapshot(&opts);
        assert!(snap.tasks.iter().all(|t| t.controller.is_none()));
    }

    /// The index puts a Job's pods in its derived gang once the PodGroup exists; before that
    /// they wait; a PodGroup of that name the Job does not own is a clash, never adopted.
    #[test]
    fn index_resolves_job_pods_to_the_derived_gang() {
        let job = mk_job("train", json!({}));
        let mut index = ClusterIndex::new();
        index.reset([&job]);
        for i in 0..4 {
            index.apply(&job_pod(&job, &format!("train-{i}"))).unwrap();
        }
        let opts = SnapshotOptions::default();
        let snap = index.snapshot(&opts);
        assert!(snap.jobs.is_empty());
        assert_eq!(snap.waiting.len(), 4);
        assert_eq!(&*snap.waiting[0].group, "ml/job-train");
        assert!(snap.waiting[0].why.is_none());

        let wanted = index.derived_podgroups(&opts);
        assert_eq!(wanted.len(), 1);
        let mut pg = match &wanted[0] {
            DerivedWrite::Create(pg) => pg.clone(),
            other => panic!("{other:?}"),
        };
        pg.metadata.uid = Some("uid-pg".into());
        index.apply(&pg).unwrap();
        assert!(index.derived_podgroups(&opts).is_empty());
        // The Job scaled down: its PodGroup's spec follows.
        let mut scaled = job.clone();
        scaled.spec.as_mut().unwrap().parallelism = Some(2);
        index.apply(&scaled).unwrap();
        match &index.derived_podgroups(&opts)[..] {
            [DerivedWrite::Update { podgroup: pg, .. }] => assert_eq!(pg.spec.min_member, Some(2)),
            other => panic!("{other:?}"),
        }
        index.apply(&job).unwrap();
        let snap = index.snapshot(&opts);
        assert_eq!(snap.jobs.len(), 1);
        assert_eq!(&*snap.jobs[0].id, "ml/job-train");
        assert_eq!(snap.jobs[0].min_member, 4);
        assert_eq!(snap.jobs[0].tasks.len(), 4);
        assert!(snap.tasks.iter().all(|t| t.status == TaskStatus::Pending));

        // Off for the namespace: pods alone again, nothing to create.
        let off = SnapshotOptions {
            auto_group: AutoGroup::new(true, Some(&["other".to_string()])),
            ..SnapshotOptions::default()
        };
        assert_eq!(
            index.snapshot(&off).jobs.len(),
            5,
            "4 lone pods + the PodGroup"
        );

        // A clash: the PodGroup is someone else's.
        let mut foreign = pg.clone();
        foreign.metadata.owner_references = None;
        index.apply(&foreign).unwrap();
        let snap = index.snapshot(&opts);
        assert_eq!(snap.waiting.len(), 4);
        let why = snap.waiting[0].why.as_deref().unwrap();
        assert!(why.contains("not derived from Job ml/train"), "{why}");
    }

    /// A resource dropped from the template leaves the derived PodGroup's `minResources`: the
    /// update's merge patch clears it by name (a merge patch merges maps), so once the API
    /// server has applied it the index wants no further write.
    #[test]
    fn update_clears_a_resource_dropped_from_the_template() {
        let job = mk_job("train", json!({}));
        let mut index = ClusterIndex::new();
        index.reset([&job]);
        let opts = SnapshotOptions::default();
        let mut pg = match &index.derived_podgroups(&opts)[..] {
            [DerivedWrite::Create(pg)] => pg.clone(),
            other => panic!("{other:?}"),
        };
        pg.metadata.uid = Some("uid-pg".into());
        index.apply(&pg).unwrap();
        // The GPU goes from the template: only cpu is requested now.
        let cpu_only = mk_job(
            "train",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "main",
                "resources": {"requests": {"cpu": "2"}}}]}}}}),
        );
        index.apply(&cpu_only).unwrap();
        let write = match &index.derived_podgroups(&opts)[..] {
            [w @ DerivedWrite::Update {
                removed_resources, ..
            }] => {
                assert_eq!(removed_resources, &["nvidia.com/gpu".to_string()]);
                w.clone()
            }
            other => panic!("{other:?}"),
        };
        let patch = write.spec_patch();
        assert_eq!(patch["spec"]["minResources"]["nvidia.com/gpu"], Value::Null);
        assert_eq!(patch["spec"]["minResources"]["cpu"], json!("8"));
        // The API server applies the merge patch (RFC 7386) to the stored object.
        let mut stored = serde_json::to_value(&pg).unwrap();
        merge(&mut stored, patch);
        let stored: PodGroup = serde_json::from_value(stored).unwrap();
        let min = stored.spec.min_resources.clone().unwrap();
        assert_eq!(min.keys().collect::<Vec<_>>(), ["cpu"]);
        assert_eq!(write.applied_to(&pg), stored);
        index.apply(&stored).unwrap();
        assert!(index.derived_podgroups(&opts).is_empty());
        // Nothing requested any more: minResources goes whole.
        index
            .apply(&mk_job(
                "train",
                json!({"spec": {"template": {"spec": {"containers": [{"name": "main"}]}}}}),
            ))
            .unwrap();
        let write = index.derived_podgroups(&opts)[0].clone();
        let patch = write.spec_patch();
        assert_eq!(patch["spec"]["minResources"], Value::Null);
        let mut cleared = serde_json::to_value(&stored).unwrap();
        merge(&mut cleared, patch);
        let cleared: PodGroup = serde_json::from_value(cleared).unwrap();
        assert_eq!(cleared.spec.min_resources, None);
        index.apply(&cleared).unwrap();
        assert!(index.derived_podgroups(&opts).is_empty());
    }

    /// A Job's derived PodGroup is deleted once the Job opts out, kept once it finished.
    #[test]
    fn job_podgroup_is_deleted_when_the_job_opts_out_and_kept_when_it_finished() {
        let job = mk_job("train", json!({}));
        let mut index = ClusterIndex::new();
        index.reset([&job]);
        let opts = SnapshotOptions::default();
        let mut pg = index.derived_podgroups(&opts)[0].podgroup().clone();
        pg.metadata.uid = Some("uid-pg".into());
        index.apply(&pg).unwrap();
        let finished = mk_job(
            "train",
            json!({"metadata": {"annotations": {ANNOTATION_AUTO_GROUP: "false"}},
                "status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
        );
        index.apply(&finished).unwrap();
        assert!(index.derived_podgroups(&opts).is_empty());
        index
            .apply(&mk_job(
                "train",
                json!({"metadata": {"annotations": {ANNOTATION_AUTO_GROUP: "false"}}}),
            ))
            .unwrap();
        match &index.derived_podgroups(&opts)[..] {
            [DerivedWrite::Delete(d)] => {
                assert_eq!(d.metadata.name.as_deref(), Some("job-train"));
                assert_eq!(d.metadata.uid.as_deref(), Some("uid-pg"));
            }
            other => panic!("{other:?}"),
        }
        // Another Job's uid (recreated under the same name): not ours to judge.
        let mut other = mk_job(
            "train",
            json!({"metadata": {"annotations": {ANNOTATION_AUTO_GROUP: "false"}}}),
        );
        other.metadata.uid = Some("uid-new".into());
        index.apply(&other).unwrap();
        assert!(index.derived_podgroups(&opts).is_empty());
    }

    #[test]
    fn pods_whose_job_is_not_seen_yet_wait_and_say_so() {
        let job = mk_job("train", json!({}));
        let mut index = ClusterIndex::new();
        index.reset::<k8s_openapi::api::batch::v1::Job>([]);
        index.apply(&job_pod(&job, "train-0")).unwrap();
        let snap = index.snapshot(&SnapshotOptions::default());
        let why = snap.waiting[0].why.as_deref().unwrap();
        assert!(why.contains("waiting for Job ml/train"), "{why}");
        // Jobs not watched at all: the pod is scheduled alone, as before.
        let mut unwatched = ClusterIndex::new();
        unwatched.apply(&job_pod(&job, "train-0")).unwrap();
        assert_eq!(
            unwatched.snapshot(&SnapshotOptions::default()).jobs.len(),
            1
        );
    }

    #[test]
    fn member_group_needs_the_jobs_own_podgroup() {
        let job = mk_job("train", json!({}));
        let pod = job_pod(&job, "train-0");
        let owned = member_group(&pod.metadata, |name| {
            (name == "job-train").then(|| "uid-train".to_string())
        });
        assert_eq!(owned.as_deref(), Some("job-train"));
        assert_eq!(member_group(&pod.metadata, |_| Some("other".into())), None);
    }
}
