//! Every request `caldera run` makes to the API server, as data: the one list that the shipped
//! RBAC (`deploy/rbac.yaml`), ARCHITECTURE.md's table ("API calls `caldera run` makes") and the
//! runtime's watches are checked against. `crates/shipping` fails when the ClusterRole grants
//! other than [`calls`], or the table lists other; the runtime builds each watch from one
//! [`Watch`] of [`WATCHES`] and a test of its own fails when a typed watch reads another
//! resource; the e2e suite runs the scheduler under the shipped ServiceAccount's token on an
//! API server that enforces the ClusterRole, so a write without its rule fails there.
//!
//! A watch is [`Need::Required`] when Caldera cannot decide anything right without it (every
//! 1.36 API server serves it, and the ClusterRole has always granted it): refused with 403,
//! `caldera run` exits naming the rule. It is [`Need::Optional`] when Caldera already runs
//! without it on a server that does not serve it (a CRD not installed, an alpha API off):
//! refused with 403, it is reported once and only the pods that depend on it wait.

use std::fmt;

/// An API resource Caldera watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Resource {
    /// API group, empty for the core group.
    pub group: &'static str,
    /// The version read.
    pub version: &'static str,
    /// Kind (`PodGroup`).
    pub kind: &'static str,
    /// Plural resource name (`podgroups`).
    pub plural: &'static str,
    /// Namespaced (watched in all namespaces) or cluster-scoped.
    pub namespaced: bool,
}

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `plural.group` as kube-apiserver and `kubectl` name it (`podgroups.scheduling.k8s.io`,
    /// `pods` for the core group).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.qualified())
    }
}

/// What Caldera does when the API server refuses a watch with 403 (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Need {
    /// `caldera run` exits non-zero naming the missing rule.
    Required,
    /// Reported once; the pods that depend on it wait with a message naming the permission.
    Optional,
}

/// One watched kind: `list` and `watch` of [`Watch::resource`] cluster-wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Watch {
    /// What is watched.
    pub resource: Resource,
    /// Whether Caldera can live without it.
    pub need: Need,
    /// Which pods wait while it is refused (for [`Need::Optional`]; said in the report).
    pub dependants: &'static str,
}

impl Watch {
    /// What the ServiceAccount lacks, as a user would fix it: the rule to add.
    pub fn missing_rule(&self) -> String {
        format!(
            "the ClusterRole bound to Caldera's ServiceAccount must grant `list` and `watch` on `{}` in API group \"{}\" (deploy/rbac.yaml and the Helm chart ship it)",
            self.resource.plural, self.resource.group
        )
    }
}

const fn required(resource: Resource) -> Watch {
    Watch {
        resource,
        need: Need::Required,
        dependants: "",
    }
}

const fn optional(resource: Resource, dependants: &'static str) -> Watch {
    Watch {
        resource,
        need: Need::Optional,
        dependants,
    }
}

const fn res(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group,
        version,
        kind,
        plural,
        namespaced,
    }
}

/// Pods: every pod counts on its node, whichever scheduler placed it.
pub const PODS: Watch = required(res("", "v1", "Pod", "pods", true));
/// Nodes.
pub const NODES: Watch = required(res("", "v1", "Node", "nodes", false));
/// Volcano's PodGroups.
pub const PODGROUPS: Watch = required(res(
    "scheduling.volcano.sh",
    "v1beta1",
    "PodGroup",
    "podgroups",
    true,
));
/// Volcano's Queues.
pub const QUEUES: Watch = required(res(
    "scheduling.volcano.sh",
    "v1beta1",
    "Queue",
    "queues",
    false,
));
/// PriorityClasses: priorities and the global default.
pub const PRIORITY_CLASSES: Watch = required(res(
    "scheduling.k8s.io",
    "v1",
    "PriorityClass",
    "priorityclasses",
    false,
));
/// PodDisruptionBudgets: victims the budgets allow.
pub const BUDGETS: Watch = required(res(
    "policy",
    "v1",
    "PodDisruptionBudget",
    "poddisruptionbudgets",
    true,
));
/// Namespaces: labels for `namespaceSelector` terms.
pub const NAMESPACES: Watch = required(res("", "v1", "Namespace", "namespaces", false));
/// PersistentVolumeClaims: volume binding.
pub const CLAIMS: Watch = required(res(
    "",
    "v1",
    "PersistentVolumeClaim",
    "persistentvolumeclaims",
    true,
));
/// PersistentVolumes: volume binding.
pub const VOLUMES: Watch = required(res(
    "",
    "v1",
    "PersistentVolume",
    "persistentvolumes",
    false,
));
/// StorageClasses: binding mode, provisioner, allowed topologies.
pub const STORAGE_CLASSES: Watch = required(res(
    "storage.k8s.io",
    "v1",
    "StorageClass",
    "storageclasses",
    false,
));
/// CSINodes: attach limits.
pub const CSI_NODES: Watch = required(res("storage.k8s.io", "v1", "CSINode", "csinodes", false));
/// Jobs: the workloads gangs are derived from.
pub const JOBS: Watch = required(res("batch", "v1", "Job", "jobs", true));

