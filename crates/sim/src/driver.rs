//! The simulation: a store, a virtual clock, and the scheduler run every `schedulePeriod`, each
//! plan carried out against the store as the binder would, then checked.

use crate::error::{Error, Result};
use crate::invariants;
use crate::manifest::{Kind, Object};
use crate::selector::LabelSelector;
use crate::store::{kube_time, node_name, GateAdmission, Store};
use caldera_api::{
    ConditionStatus, PodGroupCondition, PodGroupConditionType, PodGroupPhase as ApiPhase,
    QueueState,
};
use caldera_api::{HyperNode, ProvisioningRequest};
use caldera_cache::SnapshotOptions;
use caldera_config::SchedulerConfig;
use caldera_model::{Event, Plan, PodGroupStatus, QueueStatus, Resources, Snapshot, Time};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Where the virtual clock starts: 2026-01-01T00:00:00Z.
pub const START: Time = Time(1_767_225_600_000);

/// How long [`Simulation::run_until_stable`] goes on at most when nothing settles.
pub const STABLE_LIMIT: Duration = Duration::from_secs(3600);

/// A queue's share as the scheduler reported it at the end of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueShare {
    /// Queue name.
    pub name: String,
    /// Deserved share, if a plugin computed one.
    pub deserved: Option<Resources>,
    /// What the queue's members hold.
    pub allocated: Resources,
}

/// What one session produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionOutput {
    /// The plan.
    pub plan: Plan,
    /// Queue shares.
    pub queues: Vec<QueueShare>,
}

/// Something that decides a plan from a snapshot: the real scheduler, or a stand-in in tests.
pub trait Scheduling {
    /// Runs one session at `now`.
    fn run_session(&mut self, snapshot: &Snapshot, now: Time) -> SessionOutput;

    /// Runs one session at `now` on a snapshot the caller no longer needs (no copy).
    fn run_session_owned(&mut self, snapshot: Snapshot, now: Time) -> SessionOutput {
        self.run_session(&snapshot, now)
    }
}

impl Scheduling for caldera_session::Scheduler {
    fn run_session(&mut self, snapshot: &Snapshot, now: Time) -> SessionOutput {
        // `run` copies the snapshot (unlike `run_owned`): the simulator keeps its own copy to
        // re-check every bind against the state the session decided on.
        session_output(self.run(snapshot, now))
    }

    fn run_session_owned(&mut self, snapshot: Snapshot, now: Time) -> SessionOutput {
        session_output(self.run_owned(snapshot, now))
    }
}

fn session_output(outcome: caldera_session::Outcome) -> SessionOutput {
    SessionOutput {
        plan: outcome.plan,
        queues: outcome
            .queues
            .into_iter()
            .map(|q| QueueShare {
                name: q.name.to_string(),
                deserved: q.deserved,
                allocated: q.allocated,
            })
            .collect(),
    }
}

/// Adapts a closure into [`Scheduling`].
pub struct FnScheduling<F>(pub F);

impl<F: FnMut(&Snapshot, Time) -> SessionOutput> Scheduling for FnScheduling<F> {
    fn run_session(&mut self, snapshot: &Snapshot, now: Time) -> SessionOutput {
        (self.0)(snapshot, now)
    }
}

/// Who schedules in a simulation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// `caldera run`: Caldera binds its own pods; nothing binds pods of `default-scheduler`.
    #[default]
    Run,
    /// `caldera gate` beside kube-scheduler: Caldera releases gated gangs (pin, gate removed,
    /// nomination) and the kube-scheduler model binds pods of `default-scheduler`.
    Gate,
    /// kube-scheduler alone, for every pod whatever its `schedulerName` (what
    /// `caldera simulate --compare kube-scheduler` shows). Gangs may be bound in part.
    KubeScheduler,
}

/// An event, with when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedEvent {
    /// Virtual time.
    pub time: Time,
    /// Session number (1-based).
    pub session: u64,
    /// The event.
    pub event: Event,
}

