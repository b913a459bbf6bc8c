//! The controllers that react to the stand-in's writes as kube-controller-manager does (PV,
//! Job, ReplicaSet and Deployment, resource-claim, podgroup-protection, disruption, node
//! lifecycle; the garbage collector for Jobs' dependents), each write of theirs a write of its
//! own: calls into [`caldera_actors`] and the stand-in's `storage` and `dra` modules.

use super::*;

impl State {
    /// kube-controller-manager's ephemeral volume controller: the claims of the pod's generic
    /// ephemeral volumes ([`caldera_actors::statefulset::ephemeral_claims`]) are created when
    /// missing, each as its own write.
    pub(super) fn ephemeral_claims(&mut self, key: &Key) {
        let Some(pod) = self.resources[PODS].objects.get(key).cloned() else {
            return;
        };
        let has_ephemeral = pod.value["spec"]["volumes"]
            .as_array()
            .is_some_and(|vs| vs.iter().any(|v| !v["ephemeral"].is_null()));
        if !has_ephemeral {
            return;
        }
        let Ok(pod) = serde_json::from_value::<Pod>(pod.value.clone()) else {
            return;
        };
        for claim in caldera_actors::statefulset::ephemeral_claims(&pod) {
            let name = claim.metadata.name.clone().unwrap_or_default();
            if self.lookup(CLAIMS, &key.0, &name).is_some() {
                continue;
            }
            self.create_typed(CLAIMS, &key.0, &claim);
        }
    }

    /// kube-controller-manager's Job controller ([`caldera_actors::job`]): the Job's missing
    /// pods, the deletion of a failed Job's active pods, and its status, each its own write.
    pub(super) fn sync_job(&mut self, namespace: &str, name: &str) {
        let Some(job) = self.lookup(JOBS, namespace, name).and_then(|j| {
            serde_json::from_value::<k8s_openapi::api::batch::v1::Job>(j.value.clone()).ok()
        }) else {
            return;
        };
        let pods: Vec<Pod> = self.typed_in(PODS, namespace);
        let refs: Vec<&Pod> = pods.iter().collect();
        let out =
            caldera_actors::job::sync(&job, &refs, &|n| self.lookup(PODS, namespace, n).is_some());
        for pod in out.create {
            self.create_typed(PODS, namespace, &pod);
        }
        for pod in &out.delete {
            let _ = self.delete(PODS, namespace, pod, &DeleteOptions::default(), false);
        }
        self.write_status(JOBS, namespace, name, &out.status);
    }

    /// kube-controller-manager's Deployment and ReplicaSet controllers
    /// ([`caldera_actors::replicaset`]) over `namespace`, after a write to a pod, a ReplicaSet
    /// or a Deployment there: every Deployment's ReplicaSets made and scaled, then every
    /// ReplicaSet's pods adopted, released, created and deleted, and their statuses written,
    /// each its own write. Until nothing changes (a Deployment's new ReplicaSet makes pods at
    /// once), at most a few rounds.
    pub(super) fn sync_apps(&mut self, namespace: &str) {
        for _ in 0..3 {
            let before = self.rv;
            self.sync_deployments(namespace);
            self.sync_replicasets(namespace);
            if self.rv == before {
                break;
            }
        }
    }

    /// The ReplicaSet controller's reaction to a pod deleted or terminating in `namespace`
    /// (the ReplicaSet's own deletions do not re-trigger it).
    pub(super) fn replicasets_after_pod_change(&mut self, namespace: &str) {
        if self.config.replicaset_controller && !self.syncing_replicasets {
            self.syncing_replicasets = true;
            self.sync_apps(namespace);
            self.syncing_replicasets = false;
        }
    }

    /// The objects of `id` in `namespace` that read as `T`, by name.
    pub(super) fn typed_in<T: for<'de> k8s_openapi::serde::Deserialize<'de>>(
        &self,
        id: ResourceId,
        namespace: &str,
    ) -> Vec<T> {
        self.in_namespace(id, namespace)
            .filter_map(|(_, o)| serde_json::from_value(o.value.clone()).ok())
            .collect()
    }

