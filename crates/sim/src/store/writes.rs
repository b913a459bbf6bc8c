//! The writes of a plan other than to pods (volume binder writes, autoscaler requests,
//! PodGroup, Queue and HyperNode status), as the binder sends them.

use super::*;

impl Store {
    /// Sets (or, with `None`, removes) an annotation on the claim `namespace/name`, as a merge
    /// patch of a scheduler would (e.g. `volume.kubernetes.io/selected-node`); the PV
    /// controller then runs. Returns whether the claim exists (with `uid` when given).
    pub fn annotate_claim(
        &mut self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        annotation: &str,
        value: Option<&str>,
        now: Time,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(claim) = self.claims.get_mut(&key) else {
            return false;
        };
        if uid.is_some_and(|u| claim.metadata.uid.as_deref() != Some(u)) {
            return false;
        }
        let before = claim.metadata.annotations.clone();
        let annotations = claim
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match value {
            Some(v) => {
                annotations.insert(annotation.to_string(), v.to_string());
            }
            None => {
                annotations.remove(annotation);
            }
        }
        if annotations.is_empty() {
            claim.metadata.annotations = None;
        }
        if claim.metadata.annotations != before {
            self.generation += 1;
            self.pv_controller(now);
        }
        true
    }

    /// Pre-binds the volume `name` to a claim by `spec.claimRef`, as kube-scheduler's volume
    /// binder does for a chosen static volume; the PV controller then binds the pair. Refused
    /// (false) when the volume is missing or already refers to another claim.
    pub fn prebind_volume(&mut self, name: &str, claim_ref: ObjectReference, now: Time) -> bool {
        let Some(volume) = self.volumes.get_mut(name) else {
            return false;
        };
        let spec = volume.spec.get_or_insert_with(Default::default);
        match &spec.claim_ref {
            Some(r) if r.name == claim_ref.name && r.namespace == claim_ref.namespace => {}
            Some(_) => return false,
            None => {
                spec.claim_ref = Some(claim_ref);
                self.generation += 1;
                self.pv_controller(now);
            }
        }
        true
    }

