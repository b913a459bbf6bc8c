//! An optional kube-scheduler beside the stand-in: a task that runs the model of
//! [`caldera_actors::kube_scheduler`] over the stored nodes and pods every period and binds
//! through the same code path as `pods/binding`, so gate mode can be tested end to end
//! without a real kube-scheduler. Pods it cannot place get `PodScheduled=False`, reason
//! `Unschedulable` and kube-scheduler's message, as the real one writes them.

use super::server::App;
use super::store::Store;
use caldera_actors::kube_scheduler::{self, REASON_UNSCHEDULABLE};
use caldera_model::Time;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// The running loop; dropping it (or [`KubeScheduler::stop`]) stops it.
#[derive(Debug)]
pub struct KubeScheduler {
    task: JoinHandle<()>,
}

impl KubeScheduler {
    /// Stops the loop.
    pub fn stop(self) {}
}

impl Drop for KubeScheduler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Pods of `default-scheduler` (also when the field is empty, as the API server defaults it).
fn default_scheduler(p: &Pod) -> bool {
    p.spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .is_none_or(|s| s.is_empty() || s == "default-scheduler")
}

/// One cycle over the store at `now`; returns how many pods it bound.
pub fn cycle(store: &Store, now: Time) -> usize {
    let nodes: Vec<Node> = store
        .list("nodes")
        .into_iter()
        .filter_map(|n| serde_json::from_value(n).ok())
        .collect();
    let pods: Vec<Pod> = store
        .list("pods")
        .into_iter()
        .filter_map(|p| serde_json::from_value(p).ok())
        .collect();
    let decided = kube_scheduler::schedule(&nodes, &pods, &default_scheduler, now);
    let mut bound = 0;
    for b in &decided.binds {
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": b.name, "namespace": b.namespace, "uid": b.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": b.node},
        });
        if store.bind(&b.namespace, &b.name, &binding).is_ok() {
            bound += 1;
        }
    }
    for u in &decided.unschedulable {
        let _ = store.modify("pods", &u.namespace, &u.name, |pod| {
            set_unschedulable(pod, &u.message)
        });
    }
    bound
}

/// `PodScheduled=False`, reason `Unschedulable`, with `message`; the transition time moves
/// only when the status changes.
fn set_unschedulable(pod: &mut Value, message: &str) {
    let Some(status) = pod
        .as_object_mut()
        .map(|p| p.entry("status").or_insert_with(|| json!({})))
    else {
        return;
    };
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    let Some(list) = conditions.as_array_mut() else {
        return;
    };
    let fresh = json!({
        "type": "PodScheduled", "status": "False", "reason": REASON_UNSCHEDULABLE,
        "message": message, "lastProbeTime": null,
        "lastTransitionTime": super::time::now(),
    });
    match list.iter_mut().find(|c| c["type"] == "PodScheduled") {
        Some(c) if c["status"] == "False" => {
            c["reason"] = json!(REASON_UNSCHEDULABLE);
            c["message"] = json!(message);
        }
        Some(c) => *c = fresh,
        None => list.push(fresh),
    }
}

/// Starts the loop on `store`, a cycle every `period`.
pub(crate) fn start(app: Arc<App>, period: Duration) -> KubeScheduler {
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now = Time(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or(0),
            );
            cycle(&app.store, now);
        }
    });
    KubeScheduler { task }
}
