//! `--mode timeline`: jobs arrive at `submit`, members run `duration` from their bind, and the
//! real scheduler (the simulator's store, driver and session) decides, on a virtual clock that
//! jumps from event to event.
//!
//! When sessions run (docs/replay.md, "When sessions run"): the live loop runs a session
//! `sessionDebounce` after a change that may let something be placed (a job arrives, a member
//! finishes, an evicted pod is gone; the periodic tick is not awaited meanwhile) and otherwise
//! every `schedulePeriod` after the last session. The replay does the same, except that it
//! leaves out periodic sessions whose input has not changed since the last one: a session is a
//! pure function of (snapshot, time, config), and with no change it would plan what the last
//! one already carried out. A session that bound, evicted or failed something is followed by
//! the next periodic one. Where a session's decision depends on time alone — a gang timeout is
//! configured, fairshare's `preemptionDelay` or `minRuntime` is set, or `consolidate` runs (a
//! pod's minimum runtime, the room held for a moved pod) — every periodic session runs while a
//! job waits, until that much time has passed since the last change. With no member waiting
//! for a node, a finish wakes no session (unless `consolidate` or fairshare may act on it).
//! fairshare's `maxWait` instead wakes one session per job, `maxWait` after a session first saw
//! it waiting (when it is aged). [`SessionPolicy::EveryPeriod`] runs every periodic session
//! always (what the tests compare the shortcuts with).

use crate::cluster::{self, NAMESPACE};
use crate::error::{Error, Result};
use crate::run::{JobOutcome, MemberRun, Run};
use crate::trace::JobSpec;
use caldera_config::{Action, SchedulerConfig};
use caldera_model::Time;
use caldera_sim::manifest::{Kind, Object};
use caldera_sim::Simulation;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap};

/// Which periodic sessions run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SessionPolicy {
    /// Sessions after changes, and periodic ones only while they may decide something new.
    #[default]
    Events,
    /// Every `schedulePeriod` while any job waits, as the live loop does.
    EveryPeriod,
}

/// A replay's inputs.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The scheduler config.
    pub config: SchedulerConfig,
    /// The cluster: Nodes, Queues and anything else the store takes.
    pub objects: Vec<Object>,
    /// The jobs, in trace order.
    pub jobs: Vec<JobSpec>,
}

/// An event on the virtual clock (ordered by time, then kind, then sequence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A member's run ends: (job, member, attempt).
    Finish(usize, usize, u32),
    /// An evicted pod's grace period ends; the key of its entry in `Engine::gone`.
    Gone(u64),
    /// A waiting job has waited fairshare's `maxWait`: the session that ages it.
    Wake(usize),
}

struct Engine {
    sim: Simulation,
    jobs: Vec<JobSpec>,
    runs: Vec<JobOutcome>,
    members: Vec<Vec<MemberRun>>,
    /// Pod name → (job, member).
    pods: HashMap<String, (usize, usize)>,
    events: BinaryHeap<Reverse<(i64, Event)>>,
    /// GPUs (thousandths) per node: (capacity, allocated).
    ledger: BTreeMap<String, (u64, u64)>,
    priorities: BTreeSet<i32>,
    run: Run,
    /// Jobs submitted and not finished (waiting or running).
    live: BTreeSet<usize>,
    start: Time,
    /// Evicted pods still terminating: key → (node, GPUs, pod name) they hold until gone.
    gone: BTreeMap<u64, (String, u64, String)>,
    /// The GPUs are shared DRA devices and each GPU member asks through a claim of its own
    /// (named as the pod), deleted once the member is done ([`cluster::share_gpus`]).
    shared: bool,
    next_gone: u64,
    /// fairshare's `maxWait` (ms), when on.
    max_wait: Option<i64>,
    /// Per job: a session has seen it waiting (its aging is scheduled).
    seen_waiting: Vec<bool>,
}

/// Queue weights from the Queue objects (`default` is 1 unless given).
pub fn queue_weights(objects: &[Object]) -> BTreeMap<String, u32> {
    let mut out: BTreeMap<String, u32> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Queue(q) => Some((
                q.metadata.name.clone().unwrap_or_default(),
                q.spec.weight.unwrap_or(1).max(1) as u32,
            )),
            _ => None,
        })
        .collect();
    out.entry(caldera_api::DEFAULT_QUEUE.to_string())
        .or_insert(1);
    out
}

