//! Gate mode's pod edits, in one place: pinning a gated pod to a node and recognising a pod
//! that is held at a node without being bound.
//!
//! `caldera gate` releases a member by adding a required node-affinity pin (`matchFields`
//! `metadata.name In [node]`) to every existing required term — so the pod's own constraints
//! still hold — and removing the gate [`caldera_api::GANG_GATE`]. The simulator and the runtime
//! both call [`pinned_spec`]; the cache calls [`held_node`] to count such a pod on its node
//! before kube-scheduler binds it.

use caldera_api::GANG_GATE;
use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
};

/// The field a pin matches on.
pub const PIN_FIELD: &str = "metadata.name";

/// What the admission policy in `deploy/gate/` does to a pod being created: a pod that names a
/// group (SPEC §2), is scheduled by `default-scheduler` (or names no scheduler) and is not
/// bound gets the gate [`GANG_GATE`] unless it has it. Returns whether it added it.
pub fn admit(pod: &mut Pod) -> bool {
    if crate::fields::group_name(&pod.metadata).is_none() {
        return false;
    }
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    let scheduler = spec.scheduler_name.as_deref().filter(|s| !s.is_empty());
    if scheduler.is_some_and(|s| s != caldera_api::KUBE_SCHEDULER_NAME)
        || spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || has_gang_gate(Some(spec))
    {
        return false;
    }
    spec.scheduling_gates.get_or_insert_with(Vec::new).push(
        k8s_openapi::api::core::v1::PodSchedulingGate {
            name: GANG_GATE.to_string(),
        },
    );
    true
}

/// Whether the pod carries Caldera's gate.
pub fn has_gang_gate(spec: Option<&PodSpec>) -> bool {
    spec.and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name == GANG_GATE))
}

/// Whether the pod carries a scheduling gate other than Caldera's.
pub fn has_other_gates(spec: Option<&PodSpec>) -> bool {
    spec.and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|g| g.iter().any(|g| g.name != GANG_GATE))
}

fn pin_requirement(node: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: PIN_FIELD.to_string(),
        operator: "In".to_string(),
        values: Some(vec![node.to_string()]),
    }
}

/// The required node-affinity terms with the pin to `node` added to each (one term holding
/// only the pin when the pod has none). A term that already pins to `node` is left as it is.
pub fn pinned_terms(spec: &PodSpec, node: &str) -> Vec<NodeSelectorTerm> {
    let existing = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|na| {
            na.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    if existing.is_empty() {
        return vec![NodeSelectorTerm {
            match_fields: Some(vec![pin_requirement(node)]),
            ..NodeSelectorTerm::default()
        }];
    }
    existing
        .into_iter()
        .map(|mut term| {
            let fields = term.match_fields.get_or_insert_with(Vec::new);
            if !fields.contains(&pin_requirement(node)) {
                fields.push(pin_requirement(node));
            }
            term
        })
        .collect()
}

/// The remaining scheduling gates once Caldera's is removed.
pub fn gates_without_ours(spec: &PodSpec) -> Vec<k8s_openapi::api::core::v1::PodSchedulingGate> {
    spec.scheduling_gates
        .iter()
        .flatten()
        .filter(|g| g.name != GANG_GATE)
        .cloned()
        .collect()
}

/// `spec` released to `node`: the pin added to every required term, Caldera's gate removed.
pub fn pinned_spec(spec: &PodSpec, node: &str) -> PodSpec {
    let mut out = spec.clone();
    let terms = pinned_terms(spec, node);
    let affinity = out.affinity.get_or_insert_with(Affinity::default);
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    na.required_during_scheduling_ignored_during_execution = Some(NodeSelector {
        node_selector_terms: terms,
    });
    let gates = gates_without_ours(spec);
    out.scheduling_gates = (!gates.is_empty()).then_some(gates);
    out
}

/// The model's required terms back as Kubernetes objects (the cache converted them from there
/// without loss: operators, keys and values in order).
fn kube_terms(spec: &caldera_model::PlacementSpec) -> Vec<NodeSelectorTerm> {
    use caldera_model::{Requirement, SelectorOp};
    let requirement = |r: &Requirement| NodeSelectorRequirement {
        key: r.key.clone(),
        operator: match r.op {
            SelectorOp::In => "In",
            SelectorOp::NotIn => "NotIn",
            SelectorOp::Exists => "Exists",
            SelectorOp::DoesNotExist => "DoesNotExist",
            SelectorOp::Gt => "Gt",
            SelectorOp::Lt => "Lt",
        }
        .to_string(),
        values: (!r.values.is_empty()).then(|| r.values.clone()),
    };
    let list = |rs: &[Requirement]| (!rs.is_empty()).then(|| rs.iter().map(requirement).collect());
    spec.required_terms
        .iter()
        .flatten()
        .map(|t| NodeSelectorTerm {
            match_expressions: list(&t.expressions),
            match_fields: list(&t.fields),
        })
        .collect()
}

/// The JSON merge patch `caldera gate` sends to release a gated member to `node`: the
/// required node-affinity terms with the pin added to each (from the pod's `spec` as the
/// snapshot holds it), `schedulingGates` emptied (a member with another gate is never
/// released), and the pod's uid, which the API server refuses to change, so a re-created pod
/// of the same name is not released by mistake.
pub fn release_patch(
    spec: &caldera_model::PlacementSpec,
    uid: &str,
    node: &str,
) -> serde_json::Value {
    let pod = PodSpec {
        affinity: Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: kube_terms(spec),
                }),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        }),
        ..PodSpec::default()
    };
    let terms = pinned_terms(&pod, node);
    let mut metadata = serde_json::Map::new();
    if !uid.is_empty() && !uid.contains('/') {
        metadata.insert("uid".into(), serde_json::Value::String(uid.to_string()));
    }
    serde_json::json!({
        "metadata": metadata,
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": terms
            }}},
            "schedulingGates": null,
        }
    })
}

