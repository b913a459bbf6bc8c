//! Volumes: what a pod's PersistentVolumeClaims ask of a node, the PersistentVolumes a
//! `WaitForFirstConsumer` claim may be bound to, per-node CSI attach limits, and the writes
//! the volume binder plans.
//!
//! The rules are kube-scheduler 1.36's VolumeBinding, VolumeRestrictions (ReadWriteOncePod) and
//! NodeVolumeLimits plugins; the messages are theirs, since people and tools read them. The
//! cache resolves a pod's claims into a [`VolumeNeeds`] (in the pod's placement spec: members
//! whose claims ask alike share it) and a [`TaskVolumes`] (the claims' names, per pod).

use crate::interpod::LabelSelector;
use crate::selector::SelectorTerm;
use crate::time::Time;
use std::collections::BTreeMap;
use std::sync::Arc;

/// kube-scheduler's reason when a bound volume's node affinity excludes the node.
pub const NODE_CONFLICT: &str = "node(s) had volume node affinity conflict";
/// kube-scheduler's reason when an unbound claim finds neither an available volume nor a way to
/// provision one reachable from the node.
pub const BIND_CONFLICT: &str = "node(s) didn't find available persistent volumes to bind";
/// kube-scheduler's reason when a bound claim names a volume that does not exist.
pub const PV_NOT_EXIST: &str = "pvc(s) bound to non-existent pv(s)";
/// kube-scheduler's reason when a `ReadWriteOncePod` claim is already used by a pod.
pub const RWOP_CONFLICT: &str =
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";
/// kube-scheduler's reason when a node's CSI attach limit would be exceeded.
pub const MAX_VOLUME_COUNT: &str = "node(s) exceed max volume count";
/// kube-scheduler's PreFilter reason when an `Immediate` claim is not bound yet.
pub const UNBOUND_IMMEDIATE: &str = "pod has unbound immediate PersistentVolumeClaims";

/// The annotation that asks a provisioner to create a claim's volume reachable from a node.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Caldera's annotation (on a claim it selected a node for, or on a volume it pre-bound): when
/// it did so, so the wait for the volume survives restarts and can time out.
pub const SELECTED_AT: &str = "scheduling.caldera.sh/volume-selected-at";
/// How long members may wait for their claims to be bound (kube-scheduler's
/// `bindTimeoutSeconds` default) before Caldera releases their nodes.
pub const BIND_TIMEOUT_MS: i64 = 600_000;

/// Access modes as a bit set.
pub mod access {
    /// `ReadWriteOnce`.
    pub const RWO: u8 = 1;
    /// `ReadOnlyMany`.
    pub const ROX: u8 = 2;
    /// `ReadWriteMany`.
    pub const RWX: u8 = 4;
    /// `ReadWriteOncePod`.
    pub const RWOP: u8 = 8;

    /// Parses Kubernetes' spelling; unknown modes are 0.
    pub fn parse(mode: &str) -> u8 {
        match mode {
            "ReadWriteOnce" => RWO,
            "ReadOnlyMany" => ROX,
            "ReadWriteMany" => RWX,
            "ReadWriteOncePod" => RWOP,
            _ => 0,
        }
    }
}

/// One claim of a pod that is not bound yet and whose class binds at first consumer: where it
/// may be bound or provisioned.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimNeed {
    /// The claim's storage class.
    pub class: Arc<str>,
    /// `spec.resources.requests.storage` in bytes (0 when absent).
    pub size: i64,
    /// Requested access modes (bits of [`access`]).
    pub modes: u8,
    /// `volumeMode: Block`.
    pub block: bool,
    /// `spec.selector` over volume labels (`None`: any volume).
    pub selector: Option<LabelSelector>,
    /// The class provisions volumes (a provisioner other than `kubernetes.io/no-provisioner`):
    /// its `allowedTopologies` as node selector terms (`None`: any node).
    pub provision: Option<Option<Vec<SelectorTerm>>>,
    /// The class's provisioner (the CSI driver counted against attach limits).
    pub driver: Option<Arc<str>>,
    /// Already annotated `volume.kubernetes.io/selected-node` with this node: only there.
    pub selected: Option<Arc<str>>,
    /// A volume already pre-bound to it (its `spec.claimRef` names the claim): only where that
    /// volume is reachable.
    pub prebound: Option<Arc<str>>,
}

/// What a pod's claims ask of a node, resolved from the claims, volumes and classes; shared by
/// members whose claims ask alike (claim names are in [`TaskVolumes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct VolumeNeeds {
    /// The pod cannot go anywhere (kube-scheduler's PreFilter message: a missing claim, an
    /// unbound `Immediate` claim, a lost claim or one being deleted).
    pub blocked: Option<String>,
    /// Every node fails with this reason (a bound claim's volume does not exist).
    pub every_node: Option<&'static str>,
    /// Bound claims' volumes' required node affinity: the node must match one term of each.
    pub bound_terms: Vec<Vec<SelectorTerm>>,
    /// Unbound `WaitForFirstConsumer` claims, smallest first (the order kube-scheduler matches
    /// them in); [`TaskVolumes::claims`] names them in the same order.
    pub claims: Vec<ClaimNeed>,
    /// `namespace/name` of the pod's `ReadWriteOncePod` claims.
    pub rwop: Vec<Arc<str>>,
    /// Volumes counted against CSI attach limits: (driver, volume handle); a volume still to
    /// be provisioned has no handle and always counts.
    pub attach: Vec<(Arc<str>, Option<Arc<str>>)>,
}

