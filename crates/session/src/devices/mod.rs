//! The session's device state (Dynamic Resource Allocation): which devices are allocated,
//! which claims this session allocated and for whom, updated by every placement, undo and
//! eviction — so a member's placement includes its devices, members placed earlier in a
//! session count for the ones after them, and a rolled-back gang gives its devices back.
//!
//! Follows kube-scheduler's `DynamicResources` plugin: a claim already allocated pins its users
//! to the nodes its allocation allows; the others of a pod are allocated together on the node
//! by the structured allocator ([`caldera_dra`]), from devices no claim holds (admin access
//! aside); a pod asking for an extended resource that a node does not list is served by
//! devices of the DeviceClass naming it (KEP-5004). A device is never given twice whole; a
//! device with `allowMultipleAllocations` is given in shares whose consumed capacity never
//! exceeds its capacity, and the devices in use never overdraw a counter set (partitionable
//! devices). What a claim holds is a [`Hold`]: placing takes it, undoing and evicting give
//! exactly it back.
//!
//! Devices also count as resources ([`fold`]): on a node whose allocatable lacks a class's
//! `extendedResourceName` (e.g. `nvidia.com/gpu`), the node offers as many of it as it has
//! devices of the class, and a member's request counts the devices its claims from templates
//! ask for (or hold) through such a class. So queues (`capability`, `deserved`,
//! `minResources`), binpack and the "needs 8, 6 are free" messages see GPUs whether a device
//! plugin or a DRA driver publishes them. A class with shared devices or devices drawing
//! counters is not counted so: one of its devices is not one unit of the resource (a share is
//! a fraction, a partition part of a GPU), and counting them as whole units would refuse
//! members that fit.

use caldera_dra::{Allocator, Hold, NodeView};
use caldera_model::{
    Allocation, Claim, Consumer, DeviceInventory, DeviceNodes, DeviceRequest, DeviceResult, Node,
    RequestKind, RequestMapping, Snapshot, Task, TaskClaims,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

mod fold;

pub use fold::*;

pub use caldera_dra::CANNOT_ALLOCATE;
/// kube-scheduler's reason when an allocated claim's node selector excludes the node.
pub const NOT_AVAILABLE: &str = "resourceclaim not available on the node";

/// (DeviceClass, capacity name as a request writes it).
type ClassCapacity = (Arc<str>, Arc<str>);

/// What a member asks of devices, as [`Devices::share_ask`] reads it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShareAsk {
    /// The DeviceClass.
    pub class: Arc<str>,
    /// Devices.
    pub count: u32,
    /// Thousandths of each device (1000: whole).
    pub milli: u32,
}

/// The session's view of one claim.
#[derive(Debug, Clone, Default, PartialEq)]
struct ClaimState {
    /// Its allocation now: from the snapshot, or made by this session.
    allocation: Option<Arc<Allocation>>,
    /// What `allocation` holds: devices whole and shares.
    held: Hold,
    /// Allocated by this session (written at close).
    by_session: bool,
    /// Consumers holding it: `reservedFor` entries plus this session's placements.
    users: u32,
    /// Of them, victims or terminating pods taken off their nodes by an eviction search: when
    /// every user is leaving, its devices are free for the search.
    leaving: u32,
    /// Tasks of this session that use it, in placement order.
    added: Vec<usize>,
    /// The uid of the pod whose placement allocated it in this session.
    by_pod: Option<Arc<str>>,
}

impl ClaimState {
    fn freed(&self) -> bool {
        self.users > 0 && self.leaving >= self.users
    }
}

/// What a placed member did.
#[derive(Debug, Clone, PartialEq)]
struct Taken {
    node: u32,
    /// Claims (indices) it allocated.
    allocated: Vec<usize>,
    /// Claims (indices) it uses (allocated by it or before).
    used: Vec<usize>,
    /// The bridge's devices (KEP-5004), boxed: most members have none, and a session keeps
    /// one of these per placed member (a map of them grows by moving every entry).
    extended: Option<Box<Bridge>>,
}

