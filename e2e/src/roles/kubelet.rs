//! The kubelets of a cluster without any: they set the phase of the pods bound to them (with
//! the `Ready` condition a real kubelet writes, so PodDisruptionBudgets count them healthy) and
//! finish graceful deletions — a terminating bound pod is removed (a delete with grace 0) once
//! its `deletionTimestamp` has passed. The rules are `caldera_actors::kubelet`'s, shared with
//! the simulator.

use crate::error::{status_code, Error, Result};
use crate::objects::RUN_LABEL;
use caldera_actors::kubelet;
use caldera_model::Time;
use caldera_sim::driver::PodSelector;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::Client;
use serde_json::json;
use std::time::{SystemTime, UNIX_EPOCH};

/// The wall clock as a model time.
pub fn wall_clock() -> Time {
    Time(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0),
    )
}

/// The kubelets for one run's pods (those labelled with its run id).
#[derive(Clone)]
pub struct Kubelets {
    client: Client,
    run_id: String,
}

impl std::fmt::Debug for Kubelets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelets")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

fn pod_name(pod: &Pod) -> (String, String) {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl Kubelets {
    /// Kubelets for the pods labelled `caldera.sh/e2e-run=<run_id>`.
    pub fn new(client: Client, run_id: &str) -> Self {
        Kubelets {
            client,
            run_id: run_id.to_string(),
        }
    }

    async fn pods(&self, namespace: Option<&str>) -> Result<Vec<Pod>> {
        let api: Api<Pod> = match namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        };
        let lp = ListParams::default().labels(&format!("{RUN_LABEL}={}", self.run_id));
        Ok(api
            .list(&lp)
            .await
            .map_err(|e| Error::api("list", "pods", e))?
            .items)
    }

    /// Sets `phase` on the bound, unfinished pods `which` selects, with what a kubelet writes
    /// alongside ([`kubelet::set_phase`]). Returns how many changed.
    pub async fn mark(&self, which: &PodSelector, phase: &str) -> Result<usize> {
        let now = wall_clock();
        let mut marked = 0;
        for pod in self.pods(which.namespace.as_deref()).await? {
            let bound = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some();
            let mut status = pod.status.clone().unwrap_or_default();
            let current = status.phase.clone();
            if !bound
                || matches!(current.as_deref(), Some("Succeeded") | Some("Failed"))
                || current.as_deref() == Some(phase)
                || !which.selector.matches(pod.metadata.labels.as_ref())
            {
                continue;
            }
            if !kubelet::set_phase(&mut status, phase, now) {
                continue;
            }
            let (ns, name) = pod_name(&pod);
            let patch = json!({"status": {
                "phase": status.phase,
                "startTime": status.start_time,
                "conditions": status.conditions,
            }});
            Api::<Pod>::namespaced(self.client.clone(), &ns)
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|e| Error::api("patch status of", format!("Pod {ns}/{name}"), e))?;
            marked += 1;
        }
        Ok(marked)
    }

    /// Removes (grace 0, with the pod's uid as precondition) every terminating bound pod of
    /// the run whose `deletionTimestamp` has passed. Returns how many went.
    pub async fn finish_terminations(&self) -> Result<usize> {
        let now = wall_clock();
        let mut removed = 0;
        for pod in self.pods(None).await? {
            if !kubelet::removal_due(&pod, now) {
                continue;
            }
            let (ns, name) = pod_name(&pod);
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: pod.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match Api::<Pod>::namespaced(self.client.clone(), &ns)
                .delete(&name, &params)
                .await
            {
                Ok(_) => removed += 1,
                // Gone already, or re-created under the same name: nothing to finish.
                Err(e) if matches!(status_code(&e), Some(404 | 409)) => {}
                Err(e) => return Err(Error::api("delete", format!("Pod {ns}/{name}"), e)),
            }
        }
        Ok(removed)
    }
}