    /// The stored objects of `id` in `namespace`, by name.
    pub(super) fn in_namespace<'a>(
        &'a self,
        id: ResourceId,
        namespace: &'a str,
    ) -> impl Iterator<Item = (&'a Key, &'a Arc<Stored>)> + 'a {
        self.resources[id]
            .objects
            .range((namespace.to_string(), String::new())..)
            .take_while(move |(k, _)| k.0 == namespace)
    }

    pub(super) fn sync_deployments(&mut self, namespace: &str) {
        let deployments: Vec<Deployment> = self.typed_in(DEPLOYMENTS, namespace);
        for deploy in deployments {
            let sets: Vec<ReplicaSet> = self.typed_in(REPLICASETS, namespace);
            let refs: Vec<&ReplicaSet> = sets.iter().collect();
            let pods: Vec<Pod> = self.typed_in(PODS, namespace);
            let pod_refs: Vec<&Pod> = pods.iter().collect();
            let out = caldera_actors::replicaset::sync_deployment(&deploy, &refs, &pod_refs);
            for (name, replicas) in &out.scale {
                let _ = self.modify(REPLICASETS, namespace, name, |r| {
                    obj_mut(r, "spec").insert("replicas".into(), json!(replicas));
                });
            }
            if let Some(rs) = out.create {
                self.create_typed(REPLICASETS, namespace, &rs);
            }
            let name = deploy.metadata.name.clone().unwrap_or_default();
            self.write_status(DEPLOYMENTS, namespace, &name, &out.status);
        }
    }

    pub(super) fn sync_replicasets(&mut self, namespace: &str) {
        let sets: Vec<ReplicaSet> = self.typed_in(REPLICASETS, namespace);
        let now = time::now_model();
        for rs in sets {
            let pods: Vec<Pod> = self.typed_in(PODS, namespace);
            let refs: Vec<&Pod> = pods.iter().collect();
            let out = caldera_actors::replicaset::sync(&rs, &refs, now, &|n| {
                self.lookup(PODS, namespace, n).is_some()
            });
            let owner = caldera_actors::replicaset::controller_ref(&rs);
            let owner_json = serde_json::to_value(&owner).unwrap_or(Value::Null);
            for pod in &out.adopt {
                let _ = self.modify(PODS, namespace, pod, |p| {
                    let m = obj_mut(p, "metadata");
                    let refs = m.entry("ownerReferences").or_insert_with(|| json!([]));
                    if let Value::Array(list) = refs {
                        list.push(owner_json.clone());
                    }
                });
            }
            for pod in &out.release {
                let _ = self.modify(PODS, namespace, pod, |p| {
                    if let Some(list) = p["metadata"]["ownerReferences"].as_array_mut() {
                        list.retain(|o| o["uid"] != owner.uid.as_str());
                    }
                });
            }
            for pod in out.create {
                self.create_typed(PODS, namespace, &pod);
            }
            for pod in &out.delete {
                let _ = self.delete(PODS, namespace, pod, &DeleteOptions::default(), false);
            }
            let name = rs.metadata.name.clone().unwrap_or_default();
            self.write_status(REPLICASETS, namespace, &name, &out.status);
        }
    }

    /// The garbage collector for the dependents of the deleted Job, JobSet or LeaderWorkerSet
    /// `uid` in `namespace`:
    /// deleted (`Background`, `Foreground`) or orphaned (`Orphan`, and no policy: the default
    /// of `batch/v1` Jobs).
    pub(super) fn collect_job_dependents(
        &mut self,
        namespace: &str,
        uid: &str,
        policy: Option<&str>,
    ) {
        let orphan = !matches!(policy, Some("Background" | "Foreground"));
        for id in 0..RESOURCES.len() {
            if !def(id).namespaced || !def(id).is_stored() {
                continue;
            }
            let owned: Vec<Key> = self
                .in_namespace(id, namespace)
                .filter(|(_, o)| {
                    o.value["metadata"]["ownerReferences"]
                        .as_array()
                        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
                })
                .map(|(k, _)| k.clone())
                .collect();
            for key in owned {
                if orphan {
                    let _ = self.modify(id, &key.0, &key.1, |o| {
                        if let Some(refs) = o["metadata"]["ownerReferences"].as_array_mut() {
                            refs.retain(|r| r["uid"] != uid);
                        }
                    });
                } else {
                    // The garbage collector deletes dependents in the background, so their own
                    // dependents (a JobSet's Jobs' pods) go too.
                    let background = DeleteOptions {
                        propagation_policy: Some("Background".into()),
                        ..DeleteOptions::default()
                    };
                    let _ = self.delete(id, &key.0, &key.1, &background, false);
                }
            }
        }
    }

    /// kube-controller-manager's PV controller ([`caldera_actors::pv_controller`]): binds claims
    /// and volumes, each object it changes written as its own write (volumes first).
    pub(super) fn sync_volumes(&mut self) {
        if !self.config.pv_controller {
            return;
        }
        let values = |s: &Self, id| -> Vec<Value> { s.all(id).map(|o| o.value.clone()).collect() };
        let writes = storage::controller_writes(
            &values(self, CLAIMS),
            &values(self, VOLUMES),
            &values(self, STORAGE_CLASSES),
        );
        for (name, fields) in writes.volumes {
            let _ = self.modify(VOLUMES, "", &name, |v| {
                storage::apply_fields(v, &fields, &["claimRef"]);
            });
        }
        for (namespace, name, fields) in writes.claims {
            let _ = self.modify(CLAIMS, &namespace, &name, |c| {
                storage::apply_fields(c, &fields, &["volumeName", "storageClassName"]);
            });
        }
    }

    /// kube-controller-manager's podgroup-protection controller, for the terminating native
    /// PodGroups of `namespace`: the finalizer goes once no pod that has not finished names
    /// the group (`spec.schedulingGroup.podGroupName`); and, as for any object, a terminating
    /// PodGroup whose last finalizer is gone is deleted.
    pub(super) fn protect_podgroups(&mut self, namespace: &str) {
        let terminating: Vec<(Key, Value)> = self.resources[NATIVE_PODGROUPS]
            .objects
            .iter()
            .filter(|(k, o)| {
                k.0 == namespace && !o.value["metadata"]["deletionTimestamp"].is_null()
            })
            .map(|(k, o)| (k.clone(), o.value.clone()))
            .collect();
        for (key, mut pg) in terminating {
            let name = key.1.as_str();
            let in_use = self.resources[PODS].objects.iter().any(|(k, p)| {
                k.0 == namespace
                    && p.value["spec"]["schedulingGroup"]["podGroupName"] == name
                    && !matches!(
                        p.value["status"]["phase"].as_str(),
                        Some("Succeeded" | "Failed")
                    )
            });
            let m = obj_mut(&mut pg, "metadata");
            let mut finalizers: Vec<Value> = m
                .get("finalizers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let before = finalizers.len();
            if self.config.podgroup_protection && !in_use {
                finalizers.retain(|f| f != PODGROUP_PROTECTION);
            }
            if finalizers.is_empty() {
                self.commit(NATIVE_PODGROUPS, &key, None, Some(pg));
            } else if finalizers.len() != before {
                m.insert("finalizers".into(), Value::Array(finalizers));
                self.commit(NATIVE_PODGROUPS, &key, Some(pg), None);
            }
        }
    }

    /// kube-controller-manager's resource-claim controller ([`caldera_actors::resourceclaim`])
    /// over `namespace`: claims created from templates, pods' `resourceClaimStatuses`, then
    /// claims' status, finalizers and deletions, each as its own write.
    pub(super) fn sync_resource_claims(&mut self, namespace: &str) {
        let in_ns = |s: &Self, id: ResourceId| -> Vec<Value> {
            s.in_namespace(id, namespace)
                .map(|(_, o)| o.value.clone())
                .collect()
        };
        let claims = in_ns(self, RESOURCE_CLAIMS);
        // The pods that name claims, and those that own one (the bridge's claims).
        let owners: std::collections::BTreeSet<&str> = claims
            .iter()
            .flat_map(|c| {
                c["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
            })
            .filter_map(|o| o["uid"].as_str())
            .collect();
        let pods: Vec<Value> = in_ns(self, PODS)
            .into_iter()
            .filter(|p| {
                dra::pod_has_claims(p)
                    || p["metadata"]["uid"]
                        .as_str()
                        .is_some_and(|u| owners.contains(u))
            })
            .collect();
        let templates = in_ns(self, CLAIM_TEMPLATES);
        let out = dra::controller_sync(&pods, &claims, &templates, &|ns, name| {
            self.lookup(RESOURCE_CLAIMS, ns, name).is_some()
        });
        for claim in out.create {
            self.create_typed(RESOURCE_CLAIMS, namespace, &claim);
        }
        for pod in out.pods {
            let Ok(statuses) = serde_json::to_value(&pod.resource_claim_statuses) else {
                continue;
            };
            let _ = self.modify(PODS, &pod.namespace, &pod.name, |p| {
                obj_mut(p, "status").insert("resourceClaimStatuses".into(), statuses);
            });
        }
        for update in out.claims {
            if let Some(status) = &update.status {
                self.write_status(RESOURCE_CLAIMS, &update.namespace, &update.name, status);
            }
            if let Some(finalizers) = update.finalizers {
                let _ = self.modify(RESOURCE_CLAIMS, &update.namespace, &update.name, |c| {
                    let m = obj_mut(c, "metadata");
                    if finalizers.is_empty() {
                        m.remove("finalizers");
                    } else {
                        m.insert("finalizers".into(), json!(finalizers));
                    }
                });
                self.release_finalized(RESOURCE_CLAIMS, &update.namespace, &update.name);
            }
            if update.delete {
                let _ = self.delete(
                    RESOURCE_CLAIMS,
                    &update.namespace,
                    &update.name,
                    &DeleteOptions::default(),
                    false,
                );
            }
        }
    }

    /// A terminating object whose last finalizer is gone is deleted (what kube-apiserver does on
    /// the update that removes it).
    pub(super) fn release_finalized(&mut self, id: ResourceId, namespace: &str, name: &str) {
        let Some(obj) = self.lookup(id, namespace, name).cloned() else {
            return;
        };
        let finalizers = obj.value["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if obj.value["metadata"]["deletionTimestamp"].is_null() || finalizers {
            return;
        }
        let key = key_of(def(id), namespace, name);
        self.commit(id, &key, None, Some(obj.value.clone()));
    }

    /// Controllers that react to a write at once (their effect is a separate, later write).
    pub(super) fn after_write(&mut self, id: ResourceId, key: &Key) {
        if id == NATIVE_PODGROUPS || id == PODS {
            self.protect_podgroups(&key.0.clone());
        }
        if id == PODS && self.config.pv_controller {
            self.ephemeral_claims(key);
        }
        if self.config.job_controller && !self.syncing_jobs {
            let job = match id {
                JOBS => Some(key.1.clone()),
                PODS => self.resources[PODS].objects.get(key).and_then(|p| {
                    p.value["metadata"]["ownerReferences"]
                        .as_array()?
                        .iter()
                        .find(|o| o["controller"] == true && o["kind"] == "Job")
                        .and_then(|o| o["name"].as_str().map(str::to_string))
                }),
                _ => None,
            };
            if let Some(name) = job {
                self.syncing_jobs = true;
                self.sync_job(&key.0, &name);
                self.syncing_jobs = false;
            }
        }
        if matches!(id, PODS | REPLICASETS | DEPLOYMENTS) {
            self.replicasets_after_pod_change(&key.0.clone());
        }
        if id == NODES && self.config.node_lifecycle_controller {
            let Some(node) = self.resources[NODES].objects.get(key).cloned() else {
                return;
            };
            if let Some(taints) = admission::sync_condition_taints(&node) {
                let mut next = node.value.clone();
                obj_mut(&mut next, "spec").insert("taints".into(), Value::Array(taints));
                self.commit(NODES, key, Some(next), None);
            }
        }
    }

    /// The disruption controller: recomputes the status of every PodDisruptionBudget in
    /// `namespace` ([`caldera_actors::disruption::status`]) and writes the ones that changed,
    /// each as its own write. A pod's controller is found among the ReplicaSets (and their
    /// Deployments); no other controller's scale is.
    pub(super) fn sync_budgets(&mut self, namespace: &str) {
        if !self.config.disruption_controller {
            return;
        }
        let budgets: Vec<PodDisruptionBudget> = self.typed_in(BUDGETS, namespace);
        if budgets.is_empty() {
            return;
        }
        let pods: Vec<Pod> = self.typed_in(PODS, namespace);
        let refs: Vec<&Pod> = pods.iter().collect();
        let now = time::now_model();
        let sets: Vec<ReplicaSet> = self.typed_in(REPLICASETS, namespace);
        let deployments: Vec<Deployment> = self.typed_in(DEPLOYMENTS, namespace);
        let named = |meta: &ObjectMeta, n: &str| meta.name.as_deref() == Some(n);
        for pdb in budgets {
            let status = disruption::refresh(&pdb, &refs, now, &|owner, _| {
                caldera_actors::replicaset::scale_of(
                    owner,
                    &|n| sets.iter().find(|r| named(&r.metadata, n)).cloned(),
                    &|n| deployments.iter().find(|d| named(&d.metadata, n)).cloned(),
                )
            });
            if let Some(status) = status {
                let name = pdb.metadata.name.clone().unwrap_or_default();
                self.write_status(BUDGETS, namespace, &name, &status);
            }
        }
    }

    /// A controller's create of `object` in `namespace`, as its own write (refused ones are
    /// left, as a controller retries them later).
    pub(super) fn create_typed(
        &mut self,
        id: ResourceId,
        namespace: &str,
        object: &impl serde::Serialize,
    ) {
        if let Ok(body) = serde_json::to_value(object) {
            let _ = self.create(id, namespace, body, false);
        }
    }

    /// A controller's write of the status of `namespace/name`, as its own write.
    fn write_status(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        status: &impl serde::Serialize,
    ) {
        if let Ok(status) = serde_json::to_value(status) {
            let _ = self.modify(id, namespace, name, |o| {
                if let Value::Object(map) = o {
                    map.insert("status".into(), status);
                }
            });
        }
    }
}
