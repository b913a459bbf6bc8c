//! The session's volume state: which volume each placed member's unbound claims take, which
//! `ReadWriteOncePod` claims are in use, and what is attached per node against CSI limits —
//! all updated by every placement and undo, so members placed earlier in a session count for
//! the ones after them and a rolled-back gang gives its volumes back.
//!
//! Choice follows kube-scheduler's volume binder: a claim annotated with a node goes only
//! there; a claim some volume is pre-bound to goes where that volume is reachable; otherwise
//! the smallest available volume of the claim's class that satisfies it and is reachable from
//! the node is taken, and failing that the class provisions one if the node is in its
//! `allowedTopologies`. A volume is never taken twice.

use caldera_model::volume::{BIND_CONFLICT, MAX_VOLUME_COUNT, RWOP_CONFLICT};
use caldera_model::{ClaimNeed, Node, Task, Volume, VolumeCatalog};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// How one unbound claim of a placed member is satisfied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Bind this volume (index in the catalog): pre-bind it to the claim.
    Static(usize),
    /// Provision: annotate the claim with the node.
    Provision,
    /// Already annotated with this node: nothing to write.
    Selected,
    /// A volume is already pre-bound to it: nothing to write.
    Prebound,
}

/// Per node with attach limits: counts by driver.
#[derive(Debug, Clone, Default, PartialEq)]
struct Attach {
    limits: BTreeMap<Arc<str>, u32>,
    /// Handles in use by driver, with how many pods use each.
    handles: BTreeMap<Arc<str>, BTreeMap<Arc<str>, u32>>,
    /// Volumes still to be provisioned, placed in this session, by driver.
    fresh: BTreeMap<Arc<str>, u32>,
}

impl Attach {
    fn used(&self, driver: &str) -> u32 {
        self.handles.get(driver).map_or(0, |h| h.len() as u32)
            + self.fresh.get(driver).copied().unwrap_or(0)
    }
}

/// The volume state of a session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Volumes {
    volumes: Vec<Volume>,
    /// Per volume: the nodes that reach it (sorted indices), `None` for every node.
    reach: Vec<Option<Vec<u32>>>,
    /// Per volume: the member that took it in this session.
    taken: Vec<Option<usize>>,
    by_class: HashMap<Arc<str>, Vec<usize>>,
    by_name: HashMap<Arc<str>, usize>,
    rwop: HashMap<Arc<str>, u32>,
    attach: Vec<Option<Attach>>,
    chosen: HashMap<usize, (u32, Vec<Choice>)>,
    node_count: u32,
    /// Gate mode: kube-scheduler binds the volumes.
    pub left_to_kube_scheduler: bool,
}

impl Volumes {
    /// Builds the state from the snapshot's catalog over `nodes`.
    pub fn new(catalog: VolumeCatalog, nodes: &[Node]) -> Self {
        let reach = catalog
            .volumes
            .iter()
            .map(|v| {
                v.terms.as_ref().map(|_| {
                    (0..nodes.len() as u32)
                        .filter(|&i| {
                            let n = &nodes[i as usize];
                            v.reachable(&n.name, &n.labels)
                        })
                        .collect()
                })
            })
            .collect();
        let mut by_class: HashMap<Arc<str>, Vec<usize>> = HashMap::new();
        let mut by_name = HashMap::new();
        for (i, v) in catalog.volumes.iter().enumerate() {
            by_class.entry(v.class.clone()).or_default().push(i);
            by_name.insert(v.name.clone(), i);
        }
        for list in by_class.values_mut() {
            let vs = &catalog.volumes;
            list.sort_by(|&a, &b| (vs[a].size, &vs[a].name).cmp(&(vs[b].size, &vs[b].name)));
        }
        let mut rwop = HashMap::new();
        for c in catalog.rwop_in_use {
            *rwop.entry(c).or_insert(0) += 1;
        }
        let mut attach = vec![None; nodes.len()];
        for (name, a) in catalog.attach {
            if let Ok(i) = nodes.binary_search_by(|n| n.name.cmp(&name)) {
                let mut handles: BTreeMap<Arc<str>, BTreeMap<Arc<str>, u32>> = BTreeMap::new();
                for (driver, hs) in a.attached {
                    let e = handles.entry(driver).or_default();
                    for h in hs {
                        *e.entry(h).or_insert(0) += 1;
                    }
                }
                attach[i] = Some(Attach {
                    limits: a.limits,
                    handles,
                    fresh: BTreeMap::new(),
                });
            }
        }
        Volumes {
            taken: vec![None; catalog.volumes.len()],
            volumes: catalog.volumes,
            reach,
            by_class,
            by_name,
            rwop,
            attach,
            chosen: HashMap::new(),
            node_count: nodes.len() as u32,
            left_to_kube_scheduler: catalog.left_to_kube_scheduler,
        }
    }

    /// The catalog's volume `i`.
    pub fn volume(&self, i: usize) -> &Volume {
        &self.volumes[i]
    }

    fn reachable(&self, v: usize, node: u32) -> bool {
        self.reach[v]
            .as_ref()
            .is_none_or(|r| r.binary_search(&node).is_ok())
    }

