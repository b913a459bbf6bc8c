//! One conversion per kind: a Kubernetes object becomes a model value, or an `*Info` holding
//! everything about it that does not depend on the rest of the cluster.
//!
//! What does depend on the rest (a pod's priority through its PriorityClass, whether a pod is
//! ours, which job it lands in) is decided when [`crate::ClusterIndex::snapshot`] assembles.

use crate::error::{Error, ObjectKind, Problem, Result};
pub use crate::fields::{group_name, pod_condition, pod_request, time};
use crate::fields::{
    label_keys, label_selector, resource_list, selector_term, spec_request, taint_effect, Ctx,
};
use caldera_api::{
    reason, PodGroup, Queue as ApiQueue, QueueState, TopologyMode, ANNOTATION_QUEUE_NAME,
    DEFAULT_QUEUE, TASK_SPEC_KEY,
};
use caldera_model::{
    Condition, HostPort, Labels, Namespaces, Node, PendingReason, PlacementSpec, PodAffinityTerm,
    PodConstraints, PodGroupPhase, PodGroupStatus, Queue, QueueStatus, Resources, SelectorOp,
    SpreadConstraint, Taint, Time, Toleration, Topology, PODS,
};
use k8s_openapi::api::core::v1::{
    Node as KubeNode, Pod, PodAffinityTerm as KubePodAffinityTerm, PodSpec, WeightedPodAffinityTerm,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Pods a node holds when its allocatable does not say (the kubelet's default).
pub const DEFAULT_MAX_PODS: i64 = 110;

/// Namespace of pods that are never victims.
const KUBE_SYSTEM: &str = "kube-system";
/// PriorityClasses of pods that are never victims.
const CRITICAL_CLASSES: [&str; 2] = ["system-cluster-critical", "system-node-critical"];

/// A pod's phase as reported in `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodPhase {
    /// Pending (also when absent).
    Pending,
    /// Running.
    Running,
    /// Succeeded.
    Succeeded,
    /// Failed.
    Failed,
    /// Unknown, or a value this version does not know.
    Unknown,
}

impl PodPhase {
    fn parse(s: Option<&str>) -> Self {
        match s {
            None | Some("Pending") | Some("") => Self::Pending,
            Some("Running") => Self::Running,
            Some("Succeeded") => Self::Succeeded,
            Some("Failed") => Self::Failed,
            Some(_) => Self::Unknown,
        }
    }

    /// Succeeded or Failed: the pod no longer holds anything on its node.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

/// Everything about a pod the scheduler needs, converted once when the pod arrives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    /// `metadata.uid` (`namespace/name` when absent).
    pub uid: Arc<str>,
    /// `metadata.namespace` (`default` when absent).
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `spec.schedulerName` (`default-scheduler` when absent, as the API server defaults it).
    pub scheduler_name: Arc<str>,
    /// The group name from annotations or labels, or the native PodGroup named by
    /// `spec.schedulingGroup.podGroupName` (then [`PodInfo::native`]), if any.
    pub group: Option<Arc<str>>,
    /// `group` names a native `scheduling.k8s.io/v1alpha2` PodGroup (`spec.schedulingGroup`).
    pub native: bool,
    /// Its controller (`ownerReferences[]` with `controller: true`): the workload a gang may
    /// be derived from ([`crate::workload`], [`crate::derive`]); for a pod that names a group
    /// of its own, to report a clash with a derived gang.
    pub owner: Option<crate::workload::Owner>,
    /// The job this pod belongs to: `<ns>/<group>`, or `<ns>/pod:<name>` without a group.
    pub job_id: Arc<str>,
    /// Annotation `scheduling.volcano.sh/queue-name` (used only without a group).
    pub queue_annotation: Option<Arc<str>>,
    /// `spec.nodeName`.
    pub node: Option<Arc<str>>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// Request as Kubernetes computes it.
    pub request: Resources,
    /// `spec.priority`, when admission has set it.
    pub spec_priority: Option<i32>,
    /// `spec.priorityClassName`.
    pub priority_class: Option<Arc<str>>,
    /// Role from annotation or label `volcano.sh/task-spec`.
    pub role: Option<Arc<str>>,
    /// Has scheduling gates.
    pub gated: bool,
    /// Carries Caldera's gate [`caldera_api::GANG_GATE`] (gate mode).
    pub gang_gate: bool,
    /// Carries a scheduling gate other than Caldera's.
    pub other_gates: bool,
    /// The node an unbound pod is held at (nominated, or pinned by required affinity; see
    /// [`crate::gate::held_node`]).
    pub held: Option<Arc<str>>,
    /// Placement constraints.
    pub spec: Arc<PlacementSpec>,
    /// `metadata.labels`.
    pub labels: Labels,
    /// `metadata.creationTimestamp` (epoch when absent).
    pub created: Time,
    /// The `PodScheduled=False` condition.
    pub pending_reason: Option<Arc<PendingReason>>,
    /// When `PodScheduled` became False.
    pub pending_since: Option<Time>,
    /// In kube-system, of a system-critical PriorityClass, or a mirror (static) pod: never
    /// a victim.
    pub critical: bool,
    /// `spec.preemptionPolicy: Never`.
    pub never_preempts: bool,
    /// `status.startTime`.
    pub started: Option<Time>,
    /// The ProvisioningRequest its consume annotation names.
    pub consumes: Option<Arc<str>>,
    /// The PersistentVolumeClaims its volumes use: (claim name, from a generic ephemeral
    /// volume).
    pub claims: Arc<[(Arc<str>, bool)]>,
    /// Its `spec.resourceClaims` (DRA), resolved against the claims at snapshot time.
    pub resource_claims: Option<Arc<crate::dra::PodClaims>>,
    /// Its containers' extended-resource requests, which DeviceClasses may serve (the bridge).
    pub extended: Arc<[caldera_model::dra::ExtendedRequest]>,
    /// The controller that re-creates it once deleted (see [`crate::consolidation`]).
    pub controller: Option<Arc<caldera_model::Controller>>,
    /// Annotation `caldera.sh/no-consolidate`.
    pub no_consolidate: bool,
}

impl PodInfo {
    /// The member state (SPEC §4): terminating → Releasing; Succeeded/Failed; a node →
    /// Bound (Running when the phase says so); else Pending.
    pub fn status(&self) -> caldera_model::TaskStatus {
        use caldera_model::TaskStatus as S;
        if self.terminating {
            return S::Releasing;
        }
        match self.phase {
            PodPhase::Succeeded => S::Succeeded,
            PodPhase::Failed => S::Failed,
            PodPhase::Running if self.node.is_some() => S::Running,
            _ if self.node.is_some() => S::Bound,
            _ => S::Pending,
        }
    }

    /// Whether the pod holds resources on a node: it has one and has not finished. Terminating
    /// pods count until they are gone.
    pub fn counts_on_node(&self) -> bool {
        self.node.is_some() && !self.phase.is_terminal()
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The annotation the kubelet puts on the API mirror of a static pod.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

impl TryFrom<&Pod> for PodInfo {
    type Error = Error;

    fn try_from(pod: &Pod) -> Result<Self> {
        let meta = &pod.metadata;
        let ctx = Ctx::new(ObjectKind::Pod, meta);
        let name = ctx.name(meta)?;
        let namespace = meta.namespace.as_deref().unwrap_or("default");
        let default_spec = PodSpec::default();
        let spec = pod.spec.as_ref().unwrap_or(&default_spec);
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
        let labels = meta.labels.clone().unwrap_or_default();
        let label = |key: &str| labels.get(key);
        let volcano_group = group_name(meta).map(Arc::from);
        let native_group: Option<Arc<str>> = spec
            .scheduling_group
            .as_ref()
            .and_then(|g| g.pod_group_name.as_deref())
            .filter(|n| !n.is_empty())
            .map(Arc::from);
        let native = native_group.is_some();
        let group = native_group.or(volcano_group.clone());
        let job_id: Arc<str> = match &group {
            Some(g) => format!("{namespace}/{g}").into(),
            None => format!("{namespace}/pod:{name}").into(),
        };
        let scheduled = pod_condition(pod, "PodScheduled").filter(|c| c.status == "False");
        let priority_class = spec
            .priority_class_name
            .as_deref()
            .filter(|s| !s.is_empty());
        Ok(PodInfo {
            uid: meta
                .uid
                .as_deref()
                .map(Arc::from)
                .unwrap_or_else(|| format!("{namespace}/{name}").into()),
            namespace: namespace.into(),
            name: name.into(),
            scheduler_name: spec
                .scheduler_name
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("default-scheduler")
                .into(),
            owner: crate::workload::Owner::of(meta),
            group,
            native,
            job_id,
            queue_annotation: annotation(ANNOTATION_QUEUE_NAME)
                .filter(|q| !q.is_empty())
                .map(|q| Arc::from(q.as_str())),
            node: spec
                .node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            phase: PodPhase::parse(pod.status.as_ref().and_then(|s| s.phase.as_deref())),
            terminating: meta.deletion_timestamp.is_some(),
            request: spec_request(&ctx, spec)?,
            spec_priority: spec.priority,
            priority_class: priority_class.map(Arc::from),
            role: annotation(TASK_SPEC_KEY)
                .or_else(|| label(TASK_SPEC_KEY))
                .map(|r| Arc::from(r.as_str())),
            gated: spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty()),
            gang_gate: crate::gate::has_gang_gate(Some(spec)),
            other_gates: crate::gate::has_other_gates(Some(spec)),
            held: crate::gate::held_node(pod).map(Arc::from),
            spec: Arc::new({
                let mut placement = placement(&ctx, spec, namespace, &labels)?;
                if native && volcano_group.is_some() {
                    // One pod is never in two gangs: which one is meant is not guessed.
                    placement.unsupported = Some(
                        "both spec.schedulingGroup and a Volcano group (annotation or label) name a gang for this pod; give one"
                            .into(),
                    );
                }
                // KAI's GPU sharing annotations are never ignored: placed without them, the
                // pod would get no GPU (or a whole one) instead of the share it asks.
                if let Some(key) = KAI_SHARE_ANNOTATIONS
                    .into_iter()
                    .find(|k| annotation(k).is_some())
                {
                    placement.unsupported.get_or_insert_with(|| {
                        format!(
                            "annotation {key} (KAI's GPU sharing; ask for a share through a DRA \
                             ResourceClaim's capacity request on a shared GPU instead, \
                             docs/gpu-sharing.md)"
                        )
                    });
                }
                placement
            }),
            labels: Arc::new(labels.clone()),
            created: meta
                .creation_timestamp
                .as_ref()
                .map(time)
                .unwrap_or_default(),
            pending_reason: scheduled.map(|c| {
                Arc::new(PendingReason {
                    reason: c.reason.clone().unwrap_or_default(),
                    message: c.message.clone().unwrap_or_default(),
                })
            }),
            pending_since: scheduled
                .and_then(|c| c.last_transition_time.as_ref())
                .map(time),
            critical: namespace == KUBE_SYSTEM
                || priority_class.is_some_and(|c| CRITICAL_CLASSES.contains(&c))
                || annotation(MIRROR_ANNOTATION).is_some(),
            never_preempts: spec.preemption_policy.as_deref() == Some("Never"),
            started: pod
                .status
                .as_ref()
                .and_then(|s| s.start_time.as_ref())
                .map(time),
            consumes: annotation(caldera_api::ANNOTATION_CONSUME_PROVISIONING_REQUEST)
                .filter(|r| !r.is_empty())
                .map(|r| Arc::from(r.as_str())),
            claims: crate::fields::pod_claims(name, spec),
            resource_claims: crate::dra::pod_claims(pod)?.map(Arc::new),
            extended: crate::dra::extended_requests(spec).into(),
            controller: crate::consolidation::controller(meta).map(Arc::new),
            no_consolidate: crate::consolidation::opted_out(meta.annotations.as_ref()),
        })
    }
}

/// KAI scheduler's pod annotations asking for a share of a GPU (a fraction, or GPU memory).
pub const KAI_SHARE_ANNOTATIONS: [&str; 2] = ["gpu-fraction", "gpu-memory"];

/// The pod's placement constraints.
fn placement(
    ctx: &Ctx,
    spec: &PodSpec,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<PlacementSpec> {
    let unsupported = unsupported_input(spec);
    let pods = pod_constraints(ctx, spec, namespace, labels)?;
    let mut out = PlacementSpec {
        pods,
        unsupported,
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        ..PlacementSpec::default()
    };
    let node_affinity = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    if let Some(na) = node_affinity {
        let base = "spec.affinity.nodeAffinity";
        if let Some(required) = &na.required_during_scheduling_ignored_during_execution {
            let field = format!("{base}.requiredDuringSchedulingIgnoredDuringExecution");
            let terms = required
                .node_selector_terms
                .iter()
                .enumerate()
                .map(|(i, t)| selector_term(ctx, &format!("{field}.nodeSelectorTerms[{i}]"), t))
                .collect::<Result<Vec<_>>>()?;
            out.required_terms = Some(terms);
        }
        let field = format!("{base}.preferredDuringSchedulingIgnoredDuringExecution");
        for (i, p) in na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate()
        {
            let term = selector_term(ctx, &format!("{field}[{i}].preference"), &p.preference)?;
            out.preferred_terms.push((p.weight, term));
        }
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        let field = format!("spec.tolerations[{i}]");
        let exists = match t.operator.as_deref() {
            None | Some("") | Some("Equal") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(ctx.err(
                    format!("{field}.operator"),
                    Problem::UnknownValue {
                        value: other.to_string(),
                        expected: "Equal, Exists",
                    },
                ))
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(taint_effect(ctx, &format!("{field}.effect"), e)?),
        };
        out.tolerations.push(Toleration {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }
    for c in &spec.containers {
        for p in c.ports.iter().flatten() {
            if let Some(port) = p.host_port.filter(|&p| p > 0) {
                out.host_ports.push(HostPort {
                    ip: p
                        .host_ip
                        .clone()
                        .filter(|ip| !ip.is_empty())
                        .unwrap_or_else(|| "0.0.0.0".to_string()),
                    protocol: p
                        .protocol
                        .clone()
                        .filter(|p| !p.is_empty())
                        .unwrap_or_else(|| "TCP".to_string()),
                    port,
                });
            }
        }
    }
    Ok(out)
}

/// Converts a Node. `used`, `pod_count` and `host_ports` are left empty: the index fills them
/// from the pods it knows. Allocatable falls back to capacity when absent (hand-written
/// manifests often give only one); `pods` becomes [`Node::max_pods`] (110 when absent).
pub fn node(node: &KubeNode) -> Result<Node> {
    let meta = &node.metadata;
    let ctx = Ctx::new(ObjectKind::Node, meta);
    let name = ctx.name(meta)?;
    let status = node.status.as_ref();
    let (field, list) = match status.and_then(|s| s.allocatable.as_ref()) {
        Some(a) => ("status.allocatable", Some(a)),
        None => ("status.capacity", status.and_then(|s| s.capacity.as_ref())),
    };
    let mut allocatable = resource_list(&ctx, field, list)?;
    let max_pods = match list.and_then(|l| l.get(PODS)) {
        Some(_) => allocatable.get(PODS),
        None => DEFAULT_MAX_PODS,
    };
    allocatable.set(PODS, 0);
    let spec = node.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, t)| {
            Ok(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: taint_effect(&ctx, &format!("spec.taints[{i}].effect"), &t.effect)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    let mut out = Node::new(name, allocatable);
    out.labels = Arc::new(meta.labels.clone().unwrap_or_default());
    out.taints = if taints.is_empty() {
        caldera_model::node::untainted()
    } else {
        taints.into()
    };
    out.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
    out.created = meta
        .creation_timestamp
        .as_ref()
        .map(time)
        .unwrap_or_default();
    out.ready = ready;
    out.max_pods = max_pods;
    Ok(out)
}

/// A PriorityClass, reduced to what priority resolution needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityClassInfo {
    /// Name.
    pub name: Arc<str>,
    /// `value` (0 when absent).
    pub value: i32,
    /// `globalDefault`.
    pub global_default: bool,
}

/// Converts a PriorityClass.
pub fn priority_class(pc: &PriorityClass) -> Result<PriorityClassInfo> {
    let ctx = Ctx::new(ObjectKind::PriorityClass, &pc.metadata);
    Ok(PriorityClassInfo {
        name: ctx.name(&pc.metadata)?.into(),
        value: pc.value.unwrap_or(0),
        global_default: pc.global_default.unwrap_or(false),
    })
}

/// A PodGroup, converted; what depends on other objects (priority) or on options (the default
/// timeout) is resolved at snapshot time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInfo {
    /// `namespace/name`.
    pub id: Arc<str>,
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// uid (`namespace/name` when absent).
    pub uid: Arc<str>,
    /// Queue (`default` when absent).
    pub queue: Arc<str>,
    /// `minMember`, 0 or absent → 1.
    pub min_member: u32,
    /// `minTaskMember` (negative values read as 0).
    pub min_task_member: BTreeMap<String, u32>,
    /// `priorityClassName`.
    pub priority_class: Option<Arc<str>>,
    /// `minResources`.
    pub min_resources: Option<Resources>,
    /// `scheduleTimeoutSeconds`, when positive.
    pub timeout_seconds: Option<u64>,
    /// `topology` (one tier from a node label) or `networkTopology` (HyperNodes).
    pub topology: Option<Topology>,
    /// `spec.subGroupPolicy` (see [`caldera_model::Job::sub_group_policies`]).
    pub sub_group_policies: Vec<caldera_model::SubGroupPolicy>,
    /// A PodGroup input Caldera does not honour yet (see [`caldera_model::Job::unsupported`]).
    pub unsupported: Option<Arc<str>>,
    /// `metadata.creationTimestamp`; for a PodGroup Caldera derived, its workload's
    /// ([`crate::workload::workload_created`]).
    pub created: Time,
    /// Transition time of a True `Unschedulable` condition whose reason is not NotEnoughTasks.
    pub pending_since: Option<Time>,
    /// `status` (phase absent → Pending).
    pub status: PodGroupStatus,
    /// Annotation `scheduling.caldera.sh/provisioning-request`: `"true"` opts the gang in to
    /// autoscaler requests, `"false"` out; absent follows the config.
    pub autoscale: Option<bool>,
    /// The uid of its controller (`ownerReferences[]` with `controller: true`): for a PodGroup
    /// derived from a workload, that workload's.
    pub owner_uid: Option<Arc<str>>,
    /// Its controller, when Caldera derived it (annotation `scheduling.caldera.sh/derived-from`
    /// and label `app.kubernetes.io/managed-by: caldera`): only such a PodGroup is ever
    /// deleted by Caldera, once that workload no longer derives it.
    pub derived_owner: Option<crate::workload::Owner>,
    /// Annotation `caldera.sh/no-consolidate`: its members are never moved.
    pub no_consolidate: bool,
    /// Annotation `caldera.sh/consolidation`: room held for pods moved to make room for it.
    pub moves: Vec<caldera_model::MoveHold>,
    /// Annotation `caldera.sh/min-runtime` (see [`caldera_model::Job::min_runtime`]).
    pub min_runtime: Option<std::result::Result<i64, Arc<str>>>,
}

impl TryFrom<&PodGroup> for GroupInfo {
    type Error = Error;

    fn try_from(pg: &PodGroup) -> Result<Self> {
        let meta = &pg.metadata;
        let ctx = Ctx::new(ObjectKind::PodGroup, meta);
        let name = ctx.name(meta)?;
        let namespace = meta.namespace.as_deref().unwrap_or("default");
        // A derived gang is as old as its workload (the PodGroup's own time is when Caldera's
        // write landed, which for workloads submitted together is any order).
        let created = crate::workload::workload_created(meta)
            .or_else(|| meta.creation_timestamp.as_ref().map(time))
            .unwrap_or_default();
        let spec = &pg.spec;
        let min_resources = match &spec.min_resources {
            Some(list) => Some(resource_list(&ctx, "spec.minResources", Some(list))?),
            None => None,
        };
        let topology = match (&spec.topology, &spec.network_topology) {
            (Some(t), _) if t.key.is_empty() => {
                return Err(ctx.err("spec.topology.key", Problem::Missing))
            }
            (Some(t), _) => Some(Topology::one_tier(&t.key, t.mode == TopologyMode::Required)),
            (None, Some(n)) => Some(crate::topology::network_topology(n)),
            (None, None) => None,
        };
        // Inputs Caldera does not honour yet hold the gang with a message; never ignored.
        let unsupported: Option<Arc<str>> =
            if spec.topology.is_some() && spec.network_topology.is_some() {
                Some("both spec.topology and spec.networkTopology (give one topology rule)".into())
            } else {
                spec.sub_group_policy
                    .iter()
                    .flatten()
                    .enumerate()
                    .find_map(|(i, p)| {
                        p.extra.keys().next().map(|field| {
                            format!("spec.subGroupPolicy[{i}].{field} (a field of a newer Volcano)")
                                .into()
                        })
                    })
            };
        let sub_group_policies = spec
            .sub_group_policy
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, p)| sub_group_policy(&ctx, i, p))
            .collect::<Result<Vec<_>>>()?;
        let api_status = pg.status.clone().unwrap_or_default();
        let conditions: Vec<Condition> = api_status
            .conditions
            .iter()
            .flatten()
            .map(|c| Condition {
                type_: c.type_.as_ref().map(|t| t.to_string()).unwrap_or_default(),
                status: c.status.as_ref().map(|s| s.to_string()).unwrap_or_default(),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
                last_transition: c.last_transition_time.as_ref().map(time).unwrap_or(created),
            })
            .collect();
        let pending_since = api_status
            .conditions
            .iter()
            .flatten()
            .find(|c| {
                c.type_
                    .as_ref()
                    .is_some_and(|t| t.as_str() == "Unschedulable")
                    && c.status.as_ref().is_some_and(|s| s.as_str() == "True")
                    && c.reason.as_deref() != Some(reason::NOT_ENOUGH_TASKS)
            })
            .and_then(|c| c.last_transition_time.as_ref())
            .map(time);
        let count = |n: Option<i32>| n.unwrap_or(0).max(0) as u32;
        let moves = match meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(caldera_model::HOLDS_ANNOTATION))
        {
            Some(text) => crate::consolidation::decode(text, namespace).map_err(|e| {
                ctx.err(
                    "metadata.annotations[caldera.sh/consolidation]",
                    Problem::Invalid(e),
                )
            })?,
            None => Vec::new(),
        };
        Ok(GroupInfo {
            id: format!("{namespace}/{name}").into(),
            namespace: namespace.into(),
            name: name.into(),
            uid: meta
                .uid
                .as_deref()
                .map(Arc::from)
                .unwrap_or_else(|| format!("{namespace}/{name}").into()),
            queue: spec.queue_name().into(),
            min_member: spec.min_member().max(1) as u32,
            min_task_member: spec
                .min_task_member
                .iter()
                .flatten()
                .map(|(role, n)| (role.clone(), (*n).max(0) as u32))
                .collect(),
            priority_class: spec
                .priority_class_name
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(Arc::from),
            min_resources,
            timeout_seconds: spec
                .schedule_timeout_seconds
                .filter(|&s| s > 0)
                .map(|s| s as u64),
            topology,
            sub_group_policies,
            unsupported,
            created,
            pending_since,
            autoscale: meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::provisioning::ANNOTATION_PROVISIONING_REQUEST))
                .and_then(|v| match v.trim() {
                    "true" => Some(true),
                    "false" => Some(false),
                    _ => None,
                }),
            owner_uid: crate::workload::Owner::of(meta).map(|o| o.uid),
            derived_owner: crate::workload::derived_owner(meta),
            no_consolidate: crate::consolidation::opted_out(meta.annotations.as_ref()),
            moves,
            min_runtime: min_runtime(meta.annotations.as_ref()),
            status: PodGroupStatus {
                phase: match &api_status.phase {
                    None => PodGroupPhase::Pending,
                    Some(p) => PodGroupPhase::parse(p.as_str()).unwrap_or(PodGroupPhase::Unknown),
                },
                conditions,
                running: count(api_status.running),
                succeeded: count(api_status.succeeded),
                failed: count(api_status.failed),
            },
        })
    }
}

