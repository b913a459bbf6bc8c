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

/// A quantity kept both exactly (thousandths, for comparison and sums) and as written (for
/// messages and for writing it back).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Quantity {
    /// The value in thousandths of its unit (`80Gi` → 80 × 2³⁰ × 1000).
    pub milli: i64,
    /// The quantity as written.
    pub text: Arc<str>,
}

impl Quantity {
    /// A quantity of `milli` thousandths, written as kube-apiserver would print it.
    pub fn from_milli(milli: i64) -> Self {
        let text = if milli % 1000 == 0 {
            crate::quantity::format_bytes(milli / 1000)
        } else {
            crate::quantity::format_milli(milli)
        };
        Quantity {
            milli,
            text: Arc::from(text),
        }
    }
}

impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// `DeviceCapacity.requestPolicy` (KEP-5075): how much of a shared device's capacity one
/// allocation consumes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct RequestPolicy {
    /// `default`: consumed by a request that names no amount of this capacity.
    pub default: Option<Quantity>,
    /// `validValues`, ascending: a request is rounded up to the first that is not smaller.
    pub valid_values: Vec<Quantity>,
    /// `validRange`.
    pub valid_range: Option<CapacityRange>,
}

/// `requestPolicy.validRange`: a request below `min` is rounded up to it, one between steps up
/// to the next `min + n × step`; above `max` the device cannot serve it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapacityRange {
    /// `min` (required by validation).
    pub min: Quantity,
    /// `max`.
    pub max: Option<Quantity>,
    /// `step`.
    pub step: Option<Quantity>,
}

/// A device capacity (`DeviceCapacity`): its value, kept both exactly (thousandths, for
/// comparison) and as written (for messages), the name as the slice wrote it (consumed capacity
/// is written back under that name, as upstream does), and its request policy.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Capacity {
    /// The value in thousandths of its unit (`80Gi` → 80 × 2³⁰ × 1000).
    pub milli: i64,
    /// The quantity as the slice wrote it.
    pub text: Arc<str>,
    /// The capacity's name as the slice wrote it (`memory`, or qualified).
    pub name: Arc<str>,
    /// `requestPolicy` (only on devices with `allowMultipleAllocations`).
    pub policy: Option<Arc<RequestPolicy>>,
}

impl Capacity {
    /// A capacity named `name` of value `milli` (written `text`), without a request policy.
    pub fn new(name: &str, milli: i64, text: &str) -> Self {
        Capacity {
            milli,
            text: Arc::from(text),
            name: Arc::from(name),
            policy: None,
        }
    }
}

/// A counter set of a pool (`ResourceSlice.spec.sharedCounters[]`, KEP-4815): counters that
/// partitions of one physical device draw from, so that no two allocations together take more
/// than there is (a whole GPU and its MIG partitions exclude each other).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CounterSet {
    /// `spec.driver` of its slice.
    pub driver: Arc<str>,
    /// `spec.pool.name` of its slice.
    pub pool: Arc<str>,
    /// `name`, unique in the pool.
    pub name: Arc<str>,
    /// `counters`: name → value.
    pub counters: BTreeMap<Arc<str>, Quantity>,
}

impl CounterSet {
    /// `driver/pool/name`.
    pub fn id(&self) -> String {
        format!("{}/{}/{}", self.driver, self.pool, self.name)
    }
}

/// `Device.consumesCounters[]`: what a device takes from a counter set of its pool while it is
/// allocated (once, however many shares of it are allocated).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CounterConsumption {
    /// `counterSet`: a counter set's name in the device's pool.
    pub counter_set: Arc<str>,
    /// `counters`: name → amount.
    pub counters: BTreeMap<Arc<str>, Quantity>,
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
    /// `allowMultipleAllocations` (KEP-5075): several allocations may share it, together
    /// consuming no more than its capacity.
    pub shared: bool,
    /// `consumesCounters` (KEP-4815): what it draws from its pool's counter sets while allocated.
    pub consumes: Vec<CounterConsumption>,
    /// Inputs Caldera does not evaluate yet (device taints, binding conditions, ...) make a
    /// device unusable rather than used wrongly: what, for messages (`None`: usable).
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
    /// `capacity.requests` (KEP-5075): name as written (unqualified names are the device
    /// driver's) → amount asked of each device allocated.
    pub capacity: BTreeMap<Arc<str>, Quantity>,
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

/// What a constraint asks of its attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConstraintKind {
    /// `matchAttribute`: every device has the attribute, all with the same value.
    Match,
    /// `distinctAttribute`: every device has the attribute, no two with the same value.
    Distinct,
}

