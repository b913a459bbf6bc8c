//! Update and patch (main resource and `status`), as kube-apiserver's registry strategies do
//! them: server-owned fields kept, subresource rules, validation of updates, generation.

use super::*;

impl State {
    /// PUT.
    pub(crate) fn update(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        sub: Sub,
        body: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        check_type_meta(d, &body)?;
        let old = self.get(id, namespace, name)?;
        let body_rv = meta(&body, "resourceVersion");
        if !body_rv.is_empty() && body_rv != meta(&old, "resourceVersion") {
            return Err(ApiError::stale(d, name));
        }
        // A uid in a PUT body is a precondition (`rest.DefaultUpdatedObjectInfo`), checked by
        // storage before anything else: a Conflict.
        let (body_uid, uid) = (meta(&body, "uid"), meta(&old, "uid"));
        if !body_uid.is_empty() && body_uid != uid {
            return Err(ApiError::precondition_failed(
                d.group, d.plural, name, "UID", body_uid, uid,
            ));
        }
        self.finish_update(id, namespace, name, sub, &old, body, dry_run)
    }

    /// PATCH.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        sub: Sub,
        kind: PatchType,
        patch: &Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let old = self.get(id, namespace, name)?;
        let mut new = old.value.clone();
        match kind {
            PatchType::Merge => patch::merge_patch(&mut new, patch),
            PatchType::Strategic => patch::strategic_merge(&mut new, patch, d.flavor)?,
            PatchType::Json => new = patch::json_patch(&new, patch)?,
        }
        let new_rv = meta(&new, "resourceVersion");
        if !new_rv.is_empty() && new_rv != meta(&old, "resourceVersion") {
            return Err(ApiError::stale(d, name));
        }
        // A patch carries no precondition: a uid it sets that is not the object's fails
        // `ValidateObjectMetaUpdate` (the uid is immutable), 422.
        let new_uid = meta(&new, "uid");
        if new_uid != meta(&old, "uid") {
            return Err(ApiError::invalid(
                d,
                name,
                &[(
                    "metadata.uid".to_string(),
                    format!("Invalid value: {}: field is immutable", json!(new_uid)),
                )],
            ));
        }
        self.finish_update(id, namespace, name, sub, &old, new, dry_run)
    }

    /// The shared tail of PUT and PATCH: `PrepareForUpdate`, validation, no-op detection, commit.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_update(
        &mut self,
        id: ResourceId,
        namespace: &str,
        name: &str,
        sub: Sub,
        old: &Arc<Stored>,
        mut new: Value,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let d = def(id);
        let new_name = meta(&new, "name");
        if !new_name.is_empty() && new_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({new_name}) does not match the name on the URL ({name})"
            )));
        }
        let new_ns = meta(&new, "namespace");
        if d.namespaced && !new_ns.is_empty() && new_ns != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        set_type_meta(d, &mut new);
        {
            let old_meta = old["metadata"].as_object().cloned().unwrap_or_default();
            let m = obj_mut(&mut new, "metadata");
            for field in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
                "resourceVersion",
            ] {
                match old_meta.get(field) {
                    Some(v) => m.insert(field.into(), v.clone()),
                    None => m.remove(field),
                };
            }
        }
        let copy_field = |to: &mut Value, from: &Value, field: &str| {
            if let Value::Object(map) = to {
                match from.get(field) {
                    Some(v) => map.insert(field.into(), v.clone()),
                    None => map.remove(field),
                };
            }
        };
        match sub {
            Sub::Main => {
                if d.has_status() {
                    copy_field(&mut new, old, "status");
                }
            }
            Sub::Status => match d.flavor {
                Flavor::Pod => {
                    copy_field(&mut new, old, "spec");
                    let owners = old["metadata"].get("ownerReferences").cloned();
                    let m = obj_mut(&mut new, "metadata");
                    match owners {
                        Some(o) => m.insert("ownerReferences".into(), o),
                        None => m.remove("ownerReferences"),
                    };
                    if new["status"]["qosClass"].is_null() && !old["status"]["qosClass"].is_null() {
                        obj_mut(&mut new, "status")
                            .insert("qosClass".into(), old["status"]["qosClass"].clone());
                    }
                }
                Flavor::Node | Flavor::Namespace => copy_field(&mut new, old, "spec"),
                _ => {
                    let status = new.get("status").cloned();
                    new = old.value.clone();
                    if let Value::Object(map) = &mut new {
                        match status {
                            Some(s) => map.insert("status".into(), s),
                            None => map.remove("status"),
                        };
                    }
                }
            },
        }
        admission::normalize_quantities(d.flavor, &mut new);
        if sub == Sub::Main {
            let causes = meta_causes(d, name, &new);
            if !causes.is_empty() {
                return Err(ApiError::invalid(d, name, &causes));
            }
        }
        if d.flavor == Flavor::Pod && sub == Sub::Main {
            let errors = admission::validate_pod_spec_update(old, &new);
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        if sub == Sub::Main {
            let errors = match d.flavor {
                Flavor::Volume => storage::validate_volume_update(old, &new),
                Flavor::Claim => storage::validate_claim_update(old, &new),
                Flavor::StorageClass => storage::validate_class_update(old, &new),
                Flavor::PodTemplate => {
                    admission::default_pod_template(&mut new);
                    podspec::validate_pod_spec(&new["template"]["spec"], "template.spec")
                }
                Flavor::ResourceClaim | Flavor::ClaimTemplate => {
                    dra::validate_spec_update(old, &new, "spec")
                }
                Flavor::DeviceClass => dra::validate_class(&new),
                Flavor::ResourceSlice => dra::validate_slice(&new),
                _ => Vec::new(),
            };
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        if d.flavor == Flavor::ResourceClaim && sub == Sub::Status {
            let errors = dra::validate_status_update(old, &new);
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        if d.flavor == Flavor::PriorityClass && old["value"] != new["value"] {
            return Err(ApiError::invalid(
                d,
                name,
                &[(
                    "value".into(),
                    "Forbidden: may not be changed in an update.".into(),
                )],
            ));
        }
        if d.tracks_generation() {
            let changed = match d.flavor {
                Flavor::Pod => old["spec"] != new["spec"],
                _ => generation_relevant(old) != generation_relevant(&new),
            };
            let generation =
                old["metadata"]["generation"].as_i64().unwrap_or(1) + i64::from(changed);
            obj_mut(&mut new, "metadata").insert("generation".into(), json!(generation));
        }
        if old.value == new || dry_run {
            // A write that changes nothing is not persisted: no new resourceVersion, no event.
            return Ok(new);
        }
        let key = key_of(d, namespace, name);
        let stored = self.commit(id, &key, Some(new), None);
        self.after_write(id, &key);
        let value = stored.value.clone();
        if d.flavor == Flavor::ResourceClaim {
            self.release_finalized(id, namespace, name);
        }
        Ok(value)
    }
}

/// Everything but `metadata` and `status`: what moves a custom resource's generation.
pub(super) fn generation_relevant(obj: &Value) -> Value {
    match obj {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| k.as_str() != "metadata" && k.as_str() != "status")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}
