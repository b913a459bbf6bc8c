//! ProvisioningRequests ↔ model: reading the requests Caldera made back into the state of a
//! gang's request, and building the objects a [`CapacityNeed`] asks for (the request and its
//! PodTemplates, and the annotations on the members that consume it).
//!
//! Pure, like the rest of this crate: the simulator and the runtime carry out the same objects.

use caldera_api::{
    provisioning_condition as cond, PodSet, ProvisioningRequest, ProvisioningRequestSpec,
    Reference, ANNOTATION_CONSUME_PROVISIONING_REQUEST, ANNOTATION_PROVISIONING_CLASS,
};
use caldera_model::{
    overcommit_allowed, CapacityNeed, CapacityRequest, CapacityState, PlacementSpec, Resources,
    SelectorOp, Time,
};
use k8s_openapi::api::core::v1::{
    Affinity, Container, ContainerPort, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, PodSpec, PodTemplate, PodTemplateSpec, PreferredSchedulingTerm,
    ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::BTreeMap;
use std::sync::Arc;

/// PodGroup annotation: `"true"` opts a gang in to autoscaler requests, `"false"` out.
pub const ANNOTATION_PROVISIONING_REQUEST: &str = "scheduling.caldera.sh/provisioning-request";
/// Label on everything Caldera creates.
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "caldera";
/// Label (when the name is a valid label value) and annotation naming the PodGroup a request
/// or PodTemplate is for.
pub const LABEL_PODGROUP: &str = "scheduling.caldera.sh/podgroup";
/// Label holding the PodGroup's uid.
pub const LABEL_PODGROUP_UID: &str = "scheduling.caldera.sh/podgroup-uid";
/// Annotation holding the request's attempt number.
pub const ANNOTATION_ATTEMPT: &str = "scheduling.caldera.sh/attempt";
/// Label selector that finds Caldera's requests again (after a restart or a leader change).
pub const SELECTOR: &str =
    "app.kubernetes.io/managed-by=caldera,scheduling.caldera.sh/podgroup-uid";
/// Container image of PodTemplates (never run: the autoscaler only simulates these pods).
pub const TEMPLATE_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// One of Caldera's requests, as the cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestInfo {
    /// The gang it is for: PodGroup name.
    pub podgroup: Arc<str>,
    /// PodGroup uid.
    pub podgroup_uid: Arc<str>,
    /// Its state.
    pub request: CapacityRequest,
}

/// Reads one of Caldera's requests; `None` for requests someone else made.
pub fn request_info(pr: &ProvisioningRequest) -> Option<RequestInfo> {
    let meta = &pr.metadata;
    let labels = meta.labels.as_ref()?;
    if labels.get(LABEL_MANAGED_BY).map(String::as_str) != Some(MANAGED_BY) {
        return None;
    }
    let uid = labels.get(LABEL_PODGROUP_UID)?;
    let annotations = meta.annotations.clone().unwrap_or_default();
    let podgroup = annotations
        .get(LABEL_PODGROUP)
        .or_else(|| labels.get(LABEL_PODGROUP))?;
    let attempt = annotations
        .get(ANNOTATION_ATTEMPT)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let created = meta
        .creation_timestamp
        .as_ref()
        .map(crate::fields::time)
        .unwrap_or_default();
    let (state, since, message) = state_of(pr, created);
    Some(RequestInfo {
        podgroup: podgroup.as_str().into(),
        podgroup_uid: uid.as_str().into(),
        request: CapacityRequest {
            namespace: meta.namespace.as_deref().unwrap_or("default").into(),
            name: meta.name.as_deref().unwrap_or_default().into(),
            attempt,
            created,
            state,
            since,
            message,
            pod_sets: u32::try_from(pr.spec.pod_sets.len()).unwrap_or(u32::MAX),
        },
    })
}

