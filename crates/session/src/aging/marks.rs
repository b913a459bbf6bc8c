//! Which jobs of a session are aged, and how they order ([`Aging`]): plain values the session
//! keeps and the job order reads; the aging itself (marking, holding room) is the parent's.

use caldera_model::Time;
use std::cmp::Ordering;

/// The aged jobs of a session.
#[derive(Debug, Clone, Default)]
pub struct Aging {
    /// Per job: since when it has waited, when it is aged.
    pub(crate) since: Vec<Option<Time>>,
    /// Per job: aged and still to be placed, so it goes ahead of its queue.
    pub(crate) ahead: Vec<bool>,
    /// Per aged job: the dominant share of the cluster its missing members ask for (the larger
    /// goes first among aged jobs).
    pub(crate) size: Vec<f64>,
    /// Per job: room this session chose and held for it.
    pub(crate) chose: Vec<bool>,
    /// Whether any job is aged.
    pub(crate) any: bool,
}

impl Aging {
    /// Since when `job` has waited, if it is aged.
    pub fn since(&self, job: usize) -> Option<Time> {
        self.since.get(job).copied().flatten()
    }

    /// Whether `job` is aged.
    pub fn is_aged(&self, job: usize) -> bool {
        self.since(job).is_some()
    }

    /// Whether any job is aged (the job order consults [`Aging::order`] only then).
    pub fn any(&self) -> bool {
        self.any
    }

    /// Whether this session chose (and held) room for `job`, rather than keeping room held
    /// from an earlier session.
    pub fn chose(&self, job: usize) -> bool {
        self.chose.get(job).copied().unwrap_or(false)
    }

    /// Aged jobs not placed yet first, the largest gang first, then the longest-waiting;
    /// `Equal` otherwise.
    pub fn order(&self, a: usize, b: usize) -> Ordering {
        let key = |j: usize| {
            let ahead = self.ahead.get(j).copied().unwrap_or(false);
            ahead
                .then(|| self.since(j).map(|since| (self.size[j], since)))
                .flatten()
        };
        match (key(a), key(b)) {
            (Some((size_a, x)), Some((size_b, y))) => size_b.total_cmp(&size_a).then(x.cmp(&y)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }

    /// `job` was placed: it no longer goes ahead of the others for its further members.
    pub(crate) fn placed(&mut self, job: usize) {
        if let Some(a) = self.ahead.get_mut(job) {
            *a = false;
        }
    }
}
