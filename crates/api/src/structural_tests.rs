//! Offline check that the generated CRD schemas follow Kubernetes' structural-schema rules.
//!
//! The rules are those the API server applies when a CRD is created (apiextensions-apiserver's
//! `ValidateStructural` and `ValidateCustomResourceDefinitionOpenAPISchema`), as far as they can
//! be checked without a server, plus Caldera's own: no `nullable` anywhere. A live
//! `kubectl apply --dry-run=server` remains the final word.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use crate::crds;

/// `type` values Kubernetes accepts.
const TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// `format` values Kubernetes knows (kube-openapi's strfmt registry plus the numeric ones).
const FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "date-time",
    "int32",
    "int64",
    "float",
    "double",
];

/// Every rule a schema breaks, each as `path: problem`. Empty means structural.
fn violations(root: &JSONSchemaProps) -> Vec<String> {
    let mut found = Vec::new();
    if root.type_.as_deref() != Some("object") {
        found.push("openAPIV3Schema: the root must have type object".to_owned());
    }
    check(root, "openAPIV3Schema", false, &mut found);
    found
}

/// Checks one node and everything under it. `in_junctor` is true inside allOf/anyOf/oneOf/not,
/// where only value validations are allowed.
fn check(schema: &JSONSchemaProps, path: &str, in_junctor: bool, found: &mut Vec<String>) {
    let mut bad = |problem: &str| found.push(format!("{path}: {problem}"));
    let int_or_string = schema.x_kubernetes_int_or_string == Some(true);
    let preserve_unknown = schema.x_kubernetes_preserve_unknown_fields == Some(true);

    // Keywords Kubernetes does not support in a CRD schema at all.
    if schema.ref_path.is_some() {
        bad("$ref is not supported");
    }
    if schema.schema.is_some() {
        bad("$schema is not supported");
    }
    if schema.id.is_some() {
        bad("id is not supported");
    }
    if schema.definitions.is_some() {
        bad("definitions are not supported");
    }
    if schema.dependencies.is_some() {
        bad("dependencies are not supported");
    }
    if schema.pattern_properties.is_some() {
        bad("patternProperties are not supported");
    }
    if schema.additional_items.is_some() {
        bad("additionalItems is not supported");
    }
    if schema.unique_items == Some(true) {
        bad("uniqueItems cannot be true");
    }
    if schema.x_kubernetes_preserve_unknown_fields == Some(false) {
        bad("x-kubernetes-preserve-unknown-fields must be true or absent");
    }
    if schema.nullable.is_some() {
        bad("nullable is set (Caldera's schemas never use it)");
    }

    if in_junctor {
        // Inside a junctor only value validations are allowed.
        if schema.type_.is_some() {
            bad("type inside allOf/anyOf/oneOf/not");
        }
        if schema.description.is_some() {
            bad("description inside allOf/anyOf/oneOf/not");
        }
        if schema.default.is_some() {
            bad("default inside allOf/anyOf/oneOf/not");
        }
        if schema.additional_properties.is_some() {
            bad("additionalProperties inside allOf/anyOf/oneOf/not");
        }
        if schema.x_kubernetes_int_or_string.is_some()
            || schema.x_kubernetes_preserve_unknown_fields.is_some()
            || schema.x_kubernetes_embedded_resource.is_some()
        {
            bad("x-kubernetes-* inside allOf/anyOf/oneOf/not");
        }
    } else {
        match schema.type_.as_deref() {
            Some(type_) if !TYPES.contains(&type_) => bad(&format!("unknown type {type_:?}")),
            Some(_) if int_or_string => bad("type must be empty with x-kubernetes-int-or-string"),
            None if !int_or_string && !preserve_unknown => bad("type is missing"),
            _ => {}
        }
    }

    if int_or_string {
        let is_integer_or_string = |branches: &[JSONSchemaProps]| {
            branches.len() == 2
                && branches[0] == only_type("integer")
                && branches[1] == only_type("string")
        };
        match schema.any_of.as_deref() {
            None => {}
            Some(branches) if is_integer_or_string(branches) => {}
            Some(_) => bad("int-or-string anyOf must be exactly [{type: integer}, {type: string}]"),
        }
        if schema.all_of.is_some() || schema.one_of.is_some() {
            bad("int-or-string must not have allOf/oneOf");
        }
    } else {
        for branch in schema.any_of.iter().flatten() {
            check(branch, &format!("{path}.anyOf[]"), true, found);
        }
    }
    for (junctor, branches) in [("allOf", &schema.all_of), ("oneOf", &schema.one_of)] {
        for branch in branches.iter().flatten() {
            check(branch, &format!("{path}.{junctor}[]"), true, found);
        }
    }
    if let Some(not) = &schema.not {
        check(not, &format!("{path}.not"), true, found);
    }

    if let Some(format) = schema.format.as_deref() {
        if !FORMATS.contains(&format) {
            found.push(format!("{path}: unsupported format {format:?}"));
        }
    }
    check_value_keywords(schema, path, found);

    let properties = schema.properties.as_ref();
    if properties.is_some_and(|p| !p.is_empty()) && schema.additional_properties.is_some() {
        found.push(format!(
            "{path}: properties and additionalProperties are mutually exclusive"
        ));
    }
    for required in schema.required.iter().flatten() {
        if !properties.is_some_and(|p| p.contains_key(required)) {
            found.push(format!("{path}: required {required:?} is not a property"));
        }
    }
    for (name, child) in properties.into_iter().flatten() {
        check(child, &format!("{path}.{name}"), in_junctor, found);
    }
    match &schema.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(child)) => check(
            child,
            &format!("{path}.additionalProperties"),
            in_junctor,
            found,
        ),
        Some(JSONSchemaPropsOrBool::Bool(false)) => found.push(format!(
            "{path}: additionalProperties: false is not allowed"
        )),
        Some(JSONSchemaPropsOrBool::Bool(true)) | None => {}
    }
    match &schema.items {
        Some(JSONSchemaPropsOrArray::Schema(child)) => {
            check(child, &format!("{path}.items"), in_junctor, found)
        }
        Some(JSONSchemaPropsOrArray::Schemas(_)) => {
            found.push(format!("{path}: items must be a single schema"))
        }
        None if schema.type_.as_deref() == Some("array") => {
            found.push(format!("{path}: an array must have items"))
        }
        None => {}
    }
}

