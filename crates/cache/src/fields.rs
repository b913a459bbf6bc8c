//! Reading Kubernetes fields into model values: timestamps, quantities and a pod's request,
//! node selector terms and label selectors, the pod's group name, and [`Ctx`], which names the
//! object being read in every error. The per-kind conversions ([`crate::convert`] and the
//! modules of each kind) build on these; nothing here reads them.

use crate::error::{Error, ObjectKind, Problem, Result};
use caldera_api::{GroupKeyKind, GROUP_NAME_KEYS};
use caldera_model::{
    parse_quantity, LabelSelector as ModelLabelSelector, Requirement, Resources, Scale, SelectorOp,
    SelectorTerm, TaintEffect, Time, CPU, MEMORY,
};
use k8s_openapi::api::core::v1::{
    Container, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodCondition, PodSpec,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time as KubeTime};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Converts a Kubernetes timestamp.
pub fn time(t: &KubeTime) -> Time {
    Time(t.0.as_millisecond())
}

/// Names the object being converted, to build errors.
pub(crate) struct Ctx {
    kind: ObjectKind,
    object: String,
}

impl Ctx {
    pub(crate) fn new(kind: ObjectKind, meta: &ObjectMeta) -> Self {
        let name = meta.name.as_deref().unwrap_or("<unnamed>");
        let object = match kind {
            ObjectKind::Pod
            | ObjectKind::PodGroup
            | ObjectKind::PersistentVolumeClaim
            | ObjectKind::ResourceClaim
            | ObjectKind::ResourceClaimTemplate => {
                let ns = meta.namespace.as_deref().unwrap_or("default");
                format!("{ns}/{name}")
            }
            _ => name.to_string(),
        };
        Ctx { kind, object }
    }

    pub(crate) fn err(&self, field: impl Into<String>, problem: impl Into<Problem>) -> Error {
        Error {
            kind: self.kind,
            object: self.object.clone(),
            field: field.into(),
            problem: problem.into(),
        }
    }

    pub(crate) fn name<'a>(&self, meta: &'a ObjectMeta) -> Result<&'a str> {
        meta.name
            .as_deref()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| self.err("metadata.name", Problem::Missing))
    }
}

/// Parses one quantity of resource `name` (CPU in millicores, the rest in units).
pub(crate) fn quantity(ctx: &Ctx, field: &str, name: &str, q: &Quantity) -> Result<i64> {
    let scale = if name == CPU {
        Scale::Milli
    } else {
        Scale::Units
    };
    parse_quantity(&q.0, scale).map_err(|e| ctx.err(format!("{field}.{name}"), e))
}

/// Parses a ResourceList found at `field`.
pub(crate) fn resource_list(
    ctx: &Ctx,
    field: &str,
    list: Option<&BTreeMap<String, Quantity>>,
) -> Result<Resources> {
    let mut out = Resources::new();
    for (name, q) in list.into_iter().flatten() {
        let v = quantity(ctx, field, name, q)?;
        out.add_named(name, v);
    }
    Ok(out)
}

/// Requests of one container, with limits standing in for missing requests as API-server
/// defaulting does (`requests[r] = limits[r]` for every `r` with a limit and no request).
pub(crate) fn container_request(
    ctx: &Ctx,
    field: &str,
    res: Option<&ResourceRequirements>,
) -> Result<Resources> {
    let Some(res) = res else {
        return Ok(Resources::new());
    };
    let mut out = resource_list(ctx, &format!("{field}.requests"), res.requests.as_ref())?;
    for (name, q) in res.limits.iter().flatten() {
        if res.requests.as_ref().is_some_and(|r| r.contains_key(name)) {
            continue;
        }
        let v = quantity(ctx, &format!("{field}.limits"), name, q)?;
        out.add_named(name, v);
    }
    Ok(out)
}

/// A pod's request, computed like Kubernetes' `PodRequests`: the sum over containers, maxed
/// with each init container (restartable sidecars — `restartPolicy: Always` — add to the
/// running sum and to every later init container), pod-level cpu/memory requests replacing the
/// container sum where set, plus `spec.overhead`.
pub fn pod_request(pod: &Pod) -> Result<Resources> {
    let ctx = Ctx::new(ObjectKind::Pod, &pod.metadata);
    match &pod.spec {
        Some(spec) => spec_request(&ctx, spec),
        None => Ok(Resources::new()),
    }
}

pub(crate) fn spec_request(ctx: &Ctx, spec: &PodSpec) -> Result<Resources> {
    let mut sum = Resources::new();
    for (i, c) in spec.containers.iter().enumerate() {
        sum.add(&request_of(ctx, "containers", i, c)?);
    }
    let mut sidecars = Resources::new();
    let mut init_max = Resources::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let req = request_of(ctx, "initContainers", i, c)?;
        let effective = if c.restart_policy.as_deref() == Some("Always") {
            sum.add(&req);
            sidecars.add(&req);
            sidecars.clone()
        } else {
            req.plus(&sidecars)
        };
        init_max.max_with(&effective);
    }
    sum.max_with(&init_max);
    if let Some(pod_level) = &spec.resources {
        let field = "spec.resources";
        let pod_req = container_request(ctx, field, Some(pod_level))?;
        for name in [CPU, MEMORY] {
            let set = |l: &Option<BTreeMap<String, Quantity>>| {
                l.as_ref().is_some_and(|l| l.contains_key(name))
            };
            if set(&pod_level.requests) || set(&pod_level.limits) {
                sum.set(name, pod_req.get(name));
            }
        }
    }
    sum.add(&resource_list(
        ctx,
        "spec.overhead",
        spec.overhead.as_ref(),
    )?);
    Ok(sum)
}

