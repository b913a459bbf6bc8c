//! The fixed table of resources the stand-in serves, and the discovery documents built from it.

use serde_json::{json, Value};

/// The verbs of an ordinary stored resource, in the order kube-apiserver lists them.
const FULL: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// A subresource as discovery describes it.
#[derive(Debug)]
pub(crate) struct SubresourceDef {
    pub name: &'static str,
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub verbs: &'static [&'static str],
}

/// How the server treats a resource's writes; mirrors the per-resource strategies of kube-apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flavor {
    Pod,
    Node,
    Namespace,
    CoreEvent,
    /// `bindings` (the legacy top-level binding endpoint): create only, never stored.
    Binding,
    EventV1,
    Lease,
    PriorityClass,
    RuntimeClass,
    /// Served like a CRD-backed custom resource (no strategic merge patch, status dropped on create).
    Custom,
    /// `policy/v1` PodDisruptionBudgets: status reset on create, generation tracked, status
    /// kept by the disruption controller.
    Budget,
    Crd,
    /// `v1` PersistentVolumes: defaulted and validated as kube-apiserver does, status `Pending`
    /// on create (the PV controller's from then on), source fixed at creation.
    Volume,
    /// `v1` PersistentVolumeClaims: the DefaultStorageClass admission plugin, status `Pending`
    /// on create, spec immutable but for the fields the PV controller and resizing set.
    Claim,
    /// `storage.k8s.io/v1` StorageClasses: defaulted, provisioner/parameters/policies fixed.
    StorageClass,
    /// `v1` PodTemplates: the template's pod spec defaulted and validated as a Pod's is.
    PodTemplate,
    /// `batch/v1` Jobs: defaulted, status dropped on create (the Job controller's).
    Job,
    /// `apps/v1` ReplicaSets and Deployments: defaulted (`replicas` 1), the selector checked
    /// against the template's labels, status dropped on create (the controller's).
    Apps,
    /// `scheduling.k8s.io/v1alpha2` PodGroups (Kubernetes' own gang API): status dropped on
    /// create, the `scheduling.k8s.io/podgroup-protection` finalizer added, conditions merged
    /// by `type` under a strategic merge patch.
    NativePodGroup,
    /// `resource.k8s.io/v1` DeviceClasses: `extendedResourceName` validated.
    DeviceClass,
    /// `resource.k8s.io/v1` ResourceSlices: driver, pool and node choice validated.
    ResourceSlice,
    /// `resource.k8s.io/v1` ResourceClaims: status dropped on create, spec defaulted and
    /// immutable, status validated (`dra.rs`), the delete-protection finalizer honoured.
    ResourceClaim,
    /// `resource.k8s.io/v1` ResourceClaimTemplates: claim spec defaulted, immutable.
    ClaimTemplate,
}

/// One served resource.
#[derive(Debug)]
pub(crate) struct ResourceDef {
    pub group: &'static str,
    pub version: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub subresources: &'static [SubresourceDef],
    pub flavor: Flavor,
    /// Served only once its CustomResourceDefinition (`<plural>.<group>`) exists, as for any
    /// resource kube-apiserver does not build in.
    pub requires_crd: bool,
}

/// Which resources are served right now (CRD-backed ones only once their CRD exists).
pub(crate) type Served<'a> = &'a dyn Fn(&ResourceDef) -> bool;

