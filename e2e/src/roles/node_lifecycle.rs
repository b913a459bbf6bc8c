//! The node lifecycle controller, as far as scheduling sees it: a Node whose `Ready`
//! condition is `True` loses the `node.kubernetes.io/not-ready:NoSchedule` taint admission put
//! on it; one that is not Ready gets it.

use crate::error::{status_code, Error, Result};
use crate::objects::{node_is_ready, ObjectKey, NOT_READY_TAINT};
use caldera_sim::manifest::Kind;
use kube::api::{Patch, PatchParams};
use kube::Client;
use serde_json::{json, Value};
use std::time::Duration;

/// Brings Node `name`'s readiness taint in line with its `Ready` condition. Written with the
/// resourceVersion read, retried on conflict (up to ten times).
pub async fn sync_not_ready_taint(client: &Client, name: &str, timeout: Duration) -> Result<()> {
    let key = ObjectKey::new(Kind::Node, None, name);
    let api = key.api(client);
    for _ in 0..10 {
        let node = match api.get_opt(name).await {
            Ok(Some(o)) => serde_json::to_value(o).map_err(|source| Error::Json {
                object: key.to_string(),
                source,
            })?,
            Ok(None) => return Ok(()),
            Err(e) => return Err(Error::api("get", key.to_string(), e)),
        };
        let ready = node_is_ready(&node);
        let taints: Vec<Value> = node["spec"]["taints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let is_not_ready = |t: &Value| t["key"] == NOT_READY_TAINT && t["effect"] == "NoSchedule";
        let has = taints.iter().any(is_not_ready);
        let next: Vec<Value> = if ready && has {
            taints.into_iter().filter(|t| !is_not_ready(t)).collect()
        } else if !ready && !has {
            let mut t = taints;
            t.push(json!({"key": NOT_READY_TAINT, "effect": "NoSchedule"}));
            t
        } else {
            return Ok(());
        };
        let patch = json!({
            "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
            "spec": {"taints": if next.is_empty() { Value::Null } else { Value::Array(next) }},
        });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if status_code(&e) == Some(409) => continue,
            Err(e) => return Err(Error::api("patch taints of", key.to_string(), e)),
        }
    }
    Err(Error::Timeout {
        what: format!("a conflict-free write of Node {name}'s taints"),
        after: timeout,
    })
}
