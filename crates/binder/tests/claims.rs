//! DRA claim writes against the API stand-in, through the real `kube` client: every member's
//! claims are allocated (finalizer, `status.allocation`, `status.reservedFor`) before any member
//! binds; a refused claim write binds none of the gang and undoes what went through; the
//! extended-resource bridge's claim is made and named in the pod's status.

use caldera_binder::{Binder, Dropped, Follow, Observer, Options};
use caldera_model::dra::{
    ClaimWrite, Consumer, DeviceResult, ExtendedResourceClaim, RequestMapping,
};
use caldera_model::selector::{Requirement, SelectorOp};
use caldera_model::{Bind, Plan, SelectorTerm, Snapshot, Time};
use caldera_testkit::apiserver::{ApiServer, Verb};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const PROTECTION: &str = "resource.kubernetes.io/delete-protection";

#[derive(Default)]
struct Seen {
    bound: Mutex<Vec<String>>,
    dropped: Mutex<Vec<(String, Dropped)>>,
    claims_dropped: Mutex<Vec<String>>,
}

impl Observer for Seen {
    fn bound(&self, bind: &Bind, _latency: Option<Duration>) {
        self.bound.lock().unwrap().push(bind.pod.name.to_string());
    }
    fn bind_dropped(&self, bind: &Bind, why: Dropped) {
        self.dropped
            .lock()
            .unwrap()
            .push((bind.pod.name.to_string(), why));
    }
    fn claim_write_dropped(&self, write: &ClaimWrite) {
        self.claims_dropped.lock().unwrap().push(write.key());
    }
}

impl Seen {
    fn answered(&self) -> usize {
        self.bound.lock().unwrap().len() + self.dropped.lock().unwrap().len()
    }
}

fn binder(server: &ApiServer, seen: Arc<Seen>) -> Result<Binder, Box<dyn std::error::Error>> {
    Ok(Binder::new(
        server.kube_client()?,
        Options {
            follow: Follow {
                report_quiet: Duration::ZERO,
                ..Follow::default()
            },
            ..Options::default()
        },
        seen,
    ))
}

async fn wait_answers(seen: &Seen, n: usize) {
    let result = tokio::time::timeout(Duration::from_secs(10), async {
        while seen.answered() < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(result.is_ok(), "the binder answered every bind");
}

/// A pending pod of Caldera's with one claim entry naming `claim`; returns its uid.
async fn pod(
    pods: &Api<Pod>,
    name: &str,
    claim: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulerName": "caldera",
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}
    }))?;
    Ok(pods
        .create(&PostParams::default(), &pod)
        .await?
        .metadata
        .uid
        .unwrap_or_default())
}

/// A claim for one device of class `gpu.example.com`; returns its uid.
async fn claim(
    claims: &Api<ResourceClaim>,
    name: &str,
) -> Result<String, Box<dyn std::error::Error>> {
    let c: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}}
    }))?;
    Ok(claims
        .create(&PostParams::default(), &c)
        .await?
        .metadata
        .uid
        .unwrap_or_default())
}

/// The pending pod `legacy` asking for `gpus` of the extended resource `example.com/gpu`
/// (served by devices through the bridge); returns its uid.
async fn legacy_pod(pods: &Api<Pod>, gpus: u32) -> Result<String, Box<dyn std::error::Error>> {
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "legacy"},
        "spec": {"schedulerName": "caldera", "containers": [{"name": "main", "image": "x",
            "resources": {"limits": {"example.com/gpu": gpus.to_string()}}}]}
    }))?;
    Ok(pods
        .create(&PostParams::default(), &pod)
        .await?
        .metadata
        .uid
        .unwrap_or_default())
}

