//! Autoscaler requests in `caldera run`: whether the API server serves ProvisioningRequests,
//! the watch that finds Caldera's requests again (by label, after a restart or a leader
//! change), and the writes that carry out a plan's `capacity_requests` and
//! `capacity_releases`: PodTemplates then the request, the members' consume annotations, and
//! deletes. Every write is idempotent (names are deterministic; `409 AlreadyExists` and
//! `404 NotFound` are success), so a session that runs before the watch shows an earlier
//! write repeats it harmlessly.

use crate::Shared;
use caldera_api::{
    ProvisioningRequest, PROVISIONING_GROUP, PROVISIONING_PLURAL, PROVISIONING_VERSION,
};
use caldera_cache::provisioning::{self, SELECTOR};
use caldera_model::{CapacityNeed, CapacityRelease};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Whether the API server serves `autoscaling.x-k8s.io/v1` `provisioningrequests`.
pub(crate) async fn served(client: &Client) -> bool {
    let gv = format!("{PROVISIONING_GROUP}/{PROVISIONING_VERSION}");
    match client.list_api_group_resources(&gv).await {
        Ok(list) => list.resources.iter().any(|r| r.name == PROVISIONING_PLURAL),
        Err(kube::Error::Api(s)) if s.code == 404 => false,
        Err(e) => {
            warn!(error = %e, "could not ask the API server whether it serves {gv}; assuming it does not");
            false
        }
    }
}

/// Watches Caldera's ProvisioningRequests into the index; marks them synced after the first
/// list, so sessions ask for requests only once the ones that exist are known.
pub(crate) async fn watch(shared: Arc<Shared>, client: Client, stop: CancellationToken) {
    let api: Api<ProvisioningRequest> = Api::all(client);
    let config = watcher::Config::default().labels(SELECTOR);
    let stream = watcher::watcher(api, config).default_backoff();
    futures::pin_mut!(stream);
    let mut buffer = Vec::new();
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return,
            next = stream.next() => next,
        };
        let Some(event) = next else {
            warn!("ProvisioningRequest watch ended");
            return;
        };
        match event {
            Ok(Event::Init) => buffer.clear(),
            Ok(Event::InitApply(pr)) => buffer.push(pr),
            Ok(Event::InitDone) => {
                let requests = std::mem::take(&mut buffer);
                let mut cluster = shared.lock_cluster();
                cluster.index.reset_provisioning_requests(&requests);
                if !cluster.provisioning_synced {
                    info!(requests = requests.len(), "ProvisioningRequests synced");
                }
                cluster.provisioning_synced = true;
                drop(cluster);
                shared.trigger();
            }
            Ok(Event::Apply(pr)) => {
                shared.lock_cluster().index.apply_provisioning_request(&pr);
                shared.trigger();
            }
            Ok(Event::Delete(pr)) => {
                let ns = pr.metadata.namespace.as_deref().unwrap_or("default");
                let name = pr.metadata.name.as_deref().unwrap_or_default();
                shared
                    .lock_cluster()
                    .index
                    .delete_provisioning_request(ns, name);
                shared.trigger();
            }
            Err(e) => warn!(error = %e, "ProvisioningRequest watch failed; retrying with backoff"),
        }
    }
}

/// Carries out a plan's autoscaler writes, releases first (a retry releases the old request
/// and creates the next).
pub(crate) async fn carry_out(
    shared: Arc<Shared>,
    client: Client,
    releases: Vec<CapacityRelease>,
    needs: Vec<CapacityNeed>,
) {
    for r in &releases {
        release(&shared, &client, r).await;
    }
    for n in &needs {
        create(&shared, &client, n).await;
    }
}

fn ok_or_exists<T>(what: &str, r: Result<T, kube::Error>) -> bool {
    match r {
        Ok(_) => true,
        Err(kube::Error::Api(s)) if s.code == 409 => true,
        Err(e) => {
            warn!(error = %e, "could not create {what}; the next session asks again");
            false
        }
    }
}

fn ok_or_gone<T>(what: &str, r: Result<T, kube::Error>) {
    match r {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => warn!(error = %e, "could not delete {what}; the next session tries again"),
    }
}

async fn create(shared: &Shared, client: &Client, need: &CapacityNeed) {
    let (pr, templates) = provisioning::build(need);
    let ns = need.namespace.as_ref();
    let template_api: Api<PodTemplate> = Api::namespaced(client.clone(), ns);
    for t in &templates {
        shared.metrics.api_write("podtemplate");
        let what = format!(
            "PodTemplate {ns}/{}",
            t.metadata.name.as_deref().unwrap_or_default()
        );
        if !ok_or_exists(&what, template_api.create(&PostParams::default(), t).await) {
            return;
        }
    }
    let pr_api: Api<ProvisioningRequest> = Api::namespaced(client.clone(), ns);
    shared.metrics.api_write("provisioningrequest");
    let what = format!("ProvisioningRequest {ns}/{}", need.name);
    if !ok_or_exists(&what, pr_api.create(&PostParams::default(), &pr).await) {
        return;
    }
    info!(request = %format!("{ns}/{}", need.name), podgroup = %need.podgroup, attempt = need.attempt,
          pods = need.pod_sets.iter().map(|p| p.count).sum::<u32>(), "ProvisioningRequest created");
    let annotations = provisioning::consume_annotations(need);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for p in &need.pods {
        shared.metrics.api_write("pod");
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        match pods
            .patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                warn!(error = %e, pod = %format!("{ns}/{}", p.name), "could not annotate a member as consuming its ProvisioningRequest")
            }
        }
    }
}

async fn release(shared: &Shared, client: &Client, r: &CapacityRelease) {
    let ns = r.namespace.as_ref();
    let pr_api: Api<ProvisioningRequest> = Api::namespaced(client.clone(), ns);
    shared.metrics.api_write("provisioningrequest");
    ok_or_gone(
        &format!("ProvisioningRequest {ns}/{}", r.name),
        pr_api.delete(&r.name, &DeleteParams::default()).await,
    );
    let template_api: Api<PodTemplate> = Api::namespaced(client.clone(), ns);
    for i in 0..r.pod_sets as usize {
        let name = provisioning::template_name(&r.name, i);
        shared.metrics.api_write("podtemplate");
        ok_or_gone(
            &format!("PodTemplate {ns}/{name}"),
            template_api.delete(&name, &DeleteParams::default()).await,
        );
    }
    debug!(request = %format!("{ns}/{}", r.name), why = %r.why, "ProvisioningRequest deleted");
}