/// Volcano's HyperNodes (when their CRD is served).
pub const HYPERNODES: Watch = optional(
    res(
        "topology.volcano.sh",
        "v1alpha1",
        "HyperNode",
        "hypernodes",
        false,
    ),
    "gangs with a networkTopology rule over HyperNodes",
);
/// Kubernetes' own gang API: PodGroups (1.36 with `GenericWorkload`).
pub const NATIVE_PODGROUPS: Watch = optional(
    res(
        "scheduling.k8s.io",
        "v1alpha2",
        "PodGroup",
        "podgroups",
        true,
    ),
    "pods naming a native PodGroup (spec.schedulingGroup)",
);
/// Kubernetes' own gang API: Workloads.
pub const NATIVE_WORKLOADS: Watch = optional(
    res(
        "scheduling.k8s.io",
        "v1alpha2",
        "Workload",
        "workloads",
        true,
    ),
    "pods naming a native PodGroup (spec.schedulingGroup)",
);
const DRA_DEPENDANTS: &str = "pods with resourceClaims";
/// DRA DeviceClasses.
pub const DEVICE_CLASSES: Watch = optional(
    res(
        "resource.k8s.io",
        "v1",
        "DeviceClass",
        "deviceclasses",
        false,
    ),
    DRA_DEPENDANTS,
);
/// DRA ResourceSlices.
pub const RESOURCE_SLICES: Watch = optional(
    res(
        "resource.k8s.io",
        "v1",
        "ResourceSlice",
        "resourceslices",
        false,
    ),
    DRA_DEPENDANTS,
);
/// DRA ResourceClaims.
pub const RESOURCE_CLAIMS: Watch = optional(
    res(
        "resource.k8s.io",
        "v1",
        "ResourceClaim",
        "resourceclaims",
        true,
    ),
    DRA_DEPENDANTS,
);
/// DRA ResourceClaimTemplates.
pub const RESOURCE_CLAIM_TEMPLATES: Watch = optional(
    res(
        "resource.k8s.io",
        "v1",
        "ResourceClaimTemplate",
        "resourceclaimtemplates",
        true,
    ),
    DRA_DEPENDANTS,
);
const OWNED: &str = "pods whose gang is derived from this kind";
/// JobSets (gangs derived from them).
pub const JOBSETS: Watch = optional(
    res("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", true),
    OWNED,
);
/// LeaderWorkerSets.
pub const LEADER_WORKER_SETS: Watch = optional(
    res(
        "leaderworkerset.x-k8s.io",
        "v1",
        "LeaderWorkerSet",
        "leaderworkersets",
        true,
    ),
    OWNED,
);
/// Kubeflow PyTorchJobs.
pub const PYTORCH_JOBS: Watch = optional(
    res("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", true),
    OWNED,
);
/// Kubeflow MPIJobs.
pub const MPI_JOBS: Watch = optional(
    res("kubeflow.org", "v2beta1", "MPIJob", "mpijobs", true),
    OWNED,
);
/// RayClusters.
pub const RAY_CLUSTERS: Watch = optional(
    res("ray.io", "v1", "RayCluster", "rayclusters", true),
    OWNED,
);
/// StatefulSets (only those opted in are grouped).
pub const STATEFUL_SETS: Watch = optional(
    res("apps", "v1", "StatefulSet", "statefulsets", true),
    OWNED,
);
/// Deployments (only those opted in are grouped).
pub const DEPLOYMENTS: Watch =
    optional(res("apps", "v1", "Deployment", "deployments", true), OWNED);
/// cluster-autoscaler's ProvisioningRequests (Caldera's own, by label).
pub const PROVISIONING_REQUESTS: Watch = optional(
    res(
        "autoscaling.x-k8s.io",
        "v1",
        "ProvisioningRequest",
        "provisioningrequests",
        true,
    ),
    "none: gangs short of nodes wait for them as without autoscaler requests",
);

/// Every kind `caldera run` may watch.
pub const WATCHES: &[Watch] = &[
    PODS,
    NODES,
    PODGROUPS,
    QUEUES,
    PRIORITY_CLASSES,
    BUDGETS,
    NAMESPACES,
    CLAIMS,
    VOLUMES,
    STORAGE_CLASSES,
    CSI_NODES,
    JOBS,
    HYPERNODES,
    NATIVE_PODGROUPS,
    NATIVE_WORKLOADS,
    DEVICE_CLASSES,
    RESOURCE_SLICES,
    RESOURCE_CLAIMS,
    RESOURCE_CLAIM_TEMPLATES,
    JOBSETS,
    LEADER_WORKER_SETS,
    PYTORCH_JOBS,
    MPI_JOBS,
    RAY_CLUSTERS,
    STATEFUL_SETS,
    DEPLOYMENTS,
    PROVISIONING_REQUESTS,
];