/// The bridge's claim for `legacy_pod` (uid `pod_uid`) on `node-a`, one device per name.
fn bridge_claim(pod_uid: &str, devices: &[&str]) -> ExtendedResourceClaim {
    let request = "container-0-request-0";
    ExtendedResourceClaim {
        namespace: "ns".into(),
        pod: "legacy".into(),
        pod_uid: pod_uid.into(),
        requests: vec![(
            request.into(),
            "gpu.example.com".into(),
            devices.len() as u32,
        )],
        devices: devices.iter().map(|d| device(request, d)).collect(),
        config: vec![],
        node: Some("node-a".into()),
        node_selector: Some(on_node("node-a")),
        mappings: vec![RequestMapping {
            container: "main".into(),
            resource: "example.com/gpu".into(),
            request: request.into(),
        }],
    }
}

fn on_node(node: &str) -> Vec<SelectorTerm> {
    vec![SelectorTerm {
        expressions: vec![],
        fields: vec![Requirement {
            key: "metadata.name".into(),
            op: SelectorOp::In,
            values: vec![node.into()],
        }],
    }]
}

fn device(request: &str, device: &str) -> DeviceResult {
    DeviceResult::whole(request, "gpu.example.com", "node-a", device)
}

fn write(name: &str, uid: &str, dev: &str, pod: (&str, &str)) -> ClaimWrite {
    ClaimWrite {
        namespace: "ns".into(),
        name: name.into(),
        uid: uid.into(),
        allocate: true,
        devices: vec![device("gpu", dev)],
        config: vec![],
        node: Some("node-a".into()),
        node_selector: Some(on_node("node-a")),
        reserved_for: vec![Consumer {
            resource: "pods".into(),
            name: pod.0.into(),
            uid: pod.1.into(),
        }],
    }
}

fn bind(name: &str, uid: &str) -> Bind {
    Bind {
        pod: caldera_model::ObjectRef {
            namespace: "ns".into(),
            name: name.into(),
            uid: uid.into(),
        },
        node: "node-a".into(),
        job: "ns/train".into(),
    }
}

#[tokio::test]
async fn every_members_claims_are_allocated_before_any_member_binds() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let mut plan = Plan::default();
    for i in 0..4 {
        let (p, c) = (format!("train-{i}"), format!("gpu-{i}"));
        let pod_uid = pod(&pods, &p, &c).await?;
        let claim_uid = claim(&claims, &c).await?;
        plan.claim_writes
            .push(write(&c, &claim_uid, &format!("gpu-{i}"), (&p, &pod_uid)));
        plan.binds.push(bind(&p, &pod_uid));
    }
    server.reset_request_counts();
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 4).await;
    assert_eq!(seen.bound.lock().unwrap().len(), 4);
    for i in 0..4 {
        let c = claims.get(&format!("gpu-{i}")).await?;
        assert!(c
            .metadata
            .finalizers
            .unwrap_or_default()
            .contains(&PROTECTION.to_string()));
        let status = c.status.expect("status");
        let results = status
            .allocation
            .as_ref()
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.clone())
            .unwrap_or_default();
        assert_eq!(results.len(), 1);
        assert_eq!(results[0].device, format!("gpu-{i}"));
        let selector = status
            .allocation
            .and_then(|a| a.node_selector)
            .expect("node selector");
        let field = &selector.node_selector_terms[0]
            .match_fields
            .as_ref()
            .expect("fields")[0];
        assert_eq!(
            (field.key.as_str(), field.operator.as_str()),
            ("metadata.name", "In")
        );
        assert_eq!(field.values.clone().unwrap_or_default(), ["node-a"]);
        let users = status.reserved_for.unwrap_or_default();
        assert_eq!(users.len(), 1);
        assert_eq!(users[0].name, format!("train-{i}"));
        assert_eq!(users[0].resource, "pods");
    }
    // kube-scheduler's order, for the whole gang: every claim status before the first bind.
    let log = server.write_log();
    let last_status = log
        .iter()
        .rposition(|k| k.resource == "resourceclaims" && k.subresource == "status")
        .expect("claim status writes");
    let first_bind = log
        .iter()
        .position(|k| k.resource == "pods" && k.subresource == "binding")
        .expect("binds");
    assert!(last_status < first_bind, "{log:?}");
    let counts = server.request_counts();
    assert_eq!(counts.get(Verb::Update, "resourceclaims", "status"), 4);
    assert_eq!(
        counts.get(Verb::Update, "resourceclaims", ""),
        4,
        "the finalizers"
    );
    Ok(())
}

