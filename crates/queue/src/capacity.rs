//! Volcano's `capacity` accounting over a [`QueueTree`]: per queue, per resource, a
//! `deserved` share (explicit, never below the guarantee), a `capability` (a child inherits
//! each resource its own does not name from its parent) and the capability in force
//! (`real`: the parent's real capability less every sibling's guarantee, never above the
//! queue's own capability), computed top-down. Allocation is summed up the tree by the
//! session ([`QueueTree`] ancestors); this module answers whether a request fits a queue and
//! every ancestor, and how two queues order.

use crate::fair::FairSettings;
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

/// What `fairshare` changes in capacity's order: how queues over their deserved share take
/// the idle capacity beyond it. Two siblings that both hold at least their *floor* (a
/// queue's deserved share; an inner queue's is the larger of its own and the sum of its
/// children's floors, [`floors`]) go by what they hold over it (a fraction of the cluster,
/// weighted as usage is) per KAI's usage-adjusted weight among their parent's children
/// ([`crate::fair::sibling_weights`]), lowest first; a queue whose weight is 0 goes after
/// every one whose weight is not. A queue below its floor goes before every sibling at or
/// over its own, so usage never takes a deserved share's turn.
#[derive(Debug, Clone, Copy)]
pub struct OverQuota<'a> {
    /// Per tree node: its adjusted weight among its siblings; `None`: not adjusted.
    pub weights: &'a [Option<f64>],
    /// Per tree node: its floor ([`floors`]).
    pub floors: &'a [Resources],
    /// The fairshare settings (how resources weigh).
    pub settings: &'a FairSettings,
    /// The cluster's capacity.
    pub total: &'a Resources,
}

impl OverQuota<'_> {
    /// Node `i`, holding `allocated`, is at or over its floor (on the resources the floor
    /// names; a node with no floor always is).
    fn full(&self, i: usize, allocated: &Resources) -> bool {
        share(allocated, &self.floors[i]) >= 1.0
    }

    /// What node `i`, holding `allocated`, holds over its floor, per its adjusted weight `p`.
    fn key(&self, i: usize, allocated: &Resources, p: f64) -> f64 {
        let over = allocated.excess_over(&self.floors[i]);
        if p > 0.0 {
            self.settings.share_of(&over, self.total) / p
        } else {
            f64::INFINITY
        }
    }
}

/// Each node's floor for [`OverQuota`]: a leaf's deserved share; an inner node's, per
/// resource, the larger of its own deserved share and the sum of its children's floors (what
/// the queues below it deserve), computed bottom-up.
pub fn floors(tree: &QueueTree, shares: &[NodeShare]) -> Vec<Resources> {
    let mut out: Vec<Resources> = shares.iter().map(|s| s.deserved.clone()).collect();
    for p in tree.top_down().into_iter().rev() {
        if tree.is_leaf(p) {
            continue;
        }
        let mut below = Resources::new();
        for &c in tree.children(p) {
            below.add(&out[c]);
        }
        out[p].max_with(&below);
    }
    out
}

/// The order of nodes `x` and `y` (queues, or inner nodes with `allocated` their subtree's):
/// [`compare_share`], except that with `over` (fairshare), when both are adjusted and both
/// hold at least their floor, what they hold over it per adjusted weight decides first, then
/// the larger adjusted weight, then [`compare_share`]. A node below its floor goes before
/// one at or over it.
pub fn compare_nodes(
    shares: &[NodeShare],
    allocated: &[Resources],
    over: Option<&OverQuota>,
    x: usize,
    y: usize,
) -> Ordering {
    let today = || {
        compare_share(
            (&allocated[x], &shares[x].deserved),
            (&allocated[y], &shares[y].deserved),
        )
    };
    let Some(over) = over else {
        return today();
    };
    let weight = |i: usize| over.weights.get(i).copied().flatten();
    let (Some(px), Some(py)) = (weight(x), weight(y)) else {
        return today();
    };
    let (fx, fy) = (over.full(x, &allocated[x]), over.full(y, &allocated[y]));
    if !(fx && fy) {
        // Below the floor first; two below it go by today's shares.
        return fx.cmp(&fy).then_with(today);
    }
    let kx = over.key(x, &allocated[x], px);
    let ky = over.key(y, &allocated[y], py);
    kx.total_cmp(&ky)
        .then_with(|| py.total_cmp(&px))
        .then_with(today)
}

