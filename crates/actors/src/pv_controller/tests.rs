//! The PV controller's binding rules against hand-made claims and volumes.

use super::*;
use serde_json::json;

const NOW: Time = Time(1_767_225_600_000);

fn pv(name: &str, size: &str, class: &str, modes: &[&str]) -> PersistentVolume {
    let mut v: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": modes,
            "storageClassName": class,
            "local": {"path": "/mnt/disk"}
        }
    }))
    .unwrap();
    admit_volume(&mut v, NOW);
    v
}

fn pvc(name: &str, size: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut c: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "resourceVersion": "7"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        }
    }))
    .unwrap();
    if let Some(class) = class {
        c.spec.as_mut().unwrap().storage_class_name = Some(class.into());
    }
    admit_claim(&mut c, &[]);
    c
}

fn class(name: &str, provisioner: &str, mode: &str) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode
    }))
    .unwrap()
}

/// Runs the controller and applies its writes, as a store would.
fn settle(
    claims: &mut [PersistentVolumeClaim],
    volumes: &mut [PersistentVolume],
    classes: &[StorageClass],
) -> usize {
    let writes = sync(claims, volumes, classes, NOW);
    let n = writes.len();
    for w in writes {
        match w {
            Write::Claim(c) => {
                let slot = claims.iter_mut().find(|x| claim_key(x) == claim_key(&c));
                *slot.unwrap() = c;
            }
            Write::Volume(v) => {
                let slot = volumes
                    .iter_mut()
                    .find(|x| x.metadata.name == v.metadata.name);
                *slot.unwrap() = v;
            }
        }
    }
    n
}

fn claim_phase(c: &PersistentVolumeClaim) -> &str {
    c.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap()
}

fn bound_to(c: &PersistentVolumeClaim) -> Option<&str> {
    c.spec.as_ref().and_then(|s| s.volume_name.as_deref())
}

#[test]
fn an_immediate_claim_takes_the_smallest_available_volume_that_fits() {
    let mut volumes = [
        pv("big", "100Gi", "local", &["ReadWriteOnce"]),
        pv("small", "5Gi", "local", &["ReadWriteOnce"]),
        pv("right", "20Gi", "local", &["ReadWriteOnce"]),
        pv("other-class", "10Gi", "fast", &["ReadWriteOnce"]),
        pv("read-only", "10Gi", "local", &["ReadOnlyMany"]),
    ];
    let mut claims = [pvc("data", "10Gi", Some("local"))];
    let classes = [class("local", NO_PROVISIONER, "Immediate")];
    assert!(settle(&mut claims, &mut volumes, &classes) > 0);

    let c = &claims[0];
    assert_eq!(bound_to(c), Some("right"));
    assert_eq!(claim_phase(c), "Bound");
    let s = c.status.as_ref().unwrap();
    assert_eq!(s.capacity.as_ref().unwrap()["storage"].0, "20Gi");
    assert_eq!(
        s.access_modes.as_deref(),
        Some(&["ReadWriteOnce".to_string()][..])
    );
    let ann = c.metadata.annotations.as_ref().unwrap();
    assert_eq!(ann[BIND_COMPLETED], "yes");
    assert_eq!(ann[BOUND_BY_CONTROLLER], "yes");

    let v = volumes
        .iter()
        .find(|v| v.metadata.name.as_deref() == Some("right"))
        .unwrap();
    assert_eq!(volume_phase(v), "Bound");
    let r = v.spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
    assert_eq!(r.uid.as_deref(), Some("uid-data"));
    assert_eq!(r.resource_version.as_deref(), Some("7"));
    assert_eq!(r.kind.as_deref(), Some("PersistentVolumeClaim"));
    assert_eq!(
        v.metadata.annotations.as_ref().unwrap()[BOUND_BY_CONTROLLER],
        "yes"
    );
    for other in volumes
        .iter()
        .filter(|v| v.metadata.name.as_deref() != Some("right"))
    {
        assert_eq!(volume_phase(other), "Available");
    }
    // Settled: a second run writes nothing.
    assert_eq!(settle(&mut claims, &mut volumes, &classes), 0);
}

