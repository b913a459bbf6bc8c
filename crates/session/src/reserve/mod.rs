//! Reservations: capacity held at a node for a task that is not bound yet.
//!
//! A reservation is a pending task held at a node. While it stands, the task's request counts
//! on that node for every job of lower or equal priority — exactly as if it were bound — so
//! none of them takes the room (and the task counts in that node's inter-pod checks, as a
//! nominated pod does in kube-scheduler's: see [`crate::interpod`]); the task itself gets the room back whenever its own job is
//! tried (see [`release`]/[`restore`] around [`crate::attempt::attempt`]).
//!
//! **Priority.** As kube-scheduler adds only nominated pods of greater or equal priority when
//! it filters a pod, a job of strictly higher priority than the holder may use held room:
//! while it is tried, the reservations of lower-priority jobs are released as well. After
//! its attempt each of them is held again if its task still fits on its node; when one no
//! longer does (the higher job took the room), the holder loses all its room at once (a gang
//! held in part is of no use) and its nominations are cleared, so it is planned again like
//! any pending job — preempt may choose victims for it anew in the same session. Room held
//! for members waiting for their volumes (claims being provisioned for those nodes) is not
//! lent. Preempt and reclaim still count all held room as taken.
//!
//! Today a reservation comes from a nomination: `status.nominatedNodeName` of one of our
//! pending pods, written after a preemption so the capacity freed by terminating victims goes
//! to the preemptor. Other holds of the same shape (members waiting for volumes, nodes booked
//! from an autoscaler) are meant to use the same thing: push a [`Reservation`] with
//! [`hold`].
//!
//! At session open every nomination is checked ([`open`]): it stands while the node, once the
//! pods terminating on it are gone and the other reservations there are counted, still has
//! room for the task; otherwise it is dropped and the plan clears `nominatedNodeName`. The
//! nominations of a gang aged by fairshare's `maxWait` hold room that running pods are still
//! to free ([`crate::aging`]): they stand while the node's allocatable, less the other
//! reservations there, holds the task.

pub mod ledger;
use crate::session::Session;
use crate::track::Hold;
use caldera_model::{Resources, TaskStatus};
pub use ledger::{Reservation, Reservations};

/// The room let go for one attempt: the jobs of lower priority whose reservations were
/// released (besides the job's own).
#[derive(Debug, Default)]
pub struct Released {
    own: bool,
    /// Each job released, with the load of its reservations' nodes once released.
    others: Vec<(usize, Vec<(Resources, i64)>)>,
}

/// Holds `task` at `node`: its request counts there for everyone else from now on.
pub fn hold(ssn: &mut Session, task: usize, node: usize) {
    let job = ssn.state.tasks[task].job;
    ssn.place(task, Hold::Nominated(node));
    ssn.reservations.by_job[job].push(Reservation {
        task,
        node,
        held: true,
    });
    ssn.reservations.count += 1;
    let priority = ssn.state.jobs[job].priority;
    let r = &mut ssn.reservations;
    if ssn.state.tasks[task].volumes.is_some() {
        r.kept[job] = true;
        r.unlist(job, priority);
    } else if !r.kept[job] {
        r.lendable.entry(priority).or_default().insert(job);
    }
}

/// Counts (or stops counting) reservation `i` of `job` on its node.
fn set_held(ssn: &mut Session, job: usize, i: usize, held: bool) {
    let r = ssn.reservations.by_job[job][i];
    if r.held == held {
        return;
    }
    if held {
        ssn.place(r.task, Hold::Nominated(r.node));
    } else {
        ssn.unplace(r.task, Hold::Nominated(r.node));
    }
    ssn.reservations.by_job[job][i].held = held;
}

/// Lets `job` use the room held for its own tasks and for jobs of lower priority (before it
/// is tried).
pub fn release(ssn: &mut Session, job: usize) -> Released {
    if ssn.reservations.is_empty() {
        return Released::default();
    }
    let priority = ssn.state.jobs[job].priority;
    let others: Vec<usize> = ssn
        .reservations
        .lendable
        .range(..priority)
        .flat_map(|(_, jobs)| jobs.iter().copied())
        .filter(|&j| j != job)
        .collect();
    for &j in others.iter().chain(std::iter::once(&job)) {
        for i in 0..ssn.reservations.of_job(j).len() {
            set_held(ssn, j, i, false);
        }
    }
    ssn.reservations.lent = !others.is_empty();
    let others = others
        .into_iter()
        .map(|j| {
            let loads = ssn
                .reservations
                .of_job(j)
                .iter()
                .map(|r| {
                    let node = &ssn.state.nodes[r.node];
                    (node.used.clone(), node.pod_count)
                })
                .collect();
            (j, loads)
        })
        .collect();
    Released {
        own: waiting(ssn, job),
        others,
    }
}

/// After `job` was tried: its tasks' reservations are held again while still pending, used up
/// once placed; those of lower-priority jobs released for it are held again where their task
/// still fits, and a job any of whose tasks no longer fits loses all its room (see the
/// module's "Priority").
pub fn restore(ssn: &mut Session, job: usize, released: Released) {
    ssn.reservations.lent = false;
    if released.own {
        restore_own(ssn, job);
    }
    for (j, loads) in released.others {
        let mut fits = true;
        for (i, (used, pods)) in loads.iter().enumerate() {
            let r = ssn.reservations.by_job[j][i];
            let node = &ssn.state.nodes[r.node];
            // Untouched by the attempt: the hold stands as it stood (beside victims still
            // terminating, the node may be over-committed until they are gone).
            let untouched = node.used == *used && node.pod_count == *pods;
            if fits && (untouched || still_fits(ssn, r)) {
                set_held(ssn, j, i, true);
            } else {
                fits = false;
            }
        }
        if !fits {
            let tasks: Vec<usize> = ssn.reservations.of_job(j).iter().map(|r| r.task).collect();
            drop_job(ssn, j);
            ssn.decisions
                .nominations
                .extend(tasks.into_iter().map(|t| (t, None)));
        }
    }
}

