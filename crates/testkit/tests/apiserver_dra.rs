//! The stand-in's `resource.k8s.io/v1` kinds (DeviceClasses, ResourceSlices, ResourceClaims and
//! their status, ResourceClaimTemplates) and its resource-claim controller, through the real
//! `kube` client.

mod common;

use caldera_testkit::apiserver::{ApiServer, Options};
use common::{api_error, from_json, TestResult};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::Discovery;
use serde_json::{json, Value};

fn claim(name: &str) -> ResourceClaim {
    from_json(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
        ]}},
        "status": {"reservedFor": [{"resource": "pods", "name": "x", "uid": "1"}]}
    }))
}

fn template(name: &str) -> ResourceClaimTemplate {
    from_json(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "metadata": {"labels": {"team": "a"}},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
            ]}}
        }
    }))
}

fn pod_with_template(name: &str, template: &str) -> Pod {
    from_json(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "schedulerName": "caldera",
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]
        }
    }))
}

fn allocation(device: &str) -> Value {
    json!({"devices": {"results": [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": device}
    ]}, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
    ]}]}})
}

fn claim_name_of(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .resource_claim_statuses
        .as_ref()?
        .first()?
        .resource_claim_name
        .clone()
}

#[tokio::test]
async fn discovery_lists_the_four_dra_kinds_with_claim_status() -> TestResult {
    let server = ApiServer::start().await?;
    let discovery = Discovery::new(server.kube_client()?).run().await?;
    let group = discovery
        .get("resource.k8s.io")
        .expect("resource.k8s.io is served");
    let names: Vec<String> = group
        .recommended_resources()
        .into_iter()
        .map(|(r, _)| r.plural)
        .collect();
    for plural in [
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceslices",
    ] {
        assert!(names.contains(&plural.to_string()), "{names:?}");
    }
    let claims = group
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.plural == "resourceclaims")
        .expect("claims");
    assert!(claims
        .1
        .subresources
        .iter()
        .any(|(s, _)| s.plural == "status"));
    Ok(())
}

