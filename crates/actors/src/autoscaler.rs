//! An autoscaler serving ProvisioningRequests, as cluster-autoscaler does for the class
//! `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: all the capacity of a request or none.
//!
//! [`step`] looks at the requests, their PodTemplates and the nodes at a given time and says
//! what the autoscaler does now:
//!
//! - a new request is sized: its pods are packed, first fit, onto new nodes of the first node
//!   template each pod fits (resources, node selector and required affinity, taints). If some
//!   pod fits no template, a template is missing, or the nodes would take the autoscaler past
//!   `max_nodes`, the request is `Failed`; otherwise it is `Accepted`;
//! - `delay` after it was accepted, those nodes are added (Ready, named after the request, so
//!   a step repeated at the same time adds nothing twice) and the request is `Provisioned`;
//! - `booking` after it was provisioned, a request still there gets `BookingExpired`.
//!
//! Requests of other classes are left alone. Failed, expired or revoked requests are final.
//! Nodes it adds carry the label [`LABEL_TEMPLATE`]; `max_nodes` counts those.

use crate::time::{from_kube, to_kube};
use caldera_api::{provisioning_condition as cond, ProvisioningRequest, CLASS_BEST_EFFORT_ATOMIC};
use caldera_model::{Node as ModelNode, Resources, Time};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, Pod, PodTemplate};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time as KubeTime};

/// Label on nodes the autoscaler added: the template they came from.
pub const LABEL_TEMPLATE: &str = "autoscaler.caldera.sh/template";

/// How the autoscaler behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Node templates (Nodes with labels, taints and `status.allocatable`), tried in order.
    pub templates: Vec<Node>,
    /// From acceptance to the nodes being Ready.
    pub delay_ms: i64,
    /// At most this many nodes added in all.
    pub max_nodes: u32,
    /// How long provisioned capacity stays booked (cluster-autoscaler: 10 minutes).
    pub booking_ms: i64,
}

/// What the autoscaler does now.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Set a True condition on the request `namespace/name` (status subresource).
    Condition {
        /// Namespace.
        namespace: String,
        /// Request name.
        name: String,
        /// The condition (type, reason, message, time).
        condition: Condition,
    },
    /// Create this Node.
    AddNode(Box<Node>),
}

/// What the autoscaler does at `now`, given every request, the PodTemplates of their
/// namespaces and every node.
pub fn step(
    settings: &Settings,
    requests: &[ProvisioningRequest],
    templates: &[PodTemplate],
    nodes: &[Node],
    now: Time,
) -> Vec<Action> {
    let mut added = nodes
        .iter()
        .filter(|n| label(n, LABEL_TEMPLATE).is_some())
        .count() as u32;
    let mut out = Vec::new();
    let mut new_nodes = Vec::new();
    for pr in requests {
        if pr.spec.provisioning_class_name != CLASS_BEST_EFFORT_ATOMIC {
            continue;
        }
        let namespace = pr
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let name = pr.metadata.name.clone().unwrap_or_default();
        let final_ = [cond::FAILED, cond::BOOKING_EXPIRED, cond::CAPACITY_REVOKED];
        if final_.iter().any(|t| pr.true_condition(t).is_some()) {
            continue;
        }
        let mut set = |type_: &str, reason: &str, message: String| {
            out.push(Action::Condition {
                namespace: namespace.clone(),
                name: name.clone(),
                condition: condition(type_, reason, message, now),
            });
        };
        if let Some(p) = pr.true_condition(cond::PROVISIONED) {
            if now.millis_since(from_kube(&p.last_transition_time)) >= settings.booking_ms {
                set(
                    cond::BOOKING_EXPIRED,
                    "BookingExpired",
                    "capacity booking expired".into(),
                );
            }
            continue;
        }
        let sized = size(settings, pr, templates, &namespace, &name);
        let Some(accepted) = pr.true_condition(cond::ACCEPTED) else {
            match sized {
                Ok(new) if added + new.len() as u32 > settings.max_nodes => set(
                    cond::FAILED,
                    "CapacityIsNotFound",
                    format!(
                        "{} more nodes would exceed the autoscaler's maximum of {} ({} added already)",
                        new.len(),
                        settings.max_nodes,
                        added
                    ),
                ),
                Ok(new) => {
                    // Counted at once, so two requests accepted together cannot both take the
                    // last nodes.
                    added += new.len() as u32;
                    set(
                        cond::ACCEPTED,
                        "Accepted",
                        format!("scaling up by {} nodes", new.len()),
                    );
                }
                Err(why) => set(cond::FAILED, "CapacityIsNotFound", why),
            }
            continue;
        };
        if now.millis_since(from_kube(&accepted.last_transition_time)) < settings.delay_ms {
            continue;
        }
        match sized {
            Ok(new) => {
                let count = new.len();
                for node in new {
                    if !nodes.iter().any(|n| n.metadata.name == node.metadata.name) {
                        new_nodes.push(Action::AddNode(Box::new(with_time(node, now))));
                    }
                }
                set(
                    cond::PROVISIONED,
                    "Provisioned",
                    format!("{count} nodes added"),
                );
            }
            Err(why) => set(cond::FAILED, "CapacityIsNotFound", why),
        }
    }
    // Nodes first: a request is Provisioned once its nodes exist.
    new_nodes.extend(out);
    new_nodes
}