/// An invariant broken by a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Session number (1-based).
    pub session: u64,
    /// Virtual time of the session.
    pub time: Time,
    /// What is wrong.
    pub message: String,
}

/// What one session did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionReport {
    /// Session number (1-based).
    pub number: u64,
    /// Virtual time.
    pub time: Time,
    /// Binds that landed: (`namespace/name`, node).
    pub bound: Vec<(String, String)>,
    /// Gate mode: members released (pinned, gate removed): (`namespace/name`, node).
    pub released: Vec<(String, String)>,
    /// Pods failed by the gang timeout (`namespace/name`).
    pub failed: Vec<String>,
    /// Pods evicted (`namespace/name`).
    pub evicted: Vec<String>,
    /// Whether the store changed at all.
    pub changed: bool,
    /// Invariants this session broke.
    pub violations: Vec<String>,
}

/// Which pods a kubelet step acts on: pods in `namespace` (all namespaces when `None`)
/// matching `selector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSelector {
    /// Namespace, or every namespace.
    pub namespace: Option<String>,
    /// Label selector.
    pub selector: LabelSelector,
}

/// An in-memory cluster with a virtual clock and a scheduler.
pub struct Simulation {
    mode: Mode,
    store: Store,
    now: Time,
    period: Duration,
    opts: SnapshotOptions,
    scheduler: Box<dyn Scheduling>,
    sessions: u64,
    started: bool,
    events: Vec<RecordedEvent>,
    violations: Vec<Violation>,
    shares: BTreeMap<String, QueueShare>,
    autoscaler: Option<caldera_actors::autoscaler::Settings>,
    /// `networkTopologyDiscovery`'s label levels (empty: off).
    discovery: Vec<Vec<String>>,
    /// What discovery could not honour at its last turn.
    discovery_problems: Vec<String>,
    /// The `fairshare` plugin's settings, when the config lists it (for the usage table).
    fair: Option<caldera_queue::fair::FairSettings>,
    /// Whether every session is followed by the [`invariants`] checks.
    checks: bool,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("now", &self.now)
            .field("sessions", &self.sessions)
            .finish_non_exhaustive()
    }
}

impl Simulation {
    /// A simulation running the real scheduler built from `config`.
    pub fn new(config: &SchedulerConfig) -> Result<Self> {
        Self::with_mode(config, Mode::Run)
    }

    /// A simulation of `mode` with the real scheduler built from `config`.
    pub fn with_mode(config: &SchedulerConfig, mode: Mode) -> Result<Self> {
        let scheduler =
            caldera_plugins::scheduler(config).map_err(|e| Error::Scheduler(e.to_string()))?;
        let opts = match mode {
            Mode::Gate => SnapshotOptions {
                provisioning: config.autoscaler.as_ref().map(|a| a.policy()),
                predict: Some(caldera_cache::Predictor(
                    caldera_actors::kube_scheduler::predict,
                )),
                ..SnapshotOptions::gate(config.gang_schedule_timeout)
            },
            Mode::Run | Mode::KubeScheduler => SnapshotOptions {
                scheduler_names: config.scheduler_names.clone(),
                default_gang_timeout: config.gang_schedule_timeout,
                gate: false,
                provisioning: config.autoscaler.as_ref().map(|a| a.policy()),
                predict: None,
                auto_group: caldera_cache::workload::AutoGroup::new(
                    config.auto_group.enabled,
                    config.auto_group.namespaces.as_deref(),
                ),
            },
        };
        let mut sim = Self::with_scheduler(Box::new(scheduler), config.schedule_period, opts);
        sim.mode = mode;
        // The scheduler was built from the same option, so its arguments are valid.
        sim.fair = config
            .plugin("fairshare")
            .and_then(|o| caldera_session::fair::settings(o).ok());
        sim.discovery = config
            .network_topology_discovery
            .as_ref()
            .map(|d| d.label_levels.clone())
            .unwrap_or_default();
        // Gate mode is installed with its admission policy, which gates grouped pods; without
        // Caldera, nothing would lift the gate, so kube-scheduler alone sees pods without it.
        sim.store.set_gate_admission(match mode {
            Mode::Run => GateAdmission::Off,
            Mode::Gate => GateAdmission::Add,
            Mode::KubeScheduler => GateAdmission::Strip,
        });
        Ok(sim)
    }

