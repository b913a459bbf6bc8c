//! The session: the working state, the plugins, statements, and node selection.

use crate::plugin::{FitReason, Hooks, Plugin, Verdict};
use crate::state::{Holdup, State};
use crate::track::{Hold, Tracker};
use caldera_model::{PlacementSpec, Resources, Task, TaskStatus};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;

/// A plugin and the hooks its config switched on.
#[derive(Debug)]
pub struct Slot {
    /// The plugin.
    pub plugin: Box<dyn Plugin>,
    /// Enabled hooks.
    pub hooks: Hooks,
}

/// Counters of one session, for metrics and benchmarks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Members placed and committed.
    pub placements: u64,
    /// Job attempts (gang statements opened).
    pub attempts: u64,
    /// Attempts answered from the failure cache without placing anything.
    pub cached_failures: u64,
    /// Statements discarded.
    pub discards: u64,
    /// Jobs admitted by enqueue.
    pub admitted: u64,
    /// Pods chosen as victims, by action (`preempt`, `reclaim`).
    pub victims: BTreeMap<&'static str, u64>,
    /// Preemption attempts, by result (`evicted`, `no_victims`).
    pub preemption_attempts: BTreeMap<&'static str, u64>,
    /// Gangs with a topology rule placed, by the tier of their domain (`"1"`, `"2"`, …, or
    /// `"root"`).
    pub topology_placements: BTreeMap<String, u64>,
    /// Pods moved by `consolidate`.
    pub consolidation_moves: u64,
    /// `consolidate`'s tries per waiting job, by result (`moved`, `not_fragmented`,
    /// `no_move`, `no_room_for_moved`, `limit`, `no_podgroup`).
    pub consolidation_attempts: BTreeMap<&'static str, u64>,
    /// Gangs aged by fairshare's `maxWait` at session open (see [`crate::aging`]).
    pub aged: u64,
}

/// Nodes that pass the static filters for one placement spec.
#[derive(Debug)]
struct StaticNodes {
    feasible: Vec<u32>,
    reasons: BTreeMap<FitReason, u32>,
}

/// An all-or-nothing transaction: placements that are committed together or undone in reverse.
#[derive(Debug, Default)]
pub struct Statement {
    ops: Vec<(usize, usize)>,
}

impl Statement {
    /// An empty statement.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of placements in it.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether it holds no placement.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Its placements: (task, node), in order.
    pub fn ops(&self) -> &[(usize, usize)] {
        &self.ops
    }

