//! What the simulator writes for a plan's DRA claims, as the binder writes it to an API server:
//! a claim's `status.allocation` and `status.reservedFor` (and the finalizer
//! `resource.kubernetes.io/delete-protection`), and the claim kube-scheduler makes for a pod's
//! extended resources served by devices (KEP-5004).

use caldera_model::{AllocatedConfig, ClaimWrite, ConfigSource, DeviceResult, SelectorTerm};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceAllocationConfiguration, DeviceAllocationResult,
    DeviceRequestAllocationResult, OpaqueDeviceConfiguration, ResourceClaimConsumerReference,
};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

fn requirement(r: &caldera_model::Requirement) -> NodeSelectorRequirement {
    use caldera_model::SelectorOp::*;
    NodeSelectorRequirement {
        key: r.key.clone(),
        operator: match r.op {
            In => "In",
            NotIn => "NotIn",
            Exists => "Exists",
            DoesNotExist => "DoesNotExist",
            Gt => "Gt",
            Lt => "Lt",
        }
        .into(),
        values: (!r.values.is_empty()).then(|| r.values.clone()),
    }
}

/// A node selector in API form.
pub fn node_selector(terms: &[SelectorTerm]) -> NodeSelector {
    NodeSelector {
        node_selector_terms: terms
            .iter()
            .map(|t| NodeSelectorTerm {
                match_expressions: (!t.expressions.is_empty())
                    .then(|| t.expressions.iter().map(requirement).collect()),
                match_fields: (!t.fields.is_empty())
                    .then(|| t.fields.iter().map(requirement).collect()),
            })
            .collect(),
    }
}

fn result(r: &DeviceResult) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: r.request.to_string(),
        driver: r.driver.to_string(),
        pool: r.pool.to_string(),
        device: r.device.to_string(),
        admin_access: r.admin_access.then_some(true),
        share_id: r.share_id.as_deref().map(str::to_string),
        consumed_capacity: (!r.consumed.is_empty()).then(|| {
            r.consumed
                .iter()
                .map(|(name, q)| {
                    (
                        name.to_string(),
                        k8s_openapi::apimachinery::pkg::api::resource::Quantity(q.text.to_string()),
                    )
                })
                .collect()
        }),
        ..Default::default()
    }
}

fn config(c: &AllocatedConfig) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration {
        source: match c.source {
            ConfigSource::Class => "FromClass",
            ConfigSource::Claim => "FromClaim",
        }
        .into(),
        requests: (!c.config.requests.is_empty())
            .then(|| c.config.requests.iter().map(|r| r.to_string()).collect()),
        opaque: Some(OpaqueDeviceConfiguration {
            driver: c.config.driver.to_string(),
            parameters: RawExtension(
                serde_json::from_str(&c.config.parameters).unwrap_or(serde_json::Value::Null),
            ),
        }),
    }
}

/// `status.allocation` for devices, their configuration and node selector.
pub fn allocation(
    devices: &[DeviceResult],
    configs: &[AllocatedConfig],
    selector: Option<&[SelectorTerm]>,
    now: caldera_model::Time,
) -> AllocationResult {
    AllocationResult {
        allocation_timestamp: crate::store::kube_time(now),
        devices: Some(DeviceAllocationResult {
            results: Some(devices.iter().map(result).collect()),
            config: (!configs.is_empty()).then(|| configs.iter().map(config).collect()),
        }),
        node_selector: selector.map(node_selector),
    }
}

/// The allocation a claim write sets.
pub fn write_allocation(w: &ClaimWrite, now: caldera_model::Time) -> AllocationResult {
    allocation(&w.devices, &w.config, w.node_selector.as_deref(), now)
}

/// A `reservedFor` entry for a pod.
pub fn consumer(c: &caldera_model::Consumer) -> ResourceClaimConsumerReference {
    ResourceClaimConsumerReference {
        api_group: None,
        resource: c.resource.to_string(),
        name: c.name.to_string(),
        uid: c.uid.to_string(),
    }
}

