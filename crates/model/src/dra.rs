//! Dynamic Resource Allocation (`resource.k8s.io/v1`): the devices drivers publish in
//! ResourceSlices, DeviceClasses, ResourceClaims, the claims a pod uses, and the writes that
//! allocate them.
//!
//! The cache converts the API objects into these values (`caldera_cache::dra`); the structured
//! allocator (`caldera_dra`, driven by the session's `devices` module) decides allocations with
//! the semantics of `k8s.io/dynamic-resource-allocation/structured`; the binder writes
//! [`ClaimWrite`]s before the binds that need them, as kube-scheduler's `DynamicResources`
//! PreBind does.
//!
//! Attribute and capacity names are always fully qualified here (`<domain>/<name>`): a slice's
//! unqualified `productName` of driver `gpu.nvidia.com` is `gpu.nvidia.com/productName`, as
//! CEL's `device.attributes["gpu.nvidia.com"].productName` and `matchAttribute` see it.

use crate::selector::SelectorTerm;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The finalizer kube-scheduler adds to a claim before it writes an allocation.
pub const DELETE_PROTECTION_FINALIZER: &str = "resource.kubernetes.io/delete-protection";
/// The annotation on the claim kube-scheduler creates for a pod's extended resources (KEP-5004).
pub const EXTENDED_RESOURCE_CLAIM_ANNOTATION: &str =
    "resource.kubernetes.io/extended-resource-claim";
/// The annotation the resource-claim controller puts on a claim made from a template: the pod's
/// `spec.resourceClaims[].name` it is for.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";
/// The implicit extended resource name of every DeviceClass: `<prefix><class name>`.
pub const IMPLICIT_EXTENDED_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";
/// The most entries `status.reservedFor` may hold (kube-apiserver's validation).
pub const RESERVED_FOR_MAX: usize = 256;
/// The most devices one request with `allocationMode: All` may get (`AllocationResultsMaxSize`).
pub const ALLOCATION_RESULTS_MAX: usize = 32;

/// A device attribute value (`resource.k8s.io/v1` `DeviceAttribute`: exactly one of these).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AttributeValue {
    /// `int`.
    Int(i64),
    /// `bool`.
    Bool(bool),
    /// `string`.
    String(Arc<str>),
    /// `version` (semantic version 2.0.0 text).
    Version(Arc<str>),
}

impl std::fmt::Display for AttributeValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Int(i) => write!(f, "{i}"),
            Self::Bool(b) => write!(f, "{b}"),
            Self::String(s) | Self::Version(s) => write!(f, "{s}"),
        }
    }
}

/// A device capacity (`DeviceCapacity.value`), kept both exactly (thousandths, for comparison)
/// and as written (for messages).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Capacity {
    /// The value in thousandths of its unit (`80Gi` → 80 × 2³⁰ × 1000).
    pub milli: i64,
    /// The quantity as the slice wrote it.
    pub text: Arc<str>,
}

/// Which nodes can reach a device (a ResourceSlice's `spec.nodeName` / `nodeSelector` /
/// `allNodes`, or the device's own with `perDeviceNodeSelection`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeviceNodes {
    /// Local to one node.
    Node(Arc<str>),
    /// Nodes matching any of the terms (validation allows one term).
    Selector(Vec<SelectorTerm>),
    /// Every node.
    All,
}

impl DeviceNodes {
    /// Whether the node with `name` and `labels` reaches the device.
    pub fn reaches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Self::Node(n) => **n == *name,
            Self::Selector(terms) => terms.iter().any(|t| t.matches(name, labels)),
            Self::All => true,
        }
    }
}