#[tokio::test]
async fn shares_are_written_with_their_share_id_and_consumed_capacity() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let mut plan = Plan::default();
    let ids = [
        "6b1e2a43-9c0d-8e5f-a112-0c1d2e3f4a5b",
        "7c2f3b54-ad1e-8f60-b223-1d2e3f4a5b6c",
    ];
    for (i, id) in ids.iter().enumerate() {
        let (p, c) = (format!("infer-{i}"), format!("share-{i}"));
        let pod_uid = pod(&pods, &p, &c).await?;
        let claim_uid = claim(&claims, &c).await?;
        let mut w = write(&c, &claim_uid, "gpu-0", (&p, &pod_uid));
        w.devices[0].share_id = Some((*id).into());
        w.devices[0].consumed = [(
            "memory".into(),
            caldera_model::dra::Quantity {
                milli: 20 * (1 << 30) * 1000,
                text: "20Gi".into(),
            },
        )]
        .into_iter()
        .collect();
        plan.claim_writes.push(w);
        plan.binds.push(bind(&p, &pod_uid));
    }
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 2).await;
    assert_eq!(seen.bound.lock().unwrap().len(), 2);
    for (i, id) in ids.iter().enumerate() {
        let c = claims.get(&format!("share-{i}")).await?;
        let r = c
            .status
            .and_then(|s| s.allocation)
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .unwrap_or_default();
        assert_eq!(r[0].device, "gpu-0", "both shares of one device");
        assert_eq!(r[0].share_id.as_deref(), Some(*id));
        let consumed = r[0].consumed_capacity.clone().unwrap_or_default();
        assert_eq!(consumed.get("memory").map(|q| q.0.as_str()), Some("20Gi"));
    }
    Ok(())
}

#[tokio::test]
async fn a_claim_taken_meanwhile_binds_none_of_the_gang_and_undoes_the_others() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let mut plan = Plan::default();
    let mut uids = Vec::new();
    for i in 0..2 {
        let (p, c) = (format!("train-{i}"), format!("gpu-{i}"));
        let pod_uid = pod(&pods, &p, &c).await?;
        let claim_uid = claim(&claims, &c).await?;
        plan.claim_writes
            .push(write(&c, &claim_uid, &format!("gpu-{i}"), (&p, &pod_uid)));
        plan.binds.push(bind(&p, &pod_uid));
        uids.push(pod_uid);
    }
    // Someone else allocated gpu-1 (another device) after the decision.
    claims
        .patch_status(
            "gpu-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-7"}
            ]}}}})),
        )
        .await?;
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 2).await;
    assert!(seen.bound.lock().unwrap().is_empty());
    let mut dropped = seen.dropped.lock().unwrap().clone();
    dropped.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        dropped,
        [
            ("train-0".to_string(), Dropped::Rejected),
            ("train-1".to_string(), Dropped::Rejected)
        ]
    );
    let mut claims_dropped = seen.claims_dropped.lock().unwrap().clone();
    claims_dropped.sort();
    assert_eq!(claims_dropped, ["ns/gpu-0", "ns/gpu-1"]);
    for i in 0..2 {
        let p = pods.get(&format!("train-{i}")).await?;
        assert_eq!(p.spec.and_then(|s| s.node_name), None, "train-{i} unbound");
    }
    // gpu-0 went through and was undone: no allocation, no user, no finalizer.
    let c0 = claims.get("gpu-0").await?;
    assert_eq!(c0.status.clone().and_then(|s| s.allocation), None);
    assert_eq!(c0.status.and_then(|s| s.reserved_for), None);
    assert!(!c0
        .metadata
        .finalizers
        .unwrap_or_default()
        .contains(&PROTECTION.to_string()));
    // gpu-1 keeps the other allocation, and no user of ours.
    let c1 = claims.get("gpu-1").await?.status.expect("status");
    let results = c1
        .allocation
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default();
    assert_eq!(results[0].device, "gpu-7");
    assert_eq!(c1.reserved_for, None);
    Ok(())
}