/// The nodes `pr` needs, packed first fit onto new nodes of the first template each pod fits.
fn size(
    settings: &Settings,
    pr: &ProvisioningRequest,
    templates: &[PodTemplate],
    namespace: &str,
    name: &str,
) -> Result<Vec<Node>, String> {
    let mut bins: Vec<(usize, ModelNode)> = Vec::new();
    let models: Vec<ModelNode> = settings
        .templates
        .iter()
        .filter_map(|t| caldera_cache::node(t).ok())
        .collect();
    for set in &pr.spec.pod_sets {
        let tname = &set.pod_template_ref.name;
        let template = templates
            .iter()
            .find(|t| {
                t.metadata.name.as_deref() == Some(tname.as_str())
                    && t.metadata.namespace.as_deref().unwrap_or("default") == namespace
            })
            .ok_or_else(|| format!("PodTemplate {namespace}/{tname} not found"))?;
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some(tname.clone()),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            spec: template.template.as_ref().and_then(|t| t.spec.clone()),
            status: None,
        };
        let info = caldera_cache::PodInfo::try_from(&pod)
            .map_err(|e| format!("PodTemplate {namespace}/{tname}: {e}"))?;
        for _ in 0..set.count.max(0) {
            let fits = |n: &ModelNode, used: &Resources| {
                info.request.fits_in(&n.allocatable.minus(used))
                    && info.spec.matches_node(&n.name, &n.labels)
                    && caldera_model::selector::untolerated_taint(&n.taints, &info.spec.tolerations)
                        .is_none()
            };
            if let Some((_, bin)) = bins.iter_mut().find(|(_, b)| fits(b, &b.used)) {
                bin.used.add(&info.request);
                continue;
            }
            let Some(t) = models.iter().position(|m| fits(m, &Resources::new())) else {
                return Err(format!(
                    "a pod of PodTemplate {namespace}/{tname} (requests {}) fits no node template",
                    info.request
                ));
            };
            let mut bin = models[t].clone();
            bin.used.add(&info.request);
            bins.push((t, bin));
        }
    }
    Ok(bins
        .iter()
        .enumerate()
        .map(|(i, (t, _))| new_node(&settings.templates[*t], name, i))
        .collect())
}

fn new_node(template: &Node, request: &str, index: usize) -> Node {
    let tname = template
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| "node".into());
    let name = format!("{tname}-{request}-{index}");
    let mut labels = template.metadata.labels.clone().unwrap_or_default();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.insert(LABEL_TEMPLATE.into(), tname);
    let mut status = template.status.clone().unwrap_or_default();
    if status.allocatable.is_none() {
        status.allocatable = status.capacity.clone();
    }
    Node {
        metadata: ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            annotations: template.metadata.annotations.clone(),
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: Some(NodeStatus {
            conditions: None,
            ..status
        }),
    }
}

fn with_time(mut node: Node, now: Time) -> Node {
    let ready = NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("KubeletReady".into()),
        last_transition_time: to_kube(now),
        ..NodeCondition::default()
    };
    if let Some(s) = node.status.as_mut() {
        s.conditions = Some(vec![ready]);
    }
    node
}

fn condition(type_: &str, reason: &str, message: String, now: Time) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: reason.into(),
        message,
        last_transition_time: to_kube(now).unwrap_or_else(|| KubeTime(Default::default())),
        observed_generation: None,
    }
}

fn label<'a>(n: &'a Node, key: &str) -> Option<&'a str> {
    n.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Sets `condition` on `pr`'s status, replacing one of the same type (as a status patch of
