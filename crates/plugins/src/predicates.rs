//! predicates: node selector, required node affinity, taints and tolerations, cordoned nodes,
//! pod count, host ports, inter-pod affinity and anti-affinity (including existing pods'
//! anti-affinity), `DoNotSchedule` topology spread, and volumes (kube-scheduler's VolumeBinding,
//! VolumeRestrictions and NodeVolumeLimits: bound volumes' node affinity, volumes to bind or
//! provision for unbound `WaitForFirstConsumer` claims, `ReadWriteOncePod` claims in use, CSI
//! attach limits).
//!
//! Messages follow kube-scheduler's wording, since people and autoscalers read them. Volcano's
//! switches `predicate.NodeAffinityEnable`, `predicate.NodePortsEnable`,
//! `predicate.TaintTolerationEnable`, `predicate.PodAffinityEnable`,
//! `predicate.PodTopologySpreadEnable`, `predicate.VolumeBindingEnable` and
//! `predicate.NodeVolumeLimitsEnable` (all default true) turn their checks off as in Volcano.

use caldera_config::PluginOption;
use caldera_model::selector::untolerated_taint;
use caldera_model::{Node, TaintEffect, Task};
use caldera_session::plugin::{FitReason, Plugin};
use caldera_session::state::State;

/// The predicates plugin, with Volcano's switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Predicates {
    node_affinity: bool,
    node_ports: bool,
    taints: bool,
    pod_affinity: bool,
    spread: bool,
    volume_binding: bool,
    volume_limits: bool,
}

impl Default for Predicates {
    fn default() -> Self {
        Predicates {
            node_affinity: true,
            node_ports: true,
            taints: true,
            pod_affinity: true,
            spread: true,
            volume_binding: true,
            volume_limits: true,
        }
    }
}

/// Builds the plugin from Volcano's `predicate.*Enable` switches (default true).
pub fn build(option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    let on = |key: &str| option.arguments.get_bool(key).unwrap_or(true);
    Ok(Box::new(Predicates {
        node_affinity: on("predicate.NodeAffinityEnable"),
        node_ports: on("predicate.NodePortsEnable"),
        taints: on("predicate.TaintTolerationEnable"),
        pod_affinity: on("predicate.PodAffinityEnable"),
        spread: on("predicate.PodTopologySpreadEnable"),
        volume_binding: on("predicate.VolumeBindingEnable"),
        volume_limits: on("predicate.NodeVolumeLimitsEnable"),
    }))
}

/// The taint kube-scheduler uses for cordoned nodes; tolerating it lets a pod onto one.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The checks that depend only on the pod's spec and the node's fixed attributes.
pub fn static_check(task: &Task, node: &Node) -> Result<(), FitReason> {
    Predicates::default().check_static(task, node)
}

impl Predicates {
    fn check_static(&self, task: &Task, node: &Node) -> Result<(), FitReason> {
        if node.unschedulable {
            let tolerated = task.spec.tolerations.iter().any(|t| {
                t.tolerates(&caldera_model::Taint {
                    key: UNSCHEDULABLE_TAINT.into(),
                    value: String::new(),
                    effect: TaintEffect::NoSchedule,
                })
            });
            if !tolerated {
                return Err("node(s) were unschedulable".into());
            }
        }
        if self.node_affinity && !task.spec.matches_node(&node.name, &node.labels) {
            return Err("node(s) didn't match Pod's node affinity/selector".into());
        }
        if let Some(t) =
            untolerated_taint(&node.taints, &task.spec.tolerations).filter(|_| self.taints)
        {
            return Err(format!(
                "node(s) had untolerated taint {{{}: {}}}",
                t.key, t.value
            ));
        }
        let volumes = &task.spec.volumes;
        if self.volume_binding {
            if let Some(reason) = volumes.every_node {
                return Err(reason.into());
            }
            let reaches = |terms: &Vec<caldera_model::SelectorTerm>| {
                terms.iter().any(|t| t.matches(&node.name, &node.labels))
            };
            if !volumes.bound_terms.iter().all(reaches) {
                return Err(caldera_model::volume::NODE_CONFLICT.into());
            }
        }
        Ok(())
    }
}

/// The checks that depend on what is already on the node (not on other pods' constraints).
pub fn dynamic_check(task: &Task, node: &Node) -> Result<(), FitReason> {
    ports_check(task, node, true)
}

fn ports_check(task: &Task, node: &Node, ports: bool) -> Result<(), FitReason> {
    if node.pod_count >= node.max_pods {
        return Err("Too many pods".into());
    }
    if ports
        && task
            .spec
            .host_ports
            .iter()
            .any(|p| node.host_ports.iter().any(|q| p.conflicts(q)))
    {
        return Err("node(s) didn't have free ports for the requested pod ports".into());
    }
    Ok(())
}

impl Plugin for Predicates {
    fn name(&self) -> &'static str {
        "predicates"
    }

    fn filter_static(&self, task: &Task, node: &Node) -> Result<(), FitReason> {
        self.check_static(task, node)
    }

    fn filter(&self, state: &State, task: &Task, node: &Node) -> Result<(), FitReason> {
        ports_check(task, node, self.node_ports)?;
        if task.spec.volumes.dynamic() && (self.volume_binding || self.volume_limits) {
            if let Some(i) = state.index_of(node) {
                state.trackers.volumes.check(
                    task,
                    i as u32,
                    &state.nodes,
                    self.volume_binding,
                    self.volume_limits,
                )?;
            }
        }
        let interpod = &state.trackers.interpod;
        if !(self.pod_affinity || self.spread) || (interpod.quiet() && task.spec.pods.is_empty()) {
            return Ok(());
        }
        let Some(i) = state.index_of(node) else {
            return Ok(());
        };
        let kind = state.kind_of(task);
        interpod.check(
            task,
            kind,
            i as u32,
            &state.nodes,
            self.pod_affinity,
            self.spread,
        )
    }
}