/// `spec.devices.constraints[]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceConstraint {
    /// `requests` (a request name, or `<request>/<subrequest>`; empty: every request).
    pub requests: Vec<Arc<str>>,
    /// `matchAttribute` or `distinctAttribute`, fully qualified.
    pub attribute: Arc<str>,
    /// Which of the two.
    pub kind: ConstraintKind,
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
    /// `shareID`: one share of a device with `allowMultipleAllocations` (`None`: the device
    /// is allocated whole).
    pub share_id: Option<Arc<str>>,
    /// `consumedCapacity` of a share: capacity name as the slice wrote it → amount.
    pub consumed: BTreeMap<Arc<str>, Quantity>,
}

impl DeviceResult {
    /// A result allocating device `driver/pool/device` whole for `request`.
    pub fn whole(request: &str, driver: &str, pool: &str, device: &str) -> Self {
        DeviceResult {
            request: Arc::from(request),
            driver: Arc::from(driver),
            pool: Arc::from(pool),
            device: Arc::from(device),
            admin_access: false,
            share_id: None,
            consumed: BTreeMap::new(),
        }
    }
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
    /// `spec.devices.constraints`.
    pub constraints: Vec<DeviceConstraint>,
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
    /// Counter sets of the usable pools, sorted by (driver, pool, name).
    pub counter_sets: Vec<CounterSet>,
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

