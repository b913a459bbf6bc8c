//! Reading Kubernetes manifests: multi-document YAML into typed objects, with errors that name
//! the file, the document and the field path.
//!
//! Only the kinds the scheduler looks at are kept (Node, Pod, PodGroup, Queue, PriorityClass,
//! HyperNode, Namespace, PodDisruptionBudget, PersistentVolume, PersistentVolumeClaim,
//! StorageClass, CSINode, the DRA kinds DeviceClass, ResourceSlice, ResourceClaim and
//! ResourceClaimTemplate, and `batch/v1` Job, JobSet, LeaderWorkerSet, `apps/v1` ReplicaSet and
//! Deployment, whose controllers the simulator plays). Other workload kinds whose pods a
//! controller would create (DaemonSet, ...) are
//! skipped with one notice per kind, since no controllers run for them; other kinds
//! are skipped with a notice that they do not affect scheduling. In plain manifests
//! ([`parse_stream`]) `apps/v1` StatefulSets are kept apart ([`Manifests::statefulsets`]) for
//! the simulator to play their controller; a scenario names its pods instead.

use crate::error::{Error, Origin, Result};
use caldera_api::{HyperNode, PodGroup, Queue};
use caldera_cache::derive::Workload;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::scheduling::v1alpha2::{
    PodGroup as NativePodGroup, Workload as NativeWorkload,
};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeSet;
use std::fmt;

/// A kind the simulator keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1` Namespace.
    Namespace,
    /// `scheduling.k8s.io/v1` PriorityClass.
    PriorityClass,
    /// `scheduling.volcano.sh/v1beta1` Queue.
    Queue,
    /// `v1` Node.
    Node,
    /// `topology.volcano.sh/v1alpha1` HyperNode.
    HyperNode,
    /// `scheduling.volcano.sh/v1beta1` PodGroup.
    PodGroup,
    /// `scheduling.k8s.io/v1alpha2` Workload (Kubernetes' own gang API).
    Workload,
    /// `scheduling.k8s.io/v1alpha2` PodGroup (Kubernetes' own; `PodGroup.scheduling.k8s.io`
    /// in a `delete` step, where a bare `PodGroup` is Volcano's).
    NativePodGroup,
    /// `v1` Pod.
    Pod,
    /// `policy/v1` PodDisruptionBudget.
    PodDisruptionBudget,
    /// `storage.k8s.io/v1` StorageClass.
    StorageClass,
    /// `storage.k8s.io/v1` CSINode.
    CSINode,
    /// `v1` PersistentVolume.
    PersistentVolume,
    /// `v1` PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// `batch/v1` Job (its controller is played: docs/workloads.md).
    Job,
    /// `jobset.x-k8s.io` JobSet (its controller is played: docs/workloads.md).
    JobSet,
    /// `leaderworkerset.x-k8s.io` LeaderWorkerSet (its controller is played).
    LeaderWorkerSet,
    /// `resource.k8s.io/v1` DeviceClass.
    DeviceClass,
    /// `resource.k8s.io/v1` ResourceSlice (published as a DRA driver would).
    ResourceSlice,
    /// `resource.k8s.io/v1` ResourceClaim.
    ResourceClaim,
    /// `resource.k8s.io/v1` ResourceClaimTemplate.
    ResourceClaimTemplate,
    /// `apps/v1` ReplicaSet (its controller is played: [`caldera_actors::replicaset`]).
    ReplicaSet,
    /// `apps/v1` Deployment (its controller is played, in outline:
    /// [`caldera_actors::replicaset::sync_deployment`]).
    Deployment,
}

impl Kind {
    /// Every kept kind.
    pub const ALL: [Kind; 23] = [
        Kind::Namespace,
        Kind::PriorityClass,
        Kind::Queue,
        Kind::Node,
        Kind::HyperNode,
        Kind::PodGroup,
        Kind::Workload,
        Kind::NativePodGroup,
        Kind::Pod,
        Kind::PodDisruptionBudget,
        Kind::StorageClass,
        Kind::CSINode,
        Kind::PersistentVolume,
        Kind::PersistentVolumeClaim,
        Kind::Job,
        Kind::JobSet,
        Kind::LeaderWorkerSet,
        Kind::DeviceClass,
        Kind::ResourceSlice,
        Kind::ResourceClaim,
        Kind::ResourceClaimTemplate,
        Kind::ReplicaSet,
        Kind::Deployment,
    ];