/// Checks that value keywords suit the node's type and that `enum` and `default` are valid values.
fn check_value_keywords(schema: &JSONSchemaProps, path: &str, found: &mut Vec<String>) {
    let int_or_string = schema.x_kubernetes_int_or_string == Some(true);
    let type_ = schema.type_.as_deref();
    let numeric = matches!(type_, Some("integer" | "number"));
    let stringy = type_ == Some("string") || int_or_string;
    if (schema.minimum.is_some() || schema.maximum.is_some()) && !numeric {
        found.push(format!("{path}: minimum/maximum on a non-number"));
    }
    if (schema.pattern.is_some() || schema.min_length.is_some() || schema.max_length.is_some())
        && !stringy
    {
        found.push(format!(
            "{path}: pattern/minLength/maxLength on a non-string"
        ));
    }
    let fits = |value: &Value| -> Result<(), String> {
        let type_ok = match type_ {
            _ if int_or_string => value.is_i64() || value.is_u64() || value.is_string(),
            Some("string") => value.is_string(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("boolean") => value.is_boolean(),
            Some("object") => value.is_object(),
            Some("array") => value.is_array(),
            _ => true,
        };
        if !type_ok {
            return Err(format!("{value} is not of type {type_:?}"));
        }
        if let Some(number) = value.as_f64() {
            if schema.minimum.is_some_and(|min| number < min)
                || schema.maximum.is_some_and(|max| number > max)
            {
                return Err(format!("{value} is out of [minimum, maximum]"));
            }
        }
        Ok(())
    };
    for value in schema.enum_.iter().flatten() {
        if let Err(problem) = fits(&value.0) {
            found.push(format!("{path}: enum value {problem}"));
        }
    }
    if let Some(default) = &schema.default {
        if let Err(problem) = fits(&default.0) {
            found.push(format!("{path}: default {problem}"));
        }
        let in_enum = |values: &Vec<_>| values.iter().any(|value| value == default);
        if schema.enum_.as_ref().is_some_and(|values| !in_enum(values)) {
            found.push(format!("{path}: default is not one of the enum values"));
        }
    }
}

fn only_type(type_: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        type_: Some(type_.to_owned()),
        ..Default::default()
    }
}

