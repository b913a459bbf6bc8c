//! Volcano Queues, by name.

use super::Indexed;
use crate::error::Result;
use crate::index::ClusterIndex;
use caldera_api::Queue;

impl Indexed for Queue {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let q = crate::convert::queue(self)?;
        index.queues.insert(q.name.clone(), q);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.queues.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.queues.clear();
    }
}
