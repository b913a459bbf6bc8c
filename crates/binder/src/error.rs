//! The binder's error: which API write failed, and whether trying again can help.

use std::fmt;

/// `Result` with the binder's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API write an [`Error`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteKind {
    /// `POST pods/binding`.
    Binding,
    /// Gate mode: `PATCH pods` (pin, gates removed) then `PATCH pods/status`
    /// (`nominatedNodeName`).
    Release,
    /// `PATCH pods/status` (the `PodScheduled` condition, or phase Failed).
    PodStatus,
    /// `PATCH podgroups/status`.
    PodGroupStatus,
    /// `PATCH queues/status`.
    QueueStatus,
    /// `POST events` (`events.k8s.io/v1`).
    Event,
    /// `POST pods/eviction` (`policy/v1` Eviction).
    Eviction,
    /// `PATCH pods/status` setting or clearing `nominatedNodeName`.
    Nomination,
    /// `POST`/`DELETE` of an autoscaler request (`autoscaling.x-k8s.io/v1`
    /// ProvisioningRequest).
    ProvisioningRequest,
    /// `POST`/`DELETE` of a request's PodTemplate.
    PodTemplate,
    /// `PATCH pods` adding or removing a member's consume-provisioning-request annotations.
    ConsumeAnnotations,
    /// `PATCH persistentvolumeclaims` (merge patch of annotations): a claim annotated with its
    /// member's node (`volume.kubernetes.io/selected-node`), or that selection undone.
    ClaimSelection,
    /// `PATCH persistentvolumes` (merge patch): a volume pre-bound to a claim
    /// (`spec.claimRef`).
    VolumePreBind,
    /// DRA: `GET resourceclaims`, `PUT resourceclaims` (the delete-protection finalizer) and
    /// `PUT resourceclaims/status` (allocation and `reservedFor`); for the extended-resource
    /// bridge also `POST resourceclaims` and `PATCH pods/status`.
    ResourceClaim,
    /// `PATCH podgroups` (merge patch of `metadata.annotations`): the room held for pods
    /// `consolidate` moved (`caldera.sh/consolidation`).
    ConsolidationHolds,
    /// `POST`/`PATCH` of a Queue Caldera keeps (`default`, and `root` under the queue tree).
    Queue,
    /// `POST`/`PATCH`/`DELETE` of a PodGroup derived from a workload.
    PodGroup,
    /// `POST`/`PATCH`/`DELETE` of a HyperNode discovered from node labels.
    HyperNode,
    /// `PATCH hypernodes/status` (`status.nodeCount`).
    HyperNodeStatus,
}

/// How urgent a kind of write is: acts go first; reports and events follow behind them (see
/// the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    /// Changes what runs where (binds): sent at once, in plan order.
    Act,
    /// What users and controllers read about an object (its status): one write per object,
    /// the newest, once no act is queued (or under the token share).
    Report,
    /// Events: bounded and folded, behind the acts like reports.
    Event,
}

impl WriteKind {
    /// The class of this kind of write.
    pub fn class(self) -> Class {
        match self {
            // Volume writes come before the binds that wait for them; an eviction frees what a
            // waiting gang needs, and its victims' grace period starts only once it is sent.
            Self::Binding
            | Self::Release
            | Self::ClaimSelection
            | Self::VolumePreBind
            | Self::ResourceClaim
            | Self::Eviction => Class::Act,
            // Held room for moved pods' replacements is read back by the next sessions; like a
            // nomination, it may wait a moment behind the binds.
            Self::PodStatus
            | Self::PodGroupStatus
            | Self::QueueStatus
            | Self::Nomination
            | Self::ConsolidationHolds => Class::Report,
            // The objects Caldera's controllers keep (`owned.rs`): what they say holds until a
            // newer round says otherwise.
            Self::Queue | Self::PodGroup | Self::HyperNode | Self::HyperNodeStatus => Class::Report,
            // Nodes an autoscaler adds take minutes to come: a request waits behind the binds
            // like a status write (see `capacity.rs`).
            Self::ProvisioningRequest | Self::PodTemplate | Self::ConsumeAnnotations => {
                Class::Report
            }
            Self::Event => Class::Event,
        }
    }

    /// A short label for logs and metrics: `binding`, `pod_status`, `podgroup_status`,
    /// `queue_status`, `event`, `eviction`, `nomination`, `provisioningrequest`, `podtemplate`,
    /// `pod` (consume annotations), `queue`, `podgroup`, `hypernode`, `hypernode_status`
    /// (objects Caldera's controllers keep).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Binding => "binding",
            Self::Release => "release",
            Self::PodStatus => "pod_status",
            Self::PodGroupStatus => "podgroup_status",
            Self::QueueStatus => "queue_status",
            Self::Event => "event",
            Self::Eviction => "eviction",
            Self::Nomination => "nomination",
            Self::ProvisioningRequest => "provisioningrequest",
            Self::PodTemplate => "podtemplate",
            Self::ConsumeAnnotations => "pod",
            Self::ClaimSelection => "claim_selection",
            Self::VolumePreBind => "volume_prebind",
            Self::ResourceClaim => "resourceclaim",
            Self::ConsolidationHolds => "consolidation_holds",
            Self::Queue => "queue",
            Self::PodGroup => "podgroup",
            Self::HyperNode => "hypernode",
            Self::HyperNodeStatus => "hypernode_status",
        }
    }
}