/// A simulation of `config` with the cluster `objects` in its store (and a Queue of weight 1
/// for every queue the jobs name that the objects lack), checks off.
pub fn simulation(
    config: &SchedulerConfig,
    objects: &[Object],
    jobs: &[JobSpec],
) -> Result<(Simulation, BTreeMap<String, u32>)> {
    let mut sim = Simulation::new(config)?;
    sim.set_checks(false);
    let now = sim.now();
    let mut objects = objects.to_vec();
    let mut weights = queue_weights(&objects);
    for j in jobs {
        if !weights.contains_key(&j.queue) {
            weights.insert(j.queue.clone(), 1);
            objects.push(cluster::queue_object(&cluster::QueueSpec {
                name: j.queue.clone(),
                weight: 1,
                parent: None,
                capability_gpu: None,
            })?);
        }
    }
    for o in objects {
        let what = o.describe();
        sim.store_mut()
            .apply(o, now)
            .map_err(|e| Error::Invalid(format!("{what}: {e}")))?;
    }
    Ok((sim, weights))
}

/// Runs `inputs` in timeline mode, to the end.
pub fn run(inputs: &Inputs, policy: SessionPolicy) -> Result<Run> {
    run_until(inputs, policy, None)
}

/// Runs `inputs` in timeline mode up to `until_ms` of the trace's time (to the end with
/// `None`): the replay stops there, members still running are cut at it (their GPU time
/// counts up to it), jobs still waiting never started, and later arrivals are not replayed.
pub fn run_until(inputs: &Inputs, policy: SessionPolicy, until_ms: Option<i64>) -> Result<Run> {
    let capacity = cluster::gpu_capacity(&inputs.objects);
    if capacity.is_empty() {
        return Err(Error::Invalid(
            "the cluster has no nodes (give --nodes FILE or -f manifests with Nodes)".into(),
        ));
    }
    // A fraction anywhere: every node's GPUs are shared devices, as in inflation mode.
    let shared = cluster::needs_sharing(&inputs.jobs);
    let objects = if shared {
        cluster::share_gpus(&inputs.objects)?
    } else {
        inputs.objects.clone()
    };
    let (sim, weights) = simulation(&inputs.config, &objects, &inputs.jobs)?;
    let start = sim.now();
    let mut order: Vec<usize> = (0..inputs.jobs.len()).collect();
    order.sort_by_key(|&i| (inputs.jobs[i].submit_ms, i));
    let mut engine = Engine {
        sim,
        jobs: inputs.jobs.clone(),
        runs: inputs.jobs.iter().map(JobOutcome::of).collect(),
        members: inputs
            .jobs
            .iter()
            .map(|j| vec![MemberRun::default(); j.members as usize])
            .collect(),
        pods: HashMap::new(),
        events: BinaryHeap::new(),
        ledger: capacity.iter().map(|(n, c)| (n.clone(), (*c, 0))).collect(),
        priorities: BTreeSet::new(),
        run: Run::new(capacity.values().sum(), weights),
        live: BTreeSet::new(),
        start,
        gone: BTreeMap::new(),
        next_gone: 0,
        shared,
        max_wait: None,
        seen_waiting: vec![false; inputs.jobs.len()],
    };
    let config = &inputs.config;
    let debounce = i64::try_from(config.session_debounce.as_millis()).unwrap_or(0);
    let period = i64::try_from(config.schedule_period.as_millis())
        .unwrap_or(1000)
        .max(1);
    let millis = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4);
    // How long after the last change a waiting job's session may still decide something new
    // by time alone: its gang timeout; under `consolidate`, a pod's minimum runtime and the
    // room held for a moved pod. Beyond it, a periodic session repeats the last one.
    let consolidate = config.runs(Action::Consolidate);
    let mut horizon = 2 * period;
    if let Some(t) = config.gang_schedule_timeout {
        horizon += millis(t);
    }
    if consolidate {
        horizon += millis(config.consolidate.min_runtime) + millis(config.consolidate.hold_timeout);
    }
    // fairshare: a waiting job may evict once it has waited preemptionDelay, and a pod becomes
    // a possible victim once it has run minRuntime.
    let fairshare = |key: &str| {
        config
            .plugin("fairshare")
            .and_then(|p| p.arguments.get_str(key))
            .and_then(|text| caldera_config::parse_duration(text).ok())
            .filter(|d| !d.is_zero())
    };
    let fair_timed = [fairshare("preemptionDelay"), fairshare("minRuntime")];
    // maxWait ages a job once, maxWait after a session first saw it waiting (its PodGroup's
    // Unschedulable condition dates from that session): that session is woken for it
    // (`Event::Wake`) rather than every periodic one run until then.
    engine.max_wait = fairshare("maxWait").map(millis);
    for d in fair_timed.iter().flatten() {
        horizon += millis(*d);
    }
    // With nothing waiting, a session after a finish or an eviction's end has nothing to
    // place, preempt or reclaim for, so it is left out unless something else may act on the
    // freed room (consolidate moves running pods into it) or on the passing time (fairshare
    // records usage at each session).
    let idle_sessions_decide =
        policy == SessionPolicy::EveryPeriod || consolidate || config.plugin("fairshare").is_some();
    let timed = policy == SessionPolicy::EveryPeriod
        || config.gang_schedule_timeout.is_some()
        || consolidate
        || fair_timed.iter().any(Option::is_some);
    let mut last_activity = 0i64;
    let mut next_job = 0;
    // The first change not yet seen by a session, and the next periodic session.
    let mut trigger: Option<i64> = None;
    let mut periodic: Option<i64> = None;
    loop {
        let arrival = order.get(next_job).map(|&j| engine.jobs[j].submit_ms);
        let event = engine.events.peek().map(|Reverse((t, _))| *t);
        // As the live loop: a change wakes it, and it sleeps the debounce before the session,
        // not listening to the periodic tick meanwhile; with no change it runs at the tick.
        let session = trigger.map(|t| t + debounce).or(periodic);
        let next_change = arrival.into_iter().chain(event).min();
        if let Some(limit) = until_ms {
            let next = next_change.into_iter().chain(session).min();
            if next.is_some_and(|t| t > limit) {
                engine.run.mark(limit);
                engine.run.cut = true;
                break;
            }
        }
        let change_first = match (next_change, session) {
            (Some(c), Some(s)) => c <= s,
            (Some(_), None) => true,
            (None, _) => false,
        };
        match (next_change, session) {
            (Some(c), _) if change_first => {
                engine.sim.advance_to(start.plus_millis(c));
                engine.run.mark(c);
                last_activity = c;
                if arrival == Some(c) {
                    let j = order[next_job];
                    next_job += 1;
                    engine.arrive(j)?;
                    trigger = trigger.or(Some(c));
                } else if let Some(Reverse((_, e))) = engine.events.pop() {
                    if engine.handle(e, c) && (idle_sessions_decide || engine.unbound_member()) {
                        trigger = trigger.or(Some(c));
                    }
                }
            }
            (_, Some(s)) => {
                engine.sim.advance_to(start.plus_millis(s));
                engine.run.mark(s);
                let acted = engine.session(s);
                engine.schedule_aging(s);
                trigger = None;
                if acted {
                    last_activity = s;
                }
                let waiting = engine
                    .live
                    .iter()
                    .any(|&j| engine.runs[j].start_ms.is_none());
                let next = s + period;
                periodic = (acted || (timed && waiting && next <= last_activity + horizon))
                    .then_some(next);
            }
            (_, None) => break,
        }
    }
    engine.finish()
}

