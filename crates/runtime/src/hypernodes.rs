//! HyperNodes (`topology.volcano.sh/v1alpha1`) in `caldera run`: whether the API server serves
//! them (Volcano's CRD, also shipped by `caldera crd`), and the watch that keeps them in the
//! index. Without the CRD there are no HyperNodes: gangs with a hard `networkTopology` wait
//! with a message saying so, and soft ones place as without topology.

use crate::watch::{changed, gone, KindWatch};
use caldera_api::calls;
use caldera_api::HyperNode;
use kube::api::DynamicObject;
use kube::runtime::watcher;
use kube::Client;
use tracing::warn;

/// Decodes one HyperNode, or says why it cannot be used (logged; the object is left out).
fn decode(obj: DynamicObject) -> Option<HyperNode> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let mut value = match serde_json::to_value(&obj) {
        Ok(v) => v,
        Err(e) => {
            warn!(hypernode = %name, error = %e, "cannot encode HyperNode; left out of the topology");
            return None;
        }
    };
    value["apiVersion"] = calls::HYPERNODES.resource.api_version().into();
    value["kind"] = "HyperNode".into();
    match serde_json::from_value(value) {
        Ok(h) => Some(h),
        Err(e) => {
            warn!(hypernode = %name, error = %e, "cannot decode HyperNode; left out of the topology");
            None
        }
    }
}

/// The HyperNode watch ([`crate::optional`]): marks them synced after the first list, so
/// sessions place topology-constrained gangs only once the tree is known. A malformed HyperNode
/// is left out of the tree with a warning; it cannot stop the watch.
pub(crate) fn optional(client: Client) -> KindWatch<DynamicObject> {
    KindWatch {
        watch: &calls::HYPERNODES,
        api: crate::watch::dynamic(client, &calls::HYPERNODES),
        config: watcher::Config::default(),
        reset: Box::new(|cluster, objects| {
            let hypernodes: Vec<HyperNode> = objects.into_iter().filter_map(decode).collect();
            for e in cluster.index.reset(&hypernodes) {
                warn!(error = %e, "HyperNode left out of the topology");
            }
        }),
        apply: changed(|cluster, obj: DynamicObject| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            match decode(obj) {
                Some(h) => {
                    if let Err(e) = cluster.index.apply(&h) {
                        warn!(error = %e, "HyperNode left out of the topology");
                    }
                }
                None => cluster.index.delete::<HyperNode>(&name),
            }
        }),
        delete: gone(|cluster, obj: DynamicObject| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            cluster.index.delete::<HyperNode>(&name);
        }),
    }
}
