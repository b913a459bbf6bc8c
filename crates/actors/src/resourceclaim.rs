//! kube-controller-manager's resource-claim controller (`pkg/controller/resourceclaim`): the
//! ResourceClaims a pod's `resourceClaimTemplateName` entries stand for, and the clean-up of
//! claims whose users are gone.
//!
//! For each pod (not being deleted) and each `spec.resourceClaims[]` entry with a
//! `resourceClaimTemplateName` that `status.resourceClaimStatuses` does not already resolve to an
//! existing claim of the pod: a claim is created from the template (its spec, labels and
//! annotations, plus the annotation `resource.kubernetes.io/pod-claim-name` with the entry's
//! name), named `<pod>-<entry>-<5 chars>` (the controller's `generateName`, both parts cut in
//! proportion when longer than 57 characters), owned by the pod (controller reference,
//! `blockOwnerDeletion`), and the pod's `status.resourceClaimStatuses` names it. An orphan claim
//! already made for the entry (owned by the pod, annotated with the entry) is taken instead of a
//! new one. A missing template is an error for that pod (the controller retries; here: nothing
//! is made until it exists). A bound pod whose allocated claim does not list it in
//! `status.reservedFor` is added there (the controller's `reserveForPod`, ≤ 256 users).
//!
//! For each claim: `status.reservedFor` entries of pods that are gone, replaced (another uid) or
//! done (phase `Succeeded`/`Failed`, or deleted before being bound) are removed; when that
//! empties the list and the claim has the finalizer `resource.kubernetes.io/delete-protection`
//! (its allocator's mark) the allocation is cleared and the finalizer removed. A claim being
//! deleted with no users loses allocation and finalizer too. A claim with no users whose owning
//! pod (controller reference, `v1` `Pod`) is done, replaced or gone is deleted (the controller
//! deletes it for a done pod, the garbage collector for a gone one).
//!
//! Names are deterministic here (the suffix derives from the pod's uid, the entry and a
//! counter), so a simulator run is reproducible; a real controller picks a random suffix.
//!
//! Not modelled: events (`FailedResourceClaimCreation`), the admin-access feature gate, the
//! metrics, retries with back-off.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Pod, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    ResourceClaim, ResourceClaimConsumerReference, ResourceClaimStatus, ResourceClaimTemplate,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::meta::{name, namespace as ns};

/// Annotation of a generated claim naming the `pod.spec.resourceClaims[]` entry it was made for.
pub const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";
/// Finalizer an allocator (kube-scheduler, Caldera) puts on a claim it allocates.
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";
/// Annotation (`"true"`) of the claim kube-scheduler makes for a pod's extended resources served
/// by DRA devices (KEP-5004).
pub const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";
/// At most this many `status.reservedFor` entries (`ResourceClaimReservedForMaxSize`).
pub const RESERVED_FOR_MAX: usize = 256;

/// A claim's new state after one sync; `None` fields are unchanged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaimUpdate {
    /// Namespace of the claim.
    pub namespace: String,
    /// Name of the claim.
    pub name: String,
    /// The new status (written through the status subresource), when it changes.
    pub status: Option<ResourceClaimStatus>,
    /// The new finalizers (written through the main resource, after the status), when they change.
    pub finalizers: Option<Vec<String>>,
    /// Delete the claim (after the writes above).
    pub delete: bool,
}

/// A pod's new `status.resourceClaimStatuses`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodUpdate {
    /// Namespace of the pod.
    pub namespace: String,
    /// Name of the pod.
    pub name: String,
    /// The whole list (old entries kept, new ones added), sorted by entry name.
    pub resource_claim_statuses: Vec<PodResourceClaimStatus>,
}

/// What one sync of the controller does, in the order it is to be written: claims created, then
/// pod statuses, then claim updates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sync {
    /// Claims to create (namespace, name and owner set), in order.
    pub create: Vec<ResourceClaim>,
    /// Pods whose `status.resourceClaimStatuses` changes.
    pub pods: Vec<PodUpdate>,
    /// Claims whose status or finalizers change, or that are deleted.
    pub claims: Vec<ClaimUpdate>,
}

