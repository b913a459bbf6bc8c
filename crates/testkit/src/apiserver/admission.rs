//! What kube-apiserver does to objects besides storing them: defaulting (`SetDefaults_*`),
//! the built-in admission plugins that matter to a scheduler (Priority, RuntimeClass,
//! DefaultTolerationSeconds, TaintNodesByCondition), strategy validation, and the two
//! controllers whose effects a scheduler waits for (node lifecycle taints, CRD establishment).

use serde_json::{json, Map, Value};

use super::resources::Flavor;
use super::time;

pub(crate) const NOT_READY: &str = "node.kubernetes.io/not-ready";
pub(crate) const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// Returns the object map at `obj[key]`, creating it (or replacing a non-object) first.
pub(crate) fn obj_mut<'a>(obj: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(map) = obj else {
        unreachable!("obj was made an object above")
    };
    let slot = map.entry(key.to_string()).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    match slot {
        Value::Object(inner) => inner,
        _ => unreachable!("slot was made an object above"),
    }
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), value);
    }
}

fn default_container(c: &mut Value) {
    let Value::Object(map) = c else { return };
    set_default(map, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(map, "terminationMessagePolicy", json!("File"));
    let image = map.get("image").and_then(Value::as_str).unwrap_or_default();
    let tag = image.rsplit('/').next().unwrap_or_default();
    let pull = if image.contains('@') || (tag.contains(':') && !tag.ends_with(":latest")) {
        "IfNotPresent"
    } else {
        "Always"
    };
    set_default(map, "imagePullPolicy", json!(pull));
    let resources = map.entry("resources").or_insert_with(|| json!({}));
    if let Value::Object(res) = resources {
        // SetDefaults_ResourceRequirements: a limit without a request becomes the request.
        if let Some(Value::Object(limits)) = res.get("limits").cloned() {
            let requests = res.entry("requests").or_insert_with(|| json!({}));
            if let Value::Object(requests) = requests {
                for (name, qty) in limits {
                    requests.entry(name).or_insert(qty);
                }
            }
        }
    }
    if let Some(Value::Array(ports)) = map.get_mut("ports") {
        for port in ports {
            if let Value::Object(p) = port {
                set_default(p, "protocol", json!("TCP"));
            }
        }
    }
}

/// A quantity sent as a JSON number, in the string form `resource.Quantity` marshals to.
fn quantity_string(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    let f = n.as_f64().unwrap_or_default();
    let milli = f * 1000.0;
    if milli.fract() == 0.0 && milli.abs() < 9.0e15 {
        format!("{}m", milli as i64)
    } else {
        f.to_string()
    }
}

fn normalize_list(list: &mut Value) {
    if let Value::Object(map) = list {
        for v in map.values_mut() {
            if let Value::Number(n) = v {
                *v = Value::String(quantity_string(n));
            }
        }
    }
}

/// The value at `path`, without creating anything on the way (unlike `IndexMut`).
fn at<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(value, |v, key| v.get_mut(*key))
}

/// Built-in types hold quantities as `resource.Quantity`, which the real server always writes
/// back as strings; a client that sent `{"cpu": 1}` reads `{"cpu": "1"}`. (Custom resources
/// keep numbers: their schemas say int-or-string.)
pub(crate) fn normalize_quantities(flavor: Flavor, obj: &mut Value) {
    match flavor {
        Flavor::Pod | Flavor::PodTemplate => {
            let spec: &[&str] = if flavor == Flavor::Pod {
                &["spec"]
            } else {
                &["template", "spec"]
            };
            for list in ["containers", "initContainers"] {
                let path: Vec<&str> = spec.iter().copied().chain([list]).collect();
                if let Some(Value::Array(cs)) = at(obj, &path) {
                    for c in cs {
                        for kind in ["requests", "limits"] {
                            if let Some(l) = at(c, &["resources", kind]) {
                                normalize_list(l);
                            }
                        }
                    }
                }
            }
            let path: Vec<&str> = spec.iter().copied().chain(["overhead"]).collect();
            if let Some(l) = at(obj, &path) {
                normalize_list(l);
            }
            for kind in ["requests", "limits"] {
                if let Some(l) = at(obj, &["spec", "resources", kind]) {
                    normalize_list(l);
                }
            }
        }
        Flavor::Node => {
            for kind in ["capacity", "allocatable"] {
                if let Some(l) = at(obj, &["status", kind]) {
                    normalize_list(l);
                }
            }
        }
        Flavor::RuntimeClass => {
            if let Some(l) = at(obj, &["overhead", "podFixed"]) {
                normalize_list(l);
            }
        }
        _ => {}
    }
}

