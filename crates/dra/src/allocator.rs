//! The structured allocator: given a pod's claims, a node and the devices in use, find devices
//! for every request of every claim, or say why not. The semantics are those of
//! `k8s.io/dynamic-resource-allocation/structured` (the stable allocator kube-scheduler 1.36
//! uses): claims in order, requests in order, each device slot tried with every eligible device
//! in inventory order, constraints checked as devices are added, and the first complete
//! solution wins (an exhaustive search with backtracking). Differences are listed in
//! `docs/dra.md` ("Allocator").

use crate::cel::Selectors;
use caldera_model::dra::{
    AllocatedConfig, Allocation, AllocationMode, AttributeValue, Claim, ConfigSource, Device,
    DeviceClass, DeviceInventory, DeviceNodes, DeviceResult, ExactRequest, ExtendedRequest,
    RequestKind, RequestMapping, ALLOCATION_RESULTS_MAX,
};
use caldera_model::{Requirement, SelectorOp, SelectorTerm};
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
    /// Indices (in the inventory) of the devices it takes from others: every allocated device
    /// but those with admin access.
    pub devices: Vec<u32>,
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

/// The session's view of DRA: the inventory, which devices are in use, and the selector
/// caches. Placements take devices ([`Allocator::take`]) and undoing them gives them back
/// ([`Allocator::release`]).
pub struct Allocator {
    /// Shared with the session's device state: never copied.
    inventory: Arc<DeviceInventory>,
    /// Devices local to one node, by node name (sorted indices).
    local: HashMap<Arc<str>, Vec<u32>>,
    /// Devices reachable from more than one node (node selector or all nodes).
    shared: Vec<u32>,
    /// Per device: how many claims hold it (admin access not counted).
    held: Vec<u32>,
    /// Selector answers, per inventory device index (kept per device content inside).
    selectors: Selectors,
}

impl Allocator {
    /// Builds the allocator; devices of already allocated claims are in use.
    pub fn new(inventory: DeviceInventory) -> Self {
        Self::shared(Arc::new(inventory))
    }

