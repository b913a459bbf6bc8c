//! kube-apiserver's validation of a pod spec (`ValidatePodSpec` in `pkg/apis/core/validation`),
//! for a Pod's `spec` and a PodTemplate's `template.spec`: the parts a client of a scheduler
//! gets wrong (containers present, named as DNS-1123 labels and unique, an image each, resource
//! names, quantities and the request/limit rules), with the same field paths and messages, so
//! a write the real server refuses with 422 is refused here too.
//!
//! It runs after defaulting, as on the real server: a limit without a request has become the
//! request by then (`SetDefaults_ResourceRequirements`).

use caldera_model::{overcommit_allowed, parse_quantity, Scale};
use serde_json::Value;
use std::collections::BTreeSet;

use caldera_api::validation;

/// The field errors of the pod spec `spec` found at `path` (`spec`, `template.spec`).
pub(crate) fn validate_pod_spec(spec: &Value, path: &str) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    let containers = spec["containers"].as_array().map(Vec::as_slice);
    let init = spec["initContainers"].as_array().map(Vec::as_slice);
    let mut names = BTreeSet::new();
    match containers {
        Some(list) if !list.is_empty() => {
            let list_path = format!("{path}.containers");
            containers_errors(list, &list_path, &mut names, &mut errors);
        }
        _ => errors.push((format!("{path}.containers"), "Required value".into())),
    }
    if let Some(list) = init {
        // validateInitContainers: init container names must differ from the regular
        // containers' too.
        let list_path = format!("{path}.initContainers");
        containers_errors(list, &list_path, &mut names, &mut errors);
    }
    errors
}

fn containers_errors(
    list: &[Value],
    list_path: &str,
    names: &mut BTreeSet<String>,
    errors: &mut Vec<(String, String)>,
) {
    for (i, c) in list.iter().enumerate() {
        let path = format!("{list_path}[{i}]");
        let name = c["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            errors.push((format!("{path}.name"), "Required value".into()));
        } else if let Some(problem) = validation::dns1123_label(name).into_iter().next() {
            errors.push((
                format!("{path}.name"),
                format!("Invalid value: \"{name}\": {problem}"),
            ));
        } else if !names.insert(name.to_string()) {
            errors.push((
                format!("{path}.name"),
                format!("Duplicate value: \"{name}\""),
            ));
        }
        if c["image"].as_str().is_none_or(str::is_empty) {
            errors.push((format!("{path}.image"), "Required value".into()));
        }
        resources_errors(&c["resources"], &format!("{path}.resources"), errors);
    }
}

/// `validateResourceRequirements` with `validateContainerResourceName`.
fn resources_errors(resources: &Value, path: &str, errors: &mut Vec<(String, String)>) {
    let empty = serde_json::Map::new();
    let limits = resources["limits"].as_object().unwrap_or(&empty);
    let requests = resources["requests"].as_object().unwrap_or(&empty);
    let lim_path = format!("{path}.limits");
    let req_path = format!("{path}.requests");
    let mut cpu_or_memory = false;
    let mut huge_pages = false;
    for (name, qty) in limits {
        let key_path = format!("{lim_path}[{name}]");
        errors.extend(resource_name_errors(name, &key_path));
        errors.extend(quantity_errors(name, qty, &key_path));
        huge_pages |= is_huge_pages(name);
        cpu_or_memory |= name == "cpu" || name == "memory";
    }
    for (name, qty) in requests {
        let key_path = format!("{req_path}[{name}]");
        errors.extend(resource_name_errors(name, &key_path));
        errors.extend(quantity_errors(name, qty, &key_path));
        match limits.get(name) {
            Some(limit) => {
                let (r, l) = (milli(qty), milli(limit));
                if let (Some(r), Some(l)) = (r, l) {
                    let shown = text(qty);
                    let limit_text = text(limit);
                    if r != l && !overcommit_allowed(name) {
                        errors.push((
                            req_path.clone(),
                            format!("Invalid value: \"{shown}\": must be equal to {name} limit of {limit_text}"),
                        ));
                    } else if r > l {
                        errors.push((
                            req_path.clone(),
                            format!("Invalid value: \"{shown}\": must be less than or equal to {name} limit of {limit_text}"),
                        ));
                    }
                }
            }
            None if !overcommit_allowed(name) => errors.push((
                lim_path.clone(),
                "Required value: Limit must be set for non overcommitable resources".into(),
            )),
            None => {}
        }
        huge_pages |= is_huge_pages(name);
        cpu_or_memory |= name == "cpu" || name == "memory";
    }
    if huge_pages && !cpu_or_memory {
        errors.push((
            path.to_string(),
            "Forbidden: HugePages require cpu or memory".into(),
        ));
    }
}

