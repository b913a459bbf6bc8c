//! Writes to pods: the scheduler's (bind, release, conditions, nomination, eviction), the
//! kubelets' (phase, removal of terminated pods) and kube-apiserver's pod admission.

use super::*;

impl Store {
    /// The Priority admission plugin: a pod without `spec.priority` gets its class's value, or
    /// the global default class (name and value) when it names none. A class that does not
    /// exist yet is left for the scheduler to resolve later instead of rejecting the pod, so
    /// the order of objects in a manifest does not matter.
    pub(super) fn admit_priority(&self, pod: &mut Pod) {
        let Some(spec) = pod.spec.as_mut() else {
            return;
        };
        let class = match spec.priority_class_name.as_deref() {
            Some(name) => self.priority_classes.get(name),
            None => self
                .priority_classes
                .values()
                .filter(|pc| pc.global_default == Some(true))
                .max_by_key(|pc| pc.value.unwrap_or(0)),
        };
        let Some(pc) = class else {
            return;
        };
        if spec.priority_class_name.is_none() {
            spec.priority_class_name = pc.metadata.name.clone();
        }
        if spec.priority.is_none() {
            spec.priority = Some(pc.value.unwrap_or(0));
        }
        if spec.preemption_policy.is_none() {
            spec.preemption_policy = Some(
                pc.preemption_policy
                    .clone()
                    .unwrap_or_else(|| "PreemptLowerPriority".into()),
            );
        }
    }

    /// Writes a pod and re-indexes it. The pod converted when it was stored, and the fields
    /// the callers change (nodeName, conditions, phase) cannot make conversion fail, so an
    /// error here would be a bug in this file; it is ignored rather than aborting a run.
    pub(super) fn put_pod(&mut self, pod: Pod) {
        let _ = self.put(pod);
    }

