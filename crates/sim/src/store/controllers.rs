//! The controllers the simulator plays over its store (kube-controller-manager's PV,
//! StatefulSet, Job, ReplicaSet, Deployment, resource-claim and disruption controllers, the
//! garbage collector; JobSet's and LeaderWorkerSet's), each a call into [`caldera_actors`]
//! whose writes land at once.

use super::*;

impl Store {
    /// The PV controller: one sync over every claim and volume at `now`, its writes stored at
    /// once ([`pv_controller::sync`]). Run after every write to a claim, a volume or a class.
    pub fn pv_controller(&mut self, now: Time) {
        self.sync_volume_index();
        if self.claims.is_empty() && self.volumes.is_empty() {
            return;
        }
        let claims: Vec<PersistentVolumeClaim> = self.claims.values().cloned().collect();
        let volumes: Vec<PersistentVolume> = self.volumes.values().cloned().collect();
        let classes: Vec<StorageClass> = self.storage_classes.values().cloned().collect();
        let writes = pv_controller::sync(&claims, &volumes, &classes, now);
        if writes.is_empty() {
            return;
        }
        for w in writes {
            match w {
                pv_controller::Write::Claim(c) => {
                    let key = (ns_of(&c.metadata), name_of(&c.metadata));
                    self.claims.insert(key, c);
                }
                pv_controller::Write::Volume(v) => {
                    self.volumes.insert(name_of(&v.metadata), v);
                }
            }
        }
        self.generation += 1;
        self.sync_volume_index();
    }

    /// Feeds the storage objects to the index (the scheduler's view of them). Objects that do
    /// not convert were refused at load (`manifest::validate`); the PV controller's writes
    /// keep them convertible.
    pub(super) fn sync_volume_index(&mut self) {
        let _ = self.index.reset(self.claims.values());
        let _ = self.index.reset(self.volumes.values());
        let _ = self.index.reset(self.storage_classes.values());
        self.index.reset(self.csinodes.values());
    }

    /// Stores a storage object (StorageClass, CSINode, PersistentVolume or claim) or a DRA
    /// object (DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate) exactly as
    /// given, status included, without admission and without running the PV controller: a
    /// live cluster's object as read back (its own controller has run). An object of another
    /// kind is given back, untouched.
    pub fn insert_read(&mut self, object: Object) -> Option<Object> {
        let storage = matches!(
            object,
            Object::StorageClass(_)
                | Object::CSINode(_)
                | Object::PersistentVolume(_)
                | Object::PersistentVolumeClaim(_)
        );
        // What the index refuses stays out of the scheduler's view, as it would live.
        let _ = match object {
            Object::DeviceClass(o) => self.put(o),
            Object::ResourceSlice(o) => self.put(o),
            Object::ResourceClaim(o) => self.put(o),
            Object::ResourceClaimTemplate(o) => self.put(o),
            Object::StorageClass(o) => self.put(o),
            Object::CSINode(o) => self.put(o),
            Object::PersistentVolume(o) => self.put(o),
            Object::PersistentVolumeClaim(o) => self.put(o),
            other => return Some(other),
        };
        if storage {
            self.sync_volume_index();
        }
        None
    }

    /// Stores a StatefulSet (create or replace) and runs its controller at once. Returns what
    /// the controller created; a pod or claim the scheduler's conversion rejects is an error
    /// (what was created before it stays).
    pub fn add_statefulset(
        &mut self,
        set: StatefulSet,
        now: Time,
    ) -> Result<statefulset::Created, caldera_cache::Error> {
        let (key, _) = self.upsert(set, now)?;
        self.generation += 1;
        self.sync_statefulset(&key, now)
    }

    pub(super) fn sync_statefulset(
        &mut self,
        key: &Key,
        now: Time,
    ) -> Result<statefulset::Created, caldera_cache::Error> {
        let Some(set) = self.statefulsets.get(key) else {
            return Ok(statefulset::Created::default());
        };
        let ns = key.0.clone();
        let created = statefulset::sync(
            set,
            &|name| self.pods.get(&(ns.clone(), name.to_string())),
            &|name| self.claims.contains_key(&(ns.clone(), name.to_string())),
        );
        for claim in &created.claims {
            self.apply(Object::PersistentVolumeClaim(claim.clone()), now)?;
        }
        for pod in &created.pods {
            self.apply(Object::Pod(pod.clone()), now)?;
        }
        Ok(created)
    }

