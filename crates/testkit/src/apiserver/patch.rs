//! The three patch formats kube-apiserver accepts besides server-side apply: JSON merge patch
//! (RFC 7386), JSON patch (RFC 6902) and strategic merge patch with the merge keys of the
//! built-in types served here.

use serde_json::{Map, Value};

use super::resources::Flavor;
use super::status::ApiError;

/// RFC 7386: objects merge recursively, `null` deletes, anything else replaces.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target_map) = target {
        for (key, value) in patch_map {
            if value.is_null() {
                target_map.remove(key);
            } else {
                merge_patch(target_map.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

fn pointer_tokens(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("JSON pointer {pointer:?} must start with '/'"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn array_index(token: &str, len: usize, allow_end: bool) -> Result<usize, String> {
    if allow_end && token == "-" {
        return Ok(len);
    }
    let index: usize = token
        .parse()
        .map_err(|_| format!("invalid array index {token:?}"))?;
    let limit = if allow_end {
        len
    } else {
        len.saturating_sub(1)
    };
    if index > limit || (!allow_end && len == 0) {
        return Err(format!("array index {index} out of bounds"));
    }
    Ok(index)
}

fn parent_mut<'a>(
    doc: &'a mut Value,
    tokens: &[String],
    path: &str,
) -> Result<&'a mut Value, String> {
    let mut current = doc;
    for token in tokens {
        current = match current {
            Value::Object(map) => map
                .get_mut(token)
                .ok_or_else(|| format!("doc is missing path: {path:?}: missing value"))?,
            Value::Array(items) => {
                let i = array_index(token, items.len(), false)?;
                &mut items[i]
            }
            _ => return Err(format!("doc is missing path: {path:?}: missing value")),
        };
    }
    Ok(current)
}

fn get_path<'a>(doc: &'a Value, path: &str) -> Result<&'a Value, String> {
    let tokens = pointer_tokens(path)?;
    let mut current = doc;
    for token in &tokens {
        current = match current {
            Value::Object(map) => map
                .get(token)
                .ok_or_else(|| format!("doc is missing path: {path:?}: missing value"))?,
            Value::Array(items) => &items[array_index(token, items.len(), false)?],
            _ => return Err(format!("doc is missing path: {path:?}: missing value")),
        };
    }
    Ok(current)
}

fn add_path(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let tokens = pointer_tokens(path)?;
    let Some((last, parents)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parents, path)? {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) => {
            let i = array_index(last, items.len(), true)?;
            items.insert(i, value);
            Ok(())
        }
        _ => Err(format!("doc is missing path: {path:?}: missing value")),
    }
}

fn remove_path(doc: &mut Value, path: &str) -> Result<Value, String> {
    let tokens = pointer_tokens(path)?;
    let Some((last, parents)) = tokens.split_last() else {
        return Err("cannot remove the document root".to_string());
    };
    match parent_mut(doc, parents, path)? {
        Value::Object(map) => map
            .remove(last)
            .ok_or_else(|| format!("unable to remove nonexistent key: {last}: missing value")),
        Value::Array(items) => {
            let i = array_index(last, items.len(), false)?;
            Ok(items.remove(i))
        }
        _ => Err(format!("doc is missing path: {path:?}: missing value")),
    }
}

/// RFC 6902. A patch that does not decode is a 400; one that does not apply is a 422, as in
/// kube-apiserver.
pub(crate) fn json_patch(doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    let Value::Array(ops) = patch else {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    };
    let mut doc = doc.clone();
    for op in ops {
        let name = op["op"].as_str().unwrap_or_default();
        let path = op["path"].as_str().ok_or_else(|| {
            ApiError::bad_request(format!("json patch operation {op} has no path"))
        })?;
        let applied = match name {
            "add" => add_path(&mut doc, path, op["value"].clone()),
            "remove" => remove_path(&mut doc, path).map(|_| ()),
            "replace" => remove_path(&mut doc, path)
                .and_then(|_| add_path(&mut doc, path, op["value"].clone())),
            "move" => {
                let from = op["from"].as_str().unwrap_or_default();
                remove_path(&mut doc, from).and_then(|v| add_path(&mut doc, path, v))
            }
            "copy" => {
                let from = op["from"].as_str().unwrap_or_default();
                get_path(&doc, from)
                    .cloned()
                    .and_then(|v| add_path(&mut doc, path, v))
            }
            "test" => get_path(&doc, path).and_then(|v| {
                if *v == op["value"] {
                    Ok(())
                } else {
                    Err(format!("testing value {path} failed: test failed"))
                }
            }),
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unexpected kind: {other:?} in json patch"
                )))
            }
        };
        applied.map_err(|e| ApiError::new(422, "Invalid", e))?;
    }
    Ok(doc)
}

