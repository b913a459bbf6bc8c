//! Queues: ordering and fair-share accounting (deserved, allocated, share, overused).
//!
//! The proportion plugin keeps one [`QueueShare`] per queue and calls [`water_fill`] once per
//! session; the allocate action asks it for order, `overused` and `allocatable`. The queue
//! tree ([`tree::QueueTree`], `Queue.spec.parent`) is built by the session for every config;
//! the capacity plugin reads it through [`capacity`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod capacity;
pub mod fair;
pub mod tree;

pub use tree::{QueueTree, TreeProblem, ROOT};

use caldera_model::Resources;
use std::sync::Arc;

/// One queue's fair-share accounting for a session.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueShare {
    /// Queue name.
    pub name: Arc<str>,
    /// Weight (≥ 1).
    pub weight: u32,
    /// The weight the split uses instead of `weight`, when usage adjusts it
    /// ([`fair::adjusted_weights`]); may be 0.
    pub fair_weight: Option<f64>,
    /// Hard ceiling; `None` means unlimited.
    pub capability: Option<Resources>,
    /// Reserved floor.
    pub guarantee: Resources,
    /// Explicit share (used instead of the weight split).
    pub explicit_deserved: Option<Resources>,
    /// What the queue's jobs ask for: allocated + pending requests.
    pub request: Resources,
    /// Σ requests of members holding a node.
    pub allocated: Resources,
    /// Σ minResources of admitted jobs not yet holding them.
    pub inqueue: Resources,
    /// The capability in force: capability ∧ (total − others' guarantees), every dimension set.
    pub real_capability: Resources,
    /// The computed deserved share.
    pub deserved: Resources,
}

impl QueueShare {
    /// A queue with nothing requested or allocated yet.
    pub fn new(name: Arc<str>, weight: u32) -> Self {
        QueueShare {
            name,
            weight: weight.max(1),
            fair_weight: None,
            capability: None,
            guarantee: Resources::new(),
            explicit_deserved: None,
            request: Resources::new(),
            allocated: Resources::new(),
            inqueue: Resources::new(),
            real_capability: Resources::new(),
            deserved: Resources::new(),
        }
    }

    /// The weight the water-filling splits by: the usage-adjusted one when set.
    pub fn split_weight(&self) -> f64 {
        self.fair_weight.unwrap_or(f64::from(self.weight))
    }

    /// max over dimensions of allocated / deserved. A dimension with nothing deserved but
    /// something allocated counts as fully used (1.0).
    pub fn share(&self) -> f64 {
        share_of(&self.allocated, &self.deserved)
    }

    /// The queue has reached its deserved share in every dimension.
    pub fn overused(&self) -> bool {
        self.deserved
            .iter()
            .all(|(n, v)| v <= self.allocated.get(n))
    }

    /// `allocated + request ≤ deserved` on every dimension the request asks for.
    pub fn allocatable(&self, request: &Resources) -> bool {
        request
            .iter()
            .all(|(n, v)| self.allocated.get(n).saturating_add(v) <= self.deserved.get(n))
    }

    /// The dimensions on which `request` would exceed the deserved share.
    pub fn over_deserved<'a>(&'a self, request: &'a Resources) -> Vec<&'a str> {
        request
            .iter()
            .filter(|(n, v)| self.allocated.get(n).saturating_add(*v) > self.deserved.get(n))
            .map(|(n, _)| n)
            .collect()
    }
}

/// max over dimensions of `allocated / deserved` (deserved 0 with allocated > 0 counts as 1).
pub fn share_of(allocated: &Resources, deserved: &Resources) -> f64 {
    let mut share: f64 = 0.0;
    for (n, a) in allocated.iter() {
        if a <= 0 {
            continue;
        }
        let d = deserved.get(n);
        let s = if d <= 0 { 1.0 } else { a as f64 / d as f64 };
        share = share.max(s);
    }
    share
}

/// Per-dimension minimum against `cap`, touching only dimensions `cap` names (plus cpu and
/// memory, which every vector has).
fn cap_at(v: &mut Resources, cap: &Resources) {
    let names: Vec<String> = v.names().map(str::to_string).collect();
    for n in names {
        let c = cap.get(&n);
        if v.get(&n) > c {
            v.set(&n, c);
        }
    }
}