    /// Carries out a volume binder write of a plan, as the binder's merge patch would: a
    /// claim's `selected-node` (with Caldera's time of the choice) set or removed, or a
    /// volume pre-bound to a claim (`claimRef` with the claim's uid,
    /// `pv.kubernetes.io/bound-by-controller`, Caldera's time). A write to an object that is
    /// gone does nothing (the API server would answer 404).
    pub fn write_volume(&mut self, w: &caldera_model::VolumeWrite, now: Time) {
        use caldera_model::volume::{SELECTED_AT, SELECTED_NODE};
        use caldera_model::VolumeWrite;
        let at = now.to_rfc3339();
        match w {
            VolumeWrite::SelectNode {
                namespace,
                claim,
                node,
            } => {
                self.annotate_claim(namespace, claim, None, SELECTED_AT, Some(&at), now);
                self.annotate_claim(namespace, claim, None, SELECTED_NODE, Some(node), now);
            }
            VolumeWrite::Unselect { namespace, claim } => {
                self.annotate_claim(namespace, claim, None, SELECTED_NODE, None, now);
                self.annotate_claim(namespace, claim, None, SELECTED_AT, None, now);
            }
            VolumeWrite::PreBind {
                volume,
                namespace,
                claim,
                uid,
            } => {
                if let Some(v) = self.volumes.get_mut(&**volume) {
                    let a = v.metadata.annotations.get_or_insert_with(Default::default);
                    a.insert("pv.kubernetes.io/bound-by-controller".into(), "yes".into());
                    a.insert(SELECTED_AT.into(), at);
                }
                let claim_ref = ObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("PersistentVolumeClaim".into()),
                    namespace: Some(namespace.to_string()),
                    name: Some(claim.to_string()),
                    uid: Some(uid.to_string()).filter(|u| !u.is_empty() && !u.contains('/')),
                    ..ObjectReference::default()
                };
                self.prebind_volume(volume, claim_ref, now);
            }
        }
    }

    /// PodTemplates, by namespace then name.
    pub fn pod_templates(&self) -> impl Iterator<Item = &PodTemplate> {
        self.pod_templates.values()
    }

    /// How many requests were ever created for the PodGroup `namespace/name`.
    pub fn requests_created(&self, podgroup: &str) -> usize {
        self.requests_created.get(podgroup).copied().unwrap_or(0)
    }

    /// Creates the PodTemplates and the request of `need`, and annotates its members, as the
    /// binder does. A request that exists already is left as it is (the API server's 409).
    pub fn create_capacity(&mut self, need: &CapacityNeed, now: Time) {
        let key = (need.namespace.to_string(), need.name.to_string());
        if self.requests.contains_key(&key) {
            return;
        }
        let (mut pr, templates) = caldera_cache::provisioning::build(need);
        for mut t in templates {
            self.fresh_meta(&mut t.metadata, true, now);
            let tkey = (ns_of(&t.metadata), name_of(&t.metadata));
            self.pod_templates.insert(tkey, t);
        }
        self.fresh_meta(&mut pr.metadata, true, now);
        let _ = self.index.apply(&pr);
        self.requests.insert(key, pr);
        *self
            .requests_created
            .entry(format!("{}/{}", need.namespace, need.podgroup))
            .or_default() += 1;
        let annotations = caldera_cache::provisioning::consume_annotations(need);
        for p in &need.pods {
            let key = (p.namespace.to_string(), p.name.to_string());
            let Some(mut pod) = self.pods.get(&key).cloned() else {
                continue;
            };
            if pod.metadata.uid.as_deref() != Some(&*p.uid) {
                continue;
            }
            pod.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .extend(annotations.clone());
            self.put_pod(pod);
        }
        self.generation += 1;
    }

    /// Stores a request as it is (a live cluster's, read back), without counting a creation.
    pub fn insert_request(&mut self, pr: ProvisioningRequest) {
        let _ = self.put(pr);
    }

    /// Sets how many requests were created per PodGroup `namespace/name` (a live cluster's,
    /// as an observer counted them).
    pub fn set_requests_created(&mut self, created: BTreeMap<String, usize>) {
        self.requests_created = created;
    }

    /// Deletes a request and the PodTemplates it refers to. Returns whether it existed.
    pub fn delete_capacity(&mut self, namespace: &str, name: &str) -> bool {
        let Some(pr) = self
            .requests
            .remove(&(namespace.to_string(), name.to_string()))
        else {
            return false;
        };
        self.index.delete::<ProvisioningRequest>((namespace, name));
        for t in caldera_cache::provisioning::template_names(&pr) {
            self.pod_templates.remove(&(namespace.to_string(), t));
        }
        self.generation += 1;
        true
    }

    /// Removes the consume annotations naming `request` from `pods` (same uid), as the binder
    /// does when a request goes while members still wait.
    pub fn stop_consuming(&mut self, pods: &[ConsumingPod], request: &str) {
        for p in pods {
            let key = (p.namespace.to_string(), p.name.to_string());
            let Some(mut pod) = self.pods.get(&key).cloned() else {
                continue;
            };
            let Some(annotations) = pod.metadata.annotations.as_mut() else {
                continue;
            };
            if pod.metadata.uid.as_deref() != Some(&*p.uid)
                || annotations
                    .get(caldera_api::ANNOTATION_CONSUME_PROVISIONING_REQUEST)
                    .map(String::as_str)
                    != Some(request)
            {
                continue;
            }
            annotations.remove(caldera_api::ANNOTATION_CONSUME_PROVISIONING_REQUEST);
            annotations.remove(caldera_api::ANNOTATION_PROVISIONING_CLASS);
            self.put_pod(pod);
            self.generation += 1;
        }
    }

    /// Writes every HyperNode's `status.nodeCount` (the nodes under it, at any depth) where
    /// it differs, as Volcano's HyperNode controller (and Caldera's leader) does.
    pub fn write_hypernode_node_counts(&mut self) {
        // Counting builds the topology tree over a copy of every node: not for no HyperNode
        // (it was a third of a replay session's time on 4,000 nodes).
        if self.hypernodes.is_empty() {
            return;
        }
        let counts = self.index.hypernode_node_counts();
        for (name, h) in self.hypernodes.iter_mut() {
            let Some(&count) = counts.get(name.as_str()) else {
                continue;
            };
            let status = h.status.get_or_insert_with(Default::default);
            if status.node_count != Some(count) {
                status.node_count = Some(count);
                self.generation += 1;
            }
        }
    }

    /// Sets a condition on a request's status (as the autoscaler does), replacing one of the
    /// same type.
    pub fn set_request_condition(&mut self, namespace: &str, name: &str, condition: Condition) {
        let key = (namespace.to_string(), name.to_string());
        let Some(pr) = self.requests.get_mut(&key) else {
            return;
        };
        caldera_actors::autoscaler::set_condition(pr, condition);
        let _ = self.index.apply(pr);
        self.generation += 1;
    }

    /// Replaces a PodGroup's status. Returns whether anything changed.
    pub fn set_podgroup_status(
        &mut self,
        namespace: &str,
        name: &str,
        status: caldera_api::PodGroupStatus,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pg) = self.podgroups.get(&key).cloned() else {
            return false;
        };
        if pg.status.as_ref() == Some(&status) {
            return false;
        }
        pg.status = Some(status);
        // Converted when stored; a status built from the model converts as well.
        let _ = self.put(pg);
        true
    }

    /// Sets (or, with no holds, removes) a PodGroup's `caldera.sh/consolidation` annotation,
    /// as the binder's merge patch does when the uid still matches. Returns whether anything
    /// changed.
    pub fn set_move_holds(&mut self, w: &caldera_model::MoveHoldWrite) -> bool {
        let key = (w.namespace.to_string(), w.name.to_string());
        let Some(mut pg) = self.podgroups.get(&key).cloned() else {
            return false;
        };
        if pg.metadata.uid.as_deref().is_some_and(|u| u != &*w.uid) {
            return false;
        }
        let annotations = pg.metadata.annotations.get_or_insert_with(Default::default);
        let before = annotations.get(caldera_model::HOLDS_ANNOTATION).cloned();
        if w.holds.is_empty() {
            annotations.remove(caldera_model::HOLDS_ANNOTATION);
        } else {
            annotations.insert(
                caldera_model::HOLDS_ANNOTATION.to_string(),
                caldera_cache::consolidation::encode(&w.holds),
            );
        }
        if annotations.get(caldera_model::HOLDS_ANNOTATION) == before.as_ref() {
            return false;
        }
        let _ = self.put(pg);
        true
    }

    /// Replaces a Queue's status. Returns whether anything changed.
    pub fn set_queue_status(&mut self, name: &str, status: caldera_api::QueueStatus) -> bool {
        let Some(mut q) = self.queues.get(name).cloned() else {
            return false;
        };
        if q.status.as_ref() == Some(&status) {
            return false;
        }
        q.status = Some(status);
        // Converted when stored; a status built from the model converts as well.
        let _ = self.put(q);
        true
    }
    /// Writes a native PodGroup's `PodGroupScheduled` condition as kube-scheduler would (a
    /// strategic merge by type: other conditions stay), from the model's status. Returns
    /// whether anything changed.
    pub fn set_native_podgroup_status(
        &mut self,
        namespace: &str,
        name: &str,
        status: &caldera_model::PodGroupStatus,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(c) = caldera_model::NativeCondition::of(status) else {
            return false;
        };
        let Some(mut pg) = self.native_podgroups.get(&key).cloned() else {
            return false;
        };
        let condition = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: caldera_model::NATIVE_SCHEDULED.into(),
            status: if c.scheduled { "True" } else { "False" }.into(),
            reason: c.reason.into(),
            message: c.message.clone(),
            last_transition_time: kube_time(c.last_transition)
                .unwrap_or(KubeTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
            observed_generation: None,
        };
        let conditions = pg
            .status
            .get_or_insert_with(Default::default)
            .conditions
            .get_or_insert_with(Vec::new);
        match conditions.iter_mut().find(|x| x.type_ == condition.type_) {
            Some(old) if *old == condition => return false,
            Some(old) => *old = condition,
            None => conditions.push(condition),
        }
        // Converted when stored; a condition written here converts as well.
        let _ = self.put(pg);
        true
    }

    /// Stores a ResourceClaim exactly as given, status included (what a status write or the
    /// resource-claim controller leaves), and shows it to the scheduler. Refused, changing
    /// nothing, when the scheduler's conversion rejects it.
    pub fn put_resource_claim(&mut self, claim: ResourceClaim) -> Result<(), caldera_cache::Error> {
        caldera_cache::dra::claim(&claim)?;
        let _ = self.put(claim);
        Ok(())
    }
}