/// The devices a member's extended resources took (KEP-5004).
#[derive(Debug, Clone, PartialEq)]
struct Bridge {
    /// The claim kube-scheduler would make (its requests).
    claim: Claim,
    /// The allocation.
    allocation: Allocation,
    /// What it holds.
    held: Hold,
    /// Container → request.
    mappings: Vec<RequestMapping>,
}

/// What placing a member on a node takes.
struct Decision {
    used: Vec<usize>,
    pending: Vec<usize>,
    found: Vec<caldera_dra::Found>,
    bridge: Option<Box<Bridge>>,
}

/// The device state of a session.
pub struct Devices {
    inv: Arc<DeviceInventory>,
    /// Per device: the node whose fit changes when it is taken or given back (`NONE`: several:
    /// it is reachable from several, or draws from a counter set devices of other nodes draw
    /// from too).
    local: Vec<u32>,
    claims: Vec<ClaimState>,
    placed: HashMap<usize, Taken>,
    /// Per resource served by devices: per node, whether devices serve it there (the node's
    /// allocatable did not list it).
    backed: BTreeMap<Arc<str>, Vec<bool>>,
    allocator: RefCell<Allocator>,
    node_count: u32,
    /// Per (class, capacity as a request names it): that capacity of the class's first device
    /// that has it, thousandths (what [`Devices::share_ask`] divides by).
    unit: RefCell<HashMap<ClassCapacity, Option<i64>>>,
    /// The claims (indices) of the last member resolved, by its claims (held, so no other
    /// member's can have that address) and namespace: a session checks one member on node
    /// after node, and each check resolved its claims by name again.
    resolved: RefCell<Option<Resolved>>,
}

/// What [`Devices::resolve`] found for one member's claims.
struct Resolved {
    claims: Arc<TaskClaims>,
    namespace: Arc<str>,
    used: Vec<usize>,
}

const NONE: u32 = u32::MAX;

impl std::fmt::Debug for Devices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Devices")
            .field("devices", &self.inv.devices.len())
            .field("claims", &self.claims)
            .field("placed", &self.placed)
            .finish()
    }
}

impl Default for Devices {
    fn default() -> Self {
        Devices {
            inv: Arc::default(),
            local: Vec::new(),
            claims: Vec::new(),
            placed: HashMap::new(),
            backed: BTreeMap::new(),
            allocator: RefCell::new(Allocator::new(DeviceInventory::default())),
            node_count: 0,
            unit: RefCell::default(),
            resolved: RefCell::default(),
        }
    }
}

impl Clone for Devices {
    /// A copy with its own allocator, holding the same devices (tests compare sessions).
    fn clone(&self) -> Self {
        let mut allocator = Allocator::shared(self.inv.clone());
        for st in &self.claims {
            if st.by_session {
                allocator.take(&st.held);
            }
            if st.freed() {
                allocator.release(&st.held);
            }
        }
        for t in self.placed.values() {
            if let Some(b) = &t.extended {
                allocator.take(&b.held);
            }
        }
        Devices {
            inv: self.inv.clone(),
            local: self.local.clone(),
            claims: self.claims.clone(),
            placed: self.placed.clone(),
            backed: self.backed.clone(),
            allocator: RefCell::new(allocator),
            node_count: self.node_count,
            unit: RefCell::default(),
            resolved: RefCell::default(),
        }
    }
}

impl PartialEq for Devices {
    fn eq(&self, other: &Self) -> bool {
        self.claims == other.claims && self.placed == other.placed && self.backed == other.backed
    }
}

