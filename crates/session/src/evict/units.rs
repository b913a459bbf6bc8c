//! Victim selection: the units a preemptor may take (whole gangs, or members of an elastic gang
//! above its `minMember`), who may give them up (priority, queue shares, the queue tree,
//! PodDisruptionBudgets), and their ranking, cheapest first.

use super::*;

/// A victim unit.
#[derive(Debug, Clone)]
pub(super) struct Unit {
    pub(super) job: usize,
    /// The victim job's queue.
    pub(super) queue: usize,
    pub(super) tasks: Vec<usize>,
    pub(super) priority: i32,
    pub(super) gpus: i64,
    pub(super) started: Time,
    /// Σ of its members' requests.
    pub(super) request: Resources,
    /// Every bound member of the gang (not one surplus member).
    pub(super) whole: bool,
}

pub(super) fn victimable(ssn: &Session, task: usize) -> bool {
    let t = &ssn.state.tasks[task];
    matches!(t.status, TaskStatus::Bound | TaskStatus::Running)
        && !t.critical
        && !too_young(&ssn.state, task)
}

/// fairshare's `minRuntime`, or its gang's own (PodGroup annotation `caldera.sh/min-runtime`,
/// honoured with or without the plugin): a pod that has run less than it is never a victim.
/// A malformed annotation protects as the plugin's argument does (its gang waits, saying so).
pub(crate) fn too_young(st: &crate::state::State, task: usize) -> bool {
    let t = &st.tasks[task];
    let own = match st.jobs.get(t.job).and_then(|j| j.min_runtime.as_ref()) {
        Some(Ok(ms)) => Some(*ms),
        _ => None,
    };
    let min_ms = own
        .or_else(|| st.fair.as_ref().map(|f| f.min_runtime_ms))
        .unwrap_or(0);
    min_ms > 0 && st.now.millis_since(t.started) < min_ms
}

/// The units of job `v`: the surplus members of an elastic gang one by one (most recently
/// started first), then the whole gang.
pub(super) fn units_of(ssn: &Session, v: usize) -> Vec<Unit> {
    let st = &ssn.state;
    let job = &st.jobs[v];
    let bound: Vec<usize> = job
        .tasks
        .iter()
        .copied()
        .filter(|&t| matches!(st.tasks[t].status, TaskStatus::Bound | TaskStatus::Running))
        .collect();
    if bound.is_empty() || bound.iter().any(|&t| st.tasks[t].critical) {
        return Vec::new();
    }
    // A unit with a member younger than fairshare's minRuntime is not taken: surplus members
    // one by one skip it, and the whole gang is no unit while one of its members is young.
    let young: Vec<usize> = bound
        .iter()
        .copied()
        .filter(|&t| too_young(st, t))
        .collect();
    let unit = |tasks: Vec<usize>, whole: bool| {
        let mut request = Resources::new();
        let mut started = Time(i64::MIN);
        for &t in &tasks {
            request.add(&st.tasks[t].request);
            started = started.max(st.tasks[t].started);
        }
        Unit {
            job: v,
            queue: st.job_queue[v],
            gpus: request.get(GPU),
            priority: job.priority,
            started,
            request,
            tasks,
            whole,
        }
    };
    let mut out = Vec::new();
    let surplus = st.ready_count(v).saturating_sub(job.min_member) as usize;
    if surplus > 0 {
        let mut single = bound.clone();
        single.sort_by(|&a, &b| {
            st.tasks[b]
                .started
                .cmp(&st.tasks[a].started)
                .then_with(|| st.tasks[a].name.cmp(&st.tasks[b].name))
        });
        for &t in single.iter().take(surplus) {
            if !young.contains(&t) {
                out.push(unit(vec![t], false));
            }
        }
    }
    // A gang with a member placed in this session, or whose bind is still in flight, is not
    // settled: taking its bound members as "the whole gang" would leave that member running
    // alone below the gang's minimum. It is a whole unit again once the bind has landed (as
    // consolidation's units are).
    let settling = job.tasks.iter().any(|&t| {
        matches!(
            st.tasks[t].status,
            TaskStatus::Allocated | TaskStatus::Binding
        )
    });
    if young.is_empty() && !settling {
        out.push(unit(bound, true));
    }
    out
}

/// Whether queue `q` may give up `unit` and keep a share (max over resources of allocated /
/// deserved) of at least 1: on some resource the unit holds, what stays is still at or above
/// the queue's deserved amount. `gone`: what the queue is counted as having given up already
/// besides what is taken (units a search set aside).
pub(super) fn stays_at_share(
    ssn: &Session,
    q: usize,
    unit: &Resources,
    gone: Option<&Resources>,
) -> bool {
    let Some(deserved) = ssn.deserved(q) else {
        return false;
    };
    let mut allocated = ssn.state.queue_allocated[q].clone();
    if let Some(gone) = gone {
        allocated.sub(gone);
    }
    unit.iter()
        .any(|(r, v)| v > 0 && deserved.get(r) > 0 && allocated.get(r) - v >= deserved.get(r))
}