impl Sync {
    /// Whether the sync changes nothing.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.pods.is_empty() && self.claims.is_empty()
    }
}

fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or("")
}

fn bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// Whether the pod will never run (again): finished, or deleted before it was bound
/// (the controller's `isPodDone`).
pub fn pod_done(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed"))
        || (pod.metadata.deletion_timestamp.is_some() && !bound(pod))
}

/// The pod that owns the claim (controller reference to a `v1` `Pod`): name and uid.
pub fn owning_pod(claim: &ResourceClaim) -> Option<(&str, &str)> {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true) && o.api_version == "v1" && o.kind == "Pod")
        .map(|o| (o.name.as_str(), o.uid.as_str()))
}

/// The claim name a pod's `spec.resourceClaims[]` entry resolves to, as
/// `k8s.io/dynamic-resource-allocation/resourceclaim.Name` does: `resourceClaimName` itself, or for
/// a template the name recorded in `status.resourceClaimStatuses` (`None`: not created yet, or an
/// entry the controller decided needs no claim).
pub fn claim_name<'a>(pod: &'a Pod, entry: &str) -> Option<&'a str> {
    let spec_entry = pod
        .spec
        .as_ref()?
        .resource_claims
        .iter()
        .flatten()
        .find(|c| c.name == entry)?;
    if let Some(n) = spec_entry.resource_claim_name.as_deref() {
        return Some(n);
    }
    spec_entry.resource_claim_template_name.as_ref()?;
    pod.status
        .as_ref()?
        .resource_claim_statuses
        .iter()
        .flatten()
        .find(|s| s.name == entry)?
        .resource_claim_name
        .as_deref()
}

/// The `generateName` prefix the controller gives the claim of `entry` in `pod`: `<pod>-<entry>-`,
/// or both names cut in proportion to fit 57 characters (then no trailing `-`, as upstream).
pub fn generate_name(pod: &str, entry: &str) -> String {
    const MAX_BASE: usize = 57;
    let full = format!("{pod}-{entry}-");
    if full.len() <= MAX_BASE {
        return full;
    }
    let cut = |s: &str| -> String {
        let keep = s.len() * MAX_BASE / full.len();
        s.chars().take(keep).collect()
    };
    format!("{}-{}", cut(pod), cut(entry))
}

fn pod_owner(pod: &Pod) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone()?,
        uid: pod.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// The claim the controller makes from `template` for the `entry` of `pod`, named `claim_name`.
pub fn claim_from_template(
    pod: &Pod,
    entry: &str,
    template: &ResourceClaimTemplate,
    claim_name: String,
) -> ResourceClaim {
    let tmeta = template.spec.metadata.clone().unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    annotations.insert(POD_CLAIM_NAME.into(), entry.into());
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(claim_name),
            namespace: Some(ns(&pod.metadata).to_string()),
            annotations: Some(annotations),
            labels: tmeta.labels,
            owner_references: pod_owner(pod).map(|o| vec![o]),
            ..Default::default()
        },
        spec: template.spec.spec.clone(),
        status: None,
    }
}

fn claims_of_entry<'a>(
    claims: &'a [&'a ResourceClaim],
    pod: &Pod,
    entry: &str,
) -> Option<&'a ResourceClaim> {
    let pod_uid = uid(&pod.metadata);
    claims.iter().copied().find(|c| {
        ns(&c.metadata) == ns(&pod.metadata)
            && owning_pod(c).is_some_and(|(_, u)| u == pod_uid)
            && c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(POD_CLAIM_NAME))
                .is_some_and(|n| n == entry)
    })
}

fn reserved_for(claim: &ResourceClaim) -> &[ResourceClaimConsumerReference] {
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_deref())
        .unwrap_or(&[])
}

fn allocated(claim: &ResourceClaim) -> bool {
    claim
        .status
        .as_ref()
        .is_some_and(|s| s.allocation.is_some())
}