/// Hierarchical queue order (Volcano's hierarchical `QueueOrderFn`): leaves before inner
/// queues; between two leaves, the share of their ancestors just below their deepest common
/// ancestor decides, then their own share. `allocated[i]` is node `i`'s allocation summed
/// over its subtree. With `over` (fairshare), siblings compare by [`compare_nodes`]; nodes
/// of different parents are never compared by their adjusted weights.
pub fn hierarchical_order(
    tree: &QueueTree,
    shares: &[NodeShare],
    allocated: &[Resources],
    over: Option<&OverQuota>,
    a: usize,
    b: usize,
) -> Ordering {
    let by_share = |x: usize, y: usize| {
        let siblings = tree.parent(x) == tree.parent(y);
        compare_nodes(shares, allocated, over.filter(|_| siblings), x, y)
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
        assert_eq!(
            hierarchical_order(&t, &s, &alloc, None, 1, 4),
            Ordering::Greater
        );
        assert_eq!(
            hierarchical_order(&t, &s, &alloc, None, 1, 2),
            Ordering::Less
        );
        assert_eq!(
            hierarchical_order(&t, &s, &alloc, None, 0, 1),
            Ordering::Greater,
            "leaves first"
        );
    }

    #[test]
    fn over_deserved_goes_by_usage_adjusted_weight_but_deserved_keeps_its_turn() {
        let t = QueueTree::flat(&[Arc::from("a"), Arc::from("b")]);
        let quotas = vec![
            Quota {
                deserved: Some(gpus(4)),
                ..Quota::default()
            };
            2
        ];
        let s = shares(&t, &quotas, &gpus(16));
        let settings = FairSettings::default();
        let total = gpus(16);
        let floors = floors(&t, &s);
        let order = |weights: &[Option<f64>], a: i64, b: i64| {
            let alloc = vec![gpus(a), gpus(b), gpus(a + b)];
            let over = OverQuota {
                weights,
                floors: &floors,
                settings: &settings,
                total: &total,
            };
            let fair = hierarchical_order(&t, &s, &alloc, Some(&over), 0, 1);
            let today = hierarchical_order(&t, &s, &alloc, None, 0, 1);
            (fair, today)
        };
        // a used everything (P = 0): at their deserved shares, b takes what is over first.
        let used = [Some(0.0), Some(1.0), None];
        assert_eq!(order(&used, 4, 4), (Ordering::Greater, Ordering::Equal));
        assert_eq!(order(&used, 4, 12).0, Ordering::Greater);
        // Below its deserved share, a still goes first, whatever b holds.
        assert_eq!(order(&used, 2, 4), (Ordering::Less, Ordering::Less));
        assert_eq!(order(&used, 3, 12).0, Ordering::Less);
        // P = (1/4, 3/4): what is over deserved goes 1 : 3.
        let part = [Some(0.25), Some(0.75), None];
        assert_eq!(order(&part, 5, 6).0, Ordering::Greater, "1/0.25 > 2/0.75");
        assert_eq!(order(&part, 5, 8).0, Ordering::Less, "1/0.25 < 4/0.75");
        assert_eq!(order(&part, 5, 6).1, Ordering::Less, "today: 5/4 < 6/4");
        // Not adjusted (no usage, kValue 0): today's order.
        let none = [None, None, None];
        for (a, b) in [(4, 4), (4, 12), (6, 5), (2, 9)] {
            let (fair, today) = order(&none, a, b);
            assert_eq!(fair, today);
        }
    }

    #[test]
    fn adjusted_weights_order_siblings_only() {
        // a ─ a1, a2      b ─ b1: a1 and b1 are cousins, compared by today's shares.
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
        let s = shares(&t, &quotas, &gpus(32));
        let settings = FairSettings::default();
        let total = gpus(32);
        let mut alloc = vec![Resources::new(); t.len()];
        alloc[1] = gpus(6);
        alloc[2] = gpus(6);
        alloc[0] = gpus(12);
        alloc[4] = gpus(12);
        alloc[3] = gpus(12);
        // a2 used everything among a's children; a and b are even at the top.
        let weights = [Some(0.5), Some(1.0), Some(0.0), Some(0.5), Some(1.0), None];
        let floors = floors(&t, &s);
        let over = OverQuota {
            weights: &weights,
            floors: &floors,
            settings: &settings,
            total: &total,
        };
        let order = |x, y| hierarchical_order(&t, &s, &alloc, Some(&over), x, y);
        // Siblings a1, a2 (both 6 of 4): a1 first, though today they tie on share.
        assert_eq!(order(1, 2), Ordering::Less);
        assert_eq!(
            hierarchical_order(&t, &s, &alloc, None, 1, 2),
            Ordering::Equal
        );
        // a and b tie (4 over their floors of 8 each, same weight); then cousins a1 and b1
        // go by today's shares (6/4 and 12/8), never by weights of different parents.
        assert_eq!(order(1, 4), hierarchical_order(&t, &s, &alloc, None, 1, 4));
        assert_eq!(order(2, 4), hierarchical_order(&t, &s, &alloc, None, 2, 4));
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
