//! `resource.k8s.io/v1` (Dynamic Resource Allocation) as a 1.36 kube-apiserver treats it:
//! DeviceClasses, ResourceSlices, ResourceClaims (with their status subresource) and
//! ResourceClaimTemplates — the defaulting and the validation of what a scheduler and a test
//! write (`pkg/apis/resource/validation`, the claim strategies) — and the glue that runs
//! kube-controller-manager's resource-claim controller ([`caldera_actors::resourceclaim`]) over
//! the stored objects.
//!
//! Validation covers: request names and the `exactly`/`firstAvailable` choice, an `exactly`
//! request's class and allocation mode (defaulted to `ExactCount` with `count: 1`, as the v1
//! defaults do); claim and template specs are immutable; a claim's `status` is dropped on create
//! and changes only through `/status`, where `reservedFor` holds at most 256 distinct users
//! (`resource`, `name`, `uid` required) and only with an allocation, gains no user while the
//! claim is being deleted, an allocation once set cannot change (only be cleared), and a new
//! allocation's results (at most 32) name a request of the claim (or `request/subrequest`) and a
//! driver, pool and device, and a share's `shareID` is a UUID in normalized form. A claim's
//! constraints set exactly one of `matchAttribute` and `distinctAttribute`, fully qualified, and
//! its capacity requests are quantities. ResourceSlices need a driver, a pool (name,
//! `resourceSliceCount` ≥ 1) and exactly one of `nodeName`, `nodeSelector`, `allNodes`,
//! `perDeviceNodeSelection`, with unique device names (at most 128, 64 if a device is tainted or
//! draws counters); devices or `sharedCounters`, not both (at most 8 counter sets, uniquely
//! named, each with 1–32 counters); a device draws from at most 2 counter sets, each once; a
//! capacity's `requestPolicy` only on a device with `allowMultipleAllocations`, with a default
//! and one of `validValues` (ascending, at most 10, within the capacity, the default among them)
//! and `validRange` (min, max and one step within the capacity, the default inside the range and
//! on a step), as `validateRequestPolicy` says. A DeviceClass's `extendedResourceName` must be
//! an extended resource name. CEL selectors are stored unchecked (kube-apiserver compiles them).

use caldera_actors::resourceclaim;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use serde_json::{json, Value};

use super::storage::Causes;

/// `ResourceClaimReservedForMaxSize`.
const RESERVED_FOR_MAX: usize = resourceclaim::RESERVED_FOR_MAX;
/// `AllocationResultsMaxSize`.
const ALLOCATION_RESULTS_MAX: usize = 32;
/// `ResourceSliceMaxDevices`.
const SLICE_DEVICES_MAX: usize = 128;
/// `ResourceSliceMaxDevicesWithAdvancedFeatures`: with taints or counters.
const SLICE_DEVICES_MAX_ADVANCED: usize = 64;
/// `ResourceSliceMaxCounterSets`.
const COUNTER_SETS_MAX: usize = 8;
/// `ResourceSliceMaxCountersPerCounterSet` (and per consumption).
const COUNTERS_MAX: usize = 32;
/// `ResourceSliceMaxDeviceCounterConsumptionsPerDevice`.
const CONSUMPTIONS_MAX: usize = 2;
/// `CapacityRequestPolicyDiscreteMaxOptions`.
const VALID_VALUES_MAX: usize = 10;

/// A quantity's thousandths, or why it is not one.
fn milli(v: &Value) -> Result<i64, String> {
    let text = v
        .as_str()
        .ok_or_else(|| format!("Invalid value: {v}: not a quantity"))?;
    caldera_model::parse_quantity(text, caldera_model::Scale::Milli)
        .map_err(|e| format!("Invalid value: {text:?}: {e}"))
}

/// Whole units as `Quantity.Value()` reads them.
fn units(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

/// `validateUID`: an RFC 4122 UUID in normalized form (lowercase, 36 characters).
fn normalized_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        })
}

fn dns_label(s: &str) -> bool {
    caldera_api::validation::dns1123_label(s).is_empty()
}

