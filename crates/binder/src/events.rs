//! The event queue: bounded, and folding under load, as client-go's event broadcaster and
//! correlator do.
//!
//! Events wait here until the binds ahead of them are done (see the crate docs). Up to
//! [`EventQueue::soft_cap`] entries each event is its own entry and is written as it is.
//! Beyond that, an event is folded into the newest queued entry with the same [`FoldKey`] —
//! the same reason, on members of the same PodGroup (or on the PodGroup itself) — and that
//! entry is written once, as an `events.k8s.io/v1` Event with `series.count` saying how many it
//! stands for. An event that has nothing to fold into starts a new entry while there are fewer
//! than the hard cap; past that it is dropped and counted (`caldera_events_dropped_total`),
//! as client-go drops what does not fit its broadcaster's queue.

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
    hard_cap: usize,
    next: u64,
    entries: BTreeMap<u64, QueuedEvent>,
    newest: HashMap<FoldKey, u64>,
}

impl EventQueue {
    /// A queue folding beyond `soft_cap` entries and dropping beyond `hard_cap` (at least
    /// `soft_cap`).
    pub fn new(soft_cap: usize, hard_cap: usize) -> Self {
        let soft_cap = soft_cap.max(1);
        EventQueue {
            soft_cap,
            hard_cap: hard_cap.max(soft_cap),
            next: 0,
            entries: BTreeMap::new(),
            newest: HashMap::new(),
        }
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
                into.count = into.count.saturating_add(e.count);
                if into.event.uid != e.event.uid || into.event.name != e.event.name {
                    into.other_objects = true;
                }
                into.other_objects |= e.other_objects;
                into.last_message = Some(e.last_message.unwrap_or(e.event.message));
                into.last_seen = into.last_seen.max(e.last_seen);
                return Pushed::Folded;
            }
            if self.entries.len() >= self.hard_cap {
                return Pushed::Dropped;
            }
        }
        let seq = self.next;
        self.next += 1;
        self.newest.insert(key, seq);
        self.entries.insert(seq, e);
        Pushed::Queued
    }

    /// The oldest entry.
    pub fn pop(&mut self) -> Option<QueuedEvent> {
        let (seq, e) = self.entries.pop_first()?;
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
        }))
    }

    #[test]
    fn below_the_cap_every_event_is_its_own() {
        let mut q = EventQueue::new(4, 8);
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
        let mut q = EventQueue::new(2, 3);
        let pods = |g: &str, i: usize| ev(EventObject::Pod, &format!("{g}-{i}"), "Scheduled");
        q.push(QueuedEvent::new(pods("a", 0), "Binding", group("a")));
        q.push(QueuedEvent::new(pods("a", 1), "Binding", group("a")));
        // Over the soft cap: folds into a-1's entry.
        for i in 2..8 {
            assert_eq!(
                q.push(QueuedEvent::new(pods("a", i), "Binding", group("a"))),
                Pushed::Folded
            );
        }
        // A PodGroup event of the same reason is not a pod event: a new entry (hard cap 3).
        let pg = ev(EventObject::PodGroup, "a", "Scheduled");
        assert_eq!(
            q.push(QueuedEvent::new(pg, "Scheduling", group("a"))),
            Pushed::Queued
        );
        // Full to the hard cap, and nothing of gang b to fold into: dropped.
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
        let mut q = EventQueue::new(1, 1);
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
        let mut q = EventQueue::new(1, 2);
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
}
