//! Network topology: a tree of domains over the nodes (Volcano's HyperNodes, or one tier made
//! from a node label) and a gang's rule over it (`networkTopology`, Caldera's `topology`).
//!
//! One model for every source: the session sees a [`TopologyTree`] and a [`Topology`] rule,
//! whether the domains came from HyperNode objects or from the values of one node label.

use crate::node::Node;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where a gang's domains come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TopologySource {
    /// The snapshot's HyperNode tree ([`crate::Snapshot::topology`]).
    HyperNodes,
    /// One tier: one domain per value of this node label (Caldera's `spec.topology.key`, the
    /// native PodGroup's topology key).
    Label(Arc<str>),
}

/// The highest tier a hard rule allows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TierLimit {
    /// `highestTierAllowed`.
    Tier(u32),
    /// `highestTierName`: resolved against the tree's `tierName`s each session.
    Name(Arc<str>),
    /// Neither was given (a hard rule then cannot be honoured; the gang is told so).
    Unset,
}

/// A gang's topology rule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Topology {
    /// `hard`/`required`: every member inside one domain of an allowed tier, or nothing binds.
    /// `soft`/`preferred`: the smallest domain that holds the gang, else as few as possible.
    pub required: bool,
    /// Where the domains come from.
    pub source: TopologySource,
    /// Highest tier allowed (a soft rule may go up to the cluster root whatever it says).
    pub highest: TierLimit,
}

impl Topology {
    /// One tier from a node label: Caldera's `spec.topology` (and the native PodGroup's
    /// `schedulingConstraints.topology`), a rule over the one-tier tree of `key`'s values.
    pub fn one_tier(key: &str, required: bool) -> Topology {
        Topology {
            required,
            source: TopologySource::Label(key.into()),
            highest: TierLimit::Tier(1),
        }
    }

    /// The node label of a one-tier rule.
    pub fn label_key(&self) -> Option<&str> {
        match &self.source {
            TopologySource::Label(key) => Some(key),
            TopologySource::HyperNodes => None,
        }
    }

    /// How the rule reads in a message: `HyperNode` or the label key.
    pub fn source_name(&self) -> &str {
        self.label_key().unwrap_or("HyperNode")
    }

    /// The highest tier the rule allows in `tree` (a soft rule: the cluster root), or why a
    /// hard rule cannot be honoured there (its `highestTierName` names no tier, or it gives
    /// no tier at all).
    pub fn allowed_tier(&self, tree: &TopologyTree) -> Result<u32, String> {
        if !self.required {
            return Ok(tree.root_tier());
        }
        match &self.highest {
            TierLimit::Tier(t) => Ok(*t),
            TierLimit::Name(name) => tree.tier_names.get(name).copied().ok_or_else(|| {
                let known: Vec<&str> = tree.tier_names.keys().map(|k| &**k).collect();
                format!(
                    "networkTopology.highestTierName {name:?} names no HyperNode tier (tier names: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )
            }),
            TierLimit::Unset => Err(
                "networkTopology mode hard needs highestTierAllowed or highestTierName".to_string(),
            ),
        }
    }
}

/// One `subGroupPolicy[]` entry of a PodGroup (Volcano's sub-groups): which members it takes,
/// how it splits them into sub-groups, and the rule each sub-group keeps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SubGroupPolicy {
    /// The policy's `name` (may be empty).
    pub name: Arc<str>,
    /// `labelSelector`: the members it may take (`None`: every member).
    pub selector: Option<crate::LabelSelector>,
    /// `matchLabelKeys`: members with equal values of these labels form one sub-group; a
    /// member lacking one of them (or with an empty value) is not taken by this policy.
    pub match_label_keys: Vec<String>,
    /// `subGroupSize` (≥ 1, default 1): members of a sub-group placed together, all or none,
    /// inside one domain of its rule.
    pub size: u32,
    /// `minSubGroups` (default 0): sub-groups of this policy that must each have `size`
    /// members placed before any member of the gang binds.
    pub min: u32,
    /// Each sub-group's `networkTopology` (`None`: only the gang's own rule).
    pub topology: Option<Topology>,
}

