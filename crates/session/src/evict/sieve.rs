//! Pruning the search without probes: units whose room the gang cannot use (`Sieve`), set aside
//! instead of taken (`SetAside`).

use super::*;

/// What the preemptor's members could use, to tell units that cannot change where its gang
/// goes.
pub(super) struct Sieve {
    /// The distinct requests of the preemptor's pending members; empty when a unit's effect
    /// on the gang is not confined to the resources of the unit's own nodes (inter-pod
    /// terms, volumes, a topology or sub-groups on the preemptor's side, or its queue's quota within
    /// reach), so no unit is ever found idle.
    pub(super) requests: Vec<Resources>,
}

impl Sieve {
    /// `need`: what the gang's members still needed hold ([`gang_need`]).
    pub(super) fn new(ssn: &mut Session, job: usize, need: &Resources) -> Self {
        let off = Sieve {
            requests: Vec::new(),
        };
        let st = &ssn.state;
        if st.jobs[job].topology.is_some() || !st.sub_groups[job].is_empty() {
            return off;
        }
        let mut requests: Vec<Resources> = Vec::new();
        let mut kinds: Vec<usize> = Vec::new();
        for t in st.pending_tasks(job) {
            let spec = &st.tasks[t].spec;
            // DRA claims: whether a unit's devices serve the gang is the allocator's call.
            if !spec.pods.is_empty() || !spec.volumes.is_empty() || st.tasks[t].claims.is_some() {
                return off;
            }
            if !requests.contains(&st.tasks[t].request) {
                requests.push(st.tasks[t].request.clone());
                kinds.push(t);
            }
        }
        // Taking a unit of the preemptor's own queue (preempt) gives the queue room: with its
        // quota in reach, a unit on nodes the gang cannot use may still be what lets it in.
        // The quota is out of reach when one more member of each kind passes it on top of
        // the whole gang, with no unit taken.
        let q = st.job_queue[job];
        ssn.state.charge_queue(q, need);
        let spare = kinds.iter().all(|&t| ssn.allocatable(t).is_ok());
        ssn.state.discharge_queue(q, need);
        if !spare {
            return off;
        }
        Sieve { requests }
    }

    /// Whether a search may set aside the unit of victim `tasks` (not taken): on each of their
    /// nodes no member would fit even with them and every unit set aside there gone, and
    /// they carry no inter-pod terms.
    pub(super) fn sets_aside(
        &self,
        ssn: &Session,
        at: &At,
        tasks: &[usize],
        aside: &SetAside,
    ) -> bool {
        if self.requests.is_empty() {
            return false;
        }
        let st = &ssn.state;
        let mut freed: BTreeMap<usize, Resources> = BTreeMap::new();
        for &t in tasks {
            if !st.tasks[t].spec.pods.is_empty() {
                return false;
            }
            let Some(n) = at.node(t) else {
                continue;
            };
            freed.entry(n).or_default().add(&st.tasks[t].request);
        }
        let none = Resources::new();
        freed.into_iter().all(|(n, room)| {
            let pending = aside.on_node.get(&n).map_or(&none, |(p, _)| p);
            !self.usable_with(ssn, n, &room, pending)
        })
    }

    /// Whether a member could go on node `n` were the units set aside there gone.
    pub(super) fn usable(&self, ssn: &Session, n: usize, aside: &SetAside) -> bool {
        match aside.on_node.get(&n) {
            Some((pending, _)) if !pending.is_empty() => {
                self.usable_with(ssn, n, pending, &Resources::new())
            }
            _ => false,
        }
    }

    /// Whether some member fits on node `n` (Ready) with `more` and `also` freed there.
    pub(super) fn usable_with(
        &self,
        ssn: &Session,
        n: usize,
        more: &Resources,
        also: &Resources,
    ) -> bool {
        let node = &ssn.state.nodes[n];
        if !node.ready {
            return false;
        }
        let left = |name: &str| {
            node.allocatable.get(name) - node.used.get(name) + more.get(name) + also.get(name)
        };
        // As `Resources::fits_in`: cpu and memory always, other resources the member asks for.
        let (cpu, memory) = (left(CPU), left(MEMORY));
        self.requests.iter().any(|r| {
            r.cpu <= cpu
                && r.memory <= memory
                && r.iter()
                    .filter(|&(name, _)| name != CPU && name != MEMORY)
                    .all(|(name, v)| v <= left(name))
        })
    }

    /// Whether `taken` (victim tasks now taken off their nodes) cannot matter to the gang:
    /// on each of their nodes no member fits even with them gone, and they carry no
    /// inter-pod terms (whose reach goes beyond their node). Given back, they leave every
    /// node the gang could use exactly as it is, so a probe places it exactly as now.
    pub(super) fn idle_for(&self, ssn: &Session, at: &At, taken: &[(usize, TaskStatus)]) -> bool {
        if self.requests.is_empty() {
            return false;
        }
        let st = &ssn.state;
        let none = Resources::new();
        taken.iter().all(|&(t, _)| {
            if !st.tasks[t].spec.pods.is_empty() {
                return false;
            }
            at.node(t)
                .is_none_or(|n| !self.usable_with(ssn, n, &none, &none))
        })
    }
}

