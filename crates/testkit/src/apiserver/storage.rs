//! PersistentVolumes, PersistentVolumeClaims and StorageClasses as kube-apiserver treats them
//! (defaulting, the DefaultStorageClass admission plugin, create and update validation), and
//! the glue that runs kube-controller-manager's PV controller ([`caldera_actors::pv_controller`])
//! over the stored objects.

use caldera_actors::pv_controller::{self, Write};
use caldera_model::quantity::{parse_quantity, Scale};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use serde_json::{json, Value};

/// A field and what is wrong with it, as `ApiError::invalid` takes them.
pub(crate) type Causes = Vec<(String, String)>;

/// The volume sources of `PersistentVolumeSource` (exactly one must be set).
const VOLUME_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

fn set_default(obj: &mut Value, path: &[&str], value: Value) {
    let mut at = obj;
    for key in &path[..path.len() - 1] {
        if !at[*key].is_object() {
            at[*key] = json!({});
        }
        at = &mut at[*key];
    }
    let last = path[path.len() - 1];
    if at[last].is_null() {
        at[last] = value;
    }
}

fn storage_of(list: &Value) -> Option<i64> {
    match &list["storage"] {
        Value::String(s) => parse_quantity(s, Scale::Units).ok(),
        Value::Number(n) => n.as_i64(),
        _ => None,
    }
}

fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// `SetDefaults_PersistentVolume` and `PrepareForCreate` of a PersistentVolume, after
/// `ValidatePersistentVolume`'s checks of what a scheduler reads.
pub(crate) fn prepare_volume(obj: &mut Value) -> Result<(), Causes> {
    let mut causes = Causes::new();
    let spec = &obj["spec"];
    if empty(&spec["accessModes"]) {
        causes.push(("spec.accessModes".into(), "Required value".into()));
    }
    if empty(&spec["capacity"]) {
        causes.push(("spec.capacity".into(), "Required value".into()));
    } else if storage_of(&spec["capacity"]).is_none() {
        causes.push((
            "spec.capacity".into(),
            "Unsupported value: supported values: \"storage\"".into(),
        ));
    }
    let sources: Vec<&str> = VOLUME_SOURCES
        .iter()
        .copied()
        .filter(|s| !spec[*s].is_null())
        .collect();
    match sources.as_slice() {
        [] => causes.push((
            "spec".into(),
            "Required value: must specify a volume type".into(),
        )),
        [_] => {}
        [_, extra, ..] => causes.push((
            format!("spec.{extra}"),
            "Forbidden: may not specify more than 1 volume type".into(),
        )),
    }
    if !spec["local"].is_null() && spec["nodeAffinity"].is_null() {
        causes.push((
            "spec.nodeAffinity".into(),
            "Required value: Local volume requires node affinity".into(),
        ));
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    set_default(obj, &["spec", "volumeMode"], json!("Filesystem"));
    set_default(
        obj,
        &["spec", "persistentVolumeReclaimPolicy"],
        json!("Retain"),
    );
    obj["status"] = json!({"phase": "Pending", "lastPhaseTransitionTime": super::time::now()});
    Ok(())
}

/// The DefaultStorageClass admission plugin, `SetDefaults_PersistentVolumeClaim` and
/// `PrepareForCreate` of a claim, after `ValidatePersistentVolumeClaim`'s checks of what a
/// scheduler reads.
pub(crate) fn prepare_claim(obj: &mut Value, classes: &[StorageClass]) -> Result<(), Causes> {
    let mut causes = Causes::new();
    if empty(&obj["spec"]["accessModes"]) {
        causes.push((
            "spec.accessModes".into(),
            "Required value: at least 1 access mode is required".into(),
        ));
    }
    if storage_of(&obj["spec"]["resources"]["requests"]).is_none() {
        causes.push(("spec.resources[storage]".into(), "Required value".into()));
    }
    if !causes.is_empty() {
        return Err(causes);
    }
    let claim: PersistentVolumeClaim = serde_json::from_value(obj.clone())
        .map_err(|e| vec![(String::new(), format!("Invalid value: {e}"))])?;
    let mut admitted = claim.clone();
    pv_controller::admit_claim(&mut admitted, classes);
    let spec = admitted.spec.unwrap_or_default();
    if let Some(class) = spec.storage_class_name {
        obj["spec"]["storageClassName"] = json!(class);
    }
    set_default(obj, &["spec", "volumeMode"], json!("Filesystem"));
    obj["status"] = json!({"phase": "Pending"});
    Ok(())
}

/// `SetDefaults_StorageClass` after `ValidateStorageClass`'s provisioner check.
pub(crate) fn prepare_class(obj: &mut Value) -> Result<(), Causes> {
    if obj["provisioner"].as_str().is_none_or(str::is_empty) {
        return Err(vec![("provisioner".into(), "Required value".into())]);
    }
    set_default(obj, &["reclaimPolicy"], json!("Delete"));
    set_default(obj, &["volumeBindingMode"], json!("Immediate"));
    Ok(())
}

fn immutable(path: &str, value: &Value) -> (String, String) {
    (
        path.to_string(),
        format!("Invalid value: {value}: field is immutable"),
    )
}

/// `ValidatePersistentVolumeUpdate`: the volume source, `volumeMode` and a set `nodeAffinity`
/// do not change; `claimRef` and the rest of the spec may.
pub(crate) fn validate_volume_update(old: &Value, new: &Value) -> Causes {
    let mut causes = Causes::new();
    let source = |v: &Value| -> Vec<Value> {
        VOLUME_SOURCES
            .iter()
            .map(|s| v["spec"][*s].clone())
            .collect()
    };
    if source(old) != source(new) {
        causes.push((
            "spec.persistentvolumesource".into(),
            "Forbidden: spec.persistentvolumesource is immutable after creation".into(),
        ));
    }
    if old["spec"]["volumeMode"] != new["spec"]["volumeMode"] {
        causes.push(immutable("volumeMode", &new["spec"]["volumeMode"]));
    }
    if !old["spec"]["nodeAffinity"].is_null()
        && old["spec"]["nodeAffinity"] != new["spec"]["nodeAffinity"]
    {
        causes.push(immutable("nodeAffinity", &new["spec"]["nodeAffinity"]));
    }
    causes
}

/// `ValidatePersistentVolumeClaimUpdate`: the spec is immutable except `volumeName` set once,
/// `storageClassName` set once where it was unset (the retroactive default class), and, for a
/// bound claim, `resources.requests` and `volumeAttributesClassName`; the storage request never
/// goes below the claim's status capacity.
pub(crate) fn validate_claim_update(old: &Value, new: &Value) -> Causes {
    let mut causes = Causes::new();
    let mut before = old["spec"].clone();
    let mut after = new["spec"].clone();
    let mut skip = |field: &str| {
        if let Value::Object(m) = &mut before {
            m.remove(field);
        }
        if let Value::Object(m) = &mut after {
            m.remove(field);
        }
    };
    if old["spec"]["volumeName"].as_str().is_none_or(str::is_empty) {
        skip("volumeName");
    }
    if old["spec"]["storageClassName"].is_null() {
        skip("storageClassName");
    }
    let bound = new["status"]["phase"] == "Bound";
    if bound {
        skip("volumeAttributesClassName");
        for spec in [&mut before, &mut after] {
            if let Some(Value::Object(r)) = spec.get_mut("resources") {
                r.remove("requests");
            }
        }
    }
    if before != after {
        causes.push((
            "spec".into(),
            "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims".into(),
        ));
    }
    let new_size = storage_of(&new["spec"]["resources"]["requests"]);
    let floor = storage_of(&old["status"]["capacity"]);
    if let (Some(size), Some(floor)) = (new_size, floor) {
        if size < floor {
            causes.push((
                "spec.resources.requests.storage".into(),
                "Forbidden: field can not be less than status.capacity".into(),
            ));
        }
    }
    causes
}

/// `ValidateStorageClassUpdate`: parameters, provisioner, reclaim policy and binding mode are
/// fixed at creation.
pub(crate) fn validate_class_update(old: &Value, new: &Value) -> Causes {
    let mut causes = Causes::new();
    if old["parameters"] != new["parameters"] {
        causes.push((
            "parameters".into(),
            "Forbidden: updates to parameters are forbidden.".into(),
        ));
    }
    if old["provisioner"] != new["provisioner"] {
        causes.push((
            "provisioner".into(),
            "Forbidden: updates to provisioner are forbidden.".into(),
        ));
    }
    if old["reclaimPolicy"] != new["reclaimPolicy"] {
        causes.push((
            "reclaimPolicy".into(),
            "Forbidden: updates to reclaimPolicy are forbidden.".into(),
        ));
    }
    if old["volumeBindingMode"] != new["volumeBindingMode"] {
        causes.push(immutable("volumeBindingMode", &new["volumeBindingMode"]));
    }
    causes
}

/// The PV controller's writes: per claim `(namespace, name, fields)`, per volume `(name,
/// fields)`.
pub(crate) struct ControllerWrites {
    pub claims: Vec<(String, String, Value)>,
    pub volumes: Vec<(String, Value)>,
}

/// One PV controller sync over the stored objects (those that do not decode are left alone):
/// per object it changed, the fields it writes — the new annotations, the spec fields the
/// controller owns and the status.
pub(crate) fn controller_writes(
    claims: &[Value],
    volumes: &[Value],
    classes: &[Value],
) -> ControllerWrites {
    fn decode<T: k8s_openapi::serde::de::DeserializeOwned>(v: &Value) -> Option<T> {
        serde_json::from_value(v.clone()).ok()
    }
    let claims: Vec<PersistentVolumeClaim> = claims.iter().filter_map(decode).collect();
    let volumes: Vec<PersistentVolume> = volumes.iter().filter_map(decode).collect();
    let classes: Vec<StorageClass> = classes.iter().filter_map(decode).collect();
    let mut claim_writes = Vec::new();
    let mut volume_writes = Vec::new();
    for w in pv_controller::sync(&claims, &volumes, &classes, super::time::now_model()) {
        match w {
            Write::Claim(c) => {
                let spec = c.spec.clone().unwrap_or_default();
                let fields = json!({
                    "annotations": c.metadata.annotations,
                    "volumeName": spec.volume_name,
                    "storageClassName": spec.storage_class_name,
                    "status": c.status,
                });
                claim_writes.push((
                    c.metadata.namespace.unwrap_or_default(),
                    c.metadata.name.unwrap_or_default(),
                    fields,
                ));
            }
            Write::Volume(v) => {
                let spec = v.spec.clone().unwrap_or_default();
                let fields = json!({
                    "annotations": v.metadata.annotations,
                    "claimRef": spec.claim_ref,
                    "status": v.status,
                });
                volume_writes.push((v.metadata.name.unwrap_or_default(), fields));
            }
        }
    }
    ControllerWrites {
        claims: claim_writes,
        volumes: volume_writes,
    }
}

/// Puts a controller write's fields into the stored object (`null` removes).
pub(crate) fn apply_fields(obj: &mut Value, fields: &Value, spec_fields: &[&str]) {
    let put = |map: &mut Value, key: &str, v: &Value| {
        if let Value::Object(m) = map {
            if v.is_null() {
                m.remove(key);
            } else {
                m.insert(key.to_string(), v.clone());
            }
        }
    };
    put(&mut obj["metadata"], "annotations", &fields["annotations"]);
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    for f in spec_fields {
        put(&mut obj["spec"], f, &fields[*f]);
    }
    put(obj, "status", &fields["status"]);
}