impl Engine {
    fn id(j: usize) -> String {
        format!("j{j:06}")
    }

    fn pod_name(j: usize, m: usize, attempt: u32) -> String {
        if attempt == 0 {
            format!("{}-{m}", Self::id(j))
        } else {
            format!("{}-{m}-r{attempt}", Self::id(j))
        }
    }

    fn apply(&mut self, o: Object) -> Result<()> {
        let now = self.sim.now();
        let what = o.describe();
        self.sim
            .store_mut()
            .apply(o, now)
            .map(|_| ())
            .map_err(|e| Error::Invalid(format!("{what}: {e}")))
    }

    /// Job `j` arrives: its PodGroup (a gang of more than one), members and their claims.
    fn arrive(&mut self, j: usize) -> Result<()> {
        let job = self.jobs[j].clone();
        self.run.submitted += 1;
        if self.priorities.insert(job.priority) {
            self.apply(cluster::priority_class(job.priority)?)?;
        }
        let id = Self::id(j);
        let grouped = job.members > 1;
        if grouped {
            self.apply(cluster::podgroup_object(&id, &job)?)?;
        }
        for m in 0..job.members as usize {
            self.create_member(j, m, 0, grouped)?;
        }
        self.live.insert(j);
        Ok(())
    }

    fn create_member(&mut self, j: usize, m: usize, attempt: u32, grouped: bool) -> Result<()> {
        let name = Self::pod_name(j, m, attempt);
        let id = Self::id(j);
        let pod = if self.shared {
            if let Some(claim) = cluster::claim_object(&name, &self.jobs[j])? {
                self.apply(claim)?;
            }
            cluster::shared_pod_object(&id, &name, &self.jobs[j], grouped)?
        } else {
            cluster::pod_object(&id, &name, &self.jobs[j], grouped)?
        };
        self.apply(Object::Pod(pod))?;
        self.pods.insert(name, (j, m));
        self.members[j][m] = MemberRun {
            attempt,
            ..MemberRun::default()
        };
        Ok(())
    }

