//! The scheduling loop: while this replica leads and the caches are synced, a session every
//! `schedulePeriod`, and `sessionDebounce` after a change that may let something be placed.
//! Each session takes a snapshot through the overlay, runs the configured actions (timed one
//! by one for `caldera_action_duration_seconds`), records the plan's binds and writes in the
//! overlay, and hands the plan to the binder.

use crate::cluster::{Invalid, Watched};
use crate::overlay::{Kind, Written};
use crate::{wall_clock, Shared};
use caldera_binder::{Binder, ObjectOp, ObjectWrite, Owned};
use caldera_cache::workload::DerivedWrite;
use caldera_model::{
    Condition, Event, EventObject, PendingReason, Plan, PodGroupStatusUpdate, Snapshot, Time,
};
use caldera_session::close::NOT_BOUND_AFTER_RELEASE;
use caldera_session::{Outcome, Scheduler};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

/// A session's result with its timings.
struct Timed {
    outcome: Outcome,
    actions: Vec<(&'static str, Duration)>,
    pending_gangs: usize,
}

/// `Scheduler::run`, one action at a time so each can be timed. The scheduler's own actions,
/// built with their arguments (a `consolidate` made afresh by name would have the defaults).
fn run_timed(scheduler: &Scheduler, snapshot: &Snapshot, now: Time) -> Timed {
    let mut ssn = scheduler.open(snapshot, now);
    let actions = scheduler.actions();
    let mut timings = Vec::with_capacity(actions.len());
    for action in actions {
        let started = std::time::Instant::now();
        action.execute(&mut ssn);
        timings.push((action.name(), started.elapsed()));
    }
    let st = &ssn.state;
    let pending_gangs = (0..st.jobs.len())
        .filter(|&j| {
            st.job_runs[j].invalid.is_none()
                && st.pending_tasks(j).next().is_some()
                && !ssn.job_ready(j)
        })
        .count();
    Timed {
        outcome: Scheduler::finish(ssn),
        actions: timings,
        pending_gangs,
    }
}

/// The loop's memory between sessions.
#[derive(Debug, Default)]
struct LoopState {
    /// The last session placed nothing (logged once at info).
    idle: bool,
    /// The `default` queue has been seen in this term: not asked for again.
    default_queue: bool,
    /// The `root` queue has been seen in this term; only asked for while the config uses the
    /// queue tree.
    root_queue: bool,
    /// Gate mode: members released in this term, when, and whether their overrun was
    /// reported.
    released: HashMap<Arc<str>, (Instant, bool)>,
    /// PodGroups derived from workloads that this term asked the API server to create, and
    /// when: not asked again before the watch can show them.
    derived: HashMap<String, Instant>,
}

pub(crate) async fn run(
    shared: Arc<Shared>,
    binder: Binder,
    mut leader: watch::Receiver<bool>,
    stop: CancellationToken,
) {
    let mut state = LoopState::default();
    let mut leading = false;
    let mut seen_changes: Option<u64> = None;
    let mut next_periodic = Instant::now();
    loop {
        if stop.is_cancelled() {
            return;
        }
        let is_leader = *leader.borrow_and_update();
        if !is_leader {
            if leading {
                binder.pause();
                leading = false;
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = leader.changed() => if changed.is_err() { return },
            }
            continue;
        }
        if !leading {
            leading = true;
            shared.new_term();
            binder.resume();
            state = LoopState::default();
            seen_changes = None;
        }
        if !shared.lock_cluster().all_synced() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = leader.changed() => {}
                _ = shared.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            continue;
        }
        let active = shared.active();
        let changes = shared.changes();
        let debounce = match seen_changes {
            None => false,
            Some(seen) if seen != changes => true,
            Some(_) => {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = leader.changed() => continue,
                    _ = shared.wake.notified() => true,
                    _ = tokio::time::sleep_until(next_periodic) => false,
                }
            }
        };
        if debounce && !active.config.session_debounce.is_zero() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = leader.changed() => continue,
                _ = tokio::time::sleep(active.config.session_debounce) => {}
            }
        }
        seen_changes = Some(shared.changes());
        let mut writes = Vec::new();
        if !state.default_queue {
            state.default_queue =
                ensure_queue(&shared, &mut writes, caldera_api::DEFAULT_QUEUE, true);
        }
        if !state.root_queue && uses_queue_tree(&active.config) {
            state.root_queue = ensure_queue(&shared, &mut writes, caldera_api::ROOT_QUEUE, false);
        }
        ensure_derived_podgroups(&shared, &mut state, &mut writes);
        // A pause that raced with the start of this term (the leadership guard saw the old
        // value) must not stop this leader's writes.
        if !binder.is_active() && *leader.borrow() {
            binder.resume();
        }
        binder.write_objects(writes, wall_clock());
        let started = Instant::now();
        session(&shared, &binder, &leader, &mut state).await;
        next_periodic = started + shared.active().config.schedule_period;
    }
}

