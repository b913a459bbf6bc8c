//! Volcano HyperNodes: converted into the topology tree, and kept as given (discovery reads
//! their owner labels), even when they do not convert.

use super::Indexed;
use crate::convert::GroupInfo;
use crate::error::Result;
use crate::index::ClusterIndex;
use caldera_api::HyperNode;
use caldera_model::Node;
use std::collections::BTreeMap;
use std::sync::Arc;

impl Indexed for HyperNode {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        if let Some(name) = self.key() {
            // Kept even when it does not convert: discovery must still see what it owns.
            index.hypernode_objects.insert(name.into(), self.clone());
        }
        let info = crate::topology::HyperNodeInfo::try_from(self)?;
        index.hypernodes.insert(info.name.clone(), info);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.hypernodes.remove(name);
        index.hypernode_objects.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.hypernodes.clear();
        index.hypernode_objects.clear();
    }
}

impl ClusterIndex {
    /// Every HyperNode object, by name.
    pub fn hypernode_objects(&self) -> impl Iterator<Item = &caldera_api::HyperNode> {
        self.hypernode_objects.values()
    }

    /// Per HyperNode of the tree: how many nodes lie under it, at any depth (Volcano's
    /// `status.nodeCount`).
    pub fn hypernode_node_counts(&self) -> BTreeMap<Arc<str>, i64> {
        let nodes: Vec<Node> = self.nodes.values().cloned().collect();
        let tree = crate::topology::build_tree(&self.hypernodes, &nodes);
        tree.domains
            .iter()
            .map(|d| (d.name.clone(), d.nodes.len() as i64))
            .collect()
    }

    /// While the API server refuses HyperNodes, why a gang placed over them waits.
    pub(crate) fn hypernodes_refused(&self, g: &GroupInfo) -> Option<Arc<str>> {
        let m = self.refused(&caldera_api::calls::HYPERNODES)?;
        let over_hypernodes = |t: &Option<caldera_model::Topology>| {
            t.as_ref()
                .is_some_and(|t| t.source == caldera_model::TopologySource::HyperNodes)
        };
        (over_hypernodes(&g.topology)
            || g.sub_group_policies
                .iter()
                .any(|p| over_hypernodes(&p.topology)))
        .then(|| {
            format!("its networkTopology is placed over HyperNodes, which cannot be read: {m}")
                .into()
        })
    }
}