#[tokio::test]
async fn a_shared_claim_already_allocated_only_gains_the_new_user() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let first = pod(&pods, "a", "shared").await?;
    let second = pod(&pods, "b", "shared").await?;
    let claim_uid = claim(&claims, "shared").await?;
    let allocate = write("shared", &claim_uid, "gpu-0", ("a", &first));
    let mut plan = Plan::default();
    plan.claim_writes.push(allocate.clone());
    plan.binds.push(bind("a", &first));
    let seen = Arc::new(Seen::default());
    let b = binder(&server, seen.clone())?;
    b.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 1).await;
    // A later session: the claim is allocated; only b is added.
    let mut reserve = write("shared", &claim_uid, "gpu-0", ("b", &second));
    reserve.allocate = false;
    let mut plan = Plan::default();
    plan.claim_writes.push(reserve);
    let mut bind_b = bind("b", &second);
    bind_b.job = "ns/b".into();
    plan.binds.push(bind_b);
    b.dispatch(plan, &Snapshot::default(), Time::from_secs(2));
    wait_answers(&seen, 2).await;
    assert_eq!(*seen.bound.lock().unwrap(), ["a", "b"]);
    let status = claims.get("shared").await?.status.expect("status");
    let users: Vec<String> = status
        .reserved_for
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(users, ["a", "b"]);
    let results = status
        .allocation
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default();
    assert_eq!(results.len(), 1);
    Ok(())
}

#[tokio::test]
async fn the_bridge_makes_an_allocated_claim_owned_by_the_pod_and_names_it() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let uid = legacy_pod(&pods, 2).await?;
    let mut plan = Plan::default();
    plan.extended_claims
        .push(bridge_claim(&uid, &["gpu-0", "gpu-1"]));
    plan.binds.push(bind("legacy", &uid));
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 1).await;
    assert_eq!(*seen.bound.lock().unwrap(), ["legacy"]);
    let pod = pods.get("legacy").await?;
    let status = pod
        .status
        .clone()
        .and_then(|s| s.extended_resource_claim_status)
        .expect("extendedResourceClaimStatus");
    assert_eq!(status.request_mappings.len(), 1);
    assert_eq!(status.request_mappings[0].container_name, "main");
    let c = claims.get(&status.resource_claim_name).await?;
    assert!(status
        .resource_claim_name
        .starts_with("legacy-extended-resources-"));
    let annotations = c.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("resource.kubernetes.io/extended-resource-claim")
            .map(String::as_str),
        Some("true")
    );
    let owner = &c.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Pod", uid.as_str())
    );
    let claim_status = c.status.expect("status");
    let results = claim_status
        .allocation
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default();
    assert_eq!(results.len(), 2);
    assert_eq!(claim_status.reserved_for.map(|r| r.len()), Some(1));
    Ok(())
}

/// The claim as the test sees it: (allocated, reservedFor uids, has the finalizer).
async fn claim_state(
    claims: &Api<ResourceClaim>,
    name: &str,
) -> Result<(bool, Vec<String>, bool), Box<dyn std::error::Error>> {
    let c = claims.get(name).await?;
    let finalizer = c
        .metadata
        .finalizers
        .unwrap_or_default()
        .contains(&PROTECTION.to_string());
    let status = c.status.unwrap_or_default();
    let mut users: Vec<String> = status
        .reserved_for
        .unwrap_or_default()
        .into_iter()
        .map(|u| u.uid)
        .collect();
    users.sort();
    Ok((status.allocation.is_some(), users, finalizer))
}

