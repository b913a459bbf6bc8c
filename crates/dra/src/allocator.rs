//! The structured allocator: given a pod's claims, a node and the devices in use, find devices
//! for every request of every claim, or say why not. The semantics are those of
//! `k8s.io/dynamic-resource-allocation/structured` (the stable allocator kube-scheduler 1.36
//! uses): claims in order, requests in order, each device slot tried with every eligible device
//! in inventory order, constraints checked as devices are added, and the first complete
//! solution wins (an exhaustive search with backtracking). Shared devices (consumable
//! capacity) and counters (partitionable devices) follow the "incubating" allocator 1.36 uses
//! for them (`crate::sharing`); like it, the devices of one request are tried as combinations
//! (each slot after the device of the slot before), not permutations. Differences are listed in
//! `docs/dra.md` ("Allocator").

use crate::cel::Selectors;
use crate::sharing::{self, Hold, Share};
use caldera_model::dra::{
    AllocatedConfig, Allocation, AllocationMode, AttributeValue, Claim, ConfigSource,
    ConstraintKind, Device, DeviceClass, DeviceInventory, DeviceNodes, DeviceResult, ExactRequest,
    ExtendedRequest, Quantity, RequestKind, RequestMapping, ALLOCATION_RESULTS_MAX,
};
use caldera_model::{Requirement, SelectorOp, SelectorTerm};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// kube-scheduler's reason when a node has no devices for a pod's claims.
pub const CANNOT_ALLOCATE: &str = "cannot allocate all claims";

/// How many search steps one [`Allocator::allocate`] may take before it gives up on a node
/// (upstream bounds the search by the scheduling cycle's deadline instead).
pub const STEP_LIMIT: u64 = 200_000;

/// The specs of a request: itself (`exactly`) or its subrequests.
fn request_specs(r: &caldera_model::dra::DeviceRequest) -> Vec<&ExactRequest> {
    match &r.kind {
        RequestKind::Exactly(e) => vec![e],
        RequestKind::FirstAvailable(subs) => subs.iter().map(|s| &s.spec).collect(),
    }
}

/// The node an allocation is sought for.
#[derive(Debug, Clone, Copy)]
pub struct NodeView<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    /// `metadata.labels`.
    pub labels: &'a BTreeMap<String, String>,
}

/// An allocation found for one claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// What to write in `status.allocation`.
    pub allocation: Allocation,
    /// What it takes from others: every allocated device but those with admin access, whole
    /// or (a shared device) as a share.
    pub hold: Hold,
}

/// Devices per driver on a node: how many are reachable and how many of those are in use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The driver.
    pub driver: Arc<str>,
    /// Devices in use (allocated to some claim).
    pub used: u32,
    /// Devices the node reaches.
    pub total: u32,
}

/// A shared device (`allowMultipleAllocations`) a node reaches, and how full it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedUse {
    /// The driver.
    pub driver: Arc<str>,
    /// The device's name.
    pub device: Arc<str>,
    /// How much of it is held, in thousandths: of its fullest capacity (what its shares
    /// consume), or all of it (1000) when an allocation without a share holds it whole.
    pub milli: i64,
    /// Allocations holding a share of it.
    pub shares: u32,
}

impl SharedUse {
    /// Eight cells, one per eighth held (`[###.....]`; any share shows at least one).
    pub fn bar(&self) -> String {
        let filled = match (self.milli * 8 + 500) / 1000 {
            0 if self.milli > 0 => 1,
            n => n,
        };
        let cells: String = (0..8).map(|i| if i < filled { '#' } else { '.' }).collect();
        format!("[{cells}]")
    }

    /// The fraction held and by how many (`0.35 (2 claims)`, `1.00 (held whole)`).
    pub fn summary(&self) -> String {
        let held = match self.shares {
            0 if self.milli > 0 => "held whole".to_string(),
            1 => "1 claim".to_string(),
            n => format!("{n} claims"),
        };
        format!(
            "{}.{:02} ({held})",
            self.milli / 1000,
            (self.milli % 1000) / 10
        )
    }
}

/// The session's view of DRA: the inventory, which devices are in use (whole, in shares, and
/// the counters they draw), and the selector caches. Placements take what they hold
/// ([`Allocator::take`]) and undoing them gives it back ([`Allocator::release`]).
pub struct Allocator {
    /// Shared with the session's device state: never copied.
    inventory: Arc<DeviceInventory>,
    /// Devices local to one node, by node name (sorted indices).
    local: HashMap<Arc<str>, Vec<u32>>,
    /// Devices reachable from more than one node (node selector or all nodes).
    wide: Vec<u32>,
    /// What the allocations in use take.
    usage: sharing::Usage,
    /// Selector answers, per inventory device index (kept per device content inside).
    selectors: Selectors,
    /// Try a node's devices fullest first ([`Allocator::set_pack_shares`]).
    pack_shares: bool,
    /// Per inventory device: the id of its driver and capacities, what a request's
    /// consumption of it depends on ([`sharing::consumption`]); devices alike share one.
    capacities: Vec<u32>,
}

impl Allocator {
    /// Builds the allocator; devices of already allocated claims are in use.
    pub fn new(inventory: DeviceInventory) -> Self {
        Self::shared(Arc::new(inventory))
    }

