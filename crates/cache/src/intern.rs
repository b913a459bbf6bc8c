//! Interning of placement specs, so that identical members share one `Arc<PlacementSpec>`.

use caldera_model::PlacementSpec;
use std::collections::HashSet;
use std::sync::Arc;

/// Hands out one shared `Arc` per distinct [`PlacementSpec`].
///
/// Entries nobody else holds are swept when the table has doubled since the last sweep, so the
/// table stays proportional to the live specs at amortised O(1) cost per insert.
#[derive(Debug, Default)]
pub(crate) struct SpecInterner {
    table: HashSet<Arc<PlacementSpec>>,
    sweep_at: usize,
}

impl SpecInterner {
    /// The shared copy of `spec`.
    pub(crate) fn intern(&mut self, spec: Arc<PlacementSpec>) -> Arc<PlacementSpec> {
        if let Some(shared) = self.table.get(&spec) {
            return shared.clone();
        }
        if self.table.len() >= self.sweep_at.max(64) {
            self.table.retain(|k| Arc::strong_count(k) > 1);
            self.sweep_at = self.table.len() * 2;
        }
        self.table.insert(spec.clone());
        spec
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_specs_share_one_arc_and_dead_ones_are_swept() {
        let mut interner = SpecInterner::default();
        let a = interner.intern(Arc::new(PlacementSpec::default()));
        let b = interner.intern(Arc::new(PlacementSpec::default()));
        assert!(Arc::ptr_eq(&a, &b));
        let mut keep = Vec::new();
        for i in 0..200 {
            let mut spec = PlacementSpec::default();
            spec.node_selector.insert("n".into(), i.to_string());
            let shared = interner.intern(Arc::new(spec));
            if i % 10 == 0 {
                keep.push(shared);
            }
        }
        assert!(interner.len() < 200, "unreferenced specs are swept");
        for spec in &keep {
            assert!(Arc::ptr_eq(
                spec,
                &interner.intern(Arc::new((**spec).clone()))
            ));
        }
    }
}