    /// Takes the placements from `at` on into a statement of their own (to undo them alone
    /// with [`Session::discard`]).
    pub(crate) fn split_off(&mut self, at: usize) -> Statement {
        Statement {
            ops: self.ops.split_off(at),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    score: f64,
    node: u32,
    version: u64,
}

impl Eq for Entry {}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Highest score first; ties go to the lower index, i.e. the smaller node name.
        self.score
            .total_cmp(&other.score)
            .then_with(|| other.node.cmp(&self.node))
            .then_with(|| self.version.cmp(&other.version))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Candidate nodes for one kind of member (same request and placement spec): a max-heap of
/// scores. Entries are refreshed lazily: each node's entry carries the node's version when it
/// was scored, and a node whose load changed is rescored when it reaches the top. Without a
/// topology restriction the candidates of a kind live for the whole session, and an attempt
/// only rescores the nodes changed since the kind was last used (the session's change log),
/// so a gang costs O(changed nodes + members × log nodes), not O(nodes).
#[derive(Debug)]
pub struct Candidates {
    heap: BinaryHeap<Entry>,
    /// Per node: the version of its live heap entry, or [`NO_ENTRY`].
    latest: Vec<u64>,
    /// Per node: passes the static filters and lies in the placement's domain.
    in_scope: Vec<bool>,
    /// Per node: why it does not fit now (a set in [`Session`]'s reasons), or [`FITS`].
    dropped: Vec<u32>,
    /// Out-of-scope nodes counted by reason.
    static_reasons: BTreeMap<FitReason, u32>,
    considered: u32,
    /// How much of the session's change log this kind has seen.
    seen: usize,
    /// Inter-pod constraints are checked when a node is picked, not when it is scored (see
    /// [`Session::candidates`]).
    deferred: bool,
}

const NO_ENTRY: u64 = u64::MAX;

/// In [`Candidates::dropped`]: the node is not known not to fit.
const FITS: u32 = u32::MAX;

/// Why nodes do not fit, interned for the session: a node's reasons are one id, so thousands
/// of nodes failing alike cost no allocation each and are counted by id for the message.
#[derive(Debug, Default)]
struct Reasons {
    sets: Vec<Vec<FitReason>>,
    ids: HashMap<Vec<FitReason>, u32>,
    /// Sets of one reason, by it.
    single: HashMap<FitReason, u32>,
    /// The set `Insufficient <resource>`, by resource name (a few: a list).
    insufficient: Vec<(String, u32)>,
}

impl Reasons {
    fn of(&mut self, reasons: Vec<FitReason>) -> u32 {
        if let Some(&id) = self.ids.get(&reasons) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.sets.push(reasons.clone());
        self.ids.insert(reasons, id);
        id
    }

    fn single(&mut self, reason: FitReason) -> u32 {
        if let Some(&id) = self.single.get(&reason) {
            return id;
        }
        let id = self.of(vec![reason.clone()]);
        self.single.insert(reason, id);
        id
    }

    fn insufficient(&mut self, resource: &str) -> u32 {
        if let Some((_, id)) = self.insufficient.iter().find(|(r, _)| r == resource) {
            return *id;
        }
        let id = self.single(format!("Insufficient {resource}"));
        self.insufficient.push((resource.to_string(), id));
        id
    }
}

/// Why a node booked for another gang was not considered.
pub use crate::track::BOOKED;

/// Identifies a kind of member: what it asks for, where it may go, and what other pods'
/// constraints see of it (see [`crate::state::State::traits`]).
pub type KindKey = (Resources, PlacementSpec, u32);

/// Restricts or biases node choice during an attempt (topology).
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Only these nodes (sorted indices); `None` = all.
    pub only: Option<Arc<Vec<u32>>>,
    /// Score bonus per node (preferred topology).
    pub bonus: Option<Arc<Vec<f64>>>,
}

/// What the actions of a session decided, in the order they decided it: the one accumulator
/// closing the session reads ([`crate::close::close`]) to write the plan. Actions add to it;
/// nothing else of the session is an output.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    /// Committed placements, in commit order.
    pub committed: Vec<(usize, usize)>,
    /// Placements committed but not bound: members that keep their node until their claims
    /// are bound (see [`crate::volumes`]).
    pub volume_waits: Vec<(usize, usize)>,
    /// Jobs whose wait for volumes ended without them (timeout, provisioning failed): their
    /// claims' selections are undone and their nodes released, with why.
    pub volume_releases: Vec<(usize, String)>,
    /// `nominatedNodeName` writes: (task, node or `None` to clear).
    pub nominations: Vec<(usize, Option<Arc<str>>)>,
    /// Preemptions and reclaims decided in this session (see [`crate::evict`]).
    pub preemptions: Vec<crate::evict::decision::Preemption>,
    /// Consolidations decided in this session (see [`crate::consolidate`]).
    pub consolidations: Vec<crate::consolidate::decision::Consolidation>,
    /// Per job: the room held for pods moved to make room for it (see
    /// [`crate::consolidate`]).
    pub move_holds: Vec<Vec<crate::consolidate::decision::Hold>>,
}

impl Decisions {
    /// Nothing decided yet, for a session of `jobs` jobs.
    pub fn new(jobs: usize) -> Self {
        Decisions {
            move_holds: vec![Vec::new(); jobs],
            ..Decisions::default()
        }
    }
}

