//! Nodes. A node deleted keeps its pods' usage under its name until they go, so a node that
//! comes back is not seen empty.

use super::Indexed;
use crate::error::Result;
use crate::index::{ClusterIndex, Usage};
use k8s_openapi::api::core::v1::Node;

impl Indexed for Node {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let mut n = crate::convert::node(self)?;
        Usage::mirror(index.usage.get(&n.name), &mut n);
        index.nodes.insert(n.name.clone(), n);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.nodes.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.nodes.clear();
    }
}

impl ClusterIndex {
    /// Every node's name and labels, by name (what HyperNode discovery reads).
    pub fn node_labels(&self) -> Vec<crate::discovery::NodeLabels<'_>> {
        self.nodes
            .values()
            .map(|n| (&*n.name, &*n.labels))
            .collect()
    }
}