fn schema_from(json: Value) -> JSONSchemaProps {
    serde_json::from_value(json).expect("a valid JSONSchemaProps literal")
}

#[test]
fn generated_crd_schemas_are_structural() {
    // The ProvisioningRequest CRD too: the e2e driver installs it where it is missing.
    let all = crds()
        .into_iter()
        .chain([crate::provisioning_request_crd()]);
    for crd in all {
        let name = crd.metadata.name.clone().unwrap_or_default();
        for version in &crd.spec.versions {
            let schema = version
                .schema
                .as_ref()
                .and_then(|validation| validation.open_api_v3_schema.as_ref())
                .unwrap_or_else(|| panic!("{name} {} has no schema", version.name));
            let problems = violations(schema);
            assert!(
                problems.is_empty(),
                "{name} {} is not structural:\n{}",
                version.name,
                problems.join("\n")
            );
        }
    }
}

#[test]
fn generated_crds_have_status_subresource_and_expected_names() {
    let crds = crds();
    let names: Vec<_> = crds
        .iter()
        .map(|crd| {
            (
                crd.metadata.name.as_deref().unwrap_or_default(),
                crd.spec.scope.as_str(),
                crd.spec.names.short_names.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            (
                "podgroups.scheduling.volcano.sh",
                "Namespaced",
                vec!["pg".to_owned(), "podgroup-v1beta1".to_owned()]
            ),
            (
                "queues.scheduling.volcano.sh",
                "Cluster",
                vec!["q".to_owned(), "queue-v1beta1".to_owned()]
            ),
            (
                "hypernodes.topology.volcano.sh",
                "Cluster",
                vec!["hn".to_owned()]
            ),
        ]
    );
    for crd in &crds {
        let version = &crd.spec.versions[0];
        let group = crd.spec.group.as_str();
        let expected = if group == "topology.volcano.sh" {
            "v1alpha1"
        } else {
            "v1beta1"
        };
        assert_eq!(version.name, expected);
        assert!(version.served && version.storage);
        let status = version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref());
        assert!(
            status.is_some(),
            "{:?} lacks the status subresource",
            crd.metadata.name
        );
    }
}

#[test]
fn generated_schemas_carry_the_validation_rules() {
    let crds = crds();
    let spec_property = |crd: usize, field: &str| -> JSONSchemaProps {
        let root = crds[crd].spec.versions[0]
            .schema
            .as_ref()
            .and_then(|v| v.open_api_v3_schema.clone())
            .expect("schema");
        let spec = root.properties.expect("root properties")["spec"].clone();
        spec.properties.expect("spec properties")[field].clone()
    };
    let min_member = spec_property(0, "minMember");
    assert_eq!(min_member.minimum, Some(0.0));
    let timeout = spec_property(0, "scheduleTimeoutSeconds");
    assert_eq!(timeout.minimum, Some(1.0));
    let topology = spec_property(0, "topology");
    let mode = topology.properties.expect("topology properties")["mode"].clone();
    let modes: Vec<_> = mode.enum_.into_iter().flatten().map(|v| v.0).collect();
    assert_eq!(modes, [Value::from("required"), Value::from("preferred")]);
    assert_eq!(
        spec_property(0, "queue").default.map(|d| d.0),
        Some("default".into())
    );

    let weight = spec_property(1, "weight");
    assert_eq!((weight.minimum, weight.maximum), (Some(1.0), Some(65535.0)));
    assert_eq!(weight.default.map(|d| d.0), Some(Value::from(1)));

    let capability = spec_property(1, "capability");
    let Some(JSONSchemaPropsOrBool::Schema(quantity)) = capability.additional_properties else {
        panic!("capability must map names to quantities");
    };
    assert_eq!(quantity.x_kubernetes_int_or_string, Some(true));
    assert_eq!(
        quantity.any_of,
        Some(vec![only_type("integer"), only_type("string")])
    );
}

