//! HyperNodes from node labels (config `networkTopologyDiscovery`, `source: label`): what
//! HyperNodes a cluster's node labels imply, and what to create, update and delete so the
//! HyperNodes Caldera owns are exactly those. Pure: the runtime and the simulator carry the
//! changes out.
//!
//! A level list names node label keys, lowest tier first. A node with a value `v` for the
//! first key belongs to the tier-1 HyperNode of (key, `v`); that HyperNode's parent is the
//! tier-2 HyperNode of the node's value of the second key, and so on up. A node without a
//! key's value stops there (it joins no higher HyperNode through that list). A domain whose
//! nodes name two different parents keeps the first (by node name) and the conflict is
//! reported, as a HyperNode can have only one parent.
//!
//! Ownership: the HyperNodes made here carry [`MANAGED_BY`]` = caldera` and
//! [`SOURCE_LABEL`]` = label`; reconciling only ever updates or deletes HyperNodes with both
//! marks, so hand-made ones are never touched. Nor are they adopted: a domain whose readable
//! name is taken by a hand-made HyperNode gets the name with a stable hash suffix, and no
//! discovered HyperNode lists a hand-made one as a member (the rename is reported; a domain
//! left with no free name is left out, and out of its parent, and reported).

use caldera_api::{ExactMatch, HyperNode, HyperNodeSpec, MemberSelector, MemberSpec, MemberType};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::collections::{BTreeMap, BTreeSet};

/// The label that marks a HyperNode as Caldera's (`app.kubernetes.io/managed-by`).
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGER: &str = "caldera";
/// The discovery source of a HyperNode, as Volcano labels its discovered ones.
pub const SOURCE_LABEL: &str = "volcano.sh/network-topology-source";

/// The value of [`SOURCE_LABEL`] on the HyperNodes discovered from node labels.
pub const SOURCE: &str = "label";

/// Whether Caldera's discovery owns `h`: it carries both [`MANAGED_BY`]` = caldera` and
/// [`SOURCE_LABEL`]` = label` (the first alone is a generic label others may set).
pub fn owned(h: &HyperNode) -> bool {
    let Some(labels) = h.metadata.labels.as_ref() else {
        return false;
    };
    labels.get(MANAGED_BY).is_some_and(|v| v == MANAGER)
        && labels.get(SOURCE_LABEL).is_some_and(|v| v == SOURCE)
}

/// What to write so Caldera's HyperNodes match the node labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changes {
    /// HyperNodes to create.
    pub create: Vec<HyperNode>,
    /// Owned HyperNodes whose spec or labels must change (the whole desired object).
    pub update: Vec<HyperNode>,
    /// Owned HyperNodes no label implies any more, by name.
    pub delete: Vec<String>,
    /// What could not be honoured (a domain with two parents, a name taken by a hand-made
    /// HyperNode), one line each.
    pub problems: Vec<String>,
}

impl Changes {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// A domain: (tier, label key, value).
type DomainKey = (usize, String, String);

/// A node as discovery sees it: its name and labels.
pub type NodeLabels<'a> = (&'a str, &'a BTreeMap<String, String>);

/// The names and labels of Kubernetes `nodes`.
pub fn node_labels(nodes: &[Node]) -> Vec<NodeLabels<'_>> {
    static NONE: BTreeMap<String, String> = BTreeMap::new();
    nodes
        .iter()
        .filter_map(|n| {
            let name = n.metadata.name.as_deref()?;
            Some((name, n.metadata.labels.as_ref().unwrap_or(&NONE)))
        })
        .collect()
}