    /// The `kind` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Namespace => "Namespace",
            Kind::PriorityClass => "PriorityClass",
            Kind::Queue => "Queue",
            Kind::Node => "Node",
            Kind::HyperNode => "HyperNode",
            Kind::PodGroup => "PodGroup",
            Kind::Pod => "Pod",
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::StorageClass => "StorageClass",
            Kind::CSINode => "CSINode",
            Kind::PersistentVolume => "PersistentVolume",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::Job => "Job",
            Kind::Workload => "Workload",
            Kind::NativePodGroup => "PodGroup",
            Kind::JobSet => "JobSet",
            Kind::LeaderWorkerSet => "LeaderWorkerSet",
            Kind::DeviceClass => "DeviceClass",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::ResourceClaimTemplate => "ResourceClaimTemplate",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::Deployment => "Deployment",
        }
    }

    /// The API group (empty for the core group).
    pub fn group(self) -> &'static str {
        match self {
            Kind::Namespace
            | Kind::Node
            | Kind::Pod
            | Kind::PersistentVolume
            | Kind::PersistentVolumeClaim => "",
            Kind::StorageClass | Kind::CSINode => "storage.k8s.io",
            Kind::PriorityClass | Kind::Workload | Kind::NativePodGroup => "scheduling.k8s.io",
            Kind::Queue | Kind::PodGroup => "scheduling.volcano.sh",
            Kind::HyperNode => "topology.volcano.sh",
            Kind::PodDisruptionBudget => "policy",
            Kind::Job => "batch",
            Kind::JobSet => "jobset.x-k8s.io",
            Kind::LeaderWorkerSet => "leaderworkerset.x-k8s.io",
            Kind::DeviceClass
            | Kind::ResourceSlice
            | Kind::ResourceClaim
            | Kind::ResourceClaimTemplate => "resource.k8s.io",
            Kind::ReplicaSet | Kind::Deployment => "apps",
        }
    }

    /// Whether objects of this kind live in a namespace.
    pub fn namespaced(self) -> bool {
        matches!(
            self,
            Kind::Pod
                | Kind::PodGroup
                | Kind::PodDisruptionBudget
                | Kind::PersistentVolumeClaim
                | Kind::Job
                | Kind::Workload
                | Kind::NativePodGroup
                | Kind::JobSet
                | Kind::LeaderWorkerSet
                | Kind::ResourceClaim
                | Kind::ResourceClaimTemplate
                | Kind::ReplicaSet
                | Kind::Deployment
        )
    }

    /// Parses a `kind` value (case-insensitively, as kubectl does for delete), optionally
    /// qualified by its group as kubectl accepts it (`PodGroup.scheduling.k8s.io`); a bare
    /// name shared by two groups is the first kept kind of that name (`PodGroup`: Volcano's).
    pub fn parse(kind: &str) -> Option<Kind> {
        let (name, group) = match kind.split_once('.') {
            Some((n, g)) => (n, Some(g)),
            None => (kind, None),
        };
        Kind::ALL.into_iter().find(|k| {
            k.as_str().eq_ignore_ascii_case(name)
                && group.is_none_or(|g| k.group().eq_ignore_ascii_case(g))
        })
    }

    /// The kind of `kind` in API group `group`, if kept.
    pub fn of(kind: &str, group: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind && k.group() == group)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An object of a kept kind.
