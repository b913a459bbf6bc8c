//! An autoscaler serving ProvisioningRequests, against any API server: one turn reads every
//! request, the PodTemplates and the Nodes, asks `caldera_actors::autoscaler::step` what
//! cluster-autoscaler would do now, and does it (creates Nodes, writes request conditions
//! through the `status` subresource). On a real cluster with the ProvisioningRequest CRD
//! installed and no cluster-autoscaler, this is what the test plays.

use crate::error::{Error, Result};
use crate::roles::node_lifecycle::sync_not_ready_taint;
use caldera_actors::autoscaler::{set_condition, step, Action, Settings};
use caldera_api::ProvisioningRequest;
use caldera_model::Time;
use k8s_openapi::api::core::v1::{Node, PodTemplate};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The autoscaler a live run plays when its scenario has `spec.autoscaler`: its settings, the
/// labels of the Nodes it adds, and every request it has seen, per PodGroup (for `expect`'s
/// `created`, since deleted requests leave nothing behind).
#[derive(Debug)]
pub struct Autoscaler {
    settings: Settings,
    labels: BTreeMap<String, String>,
    seen: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl Autoscaler {
    /// An autoscaler with `settings` whose Nodes carry `labels`.
    pub fn new(settings: Settings, labels: BTreeMap<String, String>) -> Self {
        Autoscaler {
            settings,
            labels,
            seen: Mutex::new(BTreeMap::new()),
        }
    }

    /// One turn at the wall clock (see [`turn`]).
    pub async fn turn(&self, client: &Client, timeout: Duration) -> Result<usize> {
        let mut seen = Vec::new();
        let writes = turn(
            client,
            &self.settings,
            &self.labels,
            wall_clock(),
            timeout,
            &mut seen,
        )
        .await?;
        let mut all = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for (podgroup, name) in seen {
            all.entry(podgroup).or_default().insert(name);
        }
        Ok(writes)
    }

    /// How many distinct requests it has seen per PodGroup (`namespace/name`).
    pub fn seen_counts(&self) -> BTreeMap<String, usize> {
        let all = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        all.iter().map(|(k, v)| (k.clone(), v.len())).collect()
    }
}

/// The wall clock as the actors take it.
pub fn wall_clock() -> Time {
    Time(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    )
}

/// One autoscaler turn at `now`. Nodes it adds carry `labels` besides the template's (the
/// driver's run label, so cleanup finds them). Caldera's requests it lists are added to
/// `seen` as (PodGroup `namespace/name`, request name). Returns how many writes it made.
pub async fn turn(
    client: &Client,
    settings: &Settings,
    labels: &BTreeMap<String, String>,
    now: Time,
    timeout: Duration,
    seen: &mut Vec<(String, String)>,
) -> Result<usize> {
    let prs: Api<ProvisioningRequest> = Api::all(client.clone());
    let templates: Api<PodTemplate> = Api::all(client.clone());
    let nodes: Api<Node> = Api::all(client.clone());
    let lp = ListParams::default();
    let requests = prs
        .list(&lp)
        .await
        .map_err(|e| Error::api("list", "ProvisioningRequests", e))?
        .items;
    for pr in &requests {
        if let Some(info) = caldera_cache::provisioning::request_info(pr) {
            let podgroup = format!("{}/{}", info.request.namespace, info.podgroup);
            seen.push((podgroup, info.request.name.to_string()));
        }
    }
    if requests.is_empty() {
        return Ok(0);
    }
    let templates = templates
        .list(&lp)
        .await
        .map_err(|e| Error::api("list", "PodTemplates", e))?
        .items;
    let existing = nodes
        .list(&lp)
        .await
        .map_err(|e| Error::api("list", "Nodes", e))?
        .items;
    let actions = step(settings, &requests, &templates, &existing, now);
    let mut writes = 0;
    for action in actions {
        match action {
            Action::AddNode(node) => {
                let mut node = *node;
                let name = node.metadata.name.clone().unwrap_or_default();
                node.metadata
                    .labels
                    .get_or_insert_with(Default::default)
                    .extend(labels.clone());
                match nodes.create(&PostParams::default(), &node).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    Err(e) => return Err(Error::api("create", format!("Node {name}"), e)),
                }
                // A real server keeps the status a Node is created with; it adds the
                // not-ready taint, which the node lifecycle controller takes off.
                sync_not_ready_taint(client, &name, timeout).await?;
                writes += 1;
            }
            Action::Condition {
                namespace,
                name,
                condition,
            } => {
                let Some(mut pr) = requests
                    .iter()
                    .find(|p| {
                        p.metadata.name.as_deref() == Some(name.as_str())
                            && p.metadata.namespace.as_deref() == Some(namespace.as_str())
                    })
                    .cloned()
                else {
                    continue;
                };
                set_condition(&mut pr, condition);
                let conditions = pr.status.map(|s| s.conditions).unwrap_or_default();
                let api: Api<ProvisioningRequest> = Api::namespaced(client.clone(), &namespace);
                let patch = json!({"status": {"conditions": conditions}});
                match api
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => writes += 1,
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => {
                        return Err(Error::api(
                            "patch status of",
                            format!("ProvisioningRequest {namespace}/{name}"),
                            e,
                        ))
                    }
                }
            }
        }
    }
    Ok(writes)
}
