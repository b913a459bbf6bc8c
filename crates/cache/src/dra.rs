//! Dynamic Resource Allocation objects (`resource.k8s.io/v1`) → model: DeviceClasses,
//! ResourceSlices (assembled into pools: only the newest generation of a pool, and only when
//! all its `resourceSliceCount` slices are present), ResourceClaims, ResourceClaimTemplates,
//! and a pod's claims resolved as kube-scheduler resolves them (`resourceClaimName`, or a
//! template's claim named in `pod.status.resourceClaimStatuses`).
//!
//! Shared devices and capacity requests (consumable capacity, KEP-5075), counter sets and the
//! counters devices draw (partitionable devices, KEP-4815) and `distinctAttribute` are
//! converted; a pool whose counters do not add up (a counter set named twice, a device drawing
//! from a counter set or counter the pool does not have) is invalid, as upstream. Inputs Caldera
//! does not evaluate are refused loudly where they would change a decision: a device using them
//! is never allocated (its `unsupported` says why), a claim using them cannot be allocated (its
//! `unsupported` is the message its pods show).

use crate::error::{ObjectKind, Problem, Result};
use crate::fields::{selector_term, Ctx};
use caldera_model::dra::{
    AllocatedConfig, Allocation, AllocationMode, AttributeValue, Capacity, CapacityRange, Claim,
    ConfigSource, ConstraintKind, Consumer, CounterConsumption, CounterSet, Device, DeviceClass,
    DeviceConfig, DeviceConstraint, DeviceInventory, DeviceNodes, DeviceRequest, DeviceResult,
    ExactRequest, ExtendedRequest, PodClaim, Quantity, RequestKind, RequestPolicy, SubRequest,
    TaskClaims, UnusablePool,
};
use caldera_model::{parse_quantity, Scale, SelectorTerm};
use k8s_openapi::api::core::v1::{NodeSelector, Pod, PodSpec};
use k8s_openapi::api::resource::v1 as api;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One ResourceSlice, converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceInfo {
    /// `spec.driver`.
    pub driver: Arc<str>,
    /// `spec.pool.name`.
    pub pool: Arc<str>,
    /// `spec.pool.generation`.
    pub generation: i64,
    /// `spec.pool.resourceSliceCount`.
    pub slice_count: i64,
    /// Where the slice's devices are reachable (per device with `perDeviceNodeSelection`:
    /// then each device carries its own).
    pub nodes: DeviceNodes,
    /// Its devices.
    pub devices: Vec<Device>,
    /// `spec.sharedCounters` (a slice has devices or counter sets, not both).
    pub counter_sets: Vec<CounterSet>,
}

/// What the index keeps of the four kinds.
#[derive(Debug, Clone, Default)]
pub struct DraIndex {
    /// DeviceClasses by name.
    pub classes: BTreeMap<Arc<str>, DeviceClass>,
    /// ResourceSlices by name.
    pub slices: BTreeMap<Arc<str>, SliceInfo>,
    /// ResourceClaims by (namespace, name).
    pub claims: BTreeMap<(Arc<str>, Arc<str>), Claim>,
    /// ResourceClaimTemplates: (namespace, name).
    pub templates: BTreeSet<(Arc<str>, Arc<str>)>,
}