// Not boxed: objects are few (a manifest's worth) and moved once into the store, so the size
// of the largest variant costs nothing that matters.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Object {
    /// A Namespace.
    Namespace(Namespace),
    /// A HyperNode.
    HyperNode(HyperNode),
    /// A PriorityClass.
    PriorityClass(PriorityClass),
    /// A Queue.
    Queue(Queue),
    /// A Node.
    Node(Node),
    /// A PodGroup.
    PodGroup(PodGroup),
    /// A Pod.
    Pod(Pod),
    /// A PodDisruptionBudget.
    PodDisruptionBudget(PodDisruptionBudget),
    /// A StorageClass.
    StorageClass(StorageClass),
    /// A CSINode.
    CSINode(CSINode),
    /// A PersistentVolume.
    PersistentVolume(PersistentVolume),
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim(PersistentVolumeClaim),
    /// A `batch/v1` Job.
    Job(Job),
    /// A native Workload.
    Workload(NativeWorkload),
    /// A native PodGroup.
    NativePodGroup(NativePodGroup),
    /// A JobSet, read untyped.
    JobSet(Workload),
    /// A LeaderWorkerSet, read untyped.
    LeaderWorkerSet(Workload),
    /// A DeviceClass.
    DeviceClass(DeviceClass),
    /// A ResourceSlice.
    ResourceSlice(ResourceSlice),
    /// A ResourceClaim.
    ResourceClaim(ResourceClaim),
    /// A ResourceClaimTemplate.
    ResourceClaimTemplate(ResourceClaimTemplate),
    /// An `apps/v1` ReplicaSet.
    ReplicaSet(ReplicaSet),
    /// An `apps/v1` Deployment.
    Deployment(Deployment),
}

impl Object {
    /// The kind.
    pub fn kind(&self) -> Kind {
        match self {
            Object::Namespace(_) => Kind::Namespace,
            Object::PriorityClass(_) => Kind::PriorityClass,
            Object::Queue(_) => Kind::Queue,
            Object::Node(_) => Kind::Node,
            Object::HyperNode(_) => Kind::HyperNode,
            Object::PodGroup(_) => Kind::PodGroup,
            Object::Pod(_) => Kind::Pod,
            Object::PodDisruptionBudget(_) => Kind::PodDisruptionBudget,
            Object::StorageClass(_) => Kind::StorageClass,
            Object::CSINode(_) => Kind::CSINode,
            Object::PersistentVolume(_) => Kind::PersistentVolume,
            Object::PersistentVolumeClaim(_) => Kind::PersistentVolumeClaim,
            Object::Job(_) => Kind::Job,
            Object::Workload(_) => Kind::Workload,
            Object::NativePodGroup(_) => Kind::NativePodGroup,
            Object::JobSet(_) => Kind::JobSet,
            Object::LeaderWorkerSet(_) => Kind::LeaderWorkerSet,
            Object::DeviceClass(_) => Kind::DeviceClass,
            Object::ResourceSlice(_) => Kind::ResourceSlice,
            Object::ResourceClaim(_) => Kind::ResourceClaim,
            Object::ResourceClaimTemplate(_) => Kind::ResourceClaimTemplate,
            Object::ReplicaSet(_) => Kind::ReplicaSet,
            Object::Deployment(_) => Kind::Deployment,
        }
    }

    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Object::Namespace(o) => &o.metadata,
            Object::PriorityClass(o) => &o.metadata,
            Object::Queue(o) => &o.metadata,
            Object::Node(o) => &o.metadata,
            Object::HyperNode(o) => &o.metadata,
            Object::PodGroup(o) => &o.metadata,
            Object::Pod(o) => &o.metadata,
            Object::PodDisruptionBudget(o) => &o.metadata,
            Object::StorageClass(o) => &o.metadata,
            Object::CSINode(o) => &o.metadata,
            Object::PersistentVolume(o) => &o.metadata,
            Object::PersistentVolumeClaim(o) => &o.metadata,
            Object::Job(o) => &o.metadata,
            Object::Workload(o) => &o.metadata,
            Object::NativePodGroup(o) => &o.metadata,
            Object::JobSet(o) | Object::LeaderWorkerSet(o) => &o.metadata,
            Object::DeviceClass(o) => &o.metadata,
            Object::ResourceSlice(o) => &o.metadata,
            Object::ResourceClaim(o) => &o.metadata,
            Object::ResourceClaimTemplate(o) => &o.metadata,
            Object::ReplicaSet(o) => &o.metadata,
            Object::Deployment(o) => &o.metadata,
        }
    }

    /// `metadata.name` (empty when missing; parsing rejects that).
    pub fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or("")
    }

    /// `Kind ns/name` or `Kind name`, for messages.
    pub fn describe(&self) -> String {
        match (&self.meta().namespace, self.kind().namespaced()) {
            (Some(ns), true) => format!("{} {ns}/{}", self.kind(), self.name()),
            (None, true) => format!("{} default/{}", self.kind(), self.name()),
            _ => format!("{} {}", self.kind(), self.name()),
        }
    }
}

