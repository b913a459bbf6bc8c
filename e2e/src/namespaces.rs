//! The namespaces (and their `default` ServiceAccounts) a run needs: made when missing,
//! labelled as a scenario's Namespace manifests say, and put back afterwards.
//!
//! A namespace the run made is deleted at cleanup. One that existed before (`default`, say)
//! is only relabelled: its labels before the first change are kept in the annotation
//! [`LABELS_BEFORE`], and cleanup (or the next run's leftover removal, if this one was
//! interrupted) puts them back and removes the annotation.

use crate::error::{is_refusal, status_code, status_message, Error, Result};
use crate::objects::{merge_diff, RUN_LABEL};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use tokio::time::Instant;

/// On a namespace that existed before the run and that a scenario relabels: its labels
/// before that, as a JSON object.
pub const LABELS_BEFORE: &str = "e2e.caldera.sh/labels-before";

/// The namespaces of one run.
pub struct Namespaces {
    client: Client,
    run_id: String,
    wait_timeout: Duration,
    poll: Duration,
    known: HashSet<String>,
    created: Vec<String>,
    service_accounts: Vec<String>,
    /// The labels last applied per namespace (the base of the next apply's merge patch).
    applied: HashMap<String, Value>,
    /// Namespaces that existed before the run and were relabelled.
    relabelled: Vec<String>,
}

impl std::fmt::Debug for Namespaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Namespaces")
            .field("created", &self.created)
            .field("relabelled", &self.relabelled)
            .finish_non_exhaustive()
    }
}

impl Namespaces {
    /// Nothing made yet.
    pub fn new(client: Client, run_id: &str, wait_timeout: Duration, poll: Duration) -> Self {
        Namespaces {
            client,
            run_id: run_id.to_string(),
            wait_timeout,
            poll,
            known: HashSet::new(),
            created: Vec::new(),
            service_accounts: Vec::new(),
            applied: HashMap::new(),
            relabelled: Vec::new(),
        }
    }

    fn api(&self) -> Api<Namespace> {
        Api::all(self.client.clone())
    }