impl VolumeNeeds {
    /// No claim at all.
    pub fn is_empty(&self) -> bool {
        *self == VolumeNeeds::default()
    }

    /// Whether fit depends on what else the session places (volumes chosen, claims in use,
    /// attach counts), not only on the node's fixed attributes.
    pub fn dynamic(&self) -> bool {
        !self.claims.is_empty() || !self.rwop.is_empty() || !self.attach.is_empty()
    }
}

/// Per pod: the names behind its [`VolumeNeeds`] and whether it may be bound now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskVolumes {
    /// `name` and `uid` of each claim in [`VolumeNeeds::claims`], in the same order.
    pub claims: Vec<(Arc<str>, Arc<str>)>,
    /// Every claim of the pod is fully bound (`spec.volumeName` set and
    /// `pv.kubernetes.io/bind-completed`): the pod may be bound.
    pub all_bound: bool,
    /// The oldest time Caldera selected a node or pre-bound a volume for one of its claims
    /// still not bound ([`SELECTED_AT`]).
    pub selected_at: Option<Time>,
    /// Claims still unbound that Caldera had annotated ([`SELECTED_AT`]) but whose
    /// `selected-node` annotation is gone (a provisioner removes it when provisioning fails).
    pub failed: Vec<Arc<str>>,
}

/// A PersistentVolume a `WaitForFirstConsumer` claim could be bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `spec.storageClassName` (empty when none).
    pub class: Arc<str>,
    /// `spec.capacity.storage` in bytes.
    pub size: i64,
    /// `spec.accessModes` (bits of [`access`]).
    pub modes: u8,
    /// `volumeMode: Block`.
    pub block: bool,
    /// `metadata.labels` (claims' selectors read them).
    pub labels: BTreeMap<String, String>,
    /// Required node affinity (`None`: reachable from every node).
    pub terms: Option<Vec<SelectorTerm>>,
    /// `namespace/name` of the claim its `spec.claimRef` names, when pre-bound.
    pub claim_ref: Option<Arc<str>>,
}

impl Volume {
    /// Whether the node with `name` and `labels` can reach it.
    pub fn reachable(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.terms
            .as_ref()
            .is_none_or(|terms| terms.iter().any(|t| t.matches(name, labels)))
    }

    /// Whether it satisfies `claim` (class, size, access modes, volume mode, selector), as the
    /// PV controller's matching does. Reachability is checked separately.
    pub fn satisfies(&self, claim: &ClaimNeed) -> bool {
        self.class == claim.class
            && self.size >= claim.size
            && self.modes & claim.modes == claim.modes
            && self.block == claim.block
            && claim
                .selector
                .as_ref()
                .is_none_or(|s| s.matches(&self.labels))
    }
}

/// A node's CSI attach limits (from its CSINode) and what is attached there now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeAttach {
    /// Per driver: `allocatable.count`.
    pub limits: BTreeMap<Arc<str>, u32>,
    /// Per driver: volume handles used by pods on the node.
    pub attached: BTreeMap<Arc<str>, Vec<Arc<str>>>,
}

/// Everything about volumes a session needs beyond the pods' own needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeCatalog {
    /// Volumes `WaitForFirstConsumer` claims may take: available (no claim bound, not being
    /// deleted) or pre-bound to a claim still unbound; sorted by (class, size, name).
    pub volumes: Vec<Volume>,
    /// `namespace/name` of `ReadWriteOncePod` claims used by pods on nodes.
    pub rwop_in_use: Vec<Arc<str>>,
    /// Attach limits, by node name (only nodes whose CSINode states a limit).
    pub attach: BTreeMap<Arc<str>, NodeAttach>,
    /// Gate mode: kube-scheduler binds volumes itself once a member is released, so the plan
    /// carries no volume writes and members do not wait for their claims.
    pub left_to_kube_scheduler: bool,
}

/// A write of the volume binder.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VolumeWrite {
    /// Annotate the claim `volume.kubernetes.io/selected-node: node` (and [`SELECTED_AT`]): a
    /// provisioner creates its volume reachable from the node.
    SelectNode {
        /// Claim namespace.
        namespace: Arc<str>,
        /// Claim name.
        claim: Arc<str>,
        /// The member's node.
        node: Arc<str>,
    },
    /// Pre-bind the volume to the claim (`spec.claimRef`, as kube-scheduler does; the PV
    /// controller completes the binding).
    PreBind {
        /// Volume name.
        volume: Arc<str>,
        /// Claim namespace.
        namespace: Arc<str>,
        /// Claim name.
        claim: Arc<str>,
        /// Claim uid.
        uid: Arc<str>,
    },
    /// The wait timed out or provisioning failed: remove the selected-node annotation (and
    /// [`SELECTED_AT`]) from a claim still unbound, so it can be placed again.
    Unselect {
        /// Claim namespace.
        namespace: Arc<str>,
        /// Claim name.
        claim: Arc<str>,
    },
}

impl VolumeWrite {
    /// `namespace/claim` the write is about.
    pub fn claim_key(&self) -> String {
        match self {
            Self::SelectNode {
                namespace, claim, ..
            }
            | Self::PreBind {
                namespace, claim, ..
            }
            | Self::Unselect { namespace, claim } => format!("{namespace}/{claim}"),
        }
    }
}