/// The session: state plus plugins plus bookkeeping.
#[derive(Debug)]
pub struct Session {
    /// The working state.
    pub state: State,
    /// Plugins in tier order, then config order.
    pub slots: Vec<Slot>,
    /// What the actions decided: what closing the session writes (see [`Decisions`]).
    pub decisions: Decisions,
    /// Counters.
    pub stats: Stats,
    /// Bumped on every commit; failure-cache entries are valid for one epoch.
    pub epoch: u64,
    /// Gangs that found no room, by member kind, topology and queue: (epoch, members that did
    /// fit, fit message).
    pub fail_cache: HashMap<FailKey, (u64, u32, String, Option<crate::shortfall::Shortfall>)>,
    static_cache: HashMap<PlacementSpec, Arc<StaticNodes>>,
    node_version: Vec<u64>,
    version_counter: u64,
    /// Every node whose load changed, in order (placements and undos).
    pub(crate) change_log: Vec<u32>,
    /// Candidates per kind of member, kept across attempts (no topology restriction only).
    pub kind_cache: HashMap<KindKey, Candidates>,
    /// Why nodes did not fit, by id (see [`Candidates`]).
    reasons: RefCell<Reasons>,
    /// Capacity held for pending tasks (see [`crate::reserve`]).
    pub reservations: crate::reserve::ledger::Reservations,
    /// The jobs aged by fairshare's `maxWait` (see [`crate::aging`]).
    pub aging: crate::aging::marks::Aging,
    /// The placements of the last successful [`crate::attempt::probe`]: its answer, handed
    /// back through the placement functions (a probe decides nothing).
    pub(crate) probed: Vec<(usize, usize)>,
    /// Per job: all its members in task order, sorted on first use in the session
    /// ([`Session::first_task`]; task order reads nothing a session changes).
    member_order: RefCell<HashMap<usize, Arc<[usize]>>>,
    /// What may evict: `preempt` and `reclaim` switches from the config.
    pub eviction: crate::evict::decision::Switches,
    /// One-tier topology trees of node labels, built on first use (see
    /// [`Session::topology_tree`]).
    pub(crate) label_trees: HashMap<Arc<str>, Arc<caldera_model::TopologyTree>>,
    /// Σ allocatable and Σ idle per domain of each tree in use, kept current from
    /// `change_log` (see [`crate::topology::rooms::DomainRooms`]).
    pub(crate) domain_rooms:
        HashMap<caldera_model::TopologySource, crate::topology::rooms::DomainRooms>,
    /// While a preemption search tries one domain: the domain (index in the tree of the
    /// preemptor's rule) a hard-topology gang must be placed inside (see [`crate::evict`]).
    pub(crate) topology_within: Option<u32>,
    /// Scratch: the nodes the trackers touched in the latest place or unplace.
    touched: Vec<u32>,
}

/// Identifies gangs that place alike: member request, spec and traits, topology, queue index.
pub type FailKey = (
    Resources,
    PlacementSpec,
    u32,
    Option<caldera_model::Topology>,
    usize,
);

impl Session {
    /// Opens a session over `state` with `slots`.
    pub fn new(state: State, slots: Vec<Slot>) -> Self {
        let n = state.nodes.len();
        let jobs = state.jobs.len();
        let mut s = Session {
            state,
            slots,
            decisions: Decisions::new(jobs),
            stats: Stats::default(),
            epoch: 0,
            fail_cache: HashMap::new(),
            static_cache: HashMap::new(),
            node_version: vec![0; n],
            version_counter: 0,
            change_log: Vec::new(),
            kind_cache: HashMap::new(),
            reasons: RefCell::default(),
            reservations: crate::reserve::ledger::Reservations::new(jobs),
            aging: crate::aging::marks::Aging::default(),
            eviction: crate::evict::decision::Switches::default(),
            probed: Vec::new(),
            member_order: RefCell::default(),
            label_trees: HashMap::new(),
            domain_rooms: HashMap::new(),
            topology_within: None,
            touched: Vec::new(),
        };
        for slot in &mut s.slots {
            slot.plugin.on_open(&s.state);
        }
        s
    }

    // ----- combined plugin answers (SPEC §6) -----

    /// Job order: first plugin that prefers a side decides; then creation time, then id.
    /// With jobs aged by fairshare's `maxWait`, aging decides right after the `priority`
    /// plugin, before the others (see [`crate::aging`]).
    pub fn job_order(&self, a: usize, b: usize) -> Ordering {
        let mut aging = self.aging.any();
        for s in self.slots.iter().filter(|s| s.hooks.job_order) {
            if aging && s.plugin.name() != "priority" {
                aging = false;
                let o = self.aging.order(a, b);
                if o != Ordering::Equal {
                    return o;
                }
            }
            let o = s.plugin.job_order(&self.state, a, b);
            if o != Ordering::Equal {
                return o;
            }
        }
        if aging {
            let o = self.aging.order(a, b);
            if o != Ordering::Equal {
                return o;
            }
        }
        let (ja, jb) = (&self.state.jobs[a], &self.state.jobs[b]);
        ja.created.cmp(&jb.created).then_with(|| ja.id.cmp(&jb.id))
    }