/// the conditions list, keyed by type, does).
pub fn set_condition(pr: &mut ProvisioningRequest, condition: Condition) {
    let status = pr.status.get_or_insert_with(Default::default);
    status.conditions.retain(|c| c.type_ != condition.type_);
    status.conditions.push(condition);
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_model::{CapacityNeed, PodSetNeed, Resources};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use std::sync::Arc;

    fn template(name: &str, gpus: &str) -> Node {
        let alloc = [
            ("cpu", "64"),
            ("memory", "512Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", gpus),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect();
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(NodeStatus {
                allocatable: Some(alloc),
                ..NodeStatus::default()
            }),
        }
    }

    fn request(pods: u32, gpus: i64) -> (ProvisioningRequest, Vec<PodTemplate>) {
        let need = CapacityNeed {
            namespace: "default".into(),
            podgroup: "tp8".into(),
            podgroup_uid: "uid-1".into(),
            name: "tp8-cap-1".into(),
            attempt: 1,
            class_name: CLASS_BEST_EFFORT_ATOMIC.into(),
            pod_sets: vec![PodSetNeed {
                request: Resources::from_pairs([("nvidia.com/gpu", gpus), ("cpu", 1000)]),
                spec: Arc::default(),
                count: pods,
            }],
            pods: vec![],
        };
        let (mut pr, templates) = caldera_cache::provisioning::build(&need);
        pr.metadata.creation_timestamp = to_kube(Time(0));
        (pr, templates)
    }

    fn settings(max_nodes: u32) -> Settings {
        Settings {
            templates: vec![template("gpu-4", "4"), template("gpu-8", "8")],
            delay_ms: 30_000,
            max_nodes,
            booking_ms: 600_000,
        }
    }

    fn apply(pr: &mut ProvisioningRequest, actions: &[Action]) -> Vec<Node> {
        let mut nodes = Vec::new();
        for a in actions {
            match a {
                Action::Condition { condition, .. } => set_condition(pr, condition.clone()),
                Action::AddNode(n) => nodes.push((**n).clone()),
            }
        }
        nodes
    }

    #[test]
    fn accepts_then_adds_packed_nodes_after_the_delay_then_expires_the_booking() {
        let s = settings(4);
        let (mut pr, templates) = request(8, 1);
        let a = step(&s, std::slice::from_ref(&pr), &templates, &[], Time(1000));
        assert!(apply(&mut pr, &a).is_empty());
        assert!(pr.true_condition(cond::ACCEPTED).is_some());
        // Before the delay: nothing.
        assert!(step(&s, std::slice::from_ref(&pr), &templates, &[], Time(30_999)).is_empty());
        let a = step(&s, std::slice::from_ref(&pr), &templates, &[], Time(31_000));
        let nodes = apply(&mut pr, &a);
        // Eight one-GPU pods pack onto two nodes of the first template that holds one (gpu-4).
        let names: Vec<_> = nodes
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        assert_eq!(names, ["gpu-4-tp8-cap-1-0", "gpu-4-tp8-cap-1-1"]);
        assert!(pr.true_condition(cond::PROVISIONED).is_some());
        let n = caldera_cache::node(&nodes[0]).unwrap();
        assert!(n.ready);
        // Repeating the step adds nothing; the booking ends 10 minutes later.
        assert!(step(
            &s,
            std::slice::from_ref(&pr),
            &templates,
            &nodes,
            Time(40_000)
        )
        .is_empty());
        let a = step(
            &s,
            std::slice::from_ref(&pr),
            &templates,
            &nodes,
            Time(631_000),
        );
        apply(&mut pr, &a);
        assert!(pr.true_condition(cond::BOOKING_EXPIRED).is_some());
    }

    #[test]
    fn fails_past_max_nodes_or_when_no_template_fits() {
        let (mut pr, templates) = request(8, 1);
        let a = step(
            &settings(1),
            std::slice::from_ref(&pr),
            &templates,
            &[],
            Time(0),
        );
        apply(&mut pr, &a);
        let failed = pr.true_condition(cond::FAILED).unwrap();
        assert_eq!(failed.reason, "CapacityIsNotFound");
        assert!(
            failed.message.contains("maximum of 1"),
            "{}",
            failed.message
        );
        // Final: nothing more happens.
        assert!(step(
            &settings(1),
            std::slice::from_ref(&pr),
            &templates,
            &[],
            Time(99_000)
        )
        .is_empty());

        let (mut big, templates) = request(1, 16);
        let a = step(
            &settings(4),
            std::slice::from_ref(&big),
            &templates,
            &[],
            Time(0),
        );
        apply(&mut big, &a);
        let failed = big.true_condition(cond::FAILED).unwrap();
        assert!(
            failed.message.contains("fits no node template"),
            "{}",
            failed.message
        );
    }

    #[test]
    fn other_classes_are_left_alone() {
        let (mut pr, templates) = request(1, 1);
        pr.spec.provisioning_class_name = "check-capacity.autoscaling.x-k8s.io".into();
        assert!(step(&settings(4), &[pr], &templates, &[], Time(0)).is_empty());
    }
}