    /// [`Allocator::new`] over an inventory shared with the caller (no copy).
    pub fn shared(inventory: Arc<DeviceInventory>) -> Self {
        let mut local: HashMap<Arc<str>, Vec<u32>> = HashMap::new();
        let mut wide = Vec::new();
        for (i, d) in inventory.devices.iter().enumerate() {
            match &d.nodes {
                DeviceNodes::Node(n) => local.entry(n.clone()).or_default().push(i as u32),
                _ => wide.push(i as u32),
            }
        }
        let mut selectors = Selectors::for_devices(&inventory.devices);
        // Every selector the session may need, parsed in one batch.
        selectors.compile(
            inventory.classes.iter().flat_map(|c| &c.selectors).chain(
                inventory
                    .claims
                    .iter()
                    .filter(|c| c.allocation.is_none())
                    .flat_map(|c| &c.requests)
                    .flat_map(request_specs)
                    .flat_map(|e| &e.selectors),
            ),
        );
        let capacities = capacity_ids(&inventory.devices);
        let mut out = Allocator {
            local,
            wide,
            usage: sharing::Usage::new(&inventory),
            selectors,
            inventory,
            pack_shares: false,
            capacities,
        };
        let taken: Vec<Hold> = out
            .inventory
            .claims
            .iter()
            .filter_map(|c| c.allocation.as_ref())
            .map(|a| out.devices_of(a))
            .collect();
        for hold in &taken {
            out.take(hold);
        }
        out
    }

    /// The inventory it was built from.
    pub fn inventory(&self) -> &DeviceInventory {
        &self.inventory
    }

    /// The inventory it was built from, shared.
    pub fn inventory_arc(&self) -> &Arc<DeviceInventory> {
        &self.inventory
    }

    /// Whether the search tries a node's devices fullest first: by [`Allocator::room`]
    /// ascending, inventory order among equals, so a share goes to the device with the least
    /// room that can still serve it and devices stay whole for whole-device requests (a GPU
    /// placement policy, FGD's, asks for it). Off: inventory order, as upstream.
    pub fn set_pack_shares(&mut self, on: bool) {
        self.pack_shares = on;
    }

    /// Thousandths of device `index` still free: 1000 when nothing holds it, 0 when it is
    /// held whole, and for a shared device the least free part of any of its capacities.
    pub fn room(&self, index: u32) -> u32 {
        let i = index as usize;
        if self.usage.whole.get(i).is_some_and(|&n| n > 0) {
            return 0;
        }
        let Some(device) = self.inventory.devices.get(i) else {
            return 0;
        };
        let consumed = self.usage.consumed.get(i).map(|c| &c[..]).unwrap_or(&[]);
        let mut room = 1000u32;
        for (cap, used) in device.capacity.values().zip(consumed) {
            if cap.milli > 0 {
                let free = (cap.milli - used).clamp(0, cap.milli);
                let part = i128::from(free) * 1000 / i128::from(cap.milli);
                room = room.min(u32::try_from(part).unwrap_or(0));
            }
        }
        room
    }

    /// Whether the device at `index` is allocated to a claim, whole or in shares (admin access
    /// aside).
    pub fn in_use(&self, index: u32) -> bool {
        self.usage.in_use(index)
    }

    /// What the allocations in use take: per device and per counter.
    pub fn usage_state(&self) -> &sharing::Usage {
        &self.usage
    }

    /// Records what one more allocation holds.
    pub fn take(&mut self, hold: &Hold) {
        self.usage.apply(hold, 1);
    }

    /// Gives back what [`Allocator::take`] took.
    pub fn release(&mut self, hold: &Hold) {
        self.usage.apply(hold, -1);
    }

    /// What an allocation holds (admin access aside): a result with a `shareID` is a share
    /// consuming its `consumedCapacity`, any other takes the device whole, as kube-scheduler
    /// reads allocations; devices no longer published are left out.
    pub fn devices_of(&self, allocation: &Allocation) -> Hold {
        let mut hold = Hold::default();
        for r in allocation.devices.iter().filter(|r| !r.admin_access) {
            let Some(i) = self.inventory.device_index(&r.driver, &r.pool, &r.device) else {
                continue;
            };
            if r.share_id.is_none() {
                hold.devices.push(i as u32);
                continue;
            }
            let device = &self.inventory.devices[i];
            let consumed = device
                .capacity
                .keys()
                .map(|key| {
                    r.consumed
                        .iter()
                        .find(|(name, _)| sharing::qualified(&device.driver, name) == **key)
                        .map_or(0, |(_, q)| q.milli)
                })
                .collect();
            hold.shares.push(Share {
                device: i as u32,
                consumed,
            });
        }
        hold
    }

    /// Whether the device at `index` is of class `class`: usable, and every selector of the
    /// class holds (an error counts as no). Answered from the same caches as allocations, so
    /// the session can count devices per class (as the resource a class names) at no extra
    /// CEL cost.
    pub fn in_class(&mut self, class: &str, index: u32) -> bool {
        let (Some(class), Some(device)) = (
            self.inventory.class(class),
            self.inventory.devices.get(index as usize),
        ) else {
            return false;
        };
        device.unsupported.is_none()
            && class.selectors.iter().all(|e| {
                let id = self.selectors.id(e);
                self.selectors.matches_id(id, index, device) == Ok(true)
            })
    }

