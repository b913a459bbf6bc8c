//! What kube-controller-manager's StatefulSet controller and ephemeral volume controller
//! create for a scheduler to place: the pods of a StatefulSet with their claims, and the claims
//! of a pod's generic ephemeral volumes.
//!
//! StatefulSet (`pkg/controller/statefulset`): pod `<set>-<ordinal>` for every ordinal from
//! `spec.ordinals.start` (0) up to `replicas` of them, made from the template with the labels
//! `statefulset.kubernetes.io/pod-name` and `apps.kubernetes.io/pod-index`, `hostname` and
//! `subdomain` (the governing service), and a controller owner reference to the set. Each
//! `volumeClaimTemplates` entry gives claim `<template>-<set>-<ordinal>` (the template's labels
//! plus the set's `matchLabels`; owned by the set when the retention policy deletes claims with
//! it, by the pod when it deletes them on scale-down), created before the pod and reused when it
//! already exists; the pod's volume of that name points at it. With `podManagementPolicy:
//! Parallel` every missing pod is created at once; with `OrderedReady` (the default) one at a
//! time, and only once every pod before it is Running and Ready.
//!
//! Not modelled: updates and scale-down, `controller-revision-hash` (the ControllerRevision),
//! `minReadySeconds`, status.
//!
//! Generic ephemeral volumes (`pkg/controller/volume/ephemeral`): a pod volume with
//! `ephemeral.volumeClaimTemplate` gets claim `<pod>-<volume>` in the pod's namespace, from the
//! template, owned (controller) by the pod.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::kubelet::is_ready;
use crate::meta::name;

/// Pod label naming the pod (the StatefulSet controller's).
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Pod label carrying the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// What the controllers create now: claims first, then pods, each in creation order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Created {
    /// New claims.
    pub claims: Vec<PersistentVolumeClaim>,
    /// New pods.
    pub pods: Vec<Pod>,
}

fn namespace(meta: &ObjectMeta) -> String {
    crate::meta::namespace(meta).to_string()
}

fn owner(api_version: &str, kind: &str, meta: &ObjectMeta) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: api_version.into(),
        kind: kind.into(),
        name: meta.name.clone()?,
        uid: meta.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// The name of the claim of template `template` for the pod of `ordinal`.
pub fn claim_name(template: &str, set: &str, ordinal: i32) -> String {
    format!("{template}-{set}-{ordinal}")
}

/// The ordinals of the set's pods, in order.
pub fn ordinals(set: &StatefulSet) -> std::ops::Range<i32> {
    let spec = set.spec.as_ref();
    let start = spec
        .and_then(|s| s.ordinals.as_ref())
        .and_then(|o| o.start)
        .unwrap_or(0)
        .max(0);
    let replicas = spec.and_then(|s| s.replicas).unwrap_or(1).max(0);
    start..start.saturating_add(replicas)
}

/// The claims of the pod of `ordinal` (`getPersistentVolumeClaims`).
pub fn claims_for(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let Some(spec) = set.spec.as_ref() else {
        return Vec::new();
    };
    let set_name = name(&set.metadata);
    let policy = spec.persistent_volume_claim_retention_policy.as_ref();
    let deleted_with_set = policy.and_then(|p| p.when_deleted.as_deref()) == Some("Delete");
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|t| {
            let mut claim = t.clone();
            claim.metadata.name = Some(claim_name(name(&t.metadata), set_name, ordinal));
            claim.metadata.namespace = Some(namespace(&set.metadata));
            let labels = claim.metadata.labels.get_or_insert_with(BTreeMap::new);
            for (k, v) in spec.selector.match_labels.iter().flatten() {
                labels.insert(k.clone(), v.clone());
            }
            claim.metadata.owner_references = deleted_with_set
                .then(|| owner("apps/v1", "StatefulSet", &set.metadata))
                .flatten()
                .map(|o| vec![o]);
            claim.metadata.uid = None;
            claim.metadata.resource_version = None;
            claim.status = None;
            claim
        })
        .collect()
}