    /// Binds a pod, as `pods/binding` does: sets `spec.nodeName` and `PodScheduled=True`.
    pub fn bind(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
        now: Time,
    ) -> Result<(), BindError> {
        let key = (namespace.to_string(), name.to_string());
        let id = format!("{namespace}/{name}");
        let mut pod = self
            .pods
            .get(&key)
            .cloned()
            .ok_or_else(|| BindError::NotFound(id.clone()))?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(BindError::UidMismatch(id));
        }
        let spec = pod.spec.get_or_insert_with(Default::default);
        if let Some(bound) = &spec.node_name {
            return Err(BindError::AlreadyBound {
                pod: id,
                node: bound.clone(),
            });
        }
        spec.node_name = Some(node.to_string());
        set_condition(&mut pod, "PodScheduled", "True", None, None, now);
        self.put_pod(pod);
        Ok(())
    }

    /// Releases a gated member to `node`, as `caldera gate` does: one update adding the pin to
    /// every required node-affinity term and removing the gate [`caldera_api::GANG_GATE`],
    /// with `status.nominatedNodeName` set first (the order matters only to a live
    /// kube-scheduler; here the three changes land at once).
    pub fn release(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
    ) -> Result<(), BindError> {
        let key = (namespace.to_string(), name.to_string());
        let id = format!("{namespace}/{name}");
        let mut pod = self
            .pods
            .get(&key)
            .cloned()
            .ok_or_else(|| BindError::NotFound(id.clone()))?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(BindError::UidMismatch(id));
        }
        if let Some(bound) = node_name(&pod) {
            return Err(BindError::AlreadyBound {
                pod: id,
                node: bound.to_string(),
            });
        }
        if !caldera_cache::gate::has_gang_gate(pod.spec.as_ref()) {
            return Err(BindError::NotGated(id));
        }
        let spec = pod.spec.take().unwrap_or_default();
        pod.spec = Some(caldera_cache::gate::pinned_spec(&spec, node));
        pod.status
            .get_or_insert_with(Default::default)
            .nominated_node_name = Some(node.to_string());
        self.put_pod(pod);
        Ok(())
    }

    /// Sets `PodScheduled=False` with `reason` and `message` on an unbound pod whose uid
    /// matches. Returns whether anything changed.
    pub fn set_unschedulable(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        reason: &str,
        message: &str,
        now: Time,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        if pod.metadata.uid.as_deref() != Some(uid) || node_name(&pod).is_some() {
            return false;
        }
        let before = pod.status.clone();
        set_condition(
            &mut pod,
            "PodScheduled",
            "False",
            Some(reason),
            Some(message),
            now,
        );
        if pod.status == before {
            return false;
        }
        self.put_pod(pod);
        true
    }

    /// Sets (or clears) `status.nominatedNodeName` of an unbound pod whose uid matches.
    /// Returns whether anything changed.
    pub fn set_nominated(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: Option<&str>,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        if pod.metadata.uid.as_deref() != Some(uid) || node_name(&pod).is_some() {
            return false;
        }
        let status = pod.status.get_or_insert_with(Default::default);
        if status.nominated_node_name.as_deref() == node {
            return false;
        }
        status.nominated_node_name = node.map(str::to_string);
        self.put_pod(pod);
        true
    }

    /// Marks an unbound pod Failed with `reason` and `message` (the gang timeout). Returns
    /// whether anything changed.
    pub fn fail_pod(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        reason: &str,
        message: &str,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        if pod.metadata.uid.as_deref() != Some(uid) || node_name(&pod).is_some() {
            return false;
        }
        let status = pod.status.get_or_insert_with(Default::default);
        if status.phase.as_deref() == Some("Failed") {
            return false;
        }
        status.phase = Some("Failed".into());
        status.reason = Some(reason.to_string());
        status.message = Some(message.to_string());
        self.put_pod(pod);
        true
    }

    /// Sets the phase of a pod as its kubelet would ([`kubelet::set_phase`]: `Running` makes
    /// it Ready). Returns whether anything changed.
    pub fn set_phase(&mut self, namespace: &str, name: &str, phase: &str, now: Time) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(mut pod) = self.pods.get(&key).cloned() else {
            return false;
        };
        let status = pod.status.get_or_insert_with(Default::default);
        if !kubelet::set_phase(status, phase, now) {
            return false;
        }
        self.put_pod(pod);
        self.refresh_budgets(now);
        true
    }

    /// `pods/eviction` by the scheduler, judged as kube-apiserver judges it: the budgets may
    /// refuse (429, nothing changes); otherwise the pod gets `DisruptionTarget` (unless it has
    /// finished) and is deleted gracefully: a bound pod stays, terminating, for its grace
    /// period; an unbound one is gone at once.
    pub fn evict(
        &mut self,
        namespace: &str,
        name: &str,
        uid: &str,
        now: Time,
    ) -> Result<(), EvictError> {
        let key = (namespace.to_string(), name.to_string());
        let id = format!("{namespace}/{name}");
        let mut pod = self
            .pods
            .get(&key)
            .cloned()
            .ok_or_else(|| EvictError::NotFound(id.clone()))?;
        if pod.metadata.uid.as_deref() != Some(uid) {
            return Err(EvictError::NotFound(id));
        }
        let budgets = in_namespace(&self.budgets, namespace);
        match disruption::evict(&pod, &budgets) {
            Eviction::Delete => {}
            Eviction::Charge(i) => {
                let key = budgets.get(i).map(|b| Key::of(&b.metadata));
                if let Some(pdb) = key.and_then(|k| self.budgets.get_mut(&k)) {
                    disruption::charge(pdb, name, now);
                    let _ = self.index.apply(pdb);
                }
            }
            Eviction::Refused { cause } => return Err(EvictError::Refused(cause)),
            Eviction::MultipleBudgets => {
                return Err(EvictError::Refused(disruption::MULTIPLE_MESSAGE.into()))
            }
            Eviction::Forbidden { budget, reason } => {
                return Err(EvictError::Refused(format!("{budget}: {reason}")))
            }
        }
        disruption::mark_evicted(&mut pod, now);
        self.delete_pod_object(key, pod, now);
        self.refresh_budgets(now);
        Ok(())
    }

    /// The kubelets: removes every terminating bound pod whose `deletionTimestamp` has come.
    /// Returns the pods removed (`namespace/name`).
    pub fn kubelet(&mut self, now: Time) -> Vec<String> {
        let due: Vec<Key> = self
            .pods
            .iter()
            .filter(|(_, p)| kubelet::removal_due(p, now))
            .map(|(k, _)| k.clone())
            .collect();
        for (ns, name) in &due {
            self.index.delete::<Pod>((ns, name));
            self.pods.remove(&(ns.clone(), name.clone()));
            self.generation += 1;
        }
        if !due.is_empty() {
            self.refresh_budgets(now);
        }
        due.into_iter().map(|(ns, n)| format!("{ns}/{n}")).collect()
    }

    /// Deletes the pods `names` of `namespace` at once, without a grace period (`kubectl delete
    /// --grace-period=0 --force`, or pods that have finished: the kubelet has nothing left to
    /// stop), then collects what they owned in one pass. Returns how many existed.
    pub fn force_delete_pods(&mut self, namespace: &str, names: &[String], now: Time) -> usize {
        let mut uids = BTreeSet::new();
        for name in names {
            let key = (namespace.to_string(), name.clone());
            if let Some(pod) = self.pods.remove(&key) {
                self.index.delete::<Pod>((namespace, name));
                self.generation += 1;
                uids.extend(pod.metadata.uid);
            }
        }
        let removed = uids.len();
        self.collect_garbage_of(&uids);
        if removed > 0 {
            self.refresh_budgets(now);
        }
        removed
    }

    /// When the next terminating pod is due to go, if any.
    pub fn next_removal(&self) -> Option<Time> {
        self.pods.values().filter_map(kubelet::gone_at).min()
    }

    /// Sets a pod's `status.extendedResourceClaimStatus` (the claim made for its extended
    /// resources served by devices, KEP-5004). False when the pod is gone.
    pub fn set_extended_claim_status(
        &mut self,
        namespace: &str,
        name: &str,
        status: k8s_openapi::api::core::v1::PodExtendedResourceClaimStatus,
    ) -> bool {
        let key = (namespace.to_string(), name.to_string());
        let Some(pod) = self.pods.get_mut(&key) else {
            return false;
        };
        pod.status
            .get_or_insert_with(Default::default)
            .extended_resource_claim_status = Some(status);
        let _ = self.index.apply(pod);
        self.generation += 1;
        true
    }
}

/// Sets the pod condition `type_` to `status`; the transition time moves only when the status
/// changes, as in Kubernetes.
fn set_condition(
    pod: &mut Pod,
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: Option<&str>,
    now: Time,
) {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    let fresh = PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.map(str::to_string),
        message: message.map(str::to_string),
        last_transition_time: kube_time(now),
        ..Default::default()
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status == status {
                c.reason = fresh.reason;
                c.message = fresh.message;
            } else {
                *c = fresh;
            }
        }
        None => conditions.push(fresh),
    }
}