/// Computes every queue's deserved share of `total` by weighted water-filling (SPEC §6,
/// proportion): split what remains among queues whose request is not yet met, by weight; cap
/// each at its capability and at its request; never below its guarantee; repeat until nothing
/// remains or nothing changes. Queues with an explicit `deserved` take it (capped) first.
///
/// Deterministic: queues are visited in the order given (callers sort by name).
pub fn water_fill(total: &Resources, queues: &mut [QueueShare]) {
    let total_guarantee = queues.iter().fold(Resources::new(), |mut acc, q| {
        acc.add(&q.guarantee);
        acc
    });
    for q in queues.iter_mut() {
        // total − others' guarantees = total − all guarantees + own guarantee.
        let mut real = total.minus(&total_guarantee).plus(&q.guarantee);
        if let Some(cap) = &q.capability {
            for (n, c) in cap.iter() {
                if real.get(n) > c {
                    real.set(n, c);
                }
            }
        }
        q.real_capability = real;
        q.deserved = Resources::new();
    }
    let mut remaining = total.clone();
    let mut met = vec![false; queues.len()];
    for (i, q) in queues.iter_mut().enumerate() {
        if let Some(explicit) = &q.explicit_deserved {
            let mut d = explicit.clone();
            cap_at(&mut d, &q.real_capability);
            d.max_with(&q.guarantee);
            remaining.sub(&d);
            q.deserved = d;
            met[i] = true;
        }
    }
    clamp_non_negative(&mut remaining);
    // Each round either meets a queue or hands out what remains; bound the loop anyway.
    for _round in 0..=queues.len() + 64 {
        let total_weight: f64 = queues
            .iter()
            .zip(&met)
            .filter(|(_, m)| !**m)
            .map(|(q, _)| q.split_weight())
            .sum();
        if total_weight <= 0.0 || remaining.is_empty() {
            break;
        }
        let before = remaining.clone();
        let mut increased = Resources::new();
        let mut decreased = Resources::new();
        for (i, q) in queues.iter_mut().enumerate() {
            if met[i] {
                continue;
            }
            let old = q.deserved.clone();
            let mut d = old.plus(&remaining.scaled(q.split_weight() / total_weight));
            let mut capped = false;
            let cap = q.real_capability.clone();
            let before_cap = d.clone();
            cap_at(&mut d, &cap);
            if d != before_cap {
                capped = true;
            }
            // Never more than the request asks for, on every dimension.
            let names: Vec<String> = d.names().map(str::to_string).collect();
            for n in names {
                let r = q.request.get(&n);
                if d.get(&n) > r {
                    d.set(&n, r);
                }
            }
            d.max_with(&q.guarantee);
            if q.request.fits_in(&d) || capped && cap_reached(&d, &cap, &q.request) {
                met[i] = true;
            }
            for (n, v) in d.minus(&old).iter() {
                if v > 0 {
                    increased.add_named(n, v);
                } else {
                    decreased.add_named(n, -v);
                }
            }
            q.deserved = d;
        }
        remaining.sub(&increased);
        remaining.add(&decreased);
        clamp_non_negative(&mut remaining);
        if remaining == before {
            break;
        }
    }
    hand_out_leftovers(&mut remaining, queues, &met);
}

/// Shares are whole units, so splitting by weight rounds down and can leave a few units that
/// no round hands out (15 GPUs over two equal queues: 7 + 7). Left idle, they could keep a
/// gang from ever fitting. This gives them out one at a time, heaviest queue first, then by
/// name, to queues that still want them and may have them.
fn hand_out_leftovers(remaining: &mut Resources, queues: &mut [QueueShare], met: &[bool]) {
    let mut order: Vec<usize> = (0..queues.len()).filter(|&i| !met[i]).collect();
    order.sort_by(|&a, &b| {
        queues[b]
            .weight
            .cmp(&queues[a].weight)
            .then_with(|| queues[a].name.cmp(&queues[b].name))
    });
    let names: Vec<String> = remaining.names().map(str::to_string).collect();
    for n in names {
        let mut left = remaining.get(&n);
        // Every pass gives each wanting queue at least one unit, so this ends.
        while left > 0 {
            let wanting: Vec<usize> = order
                .iter()
                .copied()
                .filter(|&i| {
                    let q = &queues[i];
                    let cap = q.request.get(&n).min(q.real_capability.get(&n));
                    q.deserved.get(&n) < cap
                })
                .collect();
            if wanting.is_empty() {
                break;
            }
            let each = (left / wanting.len() as i64).max(1);
            for i in wanting {
                if left == 0 {
                    break;
                }
                let q = &mut queues[i];
                let cap = q.request.get(&n).min(q.real_capability.get(&n));
                let give = each.min(cap - q.deserved.get(&n)).min(left);
                q.deserved.add_named(&n, give);
                left -= give;
            }
        }
        remaining.set(&n, left);
    }
}