#[test]
fn a_wait_for_first_consumer_claim_is_left_to_the_scheduler() {
    let mut volumes = [pv("local-1", "10Gi", "local", &["ReadWriteOnce"])];
    let mut claims = [pvc("data", "10Gi", Some("local"))];
    let classes = [class("local", NO_PROVISIONER, "WaitForFirstConsumer")];
    settle(&mut claims, &mut volumes, &classes);
    assert_eq!(claim_phase(&claims[0]), "Pending");
    assert_eq!(bound_to(&claims[0]), None);
    assert_eq!(volume_phase(&volumes[0]), "Available");

    // The scheduler pre-binds the volume by claimRef (name and namespace only): the
    // controller completes the binding, and the volume is not marked bound-by-controller.
    volumes[0].spec.as_mut().unwrap().claim_ref = Some(ObjectReference {
        name: Some("data".into()),
        namespace: Some("default".into()),
        ..Default::default()
    });
    settle(&mut claims, &mut volumes, &classes);
    assert_eq!(bound_to(&claims[0]), Some("local-1"));
    assert_eq!(claim_phase(&claims[0]), "Bound");
    assert_eq!(volume_phase(&volumes[0]), "Bound");
    assert!(!has_annotation(&volumes[0].metadata, BOUND_BY_CONTROLLER));
    assert_eq!(
        volumes[0]
            .spec
            .as_ref()
            .unwrap()
            .claim_ref
            .as_ref()
            .unwrap()
            .uid
            .as_deref(),
        Some("uid-data")
    );
}

#[test]
fn a_provisioned_claim_waits_for_its_volume_then_binds() {
    let classes = [class("fast", "csi.example.com", "WaitForFirstConsumer")];
    let mut claims = [pvc("data", "10Gi", Some("fast"))];
    let mut volumes: Vec<PersistentVolume> = Vec::new();
    settle(&mut claims, &mut volumes, &classes);
    assert!(!has_annotation(&claims[0].metadata, STORAGE_PROVISIONER));

    // Scheduler selects a node: the provisioner is asked for.
    set_annotation(&mut claims[0].metadata, SELECTED_NODE, "n1");
    settle(&mut claims, &mut volumes, &classes);
    assert_eq!(
        annotation(&claims[0].metadata, STORAGE_PROVISIONER),
        Some("csi.example.com")
    );
    assert_eq!(claim_phase(&claims[0]), "Pending");

    // The provisioner creates a volume bound to the claim (as external-provisioner does).
    let mut v = pv("pvc-1", "10Gi", "fast", &["ReadWriteOnce"]);
    v.spec.as_mut().unwrap().claim_ref = Some(ObjectReference {
        name: Some("data".into()),
        namespace: Some("default".into()),
        uid: Some("uid-data".into()),
        ..Default::default()
    });
    volumes.push(v);
    settle(&mut claims, &mut volumes, &classes);
    assert_eq!(bound_to(&claims[0]), Some("pvc-1"));
    assert_eq!(claim_phase(&claims[0]), "Bound");
    assert_eq!(volume_phase(&volumes[0]), "Bound");
}

#[test]
fn a_claim_naming_a_volume_binds_only_if_it_fits() {
    let mut volumes = [
        pv("tiny", "1Gi", "", &["ReadWriteOnce"]),
        pv("fits", "10Gi", "", &["ReadWriteOnce", "ReadOnlyMany"]),
    ];
    let mut small = pvc("a", "5Gi", Some(""));
    small.spec.as_mut().unwrap().volume_name = Some("tiny".into());
    let mut ok = pvc("b", "5Gi", Some(""));
    ok.spec.as_mut().unwrap().volume_name = Some("fits".into());
    let mut missing = pvc("c", "5Gi", Some(""));
    missing.spec.as_mut().unwrap().volume_name = Some("nowhere".into());
    let mut claims = [small, ok, missing];
    settle(&mut claims, &mut volumes, &[]);
    assert_eq!(claim_phase(&claims[0]), "Pending");
    assert_eq!(
        unsatisfied(&volumes[0], &claims[0]).as_deref(),
        Some("requested PV is too small")
    );
    assert_eq!(volume_phase(&volumes[0]), "Available");
    assert_eq!(claim_phase(&claims[1]), "Bound");
    // volumeName set by the user: the claim is not marked bound-by-controller, the volume is.
    assert!(!has_annotation(&claims[1].metadata, BOUND_BY_CONTROLLER));
    assert!(has_annotation(&volumes[1].metadata, BOUND_BY_CONTROLLER));
    assert_eq!(claim_phase(&claims[2]), "Pending");
}