/// One device of a pool, from the newest complete generation of its pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// `spec.driver` of its slice.
    pub driver: Arc<str>,
    /// `spec.pool.name` of its slice.
    pub pool: Arc<str>,
    /// `spec.devices[].name`.
    pub name: Arc<str>,
    /// Attributes by fully qualified name.
    pub attributes: BTreeMap<Arc<str>, AttributeValue>,
    /// Capacity by fully qualified name.
    pub capacity: BTreeMap<Arc<str>, Capacity>,
    /// Which nodes reach it.
    pub nodes: DeviceNodes,
    /// `allowMultipleAllocations` and other inputs Caldera does not evaluate yet make a device
    /// unusable rather than used wrongly: what, for messages (`None`: usable).
    pub unsupported: Option<Arc<str>>,
}

impl Device {
    /// `driver/pool/name`, how upstream names a device in messages.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.driver, self.pool, self.name)
    }

    /// Whether it is the device `r` names.
    pub fn is(&self, r: &DeviceResult) -> bool {
        self.driver == r.driver && self.pool == r.pool && self.name == r.device
    }
}

/// Opaque driver configuration (`DeviceClass.spec.config[]` or `ResourceClaim.spec.devices.
/// config[]`), copied into the allocation as kube-scheduler copies it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceConfig {
    /// The requests it applies to (empty: all; only for claim config).
    pub requests: Vec<Arc<str>>,
    /// `opaque.driver`.
    pub driver: Arc<str>,
    /// `opaque.parameters`, JSON text.
    pub parameters: Arc<str>,
}

/// A `DeviceClass`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceClass {
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `spec.selectors[].cel.expression`: a device must satisfy all.
    pub selectors: Vec<Arc<str>>,
    /// `spec.config`.
    pub config: Vec<DeviceConfig>,
    /// `spec.extendedResourceName` (KEP-5004): pods requesting it may be served by devices of
    /// this class on nodes whose allocatable lacks it.
    pub extended_resource_name: Option<Arc<str>>,
    /// `metadata.creationTimestamp`.
    pub created: crate::Time,
}

/// `allocationMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AllocationMode {
    /// `ExactCount` with `count` (default 1).
    ExactCount(u32),
    /// `All`: every matching device reachable from the node, at least one.
    All,
}

/// What one request (or subrequest) of a claim asks for: `exactly`, or one entry of
/// `firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExactRequest {
    /// `deviceClassName`.
    pub class: Arc<str>,
    /// `selectors[].cel.expression`: a device must satisfy all (and its class's).
    pub selectors: Vec<Arc<str>>,
    /// `allocationMode` and `count`.
    pub mode: AllocationMode,
    /// `adminAccess`: the device may be in use by other claims, and is not taken from them.
    pub admin_access: bool,
}

/// A subrequest of `firstAvailable`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubRequest {
    /// `name` (the result names it as `<request>/<subrequest>`).
    pub name: Arc<str>,
    /// What it asks for.
    pub spec: ExactRequest,
}

/// The two shapes of a `DeviceRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RequestKind {
    /// `exactly`.
    Exactly(ExactRequest),
    /// `firstAvailable`: the first subrequest that can be satisfied wins.
    FirstAvailable(Vec<SubRequest>),
}

/// `spec.devices.requests[]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceRequest {
    /// `name`.
    pub name: Arc<str>,
    /// What it asks for.
    pub kind: RequestKind,
}

/// `spec.devices.constraints[]` with `matchAttribute`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MatchAttribute {
    /// `requests` (a request name, or `<request>/<subrequest>`; empty: every request).
    pub requests: Vec<Arc<str>>,
    /// `matchAttribute`, fully qualified.
    pub attribute: Arc<str>,
}

/// One allocated device (`status.allocation.devices.results[]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceResult {
    /// `request`: the request's name, or `<request>/<subrequest>` for `firstAvailable`.
    pub request: Arc<str>,
    /// `driver`.
    pub driver: Arc<str>,
    /// `pool`.
    pub pool: Arc<str>,
    /// `device`.
    pub device: Arc<str>,
    /// `adminAccess`.
    pub admin_access: bool,
}

/// Where a configuration in an allocation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConfigSource {
    /// `FromClass`.
    Class,
    /// `FromClaim`.
    Claim,
}

