//! Reservations: capacity held at a node for a task that is not bound yet.
//!
//! A reservation is a pending task held at a node. While it stands, the task's request counts
//! on that node for every other task — exactly as if it were bound — so nobody else takes the
//! room; the task itself gets the room back whenever its own job is tried (see
//! [`release`]/[`restore`] around [`crate::attempt::attempt`]).
//!
//! Today a reservation comes from a nomination: `status.nominatedNodeName` of one of our
//! pending pods, written after a preemption so the capacity freed by terminating victims goes
//! to the preemptor. Other holds of the same shape (members waiting for volumes, nodes booked
//! from an autoscaler) are meant to use the same thing: push a [`Reservation`] with
//! [`hold`].
//!
//! At session open every nomination is checked ([`open`]): it stands while the node, once the
//! pods terminating on it are gone and the other reservations there are counted, still has
//! room for the task; otherwise it is dropped and the plan clears `nominatedNodeName`.

use crate::session::Session;
use caldera_model::TaskStatus;

/// A pending task held at a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The task (index in the state's tasks).
    pub task: usize,
    /// The node (index in the state's nodes).
    pub node: usize,
    /// Counted on the node right now (false while its own job is being tried).
    pub held: bool,
}

/// Holds `task` at `node`: its request counts there for everyone else from now on.
pub fn hold(ssn: &mut Session, task: usize, node: usize) {
    let t = &ssn.state.tasks[task];
    let (req, ports) = (t.request.clone(), t.spec.host_ports.clone());
    ssn.state.nodes[node].add_pod(&req, &ports);
    ssn.touch_nodes(&[node as u32]);
    ssn.reservations.push(Reservation {
        task,
        node,
        held: true,
    });
    let job = ssn.state.tasks[task].job;
    ssn.reserved[job] += 1;
}

fn set_held(ssn: &mut Session, i: usize, held: bool) {
    let r = ssn.reservations[i];
    if r.held == held {
        return;
    }
    let t = &ssn.state.tasks[r.task];
    let (req, ports) = (t.request.clone(), t.spec.host_ports.clone());
    let node = &mut ssn.state.nodes[r.node];
    if held {
        node.add_pod(&req, &ports);
    } else {
        node.remove_pod(&req, &ports);
    }
    ssn.reservations[i].held = held;
    ssn.touch_nodes(&[r.node as u32]);
}

/// Lets `job` use the room held for its own tasks (before it is tried). Returns whether it
/// had any.
pub fn release(ssn: &mut Session, job: usize) -> bool {
    if !waiting(ssn, job) {
        return false;
    }
    let mine: Vec<usize> = (0..ssn.reservations.len())
        .filter(|&i| ssn.state.tasks[ssn.reservations[i].task].job == job)
        .collect();
    for &i in &mine {
        set_held(ssn, i, false);
    }
    !mine.is_empty()
}

/// After `job` was tried: reservations of its tasks still pending are held again; those of
/// tasks placed meanwhile are used up.
pub fn restore(ssn: &mut Session, job: usize) {
    let mut i = 0;
    while i < ssn.reservations.len() {
        let r = ssn.reservations[i];
        if ssn.state.tasks[r.task].job != job || r.held {
            i += 1;
            continue;
        }
        if ssn.state.tasks[r.task].status == TaskStatus::Pending {
            set_held(ssn, i, true);
            i += 1;
        } else {
            ssn.reservations.swap_remove(i);
            ssn.reserved[job] -= 1;
        }
    }
}

/// Whether `job` has room held for it.
pub fn waiting(ssn: &Session, job: usize) -> bool {
    ssn.reserved[job] > 0
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
    for (task, node) in nominated {
        let fits = node.is_some_and(|n| {
            let node = &ssn.state.nodes[n];
            let mut idle = node.idle();
            idle.add(&leaving[n]);
            ssn.state.tasks[task].request.fits_in(&idle)
        });
        match node {
            Some(n) if fits => hold(ssn, task, n),
            _ => ssn.nominations.push((task, None)),
        }
    }
}

/// Drops the room held for `job`'s tasks (their wait ended): it is free for everyone again.
pub fn drop_job(ssn: &mut Session, job: usize) {
    let mut i = 0;
    while i < ssn.reservations.len() {
        if ssn.state.tasks[ssn.reservations[i].task].job == job {
            set_held(ssn, i, false);
            ssn.reservations.swap_remove(i);
        } else {
            i += 1;
        }
    }
}
