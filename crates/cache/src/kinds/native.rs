//! Kubernetes' own gang API (`scheduling.k8s.io/v1alpha2`): native PodGroups by
//! `namespace/name` ([`crate::native`]), and native Workloads, read for the queue each names.

use super::Indexed;
use crate::error::Result;
use crate::index::{ClusterIndex, SnapshotOptions};
use caldera_model::Job;
use k8s_openapi::api::scheduling::v1alpha2::{PodGroup, Workload};

/// A native PodGroup deleted makes its pods wait for it.
impl Indexed for PodGroup {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        super::namespaced(&self.metadata)
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let info = crate::native::podgroup(self)?;
        index.native_podgroups.insert(info.group.id.clone(), info);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index
            .native_podgroups
            .remove(format!("{namespace}/{name}").as_str());
    }

    fn clear(index: &mut ClusterIndex) {
        index.native_podgroups.clear();
    }
}

impl Indexed for Workload {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        super::namespaced(&self.metadata)
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        if let Some((namespace, name)) = self.key() {
            index.native_workloads.insert(
                format!("{namespace}/{name}").into(),
                crate::native::workload_queue(self),
            );
        }
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index
            .native_workloads
            .remove(format!("{namespace}/{name}").as_str());
    }

    fn clear(index: &mut ClusterIndex) {
        index.native_workloads.clear();
    }
}

impl ClusterIndex {
    /// The job of a native PodGroup: its [`GroupInfo`]'s, with the queue resolved through its
    /// Workload and the priority from `spec.priority` or its class (else, later, its pods').
    pub(crate) fn native_job(&self, n: &crate::native::NativeInfo, opts: &SnapshotOptions) -> Job {
        let mut job = self.group_job(&n.group, opts);
        let workload_queue = || {
            let w = n.source.workload.as_deref()?;
            self.native_workloads
                .get(format!("{}/{w}", n.group.namespace).as_str())
                .cloned()
                .flatten()
        };
        if n.own_queue.is_none() {
            if let Some(q) = workload_queue() {
                job.queue = q;
            }
        }
        if let Some(p) = n.priority {
            job.priority = p;
        }
        job.native = Some(n.source.clone());
        job
    }
}
