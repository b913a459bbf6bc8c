//! `metav1.LabelSelector` matching (`LabelSelectorAsSelector(...).Matches(labels)`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

/// Whether `labels` satisfy every `matchLabels` entry and every `matchExpressions` term
/// (`In`, `NotIn`, `Exists`, `DoesNotExist`). An unknown operator matches nothing, as an
/// invalid selector does on the API server.
pub fn matches(selector: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    let get = |k: &str| labels.and_then(|l| l.get(k));
    let by_label = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| get(k) == Some(v));
    let by_expression = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => get(&e.key).is_some(),
            "DoesNotExist" => get(&e.key).is_none(),
            _ => false,
        }
    });
    by_label && by_expression
}

/// Whether the selector has no terms at all (`{}`).
pub fn is_empty(selector: &LabelSelector) -> bool {
    selector
        .match_labels
        .as_ref()
        .is_none_or(BTreeMap::is_empty)
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(Vec::is_empty)
}
