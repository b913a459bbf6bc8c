//! PodDisruptionBudgets by (namespace, name): their selector and `status.disruptionsAllowed`,
//! and the budget the eviction API judges a pod by.

use super::Indexed;
use crate::convert::{self, PodInfo};
use crate::error::Result;
use crate::index::{key_of, ClusterIndex, PodKey};
use caldera_model::Budget;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use std::sync::Arc;

impl Indexed for PodDisruptionBudget {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        super::namespaced(&self.metadata)
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let Some((namespace, name)) = self.key() else {
            return Ok(());
        };
        // A budget without a selector covers nothing.
        let Some(selector) = self.spec.as_ref().and_then(|s| s.selector.clone()) else {
            return Ok(());
        };
        let allowed = self
            .status
            .as_ref()
            .and_then(|s| s.disruptions_allowed)
            .unwrap_or(0)
            .max(0) as u32;
        index
            .budgets
            .insert(key_of(namespace, name), (selector, allowed));
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index.budgets.remove(&key_of(namespace, name));
    }

    fn clear(index: &mut ClusterIndex) {
        index.budgets.clear();
    }
}

impl ClusterIndex {
    /// The budget the eviction API will judge a running pod by: the one budget whose selector
    /// (not empty: the eviction API lets none match) matches its labels, or a budget allowing
    /// nothing when several do (the API refuses those evictions).
    pub(crate) fn budget_of(&self, p: &PodInfo, budgets: &mut Vec<Budget>) -> Option<u32> {
        if p.phase != convert::PodPhase::Running || p.terminating {
            return None;
        }
        let ns = p.namespace.clone();
        let range = (ns.clone(), Arc::from(""))..;
        let matching: Vec<(&PodKey, u32)> = self
            .budgets
            .range(range)
            .take_while(|(k, _)| k.0 == ns)
            .filter(|(_, (sel, _))| {
                !crate::labels::is_empty(sel) && crate::labels::matches(sel, Some(&p.labels))
            })
            .map(|(k, (_, allowed))| (k, *allowed))
            .collect();
        let (id, allowed): (Arc<str>, u32) = match matching.as_slice() {
            [] => return None,
            [(k, allowed)] => (format!("{}/{}", k.0, k.1).into(), *allowed),
            _ => (format!("{ns}/(several budgets)").into(), 0),
        };
        let index = match budgets.iter().position(|b| b.id == id) {
            Some(i) => i,
            None => {
                budgets.push(Budget { id, allowed });
                budgets.len() - 1
            }
        };
        Some(index as u32)
    }
}