    /// Who schedules.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// A simulation running `scheduler` every `period` (at least 1 ms).
    pub fn with_scheduler(
        scheduler: Box<dyn Scheduling>,
        period: Duration,
        opts: SnapshotOptions,
    ) -> Self {
        Simulation {
            mode: Mode::Run,
            store: Store::new(),
            now: START,
            period: period.max(Duration::from_millis(1)),
            opts,
            scheduler,
            sessions: 0,
            started: false,
            events: Vec::new(),
            violations: Vec::new(),
            shares: BTreeMap::new(),
            autoscaler: None,
            discovery: Vec::new(),
            discovery_problems: Vec::new(),
            fair: None,
            checks: true,
        }
    }

    /// Turns the [`invariants`] checks after every session on (the default) or off. They cost
    /// a pass over every pod and a copy of the snapshot per session; a caller that keeps its
    /// own account of binds (`caldera-replay`, whose traces hold 100,000 jobs) turns them off
    /// and checks what it needs itself.
    pub fn set_checks(&mut self, on: bool) {
        self.checks = on;
    }

    /// Moves the virtual clock forward to `t` without a session (nothing happens if `t` is not
    /// later than now); the kubelets remove the pods whose grace period is over by then.
    pub fn advance_to(&mut self, t: Time) {
        if t > self.now {
            self.now = t;
            self.store.kubelet(t);
        }
    }

    /// Plays an autoscaler that serves ProvisioningRequests (`spec.autoscaler` of a
    /// scenario): before every session it does what
    /// [`caldera_actors::autoscaler::step`] says.
    pub fn set_autoscaler(&mut self, settings: caldera_actors::autoscaler::Settings) {
        self.autoscaler = Some(settings);
    }

    /// The autoscaler's turn at the current time.
    fn autoscale(&mut self) {
        let Some(settings) = &self.autoscaler else {
            return;
        };
        let requests: Vec<_> = self.store.list::<ProvisioningRequest>().cloned().collect();
        let templates: Vec<_> = self.store.pod_templates().cloned().collect();
        let nodes: Vec<_> = self.store.list::<Node>().cloned().collect();
        let actions =
            caldera_actors::autoscaler::step(settings, &requests, &templates, &nodes, self.now);
        for action in actions {
            match action {
                caldera_actors::autoscaler::Action::AddNode(node) => {
                    // A node built from a template that converted when the scenario loaded.
                    let _ = self.store.apply(Object::Node(*node), self.now);
                }
                caldera_actors::autoscaler::Action::Condition {
                    namespace,
                    name,
                    condition,
                } => self
                    .store
                    .set_request_condition(&namespace, &name, condition),
            }
        }
    }

    /// Caldera's HyperNode discovery from node labels (`networkTopologyDiscovery`), as
    /// `caldera run` does it: the owned HyperNodes made to match the labels before a session;
    /// then every HyperNode's `status.nodeCount`.
    fn discover(&mut self) {
        if self.discovery.is_empty() {
            self.store.write_hypernode_node_counts();
            return;
        }
        let nodes: Vec<_> = self.store.list::<Node>().cloned().collect();
        let existing: Vec<_> = self.store.list::<HyperNode>().cloned().collect();
        let labels = caldera_cache::discovery::node_labels(&nodes);
        let changes = caldera_cache::discovery::reconcile(&self.discovery, &labels, &existing);
        for h in changes.create.into_iter().chain(changes.update) {
            // Built from valid label values into DNS names, so they convert.
            let _ = self.store.apply(Object::HyperNode(h), self.now);
        }
        for name in &changes.delete {
            self.store.delete(Kind::HyperNode, None, name, self.now);
        }
        self.discovery_problems = changes.problems;
        self.store.write_hypernode_node_counts();
    }