    /// Queue order: first plugin that prefers a side decides; then name.
    pub fn queue_order(&self, a: usize, b: usize) -> Ordering {
        for s in self.slots.iter().filter(|s| s.hooks.queue_order) {
            let o = s.plugin.queue_order(&self.state, a, b);
            if o != Ordering::Equal {
                return o;
            }
        }
        self.state.queues[a].name.cmp(&self.state.queues[b].name)
    }

    /// Task order: first plugin that prefers a side decides; then creation time, then name.
    pub fn task_order(&self, a: usize, b: usize) -> Ordering {
        let (ta, tb) = (&self.state.tasks[a], &self.state.tasks[b]);
        for s in self.slots.iter().filter(|s| s.hooks.task_order) {
            let o = s.plugin.task_order(&self.state, ta, tb);
            if o != Ordering::Equal {
                return o;
            }
        }
        ta.created
            .cmp(&tb.created)
            .then_with(|| ta.namespace.cmp(&tb.namespace))
            .then_with(|| ta.name.cmp(&tb.name))
    }

    /// Invalid if any plugin says so.
    pub fn job_invalid(&self, job: usize) -> Option<String> {
        self.slots
            .iter()
            .find_map(|s| s.plugin.job_invalid(&self.state, job))
    }

    /// Ready unless a plugin that answers says not.
    pub fn job_ready(&self, job: usize) -> bool {
        self.slots
            .iter()
            .filter(|s| s.hooks.job_ready)
            .all(|s| s.plugin.job_ready(&self.state, job) != Some(false))
    }

    /// Any reject ⇒ rejected (the first reject is reported); else admitted.
    pub fn enqueueable(&self, job: usize) -> Verdict {
        for s in self.slots.iter().filter(|s| s.hooks.enqueue) {
            let v = s.plugin.enqueueable(&self.state, job);
            if matches!(v, Verdict::Reject { .. }) {
                return v;
            }
        }
        Verdict::Permit
    }

    /// Tells plugins that `job` was admitted.
    pub fn admit(&mut self, job: usize) {
        self.state.job_runs[job].admitted = true;
        self.stats.admitted += 1;
        for s in &mut self.slots {
            s.plugin.on_enqueue(&self.state, job);
        }
    }

    /// The queue's deserved share, if a plugin computes one (proportion, capacity).
    pub fn deserved(&self, queue: usize) -> Option<Resources> {
        self.slots.iter().find_map(|s| s.plugin.deserved(queue))
    }

    /// Any plugin says overused ⇒ overused.
    pub fn overused(&self, queue: usize) -> bool {
        self.slots
            .iter()
            .filter(|s| s.hooks.overused)
            .any(|s| s.plugin.overused(&self.state, queue))
    }

    /// All plugins must allow the placement given the queue's share.
    pub fn allocatable(&self, task: usize) -> Result<(), String> {
        let t = &self.state.tasks[task];
        let q = self.state.job_queue[t.job];
        for s in self.slots.iter().filter(|s| s.hooks.allocatable) {
            s.plugin.allocatable(&self.state, q, t)?;
        }
        Ok(())
    }

    // ----- statements -----

    /// Places `task` on `node` inside `stmt`.
    pub fn allocate(&mut self, stmt: &mut Statement, task: usize, node: usize) {
        let t = &mut self.state.tasks[task];
        t.status = TaskStatus::Allocated;
        t.node = Some(self.state.nodes[node].name.clone());
        self.place(task, Hold::Placed(node));
        stmt.ops.push((task, node));
        for s in &mut self.slots {
            s.plugin.on_allocate(&self.state, task);
        }
    }

    /// Undoes every placement of `stmt`, newest first, leaving the session as before.
    pub fn discard(&mut self, stmt: Statement) {
        for &(task, node) in stmt.ops.iter().rev() {
            for s in self.slots.iter_mut().rev() {
                s.plugin.on_deallocate(&self.state, task);
            }
            let t = &mut self.state.tasks[task];
            t.status = TaskStatus::Pending;
            t.node = None;
            self.unplace(task, Hold::Placed(node));
        }
        if !stmt.ops.is_empty() {
            self.stats.discards += 1;
        }
    }

