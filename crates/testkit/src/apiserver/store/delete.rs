//! Deletion (graceful for pods, finalizers, namespace contents, collections), the `binding`
//! subresource and the `eviction` subresource.

use super::*;

impl State {
    /// DELETE of one object. Returns the response body.
    pub(crate) fn delete(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let old = self.get(id, namespace, name)?;
        if let Some(uid) = &opts.uid {
            let actual = meta(&old, "uid");
            if uid != actual {
                return Err(ApiError::precondition_failed(
                    d.group, d.plural, name, "UID", uid, actual,
                ));
            }
        }
        if let Some(rv) = &opts.resource_version {
            let actual = meta(&old, "resourceVersion");
            if rv != actual {
                return Err(ApiError::precondition_failed(
                    d.group,
                    d.plural,
                    name,
                    "ResourceVersion",
                    rv,
                    actual,
                ));
            }
        }
        let key = key_of(d, namespace, name);
        let mut last = old.value.clone();
        if d.flavor == Flavor::Pod {
            let grace = pod_grace_period(&old, opts.grace_period_seconds);
            let pending = old["metadata"]["deletionGracePeriodSeconds"].as_i64();
            let terminating = !old["metadata"]["deletionTimestamp"].is_null();
            if grace > 0 {
                if terminating && pending.is_some_and(|p| p > 0 && p <= grace) {
                    // Graceful deletion already pending with a period no longer than this one.
                    return Ok(old.value.clone());
                }
                let m = obj_mut(&mut last, "metadata");
                m.insert("deletionTimestamp".into(), json!(time::after(grace)));
                m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                if dry_run {
                    return Ok(last);
                }
                let stored = self.commit(id, &key, Some(last), None);
                let value = stored.value.clone();
                if id == PODS {
                    // A terminating pod no longer counts as its ReplicaSet's replica.
                    self.replicasets_after_pod_change(namespace);
                }
                return Ok(value);
            }
            let m = obj_mut(&mut last, "metadata");
            if !terminating {
                m.insert("deletionTimestamp".into(), json!(time::now()));
            }
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
        }
        let finalizers = old.value["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if matches!(d.flavor, Flavor::NativePodGroup | Flavor::ResourceClaim) && finalizers {
            // Finalizers keep the object, terminating, until the last one is removed.
            if !last["metadata"]["deletionTimestamp"].is_null() {
                return Ok(old.value.clone());
            }
            obj_mut(&mut last, "metadata").insert("deletionTimestamp".into(), json!(time::now()));
            obj_mut(&mut last, "metadata").insert("deletionGracePeriodSeconds".into(), json!(0));
            if dry_run {
                return Ok(last);
            }
            let stored = self.commit(id, &key, Some(last), None);
            let value = stored.value.clone();
            if d.flavor == Flavor::NativePodGroup {
                self.protect_podgroups(namespace);
            }
            return Ok(value);
        }
        if dry_run {
            return Ok(last);
        }
        if d.flavor == Flavor::Namespace {
            self.delete_namespace_contents(name);
        }
        let uid = meta(&old, "uid").to_string();
        let stored = self.commit(id, &key, None, Some(last));
        if id == JOBS && self.config.job_controller {
            self.collect_job_dependents(namespace, &uid, opts.propagation_policy.as_deref());
        }
        if id == PODS {
            self.protect_podgroups(namespace);
            self.replicasets_after_pod_change(namespace);
        }
        if matches!(id, REPLICASETS | DEPLOYMENTS) && self.config.replicaset_controller {
            // `apps/v1` defaults to background propagation.
            let policy = opts.propagation_policy.as_deref().unwrap_or("Background");
            self.collect_job_dependents(namespace, &uid, Some(policy));
        }
        if matches!(d.kind, "JobSet" | "LeaderWorkerSet") {
            // Custom resources default to background propagation.
            let policy = opts.propagation_policy.as_deref().unwrap_or("Background");
            self.collect_job_dependents(namespace, &uid, Some(policy));
        }
        if d.returns_deleted_object() {
            Ok(stored.value.clone())
        } else {
            let mut details = json!({"name": name, "kind": d.plural, "uid": uid});
            if !d.group.is_empty() {
                details["group"] = json!(d.group);
            }
            let mut status = status_success(200);
            status["details"] = details;
            Ok(status)
        }
    }

    /// What the namespace controller does before a namespace goes away.
    pub(super) fn delete_namespace_contents(&mut self, namespace: &str) {
        for id in 0..RESOURCES.len() {
            if !def(id).namespaced {
                continue;
            }
            let keys: Vec<Key> = self
                .in_namespace(id, namespace)
                .map(|(k, _)| k.clone())
                .collect();
            for key in keys {
                self.commit(id, &key, None, None);
            }
        }
    }

    /// DELETE on a collection: deletes (or, for bound pods, starts terminating) every match.
    pub(crate) fn delete_collection(
        &mut self,
        id: ResourceId,
        query: &ListQuery,
        opts: &DeleteOptions,
        dry_run: bool,
    ) -> Result<Vec<Value>, ApiError> {
        let mut all = query.clone();
        all.limit = None;
        all.continue_token = None;
        let page = self.list(id, &all)?;
        let mut out = Vec::new();
        for obj in page.items {
            let result = self.delete(
                id,
                meta(&obj, "namespace"),
                meta(&obj, "name"),
                opts,
                dry_run,
            )?;
            if result["kind"] == "Status" {
                out.push((*obj).clone());
            } else {
                out.push(result);
            }
        }
        Ok(out)
    }

