//! Inter-pod constraints: label selectors over pods, pod (anti-)affinity terms, topology spread
//! constraints, and the pods already on nodes that such constraints count.
//!
//! Matching follows kube-scheduler 1.36: a term matches a pod when the pod is in one of the
//! term's namespaces and its labels satisfy the selector; a null selector matches nothing, an
//! empty one everything. `matchLabelKeys`/`mismatchLabelKeys` are resolved into the selector
//! when the pod is converted (as the API server does for pod affinity), so terms here are
//! self-contained.

use crate::selector::{Requirement, SelectorOp};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Pod labels, shared.
pub type Labels = Arc<BTreeMap<String, String>>;

/// The well-known node label that names a node; a domain of this key is one node.
pub const HOSTNAME: &str = "kubernetes.io/hostname";

/// The weight an existing pod's *required* affinity term gives, in scoring, to the nodes of
/// its domain for an incoming pod it matches (kube-scheduler's `hardPodAffinityWeight`,
/// default 1).
pub const HARD_POD_AFFINITY_WEIGHT: i32 = 1;

/// A label selector over pods (`matchLabels` become `In` requirements). All must hold; an empty
/// selector matches every pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSelector {
    /// Requirements (operators In, NotIn, Exists, DoesNotExist).
    pub requirements: Vec<Requirement>,
}

impl PartialOrd for Requirement {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Requirement {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.key, self.op as u8, &self.values).cmp(&(&other.key, other.op as u8, &other.values))
    }
}

impl LabelSelector {
    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
    }

    /// Label keys the selector reads.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.requirements.iter().map(|r| r.key.as_str())
    }

    /// A requirement that only pods carrying a given label can satisfy (In or Exists), to look
    /// candidates up in a label index; `None` when every pod may match.
    pub fn narrowest(&self) -> Option<&Requirement> {
        self.requirements
            .iter()
            .filter(|r| matches!(r.op, SelectorOp::In | SelectorOp::Exists))
            .min_by_key(|r| match r.op {
                SelectorOp::In => r.values.len(),
                _ => usize::MAX,
            })
    }
}

/// Which namespaces a term looks at.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Namespaces {
    /// These namespaces (the pod's own when the term names none).
    Only(Vec<String>),
    /// Every namespace (`namespaceSelector: {}`).
    All,
    /// The namespaces whose labels match a non-empty `namespaceSelector`, plus the `namespaces`
    /// listed. Namespace labels change apart from pods, so the cache resolves this into
    /// [`Namespaces::Only`] against the current Namespaces whenever it takes a snapshot
    /// ([`PodConstraints::resolve_namespaces`]); unresolved, only the listed ones count.
    Selector {
        /// `namespaces`.
        listed: Vec<String>,
        /// `namespaceSelector` over Namespace labels.
        selector: LabelSelector,
    },
}

impl Namespaces {
    /// Whether `ns` is included.
    pub fn contains(&self, ns: &str) -> bool {
        match self {
            Namespaces::All => true,
            Namespaces::Only(list) | Namespaces::Selector { listed: list, .. } => {
                list.iter().any(|n| n == ns)
            }
        }
    }

    /// This set with a selector resolved: `matching(selector)` gives the namespaces whose
    /// labels match it. `None` when there is nothing to resolve.
    pub fn resolve(&self, matching: &mut dyn FnMut(&LabelSelector) -> Vec<String>) -> Option<Self> {
        let Namespaces::Selector { listed, selector } = self else {
            return None;
        };
        let mut all = listed.clone();
        all.extend(matching(selector));
        all.sort_unstable();
        all.dedup();
        Some(Namespaces::Only(all))
    }
}

/// A pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodAffinityTerm {
    /// `labelSelector` (with `matchLabelKeys`/`mismatchLabelKeys` merged in); `None` matches
    /// no pod.
    pub selector: Option<LabelSelector>,
    /// Namespaces the selector applies to.
    pub namespaces: Namespaces,
    /// `topologyKey`: the node label whose value names the domain.
    pub topology_key: String,
}