#[tokio::test]
async fn claims_drop_status_on_create_default_requests_and_keep_spec_fixed() -> TestResult {
    let server = ApiServer::start().await?;
    let claims: Api<ResourceClaim> = Api::namespaced(server.kube_client()?, "ml");
    let created = claims.create(&PostParams::default(), &claim("c")).await?;
    assert_eq!(created.status, None);
    let exact = created
        .spec
        .devices
        .as_ref()
        .and_then(|d| d.requests.as_ref())
        .map(|r| r[0].exactly.clone());
    let exact = exact.flatten().expect("exactly");
    assert_eq!(exact.allocation_mode.as_deref(), Some("ExactCount"));
    assert_eq!(exact.count, Some(1));
    // The spec is immutable.
    let patch = json!({"spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "other"}}
    ]}}});
    let err = api_error(
        claims
            .patch("c", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(err.message.contains("spec"), "{}", err.message);
    // Status through the main resource is ignored.
    let patch = json!({"status": {"allocation": allocation("gpu-0")}});
    let same = claims
        .patch("c", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    assert_eq!(same.status, None);
    // A request without a class is refused, naming the field.
    let mut bad = claim("bad");
    if let Some(r) = bad.spec.devices.as_mut().and_then(|d| d.requests.as_mut()) {
        if let Some(e) = r[0].exactly.as_mut() {
            e.device_class_name = String::new();
        }
    }
    let err = api_error(claims.create(&PostParams::default(), &bad).await);
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("spec.devices.requests[0].exactly.deviceClassName"),
        "{}",
        err.message
    );
    Ok(())
}

#[tokio::test]
async fn claim_status_is_validated_as_kube_apiserver_does() -> TestResult {
    let server = ApiServer::start().await?;
    let claims: Api<ResourceClaim> = Api::namespaced(server.kube_client()?, "ml");
    claims.create(&PostParams::default(), &claim("c")).await?;
    let pp = PatchParams::default();
    // Users without an allocation: refused.
    let users =
        json!({"status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}});
    let err = api_error(claims.patch_status("c", &pp, &Patch::Merge(&users)).await);
    assert_eq!(err.code, 422);
    assert!(err
        .message
        .contains("may not be specified when `allocated` is not set"));
    // A result naming no request of the claim: refused.
    let mut wrong = allocation("gpu-0");
    wrong["devices"]["results"][0]["request"] = json!("tpu");
    let err = api_error(
        claims
            .patch_status(
                "c",
                &pp,
                &Patch::Merge(&json!({"status": {"allocation": wrong}})),
            )
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(err
        .message
        .contains("status.allocation.devices.results[0].request"));
    // Allocation and users in one write, with the read resourceVersion as precondition.
    let read = claims.get("c").await?;
    let rv = read.metadata.resource_version.clone().unwrap_or_default();
    let write = json!({"metadata": {"resourceVersion": rv}, "status": {
        "allocation": allocation("gpu-0"),
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]
    }});
    let written = claims.patch_status("c", &pp, &Patch::Merge(&write)).await?;
    let status = written.status.expect("status");
    assert_eq!(status.reserved_for.map(|r| r.len()), Some(1));
    // The same precondition again is stale: 409.
    let err = api_error(claims.patch_status("c", &pp, &Patch::Merge(&write)).await);
    assert_eq!(err.code, 409);
    // The allocation cannot change once set...
    let other = json!({"status": {"allocation": allocation("gpu-1")}});
    let err = api_error(claims.patch_status("c", &pp, &Patch::Merge(&other)).await);
    assert_eq!(err.code, 422);
    assert!(err.message.contains("status.allocation"));
    // ... but may be cleared together with its users.
    let clear = json!({"status": {"allocation": null, "reservedFor": null}});
    let cleared = claims.patch_status("c", &pp, &Patch::Merge(&clear)).await?;
    assert_eq!(cleared.status.and_then(|s| s.allocation), None);
    // At most 256 users.
    let many: Vec<Value> = (0..257)
        .map(|i| json!({"resource": "pods", "name": format!("p{i}"), "uid": format!("u{i}")}))
        .collect();
    let err = api_error(
        claims
            .patch_status(
                "c",
                &pp,
                &Patch::Merge(
                    &json!({"status": {"allocation": allocation("gpu-0"), "reservedFor": many}}),
                ),
            )
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(err.message.contains("status.reservedFor"));
    Ok(())
}

#[tokio::test]
async fn delete_protection_keeps_a_claim_until_its_finalizer_goes() -> TestResult {
    let server = ApiServer::start_with(Options {
        resource_claim_controller: false,
        ..Options::default()
    })
    .await?;
    let claims: Api<ResourceClaim> = Api::namespaced(server.kube_client()?, "ml");
    let mut c = claim("c");
    c.metadata.finalizers = Some(vec!["resource.kubernetes.io/delete-protection".into()]);
    claims.create(&PostParams::default(), &c).await?;
    claims.delete("c", &DeleteParams::default()).await?;
    let terminating = claims.get("c").await?;
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let drop_finalizer = json!({"metadata": {"finalizers": null}});
    claims
        .patch("c", &PatchParams::default(), &Patch::Merge(&drop_finalizer))
        .await?;
    assert_eq!(api_error(claims.get("c").await).code, 404);
    Ok(())
}

#[tokio::test]
async fn slices_and_classes_are_validated() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    let classes: Api<DeviceClass> = Api::all(client);
    let slice: ResourceSlice = from_json(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "node-a-gpu"},
        "spec": {"driver": "gpu.example.com", "nodeName": "node-a",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {"name": "gpu-0", "attributes": {"productName": {"string": "H100"}},
                 "capacity": {"memory": {"value": "80Gi"}}},
                {"name": "gpu-1"}
            ]}
    }));
    let stored = slices.create(&PostParams::default(), &slice).await?;
    assert_eq!(stored.spec.devices.map(|d| d.len()), Some(2));
    let mut two_choices = slice.clone();
    two_choices.metadata.name = Some("bad".into());
    two_choices.spec.all_nodes = Some(true);
    let err = api_error(slices.create(&PostParams::default(), &two_choices).await);
    assert_eq!(err.code, 422);
    let class: DeviceClass = from_json(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                 "extendedResourceName": "example.com/gpu"}
    }));
    classes.create(&PostParams::default(), &class).await?;
    let mut bad = class.clone();
    bad.metadata.name = Some("bad".into());
    bad.spec.extended_resource_name = Some("gpu".into());
    let err = api_error(classes.create(&PostParams::default(), &bad).await);
    assert_eq!(err.code, 422);
    assert!(err.message.contains("spec.extendedResourceName"));
    Ok(())
}