    /// `pods/binding` (and the legacy `bindings` resource when `url_name` is `None`).
    pub(crate) fn bind(
        &mut self,
        namespace: &str,
        url_name: Option<&str>,
        binding: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let name = meta(binding, "name").to_string();
        if url_name.is_some_and(|u| u != name) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        let target_kind = binding["target"]["kind"].as_str().unwrap_or_default();
        let target = binding["target"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut problems = Vec::new();
        if !target_kind.is_empty() && target_kind != "Node" {
            problems.push(format!("target.kind: Unsupported value: \"{target_kind}\": supported values: \"Node\", \"<empty>\""));
        }
        if target.is_empty() {
            problems.push("target.name: Required value".to_string());
        }
        if !problems.is_empty() {
            // kube-apiserver returns binding validation as a plain error, hence a 500.
            return Err(ApiError::internal(problems.join(", ")));
        }
        let pod = self.get(PODS, namespace, &name)?;
        let precondition = |field: &str, label: &str| -> Result<(), ApiError> {
            let wanted = meta(binding, field);
            let actual = meta(&pod, field);
            if !wanted.is_empty() && wanted != actual {
                return Err(ApiError::precondition_failed(
                    "", "pods", &name, label, wanted, actual,
                ));
            }
            Ok(())
        };
        precondition("uid", "UID")?;
        precondition("resourceVersion", "ResourceVersion")?;
        let refuse = |why: String| Err(ApiError::conflict("", "pods/binding", &name, &why));
        if !pod["metadata"]["deletionTimestamp"].is_null() {
            return refuse(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            ));
        }
        let current = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        if !current.is_empty() {
            return refuse(format!(
                "pod {name} is already assigned to node \"{current}\""
            ));
        }
        if pod["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| !g.is_empty())
        {
            return refuse(format!("pod {name} has non-empty .spec.schedulingGates"));
        }
        let mut next = pod.value.clone();
        obj_mut(&mut next, "spec").insert("nodeName".into(), json!(target));
        if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
            if !annotations.is_empty() {
                let m = obj_mut(&mut next, "metadata");
                let slot = m.entry("annotations").or_insert_with(|| json!({}));
                if let Value::Object(existing) = slot {
                    for (k, v) in annotations {
                        existing.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        admission::set_pod_scheduled(&mut next);
        if !dry_run {
            let key = key_of(def(PODS), namespace, &name);
            self.commit(PODS, &key, Some(next), None);
        }
        Ok(status_success(201))
    }

    /// `pods/eviction`, judged against the namespace's PodDisruptionBudgets as
    /// kube-apiserver judges it ([`caldera_actors::disruption::evict`]): a refusal is 429
    /// TooManyRequests with the budget named in a `DisruptionBudget` cause; an allowed
    /// eviction charges the budget, marks the pod `DisruptionTarget` and deletes it
    /// gracefully with the eviction's `deleteOptions`.
    pub(crate) fn evict(
        &mut self,
        namespace: &str,
        name: &str,
        eviction: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let body_name = meta(eviction, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let opts = DeleteOptions::from_body(&eviction["deleteOptions"]);
        let stored = self.get(PODS, namespace, name)?;
        let mut pod: Pod =
            serde_json::from_value(stored.value.clone()).map_err(ApiError::internal)?;
        let budgets: Vec<PodDisruptionBudget> = self.typed_in(BUDGETS, namespace);
        let refs: Vec<&PodDisruptionBudget> = budgets.iter().collect();
        let now = time::now_model();
        match disruption::evict(&pod, &refs) {
            Eviction::Delete => {}
            Eviction::Charge(i) => {
                let mut pdb = budgets[i].clone();
                disruption::charge(&mut pdb, name, now);
                if !dry_run {
                    let status = serde_json::to_value(&pdb.status).map_err(ApiError::internal)?;
                    let pdb_name = pdb.metadata.name.clone().unwrap_or_default();
                    self.modify(BUDGETS, namespace, &pdb_name, |b| {
                        if let Value::Object(map) = b {
                            map.insert("status".into(), status);
                        }
                    })?;
                }
            }
            Eviction::Refused { cause } => {
                return Err(ApiError::too_many_requests(
                    disruption::REFUSED_MESSAGE,
                    "DisruptionBudget",
                    &cause,
                ))
            }
            Eviction::MultipleBudgets => {
                return Err(ApiError::new(
                    500,
                    "InternalError",
                    disruption::MULTIPLE_MESSAGE,
                ))
            }
            Eviction::Forbidden { budget, reason } => {
                return Err(ApiError::forbidden(def(BUDGETS), &budget, &reason))
            }
        }
        if !dry_run && disruption::mark_evicted(&mut pod, now) {
            let conditions =
                serde_json::to_value(pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
                    .map_err(ApiError::internal)?;
            self.modify(PODS, namespace, name, |p| {
                obj_mut(p, "status").insert("conditions".into(), conditions);
            })?;
        }
        self.delete(PODS, namespace, name, &opts, dry_run)?;
        Ok(status_success(201))
    }
}

/// A pod's effective grace period for a delete (`podStrategy.CheckGracefulDelete`).
pub(super) fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(0);
    if pod["spec"]["nodeName"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        period = 0;
    }
    if matches!(
        pod["status"]["phase"].as_str(),
        Some("Failed" | "Succeeded")
    ) {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    period
}
