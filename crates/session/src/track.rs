//! Everything that holds capacity during a session, behind one trait ([`Tracker`]).
//!
//! As kube-scheduler's framework has Reserve/Unreserve, every piece of state that counts what
//! a task takes on a node — the ledger (node load, job and queue sums), inter-pod counts,
//! volumes, DRA devices and bookings — is told the same three things: a task comes to hold
//! room ([`Tracker::place`]), stops holding it ([`Tracker::unplace`]), and whether a task may
//! go on a node as far as it is concerned ([`Tracker::check`]). The callers (statements,
//! eviction searches, reservations, consolidation, topology) name a [`Hold`], never a tracker:
//! [`Trackers`] tells each of them in a fixed order, with no dynamic dispatch and no
//! allocation of its own.
//!
//! **How a task holds room** ([`Hold`]) differs by who put it there: placed by this session
//! (`allocate`), running since before it (taken off by an eviction search and given back),
//! terminating (its room counted once by `preempt`/`reclaim`), or nominated (a reservation,
//! [`crate::reserve`]). Reservations are therefore not a tracker of their own: a reservation is
//! a [`Hold::Nominated`] that the ledger and inter-pod counts track, and `reserve` is the policy
//! that decides when one is held, lent and dropped.
//!
//! **Order.** Trackers are told in the order ledger, inter-pod, volumes, devices, bookings,
//! on place and unplace alike; each pushes the nodes whose fit for other pods changed into one
//! buffer, which the session turns into re-scoring ([`crate::session::Session::touch_nodes`]).
//!
//! **Idempotence.** `unplace` of a task a tracker holds nothing for changes nothing for the
//! trackers that keep per-task records (inter-pod, volumes, devices). The ledger keeps sums,
//! not records: its callers pair every unplace with a place (a statement's ops, an eviction
//! search's taken list, a reservation's `held` flag).

use crate::devices::Devices;
use crate::interpod::InterPod;
use crate::run::JobRun;
use crate::volumes::Volumes;
use caldera_model::{Job, Node, Resources, Task};
use caldera_queue::QueueTree;

/// How a task holds room on a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Placed on the node by this session (a statement's `allocate`; `discard` unplaces it).
    Placed(usize),
    /// On its node since before the session (`None`: a node the session does not know): an
    /// eviction search unplaces it (takes it off, as if gone) and places it back. `ready`:
    /// it counts toward its gang.
    Running {
        /// Its node.
        node: Option<usize>,
        /// Counts toward its gang's ready members.
        ready: bool,
    },
    /// Terminating on the node: while `preempt`/`reclaim` chooses, unplaced so the room it
    /// frees counts once.
    Terminating(usize),
    /// A pending task held at the node for later (a reservation, see [`crate::reserve`]).
    Nominated(usize),
}

/// What a tracker reads and writes when told of a hold: the tasks, the nodes (whose load only
/// the ledger changes), the job and queue sums (the ledger's), and the nodes touched.
pub struct World<'a> {
    /// Every task.
    pub tasks: &'a [Task],
    /// Every node.
    pub nodes: &'a mut [Node],
    /// Per job: its sums.
    pub runs: &'a mut [JobRun],
    /// Queue index of each job.
    pub job_queue: &'a [usize],
    /// Σ requests per queue.
    pub queue_allocated: &'a mut [Resources],
    /// Σ requests per queue subtree.
    pub tree_allocated: &'a mut [Resources],
    /// The queue tree.
    pub tree: &'a QueueTree,
    /// Σ used over Ready nodes ([`crate::state::State::used_now`]).
    pub used_now: &'a mut Resources,
    /// Nodes whose fit for other pods changed, in order.
    pub touched: &'a mut Vec<u32>,
}

/// Counts `req` on (`add`) or off queue `q` and every queue above it.
pub(crate) fn charge(
    tree: &QueueTree,
    queue_allocated: &mut [Resources],
    tree_allocated: &mut [Resources],
    q: usize,
    req: &Resources,
    add: bool,
) {
    let change = |r: &mut Resources| if add { r.add(req) } else { r.sub(req) };
    change(&mut queue_allocated[q]);
    change(&mut tree_allocated[q]);
    for &p in tree.ancestors(q) {
        change(&mut tree_allocated[p]);
    }
}