/// Kinds whose pods a controller would make: the simulator runs no controllers.
const WORKLOAD_KINDS: [&str; 13] = [
    "StatefulSet",
    "DaemonSet",
    "CronJob",
    "ReplicationController",
    "PyTorchJob",
    "TFJob",
    "MPIJob",
    "XGBoostJob",
    "PaddleJob",
    "JobSet",
    "LeaderWorkerSet",
    "RayJob",
    "RayCluster",
];

/// The message for a skipped workload kind.
pub const NOT_SIMULATED: &str = "not simulated: no controllers run here; give the Pods";

/// Notices about skipped kinds, each kind reported once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Notices {
    seen: BTreeSet<String>,
    /// The notices, in the order first met.
    pub messages: Vec<String>,
}

impl Notices {
    fn skip(&mut self, origin: &Origin, kind: &str, api_version: &str) {
        if !self.seen.insert(format!("{api_version}/{kind}")) {
            return;
        }
        let why = if WORKLOAD_KINDS.contains(&kind) || kind.ends_with("Job") {
            NOT_SIMULATED
        } else {
            "ignored: does not affect scheduling"
        };
        self.messages
            .push(format!("{origin}: {kind} ({api_version}): {why}"));
    }
}

/// Objects read from one stream, each with where it came from.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    /// The objects, in input order.
    pub objects: Vec<(Origin, Object)>,
    /// Skipped kinds.
    pub notices: Notices,
    /// `apps/v1` StatefulSets of plain manifests, in input order (a scenario's are skipped).
    pub statefulsets: Vec<(Origin, StatefulSet)>,
}

/// Reads a multi-document YAML stream of manifests. `file` names it in errors (`-` for stdin).
/// Empty documents are skipped; `v1` `List` objects are expanded.
pub fn parse_stream(text: &str, file: &str) -> Result<Manifests> {
    let mut out = Manifests::default();
    for (i, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let origin = Origin::new(file, i + 1);
        let value = Value::deserialize(document).map_err(|e| Error::Syntax {
            origin: origin.clone(),
            message: e.to_string(),
        })?;
        parse_document(value, &origin, &mut out, true)?;
    }
    Ok(out)
}

/// Reads one object (or a `List`) given as a YAML value found at `origin`, adding it to `out`.
/// StatefulSets are skipped with a notice, as in a scenario.
pub fn parse_value(value: Value, origin: &Origin, out: &mut Manifests) -> Result<()> {
    parse_document(value, origin, out, false)
}

