//! The event queue: bounded, and folding under load, as client-go's event broadcaster and
//! correlator do.
//!
//! Events wait here until the binds ahead of them are done (see the crate docs). Up to
//! [`EventQueue::soft_cap`] entries each event is its own entry and is written as it is.
//! Beyond that, an event is folded into the newest queued entry with the same [`FoldKey`] —
//! the same reason, on members of the same PodGroup (or on the PodGroup itself) — and that
//! entry is written once, as an `events.k8s.io/v1` Event with `series.count` saying how many it
//! stands for. An event that has nothing to fold into starts a new entry while the queue holds
//! less than its memory cap (`Follow::event_queue_bytes`, 128 MiB by default: about 150,000 events
//! that fold into nothing, such as the `Scheduled` events of a backlog of single-pod gangs, each
//! about its own PodGroup); past that it is dropped and counted
//! (`caldera_events_dropped_total`), as client-go drops what does not fit its broadcaster's
//! queue. The cap is in memory rather than in entries because a backlog of one-member gangs
//! folds nothing, and its per-pod events are the ones users read (`kubectl describe pod`): a
//! count small enough to bound memory in the worst case would drop them for realistic
//! backlogs. Each entry's memory is estimated by [`QueuedEvent::footprint`] (checked against
//! what the allocator hands out in this module's tests).

use caldera_model::{Event, EventObject};
use k8s_openapi::jiff::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tokio_util::task::task_tracker::TaskTrackerToken;

/// The PodGroup an event's object belongs to (itself, for a PodGroup).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Group {
    /// Namespace.
    pub namespace: Arc<str>,
    /// PodGroup name.
    pub name: Arc<str>,
    /// PodGroup uid (`namespace/name` when unknown).
    pub uid: Arc<str>,
    /// A native `scheduling.k8s.io/v1alpha2` PodGroup, not a Volcano one.
    pub native: bool,
}

/// What folds together: same reason and type, same kind of object, same PodGroup (or, for a
/// pod of no PodGroup, the same pod).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct FoldKey {
    object: EventObject,
    namespace: Arc<str>,
    /// The PodGroup's name, or the object's own name when it has none.
    owner: Arc<str>,
    reason: String,
    warning: bool,
}

/// An event waiting to be written, standing for `count` events the plans asked for.
#[derive(Debug)]
pub(crate) struct QueuedEvent {
    /// The first event folded here (its object is the one the written Event regards).
    pub event: Event,
    /// `Binding` for a bound pod's `Scheduled`, `Scheduling` otherwise.
    pub action: &'static str,
    /// The PodGroup of the event's object.
    pub group: Option<Arc<Group>>,
    /// Events this entry stands for (1 until something is folded in).
    pub count: u32,
    /// The newest message folded in (written when every event was about one object).
    pub last_message: Option<String>,
    /// Whether events about other objects were folded in.
    pub other_objects: bool,
    /// When the first of them was queued (`eventTime`).
    pub first_seen: Timestamp,
    /// When the newest was queued (`series.lastObservedTime`).
    pub last_seen: Timestamp,
    /// Keeps [`crate::Binder::drain`] waiting until the entry is written or given up.
    pub _pending: Option<TaskTrackerToken>,
}

impl QueuedEvent {
    /// A fresh entry for one event.
    pub fn new(event: Event, action: &'static str, group: Option<Arc<Group>>) -> Self {
        let now = Timestamp::now();
        QueuedEvent {
            first_seen: now,
            last_seen: now,
            event,
            action,
            group,
            count: 1,
            last_message: None,
            other_objects: false,
            _pending: None,
        }
    }

    fn key(&self) -> FoldKey {
        let e = &self.event;
        FoldKey {
            object: e.object,
            namespace: e.namespace.clone(),
            owner: self
                .group
                .as_ref()
                .map_or_else(|| e.name.clone(), |g| g.name.clone()),
            reason: e.reason.clone(),
            warning: e.warning,
        }
    }

