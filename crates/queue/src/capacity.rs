//! Volcano's `capacity` accounting over a [`QueueTree`]: per queue, per resource, a
//! `deserved` share (explicit, never below the guarantee), a `capability` (a child inherits
//! each resource its own does not name from its parent) and the capability in force
//! (`real`: the parent's real capability less every sibling's guarantee, never above the
//! queue's own capability), computed top-down. Allocation is summed up the tree by the
//! session ([`QueueTree`] ancestors); this module answers whether a request fits a queue and
//! every ancestor, and how two queues order.

use crate::tree::QueueTree;
use caldera_model::Resources;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// Per-resource upper bounds; a resource not named is unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limit(BTreeMap<Arc<str>, i64>);

impl Limit {
    /// No bound on anything.
    pub fn unbounded() -> Self {
        Limit::default()
    }

    /// Bounds on exactly the resources `r` names (cpu and memory only when non-zero).
    pub fn of(r: &Resources) -> Self {
        Limit(r.iter().map(|(n, v)| (Arc::from(n), v)).collect())
    }

    /// `self` also bounding each of `names` at 0 (amounts a `Resources` cannot hold).
    pub fn with_zeros(mut self, names: &[Arc<str>]) -> Self {
        for n in names {
            self.0.entry(n.clone()).or_insert(0);
        }
        self
    }

    /// The bound on `name`, if any.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.0.get(name).copied()
    }

    /// Whether nothing is bounded.
    pub fn is_unbounded(&self) -> bool {
        self.0.is_empty()
    }

    /// `self` with every resource `parent` bounds and `self` does not taken from `parent`.
    pub fn inherit(&self, parent: &Limit) -> Limit {
        let mut out = self.0.clone();
        for (n, v) in &parent.0 {
            out.entry(n.clone()).or_insert(*v);
        }
        Limit(out)
    }

    /// Per-resource minimum (unbounded on a side takes the other).
    pub fn min(&self, other: &Limit) -> Limit {
        let mut out = self.0.clone();
        for (n, v) in &other.0 {
            out.entry(n.clone())
                .and_modify(|x| *x = (*x).min(*v))
                .or_insert(*v);
        }
        Limit(out)
    }

    /// `self − minus + plus` on the bounded resources (an unbounded one stays unbounded).
    pub fn shifted(&self, minus: &Resources, plus: &Resources) -> Limit {
        Limit(
            self.0
                .iter()
                .map(|(n, v)| {
                    let x = v.saturating_sub(minus.get(n)).saturating_add(plus.get(n));
                    (n.clone(), x.max(0))
                })
                .collect(),
        )
    }

    /// The resources `request` asks for on which `used + request` exceeds the bound.
    pub fn exceeded<'a>(&self, used: &Resources, request: &'a Resources) -> Vec<&'a str> {
        request
            .iter()
            .filter(|(n, v)| {
                *v > 0
                    && self
                        .get(n)
                        .is_some_and(|b| used.get(n).saturating_add(*v) > b)
            })
            .map(|(n, _)| n)
            .collect()
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("unlimited");
        }
        let r = Resources::from_pairs(self.0.iter().map(|(n, v)| (&**n, *v)));
        let mut parts: Vec<String> = r
            .to_quantities()
            .into_iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        // Zero bounds are dropped by Resources; show them too.
        for (n, v) in &self.0 {
            if *v == 0 {
                parts.push(format!("{n}: 0"));
            }
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}

/// What a queue's spec says about its share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Quota {
    /// `spec.capability` (zero amounts included); `None` bounds nothing of its own.
    pub capability: Option<Limit>,
    /// `spec.guarantee.resource`.
    pub guarantee: Resources,
    /// `spec.deserved`.
    pub deserved: Option<Resources>,
}

/// One tree node's share for a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeShare {
    /// `max(spec.deserved, guarantee)`; the root's is Σ its children's.
    pub deserved: Resources,
    /// `spec.guarantee`; the root's is Σ its children's.
    pub guarantee: Resources,
    /// `spec.capability`, each resource it does not name inherited from the parent.
    pub capability: Limit,
    /// The capability in force: min(capability, parent's real − Σ siblings' guarantees incl.
    /// own + own guarantee).
    pub real: Limit,
}

