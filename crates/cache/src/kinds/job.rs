//! `batch/v1` Jobs, the workloads gangs are derived from (docs/workloads.md). Once Jobs are
//! watched (any Job applied, or a reset), pods of a Job wait for it; before, they are
//! scheduled one by one.

use super::Indexed;
use crate::error::Result;
use crate::index::{key_of, ClusterIndex};
use k8s_openapi::api::batch::v1::Job;

impl Indexed for Job {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        super::namespaced(&self.metadata)
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        if let Some((namespace, name)) = self.key() {
            index.jobs.insert(key_of(namespace, name), self.clone());
        }
        index.jobs_watched = true;
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index.jobs.remove(&key_of(namespace, name));
    }

    /// From now on gangs are derived from Jobs.
    fn clear(index: &mut ClusterIndex) {
        index.jobs.clear();
        index.jobs_watched = true;
    }
}

impl ClusterIndex {
    /// The Job `namespace/name`, if known.
    pub fn job(&self, namespace: &str, name: &str) -> Option<&Job> {
        self.jobs.get(&key_of(namespace, name))
    }
}