/// `status.allocation.devices.config[]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AllocatedConfig {
    /// `source`.
    pub source: ConfigSource,
    /// The configuration (its `requests` name the requests it applies to; empty: all).
    pub config: DeviceConfig,
}

/// A claim's `status.allocation`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Allocation {
    /// `devices.results`.
    pub devices: Vec<DeviceResult>,
    /// `devices.config`.
    pub config: Vec<AllocatedConfig>,
    /// `nodeSelector`: where pods using the claim may run (`None`: anywhere). Validation
    /// allows one term.
    pub node_selector: Option<Vec<SelectorTerm>>,
}

impl Allocation {
    /// Whether pods using the claim may run on the node with `name` and `labels`.
    pub fn admits(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.node_selector
            .as_ref()
            .is_none_or(|terms| terms.iter().any(|t| t.matches(name, labels)))
    }

    /// The node the allocation is limited to, when its selector is exactly one
    /// `metadata.name In [node]` field requirement (what kube-scheduler writes for devices
    /// local to a node).
    pub fn node(&self) -> Option<Arc<str>> {
        let terms = self.node_selector.as_ref()?;
        let [term] = terms.as_slice() else {
            return None;
        };
        let [field] = term.fields.as_slice() else {
            return None;
        };
        (term.expressions.is_empty()
            && field.key == "metadata.name"
            && field.op == crate::selector::SelectorOp::In
            && field.values.len() == 1)
            .then(|| Arc::from(field.values[0].as_str()))
    }
}

/// A `status.reservedFor[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Consumer {
    /// `resource` (`pods` for a pod; other kinds count as users too).
    pub resource: Arc<str>,
    /// `name`.
    pub name: Arc<str>,
    /// `uid`.
    pub uid: Arc<str>,
}

/// A `ResourceClaim`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// `metadata.namespace`.
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `metadata.uid`.
    pub uid: Arc<str>,
    /// `spec.devices.requests`.
    pub requests: Vec<DeviceRequest>,
    /// `spec.devices.constraints` (`matchAttribute` ones).
    pub constraints: Vec<MatchAttribute>,
    /// `spec.devices.config`.
    pub config: Vec<DeviceConfig>,
    /// `status.allocation`.
    pub allocation: Option<Allocation>,
    /// `status.reservedFor`.
    pub reserved_for: Vec<Consumer>,
    /// `metadata.deletionTimestamp` is set: never allocated or reserved again.
    pub deleting: bool,
    /// `metadata.ownerReferences[]` with `controller: true`: (kind, uid).
    pub owner: Option<(Arc<str>, Arc<str>)>,
    /// A spec input Caldera does not evaluate (device tolerations, capacity requests, ...):
    /// the claim cannot be allocated, and this says why.
    pub unsupported: Option<Arc<str>>,
}

impl Claim {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Whether the pod with `uid` is in `status.reservedFor`.
    pub fn reserved_for_pod(&self, uid: &str) -> bool {
        self.reserved_for
            .iter()
            .any(|c| &*c.resource == "pods" && &*c.uid == uid)
    }
}

/// Every DRA object a session needs, converted. Sorted: devices by (driver, pool, name),
/// classes by name, claims by (namespace, name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceInventory {
    /// Devices of the newest complete generation of every pool.
    pub devices: Vec<Device>,
    /// DeviceClasses.
    pub classes: Vec<DeviceClass>,
    /// ResourceClaims (every claim: allocated ones hold their devices).
    pub claims: Vec<Claim>,
    /// Pools whose devices are not used: their newest generation is incomplete (fewer than
    /// `resourceSliceCount` slices present) or invalid (slices that contradict each other).
    pub unusable_pools: Vec<UnusablePool>,
}

/// A pool whose devices are left out (see [`DeviceInventory::unusable_pools`]). A request for
/// `All` devices on a node the pool reaches cannot be allocated while it is so, as upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnusablePool {
    /// `spec.driver`.
    pub driver: Arc<str>,
    /// `spec.pool.name`.
    pub pool: Arc<str>,
    /// Where its slices (of the newest generation) are reachable.
    pub nodes: Vec<DeviceNodes>,
    /// `true`: invalid (e.g. a device listed twice); `false`: being updated (incomplete).
    pub invalid: bool,
}