impl fmt::Display for WriteKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A write that failed.
///
/// Worth retrying ([`Error::is_retryable`]) when the server answered 5xx or 429, or the
/// request never got an answer; not when it answered 4xx: the object is gone or changed
/// (404, 409), the request is wrong (400, 422) or not allowed (403), and sending it again
/// gives the same answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `POST pods/binding` failed.
    #[error("binding pod {pod} to node {node}: {source}")]
    Bind {
        /// `namespace/name` of the pod.
        pod: String,
        /// Target node.
        node: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// Gate mode: releasing a gated member failed.
    #[error("releasing pod {pod} to node {node}: {source}")]
    Release {
        /// `namespace/name` of the pod.
        pod: String,
        /// The node it is pinned to.
        node: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// A status patch (pod, PodGroup or Queue) failed.
    #[error("patching the status of {kind} {object}: {source}")]
    Status {
        /// Which status.
        kind: WriteKind,
        /// `namespace/name`, or the name of a cluster-scoped object.
        object: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// Another write (an autoscaler request, its PodTemplates, a member's annotations) failed.
    #[error("writing {kind} {object}: {source}")]
    Write {
        /// Which write.
        kind: WriteKind,
        /// `namespace/name`.
        object: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// A volume binder write (claim annotation, volume pre-bind) failed.
    #[error("{kind} of {object}: {source}")]
    Volume {
        /// Which write.
        kind: WriteKind,
        /// `namespace/name` of the claim, or the volume's name.
        object: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// A DRA claim write (finalizer, allocation, `reservedFor`, the bridge's claim) failed, or
    /// the claim is no longer as the decision saw it (a synthesized 409).
    #[error("allocating resource claim {object}: {source}")]
    Claim {
        /// `namespace/name` of the claim (for the bridge, of its pod).
        object: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// Creating an event failed.
    #[error("recording event {reason} on {object}: {source}")]
    Event {
        /// The event's reason.
        reason: String,
        /// `namespace/name` of the regarding object.
        object: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
}

impl Error {
    /// The underlying kube error.
    pub fn kube(&self) -> &kube::Error {
        match self {
            Error::Bind { source, .. }
            | Error::Release { source, .. }
            | Error::Status { source, .. }
            | Error::Write { source, .. }
            | Error::Volume { source, .. }
            | Error::Claim { source, .. }
            | Error::Event { source, .. } => source,
        }
    }

    /// The HTTP status the server answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self.kube() {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        }
    }

    /// The label for `caldera_bind_errors_total{code}`: the HTTP status, or `transport` when
    /// the request got no answer.
    pub fn code_label(&self) -> String {
        self.code()
            .map(|c| c.to_string())
            .unwrap_or_else(|| "transport".to_string())
    }

    /// Whether sending the same request again may succeed (5xx, 429, no answer).
    pub fn is_retryable(&self) -> bool {
        match self.code() {
            Some(code) => code >= 500 || code == 429,
            None => !matches!(
                self.kube(),
                kube::Error::SerdeError(_) | kube::Error::BuildRequest(_)
            ),
        }
    }

    /// How long the server asked to wait before trying again (a 429 or 503's
    /// `details.retryAfterSeconds`, which kube-apiserver sets with its `Retry-After` header).
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self.kube() {
            kube::Error::Api(status) => status
                .details
                .as_ref()
                .map(|d| d.retry_after_seconds)
                .filter(|&s| s > 0)
                .map(|s| std::time::Duration::from_secs(u64::from(s))),
            _ => None,
        }
    }

    /// Whether this is the eviction subresource refusing because of a PodDisruptionBudget
    /// (429 with a `DisruptionBudget` cause, or its message), not the server being
    /// overloaded (a 429 of API priority and fairness, which asks to retry after a while).
    pub fn is_budget_refusal(&self) -> bool {
        match self.kube() {
            kube::Error::Api(status) if status.code == 429 => {
                status
                    .details
                    .iter()
                    .flat_map(|d| &d.causes)
                    .any(|c| c.reason == "DisruptionBudget")
                    || status.message.contains("disruption budget")
            }
            _ => false,
        }
    }

    /// The fields a 422 Invalid answer names (`details.causes[].field`), joined, or its
    /// message when it names none.
    pub fn invalid(&self) -> Option<String> {
        match self.kube() {
            kube::Error::Api(status) if status.code == 422 => {
                let fields: Vec<&str> = status
                    .details
                    .iter()
                    .flat_map(|d| &d.causes)
                    .map(|c| c.field.as_str())
                    .filter(|f| !f.is_empty())
                    .collect();
                Some(if fields.is_empty() {
                    status.message.clone()
                } else {
                    fields.join(", ")
                })
            }
            _ => None,
        }
    }

    /// Whether the answer says the target is gone or already changed (404 NotFound, 409
    /// Conflict): for a bind, the watch will show what happened; nothing to retry.
    pub fn is_settled(&self) -> bool {
        matches!(self.code(), Some(404 | 409))
    }
}
