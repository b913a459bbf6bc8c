//! What kube-controller-manager's Job controller (`pkg/controller/job`) does for a scheduler
//! to see: the pods of a `batch/v1` Job, and the Job's status counts and finish conditions.
//!
//! Pods: from the template, with the labels `batch.kubernetes.io/controller-uid`,
//! `batch.kubernetes.io/job-name` (and their legacy forms `controller-uid`, `job-name`) and a
//! controller owner reference to the Job (`blockOwnerDeletion`). The controller keeps
//! `min(parallelism, remaining completions)` pods active (parallelism defaults to 1; a
//! suspended Job has none): a non-indexed Job without `completions` runs `parallelism` pods
//! until one succeeds; with `completions` until that many have succeeded. An `Indexed` Job
//! (`completionMode: Indexed`) gives each pod the lowest index neither succeeded nor active,
//! in the annotation and label `batch.kubernetes.io/job-completion-index`. Names are
//! `<job>-<suffix>` (`<job>-<index>-<suffix>` when indexed), as the controller's
//! `generateName` makes them; here the 5-character suffix is derived from the Job's uid and a
//! counter so a run is deterministic. Failed pods are replaced until more than
//! `backoffLimit` (default 6) have failed; then the Job is `Failed` (reason
//! `BackoffLimitExceeded`) and its active pods are deleted. A Job whose completions are all
//! done is `Complete` (with `SuccessCriteriaMet`). As upstream's `manageJob`, an `Indexed`
//! Job first deletes pods whose index is repeated (keeping the one furthest along), out of
//! range or missing; with more active pods than it wants (`parallelism` lowered) it deletes
//! the surplus in `controller.ActivePods` order: unscheduled first, then Pending, not Ready,
//! newest. A sync that deletes creates nothing.
//!
//! Not modelled: the `batch.kubernetes.io/job-tracking` finalizer, `podFailurePolicy`,
//! `backoffLimitPerIndex`, `activeDeadlineSeconds`, `podReplacementPolicy` (a terminating pod
//! counts as gone, the `TerminatingOrFailed` default), pod hostnames and the exponential
//! back-off between re-creations.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Pod label (and legacy `controller-uid`) naming the Job's uid.
pub const CONTROLLER_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
/// Pod label (and legacy `job-name`) naming the Job.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// Pod annotation and label with the completion index of an `Indexed` Job's pod.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// What one sync of a Job does.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sync {
    /// Pods to create, in order.
    pub create: Vec<Pod>,
    /// Pods to delete (names): the active pods of a Job that has just failed, or the surplus
    /// of one scaled down.
    pub delete: Vec<String>,
    /// The Job's status after the sync (counts and conditions).
    pub status: JobStatus,
}

/// Whether the pod is one of the Job's (its controller reference names the Job's uid).
pub fn owned_by(pod: &Pod, job: &Job) -> bool {
    let Some(uid) = job.metadata.uid.as_deref() else {
        return false;
    };
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == uid)
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

fn index_of(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(COMPLETION_INDEX))
        .and_then(|i| i.parse().ok())
}

fn condition(type_: &str, reason: &str, message: &str) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..Default::default()
    }
}

