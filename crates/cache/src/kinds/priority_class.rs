//! PriorityClasses by name, and the global default they add up to.

use super::Indexed;
use crate::error::Result;
use crate::index::ClusterIndex;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use std::sync::Arc;

impl Indexed for PriorityClass {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let info = crate::convert::priority_class(self)?;
        index.priority_classes.insert(info.name.clone(), info);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.priority_classes.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.priority_classes.clear();
    }

    /// Kubernetes allows one global default; should several exist anyway, the highest value
    /// wins, so the answer does not depend on arrival order.
    fn changed(index: &mut ClusterIndex) {
        index.global_default_priority = index
            .priority_classes
            .values()
            .filter(|pc| pc.global_default)
            .map(|pc| pc.value)
            .max();
    }
}

impl ClusterIndex {
    /// A priority: the explicit value, else the named class's, else the global default, else 0.
    pub(crate) fn priority(&self, explicit: Option<i32>, class: Option<&Arc<str>>) -> i32 {
        explicit
            .or_else(|| {
                class
                    .and_then(|c| self.priority_classes.get(c))
                    .map(|pc| pc.value)
            })
            .or(self.global_default_priority)
            .unwrap_or(0)
    }
}