    /// [`Allocator::new`] over an inventory shared with the caller (no copy).
    pub fn shared(inventory: Arc<DeviceInventory>) -> Self {
        let mut local: HashMap<Arc<str>, Vec<u32>> = HashMap::new();
        let mut shared = Vec::new();
        for (i, d) in inventory.devices.iter().enumerate() {
            match &d.nodes {
                DeviceNodes::Node(n) => local.entry(n.clone()).or_default().push(i as u32),
                _ => shared.push(i as u32),
            }
        }
        let n = inventory.devices.len();
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
        let mut out = Allocator {
            local,
            shared,
            held: vec![0; n],
            selectors,
            inventory,
        };
        let taken: Vec<u32> = out
            .inventory
            .claims
            .iter()
            .filter_map(|c| c.allocation.as_ref())
            .flat_map(|a| out.devices_of(a))
            .collect();
        out.take(&taken);
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

    /// Whether the device at `index` is allocated to a claim (admin access aside).
    pub fn in_use(&self, index: u32) -> bool {
        self.held.get(index as usize).is_some_and(|&h| h > 0)
    }

    /// Marks devices as held by one more claim.
    pub fn take(&mut self, devices: &[u32]) {
        for &d in devices {
            if let Some(h) = self.held.get_mut(d as usize) {
                *h += 1;
            }
        }
    }

    /// Gives back what [`Allocator::take`] took.
    pub fn release(&mut self, devices: &[u32]) {
        for &d in devices {
            if let Some(h) = self.held.get_mut(d as usize) {
                *h = h.saturating_sub(1);
            }
        }
    }

    /// The inventory indices of an allocation's devices that it holds (not admin access);
    /// devices no longer published are left out.
    pub fn devices_of(&self, allocation: &Allocation) -> Vec<u32> {
        allocation
            .devices
            .iter()
            .filter(|r| !r.admin_access)
            .filter_map(|r| {
                self.inventory
                    .device_index(&r.driver, &r.pool, &r.device)
                    .map(|i| i as u32)
            })
            .collect()
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
        if self.shared.is_empty() {
            // Indices of one node's devices are pushed in inventory order: sorted already.
            return local.to_vec();
        }
        let shared = self.shared.iter().copied().filter(|&i| {
            self.inventory.devices[i as usize]
                .nodes
                .reaches(node.name, node.labels)
        });
        let mut out: Vec<u32> = local.iter().copied().chain(shared).collect();
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
        let candidates = self.reachable(node);
        let mut search = Search {
            inventory: &self.inventory,
            selectors: &mut self.selectors,
            held: &self.held,
            candidates,
            claims,
            requests: Vec::with_capacity(claims.len()),
            constraints: Vec::with_capacity(claims.len()),
            allocating: Vec::new(),
            results: vec![Vec::new(); claims.len()],
            chosen: Vec::with_capacity(claims.len()),
            steps: 0,
        };
        search.prepare(node)?;
        if !search.step(0, 0, 0, 0, false)? {
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

struct Constraint<'a> {
    requests: &'a [Arc<str>],
    attribute: &'a Arc<str>,
    value: Option<&'a AttributeValue>,
    devices: usize,
}

impl Constraint<'_> {
    /// Whether it constrains the request `base` (alternative `name`: `base` or `base/sub`).
    fn applies_to(&self, base: &Arc<str>, name: &Arc<str>) -> bool {
        self.requests.is_empty() || self.requests.iter().any(|r| r == base || r == name)
    }

    /// Undoes one added device.
    fn unadd(&mut self) {
        self.devices = self.devices.saturating_sub(1);
        if self.devices == 0 {
            self.value = None;
        }
    }
}

struct Search<'a> {
    inventory: &'a DeviceInventory,
    selectors: &'a mut Selectors,
    held: &'a [u32],
    candidates: Vec<u32>,
    claims: &'a [&'a Claim],
    /// Per claim, per request: its alternatives (one unless `firstAvailable`), and whether
    /// it is `firstAvailable`.
    requests: Vec<Vec<(Vec<Alt<'a>>, bool)>>,
    constraints: Vec<Vec<Constraint<'a>>>,
    /// Devices taken in this search, with the claim taking each (a few: scanned).
    allocating: Vec<(u32, usize)>,
    /// Per claim: (device, request index, alternative index).
    results: Vec<Vec<(u32, usize, usize)>>,
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
                        value: None,
                        devices: 0,
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
                    if self.selectable(claim, &alt, d)? {
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

    fn in_use(&self, device: u32, claim: usize, admin: bool) -> bool {
        if admin {
            self.allocating.contains(&(device, claim))
        } else {
            self.held[device as usize] > 0 || self.allocating.iter().any(|&(d, _)| d == device)
        }
    }

    /// Adds a device for claim `c`'s request `r`, alternative `a`, if the claim's constraints
    /// allow it. `must`: the device is one of an `All` set, so a constraint refusing it is an
    /// error.
    fn add(
        &mut self,
        c: usize,
        r: usize,
        a: usize,
        device: u32,
        must: bool,
    ) -> Result<bool, String> {
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
            if !con.applies_to(&base, &name) {
                added += 1;
                continue;
            }
            match (d.attributes.get(con.attribute), con.value) {
                (None, _) => ok = false,
                (Some(v), None) => {
                    con.value = Some(v);
                    con.devices = 1;
                }
                (Some(v), Some(want)) if v == want => con.devices += 1,
                _ => ok = false,
            }
            if !ok {
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
        self.allocating.push((device, c));
        self.results[c].push((device, r, a));
        Ok(true)
    }

    /// Undoes the last [`Search::add`] for claim `c`.
    fn remove(&mut self, c: usize) {
        let Some((device, r, a)) = self.results[c].pop() else {
            return;
        };
        let alt = &self.requests[c][r].0[a];
        let (base, name) = (alt.base.clone(), alt.name.clone());
        for con in self.constraints[c].iter_mut() {
            if con.applies_to(&base, &name) {
                con.unadd();
            }
        }
        if let Some(p) = self.allocating.iter().rposition(|&x| x == (device, c)) {
            self.allocating.remove(p);
        }
    }

    /// Upstream's `allocateOne`: fills slot `k` of claim `c`'s request `r` (alternative `a`),
    /// then the rest, recursively; `true` once every claim is done.
    fn step(
        &mut self,
        c: usize,
        r: usize,
        a: usize,
        k: usize,
        in_sub: bool,
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
            return self.step(c + 1, 0, 0, 0, false);
        }
        let (alts, first_available) = &self.requests[c][r];
        if *first_available && !in_sub {
            for s in 0..alts.len() {
                if self.step(c, r, s, 0, true)? {
                    self.chosen[c][r] = s;
                    return Ok(true);
                }
            }
            return Ok(false);
        }
        let alt = &alts[a];
        let admin = alt.spec.admin_access;
        if let Some(all) = &alt.all {
            if all.is_empty() {
                return Ok(false);
            }
        }
        if k >= alt.count {
            return self.step(c, r + 1, 0, 0, false);
        }
        if self.results[c].len() + alt.count - k > ALLOCATION_RESULTS_MAX {
            return Ok(false);
        }
        if let Some(all) = &alt.all {
            let device = all[k];
            if self.in_use(device, c, admin) || !self.add(c, r, a, device, true)? {
                return Ok(false);
            }
            if self.step(c, r, a, k + 1, in_sub)? {
                return Ok(true);
            }
            self.remove(c);
            return Ok(false);
        }
        for i in 0..self.candidates.len() {
            let device = self.candidates[i];
            if self.in_use(device, c, admin) {
                continue;
            }
            let claim = self.claims[c];
            if !self.selectable_at(claim, c, r, a, device)? || !self.add(c, r, a, device, false)? {
                continue;
            }
            if self.step(c, r, a, k + 1, in_sub)? {
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

    /// The allocation results, with configuration and node selector as upstream builds them.
    fn finish(self) -> Vec<Found> {
        let mut out = Vec::with_capacity(self.claims.len());
        for (c, claim) in self.claims.iter().enumerate() {
            let mut devices = Vec::new();
            let mut held = Vec::new();
            for &(d, r, a) in &self.results[c] {
                let alt = &self.requests[c][r].0[a];
                let dev = &self.inventory.devices[d as usize];
                devices.push(DeviceResult {
                    request: alt.name.clone(),
                    driver: dev.driver.clone(),
                    pool: dev.pool.clone(),
                    device: dev.name.clone(),
                    admin_access: alt.spec.admin_access,
                });
                if !alt.spec.admin_access {
                    held.push(d);
                }
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
                    .map(|&(d, _, _)| &self.inventory.devices[d as usize].nodes),
            );
            out.push(Found {
                allocation: Allocation {
                    devices,
                    config,
                    node_selector,
                },
                devices: held,
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
/// resources it has), named `container-<i>-request-<j>` as upstream. `None`: nothing to serve
/// with devices.
pub fn extended_claim(
    inventory: &DeviceInventory,
    namespace: &Arc<str>,
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
            name: Arc::from(""),
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
