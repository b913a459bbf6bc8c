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