/// How a list field merges under a strategic merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// No `patchStrategy`: the patch's list replaces the whole list (atomic).
    Replace,
    /// `patchStrategy: merge` with a `patchMergeKey`.
    MergeByKey(&'static str),
    /// `patchStrategy: merge` on a list of scalars: union.
    MergeScalars,
}

/// The `patchStrategy`/`patchMergeKey` tags of the Go types, for the fields that have them.
/// `path` is the dotted field path with list levels elided (`spec.containers.env`).
pub(crate) fn list_strategy(flavor: Flavor, path: &str) -> ListStrategy {
    use ListStrategy::*;
    match path {
        "metadata.ownerReferences" => return MergeByKey("uid"),
        "metadata.finalizers" => return MergeScalars,
        _ => {}
    }
    match flavor {
        Flavor::Pod => {
            let container_field = [
                "spec.containers.",
                "spec.initContainers.",
                "spec.ephemeralContainers.",
            ]
            .iter()
            .find_map(|prefix| path.strip_prefix(prefix));
            if let Some(field) = container_field {
                return match field {
                    "env" => MergeByKey("name"),
                    "ports" => MergeByKey("containerPort"),
                    "volumeMounts" => MergeByKey("mountPath"),
                    "volumeDevices" => MergeByKey("devicePath"),
                    _ => Replace,
                };
            }
            match path {
                "spec.containers" | "spec.initContainers" | "spec.ephemeralContainers" => {
                    MergeByKey("name")
                }
                "spec.volumes"
                | "spec.imagePullSecrets"
                | "spec.schedulingGates"
                | "spec.resourceClaims" => MergeByKey("name"),
                "spec.hostAliases" => MergeByKey("ip"),
                "spec.topologySpreadConstraints" => MergeByKey("topologyKey"),
                "status.conditions" => MergeByKey("type"),
                "status.podIPs" | "status.hostIPs" => MergeByKey("ip"),
                "status.resourceClaimStatuses" => MergeByKey("name"),
                _ => Replace,
            }
        }
        Flavor::Node => match path {
            "spec.podCIDRs" => MergeScalars,
            "status.conditions" | "status.addresses" => MergeByKey("type"),
            // NodeSpec.Taints carries no patchStrategy: a patch replaces the whole list.
            _ => Replace,
        },
        Flavor::Namespace | Flavor::NativePodGroup => match path {
            "status.conditions" => MergeByKey("type"),
            _ => Replace,
        },
        _ => Replace,
    }
}

const DIRECTIVE: &str = "$patch";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";
const RETAIN_KEYS: &str = "$retainKeys";

/// Removes every `$`-directive from a value that is about to be stored as-is.
fn strip_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|item| item.get(DIRECTIVE).is_none())
                .map(strip_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Applies a strategic merge patch to `target` in place.
pub(crate) fn strategic_merge(
    target: &mut Value,
    patch: &Value,
    flavor: Flavor,
) -> Result<(), ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "strategic merge patch must be a JSON object",
        ));
    }
    merge_map(target, patch, flavor, "")
}

fn merge_map(
    target: &mut Value,
    patch: &Value,
    flavor: Flavor,
    path: &str,
) -> Result<(), ApiError> {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match patch_map.get(DIRECTIVE).and_then(Value::as_str) {
        Some("replace") => {
            *target = strip_directives(patch);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Object(Map::new());
            return Ok(());
        }
        Some("merge") | None => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch type: {other} in map: {patch}"
            )))
        }
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        return Ok(());
    };
    for (key, value) in patch_map {
        if key == DIRECTIVE || key.starts_with(SET_ELEMENT_ORDER) || key == RETAIN_KEYS {
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            if let (Some(Value::Array(existing)), Value::Array(remove)) =
                (target_map.get_mut(field), value)
            {
                existing.retain(|item| !remove.contains(item));
            }
            continue;
        }
        let child_path = join(path, key);
        match value {
            Value::Null => {
                target_map.remove(key);
            }
            Value::Object(child)
                if child.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") =>
            {
                target_map.remove(key);
            }
            Value::Object(_) => {
                merge_map(
                    target_map.entry(key.clone()).or_insert(Value::Null),
                    value,
                    flavor,
                    &child_path,
                )?;
            }
            Value::Array(items) => {
                let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                merge_list(slot, items, flavor, &child_path)?;
            }
            scalar => {
                target_map.insert(key.clone(), scalar.clone());
            }
        }
    }
    if let Some(Value::Array(retain)) = patch_map.get(RETAIN_KEYS) {
        target_map.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
    Ok(())
}