/// Whether the config builds the queue tree: `capacity` with `enableHierarchy: true`.
fn uses_queue_tree(config: &caldera_config::SchedulerConfig) -> bool {
    config
        .plugin("capacity")
        .is_some_and(|p| p.enabled(caldera_config::Hook::Hierarchy))
}

/// Asks the writer to create the Queue `name` (weight 1) while the cache has none: `default`
/// (reclaimable) always, as Volcano's scheduler does; `root` (not reclaimable, as Volcano makes
/// it) only while the queue tree is in use, so a flat cluster gets no object it has no use for.
/// Scheduling never waits for either: a missing `default` is implicit and a missing `root` is
/// virtual. Asked again each session until the watch shows it (the writer keeps one create
/// per Queue waiting; a 409 means it is there), then not again in this leadership term.
/// Whether the cache holds it.
fn ensure_queue(
    shared: &Shared,
    writes: &mut Vec<ObjectWrite>,
    name: &str,
    reclaimable: bool,
) -> bool {
    if shared.lock_cluster().has_queue(name) {
        return true;
    }
    writes.push(ObjectWrite {
        kind: Owned::Queue,
        namespace: None,
        name: name.into(),
        op: ObjectOp::Create(serde_json::json!({
            "metadata": { "name": name },
            "spec": { "weight": 1, "reclaimable": reclaimable },
        })),
    });
    false
}

/// How long a derived PodGroup this term asked for is not asked again while the watch has not
/// shown it yet.
const DERIVED_RETRY: Duration = Duration::from_secs(10);

/// Asks the writer to create the PodGroups Caldera derives from workloads that the cache does
/// not hold yet, to patch the derived fields of those whose workload now derives other ones
/// (`ClusterIndex::derived_podgroups`, docs/workloads.md), and to delete those Caldera derived
/// that their workload no longer derives (with its uid as precondition: a PodGroup of that name
/// made since is not ours to delete). Pods wait ("PodGroup … does not exist yet") until the
/// watch brings a new one. A write the watch has not shown is asked again after
/// [`DERIVED_RETRY`].
fn ensure_derived_podgroups(shared: &Shared, state: &mut LoopState, writes: &mut Vec<ObjectWrite>) {
    let wanted = {
        let active = shared.active();
        shared
            .lock_cluster()
            .index
            .derived_podgroups(&active.snapshot_options)
    };
    let now = Instant::now();
    state
        .derived
        .retain(|_, at| now.duration_since(*at) < DERIVED_RETRY);
    shared
        .lock_cluster()
        .expire_assumed_podgroups(now, DERIVED_RETRY);
    for write in wanted {
        let pg = write.podgroup();
        let namespace = pg.metadata.namespace.clone().unwrap_or_default();
        let name = pg.metadata.name.clone().unwrap_or_default();
        let key = format!("{namespace}/{name}");
        if state.derived.contains_key(&key) {
            continue;
        }
        let op = match &write {
            DerivedWrite::Create(pg) => match serde_json::to_value(pg) {
                Ok(body) => ObjectOp::Create(body),
                Err(e) => {
                    warn!(podgroup = %key, error = %e, "cannot encode a derived PodGroup");
                    continue;
                }
            },
            DerivedWrite::Update { .. } => ObjectOp::Patch(write.spec_patch()),
            DerivedWrite::Delete(pg) => ObjectOp::Delete {
                uid: pg.metadata.uid.clone(),
            },
        };
        state.derived.insert(key, now);
        if let DerivedWrite::Create(pg) = &write {
            shared.lock_cluster().assume_podgroup(pg, now);
        }
        writes.push(ObjectWrite {
            kind: Owned::PodGroup,
            namespace: Some(namespace.into()),
            name: name.into(),
            op,
        });
    }
}