impl Devices {
    /// Builds the state from the snapshot's inventory over `nodes`; `allocator` was built
    /// from it and `backed` is what [`fold`] returned.
    pub fn new(
        inv: Arc<DeviceInventory>,
        nodes: &[Node],
        backed: BTreeMap<Arc<str>, Vec<bool>>,
        allocator: Allocator,
    ) -> Self {
        if inv.is_empty() {
            return Devices {
                node_count: nodes.len() as u32,
                backed,
                allocator: RefCell::new(allocator),
                ..Devices::default()
            };
        }
        let mut local: Vec<u32> = inv
            .devices
            .iter()
            .map(|dev| match &dev.nodes {
                DeviceNodes::Node(name) => nodes
                    .binary_search_by(|x| (*x.name).cmp(name))
                    .map_or(NONE, |i| i as u32),
                _ => NONE,
            })
            .collect();
        // Counter sets are pool-wide: taking a device changes what devices of other nodes
        // drawing from the same set may take.
        let mut set_node: HashMap<(&str, &str, &str), u32> = HashMap::new();
        for (d, dev) in inv.devices.iter().enumerate() {
            for c in &dev.consumes {
                let key = (&*dev.driver, &*dev.pool, &*c.counter_set);
                match set_node.get(&key) {
                    Some(&n) if n != local[d] => {
                        set_node.insert(key, NONE);
                    }
                    Some(_) => {}
                    None => {
                        set_node.insert(key, local[d]);
                    }
                }
            }
        }
        for (d, dev) in inv.devices.iter().enumerate() {
            let spread = dev
                .consumes
                .iter()
                .any(|c| set_node.get(&(&*dev.driver, &*dev.pool, &*c.counter_set)) == Some(&NONE));
            if spread {
                local[d] = NONE;
            }
        }
        let claims = inv
            .claims
            .iter()
            .map(|c| ClaimState {
                users: c.reserved_for.len() as u32,
                held: c
                    .allocation
                    .as_ref()
                    .map(|a| allocator.devices_of(a))
                    .unwrap_or_default(),
                allocation: c.allocation.clone().map(Arc::new),
                ..ClaimState::default()
            })
            .collect();
        Devices {
            local,
            claims,
            placed: HashMap::new(),
            backed,
            allocator: RefCell::new(allocator),
            node_count: nodes.len() as u32,
            inv,
            unit: RefCell::default(),
            resolved: RefCell::default(),
        }
    }

    /// Tries a node's devices fullest first in every later allocation of this session (see
    /// [`Allocator::set_pack_shares`]); what a GPU placement policy that packs shares asks for.
    pub fn pack_shares(&self) {
        self.allocator.borrow_mut().set_pack_shares(true);
    }

    /// What `task`'s claims ask of devices as one GPU placement policy sees it: `count`
    /// devices of one class, each `milli` thousandths of it (1000: the whole device; a capacity
    /// request as the share of the class's devices' capacity it asks, the largest share where
    /// it asks several). `None`: no claim, or claims this view cannot express (several
    /// requests or claims, `All`, `firstAvailable`, admin access, a class without devices).
    /// Read from the claims' requests, allocated or not, so running members count too.
    pub fn share_ask(&self, task: &Task) -> Option<ShareAsk> {
        let tc = task.claims.as_ref()?;
        let [pc] = tc.claims.as_slice() else {
            return None;
        };
        if !tc.extended.is_empty() {
            return None;
        }
        // The one claim, as the fit check just resolved it when it can say (scoring follows
        // the check of the same member).
        let ci = match self.resolve(task) {
            Ok(used) if tc.extended_claim.is_none() && used.len() == 1 => used[0],
            _ => self.inv.claim_index(&task.namespace, &pc.claim)?,
        };
        let claim = &self.inv.claims[ci];
        let [req] = claim.requests.as_slice() else {
            return None;
        };
        let RequestKind::Exactly(e) = &req.kind else {
            return None;
        };
        let caldera_model::AllocationMode::ExactCount(count) = e.mode else {
            return None;
        };
        if e.admin_access {
            return None;
        }
        let mut milli = if e.capacity.is_empty() { 1000 } else { 0 };
        for (name, q) in &e.capacity {
            let unit = self.unit_of(&e.class, name)?;
            let part = (i128::from(q.milli) * 1000 + i128::from(unit) - 1) / i128::from(unit);
            milli = milli.max(u32::try_from(part.clamp(0, 1000)).unwrap_or(1000));
        }
        Some(ShareAsk {
            class: e.class.clone(),
            count,
            milli,
        })
    }