impl DraIndex {
    /// Nothing known.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty() && self.slices.is_empty() && self.claims.is_empty()
    }

    /// The inventory a snapshot carries: pools assembled from their slices, classes, claims.
    pub fn inventory(&self) -> DeviceInventory {
        let mut pools: BTreeMap<(&str, &str), Vec<&SliceInfo>> = BTreeMap::new();
        for s in self.slices.values() {
            pools.entry((&s.driver, &s.pool)).or_default().push(s);
        }
        let mut devices = Vec::new();
        let mut counter_sets = Vec::new();
        let mut unusable_pools = Vec::new();
        for ((driver, pool), slices) in pools {
            let newest = slices.iter().map(|s| s.generation).max().unwrap_or(0);
            let current: Vec<&SliceInfo> = slices
                .into_iter()
                .filter(|s| s.generation == newest)
                .collect();
            let nodes = || current.iter().map(|s| s.nodes.clone()).collect::<Vec<_>>();
            let count = current.iter().map(|s| s.slice_count).max().unwrap_or(0);
            let mut names = BTreeSet::new();
            let duplicate = current
                .iter()
                .flat_map(|s| &s.devices)
                .any(|d| !names.insert(d.name.clone()));
            let contradict = current.iter().any(|s| s.slice_count != count);
            if duplicate || contradict || !counters_add_up(&current) {
                unusable_pools.push(UnusablePool {
                    driver: Arc::from(driver),
                    pool: Arc::from(pool),
                    nodes: nodes(),
                    invalid: true,
                });
                continue;
            }
            if (current.len() as i64) < count {
                unusable_pools.push(UnusablePool {
                    driver: Arc::from(driver),
                    pool: Arc::from(pool),
                    nodes: nodes(),
                    invalid: false,
                });
                continue;
            }
            devices.extend(current.iter().flat_map(|s| s.devices.iter().cloned()));
            counter_sets.extend(current.iter().flat_map(|s| s.counter_sets.iter().cloned()));
        }
        devices.sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
        counter_sets
            .sort_by(|a, b| (&a.driver, &a.pool, &a.name).cmp(&(&b.driver, &b.pool, &b.name)));
        DeviceInventory {
            devices,
            classes: self.classes.values().cloned().collect(),
            claims: self.claims.values().cloned().collect(),
            unusable_pools,
            counter_sets,
        }
    }

    /// A pod's DRA inputs, resolved against the claims known (`None`: it has none).
    /// `extended` are its extended-resource requests ([`extended_requests`]); only those a
    /// DeviceClass may serve are kept.
    pub fn task_claims(&self, pod: &PodClaims, extended: &[ExtendedRequest]) -> Option<TaskClaims> {
        let extended: Vec<ExtendedRequest> = extended
            .iter()
            .filter(|e| self.serves(&e.resource))
            .cloned()
            .collect();
        if pod.refs.is_empty() && extended.is_empty() {
            return None;
        }
        let mut out = TaskClaims {
            extended,
            extended_claim: pod.extended_claim.clone(),
            ..TaskClaims::default()
        };
        let pod_key = format!("{}/{}", pod.namespace, pod.name);
        for r in &pod.refs {
            let (name, from_template) = match &r.source {
                ClaimSource::Named(n) => (n.clone(), false),
                ClaimSource::Template(_, Some(Some(n))) => (n.clone(), true),
                // The resource-claim controller decided that no claim is needed.
                ClaimSource::Template(_, Some(None)) => continue,
                ClaimSource::Template(t, None) => {
                    let template = if self.templates.contains(&(pod.namespace.clone(), t.clone())) {
                        String::new()
                    } else {
                        format!(" (resourceclaimtemplate {t:?} not found)")
                    };
                    out.waiting.get_or_insert_with(|| {
                        Arc::from(format!(
                            "pod \"{pod_key}\": ResourceClaim not created yet for {:?}{template}",
                            r.name
                        ))
                    });
                    continue;
                }
            };
            match self.claims.get(&(pod.namespace.clone(), name.clone())) {
                None => {
                    out.waiting.get_or_insert_with(|| {
                        Arc::from(format!(
                            "resourceclaim.resource.k8s.io \"{name}\" not found"
                        ))
                    });
                }
                Some(c) if c.deleting => {
                    out.waiting.get_or_insert_with(|| {
                        Arc::from(format!("resourceclaim \"{name}\" is being deleted"))
                    });
                }
                Some(c)
                    if from_template
                        && c.owner
                            .as_ref()
                            .is_none_or(|(kind, uid)| &**kind != "Pod" || *uid != pod.uid) =>
                {
                    out.waiting.get_or_insert_with(|| {
                        Arc::from(format!(
                            "ResourceClaim {}/{name} was not created for pod {pod_key} (pod is not owner)",
                            pod.namespace
                        ))
                    });
                }
                Some(_) => {}
            }
            out.claims.push(PodClaim {
                pod_claim: r.name.clone(),
                claim: name,
                from_template,
            });
        }
        Some(out)
    }

    /// Whether some DeviceClass serves the extended resource `resource`.
    fn serves(&self, resource: &str) -> bool {
        self.classes
            .values()
            .any(|c| c.extended_resource_name.as_deref() == Some(resource))
            || resource
                .strip_prefix(caldera_model::dra::IMPLICIT_EXTENDED_RESOURCE_PREFIX)
                .is_some_and(|class| self.classes.contains_key(class))
    }
}

/// Whether the counters of a pool's newest slices add up, as upstream checks a pool before
/// using it: every counter set name once in the pool, and every device drawing only from
/// counter sets and counters the pool has. A pool where they do not is invalid.
fn counters_add_up(slices: &[&SliceInfo]) -> bool {
    let mut sets: BTreeMap<&str, &CounterSet> = BTreeMap::new();
    for set in slices.iter().flat_map(|s| &s.counter_sets) {
        if sets.insert(&set.name, set).is_some() {
            return false;
        }
    }
    slices.iter().flat_map(|s| &s.devices).all(|d| {
        d.consumes.iter().all(|c| {
            sets.get(&*c.counter_set)
                .is_some_and(|set| c.counters.keys().all(|n| set.counters.contains_key(n)))
        })
    })
}

