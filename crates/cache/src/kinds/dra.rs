//! Dynamic Resource Allocation (`resource.k8s.io/v1`): DeviceClasses, ResourceSlices,
//! ResourceClaims and ResourceClaimTemplates, converted by [`crate::dra`] into its
//! [`crate::dra::DraIndex`]. Each kind forgets an object's previous version under its key even
//! when the new one has no name, and keeps nothing of an object that does not convert (a
//! ResourceSlice's pool then counts a slice short, and is not used until a valid version
//! arrives; pods using a ResourceClaim wait, saying it is not found).

use super::{namespaced_or_empty, Indexed};
use crate::error::Result;
use crate::index::{key_of, ClusterIndex};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use std::sync::Arc;

impl Indexed for DeviceClass {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        Some(self.metadata.name.as_deref().unwrap_or_default())
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let class = crate::dra::device_class(self)?;
        index.dra.classes.insert(class.name.clone(), class);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.dra.classes.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.dra.classes.clear();
    }
}

impl Indexed for ResourceSlice {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        Some(self.metadata.name.as_deref().unwrap_or_default())
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let slice = crate::dra::slice(self)?;
        let name = self.metadata.name.as_deref().unwrap_or_default();
        index.dra.slices.insert(Arc::from(name), slice);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.dra.slices.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.dra.slices.clear();
    }
}

impl Indexed for ResourceClaim {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        Some(namespaced_or_empty(&self.metadata))
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let claim = crate::dra::claim(self)?;
        let (namespace, name) = namespaced_or_empty(&self.metadata);
        index.dra.claims.insert(key_of(namespace, name), claim);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index.dra.claims.remove(&key_of(namespace, name));
    }

    fn clear(index: &mut ClusterIndex) {
        index.dra.claims.clear();
    }
}

impl Indexed for ResourceClaimTemplate {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        super::namespaced(&self.metadata)
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let key = crate::dra::template(self)?;
        index.dra.templates.insert(key);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        index.dra.templates.remove(&key_of(namespace, name));
    }

    fn clear(index: &mut ClusterIndex) {
        index.dra.templates.clear();
    }
}

impl ClusterIndex {
    /// Why DRA's kinds cannot be read, while the API server refuses one of them.
    pub(crate) fn dra_refused(&self) -> Option<&Arc<str>> {
        use caldera_api::calls;
        [
            &calls::DEVICE_CLASSES,
            &calls::RESOURCE_SLICES,
            &calls::RESOURCE_CLAIMS,
            &calls::RESOURCE_CLAIM_TEMPLATES,
        ]
        .into_iter()
        .find_map(|w| self.refused(w))
    }
}
