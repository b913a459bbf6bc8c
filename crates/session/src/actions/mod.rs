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
///
/// With fairshare's `tenantKey` the job order reads each tenant's usage, which every placement
/// of the tenant's jobs raises: jobs then wait in one heap per tenant (their order among
/// themselves does not change when their tenant's usage does), and a pop takes the least of
/// the tenants' heads, so no job is passed because its tenant's usage moved while it waited.
#[derive(Debug, Default)]
pub(crate) struct Heap {
    items: Vec<usize>,
    /// Per tenant, its jobs' heap (only with tenants; `items` stays empty then).
    parts: std::collections::BTreeMap<u32, Vec<usize>>,
    tenants: Option<std::sync::Arc<crate::state::Tenants>>,
}

fn sift_up(items: &mut [usize], less: &dyn Fn(usize, usize) -> bool) {
    let mut i = items.len() - 1;
    while i > 0 {
        let p = (i - 1) / 2;
        if less(items[i], items[p]) {
            items.swap(i, p);
            i = p;
        } else {
            break;
        }
    }
}

fn pop_top(items: &mut Vec<usize>, less: &dyn Fn(usize, usize) -> bool) -> Option<usize> {
    if items.is_empty() {
        return None;
    }
    let last = items.len() - 1;
    items.swap(0, last);
    let top = items.pop();
    let n = items.len();
    let mut i = 0;
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut m = i;
        if l < n && less(items[l], items[m]) {
            m = l;
        }
        if r < n && less(items[r], items[m]) {
            m = r;
        }
        if m == i {
            break;
        }
        items.swap(i, m);
        i = m;
    }
    top
}

impl Heap {
    /// A heap that keeps one part per tenant when `tenants` is given.
    pub(crate) fn new(tenants: Option<std::sync::Arc<crate::state::Tenants>>) -> Self {
        Heap {
            tenants,
            ..Heap::default()
        }
    }

    pub(crate) fn push(&mut self, item: usize, less: &dyn Fn(usize, usize) -> bool) {
        let items = match &self.tenants {
            Some(t) => self.parts.entry(t.of_job[item]).or_default(),
            None => &mut self.items,
        };
        items.push(item);
        sift_up(items, less);
    }

    pub(crate) fn pop(&mut self, less: &dyn Fn(usize, usize) -> bool) -> Option<usize> {
        if self.tenants.is_none() {
            return pop_top(&mut self.items, less);
        }
        let mut best: Option<(u32, usize)> = None;
        for (&tenant, items) in &self.parts {
            let head = items[0];
            if best.is_none_or(|(_, b)| less(head, b)) {
                best = Some((tenant, head));
            }
        }
        let (tenant, _) = best?;
        let items = self.parts.get_mut(&tenant)?;
        let top = pop_top(items, less);
        if items.is_empty() {
            self.parts.remove(&tenant);
        }
        top
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty() && self.parts.is_empty()
    }

    pub(crate) fn drain(&mut self) -> Vec<usize> {
        let mut out = std::mem::take(&mut self.items);
        for (_, items) in std::mem::take(&mut self.parts) {
            out.extend(items);
        }
        out
    }
}

/// Builds one job heap per queue from `jobs`, ordered by the session's job order.
pub(crate) fn job_heaps(ssn: &Session, jobs: impl Iterator<Item = usize>) -> Vec<Heap> {
    let mut heaps: Vec<Heap> = (0..ssn.state.queues.len())
        .map(|_| Heap::new(ssn.state.tenants.clone()))
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