fn text(qty: &Value) -> String {
    match qty {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A quantity in thousandths; `None` when it does not parse (the real server refuses that
/// while decoding, before validation; the stand-in leaves it to its readers).
fn milli(qty: &Value) -> Option<i64> {
    parse_quantity(&text(qty), Scale::Milli).ok()
}

/// `ValidateResourceQuantityValue`: non-negative, and whole for integer resources.
fn quantity_errors(name: &str, qty: &Value, path: &str) -> Vec<(String, String)> {
    let Some(m) = milli(qty) else {
        return Vec::new();
    };
    let shown = text(qty);
    let mut errors = Vec::new();
    if m < 0 {
        errors.push((
            path.to_string(),
            format!("Invalid value: \"{shown}\": must be greater than or equal to 0"),
        ));
    }
    if is_extended(name) && m % 1000 != 0 {
        errors.push((
            path.to_string(),
            format!("Invalid value: \"{shown}\": must be an integer"),
        ));
    }
    errors
}

fn is_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `helper.IsNativeResource`: unprefixed, or in the `kubernetes.io` namespace.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// `helper.IsExtendedResourceName`.
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && qualified_name_problem(&format!("requests.{name}")).is_none()
}

/// `validateContainerResourceName`.
fn resource_name_errors(name: &str, path: &str) -> Vec<(String, String)> {
    if let Some(problem) = qualified_name_problem(name) {
        return vec![(
            path.to_string(),
            format!("Invalid value: \"{name}\": {problem}"),
        )];
    }
    let standard = matches!(name, "cpu" | "memory" | "ephemeral-storage") || is_huge_pages(name);
    if !name.contains('/') {
        if !standard {
            // validateResourceName's own check comes first, then the container one.
            return vec![
                (
                    path.to_string(),
                    format!("Invalid value: \"{name}\": must be a standard resource type or fully qualified"),
                ),
                (
                    path.to_string(),
                    format!("Invalid value: \"{name}\": must be a standard resource for containers"),
                ),
            ];
        }
    } else if !is_native(name) && !is_extended(name) {
        return vec![(
            path.to_string(),
            format!("Invalid value: \"{name}\": doesn't follow extended resource name standard"),
        )];
    }
    Vec::new()
}

/// The first of `validation.IsQualifiedName`'s messages, if any.
fn qualified_name_problem(value: &str) -> Option<String> {
    validation::qualified_name(value).into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(containers: Value) -> Vec<(String, String)> {
        validate_pod_spec(&json!({ "containers": containers }), "spec")
    }

    #[test]
    fn an_extended_resource_needs_a_limit_equal_to_its_request() {
        // The refusal measured on kube-apiserver 1.36 for Caldera's first PodTemplates.
        let no_limit = errors(json!([{"name": "member", "image": "pause",
            "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"}}}]));
        assert_eq!(
            no_limit,
            vec![(
                "spec.containers[0].resources.limits".to_string(),
                "Required value: Limit must be set for non overcommitable resources".to_string()
            )]
        );
        let unequal = errors(json!([{"name": "member", "image": "pause",
            "resources": {"requests": {"nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "2"}}}]));
        assert_eq!(
            unequal[0].1,
            "Invalid value: \"1\": must be equal to nvidia.com/gpu limit of 2"
        );
        let equal = errors(json!([{"name": "member", "image": "pause",
            "resources": {"requests": {"nvidia.com/gpu": "2", "cpu": "500m"}, "limits": {"nvidia.com/gpu": "2"}}}]));
        assert_eq!(equal, vec![]);
        let huge = errors(json!([{"name": "member", "image": "pause",
            "resources": {"requests": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}}}]));
        assert_eq!(huge.len(), 1, "huge pages are not overcommitable: {huge:?}");
    }

    #[test]
    fn requests_may_not_exceed_limits_and_quantities_are_checked() {
        let over = errors(json!([{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}}]));
        assert_eq!(
            over,
            vec![(
                "spec.containers[0].resources.requests".to_string(),
                "Invalid value: \"2\": must be less than or equal to cpu limit of 1500m"
                    .to_string()
            )]
        );
        let fractional = errors(json!([{"name": "c", "image": "i",
            "resources": {"requests": {"example.com/dongle": "500m"}, "limits": {"example.com/dongle": "500m"}}}]));
        assert_eq!(fractional.len(), 2, "{fractional:?}");
        assert!(fractional
            .iter()
            .all(|(_, m)| m.ends_with("must be an integer")));
        let negative = errors(json!([{"name": "c", "image": "i",
            "resources": {"requests": {"memory": "-1"}}}]));
        assert_eq!(
            negative[0].0,
            "spec.containers[0].resources.requests[memory]"
        );
        let bad_name = errors(json!([{"name": "c", "image": "i",
            "resources": {"requests": {"gpu": "1"}}}]));
        assert_eq!(bad_name.len(), 2, "{bad_name:?}");
        assert!(bad_name[1]
            .1
            .ends_with("must be a standard resource for containers"));
        let huge_alone = errors(json!([{"name": "c", "image": "i",
            "resources": {"requests": {"hugepages-2Mi": "2Mi"}, "limits": {"hugepages-2Mi": "2Mi"}}}]));
        assert_eq!(
            huge_alone,
            vec![(
                "spec.containers[0].resources".to_string(),
                "Forbidden: HugePages require cpu or memory".to_string()
            )]
        );
    }

    #[test]
    fn containers_are_required_named_unique_and_have_an_image() {
        assert_eq!(
            validate_pod_spec(&json!({}), "template.spec"),
            vec![(
                "template.spec.containers".to_string(),
                "Required value".to_string()
            )]
        );
        let spec = json!({
            "containers": [{"name": "main", "image": "i"}, {"name": "main", "image": "i"},
                           {"name": "Side", "image": "i"}, {"image": "i"}, {"name": "x"}],
            "initContainers": [{"name": "main", "image": "i"}],
        });
        let fields: Vec<(String, String)> = validate_pod_spec(&spec, "spec");
        let got: Vec<&str> = fields.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            got,
            vec![
                "spec.containers[1].name",
                "spec.containers[2].name",
                "spec.containers[3].name",
                "spec.containers[4].image",
                "spec.initContainers[0].name",
            ]
        );
        assert_eq!(fields[0].1, "Duplicate value: \"main\"");
        assert!(fields[1]
            .1
            .starts_with("Invalid value: \"Side\": a lowercase RFC 1123 label"));
        assert_eq!(fields[2].1, "Required value");
    }
}
