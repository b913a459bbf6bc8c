//! Session close: turns the session's decisions into a plan of changes (and only changes).

use crate::session::Session;
use crate::state::{holds_node, Holdup};
use caldera_model::{
    Bind, Condition, Event, EventObject, Eviction, Job, NativeCondition, Nomination, PendingReason,
    Plan, PodConditionUpdate, PodFailure, PodGroupPhase, PodGroupStatus, PodGroupStatusUpdate,
    QueueStatus, QueueStatusUpdate, Resources, TaskStatus, Time,
};
use std::sync::Arc;

mod capacity;
mod evictions;

use capacity::*;
use evictions::*;

/// Reason of the pod condition when a queue limit holds a member (SPEC §8).
pub const QUEUE_QUOTA_EXCEEDED: &str = "QueueQuotaExceeded";
/// Reason of the pod condition when no node fits (read by cluster-autoscaler).
pub const UNSCHEDULABLE: &str = "Unschedulable";
/// PodGroup condition reason when the gang does not fit.
pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";
/// PodGroup condition reason when too few members exist.
pub const NOT_ENOUGH_TASKS: &str = "NotEnoughTasks";
/// PodGroup condition reason while a preemptor waits for its victims to terminate.
pub const PREEMPTING: &str = "Preempting";
/// PodGroup condition reason after the gang timeout.
pub const SCHEDULE_TIMEOUT: &str = "ScheduleTimeout";
/// Pod failure reason after the gang timeout.
pub const GANG_SCHEDULE_TIMEOUT: &str = "GangScheduleTimeout";
/// PodGroup condition reason while an autoscaler request for the gang is pending, accepted or
/// provisioned.
pub const WAITING_FOR_CAPACITY: &str = "WaitingForCapacity";
/// Queue condition type, `False` while the queue holds no new work for a reason Caldera finds
/// in the queue tree (its reason: `ParentCycle`, `ParentNotFound`, `AncestorNotInTree`,
/// `RootHasParent`).
pub const QUEUE_SCHEDULABLE: &str = "Schedulable";
/// At most this many pod sets in one ProvisioningRequest (its CRD's `maxItems`).
pub const MAX_POD_SETS: usize = 32;
/// PodGroup condition reason after its autoscaler request failed or its booking expired, until
/// the next request.
pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
/// PodGroup condition reason (type `Unschedulable`) in gate mode while a released member is
/// not bound by kube-scheduler past the release timeout; written by `caldera gate`'s runtime,
/// which follows releases in time, and replaced by `Scheduled` once the members are bound.
pub const NOT_BOUND_AFTER_RELEASE: &str = "NotBoundAfterRelease";
/// PodGroup condition reason (type `Unschedulable`) while placed members keep their nodes and
/// wait for their claims to be bound (volume binding before binds, as kube-scheduler's PreBind).
pub const WAITING_FOR_VOLUMES: &str = "WaitingForVolumes";
/// How long a gang's members and its PodGroup may take to arrive before Caldera says one is
/// missing. Pods and PodGroups come through separate watches, so for a moment a new pod's
/// PodGroup, or a new PodGroup's pods, may not be seen yet; writing "does not exist" or
/// "NotEnoughTasks" in that moment would be wrong and cost a write and an event per pod.
pub const ARRIVAL_GRACE_MS: i64 = 1000;

