//! Pods: converted, with what they hold on their node (usage, host ports), their labels for
//! inter-pod terms, their job's members and their claims kept up to date as they come and go.

use super::Indexed;
use crate::convert::PodInfo;
use crate::error::Result;
use crate::index::{key_of, ClusterIndex, PodKey, Usage};
use k8s_openapi::api::core::v1::Pod;

impl Indexed for Pod {
    type Key<'a> = (&'a str, &'a str);

    fn key(&self) -> Option<(&str, &str)> {
        super::namespaced(&self.metadata)
    }

    /// The API server validates the fields that can fail, so an error is rare outside
    /// hand-written manifests.
    fn insert(&self, index: &mut ClusterIndex) -> Result<()> {
        let mut info = PodInfo::try_from(self)?;
        info.spec = index.specs.intern(info.spec);
        let key: PodKey = (info.namespace.clone(), info.name.clone());
        if info.counts_on_node() {
            for (k, v) in info.labels.iter() {
                index
                    .by_label
                    .entry(k.clone())
                    .or_default()
                    .entry(v.clone())
                    .or_default()
                    .insert(key.clone());
            }
            if !info.spec.pods.anti_affinity.is_empty() {
                index.anti.insert(key.clone());
            }
            let c = &info.spec.pods;
            if !c.preferred_affinity.is_empty()
                || !c.preferred_anti_affinity.is_empty()
                || !c.affinity.is_empty()
            {
                index.scoring.insert(key.clone());
            }
            if let Some(node) = &info.node {
                let u = index.usage.entry(node.clone()).or_default();
                u.used.add(&info.request);
                u.pods += 1;
                // Kept sorted, so a node's ports do not depend on the order pods arrived in.
                for p in &info.spec.host_ports {
                    let i = u.host_ports.partition_point(|q| q <= p);
                    u.host_ports.insert(i, p.clone());
                }
                if let Some(n) = index.nodes.get_mut(node) {
                    Usage::mirror(Some(u), n);
                }
            }
        }
        let info = std::sync::Arc::new(info);
        index
            .members
            .entry(info.scheduler_name.clone())
            .or_default()
            .entry(info.job_id.clone())
            .or_default()
            .insert(key.clone(), info.clone());
        if info.group.is_some() {
            *index.group_refs.entry(info.job_id.clone()).or_default() += 1;
        }
        if info.held.is_some() {
            index.held.insert(key.clone());
        }
        if let (Some(node), true) = (&info.node, info.counts_on_node() && !info.claims.is_empty()) {
            index
                .volumes
                .users
                .insert(key.clone(), (node.clone(), info.claims.clone()));
        }
        index.pods.insert(key, info);
        Ok(())
    }

    fn remove(index: &mut ClusterIndex, (namespace, name): (&str, &str)) {
        let key = key_of(namespace, name);
        let Some(old) = index.pods.remove(&key) else {
            return;
        };
        index.held.remove(&key);
        index.volumes.users.remove(&key);
        if old.counts_on_node() {
            for (k, v) in old.labels.iter() {
                if let Some(values) = index.by_label.get_mut(k) {
                    if let Some(set) = values.get_mut(v) {
                        set.remove(&key);
                        if set.is_empty() {
                            values.remove(v);
                        }
                    }
                    if values.is_empty() {
                        index.by_label.remove(k);
                    }
                }
            }
            index.anti.remove(&key);
            index.scoring.remove(&key);
            if let Some(node) = &old.node {
                if let Some(u) = index.usage.get_mut(node) {
                    u.used.sub(&old.request);
                    u.pods -= 1;
                    for p in &old.spec.host_ports {
                        if let Ok(i) = u.host_ports.binary_search(p) {
                            u.host_ports.remove(i);
                        }
                    }
                    if u.pods <= 0 {
                        index.usage.remove(node);
                    }
                    if let Some(n) = index.nodes.get_mut(node) {
                        Usage::mirror(index.usage.get(node), n);
                    }
                }
            }
        }
        if let Some(jobs) = index.members.get_mut(&old.scheduler_name) {
            if let Some(set) = jobs.get_mut(&old.job_id) {
                set.remove(&key);
                if set.is_empty() {
                    jobs.remove(&old.job_id);
                }
            }
            if jobs.is_empty() {
                index.members.remove(&old.scheduler_name);
            }
        }
        if old.group.is_some() {
            if let Some(n) = index.group_refs.get_mut(&old.job_id) {
                *n -= 1;
                if *n == 0 {
                    index.group_refs.remove(&old.job_id);
                }
            }
        }
    }

    fn clear(index: &mut ClusterIndex) {
        index.pods.clear();
        index.usage.clear();
        for n in index.nodes.values_mut() {
            Usage::mirror(None, n);
        }
        index.by_label.clear();
        index.anti.clear();
        index.scoring.clear();
        index.members.clear();
        index.group_refs.clear();
        index.held.clear();
        index.volumes.users.clear();
    }
}

impl ClusterIndex {
    /// The converted pod `namespace/name`, if known.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&PodInfo> {
        self.pods.get(&key_of(namespace, name)).map(|p| &**p)
    }

    /// Number of pods known.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }
}