/// The HyperNodes `levels` imply over `nodes`, by name, and the problems met. `foreign`: the
/// names of existing HyperNodes Caldera does not own; no desired HyperNode takes one of them
/// or lists one as a member.
pub fn desired(
    levels: &[Vec<String>],
    nodes: &[NodeLabels],
    foreign: &BTreeSet<String>,
) -> (BTreeMap<String, HyperNode>, Vec<String>) {
    let mut sorted: Vec<&NodeLabels> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    // Per domain: its member nodes (tier 1) or child domains, and its parent.
    let mut members: BTreeMap<DomainKey, BTreeSet<String>> = BTreeMap::new();
    let mut parent: BTreeMap<DomainKey, DomainKey> = BTreeMap::new();
    let mut problems = Vec::new();
    for keys in levels {
        for &&(name, labels) in &sorted {
            let mut below: Option<DomainKey> = None;
            for (i, key) in keys.iter().enumerate() {
                let Some(value) = labels.get(key) else {
                    break;
                };
                let here: DomainKey = (i + 1, key.clone(), value.clone());
                match &below {
                    None => {
                        members
                            .entry(here.clone())
                            .or_default()
                            .insert(name.to_string());
                    }
                    Some(child) => match parent.get(child) {
                        Some(p) if *p != here => {
                            problems.push(format!(
                                "node {name}: {}={} lies under {}={} on other nodes but {key}={value} here; kept under {}={}",
                                child.1, child.2, p.1, p.2, p.1, p.2
                            ));
                            break;
                        }
                        Some(_) => {}
                        None => {
                            parent.insert(child.clone(), here.clone());
                            // A domain above tier 1 exists through its children.
                            members.entry(here.clone()).or_default();
                        }
                    },
                }
                below = Some(here);
            }
        }
    }
    // Names: readable and unique, never one of a HyperNode Caldera does not own.
    let mut names: BTreeMap<DomainKey, String> = BTreeMap::new();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for domain in members.keys() {
        let readable = readable_name(&domain.1, &domain.2);
        let hashed = || {
            format!(
                "{}-t{}-{:08x}",
                trim(&readable, 230),
                domain.0,
                fnv(&format!("{}={}", domain.1, domain.2))
            )
        };
        let free = |n: &String| !taken.contains(n) && !foreign.contains(n);
        let name = if free(&readable) {
            readable.clone()
        } else {
            let other = hashed();
            if !free(&other) {
                problems.push(format!(
                    "the domain {}={}: its names {readable} and {other} are both taken (by HyperNodes Caldera does not own or by other domains); it is not made, nor listed in its parent",
                    domain.1, domain.2
                ));
                continue;
            }
            if foreign.contains(&readable) {
                problems.push(format!(
                    "HyperNode {readable} exists and is not Caldera's: the domain {}={} is made as {other}",
                    domain.1, domain.2
                ));
            }
            other
        };
        taken.insert(name.clone());
        names.insert(domain.clone(), name);
    }
    // A domain left without a name is not made, nor listed in its parent.
    members.retain(|d, _| names.contains_key(d));
    let mut children: BTreeMap<&DomainKey, Vec<&str>> = BTreeMap::new();
    for (child, p) in &parent {
        if let Some(name) = names.get(child) {
            children.entry(p).or_default().push(name);
        }
    }
    let mut out = BTreeMap::new();
    for (domain, nodes) in &members {
        let (member_type, mut member_names): (MemberType, Vec<&str>) = if domain.0 == 1 {
            (MemberType::Node, nodes.iter().map(String::as_str).collect())
        } else {
            (
                MemberType::HyperNode,
                children.get(domain).cloned().unwrap_or_default(),
            )
        };
        member_names.sort_unstable();
        member_names.dedup();
        let name = names[domain].clone();
        let mut labels = BTreeMap::new();
        labels.insert(MANAGED_BY.to_string(), MANAGER.to_string());
        labels.insert(SOURCE_LABEL.to_string(), SOURCE.to_string());
        let h = HyperNode {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels),
                ..ObjectMeta::default()
            },
            spec: HyperNodeSpec {
                tier: domain.0 as i64,
                // As Volcano's label discovery: the tier is named by its label key, so a
                // PodGroup's `highestTierName` can name it.
                tier_name: Some(domain.1.clone()),
                members: member_names
                    .into_iter()
                    .map(|m| MemberSpec {
                        type_: member_type.clone(),
                        selector: Some(MemberSelector {
                            exact_match: Some(ExactMatch {
                                name: m.to_string(),
                            }),
                            ..MemberSelector::default()
                        }),
                    })
                    .collect(),
            },
            status: None,
        };
        out.insert(name, h);
    }
    (out, problems)
}