    /// Tells every tracker that `task` holds room as `hold` says, and re-scores the nodes
    /// whose fit that changed.
    pub(crate) fn place(&mut self, task: usize, hold: Hold) {
        self.track(task, hold, true);
    }

    /// Undoes [`Session::place`].
    pub(crate) fn unplace(&mut self, task: usize, hold: Hold) {
        self.track(task, hold, false);
    }

    fn track(&mut self, task: usize, hold: Hold, place: bool) {
        // One buffer for the session: telling the trackers allocates nothing of its own.
        let mut touched = std::mem::take(&mut self.touched);
        self.state.track(task, hold, place, &mut touched);
        self.touch_nodes(&touched);
        touched.clear();
        self.touched = touched;
    }

    /// Commits every placement of `stmt` into the plan.
    pub fn commit(&mut self, stmt: Statement) {
        for &(task, node) in &stmt.ops {
            self.state.tasks[task].status = TaskStatus::Binding;
            self.decisions.committed.push((task, node));
        }
        self.stats.placements += stmt.ops.len() as u64;
        if !stmt.ops.is_empty() {
            self.epoch += 1;
        }
    }

    /// Commits every placement of `stmt` as held: the members keep their nodes (for everyone
    /// else they are placed) but are not bound in this plan; their claims' writes are.
    pub fn commit_waiting_for_volumes(&mut self, stmt: Statement) {
        for &(task, node) in &stmt.ops {
            self.state.tasks[task].status = TaskStatus::Binding;
            self.decisions.volume_waits.push((task, node));
        }
        self.stats.placements += stmt.ops.len() as u64;
        if !stmt.ops.is_empty() {
            self.epoch += 1;
        }
    }

    fn bump(&mut self, node: usize) {
        self.version_counter += 1;
        self.node_version[node] = self.version_counter;
        self.change_log.push(node as u32);
    }

    /// Marks every node in `nodes` as changed, so cached scores are recomputed.
    pub fn touch_nodes(&mut self, nodes: &[u32]) {
        for &n in nodes {
            self.bump(n as usize);
        }
    }

    // ----- node selection -----

