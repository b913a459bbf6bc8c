//! Autoscaler requests (a plan's `capacity_requests` and `capacity_releases`) as writes of the
//! [`crate::Class::Report`] class: they wait behind the binds like status writes.
//!
//! Why reports and not acts: a ProvisioningRequest asks cluster-autoscaler for nodes that take
//! minutes to come, and changes nothing about what runs where now; sent in the middle of a bind
//! backlog it would only slow the binds (binds first), and a few seconds behind them it is as
//! good. It is never dropped on the way, and it still gets its turn under the token share.
//!
//! All writes for one PodGroup's requests form one [`CapacityWrites`], in plan order (a retry
//! deletes the old request and creates the next one): they coalesce on the PodGroup, and a
//! newer plan's operations are appended to the waiting ones, an operation already waiting not
//! twice (a session that runs before the watch shows an earlier create plans it again). Since
//! writes to one target go one at a time, a PodGroup's operations never overtake each other:
//! the consume annotations a release removes are never removed after the next attempt wrote
//! its own.
//!
//! Each operation is a few requests, every one idempotent (`409 AlreadyExists` and
//! `404 NotFound` are success; names are deterministic), so a write retried from the start
//! repeats them harmlessly: a create is the PodTemplates, then the request, then the members'
//! consume annotations (after the request exists, or cluster-autoscaler would leave the
//! members to a request that never comes); a release is the request, its PodTemplates, then
//! the consume annotations of members still waiting that name this request (as the snapshot
//! saw them; a merge patch with the pod's uid). Every request takes a token from
//! the client's bucket, and while acts are queued every request after the first (which the
//! pump's share token paid for) takes one from the share too.

use crate::error::{Error, Result, WriteKind};
use crate::Inner;
use caldera_api::{
    ProvisioningRequest, ANNOTATION_CONSUME_PROVISIONING_REQUEST, ANNOTATION_PROVISIONING_CLASS,
};
use caldera_cache::provisioning;
use caldera_model::{CapacityNeed, CapacityRelease, ConsumingPod};
use k8s_openapi::api::core::v1::{Pod, PodTemplate};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{json, Value};
use std::sync::Arc;
use tracing::{debug, info};

/// One operation on a PodGroup's autoscaler requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CapacityOp {
    /// Delete the request and its PodTemplates; waiting members stop consuming it.
    Release(CapacityRelease),
    /// Create the PodTemplates and the request; waiting members consume it.
    Create(CapacityNeed),
}

/// A PodGroup's autoscaler writes, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CapacityWrites {
    /// Namespace of the PodGroup (and of its requests).
    pub namespace: Arc<str>,
    /// The PodGroup.
    pub podgroup: Arc<str>,
    /// What to do, oldest first.
    pub ops: Vec<CapacityOp>,
}

impl CapacityWrites {
    /// The writes of one release.
    pub fn release(r: CapacityRelease) -> Self {
        CapacityWrites {
            namespace: r.namespace.clone(),
            podgroup: r.podgroup.clone(),
            ops: vec![CapacityOp::Release(r)],
        }
    }

    /// The writes of one create.
    pub fn create(n: CapacityNeed) -> Self {
        CapacityWrites {
            namespace: n.namespace.clone(),
            podgroup: n.podgroup.clone(),
            ops: vec![CapacityOp::Create(n)],
        }
    }

    /// Appends `newer`'s operations that are not already waiting here.
    pub fn absorb(&mut self, newer: CapacityWrites) {
        for op in newer.ops {
            if !self.ops.contains(&op) {
                self.ops.push(op);
            }
        }
    }

    /// Carries the operations out in order; stops at the first failure (the whole write is
    /// retried: every request is idempotent). `false` from the token wait means leadership was
    /// lost: stop.
    pub async fn send(&self, inner: &Inner, epoch: u64) -> Result<Option<String>> {
        let mut first = true;
        for op in &self.ops {
            let done = match op {
                CapacityOp::Create(n) => create(inner, epoch, &mut first, n).await?,
                CapacityOp::Release(r) => release(inner, epoch, &mut first, r).await?,
            };
            if !done {
                break;
            }
        }
        Ok(None)
    }
}

fn failed(kind: WriteKind, namespace: &str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let object = format!("{namespace}/{name}");
    move |source| Error::Write {
        kind,
        object,
        source,
    }
}

/// `Ok` for success, `409 AlreadyExists` (a create) and `404 NotFound` (a delete, a patch of a
/// pod that is gone).
fn settled<T>(r: std::result::Result<T, kube::Error>) -> std::result::Result<(), kube::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

