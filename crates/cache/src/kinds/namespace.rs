//! Namespaces: their labels (for terms that select namespaces by label) and whether they opt
//! out of consolidation.

use super::Indexed;
use crate::error::Result;
use crate::index::{ClusterIndex, NAMESPACE_NAME_LABEL};
use caldera_model::{LabelSelector, PlacementSpec, Task};
use k8s_openapi::api::core::v1::Namespace;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Kept with `kubernetes.io/metadata.name`, which kube-apiserver always sets.
impl Indexed for Namespace {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let Some(name) = self.metadata.name.as_deref() else {
            return Ok(());
        };
        let mut labels = self.metadata.labels.clone().unwrap_or_default();
        labels.insert(NAMESPACE_NAME_LABEL.into(), name.to_string());
        index.namespaces.insert(Arc::from(name), labels);
        if crate::consolidation::opted_out(self.metadata.annotations.as_ref()) {
            index.no_consolidate_namespaces.insert(Arc::from(name));
        }
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.namespaces.remove(name);
        index.no_consolidate_namespaces.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.namespaces.clear();
        index.no_consolidate_namespaces.clear();
    }
}

impl ClusterIndex {
    /// The namespaces whose labels match `selector`: those of the Namespaces known, and the
    /// namespace of any pod whose Namespace has not been seen (it exists, since the pod does,
    /// with at least its `kubernetes.io/metadata.name` label).
    pub(crate) fn namespaces_matching(&self, selector: &LabelSelector) -> Vec<String> {
        let mut out: Vec<String> = self
            .namespaces
            .iter()
            .filter(|(_, labels)| selector.matches(labels))
            .map(|(n, _)| n.to_string())
            .collect();
        let mut last: Option<&str> = None;
        for (ns, _) in self.pods.keys() {
            if last == Some(&**ns) || self.namespaces.contains_key(ns) {
                continue;
            }
            last = Some(ns);
            let labels = BTreeMap::from([(NAMESPACE_NAME_LABEL.to_string(), ns.to_string())]);
            if selector.matches(&labels) {
                out.push(ns.to_string());
            }
        }
        out
    }

    /// Resolves the namespace selectors of the tasks' terms against the current Namespaces
    /// (specs shared by several tasks are resolved once and stay shared).
    pub(crate) fn resolve_namespaces(&self, tasks: &mut [Task]) {
        let mut memo: HashMap<*const PlacementSpec, Arc<PlacementSpec>> = HashMap::new();
        let mut matched: HashMap<LabelSelector, Vec<String>> = HashMap::new();
        let mut matching = |s: &LabelSelector| {
            matched
                .entry(s.clone())
                .or_insert_with(|| self.namespaces_matching(s))
                .clone()
        };
        for t in tasks.iter_mut() {
            if !t.spec.pods.selects_namespaces() {
                continue;
            }
            let spec = memo
                .entry(Arc::as_ptr(&t.spec))
                .or_insert_with(|| {
                    let mut spec = (*t.spec).clone();
                    if let Some(pods) = spec.pods.resolve_namespaces(&mut matching) {
                        spec.pods = pods;
                    }
                    Arc::new(spec)
                })
                .clone();
            t.spec = spec;
        }
    }
}