/// Whether reclaiming for queue `rq` may take `unit` (Σ of the tasks to take) from queue
/// `vq`. Flat queues: `vq` keeps its deserved share ([`stays_at_share`]). With the queue tree
/// (`tree`), every queue on `vq`'s path below its deepest common ancestor with `rq` — `vq`
/// and the ancestors that are not also `rq`'s — must be reclaimable, keep its deserved share
/// on some resource the unit holds, and keep its guarantee on every resource. `gone`: per
/// victim queue, what units set aside already count as given up.
pub(super) fn may_give_up(
    ssn: &Session,
    tree: bool,
    rq: usize,
    vq: usize,
    unit: &Resources,
    gone: &HashMap<usize, Resources>,
) -> bool {
    if !tree {
        return stays_at_share(ssn, vq, unit, gone.get(&vq));
    }
    let st = &ssn.state;
    let common = st.tree.common_ancestor(rq, vq);
    let path = st.tree.path(vq);
    let below = path.iter().position(|&x| x == common).map_or(0, |i| i + 1);
    path[below..].iter().all(|&x| {
        let Some(queue) = st.queues.get(x) else {
            return false;
        };
        // What x's subtree has given up through units set aside.
        let mut left = st.tree_allocated[x].clone();
        for (q, r) in gone {
            if *q == x || st.tree.ancestors(*q).contains(&x) {
                left.sub(r);
            }
        }
        let Some(deserved) = ssn.deserved(x) else {
            return false;
        };
        let after = left.minus(unit);
        queue.reclaimable
            && unit
                .iter()
                .any(|(r, v)| v > 0 && deserved.get(r) > 0 && after.get(r) >= deserved.get(r))
            && queue.guarantee.iter().all(|(r, g)| after.get(r) >= g)
    })
}

/// Whether `queue` is below its deserved share enough to take `need` more. With explicit
/// shares (capacity) only the resources the share names count, and one of them must be asked.
pub(super) fn below_share(ssn: &Session, q: usize, need: &Resources) -> bool {
    let Some(deserved) = ssn.deserved(q) else {
        return false;
    };
    let allocated = &ssn.state.queue_allocated[q];
    if ssn.eviction.explicit_deserved {
        let named: Vec<(&str, i64)> = need
            .iter()
            .filter(|&(r, v)| v > 0 && deserved.get(r) > 0)
            .collect();
        return !named.is_empty()
            && named
                .iter()
                .all(|&(r, v)| allocated.get(r) + v <= deserved.get(r));
    }
    need.iter()
        .all(|(r, v)| allocated.get(r) + v <= deserved.get(r))
}

/// Queues that may not lose units to reclaim now: those waiting for a reclaim they made, and
/// those that reclaimed in this session.
pub(super) fn protected_queues(ssn: &Session) -> BTreeSet<usize> {
    let mut out: BTreeSet<usize> = ssn
        .reservations
        .jobs()
        .map(|j| ssn.state.job_queue[j])
        .collect();
    for p in ssn
        .decisions
        .preemptions
        .iter()
        .filter(|p| p.action == "reclaim")
    {
        out.insert(ssn.state.job_queue[p.job]);
    }
    out
}

/// Orders units for `mode`: the action's ranking, then the first member's namespace and
/// name, then the victim job and the unit's place among its units (so equal ranks keep the
/// order the units were listed in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct UnitKey {
    pub(super) mode: Mode,
    pub(super) priority: i32,
    pub(super) gpus: i64,
    pub(super) pods: usize,
    pub(super) started: Time,
    pub(super) namespace: std::sync::Arc<str>,
    pub(super) name: std::sync::Arc<str>,
    pub(super) job: usize,
    pub(super) index: usize,
}

impl Ord for UnitKey {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        let rank = match self.mode {
            Mode::Preempt => self
                .priority
                .cmp(&o.priority)
                .then(self.gpus.cmp(&o.gpus))
                .then(self.pods.cmp(&o.pods))
                .then(o.started.cmp(&self.started)),
            Mode::Reclaim => self
                .priority
                .cmp(&o.priority)
                .then(o.started.cmp(&self.started))
                .then(self.gpus.cmp(&o.gpus))
                .then(self.pods.cmp(&o.pods)),
        };
        rank.then_with(|| self.namespace.cmp(&o.namespace))
            .then_with(|| self.name.cmp(&o.name))
            .then(self.pods.cmp(&o.pods))
            .then(self.job.cmp(&o.job))
            .then(self.index.cmp(&o.index))
    }
}

