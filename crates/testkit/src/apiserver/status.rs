//! `metav1.Status` failures, shaped the way kube-apiserver's `k8s.io/apimachinery/pkg/api/errors` builds them.

use serde_json::{json, Map, Value};

use super::resources::ResourceDef;

/// A failed API call: what the server answers with a `Status` object (`kind: Status`,
/// `status: Failure`) and the HTTP code in `code`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    /// HTTP status code, e.g. 404.
    pub code: u16,
    /// Machine-readable reason, e.g. `NotFound`, `Conflict`, `AlreadyExists`, `Invalid`, `Expired`.
    pub reason: String,
    /// Human-readable message, worded like kube-apiserver's.
    pub message: String,
    /// `details` (name, group, kind, causes), when the real server sends them.
    pub details: Option<Value>,
}

impl ApiError {
    pub(crate) fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    pub(crate) fn with_details(mut self, group: &str, kind: &str, name: &str) -> Self {
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !group.is_empty() {
            d.insert("group".into(), json!(group));
        }
        d.insert("kind".into(), json!(kind));
        self.details = Some(Value::Object(d));
        self
    }

    /// The `Status` object sent on the wire.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (Some(details), Some(map)) = (&self.details, s.as_object_mut()) {
            map.insert("details".into(), details.clone());
        }
        s
    }

    pub(crate) fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", def.qualified()),
        )
        .with_details(def.group, def.plural, name)
    }

    pub(crate) fn namespace_not_found(name: &str) -> Self {
        Self::new(404, "NotFound", format!("namespaces \"{name}\" not found")).with_details(
            "",
            "namespaces",
            name,
        )
    }

    pub(crate) fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", def.qualified()),
        )
        .with_details(def.group, def.plural, name)
    }

    /// `Operation cannot be fulfilled on <resource> "<name>": <why>`; `resource` may name a
    /// subresource (`pods/binding`) as the real server does for binding failures.
    pub(crate) fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .with_details(group, resource, name)
    }

    /// storage's `Preconditions.Check` refusing a write: `label` (`UID` or `ResourceVersion`)
    /// in the request is not the object's.
    pub(crate) fn precondition_failed(
        group: &str,
        resource: &str,
        name: &str,
        label: &str,
        wanted: &str,
        actual: &str,
    ) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            &format!(
                "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"
            ),
        )
    }

    pub(crate) fn stale(def: &ResourceDef, name: &str) -> Self {
        Self::conflict(
            def.group,
            def.plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with one cause per `(field, message)`.
    pub(crate) fn invalid(def: &ResourceDef, name: &str, causes: &[(String, String)]) -> Self {
        let kind_qualified = if def.group.is_empty() {
            def.kind.to_string()
        } else {
            format!("{}.{}", def.kind, def.group)
        };
        let message = caldera_api::validation::invalid_message(&kind_qualified, name, causes);
        let mut err = Self::new(422, "Invalid", message).with_details(def.group, def.kind, name);
        if let Some(Value::Object(d)) = err.details.as_mut() {
            let causes: Vec<Value> = causes
                .iter()
                .map(|(f, m)| json!({"reason": cause_reason(m), "message": m, "field": f}))
                .collect();
            d.insert("causes".into(), Value::Array(causes));
        }
        err
    }

    pub(crate) fn forbidden(def: &ResourceDef, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{} \"{name}\" is forbidden: {why}", def.qualified()),
        )
        .with_details(def.group, def.plural, name)
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 429 TooManyRequests with one cause (what the eviction subresource answers when a
    /// PodDisruptionBudget forbids the eviction).
    pub(crate) fn too_many_requests(message: &str, cause_reason: &str, cause: &str) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.details = Some(json!({
            "causes": [{"reason": cause_reason, "message": cause}],
            "retryAfterSeconds": 0,
        }));
        e
    }

    pub(crate) fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
    }

    pub(crate) fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub(crate) fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub(crate) fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details("", "", "")
    }

    /// The reason kube-apiserver pairs with an HTTP code; used for injected failures.
    pub(crate) fn reason_for(code: u16) -> &'static str {
        match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            406 => "NotAcceptable",
            409 => "Conflict",
            410 => "Expired",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        }
    }
}

/// A field error's `reason` in a Status cause, from the message's type prefix as
/// `field.Error.ErrorBody` writes it (`Required value: ...`, `Duplicate value: ...`).
fn cause_reason(message: &str) -> &'static str {
    [
        ("Required value", "FieldValueRequired"),
        ("Duplicate value", "FieldValueDuplicate"),
        ("Unsupported value", "FieldValueNotSupported"),
        ("Forbidden", "FieldValueForbidden"),
        ("Too long", "FieldValueTooLong"),
        ("Too many", "FieldValueTooMany"),
        ("Not found", "FieldValueNotFound"),
    ]
    .iter()
    .find(|(prefix, _)| message.starts_with(prefix))
    .map_or("FieldValueInvalid", |(_, reason)| reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::{def, PODS};

    #[test]
    fn not_found_matches_the_real_wording() {
        let s = ApiError::not_found(def(PODS), "p").to_status();
        assert_eq!(s["kind"], "Status");
        assert_eq!(s["status"], "Failure");
        assert_eq!(s["message"], "pods \"p\" not found");
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["code"], 404);
        assert_eq!(s["details"], json!({"name": "p", "kind": "pods"}));
    }

    #[test]
    fn binding_conflict_names_the_subresource() {
        let e = ApiError::conflict(
            "",
            "pods/binding",
            "p",
            "pod p is already assigned to node \"n\"",
        );
        assert_eq!(
            e.message,
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n\""
        );
    }
}
