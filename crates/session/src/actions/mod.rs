//! Actions: the steps of a session, run in the configured order.

use crate::session::Session;

mod allocate;
mod backfill;
mod consolidate;
mod enqueue;
mod preempt;

pub use allocate::Allocate;
pub use backfill::Backfill;
pub use consolidate::Consolidate;
pub use enqueue::Enqueue;
pub use preempt::{Preempt, Reclaim};

/// One step of a session.
pub trait Action: std::fmt::Debug + Send + Sync {
    /// The name in the config's `actions` string.
    fn name(&self) -> &'static str;
    /// Runs the step.
    fn execute(&self, ssn: &mut Session);
}

/// A priority queue ordered by a comparator that is consulted when items are pushed and
/// popped (orders change as shares change; like Volcano's PriorityQueue, entries are not
/// re-sorted when an unrelated item's key changes).
#[derive(Debug, Default)]
pub(crate) struct Heap {
    items: Vec<usize>,
}

impl Heap {
    pub(crate) fn push(&mut self, item: usize, less: &dyn Fn(usize, usize) -> bool) {
        self.items.push(item);
        let mut i = self.items.len() - 1;
        while i > 0 {
            let p = (i - 1) / 2;
            if less(self.items[i], self.items[p]) {
                self.items.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    pub(crate) fn pop(&mut self, less: &dyn Fn(usize, usize) -> bool) -> Option<usize> {
        if self.items.is_empty() {
            return None;
        }
        let last = self.items.len() - 1;
        self.items.swap(0, last);
        let top = self.items.pop();
        let n = self.items.len();
        let mut i = 0;
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < n && less(self.items[l], self.items[m]) {
                m = l;
            }
            if r < n && less(self.items[r], self.items[m]) {
                m = r;
            }
            if m == i {
                break;
            }
            self.items.swap(i, m);
            i = m;
        }
        top
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub(crate) fn drain(&mut self) -> Vec<usize> {
        std::mem::take(&mut self.items)
    }
}

/// Builds one job heap per queue from `jobs`, ordered by the session's job order.
pub(crate) fn job_heaps(ssn: &Session, jobs: impl Iterator<Item = usize>) -> Vec<Heap> {
    let mut heaps: Vec<Heap> = (0..ssn.state.queues.len())
        .map(|_| Heap::default())
        .collect();
    let less = |a: usize, b: usize| ssn.job_order(a, b).is_lt();
    for j in jobs {
        let q = ssn.state.job_queue[j];
        heaps[q].push(j, &less);
    }
    heaps
}

/// The queue to visit next among those with work left: the first in queue order.
pub(crate) fn next_queue(ssn: &Session, heaps: &[Heap]) -> Option<usize> {
    (0..heaps.len())
        .filter(|&q| !heaps[q].is_empty())
        .min_by(|&a, &b| ssn.queue_order(a, b))
}