impl PodAffinityTerm {
    /// Whether the pod in `namespace` with `labels` matches this term.
    pub fn matches(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespaces.contains(namespace)
            && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// A topology spread constraint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpreadConstraint {
    /// `maxSkew` (≥ 1).
    pub max_skew: u32,
    /// `topologyKey`.
    pub topology_key: String,
    /// `whenUnsatisfiable: DoNotSchedule` (a filter); else `ScheduleAnyway` (a score).
    pub hard: bool,
    /// `labelSelector` (with `matchLabelKeys` merged in); `None` matches no pod. Counts pods in
    /// the pod's own namespace only.
    pub selector: Option<LabelSelector>,
    /// The pod's namespace (spread counts only pods there).
    pub namespace: String,
    /// `minDomains` (hard constraints only).
    pub min_domains: Option<u32>,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes matching the pod's node selector
    /// and required node affinity count.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor`: only nodes whose taints the pod tolerates count (default
    /// Ignore).
    pub honor_taints: bool,
}

impl SpreadConstraint {
    /// Whether the pod in `namespace` with `labels` counts toward this constraint.
    pub fn counts(&self, namespace: &str, labels: &BTreeMap<String, String>) -> bool {
        self.namespace == namespace && self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }
}

/// The inter-pod constraints of a pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodConstraints {
    /// Required pod affinity: every term must be met.
    pub affinity: Vec<PodAffinityTerm>,
    /// Required pod anti-affinity: no term may be met.
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// Preferred pod affinity: (weight, term).
    pub preferred_affinity: Vec<(i32, PodAffinityTerm)>,
    /// Preferred pod anti-affinity: (weight, term).
    pub preferred_anti_affinity: Vec<(i32, PodAffinityTerm)>,
    /// Topology spread constraints.
    pub spread: Vec<SpreadConstraint>,
}

impl PodConstraints {
    /// Whether there is nothing to evaluate.
    pub fn is_empty(&self) -> bool {
        self.affinity.is_empty()
            && self.anti_affinity.is_empty()
            && self.preferred_affinity.is_empty()
            && self.preferred_anti_affinity.is_empty()
            && self.spread.is_empty()
    }

    /// Whether a node's fit (or score) can depend on pods on *other* nodes: a term over a
    /// domain wider than one node, any spread constraint (skew compares domains), or required
    /// affinity (whose first-pod exception looks at every node).
    pub fn crosses_nodes(&self) -> bool {
        !self.spread.is_empty()
            || !self.affinity.is_empty()
            || self
                .affinity
                .iter()
                .chain(&self.anti_affinity)
                .chain(self.preferred_affinity.iter().map(|(_, t)| t))
                .chain(self.preferred_anti_affinity.iter().map(|(_, t)| t))
                .any(|t| t.topology_key != HOSTNAME)
    }

    /// Whether only the *fit* (not the score) looks across nodes: [`Self::crosses_nodes`], and
    /// every preference is per node (no `ScheduleAnyway` spread, no preferred term over a wider
    /// domain). Such members can be scored once and checked when a node is picked.
    pub fn verdict_only_crosses_nodes(&self) -> bool {
        self.crosses_nodes()
            && self.spread.iter().all(|s| s.hard)
            && self
                .preferred_affinity
                .iter()
                .chain(&self.preferred_anti_affinity)
                .all(|(_, t)| t.topology_key == HOSTNAME)
    }

    /// The terms by which a placed pod with these constraints scores pods coming to its
    /// domains (kube-scheduler's InterPodAffinity scoring of existing pods): preferred affinity
    /// with its weight, preferred anti-affinity with its weight negated, and required affinity
    /// with [`HARD_POD_AFFINITY_WEIGHT`].
    pub fn scoring_terms(&self) -> Arc<[(i32, PodAffinityTerm)]> {
        self.preferred_affinity
            .iter()
            .cloned()
            .chain(
                self.preferred_anti_affinity
                    .iter()
                    .map(|(w, t)| (w.saturating_neg(), t.clone())),
            )
            .chain(
                self.affinity
                    .iter()
                    .map(|t| (HARD_POD_AFFINITY_WEIGHT, t.clone())),
            )
            .collect()
    }