/// Where a pod's `spec.resourceClaims[]` entry gets its claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClaimSource {
    /// `resourceClaimName`.
    Named(Arc<str>),
    /// `resourceClaimTemplateName`, and what `status.resourceClaimStatuses` says for it:
    /// `None` no entry yet; `Some(None)` no claim needed; `Some(Some(name))` the claim.
    Template(Arc<str>, Option<Option<Arc<str>>>),
}

/// One `spec.resourceClaims[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClaimRef {
    /// `name`.
    pub name: Arc<str>,
    /// Where its claim comes from.
    pub source: ClaimSource,
}

/// A pod's claims as read from the pod, resolved at snapshot time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodClaims {
    /// Pod namespace.
    pub namespace: Arc<str>,
    /// Pod name.
    pub name: Arc<str>,
    /// Pod uid (a template's claim must be owned by it).
    pub uid: Arc<str>,
    /// `spec.resourceClaims`.
    pub refs: Vec<PodClaimRef>,
    /// `status.extendedResourceClaimStatus.resourceClaimName`.
    pub extended_claim: Option<Arc<str>>,
}

/// Reads a pod's `spec.resourceClaims` and the statuses naming its template claims. An entry
/// with neither or both of `resourceClaimName` and `resourceClaimTemplateName` is an error.
pub fn pod_claims(pod: &Pod) -> Result<Option<PodClaims>> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(None);
    };
    let status = pod.status.as_ref();
    let extended_claim = status
        .and_then(|s| s.extended_resource_claim_status.as_ref())
        .map(|s| Arc::from(s.resource_claim_name.as_str()));
    let refs_in = spec.resource_claims.as_deref().unwrap_or_default();
    if refs_in.is_empty() && extended_claim.is_none() {
        return Ok(None);
    }
    let ctx = Ctx::new(ObjectKind::Pod, &pod.metadata);
    let statuses = status.and_then(|s| s.resource_claim_statuses.as_ref());
    let mut refs = Vec::with_capacity(refs_in.len());
    for (i, r) in refs_in.iter().enumerate() {
        let field = format!("spec.resourceClaims[{i}]");
        let source = match (&r.resource_claim_name, &r.resource_claim_template_name) {
            (Some(n), None) if !n.is_empty() => ClaimSource::Named(Arc::from(n.as_str())),
            (None, Some(t)) if !t.is_empty() => {
                let made = statuses
                    .and_then(|ss| ss.iter().find(|s| s.name == r.name))
                    .map(|s| s.resource_claim_name.as_deref().map(Arc::from));
                ClaimSource::Template(Arc::from(t.as_str()), made)
            }
            _ => return Err(ctx.err(
                field,
                Problem::Invalid(
                    "exactly one of resourceClaimName and resourceClaimTemplateName must be set"
                        .into(),
                ),
            )),
        };
        refs.push(PodClaimRef {
            name: Arc::from(r.name.as_str()),
            source,
        });
    }
    let meta = &pod.metadata;
    Ok(Some(PodClaims {
        namespace: Arc::from(meta.namespace.as_deref().unwrap_or("default")),
        name: Arc::from(meta.name.as_deref().unwrap_or_default()),
        uid: Arc::from(meta.uid.as_deref().unwrap_or_default()),
        refs,
        extended_claim,
    }))
}