fn parse_document(
    mut value: Value,
    origin: &Origin,
    out: &mut Manifests,
    statefulsets: bool,
) -> Result<()> {
    if value.is_null() {
        return Ok(());
    }
    value.apply_merge().map_err(|e| Error::Invalid {
        origin: origin.clone(),
        message: e.to_string(),
    })?;
    let field = |name: &str| -> Result<String> {
        match value.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            Some(_) => Err(Error::Invalid {
                origin: origin.at(name),
                message: "expected a non-empty string".into(),
            }),
            None => Err(Error::Invalid {
                origin: origin.at(name),
                message: "missing".into(),
            }),
        }
    };
    if !value.is_mapping() {
        return Err(Error::Invalid {
            origin: origin.clone(),
            message: "expected a Kubernetes object (a mapping with apiVersion and kind)".into(),
        });
    }
    let kind_name = field("kind")?;
    let api_version = field("apiVersion")?;
    if kind_name == "List" {
        let items = match value.get("items") {
            Some(Value::Sequence(items)) => items.clone(),
            _ => Vec::new(),
        };
        for (i, item) in items.into_iter().enumerate() {
            parse_document(item, &origin.at(&format!("items[{i}]")), out, statefulsets)?;
        }
        return Ok(());
    }
    if statefulsets && kind_name == "StatefulSet" && api_version == "apps/v1" {
        let set: StatefulSet = typed(value, origin)?;
        if set.metadata.name.as_deref().is_none_or(str::is_empty) {
            return Err(Error::Invalid {
                origin: origin.at("metadata.name"),
                message: "missing".into(),
            });
        }
        out.statefulsets.push((origin.clone(), set));
        return Ok(());
    }
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("");
    let Some(kind) = Kind::of(&kind_name, group) else {
        out.notices.skip(origin, &kind_name, &api_version);
        return Ok(());
    };
    let object = match kind {
        Kind::Namespace => Object::Namespace(typed(value, origin)?),
        Kind::PriorityClass => Object::PriorityClass(typed(value, origin)?),
        Kind::Queue => Object::Queue(typed(value, origin)?),
        Kind::Node => Object::Node(typed(value, origin)?),
        Kind::HyperNode => Object::HyperNode(typed(value, origin)?),
        Kind::PodGroup => Object::PodGroup(typed(value, origin)?),
        Kind::Pod => Object::Pod(typed(value, origin)?),
        Kind::PodDisruptionBudget => Object::PodDisruptionBudget(typed(value, origin)?),
        Kind::StorageClass => Object::StorageClass(typed(value, origin)?),
        Kind::CSINode => Object::CSINode(typed(value, origin)?),
        Kind::PersistentVolume => Object::PersistentVolume(typed(value, origin)?),
        Kind::PersistentVolumeClaim => Object::PersistentVolumeClaim(typed(value, origin)?),
        Kind::Job => Object::Job(typed(value, origin)?),
        Kind::Workload => Object::Workload(typed(value, origin)?),
        Kind::NativePodGroup => Object::NativePodGroup(typed(value, origin)?),
        Kind::JobSet => Object::JobSet(typed(value, origin)?),
        Kind::LeaderWorkerSet => Object::LeaderWorkerSet(typed(value, origin)?),
        Kind::DeviceClass => Object::DeviceClass(typed(value, origin)?),
        Kind::ResourceSlice => Object::ResourceSlice(typed(value, origin)?),
        Kind::ResourceClaim => Object::ResourceClaim(typed(value, origin)?),
        Kind::ResourceClaimTemplate => Object::ResourceClaimTemplate(typed(value, origin)?),
        Kind::ReplicaSet => Object::ReplicaSet(typed(value, origin)?),
        Kind::Deployment => Object::Deployment(typed(value, origin)?),
    };
    if object.name().is_empty() {
        return Err(Error::Invalid {
            origin: origin.at("metadata.name"),
            message: "missing".into(),
        });
    }
    // Refused as kube-apiserver's validation refuses them: a controller with a selector that
    // does not select its own template would make pods it cannot count.
    let selected = match &object {
        Object::ReplicaSet(rs) => rs
            .spec
            .as_ref()
            .map(|s| (Some(&s.selector), s.template.as_ref())),
        Object::Deployment(d) => d
            .spec
            .as_ref()
            .map(|s| (Some(&s.selector), Some(&s.template))),
        _ => None,
    };
    if matches!(object.kind(), Kind::ReplicaSet | Kind::Deployment) {
        let (selector, template) = selected.unwrap_or((None, None));
        if let Err((field, message)) = caldera_actors::replicaset::validate(selector, template) {
            return Err(Error::Invalid {
                origin: origin.at(&field),
                message,
            });
        }
    }
    validate(&object).map_err(|source| Error::Object {
        origin: origin.clone(),
        source: Box::new(source),
    })?;
    out.objects.push((origin.clone(), object));
    Ok(())
}

/// Deserializes `value` as `T`, naming the field path on error.
pub fn typed<T: DeserializeOwned>(value: Value, origin: &Origin) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        Error::Invalid {
            origin: origin.at(if path == "." { "" } else { &path }),
            message: e.into_inner().to_string(),
        }
    })
}