impl SubGroupPolicy {
    /// The sub-group a member with `labels` joins under this policy (its key: the values of
    /// `matchLabelKeys`, joined by `-` as Volcano names it), or `None` when the policy does
    /// not take it.
    pub fn key_of(&self, labels: &BTreeMap<String, String>) -> Option<String> {
        let mut key = String::new();
        self.write_key(labels, &mut key).then_some(key)
    }

    /// [`SubGroupPolicy::key_of`] into `key` (cleared first; nothing allocated once it has
    /// room): whether the policy takes the member.
    fn write_key(&self, labels: &BTreeMap<String, String>, key: &mut String) -> bool {
        key.clear();
        if self.selector.as_ref().is_some_and(|s| !s.matches(labels)) {
            return false;
        }
        for (i, k) in self.match_label_keys.iter().enumerate() {
            match labels.get(k) {
                Some(v) if !v.is_empty() => {
                    if i > 0 {
                        key.push('-');
                    }
                    key.push_str(v);
                }
                _ => return false,
            }
        }
        true
    }
}

/// One sub-group of a job's members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubGroup {
    /// Index of its policy in [`crate::Job::sub_group_policies`].
    pub policy: u32,
    /// How messages name it: the policy's name, then `[key]` when `matchLabelKeys` split it.
    pub name: Arc<str>,
    /// Its members (task indices), in the order given.
    pub tasks: Vec<usize>,
}

/// Splits members (task index, labels) into the sub-groups of `policies`: a member joins the
/// first policy that takes it, and under that policy the sub-group of its key. Members no
/// policy takes are in no sub-group (only the gang's rules bind them). Sub-groups come in
/// (policy, key) order.
pub fn split_sub_groups<'a>(
    policies: &[SubGroupPolicy],
    members: impl IntoIterator<Item = (usize, &'a BTreeMap<String, String>)>,
) -> Vec<SubGroup> {
    if policies.is_empty() {
        return Vec::new();
    }
    // Per policy, per key: the index of its member list. Members of a sub-group usually come
    // one after another, so the previous member's list is tried first; the key is written
    // into one buffer, and copied only for a new sub-group.
    let mut index: BTreeMap<u32, BTreeMap<String, usize>> = BTreeMap::new();
    let mut lists: Vec<Vec<usize>> = Vec::new();
    let (mut key, mut last_key) = (String::new(), String::new());
    let mut last: Option<(u32, usize)> = None;
    for (task, labels) in members {
        let Some(policy) = policies.iter().position(|p| p.write_key(labels, &mut key)) else {
            continue;
        };
        let policy = policy as u32;
        if let Some((p, at)) = last.filter(|&(p, _)| p == policy && last_key == key) {
            lists[at].push(task);
            last = Some((p, at));
            continue;
        }
        let keys = index.entry(policy).or_default();
        let at = match keys.get(key.as_str()) {
            Some(&at) => at,
            None => {
                lists.push(Vec::new());
                keys.insert(key.clone(), lists.len() - 1);
                lists.len() - 1
            }
        };
        lists[at].push(task);
        last = Some((policy, at));
        std::mem::swap(&mut key, &mut last_key);
    }
    let mut groups = Vec::new();
    for (policy, keys) in index {
        let p = &policies[policy as usize];
        for (key, at) in keys {
            let name = if p.match_label_keys.is_empty() {
                format!("{:?}", &*p.name)
            } else {
                format!("{:?}[{key}]", &*p.name)
            };
            groups.push(SubGroup {
                policy,
                name: name.into(),
                tasks: std::mem::take(&mut lists[at]),
            });
        }
    }
    groups
}

/// One domain of the tree: a HyperNode (or one value of a label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    /// The HyperNode's name (or the label value).
    pub name: Arc<str>,
    /// Its tier (1 = closest to the nodes).
    pub tier: u32,
    /// Index of its parent in [`TopologyTree::domains`]; `None` below the cluster root.
    pub parent: Option<u32>,
    /// Node indices (into the snapshot's nodes) under it, sorted.
    pub nodes: Vec<u32>,
}

