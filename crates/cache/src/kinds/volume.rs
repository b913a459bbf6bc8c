//! Volume binding's kinds: PersistentVolumeClaims, PersistentVolumes, StorageClasses and
//! CSINodes (their drivers' attach limits), converted by [`crate::volumes`] into its
//! `VolumeIndex`; and the volume writes assumed done until the watches show them.

use super::{namespaced_or_empty, Indexed};
use crate::error::Result;
use crate::index::{key_of, ClusterIndex};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use std::sync::Arc;

impl Indexed for PersistentVolumeClaim {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        Some(namespaced_or_empty(&self.metadata))
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let c = crate::volumes::claim(self)?;
        let (namespace, name) = namespaced_or_empty(&self.metadata);
        index.volumes.claims.insert(key_of(namespace, name), c);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        let key = key_of(namespace, name);
        index.volumes.claims.remove(&key);
        index.volumes.watched_claims.remove(&key);
    }

    fn clear(index: &mut ClusterIndex) {
        index.volumes.claims.clear();
        index.volumes.watched_claims.clear();
    }
}

impl Indexed for PersistentVolume {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let v = crate::volumes::volume(self)?;
        index.volumes.volumes.insert(v.volume.name.clone(), v);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.volumes.volumes.remove(name);
        index.volumes.watched_volumes.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.volumes.volumes.clear();
        index.volumes.watched_volumes.clear();
    }
}

impl Indexed for StorageClass {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        Some(self.metadata.name.as_deref().unwrap_or_default())
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let c = crate::volumes::class(self)?;
        let name = self.metadata.name.as_deref().unwrap_or_default();
        index.volumes.classes.insert(Arc::from(name), c);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.volumes.classes.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.volumes.classes.clear();
    }
}

impl Indexed for CSINode {
    type Key<'a> = &'a str;

    fn key(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        if let Some(name) = self.key() {
            let limits = crate::volumes::csinode_limits(self);
            index.volumes.csinodes.insert(Arc::from(name), limits);
        }
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, name: &str) {
        index.volumes.csinodes.remove(name);
    }

    fn clear(index: &mut ClusterIndex) {
        index.volumes.csinodes.clear();
    }
}

impl ClusterIndex {
    /// Records a volume write the binder is about to send as if the watch had shown it, so the
    /// next session does not choose again before the claim or volume comes back (as
    /// kube-scheduler's assume cache does). The watched object replaces it when it arrives.
    pub fn assume_volume_write(
        &mut self,
        w: &caldera_model::VolumeWrite,
        now: caldera_model::Time,
    ) {
        use caldera_model::VolumeWrite;
        match w {
            VolumeWrite::SelectNode {
                namespace,
                claim,
                node,
            } => {
                if let Some(c) = self.volumes.assumed_claim(namespace, claim) {
                    c.selected_node = Some(node.clone());
                    c.selected_at = Some(now);
                }
            }
            VolumeWrite::Unselect { namespace, claim } => {
                if let Some(c) = self.volumes.assumed_claim(namespace, claim) {
                    c.selected_node = None;
                    c.selected_at = None;
                }
            }
            VolumeWrite::PreBind {
                volume,
                namespace,
                claim,
                uid,
            } => {
                if let Some(v) = self.volumes.assumed_volume(volume) {
                    v.claim_ref = Some((namespace.clone(), claim.clone(), uid.clone()));
                    v.volume.claim_ref = Some(format!("{namespace}/{claim}").into());
                    v.selected_at = Some(now);
                }
            }
        }
    }

    /// A volume write the binder gave up on (refused, failed every attempt, or cancelled by a
    /// lost leadership): the claim or volume is as last watched again, so the next session
    /// decides afresh instead of waiting for a write that never landed. Nothing changes if the
    /// watch has delivered the object since.
    pub fn volume_write_failed(&mut self, w: &caldera_model::VolumeWrite) {
        self.volumes.write_failed(w);
    }
}