impl UnusablePool {
    /// `driver/pool`.
    pub fn id(&self) -> String {
        format!("{}/{}", self.driver, self.pool)
    }
}

impl DeviceInventory {
    /// Nothing at all: no DRA on this cluster.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty() && self.classes.is_empty() && self.claims.is_empty()
    }

    /// The class named `name`.
    pub fn class(&self, name: &str) -> Option<&DeviceClass> {
        self.classes
            .binary_search_by(|c| (*c.name).cmp(name))
            .ok()
            .map(|i| &self.classes[i])
    }

    /// Index of the claim `namespace/name`.
    pub fn claim_index(&self, namespace: &str, name: &str) -> Option<usize> {
        self.claims
            .binary_search_by(|c| (&*c.namespace, &*c.name).cmp(&(namespace, name)))
            .ok()
    }

    /// Index of the device `driver/pool/name`.
    pub fn device_index(&self, driver: &str, pool: &str, name: &str) -> Option<usize> {
        self.devices
            .binary_search_by(|d| (&*d.driver, &*d.pool, &*d.name).cmp(&(driver, pool, name)))
            .ok()
    }

    /// The class whose `extendedResourceName` is `resource` (of several, the one created last,
    /// ties by name, as KEP-5004 settles it), else the class the implicit name
    /// `deviceclass.resource.kubernetes.io/<class>` names.
    pub fn class_for_extended(&self, resource: &str) -> Option<&DeviceClass> {
        let explicit = self
            .classes
            .iter()
            .filter(|c| c.extended_resource_name.as_deref() == Some(resource))
            .max_by(|a, b| (a.created, &b.name).cmp(&(b.created, &a.name)));
        if explicit.is_some() {
            return explicit;
        }
        resource
            .strip_prefix(IMPLICIT_EXTENDED_RESOURCE_PREFIX)
            .and_then(|name| self.class(name))
    }
}

/// One `pod.spec.resourceClaims[]` entry of a task, resolved to a claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodClaim {
    /// `spec.resourceClaims[].name`.
    pub pod_claim: Arc<str>,
    /// The ResourceClaim's name in the pod's namespace: `resourceClaimName`, or for a template
    /// the name in `status.resourceClaimStatuses`.
    pub claim: Arc<str>,
    /// Made from `resourceClaimTemplateName` (owned by the pod, deleted with it).
    pub from_template: bool,
}

/// A container's request for an extended resource that a DeviceClass may serve (the bridge,
/// KEP-5004). Kept only for resources no node's allocatable need name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtendedRequest {
    /// Container name (init containers included).
    pub container: Arc<str>,
    /// Resource name (`nvidia.com/gpu`).
    pub resource: Arc<str>,
    /// Whole units requested.
    pub count: i64,
}

/// A task's DRA inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct TaskClaims {
    /// Its claims, in `spec.resourceClaims` order.
    pub claims: Vec<PodClaim>,
    /// It cannot be placed yet, and why (a template's claim not created yet, a named claim
    /// missing, a claim not made for this pod): kube-scheduler's PreFilter message.
    pub waiting: Option<Arc<str>>,
    /// Extended-resource requests by container, for the bridge.
    pub extended: Vec<ExtendedRequest>,
    /// `status.extendedResourceClaimStatus.resourceClaimName`: the bridge's claim already
    /// made for it.
    pub extended_claim: Option<Arc<str>>,
}

impl TaskClaims {
    /// No claim and no extended request.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty() && self.waiting.is_none() && self.extended.is_empty()
    }
}