impl crate::store::Store {
    /// Carries out a claim write as the binder does through the API: the finalizer
    /// `resource.kubernetes.io/delete-protection`, then (status subresource) the allocation
    /// when the write allocates and the new consumers in `reservedFor`. Refused (false) when
    /// the claim is gone, is another object (uid), or is already allocated otherwise — what
    /// kube-apiserver's validation and the uid precondition refuse.
    pub fn write_claim(&mut self, w: &ClaimWrite, now: caldera_model::Time) -> bool {
        let Some(mut claim) = self.resource_claim(&w.namespace, &w.name).cloned() else {
            return false;
        };
        if claim.metadata.uid.as_deref() != Some(&*w.uid) {
            return false;
        }
        let status = claim.status.get_or_insert_with(Default::default);
        if w.allocate {
            if status.allocation.is_some() {
                return false;
            }
            status.allocation = Some(write_allocation(w, now));
            let finalizers = claim.metadata.finalizers.get_or_insert_with(Vec::new);
            let f = caldera_model::dra::DELETE_PROTECTION_FINALIZER.to_string();
            if !finalizers.contains(&f) {
                finalizers.push(f);
            }
        } else if status.allocation.is_none() {
            return false;
        }
        let status = claim.status.get_or_insert_with(Default::default);
        let reserved = status.reserved_for.get_or_insert_with(Vec::new);
        for c in &w.reserved_for {
            if !reserved.iter().any(|r| r.uid == *c.uid) {
                reserved.push(consumer(c));
            }
        }
        self.put_resource_claim(claim).is_ok()
    }

    /// Creates the claim kube-scheduler makes for a pod's extended resources served by devices
    /// (KEP-5004): named `<pod>-extended-resources-<n>`, annotated
    /// `resource.kubernetes.io/extended-resource-claim: "true"`, owned by the pod, allocated and
    /// reserved for it; then the pod's `status.extendedResourceClaimStatus` names it.
    pub fn create_extended_claim(
        &mut self,
        x: &caldera_model::ExtendedResourceClaim,
        now: caldera_model::Time,
    ) -> bool {
        use k8s_openapi::api::resource::v1::{
            DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
            ResourceClaimStatus,
        };
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
        let Some(pod) = self.pod(&x.namespace, &x.pod) else {
            return false;
        };
        if pod.metadata.uid.as_deref() != Some(&*x.pod_uid) {
            return false;
        }
        let mut n = 0usize;
        let name = loop {
            let candidate = format!("{}-extended-resources-{n}", x.pod);
            if self.resource_claim(&x.namespace, &candidate).is_none() {
                break candidate;
            }
            n += 1;
        };
        let claim = ResourceClaim {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(x.namespace.to_string()),
                uid: Some(format!("{}-{name}", x.pod_uid)),
                creation_timestamp: crate::store::kube_time(now),
                annotations: Some(
                    [(
                        caldera_model::dra::EXTENDED_RESOURCE_CLAIM_ANNOTATION.to_string(),
                        "true".to_string(),
                    )]
                    .into(),
                ),
                finalizers: Some(vec![
                    caldera_model::dra::DELETE_PROTECTION_FINALIZER.to_string()
                ]),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Pod".into(),
                    name: x.pod.to_string(),
                    uid: x.pod_uid.to_string(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]),
                ..Default::default()
            },
            spec: ResourceClaimSpec {
                devices: Some(DeviceClaim {
                    requests: Some(
                        x.requests
                            .iter()
                            .map(|(request, class, count)| DeviceRequest {
                                name: request.to_string(),
                                exactly: Some(ExactDeviceRequest {
                                    device_class_name: class.to_string(),
                                    allocation_mode: Some("ExactCount".into()),
                                    count: Some(i64::from(*count)),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            })
                            .collect(),
                    ),
                    ..Default::default()
                }),
            },
            status: Some(ResourceClaimStatus {
                allocation: Some(allocation(
                    &x.devices,
                    &x.config,
                    x.node_selector.as_deref(),
                    now,
                )),
                reserved_for: Some(vec![consumer(&caldera_model::Consumer {
                    resource: "pods".into(),
                    name: x.pod.clone(),
                    uid: x.pod_uid.clone(),
                })]),
                ..Default::default()
            }),
        };
        if self.put_resource_claim(claim).is_err() {
            return false;
        }
        let status = k8s_openapi::api::core::v1::PodExtendedResourceClaimStatus {
            resource_claim_name: name,
            request_mappings: x
                .mappings
                .iter()
                .map(
                    |m| k8s_openapi::api::core::v1::ContainerExtendedResourceRequest {
                        container_name: m.container.to_string(),
                        resource_name: m.resource.to_string(),
                        request_name: m.request.to_string(),
                    },
                )
                .collect(),
        };
        self.set_extended_claim_status(&x.namespace, &x.pod, status)
    }
}
