//! Workloads of the kinds in [`crate::derive`] (JobSet, LeaderWorkerSet, ...), keyed by kind,
//! namespace and name. A kind counts as watched once one of its workloads is applied or it
//! is reset ([`ClusterIndex::reset_workloads`], per kind: each kind has its own watch).

use super::Indexed;
use crate::derive::{Workload, WorkloadKind};
use crate::error::Result;
use crate::index::ClusterIndex;
use std::sync::Arc;

/// Workloads of other kinds are ignored.
impl Indexed for Workload {
    type Key<'a> = (WorkloadKind, &'a str, &'a str);

    fn key(&self) -> Option<(WorkloadKind, &str, &str)> {
        let (namespace, name) = super::namespaced(&self.metadata)?;
        Some((self.workload_kind()?, namespace, name))
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let Some(kind) = self.workload_kind() else {
            return Ok(());
        };
        // StatefulSets and Deployments are many and grouped only when they ask: the others
        // are not kept (their pods are scheduled as before).
        if let Some((_, namespace, name)) = self.key() {
            if !kind.opt_in() || crate::derive::opted_in(self) {
                let key = (kind, Arc::from(namespace), Arc::from(name));
                index.workloads.insert(key, self.clone());
            }
        }
        index.workload_kinds.insert(kind);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (kind, namespace, name): (WorkloadKind, &str, &str)) {
        index
            .workloads
            .remove(&(kind, Arc::from(namespace), Arc::from(name)));
    }

    /// Every kind's workloads (the watches reset one kind at a time: `reset_workloads`).
    fn clear(index: &mut ClusterIndex) {
        index.workloads.clear();
    }
}

impl ClusterIndex {
    /// Replaces every workload of `kind`; from now on the kind is watched.
    pub fn reset_workloads<'a>(
        &mut self,
        kind: WorkloadKind,
        workloads: impl IntoIterator<Item = &'a Workload>,
    ) {
        self.workloads.retain(|(k, _, _), _| *k != kind);
        for w in workloads {
            if w.workload_kind() == Some(kind) {
                let _ = self.apply(w);
            }
        }
        self.workload_kinds.insert(kind);
    }

    /// Stops watching `kind` (its API went away): its workloads are forgotten and its pods
    /// are scheduled as before.
    pub fn unwatch_workloads(&mut self, kind: WorkloadKind) {
        self.workloads.retain(|(k, _, _), _| *k != kind);
        self.workload_kinds.remove(&kind);
    }

    /// The workload `namespace/name` of `kind`, if known.
    pub fn workload(&self, kind: WorkloadKind, namespace: &str, name: &str) -> Option<&Workload> {
        self.workloads
            .get(&(kind, Arc::from(namespace), Arc::from(name)))
    }
}