    /// Devices the node reaches, in inventory order.
    pub fn reachable(&self, node: NodeView) -> Vec<u32> {
        let local = self.local.get(node.name).map(Vec::as_slice).unwrap_or(&[]);
        if self.wide.is_empty() {
            // Indices of one node's devices are pushed in inventory order: sorted already.
            return local.to_vec();
        }
        let wide = self.wide.iter().copied().filter(|&i| {
            self.inventory.devices[i as usize]
                .nodes
                .reaches(node.name, node.labels)
        });
        let mut out: Vec<u32> = local.iter().copied().chain(wide).collect();
        out.sort_unstable();
        out
    }

    /// Per driver: devices the node reaches and how many are in use (for messages and
    /// `caldera simulate`'s `gpu.nvidia.com: 6/8`).
    pub fn usage(&self, node: NodeView) -> Vec<Usage> {
        let mut out: Vec<Usage> = Vec::new();
        for i in self.reachable(node) {
            let d = &self.inventory.devices[i as usize];
            let used = u32::from(self.in_use(i));
            match out.iter_mut().find(|u| u.driver == d.driver) {
                Some(u) => {
                    u.used += used;
                    u.total += 1;
                }
                None => out.push(Usage {
                    driver: d.driver.clone(),
                    used,
                    total: 1,
                }),
            }
        }
        out.sort_by(|a, b| a.driver.cmp(&b.driver));
        out
    }

    /// Each shared device the node reaches, in inventory order, with how much of it its
    /// allocations hold (`caldera simulate`'s per-GPU fractions).
    pub fn shared_usage(&self, node: NodeView) -> Vec<SharedUse> {
        let usage = &self.usage;
        self.reachable(node)
            .into_iter()
            .filter_map(|i| {
                let d = &self.inventory.devices[i as usize];
                if !d.shared {
                    return None;
                }
                let at = i as usize;
                let whole = usage.whole.get(at).is_some_and(|&n| n > 0);
                let consumed = usage.consumed.get(at).map(|c| &c[..]).unwrap_or(&[]);
                let fullest = d
                    .capacity
                    .values()
                    .zip(consumed)
                    .filter(|(c, _)| c.milli > 0)
                    .map(|(c, &used)| {
                        let part = i128::from(used) * 1000 / i128::from(c.milli);
                        i64::try_from(part.clamp(0, 1000)).unwrap_or(1000)
                    })
                    .max()
                    .unwrap_or(0);
                Some(SharedUse {
                    driver: d.driver.clone(),
                    device: d.name.clone(),
                    milli: if whole { 1000 } else { fullest },
                    shares: usage.shares.get(at).copied().unwrap_or(0),
                })
            })
            .collect()
    }

    /// Finds devices on `node` for every request of every claim in `claims` (none allocated
    /// yet), all in one solution, devices in use by other claims excluded. `Ok(None)`: no
    /// solution on this node ([`CANNOT_ALLOCATE`]); `Err`: a claim cannot be allocated as
    /// written (a missing class, a selector that does not compile or fails at runtime, `All`
    /// over a pool being updated, too many devices), with upstream's message.
    pub fn allocate(
        &mut self,
        claims: &[&Claim],
        node: NodeView,
    ) -> Result<Option<Vec<Found>>, String> {
        self.search(claims, node, true)
    }

    /// Whether [`Allocator::allocate`] would find a solution (`Ok(true)`), find none
    /// (`Ok(false)`) or refuse (`Err`, the same message), without building the allocations.
    pub fn fits(&mut self, claims: &[&Claim], node: NodeView) -> Result<bool, String> {
        self.search(claims, node, false).map(|f| f.is_some())
    }

    /// The search behind [`Allocator::allocate`]; `finish`: build the allocations (else a
    /// solution is `Some` of nothing).
    fn search(
        &mut self,
        claims: &[&Claim],
        node: NodeView,
        finish: bool,
    ) -> Result<Option<Vec<Found>>, String> {
        if claims.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let mut candidates = self.reachable(node);
        if self.pack_shares {
            // Stable: inventory order among devices with equal room.
            candidates.sort_by_key(|&d| self.room(d));
        }
        let mut search = Search {
            inventory: &self.inventory,
            selectors: &mut self.selectors,
            usage: &self.usage,
            capacities: &self.capacities,
            consumptions: RefCell::new(Vec::new()),
            candidates,
            claims,
            requests: Vec::with_capacity(claims.len()),
            constraints: Vec::with_capacity(claims.len()),
            allocating: Vec::new(),
            drawn: Vec::new(),
            results: (0..claims.len()).map(|_| Vec::new()).collect(),
            chosen: Vec::with_capacity(claims.len()),
            steps: 0,
        };
        search.prepare(node)?;
        if !search.step(0, 0, 0, 0, false, 0)? {
            if let Some(p) =
                self.inventory.unusable_pools.iter().find(|p| {
                    p.invalid && p.nodes.iter().any(|n| n.reaches(node.name, node.labels))
                })
            {
                return Err(format!(
                    "invalid resource pools were encountered: {}",
                    p.id()
                ));
            }
            return Ok(None);
        }
        if !finish {
            return Ok(Some(Vec::new()));
        }
        Ok(Some(search.finish()))
    }
}

/// [`Search::consumptions`]: ((request spec's address, capacities id), what it consumes).
type Consumptions = RefCell<Vec<((usize, u32), Option<Vec<Quantity>>)>>;