    /// After the session at `t`: each job it saw waiting for the first time is woken for
    /// once it has waited fairshare's `maxWait`.
    fn schedule_aging(&mut self, t: i64) {
        let Some(wait) = self.max_wait else {
            return;
        };
        for &j in &self.live {
            if self.runs[j].start_ms.is_none() && !self.seen_waiting[j] {
                self.seen_waiting[j] = true;
                self.events
                    .push(Reverse((t.saturating_add(wait), Event::Wake(j))));
            }
        }
    }

    /// Carries out an event at `t` (ms); returns whether it freed capacity (or, for a wake,
    /// whether the job still waits: its session may decide something new).
    fn handle(&mut self, e: Event, t: i64) -> bool {
        match e {
            Event::Finish(j, m, attempt) => {
                let member = &self.members[j][m];
                if member.attempt != attempt || member.finished || member.node.is_none() {
                    return false;
                }
                let node = member.node.clone().unwrap_or_default();
                self.members[j][m].finished = true;
                let name = Self::pod_name(j, m, attempt);
                let now = self.sim.now();
                self.sim
                    .store_mut()
                    .set_phase(NAMESPACE, &name, "Succeeded", now);
                self.drop_claim(&name);
                self.release(&node, j, t);
                self.run.usage_end(j, m, t, true);
                if self.members[j]
                    .iter()
                    .all(|mr| mr.node.is_none() || mr.finished)
                {
                    self.end_job(j, t);
                }
                true
            }
            Event::Wake(j) => self.live.contains(&j) && self.runs[j].start_ms.is_none(),
            Event::Gone(key) => {
                // The kubelet removed it when the clock reached `t` (advance_to): its GPUs
                // are free from now on.
                let Some((node, gpu, pod)) = self.gone.remove(&key) else {
                    return false;
                };
                self.drop_claim(&pod);
                if let Some((_, used)) = self.ledger.get_mut(&node) {
                    *used = used.saturating_sub(gpu);
                }
                self.run.allocated_change(t, -(gpu as i64));
                true
            }
        }
    }

    /// On shared GPUs, the claim of the member pod `name` goes once the member is done (its
    /// share is free from then on, as the pod's GPUs are on a node of whole GPUs). A member
    /// asking no GPU has none.
    fn drop_claim(&mut self, name: &str) {
        if self.shared {
            let now = self.sim.now();
            self.sim
                .store_mut()
                .delete(Kind::ResourceClaim, Some(NAMESPACE), name, now);
        }
    }

    fn release(&mut self, node: &str, j: usize, t: i64) {
        let gpu = u64::from(self.jobs[j].gpu.milli());
        if let Some((_, used)) = self.ledger.get_mut(node) {
            *used = used.saturating_sub(gpu);
        }
        self.run.allocated_change(t, -(gpu as i64));
        self.run
            .partial_check(j, t, &self.members[j], self.jobs[j].min_members);
    }

    /// Some member of a live job has no node (its job waits, or runs short of members that
    /// may still be placed, or one of its pods was evicted and made again).
    fn unbound_member(&self) -> bool {
        self.live.iter().any(|&j| {
            self.members[j]
                .iter()
                .any(|m| m.node.is_none() && !m.finished)
        })
    }

    /// Job `j` has run to its end at `t`: its pods (and PodGroup) go.
    fn end_job(&mut self, j: usize, t: i64) {
        self.runs[j].end_ms = Some(t);
        self.live.remove(&j);
        let mut names = Vec::new();
        for (m, mr) in self.members[j].iter().enumerate() {
            let name = Self::pod_name(j, m, mr.attempt);
            self.pods.remove(&name);
            names.push(name);
        }
        for name in &names {
            self.drop_claim(name);
        }
        let now = self.sim.now();
        self.sim
            .store_mut()
            .force_delete_pods(NAMESPACE, &names, now);
        if self.jobs[j].members > 1 {
            self.sim
                .store_mut()
                .delete(Kind::PodGroup, Some(NAMESPACE), &Self::id(j), now);
        }
    }

