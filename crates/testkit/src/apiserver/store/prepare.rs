//! kube-apiserver's `PrepareForCreate`, defaulting and admission per resource (RuntimeClass,
//! Priority, the built-in kinds' defaults and validation).

use super::*;

impl State {
    /// Per-resource defaulting, admission and `PrepareForCreate`.
    pub(super) fn prepare_create(
        &mut self,
        id: ResourceId,
        name: &str,
        obj: &mut Value,
    ) -> Result<(), ApiError> {
        let d = def(id);
        if d.group == "events.k8s.io" {
            let errors = admission::validate_v1_event(obj);
            if !errors.is_empty() {
                return Err(ApiError::invalid(d, name, &errors));
            }
        }
        match d.flavor {
            Flavor::Pod => {
                admission::default_pod(obj);
                self.admit_runtime_class(name, obj)?;
                self.admit_priority(name, obj)?;
                admission::add_default_tolerations(obj);
                admission::reset_pod_status(obj);
                let errors = podspec::validate_pod_spec(&obj["spec"], "spec");
                if !errors.is_empty() {
                    return Err(ApiError::invalid(d, name, &errors));
                }
            }
            Flavor::PodTemplate => {
                admission::default_pod_template(obj);
                let errors = podspec::validate_pod_spec(&obj["template"]["spec"], "template.spec");
                if !errors.is_empty() {
                    return Err(ApiError::invalid(d, name, &errors));
                }
            }
            Flavor::Node => admission::add_not_ready_taint(obj),
            Flavor::Namespace => {
                obj_mut(obj, "metadata")
                    .entry("labels")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .map(|l| l.insert("kubernetes.io/metadata.name".into(), json!(name)));
                obj_mut(obj, "spec").insert("finalizers".into(), json!(["kubernetes"]));
                if let Value::Object(map) = obj {
                    map.insert("status".into(), json!({"phase": "Active"}));
                }
            }
            Flavor::Custom => {
                if d.has_status() {
                    if let Value::Object(map) = obj {
                        map.remove("status");
                    }
                }
            }
            Flavor::Crd => {
                let expected = format!(
                    "{}.{}",
                    obj["spec"]["names"]["plural"].as_str().unwrap_or_default(),
                    obj["spec"]["group"].as_str().unwrap_or_default()
                );
                if expected != name {
                    return Err(ApiError::invalid(
                        d,
                        name,
                        &[(
                            "metadata.name".into(),
                            format!("Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"),
                        )],
                    ));
                }
                let status = admission::established_crd_status(obj);
                if let Value::Object(map) = obj {
                    map.insert("status".into(), status);
                }
            }
            Flavor::PriorityClass => {
                let Some(value) = obj["value"].as_i64() else {
                    return Err(ApiError::invalid(
                        d,
                        name,
                        &[("value".into(), "Required value".into())],
                    ));
                };
                if value > 1_000_000_000 && !name.starts_with("system-") {
                    return Err(ApiError::invalid(
                        d,
                        name,
                        &[(
                            "value".into(),
                            "Forbidden: maximum allowed value of a user defined priority is 1000000000".into(),
                        )],
                    ));
                }
                if obj["globalDefault"] == true {
                    let existing = self
                        .all(PRIORITY_CLASSES)
                        .find(|pc| pc["globalDefault"] == true)
                        .map(|pc| meta(pc, "name").to_string());
                    if let Some(existing) = existing {
                        return Err(ApiError::forbidden(
                            d,
                            name,
                            &format!("PriorityClass {existing} is already marked as default. Only one default can exist"),
                        ));
                    }
                }
                if let Value::Object(map) = obj {
                    map.entry("preemptionPolicy")
                        .or_insert_with(|| json!("PreemptLowerPriority"));
                }
            }
            Flavor::Budget => {
                // `PrepareForCreate`: the status starts empty (Go's zero values).
                if let Value::Object(map) = obj {
                    map.insert(
                        "status".into(),
                        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}),
                    );
                }
                obj_mut(obj, "metadata").insert("generation".into(), json!(1));
            }
            Flavor::Volume => {
                storage::prepare_volume(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::Claim => {
                let classes: Vec<StorageClass> = self
                    .all(STORAGE_CLASSES)
                    .filter_map(|c| serde_json::from_value(c.value.clone()).ok())
                    .collect();
                storage::prepare_claim(obj, &classes).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::StorageClass => {
                storage::prepare_class(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::Job => prepare_job(obj).map_err(|c| ApiError::invalid(d, name, &c))?,
            Flavor::Apps => prepare_apps(obj).map_err(|c| ApiError::invalid(d, name, &c))?,
            Flavor::NativePodGroup => {
                // kube-apiserver drops the status on create and adds the protection finalizer
                // (kube-controller-manager's podgroup-protection controller removes it once no
                // live pod names the group).
                if let Value::Object(map) = obj {
                    map.remove("status");
                }
                let m = obj_mut(obj, "metadata");
                let finalizers = m.entry("finalizers").or_insert_with(|| json!([]));
                if let Value::Array(list) = finalizers {
                    if !list.iter().any(|f| f == PODGROUP_PROTECTION) {
                        list.push(json!(PODGROUP_PROTECTION));
                    }
                }
                m.insert("generation".into(), json!(1));
            }
            Flavor::ResourceClaim => {
                dra::prepare_claim(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::ClaimTemplate => {
                dra::prepare_template(obj).map_err(|c| ApiError::invalid(d, name, &c))?
            }
            Flavor::DeviceClass | Flavor::ResourceSlice => {
                let causes = if d.flavor == Flavor::DeviceClass {
                    dra::validate_class(obj)
                } else {
                    dra::validate_slice(obj)
                };
                if !causes.is_empty() {
                    return Err(ApiError::invalid(d, name, &causes));
                }
            }
            Flavor::CoreEvent
            | Flavor::EventV1
            | Flavor::Lease
            | Flavor::RuntimeClass
            | Flavor::Binding => {}
        }
        Ok(())
    }

    /// RuntimeClass admission: overhead comes only from the pod's RuntimeClass.
    pub(super) fn admit_runtime_class(&self, name: &str, pod: &mut Value) -> Result<(), ApiError> {
        let pods = def(PODS);
        let has_overhead = !pod["spec"]["overhead"].is_null();
        let class_name = pod["spec"]["runtimeClassName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if class_name.is_empty() {
            if has_overhead {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
                ));
            }
            return Ok(());
        }
        let Some(class) = self.lookup(RUNTIME_CLASSES, "", &class_name).cloned() else {
            return Err(ApiError::forbidden(
                pods,
                name,
                &format!("pod rejected: RuntimeClass \"{class_name}\" not found"),
            ));
        };
        let fixed = &class["overhead"]["podFixed"];
        let spec = obj_mut(pod, "spec");
        if fixed.is_object() {
            if has_overhead && spec.get("overhead") != Some(fixed) {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead",
                ));
            }
            spec.insert("overhead".into(), fixed.clone());
        } else if has_overhead {
            return Err(ApiError::forbidden(
                pods,
                name,
                "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead",
            ));
        }
        if let Some(selector) = class["scheduling"]["nodeSelector"].as_object() {
            let pod_selector = spec.entry("nodeSelector").or_insert_with(|| json!({}));
            if let Value::Object(pod_selector) = pod_selector {
                for (k, v) in selector {
                    match pod_selector.get(k) {
                        Some(existing) if existing != v => {
                            return Err(ApiError::forbidden(
                                pods,
                                name,
                                &format!(
                                    "conflict: runtimeClass.scheduling.nodeSelector[{k}] = {}; pod.spec.nodeSelector[{k}] = {}",
                                    v.as_str().unwrap_or_default(),
                                    existing.as_str().unwrap_or_default()
                                ),
                            ))
                        }
                        _ => {
                            pod_selector.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
        }
        if let Some(tolerations) = class["scheduling"]["tolerations"].as_array() {
            let list = spec.entry("tolerations").or_insert_with(|| json!([]));
            if let Value::Array(list) = list {
                for t in tolerations {
                    if !list.contains(t) {
                        list.push(t.clone());
                    }
                }
            }
        }
        Ok(())
    }

    /// Priority admission: resolve `priorityClassName` (or the global default) into `priority`.
    pub(super) fn admit_priority(&self, name: &str, pod: &mut Value) -> Result<(), ApiError> {
        let pods = def(PODS);
        let class_name = pod["spec"]["priorityClassName"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (class_name, value, policy) = if class_name.is_empty() {
            let default = self
                .all(PRIORITY_CLASSES)
                .filter(|pc| pc["globalDefault"] == true)
                .min_by_key(|pc| pc["value"].as_i64().unwrap_or_default());
            match default {
                Some(pc) => (
                    meta(pc, "name").to_string(),
                    pc["value"].as_i64().unwrap_or_default(),
                    pc["preemptionPolicy"].as_str().map(str::to_string),
                ),
                None => (String::new(), 0, None),
            }
        } else {
            let Some(pc) = self.lookup(PRIORITY_CLASSES, "", &class_name) else {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    &format!("no PriorityClass with name {class_name} was found"),
                ));
            };
            (
                class_name,
                pc["value"].as_i64().unwrap_or_default(),
                pc["preemptionPolicy"].as_str().map(str::to_string),
            )
        };
        let spec = obj_mut(pod, "spec");
        if let Some(given) = spec.get("priority").and_then(Value::as_i64) {
            if given != value {
                return Err(ApiError::forbidden(
                    pods,
                    name,
                    &format!("the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"),
                ));
            }
        }
        if !class_name.is_empty() {
            spec.insert("priorityClassName".into(), json!(class_name));
        }
        spec.insert("priority".into(), json!(value));
        let policy = policy.unwrap_or_else(|| "PreemptLowerPriority".to_string());
        spec.entry("preemptionPolicy")
            .or_insert_with(|| json!(policy));
        Ok(())
    }
}

/// kube-apiserver's defaulting and validation of a new `batch/v1` Job (what a scheduler's
/// view depends on); its status is the Job controller's.
pub(super) fn prepare_job(obj: &mut Value) -> Result<(), Vec<(String, String)>> {
    let restart = obj["spec"]["template"]["spec"]["restartPolicy"].as_str();
    if !matches!(restart, Some("Never" | "OnFailure")) {
        return Err(vec![(
            "spec.template.spec.restartPolicy".into(),
            format!(
                "Unsupported value: \"{}\": supported values: \"OnFailure\", \"Never\"",
                restart.unwrap_or("Always")
            ),
        )]);
    }
    if let Value::Object(map) = obj {
        map.remove("status");
    }
    let spec = obj_mut(obj, "spec");
    if spec.get("completions").is_none() && spec.get("parallelism").is_none() {
        spec.insert("completions".into(), json!(1));
    }
    spec.entry("parallelism").or_insert_with(|| json!(1));
    spec.entry("backoffLimit").or_insert_with(|| json!(6));
    spec.entry("completionMode")
        .or_insert_with(|| json!("NonIndexed"));
    spec.entry("suspend").or_insert_with(|| json!(false));
    Ok(())
}

/// kube-apiserver's defaulting and validation of a new `apps/v1` ReplicaSet or Deployment
/// (what a scheduler's view depends on): `replicas` 1, a selector that selects the template's
/// labels; its status is the controller's.
pub(super) fn prepare_apps(obj: &mut Value) -> Result<(), Vec<(String, String)>> {
    let selector = serde_json::from_value::<
        k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    >(obj["spec"]["selector"].clone())
    .ok();
    let template = serde_json::from_value::<PodTemplateSpec>(obj["spec"]["template"].clone()).ok();
    caldera_actors::replicaset::validate(selector.as_ref(), template.as_ref())
        .map_err(|e| vec![e])?;
    if let Value::Object(map) = obj {
        map.remove("status");
    }
    obj_mut(obj, "spec")
        .entry("replicas")
        .or_insert_with(|| json!(1));
    Ok(())
}