/// A claim allocation (and reservation) to write before a bind: the finalizer
/// [`DELETE_PROTECTION_FINALIZER`], then `status.allocation` (when `allocate`) and the
/// consumers added to `status.reservedFor`, through the status subresource, with the claim's
/// resourceVersion as precondition.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimWrite {
    /// Claim namespace.
    pub namespace: Arc<str>,
    /// Claim name.
    pub name: Arc<str>,
    /// Claim uid (precondition).
    pub uid: Arc<str>,
    /// `false`: the claim is already allocated; only `reserved_for` is added.
    pub allocate: bool,
    /// The allocated devices (the existing allocation's when `allocate` is false).
    pub devices: Vec<DeviceResult>,
    /// `status.allocation.devices.config`.
    pub config: Vec<AllocatedConfig>,
    /// The node the allocation is limited to (`None`: not node-local).
    pub node: Option<Arc<str>>,
    /// The allocation's full `nodeSelector` (for `node`: `metadata.name In [node]`; `None`:
    /// every node).
    pub node_selector: Option<Vec<SelectorTerm>>,
    /// Pods to add to `status.reservedFor`.
    pub reserved_for: Vec<Consumer>,
}

impl ClaimWrite {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Container → request mapping of the bridge's claim
/// (`pod.status.extendedResourceClaimStatus.requestMappings[]`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestMapping {
    /// `containerName`.
    pub container: Arc<str>,
    /// `resourceName`.
    pub resource: Arc<str>,
    /// `requestName` in the claim.
    pub request: Arc<str>,
}

/// The claim kube-scheduler makes for a pod whose extended resources devices serve (KEP-5004):
/// created (annotation [`EXTENDED_RESOURCE_CLAIM_ANNOTATION`], owned by the pod, generated
/// name `<pod>-extended-resources-`) with its allocation and the pod in `reservedFor`, then
/// `pod.status.extendedResourceClaimStatus` set, before the bind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExtendedResourceClaim {
    /// Pod namespace.
    pub namespace: Arc<str>,
    /// Pod name.
    pub pod: Arc<str>,
    /// Pod uid (owner reference).
    pub pod_uid: Arc<str>,
    /// The claim's requests: (name, class, count), one per container and resource.
    pub requests: Vec<(Arc<str>, Arc<str>, u32)>,
    /// Allocated devices.
    pub devices: Vec<DeviceResult>,
    /// `status.allocation.devices.config`.
    pub config: Vec<AllocatedConfig>,
    /// The node the allocation is limited to.
    pub node: Option<Arc<str>>,
    /// The allocation's `nodeSelector`.
    pub node_selector: Option<Vec<SelectorTerm>>,
    /// Container → request mapping for the pod's status.
    pub mappings: Vec<RequestMapping>,
}