/// Whether reservation `r` (not held now) fits on its node once the pods terminating there are
/// gone, as [`open`] judges a nomination.
fn still_fits(ssn: &Session, r: Reservation) -> bool {
    let st = &ssn.state;
    let node = &st.nodes[r.node];
    let mut idle = node.idle();
    for t in &st.tasks {
        if t.status == TaskStatus::Releasing && t.node.as_deref() == Some(&*node.name) {
            idle.add(&t.request);
        }
    }
    st.tasks[r.task].request.fits_in(&idle)
}

fn restore_own(ssn: &mut Session, job: usize) {
    let mut i = 0;
    while i < ssn.reservations.of_job(job).len() {
        let r = ssn.reservations.by_job[job][i];
        if r.held {
            i += 1;
        } else if ssn.state.tasks[r.task].status == TaskStatus::Pending {
            set_held(ssn, job, i, true);
            i += 1;
        } else {
            ssn.reservations.by_job[job].swap_remove(i);
            ssn.reservations.count -= 1;
        }
    }
    if ssn.reservations.of_job(job).is_empty() {
        let priority = ssn.state.jobs[job].priority;
        ssn.reservations.unlist(job, priority);
    }
}

/// Whether `job` has room held for it.
pub fn waiting(ssn: &Session, job: usize) -> bool {
    !ssn.reservations.of_job(job).is_empty()
}

/// The tasks of `job` with room held for them.
pub fn of_job_tasks(ssn: &Session, job: usize) -> Vec<usize> {
    ssn.reservations
        .of_job(job)
        .iter()
        .map(|r| r.task)
        .collect()
}

/// Reads the nominations of the snapshot's pending tasks into reservations, dropping (and
/// planning to clear) those that can no longer make their task fit.
pub fn open(ssn: &mut Session) {
    let st = &ssn.state;
    // What the terminating (Releasing) tasks on each node will give back.
    let mut leaving = vec![caldera_model::Resources::new(); st.nodes.len()];
    for t in &st.tasks {
        if t.status == TaskStatus::Releasing {
            if let Some(n) = t.node.as_deref().and_then(|n| st.node_index(n)) {
                leaving[n].add(&t.request);
            }
        }
    }
    let nominated: Vec<(usize, Option<usize>)> = st
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == TaskStatus::Pending && !t.gated)
        .filter_map(|(i, t)| {
            let name = t.nominated.as_deref()?;
            Some((i, st.node_index(name).filter(|&n| st.nodes[n].ready)))
        })
        .collect();
    // Room held for an aged gang (fairshare's maxWait) is kept while it is still being freed:
    // judged after every other nomination (which it must not crowd out), it stands while the
    // node, once every pod but the room held there is gone, could hold it (see
    // [`crate::aging`]).
    let (aged, nominated): (Vec<_>, Vec<_>) = nominated
        .into_iter()
        .partition(|&(t, _)| ssn.aging.is_aged(ssn.state.tasks[t].job));
    let mut held_on = vec![caldera_model::Resources::new(); ssn.state.nodes.len()];
    for (task, node) in nominated {
        let fits = node.is_some_and(|n| {
            let node = &ssn.state.nodes[n];
            let mut idle = node.idle();
            idle.add(&leaving[n]);
            ssn.state.tasks[task].request.fits_in(&idle)
        });
        match node {
            Some(n) if fits => {
                hold(ssn, task, n);
                held_on[n].add(&ssn.state.tasks[task].request);
            }
            _ => ssn.decisions.nominations.push((task, None)),
        }
    }
    for (task, node) in aged {
        let fits = node.is_some_and(|n| {
            let room = ssn.state.nodes[n].allocatable.minus(&held_on[n]);
            ssn.state.tasks[task].request.fits_in(&room)
        });
        match node {
            Some(n) if fits => {
                hold(ssn, task, n);
                held_on[n].add(&ssn.state.tasks[task].request);
            }
            _ => ssn.decisions.nominations.push((task, None)),
        }
    }
}

/// Drops the room held for `job`'s tasks (their wait ended): it is free for everyone again.
pub fn drop_job(ssn: &mut Session, job: usize) {
    for i in 0..ssn.reservations.of_job(job).len() {
        set_held(ssn, job, i, false);
    }
    let priority = ssn.state.jobs[job].priority;
    ssn.reservations.clear(job, priority);
}

/// How many reservations `job` has now: [`drop_since`] with it takes back those added after.
pub fn mark(ssn: &Session, job: usize) -> usize {
    ssn.reservations.of_job(job).len()
}

/// Drops the reservations of `job` added since [`mark`] returned `len` (a plan that did not
/// stick), leaving those it had before as they were.
pub fn drop_since(ssn: &mut Session, job: usize, len: usize) {
    let now = ssn.reservations.of_job(job).len();
    if now <= len {
        return;
    }
    for i in len..now {
        set_held(ssn, job, i, false);
    }
    let r = &mut ssn.reservations;
    r.by_job[job].truncate(len);
    r.count -= now - len;
    let priority = ssn.state.jobs[job].priority;
    let st = &ssn.state;
    let r = &mut ssn.reservations;
    r.kept[job] = r.by_job[job]
        .iter()
        .any(|x| st.tasks[x.task].volumes.is_some());
    if r.by_job[job].is_empty() || r.kept[job] {
        r.unlist(job, priority);
    } else {
        r.lendable.entry(priority).or_default().insert(job);
    }
}