#[test]
fn a_volume_pre_bound_to_another_uid_is_not_taken() {
    let mut v = pv("v", "10Gi", "local", &["ReadWriteOnce"]);
    v.spec.as_mut().unwrap().claim_ref = Some(ObjectReference {
        name: Some("data".into()),
        namespace: Some("default".into()),
        uid: Some("an-older-claim".into()),
        ..Default::default()
    });
    let mut volumes = [v];
    let mut claims = [pvc("data", "1Gi", Some("local"))];
    settle(
        &mut claims,
        &mut volumes,
        &[class("local", NO_PROVISIONER, "Immediate")],
    );
    assert_eq!(claim_phase(&claims[0]), "Pending");
    // Its claim (that uid) is gone: Released, and nothing reclaims it.
    assert_eq!(volume_phase(&volumes[0]), "Released");
}

#[test]
fn losing_the_volume_makes_a_bound_claim_lost() {
    let classes = [class("local", NO_PROVISIONER, "Immediate")];
    let mut volumes = vec![pv("v", "10Gi", "local", &["ReadWriteOnce"])];
    let mut claims = [pvc("data", "1Gi", Some("local"))];
    settle(&mut claims, &mut volumes, &classes);
    assert_eq!(claim_phase(&claims[0]), "Bound");
    volumes.clear();
    settle(&mut claims, &mut volumes, &classes);
    assert_eq!(claim_phase(&claims[0]), "Lost");
    assert!(claims[0].status.as_ref().unwrap().capacity.is_none());
}

#[test]
fn a_claim_without_a_class_gets_the_newest_default() {
    let mut old = class("old", "a", "Immediate");
    let mut new = class("new", "b", "Immediate");
    for (c, t) in [
        (&mut old, "2026-01-01T00:00:00Z"),
        (&mut new, "2026-01-02T00:00:00Z"),
    ] {
        set_annotation(&mut c.metadata, DEFAULT_CLASS, "true");
        c.metadata.creation_timestamp = Some(serde_json::from_value(json!(t)).unwrap());
    }
    let classes = [old, new, class("plain", "c", "Immediate")];
    let mut c: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "d", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"]}
    }))
    .unwrap();
    admit_claim(&mut c, &classes);
    assert_eq!(claim_class(&c), "new");
    assert_eq!(
        c.spec.as_ref().unwrap().volume_mode.as_deref(),
        Some("Filesystem")
    );
    assert_eq!(claim_phase(&c), "Pending");

    // An explicit empty class stays empty.
    let mut e = pvc("e", "1Gi", Some(""));
    admit_claim(&mut e, &classes);
    assert_eq!(claim_class(&e), "");
}

#[test]
fn fewer_extra_access_modes_win_over_size() {
    let mut volumes = [
        pv("rwo-big", "50Gi", "x", &["ReadWriteOnce"]),
        pv(
            "rwx-small",
            "10Gi",
            "x",
            &["ReadWriteOnce", "ReadWriteMany"],
        ),
    ];
    let mut claims = [pvc("data", "10Gi", Some("x"))];
    settle(&mut claims, &mut volumes, &[]);
    assert_eq!(bound_to(&claims[0]), Some("rwo-big"));
}

#[test]
fn a_selector_restricts_the_volumes_a_claim_takes() {
    let mut a = pv("a", "10Gi", "x", &["ReadWriteOnce"]);
    a.metadata.labels = Some([("disk".to_string(), "ssd".to_string())].into());
    let b = pv("b", "5Gi", "x", &["ReadWriteOnce"]);
    let mut volumes = [a, b];
    let mut c = pvc("data", "1Gi", Some("x"));
    c.spec.as_mut().unwrap().selector =
        Some(serde_json::from_value(json!({"matchLabels": {"disk": "ssd"}})).unwrap());
    let mut claims = [c];
    settle(&mut claims, &mut volumes, &[]);
    assert_eq!(bound_to(&claims[0]), Some("a"));
}

#[test]
fn two_claims_never_share_a_volume() {
    let mut volumes = [pv("only", "10Gi", "x", &["ReadWriteOnce"])];
    let mut claims = [pvc("a", "1Gi", Some("x")), pvc("b", "1Gi", Some("x"))];
    settle(&mut claims, &mut volumes, &[]);
    let bound: Vec<_> = claims
        .iter()
        .filter(|c| claim_phase(c) == "Bound")
        .collect();
    assert_eq!(bound.len(), 1);
    assert_eq!(bound_to(bound[0]), Some("only"));
}