#[test]
fn root_does_not_require_spec() {
    for crd in crds() {
        let root = crd.spec.versions[0]
            .schema
            .clone()
            .and_then(|v| v.open_api_v3_schema)
            .expect("schema");
        let required = root.required.unwrap_or_default();
        assert!(!required.contains(&"spec".to_owned()), "{required:?}");
    }
}

// The checker must be able to fail: each broken schema below breaks one rule.

#[test]
fn checker_rejects_ref_and_definitions() {
    let schema = schema_from(serde_json::json!({
        "type": "object",
        "properties": { "a": { "$ref": "#/definitions/A" } },
        "definitions": { "A": { "type": "string" } },
    }));
    let problems = violations(&schema);
    assert!(problems.iter().any(|p| p.contains("$ref")), "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("definitions")),
        "{problems:?}"
    );
}

#[test]
fn checker_rejects_missing_type_and_unknown_format() {
    let schema = schema_from(serde_json::json!({
        "type": "object",
        "properties": {
            "untyped": { "description": "no type" },
            "count": { "type": "integer", "format": "uint32" },
        },
    }));
    let problems = violations(&schema);
    assert!(
        problems.contains(&"openAPIV3Schema.untyped: type is missing".to_owned()),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("uint32")),
        "{problems:?}"
    );
}

#[test]
fn checker_rejects_types_and_nullable_inside_anyof() {
    let schema = schema_from(serde_json::json!({
        "type": "object",
        "properties": {
            "mode": {
                "type": "string",
                "anyOf": [ { "type": "string", "nullable": true }, { "enum": [null] } ],
            },
            "amount": {
                "x-kubernetes-int-or-string": true,
                "anyOf": [ {}, {} ],
            },
        },
    }));
    let problems = violations(&schema);
    assert!(
        problems.contains(
            &"openAPIV3Schema.mode.anyOf[]: type inside allOf/anyOf/oneOf/not".to_owned()
        ),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("nullable")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("openAPIV3Schema.amount: int-or-string anyOf")),
        "{problems:?}"
    );
}

#[test]
fn checker_rejects_bad_defaults_and_enums() {
    let schema = schema_from(serde_json::json!({
        "type": "object",
        "properties": {
            "weight": { "type": "integer", "minimum": 1, "default": 0 },
            "mode": { "type": "string", "enum": ["hard", null], "default": "soft" },
            "list": { "type": "array" },
            "map": {
                "type": "object",
                "properties": { "a": { "type": "string" } },
                "additionalProperties": { "type": "string" },
            },
        },
        "required": ["missing"],
    }));
    let problems = violations(&schema);
    for expected in [
        "openAPIV3Schema.weight: default 0 is out of [minimum, maximum]",
        "openAPIV3Schema.mode: enum value null is not of type Some(\"string\")",
        "openAPIV3Schema.mode: default is not one of the enum values",
        "openAPIV3Schema.list: an array must have items",
        "openAPIV3Schema.map: properties and additionalProperties are mutually exclusive",
        "openAPIV3Schema: required \"missing\" is not a property",
    ] {
        assert!(
            problems.contains(&expected.to_owned()),
            "missing {expected:?} in {problems:?}"
        );
    }
}