/// Per device: an id of its driver and capacities, equal for devices whose capacities and
/// driver are equal (what [`sharing::consumption`] reads of a device).
fn capacity_ids(devices: &[Device]) -> Vec<u32> {
    let mut ids: HashMap<(&str, &BTreeMap<Arc<str>, caldera_model::dra::Capacity>), u32> =
        HashMap::new();
    let mut out: Vec<u32> = Vec::with_capacity(devices.len());
    for (i, d) in devices.iter().enumerate() {
        // Devices in a row alike (a node's GPUs) are compared, not hashed.
        let id = match i.checked_sub(1).map(|p| (&devices[p], out[p])) {
            Some((p, id)) if p.driver == d.driver && p.capacity == d.capacity => id,
            _ => {
                let next = ids.len() as u32;
                *ids.entry((&*d.driver, &d.capacity)).or_insert(next)
            }
        };
        out.push(id);
    }
    out
}

/// How the search takes a device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taking {
    Whole,
    Share,
    Admin,
}

/// One way to satisfy a request: the request itself (`exactly`) or one subrequest of
/// `firstAvailable`.
struct Alt<'a> {
    /// The result's request name: `req` or `req/sub`.
    name: Arc<str>,
    /// The request's name.
    base: &'a Arc<str>,
    /// The subrequest's name.
    sub: Option<&'a Arc<str>>,
    spec: &'a ExactRequest,
    class: &'a DeviceClass,
    /// Devices to allocate.
    count: usize,
    /// `All`: exactly these devices.
    all: Option<Vec<u32>>,
    /// Selector ids ([`Selectors::id`]) of the class's selectors, then the request's:
    /// resolved once per search, not per device.
    class_ids: Vec<u32>,
    spec_ids: Vec<u32>,
}

/// A claim constraint during the search: the values of the devices added so far (for
/// `matchAttribute` the first value and how many share it; for `distinctAttribute` every value,
/// a stack since devices are added and removed last in, first out).
struct Constraint<'a> {
    requests: &'a [Arc<str>],
    attribute: &'a Arc<str>,
    kind: ConstraintKind,
    values: Vec<&'a AttributeValue>,
}

impl<'a> Constraint<'a> {
    /// Whether it constrains the request `base` (alternative `name`: `base` or `base/sub`).
    fn applies_to(&self, base: &Arc<str>, name: &Arc<str>) -> bool {
        self.requests.is_empty() || self.requests.iter().any(|r| r == base || r == name)
    }

    /// Adds a device's value of the attribute (`None`: it has none) if the constraint allows.
    fn add(&mut self, value: Option<&'a AttributeValue>) -> bool {
        let Some(v) = value else {
            return false;
        };
        let ok = match self.kind {
            ConstraintKind::Match => self.values.first().is_none_or(|first| *first == v),
            ConstraintKind::Distinct => !self.values.contains(&v),
        };
        if ok {
            self.values.push(v);
        }
        ok
    }

    /// Undoes the last [`Constraint::add`].
    fn unadd(&mut self) {
        self.values.pop();
    }
}

/// A device taken in the search.
struct Pick {
    device: u32,
    /// Request and alternative it serves.
    r: usize,
    a: usize,
    /// A share of a shared device: what it consumes of each capacity (`None`: whole, or
    /// admin access).
    share: Option<Vec<Quantity>>,
    /// Admin access: takes nothing from others.
    admin: bool,
    /// How many entries it pushed on the search's `drawn` (counters of a device it put in use).
    drew: usize,
}

struct Search<'a> {
    inventory: &'a DeviceInventory,
    selectors: &'a mut Selectors,
    usage: &'a sharing::Usage,
    /// [`Allocator::capacities`].
    capacities: &'a [u32],
    /// What one allocation for a request's spec consumes of a device, by the device's
    /// capacities id: devices alike (a node's GPUs) are asked once.
    consumptions: Consumptions,
    candidates: Vec<u32>,
    claims: &'a [&'a Claim],
    /// Per claim, per request: its alternatives (one unless `firstAvailable`), and whether
    /// it is `firstAvailable`.
    requests: Vec<Vec<(Vec<Alt<'a>>, bool)>>,
    constraints: Vec<Vec<Constraint<'a>>>,
    /// Devices taken in this search, with the claim taking each and whether as a share or
    /// with admin access (a few: scanned).
    allocating: Vec<(u32, usize, Taking)>,
    /// Counters drawn by devices this search put in use: (counter, thousandths).
    drawn: Vec<(u32, i64)>,
    /// Per claim: the devices picked, in order.
    results: Vec<Vec<Pick>>,
    /// Per claim, per request: the alternative chosen.
    chosen: Vec<Vec<usize>>,
    steps: u64,
}