    /// Capacity `name` (as a request names it) of the first device of `class` having it.
    fn unit_of(&self, class: &Arc<str>, name: &Arc<str>) -> Option<i64> {
        let key = (class.clone(), name.clone());
        if let Some(u) = self.unit.borrow().get(&key) {
            return *u;
        }
        let mut allocator = self.allocator.borrow_mut();
        let found = (0..self.inv.devices.len()).find_map(|d| {
            let dev = &self.inv.devices[d];
            let cap = dev
                .capacity
                .get(caldera_dra::sharing::qualified(&dev.driver, name).as_str())?;
            (cap.milli > 0 && allocator.in_class(class, d as u32)).then_some(cap.milli)
        });
        self.unit.borrow_mut().insert(key, found);
        found
    }

    /// Thousandths still free of each device of `class` local to `node` (see
    /// [`Allocator::room`]), as this session leaves them, in inventory order.
    pub fn rooms(&self, node: &Node, class: &str) -> Vec<u32> {
        let mut allocator = self.allocator.borrow_mut();
        let view = NodeView {
            name: &node.name,
            labels: &node.labels,
        };
        let devices = allocator.reachable(view);
        let mut rooms = Vec::with_capacity(devices.len());
        for d in devices {
            if matches!(self.inv.devices[d as usize].nodes, DeviceNodes::Node(_))
                && allocator.in_class(class, d)
            {
                rooms.push(allocator.room(d));
            }
        }
        rooms
    }

    /// The inventory.
    pub fn inventory(&self) -> &DeviceInventory {
        &self.inv
    }

    /// Whether devices serve `resource` on node `node` (its allocatable did not list it).
    pub fn backs(&self, resource: &str, node: usize) -> bool {
        self.backed
            .get(resource)
            .is_some_and(|on| on.get(node).copied().unwrap_or(false))
    }

    /// The claims (indices) `task` uses, or why it cannot be placed anywhere. What it finds
    /// depends only on the inventory (fixed for the session), the member's namespace and its
    /// claims, so the last answer is kept and given again to the same claims.
    fn resolve(&self, task: &Task) -> Result<Vec<usize>, String> {
        let Some(tc) = &task.claims else {
            return Ok(Vec::new());
        };
        if let Some(r) = &*self.resolved.borrow() {
            if Arc::ptr_eq(&r.claims, tc) && r.namespace == task.namespace {
                return Ok(r.used.clone());
            }
        }
        let used = self.resolve_names(task, tc)?;
        *self.resolved.borrow_mut() = Some(Resolved {
            claims: tc.clone(),
            namespace: task.namespace.clone(),
            used: used.clone(),
        });
        Ok(used)
    }

