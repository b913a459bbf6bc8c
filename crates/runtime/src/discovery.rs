//! HyperNode discovery from node labels in `caldera run` (config `networkTopologyDiscovery`,
//! `source: label`): a controller that creates, updates and deletes the HyperNodes Caldera
//! owns so they are exactly what the node labels imply ([`caldera_cache::discovery`]), and
//! never touches hand-made ones. It also writes every HyperNode's `status.nodeCount` (the
//! nodes under it, at any depth), as Volcano's HyperNode controller does. It reads nodes and HyperNodes from the watch-fed index, so
//! a round costs no API reads: once a second when anything in the cluster changed, and at
//! least every `interval`. Only the leader writes, through the binder
//! ([`Binder::write_objects`]: the rate limit, backoff and order of every other write). Its
//! own writes come back through the HyperNode watch, so the next round sees them and finds
//! nothing to do.

use crate::Shared;
use caldera_api::HyperNode;
use caldera_binder::{Binder, ObjectOp, ObjectWrite, Owned};
use caldera_cache::discovery::{reconcile, Changes};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How often a round may run when the cluster changes.
const POLL: Duration = Duration::from_secs(1);
/// How often a round runs when nothing changed and discovery is off (node counts only).
const RESYNC: Duration = Duration::from_secs(60);

/// Runs rounds until `stop`: node counts always, discovery while the config asks for it.
pub(crate) async fn run(shared: Arc<Shared>, binder: Binder, stop: CancellationToken) {
    let mut seen_changes = u64::MAX;
    let mut last_round: Option<Instant> = None;
    let mut told_unserved = false;
    let mut last_problems: Vec<String> = Vec::new();
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let active = shared.active();
        let discovery = active.config.network_topology_discovery.as_ref();
        // Read each round: the API may be found served only after a failed discovery request.
        let served = shared
            .lock_cluster()
            .is_served(&caldera_api::calls::HYPERNODES);
        if !served {
            if discovery.is_some() && !told_unserved {
                warn!("networkTopologyDiscovery is set, but the API server does not serve topology.volcano.sh/v1alpha1 hypernodes (apply the CRDs `caldera crd` prints); no HyperNodes are made");
                told_unserved = true;
            }
            continue;
        }
        if !*shared.leader.borrow() {
            continue;
        }
        let changes_now = shared.changes();
        let interval = discovery.map_or(RESYNC, |d| d.interval);
        let due = last_round.is_none_or(|t| t.elapsed() >= interval);
        if changes_now == seen_changes && !due {
            continue;
        }
        let (changes, counts) = {
            let cluster = shared.lock_cluster();
            if !cluster.all_synced() {
                continue;
            }
            let changes = discovery.map(|d| {
                let nodes = cluster.index.node_labels();
                let existing: Vec<HyperNode> = cluster.index.hypernode_objects().cloned().collect();
                reconcile(&d.label_levels, &nodes, &existing)
            });
            (changes, stale_node_counts(&cluster.index))
        };
        seen_changes = changes_now;
        last_round = Some(Instant::now());
        let mut writes = Vec::new();
        if let Some(changes) = changes {
            if changes.problems != last_problems {
                for p in &changes.problems {
                    warn!("HyperNode discovery: {p}");
                }
                last_problems = changes.problems.clone();
            }
            if !changes.is_empty() {
                writes.extend(discovered(changes));
            }
        }
        writes.extend(counts.into_iter().map(|(name, count)| ObjectWrite {
            kind: Owned::HyperNode,
            namespace: None,
            name: name.into(),
            op: ObjectOp::PatchStatus(serde_json::json!({"status": {"nodeCount": count}})),
        }));
        binder.write_objects(writes, crate::wall_clock());
    }
}

/// The HyperNodes whose `status.nodeCount` is not the number of nodes under them, with that
/// number (Volcano's HyperNode controller writes it for every HyperNode; so does Caldera's
/// leader).
fn stale_node_counts(index: &caldera_cache::ClusterIndex) -> Vec<(String, i64)> {
    let counts = index.hypernode_node_counts();
    index
        .hypernode_objects()
        .filter_map(|h| {
            let name = h.metadata.name.as_deref()?;
            let want = *counts.get(name)?;
            let have = h.status.as_ref().and_then(|s| s.node_count);
            (have != Some(want)).then(|| (name.to_string(), want))
        })
        .collect()
}

/// One round's changes as writes; a write that fails is retried by the binder's backoff, and
/// the next round asks again while the index still shows the old state.
fn discovered(changes: Changes) -> Vec<ObjectWrite> {
    let (created, updated, deleted) = (
        changes.create.len(),
        changes.update.len(),
        changes.delete.len(),
    );
    let hypernode = |name: String, op| ObjectWrite {
        kind: Owned::HyperNode,
        namespace: None,
        name: name.into(),
        op,
    };
    let mut writes = Vec::with_capacity(created + updated + deleted);
    for h in changes.create {
        let name = h.metadata.name.clone().unwrap_or_default();
        match serde_json::to_value(&h) {
            Ok(body) => writes.push(hypernode(name, ObjectOp::Create(body))),
            Err(e) => warn!(hypernode = %name, error = %e, "cannot encode a discovered HyperNode"),
        }
    }
    for h in changes.update {
        let name = h.metadata.name.clone().unwrap_or_default();
        // A merge patch of the labels Caldera sets and the whole spec (its member list is
        // replaced, as JSON merge patch replaces lists).
        let patch = serde_json::json!({
            "metadata": {"labels": h.metadata.labels},
            "spec": h.spec,
        });
        writes.push(hypernode(name, ObjectOp::Patch(patch)));
    }
    for name in changes.delete {
        writes.push(hypernode(name, ObjectOp::Delete { uid: None }));
    }
    info!(
        created,
        updated, deleted, "HyperNodes discovered from node labels: writes queued"
    );
    writes
}