impl<'a> Search<'a> {
    /// Validates the claims and resolves classes, counts and `All` sets (upstream's
    /// `validateDeviceRequest`).
    fn prepare(&mut self, node: NodeView) -> Result<(), String> {
        for &claim in self.claims {
            let key = || claim.key();
            if let Some(why) = &claim.unsupported {
                return Err(format!("claim {}: {why}", key()));
            }
            if claim.deleting {
                return Err(format!("resourceclaim {} is being deleted", key()));
            }
            if claim.allocation.is_some() {
                return Err(format!("claim {}: already allocated", key()));
            }
            let mut requests = Vec::with_capacity(claim.requests.len());
            let mut min_devices = 0usize;
            for r in &claim.requests {
                let (alts, first_available) = match &r.kind {
                    RequestKind::Exactly(spec) => {
                        (vec![self.alt(claim, &r.name, None, spec, node)?], false)
                    }
                    RequestKind::FirstAvailable(subs) => {
                        let mut alts = Vec::with_capacity(subs.len());
                        for s in subs {
                            alts.push(self.alt(claim, &r.name, Some(&s.name), &s.spec, node)?);
                        }
                        (alts, true)
                    }
                };
                min_devices += alts.iter().map(|a| a.count).min().unwrap_or(0);
                requests.push((alts, first_available));
            }
            if min_devices > ALLOCATION_RESULTS_MAX {
                return Err(format!(
                    "claim {}: number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX}",
                    key()
                ));
            }
            self.chosen.push(vec![0; requests.len()]);
            self.requests.push(requests);
            self.constraints.push(
                claim
                    .constraints
                    .iter()
                    .map(|c| Constraint {
                        requests: &c.requests,
                        attribute: &c.attribute,
                        kind: c.kind,
                        values: Vec::new(),
                    })
                    .collect(),
            );
        }
        Ok(())
    }

