//! The volume rules of a plan, checked against the snapshot it was made from.

use crate::volume::*;

/// Re-checks a plan's binds and volume writes against the snapshot it was made from, for the
/// volume rules, independently of the session: a bound pod's claims are all bound, its bound
/// volumes reach the node, it has no blocking claim, its `ReadWriteOncePod` claims are not in
/// use (nor used by another bind of the plan), the node's CSI attach limits hold; a volume is
/// pre-bound at most once, only if available, satisfying the claim and reachable from the
/// member's node; a claim is annotated only with a node in its class's `allowedTopologies`;
/// and no job both binds and waits for volumes in one plan (a gang binds together). Returns
/// what is broken.
pub fn check_plan(snapshot: &crate::Snapshot, plan: &crate::Plan) -> Vec<String> {
    use std::collections::{BTreeSet, HashMap};
    let mut out = Vec::new();
    let task_of = |ns: &str, name: &str| {
        snapshot
            .tasks
            .iter()
            .find(|t| &*t.namespace == ns && &*t.name == name)
    };
    let catalog = &snapshot.volumes;
    let mut rwop: BTreeSet<&str> = catalog.rwop_in_use.iter().map(|c| &**c).collect();
    let mut attached: HashMap<(&str, &str), BTreeSet<String>> = HashMap::new();
    let mut bound_jobs: BTreeSet<usize> = BTreeSet::new();
    for b in &plan.binds {
        let Some(t) = task_of(&b.pod.namespace, &b.pod.name) else {
            continue;
        };
        bound_jobs.insert(t.job);
        let pod = t.key();
        let needs = &t.spec.volumes;
        let Some(node) = snapshot.node_index(&b.node).map(|i| &snapshot.nodes[i]) else {
            continue;
        };
        if !t.volumes_bound() && !catalog.left_to_kube_scheduler {
            out.push(format!(
                "{pod} bound to {} before its claims are bound",
                b.node
            ));
        }
        if let Some(why) = &needs.blocked {
            out.push(format!("{pod} bound although {why}"));
        }
        if needs.every_node.is_some() {
            out.push(format!(
                "{pod} bound although a claim's volume does not exist"
            ));
        }
        for terms in &needs.bound_terms {
            if !terms.iter().any(|t| t.matches(&node.name, &node.labels)) {
                out.push(format!(
                    "{pod} bound to {} outside its volume's node affinity",
                    b.node
                ));
            }
        }
        for c in &needs.rwop {
            if !rwop.insert(c) {
                out.push(format!(
                    "{pod} bound while ReadWriteOncePod claim {c} is in use"
                ));
            }
        }
        if let Some(a) = catalog.attach.get(&node.name) {
            for (driver, handle) in &needs.attach {
                let set = attached.entry((&*node.name, &**driver)).or_insert_with(|| {
                    a.attached
                        .get(driver)
                        .into_iter()
                        .flatten()
                        .map(|h| h.to_string())
                        .collect()
                });
                let h = handle
                    .as_ref()
                    .map(|h| h.to_string())
                    .unwrap_or_else(|| format!("new:{pod}:{}", set.len()));
                set.insert(h);
                if let Some(&limit) = a.limits.get(driver) {
                    if set.len() as u32 > limit {
                        out.push(format!(
                            "{pod} on {} exceeds the {driver} attach limit {limit}",
                            b.node
                        ));
                    }
                }
            }
        }
    }
    let nominated: HashMap<(&str, &str), &str> = plan
        .nominations
        .iter()
        .filter_map(|n| Some(((&*n.pod.namespace, &*n.pod.name), n.node.as_deref()?)))
        .collect();
    let mut prebound: BTreeSet<&str> = BTreeSet::new();
    for w in &plan.volume_writes {
        let (ns, claim) = match w {
            VolumeWrite::SelectNode {
                namespace, claim, ..
            }
            | VolumeWrite::PreBind {
                namespace, claim, ..
            } => (namespace, claim),
            VolumeWrite::Unselect { .. } => continue,
        };
        // The member mounting the claim, and where it was placed.
        let member = snapshot.tasks.iter().find(|t| {
            *t.namespace == **ns
                && t.volumes
                    .as_ref()
                    .is_some_and(|v| v.claims.iter().any(|(c, _)| c == claim))
        });
        let Some(t) = member else {
            out.push(format!(
                "write for {ns}/{claim}, which no pending member mounts"
            ));
            continue;
        };
        if bound_jobs.contains(&t.job) {
            out.push(format!("job of {} binds while {ns}/{claim} waits", t.key()));
        }
        let i = t
            .volumes
            .as_ref()
            .and_then(|v| v.claims.iter().position(|(c, _)| c == claim))
            .unwrap_or(0);
        let Some(need) = t.spec.volumes.claims.get(i) else {
            continue;
        };
        let node = nominated
            .get(&(&*t.namespace, &*t.name))
            .copied()
            .or(t.nominated.as_deref())
            .and_then(|n| snapshot.node_index(n))
            .map(|i| &snapshot.nodes[i]);
        let Some(node) = node else {
            out.push(format!(
                "{} waits for {ns}/{claim} without a node held",
                t.key()
            ));
            continue;
        };
        match w {
            VolumeWrite::SelectNode { node: n, .. } => {
                if **n != *node.name {
                    out.push(format!(
                        "{ns}/{claim} selected {n}, its member holds {}",
                        node.name
                    ));
                }
                let allowed = need.provision.as_ref().is_some_and(|a| {
                    a.as_ref().is_none_or(|terms| {
                        terms.iter().any(|t| t.matches(&node.name, &node.labels))
                    })
                });
                if !allowed {
                    out.push(format!(
                        "{ns}/{claim} provisioned where its class cannot ({n})"
                    ));
                }
            }
            VolumeWrite::PreBind { volume, .. } => {
                if !prebound.insert(volume) {
                    out.push(format!("volume {volume} pre-bound twice"));
                }
                match catalog.volumes.iter().find(|v| v.name == *volume) {
                    None => out.push(format!("volume {volume} is not available")),
                    Some(v) => {
                        if v.claim_ref.is_some() {
                            out.push(format!("volume {volume} already refers to a claim"));
                        }
                        if !v.satisfies(need) {
                            out.push(format!("volume {volume} does not satisfy {ns}/{claim}"));
                        }
                        if !v.reachable(&node.name, &node.labels) {
                            out.push(format!(
                                "volume {volume} is not reachable from {}",
                                node.name
                            ));
                        }
                    }
                }
            }
            VolumeWrite::Unselect { .. } => {}
        }
    }
    out
}