/// Whether `name` is an extended resource as Kubernetes' `IsExtendedResourceName` says (a
/// domain-qualified name not containing `kubernetes.io/`, not a quota `requests.` name), or
/// the implicit name of a DeviceClass (`deviceclass.resource.kubernetes.io/<class>`), which
/// the bridge serves too.
fn is_extended(name: &str) -> bool {
    if name.starts_with(caldera_model::dra::IMPLICIT_EXTENDED_RESOURCE_PREFIX) {
        return true;
    }
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Every container's (init containers too) requests for extended resources, whole units
/// (limits stand in for missing requests, as Kubernetes defaults them).
pub fn extended_requests(spec: &PodSpec) -> Vec<ExtendedRequest> {
    let mut out = Vec::new();
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for c in containers {
        let Some(res) = c.resources.as_ref() else {
            continue;
        };
        let mut names: BTreeMap<&str, &k8s_openapi::apimachinery::pkg::api::resource::Quantity> =
            BTreeMap::new();
        for (n, q) in res.limits.iter().flatten() {
            names.insert(n, q);
        }
        for (n, q) in res.requests.iter().flatten() {
            names.insert(n, q);
        }
        for (n, q) in names {
            if !is_extended(n) {
                continue;
            }
            // A malformed quantity is reported by the pod's conversion; here it is skipped.
            if let Ok(count) = parse_quantity(&q.0, Scale::Units) {
                if count > 0 {
                    out.push(ExtendedRequest {
                        container: Arc::from(c.name.as_str()),
                        resource: Arc::from(n),
                        count,
                    });
                }
            }
        }
    }
    out
}

/// Fully qualifies an attribute or capacity name: `name` → `<driver>/name`.
fn qualify(driver: &str, name: &str) -> Arc<str> {
    if name.contains('/') {
        Arc::from(name)
    } else {
        Arc::from(format!("{driver}/{name}"))
    }
}

fn node_selector(ctx: &Ctx, field: &str, ns: &NodeSelector) -> Result<Vec<SelectorTerm>> {
    ns.node_selector_terms
        .iter()
        .enumerate()
        .map(|(i, t)| selector_term(ctx, &format!("{field}.nodeSelectorTerms[{i}]"), t))
        .collect()
}

/// `nodeName` / `nodeSelector` / `allNodes`: exactly one.
fn nodes_of(
    ctx: &Ctx,
    field: &str,
    node_name: Option<&String>,
    selector: Option<&NodeSelector>,
    all: Option<bool>,
) -> Result<Option<DeviceNodes>> {
    let node_name = node_name.filter(|n| !n.is_empty());
    let all = all == Some(true);
    match (node_name, selector, all) {
        (Some(n), None, false) => Ok(Some(DeviceNodes::Node(Arc::from(n.as_str())))),
        (None, Some(s), false) => Ok(Some(DeviceNodes::Selector(node_selector(
            ctx,
            &format!("{field}nodeSelector"),
            s,
        )?))),
        (None, None, true) => Ok(Some(DeviceNodes::All)),
        (None, None, false) => Ok(None),
        _ => Err(ctx.err(
            format!("{field}nodeName"),
            Problem::Invalid(
                "exactly one of nodeName, nodeSelector and allNodes may be set".into(),
            ),
        )),
    }
}

/// Converts a ResourceSlice.
pub fn slice(s: &api::ResourceSlice) -> Result<SliceInfo> {
    let ctx = Ctx::new(ObjectKind::ResourceSlice, &s.metadata);
    ctx.name(&s.metadata)?;
    let spec = &s.spec;
    if spec.driver.is_empty() {
        return Err(ctx.err("spec.driver", Problem::Missing));
    }
    if spec.pool.name.is_empty() {
        return Err(ctx.err("spec.pool.name", Problem::Missing));
    }
    let per_device = spec.per_device_node_selection == Some(true);
    let slice_nodes = nodes_of(
        &ctx,
        "spec.",
        spec.node_name.as_ref(),
        spec.node_selector.as_ref(),
        spec.all_nodes,
    )?;
    let nodes = match (slice_nodes, per_device) {
        (Some(n), false) => n,
        (None, true) => DeviceNodes::All,
        _ => {
            return Err(ctx.err(
                "spec.nodeName",
                Problem::Invalid(
                    "exactly one of nodeName, nodeSelector, allNodes and perDeviceNodeSelection must be set"
                        .into(),
                ),
            ))
        }
    };
    let driver: Arc<str> = Arc::from(spec.driver.as_str());
    let pool: Arc<str> = Arc::from(spec.pool.name.as_str());
    if spec.devices.as_ref().is_some_and(|d| !d.is_empty())
        && spec.shared_counters.as_ref().is_some_and(|c| !c.is_empty())
    {
        return Err(ctx.err(
            "spec.sharedCounters",
            Problem::Invalid("only one of sharedCounters and devices may be set".into()),
        ));
    }
    let mut counter_sets = Vec::new();
    for (i, set) in spec.shared_counters.iter().flatten().enumerate() {
        let field = format!("spec.sharedCounters[{i}]");
        if set.name.is_empty() {
            return Err(ctx.err(format!("{field}.name"), Problem::Missing));
        }
        counter_sets.push(CounterSet {
            driver: driver.clone(),
            pool: pool.clone(),
            name: Arc::from(set.name.as_str()),
            counters: counters(&ctx, &format!("{field}.counters"), &set.counters)?,
        });
    }
    let mut devices = Vec::new();
    for (i, d) in spec.devices.iter().flatten().enumerate() {
        let field = format!("spec.devices[{i}]");
        if d.name.is_empty() {
            return Err(ctx.err(format!("{field}.name"), Problem::Missing));
        }
        let mut unsupported: Option<String> = None;
        let mut attributes = BTreeMap::new();
        for (name, a) in d.attributes.iter().flatten() {
            let value = match (&a.int, &a.bool, &a.string, &a.version) {
                (Some(v), None, None, None) => AttributeValue::Int(*v),
                (None, Some(v), None, None) => AttributeValue::Bool(*v),
                (None, None, Some(v), None) => AttributeValue::String(Arc::from(v.as_str())),
                (None, None, None, Some(v)) => AttributeValue::Version(Arc::from(v.as_str())),
                _ => {
                    unsupported.get_or_insert_with(|| {
                        format!("attribute {name:?} is a list or has no single value (list attributes are not evaluated)")
                    });
                    continue;
                }
            };
            attributes.insert(qualify(&driver, name), value);
        }
        let shared = d.allow_multiple_allocations == Some(true);
        let mut capacity = BTreeMap::new();
        for (name, c) in d.capacity.iter().flatten() {
            let at = format!("{field}.capacity[{name}]");
            let value = quantity(&ctx, &format!("{at}.value"), &c.value)?;
            let policy = match &c.request_policy {
                None => None,
                Some(_) if !shared => {
                    return Err(ctx.err(
                        format!("{at}.requestPolicy"),
                        Problem::Invalid("allowMultipleAllocations must be true".into()),
                    ))
                }
                Some(p) => Some(Arc::new(request_policy(
                    &ctx,
                    &format!("{at}.requestPolicy"),
                    p,
                )?)),
            };
            capacity.insert(
                qualify(&driver, name),
                Capacity {
                    milli: value.milli,
                    text: value.text,
                    name: Arc::from(name.as_str()),
                    policy,
                },
            );
        }
        let mut consumes = Vec::new();
        for (j, c) in d.consumes_counters.iter().flatten().enumerate() {
            let at = format!("{field}.consumesCounters[{j}]");
            if c.counter_set.is_empty() {
                return Err(ctx.err(format!("{at}.counterSet"), Problem::Missing));
            }
            consumes.push(CounterConsumption {
                counter_set: Arc::from(c.counter_set.as_str()),
                counters: counters(&ctx, &format!("{at}.counters"), &c.counters)?,
            });
        }
        let own = nodes_of(
            &ctx,
            &format!("{field}."),
            d.node_name.as_ref(),
            d.node_selector.as_ref(),
            d.all_nodes,
        )?;
        let device_nodes = match (per_device, own) {
            (true, Some(n)) => n,
            (true, None) => {
                return Err(ctx.err(
                    format!("{field}.nodeName"),
                    Problem::Invalid(
                        "with perDeviceNodeSelection each device sets nodeName, nodeSelector or allNodes"
                            .into(),
                    ),
                ))
            }
            (false, Some(_)) => {
                return Err(ctx.err(
                    format!("{field}.nodeName"),
                    Problem::Invalid("set only with spec.perDeviceNodeSelection".into()),
                ))
            }
            (false, None) => nodes.clone(),
        };
        let refused = [
            (
                d.taints.iter().flatten().any(|t| t.effect != "None"),
                "taints (device taints are not evaluated: a tainted device is never allocated)",
            ),
            (d.binds_to_node == Some(true), "bindsToNode"),
            (
                d.binding_conditions.as_ref().is_some_and(|b| !b.is_empty()),
                "bindingConditions",
            ),
            (
                d.node_allocatable_resource_mappings
                    .as_ref()
                    .is_some_and(|m| !m.is_empty()),
                "nodeAllocatableResourceMappings",
            ),
        ];
        for (set, what) in refused {
            if set {
                unsupported.get_or_insert_with(|| format!("{what} is not supported"));
            }
        }
        devices.push(Device {
            driver: driver.clone(),
            pool: pool.clone(),
            name: Arc::from(d.name.as_str()),
            attributes,
            capacity,
            nodes: device_nodes,
            shared,
            consumes,
            unsupported: unsupported.map(Arc::from),
        });
    }
    Ok(SliceInfo {
        driver,
        pool,
        generation: spec.pool.generation,
        slice_count: spec.pool.resource_slice_count,
        nodes,
        devices,
        counter_sets,
    })
}

type ApiQuantity = k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// A quantity at `field`, exactly and as written.
fn quantity(ctx: &Ctx, field: &str, q: &ApiQuantity) -> Result<Quantity> {
    let milli = parse_quantity(&q.0, Scale::Milli).map_err(|e| ctx.err(field, e))?;
    Ok(Quantity {
        milli,
        text: Arc::from(q.0.as_str()),
    })
}

/// A counter set's counters or a device's consumption of them.
fn counters(
    ctx: &Ctx,
    field: &str,
    counters: &BTreeMap<String, api::Counter>,
) -> Result<BTreeMap<Arc<str>, Quantity>> {
    counters
        .iter()
        .map(|(name, c)| {
            Ok((
                Arc::from(name.as_str()),
                quantity(ctx, &format!("{field}[{name}].value"), &c.value)?,
            ))
        })
        .collect()
}

/// `requestPolicy` of a shared device's capacity. What kube-apiserver's validation guarantees
/// and the allocator relies on (a default with valid values or a range, at most one of them, a
/// step above zero) is checked; a policy breaking it is the slice's error.
fn request_policy(ctx: &Ctx, field: &str, p: &api::CapacityRequestPolicy) -> Result<RequestPolicy> {
    let default = p
        .default
        .as_ref()
        .map(|q| quantity(ctx, &format!("{field}.default"), q))
        .transpose()?;
    let valid_values = p
        .valid_values
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, q)| quantity(ctx, &format!("{field}.validValues[{i}]"), q))
        .collect::<Result<Vec<_>>>()?;
    let valid_range = match &p.valid_range {
        None => None,
        Some(r) => {
            let at = format!("{field}.validRange");
            let step = r
                .step
                .as_ref()
                .map(|q| quantity(ctx, &format!("{at}.step"), q))
                .transpose()?;
            if step.as_ref().is_some_and(|s| s.milli <= 0) {
                return Err(ctx.err(
                    format!("{at}.step"),
                    Problem::Invalid("must be greater than zero".into()),
                ));
            }
            Some(CapacityRange {
                min: quantity(ctx, &format!("{at}.min"), &r.min)?,
                max: r
                    .max
                    .as_ref()
                    .map(|q| quantity(ctx, &format!("{at}.max"), q))
                    .transpose()?,
                step,
            })
        }
    };
    if !valid_values.is_empty() && valid_range.is_some() {
        return Err(ctx.err(
            field,
            Problem::Invalid(
                "exactly one policy can be specified, cannot specify validValues and validRange at the same time"
                    .into(),
            ),
        ));
    }
    if default.is_none() && (!valid_values.is_empty() || valid_range.is_some()) {
        return Err(ctx.err(format!("{field}.default"), Problem::Missing));
    }
    Ok(RequestPolicy {
        default,
        valid_values,
        valid_range,
    })
}