/// `SetDefaults_Pod` / `SetDefaults_PodSpec` / container defaults, for the fields a scheduler reads.
pub(crate) fn default_pod(pod: &mut Value) {
    default_pod_spec(obj_mut(pod, "spec"));
}

/// `SetDefaults_PodTemplate`: a PodTemplate's pod spec is defaulted as a Pod's is.
pub(crate) fn default_pod_template(template: &mut Value) {
    let spec = obj_mut(template, "template");
    let spec = spec.entry("spec").or_insert_with(|| json!({}));
    if let Value::Object(spec) = spec {
        default_pod_spec(spec);
    }
}

fn default_pod_spec(spec: &mut Map<String, Value>) {
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            containers.iter_mut().for_each(default_container);
        }
    }
}

/// DefaultTolerationSeconds admission: tolerate not-ready/unreachable NoExecute for 300s unless
/// the pod already says something about them.
pub(crate) fn add_default_tolerations(pod: &mut Value) {
    let spec = obj_mut(pod, "spec");
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Value::Array(list) = tolerations else {
        return;
    };
    for key in [NOT_READY, UNREACHABLE] {
        let covered = list.iter().any(|t| {
            let t_key = t["key"].as_str().unwrap_or_default();
            let effect = t["effect"].as_str().unwrap_or_default();
            let op_exists = t["operator"].as_str() == Some("Exists");
            (t_key == key || (t_key.is_empty() && op_exists))
                && (effect.is_empty() || effect == "NoExecute")
        });
        if !covered {
            list.push(json!({
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300
            }));
        }
    }
}