    /// Index of the counter set `name` of pool `driver/pool`.
    pub fn counter_set_index(&self, driver: &str, pool: &str, name: &str) -> Option<usize> {
        self.counter_sets
            .binary_search_by(|c| (&*c.driver, &*c.pool, &*c.name).cmp(&(driver, pool, name)))
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
/// rules, independently of the session and the allocator: no device is allocated whole to two
/// claims (admin access aside), nor whole and in shares at once; the shares of a device never
/// consume more of a capacity than it has, and only a device with `allowMultipleAllocations` is
/// shared; the devices in use never draw more from a counter set than it holds; a written
/// allocation names only published devices reachable from its node, is written once and only for
/// a claim not allocated yet; and every pod bound has each of its claims allocated where it
/// lands (already, or by a write of this plan) and reserved for it, and no pod waiting for a
/// claim is bound. Only what this plan's writes take part in is reported (a cluster already
/// overdrawn is not the plan's doing). Returns what is broken (empty: nothing).
pub fn check_plan(snapshot: &crate::Snapshot, plan: &crate::Plan) -> Vec<String> {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    let inv = &snapshot.dra;
    let mut out = Vec::new();
    type Id = (Arc<str>, Arc<str>, Arc<str>);
    let mut holder: BTreeMap<Id, String> = BTreeMap::new();
    let mut hold = |r: &DeviceResult, claim: String, out: &mut Vec<String>| {
        if r.admin_access || r.share_id.is_some() {
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
    let written_allocations = plan
        .claim_writes
        .iter()
        .filter(|w| w.allocate)
        .map(|w| (w.key(), &w.devices));
    out.extend(check_sharing(inv, written_allocations));
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

/// The capacity and counter part of [`check_plan`]: with the snapshot's allocations and
/// `written` (claim key, results) together, every device is used whole by one claim or in
/// shares, shares only of a shared device and within its capacity, and every counter set holds
/// what the devices in use draw. Problems are reported only where a written result takes part.
fn check_sharing<'w>(
    inv: &DeviceInventory,
    written: impl Iterator<Item = (String, &'w Vec<DeviceResult>)>,
) -> Vec<String> {
    use std::collections::BTreeSet;
    #[derive(Default)]
    struct Use {
        whole: Vec<String>,
        shares: Vec<String>,
        consumed: BTreeMap<Arc<str>, i64>,
        by_plan: bool,
    }
    let mut uses: BTreeMap<usize, Use> = BTreeMap::new();
    let mut out = Vec::new();
    let existing = inv
        .claims
        .iter()
        .filter_map(|c| c.allocation.as_ref().map(|a| (c.key(), &a.devices, false)));
    let written = written.map(|(k, d)| (k, d, true));
    for (claim, results, by_plan) in existing.chain(written) {
        for r in results.iter().filter(|r| !r.admin_access) {
            let Some(d) = inv.device_index(&r.driver, &r.pool, &r.device) else {
                continue;
            };
            let device = &inv.devices[d];
            let u = uses.entry(d).or_default();
            u.by_plan |= by_plan;
            if r.share_id.is_none() {
                u.whole.push(claim.clone());
                continue;
            }
            u.shares.push(claim.clone());
            if by_plan && !device.shared {
                out.push(format!(
                    "claim {claim} got a share of device {}, which does not allow multiple allocations",
                    device.id()
                ));
            }
            for (name, q) in &r.consumed {
                let key = if name.contains('/') {
                    name.clone()
                } else {
                    Arc::from(format!("{}/{name}", device.driver))
                };
                *u.consumed.entry(key).or_default() += q.milli;
            }
        }
    }
    let mut drawn: BTreeMap<(usize, Arc<str>), (i64, bool)> = BTreeMap::new();
    for (&d, u) in &uses {
        let device = &inv.devices[d];
        if u.by_plan && !u.whole.is_empty() && !u.shares.is_empty() {
            out.push(format!(
                "device {} allocated whole to {} and shared by {}",
                device.id(),
                u.whole.join(", "),
                u.shares.join(", ")
            ));
        }
        if u.by_plan {
            for (name, &milli) in &u.consumed {
                match device.capacity.get(name) {
                    Some(c) if milli > c.milli => out.push(format!(
                        "device {}: its shares consume {} of capacity {name}, which is {}",
                        device.id(),
                        Quantity::from_milli(milli),
                        c.text
                    )),
                    Some(_) => {}
                    None => out.push(format!(
                        "device {}: a share consumes capacity {name}, which it does not have",
                        device.id()
                    )),
                }
            }
        }
        for take in &device.consumes {
            let Some(set) = inv.counter_set_index(&device.driver, &device.pool, &take.counter_set)
            else {
                continue;
            };
            for (counter, q) in &take.counters {
                let e = drawn.entry((set, counter.clone())).or_default();
                e.0 += q.milli;
                e.1 |= u.by_plan;
            }
        }
    }
    let mut reported = BTreeSet::new();
    for ((set, counter), (milli, by_plan)) in drawn {
        let cs = &inv.counter_sets[set];
        let total = cs.counters.get(&counter).map_or(0, |q| q.milli);
        if by_plan && milli > total && reported.insert((set, counter.clone())) {
            out.push(format!(
                "counter set {}: the devices in use draw {} of counter {counter}, which is {}",
                cs.id(),
                Quantity::from_milli(milli),
                Quantity::from_milli(total)
            ));
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
            shared: false,
            consumes: Vec::new(),
            unsupported: None,
        }
    }

    fn result(node: &str, name: &str) -> DeviceResult {
        DeviceResult::whole("gpu", "gpu.nvidia.com", node, name)
    }

    fn q(text: &str) -> Quantity {
        Quantity {
            milli: crate::parse_quantity(text, crate::Scale::Milli).unwrap(),
            text: text.into(),
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

    /// A share of `device` consuming `memory`.
    fn share(node: &str, device: &str, id: &str, memory: &str) -> DeviceResult {
        DeviceResult {
            share_id: Some(id.into()),
            consumed: [("memory".into(), q(memory))].into_iter().collect(),
            ..result(node, device)
        }
    }

    #[test]
    fn shares_within_capacity_and_counters_within_their_sets_are_clean() {
        let mut s = snapshot(vec![claim("c"), claim("held")], "c");
        let mut shared = gpu("node-a", "gpu-0");
        shared.shared = true;
        shared.capacity.insert(
            "gpu.nvidia.com/memory".into(),
            Capacity::new("memory", q("80Gi").milli, "80Gi"),
        );
        s.dra.devices[0] = shared;
        s.dra.claims[1].allocation = Some(Allocation {
            devices: vec![share("node-a", "gpu-0", "a", "60Gi")],
            ..Allocation::default()
        });
        let mut w = write("c", "node-a", "gpu-0", "uid-p");
        w.devices = vec![share("node-a", "gpu-0", "b", "20Gi")];
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w.clone()],
            ..Plan::default()
        };
        assert_eq!(check_plan(&s, &plan), Vec::<String>::new());
        // 60Gi + 40Gi of 80Gi.
        w.devices = vec![share("node-a", "gpu-0", "b", "40Gi")];
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w.clone()],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        assert!(
            problems[0].contains("consume 100Gi of capacity gpu.nvidia.com/memory, which is 80Gi"),
            "{problems:?}"
        );
        // The device whole while shared.
        w.devices = vec![result("node-a", "gpu-0")];
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![w],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        assert!(
            problems[0].contains("allocated whole to default/c and shared by default/held"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_partition_beside_its_whole_device_overdraws_the_counter_set() {
        let mut s = snapshot(vec![claim("c"), claim("held")], "c");
        let draw = |amount: &str| CounterConsumption {
            counter_set: "gpu-0".into(),
            counters: [("memory".into(), q(amount))].into_iter().collect(),
        };
        s.dra.devices[0].consumes = vec![draw("80Gi")];
        s.dra.devices[1].consumes = vec![draw("10Gi")];
        s.dra.counter_sets = vec![CounterSet {
            driver: "gpu.nvidia.com".into(),
            pool: "node-a".into(),
            name: "gpu-0".into(),
            counters: [("memory".into(), q("80Gi"))].into_iter().collect(),
        }];
        s.dra.claims[1].allocation = Some(Allocation {
            devices: vec![result("node-a", "gpu-0")],
            ..Allocation::default()
        });
        let plan = Plan {
            binds: vec![bind("node-a")],
            claim_writes: vec![write("c", "node-a", "gpu-1", "uid-p")],
            ..Plan::default()
        };
        let problems = check_plan(&s, &plan);
        assert_eq!(
            problems,
            ["counter set gpu.nvidia.com/node-a/gpu-0: the devices in use draw 90Gi of counter memory, which is 80Gi"]
        );
    }
}