/// One sync of the Job controller over the Job and the pods `pods` (any pods of its
/// namespace; those it owns are counted). `taken(name)` says whether a pod name is in use.
pub fn sync(job: &Job, pods: &[&Pod], taken: &dyn Fn(&str) -> bool) -> Sync {
    let mut out = Sync {
        status: job.status.clone().unwrap_or_default(),
        ..Default::default()
    };
    let (Some(name), Some(uid), Some(spec)) = (
        job.metadata.name.as_deref(),
        job.metadata.uid.as_deref(),
        job.spec.as_ref(),
    ) else {
        return out;
    };
    let mine: Vec<&Pod> = pods.iter().copied().filter(|p| owned_by(p, job)).collect();
    let gone = |p: &Pod| p.metadata.deletion_timestamp.is_some();
    let active: Vec<&Pod> = mine
        .iter()
        .copied()
        .filter(|p| !gone(p) && !matches!(phase(p), "Succeeded" | "Failed"))
        .collect();
    let succeeded = mine.iter().filter(|p| phase(p) == "Succeeded").count() as i32;
    let failed = mine.iter().filter(|p| phase(p) == "Failed").count() as i32;
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let done_indexes: BTreeSet<i32> = mine
        .iter()
        .filter(|p| phase(p) == "Succeeded")
        .filter_map(|p| index_of(p))
        .collect();
    let status = &mut out.status;
    status.active = Some(active.len() as i32);
    status.succeeded = Some(succeeded);
    status.failed = Some(failed);
    if caldera_cache::workload::job_finished(job) {
        return out;
    }
    let completions = spec.completions;
    let complete = match completions {
        Some(c) if indexed => done_indexes.len() as i32 >= c,
        Some(c) => succeeded >= c,
        None => succeeded > 0 && active.is_empty(),
    };
    if complete {
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let message = "Reached expected number of succeeded pods";
        conditions.push(condition(
            "SuccessCriteriaMet",
            "CompletionsReached",
            message,
        ));
        conditions.push(condition("Complete", "CompletionsReached", message));
        return out;
    }
    if failed > spec.backoff_limit.unwrap_or(6) {
        let conditions = status.conditions.get_or_insert_with(Vec::new);
        let message = "Job has reached the specified backoff limit";
        conditions.push(condition("FailureTarget", "BackoffLimitExceeded", message));
        conditions.push(condition("Failed", "BackoffLimitExceeded", message));
        out.delete = active
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        return out;
    }
    if spec.suspend == Some(true) {
        return out;
    }
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let wanted = match completions {
        Some(c) if indexed => parallelism.min(c - done_indexes.len() as i32),
        Some(c) => parallelism.min(c - succeeded),
        // Without completions no new pod starts once one has succeeded.
        None if succeeded > 0 => 0,
        None => parallelism,
    };
    // Upstream's `manageJob`: too many active pods, or (indexed) pods with a repeated, an
    // out-of-range or no index, are deleted; a sync that deletes creates nothing.
    let surplus = active.len().saturating_sub(wanted.max(0) as usize);
    let delete = pods_for_removal(
        &active,
        indexed.then_some(completions.unwrap_or(0)),
        surplus,
    );
    if !delete.is_empty() {
        out.delete = delete
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        return out;
    }
    let missing = (wanted - active.len() as i32).max(0);
    let busy: BTreeSet<i32> = active.iter().filter_map(|p| index_of(p)).collect();
    let mut free =
        (0..completions.unwrap_or(0)).filter(|i| !done_indexes.contains(i) && !busy.contains(i));
    let mut n = mine.len() as u64;
    for _ in 0..missing {
        let index = if indexed {
            match free.next() {
                Some(i) => Some(i),
                None => break,
            }
        } else {
            None
        };
        let pod_name = loop {
            n += 1;
            let candidate = match index {
                Some(i) => format!("{name}-{i}-{}", crate::meta::suffix(uid, n)),
                None => format!("{name}-{}", crate::meta::suffix(uid, n)),
            };
            if !taken(&candidate) {
                break candidate;
            }
        };
        out.create.push(pod_for(job, &pod_name, index));
    }
    out
}

/// Upstream's `activePodsForRemoval`: for an indexed Job (`completions`), first every pod
/// without an index or with one out of range, and of each repeated index all pods but the one
/// furthest along (`controller.ActivePods` order, `appendDuplicatedIndexPodsForRemoval`); then,
/// while fewer than `at_least`, the remaining pods in `ActivePods` order.
fn pods_for_removal<'a>(
    active: &[&'a Pod],
    completions: Option<i32>,
    at_least: usize,
) -> Vec<&'a Pod> {
    let mut rm: Vec<&Pod> = Vec::new();
    let mut left: Vec<&Pod> = Vec::new();
    match completions {
        Some(completions) => {
            let mut by_index: BTreeMap<Option<i32>, Vec<&Pod>> = BTreeMap::new();
            for &p in active {
                by_index.entry(index_of(p)).or_default().push(p);
            }
            for (index, mut pods) in by_index {
                match index {
                    Some(i) if i >= 0 && i < completions => {
                        pods.sort_by(|a, b| crate::replicaset::active_pods_cmp(a, b));
                        if let Some(keep) = pods.pop() {
                            left.push(keep);
                        }
                        rm.extend(pods);
                    }
                    _ => rm.extend(pods),
                }
            }
        }
        None => left = active.to_vec(),
    }
    if rm.len() < at_least {
        left.sort_by(|a, b| crate::replicaset::active_pods_cmp(a, b));
        let more = at_least - rm.len();
        rm.extend(left.into_iter().take(more));
    }
    rm
}