    fn static_nodes(&mut self, task: usize) -> Arc<StaticNodes> {
        let spec = &self.state.tasks[task].spec;
        if let Some(s) = self.static_cache.get(&**spec) {
            return s.clone();
        }
        let t = &self.state.tasks[task];
        let mut feasible = Vec::new();
        let mut reasons = BTreeMap::new();
        'nodes: for (i, n) in self.state.nodes.iter().enumerate() {
            if !n.ready {
                *reasons
                    .entry("node(s) were not ready".to_string())
                    .or_insert(0) += 1;
                continue;
            }
            for s in self.slots.iter().filter(|s| s.hooks.predicate) {
                if let Err(r) = s.plugin.filter_static(t, n) {
                    *reasons.entry(r).or_insert(0) += 1;
                    continue 'nodes;
                }
            }
            feasible.push(i as u32);
        }
        let sn = Arc::new(StaticNodes { feasible, reasons });
        self.static_cache.insert((**spec).clone(), sn.clone());
        sn
    }

    /// Whether `task` may go on `node` now: every static filter, then the dynamic check
    /// (resources, plugin filters, inter-pod terms).
    pub fn fits_on(&mut self, task: usize, node: usize) -> bool {
        let sn = self.static_nodes(task);
        sn.feasible.binary_search(&(node as u32)).is_ok()
            && self.fits(&self.state.tasks[task], node).is_ok()
    }

    /// The dynamic check of `task` on `node`: resources, then plugin filters. `Err` carries
    /// the id of every reason that applies (each Insufficient resource counts, as
    /// kube-scheduler does).
    fn fits(&self, task: &Task, node: usize) -> Result<(), u32> {
        let n = &self.state.nodes[node];
        if !task.request.fits_in_left(&n.allocatable, &n.used) {
            let short = || task.request.insufficient_left(&n.allocatable, &n.used);
            let mut first = short();
            let mut reasons = self.reasons.borrow_mut();
            // A resource devices serve on this node is DRA's: kube-scheduler says so.
            let devices = &self.state.trackers.devices;
            let say = |r: &str| {
                if devices.backs(r, node) {
                    crate::devices::CANNOT_ALLOCATE.to_string()
                } else {
                    format!("Insufficient {r}")
                }
            };
            return Err(match (first.next(), first.next()) {
                (Some(r), None) if !devices.backs(r, node) => reasons.insufficient(r),
                _ => {
                    let mut all: Vec<String> = short().map(say).collect();
                    all.dedup();
                    reasons.of(all)
                }
            });
        }
        for s in self.slots.iter().filter(|s| s.hooks.predicate) {
            s.plugin
                .filter(&self.state, task, n)
                .map_err(|r| self.reasons.borrow_mut().single(r))?;
        }
        self.state
            .trackers
            .check(&self.state.nodes, task, node)
            .map_err(|r| self.reasons.borrow_mut().single(r))
    }

    fn score(&self, task: &Task, node: usize, placement: &Placement) -> f64 {
        let n = &self.state.nodes[node];
        let mut total = 0.0;
        for s in self
            .slots
            .iter()
            .filter(|s| s.hooks.node_order && s.plugin.scores_nodes())
        {
            total += s.plugin.score(&self.state, task, n);
        }
        if let Some(b) = &placement.bonus {
            total += b.get(node).copied().unwrap_or(0.0);
        }
        total
    }

    /// Scores `node` for `task` into `c`, or records why it does not fit.
    fn evaluate(&self, task: usize, node: u32, c: &mut Candidates, placement: &Placement) {
        let t = &self.state.tasks[task];
        let n = node as usize;
        self.state.trackers.interpod.defer(c.deferred);
        let fit = self.fits(t, n);
        self.state.trackers.interpod.defer(false);
        match fit {
            Ok(()) => {
                let version = self.node_version[n];
                c.heap.push(Entry {
                    score: self.score(t, n, placement),
                    node,
                    version,
                });
                c.latest[n] = version;
                c.dropped[n] = FITS;
            }
            Err(reasons) => {
                c.latest[n] = NO_ENTRY;
                c.dropped[n] = reasons;
            }
        }
    }

    /// Builds the candidates for `task`'s kind of member, scoring every node in scope.
    pub fn candidates(&mut self, task: usize, placement: &Placement) -> Candidates {
        let sn = self.static_nodes(task);
        let n = self.state.nodes.len();
        let mut c = Candidates {
            heap: BinaryHeap::new(),
            latest: vec![NO_ENTRY; n],
            in_scope: vec![false; n],
            dropped: vec![FITS; n],
            static_reasons: BTreeMap::new(),
            considered: 0,
            seen: self.change_log.len(),
            deferred: self.state.tasks[task]
                .spec
                .pods
                .verdict_only_crosses_nodes(),
        };
        match &placement.only {
            None => {
                c.static_reasons = sn.reasons.clone();
                c.considered = sn.feasible.len() as u32 + sn.reasons.values().sum::<u32>();
                for &node in &sn.feasible {
                    c.in_scope[node as usize] = true;
                }
            }
            Some(only) => {
                c.considered = only.len() as u32;
                // Intersect: both lists are sorted.
                let mut it = sn.feasible.iter().peekable();
                for &node in only.iter() {
                    while it.next_if(|&&f| f < node).is_some() {}
                    if it.peek() == Some(&&node) {
                        c.in_scope[node as usize] = true;
                    } else {
                        *c.static_reasons
                            .entry("node(s) didn't match Pod's node affinity/selector".into())
                            .or_insert(0) += 1;
                    }
                }
            }
        }
        // Only the nodes in scope are visited (a topology domain is a few of thousands).
        let scope: &[u32] = match &placement.only {
            None => &sn.feasible,
            Some(only) => only,
        };
        if self.state.has_bookings {
            for &node in scope {
                let node = node as usize;
                if !c.in_scope[node] {
                    continue;
                }
                let bookings = &self.state.trackers.bookings;
                if let Err(why) = bookings.check(&self.state.nodes, &self.state.tasks[task], node) {
                    c.in_scope[node] = false;
                    *c.static_reasons.entry(why).or_insert(0) += 1;
                }
            }
        }
        for &node in scope {
            if c.in_scope[node as usize] {
                self.evaluate(task, node, &mut c, placement);
            }
        }
        c
    }

    /// Brings kept candidates up to date with every node changed since they were last used.
    pub fn catch_up(&self, task: usize, c: &mut Candidates, placement: &Placement) {
        for i in c.seen..self.change_log.len() {
            let node = self.change_log[i];
            let n = node as usize;
            if c.in_scope[n] && c.latest[n] != self.node_version[n] {
                self.evaluate(task, node, c, placement);
            }
        }
        c.seen = self.change_log.len();
    }

    /// Picks the best node for `task` from `cands` (highest score, then name), rescoring
    /// nodes whose load changed since they were scored. `None` when no node fits.
    pub fn pick(
        &mut self,
        task: usize,
        cands: &mut Candidates,
        placement: &Placement,
    ) -> Option<usize> {
        let mut parked = Vec::new();
        let mut found = None;
        while let Some(e) = cands.heap.pop() {
            let node = e.node as usize;
            if cands.latest[node] != e.version {
                continue; // superseded by a newer entry, or the node was dropped
            }
            if e.version == self.node_version[node] {
                if cands.deferred {
                    // Scored without its inter-pod constraints, which depend on other nodes:
                    // check them now; a node failing them waits aside for later members.
                    if let Err(reasons) = self.fits(&self.state.tasks[task], node) {
                        parked.push((e, reasons));
                        continue;
                    }
                }
                cands.latest[node] = NO_ENTRY;
                found = Some(node);
                break;
            }
            self.evaluate(task, e.node, cands, placement);
        }
        for (e, reasons) in parked {
            if found.is_some() {
                cands.heap.push(e);
            } else {
                // Nothing fits: these nodes' reasons go into the fit message.
                cands.latest[e.node as usize] = NO_ENTRY;
                cands.dropped[e.node as usize] = reasons;
            }
        }
        found
    }

    /// After placing on `node`, puts it back among `cands` if another member still fits.
    pub fn refresh(
        &mut self,
        task: usize,
        node: usize,
        cands: &mut Candidates,
        placement: &Placement,
    ) {
        self.evaluate(task, node as u32, cands, placement);
    }

    /// The kube-scheduler style message for a member that found no node.
    pub fn fit_message(&self, cands: &Candidates) -> String {
        let reasons = self.reasons.borrow();
        let mut by_set = vec![0u32; reasons.sets.len()];
        for &id in cands.dropped.iter().filter(|&&id| id != FITS) {
            by_set[id as usize] += 1;
        }
        let mut counts: BTreeMap<&str, u32> = cands
            .static_reasons
            .iter()
            .map(|(r, c)| (r.as_str(), *c))
            .collect();
        for (set, &n) in reasons.sets.iter().zip(&by_set).filter(|(_, &n)| n > 0) {
            for r in set {
                *counts.entry(r.as_str()).or_insert(0) += n;
            }
        }
        let mut parts: Vec<String> = counts.iter().map(|(r, c)| format!("{c} {r}")).collect();
        parts.sort();
        format!(
            "0/{} nodes are available: {}.",
            cands.considered,
            parts.join(", ")
        )
    }

    /// Orders `tasks` (pending members of `job`) for placement: members of roles still short
    /// of their `minTaskMember` first, then the rest, each in task order.
    pub fn order_tasks(&self, job: usize, mut tasks: Vec<usize>) -> Vec<usize> {
        tasks.sort_by(|&a, &b| self.task_order(a, b));
        let mut short = self.short_roles(job);
        if short.is_empty() {
            return tasks;
        }
        let (mut first, mut rest) = (Vec::new(), Vec::new());
        for t in tasks {
            let role = self.state.tasks[t].role.as_deref();
            match role.and_then(|r| short.get_mut(r)) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    first.push(t);
                }
                _ => rest.push(t),
            }
        }
        first.extend(rest);
        first
    }

    /// The first of the members of `job` that `candidate` accepts, in [`Session::order_tasks`]'
    /// order. A satisfied gang (an elastic one, or a group of `minMember` 1) places one more
    /// member per attempt: sorting its backlog at each made a group of n members cost
    /// n² log n comparisons (5,000 members: 27 s in one session). The job's members are
    /// sorted once per session instead, and each attempt walks them to the first candidate.
    pub fn first_task(&self, job: usize, candidate: impl Fn(usize) -> bool) -> Option<usize> {
        let order = {
            let mut cache = self.member_order.borrow_mut();
            cache
                .entry(job)
                .or_insert_with(|| {
                    let mut all = self.state.jobs[job].tasks.clone();
                    all.sort_by(|&a, &b| self.task_order(a, b));
                    all.into()
                })
                .clone()
        };
        let short = self.short_roles(job);
        if !short.is_empty() {
            let of_short_role = |t: usize| {
                self.state.tasks[t]
                    .role
                    .as_deref()
                    .is_some_and(|r| short.contains_key(r))
            };
            if let Some(&t) = order.iter().find(|&&t| of_short_role(t) && candidate(t)) {
                return Some(t);
            }
        }
        order.iter().copied().find(|&t| candidate(t))
    }

    /// The roles of `job` still short of their `minTaskMember`, and by how many members.
    fn short_roles(&self, job: usize) -> BTreeMap<&str, u32> {
        let j = &self.state.jobs[job];
        let mut short: BTreeMap<&str, u32> = BTreeMap::new();
        for (role, &min) in &j.min_task_member {
            let have = j
                .tasks
                .iter()
                .filter(|&&t| {
                    let t = &self.state.tasks[t];
                    t.status.is_ready() && t.role.as_deref() == Some(role.as_str())
                })
                .count() as u32;
            if have < min {
                short.insert(role, min - have);
            }
        }
        short
    }

    /// How many members like `task` fit on `node` as it is now, and what stops the next one
    /// (the first failing filter, or the resource that runs out). For `explain`.
    pub fn how_many_fit(&self, task: usize, node: usize) -> (u32, Option<String>) {
        let t = &self.state.tasks[task];
        let n = &self.state.nodes[node];
        if !n.ready {
            return (0, Some("node is not ready".into()));
        }
        // A member allocate never tries (its claims keep it off every node).
        if let Some(why) = t.blocked() {
            return (0, Some(why.to_string()));
        }
        for s in self.slots.iter().filter(|s| s.hooks.predicate) {
            if let Err(r) = s.plugin.filter_static(t, n) {
                return (0, Some(r));
            }
        }
        if let Err(r) = self.state.trackers.check(&self.state.nodes, t, node) {
            return (0, Some(r));
        }
        let mut probe = n.clone();
        let mut fit = 0u32;
        // Bounded: at most max_pods members fit on any node.
        while fit < 10_000 {
            let idle = probe.idle();
            if !t.request.fits_in(&idle) {
                let short: Vec<String> = t
                    .request
                    .insufficient(&idle)
                    .map(|r| format!("Insufficient {r}"))
                    .collect();
                return (fit, Some(short.join(", ")));
            }
            for s in self.slots.iter().filter(|s| s.hooks.predicate) {
                if let Err(r) = s.plugin.filter(&self.state, t, &probe) {
                    return (fit, Some(r));
                }
            }
            if t.request.is_empty() && fit >= 1 && probe.pod_count >= probe.max_pods {
                break;
            }
            probe.add_pod(&t.request, &t.spec.host_ports);
            fit += 1;
        }
        (fit, None)
    }

    /// Records why `job` was held (the first reason wins within a session).
    pub fn hold(&mut self, job: usize, holdup: Holdup) {
        let run = &mut self.state.job_runs[job];
        if run.holdup.is_none() {
            run.holdup = Some(holdup);
        }
    }

    /// Clears a job's holdup (it was placed after all).
    pub fn clear_hold(&mut self, job: usize) {
        self.state.job_runs[job].holdup = None;
    }

    /// Σ idle over Ready nodes in `nodes` (what a gang that found no room was told is free).
    pub fn idle_of(&self, nodes: &[u32]) -> Resources {
        // Σ (allocatable − used) as Σ allocatable − Σ used: no idle vector built per node (a
        // failed gang's message sums every node of its scope).
        let (mut allocatable, mut used) = (Resources::new(), Resources::new());
        for &n in nodes {
            let node = &self.state.nodes[n as usize];
            if node.ready {
                allocatable.add(&node.allocatable);
                used.add(&node.used);
            }
        }
        allocatable.sub(&used);
        allocatable
    }

    /// Σ (allocatable − used) over every Ready node, from the session's running sums.
    pub fn idle_all(&self) -> Resources {
        let idle = self.state.total.minus(&self.state.used_now);
        // The running sums never drift from the nodes (every test build checks it).
        #[cfg(debug_assertions)]
        {
            let all: Vec<u32> = (0..self.state.nodes.len() as u32).collect();
            debug_assert_eq!(idle, self.idle_of(&all), "used_now drifted from the nodes");
        }
        idle
    }
}