/// `v1helper.IsExtendedResourceName`: a qualified name with a domain that is not
/// `kubernetes.io` (nor a subdomain of it) and not the `requests.` quota prefix.
pub(crate) fn is_extended_resource_name(name: &str) -> bool {
    let Some((domain, rest)) = name.split_once('/') else {
        return false;
    };
    !domain.is_empty()
        && !rest.is_empty()
        && !rest.contains('/')
        && domain != "kubernetes.io"
        && !domain.ends_with(".kubernetes.io")
        && !name.starts_with("requests.")
        && rest
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Defaults and validates the `spec` of a claim (or a template's `spec.spec`) at `path`.
fn prepare_claim_spec(spec: &mut Value, path: &str) -> Causes {
    let mut causes = Causes::new();
    for (i, c) in spec["devices"]["constraints"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.devices.constraints[{i}]");
        match (c["matchAttribute"].as_str(), c["distinctAttribute"].as_str()) {
            (Some(name), None) | (None, Some(name)) => {
                let field = if c["matchAttribute"].is_string() {
                    "matchAttribute"
                } else {
                    "distinctAttribute"
                };
                if !name.contains('/') {
                    causes.push((
                        format!("{at}.{field}"),
                        format!("Invalid value: {name:?}: a fully qualified name must be a domain and a name separated by a slash"),
                    ));
                }
            }
            _ => causes.push((
                at,
                "Required value: exactly one of \"matchAttribute\" or \"distinctAttribute\" is required".into(),
            )),
        }
    }
    let Some(requests) = spec["devices"]["requests"].as_array_mut() else {
        return causes;
    };
    let mut seen = std::collections::BTreeSet::new();
    for (i, request) in requests.iter_mut().enumerate() {
        let at = format!("{path}.devices.requests[{i}]");
        let name = request["name"].as_str().unwrap_or_default().to_string();
        if name.is_empty() {
            causes.push((format!("{at}.name"), "Required value".into()));
        } else if !dns_label(&name) {
            causes.push((
                format!("{at}.name"),
                format!("Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"),
            ));
        } else if !seen.insert(name.clone()) {
            causes.push((format!("{at}.name"), format!("Duplicate value: {name:?}")));
        }
        let exactly = request["exactly"].is_object();
        let first = request["firstAvailable"].is_array();
        match (exactly, first) {
            (true, false) => causes.extend(prepare_exact(
                &mut request["exactly"],
                &format!("{at}.exactly"),
            )),
            (false, true) => {
                let mut sub_seen = std::collections::BTreeSet::new();
                if let Some(subs) = request["firstAvailable"].as_array_mut() {
                    if subs.is_empty() {
                        causes.push((format!("{at}.firstAvailable"), "Required value".into()));
                    }
                    for (j, sub) in subs.iter_mut().enumerate() {
                        let sub_at = format!("{at}.firstAvailable[{j}]");
                        let sub_name = sub["name"].as_str().unwrap_or_default().to_string();
                        if !dns_label(&sub_name) {
                            causes.push((format!("{sub_at}.name"), "Required value".into()));
                        } else if !sub_seen.insert(sub_name.clone()) {
                            causes.push((
                                format!("{sub_at}.name"),
                                format!("Duplicate value: {sub_name:?}"),
                            ));
                        }
                        causes.extend(prepare_exact(sub, &sub_at));
                    }
                }
            }
            _ => causes.push((
                at.clone(),
                "Invalid value: exactly one of `exactly` or `firstAvailable` is required".into(),
            )),
        }
    }
    causes
}

/// Defaults and validates an `ExactDeviceRequest` (or a `DeviceSubRequest`, which has the same
/// fields).
fn prepare_exact(exact: &mut Value, at: &str) -> Causes {
    let mut causes = Causes::new();
    if exact["deviceClassName"]
        .as_str()
        .unwrap_or_default()
        .is_empty()
    {
        causes.push((format!("{at}.deviceClassName"), "Required value".into()));
    }
    if let Some(asks) = exact["capacity"]["requests"].as_object() {
        for (name, q) in asks {
            if let Err(why) = milli(q) {
                causes.push((format!("{at}.capacity.requests[{name}]"), why));
            }
        }
    }
    if exact["allocationMode"].is_null() {
        exact["allocationMode"] = json!("ExactCount");
    }
    match exact["allocationMode"].as_str() {
        Some("ExactCount") => {
            if exact["count"].is_null() {
                exact["count"] = json!(1);
            }
            if exact["count"].as_i64().is_none_or(|c| c <= 0) {
                causes.push((
                    format!("{at}.count"),
                    format!(
                        "Invalid value: {}: must be greater than zero",
                        exact["count"]
                    ),
                ));
            }
        }
        Some("All") => {
            if !exact["count"].is_null() {
                causes.push((
                    format!("{at}.count"),
                    "Invalid value: must not be specified when allocationMode is 'All'".into(),
                ));
            }
        }
        _ => causes.push((
            format!("{at}.allocationMode"),
            format!(
                "Unsupported value: {}: supported values: \"All\", \"ExactCount\"",
                exact["allocationMode"]
            ),
        )),
    }
    causes
}

/// A new ResourceClaim: the status is dropped (`PrepareForCreate`) and the spec defaulted and
/// validated.
pub(crate) fn prepare_claim(obj: &mut Value) -> Result<(), Causes> {
    if let Value::Object(map) = obj {
        map.remove("status");
    }
    let causes = prepare_claim_spec(&mut obj["spec"], "spec");
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

/// A new ResourceClaimTemplate: its claim spec defaulted and validated.
pub(crate) fn prepare_template(obj: &mut Value) -> Result<(), Causes> {
    let causes = prepare_claim_spec(&mut obj["spec"]["spec"], "spec.spec");
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

/// A new or updated DeviceClass.
pub(crate) fn validate_class(obj: &Value) -> Causes {
    let mut causes = Causes::new();
    if let Some(name) = obj["spec"]["extendedResourceName"].as_str() {
        if !is_extended_resource_name(name) {
            causes.push((
                "spec.extendedResourceName".into(),
                format!("Invalid value: {name:?}: must be a valid extended resource name"),
            ));
        }
    }
    causes
}

/// A new or updated ResourceSlice.
pub(crate) fn validate_slice(obj: &Value) -> Causes {
    let mut causes = Causes::new();
    let spec = &obj["spec"];
    if spec["driver"].as_str().unwrap_or_default().is_empty() {
        causes.push(("spec.driver".into(), "Required value".into()));
    }
    if spec["pool"]["name"].as_str().unwrap_or_default().is_empty() {
        causes.push(("spec.pool.name".into(), "Required value".into()));
    }
    if spec["pool"]["resourceSliceCount"]
        .as_i64()
        .is_none_or(|c| c <= 0)
    {
        causes.push((
            "spec.pool.resourceSliceCount".into(),
            format!(
                "Invalid value: {}: must be greater than zero",
                spec["pool"]["resourceSliceCount"]
            ),
        ));
    }
    let set = [
        !spec["nodeName"].as_str().unwrap_or_default().is_empty(),
        spec["nodeSelector"].is_object(),
        spec["allNodes"] == true,
        spec["perDeviceNodeSelection"] == true,
    ]
    .iter()
    .filter(|s| **s)
    .count();
    if set != 1 {
        causes.push((
            "spec".into(),
            "Invalid value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required".into(),
        ));
    }
    let devices = spec["devices"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let advanced = devices.iter().any(|d| {
        d["taints"].as_array().is_some_and(|t| !t.is_empty())
            || d["consumesCounters"]
                .as_array()
                .is_some_and(|c| !c.is_empty())
    });
    let max = if advanced {
        SLICE_DEVICES_MAX_ADVANCED
    } else {
        SLICE_DEVICES_MAX
    };
    if devices.len() > max {
        causes.push((
            "spec.devices".into(),
            format!("Too many: {}: must have at most {max} items", devices.len()),
        ));
    }
    if !spec["devices"].is_null() && !spec["sharedCounters"].is_null() {
        causes.push((
            "spec".into(),
            "Invalid value: \"\": only one of `sharedCounters` or `devices` is allowed".into(),
        ));
    }
    causes.extend(validate_counter_sets(&spec["sharedCounters"]));
    for (i, d) in devices.iter().enumerate() {
        causes.extend(validate_device_sharing(d, &format!("spec.devices[{i}]")));
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, d) in devices.iter().enumerate() {
        let name = d["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push((format!("spec.devices[{i}].name"), "Required value".into()));
        } else if !seen.insert(name) {
            causes.push((
                format!("spec.devices[{i}].name"),
                format!("Duplicate value: {name:?}"),
            ));
        }
    }
    causes
}

/// `spec.sharedCounters`: at most 8 sets, unique names, each with 1–32 counters of quantities.
fn validate_counter_sets(sets: &Value) -> Causes {
    let mut causes = Causes::new();
    let Some(sets) = sets.as_array() else {
        return causes;
    };
    if sets.len() > COUNTER_SETS_MAX {
        causes.push((
            "spec.sharedCounters".into(),
            format!(
                "Too many: {}: must have at most {COUNTER_SETS_MAX} items",
                sets.len()
            ),
        ));
        return causes;
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, set) in sets.iter().enumerate() {
        let at = format!("spec.sharedCounters[{i}]");
        let name = set["name"].as_str().unwrap_or_default();
        if !dns_label(name) {
            causes.push((format!("{at}.name"), format!("Invalid value: {name:?}")));
        } else if !seen.insert(name) {
            causes.push((at.clone(), format!("Duplicate value: {name:?}")));
        }
        causes.extend(validate_counters(
            &set["counters"],
            &format!("{at}.counters"),
        ));
    }
    causes
}

/// Counters (of a set or a device's consumption): 1–32, DNS-label names, quantities.
fn validate_counters(counters: &Value, at: &str) -> Causes {
    let mut causes = Causes::new();
    let counters = counters.as_object();
    match counters {
        None => causes.push((at.to_string(), "Required value".into())),
        Some(c) if c.is_empty() => causes.push((at.to_string(), "Required value".into())),
        Some(c) if c.len() > COUNTERS_MAX => causes.push((
            at.to_string(),
            format!(
                "Too many: {}: must have at most {COUNTERS_MAX} items",
                c.len()
            ),
        )),
        Some(c) => {
            for (name, counter) in c {
                if !dns_label(name) {
                    causes.push((format!("{at}[{name}]"), format!("Invalid value: {name:?}")));
                }
                if let Err(why) = milli(&counter["value"]) {
                    causes.push((format!("{at}[{name}].value"), why));
                }
            }
        }
    }
    causes
}

/// A device's `consumesCounters` and its capacities' `requestPolicy`
/// (`validateMultiAllocatableDeviceCapacity`, `validateSingleAllocatableDeviceCapacity`).
fn validate_device_sharing(d: &Value, at: &str) -> Causes {
    let mut causes = Causes::new();
    if let Some(consumes) = d["consumesCounters"].as_array() {
        if consumes.len() > CONSUMPTIONS_MAX {
            causes.push((
                format!("{at}.consumesCounters"),
                format!(
                    "Too many: {}: must have at most {CONSUMPTIONS_MAX} items",
                    consumes.len()
                ),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (j, c) in consumes.iter().enumerate() {
            let cat = format!("{at}.consumesCounters[{j}]");
            let set = c["counterSet"].as_str().unwrap_or_default();
            if !dns_label(set) {
                causes.push((
                    format!("{cat}.counterSet"),
                    format!("Invalid value: {set:?}"),
                ));
            } else if !seen.insert(set) {
                causes.push((cat.clone(), format!("Duplicate value: {set:?}")));
            }
            causes.extend(validate_counters(
                &c["counters"],
                &format!("{cat}.counters"),
            ));
        }
    }
    let shared = d["allowMultipleAllocations"] == true;
    for (name, capacity) in d["capacity"].as_object().into_iter().flatten() {
        let cat = format!("{at}.capacity[{name}]");
        let value = match milli(&capacity["value"]) {
            Ok(v) => v,
            Err(why) => {
                causes.push((format!("{cat}.value"), why));
                continue;
            }
        };
        let policy = &capacity["requestPolicy"];
        if policy.is_null() {
            continue;
        }
        let pat = format!("{cat}.requestPolicy");
        if !shared {
            causes.push((
                pat,
                "Forbidden: allowMultipleAllocations must be true".into(),
            ));
            continue;
        }
        causes.extend(validate_request_policy(policy, value, &pat));
    }
    causes
}

/// `validateRequestPolicy` of a capacity of `value` thousandths.
fn validate_request_policy(policy: &Value, value: i64, at: &str) -> Causes {
    let mut causes = Causes::new();
    let values = policy["validValues"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let range = &policy["validRange"];
    if !values.is_empty() && !range.is_null() {
        causes.push((
            at.to_string(),
            "Forbidden: exactly one policy can be specified, cannot specify \"validValues\" and \"validRange\" at the same time".into(),
        ));
        return causes;
    }
    if values.is_empty() && range.is_null() {
        return causes;
    }
    let default = match &policy["default"] {
        Value::Null => {
            let which = if values.is_empty() {
                "validRange"
            } else {
                "validValues"
            };
            causes.push((
                format!("{at}.default"),
                format!("Required value: required when {which} is defined"),
            ));
            return causes;
        }
        q => match milli(q) {
            Ok(d) => d,
            Err(why) => {
                causes.push((format!("{at}.default"), why));
                return causes;
            }
        },
    };
    if !values.is_empty() {
        let at = format!("{at}.validValues");
        if values.len() > VALID_VALUES_MAX {
            causes.push((
                at,
                format!(
                    "Too many: {}: must have at most {VALID_VALUES_MAX} items",
                    values.len()
                ),
            ));
            return causes;
        }
        let mut parsed = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            match milli(v) {
                Ok(m) => parsed.push(m),
                Err(why) => causes.push((format!("{at}[{i}]"), why)),
            }
        }
        for (i, w) in parsed.windows(2).enumerate() {
            if w[0] > w[1] {
                causes.push((
                    format!("{at}[{}]", i + 1),
                    "Invalid value: values must be sorted in ascending order".into(),
                ));
            }
        }
        for (i, &m) in parsed.iter().enumerate() {
            if m > value {
                causes.push((
                    format!("{at}[{i}]"),
                    "Invalid value: option is larger than capacity value".into(),
                ));
            }
        }
        if !parsed.contains(&default) {
            causes.push((
                at,
                "Invalid value: default value is not valid according to the requestPolicy".into(),
            ));
        }
        return causes;
    }
    let at = format!("{at}.validRange");
    let min = match milli(&range["min"]) {
        Ok(m) => m,
        Err(_) if range["min"].is_null() => {
            causes.push((
                format!("{at}.min"),
                "Required value: required when validRange is defined".into(),
            ));
            return causes;
        }
        Err(why) => {
            causes.push((format!("{at}.min"), why));
            return causes;
        }
    };
    if min > value {
        causes.push((
            format!("{at}.min"),
            "Invalid value: min is larger than capacity value".into(),
        ));
    }
    if default < min {
        causes.push((
            format!("{at}.default"),
            "Invalid value: default is less than min".into(),
        ));
    }
    let max = match &range["max"] {
        Value::Null => None,
        q => match milli(q) {
            Ok(m) => Some(m),
            Err(why) => {
                causes.push((format!("{at}.max"), why));
                return causes;
            }
        },
    };
    if let Some(max) = max {
        if min > max {
            causes.push((
                format!("{at}.max"),
                "Invalid value: min is larger than max".into(),
            ));
        }
        if max > value {
            causes.push((
                format!("{at}.max"),
                "Invalid value: max is larger than capacity value".into(),
            ));
        }
        if default > max {
            causes.push((
                format!("{at}.default"),
                "Invalid value: default is more than max".into(),
            ));
        }
    }
    if !range["step"].is_null() {
        let step = match milli(&range["step"]) {
            Ok(s) => s,
            Err(why) => {
                causes.push((format!("{at}.step"), why));
                return causes;
            }
        };
        if step <= 0 {
            causes.push((
                format!("{at}.step"),
                "Invalid value: must be greater than zero".into(),
            ));
            return causes;
        }
        if min.saturating_add(step) > value {
            causes.push((
                format!("{at}.step"),
                "Invalid value: one step is larger than capacity value".into(),
            ));
        }
        let step_u = units(step);
        for v in std::iter::once(default).chain(max) {
            if step_u > 0 && (units(v) - units(min)) % step_u != 0 {
                causes.push((
                    format!("{at}.step"),
                    "Invalid value: value is not a multiple of a given step".into(),
                ));
            }
        }
    }
    causes
}

/// An update of a claim or a template through the main resource: the spec is immutable.
pub(crate) fn validate_spec_update(old: &Value, new: &Value, field: &str) -> Causes {
    if old["spec"] != new["spec"] {
        vec![(field.into(), "Invalid value: field is immutable".into())]
    } else {
        Causes::new()
    }
}

/// The request names a claim's allocation results may name: each request, and
/// `request/subrequest` for a `firstAvailable` one.
fn request_names(claim: &Value) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for r in claim["spec"]["devices"]["requests"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let Some(name) = r["name"].as_str() else {
            continue;
        };
        names.insert(name.to_string());
        for s in r["firstAvailable"].as_array().into_iter().flatten() {
            if let Some(sub) = s["name"].as_str() {
                names.insert(format!("{name}/{sub}"));
            }
        }
    }
    names
}

/// A status update of a claim (`validateResourceClaimStatusUpdate`).
pub(crate) fn validate_status_update(old: &Value, new: &Value) -> Causes {
    let mut causes = Causes::new();
    let status = &new["status"];
    let users = status["reservedFor"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if users.len() > RESERVED_FOR_MAX {
        causes.push((
            "status.reservedFor".into(),
            format!(
                "Too many: {}: must have at most {RESERVED_FOR_MAX} items",
                users.len()
            ),
        ));
    }
    let mut uids = std::collections::BTreeSet::new();
    for (i, u) in users.iter().enumerate() {
        for field in ["resource", "name", "uid"] {
            if u[field].as_str().unwrap_or_default().is_empty() {
                causes.push((
                    format!("status.reservedFor[{i}].{field}"),
                    "Required value".into(),
                ));
            }
        }
        if let Some(uid) = u["uid"].as_str().filter(|u| !u.is_empty()) {
            if !uids.insert(uid) {
                causes.push((
                    format!("status.reservedFor[{i}]"),
                    format!("Duplicate value: {uid:?}"),
                ));
            }
        }
    }
    let allocation = &status["allocation"];
    let old_allocation = &old["status"]["allocation"];
    if !users.is_empty() {
        if allocation.is_null() {
            causes.push((
                "status.reservedFor".into(),
                "Forbidden: may not be specified when `allocated` is not set".into(),
            ));
        } else if !new["metadata"]["deletionTimestamp"].is_null() {
            let before: Vec<&Value> = old["status"]["reservedFor"]
                .as_array()
                .into_iter()
                .flatten()
                .collect();
            if users.iter().any(|u| !before.contains(&u)) {
                causes.push((
                    "status.reservedFor".into(),
                    "Forbidden: new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set".into(),
                ));
            }
        }
    }
    if !old_allocation.is_null() && !allocation.is_null() {
        if old_allocation != allocation {
            causes.push((
                "status.allocation".into(),
                "Invalid value: field is immutable".into(),
            ));
        }
    } else if !allocation.is_null() {
        let names = request_names(new);
        let results = allocation["devices"]["results"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        if results.len() > ALLOCATION_RESULTS_MAX {
            causes.push((
                "status.allocation.devices.results".into(),
                format!(
                    "Too many: {}: must have at most {ALLOCATION_RESULTS_MAX} items",
                    results.len()
                ),
            ));
        }
        for (i, r) in results.iter().enumerate() {
            let at = format!("status.allocation.devices.results[{i}]");
            let request = r["request"].as_str().unwrap_or_default();
            if !names.contains(request) {
                causes.push((
                    format!("{at}.request"),
                    format!("Invalid value: {request:?}: must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"),
                ));
            }
            for field in ["driver", "pool", "device"] {
                if r[field].as_str().unwrap_or_default().is_empty() {
                    causes.push((format!("{at}.{field}"), "Required value".into()));
                }
            }
            if let Some(id) = r.get("shareID").filter(|v| !v.is_null()) {
                let id = id.as_str().unwrap_or_default();
                if !normalized_uuid(id) {
                    causes.push((
                        format!("{at}.shareID"),
                        format!("Invalid value: {id:?}: uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters"),
                    ));
                }
            }
        }
    }
    causes
}

/// One run of the resource-claim controller over the pods, claims and templates of
/// `namespace` (its writes are applied by the caller, each as its own write).
pub(crate) fn controller_sync(
    pods: &[Value],
    claims: &[Value],
    templates: &[Value],
    taken: &dyn Fn(&str, &str) -> bool,
) -> resourceclaim::Sync {
    let pods: Vec<Pod> = pods
        .iter()
        .filter_map(|p| serde_json::from_value(p.clone()).ok())
        .collect();
    let claims: Vec<ResourceClaim> = claims
        .iter()
        .filter_map(|c| serde_json::from_value(c.clone()).ok())
        .collect();
    let templates: Vec<ResourceClaimTemplate> = templates
        .iter()
        .filter_map(|t| serde_json::from_value(t.clone()).ok())
        .collect();
    let pods: Vec<&Pod> = pods.iter().collect();
    let claims: Vec<&ResourceClaim> = claims.iter().collect();
    let templates: Vec<&ResourceClaimTemplate> = templates.iter().collect();
    resourceclaim::sync(&pods, &claims, &templates, taken)
}

/// Whether a pod (as stored) names any resource claim (or has the bridge's), so the
/// controller has work for it.
pub(crate) fn pod_has_claims(pod: &Value) -> bool {
    pod["spec"]["resourceClaims"]
        .as_array()
        .is_some_and(|c| !c.is_empty())
        || !pod["status"]["extendedResourceClaimStatus"].is_null()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim() -> Value {
        json!({
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}},
                {"name": "alt", "firstAvailable": [
                    {"name": "big", "deviceClassName": "big.example.com"},
                    {"name": "small", "deviceClassName": "small.example.com", "count": 2}
                ]}
            ]}},
            "status": {"reservedFor": [{"resource": "pods", "name": "x", "uid": "1"}]}
        })
    }

    fn allocation(request: &str) -> Value {
        json!({"devices": {"results": [
            {"request": request, "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}
        ]}})
    }

    #[test]
    fn create_drops_status_and_defaults_exact_count_one() {
        let mut c = claim();
        prepare_claim(&mut c).unwrap();
        assert!(c["status"].is_null());
        let r = &c["spec"]["devices"]["requests"];
        assert_eq!(r[0]["exactly"]["allocationMode"], "ExactCount");
        assert_eq!(r[0]["exactly"]["count"], 1);
        assert_eq!(r[1]["firstAvailable"][1]["count"], 2);
    }

    #[test]
    fn bad_requests_are_refused_with_the_field() {
        let mut c = json!({"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "", "allocationMode": "Some"}},
            {"name": "gpu"},
            {"name": "x", "exactly": {"deviceClassName": "c", "allocationMode": "All", "count": 2}}
        ]}}});
        let causes = prepare_claim(&mut c).unwrap_err();
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert!(fields.contains(&"spec.devices.requests[0].exactly.deviceClassName"));
        assert!(fields.contains(&"spec.devices.requests[0].exactly.allocationMode"));
        assert!(fields.contains(&"spec.devices.requests[1].name"));
        assert!(fields.contains(&"spec.devices.requests[1]"));
        assert!(fields.contains(&"spec.devices.requests[2].exactly.count"));
    }

    #[test]
    fn allocation_results_must_name_a_request_or_subrequest() {
        let old = claim();
        let mut new = claim();
        new["status"] = json!({"allocation": allocation("alt/small")});
        assert!(validate_status_update(&old, &new).is_empty());
        new["status"] = json!({"allocation": allocation("nope")});
        let causes = validate_status_update(&old, &new);
        assert_eq!(causes[0].0, "status.allocation.devices.results[0].request");
        new["status"] = json!({"allocation": allocation("alt/none")});
        assert_eq!(validate_status_update(&old, &new).len(), 1);
    }

    #[test]
    fn allocation_is_immutable_once_set_but_may_be_cleared() {
        let mut old = claim();
        old["status"] = json!({"allocation": allocation("gpu")});
        let mut new = old.clone();
        new["status"]["allocation"]["devices"]["results"][0]["device"] = json!("gpu-1");
        let causes = validate_status_update(&old, &new);
        assert_eq!(causes[0].0, "status.allocation");
        new["status"] = json!({});
        assert!(validate_status_update(&old, &new).is_empty());
    }

    #[test]
    fn reserved_for_needs_an_allocation_and_at_most_256_distinct_users() {
        let old = claim();
        let mut new = claim();
        new["status"] = json!({"reservedFor": [{"resource": "pods", "name": "a", "uid": "1"}]});
        assert!(validate_status_update(&old, &new)[0]
            .1
            .contains("may not be specified"));
        let users: Vec<Value> = (0..257)
            .map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")}))
            .collect();
        new["status"] = json!({"allocation": allocation("gpu"), "reservedFor": users});
        assert!(validate_status_update(&old, &new)[0]
            .1
            .starts_with("Too many"));
        new["status"] = json!({"allocation": allocation("gpu"), "reservedFor": [
            {"resource": "pods", "name": "a", "uid": "1"},
            {"resource": "pods", "name": "b", "uid": "1"},
            {"resource": "pods", "name": "", "uid": "2"}
        ]});
        let fields: Vec<String> = validate_status_update(&old, &new)
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            ["status.reservedFor[1]", "status.reservedFor[2].name"]
        );
    }

    #[test]
    fn deleting_claim_gains_no_user() {
        let mut old = claim();
        old["status"] = json!({"allocation": allocation("gpu")});
        old["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let mut new = old.clone();
        new["status"]["reservedFor"] = json!([{"resource": "pods", "name": "a", "uid": "1"}]);
        assert!(validate_status_update(&old, &new)[0]
            .1
            .contains("new entries may not be added"));
    }

    #[test]
    fn slices_need_driver_pool_and_one_node_choice() {
        let ok = json!({"spec": {"driver": "gpu.example.com", "nodeName": "n1",
            "pool": {"name": "n1", "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}});
        assert!(validate_slice(&ok).is_empty());
        let bad = json!({"spec": {"nodeName": "n1", "allNodes": true,
            "pool": {"name": "n1", "resourceSliceCount": 0},
            "devices": [{"name": "gpu-0"}, {"name": "gpu-0"}]}});
        let fields: Vec<String> = validate_slice(&bad).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "spec.driver",
                "spec.pool.resourceSliceCount",
                "spec",
                "spec.devices[1].name"
            ]
        );
    }

    #[test]
    fn shares_need_a_normalized_share_id() {
        let old = claim();
        let mut new = claim();
        let mut a = allocation("gpu");
        a["devices"]["results"][0]["shareID"] = json!("7c2f3b54-ad1e-8f60-b223-1d2e3f4a5b6c");
        a["devices"]["results"][0]["consumedCapacity"] = json!({"memory": "20Gi"});
        new["status"] = json!({"allocation": a.clone()});
        assert!(validate_status_update(&old, &new).is_empty());
        a["devices"]["results"][0]["shareID"] = json!("7C2F3B54-AD1E-8F60-B223-1D2E3F4A5B6C");
        new["status"] = json!({"allocation": a});
        assert_eq!(
            validate_status_update(&old, &new)[0].0,
            "status.allocation.devices.results[0].shareID"
        );
    }

    #[test]
    fn constraints_and_capacity_requests_are_checked() {
        let mut c = json!({"spec": {"devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "c",
                "capacity": {"requests": {"memory": "lots"}}}}],
            "constraints": [
                {"distinctAttribute": "gpu.example.com/uuid"},
                {"matchAttribute": "clique"},
                {"matchAttribute": "a/b", "distinctAttribute": "a/b"}]}}});
        let fields: Vec<String> = prepare_claim(&mut c)
            .unwrap_err()
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.devices.constraints[1].matchAttribute",
                "spec.devices.constraints[2]",
                "spec.devices.requests[0].exactly.capacity.requests[memory]"
            ]
        );
    }

    #[test]
    fn shared_devices_policies_and_counters_are_validated() {
        let slice = |devices: Value, counters: Value| {
            let mut s = json!({"spec": {"driver": "gpu.example.com", "nodeName": "n1",
                "pool": {"name": "n1", "resourceSliceCount": 1}}});
            if !devices.is_null() {
                s["spec"]["devices"] = devices;
            }
            if !counters.is_null() {
                s["spec"]["sharedCounters"] = counters;
            }
            s
        };
        let fields =
            |s: &Value| -> Vec<String> { validate_slice(s).into_iter().map(|(f, _)| f).collect() };
        let good = slice(
            json!([{"name": "gpu-0", "allowMultipleAllocations": true, "capacity": {
                "memory": {"value": "80Gi", "requestPolicy": {"default": "10Gi",
                    "validRange": {"min": "10Gi", "max": "80Gi", "step": "10Gi"}}},
                "cores": {"value": "100", "requestPolicy": {"default": "10", "validValues": ["10", "50", "100"]}}},
              "consumesCounters": [{"counterSet": "gpu-0", "counters": {"slices": {"value": "8"}}}]}]),
            Value::Null,
        );
        assert!(
            validate_slice(&good).is_empty(),
            "{:?}",
            validate_slice(&good)
        );
        let counters = slice(
            Value::Null,
            json!([{"name": "gpu-0", "counters": {"slices": {"value": "8"}}}]),
        );
        assert!(validate_slice(&counters).is_empty());
        let both = slice(
            json!([{"name": "x"}]),
            json!([{"name": "gpu-0", "counters": {"slices": {"value": "8"}}}]),
        );
        assert_eq!(fields(&both), ["spec"]);
        let bad = slice(
            json!([
                {"name": "a", "capacity": {"m": {"value": "8", "requestPolicy": {"default": "1"}}}},
                {"name": "b", "allowMultipleAllocations": true, "capacity": {
                    "m": {"value": "8", "requestPolicy": {"validValues": ["4", "2"]}}}},
                {"name": "c", "allowMultipleAllocations": true, "capacity": {
                    "m": {"value": "8", "requestPolicy": {"default": "3", "validRange": {"min": "2", "step": "2"}}}}},
                {"name": "d", "consumesCounters": [{"counterSet": "s", "counters": {}}]}]),
            Value::Null,
        );
        assert_eq!(
            fields(&bad),
            [
                "spec.devices[0].capacity[m].requestPolicy",
                "spec.devices[1].capacity[m].requestPolicy.default",
                "spec.devices[2].capacity[m].requestPolicy.validRange.step",
                "spec.devices[3].consumesCounters[0].counters"
            ]
        );
    }

    #[test]
    fn extended_resource_names() {
        assert!(is_extended_resource_name("nvidia.com/gpu"));
        assert!(!is_extended_resource_name("gpu"));
        assert!(!is_extended_resource_name("kubernetes.io/gpu"));
        assert!(!is_extended_resource_name("foo.kubernetes.io/gpu"));
        let class = json!({"spec": {"extendedResourceName": "cpu"}});
        assert_eq!(validate_class(&class)[0].0, "spec.extendedResourceName");
    }
}
