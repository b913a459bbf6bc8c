//! The JobSet and LeaderWorkerSet controllers, played by the driver: a bare control plane (and
//! the stand-in) runs neither, as it runs no kubelet.
//!
//! Their CRDs are installed by [`install_crds`] when a scenario applies one of these kinds
//! (minimal ones: the kind served with its `status` subresource, any content kept, as the
//! projects' own CRDs would serve what the scenarios use). After each apply of such an object
//! the driver does what its controller would, with the same rules as the simulator
//! ([`caldera_actors::jobset`], [`caldera_actors::lws`]):
//! - a JobSet gets its child Jobs (owned by it, with the JobSet labels on them and their pod
//!   template); the cluster's own Job controller (kube-controller-manager, or the stand-in's)
//!   makes their pods, as it would under a real JobSet controller;
//! - a LeaderWorkerSet gets its pods, named, labelled and annotated as the LWS controller,
//!   the StatefulSet controller and the LWS pod webhook make them together. One difference
//!   from a cluster running LWS: the pods are owned by the LeaderWorkerSet itself, not by the
//!   StatefulSets between (which this driver does not create: a real StatefulSet controller
//!   would make pods of its own, without the webhook's labels); the garbage collector thus
//!   deletes them with the LWS, as it does through the StatefulSets. Caldera finds an LWS
//!   pod's gang by its labels, so the owner in between does not change what it decides.
//!
//! Everything made carries the run's label, so cleanup finds it.

use crate::error::{status_code, Error, Result};
use crate::objects::RUN_LABEL;
use caldera_cache::derive::Workload;
use caldera_sim::manifest::Kind;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;
use tokio::time::Instant;

/// Whether the driver plays the controller of `kind`.
pub fn is_played(kind: Kind) -> bool {
    matches!(kind, Kind::JobSet | Kind::LeaderWorkerSet)
}

fn crd(group: &str, version: &str, kind: &str, plural: &str, short: &[&str]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural,
                "singular": kind.to_lowercase(), "shortNames": short},
            "versions": [{"name": version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}],
        },
    })
}

/// The JobSet and LeaderWorkerSet CRDs, minimal.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        crd("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", &[]),
        crd(
            "leaderworkerset.x-k8s.io",
            "v1",
            "LeaderWorkerSet",
            "leaderworkersets",
            &["lws"],
        ),
    ]
    .into_iter()
    .filter_map(|v| serde_json::from_value(v).ok())
    .collect()
}

/// Installs the JobSet and LeaderWorkerSet CRDs when missing (an existing one is left as it
/// is) and waits until both kinds are served.
pub async fn install_crds(client: &Client, timeout: Duration, poll: Duration) -> Result<()> {
    crate::crds::install(client, crds(), false, timeout, poll).await?;
    crate::crds::wait_served(
        client,
        &[Kind::JobSet, Kind::LeaderWorkerSet],
        timeout,
        poll,
    )
    .await
}

fn label(meta: &mut ObjectMeta, run_id: &str) {
    meta.labels
        .get_or_insert_with(Default::default)
        .insert(RUN_LABEL.to_string(), run_id.to_string());
}

/// Creates an object, riding out a namespace whose `default` ServiceAccount is not there yet
/// (403) until `timeout`. Returns its uid.
async fn create<K>(api: &Api<K>, object: &K, what: String, timeout: Duration) -> Result<String>
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize
        + std::fmt::Debug,
{
    let deadline = Instant::now() + timeout;
    loop {
        match api.create(&PostParams::default(), object).await {
            Ok(o) => return Ok(o.meta().uid.clone().unwrap_or_default()),
            Err(e) if status_code(&e) == Some(409) => return Ok(String::new()),
            Err(e) if status_code(&e) == Some(403) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(Error::api("create", what, e)),
        }
    }
}

/// One sync of the controller of `kind` for the live object `current`: creates what is
/// missing. Returns the uids of what it created.
pub async fn play(
    client: &Client,
    kind: Kind,
    current: &Value,
    run_id: &str,
    timeout: Duration,
) -> Result<HashSet<String>> {
    let mut made = HashSet::new();
    let Ok(w) = serde_json::from_value::<Workload>(current.clone()) else {
        return Ok(made);
    };
    let ns = w
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    match kind {
        Kind::JobSet => {
            let api: Api<Job> = Api::namespaced(client.clone(), &ns);
            let existing: HashSet<String> = api
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::api("list", "Jobs".to_string(), e))?
                .items
                .into_iter()
                .filter_map(|j| j.metadata.name)
                .collect();
            for mut job in caldera_actors::jobset::missing_jobs(&w, &|n| existing.contains(n)) {
                label(&mut job.metadata, run_id);
                if let Some(spec) = job.spec.as_mut() {
                    label(
                        spec.template.metadata.get_or_insert_with(Default::default),
                        run_id,
                    );
                }
                let what = format!("Job {ns}/{}", job.metadata.name.as_deref().unwrap_or(""));
                made.insert(create(&api, &job, what, timeout).await?);
            }
        }
        Kind::LeaderWorkerSet => {
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let existing: HashSet<String> = api
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::api("list", "Pods".to_string(), e))?
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            let owner = OwnerReference {
                api_version: "leaderworkerset.x-k8s.io/v1".into(),
                kind: "LeaderWorkerSet".into(),
                name: w.metadata.name.clone().unwrap_or_default(),
                uid: w.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            };
            for mut pod in caldera_actors::lws::missing_pods(&w, &|n| existing.contains(n)) {
                label(&mut pod.metadata, run_id);
                pod.metadata.owner_references = Some(vec![owner.clone()]);
                let what = format!("Pod {ns}/{}", pod.metadata.name.as_deref().unwrap_or(""));
                made.insert(create(&api, &pod, what, timeout).await?);
            }
        }
        _ => {}
    }
    made.remove("");
    Ok(made)
}