/// Something that holds capacity during a session.
pub trait Tracker {
    /// `task` comes to hold room as `hold` says. Pushes onto `w.touched` every node whose fit
    /// for other pods this changes.
    fn place(&mut self, w: &mut World<'_>, task: usize, hold: Hold);

    /// Undoes [`Tracker::place`] of `task` held as `hold`.
    fn unplace(&mut self, w: &mut World<'_>, task: usize, hold: Hold);

    /// Whether `task` may go on `node` as far as this tracker's holdings go. Default: yes.
    fn check(&self, _nodes: &[Node], _task: &Task, _node: usize) -> Result<(), String> {
        Ok(())
    }
}

/// The ledger: node load (requests, pod count, host ports) and, for tasks that hold a node
/// (placed or running), their job's and queue's sums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ledger;

impl Ledger {
    fn change(w: &mut World<'_>, task: usize, hold: Hold, add: bool) {
        let t = &w.tasks[task];
        let (node, accounts, ready) = match hold {
            Hold::Placed(n) => (Some(n), true, true),
            Hold::Running { node, ready } => (node, true, ready),
            Hold::Terminating(n) | Hold::Nominated(n) => (Some(n), false, false),
        };
        if let Some(n) = node {
            let ready = w.nodes[n].ready;
            if add {
                w.nodes[n].add_pod(&t.request, &t.spec.host_ports);
                if ready {
                    w.used_now.add(&t.request);
                }
            } else {
                w.nodes[n].remove_pod(&t.request, &t.spec.host_ports);
                if ready {
                    w.used_now.sub(&t.request);
                }
            }
        }
        if accounts {
            let run = &mut w.runs[t.job];
            if add {
                run.allocated.add(&t.request);
            } else {
                run.allocated.sub(&t.request);
            }
            if ready {
                if add {
                    run.ready += 1;
                } else {
                    run.ready -= 1;
                }
            }
            let q = w.job_queue[t.job];
            charge(
                w.tree,
                w.queue_allocated,
                w.tree_allocated,
                q,
                &t.request,
                add,
            );
        }
        if let Some(n) = node {
            w.touched.push(n as u32);
        }
    }
}

impl Tracker for Ledger {
    fn place(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        Self::change(w, task, hold, true);
    }

    fn unplace(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        Self::change(w, task, hold, false);
    }

    /// The first resource the node lacks. (The session's fit check names every lacking
    /// resource, as kube-scheduler's message does, and keeps the reasons interned: see
    /// [`crate::session::Session::fits_on`].)
    fn check(&self, nodes: &[Node], task: &Task, node: usize) -> Result<(), String> {
        let n = &nodes[node];
        if task.request.fits_in_left(&n.allocatable, &n.used) {
            return Ok(());
        }
        let first = task
            .request
            .insufficient_left(&n.allocatable, &n.used)
            .next();
        Err(format!("Insufficient {}", first.unwrap_or_default()))
    }
}

impl Tracker for InterPod {
    fn place(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        match hold {
            Hold::Placed(n) => {
                let touched = InterPod::place(self, task, &w.tasks[task], n as u32, w.nodes);
                w.touched.extend(touched);
            }
            Hold::Nominated(n) => self.nominate(task, &w.tasks[task], n as u32),
            // Pods running or terminating that an eviction search took off come back.
            Hold::Running { .. } | Hold::Terminating(_) => {
                let touched = self.come_back(&w.tasks[task], w.nodes);
                w.touched.extend(touched);
            }
        }
    }

    fn unplace(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        match hold {
            Hold::Placed(_) => {
                let touched = InterPod::unplace(self, task, w.nodes);
                w.touched.extend(touched);
            }
            Hold::Nominated(n) => self.unnominate(task, n as u32),
            // An eviction search takes a victim (or a pod already terminating) off: its terms
            // go with it, as kube-scheduler's preemption removes victims from the NodeInfo it
            // filters the preemptor against. Nothing binds beside it in that session: a
            // preemptor is nominated, and binds once the victim is gone.
            Hold::Running { .. } | Hold::Terminating(_) => {
                let touched = self.leave(&w.tasks[task], w.nodes);
                w.touched.extend(touched);
            }
        }
    }
    // `check`: inter-pod terms are the `predicates` plugin's to check, under its
    // `podAffinity`/`podTopologySpread` switches ([`InterPod::check`]).
}

impl Tracker for Volumes {
    fn place(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        if let Hold::Placed(n) = hold {
            let touched = Volumes::place(self, task, &w.tasks[task], n as u32, w.nodes);
            w.touched.extend(touched);
        }
    }

    fn unplace(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        if let Hold::Placed(_) = hold {
            let touched = Volumes::unplace(self, task, &w.tasks[task]);
            w.touched.extend(touched);
        }
    }
    // `check`: the `predicates` plugin's, under its `volumeBinding`/`volumeLimits` switches
    // ([`Volumes::check`]).
}

impl Tracker for Devices {
    fn place(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        let touched = match hold {
            Hold::Placed(n) => Devices::place(self, task, &w.tasks[task], n, w.nodes),
            Hold::Running { .. } | Hold::Terminating(_) => self.back(&w.tasks[task]),
            Hold::Nominated(_) => return,
        };
        w.touched.extend(touched);
    }

    fn unplace(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        let touched = match hold {
            Hold::Placed(_) => Devices::unplace(self, task, &w.tasks[task]),
            Hold::Running { .. } | Hold::Terminating(_) => self.leave(&w.tasks[task]),
            Hold::Nominated(_) => return,
        };
        w.touched.extend(touched);
    }

    fn check(&self, nodes: &[Node], task: &Task, node: usize) -> Result<(), String> {
        Devices::check(self, task, node, nodes)
    }
}

/// Nodes booked for a job (capacity an autoscaler added for it): nobody else is placed there,
/// and the job itself only once its request is provisioned. Nothing in a session changes a
/// booking, so place and unplace do nothing; its check is asked when a member's
/// nodes are scoped (a booked node is out of scope, like a static filter), not at each fit
/// ([`Tracker::check`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Bookings {
    /// Per node: booked for the job at this index, for a job not in the snapshot
    /// (`Some(None)`), or not booked.
    by_node: Vec<Option<Option<usize>>>,
    /// Per job: may use the nodes booked for it (its request is provisioned).
    may_use: Vec<bool>,
}

/// Why a node booked for another gang was not considered.
pub const BOOKED: &str = "node(s) were booked for another gang";

impl Bookings {
    /// The bookings of `nodes` for `jobs`.
    pub fn new(nodes: &[Node], jobs: &[Job]) -> Self {
        if nodes.iter().all(|n| n.booked_for.is_none()) {
            return Bookings::default();
        }
        let index: std::collections::HashMap<&str, usize> =
            jobs.iter().enumerate().map(|(i, j)| (&*j.id, i)).collect();
        Bookings {
            by_node: nodes
                .iter()
                .map(|n| {
                    let id = n.booked_for.as_deref()?;
                    Some(index.get(id).copied())
                })
                .collect(),
            may_use: jobs
                .iter()
                .map(|j| {
                    j.capacity
                        .as_ref()
                        .is_some_and(|c| c.state == caldera_model::CapacityState::Provisioned)
                })
                .collect(),
        }
    }