    /// [`Devices::resolve`] by the claims' names.
    fn resolve_names(&self, task: &Task, tc: &TaskClaims) -> Result<Vec<usize>, String> {
        if let Some(w) = &tc.waiting {
            return Err(w.to_string());
        }
        let mut out = Vec::with_capacity(tc.claims.len());
        for pc in &tc.claims {
            let Some(i) = self.inv.claim_index(&task.namespace, &pc.claim) else {
                return Err(format!(
                    "resourceclaim \"{}/{}\" not found",
                    task.namespace, pc.claim
                ));
            };
            if !out.contains(&i) {
                out.push(i);
            }
        }
        // The bridge's claim already made for it (`extendedResourceClaimStatus`) is used like
        // any claim of its own: where it is allocated, or allocated in place; never made again.
        if let Some(name) = &tc.extended_claim {
            let Some(i) = self.inv.claim_index(&task.namespace, name) else {
                return Err(format!(
                    "resourceclaim \"{}/{}\" not found",
                    task.namespace, name
                ));
            };
            if !out.contains(&i) {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// What placing `task` on node `node` would take: its claims not yet allocated (with
    /// their allocations, in order), the bridge's devices, or kube-scheduler's reason why not.
    /// `full`: with the allocations (else `found` is left empty: a fit check only).
    fn decide(
        &self,
        task: &Task,
        node: usize,
        nodes: &[Node],
        full: bool,
    ) -> Result<Decision, String> {
        let used = self.resolve(task)?;
        let n = &nodes[node];
        let mut pending = Vec::new();
        for &ci in &used {
            let c = &self.inv.claims[ci];
            let st = &self.claims[ci];
            match &st.allocation {
                // Asked of a member already placed (the node-choice caches ask again after a
                // placement, for the next alike member): what another such member would need.
                Some(_) if st.by_pod.as_deref() == Some(&*task.uid) && self.owned_by_pod(ci) => {
                    pending.push(ci)
                }
                Some(a) => {
                    if c.deleting {
                        return Err(format!("resourceclaim {} is being deleted", c.key()));
                    }
                    if !a.admits(&n.name, &n.labels) {
                        return Err(NOT_AVAILABLE.into());
                    }
                    if !c.reserved_for_pod(&task.uid)
                        && c.reserved_for.len() + st.added.len()
                            >= caldera_model::dra::RESERVED_FOR_MAX
                    {
                        return Err(format!(
                            "resourceclaim {} is reserved for the maximum number of consumers",
                            c.key()
                        ));
                    }
                }
                None => pending.push(ci),
            }
        }
        let bridge = match task
            .claims
            .as_ref()
            .filter(|tc| !tc.extended.is_empty() && tc.extended_claim.is_none())
        {
            Some(tc) => caldera_dra::extended_claim(
                &self.inv,
                &task.namespace,
                &task.name,
                &tc.extended,
                |r| !self.backs(r, node),
            ),
            None => None,
        };
        if pending.is_empty() && bridge.is_none() {
            return Ok(Decision {
                used,
                pending,
                found: Vec::new(),
                bridge: None,
            });
        }
        let mut claims: Vec<&Claim> = pending.iter().map(|&ci| &self.inv.claims[ci]).collect();
        if let Some((c, _)) = &bridge {
            claims.push(c);
        }
        let view = NodeView {
            name: &n.name,
            labels: &n.labels,
        };
        let found = if full {
            self.allocator.borrow_mut().allocate(&claims, view)?
        } else {
            self.allocator
                .borrow_mut()
                .fits(&claims, view)?
                .then(Vec::new)
        };
        let Some(mut found) = found else {
            return Err(CANNOT_ALLOCATE.into());
        };
        let bridge = match bridge {
            Some((claim, mappings)) => {
                let f = found.pop().unwrap_or_else(|| caldera_dra::Found {
                    allocation: Allocation::default(),
                    hold: Hold::default(),
                });
                Some(Box::new(Bridge {
                    claim,
                    allocation: f.allocation,
                    held: f.hold,
                    mappings,
                }))
            }
            None => None,
        };
        Ok(Decision {
            used,
            pending,
            found,
            bridge,
        })
    }

    /// Whether `task`'s claims (and the extended resources devices serve) can be satisfied on
    /// node `node` given what this session has placed so far: kube-scheduler's reason if not.
    pub fn check(&self, task: &Task, node: usize, nodes: &[Node]) -> Result<(), String> {
        if task.claims.is_none() {
            return Ok(());
        }
        self.decide(task, node, nodes, false).map(|_| ())
    }

    /// Whether claim `ci` belongs to one pod (made from a template): no other pod uses it.
    fn owned_by_pod(&self, ci: usize) -> bool {
        self.inv.claims[ci]
            .owner
            .as_ref()
            .is_some_and(|(kind, _)| &**kind == "Pod")
    }

    fn touch(&self, hold: &Hold, out: &mut Vec<u32>) -> bool {
        for d in hold.indices() {
            match self.local.get(d as usize).copied().unwrap_or(NONE) {
                NONE => return true,
                n => out.push(n),
            }
        }
        false
    }

    /// Records `task` (index `ti`) placed on node `node`: its claims are allocated and
    /// reserved. Returns the nodes whose fit for others may have changed.
    pub fn place(&mut self, ti: usize, task: &Task, node: usize, nodes: &[Node]) -> Vec<u32> {
        if task.claims.is_none() {
            return Vec::new();
        }
        let Ok(d) = self.decide(task, node, nodes, true) else {
            // The session checked the fit first; were the allocation refused now, the claims
            // stay unallocated and close writes nothing for them.
            return Vec::new();
        };
        let mut touched = vec![node as u32];
        let mut everywhere = false;
        for (&ci, f) in d.pending.iter().zip(d.found) {
            everywhere |= self.touch(&f.hold, &mut touched);
            self.allocator.get_mut().take(&f.hold);
            let st = &mut self.claims[ci];
            st.held = f.hold;
            st.allocation = Some(Arc::new(f.allocation));
            st.by_session = true;
            st.by_pod = Some(task.uid.clone());
            // Another pod may use this claim: where it may go changed everywhere.
            everywhere |= !self.owned_by_pod(ci);
        }
        for &ci in &d.used {
            if !self.inv.claims[ci].reserved_for_pod(&task.uid) {
                self.claims[ci].users += 1;
            }
            self.claims[ci].added.push(ti);
        }
        if let Some(b) = &d.bridge {
            everywhere |= self.touch(&b.held, &mut touched);
            self.allocator.get_mut().take(&b.held);
        }
        self.placed.insert(
            ti,
            Taken {
                node: node as u32,
                allocated: d.pending,
                used: d.used,
                extended: d.bridge,
            },
        );
        if everywhere {
            return (0..self.node_count).collect();
        }
        touched
    }

    /// Undoes [`Devices::place`] of task `ti`. Returns the nodes whose fit may have changed.
    pub fn unplace(&mut self, ti: usize, task: &Task) -> Vec<u32> {
        let Some(taken) = self.placed.remove(&ti) else {
            return Vec::new();
        };
        let mut touched = vec![taken.node];
        let mut everywhere = false;
        for &ci in &taken.used {
            if !self.inv.claims[ci].reserved_for_pod(&task.uid) {
                self.claims[ci].users = self.claims[ci].users.saturating_sub(1);
            }
            self.claims[ci].added.retain(|&t| t != ti);
        }
        for &ci in &taken.allocated {
            let held = std::mem::take(&mut self.claims[ci].held);
            everywhere |= self.touch(&held, &mut touched);
            everywhere |= !self.owned_by_pod(ci);
            self.allocator.get_mut().release(&held);
            let st = &mut self.claims[ci];
            st.allocation = None;
            st.by_session = false;
            st.by_pod = None;
        }
        if let Some(b) = &taken.extended {
            everywhere |= self.touch(&b.held, &mut touched);
            self.allocator.get_mut().release(&b.held);
        }
        if everywhere {
            return (0..self.node_count).collect();
        }
        touched
    }

    /// An eviction search takes `task` off its node: a claim whose every consumer is leaving
    /// frees its devices (a claim used by several pods frees when its last user goes).
    /// Returns the nodes whose fit may have changed.
    pub fn leave(&mut self, task: &Task) -> Vec<u32> {
        self.leaving(task, true)
    }

    /// Undoes [`Devices::leave`].
    pub fn back(&mut self, task: &Task) -> Vec<u32> {
        self.leaving(task, false)
    }

    fn leaving(&mut self, task: &Task, off: bool) -> Vec<u32> {
        if task.claims.is_none() {
            return Vec::new();
        }
        let Ok(used) = self.resolve(task) else {
            return Vec::new();
        };
        let mut touched = Vec::new();
        let mut everywhere = false;
        for ci in used {
            let reserved = self.inv.claims[ci].reserved_for_pod(&task.uid);
            if !reserved || self.claims[ci].allocation.is_none() {
                continue;
            }
            let was = self.claims[ci].freed();
            if off {
                self.claims[ci].leaving += 1;
            } else {
                self.claims[ci].leaving = self.claims[ci].leaving.saturating_sub(1);
            }
            let now = self.claims[ci].freed();
            if was == now {
                continue;
            }
            let held = self.claims[ci].held.clone();
            if now {
                self.allocator.get_mut().release(&held);
            } else {
                self.allocator.get_mut().take(&held);
            }
            everywhere |= self.touch(&held, &mut touched);
        }
        if everywhere {
            return (0..self.node_count).collect();
        }
        touched.sort_unstable();
        touched.dedup();
        touched
    }

    /// A shape of `task`'s claims: members with equal shapes (and request and spec) place
    /// alike. Claims still to allocate from a template count by what they ask; claims that
    /// are allocated or named by the pod count by identity.
    pub fn shape(&self, task: &Task) -> Option<ClaimShape> {
        let tc = task.claims.as_ref()?;
        let mut parts = Vec::with_capacity(tc.claims.len());
        for pc in &tc.claims {
            let i = self.inv.claim_index(&task.namespace, &pc.claim);
            let part = match i.map(|i| (i, &self.inv.claims[i])) {
                Some((_, c)) if pc.from_template && c.allocation.is_none() => {
                    ShapePart::Asks(c.requests.clone(), c.constraints.clone())
                }
                Some((i, _)) => ShapePart::Claim(i),
                None => ShapePart::Missing(pc.claim.clone()),
            };
            parts.push(part);
        }
        Some(ClaimShape {
            parts,
            extended: tc
                .extended
                .iter()
                .map(|x| (x.resource.clone(), x.count))
                .collect(),
            waiting: tc.waiting.clone(),
        })
    }

    /// The claim writes for the members in `committed` (placement order): every claim once,
    /// with its allocation when this session made it, and the members to add to its
    /// `reservedFor`.
    pub fn writes(
        &self,
        committed: &[(usize, usize)],
        tasks: &[Task],
    ) -> Vec<caldera_model::ClaimWrite> {
        let mut out: Vec<caldera_model::ClaimWrite> = Vec::new();
        // Per claim: its write in `out`, if any yet.
        let mut at: Vec<usize> = vec![usize::MAX; self.claims.len()];
        for &(ti, _) in committed {
            let Some(taken) = self.placed.get(&ti) else {
                continue;
            };
            let t = &tasks[ti];
            for &ci in &taken.used {
                let c = &self.inv.claims[ci];
                let st = &self.claims[ci];
                let Some(a) = &st.allocation else {
                    continue;
                };
                if at[ci] == usize::MAX {
                    at[ci] = out.len();
                    out.push(caldera_model::ClaimWrite {
                        namespace: c.namespace.clone(),
                        name: c.name.clone(),
                        uid: c.uid.clone(),
                        allocate: st.by_session,
                        devices: a.devices.clone(),
                        config: a.config.clone(),
                        node: a.node(),
                        node_selector: a.node_selector.clone(),
                        reserved_for: Vec::new(),
                    });
                }
                let i = at[ci];
                if !c.reserved_for_pod(&t.uid) {
                    out[i].reserved_for.push(Consumer {
                        resource: "pods".into(),
                        name: t.name.clone(),
                        uid: t.uid.clone(),
                    });
                }
            }
        }
        // A claim already allocated and reserved for every member has nothing to write.
        out.retain(|w| w.allocate || !w.reserved_for.is_empty());
        out
    }

    /// The bridge's claims for the members in `committed` (KEP-5004).
    pub fn extended_claims(
        &self,
        committed: &[(usize, usize)],
        tasks: &[Task],
    ) -> Vec<caldera_model::ExtendedResourceClaim> {
        let mut out = Vec::new();
        for &(ti, _) in committed {
            let Some(b) = self.placed.get(&ti).and_then(|t| t.extended.as_ref()) else {
                continue;
            };
            let t = &tasks[ti];
            out.push(caldera_model::ExtendedResourceClaim {
                namespace: t.namespace.clone(),
                pod: t.name.clone(),
                pod_uid: t.uid.clone(),
                requests: b
                    .claim
                    .requests
                    .iter()
                    .filter_map(|r| match &r.kind {
                        RequestKind::Exactly(e) => match e.mode {
                            caldera_model::AllocationMode::ExactCount(k) => {
                                Some((r.name.clone(), e.class.clone(), k))
                            }
                            caldera_model::AllocationMode::All => None,
                        },
                        RequestKind::FirstAvailable(_) => None,
                    })
                    .collect(),
                devices: b.allocation.devices.clone(),
                config: b.allocation.config.clone(),
                node: b.allocation.node(),
                node_selector: b.allocation.node_selector.clone(),
                mappings: b.mappings.clone(),
            });
        }
        out
    }

    /// Per driver on node `node`: devices it reaches and how many are in use, as this session
    /// leaves them (for `explain` and messages).
    pub fn usage(&self, node: &Node) -> Vec<caldera_dra::Usage> {
        self.allocator.borrow().usage(NodeView {
            name: &node.name,
            labels: &node.labels,
        })
    }

    /// Each shared device node `node` reaches, with the fraction its allocations hold, as
    /// this session leaves them (for `explain`).
    pub fn shared_usage(&self, node: &Node) -> Vec<caldera_dra::SharedUse> {
        self.allocator.borrow().shared_usage(NodeView {
            name: &node.name,
            labels: &node.labels,
        })
    }

    /// What `task` (index `ti`)'s claims are, for `explain`: one line per claim.
    pub fn describe(&self, ti: usize, task: &Task) -> Vec<String> {
        let Some(tc) = &task.claims else {
            return Vec::new();
        };
        let key = task.key();
        if let Some(w) = &tc.waiting {
            return vec![format!("{key}: {w}")];
        }
        let mut out = Vec::new();
        for pc in &tc.claims {
            let name = format!(
                "{key} claim {} ({}/{})",
                pc.pod_claim, task.namespace, pc.claim
            );
            let Some(ci) = self.inv.claim_index(&task.namespace, &pc.claim) else {
                out.push(format!("{name}: not found"));
                continue;
            };
            let st = &self.claims[ci];
            let line = match &st.allocation {
                Some(a) => {
                    let devices: Vec<String> = a.devices.iter().map(shown_result).collect();
                    let node = a
                        .node()
                        .map_or_else(|| "any node".to_string(), |n| n.to_string());
                    let by = if st.by_session && self.placed.contains_key(&ti) {
                        "allocated by this session"
                    } else if st.by_session {
                        "allocated by this session for another member"
                    } else {
                        "allocated before"
                    };
                    format!("{name}: {by}, for {node}: {}", devices.join(", "))
                }
                None => format!("{name}: not allocated"),
            };
            out.push(line);
        }
        if let Some(b) = self.placed.get(&ti).and_then(|t| t.extended.as_ref()) {
            let devices: Vec<String> = b
                .allocation
                .devices
                .iter()
                .map(|r| format!("{}/{}/{}", r.driver, r.pool, r.device))
                .collect();
            out.push(format!(
                "{key} extended resources served by devices: {}",
                devices.join(", ")
            ));
        }
        out
    }

    /// Whether every claim of placed task `ti` is allocated (the fit check makes it so; the
    /// property tests check it).
    pub fn satisfied(&self, ti: usize) -> bool {
        self.placed.get(&ti).is_none_or(|t| {
            t.used
                .iter()
                .all(|&ci| self.claims[ci].allocation.is_some())
        })
    }
}

/// A result for `explain`: `driver/pool/device`, and for a share what it consumes
/// (`gpu.nvidia.com/node-a/gpu-0 (share: memory 20Gi)`).
fn shown_result(r: &DeviceResult) -> String {
    let id = format!("{}/{}/{}", r.driver, r.pool, r.device);
    if r.share_id.is_none() {
        return id;
    }
    let consumed: Vec<String> = r
        .consumed
        .iter()
        .map(|(name, q)| format!("{name} {q}"))
        .collect();
    if consumed.is_empty() {
        format!("{id} (share)")
    } else {
        format!("{id} (share: {})", consumed.join(", "))
    }
}

/// One claim of a [`ClaimShape`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ShapePart {
    /// A claim from a template still to allocate: what it asks.
    Asks(Vec<DeviceRequest>, Vec<caldera_model::DeviceConstraint>),
    /// A claim by identity (allocated, or named by the pod).
    Claim(usize),
    /// A claim not found.
    Missing(Arc<str>),
}

/// What a member's claims make of where it may go (see [`Devices::shape`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaimShape {
    parts: Vec<ShapePart>,
    extended: Vec<(Arc<str>, i64)>,
    waiting: Option<Arc<str>>,
}