impl ResourceDef {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` for the core group, `leases.coordination.k8s.io` otherwise: what error messages name.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s.name == "status")
    }

    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s.name == name)
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether objects carry `metadata.generation` that moves with spec changes.
    pub fn tracks_generation(&self) -> bool {
        matches!(
            self.flavor,
            Flavor::Pod
                | Flavor::Custom
                | Flavor::Crd
                | Flavor::PriorityClass
                | Flavor::Budget
                | Flavor::Job
                | Flavor::Apps
                | Flavor::NativePodGroup
                | Flavor::DeviceClass
                | Flavor::ResourceSlice
        )
    }

    /// Whether a DELETE answers with the deleted object (kube-apiserver's `ReturnDeletedObject`)
    /// rather than a `Status`.
    pub fn returns_deleted_object(&self) -> bool {
        matches!(self.flavor, Flavor::Pod | Flavor::Custom | Flavor::Crd)
    }

    pub fn is_stored(&self) -> bool {
        self.flavor != Flavor::Binding
    }
}

const fn status_sub(kind: &'static str) -> SubresourceDef {
    SubresourceDef {
        name: "status",
        group: "",
        version: "",
        kind,
        verbs: STATUS_VERBS,
    }
}

/// Every resource the stand-in serves. Index positions are the store's resource ids.
pub(crate) static RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        group: "",
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        namespaced: true,
        short_names: &["po"],
        categories: &["all"],
        verbs: FULL,
        subresources: &[
            SubresourceDef {
                name: "binding",
                group: "",
                version: "",
                kind: "Binding",
                verbs: &["create"],
            },
            SubresourceDef {
                name: "eviction",
                group: "policy",
                version: "v1",
                kind: "Eviction",
                verbs: &["create"],
            },
            status_sub("Pod"),
        ],
        flavor: Flavor::Pod,
        requires_crd: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        namespaced: false,
        short_names: &["no"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("Node")],
        flavor: Flavor::Node,
        requires_crd: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        categories: &[],
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        subresources: &[status_sub("Namespace")],
        flavor: Flavor::Namespace,
        requires_crd: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::CoreEvent,
        requires_crd: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "bindings",
        singular: "binding",
        kind: "Binding",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: &["create"],
        subresources: &[],
        flavor: Flavor::Binding,
        requires_crd: false,
    },
    ResourceDef {
        group: "events.k8s.io",
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        namespaced: true,
        short_names: &["ev"],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::EventV1,
        requires_crd: false,
    },
    ResourceDef {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::Lease,
        requires_crd: false,
    },
    ResourceDef {
        group: "node.k8s.io",
        version: "v1",
        plural: "runtimeclasses",
        singular: "runtimeclass",
        kind: "RuntimeClass",
        namespaced: false,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::RuntimeClass,
        requires_crd: false,
    },
    ResourceDef {
        group: "scheduling.k8s.io",
        version: "v1",
        plural: "priorityclasses",
        singular: "priorityclass",
        kind: "PriorityClass",
        namespaced: false,
        short_names: &["pc"],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::PriorityClass,
        requires_crd: false,
    },
    ResourceDef {
        group: "apiextensions.k8s.io",
        version: "v1",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        verbs: FULL,
        subresources: &[status_sub("CustomResourceDefinition")],
        flavor: Flavor::Crd,
        requires_crd: false,
    },
    ResourceDef {
        group: "scheduling.volcano.sh",
        version: "v1beta1",
        plural: "podgroups",
        singular: "podgroup",
        kind: "PodGroup",
        namespaced: true,
        short_names: &["pg", "podgroup-v1beta1"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("PodGroup")],
        flavor: Flavor::Custom,
        requires_crd: false,
    },
    ResourceDef {
        group: "scheduling.volcano.sh",
        version: "v1beta1",
        plural: "queues",
        singular: "queue",
        kind: "Queue",
        namespaced: false,
        short_names: &["q", "queue-v1beta1"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("Queue")],
        flavor: Flavor::Custom,
        requires_crd: false,
    },
    ResourceDef {
        group: "policy",
        version: "v1",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        namespaced: true,
        short_names: &["pdb"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("PodDisruptionBudget")],
        flavor: Flavor::Budget,
        requires_crd: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "podtemplates",
        singular: "podtemplate",
        kind: "PodTemplate",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::PodTemplate,
        requires_crd: false,
    },
    // cluster-autoscaler's CRD: served only when installed (see `requires_crd`).
    ResourceDef {
        group: "autoscaling.x-k8s.io",
        version: "v1",
        plural: "provisioningrequests",
        singular: "provisioningrequest",
        kind: "ProvisioningRequest",
        namespaced: true,
        short_names: &["provreq", "provreqs"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("ProvisioningRequest")],
        flavor: Flavor::Custom,
        requires_crd: true,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "persistentvolumeclaims",
        singular: "persistentvolumeclaim",
        kind: "PersistentVolumeClaim",
        namespaced: true,
        short_names: &["pvc"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("PersistentVolumeClaim")],
        flavor: Flavor::Claim,
        requires_crd: false,
    },
    ResourceDef {
        group: "",
        version: "v1",
        plural: "persistentvolumes",
        singular: "persistentvolume",
        kind: "PersistentVolume",
        namespaced: false,
        short_names: &["pv"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("PersistentVolume")],
        flavor: Flavor::Volume,
        requires_crd: false,
    },
    ResourceDef {
        group: "storage.k8s.io",
        version: "v1",
        plural: "storageclasses",
        singular: "storageclass",
        kind: "StorageClass",
        namespaced: false,
        short_names: &["sc"],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::StorageClass,
        requires_crd: false,
    },
    ResourceDef {
        group: "storage.k8s.io",
        version: "v1",
        plural: "csinodes",
        singular: "csinode",
        kind: "CSINode",
        namespaced: false,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::Lease,
        requires_crd: false,
    },
    ResourceDef {
        group: "batch",
        version: "v1",
        plural: "jobs",
        singular: "job",
        kind: "Job",
        namespaced: true,
        short_names: &[],
        categories: &["all"],
        verbs: FULL,
        subresources: &[status_sub("Job")],
        flavor: Flavor::Job,
        requires_crd: false,
    },
    // Kubernetes' own gang API (1.36, feature gate GenericWorkload), served as a 1.36
    // kube-apiserver with the gate on serves it.
    ResourceDef {
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        plural: "workloads",
        singular: "workload",
        kind: "Workload",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::Lease,
        requires_crd: false,
    },
    ResourceDef {
        group: "scheduling.k8s.io",
        version: "v1alpha2",
        plural: "podgroups",
        singular: "podgroup",
        kind: "PodGroup",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[SubresourceDef {
            name: "status",
            group: "scheduling.k8s.io",
            version: "v1alpha2",
            kind: "PodGroup",
            verbs: STATUS_VERBS,
        }],
        flavor: Flavor::NativePodGroup,
        requires_crd: false,
    },
    // Volcano's network-topology CRD, served as its PodGroup and Queue are.
    ResourceDef {
        group: "topology.volcano.sh",
        version: "v1alpha1",
        plural: "hypernodes",
        singular: "hypernode",
        kind: "HyperNode",
        namespaced: false,
        short_names: &["hn"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("HyperNode")],
        flavor: Flavor::Custom,
        requires_crd: false,
    },
    // The JobSet and LeaderWorkerSet CRDs (kubernetes-sigs), served only once installed; no
    // controller of theirs runs here (the e2e driver plays them, as on a real server).
    ResourceDef {
        group: "jobset.x-k8s.io",
        version: "v1alpha2",
        plural: "jobsets",
        singular: "jobset",
        kind: "JobSet",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("JobSet")],
        flavor: Flavor::Custom,
        requires_crd: true,
    },
    ResourceDef {
        group: "leaderworkerset.x-k8s.io",
        version: "v1",
        plural: "leaderworkersets",
        singular: "leaderworkerset",
        kind: "LeaderWorkerSet",
        namespaced: true,
        short_names: &["lws"],
        categories: &[],
        verbs: FULL,
        subresources: &[status_sub("LeaderWorkerSet")],
        flavor: Flavor::Custom,
        requires_crd: true,
    },
    // Dynamic Resource Allocation (`resource.k8s.io/v1`, GA since 1.34), as 1.36 serves it.
    ResourceDef {
        group: "resource.k8s.io",
        version: "v1",
        plural: "deviceclasses",
        singular: "deviceclass",
        kind: "DeviceClass",
        namespaced: false,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::DeviceClass,
        requires_crd: false,
    },
    ResourceDef {
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceslices",
        singular: "resourceslice",
        kind: "ResourceSlice",
        namespaced: false,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::ResourceSlice,
        requires_crd: false,
    },
    ResourceDef {
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceclaims",
        singular: "resourceclaim",
        kind: "ResourceClaim",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[SubresourceDef {
            name: "status",
            group: "resource.k8s.io",
            version: "v1",
            kind: "ResourceClaim",
            verbs: STATUS_VERBS,
        }],
        flavor: Flavor::ResourceClaim,
        requires_crd: false,
    },
    ResourceDef {
        group: "resource.k8s.io",
        version: "v1",
        plural: "resourceclaimtemplates",
        singular: "resourceclaimtemplate",
        kind: "ResourceClaimTemplate",
        namespaced: true,
        short_names: &[],
        categories: &[],
        verbs: FULL,
        subresources: &[],
        flavor: Flavor::ClaimTemplate,
        requires_crd: false,
    },
    // kube-controller-manager's ReplicaSet and Deployment controllers are played
    // (`caldera_actors::replicaset`); the `scale` subresources are not served.
    ResourceDef {
        group: "apps",
        version: "v1",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        namespaced: true,
        short_names: &["rs"],
        categories: &["all"],
        verbs: FULL,
        subresources: &[status_sub("ReplicaSet")],
        flavor: Flavor::Apps,
        requires_crd: false,
    },
    ResourceDef {
        group: "apps",
        version: "v1",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        namespaced: true,
        short_names: &["deploy"],
        categories: &["all"],
        verbs: FULL,
        subresources: &[status_sub("Deployment")],
        flavor: Flavor::Apps,
        requires_crd: false,
    },
];

/// Index of a resource in [`RESOURCES`].
pub(crate) type ResourceId = usize;

pub(crate) fn def(id: ResourceId) -> &'static ResourceDef {
    // Ids are only ever produced by the lookups below, which index into RESOURCES.
    &RESOURCES[id]
}

pub(crate) const PODS: ResourceId = 0;
pub(crate) const NODES: ResourceId = 1;
pub(crate) const NAMESPACES: ResourceId = 2;
pub(crate) const RUNTIME_CLASSES: ResourceId = 7;
pub(crate) const PRIORITY_CLASSES: ResourceId = 8;
pub(crate) const BUDGETS: ResourceId = 12;
pub(crate) const CLAIMS: ResourceId = 15;
pub(crate) const VOLUMES: ResourceId = 16;
pub(crate) const STORAGE_CLASSES: ResourceId = 17;
pub(crate) const JOBS: ResourceId = 19;
pub(crate) const NATIVE_PODGROUPS: ResourceId = 21;
pub(crate) const RESOURCE_CLAIMS: ResourceId = 27;
pub(crate) const CLAIM_TEMPLATES: ResourceId = 28;
pub(crate) const REPLICASETS: ResourceId = 29;
pub(crate) const DEPLOYMENTS: ResourceId = 30;

/// Finds the resource served at `/{group}/{version}/{plural}`.
pub(crate) fn find_served(
    group: &str,
    version: &str,
    plural: &str,
    served: Served,
) -> Option<ResourceId> {
    RESOURCES
        .iter()
        .position(|d| d.group == group && d.version == version && d.plural == plural && served(d))
}

/// Resolves what a test names a resource by: plural (`pods`), singular, kind (`Pod`, any case),
/// short name (`pg`), or `plural.group` (`events.events.k8s.io`). An ambiguous name (`events`)
/// means the core-group resource.
pub(crate) fn resolve(name: &str) -> Option<ResourceId> {
    let lower = name.to_ascii_lowercase();
    RESOURCES.iter().position(|d| {
        d.is_stored()
            && (d.plural == lower
                || d.singular == lower
                || d.kind.eq_ignore_ascii_case(&lower)
                || d.short_names.contains(&lower.as_str())
                || d.qualified() == lower)
    })
}

fn group_versions(served: Served) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for d in RESOURCES.iter().filter(|d| served(d)) {
        if !d.group.is_empty() && !out.contains(&(d.group, d.version)) {
            out.push((d.group, d.version));
        }
    }
    out
}

pub(crate) fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "36",
        "gitVersion": "v1.36.0-caldera-testkit",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.25.0",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

pub(crate) fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_doc(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

pub(crate) fn api_group_list(served: Served) -> Value {
    let groups: Vec<Value> = group_versions(served)
        .into_iter()
        .map(|(g, v)| group_doc(g, v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub(crate) fn api_group(group: &str, served: Served) -> Option<Value> {
    group_versions(served)
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, v)| {
            let mut doc = group_doc(g, v);
            if let Some(map) = doc.as_object_mut() {
                map.insert("kind".into(), json!("APIGroup"));
                map.insert("apiVersion".into(), json!("v1"));
            }
            doc
        })
}

/// `APIResourceList` for one group/version, or `None` when nothing is served there.
pub(crate) fn api_resource_list(group: &str, version: &str, served: Served) -> Option<Value> {
    let mut resources = Vec::new();
    for d in RESOURCES
        .iter()
        .filter(|d| d.group == group && d.version == version && served(d))
    {
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs,
        });
        if let Some(map) = r.as_object_mut() {
            if !d.short_names.is_empty() {
                map.insert("shortNames".into(), json!(d.short_names));
            }
            if !d.categories.is_empty() {
                map.insert("categories".into(), json!(d.categories));
            }
        }
        resources.push(r);
        for s in d.subresources {
            let mut r = json!({
                "name": format!("{}/{}", d.plural, s.name),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": s.kind,
                "verbs": s.verbs,
            });
            if !s.group.is_empty() {
                if let Some(map) = r.as_object_mut() {
                    map.insert("group".into(), json!(s.group));
                    map.insert("version".into(), json!(s.version));
                }
            }
            resources.push(r);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources
    }))
}

fn resource_discovery_v2(d: &ResourceDef) -> Value {
    let subresources: Vec<Value> = d
        .subresources
        .iter()
        .map(|s| {
            let (group, version) = if s.group.is_empty() {
                (d.group, d.version)
            } else {
                (s.group, s.version)
            };
            json!({
                "subresource": s.name,
                "responseKind": {"group": group, "version": version, "kind": s.kind},
                "verbs": s.verbs,
            })
        })
        .collect();
    let mut r = json!({
        "resource": d.plural,
        "responseKind": {"group": d.group, "version": d.version, "kind": d.kind},
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": d.verbs,
    });
    if let Some(map) = r.as_object_mut() {
        if !d.short_names.is_empty() {
            map.insert("shortNames".into(), json!(d.short_names));
        }
        if !d.categories.is_empty() {
            map.insert("categories".into(), json!(d.categories));
        }
        if !subresources.is_empty() {
            map.insert("subresources".into(), Value::Array(subresources));
        }
    }
    r
}

fn group_discovery_v2(group: &str, version: &str, served: Served) -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .filter(|d| d.group == group && d.version == version && served(d))
        .map(resource_discovery_v2)
        .collect();
    let metadata = if group.is_empty() {
        json!({"creationTimestamp": null})
    } else {
        json!({"name": group, "creationTimestamp": null})
    };
    json!({
        "metadata": metadata,
        "versions": [{"version": version, "resources": resources, "freshness": "Current"}]
    })
}

/// Aggregated discovery (`apidiscovery.k8s.io/v2`) for `/api` (core) or `/apis` (all groups).
pub(crate) fn aggregated_discovery(core: bool, served: Served) -> Value {
    let items: Vec<Value> = if core {
        vec![group_discovery_v2("", "v1", served)]
    } else {
        group_versions(served)
            .into_iter()
            .map(|(g, v)| group_discovery_v2(g, v, served))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every named id points at the resource its name says (ids are positions in RESOURCES,
    /// so a resource inserted before another moves it).
    #[test]
    fn named_ids_point_at_their_resources() {
        let named = [
            (PODS, "", "pods"),
            (NODES, "", "nodes"),
            (NAMESPACES, "", "namespaces"),
            (RUNTIME_CLASSES, "node.k8s.io", "runtimeclasses"),
            (PRIORITY_CLASSES, "scheduling.k8s.io", "priorityclasses"),
            (BUDGETS, "policy", "poddisruptionbudgets"),
            (CLAIMS, "", "persistentvolumeclaims"),
            (VOLUMES, "", "persistentvolumes"),
            (STORAGE_CLASSES, "storage.k8s.io", "storageclasses"),
            (JOBS, "batch", "jobs"),
            (NATIVE_PODGROUPS, "scheduling.k8s.io", "podgroups"),
            (RESOURCE_CLAIMS, "resource.k8s.io", "resourceclaims"),
            (CLAIM_TEMPLATES, "resource.k8s.io", "resourceclaimtemplates"),
            (REPLICASETS, "apps", "replicasets"),
            (DEPLOYMENTS, "apps", "deployments"),
        ];
        for (id, group, plural) in named {
            assert_eq!((def(id).group, def(id).plural), (group, plural), "id {id}");
        }
    }

    #[test]
    fn resolve_accepts_every_spelling() {
        assert_eq!(resolve("pods"), Some(PODS));
        assert_eq!(resolve("Pod"), Some(PODS));
        assert_eq!(resolve("po"), Some(PODS));
        assert_eq!(resolve("pg").map(|id| def(id).kind), Some("PodGroup"));
        assert_eq!(resolve("q").map(|id| def(id).kind), Some("Queue"));
        assert_eq!(
            resolve("events.events.k8s.io").map(|id| def(id).group),
            Some("events.k8s.io")
        );
        assert_eq!(resolve("events").map(|id| def(id).group), Some(""));
        assert_eq!(resolve("bindings"), None);
        assert_eq!(resolve("deployments"), Some(DEPLOYMENTS));
        assert_eq!(resolve("rs"), Some(REPLICASETS));
        assert_eq!(resolve("daemonsets"), None);
    }

    #[test]
    fn fixed_ids_point_at_their_resources() {
        assert_eq!(def(PODS).plural, "pods");
        assert_eq!(def(NODES).plural, "nodes");
        assert_eq!(def(NAMESPACES).plural, "namespaces");
        assert_eq!(def(RUNTIME_CLASSES).plural, "runtimeclasses");
        assert_eq!(def(PRIORITY_CLASSES).plural, "priorityclasses");
        assert_eq!(def(BUDGETS).plural, "poddisruptionbudgets");
        assert_eq!(def(CLAIMS).plural, "persistentvolumeclaims");
        assert_eq!(def(JOBS).plural, "jobs");
        assert_eq!(
            def(NATIVE_PODGROUPS).qualified(),
            "podgroups.scheduling.k8s.io"
        );
        assert_eq!(
            resolve("DeviceClass").map(|id| def(id).group),
            Some("resource.k8s.io")
        );
        assert_eq!(
            resolve("resourceslices").map(|id| def(id).kind),
            Some("ResourceSlice")
        );
        assert_eq!(def(RESOURCE_CLAIMS).plural, "resourceclaims");
        assert_eq!(def(CLAIM_TEMPLATES).plural, "resourceclaimtemplates");
        assert_eq!(def(JOBS).plural, "jobs");
        assert_eq!(def(NATIVE_PODGROUPS).plural, "podgroups");
        assert_eq!(def(REPLICASETS).plural, "replicasets");
        assert_eq!(def(DEPLOYMENTS).plural, "deployments");
    }

    #[test]
    fn discovery_lists_subresources_and_short_names() {
        let list =
            api_resource_list("scheduling.volcano.sh", "v1beta1", &|_| true).unwrap_or_default();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["podgroups", "podgroups/status", "queues", "queues/status"]
        );
        assert_eq!(list["resources"][0]["shortNames"][0], "pg");
        assert_eq!(list["resources"][2]["namespaced"], false);
        assert!(api_resource_list("extensions", "v1beta1", &|_| true).is_none());
        let apps = api_resource_list("apps", "v1", &|_| true).unwrap_or_default();
        assert_eq!(apps["resources"][0]["name"], "replicasets");
    }
}