/// An event for an object that failed to convert (pods and PodGroups: the kinds events can
/// be about).
fn invalid_event(i: &Invalid) -> Option<Event> {
    let object = match i.kind {
        Watched::Pods => EventObject::Pod,
        Watched::PodGroups => EventObject::PodGroup,
        _ => return None,
    };
    let (namespace, name) = i.key.split_once('/')?;
    Some(Event {
        object,
        namespace: namespace.into(),
        name: name.into(),
        uid: i.uid.as_str().into(),
        warning: true,
        reason: "InvalidObject".into(),
        message: format!("left out of scheduling until corrected: {}", i.message),
    })
}

async fn session(
    shared: &Arc<Shared>,
    binder: &Binder,
    leader: &watch::Receiver<bool>,
    state: &mut LoopState,
) {
    let active = shared.active();
    let now = wall_clock();
    let (snapshot, invalid) = {
        let mut cluster = shared.lock_cluster();
        // Autoscaler requests only once the API serves them and the existing ones are known.
        let provisioning = cluster.is_listed(&caldera_api::calls::PROVISIONING_REQUESTS);
        let mut snap = if provisioning || active.snapshot_options.provisioning.is_none() {
            cluster.index.snapshot(&active.snapshot_options)
        } else {
            let options = caldera_cache::SnapshotOptions {
                provisioning: None,
                ..active.snapshot_options.clone()
            };
            cluster.index.snapshot(&options)
        };
        cluster.overlay.apply(&mut snap);
        (snap, cluster.take_unreported())
    };
    let started = std::time::Instant::now();
    let scheduler = active.scheduler.clone();
    let joined = tokio::task::spawn_blocking(move || {
        let timed = run_timed(&scheduler, &snapshot, now);
        (timed, snapshot)
    })
    .await;
    let (timed, snapshot) = match joined {
        Ok(r) => r,
        Err(e) => {
            error!(error = %e, "session panicked; the next one starts afresh");
            return;
        }
    };
    let took = started.elapsed();
    let m = &shared.metrics;
    m.session(took, &timed.actions);
    m.pending_gangs.set(timed.pending_gangs as i64);
    m.queues(&timed.outcome.queues);
    if *leader.borrow() {
        m.preemptions(&timed.outcome.stats);
    }
    shared.session_done();

    let mut plan = timed.outcome.plan;
    if !active.config.pod_scheduled_events {
        plan.events
            .retain(|e| !(e.object == EventObject::Pod && e.reason == "Scheduled"));
    }
    plan.events.extend(invalid.iter().filter_map(invalid_event));
    if let Some(gate) = &shared.gate {
        let overdue = follow_releases(state, &snapshot, &plan, gate.release_timeout);
        m.released_unbound.set(overdue.count as i64);
        plan.events.extend(overdue.events);
        report_stuck_podgroups(
            &mut plan,
            &snapshot,
            &overdue.stuck,
            gate.release_timeout,
            now,
        );
    }
    let gangs = {
        let mut jobs: Vec<&str> = plan.binds.iter().map(|b| &*b.job).collect();
        jobs.dedup();
        jobs.len()
    };
    if plan.binds.is_empty() {
        if !state.idle {
            info!(
                pending_gangs = timed.pending_gangs,
                took_ms = took.as_millis() as u64,
                "session placed nothing; quiet until something changes"
            );
            state.idle = true;
        } else {
            debug!(
                pending_gangs = timed.pending_gangs,
                "session placed nothing"
            );
        }
    } else {
        state.idle = false;
        info!(
            pods = plan.binds.len(),
            gangs,
            pending_gangs = timed.pending_gangs,
            took_ms = took.as_millis() as u64,
            "session placed pods"
        );
    }
    if *leader.borrow() {
        report_refusals(shared, &mut plan);
    }
    if !*leader.borrow() || (plan.is_empty() && binder.retry_len() == 0) {
        return;
    }
    record_in_flight(shared, &plan);
    shared
        .lock_cluster()
        .assume_volume_writes(&plan.volume_writes, now);
    binder.dispatch(plan, &snapshot, now);
}