#[tokio::test]
async fn a_bind_refused_after_the_claims_were_written_undoes_that_members_claim() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let pod_uid = pod(&pods, "train-0", "gpu-0").await?;
    let claim_uid = claim(&claims, "gpu-0").await?;
    let mut plan = Plan::default();
    plan.claim_writes
        .push(write("gpu-0", &claim_uid, "gpu-0", ("train-0", &pod_uid)));
    plan.binds.push(bind("train-0", &pod_uid));
    // The claim write goes through; the bind is refused for good.
    server.fail_next(Verb::Create, "pods", "binding", 422, 1);
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 1).await;
    assert_eq!(
        *seen.dropped.lock().unwrap(),
        [("train-0".to_string(), Dropped::Rejected)]
    );
    // The runtime hears of it too (its overlay stops laying the write over snapshots).
    assert_eq!(*seen.claims_dropped.lock().unwrap(), ["ns/gpu-0"]);
    let p = pods.get("train-0").await?;
    assert_eq!(p.spec.and_then(|s| s.node_name), None);
    // Unreserved, deallocated and unprotected: the next session decides afresh.
    let undone = async {
        loop {
            if claim_state(&claims, "gpu-0").await.ok() == Some((false, vec![], false)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let result = tokio::time::timeout(Duration::from_secs(5), undone).await;
    assert!(
        result.is_ok(),
        "claim left as {:?}",
        claim_state(&claims, "gpu-0").await?
    );
    Ok(())
}

#[tokio::test]
async fn a_shared_claim_keeps_the_users_of_the_job_that_bound_when_another_job_fails() -> TestResult
{
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let a = pod(&pods, "a", "shared").await?;
    let b = pod(&pods, "b", "shared").await?;
    let shared_uid = claim(&claims, "shared").await?;
    let other_uid = claim(&claims, "gpu-x").await?;
    let mut plan = Plan::default();
    // One write of the shared claim for both jobs' pods, as the session makes it.
    let mut shared = write("shared", &shared_uid, "gpu-0", ("a", &a));
    shared.reserved_for.push(Consumer {
        resource: "pods".into(),
        name: "b".into(),
        uid: b.as_str().into(),
    });
    plan.claim_writes.push(shared);
    // Job x also needs gpu-x, which someone else allocates meanwhile: x's step fails.
    plan.claim_writes
        .push(write("gpu-x", &other_uid, "gpu-1", ("a", &a)));
    claims
        .patch_status(
            "gpu-x",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-7"}
            ]}}}})),
        )
        .await?;
    let mut bind_a = bind("a", &a);
    bind_a.job = "ns/x".into();
    let mut bind_b = bind("b", &b);
    bind_b.job = "ns/y".into();
    plan.binds.push(bind_a);
    plan.binds.push(bind_b);
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 2).await;
    assert_eq!(*seen.bound.lock().unwrap(), ["b"]);
    assert_eq!(
        *seen.dropped.lock().unwrap(),
        [("a".to_string(), Dropped::Rejected)]
    );
    // b is bound: the claim stays allocated, protected and reserved for b alone.
    assert_eq!(
        claim_state(&claims, "shared").await?,
        (true, vec![b.clone()], true)
    );
    Ok(())
}