    /// Estimated memory this entry takes in the queue: the entry and its slot in the queue's
    /// map, its key in the fold index (with the reason cloned), and the strings it owns or
    /// shares (counted whole, as if it were their only owner: conservative). Checked against
    /// the allocator in this module's tests.
    pub fn footprint(&self) -> usize {
        /// `Arc<str>`: the two counts before the bytes.
        const ARC: usize = 2 * std::mem::size_of::<usize>();
        let e = &self.event;
        let arc = |s: &Arc<str>| ARC + s.len();
        let group = self.group.as_ref().map_or(0, |g| {
            ARC + std::mem::size_of::<Group>() + arc(&g.namespace) + arc(&g.name) + arc(&g.uid)
        });
        // Slots counted twice: B-tree nodes filled in key order stay about half full, and a
        // hash map's buckets are between 7/16 and 7/8 used.
        2 * std::mem::size_of::<(u64, QueuedEvent)>()
            + 2 * std::mem::size_of::<(FoldKey, u64)>()
            + arc(&e.namespace)
            + arc(&e.name)
            + arc(&e.uid)
            + 2 * e.reason.capacity()
            + e.message.capacity()
            + self.last_message.as_ref().map_or(0, String::capacity)
            + group
    }

    /// The note to write: the event's own message, or for a folded entry what it stands for.
    pub fn note(&self) -> String {
        if self.count <= 1 {
            return self.event.message.clone();
        }
        if !self.other_objects {
            return self
                .last_message
                .clone()
                .unwrap_or_else(|| self.event.message.clone());
        }
        let more = self.count - 1;
        match &self.group {
            Some(g) => format!(
                "{} (and {more} more {} on members of PodGroup {}/{})",
                self.event.message, self.event.reason, g.namespace, g.name
            ),
            None => format!("{} (and {more} more like it)", self.event.message),
        }
    }
}

/// Outcome of [`EventQueue::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// A new entry.
    Queued,
    /// Folded into a queued entry.
    Folded,
    /// Dropped: the queue is full and nothing to fold into.
    Dropped,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct EventQueue {
    soft_cap: usize,
    max_bytes: usize,
    /// Estimated memory of the entries ([`QueuedEvent::footprint`] summed).
    bytes: usize,
    next: u64,
    entries: BTreeMap<u64, QueuedEvent>,
    newest: HashMap<FoldKey, u64>,
}

impl EventQueue {
    /// A queue folding beyond `soft_cap` entries and dropping what cannot fold once its entries
    /// take `max_bytes` (the first `soft_cap` entries are always kept).
    pub fn new(soft_cap: usize, max_bytes: usize) -> Self {
        EventQueue {
            soft_cap: soft_cap.max(1),
            max_bytes,
            bytes: 0,
            next: 0,
            entries: BTreeMap::new(),
            newest: HashMap::new(),
        }
    }

    /// Estimated memory the entries take (see [`QueuedEvent::footprint`]).
    #[cfg(test)]
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries waiting.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Queues `e`, folding or dropping it when the queue is over its caps.
    pub fn push(&mut self, e: QueuedEvent) -> Pushed {
        let key = e.key();
        if self.entries.len() >= self.soft_cap {
            let target = self.newest.get(&key).and_then(|s| self.entries.get_mut(s));
            if let Some(into) = target {
                let before = into.footprint();
                into.count = into.count.saturating_add(e.count);
                if into.event.uid != e.event.uid || into.event.name != e.event.name {
                    into.other_objects = true;
                }
                into.other_objects |= e.other_objects;
                into.last_message = Some(e.last_message.unwrap_or(e.event.message));
                into.last_seen = into.last_seen.max(e.last_seen);
                self.bytes = (self.bytes + into.footprint()).saturating_sub(before);
                return Pushed::Folded;
            }
            if self.bytes.saturating_add(e.footprint()) > self.max_bytes {
                return Pushed::Dropped;
            }
        }
        let seq = self.next;
        self.next += 1;
        self.bytes += e.footprint();
        self.newest.insert(key, seq);
        self.entries.insert(seq, e);
        Pushed::Queued
    }

    /// The oldest entry.
    pub fn pop(&mut self) -> Option<QueuedEvent> {
        let (seq, e) = self.entries.pop_first()?;
        self.bytes = self.bytes.saturating_sub(e.footprint());
        let key = e.key();
        if self.newest.get(&key) == Some(&seq) {
            self.newest.remove(&key);
        }
        Some(e)
    }

    /// Empties the queue, returning how many events its entries stood for.
    pub fn clear(&mut self) -> u64 {
        let n = self.entries.values().map(|e| u64::from(e.count)).sum();
        self.entries.clear();
        self.newest.clear();
        self.bytes = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(object: EventObject, name: &str, reason: &str) -> Event {
        Event {
            object,
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}").into(),
            warning: false,
            reason: reason.into(),
            message: format!("{reason} {name}"),
        }
    }

    fn group(name: &str) -> Option<Arc<Group>> {
        Some(Arc::new(Group {
            namespace: "ns".into(),
            name: name.into(),
            uid: format!("uid-{name}").into(),
            native: false,
        }))
    }