impl PartialOrd for UnitKey {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// Every victim unit of the session, cheapest first for one action. Built once per action
/// run; the units of a victim job are listed afresh whenever members of it are evicted, so
/// the pool always equals what listing every job's units now would give.
pub(super) struct Pool {
    pub(super) units: BTreeMap<UnitKey, Unit>,
    /// The keys of each job's units in `units`.
    pub(super) keys: Vec<Vec<UnitKey>>,
    /// Σ of the whole-gang units' requests by (queue, priority): what taking every unit of
    /// them would free at most.
    pub(super) held: BTreeMap<(usize, i32), Resources>,
    pub(super) mode: Mode,
    /// Where each task is.
    pub(super) at: At,
    /// The pods terminating, off their nodes while the action runs.
    pub(super) leaving: Leaving,
}

impl Pool {
    pub(super) fn new(ssn: &Session, mode: Mode) -> Self {
        let mut pool = Pool {
            units: BTreeMap::new(),
            keys: vec![Vec::new(); ssn.state.jobs.len()],
            held: BTreeMap::new(),
            mode,
            at: At::new(ssn),
            leaving: Leaving::default(),
        };
        for v in 0..ssn.state.jobs.len() {
            pool.list(ssn, v);
        }
        pool
    }

    /// Lists the units job `v` has now.
    pub(super) fn list(&mut self, ssn: &Session, v: usize) {
        let st = &ssn.state;
        if !st.jobs[v].tasks.iter().any(|&t| victimable(ssn, t)) {
            return;
        }
        for (index, unit) in units_of(ssn, v).into_iter().enumerate() {
            let first = &st.tasks[unit.tasks[0]];
            let key = UnitKey {
                mode: self.mode,
                priority: unit.priority,
                gpus: unit.gpus,
                pods: unit.tasks.len(),
                started: unit.started,
                namespace: first.namespace.clone(),
                name: first.name.clone(),
                job: v,
                index,
            };
            if unit.whole {
                let q = st.job_queue[v];
                self.held
                    .entry((q, unit.priority))
                    .or_default()
                    .add(&unit.request);
            }
            self.keys[v].push(key.clone());
            self.units.insert(key, unit);
        }
    }

    /// Lists job `v`'s units again (members of it were evicted).
    pub(super) fn refresh(&mut self, ssn: &Session, v: usize) {
        let q = ssn.state.job_queue[v];
        for key in std::mem::take(&mut self.keys[v]) {
            if let Some(unit) = self.units.remove(&key) {
                if unit.whole {
                    if let Some(sum) = self.held.get_mut(&(q, unit.priority)) {
                        sum.sub(&unit.request);
                    }
                }
            }
        }
        self.list(ssn, v);
    }

    /// The units `job` may take under the pool's action, cheapest first.
    pub(super) fn candidates<'a>(&'a self, rule: &'a Rule) -> impl Iterator<Item = &'a Unit> + 'a {
        self.units
            .values()
            .filter(move |u| u.job != rule.job && rule.allows(u.queue, u.priority))
    }

    /// Σ of what every whole-gang unit the rule allows holds (the preemptor's own never
    /// counts: under either action its own units are not its candidates — same priority, or
    /// its own queue).
    pub(super) fn most(&self, rule: &Rule) -> Resources {
        let mut out = Resources::new();
        for (&(vq, priority), sum) in &self.held {
            if rule.allows(vq, priority) {
                out.add(sum);
            }
        }
        out
    }
}

/// Which units one preemptor may take.
pub(super) struct Rule {
    pub(super) job: usize,
    pub(super) mode: Mode,
    pub(super) queue: usize,
    pub(super) priority: i32,
    /// Reclaim: the queues it may take from.
    pub(super) queues: Vec<bool>,
}

impl Rule {
    pub(super) fn new(ssn: &Session, job: usize, mode: Mode, protected: &BTreeSet<usize>) -> Self {
        let st = &ssn.state;
        let queue = st.job_queue[job];
        let queues = match mode {
            Mode::Preempt => Vec::new(),
            Mode::Reclaim => (0..st.queues.len())
                .map(|vq| vq != queue && st.queues[vq].reclaimable && !protected.contains(&vq))
                .collect(),
        };
        Rule {
            job,
            mode,
            queue,
            priority: st.jobs[job].priority,
            queues,
        }
    }

    /// Whether units of queue `vq` and priority `priority` may be taken.
    pub(super) fn allows(&self, vq: usize, priority: i32) -> bool {
        match self.mode {
            Mode::Preempt => vq == self.queue && priority < self.priority,
            Mode::Reclaim => self.queues.get(vq).copied().unwrap_or(false),
        }
    }
}