    fn alt(
        &mut self,
        claim: &'a Claim,
        base: &'a Arc<str>,
        sub: Option<&'a Arc<str>>,
        spec: &'a ExactRequest,
        node: NodeView,
    ) -> Result<Alt<'a>, String> {
        let key = || claim.key();
        let shown = || sub.unwrap_or(base).to_string();
        if spec.class.is_empty() {
            return Err(format!(
                "claim {}, request {}: missing device class name (unsupported request type?)",
                key(),
                shown()
            ));
        }
        let class = self.inventory.class(&spec.class).ok_or_else(|| {
            format!(
                "claim {}, request {}: could not retrieve device class {}: deviceclass.resource.k8s.io \"{}\" not found",
                key(),
                shown(),
                spec.class, spec.class
            )
        })?;
        let mut alt = Alt {
            name: match sub {
                Some(s) => Arc::from(format!("{base}/{s}")),
                None => base.clone(),
            },
            base,
            sub,
            spec,
            class,
            count: 0,
            all: None,
            class_ids: class
                .selectors
                .iter()
                .map(|e| self.selectors.id(e))
                .collect(),
            spec_ids: spec
                .selectors
                .iter()
                .map(|e| self.selectors.id(e))
                .collect(),
        };
        match spec.mode {
            AllocationMode::ExactCount(n) => alt.count = n as usize,
            AllocationMode::All => {
                if let Some(p) = self
                    .inventory
                    .unusable_pools
                    .iter()
                    .find(|p| p.nodes.iter().any(|n| n.reaches(node.name, node.labels)))
                {
                    let state = if p.invalid {
                        "currently invalid"
                    } else {
                        "currently being updated"
                    };
                    return Err(format!(
                        "claim {}, request {}: asks for all devices, but resource pool {} is {state}",
                        key(),
                        shown(),
                        p.id()
                    ));
                }
                let mut all = Vec::new();
                for i in 0..self.candidates.len() {
                    let d = self.candidates[i];
                    // As upstream, a device whose capacity cannot serve the request now (what
                    // is allocated already counted) is not one of "all".
                    if self.selectable(claim, &alt, d)? && self.capacity(&alt, d, false).is_some() {
                        all.push(d);
                    }
                }
                alt.count = all.len();
                alt.all = Some(all);
            }
        }
        Ok(alt)
    }

    /// Whether the device satisfies the class's and the request's selectors (upstream's
    /// `isSelectable`); a selector error is the claim's error.
    fn selectable(&mut self, claim: &Claim, alt: &Alt, index: u32) -> Result<bool, String> {
        let device: &Device = &self.inventory.devices[index as usize];
        if device.unsupported.is_some() {
            return Ok(false);
        }
        for (i, &s) in alt.class_ids.iter().enumerate() {
            match self.selectors.matches_id(s, index, device) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    return Err(format!(
                        "class {}: selector #{i} on device {}: {e}",
                        alt.class.name,
                        device.id()
                    ))
                }
            }
        }
        for (i, &s) in alt.spec_ids.iter().enumerate() {
            match self.selectors.matches_id(s, index, device) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(e) => {
                    return Err(format!(
                        "claim {}: selector #{i} on device {}: {e}",
                        claim.key(),
                        device.id()
                    ))
                }
            }
        }
        Ok(true)
    }

    /// What taking `device` for claim `c` by alternative `alt` takes, if it is free for that:
    /// `None` when it is not. A shared device gives a share (if its capacity allows, counting
    /// the shares allocated and those this search took); any other device is taken whole, only
    /// if nobody holds it in any way; admin access takes nothing (never the same device twice in
    /// one claim).
    fn taking(&self, device: u32, c: usize, alt: &Alt) -> Option<(Taking, Option<Vec<Quantity>>)> {
        let d = device as usize;
        if alt.spec.admin_access {
            if self
                .allocating
                .iter()
                .any(|&(x, k, _)| x == device && k == c)
            {
                return None;
            }
            let share = self.capacity(alt, device, false)?;
            return Some((Taking::Admin, share));
        }
        if self.inventory.devices[d].shared {
            if self.usage.whole[d] > 0
                || self
                    .allocating
                    .iter()
                    .any(|&(x, _, t)| x == device && t == Taking::Whole)
            {
                return None;
            }
            let share = self.capacity(alt, device, true)?;
            return Some((Taking::Share, share));
        }
        if self.usage.in_use(device) || self.allocating.iter().any(|&(x, _, _)| x == device) {
            return None;
        }
        self.capacity(alt, device, false)?;
        Some((Taking::Whole, None))
    }

    /// Whether `device`'s capacity can serve `alt`: `None` if not; `Some(Some(amounts))` for a
    /// shared device (what one share consumes of each capacity, within what its shares allocated
    /// and, with `tentative`, those of this search leave); `Some(None)` for any other device
    /// (only a request's own capacity amounts are checked, against the device's capacity).
    fn capacity(&self, alt: &Alt, device: u32, tentative: bool) -> Option<Option<Vec<Quantity>>> {
        let dev = &self.inventory.devices[device as usize];
        if !dev.shared {
            if alt.spec.capacity.is_empty() {
                return Some(None);
            }
            return sharing::consumption(dev, &alt.spec.capacity).map(|_| None);
        }
        let known = self.consumption(alt, device);
        let consumptions = self.consumptions.borrow();
        let amounts = consumptions[known].1.as_ref()?;
        let used = self.usage.consumed.get(device as usize)?;
        for (k, amount) in amounts.iter().enumerate() {
            let mut total = used
                .get(k)
                .copied()
                .unwrap_or(0)
                .saturating_add(amount.milli);
            if tentative {
                for pick in self.results.iter().flatten() {
                    if pick.device == device && !pick.admin {
                        if let Some(share) = &pick.share {
                            total = total.saturating_add(share.get(k).map_or(0, |q| q.milli));
                        }
                    }
                }
            }
            if total > dev.capacity.values().nth(k).map_or(0, |c| c.milli) {
                return None;
            }
        }
        Some(Some(amounts.clone()))
    }

    /// Where [`Search::consumptions`] keeps [`sharing::consumption`] of `device` for `alt`:
    /// asked once per request spec and device capacities in a search.
    fn consumption(&self, alt: &Alt, device: u32) -> usize {
        let id = self.capacities[device as usize];
        // The request's spec by address: it is the claim's, borrowed for the whole search.
        let key = (std::ptr::from_ref(alt.spec) as usize, id);
        let mut known = self.consumptions.borrow_mut();
        if let Some(at) = known.iter().position(|(k, _)| *k == key) {
            return at;
        }
        let dev = &self.inventory.devices[device as usize];
        known.push((key, sharing::consumption(dev, &alt.spec.capacity)));
        known.len() - 1
    }

    /// Whether a device not in use yet (nor taken in this search) fits its counters: then
    /// taking it draws them.
    fn counters(&self, device: u32) -> bool {
        let draws_none = self
            .usage
            .draws
            .get(device as usize)
            .is_none_or(|d| d.is_empty());
        draws_none
            || self.usage.in_use(device)
            || self
                .allocating
                .iter()
                .any(|&(x, _, t)| x == device && t != Taking::Admin)
            || self.usage.counters_fit(device, &self.drawn)
    }

    /// Adds a device for claim `c`'s request `r`, alternative `a`, if it is free for that and
    /// the claim's constraints allow it. `must`: the device is one of an `All` set, so a
    /// constraint refusing it is an error.
    fn add(
        &mut self,
        c: usize,
        r: usize,
        a: usize,
        device: u32,
        must: bool,
    ) -> Result<bool, String> {
        let alt = &self.requests[c][r].0[a];
        let Some((taking, share)) = self.taking(device, c, alt) else {
            return Ok(false);
        };
        // Upstream's order: in use, then counters (a shared device already in use has drawn
        // them), then constraints.
        if taking != Taking::Admin && !self.counters(device) {
            return Ok(false);
        }
        let alt = &self.requests[c][r].0[a];
        let (base, name, shown) = (
            alt.base.clone(),
            alt.name.clone(),
            alt.sub.unwrap_or(alt.base).clone(),
        );
        let d: &'a Device = &self.inventory.devices[device as usize];
        let mut added = 0;
        let mut ok = true;
        for con in self.constraints[c].iter_mut() {
            if con.applies_to(&base, &name) && !con.add(d.attributes.get(con.attribute)) {
                ok = false;
                break;
            }
            added += 1;
        }
        if !ok {
            for con in self.constraints[c].iter_mut().take(added) {
                if con.applies_to(&base, &name) {
                    con.unadd();
                }
            }
            if must {
                return Err(format!(
                    "claim {}, request {shown}: cannot add device {} because a claim constraint would not be satisfied",
                    self.claims[c].key(),
                    d.id()
                ));
            }
            return Ok(false);
        }
        let mut drew = 0;
        if taking != Taking::Admin
            && self
                .usage
                .draws
                .get(device as usize)
                .is_some_and(|d| !d.is_empty())
            && !self.usage.in_use(device)
            && !self
                .allocating
                .iter()
                .any(|&(x, _, t)| x == device && t != Taking::Admin)
        {
            if let Some(draws) = self.usage.draws.get(device as usize) {
                self.drawn.extend(draws.iter().copied());
                drew = draws.len();
            }
        }
        self.allocating.push((device, c, taking));
        self.results[c].push(Pick {
            device,
            r,
            a,
            share,
            admin: taking == Taking::Admin,
            drew,
        });
        Ok(true)
    }

    /// Undoes the last [`Search::add`] for claim `c`.
    fn remove(&mut self, c: usize) {
        let Some(pick) = self.results[c].pop() else {
            return;
        };
        let alt = &self.requests[c][pick.r].0[pick.a];
        let (base, name) = (alt.base.clone(), alt.name.clone());
        for con in self.constraints[c].iter_mut() {
            if con.applies_to(&base, &name) {
                con.unadd();
            }
        }
        self.drawn
            .truncate(self.drawn.len().saturating_sub(pick.drew));
        if let Some(p) = self
            .allocating
            .iter()
            .rposition(|&(x, k, _)| x == pick.device && k == c)
        {
            self.allocating.remove(p);
        }
    }

    /// Upstream's `allocateOne`: fills slot `k` of claim `c`'s request `r` (alternative `a`),
    /// trying candidates from index `from` on (the slots of one request take devices in
    /// candidate order: combinations, not permutations), then the rest, recursively; `true`
    /// once every claim is done.
    fn step(
        &mut self,
        c: usize,
        r: usize,
        a: usize,
        k: usize,
        in_sub: bool,
        from: usize,
    ) -> Result<bool, String> {
        self.steps += 1;
        if self.steps > STEP_LIMIT {
            return Err(format!(
                "claim {}: the search for devices stopped after {STEP_LIMIT} steps",
                self.claims[c.min(self.claims.len() - 1)].key()
            ));
        }
        if c == self.claims.len() {
            return Ok(true);
        }
        if r == self.requests[c].len() {
            return self.step(c + 1, 0, 0, 0, false, 0);
        }
        let (alts, first_available) = &self.requests[c][r];
        if *first_available && !in_sub {
            for s in 0..alts.len() {
                if self.step(c, r, s, 0, true, 0)? {
                    self.chosen[c][r] = s;
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let alt = &alts[a];
        if let Some(all) = &alt.all {
            if all.is_empty() {
                return Ok(false);
            }
        }
        if k >= alt.count {
            return self.step(c, r + 1, 0, 0, false, 0);
        }
        if self.results[c].len() + alt.count - k > ALLOCATION_RESULTS_MAX {
            return Ok(false);
        }
        if let Some(all) = &alt.all {
            let device = all[k];
            if !self.add(c, r, a, device, true)? {
                return Ok(false);
            }
            if self.step(c, r, a, k + 1, in_sub, 0)? {
                return Ok(true);
            }
            self.remove(c);
            return Ok(false);
        }
        for i in from..self.candidates.len() {
            let device = self.candidates[i];
            let claim = self.claims[c];
            if !self.selectable_at(claim, c, r, a, device)? || !self.add(c, r, a, device, false)? {
                continue;
            }
            if self.step(c, r, a, k + 1, in_sub, i + 1)? {
                return Ok(true);
            }
            self.remove(c);
        }
        Ok(false)
    }

    /// [`Search::selectable`] for an alternative already prepared (it is set aside while the
    /// caches are updated, since it borrows from the search).
    fn selectable_at(
        &mut self,
        claim: &Claim,
        c: usize,
        r: usize,
        a: usize,
        device: u32,
    ) -> Result<bool, String> {
        let requests = std::mem::take(&mut self.requests);
        let out = self.selectable(claim, &requests[c][r].0[a], device);
        self.requests = requests;
        out
    }

    /// The allocation results, with configuration and node selector as upstream builds them;
    /// a share of a shared device gets its `consumedCapacity` and a `shareID`
    /// ([`sharing::share_id`]).
    fn finish(self) -> Vec<Found> {
        let mut out = Vec::with_capacity(self.claims.len());
        for (c, claim) in self.claims.iter().enumerate() {
            let mut devices = Vec::new();
            let mut hold = Hold::default();
            let seed: &str = if claim.uid.is_empty() {
                &claim.name
            } else {
                &claim.uid
            };
            for (i, pick) in self.results[c].iter().enumerate() {
                let alt = &self.requests[c][pick.r].0[pick.a];
                let dev = &self.inventory.devices[pick.device as usize];
                let mut result = DeviceResult {
                    request: alt.name.clone(),
                    driver: dev.driver.clone(),
                    pool: dev.pool.clone(),
                    device: dev.name.clone(),
                    admin_access: alt.spec.admin_access,
                    share_id: None,
                    consumed: std::collections::BTreeMap::new(),
                };
                if let Some(amounts) = &pick.share {
                    let rank = self.results[c][..i]
                        .iter()
                        .filter(|p| p.device == pick.device)
                        .count();
                    result.share_id = Some(sharing::share_id(seed, &alt.name, &dev.id(), rank));
                    result.consumed = dev
                        .capacity
                        .values()
                        .zip(amounts)
                        .map(|(cap, q)| (cap.name.clone(), q.clone()))
                        .collect();
                    if !pick.admin {
                        hold.shares.push(Share {
                            device: pick.device,
                            consumed: amounts.iter().map(|q| q.milli).collect(),
                        });
                    }
                } else if !pick.admin {
                    hold.devices.push(pick.device);
                }
                devices.push(result);
            }
            let n_requests = claim.requests.len();
            let mut config: Vec<AllocatedConfig> = Vec::new();
            let mut class_configs: HashMap<&str, (usize, usize)> = HashMap::new();
            for (r, (alts, _)) in self.requests[c].iter().enumerate() {
                let alt = &alts[self.chosen[c][r]];
                if let Some(&(start, end)) = class_configs.get(&*alt.class.name) {
                    for cfg in &mut config[start..end] {
                        cfg.config.requests.push(alt.name.clone());
                    }
                    continue;
                }
                let start = config.len();
                for cfg in &alt.class.config {
                    let mut cfg = cfg.clone();
                    cfg.requests = vec![alt.name.clone()];
                    config.push(AllocatedConfig {
                        source: ConfigSource::Class,
                        config: cfg,
                    });
                }
                class_configs.insert(&alt.class.name, (start, config.len()));
            }
            for cfg in &claim.config {
                let applies = cfg.requests.is_empty()
                    || self.requests[c].iter().enumerate().any(|(r, (alts, _))| {
                        let alt = &alts[self.chosen[c][r]];
                        cfg.requests.iter().any(|n| n == alt.base || *n == alt.name)
                    });
                if applies {
                    config.push(AllocatedConfig {
                        source: ConfigSource::Claim,
                        config: cfg.clone(),
                    });
                }
            }
            for cfg in &mut config {
                if cfg.config.requests.len() == n_requests {
                    cfg.config.requests.clear();
                }
            }
            let node_selector = node_selector(
                self.results[c]
                    .iter()
                    .map(|p| &self.inventory.devices[p.device as usize].nodes),
            );
            out.push(Found {
                allocation: Allocation {
                    devices,
                    config,
                    node_selector,
                },
                hold,
            });
        }
        out
    }
}

/// The allocation's node selector from its devices (upstream's `createNodeSelector`): a
/// device local to a node limits it to that node; node selectors' single terms are merged;
/// devices on all nodes add nothing.
pub fn node_selector<'d>(
    devices: impl Iterator<Item = &'d DeviceNodes>,
) -> Option<Vec<SelectorTerm>> {
    let mut term = SelectorTerm::default();
    for nodes in devices {
        match nodes {
            DeviceNodes::Node(name) => return Some(vec![node_term(name)]),
            DeviceNodes::Selector(terms) => {
                if let [t] = terms.as_slice() {
                    for e in &t.expressions {
                        if !term.expressions.contains(e) {
                            term.expressions.push(e.clone());
                        }
                    }
                    for f in &t.fields {
                        if !term.fields.contains(f) {
                            term.fields.push(f.clone());
                        }
                    }
                }
            }
            DeviceNodes::All => {}
        }
    }
    (!term.expressions.is_empty() || !term.fields.is_empty()).then(|| vec![term])
}

/// `metadata.name In [node]`.
pub fn node_term(node: &str) -> SelectorTerm {
    SelectorTerm {
        expressions: Vec::new(),
        fields: vec![Requirement {
            key: "metadata.name".into(),
            op: SelectorOp::In,
            values: vec![node.to_string()],
        }],
    }
}

/// The claim kube-scheduler would make for a pod's extended resources on a node (KEP-5004),
/// with the container → request mapping: one `ExactCount` request per container and resource
/// that devices of a class serve and the node's allocatable does not (`on_node` says which
/// resources it has), named `container-<i>-request-<j>` as upstream. The claim is named after
/// pod `pod` (`<pod>-extended-resources`, the prefix of the name kube-apiserver generates), so
/// its messages and the share IDs of its devices are the pod's. `None`: nothing to serve with
/// devices.
pub fn extended_claim(
    inventory: &DeviceInventory,
    namespace: &Arc<str>,
    pod: &str,
    extended: &[ExtendedRequest],
    on_node: impl Fn(&str) -> bool,
) -> Option<(Claim, Vec<RequestMapping>)> {
    let mut requests = Vec::new();
    let mut mappings = Vec::new();
    let mut containers: Vec<&Arc<str>> = Vec::new();
    let mut per_container: Vec<usize> = Vec::new();
    for e in extended {
        if e.count <= 0 || on_node(&e.resource) {
            continue;
        }
        let Some(class) = inventory.class_for_extended(&e.resource) else {
            continue;
        };
        let i = match containers.iter().position(|c| **c == e.container) {
            Some(i) => i,
            None => {
                containers.push(&e.container);
                per_container.push(0);
                containers.len() - 1
            }
        };
        let name: Arc<str> = Arc::from(format!("container-{i}-request-{}", per_container[i]));
        per_container[i] += 1;
        requests.push(caldera_model::dra::DeviceRequest {
            name: name.clone(),
            kind: RequestKind::Exactly(ExactRequest {
                class: class.name.clone(),
                selectors: Vec::new(),
                mode: AllocationMode::ExactCount(u32::try_from(e.count).unwrap_or(u32::MAX)),
                admin_access: false,
                capacity: std::collections::BTreeMap::new(),
            }),
        });
        mappings.push(RequestMapping {
            container: e.container.clone(),
            resource: e.resource.clone(),
            request: name,
        });
    }
    if requests.is_empty() {
        return None;
    }
    Some((
        Claim {
            namespace: namespace.clone(),
            name: Arc::from(format!("{pod}-extended-resources")),
            uid: Arc::from(""),
            requests,
            constraints: Vec::new(),
            config: Vec::new(),
            allocation: None,
            reserved_for: Vec::new(),
            deleting: false,
            owner: None,
            unsupported: None,
        },
        mappings,
    ))
}