    /// Whether some node is booked.
    pub fn any(&self) -> bool {
        !self.by_node.is_empty()
    }

    /// Whether `node` is booked and not for `job` to use now.
    pub fn booked_for_other(&self, node: usize, job: usize) -> bool {
        match self.by_node.get(node) {
            Some(Some(owner)) => *owner != Some(job) || !self.may_use[job],
            _ => false,
        }
    }
}

impl Tracker for Bookings {
    fn place(&mut self, _w: &mut World<'_>, _task: usize, _hold: Hold) {}

    fn unplace(&mut self, _w: &mut World<'_>, _task: usize, _hold: Hold) {}

    /// `node` is booked for another job, or for `task`'s while its request is only accepted.
    fn check(&self, _nodes: &[Node], task: &Task, node: usize) -> Result<(), String> {
        if self.booked_for_other(node, task.job) {
            return Err(BOOKED.to_string());
        }
        Ok(())
    }
}

/// Every tracker of a session, told in a fixed order (static dispatch).
#[derive(Debug, Clone, PartialEq)]
pub struct Trackers {
    /// Node load and job/queue sums.
    pub ledger: Ledger,
    /// Pods counted by inter-pod constraints, this session's placements included.
    pub interpod: InterPod,
    /// Volumes taken by this session's placements, claims in use, attach counts.
    pub volumes: Volumes,
    /// DRA devices: which are allocated, the claims this session allocated and for whom.
    pub devices: Devices,
    /// Nodes booked for a job.
    pub bookings: Bookings,
}

impl Trackers {
    /// Tells every tracker that `task` holds room as `hold` says.
    pub fn place(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        // (Named through the trait: the trackers have inherent methods of these names.)
        Tracker::place(&mut self.ledger, w, task, hold);
        Tracker::place(&mut self.interpod, w, task, hold);
        Tracker::place(&mut self.volumes, w, task, hold);
        Tracker::place(&mut self.devices, w, task, hold);
        Tracker::place(&mut self.bookings, w, task, hold);
    }

    /// Tells every tracker that `task` no longer holds room as `hold` says.
    pub fn unplace(&mut self, w: &mut World<'_>, task: usize, hold: Hold) {
        Tracker::unplace(&mut self.ledger, w, task, hold);
        Tracker::unplace(&mut self.interpod, w, task, hold);
        Tracker::unplace(&mut self.volumes, w, task, hold);
        Tracker::unplace(&mut self.devices, w, task, hold);
        Tracker::unplace(&mut self.bookings, w, task, hold);
    }

    /// What the trackers past the ledger say of `task` on `node` (the ledger's resources and
    /// the plugins' filters are checked before, by the session; bookings when scoping).
    pub fn check(&self, nodes: &[Node], task: &Task, node: usize) -> Result<(), String> {
        Tracker::check(&self.interpod, nodes, task, node)?;
        Tracker::check(&self.volumes, nodes, task, node)?;
        Tracker::check(&self.devices, nodes, task, node)
    }
}