#[tokio::test]
async fn the_controller_makes_template_claims_and_cleans_up_after_the_pod() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), "ml");
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client, "ml");
    let pp = PostParams::default();
    // A pod naming a template that does not exist yet waits for it.
    pods.create(&pp, &pod_with_template("train-0", "one-gpu"))
        .await?;
    assert!(claims.list(&Default::default()).await?.items.is_empty());
    assert_eq!(claim_name_of(&pods.get("train-0").await?), None);
    templates.create(&pp, &template("one-gpu")).await?;
    let pod = pods.get("train-0").await?;
    let name = claim_name_of(&pod).expect("the pod names its claim");
    assert!(
        name.starts_with("train-0-gpu-") && name.len() == 17,
        "{name}"
    );
    let c = claims.get(&name).await?;
    let owner = c.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(owner[0].kind, "Pod");
    assert_eq!(Some(owner[0].uid.clone()), pod.metadata.uid.clone());
    assert_eq!(owner[0].controller, Some(true));
    let annotations = c.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("resource.kubernetes.io/pod-claim-name")
            .map(String::as_str),
        Some("gpu")
    );
    assert_eq!(
        c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("team"))
            .map(String::as_str),
        Some("a")
    );
    // A pod cannot name its claims through the main resource.
    let sneaky = json!({"status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "other"}]}});
    let after = pods
        .patch("train-0", &PatchParams::default(), &Patch::Merge(&sneaky))
        .await?;
    assert_eq!(claim_name_of(&after), Some(name.clone()));
    // Allocated by a scheduler (finalizer, allocation, the pod as user), then the pod goes:
    // the claim is deallocated and deleted.
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    claims
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"metadata": {"finalizers": ["resource.kubernetes.io/delete-protection"]}}),
            ),
        )
        .await?;
    claims
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"allocation": allocation("gpu-0"),
                "reservedFor": [{"resource": "pods", "name": "train-0", "uid": uid}]}})),
        )
        .await?;
    assert!(claims
        .get(&name)
        .await?
        .status
        .and_then(|s| s.allocation)
        .is_some());
    pods.delete("train-0", &DeleteParams::default()).await?;
    assert_eq!(api_error(claims.get(&name).await).code, 404);
    Ok(())
}

#[tokio::test]
async fn a_shared_claim_loses_users_that_finish_and_is_deallocated_after_the_last() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ml");
    let claims: Api<ResourceClaim> = Api::namespaced(client, "ml");
    let pp = PostParams::default();
    let mut uids = Vec::new();
    for name in ["a", "b"] {
        let pod: Pod = from_json(json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "x"}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]}
        }));
        uids.push(
            pods.create(&pp, &pod)
                .await?
                .metadata
                .uid
                .unwrap_or_default(),
        );
    }
    let mut c = claim("shared");
    c.metadata.finalizers = Some(vec!["resource.kubernetes.io/delete-protection".into()]);
    claims.create(&pp, &c).await?;
    claims
        .patch_status(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(
                &json!({"status": {"allocation": allocation("gpu-0"), "reservedFor": [
                    {"resource": "pods", "name": "a", "uid": uids[0]},
                    {"resource": "pods", "name": "b", "uid": uids[1]}
                ]}}),
            ),
        )
        .await?;
    pods.patch_status(
        "a",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
    )
    .await?;
    let one = claims.get("shared").await?.status.expect("status");
    let users: Vec<String> = one
        .reserved_for
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(users, ["b"]);
    assert!(one.allocation.is_some());
    pods.delete("b", &DeleteParams::default().grace_period(0))
        .await?;
    let none = claims.get("shared").await?;
    assert_eq!(none.status.clone().and_then(|s| s.allocation), None);
    assert_eq!(none.status.and_then(|s| s.reserved_for), None);
    assert_eq!(none.metadata.finalizers, None);
    Ok(())
}