fn selectors(
    ctx: &Ctx,
    field: &str,
    s: Option<&Vec<api::DeviceSelector>>,
) -> Result<Vec<Arc<str>>> {
    s.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, sel)| {
            sel.cel
                .as_ref()
                .map(|c| Arc::from(c.expression.as_str()))
                .ok_or_else(|| {
                    ctx.err(
                        format!("{field}.selectors[{i}].cel"),
                        Problem::Invalid(
                            "CEL expression empty (unsupported selector type?)".into(),
                        ),
                    )
                })
        })
        .collect()
}

fn opaque(
    ctx: &Ctx,
    field: &str,
    o: Option<&api::OpaqueDeviceConfiguration>,
    requests: Option<&Vec<String>>,
) -> Result<DeviceConfig> {
    let o = o.ok_or_else(|| ctx.err(format!("{field}.opaque"), Problem::Missing))?;
    let parameters = serde_json::to_string(&o.parameters.0).map_err(|e| {
        ctx.err(
            format!("{field}.opaque.parameters"),
            Problem::Invalid(e.to_string()),
        )
    })?;
    Ok(DeviceConfig {
        requests: requests
            .into_iter()
            .flatten()
            .map(|r| Arc::from(r.as_str()))
            .collect(),
        driver: Arc::from(o.driver.as_str()),
        parameters: Arc::from(parameters),
    })
}