/// The pod of `ordinal` (`newStatefulSetPod`), its volumes pointing at its claims.
pub fn pod_for(set: &StatefulSet, ordinal: i32) -> Pod {
    let set_name = name(&set.metadata);
    let pod_name = format!("{set_name}-{ordinal}");
    let spec = set.spec.clone().unwrap_or_default();
    let template = spec.template;
    let mut meta = template.metadata.unwrap_or_default();
    meta.name = Some(pod_name.clone());
    meta.namespace = Some(namespace(&set.metadata));
    meta.generate_name = None;
    let labels = meta.labels.get_or_insert_with(BTreeMap::new);
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    meta.owner_references = owner("apps/v1", "StatefulSet", &set.metadata).map(|o| vec![o]);
    let mut pod_spec = template.spec.unwrap_or_default();
    pod_spec.hostname = Some(pod_name);
    if let Some(service) = spec.service_name.filter(|s| !s.is_empty()) {
        pod_spec.subdomain = Some(service);
    }
    // updateStorage: each claim template replaces the template's volume of the same name.
    let volumes = pod_spec.volumes.get_or_insert_with(Vec::new);
    for t in spec.volume_claim_templates.iter().flatten() {
        let volume = name(&t.metadata).to_string();
        volumes.retain(|v| v.name != volume);
        volumes.push(Volume {
            name: volume.clone(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(&volume, set_name, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    if volumes.is_empty() {
        pod_spec.volumes = None;
    }
    Pod {
        metadata: meta,
        spec: Some(pod_spec),
        status: None,
    }
}

fn running_and_ready(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") && is_ready(pod)
}

/// One sync of the StatefulSet controller: the claims and pods it creates now, given the pods
/// (`pod(name)`) and claims (`claim_exists(name)`) of the set's namespace.
pub fn sync<'a>(
    set: &StatefulSet,
    pod: &dyn Fn(&str) -> Option<&'a Pod>,
    claim_exists: &dyn Fn(&str) -> bool,
) -> Created {
    let parallel = set
        .spec
        .as_ref()
        .and_then(|s| s.pod_management_policy.as_deref())
        == Some("Parallel");
    let set_name = name(&set.metadata);
    let mut out = Created::default();
    for ordinal in ordinals(set) {
        if let Some(existing) = pod(&format!("{set_name}-{ordinal}")) {
            if !parallel && !running_and_ready(existing) {
                break;
            }
            continue;
        }
        for claim in claims_for(set, ordinal) {
            if !claim_exists(name(&claim.metadata)) {
                out.claims.push(claim);
            }
        }
        out.pods.push(pod_for(set, ordinal));
        if !parallel {
            break;
        }
    }
    out
}

/// The claims the ephemeral volume controller makes for `pod`'s generic ephemeral volumes
/// (`<pod>-<volume>`, owned by the pod), whether or not they exist already.
pub fn ephemeral_claims(pod: &Pod) -> Vec<PersistentVolumeClaim> {
    let pod_name = name(&pod.metadata);
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| {
            let template = v.ephemeral.as_ref()?.volume_claim_template.as_ref()?;
            let t_meta = template.metadata.clone().unwrap_or_default();
            Some(PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(format!("{pod_name}-{}", v.name)),
                    namespace: Some(namespace(&pod.metadata)),
                    labels: t_meta.labels,
                    annotations: t_meta.annotations,
                    owner_references: owner("v1", "Pod", &pod.metadata).map(|o| vec![o]),
                    ..Default::default()
                },
                spec: Some(template.spec.clone()),
                status: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(policy: &str) -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "ml", "uid": "uid-db"},
            "spec": {
                "replicas": 3,
                "serviceName": "db",
                "podManagementPolicy": policy,
                "selector": {"matchLabels": {"app": "db"}},
                "template": {
                    "metadata": {"labels": {"app": "db"}, "annotations": {"scheduling.k8s.io/group-name": "db"}},
                    "spec": {"schedulerName": "caldera", "containers": [{"name": "c"}],
                        "volumes": [{"name": "data", "emptyDir": {}}]}
                },
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data", "labels": {"tier": "ssd"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "wait",
                        "resources": {"requests": {"storage": "10Gi"}}}
                }],
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}
            }
        }))
        .unwrap()
    }

    #[test]
    fn parallel_creates_every_pod_with_its_claims() {
        let s = set("Parallel");
        let created = sync(&s, &|_| None, &|_| false);
        let names: Vec<_> = created
            .pods
            .iter()
            .map(|p| name(&p.metadata).to_string())
            .collect();
        assert_eq!(names, ["db-0", "db-1", "db-2"]);
        let claims: Vec<_> = created
            .claims
            .iter()
            .map(|c| name(&c.metadata).to_string())
            .collect();
        assert_eq!(claims, ["data-db-0", "data-db-1", "data-db-2"]);

        let p = &created.pods[1];
        let labels = p.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[POD_NAME_LABEL], "db-1");
        assert_eq!(labels[POD_INDEX_LABEL], "1");
        assert_eq!(labels["app"], "db");
        assert_eq!(p.metadata.namespace.as_deref(), Some("ml"));
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("StatefulSet", "uid-db", Some(true))
        );
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("db-1"));
        assert_eq!(spec.subdomain.as_deref(), Some("db"));
        // The claim template's volume replaces the template's own volume of that name.
        let volumes = spec.volumes.as_ref().unwrap();
        assert_eq!(volumes.len(), 1);
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "data-db-1"
        );

        let c = &created.claims[1];
        let labels = c.metadata.labels.as_ref().unwrap();
        assert_eq!(
            (labels["tier"].as_str(), labels["app"].as_str()),
            ("ssd", "db")
        );
        assert_eq!(
            c.metadata.owner_references.as_ref().unwrap()[0].kind,
            "StatefulSet"
        );
    }

    #[test]
    fn ordered_ready_waits_for_each_pod_to_run_and_be_ready() {
        let s = set("OrderedReady");
        let first = sync(&s, &|_| None, &|_| false);
        assert_eq!(first.pods.len(), 1);
        assert_eq!(name(&first.pods[0].metadata), "db-0");

        let mut p0 = first.pods[0].clone();
        let pending = p0.clone();
        let again = sync(&s, &|n| (n == "db-0").then_some(&pending), &|_| true);
        assert_eq!(again, Created::default(), "db-0 not ready: nothing more");

        let mut status = k8s_openapi::api::core::v1::PodStatus::default();
        crate::kubelet::set_phase(&mut status, "Running", caldera_model::Time(0));
        p0.status = Some(status);
        let next = sync(&s, &|n| (n == "db-0").then_some(&p0), &|n| n == "data-db-0");
        assert_eq!(next.pods.len(), 1);
        assert_eq!(name(&next.pods[0].metadata), "db-1");
        assert_eq!(next.claims.len(), 1, "only the missing claim");
    }

    #[test]
    fn ephemeral_volumes_get_claims_owned_by_their_pod() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "w-0", "namespace": "ml", "uid": "uid-w"},
            "spec": {"containers": [{"name": "c"}], "volumes": [
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "metadata": {"labels": {"type": "scratch"}},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
                {"name": "cache", "emptyDir": {}}
            ]}
        }))
        .unwrap();
        let claims = ephemeral_claims(&pod);
        assert_eq!(claims.len(), 1);
        assert_eq!(name(&claims[0].metadata), "w-0-scratch");
        assert_eq!(
            claims[0].metadata.owner_references.as_ref().unwrap()[0].uid,
            "uid-w"
        );
    }
}