    /// The workload controllers: every StatefulSet's controller syncs (an `OrderedReady` set
    /// makes its next pod once the one before is Running and Ready). Returns the pods created
    /// (`namespace/name`); pods the conversion rejects are skipped (they were accepted when the
    /// set was added, from the same template).
    pub fn controllers(&mut self, now: Time) -> Vec<String> {
        let sets: Vec<Key> = self.statefulsets.keys().cloned().collect();
        let mut made = Vec::new();
        let jobs: Vec<Key> = self.jobs.keys().cloned().collect();
        self.sync_each(jobs, &mut made, |s, key| s.sync_job(key, now));
        let workloads: Vec<(Kind, String, String)> = self.workloads.keys().cloned().collect();
        self.sync_each(workloads, &mut made, |s, key| s.sync_workload(key, now));
        let deployments: Vec<Key> = self.deployments.keys().cloned().collect();
        self.sync_each(deployments, &mut made, |s, key| s.sync_deployment(key, now));
        let replicasets: Vec<Key> = self.replicasets.keys().cloned().collect();
        self.sync_each(replicasets, &mut made, |s, key| s.sync_replicaset(key, now));
        self.sync_each(sets, &mut made, |s, key| {
            let created = s.sync_statefulset(key, now)?;
            let named = |p: &Pod| format!("{}/{}", key.0, name_of(&p.metadata));
            Ok(created.pods.iter().map(named).collect())
        });
        // The resource-claim controller: after the pods are made, before the session.
        self.sync_resource_claims(now);
        made
    }

    /// One sync per key, in order, the pods each creates (`namespace/name`) added to `made`; a
    /// sync that stopped on a pod or claim the conversion rejects adds none.
    fn sync_each<K>(
        &mut self,
        keys: Vec<K>,
        made: &mut Vec<String>,
        mut sync: impl FnMut(&mut Self, &K) -> Result<Vec<String>, caldera_cache::Error>,
    ) {
        for key in keys {
            if let Ok(created) = sync(self, &key) {
                made.extend(created);
            }
        }
    }

    /// Stores a JobSet or LeaderWorkerSet (create or replace; status is its controller's) and
    /// runs its controller at once.
    pub(super) fn apply_workload(
        &mut self,
        kind: Kind,
        mut o: Workload,
        now: Time,
    ) -> Result<Applied, caldera_cache::Error> {
        let key = (kind, ns_of(&o.metadata), name_of(&o.metadata));
        match self.workloads.get(&key) {
            Some(old) => Self::keep_meta(&mut o.metadata, &old.metadata),
            None => self.fresh_meta(&mut o.metadata, true, now),
        }
        let _ = self.index.apply(&o);
        let applied = replace(&mut self.workloads, key.clone(), o);
        self.sync_workload(&key, now)?;
        Ok(applied)
    }