/// Converts a DeviceClass.
pub fn device_class(c: &api::DeviceClass) -> Result<DeviceClass> {
    let ctx = Ctx::new(ObjectKind::DeviceClass, &c.metadata);
    let name = ctx.name(&c.metadata)?;
    let spec = &c.spec;
    let config = spec
        .config
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, cfg)| {
            opaque(
                &ctx,
                &format!("spec.config[{i}]"),
                cfg.opaque.as_ref(),
                None,
            )
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(DeviceClass {
        name: Arc::from(name),
        selectors: selectors(&ctx, "spec", spec.selectors.as_ref())?,
        config,
        extended_resource_name: spec
            .extended_resource_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .map(Arc::from),
        created: c
            .metadata
            .creation_timestamp
            .as_ref()
            .map(crate::fields::time)
            .unwrap_or_default(),
    })
}

/// `allocationMode` and `count`, the spec's common part of `exactly` and subrequests.
#[allow(clippy::too_many_arguments)]
fn exact(
    ctx: &Ctx,
    field: &str,
    class: &str,
    mode: Option<&String>,
    count: Option<i64>,
    sels: Option<&Vec<api::DeviceSelector>>,
    admin: Option<bool>,
    unsupported: &mut Option<String>,
    tolerations: bool,
    capacity: Option<&api::CapacityRequirements>,
) -> Result<ExactRequest> {
    let mode = match mode.map(String::as_str) {
        None | Some("") | Some("ExactCount") => {
            let n = count.unwrap_or(1);
            let n = u32::try_from(n).map_err(|_| {
                ctx.err(
                    format!("{field}.count"),
                    Problem::Invalid(format!("{n} is out of range")),
                )
            })?;
            AllocationMode::ExactCount(n)
        }
        Some("All") => AllocationMode::All,
        Some(other) => {
            return Err(ctx.err(
                format!("{field}.allocationMode"),
                Problem::UnknownValue {
                    value: other.to_string(),
                    expected: "ExactCount, All",
                },
            ))
        }
    };
    if tolerations {
        unsupported.get_or_insert_with(|| {
            format!("{field}.tolerations: device tolerations are not supported")
        });
    }
    let capacity = capacity
        .and_then(|c| c.requests.as_ref())
        .into_iter()
        .flatten()
        .map(|(name, q)| {
            let q = quantity(ctx, &format!("{field}.capacity.requests[{name}]"), q)?;
            if q.milli < 0 {
                return Err(ctx.err(
                    format!("{field}.capacity.requests[{name}]"),
                    Problem::Invalid("must not be negative".into()),
                ));
            }
            Ok((Arc::from(name.as_str()), q))
        })
        .collect::<Result<BTreeMap<_, _>>>()?;
    Ok(ExactRequest {
        class: Arc::from(class),
        selectors: selectors(ctx, field, sels)?,
        mode,
        admin_access: admin == Some(true),
        capacity,
    })
}

