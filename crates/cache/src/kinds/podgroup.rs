//! Volcano PodGroups, by id (`namespace/name`). A PodGroup deleted makes its pods wait for it.

use super::Indexed;
use crate::convert::GroupInfo;
use crate::error::Result;
use crate::index::ClusterIndex;
use caldera_api::PodGroup;

impl Indexed for PodGroup {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        super::namespaced(&self.metadata)
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let g = GroupInfo::try_from(self)?;
        index.podgroups.insert(g.id.clone(), g);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index
            .podgroups
            .remove(format!("{namespace}/{name}").as_str());
    }

    fn clear(index: &mut ClusterIndex) {
        index.podgroups.clear();
    }
}
