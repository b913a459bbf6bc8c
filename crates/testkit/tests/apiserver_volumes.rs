//! The stand-in's PersistentVolumes, claims, StorageClasses and CSINodes, and its PV
//! controller, through the real `kube` client.

mod common;

use caldera_testkit::apiserver::{ApiServer, Options};
use common::{api_error, from_json, TestResult};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn class(name: &str, provisioner: &str, mode: Option<&str>) -> StorageClass {
    let mut c = json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name}, "provisioner": provisioner
    });
    if let Some(mode) = mode {
        c["volumeBindingMode"] = json!(mode);
    }
    from_json(c)
}

fn local_pv(name: &str, size: &str, class: &str, node: &str) -> PersistentVolume {
    from_json(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "local": {"path": "/mnt/disks/a"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}
        },
        "status": {"phase": "Bound"}
    }))
}

fn claim(name: &str, size: &str, class: Option<&str>) -> PersistentVolumeClaim {
    let mut c = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Bound"}
    });
    if let Some(class) = class {
        c["spec"]["storageClassName"] = json!(class);
    }
    from_json(c)
}

fn phase_of_claim(c: &PersistentVolumeClaim) -> Option<&str> {
    c.status.as_ref().and_then(|s| s.phase.as_deref())
}

fn phase_of_volume(v: &PersistentVolume) -> Option<&str> {
    v.status.as_ref().and_then(|s| s.phase.as_deref())
}

#[tokio::test]
async fn the_pv_controller_binds_immediate_claims_and_completes_pre_bindings() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let classes: Api<StorageClass> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "ml");
    let pp = PostParams::default();

    let created = classes
        .create(&pp, &class("local", "kubernetes.io/no-provisioner", None))
        .await?;
    assert_eq!(created.volume_binding_mode.as_deref(), Some("Immediate"));
    assert_eq!(created.reclaim_policy.as_deref(), Some("Delete"));
    classes
        .create(
            &pp,
            &class(
                "wait",
                "kubernetes.io/no-provisioner",
                Some("WaitForFirstConsumer"),
            ),
        )
        .await?;

    // Status is the controller's: dropped on create, then Available.
    let pv = volumes
        .create(&pp, &local_pv("big", "100Gi", "local", "n1"))
        .await?;
    assert_eq!(phase_of_volume(&pv), Some("Pending"));
    assert_eq!(
        pv.spec.as_ref().unwrap().volume_mode.as_deref(),
        Some("Filesystem")
    );
    volumes
        .create(&pp, &local_pv("small", "20Gi", "local", "n2"))
        .await?;
    volumes
        .create(&pp, &local_pv("w1", "20Gi", "wait", "n3"))
        .await?;
    assert_eq!(
        phase_of_volume(&volumes.get("big").await?),
        Some("Available")
    );

    let c = claims
        .create(&pp, &claim("ckpt", "10Gi", Some("local")))
        .await?;
    assert_eq!(
        phase_of_claim(&c),
        Some("Pending"),
        "the create answers before the controller"
    );
    let c = claims.get("ckpt").await?;
    assert_eq!(phase_of_claim(&c), Some("Bound"));
    assert_eq!(
        c.spec.as_ref().unwrap().volume_name.as_deref(),
        Some("small")
    );
    let ann = c.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get("pv.kubernetes.io/bind-completed")
            .map(String::as_str),
        Some("yes")
    );
    let small = volumes.get("small").await?;
    assert_eq!(phase_of_volume(&small), Some("Bound"));
    let r = small.spec.unwrap().claim_ref.unwrap();
    assert_eq!(
        (r.namespace.as_deref(), r.name.as_deref()),
        (Some("ml"), Some("ckpt"))
    );
    assert_eq!(r.uid, c.metadata.uid);

    // WaitForFirstConsumer: Pending until a scheduler pre-binds a volume by claimRef.
    claims
        .create(&pp, &claim("data", "10Gi", Some("wait")))
        .await?;
    assert_eq!(phase_of_claim(&claims.get("data").await?), Some("Pending"));
    volumes
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"claimRef": {"namespace": "ml", "name": "data"}}})),
        )
        .await?;
    let data = claims.get("data").await?;
    assert_eq!(phase_of_claim(&data), Some("Bound"));
    assert_eq!(data.spec.unwrap().volume_name.as_deref(), Some("w1"));
    let status = data.status.unwrap();
    assert_eq!(status.capacity.unwrap()["storage"].0, "20Gi");
    Ok(())
}