/// The state a request's conditions say, when it entered it, and the autoscaler's message.
/// Failed (or CapacityRevoked) wins over BookingExpired, which wins over Provisioned, then
/// Accepted; with none of these True the request is Pending since its creation.
pub fn state_of(pr: &ProvisioningRequest, created: Time) -> (CapacityState, Time, String) {
    let order = [
        (cond::FAILED, CapacityState::Failed),
        (cond::CAPACITY_REVOKED, CapacityState::Failed),
        (cond::BOOKING_EXPIRED, CapacityState::BookingExpired),
        (cond::PROVISIONED, CapacityState::Provisioned),
        (cond::ACCEPTED, CapacityState::Accepted),
    ];
    for (type_, state) in order {
        if let Some(c) = pr.true_condition(type_) {
            let message = if c.message.is_empty() {
                c.reason.clone()
            } else {
                format!("{}: {}", c.reason, c.message)
            };
            return (state, crate::fields::time(&c.last_transition_time), message);
        }
    }
    (CapacityState::Pending, created, String::new())
}

/// Name of the PodTemplate of pod set `index` of the request `request`.
pub fn template_name(request: &str, index: usize) -> String {
    format!("{request}-{index}")
}

/// The PodTemplates a request refers to (to delete with it).
pub fn template_names(pr: &ProvisioningRequest) -> Vec<String> {
    pr.spec
        .pod_sets
        .iter()
        .map(|s| s.pod_template_ref.name.clone())
        .filter(|n| !n.is_empty())
        .collect()
}

fn labels(need: &CapacityNeed) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::from([
        (LABEL_MANAGED_BY.to_string(), MANAGED_BY.to_string()),
        (
            LABEL_PODGROUP_UID.to_string(),
            need.podgroup_uid.to_string(),
        ),
    ]);
    if valid_label_value(&need.podgroup) {
        labels.insert(LABEL_PODGROUP.to_string(), need.podgroup.to_string());
    }
    labels
}

fn valid_label_value(v: &str) -> bool {
    caldera_api::validation::label_value(v).is_empty()
}

fn meta(need: &CapacityNeed, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(need.namespace.to_string()),
        labels: Some(labels(need)),
        annotations: Some(BTreeMap::from([
            (LABEL_PODGROUP.to_string(), need.podgroup.to_string()),
            (ANNOTATION_ATTEMPT.to_string(), need.attempt.to_string()),
        ])),
        // Owned by the PodGroup, so the garbage collector removes them with it.
        owner_references: Some(vec![OwnerReference {
            api_version: "scheduling.volcano.sh/v1beta1".into(),
            kind: "PodGroup".into(),
            name: need.podgroup.to_string(),
            uid: need.podgroup_uid.to_string(),
            controller: Some(true),
            block_owner_deletion: None,
        }]),
        ..ObjectMeta::default()
    }
}

/// The request and its PodTemplates (one per pod set) for `need`. Create the templates first.
pub fn build(need: &CapacityNeed) -> (ProvisioningRequest, Vec<PodTemplate>) {
    let mut templates = Vec::new();
    let mut pod_sets = Vec::new();
    for (i, set) in need.pod_sets.iter().enumerate() {
        let name = template_name(&need.name, i);
        templates.push(PodTemplate {
            metadata: meta(need, name.clone()),
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(need)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(&set.request, &set.spec)),
            }),
        });
        pod_sets.push(PodSet {
            pod_template_ref: Reference { name },
            count: i32::try_from(set.count).unwrap_or(i32::MAX),
        });
    }
    let mut pr = ProvisioningRequest::new(
        &need.name,
        ProvisioningRequestSpec {
            pod_sets,
            provisioning_class_name: need.class_name.clone(),
            parameters: BTreeMap::new(),
        },
    );
    pr.metadata = meta(need, need.name.to_string());
    (pr, templates)
}

/// The annotations that make a member consume the request `need` creates.
pub fn consume_annotations(need: &CapacityNeed) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            ANNOTATION_CONSUME_PROVISIONING_REQUEST.to_string(),
            need.name.to_string(),
        ),
        (
            ANNOTATION_PROVISIONING_CLASS.to_string(),
            need.class_name.clone(),
        ),
    ])
}

