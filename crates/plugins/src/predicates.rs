//! predicates: node selector, required node affinity, taints and tolerations, cordoned nodes,
//! pod count and host ports.
//!
//! Messages follow kube-scheduler's wording, since people and autoscalers read them.

use caldera_config::PluginOption;
use caldera_model::selector::untolerated_taint;
use caldera_model::{Node, TaintEffect, Task};
use caldera_session::plugin::{FitReason, Plugin};
use caldera_session::state::State;

/// The predicates plugin.
#[derive(Debug, Default)]
pub struct Predicates;

/// Builds the plugin. Volcano's `predicate.*` switches are accepted by the config and ignored.
pub fn build(_: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(Predicates))
}

/// The taint kube-scheduler uses for cordoned nodes; tolerating it lets a pod onto one.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// The checks that depend only on the pod's spec and the node's fixed attributes.
pub fn static_check(task: &Task, node: &Node) -> Result<(), FitReason> {
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
    if !task.spec.matches_node(&node.name, &node.labels) {
        return Err("node(s) didn't match Pod's node affinity/selector".into());
    }
    if let Some(t) = untolerated_taint(&node.taints, &task.spec.tolerations) {
        return Err(format!(
            "node(s) had untolerated taint {{{}: {}}}",
            t.key, t.value
        ));
    }
    Ok(())
}

/// The checks that depend on what is already on the node.
pub fn dynamic_check(task: &Task, node: &Node) -> Result<(), FitReason> {
    if node.pod_count >= node.max_pods {
        return Err("Too many pods".into());
    }
    if task
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
        static_check(task, node)
    }

    fn filter(&self, _state: &State, task: &Task, node: &Node) -> Result<(), FitReason> {
        dynamic_check(task, node)
    }
}