/// Converts the object the way the scheduler will, so bad content fails at load time with the
/// field named, not in the middle of a run.
pub fn validate(object: &Object) -> Result<(), caldera_cache::Error> {
    validate_meta(object)?;
    match object {
        Object::Namespace(_) => Ok(()),
        Object::PriorityClass(pc) => caldera_cache::priority_class(pc).map(drop),
        Object::Queue(q) => caldera_cache::queue(q).map(drop),
        Object::Node(n) => caldera_cache::node(n).map(drop),
        Object::HyperNode(h) => caldera_cache::topology::HyperNodeInfo::try_from(h).map(drop),
        Object::PodGroup(pg) => caldera_cache::GroupInfo::try_from(pg).map(drop),
        Object::Pod(p) => caldera_cache::PodInfo::try_from(p).map(drop),
        Object::StorageClass(sc) => caldera_cache::volumes::class(sc).map(drop),
        Object::PersistentVolume(pv) => caldera_cache::volumes::volume(pv).map(drop),
        Object::PersistentVolumeClaim(c) => caldera_cache::volumes::claim(c).map(drop),
        Object::PodDisruptionBudget(_) | Object::CSINode(_) | Object::Workload(_) => Ok(()),
        Object::NativePodGroup(pg) => caldera_cache::native::podgroup(pg).map(drop),
        Object::DeviceClass(c) => caldera_cache::dra::device_class(c).map(drop),
        Object::ResourceSlice(s) => caldera_cache::dra::slice(s).map(drop),
        Object::ResourceClaim(c) => caldera_cache::dra::claim(c).map(drop),
        Object::ResourceClaimTemplate(t) => caldera_cache::dra::template(t).map(drop),
        // Its pods convert as the template does (a pod's name stands in for theirs).
        Object::Job(job) => {
            template_converts(&job.metadata, job.spec.as_ref().map(|s| s.template.clone()))
        }
        Object::ReplicaSet(rs) => template_converts(
            &rs.metadata,
            rs.spec.as_ref().and_then(|s| s.template.clone()),
        ),
        Object::Deployment(d) => {
            template_converts(&d.metadata, d.spec.as_ref().map(|s| s.template.clone()))
        }
        // What can go wrong with their pod templates is said on the pods (the gang waits
        // with the message): a derived gang reports, it does not refuse the workload.
        Object::JobSet(_) | Object::LeaderWorkerSet(_) => Ok(()),
    }
}

/// kube-apiserver's checks of the object's name, namespace and labels
/// ([`caldera_api::validation::object_meta`]): a Namespace's name is a DNS-1123 label, any
/// other a subdomain. The first problem is the error, naming the object, the field and the
/// rule as the server words it (`node nodeA: metadata.name: Invalid value: "nodeA": a
/// lowercase RFC 1123 subdomain must consist of …`).
fn validate_meta(object: &Object) -> Result<(), caldera_cache::Error> {
    use caldera_api::validation::{self, NameRule};
    use caldera_cache::ObjectKind;
    let kind = object.kind();
    let rule = match kind {
        Kind::Namespace => NameRule::Label,
        _ => NameRule::Subdomain,
    };
    let meta = object.meta();
    let namespace = meta
        .namespace
        .as_deref()
        .filter(|ns| kind.namespaced() && !ns.is_empty());
    let labels = meta.labels.iter().flatten();
    let causes = validation::object_meta(
        object.name(),
        rule,
        namespace,
        labels.map(|(k, v)| (k.as_str(), v.as_str())),
    );
    let Some((field, message)) = causes.into_iter().next() else {
        return Ok(());
    };
    let object_kind = match kind {
        Kind::Namespace => ObjectKind::Namespace,
        Kind::PriorityClass => ObjectKind::PriorityClass,
        Kind::Queue => ObjectKind::Queue,
        Kind::Node => ObjectKind::Node,
        Kind::HyperNode => ObjectKind::HyperNode,
        Kind::PodGroup => ObjectKind::PodGroup,
        Kind::Workload => ObjectKind::Workload,
        Kind::NativePodGroup => ObjectKind::NativePodGroup,
        Kind::Pod => ObjectKind::Pod,
        Kind::PodDisruptionBudget => ObjectKind::PodDisruptionBudget,
        Kind::StorageClass => ObjectKind::StorageClass,
        Kind::CSINode => ObjectKind::CsiNode,
        Kind::PersistentVolume => ObjectKind::PersistentVolume,
        Kind::PersistentVolumeClaim => ObjectKind::PersistentVolumeClaim,
        Kind::Job => ObjectKind::Job,
        Kind::JobSet => ObjectKind::JobSet,
        Kind::LeaderWorkerSet => ObjectKind::LeaderWorkerSet,
        Kind::DeviceClass => ObjectKind::DeviceClass,
        Kind::ResourceSlice => ObjectKind::ResourceSlice,
        Kind::ResourceClaim => ObjectKind::ResourceClaim,
        Kind::ResourceClaimTemplate => ObjectKind::ResourceClaimTemplate,
        Kind::ReplicaSet => ObjectKind::ReplicaSet,
        Kind::Deployment => ObjectKind::Deployment,
    };
    let name = if kind.namespaced() {
        format!("{}/{}", namespace.unwrap_or("default"), object.name())
    } else {
        object.name().to_string()
    };
    Err(caldera_cache::Error {
        kind: object_kind,
        object: name,
        field,
        problem: caldera_cache::Problem::Invalid(message),
    })
}