#[tokio::test]
async fn claims_get_the_default_class_and_keep_their_spec() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let classes: Api<StorageClass> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "ml");
    let pp = PostParams::default();
    let mut default = class("standard", "csi.example.com", Some("WaitForFirstConsumer"));
    default.metadata.annotations = Some(
        [(
            "storageclass.kubernetes.io/is-default-class".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    classes.create(&pp, &default).await?;

    let c = claims.create(&pp, &claim("data", "10Gi", None)).await?;
    assert_eq!(
        c.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some("standard")
    );

    // Annotations may change (a scheduler's selected node); then the provisioner is asked.
    claims
        .patch(
            "data",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {
                "volume.kubernetes.io/selected-node": "n1"}}})),
        )
        .await?;
    let c = claims.get("data").await?;
    let ann = c.metadata.annotations.unwrap_or_default();
    assert_eq!(
        ann.get("volume.kubernetes.io/storage-provisioner")
            .map(String::as_str),
        Some("csi.example.com")
    );
    // The spec of an unbound claim is immutable.
    let err = api_error(
        claims
            .patch(
                "data",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "20Gi"}}}})),
            )
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("spec is immutable after creation except resources.requests"),
        "{}",
        err.message
    );
    // Missing access modes are refused at create.
    let mut bad = claim("bad", "1Gi", None);
    bad.spec.as_mut().unwrap().access_modes = None;
    let err = api_error(claims.create(&pp, &bad).await);
    assert_eq!(err.code, 422);
    assert!(err.message.contains("spec.accessModes"), "{}", err.message);

    // A StorageClass keeps its binding mode and provisioner.
    let err = api_error(
        classes
            .patch(
                "standard",
                &PatchParams::default(),
                &Patch::Merge(json!({"volumeBindingMode": "Immediate"})),
            )
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(err.message.contains("volumeBindingMode"), "{}", err.message);
    Ok(())
}

#[tokio::test]
async fn volumes_are_validated_and_keep_their_source() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let pp = PostParams::default();
    let mut no_affinity = local_pv("a", "1Gi", "local", "n1");
    no_affinity.spec.as_mut().unwrap().node_affinity = None;
    let err = api_error(volumes.create(&pp, &no_affinity).await);
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("Local volume requires node affinity"),
        "{}",
        err.message
    );
    volumes
        .create(&pp, &local_pv("b", "1Gi", "local", "n1"))
        .await?;
    let err = api_error(
        volumes
            .patch(
                "b",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"local": {"path": "/elsewhere"}}})),
            )
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("persistentvolumesource"),
        "{}",
        err.message
    );

    // CSINodes are stored as sent.
    let nodes: Api<CSINode> = Api::all(client);
    let created = nodes
        .create(
            &pp,
            &from_json(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": "n1"},
                "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "n1",
                    "allocatable": {"count": 2}}]}
            })),
        )
        .await?;
    assert_eq!(
        created.spec.drivers[0].allocatable.as_ref().unwrap().count,
        Some(2)
    );
    Ok(())
}

#[tokio::test]
async fn without_the_controller_claims_stay_as_created() -> TestResult {
    let server = ApiServer::start_with(Options {
        pv_controller: false,
        ..Options::default()
    })
    .await?;
    let client = server.kube_client()?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "ml");
    let pp = PostParams::default();
    volumes
        .create(&pp, &local_pv("v", "10Gi", "", "n1"))
        .await?;
    claims.create(&pp, &claim("c", "1Gi", Some(""))).await?;
    assert_eq!(phase_of_claim(&claims.get("c").await?), Some("Pending"));
    assert_eq!(phase_of_volume(&volumes.get("v").await?), Some("Pending"));
    Ok(())
}

#[tokio::test]
async fn ephemeral_volumes_get_their_claims_made() -> TestResult {
    use k8s_openapi::api::core::v1::Pod;
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "ml");
    let pod = pods
        .create(
            &PostParams::default(),
            &from_json(json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "w-0"},
                "spec": {"containers": [{"name": "c", "image": "x"}], "volumes": [
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                        "metadata": {"labels": {"type": "scratch"}},
                        "spec": {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "1Gi"}}}}}}]}
            })),
        )
        .await?;
    let claim = claims.get("w-0-scratch").await?;
    let owner = &claim.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), Some(&owner.uid)),
        ("Pod", pod.metadata.uid.as_ref())
    );
    assert_eq!(
        phase_of_claim(&claims.get("w-0-scratch").await?),
        Some("Pending")
    );
    Ok(())
}

#[tokio::test]
async fn a_bound_claim_may_grow_but_not_shrink_below_its_capacity() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "ml");
    let pp = PostParams::default();
    volumes
        .create(&pp, &local_pv("v", "10Gi", "", "n1"))
        .await?;
    claims.create(&pp, &claim("c", "5Gi", Some(""))).await?;
    let bound = claims.get("c").await?;
    assert_eq!(phase_of_claim(&bound), Some("Bound"));
    assert_eq!(bound.status.unwrap().capacity.unwrap()["storage"].0, "10Gi");
    let resize =
        |size: &str| Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": size}}}}));
    claims
        .patch("c", &PatchParams::default(), &resize("20Gi"))
        .await?;
    let err = api_error(
        claims
            .patch("c", &PatchParams::default(), &resize("8Gi"))
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("can not be less than status.capacity"),
        "{}",
        err.message
    );
    // volumeName, once set, stays.
    let err = api_error(
        claims
            .patch(
                "c",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"volumeName": "other"}})),
            )
            .await,
    );
    assert_eq!(err.code, 422);
    Ok(())
}