    /// What HyperNode discovery could not honour at its last turn (a domain with two
    /// parents, a name taken by a hand-made HyperNode).
    pub fn discovery_problems(&self) -> &[String] {
        &self.discovery_problems
    }

    /// The objects.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The objects, to load a view of a live cluster (no session runs on it).
    pub fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    /// The `fairshare` plugin's settings, when the config lists it.
    pub fn fair(&self) -> Option<&caldera_queue::fair::FairSettings> {
        self.fair.as_ref()
    }

    /// The virtual clock.
    pub fn now(&self) -> Time {
        self.now
    }

    /// Sessions run so far.
    pub fn sessions(&self) -> u64 {
        self.sessions
    }

    /// The snapshot options (scheduler names, default gang timeout).
    pub fn options(&self) -> &SnapshotOptions {
        &self.opts
    }

    /// Every event recorded so far.
    pub fn events(&self) -> &[RecordedEvent] {
        &self.events
    }

    /// Every invariant violation so far.
    pub fn violations(&self) -> &[Violation] {
        &self.violations
    }

    /// Queue shares from the last session.
    pub fn queue_shares(&self) -> &BTreeMap<String, QueueShare> {
        &self.shares
    }

    /// A snapshot of the current state.
    pub fn snapshot(&self) -> Snapshot {
        self.store.snapshot(&self.opts)
    }

    /// The snapshot as a session sees it: DRA devices counted as the resources their classes
    /// name (`caldera_session::devices::fold`), for checks that must agree with the session.
    pub fn session_view(&self) -> Snapshot {
        let mut snapshot = self.snapshot();
        caldera_session::devices::fold_snapshot(&mut snapshot);
        snapshot
    }

    /// Applies objects in order, as `kubectl apply` would.
    pub fn apply(
        &mut self,
        objects: impl IntoIterator<Item = Object>,
    ) -> Result<(), caldera_cache::Error> {
        for object in objects {
            self.store.apply(object, self.now)?;
        }
        Ok(())
    }

    /// Adds a StatefulSet whose controller the simulator plays (plain manifests); returns what
    /// it created at once.
    pub fn add_statefulset(
        &mut self,
        set: k8s_openapi::api::apps::v1::StatefulSet,
    ) -> Result<caldera_actors::statefulset::Created, caldera_cache::Error> {
        self.store.add_statefulset(set, self.now)
    }

    /// Deletes an object; returns whether it existed.
    pub fn delete(&mut self, kind: Kind, namespace: Option<&str>, name: &str) -> bool {
        self.store.delete(kind, namespace, name, self.now)
    }

    /// Acting as kubelets: sets `phase` on the bound pods `which` selects, skipping pods that
    /// have finished. Returns how many changed.
    pub fn mark(&mut self, which: &PodSelector, phase: &str) -> usize {
        let targets: Vec<(String, String)> = self
            .store
            .list::<Pod>()
            .filter(|p| node_name(p).is_some())
            .filter(|p| {
                let ns = p.metadata.namespace.as_deref().unwrap_or("default");
                which.namespace.as_deref().is_none_or(|want| want == ns)
            })
            .filter(|p| which.selector.matches(p.metadata.labels.as_ref()))
            .filter(|p| {
                let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
                !matches!(phase, Some("Succeeded") | Some("Failed"))
            })
            .map(|p| {
                (
                    p.metadata
                        .namespace
                        .clone()
                        .unwrap_or_else(|| "default".into()),
                    p.metadata.name.clone().unwrap_or_default(),
                )
            })
            .collect();
        targets
            .iter()
            .filter(|(ns, name)| self.store.set_phase(ns, name, phase, self.now))
            .count()
    }