/// Re-checks a plan's binds and claim writes against the snapshot it was made from, for the DRA
/// rules, independently of the session and the allocator: no device is allocated to two claims
/// (admin access aside), a written allocation names only published devices reachable from its
/// node, is written once and only for a claim not allocated yet; and every pod bound has each
/// of its claims allocated where it lands (already, or by a write of this plan) and reserved for
/// it, and no pod waiting for a claim is bound. Returns what is broken (empty: nothing).
pub fn check_plan(snapshot: &crate::Snapshot, plan: &crate::Plan) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    let inv = &snapshot.dra;
    let mut out = Vec::new();
    type Id = (Arc<str>, Arc<str>, Arc<str>);
    let mut holder: BTreeMap<Id, String> = BTreeMap::new();
    let mut hold = |r: &DeviceResult, claim: String, out: &mut Vec<String>| {
        if r.admin_access {
            return;
        }
        let id = (r.driver.clone(), r.pool.clone(), r.device.clone());
        if let Some(other) = holder.get(&id) {
            if *other != claim {
                out.push(format!(
                    "device {}/{}/{} allocated to {other} and {claim}",
                    r.driver, r.pool, r.device
                ));
            }
        } else {
            holder.insert(id, claim);
        }
    };
    for c in &inv.claims {
        for r in c.allocation.iter().flat_map(|a| &a.devices) {
            // Two claims already holding one device is the cluster's state, not this plan's
            // doing: recorded, not reported.
            let mut ignore = Vec::new();
            hold(r, c.key(), &mut ignore);
        }
    }
    let node_of = |name: &str| snapshot.node_index(name).map(|i| &snapshot.nodes[i]);
    let mut written: HashMap<String, &ClaimWrite> = HashMap::new();
    for w in &plan.claim_writes {
        let key = w.key();
        let existing = inv
            .claim_index(&w.namespace, &w.name)
            .map(|i| &inv.claims[i]);
        let Some(claim) = existing else {
            out.push(format!("write for claim {key}, which does not exist"));
            continue;
        };
        if written.insert(key.clone(), w).is_some() && w.allocate {
            out.push(format!("claim {key} allocated twice in one plan"));
        }
        if !w.allocate {
            continue;
        }
        if claim.allocation.is_some() {
            out.push(format!("claim {key} allocated again"));
        }
        for r in &w.devices {
            match inv.device_index(&r.driver, &r.pool, &r.device) {
                None => out.push(format!(
                    "claim {key} got device {}/{}/{}, which is not published",
                    r.driver, r.pool, r.device
                )),
                Some(i) => {
                    if let Some(n) = w.node.as_deref() {
                        let reaches = node_of(n).is_some_and(|node| {
                            inv.devices[i].nodes.reaches(&node.name, &node.labels)
                        });
                        if !reaches {
                            out.push(format!(
                                "claim {key} got device {}, which node {n} does not reach",
                                inv.devices[i].id()
                            ));
                        }
                    }
                }
            }
            hold(r, key.clone(), &mut out);
        }
    }
    let task_of: HashMap<(&str, &str), &crate::Task> = snapshot
        .tasks
        .iter()
        .map(|t| ((&*t.namespace, &*t.name), t))
        .collect();
    let mut reserved: BTreeSet<(String, &str)> = BTreeSet::new();
    for w in &plan.claim_writes {
        for c in &w.reserved_for {
            reserved.insert((w.key(), &c.uid));
        }
    }
    for b in &plan.binds {
        let Some(t) = task_of.get(&(&*b.namespace, &*b.name)) else {
            continue;
        };
        let Some(claims) = t.claims.as_deref() else {
            continue;
        };
        let pod = t.key();
        if let Some(why) = &claims.waiting {
            out.push(format!("{pod} bound although {why}"));
            continue;
        }
        let Some(node) = node_of(&b.node) else {
            continue;
        };
        for pc in &claims.claims {
            let key = format!("{}/{}", t.namespace, pc.claim);
            let claim = inv
                .claim_index(&t.namespace, &pc.claim)
                .map(|i| &inv.claims[i]);
            let admits = match (claim.and_then(|c| c.allocation.as_ref()), written.get(&key)) {
                (Some(a), _) => a.admits(&node.name, &node.labels),
                (None, Some(w)) if w.allocate => w.node_selector.as_ref().is_none_or(|terms| {
                    terms
                        .iter()
                        .any(|term| term.matches(&node.name, &node.labels))
                }),
                _ => {
                    out.push(format!(
                        "{pod} bound to {} with claim {key} unallocated",
                        b.node
                    ));
                    continue;
                }
            };
            if !admits {
                out.push(format!(
                    "{pod} bound to {}, where claim {key}'s allocation does not allow it",
                    b.node
                ));
            }
            let already = claim.is_some_and(|c| c.reserved_for_pod(&t.uid));
            if !already && !reserved.contains(&(key.clone(), &*t.uid)) {
                out.push(format!("{pod} bound without claim {key} reserved for it"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bind, Node, Plan, Snapshot, Task};

    fn gpu(node: &str, name: &str) -> Device {
        Device {
            driver: "gpu.nvidia.com".into(),
            pool: node.into(),
            name: name.into(),
            attributes: BTreeMap::new(),
            capacity: BTreeMap::new(),
            nodes: DeviceNodes::Node(node.into()),
            unsupported: None,
        }
    }

    fn result(node: &str, name: &str) -> DeviceResult {
        DeviceResult {
            request: "gpu".into(),
            driver: "gpu.nvidia.com".into(),
            pool: node.into(),
            device: name.into(),
            admin_access: false,
        }
    }

    fn claim(name: &str) -> Claim {
        Claim {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}").into(),
            requests: Vec::new(),
            constraints: Vec::new(),
            config: Vec::new(),
            allocation: None,
            reserved_for: Vec::new(),
            deleting: false,
            owner: None,
            unsupported: None,
        }
    }

    fn write(name: &str, node: &str, device: &str, pod_uid: &str) -> ClaimWrite {
        ClaimWrite {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}").into(),
            allocate: true,
            devices: vec![result(node, device)],
            config: Vec::new(),
            node: Some(node.into()),
            node_selector: None,
            reserved_for: vec![Consumer {
                resource: "pods".into(),
                name: "p".into(),
                uid: pod_uid.into(),
            }],
        }
    }

    fn snapshot(claims: Vec<Claim>, pod_claim: &str) -> Snapshot {
        let mut s = Snapshot::default();
        for n in ["node-a", "node-b"] {
            s.nodes.push(Node::new(n, Default::default()));
        }
        s.dra.devices = vec![gpu("node-a", "gpu-0"), gpu("node-a", "gpu-1")];
        s.dra.claims = claims;
        s.tasks.push(Task {
            uid: "uid-p".into(),
            namespace: "default".into(),
            name: "p".into(),
            job: 0,
            status: crate::TaskStatus::Pending,
            node: None,
            request: Default::default(),
            priority: 0,
            role: None,
            gated: false,
            spec: Default::default(),
            labels: Default::default(),
            created: Default::default(),
            pending_reason: None,
            critical: false,
            nominated: None,
            never_preempts: false,
            started: Default::default(),
            budget: None,
            consumes: None,
            volumes: None,
            claims: Some(Arc::new(TaskClaims {
                claims: vec![PodClaim {
                    pod_claim: "gpu".into(),
                    claim: pod_claim.into(),
                    from_template: false,
                }],
                ..TaskClaims::default()
            })),
            controller: None,
            no_consolidate: false,
        });
        s
    }

    fn bind(node: &str) -> Bind {
        Bind {
            namespace: "default".into(),
            name: "p".into(),
            uid: "uid-p".into(),
            node: node.into(),
            job: "default/j".into(),
        }
    }

    #[test]
    fn a_plan_allocating_and_reserving_before_binding_is_clean() {
        let s = snapshot(vec![claim("c")], "c");
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![write("c", "node-a", "gpu-0", "uid-p")],
            ..Plan::default()
        };
        assert_eq!(check_plan(&s, &plan), Vec::<String>::new());
    }

    #[test]
    fn broken_plans_are_reported() {
        let mut held = claim("held");
        held.allocation = Some(Allocation {
            devices: vec![result("node-a", "gpu-0")],
            ..Allocation::default()
        });
        let s = snapshot(vec![claim("c"), held], "c");
        // The device another claim holds, on a node it is not on, bound elsewhere unreserved.
        let mut w = write("c", "node-b", "gpu-0", "uid-other");
        w.devices = vec![result("node-a", "gpu-0")];
        w.node_selector = Some(vec![crate::SelectorTerm {
            expressions: Vec::new(),
            fields: vec![crate::Requirement {
                key: "metadata.name".into(),
                op: crate::SelectorOp::In,
                values: vec!["node-b".into()],
            }],
        }]);
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
        assert!(
            has("allocated to default/held and default/c"),
            "{problems:?}"
        );
        assert!(has("which node node-b does not reach"), "{problems:?}");
        assert!(has("does not allow it"), "{problems:?}");
        assert!(has("without claim default/c reserved"), "{problems:?}");
        // Bound with the claim never allocated.
        let plan = Plan {
            binds: vec![bind("node-a")],
            ..Plan::default()
        };
        assert!(check_plan(&s, &plan)[0].contains("unallocated"));
    }
}