/// A PodGroup's annotation `caldera.sh/min-runtime`: a Go duration in milliseconds, or why
/// the value was refused (never ignored: the gang waits, its condition saying so).
pub fn min_runtime(
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<std::result::Result<i64, Arc<str>>> {
    let text = annotations?.get(caldera_model::MIN_RUNTIME_ANNOTATION)?;
    let parsed = caldera_config::parse_duration(text.trim())
        .map_err(|e| e.to_string())
        .and_then(|d| i64::try_from(d.as_millis()).map_err(|_| format!("{text:?} is too long")));
    Some(
        parsed.map_err(|e| {
            format!("annotation {}: {e}", caldera_model::MIN_RUNTIME_ANNOTATION).into()
        }),
    )
}

/// A Queue's `status.usage`, as written by the fairshare plugin. A record without its time
/// is no record; amounts are clamped to 0..=1,000,000 (a hand-edited status cannot make usage
/// negative or more than the whole cluster).
fn queue_usage(u: &caldera_api::QueueUsage) -> Option<caldera_model::QueueUsage> {
    let at = time(u.last_update_time.as_ref()?);
    let amounts = |m: &Option<BTreeMap<String, i64>>| {
        m.iter()
            .flatten()
            .filter(|(_, v)| **v > 0)
            .map(|(k, v)| {
                let clamped = (*v).min(i64::from(caldera_model::USAGE_SCALE)) as u32;
                (Arc::<str>::from(k.as_str()), clamped)
            })
            .collect()
    };
    Some(caldera_model::QueueUsage {
        at,
        decayed: amounts(&u.decayed),
        held: amounts(&u.held),
    })
}

/// Converts a Queue. A queue whose `status.state` is `Closed` or `Closing` admits nothing new
/// (`open = false`); every other state, and no status at all, is open.
pub fn queue(q: &ApiQueue) -> Result<Queue> {
    let meta = &q.metadata;
    let ctx = Ctx::new(ObjectKind::Queue, meta);
    let name = ctx.name(meta)?;
    let spec = &q.spec;
    let optional = |field: &str, list: &Option<BTreeMap<String, Quantity>>| match list {
        Some(l) => resource_list(&ctx, field, Some(l)).map(Some),
        None => Ok(None),
    };
    let state = q.status.as_ref().and_then(|s| s.state.as_ref());
    let status = match &q.status {
        Some(s) => {
            let count = |n: Option<i32>| n.unwrap_or(0).max(0) as u32;
            Some(QueueStatus {
                state: s.state.as_ref().map(|s| s.to_string()).unwrap_or_default(),
                pending: count(s.pending),
                inqueue: count(s.inqueue),
                running: count(s.running),
                completed: count(s.completed),
                unknown: count(s.unknown),
                allocated: resource_list(&ctx, "status.allocated", s.allocated.as_ref())?,
                conditions: s
                    .conditions
                    .iter()
                    .flatten()
                    .map(|c| Condition {
                        type_: c.type_.clone().unwrap_or_default(),
                        status: c.status.clone().unwrap_or_default(),
                        reason: c.reason.clone().unwrap_or_default(),
                        message: c.message.clone().unwrap_or_default(),
                        last_transition: c
                            .last_transition_time
                            .as_ref()
                            .map(time)
                            .unwrap_or_default(),
                    })
                    .collect(),
                usage: s.usage.as_ref().and_then(queue_usage),
            })
        }
        None => None,
    };
    let mut out = Queue::new(name);
    out.uid = Arc::from(meta.uid.as_deref().unwrap_or(""));
    out.weight = spec.weight() as u32;
    out.capability = optional("spec.capability", &spec.capability)?;
    out.guarantee = resource_list(
        &ctx,
        "spec.guarantee.resource",
        spec.guarantee.as_ref().and_then(|g| g.resource.as_ref()),
    )?;
    out.deserved = optional("spec.deserved", &spec.deserved)?;
    out.reclaimable = spec.reclaimable();
    out.priority = spec.priority();
    out.open = !matches!(state, Some(QueueState::Closed) | Some(QueueState::Closing));
    out.status = status;
    out.exists = true;
    out.zero_capability = match (&out.capability, &spec.capability) {
        (Some(parsed), Some(listed)) => listed
            .keys()
            .filter(|n| *n != "cpu" && *n != "memory" && parsed.get(n) == 0)
            .map(|n| Arc::from(n.as_str()))
            .collect(),
        _ => Vec::new(),
    };
    out.parent = spec
        .parent
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(Arc::from);
    Ok(out)
}

/// The queue `default`, when no Queue object names it (SPEC §2: Caldera creates it).
pub(crate) fn implicit_default_queue() -> Queue {
    let mut q = Queue::new(DEFAULT_QUEUE);
    q.exists = false;
    q
}

/// A queue that a job names but that does not exist: closed, so the job is held with a clear
/// reason instead of running unaccounted.
pub(crate) fn missing_queue(name: &str) -> Queue {
    let mut q = Queue::new(name);
    q.exists = false;
    q.open = false;
    q
}

/// One `spec.subGroupPolicy[i]` entry. `subGroupSize` below 1 and a negative `minSubGroups`
/// are errors naming the field (Volcano's CRD refuses them too).
fn sub_group_policy(
    ctx: &Ctx,
    i: usize,
    p: &caldera_api::SubGroupPolicySpec,
) -> Result<caldera_model::SubGroupPolicy> {
    let field = |f: &str| format!("spec.subGroupPolicy[{i}].{f}");
    let size = match p.sub_group_size {
        None => 1,
        Some(n) if n >= 1 => n as u32,
        Some(n) => {
            return Err(ctx.err(
                field("subGroupSize"),
                Problem::Invalid(format!("{n} is below 1")),
            ))
        }
    };
    let min = match p.min_sub_groups {
        None => 0,
        Some(n) if n >= 0 => n as u32,
        Some(n) => {
            return Err(ctx.err(
                field("minSubGroups"),
                Problem::Invalid(format!("{n} is negative")),
            ))
        }
    };
    let selector = match &p.label_selector {
        Some(sel) => Some(label_selector(
            ctx,
            &field("labelSelector"),
            sel,
            Vec::new(),
        )?),
        None => None,
    };
    Ok(caldera_model::SubGroupPolicy {
        name: p.name.as_deref().unwrap_or_default().into(),
        selector,
        match_label_keys: p.match_label_keys.clone().unwrap_or_default(),
        size,
        min,
        topology: p
            .network_topology
            .as_ref()
            .map(crate::topology::network_topology),
    })
}

/// A pod (anti-)affinity term. A non-empty `namespaceSelector` stays a selector over Namespace
/// labels, resolved when a snapshot is taken.
fn affinity_term(
    ctx: &Ctx,
    field: &str,
    term: &KubePodAffinityTerm,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<PodAffinityTerm> {
    let mut extra = label_keys(term.match_label_keys.as_ref(), labels, SelectorOp::In);
    extra.extend(label_keys(
        term.mismatch_label_keys.as_ref(),
        labels,
        SelectorOp::NotIn,
    ));
    let selector = term
        .label_selector
        .as_ref()
        .map(|s| label_selector(ctx, &format!("{field}.labelSelector"), s, extra))
        .transpose()?;
    let listed: Vec<String> = term.namespaces.clone().unwrap_or_default();
    let namespaces = match &term.namespace_selector {
        Some(s)
            if s.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && s.match_expressions.as_ref().is_none_or(|m| m.is_empty()) =>
        {
            Namespaces::All
        }
        Some(s) => Namespaces::Selector {
            listed,
            selector: label_selector(ctx, &format!("{field}.namespaceSelector"), s, Vec::new())?,
        },
        None if listed.is_empty() => Namespaces::Only(vec![namespace.to_string()]),
        None => Namespaces::Only(listed),
    };
    if term.topology_key.is_empty() {
        return Err(ctx.err(format!("{field}.topologyKey"), Problem::Missing));
    }
    Ok(PodAffinityTerm {
        selector,
        namespaces,
        topology_key: term.topology_key.clone(),
    })
}

/// Required and preferred (weighted) terms.
type Terms = (Vec<PodAffinityTerm>, Vec<(i32, PodAffinityTerm)>);

/// Inter-pod affinity, anti-affinity and topology spread of a pod.
fn pod_constraints(
    ctx: &Ctx,
    spec: &PodSpec,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Result<PodConstraints> {
    let mut out = PodConstraints::default();
    let affinity = spec.affinity.as_ref();
    let terms = |field: &str,
                 required: Option<&Vec<KubePodAffinityTerm>>,
                 preferred: Option<&Vec<WeightedPodAffinityTerm>>|
     -> Result<Terms> {
        let req_field = format!("{field}.requiredDuringSchedulingIgnoredDuringExecution");
        let hard = required
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, t)| affinity_term(ctx, &format!("{req_field}[{i}]"), t, namespace, labels))
            .collect::<Result<Vec<_>>>()?;
        let pref_field = format!("{field}.preferredDuringSchedulingIgnoredDuringExecution");
        let soft = preferred
            .into_iter()
            .flatten()
            .enumerate()
            .map(|(i, w)| {
                let f = format!("{pref_field}[{i}].podAffinityTerm");
                affinity_term(ctx, &f, &w.pod_affinity_term, namespace, labels)
                    .map(|t| (w.weight, t))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok((hard, soft))
    };
    if let Some(pa) = affinity.and_then(|a| a.pod_affinity.as_ref()) {
        let (hard, soft) = terms(
            "spec.affinity.podAffinity",
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )?;
        out.affinity = hard;
        out.preferred_affinity = soft;
    }
    if let Some(pa) = affinity.and_then(|a| a.pod_anti_affinity.as_ref()) {
        let (hard, soft) = terms(
            "spec.affinity.podAntiAffinity",
            pa.required_during_scheduling_ignored_during_execution
                .as_ref(),
            pa.preferred_during_scheduling_ignored_during_execution
                .as_ref(),
        )?;
        out.anti_affinity = hard;
        out.preferred_anti_affinity = soft;
    }
    for (i, c) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.topologySpreadConstraints[{i}]");
        let hard = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => true,
            "ScheduleAnyway" => false,
            other => {
                return Err(ctx.err(
                    format!("{field}.whenUnsatisfiable"),
                    Problem::UnknownValue {
                        value: other.to_string(),
                        expected: "DoNotSchedule, ScheduleAnyway",
                    },
                ))
            }
        };
        let policy =
            |name: &str, value: Option<&String>, default: bool| match value.map(String::as_str) {
                None | Some("") => Ok(default),
                Some("Honor") => Ok(true),
                Some("Ignore") => Ok(false),
                Some(other) => Err(ctx.err(
                    format!("{field}.{name}"),
                    Problem::UnknownValue {
                        value: other.to_string(),
                        expected: "Honor, Ignore",
                    },
                )),
            };
        if c.max_skew < 1 {
            return Err(ctx.err(format!("{field}.maxSkew"), Problem::Missing));
        }
        if c.topology_key.is_empty() {
            return Err(ctx.err(format!("{field}.topologyKey"), Problem::Missing));
        }
        let extra = label_keys(c.match_label_keys.as_ref(), labels, SelectorOp::In);
        out.spread.push(SpreadConstraint {
            max_skew: c.max_skew as u32,
            topology_key: c.topology_key.clone(),
            hard,
            selector: c
                .label_selector
                .as_ref()
                .map(|s| label_selector(ctx, &format!("{field}.labelSelector"), s, extra))
                .transpose()?,
            namespace: namespace.to_string(),
            min_domains: c.min_domains.filter(|_| hard).map(|m| m.max(1) as u32),
            honor_node_affinity: policy(
                "nodeAffinityPolicy",
                c.node_affinity_policy.as_ref(),
                true,
            )?,
            honor_taints: policy("nodeTaintsPolicy", c.node_taints_policy.as_ref(), false)?,
        });
    }
    Ok(out)
}

/// The first scheduling input of `spec` Caldera does not evaluate, named for the message.
/// (Volumes are evaluated: PersistentVolumeClaims and generic ephemeral volumes go through the
/// volume binder, `crate::volumes`; `spec.resourceClaims` through DRA, `crate::dra`.)
fn unsupported_input(spec: &PodSpec) -> Option<String> {
    if spec
        .scheduling_group
        .as_ref()
        .is_some_and(|g| g.pod_group_name.as_deref().is_none_or(str::is_empty))
    {
        return Some("spec.schedulingGroup without podGroupName".into());
    }
    None
}