    #[test]
    fn below_the_cap_every_event_is_its_own() {
        let mut q = EventQueue::new(4, 0);
        for i in 0..4 {
            let e = ev(EventObject::Pod, &format!("g-{i}"), "Scheduled");
            assert_eq!(
                q.push(QueuedEvent::new(e, "Binding", group("g"))),
                Pushed::Queued
            );
        }
        assert_eq!(q.len(), 4);
        assert_eq!(q.pop().map(|e| e.count), Some(1));
    }

    #[test]
    fn beyond_the_cap_same_reason_same_podgroup_folds_with_a_count() {
        let pods = |g: &str, i: usize| ev(EventObject::Pod, &format!("{g}-{i}"), "Scheduled");
        let pg = ev(EventObject::PodGroup, "a", "Scheduled");
        // Room for the two pod entries and the PodGroup's, and not one more.
        let room = [pods("a", 0), pods("a", 1)]
            .into_iter()
            .map(|e| QueuedEvent::new(e, "Binding", group("a")).footprint())
            .sum::<usize>()
            + QueuedEvent::new(pg.clone(), "Scheduling", group("a")).footprint()
            // The newest message the folded entry keeps.
            + 64;
        let mut q = EventQueue::new(2, room);
        q.push(QueuedEvent::new(pods("a", 0), "Binding", group("a")));
        q.push(QueuedEvent::new(pods("a", 1), "Binding", group("a")));
        // Over the soft cap: folds into a-1's entry.
        for i in 2..8 {
            assert_eq!(
                q.push(QueuedEvent::new(pods("a", i), "Binding", group("a"))),
                Pushed::Folded
            );
        }
        // A PodGroup event of the same reason is not a pod event: a new entry (room for it).
        assert_eq!(
            q.push(QueuedEvent::new(pg, "Scheduling", group("a"))),
            Pushed::Queued
        );
        // Full to the memory cap, and nothing of gang b to fold into: dropped.
        assert_eq!(
            q.push(QueuedEvent::new(pods("b", 0), "Binding", group("b"))),
            Pushed::Dropped
        );
        let first = q.pop().map(|e| e.count);
        let folded = q.pop().map(|e| (e.count, e.note()));
        assert_eq!(first, Some(1));
        assert_eq!(
            folded,
            Some((
                7,
                "Scheduled a-1 (and 6 more Scheduled on members of PodGroup ns/a)".to_string()
            ))
        );
        assert_eq!(q.pop().map(|e| e.event.object), Some(EventObject::PodGroup));
        assert!(q.is_empty());
    }

    #[test]
    fn repeats_on_one_object_keep_the_newest_message() {
        let mut q = EventQueue::new(1, 0);
        q.push(QueuedEvent::new(
            ev(EventObject::PodGroup, "a", "Unschedulable"),
            "Scheduling",
            group("a"),
        ));
        let mut again = ev(EventObject::PodGroup, "a", "Unschedulable");
        again.message = "newer".into();
        assert_eq!(
            q.push(QueuedEvent::new(again, "Scheduling", group("a"))),
            Pushed::Folded
        );
        let e = q.pop().unwrap();
        assert_eq!((e.count, e.note()), (2, "newer".to_string()));
    }

    #[test]
    fn a_popped_entry_takes_no_more_folds() {
        let mut q = EventQueue::new(1, usize::MAX);
        let pod = |i: usize| ev(EventObject::Pod, &format!("a-{i}"), "Scheduled");
        q.push(QueuedEvent::new(pod(0), "Binding", group("a")));
        q.pop();
        q.push(QueuedEvent::new(pod(1), "Binding", group("a")));
        assert_eq!(
            q.push(QueuedEvent::new(pod(2), "Binding", group("a"))),
            Pushed::Folded
        );
        assert_eq!(q.clear(), 2);
        assert!(q.is_empty());
    }

    #[test]
    fn the_bytes_follow_pushes_folds_and_pops() {
        let mut q = EventQueue::new(1, usize::MAX);
        let pod = |i: usize| ev(EventObject::Pod, &format!("a-{i}"), "Scheduled");
        let first = QueuedEvent::new(pod(0), "Binding", group("a"));
        let one = first.footprint();
        q.push(first);
        assert_eq!(q.bytes(), one);
        q.push(QueuedEvent::new(pod(1), "Binding", group("a")));
        assert!(q.bytes() > one, "the folded message is counted");
        q.pop();
        assert_eq!(q.bytes(), 0);
        q.push(QueuedEvent::new(pod(2), "Binding", group("a")));
        q.clear();
        assert_eq!(q.bytes(), 0);
    }