/// A Warning event `WatchForbidden` on the leader Lease for each refused kind not reported
/// yet (once per refusal; without leader election there is no Lease, and the error log and
/// `caldera_watch_forbidden` say it alone).
fn report_refusals(shared: &Shared, plan: &mut caldera_model::Plan) {
    let Some((namespace, name)) = &shared.lease else {
        return;
    };
    for (_, message) in shared.lock_cluster().unreported_refusals() {
        plan.events.push(caldera_model::Event {
            object: caldera_model::EventObject::Lease,
            namespace: namespace.as_str().into(),
            name: name.as_str().into(),
            uid: "".into(),
            warning: true,
            reason: "WatchForbidden".into(),
            message: message.to_string(),
        });
    }
}

/// What [`follow_releases`] found.
struct Overdue {
    /// Released members still unbound past the timeout.
    count: usize,
    /// Warnings for the ones newly past it, on each pod.
    events: Vec<Event>,
    /// Every member past the timeout, by job: `namespace/name on node: reason`, sorted.
    stuck: BTreeMap<usize, Vec<String>>,
}

/// Gate mode: remembers this plan's releases, forgets members that are bound or gone, and
/// reports members kube-scheduler has not bound `timeout` after their release, with the
/// reason kube-scheduler gave in their `PodScheduled` condition. Nothing is deleted or gated
/// again: kube-scheduler keeps trying, and the members keep their nomination.
fn follow_releases(
    state: &mut LoopState,
    snapshot: &Snapshot,
    plan: &Plan,
    timeout: Duration,
) -> Overdue {
    let now = Instant::now();
    let held: HashMap<&str, &caldera_model::Task> = snapshot
        .tasks
        .iter()
        .filter(|t| t.status == caldera_model::TaskStatus::Binding)
        .map(|t| (&*t.uid, t))
        .collect();
    state.released.retain(|uid, _| held.contains_key(&**uid));
    for b in &plan.binds {
        state
            .released
            .entry(b.pod.uid.clone())
            .or_insert((now, false));
    }
    let mut count = 0;
    let mut events = Vec::new();
    let mut stuck: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (uid, (since, reported)) in state.released.iter_mut() {
        let Some(t) = held.get(&**uid) else { continue };
        if now.duration_since(*since) < timeout {
            continue;
        }
        count += 1;
        let why = t
            .pending_reason
            .as_ref()
            .map(|r| format!("{}: {}", r.reason, r.message))
            .unwrap_or_else(|| "kube-scheduler has not said why".to_string());
        let node = t.node.as_deref().unwrap_or("?");
        stuck
            .entry(t.job)
            .or_default()
            .push(format!("{}/{} on {node}: {why}", t.namespace, t.name));
        if std::mem::replace(reported, true) {
            continue;
        }
        events.push(Event {
            object: EventObject::Pod,
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            uid: t.uid.clone(),
            warning: true,
            reason: NOT_BOUND_AFTER_RELEASE.into(),
            message: format!(
                "released to {node} {}s ago and still not bound by kube-scheduler ({why})",
                timeout.as_secs()
            ),
        });
    }
    for members in stuck.values_mut() {
        members.sort();
    }
    Overdue {
        count,
        events,
        stuck,
    }
}

/// At most this many stuck members are named in the PodGroup condition.
const STUCK_NAMED: usize = 5;