fn merge_list(
    slot: &mut Value,
    items: &[Value],
    flavor: Flavor,
    path: &str,
) -> Result<(), ApiError> {
    let replace_all = items
        .iter()
        .any(|i| i.get(DIRECTIVE).and_then(Value::as_str) == Some("replace"));
    let strategy = list_strategy(flavor, path);
    if replace_all || strategy == ListStrategy::Replace || !slot.is_array() {
        *slot = strip_directives(&Value::Array(items.to_vec()));
        return Ok(());
    }
    let Value::Array(existing) = slot else {
        return Ok(());
    };
    match strategy {
        ListStrategy::MergeScalars => {
            for item in items {
                if !existing.contains(item) {
                    existing.push(item.clone());
                }
            }
        }
        ListStrategy::MergeByKey(merge_key) => {
            for item in items {
                let Some(key_value) = item.get(merge_key) else {
                    return Err(ApiError::bad_request(format!(
                        "map: {item} does not contain declared merge key: {merge_key}"
                    )));
                };
                let position = existing
                    .iter()
                    .position(|e| e.get(merge_key) == Some(key_value));
                if item.get(DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                    existing.retain(|e| e.get(merge_key) != Some(key_value));
                } else if let Some(i) = position {
                    merge_map(&mut existing[i], item, flavor, path)?;
                } else {
                    existing.push(strip_directives(item));
                }
            }
        }
        ListStrategy::Replace => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_follows_rfc_7386() {
        let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}, "l": [1, 2]});
        merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}, "l": [3]}));
        assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}, "l": [3]}));
    }

    #[test]
    fn json_patch_applies_and_reports_failures() {
        let doc = json!({"spec": {"list": [1, 2]}, "x": 1});
        let out = json_patch(
            &doc,
            &json!([
                {"op": "add", "path": "/spec/list/-", "value": 3},
                {"op": "replace", "path": "/x", "value": 2},
                {"op": "test", "path": "/x", "value": 2},
                {"op": "copy", "from": "/x", "path": "/y"},
                {"op": "move", "from": "/y", "path": "/z"},
                {"op": "remove", "path": "/spec/list/0"}
            ]),
        );
        assert_eq!(out, Ok(json!({"spec": {"list": [2, 3]}, "x": 2, "z": 2})));
        let failed = json_patch(&doc, &json!([{"op": "test", "path": "/x", "value": 9}]));
        assert_eq!(failed.map_err(|e| e.code), Err(422));
        let failed = json_patch(&doc, &json!([{"op": "remove", "path": "/nope"}]));
        assert_eq!(failed.map_err(|e| e.code), Err(422));
        let failed = json_patch(&doc, &json!({"op": "remove"}));
        assert_eq!(failed.map_err(|e| e.code), Err(400));
    }

    #[test]
    fn strategic_merge_merges_pod_conditions_by_type() {
        let mut pod = json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
            {"type": "Ready", "status": "False"}
        ]}});
        let patch = json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "True", "reason": null},
            {"type": "Initialized", "status": "True"}
        ]}});
        assert_eq!(strategic_merge(&mut pod, &patch, Flavor::Pod), Ok(()));
        assert_eq!(
            pod,
            json!({"status": {"conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False"},
                {"type": "Initialized", "status": "True"}
            ]}})
        );
        let delete = json!({"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}});
        assert_eq!(strategic_merge(&mut pod, &delete, Flavor::Pod), Ok(()));
        assert_eq!(
            pod["status"]["conditions"].as_array().map(Vec::len),
            Some(2)
        );
    }

    #[test]
    fn strategic_merge_knows_which_lists_are_atomic() {
        let mut node = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
        let patch = json!({"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}});
        assert_eq!(strategic_merge(&mut node, &patch, Flavor::Node), Ok(()));
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "b", "effect": "NoSchedule"}])
        );

        let mut pod = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [
            {"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}]}
        ]}});
        let patch = json!({
            "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]}]}
        });
        assert_eq!(strategic_merge(&mut pod, &patch, Flavor::Pod), Ok(()));
        assert_eq!(pod["metadata"]["finalizers"], json!(["b"]));
        assert_eq!(
            pod["spec"]["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])
        );
        assert_eq!(pod["spec"]["containers"][0]["image"], "x");
    }

    #[test]
    fn strategic_merge_replace_directive_replaces_a_map() {
        let mut obj = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}});
        assert_eq!(strategic_merge(&mut obj, &patch, Flavor::Lease), Ok(()));
        assert_eq!(obj, json!({"metadata": {"labels": {"c": "3"}}}));
    }
}