/// One sync of the controller over every pod, claim and template it can see (any namespaces).
/// `taken(namespace, name)` says whether a claim name is in use (beyond `claims`).
pub fn sync(
    pods: &[&Pod],
    claims: &[&ResourceClaim],
    templates: &[&ResourceClaimTemplate],
    taken: &dyn Fn(&str, &str) -> bool,
) -> Sync {
    let mut out = Sync::default();
    let key = |m: &ObjectMeta| (ns(m).to_string(), name(m).to_string());
    let claim_by_key: BTreeMap<(String, String), &ResourceClaim> =
        claims.iter().map(|c| (key(&c.metadata), *c)).collect();
    let pod_by_key: BTreeMap<(String, String), &Pod> =
        pods.iter().map(|p| (key(&p.metadata), *p)).collect();
    let template_by_key: BTreeMap<(String, String), &ResourceClaimTemplate> =
        templates.iter().map(|t| (key(&t.metadata), *t)).collect();
    let mut made: BTreeSet<(String, String)> = BTreeSet::new();
    // Claims this sync reserves for bound pods (key → pods added).
    let mut reserve: BTreeMap<(String, String), Vec<ResourceClaimConsumerReference>> =
        BTreeMap::new();

    for pod in pod_by_key.values() {
        let Some(entries) = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()) else {
            continue;
        };
        if pod.metadata.deletion_timestamp.is_some() || pod_done(pod) {
            continue;
        }
        let pod_ns = ns(&pod.metadata).to_string();
        let mut statuses: BTreeMap<String, Option<String>> = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .into_iter()
            .flatten()
            .map(|s| (s.name.clone(), s.resource_claim_name.clone()))
            .collect();
        let mut changed = false;
        for entry in entries {
            let Some(template_name) = entry.resource_claim_template_name.as_deref() else {
                continue;
            };
            let recorded = claim_name(pod, &entry.name)
                .and_then(|n| claim_by_key.get(&(pod_ns.clone(), n.to_string())))
                .filter(|c| owning_pod(c).is_some_and(|(_, u)| u == uid(&pod.metadata)));
            if recorded.is_some() {
                continue;
            }
            let claim_name = match claims_of_entry(claims, pod, &entry.name) {
                Some(orphan) => name(&orphan.metadata).to_string(),
                None => {
                    let Some(template) =
                        template_by_key.get(&(pod_ns.clone(), template_name.to_string()))
                    else {
                        continue;
                    };
                    let prefix = generate_name(name(&pod.metadata), &entry.name);
                    let seed = format!("{}/{}", uid(&pod.metadata), entry.name);
                    let mut n = 0u64;
                    let claim_name = loop {
                        let candidate = format!("{prefix}{}", crate::meta::suffix(&seed, n));
                        let k = (pod_ns.clone(), candidate.clone());
                        if !claim_by_key.contains_key(&k)
                            && !made.contains(&k)
                            && !taken(&pod_ns, &candidate)
                        {
                            break candidate;
                        }
                        n += 1;
                    };
                    made.insert((pod_ns.clone(), claim_name.clone()));
                    out.create.push(claim_from_template(
                        pod,
                        &entry.name,
                        template,
                        claim_name.clone(),
                    ));
                    claim_name
                }
            };
            statuses.insert(entry.name.clone(), Some(claim_name));
            changed = true;
        }
        if changed {
            out.pods.push(PodUpdate {
                namespace: pod_ns.clone(),
                name: name(&pod.metadata).to_string(),
                resource_claim_statuses: statuses
                    .into_iter()
                    .map(|(name, resource_claim_name)| PodResourceClaimStatus {
                        name,
                        resource_claim_name,
                    })
                    .collect(),
            });
        }
        if !bound(pod) {
            continue;
        }
        // A bound pod's allocated claims list it as a user.
        for entry in entries {
            let Some(claim_name) = claim_name(pod, &entry.name) else {
                continue;
            };
            let k = (pod_ns.clone(), claim_name.to_string());
            let Some(claim) = claim_by_key.get(&k) else {
                continue;
            };
            if entry.resource_claim_template_name.is_some()
                && owning_pod(claim).is_none_or(|(_, u)| u != uid(&pod.metadata))
            {
                continue;
            }
            let users = reserved_for(claim);
            let added = reserve.entry(k).or_default();
            if allocated(claim)
                && !users.iter().any(|r| r.uid == uid(&pod.metadata))
                && !added.iter().any(|r| r.uid == uid(&pod.metadata))
                && users.len() + added.len() < RESERVED_FOR_MAX
            {
                added.push(ResourceClaimConsumerReference {
                    api_group: None,
                    resource: "pods".into(),
                    name: name(&pod.metadata).to_string(),
                    uid: uid(&pod.metadata).to_string(),
                });
            }
        }
    }

    for (k, claim) in &claim_by_key {
        let users = reserved_for(claim);
        let live = |r: &ResourceClaimConsumerReference| -> bool {
            if r.api_group.as_deref().is_some_and(|g| !g.is_empty()) || r.resource != "pods" {
                // Not a pod: the controller cannot judge it and leaves it.
                return true;
            }
            pod_by_key
                .get(&(k.0.clone(), r.name.clone()))
                .is_some_and(|p| uid(&p.metadata) == r.uid && !pod_done(p))
        };
        let mut valid: Vec<ResourceClaimConsumerReference> =
            users.iter().filter(|r| live(r)).cloned().collect();
        let stale = valid.len() < users.len();
        let finalizers: Vec<String> = claim.metadata.finalizers.clone().unwrap_or_default();
        let protected = finalizers.iter().any(|f| f == DELETE_PROTECTION);
        // The last users gone deallocate the claim: a bound pod that still names it is not
        // added (it needs a new allocation, from a scheduler).
        let deallocated = stale && valid.is_empty() && protected;
        let added = reserve.remove(k).unwrap_or_default();
        let grew = !added.is_empty() && !deallocated;
        if !deallocated {
            valid.extend(added);
        }
        let deleting = claim.metadata.deletion_timestamp.is_some();
        let mut update = ClaimUpdate {
            namespace: k.0.clone(),
            name: k.1.clone(),
            ..Default::default()
        };
        let mut status = claim.status.clone().unwrap_or_default();
        if stale || grew {
            status.reserved_for = (!valid.is_empty()).then(|| valid.clone());
            if valid.is_empty() && protected {
                status.allocation = None;
            }
            update.status = Some(status.clone());
        } else if valid.is_empty() && protected && deleting && status.allocation.is_some() {
            status.allocation = None;
            update.status = Some(status.clone());
        }
        // Only a claim that just lost its last user, or one being deleted, loses the finalizer:
        // a new claim an allocator marked before writing its allocation keeps it.
        if protected && valid.is_empty() && (deallocated || deleting) {
            update.finalizers = Some(
                finalizers
                    .iter()
                    .filter(|f| *f != DELETE_PROTECTION)
                    .cloned()
                    .collect(),
            );
        }
        if valid.is_empty() && !deleting {
            if let Some((owner, owner_uid)) = owning_pod(claim) {
                update.delete = match pod_by_key.get(&(k.0.clone(), owner.to_string())) {
                    Some(p) => uid(&p.metadata) != owner_uid || pod_done(p),
                    // The garbage collector deletes the dependents of a pod that is gone.
                    None => true,
                };
            }
        }
        if update.status.is_some() || update.finalizers.is_some() || update.delete {
            out.claims.push(update);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodResourceClaim, PodSpec, PodStatus};
    use k8s_openapi::api::resource::v1::{
        AllocationResult, DeviceAllocationResult, DeviceClaim, DeviceRequest,
        DeviceRequestAllocationResult, ExactDeviceRequest, ResourceClaimSpec,
        ResourceClaimTemplateSpec,
    };
    use std::collections::BTreeMap;

    fn pod(name: &str, claims: &[(&str, Option<&str>, Option<&str>)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PodSpec {
                resource_claims: Some(
                    claims
                        .iter()
                        .map(|(n, claim, template)| PodResourceClaim {
                            name: (*n).into(),
                            resource_claim_name: claim.map(Into::into),
                            resource_claim_template_name: template.map(Into::into),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: Some(PodStatus::default()),
        }
    }

    fn spec() -> ResourceClaimSpec {
        ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: "gpu".into(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: "gpu.example.com".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn template(name: &str) -> ResourceClaimTemplate {
        ResourceClaimTemplate {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            spec: ResourceClaimTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(BTreeMap::from([("team".into(), "a".into())])),
                    annotations: Some(BTreeMap::from([("note".into(), "x".into())])),
                    ..Default::default()
                }),
                spec: spec(),
            },
        }
    }

    fn claim(name: &str) -> ResourceClaim {
        ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: spec(),
            status: None,
        }
    }

    fn allocate(mut c: ResourceClaim, users: &[&Pod]) -> ResourceClaim {
        c.metadata.finalizers = Some(vec![DELETE_PROTECTION.into()]);
        c.status = Some(ResourceClaimStatus {
            allocation: Some(AllocationResult {
                devices: Some(DeviceAllocationResult {
                    results: Some(vec![DeviceRequestAllocationResult {
                        request: "gpu".into(),
                        driver: "gpu.example.com".into(),
                        pool: "node-a".into(),
                        device: "gpu-0".into(),
                        ..Default::default()
                    }]),
                    config: None,
                }),
                ..Default::default()
            }),
            reserved_for: (!users.is_empty()).then(|| {
                users
                    .iter()
                    .map(|p| ResourceClaimConsumerReference {
                        api_group: None,
                        resource: "pods".into(),
                        name: p.metadata.name.clone().unwrap_or_default(),
                        uid: p.metadata.uid.clone().unwrap_or_default(),
                    })
                    .collect()
            }),
            devices: None,
        });
        c
    }

    fn owned_by(mut c: ResourceClaim, p: &Pod, entry: &str) -> ResourceClaim {
        c.metadata.owner_references = pod_owner(p).map(|o| vec![o]);
        c.metadata.annotations = Some(BTreeMap::from([(POD_CLAIM_NAME.into(), entry.into())]));
        c
    }

    fn record(mut p: Pod, entry: &str, claim: &str) -> Pod {
        p.status
            .get_or_insert_with(Default::default)
            .resource_claim_statuses = Some(vec![PodResourceClaimStatus {
            name: entry.into(),
            resource_claim_name: Some(claim.into()),
        }]);
        p
    }

    fn bind(mut p: Pod, node: &str) -> Pod {
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p
    }

    fn phase(mut p: Pod, phase: &str) -> Pod {
        p.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        p
    }

    fn nothing_taken(_: &str, _: &str) -> bool {
        false
    }

    #[test]
    fn template_entry_gets_a_claim_owned_by_the_pod_and_named_in_its_status() {
        let p = pod("train-0", &[("gpu", None, Some("one-gpu"))]);
        let t = template("one-gpu");
        let out = sync(&[&p], &[], &[&t], &nothing_taken);
        assert_eq!(out.create.len(), 1);
        let c = &out.create[0];
        let n = c.metadata.name.clone().unwrap_or_default();
        assert!(
            n.starts_with("train-0-gpu-") && n.len() == "train-0-gpu-".len() + 5,
            "{n}"
        );
        assert_eq!(c.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(c.spec, spec());
        let owner = owning_pod(c);
        assert_eq!(owner, Some(("train-0", "uid-train-0")));
        let annotations = c.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get(POD_CLAIM_NAME).map(String::as_str),
            Some("gpu")
        );
        assert_eq!(annotations.get("note").map(String::as_str), Some("x"));
        assert_eq!(
            c.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("team"))
                .map(String::as_str),
            Some("a")
        );
        assert_eq!(
            out.pods,
            vec![PodUpdate {
                namespace: "default".into(),
                name: "train-0".into(),
                resource_claim_statuses: vec![PodResourceClaimStatus {
                    name: "gpu".into(),
                    resource_claim_name: Some(n),
                }],
            }]
        );
    }

    #[test]
    fn claim_already_recorded_is_not_made_again() {
        let p = pod("train-0", &[("gpu", None, Some("one-gpu"))]);
        let c = owned_by(claim("train-0-gpu-abcde"), &p, "gpu");
        let p = record(p, "gpu", "train-0-gpu-abcde");
        let t = template("one-gpu");
        let out = sync(&[&p], &[&c], &[&t], &nothing_taken);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn orphan_claim_of_the_entry_is_adopted_rather_than_duplicated() {
        let p = pod("train-0", &[("gpu", None, Some("one-gpu"))]);
        let c = owned_by(claim("train-0-gpu-zzzzz"), &p, "gpu");
        let t = template("one-gpu");
        let out = sync(&[&p], &[&c], &[&t], &nothing_taken);
        assert!(out.create.is_empty());
        assert_eq!(
            out.pods[0].resource_claim_statuses[0]
                .resource_claim_name
                .as_deref(),
            Some("train-0-gpu-zzzzz")
        );
    }

    #[test]
    fn missing_template_makes_nothing_until_it_exists() {
        let p = pod("train-0", &[("gpu", None, Some("one-gpu"))]);
        let out = sync(&[&p], &[], &[], &nothing_taken);
        assert!(out.is_empty());
    }

    #[test]
    fn named_claims_and_deleted_pods_get_no_generated_claim() {
        let p = pod("a", &[("gpu", Some("shared"), None)]);
        let mut q = pod("b", &[("gpu", None, Some("one-gpu"))]);
        q.metadata.deletion_timestamp = crate::time::to_kube(caldera_model::Time(0));
        let t = template("one-gpu");
        let out = sync(&[&p, &q], &[], &[&t], &nothing_taken);
        assert!(out.create.is_empty());
        assert!(out.pods.is_empty());
    }

    #[test]
    fn generated_names_avoid_taken_ones_and_are_deterministic() {
        let p = pod("train-0", &[("gpu", None, Some("one-gpu"))]);
        let t = template("one-gpu");
        let first = sync(&[&p], &[], &[&t], &nothing_taken);
        let again = sync(&[&p], &[], &[&t], &nothing_taken);
        assert_eq!(first, again);
        let n = first.create[0].metadata.name.clone().unwrap_or_default();
        let avoid = n.clone();
        let other = sync(&[&p], &[], &[&t], &move |_, name| name == avoid);
        let m = other.create[0].metadata.name.clone().unwrap_or_default();
        assert_ne!(n, m);
        assert!(m.starts_with("train-0-gpu-"));
    }

    #[test]
    fn long_names_are_cut_in_proportion() {
        let pod_name = "p".repeat(60);
        let prefix = generate_name(&pod_name, "gpu-claim");
        assert!(prefix.len() <= 57, "{}", prefix.len());
        assert!(
            prefix.ends_with("-gpu-cla") || prefix.contains("-gpu"),
            "{prefix}"
        );
        assert_eq!(generate_name("a", "b"), "a-b-");
    }

    #[test]
    fn users_that_are_gone_or_done_leave_reserved_for_and_last_one_deallocates() {
        let a = bind(pod("a", &[("gpu", Some("shared"), None)]), "n");
        let b = bind(pod("b", &[("gpu", Some("shared"), None)]), "n");
        let c = allocate(claim("shared"), &[&a, &b]);
        // b finished: only a stays; still allocated and protected.
        let b_done = phase(b.clone(), "Succeeded");
        let out = sync(&[&a, &b_done], &[&c], &[], &nothing_taken);
        assert_eq!(out.claims.len(), 1);
        let u = &out.claims[0];
        let status = u.status.clone().unwrap_or_default();
        assert_eq!(status.reserved_for.as_ref().map(Vec::len), Some(1));
        assert!(status.allocation.is_some());
        assert_eq!(u.finalizers, None);
        assert!(!u.delete, "a claim not owned by a pod is the user's");
        // Both gone: deallocated, finalizer removed, claim kept.
        let out = sync(&[], &[&c], &[], &nothing_taken);
        let u = &out.claims[0];
        let status = u.status.clone().unwrap_or_default();
        assert_eq!(status.reserved_for, None);
        assert_eq!(status.allocation, None);
        assert_eq!(u.finalizers, Some(vec![]));
        assert!(!u.delete);
    }

    #[test]
    fn replaced_pod_with_the_same_name_is_not_a_user() {
        let a = bind(pod("a", &[("gpu", Some("shared"), None)]), "n");
        let c = allocate(claim("shared"), &[&a]);
        let mut a2 = a.clone();
        a2.metadata.uid = Some("other".into());
        let out = sync(&[&a2], &[&c], &[], &nothing_taken);
        let status = out.claims[0].status.clone().unwrap_or_default();
        assert_eq!(status.reserved_for, None);
        assert_eq!(status.allocation, None);
    }

    #[test]
    fn claim_of_a_deleted_pod_is_deleted() {
        let p = bind(pod("train-0", &[("gpu", None, Some("one-gpu"))]), "n");
        let c = allocate(owned_by(claim("train-0-gpu-abcde"), &p, "gpu"), &[&p]);
        let out = sync(&[], &[&c], &[], &nothing_taken);
        let u = &out.claims[0];
        assert!(u.delete);
        assert_eq!(u.finalizers, Some(vec![]));
        assert_eq!(u.status.clone().unwrap_or_default().allocation, None);
    }

    #[test]
    fn claim_of_a_finished_pod_is_deleted_but_not_while_it_runs() {
        let p = record(
            bind(pod("train-0", &[("gpu", None, Some("one-gpu"))]), "n"),
            "gpu",
            "train-0-gpu-abcde",
        );
        let c = allocate(owned_by(claim("train-0-gpu-abcde"), &p, "gpu"), &[&p]);
        let out = sync(&[&p], &[&c], &[], &nothing_taken);
        assert!(out.is_empty(), "{out:?}");
        let done = phase(p.clone(), "Failed");
        let out = sync(&[&done], &[&c], &[], &nothing_taken);
        assert!(out.claims[0].delete);
    }

    #[test]
    fn unallocated_claim_of_a_pending_pod_stays() {
        let p = record(
            pod("train-0", &[("gpu", None, Some("one-gpu"))]),
            "gpu",
            "train-0-gpu-abcde",
        );
        let c = owned_by(claim("train-0-gpu-abcde"), &p, "gpu");
        let t = template("one-gpu");
        let out = sync(&[&p], &[&c], &[&t], &nothing_taken);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn bound_pod_is_added_to_its_allocated_claim() {
        let a = bind(pod("a", &[("gpu", Some("shared"), None)]), "n");
        let b = bind(pod("b", &[("gpu", Some("shared"), None)]), "n");
        let c = allocate(claim("shared"), &[&a]);
        let out = sync(&[&a, &b], &[&c], &[], &nothing_taken);
        let status = out.claims[0].status.clone().unwrap_or_default();
        let names: Vec<String> = status
            .reserved_for
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
        // An unallocated claim is the scheduler's to reserve.
        let c = claim("shared");
        let out = sync(&[&a, &b], &[&c], &[], &nothing_taken);
        assert!(out.is_empty());
    }

    #[test]
    fn terminating_claim_without_users_loses_allocation_and_finalizer() {
        let mut c = allocate(claim("shared"), &[]);
        c.metadata.deletion_timestamp = crate::time::to_kube(caldera_model::Time(0));
        let out = sync(&[], &[&c], &[], &nothing_taken);
        let u = &out.claims[0];
        assert_eq!(u.status.clone().unwrap_or_default().allocation, None);
        assert_eq!(u.finalizers, Some(vec![]));
        assert!(!u.delete, "already being deleted");
    }

    #[test]
    fn finalizer_of_a_claim_being_allocated_stays() {
        let mut c = claim("shared");
        c.metadata.finalizers = Some(vec![DELETE_PROTECTION.into()]);
        let out = sync(&[], &[&c], &[], &nothing_taken);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn claim_name_resolves_named_and_template_entries() {
        let p = pod("a", &[("x", Some("shared"), None), ("y", None, Some("t"))]);
        assert_eq!(claim_name(&p, "x"), Some("shared"));
        assert_eq!(claim_name(&p, "y"), None);
        assert_eq!(claim_name(&p, "z"), None);
        let p = record(p, "y", "a-y-bcdfg");
        assert_eq!(claim_name(&p, "y"), Some("a-y-bcdfg"));
    }
}