    /// Whether a term selects namespaces by label (see [`Namespaces::Selector`]).
    pub fn selects_namespaces(&self) -> bool {
        self.affinity
            .iter()
            .chain(&self.anti_affinity)
            .chain(self.preferred_affinity.iter().map(|(_, t)| t))
            .chain(self.preferred_anti_affinity.iter().map(|(_, t)| t))
            .any(|t| matches!(t.namespaces, Namespaces::Selector { .. }))
    }

    /// These constraints with every namespace selector resolved (`matching(selector)`: the
    /// namespaces whose labels match), or `None` when none selects namespaces.
    pub fn resolve_namespaces(
        &self,
        matching: &mut dyn FnMut(&LabelSelector) -> Vec<String>,
    ) -> Option<PodConstraints> {
        if !self.selects_namespaces() {
            return None;
        }
        let mut out = self.clone();
        let terms = out
            .affinity
            .iter_mut()
            .chain(&mut out.anti_affinity)
            .chain(out.preferred_affinity.iter_mut().map(|(_, t)| t))
            .chain(out.preferred_anti_affinity.iter_mut().map(|(_, t)| t));
        for t in terms {
            if let Some(resolved) = t.namespaces.resolve(matching) {
                t.namespaces = resolved;
            }
        }
        Some(out)
    }

    /// Every pod label key a selector of these constraints reads.
    pub fn label_keys(&self) -> impl Iterator<Item = &str> {
        let terms = self
            .affinity
            .iter()
            .chain(&self.anti_affinity)
            .chain(self.preferred_affinity.iter().map(|(_, t)| t))
            .chain(self.preferred_anti_affinity.iter().map(|(_, t)| t))
            .filter_map(|t| t.selector.as_ref());
        terms
            .chain(self.spread.iter().filter_map(|s| s.selector.as_ref()))
            .flat_map(|s| s.keys())
    }
}

/// A pod on a node that inter-pod constraints may count: any scheduler's, running or bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedPod {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// Labels.
    pub labels: Labels,
    /// The node it is on.
    pub node: Arc<str>,
    /// Being deleted (spread does not count it; affinity does, as kube-scheduler).
    pub terminating: bool,
    /// Its required anti-affinity terms, which keep matching pods out of its domains.
    pub anti_affinity: Arc<[PodAffinityTerm]>,
    /// Its terms that score matching pods coming to its domains, with signed weights
    /// ([`PodConstraints::scoring_terms`]).
    pub scoring_terms: Arc<[(i32, PodAffinityTerm)]>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn null_selector_matches_nothing_and_empty_matches_everything() {
        let mut term = PodAffinityTerm {
            selector: None,
            namespaces: Namespaces::Only(vec!["a".into()]),
            topology_key: HOSTNAME.into(),
        };
        assert!(!term.matches("a", &labels(&[("x", "1")])));
        term.selector = Some(LabelSelector::default());
        assert!(term.matches("a", &labels(&[])));
        assert!(!term.matches("b", &labels(&[])), "other namespace");
        term.namespaces = Namespaces::All;
        assert!(term.matches("b", &labels(&[])));
    }

    #[test]
    fn only_spread_and_wide_terms_cross_nodes() {
        let term = |key: &str| PodAffinityTerm {
            selector: Some(LabelSelector::default()),
            namespaces: Namespaces::All,
            topology_key: key.into(),
        };
        let mut c = PodConstraints {
            anti_affinity: vec![term(HOSTNAME)],
            ..Default::default()
        };
        assert!(!c.crosses_nodes());
        c.anti_affinity.push(term("zone"));
        assert!(c.crosses_nodes());
    }
}