/// `qos.GetPodQOS`, comparing quantities as written (after request defaulting they are copies).
pub(crate) fn pod_qos(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| pod["spec"][k].as_array())
        .flatten()
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        for r in ["cpu", "memory"] {
            let req = c["resources"]["requests"][r]
                .as_str()
                .map(str::to_string)
                .or_else(|| {
                    c["resources"]["requests"][r]
                        .as_f64()
                        .map(|f| f.to_string())
                });
            let lim = c["resources"]["limits"][r]
                .as_str()
                .map(str::to_string)
                .or_else(|| c["resources"]["limits"][r].as_f64().map(|f| f.to_string()));
            if req.is_some() || lim.is_some() {
                any = true;
            }
            if lim.is_none() || req != lim {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// `podStrategy.PrepareForCreate`: the status a client sends is replaced.
pub(crate) fn reset_pod_status(pod: &mut Value) {
    let qos = pod_qos(pod);
    let gated = pod["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|g| !g.is_empty());
    let mut status = json!({"phase": "Pending", "qosClass": qos});
    if gated {
        status["conditions"] = json!([{
            "type": "PodScheduled",
            "status": "False",
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
            "lastProbeTime": null,
            "lastTransitionTime": time::now(),
        }]);
    }
    if let Value::Object(map) = pod {
        map.insert("status".into(), status);
    }
}

/// `podutil.UpdatePodCondition` for PodScheduled=True, as the binding subresource does.
pub(crate) fn set_pod_scheduled(pod: &mut Value) {
    let status = obj_mut(pod, "status");
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Value::Array(list) = conditions else {
        return;
    };
    let now = time::now();
    match list.iter_mut().find(|c| c["type"] == "PodScheduled") {
        Some(Value::Object(c)) => {
            if c.get("status").and_then(Value::as_str) != Some("True") {
                c.insert("lastTransitionTime".into(), json!(now));
            }
            c.insert("status".into(), json!("True"));
            c.remove("reason");
            c.remove("message");
        }
        _ => list.push(json!({
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": null,
            "lastTransitionTime": now,
        })),
    }
}

/// A list field, `[]` when absent or null.
fn list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// kube-apiserver's `validateNodeSelectorMutation` for a gated pod: existing keys may be
/// neither removed nor changed.
fn node_selector_mutation(old: &Value, new: &Value) -> Option<(String, String)> {
    let old = old.as_object()?;
    let changed = old.iter().any(|(k, v)| new.get(k) != Some(v));
    changed.then(|| {
        (
            "spec.nodeSelector".to_string(),
            format!(
                "Invalid value: {new}: only additions to spec.nodeSelector are allowed (no mutations or deletions)"
            ),
        )
    })
}

/// kube-apiserver's `validateNodeAffinityMutation` for a gated pod: with required terms
/// already set, the number of terms stays, and each term keeps its `matchExpressions` and
/// `matchFields` as a prefix (requirements may only be appended). Anything may be set when
/// there were no required terms; preferred terms may change freely.
fn node_affinity_mutation(old: &Value, new: &Value) -> Vec<(String, String)> {
    let path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let required = |v: &Value| v["requiredDuringSchedulingIgnoredDuringExecution"].clone();
    if required(old).is_null() {
        return Vec::new();
    }
    let old_terms = list(&required(old)["nodeSelectorTerms"]);
    let new_terms = list(&required(new)["nodeSelectorTerms"]);
    if !old_terms.is_empty() && old_terms.len() != new_terms.len() {
        return vec![(
            path.to_string(),
            "Invalid value: no additions/deletions to non-empty NodeSelectorTerms list are allowed"
                .to_string(),
        )];
    }
    let only_additions = |new: &Value, old: &Value| {
        let (oe, of) = (list(&old["matchExpressions"]), list(&old["matchFields"]));
        let (ne, nf) = (list(&new["matchExpressions"]), list(&new["matchFields"]));
        if oe.is_empty() && of.is_empty() && (!ne.is_empty() || !nf.is_empty()) {
            return false;
        }
        ne.starts_with(&oe) && nf.starts_with(&of)
    };
    old_terms
        .iter()
        .zip(&new_terms)
        .enumerate()
        .filter(|(_, (o, n))| !only_additions(n, o))
        .map(|(i, _)| {
            (
                format!("{path}[{i}]"),
                "Invalid value: only additions are allowed (no mutations or deletions)".to_string(),
            )
        })
        .collect()
}

/// Fields of a pod spec an update may change (kube-apiserver's `ValidatePodUpdate`), checked by
/// comparing the specs with those fields masked. While the pod is gated (before the update),
/// `nodeSelector` may gain keys and the required node affinity may gain requirements (see
/// [`node_selector_mutation`], [`node_affinity_mutation`]). Returns the field errors.
pub(crate) fn validate_pod_spec_update(old: &Value, new: &Value) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let mut masked_old = old["spec"].clone();
    let mut masked_new = new["spec"].clone();
    let gated = old["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|g| !g.is_empty());
    if gated {
        let (old_spec, new_spec) = (&old["spec"], &new["spec"]);
        if old_spec["nodeSelector"] != new_spec["nodeSelector"] {
            errors.extend(node_selector_mutation(
                &old_spec["nodeSelector"],
                &new_spec["nodeSelector"],
            ));
            if let Value::Object(m) = &mut masked_new {
                match old_spec.get("nodeSelector") {
                    Some(v) => m.insert("nodeSelector".into(), v.clone()),
                    None => m.remove("nodeSelector"),
                };
            }
        }
        let old_na = &old_spec["affinity"]["nodeAffinity"];
        let new_na = &new_spec["affinity"]["nodeAffinity"];
        if old_na != new_na {
            errors.extend(node_affinity_mutation(old_na, new_na));
            // Mask the node affinity: the new spec takes the old one (an affinity that held
            // only the node affinity goes when the old pod had none).
            if let Value::Object(m) = &mut masked_new {
                let mut affinity = m.get("affinity").cloned().unwrap_or(Value::Null);
                if let Value::Object(a) = &mut affinity {
                    match old_spec["affinity"].get("nodeAffinity") {
                        Some(v) => a.insert("nodeAffinity".into(), v.clone()),
                        None => a.remove("nodeAffinity"),
                    };
                    if a.is_empty() && old_spec.get("affinity").is_none() {
                        affinity = Value::Null;
                    }
                }
                match affinity {
                    Value::Null => m.remove("affinity"),
                    a => m.insert("affinity".into(), a),
                };
            }
        }
    }
    for spec in [&mut masked_old, &mut masked_new] {
        if let Value::Object(map) = spec {
            for field in [
                "activeDeadlineSeconds",
                "tolerations",
                "terminationGracePeriodSeconds",
                "schedulingGates",
            ] {
                map.remove(field);
            }
            for list in ["containers", "initContainers"] {
                if let Some(Value::Array(cs)) = map.get_mut(list) {
                    for c in cs {
                        if let Value::Object(c) = c {
                            c.remove("image");
                        }
                    }
                }
            }
        }
    }
    if masked_old != masked_new {
        errors.push((
            "spec".to_string(),
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".to_string(),
        ));
    }
    let old_tolerations = old["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let new_tolerations = new["spec"]["tolerations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if old_tolerations.iter().any(|t| !new_tolerations.contains(t)) {
        errors.push((
            "spec.tolerations".to_string(),
            "Forbidden: existing toleration can not be modified except its tolerationSeconds"
                .to_string(),
        ));
    }
    let old_gates = old["spec"]["schedulingGates"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if let Some(new_gates) = new["spec"]["schedulingGates"].as_array() {
        if let Some(added) = new_gates.iter().find(|g| !old_gates.contains(g)) {
            errors.push((
                "spec.schedulingGates".to_string(),
                format!(
                    "Forbidden: only deletion is allowed, but found new scheduling gate '{}'",
                    added["name"].as_str().unwrap_or_default()
                ),
            ));
        }
    }
    errors
}

/// The NoSchedule taints the node lifecycle controller keeps in step with node conditions
/// (`doNoScheduleTaintingPass`). Returns the node's new taint list when it must change.
pub(crate) fn sync_condition_taints(node: &Value) -> Option<Vec<Value>> {
    let managed = [
        NOT_READY,
        UNREACHABLE,
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/network-unavailable",
        "node.kubernetes.io/pid-pressure",
        UNSCHEDULABLE,
    ];
    let mut desired: Vec<&str> = Vec::new();
    for c in node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let status = c["status"].as_str().unwrap_or_default();
        let key = match (c["type"].as_str().unwrap_or_default(), status) {
            ("Ready", "False") => Some(NOT_READY),
            ("Ready", "Unknown") => Some(UNREACHABLE),
            ("MemoryPressure", "True") => Some("node.kubernetes.io/memory-pressure"),
            ("DiskPressure", "True") => Some("node.kubernetes.io/disk-pressure"),
            ("NetworkUnavailable", "True") => Some("node.kubernetes.io/network-unavailable"),
            ("PIDPressure", "True") => Some("node.kubernetes.io/pid-pressure"),
            _ => None,
        };
        desired.extend(key);
    }
    if node["spec"]["unschedulable"].as_bool() == Some(true) {
        desired.push(UNSCHEDULABLE);
    }
    let current: Vec<Value> = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let is_managed = |t: &Value| {
        t["effect"] == "NoSchedule" && managed.contains(&t["key"].as_str().unwrap_or_default())
    };
    let present: Vec<&str> = current
        .iter()
        .filter(|t| is_managed(t))
        .filter_map(|t| t["key"].as_str())
        .collect();
    let unchanged = present.len() == desired.len() && desired.iter().all(|k| present.contains(k));
    if unchanged {
        return None;
    }
    let mut next: Vec<Value> = current
        .iter()
        .filter(|t| !is_managed(t) || desired.contains(&t["key"].as_str().unwrap_or_default()))
        .cloned()
        .collect();
    for key in desired {
        if !present.contains(&key) {
            next.push(json!({"key": key, "effect": "NoSchedule"}));
        }
    }
    Some(next)
}

/// TaintNodesByCondition admission: every new node starts not-ready.
pub(crate) fn add_not_ready_taint(node: &mut Value) {
    let spec = obj_mut(node, "spec");
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if !taints.is_array() {
        *taints = json!([]);
    }
    if let Value::Array(list) = taints {
        let present = list
            .iter()
            .any(|t| t["key"] == NOT_READY && t["effect"] == "NoSchedule");
        if !present {
            list.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
        }
    }
}

/// What the CRD controllers write once a CustomResourceDefinition's names are accepted.
pub(crate) fn established_crd_status(crd: &Value) -> Value {
    let now = time::now();
    let mut names = crd["spec"]["names"].clone();
    if let Value::Object(n) = &mut names {
        let kind = n
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let plural = n
            .get("plural")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        set_default(n, "singular", json!(plural.trim_end_matches('s')));
        set_default(n, "listKind", json!(format!("{kind}List")));
    }
    let stored: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"] == true)
        .map(|v| v["name"].clone())
        .collect();
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
        ],
        "acceptedNames": names,
        "storedVersions": stored
    })
}

/// kube-apiserver's strict checks of an Event created through `events.k8s.io/v1`
/// (`ValidateEventCreate`): `eventTime`, `reportingController`, `reportingInstance`, `action`
/// and `reason` are required, `type` is `Normal` or `Warning`, `note` is at most 1 kB, the
/// legacy `count`/`firstTimestamp`/`lastTimestamp` are unset, and a `series` has a `count` of at
/// least 2 and a `lastObservedTime`.
pub(crate) fn validate_v1_event(event: &Value) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let set = |field: &str| event[field].as_str().is_some_and(|s| !s.is_empty());
    for field in [
        "eventTime",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        if !set(field) {
            errors.push((field.to_string(), "Required value".to_string()));
        }
    }
    if !matches!(event["type"].as_str(), Some("Normal" | "Warning")) {
        errors.push((
            "type".into(),
            format!(
                "Unsupported value: {}: supported values: \"Normal\", \"Warning\"",
                event["type"]
            ),
        ));
    }
    if event["note"].as_str().is_some_and(|n| n.len() > 1024) {
        errors.push((
            "note".into(),
            "Too long: may not be more than 1024 bytes".into(),
        ));
    }
    for legacy in [
        "deprecatedCount",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
    ] {
        if !event[legacy].is_null() && event[legacy] != 0 {
            errors.push((legacy.into(), "Invalid value: needs to be unset".into()));
        }
    }
    let series = &event["series"];
    if !series.is_null() {
        if series["count"].as_i64().is_none_or(|c| c < 2) {
            errors.push((
                "series.count".into(),
                "Invalid value: should be at least 2".into(),
            ));
        }
        if series["lastObservedTime"]
            .as_str()
            .is_none_or(|t| t.is_empty())
        {
            errors.push(("series.lastObservedTime".into(), "Required value".into()));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_defaults_copy_limits_into_requests() {
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.36",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        default_pod(&mut pod);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(
            c["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(pod["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod_qos(&pod), "Guaranteed");
    }

    #[test]
    fn numeric_quantities_become_strings_on_built_in_types() {
        let mut pod = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": 0.5, "memory": 1024}}}]}});
        normalize_quantities(Flavor::Pod, &mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "500m", "memory": "1024"})
        );
        let mut pg = json!({"spec": {"minResources": {"cpu": 2}}});
        normalize_quantities(Flavor::Custom, &mut pg);
        assert_eq!(pg["spec"]["minResources"]["cpu"], 2);
    }

    #[test]
    fn qos_classes() {
        let best_effort = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(pod_qos(&best_effort), "BestEffort");
        let burstable = json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(pod_qos(&burstable), "Burstable");
    }

    #[test]
    fn condition_taints_follow_ready() {
        let ready = json!({"spec": {"taints": [{"key": NOT_READY, "effect": "NoSchedule"},
            {"key": "gpu", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(
            sync_condition_taints(&ready),
            Some(vec![json!({"key": "gpu", "effect": "NoSchedule"})])
        );
        let not_ready =
            json!({"spec": {}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert_eq!(
            sync_condition_taints(&not_ready),
            Some(vec![json!({"key": UNREACHABLE, "effect": "NoSchedule"})])
        );
        let settled = json!({"spec": {"taints": [{"key": UNREACHABLE, "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert_eq!(sync_condition_taints(&settled), None);
    }

    #[test]
    fn pod_update_may_only_touch_mutable_fields() {
        let old = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "schedulingGates": [{"name": "g"}]}});
        let image =
            json!({"spec": {"containers": [{"name": "c", "image": "b"}], "schedulingGates": []}});
        assert!(validate_pod_spec_update(&old, &image).is_empty());
        let node = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "schedulingGates": [{"name": "g"}], "nodeName": "n"}});
        assert_eq!(validate_pod_spec_update(&old, &node).len(), 1);
        let gate = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "schedulingGates": [{"name": "g"}, {"name": "h"}]}});
        assert_eq!(validate_pod_spec_update(&old, &gate).len(), 1);
    }

    #[test]
    fn gated_pods_may_only_narrow_their_placement() {
        let term = |e: Value, f: Value| json!({"matchExpressions": e, "matchFields": f});
        let pod = |gates: Value, selector: Value, terms: Option<Vec<Value>>| {
            let mut spec = json!({"containers": [{"name": "c", "image": "a"}],
                "schedulingGates": gates, "nodeSelector": selector});
            if let Some(t) = terms {
                spec["affinity"] = json!({"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": t}}});
            }
            json!({ "spec": spec })
        };
        let zone = json!([{"key": "zone", "operator": "In", "values": ["a"]}]);
        let pin = json!([{"key": "metadata.name", "operator": "In", "values": ["n1"]}]);
        let gate = json!([{"name": "g"}]);
        let old = pod(
            gate.clone(),
            json!({"pool": "gpu"}),
            Some(vec![term(zone.clone(), json!(null))]),
        );
        // Caldera's release: the pin appended to the term, the gate removed, one update.
        let released = pod(
            json!(null),
            json!({"pool": "gpu", "extra": "x"}),
            Some(vec![term(zone.clone(), pin.clone())]),
        );
        assert_eq!(validate_pod_spec_update(&old, &released), vec![]);
        // Changing a selector value, replacing a requirement, or adding a term is refused.
        let mutated = pod(
            gate.clone(),
            json!({"pool": "cpu"}),
            Some(vec![term(zone.clone(), json!(null))]),
        );
        assert_eq!(
            validate_pod_spec_update(&old, &mutated)[0].0,
            "spec.nodeSelector"
        );
        let replaced = pod(
            gate.clone(),
            json!({"pool": "gpu"}),
            Some(vec![term(json!(null), pin.clone())]),
        );
        assert!(validate_pod_spec_update(&old, &replaced)[0]
            .1
            .contains("only additions are allowed"));
        let more = pod(
            gate.clone(),
            json!({"pool": "gpu"}),
            Some(vec![
                term(zone.clone(), json!(null)),
                term(zone.clone(), pin.clone()),
            ]),
        );
        assert!(validate_pod_spec_update(&old, &more)[0]
            .1
            .contains("no additions/deletions"));
        // A pod without required affinity may get any.
        let bare = pod(gate, json!({"pool": "gpu"}), None);
        assert_eq!(validate_pod_spec_update(&bare, &released), vec![]);
        // Once ungated, nothing of it may change.
        let ungated = pod(
            json!(null),
            json!({"pool": "gpu"}),
            Some(vec![term(zone, json!(null))]),
        );
        assert_eq!(validate_pod_spec_update(&ungated, &released).len(), 1);
    }

    #[test]
    fn v1_events_are_validated_like_the_api_server_does() {
        let ok = json!({"eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "c",
            "reportingInstance": "i", "action": "Binding", "reason": "Scheduled", "type": "Normal",
            "note": "n", "series": {"count": 3, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}});
        assert!(
            validate_v1_event(&ok).is_empty(),
            "{:?}",
            validate_v1_event(&ok)
        );
        let mut bad = ok.clone();
        bad["series"]["count"] = json!(1);
        bad["type"] = json!("Info");
        bad.as_object_mut().unwrap().remove("eventTime");
        let fields: Vec<String> = validate_v1_event(&bad)
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(fields, ["eventTime", "type", "series.count"]);
    }
}