#[tokio::test]
async fn gate_mode_releases_without_writing_claims() -> TestResult {
    // The gate's RBAC only watches claims: kube-scheduler allocates those of released pods.
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let gated: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0"},
        "spec": {"schedulingGates": [{"name": caldera_binder::writes::GANG_GATE}],
            "containers": [{"name": "main", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-0"}]}
    }))?;
    let pod_uid = pods
        .create(&PostParams::default(), &gated)
        .await?
        .metadata
        .uid
        .unwrap_or_default();
    let claim_uid = claim(&claims, "gpu-0").await?;
    let mut plan = Plan::default();
    plan.claim_writes
        .push(write("gpu-0", &claim_uid, "gpu-0", ("train-0", &pod_uid)));
    plan.binds.push(bind("train-0", &pod_uid));
    server.reset_request_counts();
    let seen = Arc::new(Seen::default());
    let gate = Binder::new(
        server.kube_client()?,
        Options {
            follow: Follow {
                report_quiet: Duration::ZERO,
                ..Follow::default()
            },
            release: true,
            ..Options::default()
        },
        seen.clone(),
    );
    gate.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 1).await;
    assert_eq!(*seen.bound.lock().unwrap(), ["train-0"]);
    let p = pods.get("train-0").await?;
    assert_eq!(p.spec.and_then(|s| s.scheduling_gates), None, "released");
    // Not a single claim request: the claim is left to kube-scheduler.
    let counts = server.request_counts();
    let touched: Vec<_> = counts
        .iter()
        .filter(|(k, n)| *n > 0 && k.resource == "resourceclaims")
        .collect();
    assert!(touched.is_empty(), "claim requests: {touched:?}");
    assert_eq!(claim_state(&claims, "gpu-0").await?, (false, vec![], false));
    Ok(())
}

#[tokio::test]
async fn a_failed_step_deletes_the_bridge_claims_it_made() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let legacy = legacy_pod(&pods, 1).await?;
    // The other member's claim is taken meanwhile: the gang's step fails.
    let other = pod(&pods, "train-1", "gpu-x").await?;
    let other_claim = claim(&claims, "gpu-x").await?;
    claims
        .patch_status(
            "gpu-x",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-7"}
            ]}}}})),
        )
        .await?;
    let mut plan = Plan::default();
    plan.claim_writes
        .push(write("gpu-x", &other_claim, "gpu-1", ("train-1", &other)));
    plan.extended_claims.push(bridge_claim(&legacy, &["gpu-0"]));
    plan.binds.push(bind("legacy", &legacy));
    plan.binds.push(bind("train-1", &other));
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 2).await;
    assert!(seen.bound.lock().unwrap().is_empty());
    // The bridge claim made for `legacy` is gone (finalizer removed, deleted) and the pod no
    // longer names it: the next session makes a fresh decision.
    let left: Vec<String> = claims
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .filter(|n| n.starts_with("legacy-extended-resources-"))
        .collect();
    assert!(left.is_empty(), "bridge claims left: {left:?}");
    let status = pods.get("legacy").await?.status;
    assert_eq!(status.and_then(|s| s.extended_resource_claim_status), None);
    Ok(())
}

#[tokio::test]
async fn a_reservation_of_a_claim_reallocated_meanwhile_is_refused() -> TestResult {
    let server = ApiServer::start().await?;
    let admin = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "ns");
    let claims: Api<ResourceClaim> = Api::namespaced(admin, "ns");
    let uid = pod(&pods, "b", "shared").await?;
    let claim_uid = claim(&claims, "shared").await?;
    // Decided on while the claim held gpu-0 on node-a; meanwhile it was deallocated and
    // allocated again, to gpu-7 on node-b.
    claims
        .patch_status(
            "shared",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"allocation": {
                "devices": {"results": [
                    {"request": "gpu", "driver": "gpu.example.com", "pool": "node-b", "device": "gpu-7"}
                ]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-b"]}
                ]}]}
            }}})),
        )
        .await?;
    let mut reserve = write("shared", &claim_uid, "gpu-0", ("b", &uid));
    reserve.allocate = false;
    let mut plan = Plan::default();
    plan.claim_writes.push(reserve);
    plan.binds.push(bind("b", &uid));
    let seen = Arc::new(Seen::default());
    binder(&server, seen.clone())?.dispatch(plan, &Snapshot::default(), Time::from_secs(1));
    wait_answers(&seen, 1).await;
    assert_eq!(
        *seen.dropped.lock().unwrap(),
        [("b".to_string(), Dropped::Rejected)]
    );
    let p = pods.get("b").await?;
    assert_eq!(p.spec.and_then(|s| s.node_name), None);
    let (_, users, _) = claim_state(&claims, "shared").await?;
    assert!(users.is_empty(), "not reserved for b: {users:?}");
    Ok(())
}
