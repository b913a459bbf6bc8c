//! Every reservation of a session ([`Reservations`]): plain values the session keeps; holding,
//! releasing and restoring them is the parent's.

use std::collections::{BTreeMap, BTreeSet};

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

/// Every reservation of a session, kept per job: a job's own are found (and released and
/// restored around each of its attempts) without looking at anyone else's.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    /// Per job index: its tasks' reservations.
    pub(crate) by_job: Vec<Vec<Reservation>>,
    /// Σ of their lengths.
    pub(crate) count: usize,
    /// Jobs with room held that a job of higher priority may use, by their priority.
    pub(crate) lendable: BTreeMap<i32, BTreeSet<usize>>,
    /// Per job: room held for it is never lent (members waiting for their volumes).
    pub(crate) kept: Vec<bool>,
    /// The job being tried now uses room held for others (its attempt differs from alike
    /// gangs').
    pub(crate) lent: bool,
}

impl Reservations {
    /// No reservation for any of `jobs` jobs.
    pub fn new(jobs: usize) -> Self {
        Reservations {
            by_job: vec![Vec::new(); jobs],
            count: 0,
            lendable: BTreeMap::new(),
            kept: vec![false; jobs],
            lent: false,
        }
    }

    /// Whether no room is held for anyone.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The reservations of `job`'s tasks.
    pub fn of_job(&self, job: usize) -> &[Reservation] {
        self.by_job.get(job).map(Vec::as_slice).unwrap_or_default()
    }

    /// The jobs with room held for them, in job order.
    pub fn jobs(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.by_job.len()).filter(|&j| !self.by_job[j].is_empty())
    }

    /// Whether the job being tried uses room held for jobs of lower priority.
    pub fn lent(&self) -> bool {
        self.lent
    }

    /// Forgets `job`'s reservations (their room is already given back on the nodes).
    pub(crate) fn clear(&mut self, job: usize, priority: i32) {
        if let Some(mine) = self.by_job.get_mut(job) {
            self.count -= mine.len();
            mine.clear();
        }
        self.unlist(job, priority);
    }

    pub(crate) fn unlist(&mut self, job: usize, priority: i32) {
        if let Some(set) = self.lendable.get_mut(&priority) {
            set.remove(&job);
            if set.is_empty() {
                self.lendable.remove(&priority);
            }
        }
    }
}