    /// A backlog of single-pod gangs as `caldera bench e2e --gang-size 1` makes: every event is
    /// about its own PodGroup (or its one pod), so nothing folds. Under the default cap none of
    /// a backlog of 8,000 such gangs (16,000 events) is dropped; a cap a tenth of that keeps
    /// what fits and drops the rest.
    #[test]
    fn a_backlog_of_single_pod_gangs_is_kept_under_the_default_cap() {
        let gang = |g: usize| {
            let name = format!("gang-{g:05}");
            let mut pod = ev(EventObject::Pod, &format!("{name}-0"), "Scheduled");
            pod.message = format!("Successfully assigned caldera-bench/{name}-0 to node-{g:05}");
            let mut pg = ev(EventObject::PodGroup, &name, "Scheduled");
            pg.message = "All 1 members bound (minMember 1)".into();
            [
                QueuedEvent::new(pod, "Binding", group(&name)),
                QueuedEvent::new(pg, "Scheduling", group(&name)),
            ]
        };
        let max = crate::Follow::default().event_queue_bytes;
        let mut q = EventQueue::new(1000, max);
        for g in 0..8000 {
            for e in gang(g) {
                assert_eq!(q.push(e), Pushed::Queued);
            }
        }
        assert_eq!(q.len(), 16_000);
        assert!(q.bytes() < max / 4, "{} bytes", q.bytes());

        let mut small = EventQueue::new(1000, q.bytes() / 10);
        let pushed: Vec<Pushed> = (0..8000).flat_map(gang).map(|e| small.push(e)).collect();
        let kept = pushed.iter().filter(|p| **p == Pushed::Queued).count();
        assert_eq!(kept, small.len());
        assert!((1000..2000).contains(&kept), "{kept} kept");
        assert!(pushed.iter().all(|p| *p != Pushed::Folded));
    }

    /// The estimate is checked against what the allocator hands out for a queue of events like
    /// a backlog's (measured on this thread). Prints the figure:
    /// `cargo test -p caldera-binder memory_per_queued_event -- --nocapture`.
    #[test]
    fn memory_per_queued_event_is_what_the_estimate_says() {
        let n = 20_000usize;
        let before = alloc::live();
        let mut q = EventQueue::new(1, usize::MAX);
        let mut estimate = 0usize;
        for g in 0..n {
            let name = format!("gang-{g:05}");
            let mut e = ev(EventObject::Pod, &format!("{name}-0"), "Scheduled");
            e.message = format!("Successfully assigned caldera-bench/{name}-0 to node-{g:05}");
            let e = QueuedEvent::new(e, "Binding", group(&name));
            estimate += e.footprint();
            q.push(e);
        }
        let measured = (alloc::live() - before) as f64 / n as f64;
        let estimated = estimate as f64 / n as f64;
        println!("memory per queued event: {measured:.0} bytes measured, {estimated:.0} estimated");
        assert!(
            estimated >= measured * 0.9 && estimated <= measured * 1.5,
            "estimate {estimated:.0} bytes per event, measured {measured:.0}"
        );
        drop(q);
    }

    /// Counts this thread's live heap bytes (tests run on threads of their own).
    #[allow(unsafe_code)]
    mod alloc {
        use std::alloc::{GlobalAlloc, Layout, System};
        use std::cell::Cell;

        thread_local! {
            static LIVE: Cell<isize> = const { Cell::new(0) };
        }

        pub fn live() -> isize {
            LIVE.with(Cell::get)
        }

        struct Counting;

        fn add(n: isize) {
            // `try_with`: the thread-local may be gone while a thread ends.
            let _ = LIVE.try_with(|c| c.set(c.get() + n));
        }

        // SAFETY: every call is passed on to the system allocator unchanged.
        unsafe impl GlobalAlloc for Counting {
            unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
                add(layout.size() as isize);
                // SAFETY: same layout, as the caller promised.
                unsafe { System.alloc(layout) }
            }
            unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
                add(-(layout.size() as isize));
                // SAFETY: `ptr` came from `alloc` with this layout.
                unsafe { System.dealloc(ptr, layout) }
            }
            unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
                add(new_size as isize - layout.size() as isize);
                // SAFETY: as for `dealloc`, and `new_size` is the caller's.
                unsafe { System.realloc(ptr, layout, new_size) }
            }
        }

        #[global_allocator]
        static COUNTING: Counting = Counting;
    }
}
