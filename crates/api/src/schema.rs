//! Schema pieces the derive cannot express, and the pass that makes the CRD schema structural.
//!
//! The derived schema goes through kube's transforms, which are tuned for Rust enums: they strip
//! the `type` from `anyOf` branches and mark every `Option` as `nullable`. Kubernetes wants
//! quantities as `x-kubernetes-int-or-string` with exactly `anyOf: [{type: integer}, {type:
//! string}]`, and Volcano's CRDs carry no `nullable`. [`normalize`] rewrites the finished schema
//! into that shape; [`crate::crds`] applies it, so always take CRDs from there.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use schemars::{json_schema, Schema, SchemaGenerator};

/// Kubernetes' own validation pattern for a serialized `resource.Quantity`, as emitted by
/// controller-gen for every `ResourceList`.
pub(crate) const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Schema of a `ResourceList` (`BTreeMap<String, Quantity>`): an object whose values are
/// int-or-string quantities.
///
/// Used through `#[schemars(schema_with = "crate::schema::resource_list")]` because the
/// `Quantity` schema from k8s-openapi repeats a page-long description for every entry and lacks
/// the `anyOf` and `pattern` that controller-gen emits.
pub(crate) fn resource_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": {
            "x-kubernetes-int-or-string": true,
            "pattern": QUANTITY_PATTERN,
        },
    })
}

/// Rewrites a finished CRD schema into the shape Kubernetes accepts and Volcano uses.
///
/// - drops `nullable` everywhere, and the `null` that schemars adds to the `enum` of an
///   optional enum: Caldera never sends `null`, and without `nullable` the API server prunes a
///   `null` sent by someone else and applies the field's default instead;
/// - gives every `x-kubernetes-int-or-string` node exactly `anyOf: [{type: integer}, {type:
///   string}]` and no `type`, as Kubernetes' structural-schema rules require.
pub(crate) fn normalize(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    if let Some(values) = schema.enum_.as_mut() {
        values.retain(|value| !value.0.is_null());
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        schema.type_ = None;
        schema.any_of = Some(vec![
            JSONSchemaProps {
                type_: Some("integer".into()),
                ..Default::default()
            },
            JSONSchemaProps {
                type_: Some("string".into()),
                ..Default::default()
            },
        ]);
    } else if let Some(any_of) = schema.any_of.as_mut() {
        any_of.iter_mut().for_each(normalize);
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        normalize(child);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(child)) = schema.additional_properties.as_mut() {
        normalize(child);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(child)) => normalize(child),
        Some(JSONSchemaPropsOrArray::Schemas(children)) => children.iter_mut().for_each(normalize),
        None => {}
    }
    for list in [&mut schema.all_of, &mut schema.one_of] {
        list.iter_mut().flatten().for_each(normalize);
    }
}