/// Whether a workload's pods would convert: its template as a pod named as the workload.
fn template_converts(
    owner: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    template: Option<k8s_openapi::api::core::v1::PodTemplateSpec>,
) -> Result<(), caldera_cache::Error> {
    let template = template.unwrap_or_default();
    let mut meta = template.metadata.unwrap_or_default();
    meta.name = owner.name.clone();
    meta.namespace = owner.namespace.clone();
    let pod = Pod {
        metadata: meta,
        spec: template.spec,
        status: None,
    };
    caldera_cache::PodInfo::try_from(&pod).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kept_kinds_and_skips_the_rest_once_per_kind() {
        let text = "\
apiVersion: v1
kind: Node
metadata: {name: n1}
---
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d1}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d2}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p}
  spec: {containers: [{name: main, resources: {limits: {nvidia.com/gpu: 1}}}]}
";
        let m = parse_stream(text, "in.yaml").unwrap();
        let got: Vec<_> = m
            .objects
            .iter()
            .map(|(o, obj)| (o.to_string(), obj.describe()))
            .collect();
        assert_eq!(
            got,
            [
                ("in.yaml: document 1".to_string(), "Node n1".to_string()),
                (
                    "in.yaml: document 6: items[0]".to_string(),
                    "Pod default/p".to_string()
                ),
            ]
        );
        assert_eq!(
            m.notices.messages,
            [
                format!("in.yaml: document 3: DaemonSet (apps/v1): {NOT_SIMULATED}"),
                "in.yaml: document 5: ConfigMap (v1): ignored: does not affect scheduling"
                    .to_string(),
            ]
        );
    }

    #[test]
    fn errors_name_file_document_and_field() {
        let shape = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers: {name: main}\n";
        let err = parse_stream(shape, "bad.yaml").unwrap_err().to_string();
        assert!(
            err.starts_with("bad.yaml: document 2: spec.containers: invalid type"),
            "{err}"
        );

        let quantity = "apiVersion: v1\nkind: Pod\nmetadata: {name: q}\nspec:\n  containers:\n  - name: main\n    resources: {requests: {cpu: abc}}\n";
        let err = parse_stream(quantity, "bad.yaml").unwrap_err().to_string();
        assert_eq!(
            err,
            "bad.yaml: document 1: pod default/q: spec.containers[0].resources.requests.cpu: invalid quantity \"abc\": no digits"
        );

        let syntax = "apiVersion: v1\nkind: [Pod\n";
        let err = parse_stream(syntax, "-").unwrap_err().to_string();
        assert!(err.starts_with("-: document 1: YAML syntax error"), "{err}");

        let no_kind = "apiVersion: v1\nmetadata: {name: x}\n";
        let err = parse_stream(no_kind, "f").unwrap_err().to_string();
        assert_eq!(err, "f: document 1: kind: missing");
    }
}