/// Converts a ResourceClaim.
pub fn claim(c: &api::ResourceClaim) -> Result<Claim> {
    let ctx = Ctx::new(ObjectKind::ResourceClaim, &c.metadata);
    let meta = &c.metadata;
    let name = ctx.name(meta)?;
    let devices = &c.spec.devices;
    let mut unsupported: Option<String> = None;
    let mut requests = Vec::new();
    for (i, r) in devices
        .as_ref()
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.devices.requests[{i}]");
        let kind = match (&r.exactly, &r.first_available) {
            (Some(e), None) => RequestKind::Exactly(exact(
                &ctx,
                &format!("{field}.exactly"),
                &e.device_class_name,
                e.allocation_mode.as_ref(),
                e.count,
                e.selectors.as_ref(),
                e.admin_access,
                &mut unsupported,
                e.tolerations.as_ref().is_some_and(|t| !t.is_empty()),
                e.capacity.as_ref(),
            )?),
            (None, Some(subs)) if !subs.is_empty() => {
                let mut out = Vec::with_capacity(subs.len());
                for (j, s) in subs.iter().enumerate() {
                    out.push(SubRequest {
                        name: Arc::from(s.name.as_str()),
                        spec: exact(
                            &ctx,
                            &format!("{field}.firstAvailable[{j}]"),
                            &s.device_class_name,
                            s.allocation_mode.as_ref(),
                            s.count,
                            s.selectors.as_ref(),
                            None,
                            &mut unsupported,
                            s.tolerations.as_ref().is_some_and(|t| !t.is_empty()),
                            s.capacity.as_ref(),
                        )?,
                    });
                }
                RequestKind::FirstAvailable(out)
            }
            _ => {
                return Err(ctx.err(
                    field,
                    Problem::Invalid(
                        "exactly one of exactly and firstAvailable must be set".into(),
                    ),
                ))
            }
        };
        requests.push(DeviceRequest {
            name: Arc::from(r.name.as_str()),
            kind,
        });
    }
    let mut constraints = Vec::new();
    for (i, k) in devices
        .as_ref()
        .and_then(|d| d.constraints.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (attribute, kind, which) = match (&k.match_attribute, &k.distinct_attribute) {
            (Some(a), None) => (a, ConstraintKind::Match, "matchAttribute"),
            (None, Some(a)) => (a, ConstraintKind::Distinct, "distinctAttribute"),
            (None, None) => {
                return Err(ctx.err(
                    format!("spec.devices.constraints[{i}]"),
                    Problem::Invalid("empty constraint (unsupported constraint type?)".into()),
                ))
            }
            (Some(_), Some(_)) => {
                return Err(ctx.err(
                    format!("spec.devices.constraints[{i}]"),
                    Problem::Invalid(
                        "exactly one of matchAttribute and distinctAttribute may be set".into(),
                    ),
                ))
            }
        };
        let attribute = if attribute.contains('/') {
            Arc::from(attribute.as_str())
        } else {
            return Err(ctx.err(
                format!("spec.devices.constraints[{i}].{which}"),
                Problem::Invalid("must be a fully qualified name (<domain>/<name>)".into()),
            ));
        };
        constraints.push(DeviceConstraint {
            kind,
            requests: k
                .requests
                .iter()
                .flatten()
                .map(|r| Arc::from(r.as_str()))
                .collect(),
            attribute,
        });
    }
    let config = devices
        .as_ref()
        .and_then(|d| d.config.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, cfg)| {
            opaque(
                &ctx,
                &format!("spec.devices.config[{i}]"),
                cfg.opaque.as_ref(),
                cfg.requests.as_ref(),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    let status = c.status.as_ref();
    let allocation = match status.and_then(|s| s.allocation.as_ref()) {
        None => None,
        Some(a) => Some(allocation(&ctx, a)?),
    };
    let reserved_for = status
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .map(|r| Consumer {
            resource: Arc::from(r.resource.as_str()),
            name: Arc::from(r.name.as_str()),
            uid: Arc::from(r.uid.as_str()),
        })
        .collect();
    let owner = meta
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
        .map(|o| (Arc::from(o.kind.as_str()), Arc::from(o.uid.as_str())));
    Ok(Claim {
        namespace: Arc::from(meta.namespace.as_deref().unwrap_or("default")),
        name: Arc::from(name),
        uid: Arc::from(meta.uid.as_deref().unwrap_or_default()),
        requests,
        constraints,
        config,
        allocation,
        reserved_for,
        deleting: meta.deletion_timestamp.is_some(),
        owner,
        unsupported: unsupported.map(Arc::from),
    })
}

fn allocation(ctx: &Ctx, a: &api::AllocationResult) -> Result<Allocation> {
    let devices = a.devices.as_ref();
    let results = devices
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let field = format!("status.allocation.devices.results[{i}].consumedCapacity");
            Ok(DeviceResult {
                request: Arc::from(r.request.as_str()),
                driver: Arc::from(r.driver.as_str()),
                pool: Arc::from(r.pool.as_str()),
                device: Arc::from(r.device.as_str()),
                admin_access: r.admin_access == Some(true),
                share_id: r.share_id.as_deref().map(Arc::from),
                consumed: r
                    .consumed_capacity
                    .iter()
                    .flatten()
                    .map(|(name, q)| {
                        Ok((
                            Arc::from(name.as_str()),
                            quantity(ctx, &format!("{field}[{name}]"), q)?,
                        ))
                    })
                    .collect::<Result<_>>()?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let config = devices
        .and_then(|d| d.config.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, cfg)| {
            let field = format!("status.allocation.devices.config[{i}]");
            let source = match cfg.source.as_str() {
                "FromClass" => ConfigSource::Class,
                "FromClaim" => ConfigSource::Claim,
                other => {
                    return Err(ctx.err(
                        format!("{field}.source"),
                        Problem::UnknownValue {
                            value: other.to_string(),
                            expected: "FromClass, FromClaim",
                        },
                    ))
                }
            };
            Ok(AllocatedConfig {
                source,
                config: opaque(ctx, &field, cfg.opaque.as_ref(), cfg.requests.as_ref())?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let node_selector = a
        .node_selector
        .as_ref()
        .map(|ns| node_selector(ctx, "status.allocation.nodeSelector", ns))
        .transpose()?;
    Ok(Allocation {
        devices: results,
        config,
        node_selector,
    })
}

/// A ResourceClaimTemplate's (namespace, name); its spec is the resource-claim controller's
/// business (it makes the claims), so only its existence matters here.
pub fn template(t: &api::ResourceClaimTemplate) -> Result<(Arc<str>, Arc<str>)> {
    let ctx = Ctx::new(ObjectKind::ResourceClaimTemplate, &t.metadata);
    let name = ctx.name(&t.metadata)?;
    Ok((
        Arc::from(t.metadata.namespace.as_deref().unwrap_or("default")),
        Arc::from(name),
    ))
}

#[cfg(test)]
mod tests;