    /// Advances the clock by `d`, running a session at every period boundary within it
    /// (`t+period`, `t+2·period`, …, up to `t+d`).
    pub fn run_for(&mut self, d: Duration) -> Vec<SessionReport> {
        let end = self.now.plus_millis(millis(d));
        let step = millis(self.period).max(1);
        let mut reports = Vec::new();
        let mut next = self.now.plus_millis(step);
        while next <= end {
            self.now = next;
            reports.push(self.session());
            next = next.plus_millis(step);
        }
        self.now = end;
        self.store.kubelet(end);
        reports
    }

    /// Runs sessions every period until two in a row change nothing, or `limit` (default
    /// [`STABLE_LIMIT`]) has passed.
    pub fn run_until_stable(&mut self, limit: Option<Duration>) -> Vec<SessionReport> {
        let end = self.now.plus_millis(millis(limit.unwrap_or(STABLE_LIMIT)));
        let step = millis(self.period).max(1);
        let mut reports = Vec::new();
        let mut quiet = 0;
        while quiet < 2 && self.now.plus_millis(step) <= end {
            self.now = self.now.plus_millis(step);
            let report = self.session();
            // A pod still terminating will change the cluster when its kubelet removes it.
            let waiting = self.store.next_removal().is_some();
            quiet = if report.changed || waiting {
                0
            } else {
                quiet + 1
            };
            reports.push(report);
        }
        reports
    }

    /// Runs one session at the current time and carries out its plan.
    pub fn session(&mut self) -> SessionReport {
        let generation = self.store.generation();
        // The kubelets finish the pods whose grace period is over before the snapshot, and
        // the workload controllers make their next pods.
        self.store.kubelet(self.now);
        self.store.controllers(self.now);
        // Caldera's binder creates the PodGroups it derives from workloads.
        if self.mode == Mode::Run {
            self.store.create_derived_podgroups(&self.opts, self.now);
        }
        self.ensure_default_queue();
        self.autoscale();
        self.discover();
        let snapshot = self.store.snapshot(&self.opts);
        if !self.checks {
            return self.session_unchecked(snapshot, generation);
        }
        let partial_before = invariants::partial_gangs(&self.store);
        let out = match self.mode {
            Mode::KubeScheduler => SessionOutput::default(),
            Mode::Run | Mode::Gate => self.scheduler.run_session(&snapshot, self.now),
        };
        self.sessions += 1;
        let mut report = SessionReport {
            number: self.sessions,
            time: self.now,
            ..SessionReport::default()
        };
        let mut touched = self.carry_out(&out.plan, &mut report);
        if self.mode != Mode::KubeScheduler {
            self.shares = out
                .queues
                .into_iter()
                .map(|q| (q.name.clone(), q))
                .collect();
        }
        if self.mode != Mode::Run {
            touched.extend(self.kube_scheduler(&mut report));
        }

        // The session counts devices as the resources their classes name: so do the checks.
        let mut snapshot = snapshot;
        caldera_session::devices::fold_snapshot(&mut snapshot);
        let mut broken = invariants::check_binds(&snapshot, &out.plan);
        broken.extend(caldera_model::check::dra::check_plan(&snapshot, &out.plan));
        broken.extend(invariants::overcommitted(&self.store, &touched, &snapshot));
        // kube-scheduler alone binds gangs in part: that is what a comparison shows.
        let gangs_checked = self.mode != Mode::KubeScheduler;
        for gang in invariants::partial_gangs(&self.store).difference(&partial_before) {
            if !gangs_checked {
                break;
            }
            broken.push(format!(
                "podgroup {gang} is bound in part (fewer than minMember members have a node)"
            ));
        }
        for message in &broken {
            self.violations.push(Violation {
                session: self.sessions,
                time: self.now,
                message: message.clone(),
            });
        }
        report.violations = broken;
        report.changed = self.store.generation() != generation;
        report
    }