/// Gate mode: the PodGroup of a gang with members stuck past the release timeout says so in
/// its one Caldera condition, `Unschedulable` with reason `NotBoundAfterRelease` and
/// kube-scheduler's reasons, in place of the `Scheduled` the session gave it (its members
/// are placed, as far as Caldera is concerned). Only changes are written: the plan's update
/// is dropped when the PodGroup already says exactly this, and the Warning event goes with
/// a change of the condition. Once the members are bound (or gone) the session's `Scheduled`
/// comes back by itself.
fn report_stuck_podgroups(
    plan: &mut Plan,
    snapshot: &Snapshot,
    stuck: &BTreeMap<usize, Vec<String>>,
    timeout: Duration,
    now: Time,
) {
    for (&j, members) in stuck {
        let Some(job) = snapshot.jobs.get(j) else {
            continue;
        };
        let Some(old) = &job.status else {
            continue; // a lone pod: its own event says it
        };
        let at = plan
            .podgroups
            .iter()
            .position(|u| u.namespace == job.namespace && u.name == job.name);
        let mut status = match at {
            Some(i) => plan.podgroups[i].status.clone(),
            None => old.clone(),
        };
        let mut named = members
            .iter()
            .take(STUCK_NAMED)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ");
        if members.len() > STUCK_NAMED {
            named.push_str(&format!("; and {} more", members.len() - STUCK_NAMED));
        }
        let message = format!(
            "{} released member(s) not bound by kube-scheduler within {}s: {named}",
            members.len(),
            timeout.as_secs()
        );
        let before = old.conditions.first();
        let last_transition = before
            .filter(|c| c.type_ == "Unschedulable" && c.reason == NOT_BOUND_AFTER_RELEASE)
            .map(|c| c.last_transition)
            .unwrap_or(now);
        status.conditions = vec![Condition {
            type_: "Unschedulable".into(),
            status: "True".into(),
            reason: NOT_BOUND_AFTER_RELEASE.into(),
            message,
            last_transition,
        }];
        // The session's event for this PodGroup's condition (`Scheduled`) no longer holds.
        plan.events.retain(|e| {
            !(e.object == EventObject::PodGroup
                && e.namespace == job.namespace
                && e.name == job.name
                && e.reason == "Scheduled")
        });
        let changed = !before.is_some_and(|c| c.same_content(&status.conditions[0]));
        if changed {
            plan.events.push(Event {
                object: EventObject::PodGroup,
                namespace: job.namespace.clone(),
                name: job.name.clone(),
                uid: job.uid.clone(),
                warning: true,
                reason: NOT_BOUND_AFTER_RELEASE.into(),
                message: status.conditions[0].message.clone(),
            });
        }
        match at {
            Some(i) if old.same_content(&status) => {
                plan.podgroups.remove(i);
            }
            Some(i) => plan.podgroups[i].status = status,
            None if old.same_content(&status) => {}
            None => plan.podgroups.push(PodGroupStatusUpdate {
                namespace: job.namespace.clone(),
                name: job.name.clone(),
                status,
                native: job.native.is_some(),
            }),
        }
    }
}

/// Puts the plan's binds and status writes into the overlay before they are sent, so the
/// next session sees them even if it starts before they are answered.
fn record_in_flight(shared: &Shared, plan: &Plan) {
    let mut cluster = shared.lock_cluster();
    let overlay = &mut cluster.overlay;
    for b in &plan.binds {
        overlay.assume(b.pod.uid.clone(), b.node.clone());
    }
    for e in &plan.evictions {
        overlay.evicting(e.pod.to_string());
    }
    for w in &plan.claim_writes {
        overlay.claim_written(w.clone());
    }
    for e in &plan.extended_claims {
        overlay.extended_claim(e.clone());
    }
    for n in &plan.nominations {
        overlay.nominating(n.pod.to_string(), n.node.clone());
    }
    for c in &plan.pod_conditions {
        overlay.write_started(
            (Kind::Pod, c.pod.to_string()),
            Written::PodCondition(PendingReason {
                reason: c.reason.clone(),
                message: c.message.clone(),
            }),
        );
    }
    for f in &plan.pod_failures {
        overlay.write_started((Kind::Pod, f.pod.to_string()), Written::PodFailed);
    }
    for u in &plan.podgroups {
        overlay.write_started(
            (Kind::PodGroup, format!("{}/{}", u.namespace, u.name)),
            Written::PodGroup(u.status.clone()),
        );
    }
    for u in &plan.queues {
        overlay.write_started(
            (Kind::Queue, u.name.to_string()),
            Written::Queue(u.status.clone()),
        );
    }
}