pub(crate) fn request_of(ctx: &Ctx, list: &str, i: usize, c: &Container) -> Result<Resources> {
    container_request(
        ctx,
        &format!("spec.{list}[{i}].resources"),
        c.resources.as_ref(),
    )
}

/// The pod's `status.conditions` entry of `type_`, if it has one.
pub fn pod_condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
}

/// The name of the pod's group (SPEC §2): annotation `scheduling.k8s.io/group-name`, else
/// label `scheduling.volcano.sh/podgroup`, else label `scheduling.x-k8s.io/pod-group`. Empty
/// values are ignored.
pub fn group_name(meta: &ObjectMeta) -> Option<&str> {
    GROUP_NAME_KEYS.iter().find_map(|(kind, key)| {
        let map = match kind {
            GroupKeyKind::Annotation => meta.annotations.as_ref(),
            GroupKeyKind::Label => meta.labels.as_ref(),
        };
        map.and_then(|m| m.get(*key))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    })
}

pub(crate) fn taint_effect(ctx: &Ctx, field: &str, value: &str) -> Result<TaintEffect> {
    TaintEffect::parse(value).ok_or_else(|| {
        ctx.err(
            field,
            Problem::UnknownValue {
                value: value.to_string(),
                expected: "NoSchedule, PreferNoSchedule, NoExecute",
            },
        )
    })
}

pub(crate) fn selector_term(
    ctx: &Ctx,
    field: &str,
    term: &NodeSelectorTerm,
) -> Result<SelectorTerm> {
    let list = |name: &str, reqs: &Option<Vec<NodeSelectorRequirement>>| {
        reqs.iter()
            .flatten()
            .enumerate()
            .map(|(i, r)| requirement(ctx, &format!("{field}.{name}[{i}]"), r))
            .collect::<Result<Vec<_>>>()
    };
    Ok(SelectorTerm {
        expressions: list("matchExpressions", &term.match_expressions)?,
        fields: list("matchFields", &term.match_fields)?,
    })
}

pub(crate) fn requirement(
    ctx: &Ctx,
    field: &str,
    r: &NodeSelectorRequirement,
) -> Result<Requirement> {
    let op = SelectorOp::parse(&r.operator).ok_or_else(|| {
        ctx.err(
            format!("{field}.operator"),
            Problem::UnknownValue {
                value: r.operator.clone(),
                expected: "In, NotIn, Exists, DoesNotExist, Gt, Lt",
            },
        )
    })?;
    Ok(Requirement {
        key: r.key.clone(),
        op,
        values: r.values.clone().unwrap_or_default(),
    })
}

/// A pod label selector. `matchLabels` become `In` requirements; `extra` (resolved
/// `matchLabelKeys`/`mismatchLabelKeys`) are appended.
pub(crate) fn label_selector(
    ctx: &Ctx,
    field: &str,
    sel: &LabelSelector,
    extra: Vec<Requirement>,
) -> Result<ModelLabelSelector> {
    let mut requirements: Vec<Requirement> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| Requirement {
            key: k.clone(),
            op: SelectorOp::In,
            values: vec![v.clone()],
        })
        .collect();
    for (i, r) in sel.match_expressions.iter().flatten().enumerate() {
        let op = match r.operator.as_str() {
            "In" => SelectorOp::In,
            "NotIn" => SelectorOp::NotIn,
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            other => {
                return Err(ctx.err(
                    format!("{field}.matchExpressions[{i}].operator"),
                    Problem::UnknownValue {
                        value: other.to_string(),
                        expected: "In, NotIn, Exists, DoesNotExist",
                    },
                ))
            }
        };
        requirements.push(Requirement {
            key: r.key.clone(),
            op,
            values: r.values.clone().unwrap_or_default(),
        });
    }
    requirements.extend(extra);
    Ok(ModelLabelSelector { requirements })
}

/// Requirements `key In (the pod's value)` (or `NotIn` for `mismatch`) for every key the pod
/// carries, as kube-apiserver merges `matchLabelKeys`/`mismatchLabelKeys` into the selector.
pub(crate) fn label_keys(
    keys: Option<&Vec<String>>,
    labels: &BTreeMap<String, String>,
    op: SelectorOp,
) -> Vec<Requirement> {
    keys.into_iter()
        .flatten()
        .filter_map(|k| {
            labels.get(k).map(|v| Requirement {
                key: k.clone(),
                op,
                values: vec![v.clone()],
            })
        })
        .collect()
}

/// A pod's claims: (claim name, from a generic ephemeral volume).
pub(crate) type PodClaims = Arc<[(Arc<str>, bool)]>;

/// The claims a pod's volumes use: (claim name, from a generic ephemeral volume, whose claim is
/// `<pod>-<volume>`).
pub(crate) fn pod_claims(pod: &str, spec: &PodSpec) -> PodClaims {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| {
            if let Some(c) = &v.persistent_volume_claim {
                Some((Arc::from(c.claim_name.as_str()), false))
            } else {
                v.ephemeral
                    .as_ref()
                    .map(|_| (Arc::from(format!("{pod}-{}", v.name)), true))
            }
        })
        .collect()
}
