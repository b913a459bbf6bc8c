//! One domain search, parameterised by scope: a gang under its rule, a sub-group inside the
//! gang's domain, a preemptor confined to the domain a preemption search tries. All follow the
//! same order (see the parent module): members already holding nodes pin the search to the
//! highest allowed domain around them; tiers from the lowest up; in a tier, the domain
//! holding the pinned members first, then the fullest with room for what is placed, then by
//! index (tier, then name).

use super::*;

/// The nodes `tasks` already hold (placed or running), sorted.
pub(crate) fn held_by(ssn: &Session, tasks: &[usize]) -> Vec<u32> {
    let st = &ssn.state;
    let mut held: Vec<u32> = tasks
        .iter()
        .filter_map(|&t| {
            let t = &st.tasks[t];
            if !t.status.occupies_node() {
                return None;
            }
            st.node_index(t.node.as_deref()?).map(|n| n as u32)
        })
        .collect();
    held.sort_unstable();
    held.dedup();
    held
}

/// Where members already holding `held` pin a search under a rule allowing tiers up to
/// `allowed`: the smallest domain holding them all (`anchor`, tried first) and the highest
/// allowed domain around it (`pin`, which a hard rule never leaves).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pin {
    /// The smallest domain holding every held node.
    pub(crate) anchor: Option<u32>,
    /// The highest domain of an allowed tier around `anchor`.
    pub(crate) pin: Option<u32>,
}

impl Pin {
    /// The pin of `held` in `tree`.
    pub(crate) fn of(tree: &TopologyTree, held: &[u32], allowed: u32) -> Self {
        let anchor = tree.smallest_holding(held);
        let pin = anchor.and_then(|a| {
            tree.ancestors(a)
                .into_iter()
                .take_while(|&d| tree.domains[d as usize].tier <= allowed)
                .last()
        });
        Pin { anchor, pin }
    }
}

/// One search over the domains of a rule's tree.
pub(crate) struct DomainSearch<'a> {
    /// The rule's tree and source.
    pub(crate) tree: &'a TopologyTree,
    pub(crate) source: &'a TopologySource,
    /// The highest tier the rule allows.
    pub(crate) allowed: u32,
    /// Only these domains (ascending: a sub-group's, those touching the gang's domain);
    /// every domain when `None`.
    pub(crate) among: Option<&'a [u32]>,
    /// Where held members pin the search.
    pub(crate) pin: Pin,
    /// Only domains inside this one (a preemption search trying one domain).
    pub(crate) confine: Option<u32>,
    /// What has to fit in a domain's free room for it to be tried.
    pub(crate) need: &'a Resources,
}

/// How many domains a search looked at, and how many of them had room.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Looked {
    /// Domains of allowed tiers in scope.
    pub(crate) considered: usize,
    /// Of those, domains whose free room holds what is placed.
    pub(crate) with_room: usize,
}

impl DomainSearch<'_> {
    /// The domains of allowed tiers the search may use, ascending, not counting `confine`
    /// (for the message naming the closest one).
    pub(crate) fn eligible(&self) -> Vec<u32> {
        let tree = self.tree;
        let ok = |i: u32| {
            tree.domains[i as usize].tier <= self.allowed
                && self.pin.pin.is_none_or(|p| tree.is_within(i, p))
        };
        match self.among {
            Some(among) => among.iter().copied().filter(|&i| ok(i)).collect(),
            None => (0..tree.domains.len() as u32).filter(|&i| ok(i)).collect(),
        }
    }

    /// Tries domains in the search's order with `try_in` until it answers `Some`; returns
    /// that answer (`None` when every domain was tried) and what was looked at.
    pub(crate) fn run<R>(
        &self,
        ssn: &mut Session,
        mut try_in: impl FnMut(&mut Session, u32) -> Option<R>,
    ) -> (Looked, Option<R>) {
        let tree = self.tree;
        let mut looked = Looked::default();
        for tier in tree.tiers().into_iter().filter(|&t| t <= self.allowed) {
            let weights = ssn.domain_weights().cloned();
            let rooms = ssn.rooms(self.source, tree);
            let in_tier = |&i: &u32| {
                tree.domains[i as usize].tier == tier
                    && self.pin.pin.is_none_or(|p| tree.is_within(i, p))
                    && self.confine.is_none_or(|w| tree.is_within(i, w))
            };
            let (mut all, mut some) = (
                0..tree.domains.len() as u32,
                self.among.unwrap_or_default().iter().copied(),
            );
            let domains: &mut dyn Iterator<Item = u32> = match self.among {
                Some(_) => &mut some,
                None => &mut all,
            };
            let mut candidates: Vec<(bool, f64, u32)> = Vec::new();
            for i in domains.filter(in_tier) {
                looked.considered += 1;
                let (alloc, idle) = &rooms[i as usize];
                if !self.need.fits_in(idle) {
                    continue;
                }
                let holds_anchor = self.pin.anchor.is_some_and(|a| tree.is_within(a, i));
                candidates.push((
                    holds_anchor,
                    fullness(weights.as_ref(), alloc, idle, self.need),
                    i,
                ));
            }
            looked.with_room += candidates.len();
            candidates.sort_by(|a, b| {
                b.0.cmp(&a.0)
                    .then_with(|| b.1.total_cmp(&a.1))
                    .then_with(|| a.2.cmp(&b.2))
            });
            for (_, _, i) in candidates {
                if let Some(r) = try_in(ssn, i) {
                    return (looked, Some(r));
                }
            }
        }
        (looked, None)
    }
}
