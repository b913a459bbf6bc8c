//! What a LeaderWorkerSet (`leaderworkerset.x-k8s.io`, kubernetes-sigs/lws) turns into, for a
//! scheduler to see: `replicas` groups of `leaderWorkerTemplate.size` pods.
//!
//! In a cluster three parties make them: the LWS controller creates a leader StatefulSet
//! `<lws>` (owned by the LWS) whose pods `<lws>-<i>` are the leaders, and for each leader pod a
//! worker StatefulSet `<lws>-<i>` (owned by the leader pod) whose pods `<lws>-<i>-<j>`
//! (`j` from 1 to `size - 1`) are the workers; the StatefulSet controller creates the pods; the
//! LWS pod webhook labels them. Here the three are played as one: the pods are made directly,
//! each with the labels `leaderworkerset.sigs.k8s.io/name`, `group-index`, `worker-index` and
//! `group-key`, the annotation `leaderworkerset.sigs.k8s.io/size` (leaders) or `leader-name`
//! (workers), and a controller reference to the StatefulSet that would own it (its uid derived
//! from the LWS's; the StatefulSets themselves are not kept). Leaders come from
//! `leaderTemplate` (else `workerTemplate`), workers from `workerTemplate`.
//!
//! Not modelled: the StatefulSet objects, rolling updates, `startupPolicy: LeaderReady`
//! (workers are made with their leader, the `LeaderCreated` default), restart policies,
//! subgroups, exclusive topology, scaling down.

use caldera_cache::derive::{
    Workload, LABEL_LWS_GROUP_INDEX, LABEL_LWS_NAME, LABEL_LWS_WORKER_INDEX,
};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Pod label: a key unique to the group.
pub const LABEL_GROUP_KEY: &str = "leaderworkerset.sigs.k8s.io/group-key";
/// Leader pod annotation: the group's size.
pub const ANNOTATION_SIZE: &str = "leaderworkerset.sigs.k8s.io/size";
/// Worker pod annotation: the leader pod's name.
pub const ANNOTATION_LEADER_NAME: &str = "leaderworkerset.sigs.k8s.io/leader-name";

fn key(s: &str) -> String {
    // FNV-1a: deterministic, stands in for the controller's SHA-1 of the leader's identity.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The pods the LeaderWorkerSet should have that `exists(name)` says are missing, in order
/// (group by group, leader first).
pub fn missing_pods(lws: &Workload, exists: &dyn Fn(&str) -> bool) -> Vec<Pod> {
    let (Some(name), Some(uid)) = (lws.metadata.name.as_deref(), lws.metadata.uid.as_deref())
    else {
        return Vec::new();
    };
    let spec = &lws.spec;
    let replicas = spec.get("replicas").and_then(|v| v.as_i64()).unwrap_or(1);
    let lwt = spec
        .get("leaderWorkerTemplate")
        .cloned()
        .unwrap_or_default();
    let size = lwt.get("size").and_then(|v| v.as_i64()).unwrap_or(1).max(1);
    let template = |key: &str| -> Option<PodTemplateSpec> {
        lwt.get(key)
            .filter(|t| !t.is_null())
            .and_then(|t| serde_json::from_value(t.clone()).ok())
    };
    let Some(worker) = template("workerTemplate") else {
        return Vec::new();
    };
    let leader = template("leaderTemplate").unwrap_or_else(|| worker.clone());
    let mut out = Vec::new();
    for g in 0..replicas.max(0) {
        let leader_name = format!("{name}-{g}");
        let group_key = key(&format!("{}/{leader_name}", uid));
        for w in 0..size {
            let (pod_name, t, set, set_uid) = if w == 0 {
                (
                    leader_name.clone(),
                    &leader,
                    name.to_string(),
                    format!("{uid}-sts"),
                )
            } else {
                (
                    format!("{leader_name}-{w}"),
                    &worker,
                    leader_name.clone(),
                    format!("{uid}-sts-{g}"),
                )
            };
            if exists(&pod_name) {
                continue;
            }
            let mut meta = t.metadata.clone().unwrap_or_default();
            let labels = meta.labels.get_or_insert_with(Default::default);
            labels.insert(LABEL_LWS_NAME.into(), name.into());
            labels.insert(LABEL_LWS_GROUP_INDEX.into(), g.to_string());
            labels.insert(LABEL_LWS_WORKER_INDEX.into(), w.to_string());
            labels.insert(LABEL_GROUP_KEY.into(), group_key.clone());
            let annotations = meta.annotations.get_or_insert_with(Default::default);
            if w == 0 {
                annotations.insert(ANNOTATION_SIZE.into(), size.to_string());
            } else {
                annotations.insert(ANNOTATION_LEADER_NAME.into(), leader_name.clone());
            }
            out.push(Pod {
                metadata: ObjectMeta {
                    name: Some(pod_name),
                    namespace: lws.metadata.namespace.clone(),
                    owner_references: Some(vec![OwnerReference {
                        api_version: "apps/v1".into(),
                        kind: "StatefulSet".into(),
                        name: set,
                        uid: set_uid,
                        controller: Some(true),
                        block_owner_deletion: Some(true),
                    }]),
                    ..meta
                },
                spec: t.spec.clone(),
                status: None,
            });
        }
    }
    out
}

/// Whether the pod is one of the LeaderWorkerSet `name`'s (by its label), for the garbage
/// collector's cascade through the StatefulSets.
pub fn owned_by(pod: &Pod, name: &str) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_LWS_NAME))
        .is_some_and(|n| n == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn groups_of_a_leader_and_size_minus_one_workers() {
        let lws: Workload = serde_json::from_value(json!({
            "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"namespace": "ml", "name": "infer", "uid": "u-lws"},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 3,
                "workerTemplate": {"metadata": {"labels": {"app": "infer"}},
                    "spec": {"containers": []}}}}
        }))
        .unwrap();
        let pods = missing_pods(&lws, &|n| n == "infer-1-2");
        let names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            ["infer-0", "infer-0-1", "infer-0-2", "infer-1", "infer-1-1"]
        );
        let w = &pods[4];
        let l = w.metadata.labels.as_ref().unwrap();
        assert_eq!(
            (
                l[LABEL_LWS_GROUP_INDEX].as_str(),
                l[LABEL_LWS_WORKER_INDEX].as_str()
            ),
            ("1", "1")
        );
        assert_eq!(l["app"], "infer");
        assert_eq!(
            w.metadata.owner_references.as_ref().unwrap()[0].name,
            "infer-1"
        );
        assert_eq!(
            pods[0].metadata.owner_references.as_ref().unwrap()[0].name,
            "infer"
        );
        assert_eq!(
            pods[3].metadata.labels.as_ref().unwrap()[LABEL_GROUP_KEY],
            l[LABEL_GROUP_KEY]
        );
        assert!(owned_by(w, "infer"));
    }
}