/// Computes every node's share top-down. `quotas[i]` is queue `i`'s spec (a virtual root
/// has none); the root's capability, unless its Queue sets one, is the cluster `total`.
pub fn shares(tree: &QueueTree, quotas: &[Quota], total: &Resources) -> Vec<NodeShare> {
    let mut out = vec![NodeShare::default(); tree.len()];
    let root = tree.root();
    let root_cap = quotas
        .get(root)
        .and_then(|q| q.capability.clone())
        .unwrap_or_else(|| Limit::of(total));
    out[root].capability = root_cap.clone();
    out[root].real = root_cap;
    for (i, share) in out.iter_mut().enumerate() {
        if i == root {
            continue;
        }
        let q = quotas.get(i).cloned().unwrap_or_default();
        let mut d = q.deserved.unwrap_or_default();
        d.max_with(&q.guarantee);
        share.deserved = d;
        share.guarantee = q.guarantee;
    }
    // Root's deserved and guarantee: what its children add up to, as Volcano sets them.
    let mut d = Resources::new();
    let mut g = Resources::new();
    for &c in tree.children(root) {
        d.add(&out[c].deserved);
        g.add(&out[c].guarantee);
    }
    if let Some(explicit) = quotas.get(root).and_then(|q| q.deserved.clone()) {
        d = explicit;
    }
    out[root].deserved = d;
    out[root].guarantee = g;
    for p in tree.top_down() {
        let mut sibling_guarantees = Resources::new();
        for &c in tree.children(p) {
            sibling_guarantees.add(&out[c].guarantee);
        }
        for &c in tree.children(p) {
            let own = quotas
                .get(c)
                .and_then(|q| q.capability.clone())
                .unwrap_or_default();
            let cap = own.inherit(&out[p].capability);
            let room = out[p].real.shifted(&sibling_guarantees, &out[c].guarantee);
            out[c].real = room.min(&cap);
            out[c].capability = cap;
        }
    }
    // Broken queues (not in the tree) still get their own limits, alone under the cluster.
    for i in 0..tree.queues() {
        if tree.problem(i).is_some() {
            let own = quotas
                .get(i)
                .and_then(|q| q.capability.clone())
                .unwrap_or_default();
            out[i].capability = own.inherit(&out[root].capability);
            out[i].real = out[i].capability.clone();
        }
    }
    out
}

/// Volcano's share: max over the resources a queue deserves of allocated / deserved; a
/// queue that deserves nothing (best effort) has share 1, so it goes after every queue still
/// below its deserved share.
pub fn share(allocated: &Resources, deserved: &Resources) -> f64 {
    if deserved.is_empty() {
        return 1.0;
    }
    let mut s: f64 = 0.0;
    for (n, d) in deserved.iter() {
        let a = allocated.get(n);
        let x = if d <= 0 {
            if a > 0 {
                1.0
            } else {
                0.0
            }
        } else {
            a as f64 / d as f64
        };
        s = s.max(x);
    }
    s
}

/// Volcano's `compareShareWithDeserved`: lower share first; on equal shares a queue that
/// deserves something before a best-effort one.
pub fn compare_share(a: (&Resources, &Resources), b: (&Resources, &Resources)) -> Ordering {
    let (sa, sb) = (share(a.0, a.1), share(b.0, b.1));
    sa.total_cmp(&sb)
        .then_with(|| a.1.is_empty().cmp(&b.1.is_empty()))
}