/// What to create, update and delete so the owned HyperNodes among `existing` are exactly
/// what `levels` imply over `nodes`.
pub fn reconcile(levels: &[Vec<String>], nodes: &[NodeLabels], existing: &[HyperNode]) -> Changes {
    let foreign: BTreeSet<String> = existing
        .iter()
        .filter(|h| !owned(h))
        .filter_map(|h| h.metadata.name.clone())
        .collect();
    let (want, problems) = desired(levels, nodes, &foreign);
    let mut changes = Changes {
        problems,
        ..Changes::default()
    };
    let have: BTreeMap<&str, &HyperNode> = existing
        .iter()
        .filter_map(|h| Some((h.metadata.name.as_deref()?, h)))
        .collect();
    for (name, h) in &want {
        match have.get(name.as_str()) {
            None => changes.create.push(h.clone()),
            // Not reached (`desired` takes no name of a HyperNode Caldera does not own); kept
            // so that a hand-made HyperNode is never overwritten.
            Some(old) if !owned(old) => changes.problems.push(format!(
                "HyperNode {name} exists and is not Caldera's: the one node labels imply is not made"
            )),
            Some(old) => {
                let labels_differ = h.metadata.labels.as_ref().is_some_and(|want| {
                    let got = old.metadata.labels.clone().unwrap_or_default();
                    want.iter().any(|(k, v)| got.get(k) != Some(v))
                });
                if old.spec != h.spec || labels_differ {
                    changes.update.push(h.clone());
                }
            }
        }
    }
    for (name, h) in &have {
        if owned(h) && !want.contains_key(*name) {
            changes.delete.push(name.to_string());
        }
    }
    changes
}

/// `<last segment of the key>-<value>`, as a DNS subdomain name: lowercase, `[a-z0-9.-]`,
/// starting and ending with an alphanumeric.
fn readable_name(key: &str, value: &str) -> String {
    let segment = key.rsplit('/').next().unwrap_or(key);
    let raw = format!("{segment}-{value}").to_ascii_lowercase();
    let mapped: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = trim(&mapped, 253);
    if name.is_empty() {
        format!("domain-{:08x}", fnv(&format!("{key}={value}")))
    } else {
        name
    }
}