    /// The rest of [`Simulation::session`] with the checks off: the snapshot goes to the
    /// scheduler without a copy, and nothing is re-derived from the store afterwards.
    fn session_unchecked(&mut self, snapshot: Snapshot, generation: u64) -> SessionReport {
        let out = match self.mode {
            Mode::KubeScheduler => SessionOutput::default(),
            Mode::Run | Mode::Gate => self.scheduler.run_session_owned(snapshot, self.now),
        };
        self.sessions += 1;
        let mut report = SessionReport {
            number: self.sessions,
            time: self.now,
            ..SessionReport::default()
        };
        self.carry_out(&out.plan, &mut report);
        if self.mode != Mode::KubeScheduler {
            self.shares = out
                .queues
                .into_iter()
                .map(|q| (q.name.clone(), q))
                .collect();
        }
        if self.mode != Mode::Run {
            self.kube_scheduler(&mut report);
        }
        report.changed = self.store.generation() != generation;
        report
    }

    /// Caldera creates the queue `default` at start when it is missing (SPEC §2); so does
    /// the simulator, before its first session.
    fn ensure_default_queue(&mut self) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        if self.store.queue(caldera_api::DEFAULT_QUEUE).is_some() {
            return;
        }
        let mut queue = caldera_api::Queue::new(caldera_api::DEFAULT_QUEUE, Default::default());
        queue.spec.weight = Some(1);
        // A Queue with a name and an empty spec always converts.
        let _ = self.store.apply(Object::Queue(queue), self.now);
    }

    /// One cycle of the kube-scheduler model over the store (gate mode: pods of
    /// `default-scheduler`; kube-scheduler alone: every pod). Returns the nodes it bound to.
    fn kube_scheduler(&mut self, report: &mut SessionReport) -> BTreeSet<String> {
        let now = self.now;
        let all = self.mode == Mode::KubeScheduler;
        let serves = move |p: &k8s_openapi::api::core::v1::Pod| {
            all || p
                .spec
                .as_ref()
                .and_then(|s| s.scheduler_name.as_deref())
                .unwrap_or(caldera_api::KUBE_SCHEDULER_NAME)
                == caldera_api::KUBE_SCHEDULER_NAME
        };
        let cycle = caldera_actors::kube_scheduler::schedule(
            self.store.list::<Node>(),
            self.store.list::<Pod>(),
            &serves,
            now,
        );
        let mut touched = BTreeSet::new();
        for b in &cycle.binds {
            if self
                .store
                .bind(&b.namespace, &b.name, &b.uid, &b.node, now)
                .is_ok()
            {
                touched.insert(b.node.clone());
                report
                    .bound
                    .push((format!("{}/{}", b.namespace, b.name), b.node.clone()));
                self.events.push(RecordedEvent {
                    time: now,
                    session: self.sessions,
                    event: Event {
                        object: caldera_model::EventObject::Pod,
                        namespace: b.namespace.as_str().into(),
                        name: b.name.as_str().into(),
                        uid: b.uid.as_str().into(),
                        warning: false,
                        reason: "Scheduled".into(),
                        message: format!(
                            "Successfully assigned {}/{} to {} (kube-scheduler)",
                            b.namespace, b.name, b.node
                        ),
                    },
                });
            }
        }
        for u in &cycle.unschedulable {
            self.store.set_unschedulable(
                &u.namespace,
                &u.name,
                &u.uid,
                caldera_actors::kube_scheduler::REASON_UNSCHEDULABLE,
                &u.message,
                now,
            );
        }
        touched
    }

    /// Carries out a plan as the binder would (in gate mode a bind is a release: pin, gate
    /// removed, nomination); returns the nodes that got a bind.
    fn carry_out(&mut self, plan: &Plan, report: &mut SessionReport) -> BTreeSet<String> {
        let now = self.now;
        let mut touched = BTreeSet::new();
        // Volume writes first, as the binder sends them; the PV controller runs after each.
        for w in &plan.volume_writes {
            self.store.write_volume(w, now);
        }
        // Then every committed member's DRA claims (allocation, reservation), and the claims
        // made for extended resources devices serve, before any bind, as the binder does. A
        // member whose write is refused is not bound (the next session decides again).
        let mut refused: BTreeSet<(String, String)> = BTreeSet::new();
        for w in &plan.claim_writes {
            if !self.store.write_claim(w, now) {
                for c in &w.reserved_for {
                    refused.insert((w.namespace.to_string(), c.name.to_string()));
                }
            }
        }
        for x in &plan.extended_claims {
            if !self.store.create_extended_claim(x, now) {
                refused.insert((x.namespace.to_string(), x.pod.to_string()));
            }
        }
        // A refused write holds back its member's whole gang, as the binder does.
        let held_back: BTreeSet<&str> = plan
            .binds
            .iter()
            .filter(|b| refused.contains(&(b.pod.namespace.to_string(), b.pod.name.to_string())))
            .map(|b| &*b.job)
            .collect();
        for b in &plan.binds {
            if held_back.contains(&*b.job) {
                continue;
            }
            let done = match self.mode {
                Mode::Gate => {
                    self.store
                        .release(&b.pod.namespace, &b.pod.name, &b.pod.uid, &b.node)
                }
                Mode::Run | Mode::KubeScheduler => {
                    self.store
                        .bind(&b.pod.namespace, &b.pod.name, &b.pod.uid, &b.node, now)
                }
            };
            match done {
                Ok(()) if self.mode == Mode::Gate => report
                    .released
                    .push((b.pod.to_string(), b.node.to_string())),
                Ok(()) => {
                    touched.insert(b.node.to_string());
                    report.bound.push((b.pod.to_string(), b.node.to_string()));
                }
                // A 409 is not an error for the binder (SPEC §10); the simulator records it.
                Err(e) => self.events.push(RecordedEvent {
                    time: now,
                    session: self.sessions,
                    event: Event {
                        object: caldera_model::EventObject::Pod,
                        namespace: b.pod.namespace.clone(),
                        name: b.pod.name.clone(),
                        uid: b.pod.uid.clone(),
                        warning: true,
                        reason: "FailedBinding".into(),
                        message: e.to_string(),
                    },
                }),
            }
        }
        for c in &plan.pod_conditions {
            self.store.set_unschedulable(
                &c.pod.namespace,
                &c.pod.name,
                &c.pod.uid,
                &c.reason,
                &c.message,
                now,
            );
        }
        for e in &plan.evictions {
            match self
                .store
                .evict(&e.pod.namespace, &e.pod.name, &e.pod.uid, now)
            {
                Ok(()) => report.evicted.push(e.pod.to_string()),
                // A 429 leaves the victim alone; the next session plans again.
                Err(err) => self.events.push(RecordedEvent {
                    time: now,
                    session: self.sessions,
                    event: Event {
                        object: caldera_model::EventObject::Pod,
                        namespace: e.pod.namespace.clone(),
                        name: e.pod.name.clone(),
                        uid: e.pod.uid.clone(),
                        warning: true,
                        reason: "FailedEviction".into(),
                        message: err.to_string(),
                    },
                }),
            }
        }
        for n in &plan.nominations {
            self.store
                .set_nominated(&n.pod.namespace, &n.pod.name, &n.pod.uid, n.node.as_deref());
        }
        for f in &plan.pod_failures {
            if self.store.fail_pod(
                &f.pod.namespace,
                &f.pod.name,
                &f.pod.uid,
                &f.reason,
                &f.message,
            ) {
                report.failed.push(f.pod.to_string());
            }
        }
        for u in &plan.podgroups {
            if u.native {
                self.store
                    .set_native_podgroup_status(&u.namespace, &u.name, &u.status);
            } else {
                self.store
                    .set_podgroup_status(&u.namespace, &u.name, podgroup_status(&u.status));
            }
        }
        for u in &plan.queues {
            self.store
                .set_queue_status(&u.name, queue_status(&u.status));
        }
        for w in &plan.move_holds {
            self.store.set_move_holds(w);
        }
        for r in &plan.capacity_releases {
            self.store.delete_capacity(&r.namespace, &r.name);
            self.store.stop_consuming(&r.pods, &r.name);
        }
        for need in &plan.capacity_requests {
            self.store.create_capacity(need, now);
        }
        for e in &plan.events {
            self.events.push(RecordedEvent {
                time: now,
                session: self.sessions,
                event: e.clone(),
            });
        }
        touched
    }
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The model's PodGroup status as the API object writes it.
pub fn podgroup_status(s: &PodGroupStatus) -> caldera_api::PodGroupStatus {
    caldera_api::PodGroupStatus {
        phase: Some(ApiPhase::from(s.phase.as_str())),
        conditions: Some(
            s.conditions
                .iter()
                .map(|c| PodGroupCondition {
                    type_: Some(PodGroupConditionType::from(c.type_.as_str())),
                    status: Some(ConditionStatus::from(c.status.as_str())),
                    transition_id: None,
                    last_transition_time: kube_time(c.last_transition),
                    reason: Some(c.reason.clone()).filter(|r| !r.is_empty()),
                    message: Some(c.message.clone()).filter(|m| !m.is_empty()),
                })
                .collect(),
        ),
        running: Some(s.running as i32),
        succeeded: Some(s.succeeded as i32),
        failed: Some(s.failed as i32),
    }
}

