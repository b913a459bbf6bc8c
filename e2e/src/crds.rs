//! The CRDs a live run needs: installed when missing and waited for until their resources are
//! served (Caldera's own, the autoscaler's ProvisioningRequest; [`crate::workloads`] installs the
//! workload kinds' through `install`).

use crate::error::{status_code, Error, Result};
use caldera_sim::manifest::Kind;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::Client;
use serde_json::Value;
use std::time::Duration;
use tokio::time::Instant;
use tracing::info;

/// Installs the PodGroup, Queue and HyperNode CRDs if missing and waits until they are established and
/// their resources served. An existing CRD is left as it is.
pub async fn install_crds(client: &Client, timeout: Duration, poll: Duration) -> Result<()> {
    install(client, caldera_api::crds(), true, timeout, poll).await?;
    wait_served(
        client,
        &[Kind::PodGroup, Kind::Queue, Kind::HyperNode],
        timeout,
        poll,
    )
    .await
}

/// Waits until each kind (of a CRD just installed) can be listed: an established CRD is
/// served a moment later.
pub(crate) async fn wait_served(
    client: &Client,
    kinds: &[Kind],
    timeout: Duration,
    poll: Duration,
) -> Result<()> {
    for &kind in kinds {
        let deadline = Instant::now() + timeout;
        loop {
            match crate::objects::api(client, kind, None)
                .list(&ListParams::default().limit(1))
                .await
            {
                Ok(_) => break,
                Err(e) if status_code(&e) == Some(404) && Instant::now() < deadline => {
                    tokio::time::sleep(poll).await;
                }
                Err(e) => return Err(Error::api("list", format!("{kind}s"), e)),
            }
        }
    }
    Ok(())
}

/// Each version's name and schema, to tell whether a CRD on the cluster is ours.
fn schemas(crd: &CustomResourceDefinition) -> Vec<(String, Option<Value>)> {
    crd.spec
        .versions
        .iter()
        .map(|v| {
            (
                v.name.clone(),
                v.schema.as_ref().and_then(|s| serde_json::to_value(s).ok()),
            )
        })
        .collect()
}

/// Installs the ProvisioningRequest CRD (cluster-autoscaler's, as `caldera_api` describes it)
/// if missing, and waits until ProvisioningRequests are served. An existing CRD (a cluster's
/// own autoscaler installed it) is left as it is.
pub async fn install_provisioning_crd(
    client: &Client,
    timeout: Duration,
    poll: Duration,
) -> Result<()> {
    install(
        client,
        vec![caldera_api::provisioning_request_crd()],
        false,
        timeout,
        poll,
    )
    .await?;
    let api: Api<caldera_api::ProvisioningRequest> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    loop {
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => return Ok(()),
            Err(e) if status_code(&e) == Some(404) && Instant::now() < deadline => {
                tokio::time::sleep(poll).await;
            }
            Err(e) => return Err(Error::api("list", "ProvisioningRequests", e)),
        }
    }
}

/// Creates each CRD that is missing and waits until it is established. With `update`, an
/// existing CRD whose schemas differ from ours (an older Caldera's, without a newer status
/// field the API server would prune) is replaced by ours.
pub(crate) async fn install(
    client: &Client,
    crds: Vec<CustomResourceDefinition>,
    update: bool,
    timeout: Duration,
    poll: Duration,
) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let what = format!("CustomResourceDefinition {name}");
        let existing = api
            .get_opt(&name)
            .await
            .map_err(|e| Error::api("get", what.clone(), e))?;
        match existing {
            None => match api.create(&PostParams::default(), &crd).await {
                Ok(_) => info!(crd = %name, "installed"),
                Err(e) if status_code(&e) == Some(409) => {}
                Err(e) => return Err(Error::api("create", what, e)),
            },
            Some(old) if update && schemas(&old) != schemas(&crd) => {
                let mut new = crd.clone();
                new.metadata.resource_version = old.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &new)
                    .await
                    .map_err(|e| Error::api("replace", what.clone(), e))?;
                info!(crd = %name, "updated to this build's schema");
            }
            Some(_) => {}
        }
        let deadline = Instant::now() + timeout;
        loop {
            let current = api
                .get(&name)
                .await
                .map_err(|e| Error::api("get", what.clone(), e))?;
            let established = current
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c.type_ == "Established" && c.status == "True")
                });
            if established {
                break;
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{what} to be established"),
                    after: timeout,
                });
            }
            tokio::time::sleep(poll).await;
        }
    }
    Ok(())
}