    /// One session at `t` (ms); returns whether it bound, evicted or failed anything.
    fn session(&mut self, t: i64) -> bool {
        let report = self.sim.session();
        self.run.sessions += 1;
        let mut touched = BTreeSet::new();
        for (pod, node) in &report.bound {
            let name = pod.rsplit('/').next().unwrap_or(pod);
            let Some(&(j, m)) = self.pods.get(name) else {
                continue;
            };
            let gpu = u64::from(self.jobs[j].gpu.milli());
            if let Some((cap, used)) = self.ledger.get_mut(node) {
                *used += gpu;
                if *used > *cap {
                    self.run.violations.push(format!(
                        "node {node} holds {} GPUs of {} after binding {pod} at {t} ms",
                        *used / 1000,
                        *cap / 1000
                    ));
                }
            }
            if t < self.jobs[j].submit_ms {
                self.run.violations.push(format!(
                    "{pod} bound at {t} ms before its job was submitted"
                ));
            }
            self.run.allocated_change(t, gpu as i64);
            let member = &mut self.members[j][m];
            member.node = Some(node.clone());
            member.bound_ms = t;
            let attempt = member.attempt;
            self.run.usage_start(j, m, t, &self.jobs[j].queue, gpu);
            self.runs[j].nodes.insert(node.clone());
            let end = t + self.jobs[j].duration_ms;
            self.events
                .push(Reverse((end, Event::Finish(j, m, attempt))));
            touched.insert(j);
        }
        let mut evicted = BTreeSet::new();
        for pod in &report.evicted {
            let name = pod.rsplit('/').next().unwrap_or(pod);
            let Some(&(j, m)) = self.pods.get(name) else {
                continue;
            };
            let Some(node) = self.members[j][m].node.clone() else {
                continue;
            };
            if self.members[j][m].finished {
                continue;
            }
            let bound = self.members[j][m].bound_ms;
            let gpu = u64::from(self.jobs[j].gpu.milli());
            self.run.preemptions += 1;
            self.run.evicted_gpu_milli_ms +=
                u128::from(gpu) * u128::try_from(t - bound).unwrap_or(0);
            self.runs[j].preempted += 1;
            // The victim holds its GPUs until its kubelet has stopped it.
            let gone = self
                .sim
                .store()
                .pod(NAMESPACE, name)
                .and_then(|p| p.metadata.deletion_timestamp.as_ref())
                .map_or(t, |ts| ts.0.as_millisecond() - self.start.0);
            let key = self.next_gone;
            self.next_gone += 1;
            // The ledger keeps the victim's GPUs until it is gone.
            self.gone.insert(key, (node, gpu, name.to_string()));
            self.events.push(Reverse((gone.max(t), Event::Gone(key))));
            self.run.usage_end(j, m, t, false);
            self.pods.remove(name);
            self.members[j][m].node = None;
            evicted.insert((j, m));
            touched.insert(j);
        }
        for (j, m) in evicted {
            let attempt = self.members[j][m].attempt + 1;
            let grouped = self.jobs[j].members > 1;
            // Its owner makes a new member at once (a Job's, a Volcano job's restart).
            if let Err(e) = self.create_member(j, m, attempt, grouped) {
                self.run
                    .violations
                    .push(format!("re-creating a member: {e}"));
            }
        }
        for pod in &report.failed {
            let name = pod.rsplit('/').next().unwrap_or(pod);
            if let Some(&(j, _)) = self.pods.get(name) {
                self.runs[j].failed = true;
                touched.insert(j);
            }
        }
        for &j in &touched {
            self.run
                .partial_check(j, t, &self.members[j], self.jobs[j].min_members);
            let bound = self.members[j].iter().filter(|m| m.node.is_some()).count() as u32;
            let needed = self.jobs[j].min_members;
            if bound >= needed {
                let last = self.members[j]
                    .iter()
                    .filter(|m| m.node.is_some())
                    .map(|m| m.bound_ms)
                    .max()
                    .unwrap_or(t);
                self.runs[j].start_ms = Some(last);
                self.runs[j].members_bound = bound;
            }
            if self.runs[j].failed && self.runs[j].start_ms.is_none() {
                self.end_job(j, t);
            }
        }
        !(report.bound.is_empty() && report.evicted.is_empty() && report.failed.is_empty())
    }

    fn finish(mut self) -> Result<Run> {
        self.run.unallocated_end_gpus = self
            .ledger
            .values()
            .map(|(c, u)| c.saturating_sub(*u) / 1000)
            .sum();
        self.run.jobs = self.runs;
        self.run.finish();
        Ok(self.run)
    }
}