/// Units a search passed over without taking them: on nodes the preemptor's members could not
/// use even with them gone (see [`Sieve::sets_aside`]). They count as taken (budgets are
/// charged, reclaim's share counts them gone, later units leave their tasks out), so the
/// search decides exactly as if it had taken them — taking them changes nothing a probe sees, and the pruning pass would give
/// every one of them back — without the cost: on a cluster over-committed by earlier
/// preemptions most units are such. When a unit taken later makes one of their nodes usable,
/// every unit set aside there is taken at once (together they may free what one does not).
#[derive(Debug)]
pub(super) struct SetAside<'a> {
    pub(super) at: &'a At,
    /// (rank among the candidates, unit, the tasks it set aside).
    pub(super) units: Vec<(usize, &'a Unit, Vec<usize>)>,
    /// Tasks set aside and not taken since, with their node.
    pub(super) tasks: HashMap<usize, Option<usize>>,
    /// Per node: Σ requests of its tasks set aside, and the units (index in `units`) with
    /// tasks there.
    pub(super) on_node: HashMap<usize, (Resources, Vec<usize>)>,
    /// Per victim queue: Σ requests of its tasks set aside.
    pub(super) by_queue: HashMap<usize, Resources>,
    /// Per victim job: its units set aside (index in `units`).
    pub(super) by_job: HashMap<usize, Vec<usize>>,
}

impl<'a> SetAside<'a> {
    pub(super) fn new(at: &'a At) -> Self {
        SetAside {
            at,
            units: Vec::new(),
            tasks: HashMap::new(),
            on_node: HashMap::new(),
            by_queue: HashMap::new(),
            by_job: HashMap::new(),
        }
    }

    pub(super) fn add(&mut self, ssn: &Session, rank: usize, unit: &'a Unit, tasks: &[usize]) {
        let index = self.units.len();
        let mut mine = Vec::new();
        for &t in tasks {
            let node = self.at.node(t);
            let request = &ssn.state.tasks[t].request;
            self.tasks.insert(t, node);
            if let Some(n) = node {
                let (pending, units) = self.on_node.entry(n).or_default();
                pending.add(request);
                if units.last() != Some(&index) {
                    units.push(index);
                }
            }
            self.by_queue
                .entry(ssn.state.job_queue[ssn.state.tasks[t].job])
                .or_default()
                .add(request);
            mine.push(t);
        }
        self.by_job.entry(unit.job).or_default().push(index);
        self.units.push((rank, unit, mine));
    }

    /// [`take_into`], forgetting `task` as set aside.
    pub(super) fn take_into(
        &mut self,
        ssn: &mut Session,
        task: usize,
        free: &mut Resources,
    ) -> TaskStatus {
        if let Some(node) = self.tasks.remove(&task) {
            let request = &ssn.state.tasks[task].request;
            if let Some((pending, _)) = node.and_then(|n| self.on_node.get_mut(&n)) {
                pending.sub(request);
            }
            let q = ssn.state.job_queue[ssn.state.tasks[task].job];
            if let Some(sum) = self.by_queue.get_mut(&q) {
                sum.sub(request);
            }
        }
        take_into(ssn, self.at, task, free)
    }

    /// The units set aside with tasks on node `n`.
    pub(super) fn on_node(&self, n: usize) -> Vec<usize> {
        self.on_node
            .get(&n)
            .map(|(_, units)| units.clone())
            .unwrap_or_default()
    }

    /// The units of victim job `v` set aside and not taken since.
    pub(super) fn of_job(&self, v: usize) -> Vec<usize> {
        self.by_job
            .get(&v)
            .map(|units| {
                units
                    .iter()
                    .copied()
                    .filter(|&u| self.units[u].2.iter().any(|t| self.tasks.contains_key(t)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Takes units (indices in `units`) set aside: all their tasks not taken yet, wherever
    /// they are.
    pub(super) fn take_units(
        &mut self,
        ssn: &mut Session,
        units: &[usize],
        free: &mut Resources,
    ) -> Vec<Chosen<'a>> {
        let mut out = Vec::new();
        for &u in units {
            let (rank, unit) = (self.units[u].0, self.units[u].1);
            let tasks: Vec<usize> = self.units[u]
                .2
                .iter()
                .copied()
                .filter(|t| self.tasks.contains_key(t))
                .collect();
            if tasks.is_empty() {
                continue;
            }
            let taken = tasks
                .into_iter()
                .map(|t| (t, self.take_into(ssn, t, free)))
                .collect();
            out.push((rank, unit, taken));
        }
        out
    }

    /// `free` as it would be with every unit set aside taken too.
    pub(super) fn room_with(&self, ssn: &Session, free: &Resources) -> Resources {
        let mut out = free.clone();
        for (&n, (pending, _)) in &self.on_node {
            if pending.is_empty() || !ssn.state.nodes[n].ready {
                continue;
            }
            let node = &ssn.state.nodes[n];
            out.sub(&room(ssn, n));
            let mut after = node.idle();
            after.add(pending);
            for (r, v) in after.iter() {
                if v > 0 {
                    out.add_named(r, v);
                }
            }
        }
        out
    }
}