/// Hierarchical queue order (Volcano's hierarchical `QueueOrderFn`): leaves before inner
/// queues; between two leaves, the share of their ancestors just below their deepest common
/// ancestor decides, then their own share. `allocated[i]` is node `i`'s allocation summed
/// over its subtree.
pub fn hierarchical_order(
    tree: &QueueTree,
    shares: &[NodeShare],
    allocated: &[Resources],
    a: usize,
    b: usize,
) -> Ordering {
    let by_share = |x: usize, y: usize| {
        compare_share(
            (&allocated[x], &shares[x].deserved),
            (&allocated[y], &shares[y].deserved),
        )
    };
    let (la, lb) = (tree.is_leaf(a), tree.is_leaf(b));
    if la != lb {
        return lb.cmp(&la);
    }
    if !la || a == b {
        return by_share(a, b);
    }
    let common = tree.common_ancestor(a, b);
    let (xa, xb) = (tree.child_towards(common, a), tree.child_towards(common, b));
    by_share(xa, xb).then_with(|| by_share(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: i64) -> Resources {
        Resources::from_pairs([("nvidia.com/gpu", n)])
    }

    fn tree(qs: &[(&str, Option<&str>)]) -> QueueTree {
        QueueTree::named(qs)
    }

    #[test]
    fn children_inherit_capability_and_siblings_guarantees_are_kept() {
        // root(16) ─ a(cap 8) ─ a1(guarantee 2), a2
        //          └ b
        let t = tree(&[
            ("a", None),
            ("a1", Some("a")),
            ("a2", Some("a")),
            ("b", None),
        ]);
        let quotas = vec![
            Quota {
                capability: Some(Limit::of(&gpus(8))),
                ..Quota::default()
            },
            Quota {
                guarantee: gpus(2),
                ..Quota::default()
            },
            Quota::default(),
            Quota::default(),
        ];
        let s = shares(&t, &quotas, &gpus(16));
        assert_eq!(s[0].real.get("nvidia.com/gpu"), Some(8));
        assert_eq!(s[1].capability.get("nvidia.com/gpu"), Some(8), "inherited");
        assert_eq!(s[1].real.get("nvidia.com/gpu"), Some(8));
        assert_eq!(
            s[2].real.get("nvidia.com/gpu"),
            Some(6),
            "a1's guarantee kept"
        );
        assert_eq!(s[3].real.get("nvidia.com/gpu"), Some(16));
        assert_eq!(s[1].deserved, gpus(2), "deserved is at least the guarantee");
        assert_eq!(s[4].guarantee, Resources::new(), "root sums its children");
        assert_eq!(
            s[2].real.get("cpu"),
            None,
            "cpu unbounded: the cluster has none"
        );
    }

    #[test]
    fn order_compares_the_ancestors_below_the_common_one_then_own_share() {
        let t = tree(&[
            ("a", None),
            ("a1", Some("a")),
            ("a2", Some("a")),
            ("b", None),
            ("b1", Some("b")),
        ]);
        let quotas: Vec<Quota> = [8, 4, 4, 8, 8]
            .iter()
            .map(|&d| Quota {
                deserved: Some(gpus(d)),
                ..Quota::default()
            })
            .collect();
        let s = shares(&t, &quotas, &gpus(16));
        // a1 has nothing, but a holds 6 of 8 (via a2); b holds 2 of 8.
        let mut alloc = vec![Resources::new(); t.len()];
        alloc[2] = gpus(6);
        alloc[0] = gpus(6);
        alloc[4] = gpus(2);
        alloc[3] = gpus(2);
        assert_eq!(hierarchical_order(&t, &s, &alloc, 1, 4), Ordering::Greater);
        assert_eq!(hierarchical_order(&t, &s, &alloc, 1, 2), Ordering::Less);
        assert_eq!(
            hierarchical_order(&t, &s, &alloc, 0, 1),
            Ordering::Greater,
            "leaves first"
        );
    }

    #[test]
    fn best_effort_shares_are_one() {
        assert_eq!(share(&gpus(3), &Resources::new()), 1.0);
        assert_eq!(share(&gpus(3), &gpus(4)), 0.75);
        let be = (&Resources::new(), &Resources::new());
        let full = (&gpus(4), &gpus(4));
        assert_eq!(
            compare_share(full, be),
            Ordering::Less,
            "equal share: deserving first"
        );
    }
}