/// The pod `pod_name` of the Job, with completion index `index` when indexed.
fn pod_for(job: &Job, pod_name: &str, index: Option<i32>) -> Pod {
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let uid = job.metadata.uid.clone().unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    for (k, v) in [
        (CONTROLLER_UID_LABEL, &uid),
        ("controller-uid", &uid),
        (JOB_NAME_LABEL, &name),
        ("job-name", &name),
    ] {
        labels.insert(k.to_string(), v.clone());
    }
    let mut annotations = meta.annotations.unwrap_or_default();
    if let Some(i) = index {
        labels.insert(COMPLETION_INDEX.into(), i.to_string());
        annotations.insert(COMPLETION_INDEX.into(), i.to_string());
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name.to_string()),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name,
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// The names of pods per Job index, for tests and reports: `index → pod names`.
pub fn by_index<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> BTreeMap<i32, Vec<String>> {
    let mut out: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for p in pods {
        if let (Some(i), Some(n)) = (index_of(p), p.metadata.name.clone()) {
            out.entry(i).or_default().push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::JobSpec;
    use k8s_openapi::api::core::v1::{PodStatus, PodTemplateSpec};

    fn job(parallelism: i32, completions: Option<i32>, indexed: bool) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("train".into()),
                namespace: Some("default".into()),
                uid: Some("u-1".into()),
                ..Default::default()
            },
            spec: Some(JobSpec {
                parallelism: Some(parallelism),
                completions,
                completion_mode: indexed.then(|| "Indexed".into()),
                template: PodTemplateSpec::default(),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn with_phase(mut p: Pod, phase: &str) -> Pod {
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            ..Default::default()
        });
        p
    }

    #[test]
    fn indexed_job_creates_one_pod_per_index_up_to_parallelism() {
        let j = job(8, Some(8), true);
        let s = sync(&j, &[], &|_| false);
        assert_eq!(s.create.len(), 8);
        let idx = by_index(&s.create);
        assert_eq!(
            idx.keys().copied().collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        assert!(s.create.iter().all(|p| owned_by(p, &j)));
        assert!(s.create[3]
            .metadata
            .name
            .as_deref()
            .unwrap()
            .starts_with("train-3-"));
        // Synced again with its pods: nothing more.
        let refs: Vec<&Pod> = s.create.iter().collect();
        assert!(sync(&j, &refs, &|_| false).create.is_empty());
    }

    #[test]
    fn completions_below_parallelism_bound_the_pods() {
        let s = sync(&job(8, Some(3), false), &[], &|_| false);
        assert_eq!(s.create.len(), 3);
        let names: BTreeSet<_> = s.create.iter().map(|p| p.metadata.name.clone()).collect();
        assert_eq!(names.len(), 3, "names are distinct");
    }

    #[test]
    fn succeeded_index_is_not_recreated_and_failed_one_is() {
        let j = job(2, Some(2), true);
        let first = sync(&j, &[], &|_| false).create;
        let done = with_phase(first[0].clone(), "Succeeded");
        let failed = with_phase(first[1].clone(), "Failed");
        let s = sync(&j, &[&done, &failed], &|_| false);
        assert_eq!(s.create.len(), 1);
        assert_eq!(index_of(&s.create[0]), Some(1));
        let again = with_phase(s.create[0].clone(), "Succeeded");
        let s = sync(&j, &[&done, &failed, &again], &|_| false);
        assert!(s.create.is_empty());
        let types: Vec<_> = s
            .status
            .conditions
            .unwrap()
            .into_iter()
            .map(|c| c.type_)
            .collect();
        assert!(types.contains(&"Complete".to_string()));
    }

    #[test]
    fn backoff_limit_fails_the_job_and_deletes_active_pods() {
        let mut j = job(2, Some(2), false);
        j.spec.as_mut().unwrap().backoff_limit = Some(0);
        let first = sync(&j, &[], &|_| false).create;
        let failed = with_phase(first[0].clone(), "Failed");
        let s = sync(&j, &[&failed, &first[1]], &|_| false);
        assert!(s.create.is_empty());
        assert_eq!(s.delete, vec![first[1].metadata.name.clone().unwrap()]);
    }

    #[test]
    fn scaled_down_job_deletes_unscheduled_pods_first() {
        let mut j = job(4, Some(4), true);
        let mut pods = sync(&j, &[], &|_| false).create;
        pods[0].spec.get_or_insert_with(Default::default).node_name = Some("n".into());
        j.spec.as_mut().unwrap().parallelism = Some(1);
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = sync(&j, &refs, &|_| false);
        assert!(s.create.is_empty());
        let deleted: Vec<Option<i32>> = s
            .delete
            .iter()
            .map(|n| {
                index_of(
                    pods.iter()
                        .find(|p| p.metadata.name.as_ref() == Some(n))
                        .unwrap(),
                )
            })
            .collect();
        assert_eq!(deleted, vec![Some(3), Some(2), Some(1)]);
    }

    #[test]
    fn repeated_indexes_lose_their_newer_pod_first_as_upstream_manage_job_does() {
        // A Job applied in the same step as its own 8 Indexed pods (a snapshot replayed): the
        // controller made 8 more before it saw them. Upstream deletes the duplicate of each
        // index (the one not scheduled yet), not the highest indexes: every index stays once.
        let j = job(8, Some(8), true);
        let mut old = sync(&j, &[], &|_| false).create;
        for (i, p) in old.iter_mut().enumerate() {
            p.metadata.name = Some(format!("train-{i}-old"));
            p.spec.get_or_insert_with(Default::default).node_name = Some("n".into());
            p.status = Some(PodStatus {
                phase: Some("Running".into()),
                ..Default::default()
            });
        }
        let new = sync(&j, &[], &|_| false).create;
        let all: Vec<&Pod> = old.iter().chain(new.iter()).collect();
        let s = sync(&j, &all, &|_| false);
        assert!(s.create.is_empty(), "a sync that deletes creates nothing");
        let deleted: BTreeSet<&String> = s.delete.iter().collect();
        let expected: BTreeSet<&String> = new
            .iter()
            .filter_map(|p| p.metadata.name.as_ref())
            .collect();
        assert_eq!(deleted, expected);
        let kept: Vec<&Pod> = all
            .into_iter()
            .filter(|p| !deleted.contains(p.metadata.name.as_ref().unwrap()))
            .collect();
        let idx = by_index(kept);
        assert_eq!(
            idx.keys().copied().collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        assert!(idx.values().all(|names| names.len() == 1));
    }

    #[test]
    fn an_out_of_range_index_is_deleted_even_without_surplus() {
        let j = job(2, Some(2), true);
        let mut pods = sync(&j, &[], &|_| false).create;
        let mut stray = pods[1].clone();
        stray.metadata.name = Some("train-5-x".into());
        stray
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(COMPLETION_INDEX.into(), "5".into());
        pods.pop();
        pods.push(stray);
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = sync(&j, &refs, &|_| false);
        assert_eq!(s.delete, vec!["train-5-x".to_string()]);
        assert!(s.create.is_empty());
    }

    #[test]
    fn suspended_job_has_no_pods() {
        let mut j = job(4, None, false);
        j.spec.as_mut().unwrap().suspend = Some(true);
        assert!(sync(&j, &[], &|_| false).create.is_empty());
    }
}