/// Where a call is made, as RBAC sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Cluster-wide, or in any namespace: the ClusterRole.
    Cluster,
    /// Only in the Lease's namespace (`--lease-namespace`): the leader-election Role.
    LeaseNamespace,
}

/// One write (or read of one object) `caldera run` makes, with the RBAC verbs it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Write {
    /// RBAC verbs.
    pub verbs: &'static [&'static str],
    /// API group, empty for the core group.
    pub group: &'static str,
    /// `pods`, or `pods/binding` with a subresource.
    pub resource: &'static str,
    /// Where.
    pub scope: Scope,
}

const fn write(
    verbs: &'static [&'static str],
    group: &'static str,
    resource: &'static str,
) -> Write {
    Write {
        verbs,
        group,
        resource,
        scope: Scope::Cluster,
    }
}

/// Every call but the watches: binds, evictions, status writes, events, the objects Caldera
/// makes, DRA allocation, and the Lease.
pub const WRITES: &[Write] = &[
    write(&["create"], "", "pods/binding"),
    write(&["patch"], "", "pods/status"),
    write(&["create"], "", "pods/eviction"),
    write(&["patch"], "", "pods"),
    write(&["patch"], "", "persistentvolumeclaims"),
    write(&["patch"], "", "persistentvolumes"),
    write(&["create", "delete"], "", "podtemplates"),
    write(
        &["create", "patch", "delete"],
        "scheduling.volcano.sh",
        "podgroups",
    ),
    write(&["patch"], "scheduling.volcano.sh", "podgroups/status"),
    write(&["create"], "scheduling.volcano.sh", "queues"),
    write(&["patch"], "scheduling.volcano.sh", "queues/status"),
    write(&["patch"], "scheduling.k8s.io", "podgroups/status"),
    write(
        &["create", "patch", "delete"],
        "topology.volcano.sh",
        "hypernodes",
    ),
    write(&["patch"], "topology.volcano.sh", "hypernodes/status"),
    write(
        &["get", "update", "create"],
        "resource.k8s.io",
        "resourceclaims",
    ),
    write(&["update"], "resource.k8s.io", "resourceclaims/status"),
    write(&["update"], "resource.k8s.io", "resourceclaims/binding"),
    write(
        &["create", "delete"],
        "autoscaling.x-k8s.io",
        "provisioningrequests",
    ),
    write(&["create"], "events.k8s.io", "events"),
    Write {
        verbs: &["get", "create", "update"],
        group: "coordination.k8s.io",
        resource: "leases",
        scope: Scope::LeaseNamespace,
    },
];

/// One permission a call needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Call {
    /// API group, empty for the core group.
    pub group: String,
    /// `pods`, or `pods/binding` with a subresource.
    pub resource: String,
    /// RBAC verb.
    pub verb: String,
    /// Where.
    pub scope: Scope,
}

/// Every permission `caldera run` needs: `list` and `watch` of each of [`WATCHES`], and the
/// verbs of each of [`WRITES`].
pub fn calls() -> std::collections::BTreeSet<Call> {
    let watches = WATCHES.iter().flat_map(|w| {
        ["list", "watch"].map(|verb| Call {
            group: w.resource.group.to_string(),
            resource: w.resource.plural.to_string(),
            verb: verb.to_string(),
            scope: Scope::Cluster,
        })
    });
    let writes = WRITES.iter().flat_map(|w| {
        w.verbs.iter().map(|verb| Call {
            group: w.group.to_string(),
            resource: w.resource.to_string(),
            verb: verb.to_string(),
            scope: w.scope,
        })
    });
    watches.chain(writes).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_watch_is_listed_once() {
        let mut seen = std::collections::BTreeSet::new();
        for w in WATCHES {
            assert!(seen.insert(w.resource.qualified()), "{} twice", w.resource);
            assert_eq!(
                w.need == Need::Optional,
                !w.dependants.is_empty(),
                "{}: an optional watch says who waits without it, a required one nobody",
                w.resource
            );
        }
    }

    #[test]
    fn the_native_gang_api_is_watched_and_its_status_written() {
        let calls = calls();
        for (verb, resource) in [
            ("list", "podgroups"),
            ("watch", "podgroups"),
            ("list", "workloads"),
            ("watch", "workloads"),
            ("patch", "podgroups/status"),
        ] {
            assert!(
                calls.contains(&Call {
                    group: "scheduling.k8s.io".into(),
                    resource: resource.into(),
                    verb: verb.into(),
                    scope: Scope::Cluster,
                }),
                "{verb} {resource}"
            );
        }
    }

    #[test]
    fn the_missing_rule_names_verbs_resource_and_group() {
        let text = NATIVE_PODGROUPS.missing_rule();
        assert!(text.contains("`list` and `watch` on `podgroups`"), "{text}");
        assert!(text.contains("\"scheduling.k8s.io\""), "{text}");
        assert_eq!(
            NATIVE_PODGROUPS.resource.qualified(),
            "podgroups.scheduling.k8s.io"
        );
        assert_eq!(PODS.resource.qualified(), "pods");
        assert_eq!(PODS.resource.api_version(), "v1");
    }
}