/// A pod spec with what scheduling looks at: the request (one container), node selector,
/// node affinity, tolerations and host ports.
///
/// The container requests the member's whole request (its containers, init containers and
/// overhead as the scheduler adds them up), and has a limit equal to it for every resource
/// kube-apiserver does not let a container overcommit (extended resources such as
/// `nvidia.com/gpu`, huge pages): without it the API server refuses the PodTemplate ("Limit
/// must be set for non overcommitable resources"). Limits of cpu and memory are left out: the
/// autoscaler simulates scheduling, which reads requests only, and the pod is never run.
pub fn pod_spec(request: &Resources, spec: &PlacementSpec) -> PodSpec {
    let requests: BTreeMap<String, Quantity> = request
        .to_quantities()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v)))
        .collect();
    let limits: BTreeMap<String, Quantity> = requests
        .iter()
        .filter(|(name, _)| !overcommit_allowed(name))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let ports: Vec<ContainerPort> = spec
        .host_ports
        .iter()
        .map(|p| ContainerPort {
            container_port: p.port,
            host_port: Some(p.port),
            host_ip: Some(p.ip.clone()).filter(|ip| !ip.is_empty() && ip != "0.0.0.0"),
            protocol: Some(p.protocol.clone()).filter(|p| !p.is_empty()),
            ..ContainerPort::default()
        })
        .collect();
    let term = |t: &caldera_model::SelectorTerm| NodeSelectorTerm {
        match_expressions: Some(t.expressions.iter().map(requirement).collect())
            .filter(|v: &Vec<_>| !v.is_empty()),
        match_fields: Some(t.fields.iter().map(requirement).collect())
            .filter(|v: &Vec<_>| !v.is_empty()),
    };
    let node_affinity = NodeAffinity {
        required_during_scheduling_ignored_during_execution: spec.required_terms.as_ref().map(
            |terms| NodeSelector {
                node_selector_terms: terms.iter().map(term).collect(),
            },
        ),
        preferred_during_scheduling_ignored_during_execution: Some(
            spec.preferred_terms
                .iter()
                .map(|(w, t)| PreferredSchedulingTerm {
                    weight: *w,
                    preference: term(t),
                })
                .collect(),
        )
        .filter(|v: &Vec<_>| !v.is_empty()),
    };
    let has_affinity = node_affinity
        .required_during_scheduling_ignored_during_execution
        .is_some()
        || node_affinity
            .preferred_during_scheduling_ignored_during_execution
            .is_some();
    PodSpec {
        containers: vec![Container {
            name: "member".into(),
            image: Some(TEMPLATE_IMAGE.into()),
            resources: Some(ResourceRequirements {
                requests: Some(requests).filter(|r| !r.is_empty()),
                limits: Some(limits).filter(|l| !l.is_empty()),
                ..ResourceRequirements::default()
            }),
            ports: Some(ports).filter(|p| !p.is_empty()),
            ..Container::default()
        }],
        node_selector: Some(spec.node_selector.clone()).filter(|s| !s.is_empty()),
        affinity: has_affinity.then(|| Affinity {
            node_affinity: Some(node_affinity),
            ..Affinity::default()
        }),
        tolerations: Some(
            spec.tolerations
                .iter()
                .map(|t| Toleration {
                    key: Some(t.key.clone()).filter(|k| !k.is_empty()),
                    operator: Some(if t.exists { "Exists" } else { "Equal" }.into()),
                    value: Some(t.value.clone()).filter(|v| !v.is_empty() && !t.exists),
                    effect: t.effect.map(|e| e.as_str().to_string()),
                    toleration_seconds: None,
                })
                .collect(),
        )
        .filter(|v: &Vec<_>| !v.is_empty()),
        ..PodSpec::default()
    }
}

fn requirement(r: &caldera_model::Requirement) -> NodeSelectorRequirement {
    let op = match r.op {
        SelectorOp::In => "In",
        SelectorOp::NotIn => "NotIn",
        SelectorOp::Exists => "Exists",
        SelectorOp::DoesNotExist => "DoesNotExist",
        SelectorOp::Gt => "Gt",
        SelectorOp::Lt => "Lt",
    };
    NodeSelectorRequirement {
        key: r.key.clone(),
        operator: op.into(),
        values: Some(r.values.clone()).filter(|v| !v.is_empty()),
    }
}
