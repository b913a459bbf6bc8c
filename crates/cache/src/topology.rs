//! HyperNodes (`topology.volcano.sh/v1alpha1`) → the snapshot's [`TopologyTree`], and a
//! PodGroup's `networkTopology` → the job's [`Topology`] rule.
//!
//! Members resolve as Volcano's scheduler cache resolves them: `exactMatch` names a node (or,
//! for `type: HyperNode`, a child HyperNode); `regexMatch` is unanchored (Go's
//! `regexp.MatchString`); `labelMatch` is a label selector over node labels; regex and label
//! selectors apply to `type: Node` members only. A node belongs to at most one tier-1
//! HyperNode; a HyperNode to at most one parent. Where objects break those rules the tree keeps
//! the first claim in (tier, name) order and says so in [`TopologyTree::problems`].

use crate::error::{ObjectKind, Problem, Result};
use crate::fields::{label_selector, Ctx};
use caldera_api::{HyperNode, MemberType, NetworkTopologyMode, NetworkTopologySpec};
use caldera_model::{
    Domain, LabelSelector, Node, TierLimit, Topology, TopologySource, TopologyTree,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A HyperNode, converted.
#[derive(Debug, Clone)]
pub struct HyperNodeInfo {
    /// Name.
    pub name: Arc<str>,
    /// `spec.tier`.
    pub tier: u32,
    /// `spec.tierName`.
    pub tier_name: Option<Arc<str>>,
    /// `type: Node` members.
    pub nodes: Vec<NodeMember>,
    /// `type: HyperNode` members, by name.
    pub children: Vec<String>,
}

/// How a `type: Node` member selects nodes.
#[derive(Debug, Clone)]
pub enum NodeMember {
    /// `exactMatch.name`.
    Exact(String),
    /// `regexMatch.pattern`, compiled (unanchored).
    Regex(regex::Regex),
    /// `labelMatch`.
    Labels(LabelSelector),
}

impl NodeMember {
    fn matches(&self, node: &Node) -> bool {
        match self {
            NodeMember::Exact(name) => *node.name == **name,
            NodeMember::Regex(re) => re.is_match(&node.name),
            NodeMember::Labels(sel) => sel.matches(&node.labels),
        }
    }
}

impl TryFrom<&HyperNode> for HyperNodeInfo {
    type Error = crate::Error;

    fn try_from(hn: &HyperNode) -> Result<Self> {
        let ctx = Ctx::new(ObjectKind::HyperNode, &hn.metadata);
        let name = ctx.name(&hn.metadata)?;
        let tier = u32::try_from(hn.spec.tier).map_err(|_| {
            ctx.err(
                "spec.tier",
                Problem::Invalid(format!("{} is not a tier (0 or more)", hn.spec.tier)),
            )
        })?;
        let mut nodes = Vec::new();
        let mut children = Vec::new();
        for (i, m) in hn.spec.members.iter().enumerate() {
            let field = format!("spec.members[{i}].selector");
            let Some(sel) = &m.selector else {
                return Err(ctx.err(field, Problem::Missing));
            };
            let given = [
                sel.exact_match.is_some(),
                sel.regex_match.is_some(),
                sel.label_match.is_some(),
            ];
            if given.iter().filter(|&&g| g).count() != 1 {
                return Err(ctx.err(
                    field,
                    Problem::Invalid(
                        "exactly one of exactMatch, regexMatch, labelMatch must be given".into(),
                    ),
                ));
            }
            match &m.type_ {
                MemberType::Other(other) => {
                    return Err(ctx.err(
                        format!("spec.members[{i}].type"),
                        Problem::UnknownValue {
                            value: other.clone(),
                            expected: "Node, HyperNode",
                        },
                    ))
                }
                MemberType::HyperNode => match &sel.exact_match {
                    Some(e) if !e.name.is_empty() => children.push(e.name.clone()),
                    _ => {
                        return Err(ctx.err(
                            field,
                            Problem::Invalid(
                                "a HyperNode member is selected by exactMatch only".into(),
                            ),
                        ))
                    }
                },
                MemberType::Node => {
                    let member = if let Some(e) = &sel.exact_match {
                        NodeMember::Exact(e.name.clone())
                    } else if let Some(r) = &sel.regex_match {
                        let re = regex::Regex::new(&r.pattern).map_err(|e| {
                            ctx.err(
                                format!("{field}.regexMatch.pattern"),
                                Problem::Invalid(e.to_string()),
                            )
                        })?;
                        NodeMember::Regex(re)
                    } else if let Some(l) = &sel.label_match {
                        NodeMember::Labels(label_selector(
                            &ctx,
                            &format!("{field}.labelMatch"),
                            l,
                            Vec::new(),
                        )?)
                    } else {
                        // Counted above: exactly one selector is present.
                        return Err(ctx.err(field, Problem::Missing));
                    };
                    nodes.push(member);
                }
            }
        }
        Ok(HyperNodeInfo {
            name: name.into(),
            tier,
            tier_name: hn
                .spec
                .tier_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(Arc::from),
            nodes,
            children,
        })
    }
}

/// Builds the tree of `hypernodes` over `nodes` (sorted by name, as in the snapshot).
pub fn build_tree(hypernodes: &BTreeMap<Arc<str>, HyperNodeInfo>, nodes: &[Node]) -> TopologyTree {
    let list: Vec<&HyperNodeInfo> = hypernodes.values().collect();
    let index: BTreeMap<&str, usize> = list
        .iter()
        .enumerate()
        .map(|(i, h)| (&*h.name, i))
        .collect();
    let mut problems = Vec::new();
    // Parents: the first claim in (tier, name) order wins.
    let mut order: Vec<usize> = (0..list.len()).collect();
    order.sort_by(|&a, &b| (list[a].tier, &list[a].name).cmp(&(list[b].tier, &list[b].name)));
    let mut parent: Vec<Option<usize>> = vec![None; list.len()];
    for &p in &order {
        for child in &list[p].children {
            let Some(&c) = index.get(child.as_str()) else {
                continue; // Not created yet (Volcano waits for it the same way).
            };
            match parent[c] {
                None if c != p => parent[c] = Some(p),
                None => problems.push(format!(
                    "HyperNode {} lists itself as a member",
                    list[p].name
                )),
                Some(first) => problems.push(format!(
                    "HyperNode {child} is a member of both {} and {}; {} is kept",
                    list[first].name, list[p].name, list[first].name
                )),
            }
        }
    }
    // Break cycles: a parent chain that comes back to its start loses its last link.
    for start in 0..list.len() {
        let mut seen = BTreeSet::from([start]);
        let mut at = start;
        while let Some(p) = parent[at] {
            if !seen.insert(p) {
                problems.push(format!(
                    "HyperNodes {} and {} form a cycle; {} is taken as a top HyperNode",
                    list[at].name, list[p].name, list[at].name
                ));
                parent[at] = None;
                break;
            }
            at = p;
        }
    }
    // Direct node members; a node goes to the first tier-1 HyperNode (by name) that claims it.
    let mut claimed: BTreeMap<u32, usize> = BTreeMap::new();
    let mut direct: Vec<Vec<u32>> = vec![Vec::new(); list.len()];
    for &h in &order {
        for (n, node) in nodes.iter().enumerate() {
            if !list[h].nodes.iter().any(|m| m.matches(node)) {
                continue;
            }
            if list[h].tier == 1 {
                if let Some(&first) = claimed.get(&(n as u32)) {
                    problems.push(format!(
                        "node {} is in two tier-1 HyperNodes, {} and {}; {} is kept",
                        node.name, list[first].name, list[h].name, list[first].name
                    ));
                    continue;
                }
                claimed.insert(n as u32, h);
            }
            direct[h].push(n as u32);
        }
    }
    // Every HyperNode holds its own nodes and its descendants'.
    let mut all = direct;
    let mut depth: Vec<(usize, usize)> = (0..list.len())
        .map(|h| {
            let mut d = 0;
            let mut at = h;
            while let Some(p) = parent[at] {
                d += 1;
                at = p;
            }
            (d, h)
        })
        .collect();
    depth.sort_by(|a, b| b.cmp(a));
    for &(_, h) in &depth {
        if let Some(p) = parent[h] {
            let mine = all[h].clone();
            all[p].extend(mine);
        }
    }
    let mut tier_names: BTreeMap<Arc<str>, u32> = BTreeMap::new();
    for h in &list {
        if let Some(n) = &h.tier_name {
            tier_names.entry(n.clone()).or_insert(h.tier);
        }
    }
    let domains = list
        .iter()
        .zip(all)
        .enumerate()
        .map(|(i, (h, nodes))| Domain {
            name: h.name.clone(),
            tier: h.tier,
            parent: parent[i].map(|p| p as u32),
            nodes,
        })
        .collect();
    TopologyTree::from_domains(domains, tier_names, nodes.len(), problems)
}

/// A PodGroup's `networkTopology` as the job's rule. Volcano defaults `mode` to `hard`.
pub fn network_topology(spec: &NetworkTopologySpec) -> Topology {
    let highest = match (&spec.highest_tier_allowed, &spec.highest_tier_name) {
        (Some(t), _) => TierLimit::Tier(u32::try_from(*t).unwrap_or(0)),
        (None, Some(name)) if !name.is_empty() => TierLimit::Name(name.as_str().into()),
        _ => TierLimit::Unset,
    };
    Topology {
        required: spec.mode != Some(NetworkTopologyMode::Soft),
        source: TopologySource::HyperNodes,
        highest,
    }
}