    /// One sync of a JobSet's controller (its missing Jobs, whose pods the Job controller then
    /// makes) or a LeaderWorkerSet's (its missing pods). Returns the pods created
    /// (`namespace/name`).
    pub(super) fn sync_workload(
        &mut self,
        key: &(Kind, String, String),
        now: Time,
    ) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(w) = self.workloads.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.1.clone();
        let mut made = Vec::new();
        match key.0 {
            Kind::JobSet => {
                let jobs = caldera_actors::jobset::missing_jobs(w, &|name| {
                    self.jobs.contains_key(&(ns.clone(), name.to_string()))
                });
                for job in jobs {
                    let before: BTreeSet<Key> = self.pods.keys().cloned().collect();
                    self.apply(Object::Job(job), now)?;
                    made.extend(
                        self.pods
                            .keys()
                            .filter(|k| !before.contains(*k))
                            .map(|(n, p)| format!("{n}/{p}")),
                    );
                }
            }
            Kind::LeaderWorkerSet => {
                let pods = caldera_actors::lws::missing_pods(w, &|name| {
                    self.pods.contains_key(&(ns.clone(), name.to_string()))
                });
                for pod in pods {
                    made.push(format!("{ns}/{}", name_of(&pod.metadata)));
                    self.apply(Object::Pod(pod), now)?;
                }
            }
            _ => {}
        }
        Ok(made)
    }

    /// The group the pod counts in: its own, or the PodGroup derived from its Job
    /// ([`caldera_cache::derive::member_group`]).
    pub fn group_of(&self, pod: &Pod) -> Option<String> {
        let ns = ns_of(&pod.metadata);
        let native = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.clone())
            .filter(|n| !n.is_empty());
        if native.is_some() {
            return native;
        }
        caldera_cache::derive::member_group(&pod.metadata, |name| {
            let pg = self.podgroups.get(&(ns.clone(), name.to_string()))?;
            caldera_cache::workload::Owner::of(&pg.metadata).map(|o| o.uid.to_string())
        })
    }

    /// One sync of the Job controller for the Job `key`: creates its missing pods, deletes
    /// the active pods of a Job that has failed, writes its status. Returns the pods created
    /// (`namespace/name`).
    pub(super) fn sync_job(
        &mut self,
        key: &Key,
        now: Time,
    ) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(job) = self.jobs.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.0.clone();
        let pods: Vec<&Pod> = in_namespace(&self.pods, &ns);
        let out = caldera_actors::job::sync(job, &pods, &|name| {
            self.pods.contains_key(&(ns.clone(), name.to_string()))
        });
        let mut made = Vec::new();
        for pod in out.create {
            made.push(format!("{ns}/{}", name_of(&pod.metadata)));
            self.apply(Object::Pod(pod), now)?;
        }
        for name in &out.delete {
            self.delete_gracefully(&ns, name, now);
        }
        if let Some(job) = self.jobs.get_mut(key) {
            if job.status.as_ref() != Some(&out.status) {
                job.status = Some(out.status);
                let _ = self.index.apply(job);
                self.generation += 1;
            }
        }
        Ok(made)
    }

    /// kube-controller-manager's resource-claim controller
    /// ([`caldera_actors::resourceclaim`]): the claims of pods' template entries (owned by the
    /// pod, named in its `status.resourceClaimStatuses`), users that are gone or finished
    /// removed from `reservedFor`, a claim that lost its last user deallocated (allocation and
    /// delete-protection finalizer gone), and the claims of pods that are done or gone deleted
    /// (the garbage collector's part). Returns whether anything changed.
    pub(super) fn sync_resource_claims(&mut self, now: Time) -> bool {
        if self.resource_claims.is_empty() && self.claim_templates.is_empty() {
            return false;
        }
        let out = {
            let pods: Vec<&Pod> = self.pods.values().collect();
            let claims: Vec<&ResourceClaim> = self.resource_claims.values().collect();
            let templates: Vec<&ResourceClaimTemplate> = self.claim_templates.values().collect();
            caldera_actors::resourceclaim::sync(&pods, &claims, &templates, &|ns, name| {
                self.resource_claims
                    .contains_key(&(ns.to_string(), name.to_string()))
            })
        };
        let changed = !out.is_empty();
        for claim in out.create {
            // Made from a template the conversion accepted; a refusal leaves the pod waiting.
            let _ = self.apply(Object::ResourceClaim(claim), now);
        }
        for p in out.pods {
            let key = (p.namespace, p.name);
            if let Some(mut pod) = self.pods.get(&key).cloned() {
                pod.status
                    .get_or_insert_with(Default::default)
                    .resource_claim_statuses = Some(p.resource_claim_statuses);
                self.put_pod(pod);
            }
        }
        for u in out.claims {
            let key = (u.namespace, u.name);
            if u.delete {
                self.index.delete::<ResourceClaim>((&key.0, &key.1));
                self.resource_claims.remove(&key);
                self.generation += 1;
                continue;
            }
            if let Some(mut claim) = self.resource_claims.get(&key).cloned() {
                if let Some(status) = u.status {
                    claim.status = Some(status);
                }
                if let Some(finalizers) = u.finalizers {
                    claim.metadata.finalizers = (!finalizers.is_empty()).then_some(finalizers);
                }
                let _ = self.put_resource_claim(claim);
            }
        }
        changed
    }

    /// One sync of the ReplicaSet controller for `key`: adopts and releases pods, creates the
    /// missing ones, deletes the surplus, writes its status. Returns the pods created
    /// (`namespace/name`).
    pub(super) fn sync_replicaset(
        &mut self,
        key: &Key,
        now: Time,
    ) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(rs) = self.replicasets.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.0.clone();
        let pods: Vec<&Pod> = in_namespace(&self.pods, &ns);
        let out = caldera_actors::replicaset::sync(rs, &pods, now, &|name| {
            self.pods.contains_key(&(ns.clone(), name.to_string()))
        });
        let owner = caldera_actors::replicaset::controller_ref(rs);
        for name in &out.adopt {
            let pkey = (ns.clone(), name.clone());
            if let Some(mut pod) = self.pods.get(&pkey).cloned() {
                pod.metadata
                    .owner_references
                    .get_or_insert_with(Vec::new)
                    .push(owner.clone());
                self.put_pod(pod);
            }
        }
        for name in &out.release {
            let pkey = (ns.clone(), name.clone());
            if let Some(mut pod) = self.pods.get(&pkey).cloned() {
                if let Some(refs) = pod.metadata.owner_references.as_mut() {
                    refs.retain(|o| o.uid != owner.uid);
                }
                self.put_pod(pod);
            }
        }
        let mut made = Vec::new();
        for pod in out.create {
            made.push(format!("{ns}/{}", name_of(&pod.metadata)));
            self.apply(Object::Pod(pod), now)?;
        }
        for name in &out.delete {
            self.delete_gracefully(&ns, name, now);
        }
        if let Some(rs) = self.replicasets.get_mut(key) {
            if rs.status.as_ref() != Some(&out.status) {
                rs.status = Some(out.status);
                self.generation += 1;
            }
        }
        if !(out.adopt.is_empty() && out.release.is_empty() && out.delete.is_empty()) {
            self.refresh_budgets(now);
        }
        Ok(made)
    }

    /// One sync of the Deployment controller for `key`: creates the ReplicaSet of its template,
    /// scales its ReplicaSets, writes its status. Returns the pods created (`namespace/name`).
    pub(super) fn sync_deployment(
        &mut self,
        key: &Key,
        now: Time,
    ) -> Result<Vec<String>, caldera_cache::Error> {
        let Some(deploy) = self.deployments.get(key) else {
            return Ok(Vec::new());
        };
        let ns = key.0.clone();
        let sets: Vec<&ReplicaSet> = in_namespace(&self.replicasets, &ns);
        let pods: Vec<&Pod> = in_namespace(&self.pods, &ns);
        let out = caldera_actors::replicaset::sync_deployment(deploy, &sets, &pods);
        let mut made = Vec::new();
        for (name, replicas) in &out.scale {
            let rkey = (ns.clone(), name.clone());
            if let Some(rs) = self.replicasets.get_mut(&rkey) {
                rs.spec.get_or_insert_with(Default::default).replicas = Some(*replicas);
                self.generation += 1;
                made.extend(self.sync_replicaset(&rkey, now)?);
            }
        }
        if let Some(rs) = out.create {
            let before: BTreeSet<Key> = self.pods.keys().cloned().collect();
            self.apply(Object::ReplicaSet(rs), now)?;
            made.extend(
                self.pods
                    .keys()
                    .filter(|k| !before.contains(*k))
                    .map(|(n, p)| format!("{n}/{p}")),
            );
        }
        if let Some(d) = self.deployments.get_mut(key) {
            if d.status.as_ref() != Some(&out.status) {
                d.status = Some(out.status);
                self.generation += 1;
            }
        }
        Ok(made)
    }

    /// Deletes a pod as a controller's or the garbage collector's DELETE does: a bound,
    /// unfinished pod terminates for its grace period; any other goes at once.
    pub(super) fn delete_gracefully(&mut self, namespace: &str, name: &str, now: Time) {
        let key = (namespace.to_string(), name.to_string());
        let Some(pod) = self.pods.get(&key).cloned() else {
            return;
        };
        self.delete_pod_object(key, pod, now);
    }

    /// Deletes the stored pod `key` (given as `pod`, possibly changed) as kube-apiserver's
    /// DELETE does: at once, or terminating for its grace period when bound and unfinished.
    pub(super) fn delete_pod_object(&mut self, key: Key, mut pod: Pod, now: Time) {
        match kubelet::deletion(&pod, None, now) {
            Deletion::Now => {
                self.index.delete::<Pod>((&key.0, &key.1));
                self.pods.remove(&key);
                self.generation += 1;
            }
            Deletion::Graceful {
                until,
                grace_seconds,
            } => {
                kubelet::mark_terminating(&mut pod, until, grace_seconds);
                self.put_pod(pod);
            }
            Deletion::Unchanged => self.put_pod(pod),
        }
    }

    /// The garbage collector's part for pods: those owned by `uid` are deleted gracefully.
    pub(super) fn delete_owned_pods(&mut self, uid: &str, now: Time) {
        let owned: Vec<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| {
                p.metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|o| o.uid == uid)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in owned {
            self.delete_gracefully(&ns, &name, now);
        }
        self.refresh_budgets(now);
    }

    /// Writes the PodGroups Caldera derives from workloads (`ClusterIndex::derived_podgroups`)
    /// as the runtime does: creates the missing ones, sets the derived fields of the others,
    /// deletes those no longer derived. Returns them (`namespace/name`).
    pub fn create_derived_podgroups(&mut self, opts: &SnapshotOptions, now: Time) -> Vec<String> {
        let mut made = Vec::new();
        for write in self.index.derived_podgroups(opts) {
            let key = (
                ns_of(&write.podgroup().metadata),
                name_of(&write.podgroup().metadata),
            );
            made.push(format!("{}/{}", key.0, key.1));
            // An update is a merge patch of the derived fields, as the runtime sends it: the
            // rest of the object stays.
            let pg = match (&write, self.podgroups.get(&key)) {
                (DerivedWrite::Delete(pg), Some(old)) => {
                    // With the uid as precondition, as the runtime deletes it.
                    if pg.metadata.uid.is_none() || pg.metadata.uid == old.metadata.uid {
                        self.delete(Kind::PodGroup, Some(&key.0), &key.1, now);
                    }
                    continue;
                }
                (DerivedWrite::Delete(_), None) => continue,
                (DerivedWrite::Update { .. }, Some(old)) => write.applied_to(old),
                _ => write.podgroup().clone(),
            };
            // Derived from a Job that converted, so the PodGroup converts too.
            let _ = self.apply(Object::PodGroup(pg), now);
        }
        made
    }

    /// The disruption controller: recomputes every budget's status at `now`. Scenarios have
    /// no workload controllers, so a pod's controller is never found (percentages and
    /// `maxUnavailable` then count only pods without one, as the real controller does).
    pub fn refresh_budgets(&mut self, now: Time) {
        if self.budgets.is_empty() {
            return;
        }
        let pods: Vec<&Pod> = self.pods.values().collect();
        let (replicasets, deployments) = (&self.replicasets, &self.deployments);
        let mut changed = false;
        for pdb in self.budgets.values_mut() {
            let status = disruption::refresh(pdb, &pods, now, &|owner, ns| {
                caldera_actors::replicaset::scale_of(
                    owner,
                    &|n| replicasets.get(&(ns.to_string(), n.to_string())).cloned(),
                    &|n| deployments.get(&(ns.to_string(), n.to_string())).cloned(),
                )
            });
            if let Some(status) = status {
                pdb.status = Some(status);
                let _ = self.index.apply(pdb);
                changed = true;
            }
        }
        if changed {
            self.generation += 1;
        }
    }

    /// The garbage collector: objects owned by the deleted object `uid` go too (requests,
    /// PodTemplates, claims).
    pub(super) fn collect_garbage(&mut self, uid: &str) {
        self.collect_garbage_of(&BTreeSet::from([uid.to_string()]));
    }

    /// [`Store::collect_garbage`] for several owners at once, in one pass over each kind.
    pub(super) fn collect_garbage_of(&mut self, uids: &BTreeSet<String>) {
        if uids.is_empty() {
            return;
        }
        let owned = |meta: &ObjectMeta| {
            meta.owner_references
                .iter()
                .flatten()
                .any(|o| uids.contains(&o.uid))
        };
        let requests: Vec<Key> = self
            .requests
            .iter()
            .filter(|(_, pr)| owned(&pr.metadata))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in requests {
            self.delete_capacity(&ns, &name);
        }
        let podgroups: Vec<Key> = self
            .podgroups
            .iter()
            .filter(|(_, pg)| owned(&pg.metadata))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in podgroups {
            self.index.delete::<PodGroup>((&ns, &name));
            self.podgroups.remove(&(ns, name));
            self.generation += 1;
        }
        self.pod_templates.retain(|_, t| !owned(&t.metadata));
        let before = self.claims.len();
        self.claims.retain(|_, c| !owned(&c.metadata));
        if self.claims.len() != before {
            self.generation += 1;
        }
    }
}