/// Every dimension the request still wants more of is already at its capability.
fn cap_reached(d: &Resources, cap: &Resources, request: &Resources) -> bool {
    request
        .iter()
        .filter(|(n, v)| d.get(n) < *v)
        .all(|(n, _)| d.get(n) >= cap.get(n))
}

fn clamp_non_negative(r: &mut Resources) {
    let names: Vec<String> = r.names().map(str::to_string).collect();
    for n in names {
        if r.get(&n) < 0 {
            r.set(&n, 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: i64) -> Resources {
        Resources::from_pairs([("nvidia.com/gpu", n)])
    }

    fn queue(name: &str, weight: u32, request: i64) -> QueueShare {
        let mut q = QueueShare::new(Arc::from(name), weight);
        q.request = gpus(request);
        q
    }

    #[test]
    fn weights_split_what_both_want() {
        let mut qs = vec![queue("a", 1, 16), queue("b", 3, 16)];
        water_fill(&gpus(16), &mut qs);
        assert_eq!(qs[0].deserved.get("nvidia.com/gpu"), 4);
        assert_eq!(qs[1].deserved.get("nvidia.com/gpu"), 12);
    }

    #[test]
    fn unused_share_flows_to_queues_that_want_more() {
        let mut qs = vec![queue("a", 1, 2), queue("b", 1, 16)];
        water_fill(&gpus(16), &mut qs);
        assert_eq!(qs[0].deserved.get("nvidia.com/gpu"), 2);
        assert_eq!(qs[1].deserved.get("nvidia.com/gpu"), 14);
    }

    #[test]
    fn capability_caps_and_guarantee_floors() {
        let mut a = queue("a", 1, 16);
        a.capability = Some(gpus(4));
        let mut b = queue("b", 1, 0);
        b.guarantee = gpus(3);
        let mut c = queue("c", 1, 16);
        c.weight = 1;
        let mut qs = vec![a, b, c];
        water_fill(&gpus(16), &mut qs);
        assert_eq!(qs[0].deserved.get("nvidia.com/gpu"), 4);
        assert_eq!(
            qs[1].deserved.get("nvidia.com/gpu"),
            3,
            "guarantee is a floor"
        );
        assert!(qs[2].deserved.get("nvidia.com/gpu") <= 13);
        assert!(qs[2].deserved.get("nvidia.com/gpu") >= 9);
    }

    #[test]
    fn units_lost_to_rounding_are_handed_out() {
        let mut qs = vec![queue("a", 1, 16), queue("b", 1, 16)];
        water_fill(&gpus(15), &mut qs);
        let (a, b) = (
            qs[0].deserved.get("nvidia.com/gpu"),
            qs[1].deserved.get("nvidia.com/gpu"),
        );
        assert_eq!(a + b, 15, "nothing left idle: {a} + {b}");
        assert_eq!((a, b), (8, 7), "ties go by name");
        let mut qs = vec![queue("a", 1, 16), queue("b", 1, 16)];
        water_fill(&gpus(3), &mut qs);
        assert_eq!(
            qs[0].deserved.get("nvidia.com/gpu") + qs[1].deserved.get("nvidia.com/gpu"),
            3
        );
    }

    #[test]
    fn usage_weights_split_but_leave_nothing_idle() {
        // fairshare gave a the weight 0: b's request is met first, a still gets the rest.
        let mut a = queue("a", 1, 16);
        a.fair_weight = Some(0.0);
        let mut b = queue("b", 1, 4);
        b.fair_weight = Some(1.0);
        let mut qs = vec![a, b];
        water_fill(&gpus(16), &mut qs);
        assert_eq!(qs[1].deserved.get("nvidia.com/gpu"), 4);
        assert_eq!(qs[0].deserved.get("nvidia.com/gpu"), 12);
        // Both want everything: the adjusted weights split it (1 : 3).
        let mut a = queue("a", 1, 16);
        a.fair_weight = Some(0.25);
        let mut b = queue("b", 1, 16);
        b.fair_weight = Some(0.75);
        let mut qs = vec![a, b];
        water_fill(&gpus(16), &mut qs);
        assert_eq!(qs[0].deserved.get("nvidia.com/gpu"), 4);
        assert_eq!(qs[1].deserved.get("nvidia.com/gpu"), 12);
    }

    #[test]
    fn share_and_overused() {
        let mut q = queue("a", 1, 8);
        q.deserved = gpus(4);
        q.allocated = gpus(2);
        assert_eq!(q.share(), 0.5);
        assert!(!q.overused());
        assert!(q.allocatable(&gpus(2)));
        assert!(!q.allocatable(&gpus(3)));
        q.allocated = gpus(4);
        assert!(q.overused());
    }
}
