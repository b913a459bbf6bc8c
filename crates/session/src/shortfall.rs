//! Why a gang waits, said once: how many of the members it needs fit and on which nodes, what
//! the gang needs of a resource that is short in total, and kube-scheduler's own summary for
//! the member that found no node.
//!
//! One attempt at a gang places members one at a time until one finds no node; what it got
//! that far is a [`Shortfall`], and [`Shortfall::message`] is the one function that says it.
//! The PodGroup's condition, its event and the members' `PodScheduled` condition all carry
//! that message (after the `k/n members in gang unschedulable:` prefix `close` adds), e.g.
//!
//! `6 of 8 members fit: node-a 6, node-b 0; the gang needs 8 nvidia.com/gpu, 6 are free;
//! 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.`
//!
//! The `0/N nodes are available: …` fragment is kube-scheduler's, for the first member that
//! found no node once the others were placed; cluster-autoscaler users and tools match on it.

use caldera_model::resources::format_value;
use caldera_model::Resources;
use std::fmt::Write as _;
use std::sync::Arc;

/// At most this many nodes are named one by one; the rest are counted.
pub const NAMED_NODES: usize = 8;

/// How far one attempt at a gang got before a member found no node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shortfall {
    /// Members the attempt placed, per node: most first, ties by name.
    pub placed: Vec<(Arc<str>, u32)>,
    /// Nodes of the attempt's scope where it placed none, by name: the first
    /// [`NAMED_NODES`] of them (a message names no more; a shortfall is copied for every gang
    /// the failure cache answers, and a scope may have thousands of nodes).
    pub empty: Vec<Arc<str>>,
    /// How many nodes of the scope it placed none on.
    pub empty_count: usize,
    /// Free resources on the Ready nodes of the scope before the attempt.
    pub free: Resources,
    /// kube-scheduler's summary for the member that found no node.
    pub fit: String,
}

impl Shortfall {
    /// Members the attempt placed.
    pub fn fitted(&self) -> u32 {
        self.placed.iter().map(|(_, n)| n).sum()
    }

    /// The message for a gang that needs `need` more members, whose requests add up to `gang`.
    pub fn message(&self, need: u32, gang: &Resources) -> String {
        let mut m = format!("{} of {need} members fit", self.fitted());
        if !self.placed.is_empty() {
            let mut parts: Vec<String> = self
                .placed
                .iter()
                .take(NAMED_NODES)
                .map(|(node, n)| format!("{node} {n}"))
                .collect();
            let more = self.placed.len().saturating_sub(NAMED_NODES);
            if more > 0 {
                parts.push(format!("{more} other nodes {}", self.fitted_beyond_named()));
            }
            let room = NAMED_NODES.saturating_sub(parts.len());
            if self.empty_count <= room {
                parts.extend(self.empty.iter().map(|node| format!("{node} 0")));
            } else if self.empty_count > 0 {
                parts.push(format!("{} other nodes 0", self.empty_count));
            }
            let _ = write!(m, ": {}", parts.join(", "));
        }
        for (name, needed) in gang.iter() {
            let free = self.free.get(name);
            if needed > free {
                let free_text = format_value(name, free);
                let verb = if free_text == "1" { "is" } else { "are" };
                let _ = write!(
                    m,
                    "; the gang needs {} {name}, {free_text} {verb} free",
                    format_value(name, needed)
                );
            }
        }
        let _ = write!(m, "; {}", self.fit);
        m
    }

    fn fitted_beyond_named(&self) -> u32 {
        self.placed.iter().skip(NAMED_NODES).map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus(n: i64) -> Resources {
        Resources::from_pairs([("nvidia.com/gpu", n), ("cpu", n * 1000)])
    }

    #[test]
    fn seed_one_says_how_many_fit_and_where() {
        let s = Shortfall {
            placed: vec![("node-a".into(), 6)],
            empty: vec!["node-b".into()],
            empty_count: 1,
            free: Resources::from_pairs([("nvidia.com/gpu", 6), ("cpu", 100_000)]),
            fit: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.".into(),
        };
        assert_eq!(
            s.message(8, &gpus(8)),
            "6 of 8 members fit: node-a 6, node-b 0; the gang needs 8 nvidia.com/gpu, 6 are free; \
             0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
        );
    }

    #[test]
    fn none_fit_and_many_nodes_are_counted() {
        let none = Shortfall {
            placed: vec![],
            empty: vec!["a".into(), "b".into()],
            empty_count: 2,
            free: gpus(1),
            fit: "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.".into(),
        };
        assert_eq!(
            none.message(2, &gpus(2)),
            "0 of 2 members fit; the gang needs 2 cpu, 1 is free; the gang needs 2 nvidia.com/gpu, 1 is free; \
             0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
        );
        let many = Shortfall {
            placed: (0..10)
                .map(|i| (Arc::from(format!("n{i:02}")), 1))
                .collect(),
            empty: (10..18).map(|i| Arc::from(format!("n{i:02}"))).collect(),
            empty_count: 20,
            free: gpus(100),
            fit: "0/30 nodes are available: 30 node(s) didn't match pod anti-affinity rules."
                .into(),
        };
        let m = many.message(12, &gpus(12));
        assert!(
            m.starts_with("10 of 12 members fit: n00 1, n01 1, n02 1, n03 1, n04 1, n05 1, n06 1, n07 1, 2 other nodes 2, 20 other nodes 0; 0/30"),
            "{m}"
        );
    }
}