/// What a job's members and PodGroup should say at close.
struct Verdict {
    condition: Option<(&'static str, &'static str, String)>, // (type, reason, message)
    /// The gang waits for nodes it could use (not for quota, not invalid).
    short_of_nodes: bool,
    pod_reason: Option<(&'static str, String)>,
    timed_out: bool,
}

/// The kind of object a job's PodGroup events are about.
/// Where a gang with a topology rule is placed: the smallest HyperNode holding every member
/// that holds a node (`HyperNode rack-a (tier 1)`), or the label domain they share
/// (`rack=r1`); `None` without a rule, or when no single domain holds them. Computed from the
/// members' nodes, so the message is the same in every session while they stay.
fn placed_in(ssn: &Session, ji: usize) -> Option<String> {
    let rule = ssn.state.jobs[ji].topology.as_ref()?;
    let nodes = crate::topology::held_nodes(ssn, ji);
    match &rule.source {
        caldera_model::TopologySource::HyperNodes => {
            let tree = &ssn.state.topology;
            let d = &tree.domains[tree.smallest_holding(&nodes)? as usize];
            Some(format!("HyperNode {} (tier {})", d.name, d.tier))
        }
        caldera_model::TopologySource::Label(key) => {
            let mut values = nodes
                .iter()
                .map(|&n| ssn.state.nodes[n as usize].labels.get(&**key));
            let first = values.next()??;
            values
                .all(|v| v == Some(first))
                .then(|| format!("{key}={first}"))
        }
    }
}

fn podgroup_object(job: &Job) -> EventObject {
    if job.native.is_some() {
        EventObject::NativePodGroup
    } else {
        EventObject::PodGroup
    }
}

/// Builds the plan from a finished session.
pub fn close(ssn: &Session) -> Plan {
    let st = &ssn.state;
    let now = st.now;
    let mut plan = Plan::default();
    for &(task, node) in &ssn.decisions.committed {
        let t = &st.tasks[task];
        let node = st.nodes[node].name.clone();
        plan.events.push(Event {
            object: EventObject::Pod,
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            uid: t.uid.clone(),
            warning: false,
            reason: "Scheduled".into(),
            message: format!(
                "Successfully assigned {}/{} to {}",
                t.namespace, t.name, node
            ),
        });
        plan.binds.push(Bind {
            pod: t.object_ref(),
            node,
            job: st.jobs[t.job].id.clone(),
        });
    }
    volume_writes(ssn, &mut plan);
    // DRA claims: every committed member's claims are allocated and reserved before any bind.
    plan.claim_writes = st
        .trackers
        .devices
        .writes(&ssn.decisions.committed, &st.tasks);
    plan.extended_claims = st
        .trackers
        .devices
        .extended_claims(&ssn.decisions.committed, &st.tasks);
    // Members keeping their nodes until their claims are bound, by job.
    let mut waits: std::collections::HashMap<usize, Vec<usize>> = std::collections::HashMap::new();
    for &(t, _) in &ssn.decisions.volume_waits {
        waits.entry(st.tasks[t].job).or_default().push(t);
    }
    let mut phases = vec![PodGroupPhase::Pending; st.jobs.len()];
    plan.capacity_releases
        .extend(st.stale_capacity.iter().cloned());
    for (ji, job) in st.jobs.iter().enumerate() {
        let waiting = waits.get(&ji).map(Vec::as_slice).unwrap_or_default();
        let mut v = verdict(ssn, ji, waiting);
        capacity(ssn, ji, &mut v, &mut plan);
        // Pending members: failure on timeout, else the reason they wait.
        for &ti in &job.tasks {
            let t = &st.tasks[ti];
            if !t.schedulable_pending() {
                continue;
            }
            if v.timed_out {
                plan.pod_failures.push(PodFailure {
                    pod: t.object_ref(),
                    reason: GANG_SCHEDULE_TIMEOUT.into(),
                    message: format!(
                        "PodGroup {} was not scheduled within {}s",
                        job.id,
                        job.timeout_seconds.unwrap_or(0)
                    ),
                });
                continue;
            }
            let Some((reason, message)) = &v.pod_reason else {
                continue;
            };
            let pod = (&t.namespace, &t.name, &t.uid);
            say_pending(&mut plan, pod, t.pending_reason.as_deref(), reason, message);
        }
        let status = podgroup_status(ssn, ji, &v, now, waiting);
        phases[ji] = status.phase;
        let Some(old) = &job.status else {
            continue;
        };
        if old.same_content(&status) {
            continue;
        }
        let old_cond = old.conditions.first();
        let new_cond = status.conditions.first();
        let changed = if job.native.is_some() {
            // A native PodGroup holds only `PodGroupScheduled`: compare what it would say.
            let (a, b) = (NativeCondition::of(old), NativeCondition::of(&status));
            match (&a, &b) {
                (Some(a), Some(b)) if a.same_content(b) => continue,
                (_, None) => continue,
                _ => true,
            }
        } else {
            match (old_cond, new_cond) {
                (Some(a), Some(b)) => !a.same_content(b),
                (None, Some(_)) => true,
                _ => false,
            }
        };
        if let (true, Some(c)) = (changed, new_cond) {
            let scheduled = c.type_ == "Scheduled";
            let not_admitted =
                matches!(st.job_runs[ji].holdup, Some(Holdup::NotAdmitted { .. })) && !scheduled;
            let waiting_for_capacity =
                c.reason == WAITING_FOR_CAPACITY || c.reason == WAITING_FOR_VOLUMES;
            plan.events.push(Event {
                object: podgroup_object(job),
                namespace: job.namespace.clone(),
                name: job.name.clone(),
                uid: job.uid.clone(),
                warning: !scheduled && !not_admitted && !waiting_for_capacity,
                reason: if scheduled {
                    "Scheduled"
                } else if waiting_for_capacity || c.reason == PROVISIONING_FAILED {
                    // (WaitingForVolumes is a Normal event under its own reason too.)
                    c.reason.as_str()
                } else {
                    "Unschedulable"
                }
                .into(),
                message: c.message.clone(),
            });
        }
        plan.podgroups.push(PodGroupStatusUpdate {
            namespace: job.namespace.clone(),
            name: job.name.clone(),
            status,
            native: job.native.is_some(),
        });
    }
    for w in &st.waiting {
        if now.millis_since(w.created) < ARRIVAL_GRACE_MS {
            continue;
        }
        let message = match &w.why {
            Some(why) => why.to_string(),
            None => format!("PodGroup {} does not exist yet", w.group),
        };
        let pod = (&w.namespace, &w.name, &w.uid);
        say_pending(
            &mut plan,
            pod,
            w.pending_reason.as_deref(),
            UNSCHEDULABLE,
            &message,
        );
    }
    preemptions(ssn, &mut plan);
    consolidations(ssn, &mut plan);
    queue_statuses(ssn, &phases, &mut plan);
    plan
}

/// The volume binder's writes: for members that keep their nodes until their claims are
/// bound, each claim annotated with its member's node (provisioning) or a volume pre-bound to
/// it, and the member nominated at its node (so the hold survives a restart); for jobs whose
/// wait ended without volumes, Caldera's selections undone and nominations dropped.
fn volume_writes(ssn: &Session, plan: &mut Plan) {
    use crate::volumes::Choice;
    use caldera_model::VolumeWrite;
    let st = &ssn.state;
    for &(ti, node) in &ssn.decisions.volume_waits {
        let t = &st.tasks[ti];
        let node = st.nodes[node].name.clone();
        if t.nominated.as_deref() != Some(&*node) {
            plan.nominations.push(Nomination {
                pod: t.object_ref(),
                node: Some(node.clone()),
            });
        }
        let (Some(choices), Some(names)) = (st.trackers.volumes.chosen(ti), t.volumes.as_ref())
        else {
            continue;
        };
        for (choice, (claim, uid)) in choices.iter().zip(&names.claims) {
            match *choice {
                Choice::Provision => plan.volume_writes.push(VolumeWrite::SelectNode {
                    namespace: t.namespace.clone(),
                    claim: claim.clone(),
                    node: node.clone(),
                }),
                Choice::Static(v) => plan.volume_writes.push(VolumeWrite::PreBind {
                    volume: st.trackers.volumes.volume(v).name.clone(),
                    namespace: t.namespace.clone(),
                    claim: claim.clone(),
                    uid: uid.clone(),
                }),
                Choice::Selected | Choice::Prebound => {}
            }
        }
    }
    let mut released: Vec<usize> = ssn
        .decisions
        .volume_releases
        .iter()
        .map(|(j, _)| *j)
        .collect();
    released.sort_unstable();
    released.dedup();
    for j in released {
        for &ti in &st.jobs[j].tasks {
            let t = &st.tasks[ti];
            let Some(v) = t.volumes.as_ref().filter(|_| t.schedulable_pending()) else {
                continue;
            };
            let selected = t
                .spec
                .volumes
                .claims
                .iter()
                .zip(&v.claims)
                .filter(|(need, _)| need.selected.is_some())
                .map(|(_, (claim, _))| claim)
                .chain(&v.failed);
            for claim in selected {
                plan.volume_writes.push(VolumeWrite::Unselect {
                    namespace: t.namespace.clone(),
                    claim: claim.clone(),
                });
            }
        }
    }
}

/// Plans a pending pod's `PodScheduled=False` condition and its `FailedScheduling` event,
/// unless the pod already says exactly that.
fn say_pending(
    plan: &mut Plan,
    (namespace, name, uid): (&Arc<str>, &Arc<str>, &Arc<str>),
    current: Option<&PendingReason>,
    reason: &str,
    message: &str,
) {
    if current.is_some_and(|p| p.reason == reason && p.message == message) {
        return;
    }
    plan.events.push(Event {
        object: EventObject::Pod,
        namespace: namespace.clone(),
        name: name.clone(),
        uid: uid.clone(),
        warning: true,
        reason: "FailedScheduling".into(),
        message: message.to_string(),
    });
    plan.pod_conditions.push(PodConditionUpdate {
        pod: caldera_model::ObjectRef::new(namespace, name, uid),
        reason: reason.to_string(),
        message: message.to_string(),
    });
}

/// `waiting`: the job's members that keep their nodes until their claims are bound.
fn verdict(ssn: &Session, ji: usize, waiting: &[usize]) -> Verdict {
    let st = &ssn.state;
    let job = &st.jobs[ji];
    let run = &st.job_runs[ji];
    let members = job.tasks.len();
    let ready = st.ready_count(ji);
    let none = Verdict {
        short_of_nodes: false,
        condition: None,
        pod_reason: None,
        timed_out: false,
    };
    let pending = st.pending_tasks(ji).count();
    // After a gang timeout the condition stays until new members arrive or the gang is placed.
    let current = job
        .condition("Unschedulable")
        .filter(|c| c.status == "True");
    let already_timed_out = current.is_some_and(|c| c.reason == SCHEDULE_TIMEOUT);
    if already_timed_out && pending == 0 && ready < job.min_member {
        let c = current.map(|c| c.message.clone()).unwrap_or_default();
        return Verdict {
            condition: Some(("Unschedulable", SCHEDULE_TIMEOUT, c)),
            ..none
        };
    }
    if let Some(msg) = &run.invalid {
        if st.now.millis_since(job.created) < ARRIVAL_GRACE_MS {
            return none;
        }
        return Verdict {
            condition: Some(("Unschedulable", NOT_ENOUGH_TASKS, msg.clone())),
            pod_reason: Some((UNSCHEDULABLE, format!("PodGroup {}: {msg}", job.id))),
            ..none
        };
    }
    if !waiting.is_empty() {
        let mut claims: Vec<String> = Vec::new();
        for &t in waiting {
            let task = &st.tasks[t];
            if let Some(v) = &task.volumes {
                claims.extend(
                    v.claims
                        .iter()
                        .map(|(c, _)| format!("{}/{c}", task.namespace)),
                );
            }
        }
        claims.sort();
        let message = format!(
            "{}/{members} members keep their nodes until their claims are bound ({}); then they are bound together",
            waiting.len(),
            if claims.is_empty() {
                "claims bound but not yet completed".to_string()
            } else {
                claims.join(", ")
            }
        );
        return Verdict {
            condition: Some(("Unschedulable", WAITING_FOR_VOLUMES, message)),
            ..none
        };
    }
    if ssn.job_ready(ji) && ready > 0 {
        let pod_reason = match &run.holdup {
            Some(Holdup::Quota(m)) => Some((QUEUE_QUOTA_EXCEEDED, m.clone())),
            Some(Holdup::Fit(m)) => Some((UNSCHEDULABLE, m.clone())),
            _ => None,
        };
        return Verdict {
            condition: Some((
                "Scheduled",
                "Scheduled",
                format!(
                    "{ready}/{members} members of the gang are placed (minMember {}){}",
                    job.min_member,
                    placed_in(ssn, ji)
                        .map(|d| format!(" in {d}"))
                        .unwrap_or_default()
                ),
            )),
            pod_reason,
            ..none
        };
    }
    // The gang timeout counts from the first session that saw the gang valid and waiting.
    let since = if already_timed_out {
        st.now
    } else {
        job.pending_since.unwrap_or(st.now)
    };
    if let Some(secs) = job.timeout_seconds {
        let waited = st.now.millis_since(since);
        // While nodes asked of the autoscaler are coming, waiting is not in vain: the timeout
        // does not run out, and only `maxWait` bounds the wait.
        let live = st.provisioning.as_ref().and_then(|p| {
            let c = job.capacity.as_ref().filter(|c| c.state.live())?;
            Some((c, p.max_wait_ms))
        });
        let out = match live {
            Some((_, Some(max))) => waited >= max.max((secs as i64).saturating_mul(1000)),
            Some((_, None)) => false,
            None => waited >= (secs as i64).saturating_mul(1000),
        };
        if pending > 0 && out {
            let why = match live {
                Some((c, Some(max))) => format!(
                    "gang was not scheduled within maxWait {}s while ProvisioningRequest {}/{} was {}",
                    max / 1000,
                    c.namespace,
                    c.name,
                    c.state.as_str()
                ),
                _ => format!("gang was not scheduled within {secs}s"),
            };
            return Verdict {
                condition: Some((
                    "Unschedulable",
                    SCHEDULE_TIMEOUT,
                    format!("{why}; {pending} pending members marked Failed"),
                )),
                timed_out: true,
                ..none
            };
        }
    }
    let unready = job.min_member.saturating_sub(ready);
    let prefix = format!("{unready}/{members} members in gang unschedulable");
    if !ssn.reservations.is_empty() && crate::reserve::waiting(ssn, ji) {
        let mut nodes: Vec<&str> = ssn
            .reservations
            .of_job(ji)
            .iter()
            .map(|r| &*st.nodes[r.node].name)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        // An aged gang (fairshare's maxWait) holds room that running pods are still to free.
        if let Some(aged) = crate::aging::condition(ssn, ji, &nodes) {
            let message = format!("{prefix}: {aged}");
            return Verdict {
                condition: Some(("Unschedulable", NOT_ENOUGH_RESOURCES, message.clone())),
                pod_reason: Some((UNSCHEDULABLE, message)),
                short_of_nodes: pending > 0 && matches!(run.holdup, Some(Holdup::Fit(_))),
                ..none
            };
        }
        let message = format!(
            "{prefix}: waiting for preempted pods to terminate; room is held on node(s) {}",
            nodes.join(", ")
        );
        return Verdict {
            condition: Some(("Unschedulable", PREEMPTING, message.clone())),
            pod_reason: Some((UNSCHEDULABLE, message)),
            ..none
        };
    }
    let (pod_reason, why) = match &run.holdup {
        Some(Holdup::NotAdmitted { quota, message }) => (
            if *quota {
                QUEUE_QUOTA_EXCEEDED
            } else {
                UNSCHEDULABLE
            },
            format!("not admitted: {message}"),
        ),
        Some(Holdup::Quota(m)) => (QUEUE_QUOTA_EXCEEDED, m.clone()),
        Some(Holdup::Fit(m)) => (UNSCHEDULABLE, m.clone()),
        None if pending == 0 => (UNSCHEDULABLE, "waiting for members".to_string()),
        None => (UNSCHEDULABLE, "not tried in this session".to_string()),
    };
    let message = format!("{prefix}: {why}");
    Verdict {
        condition: Some(("Unschedulable", NOT_ENOUGH_RESOURCES, message.clone())),
        pod_reason: Some((pod_reason, message)),
        // Held by a lack of nodes: no node fits, or enqueue found the cluster (not a queue
        // limit) too small for its minResources.
        short_of_nodes: pending > 0
            && matches!(
                run.holdup,
                Some(Holdup::Fit(_)) | Some(Holdup::NotAdmitted { quota: false, .. })
            ),
        ..none
    }
}

/// A task counts as scheduled for the PodGroup phase when it holds or held a node.
fn scheduled(t: &caldera_model::Task) -> bool {
    match t.status {
        TaskStatus::Allocated | TaskStatus::Binding | TaskStatus::Bound | TaskStatus::Running => {
            true
        }
        TaskStatus::Succeeded | TaskStatus::Failed => t.node.is_some(),
        TaskStatus::Pending | TaskStatus::Releasing => false,
    }
}

fn podgroup_status(
    ssn: &Session,
    ji: usize,
    v: &Verdict,
    now: Time,
    waiting: &[usize],
) -> PodGroupStatus {
    let st = &ssn.state;
    let job: &Job = &st.jobs[ji];
    // Members keeping their nodes until their claims are bound are not scheduled yet.
    let waiting = |ti: usize| waiting.contains(&ti);
    let tasks = job.tasks.iter().map(|&t| (t, &st.tasks[t]));
    let (mut running, mut succeeded, mut failed, mut sched) = (0u32, 0u32, 0u32, 0u32);
    let mut all_ran_and_finished = !job.tasks.is_empty();
    for (ti, t) in tasks {
        match t.status {
            TaskStatus::Running => running += 1,
            TaskStatus::Succeeded => succeeded += 1,
            TaskStatus::Failed => failed += 1,
            _ => {}
        }
        if scheduled(t) && !waiting(ti) {
            sched += 1;
        }
        let finished = matches!(t.status, TaskStatus::Succeeded | TaskStatus::Failed);
        if !(finished && t.node.is_some()) {
            all_ran_and_finished = false;
        }
    }
    let admitted = st.job_runs[ji].admitted;
    let phase = if all_ran_and_finished {
        PodGroupPhase::Completed
    } else if sched >= job.min_member && sched > 0 {
        PodGroupPhase::Running
    } else if admitted {
        PodGroupPhase::Inqueue
    } else {
        PodGroupPhase::Pending
    };
    let mut conditions = Vec::new();
    if let Some((type_, reason, message)) = &v.condition {
        let old = job.status.as_ref().and_then(|s| s.conditions.first());
        // The transition time moves when the condition's type or status changes, and when a
        // gang starts waiting for resources after waiting for members or timing out: that is
        // when its timeout starts counting (not while its released members waited for
        // kube-scheduler: a gang placed once does not carry that wait into a new timeout).
        let resets = |r: &str| {
            r == NOT_ENOUGH_TASKS
                || r == SCHEDULE_TIMEOUT
                || r == NOT_BOUND_AFTER_RELEASE
                || r == WAITING_FOR_VOLUMES
        };
        let keep = old.filter(|o| {
            o.type_ == *type_ && o.status == "True" && (!resets(&o.reason) || resets(reason))
        });
        conditions.push(Condition {
            type_: type_.to_string(),
            status: "True".into(),
            reason: reason.to_string(),
            message: message.clone(),
            last_transition: keep.map(|o| o.last_transition).unwrap_or(now),
        });
    }
    PodGroupStatus {
        phase,
        conditions,
        running,
        succeeded,
        failed,
    }
}

fn queue_statuses(ssn: &Session, phases: &[PodGroupPhase], plan: &mut Plan) {
    let st = &ssn.state;
    let mut statuses: Vec<QueueStatus> = st
        .queues
        .iter()
        .map(|q| QueueStatus {
            state: q
                .status
                .as_ref()
                .map(|s| s.state.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| if q.open { "Open" } else { "Closed" }.into()),
            ..QueueStatus::default()
        })
        .collect();
    for t in &st.tasks {
        if holds_node(t) {
            statuses[st.job_queue[t.job]].allocated.add(&t.request);
        }
    }
    // An inner queue of the tree (`spec.parent`) reports what its whole subtree holds.
    let own: Vec<Resources> = statuses.iter().map(|s| s.allocated.clone()).collect();
    for (q, held) in own.iter().enumerate() {
        if held.is_empty() {
            continue;
        }
        for &a in st.tree.ancestors(q) {
            if let Some(s) = statuses.get_mut(a) {
                s.allocated.add(held);
            }
        }
    }
    // Usage (fairshare): a new record when what the queue's subtree holds from now on has
    // changed (at most every write period); otherwise the last record still describes it.
    for (q, status) in statuses.iter_mut().enumerate() {
        let last = st.queues[q].status.as_ref().and_then(|s| s.usage.as_ref());
        status.usage = match &st.fair {
            Some(fair) => fair
                .next_record(last, fair.held(&status.allocated, &st.total), st.now)
                .or_else(|| last.cloned()),
            None => last.cloned(),
        };
    }
    for (ji, job) in st.jobs.iter().enumerate() {
        if !job.has_podgroup() {
            continue;
        }
        let s = &mut statuses[st.job_queue[ji]];
        match phases[ji] {
            PodGroupPhase::Pending => s.pending += 1,
            PodGroupPhase::Inqueue => s.inqueue += 1,
            PodGroupPhase::Running => s.running += 1,
            PodGroupPhase::Completed => s.completed += 1,
            PodGroupPhase::Unknown => s.unknown += 1,
        }
    }
    // With the queue tree in use, a queue out of it (a cycle of parents, a parent that does
    // not exist) holds no new work: said on the Queue, with an event when it starts.
    if ssn.eviction.tree {
        for (q, status) in statuses.iter_mut().enumerate() {
            let (Some(kind), Some(why)) = (st.tree.problem_kind(q), st.tree.problem(q)) else {
                continue;
            };
            let queue = &st.queues[q];
            let message = format!(
                "queue {} is not in the queue tree and is treated as closed: {why}",
                queue.name
            );
            let reason = kind.reason();
            let old = queue.status.as_ref().and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == QUEUE_SCHEDULABLE && c.status == "False")
            });
            if queue.exists && old.is_none_or(|o| o.reason != reason || o.message != message) {
                plan.events.push(Event {
                    object: EventObject::Queue,
                    namespace: Arc::from(""),
                    name: queue.name.clone(),
                    uid: queue.uid.clone(),
                    warning: true,
                    reason: reason.to_string(),
                    message: message.clone(),
                });
            }
            status.conditions.push(Condition {
                type_: QUEUE_SCHEDULABLE.to_string(),
                status: "False".into(),
                reason: reason.to_string(),
                message,
                last_transition: old
                    .filter(|o| o.reason == reason)
                    .map_or(st.now, |o| o.last_transition),
            });
        }
    }
    for (q, status) in st.queues.iter().zip(statuses) {
        if q.exists && q.status.as_ref() != Some(&status) {
            plan.queues.push(QueueStatusUpdate {
                name: q.name.clone(),
                status,
            });
        }
    }
}
