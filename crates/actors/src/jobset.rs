//! What the JobSet controller (`jobset.x-k8s.io`, kubernetes-sigs/jobset) creates for a
//! scheduler to see: one `batch/v1` Job per replica of each replicated job, whose pods the Job
//! controller ([`crate::job`]) then makes.
//!
//! Jobs are named `<jobset>-<replicatedJob>-<index>` and carry, on the Job and on its pod
//! template, the labels and annotations `jobset.sigs.k8s.io/jobset-name`,
//! `jobset.sigs.k8s.io/replicatedjob-name`, `jobset.sigs.k8s.io/replicatedjob-replicas`,
//! `jobset.sigs.k8s.io/job-index` and `jobset.sigs.k8s.io/job-global-index`; each is owned by
//! the JobSet (controller reference, `blockOwnerDeletion`). Deleting the JobSet deletes its
//! Jobs (the garbage collector), and with them their pods.
//!
//! Not modelled: success and failure policies, restarts of the whole JobSet, startup order
//! (`startupPolicy`, `dependsOn`), the headless Service and pod hostnames, coordinator labels,
//! exclusive placement, suspension, status.

use caldera_cache::derive::{Workload, LABEL_JOBSET_NAME, LABEL_JOBSET_REPLICATED_JOB};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;

/// Label and annotation: how many Jobs the replicated job has.
pub const LABEL_REPLICATED_JOB_REPLICAS: &str = "jobset.sigs.k8s.io/replicatedjob-replicas";
/// Label and annotation: the Job's index within its replicated job.
pub const LABEL_JOB_INDEX: &str = "jobset.sigs.k8s.io/job-index";
/// Label and annotation: the Job's index across the whole JobSet.
pub const LABEL_JOB_GLOBAL_INDEX: &str = "jobset.sigs.k8s.io/job-global-index";

/// The Jobs the JobSet should have, in order; `exists(name)` says which are there already
/// (those are left alone).
pub fn missing_jobs(js: &Workload, exists: &dyn Fn(&str) -> bool) -> Vec<Job> {
    let (Some(name), Some(uid)) = (js.metadata.name.as_deref(), js.metadata.uid.as_deref()) else {
        return Vec::new();
    };
    let owner = OwnerReference {
        api_version: if js.api_version.is_empty() {
            "jobset.x-k8s.io/v1alpha2".into()
        } else {
            js.api_version.clone()
        },
        kind: "JobSet".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut out = Vec::new();
    let mut global = 0;
    for r in js
        .spec
        .get("replicatedJobs")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
    {
        let rname = r.get("name").and_then(|v| v.as_str()).unwrap_or("");
        let replicas = r.get("replicas").and_then(|v| v.as_i64()).unwrap_or(1);
        let template = r.get("template").cloned().unwrap_or_default();
        for i in 0..replicas.max(0) {
            let job_name = format!("{name}-{rname}-{i}");
            let here = global;
            global += 1;
            if exists(&job_name) {
                continue;
            }
            let Ok(mut job) = serde_json::from_value::<Job>(template.clone()) else {
                continue;
            };
            let marks: BTreeMap<String, String> = [
                (LABEL_JOBSET_NAME, name.to_string()),
                (LABEL_JOBSET_REPLICATED_JOB, rname.to_string()),
                (LABEL_REPLICATED_JOB_REPLICAS, replicas.to_string()),
                (LABEL_JOB_INDEX, i.to_string()),
                (LABEL_JOB_GLOBAL_INDEX, here.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let mark = |meta: &mut ObjectMeta| {
                meta.labels
                    .get_or_insert_with(Default::default)
                    .extend(marks.clone());
                meta.annotations
                    .get_or_insert_with(Default::default)
                    .extend(marks.clone());
            };
            mark(&mut job.metadata);
            job.metadata.name = Some(job_name);
            job.metadata.namespace = js.metadata.namespace.clone();
            job.metadata.owner_references = Some(vec![owner.clone()]);
            if let Some(spec) = job.spec.as_mut() {
                mark(spec.template.metadata.get_or_insert_with(Default::default));
            }
            out.push(job);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_job_per_replica_with_the_jobset_labels() {
        let js: Workload = serde_json::from_value(json!({
            "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"namespace": "ml", "name": "train", "uid": "u-js"},
            "spec": {"replicatedJobs": [
                {"name": "driver", "template": {"spec": {"template": {"spec": {"containers": []}}}}},
                {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 2,
                    "template": {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": []}}}}}]}
        }))
        .unwrap();
        let jobs = missing_jobs(&js, &|n| n == "train-workers-0");
        let names: Vec<_> = jobs
            .iter()
            .map(|j| j.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["train-driver-0", "train-workers-1"]);
        let w = &jobs[1];
        assert_eq!(w.metadata.owner_references.as_ref().unwrap()[0].uid, "u-js");
        let tl = w
            .spec
            .as_ref()
            .unwrap()
            .template
            .metadata
            .as_ref()
            .unwrap()
            .labels
            .as_ref()
            .unwrap();
        assert_eq!(tl[LABEL_JOBSET_NAME], "train");
        assert_eq!(tl[LABEL_JOBSET_REPLICATED_JOB], "workers");
        assert_eq!(tl[LABEL_JOB_GLOBAL_INDEX], "2");
        assert_eq!(tl["app"], "w");
    }
}