/// At most `max` characters, without non-alphanumerics at either end.
fn trim(s: &str, max: usize) -> String {
    let cut: String = s.chars().take(max).collect();
    cut.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// FNV-1a, for a stable suffix.
fn fnv(s: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn members(h: &HyperNode) -> Vec<&str> {
        h.spec
            .members
            .iter()
            .filter_map(|m| {
                m.selector
                    .as_ref()?
                    .exact_match
                    .as_ref()
                    .map(|e| e.name.as_str())
            })
            .collect()
    }

    #[test]
    fn labels_make_a_tree_lowest_tier_first() {
        let levels = vec![vec![
            "example.com/rack".to_string(),
            "example.com/spine".to_string(),
        ]];
        let nodes = [
            node(
                "n0",
                &[("example.com/rack", "r0"), ("example.com/spine", "s0")],
            ),
            node(
                "n1",
                &[("example.com/rack", "r0"), ("example.com/spine", "s0")],
            ),
            node(
                "n2",
                &[("example.com/rack", "r1"), ("example.com/spine", "s0")],
            ),
            node("n3", &[("example.com/spine", "s0")]),
            node("n4", &[]),
        ];
        let (want, problems) = desired(&levels, &node_labels(&nodes), &BTreeSet::new());
        assert!(problems.is_empty(), "{problems:?}");
        let names: Vec<&str> = want.keys().map(String::as_str).collect();
        assert_eq!(names, ["rack-r0", "rack-r1", "spine-s0"]);
        assert_eq!(members(&want["rack-r0"]), ["n0", "n1"]);
        assert_eq!(want["rack-r0"].spec.tier, 1);
        assert_eq!(
            want["rack-r0"].spec.tier_name.as_deref(),
            Some("example.com/rack")
        );
        // n3 has no rack: it joins nothing.
        assert_eq!(members(&want["spine-s0"]), ["rack-r0", "rack-r1"]);
        assert_eq!(
            want["spine-s0"].spec.members[0].type_,
            MemberType::HyperNode
        );
        assert!(owned(&want["spine-s0"]));
    }

    #[test]
    fn a_domain_with_two_parents_keeps_the_first_and_says_so() {
        let levels = vec![vec!["rack".to_string(), "spine".to_string()]];
        let nodes = [
            node("n0", &[("rack", "r0"), ("spine", "s0")]),
            node("n1", &[("rack", "r0"), ("spine", "s1")]),
        ];
        let (want, problems) = desired(&levels, &node_labels(&nodes), &BTreeSet::new());
        assert_eq!(members(&want["spine-s0"]), ["rack-r0"]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("node n1"), "{}", problems[0]);
    }

    #[test]
    fn reconcile_touches_only_its_own_hypernodes() {
        let levels = vec![vec!["rack".to_string()]];
        let nodes = [node("n0", &[("rack", "a")]), node("n1", &[("rack", "b")])];
        let nodes = node_labels(&nodes);
        let (mut want, _) = desired(&levels, &nodes, &BTreeSet::new());
        // rack-a exists, owned, with an old member list; rack-b is hand-made; rack-gone is
        // owned and no longer implied; hand-made is someone else's.
        let mut stale = want["rack-a"].clone();
        stale.spec.members.clear();
        let mut hand = want.remove("rack-b").expect("rack-b implied");
        hand.metadata.labels = None;
        let mut gone = stale.clone();
        gone.metadata.name = Some("rack-gone".into());
        let mut other = hand.clone();
        other.metadata.name = Some("hand-made".into());
        let existing = [stale, hand.clone(), gone, other.clone()];
        let changes = reconcile(&levels, &nodes, &existing);
        // rack=b is made under another name, leaving the hand-made rack-b alone.
        let created: Vec<&str> = changes
            .create
            .iter()
            .filter_map(|h| h.metadata.name.as_deref())
            .collect();
        assert_eq!(created.len(), 1, "{created:?}");
        assert!(created[0].starts_with("rack-b-t1-"), "{created:?}");
        assert_eq!(members(&changes.create[0]), ["n1"]);
        assert_eq!(changes.update.len(), 1);
        assert_eq!(members(&changes.update[0]), ["n0"]);
        assert_eq!(changes.delete, ["rack-gone"]);
        assert_eq!(changes.problems.len(), 1);
        assert!(changes.problems[0].contains("rack-b exists and is not Caldera's"));
        // Once carried out, nothing more to do.
        let mut now: Vec<HyperNode> = vec![hand, other];
        now.extend(changes.create);
        now.extend(changes.update);
        let again = reconcile(&levels, &nodes, &now);
        assert!(again.is_empty(), "{again:?}");
    }

    fn hand_made(name: &str, labels: &[(&str, &str)]) -> HyperNode {
        HyperNode {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: HyperNodeSpec {
                tier: 1,
                tier_name: None,
                members: Vec::new(),
            },
            status: None,
        }
    }

    fn names(hs: &[HyperNode]) -> Vec<&str> {
        hs.iter()
            .filter_map(|h| h.metadata.name.as_deref())
            .collect()
    }

    #[test]
    fn a_discovered_parent_never_adopts_a_hand_made_hypernode() {
        let levels = vec![vec!["rack".to_string(), "spine".to_string()]];
        let nodes = [
            node("n0", &[("rack", "r0"), ("spine", "s0")]),
            node("n1", &[("rack", "r1"), ("spine", "s0")]),
        ];
        let nodes = node_labels(&nodes);
        let hand = hand_made("rack-r0", &[]);
        let changes = reconcile(&levels, &nodes, std::slice::from_ref(&hand));
        let created = names(&changes.create);
        let renamed = created
            .iter()
            .find(|n| n.starts_with("rack-r0-t1-"))
            .copied()
            .expect("rack=r0 made under another name");
        assert!(!created.contains(&"rack-r0"), "{created:?}");
        let spine = changes
            .create
            .iter()
            .find(|h| h.metadata.name.as_deref() == Some("spine-s0"))
            .expect("spine-s0 made");
        // The spine lists Caldera's rack, not the hand-made one.
        assert_eq!(members(spine), [renamed, "rack-r1"]);
        assert!(changes.update.is_empty() && changes.delete.is_empty());
        assert_eq!(changes.problems.len(), 1, "{:?}", changes.problems);
        assert!(
            changes.problems[0].contains("rack-r0 exists and is not Caldera's")
                && changes.problems[0].contains(renamed),
            "{}",
            changes.problems[0]
        );
        // The name is stable: carried out, the next round has nothing to do.
        let mut now = vec![hand];
        now.extend(changes.create);
        assert!(reconcile(&levels, &nodes, &now).is_empty());
    }

    #[test]
    fn a_domain_without_a_free_name_is_left_out_of_its_parent() {
        let levels = vec![vec!["rack".to_string(), "spine".to_string()]];
        let nodes = [
            node("n0", &[("rack", "r0"), ("spine", "s0")]),
            node("n1", &[("rack", "r1"), ("spine", "s0")]),
        ];
        let nodes = node_labels(&nodes);
        let (free, _) = desired(&levels, &nodes, &BTreeSet::new());
        assert!(free.contains_key("rack-r0"));
        let hashed = format!("rack-r0-t1-{:08x}", fnv("rack=r0"));
        let foreign: BTreeSet<String> = ["rack-r0".to_string(), hashed.clone()].into();
        let (want, problems) = desired(&levels, &nodes, &foreign);
        let names: Vec<&str> = want.keys().map(String::as_str).collect();
        assert_eq!(names, ["rack-r1", "spine-s0"]);
        assert_eq!(members(&want["spine-s0"]), ["rack-r1"]);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].contains("rack=r0") && problems[0].contains(&hashed),
            "{}",
            problems[0]
        );
    }

    #[test]
    fn owned_takes_both_labels() {
        let levels = vec![vec!["rack".to_string()]];
        let nodes = [node("n0", &[("rack", "a")])];
        let nodes = node_labels(&nodes);
        // Someone else's HyperNode with only the generic managed-by label, named as the
        // domain, and another no label implies.
        let generic = [(MANAGED_BY, MANAGER)];
        let other_source = [(MANAGED_BY, MANAGER), (SOURCE_LABEL, "ufm")];
        let existing = [
            hand_made("rack-a", &generic),
            hand_made("spine-x", &generic),
            hand_made("leaf-y", &other_source),
        ];
        assert!(existing.iter().all(|h| !owned(h)));
        let changes = reconcile(&levels, &nodes, &existing);
        assert!(changes.update.is_empty(), "{:?}", changes.update);
        assert!(changes.delete.is_empty(), "{:?}", changes.delete);
        let created = names(&changes.create);
        assert_eq!(created.len(), 1);
        assert!(created[0].starts_with("rack-a-t1-"), "{created:?}");
        assert!(owned(&changes.create[0]));
    }

    #[test]
    fn names_are_dns_subdomains_and_unique() {
        assert_eq!(
            readable_name("nvidia.com/gpu.clique", "ABC_1:x"),
            "gpu.clique-abc-1-x"
        );
        let levels = vec![vec!["a/rack".to_string()], vec!["b/rack".to_string()]];
        let nodes = [node("n0", &[("a/rack", "r"), ("b/rack", "r")])];
        let (want, _) = desired(&levels, &node_labels(&nodes), &BTreeSet::new());
        assert_eq!(want.len(), 2);
        assert!(want.contains_key("rack-r"));
    }
}