    fn run_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(RUN_LABEL.to_string(), self.run_id.clone())])
    }

    /// Creates `namespace` if it is missing; waits out a namespace still terminating.
    pub async fn ensure(&mut self, namespace: &str) -> Result<()> {
        if self.known.contains(namespace) {
            return Ok(());
        }
        let api = self.api();
        let what = format!("Namespace {namespace}");
        let deadline = Instant::now() + self.wait_timeout;
        loop {
            let existing = api
                .get_opt(namespace)
                .await
                .map_err(|e| Error::api("get", what.clone(), e))?;
            match existing {
                Some(ns) if ns.metadata.deletion_timestamp.is_none() => break,
                Some(_) => {
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout {
                            what: format!("{what} to finish terminating"),
                            after: self.wait_timeout,
                        });
                    }
                    tokio::time::sleep(self.poll).await;
                }
                None => {
                    let ns = Namespace {
                        metadata: ObjectMeta {
                            name: Some(namespace.into()),
                            labels: Some(self.run_labels()),
                            ..ObjectMeta::default()
                        },
                        ..Namespace::default()
                    };
                    match api.create(&PostParams::default(), &ns).await {
                        Ok(_) => {
                            self.created.push(namespace.to_string());
                            break;
                        }
                        Err(e) if status_code(&e) == Some(409) => continue,
                        Err(e) => return Err(Error::api("create", what, e)),
                    }
                }
            }
        }
        self.known.insert(namespace.to_string());
        Ok(())
    }

    /// Makes the `default` ServiceAccount of `namespace` (no controller may run to make it;
    /// ServiceAccount admission refuses pods without it).
    pub async fn ensure_service_account(&mut self, namespace: &str) -> Result<()> {
        let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let sa = ServiceAccount {
            metadata: ObjectMeta {
                name: Some("default".into()),
                namespace: Some(namespace.into()),
                labels: Some(self.run_labels()),
                ..ObjectMeta::default()
            },
            ..ServiceAccount::default()
        };
        match api.create(&PostParams::default(), &sa).await {
            Ok(_) => {
                self.service_accounts.push(namespace.to_string());
                Ok(())
            }
            Err(e) if status_code(&e) == Some(409) => Ok(()),
            Err(e) => Err(Error::api(
                "create",
                format!("ServiceAccount {namespace}/default"),
                e,
            )),
        }
    }

    /// Applies a Namespace manifest: made if missing, then its labels set as `kubectl apply`
    /// does (a label the previous manifest had and this one drops is removed; the first apply
    /// to a namespace that existed before adds to its labels). The inner error is the server
    /// refusing the labels.
    pub async fn apply(&mut self, name: &str, manifest: &Value) -> Result<Result<(), String>> {
        self.ensure(name).await?;
        let labels = match &manifest["metadata"]["labels"] {
            labels @ Value::Object(_) => labels.clone(),
            _ => json!({}),
        };
        let wanted = json!({"metadata": {"labels": labels}});
        let patch = match self.applied.get(name) {
            Some(old) => merge_diff(old, &wanted),
            None => wanted.clone(),
        };
        let current = self
            .api()
            .get(name)
            .await
            .map_err(|e| Error::api("get", format!("Namespace {name}"), e))?;
        let now = current.metadata.labels.clone().unwrap_or_default();
        let changes: Map<String, Value> = patch["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| match v {
                Value::Null => now.contains_key(*k),
                v => now.get(*k).map(|n| json!(n)).as_ref() != Some(*v),
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        self.applied.insert(name.to_string(), wanted);
        if changes.is_empty() {
            return Ok(Ok(()));
        }
        let mut patch = json!({"metadata": {"labels": changes}});
        let ours = self.created.iter().any(|n| n == name);
        if !ours {
            let noted = current
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(LABELS_BEFORE));
            if !noted {
                patch["metadata"]["annotations"] = json!({ LABELS_BEFORE: json!(now).to_string() });
            }
            if !self.relabelled.iter().any(|n| n == name) {
                self.relabelled.push(name.to_string());
            }
        }
        match self
            .api()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(Ok(())),
            Err(e) if is_refusal(&e) => Ok(Err(status_message(&e))),
            Err(e) => Err(Error::api("patch", format!("Namespace {name}"), e)),
        }
    }

    /// Puts back the labels of every namespace relabelled by a run (this one, or an earlier
    /// one that was interrupted) and removes the annotation. Returns how many.
    pub async fn restore_relabelled(&mut self) -> Result<usize> {
        let api = self.api();
        let list = api
            .list(&kube::api::ListParams::default())
            .await
            .map_err(|e| Error::api("list", "namespaces", e))?;
        let mut restored = 0;
        for ns in list.items {
            let annotations = ns.metadata.annotations.clone().unwrap_or_default();
            let Some(before) = annotations.get(LABELS_BEFORE) else {
                continue;
            };
            let name = ns.metadata.name.clone().unwrap_or_default();
            let before: Map<String, Value> = serde_json::from_str(before).map_err(|e| {
                Error::Input(format!(
                    "Namespace {name}: annotation {LABELS_BEFORE} is not a JSON object of labels: {e}"
                ))
            })?;
            let now = json!(ns.metadata.labels.unwrap_or_default());
            let mut patch =
                json!({"metadata": {"labels": merge_diff(&now, &Value::Object(before))}});
            patch["metadata"]["annotations"] = json!({ LABELS_BEFORE: null });
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|e| Error::api("patch", format!("Namespace {name}"), e))?;
            restored += 1;
        }
        self.relabelled.clear();
        Ok(restored)
    }

    /// Deletes the ServiceAccounts and namespaces this run made and puts back the labels of
    /// the ones it relabelled. Namespaces are not waited for: without the namespace
    /// controller a real server keeps them Terminating; a later run that needs one waits (see
    /// [`Namespaces::ensure`]).
    pub async fn cleanup(&mut self) -> Result<()> {
        for ns in std::mem::take(&mut self.service_accounts) {
            let api: Api<ServiceAccount> = Api::namespaced(self.client.clone(), &ns);
            match api.delete("default", &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => {
                    return Err(Error::api(
                        "delete",
                        format!("ServiceAccount {ns}/default"),
                        e,
                    ))
                }
            }
        }
        if !self.relabelled.is_empty() {
            self.restore_relabelled().await?;
        }
        let api = self.api();
        for ns in std::mem::take(&mut self.created) {
            match api.delete(&ns, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => return Err(Error::api("delete", format!("Namespace {ns}"), e)),
            }
        }
        self.known.clear();
        self.applied.clear();
        Ok(())
    }
}