    /// How `claims` would be satisfied on node `node`, or `None`.
    fn choose(&self, claims: &[ClaimNeed], node: u32, nodes: &[Node]) -> Option<Vec<Choice>> {
        let n = &nodes[node as usize];
        let mut out = Vec::with_capacity(claims.len());
        for c in claims {
            if let Some(sel) = &c.selected {
                if **sel != *n.name {
                    return None;
                }
                out.push(Choice::Selected);
                continue;
            }
            if let Some(pv) = &c.prebound {
                let v = *self.by_name.get(pv)?;
                if !self.reachable(v, node) {
                    return None;
                }
                out.push(Choice::Prebound);
                continue;
            }
            let found = self.by_class.get(&c.class).and_then(|list| {
                list.iter().copied().find(|&v| {
                    self.taken[v].is_none()
                        && self.volumes[v].claim_ref.is_none()
                        && !out.contains(&Choice::Static(v))
                        && self.volumes[v].satisfies(c)
                        && self.reachable(v, node)
                })
            });
            match (found, &c.provision) {
                (Some(v), _) => out.push(Choice::Static(v)),
                (None, Some(allowed)) => {
                    let ok = allowed
                        .as_ref()
                        .is_none_or(|terms| terms.iter().any(|t| t.matches(&n.name, &n.labels)));
                    if !ok {
                        return None;
                    }
                    out.push(Choice::Provision);
                }
                (None, None) => return None,
            }
        }
        Some(out)
    }

    /// Whether `task`'s claims can be satisfied on node `node` given what this session has
    /// placed so far: `binding` checks the claims (volume binding and `ReadWriteOncePod`),
    /// `limits` the CSI attach limits.
    pub fn check(
        &self,
        task: &Task,
        node: u32,
        nodes: &[Node],
        binding: bool,
        limits: bool,
    ) -> Result<(), String> {
        let needs = &task.spec.volumes;
        if binding
            && needs
                .rwop
                .iter()
                .any(|c| self.rwop.get(c).is_some_and(|&n| n > 0))
        {
            return Err(RWOP_CONFLICT.into());
        }
        if binding && !needs.claims.is_empty() && self.choose(&needs.claims, node, nodes).is_none()
        {
            return Err(BIND_CONFLICT.into());
        }
        if limits {
            if let Some(a) = self.attach.get(node as usize).and_then(Option::as_ref) {
                let mut new: BTreeMap<&str, u32> = BTreeMap::new();
                for (driver, handle) in &needs.attach {
                    let attached = handle.as_ref().is_some_and(|h| {
                        a.handles.get(driver).is_some_and(|hs| hs.contains_key(h))
                    });
                    if !attached {
                        *new.entry(driver).or_insert(0) += 1;
                    }
                }
                for (driver, count) in new {
                    if let Some(&limit) = a.limits.get(driver) {
                        if a.used(driver) + count > limit {
                            return Err(MAX_VOLUME_COUNT.into());
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Records `task` (index `ti`) placed on `node`: its claims take their volumes. Returns the
    /// nodes whose fit for others may have changed.
    pub fn place(&mut self, ti: usize, task: &Task, node: u32, nodes: &[Node]) -> Vec<u32> {
        let needs = &task.spec.volumes;
        if !needs.dynamic() {
            return Vec::new();
        }
        let mut touched = Vec::new();
        let choices = self.choose(&needs.claims, node, nodes).unwrap_or_default();
        for c in &choices {
            if let Choice::Static(v) = *c {
                self.taken[v] = Some(ti);
                match &self.reach[v] {
                    Some(r) => touched.extend(r.iter().copied()),
                    None => touched.extend(0..self.node_count),
                }
            }
        }
        if !needs.rwop.is_empty() {
            for c in &needs.rwop {
                *self.rwop.entry(c.clone()).or_insert(0) += 1;
            }
            touched.extend(0..self.node_count);
        }
        if let Some(a) = self.attach.get_mut(node as usize).and_then(Option::as_mut) {
            for (driver, handle) in &needs.attach {
                match handle {
                    Some(h) => {
                        *a.handles
                            .entry(driver.clone())
                            .or_default()
                            .entry(h.clone())
                            .or_insert(0) += 1
                    }
                    None => *a.fresh.entry(driver.clone()).or_insert(0) += 1,
                }
            }
        }
        self.chosen.insert(ti, (node, choices));
        touched
    }

    /// Undoes [`Volumes::place`] of task `ti`. Returns the nodes whose fit may have changed.
    pub fn unplace(&mut self, ti: usize, task: &Task) -> Vec<u32> {
        let Some((node, choices)) = self.chosen.remove(&ti) else {
            return Vec::new();
        };
        let needs = &task.spec.volumes;
        let mut touched = Vec::new();
        for c in choices {
            if let Choice::Static(v) = c {
                self.taken[v] = None;
                match &self.reach[v] {
                    Some(r) => touched.extend(r.iter().copied()),
                    None => touched.extend(0..self.node_count),
                }
            }
        }
        if !needs.rwop.is_empty() {
            for c in &needs.rwop {
                if let Some(n) = self.rwop.get_mut(c) {
                    *n = n.saturating_sub(1);
                }
            }
            touched.extend(0..self.node_count);
        }
        if let Some(a) = self.attach.get_mut(node as usize).and_then(Option::as_mut) {
            for (driver, handle) in &needs.attach {
                match handle {
                    Some(h) => {
                        if let Some(hs) = a.handles.get_mut(driver) {
                            if let Some(n) = hs.get_mut(h) {
                                *n -= 1;
                                if *n == 0 {
                                    hs.remove(h);
                                }
                            }
                        }
                    }
                    None => {
                        if let Some(n) = a.fresh.get_mut(driver) {
                            *n = n.saturating_sub(1);
                        }
                    }
                }
            }
        }
        touched
    }

    /// The choices made for placed task `ti`, one per claim in `spec.volumes.claims`.
    pub fn chosen(&self, ti: usize) -> Option<&[Choice]> {
        self.chosen.get(&ti).map(|(_, c)| c.as_slice())
    }
}
