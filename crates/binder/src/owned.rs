//! Writes to the objects Caldera's own controllers keep: the default and root Queues, the
//! PodGroups derived from workloads, and the HyperNodes discovered from node labels with every
//! HyperNode's `status.nodeCount` (`caldera_runtime`'s controllers decide them from the index;
//! [`crate::Binder::write_objects`] carries them out).
//!
//! They are reports (see the crate docs): one per object and kind of write, the newest
//! replacing a waiting one (each controller states what the object must be now, not a step
//! towards it), behind the binds, under the same rate limit and per-object backoff as every
//! other write. A `409` on create and a `404` on delete mean the object already is as wanted.

use crate::error::{Error, Result, WriteKind};
use crate::writes::{self, Part};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PostParams,
    Preconditions,
};
use kube::Client;
use serde_json::Value;
use std::sync::Arc;

/// Which kind of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owned {
    /// A Volcano Queue (`scheduling.volcano.sh/v1beta1`, cluster-scoped).
    Queue,
    /// A Volcano PodGroup (`scheduling.volcano.sh/v1beta1`).
    PodGroup,
    /// A Volcano HyperNode (`topology.volcano.sh/v1alpha1`, cluster-scoped).
    HyperNode,
}

impl Owned {
    /// The resource, as the list of API calls names it.
    fn resource(self) -> &'static caldera_api::calls::Resource {
        match self {
            Owned::Queue => &caldera_api::calls::QUEUES.resource,
            Owned::PodGroup => &caldera_api::calls::PODGROUPS.resource,
            Owned::HyperNode => &caldera_api::calls::HYPERNODES.resource,
        }
    }

    fn api_resource(self) -> ApiResource {
        let r = self.resource();
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(r.group, r.version, r.kind),
            r.plural,
        )
    }
}

/// What to do to the object.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectOp {
    /// `POST` this object (its `metadata.name` must be the write's name).
    Create(Value),
    /// `PATCH` (JSON merge patch) of the object.
    Patch(Value),
    /// `PATCH` (JSON merge patch) of its `status` subresource.
    PatchStatus(Value),
    /// `DELETE`, with the uid as a precondition when given (an object of that name made since
    /// is not the one meant).
    Delete {
        /// The uid the object must still have.
        uid: Option<String>,
    },
}

/// One write to an object a controller of Caldera's keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectWrite {
    /// Which kind.
    pub kind: Owned,
    /// Its namespace (`None`: cluster-scoped).
    pub namespace: Option<Arc<str>>,
    /// Its name.
    pub name: Arc<str>,
    /// What to do.
    pub op: ObjectOp,
}

impl ObjectWrite {
    /// The kind of write, for metrics and for what coalesces: a status patch never replaces a
    /// waiting write of the object itself.
    pub fn write_kind(&self) -> WriteKind {
        match (self.kind, &self.op) {
            (Owned::Queue, _) => WriteKind::Queue,
            (Owned::PodGroup, _) => WriteKind::PodGroup,
            (Owned::HyperNode, ObjectOp::PatchStatus(_)) => WriteKind::HyperNodeStatus,
            (Owned::HyperNode, _) => WriteKind::HyperNode,
        }
    }

    /// `namespace/name`, or the name of a cluster-scoped object.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.to_string(),
        }
    }

    fn api(&self, client: &Client) -> Api<DynamicObject> {
        let resource = self.kind.api_resource();
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        }
    }

    /// Sends it; `Ok` also when the object already is as wanted (409 on create, 404 on
    /// delete). The object's new resourceVersion, when the answer has one.
    pub(crate) async fn send(
        &self,
        client: &Client,
        field_manager: &str,
    ) -> Result<Option<String>> {
        let api = self.api(client);
        let (kind, object) = (self.write_kind(), self.key());
        let failed = |source| Error::Write {
            kind,
            object: object.clone(),
            source,
        };
        let result = match &self.op {
            ObjectOp::Create(body) => {
                let mut created: DynamicObject = serde_json::from_value(body.clone())
                    .map_err(|e| failed(kube::Error::SerdeError(e)))?;
                let resource = self.kind.api_resource();
                created.types = Some(kube::api::TypeMeta {
                    api_version: resource.api_version,
                    kind: resource.kind,
                });
                let params = PostParams {
                    field_manager: Some(field_manager.to_string()),
                    ..PostParams::default()
                };
                api.create(&params, &created)
                    .await
                    .map(|o| o.metadata.resource_version)
                    .map_err(failed)
            }
            ObjectOp::Patch(patch) | ObjectOp::PatchStatus(patch) => {
                let part = if matches!(self.op, ObjectOp::PatchStatus(_)) {
                    Part::Status
                } else {
                    Part::Object
                };
                let (name, patch) = (&self.name, Patch::Merge(patch.clone()));
                writes::patch_object(&api, field_manager, name, part, patch, kind, object.clone())
                    .await
            }
            ObjectOp::Delete { uid } => {
                let params = DeleteParams {
                    preconditions: uid.clone().map(|uid| Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteParams::default()
                };
                api.delete(&self.name, &params)
                    .await
                    .map(|_| None)
                    .map_err(failed)
            }
        };
        match result {
            Ok(rv) => {
                // HyperNodes are many and their controller says what a round changed.
                if self.kind == Owned::HyperNode {
                    tracing::debug!(object = %object, "{}", self.done());
                } else {
                    tracing::info!(object = %object, "{}", self.done());
                }
                Ok(rv)
            }
            Err(e)
                if (e.code() == Some(409) && matches!(self.op, ObjectOp::Create(_)))
                    || (e.code() == Some(404) && matches!(self.op, ObjectOp::Delete { .. })) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// What the log says once it is done.
    fn done(&self) -> String {
        let what = self.kind.resource().kind;
        match &self.op {
            ObjectOp::Create(_) => format!("created {what}"),
            ObjectOp::Patch(_) => format!("updated {what}"),
            ObjectOp::PatchStatus(_) => format!("updated the status of {what}"),
            ObjectOp::Delete { .. } => format!("deleted {what}"),
        }
    }
}