async fn create(inner: &Inner, epoch: u64, first: &mut bool, need: &CapacityNeed) -> Result<bool> {
    let (pr, templates) = provisioning::build(need);
    let ns = &*need.namespace;
    let client = &inner.client;
    let template_api: Api<PodTemplate> = Api::namespaced(client.clone(), ns);
    for t in &templates {
        if !inner
            .follower_token(WriteKind::PodTemplate, first, epoch)
            .await
        {
            return Ok(false);
        }
        let name = t.metadata.name.as_deref().unwrap_or_default();
        settled(template_api.create(&PostParams::default(), t).await).map_err(failed(
            WriteKind::PodTemplate,
            ns,
            name,
        ))?;
    }
    if !inner
        .follower_token(WriteKind::ProvisioningRequest, first, epoch)
        .await
    {
        return Ok(false);
    }
    let pr_api: Api<ProvisioningRequest> = Api::namespaced(client.clone(), ns);
    settled(pr_api.create(&PostParams::default(), &pr).await).map_err(failed(
        WriteKind::ProvisioningRequest,
        ns,
        &need.name,
    ))?;
    info!(request = %format!("{ns}/{}", need.name), podgroup = %need.podgroup, attempt = need.attempt,
          pods = need.pod_sets.iter().map(|p| p.count).sum::<u32>(), "ProvisioningRequest created");
    let annotations = provisioning::consume_annotations(need);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for p in &need.pods {
        if !inner
            .follower_token(WriteKind::ConsumeAnnotations, first, epoch)
            .await
        {
            return Ok(false);
        }
        let patch = json!({"metadata": {"uid": &*p.uid, "annotations": annotations}});
        let r = pods
            .patch(&p.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        match r {
            // The uid differs: the pod was re-created under the same name.
            Err(kube::Error::Api(s)) if s.code == 422 => {
                debug!(pod = %format!("{ns}/{}", p.name), "not annotated: the pod was replaced")
            }
            r => settled(r).map_err(failed(WriteKind::ConsumeAnnotations, ns, &p.name))?,
        }
    }
    Ok(true)
}

async fn release(inner: &Inner, epoch: u64, first: &mut bool, r: &CapacityRelease) -> Result<bool> {
    let ns = &*r.namespace;
    let client = &inner.client;
    if !inner
        .follower_token(WriteKind::ProvisioningRequest, first, epoch)
        .await
    {
        return Ok(false);
    }
    let pr_api: Api<ProvisioningRequest> = Api::namespaced(client.clone(), ns);
    settled(pr_api.delete(&r.name, &DeleteParams::default()).await).map_err(failed(
        WriteKind::ProvisioningRequest,
        ns,
        &r.name,
    ))?;
    let template_api: Api<PodTemplate> = Api::namespaced(client.clone(), ns);
    for i in 0..r.pod_sets as usize {
        if !inner
            .follower_token(WriteKind::PodTemplate, first, epoch)
            .await
        {
            return Ok(false);
        }
        let name = provisioning::template_name(&r.name, i);
        settled(template_api.delete(&name, &DeleteParams::default()).await).map_err(failed(
            WriteKind::PodTemplate,
            ns,
            &name,
        ))?;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    for p in &r.pods {
        if !inner
            .follower_token(WriteKind::ConsumeAnnotations, first, epoch)
            .await
        {
            return Ok(false);
        }
        let patch = Patch::Merge(stop_consuming_patch(p));
        match pods.patch(&p.name, &PatchParams::default(), &patch).await {
            // The uid differs: the pod was re-created under the same name.
            Err(kube::Error::Api(s)) if s.code == 422 => {
                debug!(pod = %format!("{ns}/{}", p.name), "annotations left: the pod was replaced")
            }
            other => settled(other).map_err(failed(WriteKind::ConsumeAnnotations, ns, &p.name))?,
        }
    }
    debug!(request = %format!("{ns}/{}", r.name), why = %r.why, pods = r.pods.len(), "ProvisioningRequest deleted");
    Ok(true)
}

/// The merge patch removing the consume annotations of `pod`, with its uid (a pod re-created
/// under the same name is left alone).
pub fn stop_consuming_patch(pod: &ConsumingPod) -> Value {
    json!({"metadata": {
        "uid": &*pod.uid,
        "annotations": {
            ANNOTATION_CONSUME_PROVISIONING_REQUEST: null,
            ANNOTATION_PROVISIONING_CLASS: null,
        },
    }})
}