/// The merge patch of `pods/status` that follows a release: the nomination kube-scheduler
/// honours against pods of lower or equal priority.
pub fn nomination_patch(node: &str) -> serde_json::Value {
    serde_json::json!({"status": {"nominatedNodeName": node}})
}

/// The one node every required term pins the pod to with `matchFields` `metadata.name In
/// [node]`, if they all name the same single node.
pub fn pinned_node(spec: &PodSpec) -> Option<&str> {
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let mut pinned = None;
    for term in terms {
        let node = term.match_fields.iter().flatten().find_map(|r| {
            let values = r.values.as_deref().unwrap_or_default();
            (r.key == PIN_FIELD && r.operator == "In" && values.len() == 1)
                .then(|| values[0].as_str())
        })?;
        match pinned {
            None => pinned = Some(node),
            Some(p) if p == node => {}
            Some(_) => return None,
        }
    }
    pinned
}

/// The node an unbound, unfinished, ungated pod is held at: its `status.nominatedNodeName`,
/// else the node its required affinity pins it to. Such a pod counts on that node for every
/// other pod (as kube-scheduler counts nominated pods), until it is bound.
pub fn held_node(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if spec.node_name.as_deref().is_some_and(|n| !n.is_empty())
        || spec
            .scheduling_gates
            .as_ref()
            .is_some_and(|g| !g.is_empty())
        || pod.metadata.deletion_timestamp.is_some()
    {
        return None;
    }
    let status = pod.status.as_ref();
    if matches!(
        status.and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    ) {
        return None;
    }
    status
        .and_then(|s| s.nominated_node_name.as_deref())
        .filter(|n| !n.is_empty())
        .or_else(|| pinned_node(spec))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSchedulingGate;

    fn gated(terms: Option<Vec<NodeSelectorTerm>>) -> PodSpec {
        PodSpec {
            scheduling_gates: Some(vec![
                PodSchedulingGate {
                    name: GANG_GATE.into(),
                },
                PodSchedulingGate {
                    name: "other.example/gate".into(),
                },
            ]),
            affinity: terms.map(|t| Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: t,
                    }),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            ..PodSpec::default()
        }
    }

    fn zone(z: &str) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(vec![NodeSelectorRequirement {
                key: "zone".into(),
                operator: "In".into(),
                values: Some(vec![z.into()]),
            }]),
            ..NodeSelectorTerm::default()
        }
    }

    #[test]
    fn pin_goes_into_every_term_and_only_our_gate_goes() {
        let spec = gated(Some(vec![zone("a"), zone("b")]));
        let out = pinned_spec(&spec, "n1");
        let terms = &out
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| r.node_selector_terms.clone())
            .unwrap_or_default();
        assert_eq!(terms.len(), 2);
        for (t, z) in terms.iter().zip(["a", "b"]) {
            assert_eq!(
                t.match_expressions,
                zone(z).match_expressions,
                "own term kept"
            );
            assert_eq!(t.match_fields, Some(vec![pin_requirement("n1")]));
        }
        let gates: Vec<_> = out
            .scheduling_gates
            .iter()
            .flatten()
            .map(|g| &g.name)
            .collect();
        assert_eq!(gates, ["other.example/gate"]);
        assert_eq!(pinned_node(&out), Some("n1"));
        assert_eq!(pinned_spec(&out, "n1").affinity, out.affinity, "idempotent");
    }

    #[test]
    fn the_release_patch_keeps_the_pods_terms_as_converted() {
        let spec = gated(Some(vec![zone("a"), zone("b")]));
        let pod = Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                ..Default::default()
            },
            spec: Some(spec.clone()),
            ..Pod::default()
        };
        let info = crate::PodInfo::try_from(&pod).unwrap();
        let patch = release_patch(&info.spec, "uid-1", "n1");
        let expected = pinned_spec(&spec, "n1");
        assert_eq!(
            patch["spec"]["affinity"],
            serde_json::to_value(&expected.affinity).unwrap()
        );
        assert_eq!(patch["spec"]["schedulingGates"], serde_json::Value::Null);
        assert_eq!(patch["metadata"]["uid"], "uid-1");
        assert_eq!(nomination_patch("n1")["status"]["nominatedNodeName"], "n1");
    }

    #[test]
    fn a_pod_without_affinity_gets_one_term() {
        let out = pinned_spec(&gated(None), "n2");
        assert_eq!(pinned_node(&out), Some("n2"));
    }

    #[test]
    fn held_needs_no_gate_and_no_node() {
        let mut pod = Pod {
            spec: Some(pinned_spec(&gated(None), "n1")),
            ..Pod::default()
        };
        assert_eq!(held_node(&pod), None, "still gated by the other gate");
        if let Some(s) = pod.spec.as_mut() {
            s.scheduling_gates = None;
        }
        assert_eq!(held_node(&pod), Some("n1"));
        if let Some(s) = pod.spec.as_mut() {
            s.node_name = Some("n1".into());
        }
        assert_eq!(held_node(&pod), None, "bound: counted as bound");
        let unpinned = Pod {
            spec: Some(gated(Some(vec![zone("a")]))),
            ..Pod::default()
        };
        assert_eq!(
            pinned_node(unpinned.spec.as_ref().unwrap_or(&PodSpec::default())),
            None
        );
    }
}