/// The domains over a snapshot's nodes. A cluster-wide root sits above the highest tier; it is
/// not listed (it holds every node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyTree {
    /// Domains sorted by (tier, name).
    pub domains: Vec<Domain>,
    /// `tierName` → tier.
    pub tier_names: BTreeMap<Arc<str>, u32>,
    /// Per node index: its tier-1 domain, if any.
    pub leaf_of: Vec<Option<u32>>,
    /// What was wrong with the objects the tree was built from (a cycle, a node claimed by two
    /// tier-1 HyperNodes, a HyperNode with two parents): the tree keeps the first claim by
    /// name and says so here.
    pub problems: Vec<String>,
}

impl TopologyTree {
    /// One tier from a node label: one domain per value, named by the value.
    pub fn from_label(nodes: &[Node], key: &str) -> TopologyTree {
        let mut by_value: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            if let Some(v) = n.labels.get(key) {
                by_value.entry(v.as_str()).or_default().push(i as u32);
            }
        }
        let domains = by_value
            .into_iter()
            .map(|(value, nodes)| Domain {
                name: value.into(),
                tier: 1,
                parent: None,
                nodes,
            })
            .collect();
        TopologyTree::from_domains(domains, BTreeMap::new(), nodes.len(), Vec::new())
    }

    /// Assembles a tree from domains (any order; parents given by index into `domains`),
    /// sorting them by (tier, name) and renumbering parents.
    pub fn from_domains(
        mut domains: Vec<Domain>,
        tier_names: BTreeMap<Arc<str>, u32>,
        node_count: usize,
        problems: Vec<String>,
    ) -> TopologyTree {
        let mut order: Vec<usize> = (0..domains.len()).collect();
        order.sort_by(|&a, &b| {
            (domains[a].tier, &domains[a].name).cmp(&(domains[b].tier, &domains[b].name))
        });
        let mut new_index = vec![0u32; domains.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new as u32;
        }
        for d in &mut domains {
            d.parent = d.parent.map(|p| new_index[p as usize]);
            d.nodes.sort_unstable();
            d.nodes.dedup();
        }
        let mut slots: Vec<Option<Domain>> = domains.into_iter().map(Some).collect();
        let domains: Vec<Domain> = order.iter().filter_map(|&old| slots[old].take()).collect();
        let mut leaf_of = vec![None; node_count];
        for (i, d) in domains.iter().enumerate().filter(|(_, d)| d.tier == 1) {
            for &n in &d.nodes {
                if let Some(slot) = leaf_of.get_mut(n as usize) {
                    slot.get_or_insert(i as u32);
                }
            }
        }
        TopologyTree {
            domains,
            tier_names,
            leaf_of,
            problems,
        }
    }

    /// Whether there are no domains at all.
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The highest tier of any domain (0 when empty).
    pub fn max_tier(&self) -> u32 {
        self.domains.iter().map(|d| d.tier).max().unwrap_or(0)
    }

    /// The tier of the cluster-wide root: one above the highest.
    pub fn root_tier(&self) -> u32 {
        self.max_tier() + 1
    }

    /// The tiers present, ascending.
    pub fn tiers(&self) -> Vec<u32> {
        let mut t: Vec<u32> = self.domains.iter().map(|d| d.tier).collect();
        t.dedup();
        t
    }

    /// The domain and its ancestors, lowest first.
    pub fn ancestors(&self, domain: u32) -> Vec<u32> {
        let mut chain = vec![domain];
        let mut at = domain;
        while let Some(p) = self.domains[at as usize].parent {
            // A parent chain is acyclic by construction; the bound is a second guard.
            if chain.len() > self.domains.len() {
                break;
            }
            chain.push(p);
            at = p;
        }
        chain
    }

    /// Whether `inner` is `outer` or lies below it.
    /// Walks the parents without allocating (the topology search asks it for every domain).
    pub fn is_within(&self, inner: u32, outer: u32) -> bool {
        let mut at = inner;
        for _ in 0..=self.domains.len() {
            if at == outer {
                return true;
            }
            match self.domains.get(at as usize).and_then(|d| d.parent) {
                Some(p) => at = p,
                None => return false,
            }
        }
        false
    }

    /// The smallest domain holding every node of `nodes` (`None`: only the root does).
    pub fn smallest_holding(&self, nodes: &[u32]) -> Option<u32> {
        let first = *nodes.first()?;
        // Candidates are every domain holding the first node, lowest tier first.
        self.domains
            .iter()
            .enumerate()
            .filter(|(_, d)| d.nodes.binary_search(&first).is_ok())
            .map(|(i, _)| i as u32)
            .find(|&i| {
                let d = &self.domains[i as usize];
                nodes.iter().all(|n| d.nodes.binary_search(n).is_ok())
            })
    }

    /// Index of the domain named `name`.
    pub fn domain_named(&self, name: &str) -> Option<u32> {
        self.domains
            .iter()
            .position(|d| &*d.name == name)
            .map(|i| i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(name: &str, tier: u32, parent: Option<u32>, nodes: &[u32]) -> Domain {
        Domain {
            name: name.into(),
            tier,
            parent,
            nodes: nodes.to_vec(),
        }
    }

    #[test]
    fn sub_groups_are_split_by_first_policy_then_key_in_key_order() {
        use crate::selector::{Requirement, SelectorOp};
        let policy = |name: &str, keys: &[&str], role: Option<&str>| SubGroupPolicy {
            name: name.into(),
            selector: role.map(|r| crate::LabelSelector {
                requirements: vec![Requirement {
                    key: "role".into(),
                    op: SelectorOp::In,
                    values: vec![r.to_string()],
                }],
            }),
            match_label_keys: keys.iter().map(|k| k.to_string()).collect(),
            size: 1,
            min: 0,
            topology: None,
        };
        let policies = [
            policy("ps", &[], Some("ps")),
            policy("workers", &["part", "zone"], None),
        ];
        let labels: Vec<BTreeMap<String, String>> = [
            &[("part", "1"), ("zone", "a")][..],
            &[("part", "1"), ("zone", "a")],
            &[("role", "ps"), ("part", "1"), ("zone", "a")],
            &[("part", "0"), ("zone", "a")],
            &[("part", "1"), ("zone", "a")],
            &[("part", "1")],
            &[("part", "1"), ("zone", "")],
            &[("role", "ps")],
            &[("part", "0"), ("zone", "a")],
            &[("part", "1"), ("zone", "b")],
        ]
        .iter()
        .map(|pairs| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect();
        let groups = split_sub_groups(&policies, labels.iter().enumerate());
        let got: Vec<(u32, &str, Vec<usize>)> = groups
            .iter()
            .map(|g| (g.policy, &*g.name, g.tasks.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (0, "\"ps\"", vec![2, 7]),
                (1, "\"workers\"[0-a]", vec![3, 8]),
                (1, "\"workers\"[1-a]", vec![0, 1, 4]),
                (1, "\"workers\"[1-b]", vec![9]),
            ]
        );
        assert_eq!(policies[1].key_of(&labels[9]).as_deref(), Some("1-b"));
        assert_eq!(policies[1].key_of(&labels[5]), None);
    }

    #[test]
    fn domains_are_sorted_by_tier_then_name_and_parents_follow() {
        let tree = TopologyTree::from_domains(
            vec![
                domain("spine", 2, None, &[0, 1, 2, 3]),
                domain("rack-b", 1, Some(0), &[3, 2]),
                domain("rack-a", 1, Some(0), &[0, 1]),
            ],
            BTreeMap::new(),
            5,
            Vec::new(),
        );
        let names: Vec<&str> = tree.domains.iter().map(|d| &*d.name).collect();
        assert_eq!(names, ["rack-a", "rack-b", "spine"]);
        assert_eq!(tree.domains[0].parent, Some(2));
        assert_eq!(tree.domains[1].nodes, [2, 3]);
        assert_eq!(tree.leaf_of, [Some(0), Some(0), Some(1), Some(1), None]);
        assert_eq!(tree.smallest_holding(&[0, 1]), Some(0));
        assert_eq!(tree.smallest_holding(&[1, 2]), Some(2));
        assert_eq!(tree.smallest_holding(&[1, 4]), None);
        assert_eq!(tree.ancestors(1), [1, 2]);
        assert!(tree.is_within(0, 2) && !tree.is_within(0, 1));
        assert_eq!((tree.max_tier(), tree.root_tier()), (2, 3));
    }
}