/// A resource vector as a Kubernetes ResourceList.
pub fn resource_list(r: &Resources) -> BTreeMap<String, Quantity> {
    r.to_quantities()
        .into_iter()
        .map(|(k, v)| (k, Quantity(v)))
        .collect()
}

/// The model's Queue status as the API object writes it.
pub fn queue_status(s: &QueueStatus) -> caldera_api::QueueStatus {
    caldera_api::QueueStatus {
        state: Some(QueueState::from(if s.state.is_empty() {
            "Open"
        } else {
            s.state.as_str()
        })),
        unknown: Some(s.unknown as i32),
        pending: Some(s.pending as i32),
        running: Some(s.running as i32),
        inqueue: Some(s.inqueue as i32),
        completed: Some(s.completed as i32),
        allocated: Some(resource_list(&s.allocated)),
        reservation: None,
        conditions: (!s.conditions.is_empty()).then(|| {
            s.conditions
                .iter()
                .map(|c| caldera_api::QueueCondition {
                    type_: Some(c.type_.clone()),
                    status: Some(c.status.clone()),
                    last_transition_time: kube_time(c.last_transition),
                    reason: Some(c.reason.clone()),
                    message: Some(c.message.clone()),
                })
                .collect()
        }),
        usage: s.usage.as_ref().map(queue_usage),
    }
}

/// The model's usage record as the Queue's `status.usage`.
pub fn queue_usage(u: &caldera_model::QueueUsage) -> caldera_api::QueueUsage {
    let amounts = |m: &BTreeMap<std::sync::Arc<str>, u32>| {
        m.iter()
            .map(|(k, v)| (k.to_string(), i64::from(*v)))
            .collect::<BTreeMap<_, _>>()
    };
    let gpu = u.decayed.get("nvidia.com/gpu").copied().unwrap_or(0);
    caldera_api::QueueUsage {
        last_update_time: kube_time(u.at),
        decayed: Some(amounts(&u.decayed)),
        held: Some(amounts(&u.held)),
        gpu: Some(format!(
            "{:.3}",
            f64::from(gpu) / f64::from(caldera_model::USAGE_SCALE)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_is_new_year_2026() {
        assert_eq!(START.to_rfc3339(), "2026-01-01T00:00:00Z");
    }
}
