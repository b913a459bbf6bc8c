//! HyperNodes (`topology.volcano.sh/v1alpha1`) in `caldera run`: whether the API server serves
//! them (Volcano's CRD, also shipped by `caldera crd`), and the watch that keeps them in the
//! index. Without the CRD there are no HyperNodes: gangs with a hard `networkTopology` wait
//! with a message saying so, and soft ones place as without topology.

use crate::optional::OptionalWatch;
use caldera_api::HyperNode;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use kube::Client;
use tracing::warn;

const GROUP_VERSION: &str = "topology.volcano.sh/v1alpha1";
const PLURAL: &str = "hypernodes";

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
    value["apiVersion"] = GROUP_VERSION.into();
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
pub(crate) fn optional(
    client: Client,
) -> (&'static str, &'static str, OptionalWatch<DynamicObject>) {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("topology.volcano.sh", "v1alpha1", "HyperNode"),
        PLURAL,
    );
    let w = OptionalWatch {
        what: "HyperNode".into(),
        api: Api::all_with(client, &resource),
        config: watcher::Config::default(),
        reset: Box::new(|cluster, objects| {
            let hypernodes: Vec<HyperNode> = objects.into_iter().filter_map(decode).collect();
            for e in cluster.index.reset_hypernodes(&hypernodes) {
                warn!(error = %e, "HyperNode left out of the topology");
            }
            cluster.hypernodes_synced = true;
        }),
        apply: Box::new(|cluster, obj| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            match decode(obj) {
                Some(h) => {
                    if let Err(e) = cluster.index.apply_hypernode(&h) {
                        warn!(error = %e, "HyperNode left out of the topology");
                    }
                }
                None => cluster.index.delete_hypernode(&name),
            }
        }),
        delete: Box::new(|cluster, obj| {
            let name = obj.metadata.name.clone().unwrap_or_default();
            cluster.index.delete_hypernode(&name);
        }),
    };
    (GROUP_VERSION, PLURAL, w)
}
