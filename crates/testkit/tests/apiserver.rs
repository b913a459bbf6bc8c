//! The API server stand-in, driven through the real `kube` client and kube-runtime watcher.

mod common;

use common::{api_error, from_json, TestResult};
use std::time::Duration;

use caldera_testkit::apiserver::{ApiServer, Options, Verb};
use futures::{Stream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Binding, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, EvictParams, GroupVersionKind, ListParams,
    Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::core::Status;
use kube::runtime::watcher;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(20);

fn pod(name: &str) -> Pod {
    from_json(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "train"}},
        "spec": {
            "schedulerName": "caldera",
            "containers": [{"name": "main", "image": "trainer:1.0",
                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        }
    }))
}

fn binding(name: &str, node: &str) -> Binding {
    from_json(json!({
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}
    }))
}

async fn bind(pods: &Api<Pod>, name: &str, node: &str) -> Result<Status, kube::Error> {
    pods.create_subresource(
        "binding",
        name,
        &PostParams::default(),
        &binding(name, node),
    )
    .await
}

fn podgroups() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
        "podgroups",
    )
}

fn queues() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "Queue"),
        "queues",
    )
}

async fn next<S, T>(stream: &mut S) -> T
where
    S: Stream<Item = T> + Unpin,
{
    tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("stream produced an item in time")
        .expect("stream did not end")
}

/// The next watcher event that is not an error, skipping `Init` markers when asked.
async fn next_event<S>(stream: &mut S) -> watcher::Event<Pod>
where
    S: Stream<Item = watcher::Result<watcher::Event<Pod>>> + Unpin,
{
    next(stream).await.expect("watcher event, not an error")
}

fn name_of(event: &watcher::Event<Pod>) -> String {
    match event {
        watcher::Event::Apply(p) | watcher::Event::Delete(p) | watcher::Event::InitApply(p) => {
            p.metadata.name.clone().unwrap_or_default()
        }
        watcher::Event::Init => "<init>".into(),
        watcher::Event::InitDone => "<init-done>".into(),
    }
}

#[tokio::test]
async fn created_pods_are_defaulted_listed_and_unique() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "team-a");

    let created = pods.create(&PostParams::default(), &pod("w-0")).await?;
    let meta = &created.metadata;
    assert!(meta.uid.as_deref().is_some_and(|u| u.len() == 36));
    assert!(meta.creation_timestamp.is_some());
    assert_eq!(meta.namespace.as_deref(), Some("team-a"));
    assert_eq!(meta.generation, Some(1));
    let rv: u64 = meta
        .resource_version
        .as_deref()
        .unwrap_or_default()
        .parse()?;
    assert_eq!(rv, server.store().resource_version());

    let spec = created.spec.clone().unwrap_or_default();
    assert_eq!(spec.scheduler_name.as_deref(), Some("caldera"));
    assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
    assert_eq!(spec.termination_grace_period_seconds, Some(30));
    assert_eq!(spec.priority, Some(0));
    let requests = spec.containers[0]
        .resources
        .as_ref()
        .and_then(|r| r.requests.clone())
        .unwrap_or_default();
    assert_eq!(
        requests.get("nvidia.com/gpu").map(|q| q.0.as_str()),
        Some("1")
    );
    let status = created.status.clone().unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.qos_class.as_deref(), Some("BestEffort"));

    let mut defaulted = pod("w-1");
    if let Some(spec) = defaulted.spec.as_mut() {
        spec.scheduler_name = None;
    }
    let defaulted = pods.create(&PostParams::default(), &defaulted).await?;
    assert_eq!(
        defaulted.spec.and_then(|s| s.scheduler_name).as_deref(),
        Some("default-scheduler")
    );

    let dup = api_error(pods.create(&PostParams::default(), &pod("w-0")).await);
    assert_eq!((dup.code, dup.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(dup.message, "pods \"w-0\" already exists");

    let missing = api_error(pods.get("nope").await);
    assert_eq!((missing.code, missing.reason.as_str()), (404, "NotFound"));
    assert_eq!(missing.message, "pods \"nope\" not found");
    assert_eq!(missing.details.map(|d| d.kind), Some("pods".to_string()));

    let got = pods.get("w-0").await?;
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let list = pods.list(&ListParams::default()).await?;
    assert_eq!(list.items.len(), 2);
    assert_eq!(
        list.metadata.resource_version,
        Some(server.store().resource_version().to_string())
    );
    // The namespace came into existence with its first object.
    assert!(server.store().get("namespaces", "", "team-a").is_some());
    Ok(())
}

#[tokio::test]
async fn stale_update_conflicts_and_noop_update_writes_nothing() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "ns");
    let first = pods.create(&PostParams::default(), &pod("p")).await?;

    let mut changed = first.clone();
    changed.metadata.labels = Some([("app".to_string(), "serve".to_string())].into());
    let second = pods.replace("p", &PostParams::default(), &changed).await?;
    assert_ne!(
        second.metadata.resource_version,
        first.metadata.resource_version
    );

    let mut stale = first.clone();
    stale.metadata.annotations = Some([("x".to_string(), "y".to_string())].into());
    let conflict = api_error(pods.replace("p", &PostParams::default(), &stale).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.message,
        "Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let rv = server.store().resource_version();
    let same = pods.replace("p", &PostParams::default(), &second).await?;
    assert_eq!(
        same.metadata.resource_version,
        second.metadata.resource_version
    );
    assert_eq!(server.store().resource_version(), rv);

    // Pod specs are immutable apart from a few fields, so a scheduler cannot PUT a nodeName.
    let mut moved = second.clone();
    if let Some(spec) = moved.spec.as_mut() {
        spec.node_name = Some("n1".into());
    }
    let invalid = api_error(pods.replace("p", &PostParams::default(), &moved).await);
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
    Ok(())
}

#[tokio::test]
async fn a_uid_that_is_not_the_objects_fails_a_put_and_a_patch() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "ns");
    let created = pods.create(&PostParams::default(), &pod("p")).await?;
    let uid = created.metadata.uid.clone().unwrap_or_default();

    // PUT: the body's uid is a precondition, so a replaced object is a Conflict.
    let mut other = created.clone();
    other.metadata.uid = Some("not-the-uid".into());
    let conflict = api_error(pods.replace("p", &PostParams::default(), &other).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        conflict.message,
        format!("Operation cannot be fulfilled on pods \"p\": Precondition failed: UID in precondition: not-the-uid, UID in object meta: {uid}")
    );

    // PATCH (merge, and on the status subresource): the uid is immutable, 422.
    let params = PatchParams::default();
    let wrong = json!({"metadata": {"uid": "not-the-uid", "labels": {"a": "b"}}});
    let invalid = api_error(pods.patch("p", &params, &Patch::Merge(&wrong)).await);
    assert_eq!((invalid.code, invalid.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        invalid.message,
        "Pod \"p\" is invalid: metadata.uid: Invalid value: \"not-the-uid\": field is immutable"
    );
    let status = json!({"metadata": {"uid": "not-the-uid"}, "status": {"nominatedNodeName": "n1"}});
    let invalid = api_error(
        pods.patch_status("p", &params, &Patch::Merge(&status))
            .await,
    );
    assert_eq!(invalid.code, 422);
    let unchanged = pods.get("p").await?;
    assert_eq!(
        unchanged.metadata.resource_version,
        created.metadata.resource_version
    );

    // The right uid is no change at all.
    let right = json!({"metadata": {"uid": uid, "labels": {"a": "b"}}});
    let patched = pods.patch("p", &params, &Patch::Merge(&right)).await?;
    assert_eq!(
        patched
            .metadata
            .labels
            .unwrap_or_default()
            .get("a")
            .map(String::as_str),
        Some("b")
    );
    Ok(())
}

#[tokio::test]
async fn pod_overhead_comes_only_from_a_runtime_class() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    let mut with_overhead = pod("o");
    if let Some(spec) = with_overhead.spec.as_mut() {
        spec.overhead = Some(from_json(json!({"cpu": "250m"})));
    }
    let refused = api_error(pods.create(&PostParams::default(), &with_overhead).await);
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        refused.message,
        "pods \"o\" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
    );

    let runtime_classes: Api<k8s_openapi::api::node::v1::RuntimeClass> = Api::all(client);
    runtime_classes
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "kata"}, "handler": "kata",
                "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}}})),
        )
        .await?;
    let mut kata = pod("k");
    if let Some(spec) = kata.spec.as_mut() {
        spec.runtime_class_name = Some("kata".into());
    }
    let created = pods.create(&PostParams::default(), &kata).await?;
    let overhead = created.spec.and_then(|s| s.overhead).unwrap_or_default();
    assert_eq!(overhead.get("memory").map(|q| q.0.as_str()), Some("120Mi"));
    Ok(())
}

#[tokio::test]
async fn priority_class_names_resolve_into_priorities() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let classes: Api<k8s_openapi::api::scheduling::v1::PriorityClass> = Api::all(client.clone());
    classes
        .create(
            &PostParams::default(),
            &from_json(
                json!({"metadata": {"name": "batch"}, "value": 1000, "globalDefault": true}),
            ),
        )
        .await?;
    let pods: Api<Pod> = Api::namespaced(client, "ns");
    let defaulted = pods.create(&PostParams::default(), &pod("a")).await?;
    let spec = defaulted.spec.unwrap_or_default();
    assert_eq!(
        (spec.priority, spec.priority_class_name.as_deref()),
        (Some(1000), Some("batch"))
    );

    let mut critical = pod("b");
    if let Some(spec) = critical.spec.as_mut() {
        spec.priority_class_name = Some("system-node-critical".into());
    }
    let critical = pods.create(&PostParams::default(), &critical).await?;
    assert_eq!(critical.spec.and_then(|s| s.priority), Some(2_000_001_000));

    let mut unknown = pod("c");
    if let Some(spec) = unknown.spec.as_mut() {
        spec.priority_class_name = Some("gold".into());
    }
    let refused = api_error(pods.create(&PostParams::default(), &unknown).await);
    assert_eq!(refused.code, 403);
    assert!(refused
        .message
        .ends_with("no PriorityClass with name gold was found"));
    Ok(())
}

#[tokio::test]
async fn new_nodes_start_not_ready_until_their_ready_condition_clears_the_taint() -> TestResult {
    let server = ApiServer::start_with(Options {
        node_lifecycle_controller: false,
        ..Options::default()
    })
    .await?;
    let nodes: Api<Node> = Api::all(server.kube_client()?);
    let node: Node = from_json(json!({
        "metadata": {"name": "n1"},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "64"},
                   "conditions": [{"type": "Ready", "status": "True"}]}
    }));
    let created = nodes.create(&PostParams::default(), &node).await?;
    let taints = created
        .spec
        .clone()
        .and_then(|s| s.taints)
        .unwrap_or_default();
    let keys: Vec<&str> = taints.iter().map(|t| t.key.as_str()).collect();
    assert_eq!(keys, ["nvidia.com/gpu", "node.kubernetes.io/not-ready"]);
    // Node creation keeps the status the kubelet registered with.
    let allocatable = created
        .status
        .and_then(|s| s.allocatable)
        .unwrap_or_default();
    assert_eq!(
        allocatable.get("nvidia.com/gpu").map(|q| q.0.as_str()),
        Some("8")
    );

    // With the emulated node lifecycle controller the taint goes once the node is Ready.
    let server = ApiServer::start().await?;
    let nodes: Api<Node> = Api::all(server.kube_client()?);
    nodes.create(&PostParams::default(), &node).await?;
    let settled = nodes.get("n1").await?;
    let keys: Vec<String> = settled
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.key)
        .collect();
    assert_eq!(keys, ["nvidia.com/gpu"]);
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    let patched = nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Strategic(not_ready))
        .await?;
    assert_eq!(
        patched
            .status
            .and_then(|s| s.conditions)
            .map(|c| c[0].status.clone())
            .as_deref(),
        Some("False")
    );
    let tainted = nodes.get("n1").await?;
    assert!(tainted
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .iter()
        .any(|t| t.key == "node.kubernetes.io/not-ready"));
    Ok(())
}

#[tokio::test]
async fn status_subresource_separates_spec_from_status() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    let created = pods.create(&PostParams::default(), &pod("p")).await?;

    // PUT on the pod ignores status.
    let mut with_status = created.clone();
    with_status.status = Some(from_json(json!({"phase": "Running"})));
    with_status.metadata.labels = Some([("app".to_string(), "x".to_string())].into());
    let updated = pods
        .replace("p", &PostParams::default(), &with_status)
        .await?;
    assert_eq!(
        updated.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    assert_eq!(
        updated.metadata.labels.as_ref().map(|l| l["app"].as_str()),
        Some("x")
    );

    // PUT on pods/status ignores spec but takes status and labels, like podStatusStrategy.
    let mut status_write = updated.clone();
    status_write.status = Some(from_json(json!({"phase": "Running"})));
    if let Some(spec) = status_write.spec.as_mut() {
        spec.node_name = Some("sneaky".into());
    }
    status_write.metadata.labels = Some([("app".to_string(), "y".to_string())].into());
    let after = pods
        .replace_status("p", &PostParams::default(), &status_write)
        .await?;
    assert_eq!(
        after.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Running")
    );
    assert_eq!(
        after.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        None
    );
    assert_eq!(
        after.metadata.labels.as_ref().map(|l| l["app"].as_str()),
        Some("y")
    );

    // Custom resources: status dropped on create, only status through /status.
    let pg_api: Api<DynamicObject> = Api::namespaced_with(client, "ns", &podgroups());
    let pg = DynamicObject::new("train", &podgroups()).data(json!({
        "spec": {"minMember": 8, "queue": "default"},
        "status": {"phase": "Running"}
    }));
    let created = pg_api.create(&PostParams::default(), &pg).await?;
    assert!(created.data.get("status").is_none());
    assert_eq!(created.metadata.generation, Some(1));
    let patch = json!({"metadata": {"labels": {"ignored": "yes"}}, "spec": {"minMember": 1},
        "status": {"phase": "Inqueue"}});
    let after = pg_api
        .patch_status("train", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    assert_eq!(after.data["status"]["phase"], "Inqueue");
    assert_eq!(after.data["spec"]["minMember"], 8);
    assert!(after.metadata.labels.is_none());
    assert_eq!(after.metadata.generation, Some(1));
    let spec_patch = json!({"spec": {"minMember": 4}, "status": {"phase": "Pending"}});
    let after = pg_api
        .patch("train", &PatchParams::default(), &Patch::Merge(&spec_patch))
        .await?;
    assert_eq!(after.data["status"]["phase"], "Inqueue");
    assert_eq!(after.data["spec"]["minMember"], 4);
    assert_eq!(after.metadata.generation, Some(2));
    Ok(())
}

#[tokio::test]
async fn binding_assigns_once_and_then_conflicts() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "ns");
    let created = pods.create(&PostParams::default(), &pod("w-0")).await?;

    let status = bind(&pods, "w-0", "n1").await?;
    assert_eq!(status.code, 201);
    let bound = pods.get("w-0").await?;
    assert_eq!(
        bound.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("n1")
    );
    let conditions = bound.status.and_then(|s| s.conditions).unwrap_or_default();
    let scheduled = conditions.iter().find(|c| c.type_ == "PodScheduled");
    assert_eq!(scheduled.map(|c| c.status.as_str()), Some("True"));
    assert!(scheduled.is_some_and(|c| c.last_transition_time.is_some()));
    assert_ne!(
        bound.metadata.resource_version,
        created.metadata.resource_version
    );

    let again = api_error(bind(&pods, "w-0", "n2").await);
    assert_eq!((again.code, again.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        again.message,
        "Operation cannot be fulfilled on pods/binding \"w-0\": pod w-0 is already assigned to node \"n1\""
    );
    let gone = api_error(bind(&pods, "ghost", "n1").await);
    assert_eq!(
        (gone.code, gone.message.as_str()),
        (404, "pods \"ghost\" not found")
    );
    assert_eq!(
        server.request_counts().get(Verb::Create, "pods", "binding"),
        3
    );
    Ok(())
}

#[tokio::test]
async fn bound_pods_terminate_gracefully_unless_forced() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "ns");
    for name in ["bound", "unbound"] {
        pods.create(&PostParams::default(), &pod(name)).await?;
    }
    bind(&pods, "bound", "n1").await?;

    let answer = pods.delete("bound", &DeleteParams::default()).await?;
    let terminating = answer.left().expect("a pod delete answers with the pod");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    assert_eq!(terminating.metadata.deletion_grace_period_seconds, Some(30));
    assert!(pods.get_opt("bound").await?.is_some());

    pods.delete("unbound", &DeleteParams::default()).await?;
    assert!(pods.get_opt("unbound").await?.is_none());

    let forced = pods
        .delete("bound", &DeleteParams::default().grace_period(0))
        .await?;
    assert!(forced.is_left());
    assert!(pods.get_opt("bound").await?.is_none());

    // Eviction deletes through the same path.
    pods.create(&PostParams::default(), &pod("evictee")).await?;
    let status = pods.evict("evictee", &EvictParams::default()).await?;
    assert_eq!(status.code, 201);
    assert!(pods.get_opt("evictee").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn merge_and_strategic_patches_update_pod_conditions() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    pods.create(&PostParams::default(), &pod("p")).await?;

    let unschedulable = json!({"status": {"conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/2 nodes are available"}]}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(&unschedulable))
        .await?;
    let ready = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False"},
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}
    ]}});
    let patched = pods
        .patch_status("p", &PatchParams::default(), &Patch::Strategic(&ready))
        .await?;
    let conditions = patched
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    let summary: Vec<(String, Option<String>)> = conditions
        .iter()
        .map(|c| (c.type_.clone(), c.message.clone()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                "PodScheduled".to_string(),
                Some("0/3 nodes are available".to_string())
            ),
            ("Ready".to_string(), None)
        ]
    );

    // A merge patch replaces lists whole.
    let merge = json!({"status": {"conditions": [{"type": "Initialized", "status": "True"}]}});
    let merged = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(&merge))
        .await?;
    assert_eq!(
        merged.status.and_then(|s| s.conditions).map(|c| c.len()),
        Some(1)
    );

    // JSON patch (sent raw: kube's `Patch::Json` needs its `jsonpatch` feature), and a
    // resourceVersion inside a patch acting as a precondition.
    let request = axum::http::Request::patch("/api/v1/namespaces/ns/pods/p")
        .header("content-type", "application/json-patch+json")
        .body(serde_json::to_vec(&json!([
            {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}},
            {"op": "test", "path": "/spec/schedulerName", "value": "caldera"}
        ]))?)?;
    let patched: Value = client.request(request).await?;
    assert_eq!(patched["metadata"]["annotations"]["a"], "b");
    let stale = json!({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}});
    let conflict = api_error(
        pods.patch("p", &PatchParams::default(), &Patch::Merge(&stale))
            .await,
    );
    assert_eq!(conflict.code, 409);

    let apply = api_error(
        pods.patch(
            "p",
            &PatchParams::apply("test"),
            &Patch::Apply(json!({"metadata": {"name": "p"}})),
        )
        .await,
    );
    assert_eq!(
        (apply.code, apply.reason.as_str()),
        (415, "UnsupportedMediaType")
    );
    assert!(apply.message.contains("server-side apply"));
    Ok(())
}

#[tokio::test]
async fn pagination_walks_two_thousand_pods_in_pages() -> TestResult {
    let server = ApiServer::start().await?;
    for i in 0..2_000 {
        let mut p = serde_json::to_value(pod(&format!("w-{i:04}")))?;
        p["metadata"]["namespace"] = json!(if i % 2 == 0 { "even" } else { "odd" });
        server.store().create("pods", p)?;
    }
    let pods: Api<Pod> = Api::all(server.kube_client()?);
    let mut params = ListParams::default().limit(500);
    let mut seen = Vec::new();
    let mut versions = Vec::new();
    loop {
        let page = pods.list(&params).await?;
        assert!(page.items.len() <= 500);
        versions.push(page.metadata.resource_version.clone());
        seen.extend(page.items.into_iter().map(|p| {
            format!(
                "{}/{}",
                p.metadata.namespace.unwrap_or_default(),
                p.metadata.name.unwrap_or_default()
            )
        }));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    assert_eq!(seen.len(), 2_000);
    assert_eq!(versions.len(), 4);
    assert!(versions.windows(2).all(|w| w[0] == w[1]));
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, seen);
    assert_eq!(server.request_counts().get(Verb::List, "pods", ""), 4);

    let odd: Api<Pod> = Api::namespaced(server.kube_client()?, "odd");
    let page = odd.list(&ListParams::default().limit(300)).await?;
    assert_eq!(page.items.len(), 300);
    assert!(page
        .items
        .iter()
        .all(|p| p.metadata.namespace.as_deref() == Some("odd")));
    Ok(())
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists_and_watches() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "ns");
    for (name, app) in [("a", "train"), ("b", "serve"), ("c", "train")] {
        let mut p = pod(name);
        p.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        pods.create(&PostParams::default(), &p).await?;
    }
    bind(&pods, "c", "n1").await?;

    let names = |list: kube::core::ObjectList<Pod>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect()
    };
    let lp = |labels: &str, fields: &str| {
        let mut lp = ListParams::default();
        if !labels.is_empty() {
            lp = lp.labels(labels);
        }
        if !fields.is_empty() {
            lp = lp.fields(fields);
        }
        lp
    };
    assert_eq!(names(pods.list(&lp("app=train", "")).await?), ["a", "c"]);
    assert_eq!(names(pods.list(&lp("app in (serve,x)", "")).await?), ["b"]);
    assert_eq!(names(pods.list(&lp("app!=train", "")).await?), ["b"]);
    assert_eq!(
        names(pods.list(&lp("!app", "")).await?),
        Vec::<String>::new()
    );
    assert_eq!(
        names(pods.list(&lp("", "spec.nodeName=")).await?),
        ["a", "b"]
    );
    assert_eq!(
        names(pods.list(&lp("app=train", "spec.nodeName=")).await?),
        ["a"]
    );
    assert_eq!(
        names(
            pods.list(&lp("", "spec.schedulerName=caldera,status.phase=Pending"))
                .await?
        ),
        ["a", "b", "c"]
    );
    assert_eq!(names(pods.list(&lp("", "metadata.name=b")).await?), ["b"]);
    let bad = api_error(pods.list(&lp("", "spec.gpu=1")).await);
    assert_eq!(
        (bad.code, bad.message.as_str()),
        (400, "field label not supported: spec.gpu")
    );

    // A watch of unbound pods sees a bound pod leave (DELETED) and a new one arrive.
    let rv = server.store().resource_version().to_string();
    let wp = WatchParams::default()
        .fields("spec.nodeName=")
        .labels("app=train");
    let mut events = pods.watch(&wp, &rv).await?.boxed();
    bind(&pods, "a", "n1").await?;
    pods.create(&PostParams::default(), &pod("d")).await?;
    pods.create(&PostParams::default(), &{
        let mut p = pod("e");
        p.metadata.labels = Some([("app".to_string(), "serve".to_string())].into());
        p
    })
    .await?;
    match next(&mut events).await? {
        WatchEvent::Deleted(p) => {
            assert_eq!(p.metadata.name.as_deref(), Some("a"));
            assert_eq!(p.spec.and_then(|s| s.node_name).as_deref(), Some("n1"));
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    loop {
        match next(&mut events).await? {
            WatchEvent::Added(p) => {
                assert_eq!(p.metadata.name.as_deref(), Some("d"));
                break;
            }
            WatchEvent::Bookmark(_) => continue,
            other => panic!("expected ADDED, got {other:?}"),
        }
    }
    Ok(())
}

#[tokio::test]
async fn watcher_sees_creates_updates_and_deletes() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "w");
    pods.create(&PostParams::default(), &pod("before")).await?;
    let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::Init
    ));
    assert_eq!(name_of(&next_event(&mut stream).await), "before");
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::InitDone
    ));

    pods.create(&PostParams::default(), &pod("p")).await?;
    match next_event(&mut stream).await {
        watcher::Event::Apply(p) => assert_eq!(p.metadata.name.as_deref(), Some("p")),
        other => panic!("expected Apply, got {}", name_of(&other)),
    }
    let label = json!({"metadata": {"labels": {"phase": "two"}}});
    pods.patch("p", &PatchParams::default(), &Patch::Merge(&label))
        .await?;
    match next_event(&mut stream).await {
        watcher::Event::Apply(p) => {
            assert_eq!(
                p.metadata.labels.map(|l| l["phase"].clone()).as_deref(),
                Some("two")
            )
        }
        other => panic!("expected Apply, got {}", name_of(&other)),
    }
    pods.delete("p", &DeleteParams::default()).await?;
    match next_event(&mut stream).await {
        watcher::Event::Delete(p) => assert_eq!(p.metadata.name.as_deref(), Some("p")),
        other => panic!("expected Delete, got {}", name_of(&other)),
    }
    assert_eq!(server.store().active_watches(), 1);
    // kube-runtime lists with pages of 500 and then watches with bookmarks.
    assert_eq!(server.request_counts().get(Verb::List, "pods", ""), 1);
    assert_eq!(server.request_counts().get(Verb::Watch, "pods", ""), 1);
    Ok(())
}

#[tokio::test]
async fn streaming_list_watcher_gets_initial_events_then_changes() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "w");
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name)).await?;
    }
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(pods.clone(), config).boxed();
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::Init
    ));
    assert_eq!(name_of(&next_event(&mut stream).await), "a");
    assert_eq!(name_of(&next_event(&mut stream).await), "b");
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::InitDone
    ));
    pods.create(&PostParams::default(), &pod("c")).await?;
    assert_eq!(name_of(&next_event(&mut stream).await), "c");
    assert_eq!(server.request_counts().get(Verb::List, "pods", ""), 0);
    Ok(())
}

#[tokio::test]
async fn a_watch_from_a_compacted_version_gets_410_and_the_watcher_relists() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "w");
    let first = pods.create(&PostParams::default(), &pod("a")).await?;
    let first_rv = first.metadata.resource_version.unwrap_or_default();
    pods.create(&PostParams::default(), &pod("b")).await?;
    server.store().compact();

    // The raw protocol: HTTP 200, then one ERROR event carrying a 410 Status.
    let mut raw = pods
        .watch(&WatchParams::default(), &first_rv)
        .await?
        .boxed();
    match next(&mut raw).await? {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            let current = server.store().resource_version();
            assert_eq!(
                status.message,
                format!("too old resource version: {first_rv} ({current})")
            );
        }
        other => panic!("expected ERROR, got {other:?}"),
    }
    assert!(tokio::time::timeout(WAIT, raw.next()).await?.is_none());

    // kube-runtime: a watch interrupted while history is compacted resumes into a 410,
    // then relists.
    let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::Init
    ));
    assert_eq!(name_of(&next_event(&mut stream).await), "a");
    assert_eq!(name_of(&next_event(&mut stream).await), "b");
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::InitDone
    ));
    pods.create(&PostParams::default(), &pod("c")).await?;
    assert_eq!(name_of(&next_event(&mut stream).await), "c");

    server.store().close_watches();
    server.store().create(
        "pods",
        serde_json::to_value({
            let mut p = pod("d");
            p.metadata.namespace = Some("w".into());
            p
        })?,
    )?;
    server.store().compact();

    match next(&mut stream).await {
        Err(watcher::Error::WatchError(status)) => assert_eq!(status.code, 410),
        Err(other) => panic!("expected a 410 watch error, got {other:?}"),
        Ok(event) => panic!("expected a 410 watch error, got {}", name_of(&event)),
    }
    assert!(matches!(
        next_event(&mut stream).await,
        watcher::Event::Init
    ));
    let mut relisted = Vec::new();
    loop {
        match next_event(&mut stream).await {
            watcher::Event::InitApply(p) => relisted.push(p.metadata.name.unwrap_or_default()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {}", name_of(&other)),
        }
    }
    assert_eq!(relisted, ["a", "b", "c", "d"]);
    Ok(())
}

#[tokio::test]
async fn watches_carry_bookmarks_and_end_at_their_timeout() -> TestResult {
    let server = ApiServer::start_with(Options {
        bookmark_interval: Duration::from_millis(20),
        ..Options::default()
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "ns");
    pods.create(&PostParams::default(), &pod("p")).await?;
    let rv = server.store().resource_version().to_string();
    let mut events = pods
        .watch(&WatchParams::default().timeout(1), &rv)
        .await?
        .boxed();
    match next(&mut events).await? {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected BOOKMARK, got {other:?}"),
    }
    // The stream ends by itself once timeoutSeconds has passed.
    let ended = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            assert!(matches!(event, Ok(WatchEvent::Bookmark(_))));
        }
    })
    .await;
    assert!(ended.is_ok());
    Ok(())
}

#[tokio::test]
async fn leases_conflict_on_stale_writes() -> TestResult {
    let server = ApiServer::start().await?;
    let leases: Api<Lease> = Api::namespaced(server.kube_client()?, "kube-system");
    let lease: Lease = from_json(json!({
        "metadata": {"name": "caldera"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}
    }));
    let created = leases.create(&PostParams::default(), &lease).await?;
    let mut take = created.clone();
    if let Some(spec) = take.spec.as_mut() {
        spec.holder_identity = Some("b".into());
    }
    leases
        .replace("caldera", &PostParams::default(), &take)
        .await?;
    let mut late = created.clone();
    if let Some(spec) = late.spec.as_mut() {
        spec.holder_identity = Some("c".into());
    }
    let conflict = api_error(
        leases
            .replace("caldera", &PostParams::default(), &late)
            .await,
    );
    assert_eq!(conflict.code, 409);
    assert_eq!(
        conflict.message,
        "Operation cannot be fulfilled on leases.coordination.k8s.io \"caldera\": the object has been modified; please apply your changes to the latest version and try again"
    );
    let renew = json!({"spec": {"renewTime": "2026-01-01T00:00:00.000000Z"}});
    let renewed = leases
        .patch(
            "caldera",
            &PatchParams::default(),
            &Patch::Strategic(&renew),
        )
        .await?;
    assert_eq!(
        renewed.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("b")
    );
    let missing = api_error(leases.get("other").await);
    assert_eq!(
        missing.message,
        "leases.coordination.k8s.io \"other\" not found"
    );
    leases.delete("caldera", &DeleteParams::default()).await?;
    assert!(leases.get_opt("caldera").await?.is_none());
    Ok(())
}

#[tokio::test]
async fn crds_install_and_volcano_objects_are_served() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = from_json(json!({
        "metadata": {"name": "podgroups.scheduling.volcano.sh"},
        "spec": {
            "group": "scheduling.volcano.sh",
            "names": {"kind": "PodGroup", "plural": "podgroups", "shortNames": ["pg"]},
            "scope": "Namespaced",
            "versions": [{"name": "v1beta1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}}}]
        }
    }));
    crds.create(&PostParams::default(), &crd).await?;
    let stored = crds.get("podgroups.scheduling.volcano.sh").await?;
    let established = stored
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    assert!(established);
    assert_eq!(crds.list(&ListParams::default()).await?.items.len(), 1);

    let queue_api: Api<DynamicObject> = Api::all_with(client.clone(), &queues());
    let q = DynamicObject::new("research", &queues()).data(json!({"spec": {"weight": 3}}));
    queue_api.create(&PostParams::default(), &q).await?;
    let open = json!({"status": {"state": "Open"}});
    queue_api
        .patch_status("research", &PatchParams::default(), &Patch::Merge(&open))
        .await?;
    let got = queue_api.get("research").await?;
    assert_eq!(
        (
            got.data["spec"]["weight"].clone(),
            got.data["status"]["state"].clone()
        ),
        (json!(3), json!("Open"))
    );

    let pgs: Api<DynamicObject> = Api::namespaced_with(client, "ns", &podgroups());
    let pg = DynamicObject::new("train", &podgroups()).data(json!({"spec": {"minMember": 2}}));
    pgs.create(&PostParams::default(), &pg).await?;
    let smp = api_error(
        pgs.patch(
            "train",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"minMember": 3}})),
        )
        .await,
    );
    assert_eq!(smp.code, 415);
    let list = pgs.list(&ListParams::default()).await?;
    assert_eq!(list.items.len(), 1);
    assert_eq!(
        server
            .store()
            .get("pg", "ns", "train")
            .map(|v| v["spec"]["minMember"].clone()),
        Some(json!(2))
    );
    Ok(())
}

#[tokio::test]
async fn discovery_describes_the_served_resources() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let gvk = GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup");
    for discovery in [
        kube::Discovery::new(client.clone()).run().await?,
        kube::Discovery::new(client.clone())
            .run_aggregated()
            .await?,
    ] {
        let (resource, caps) = discovery
            .resolve_gvk(&gvk)
            .expect("PodGroup is discoverable");
        assert_eq!(resource.plural, "podgroups");
        assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
        assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
        assert!(caps.subresources.iter().any(|(r, _)| r.plural == "status"));
        let pods = discovery
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
            .expect("pods are discoverable");
        assert!(pods
            .1
            .subresources
            .iter()
            .any(|(r, _)| r.plural == "binding"));
        let queue = discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "scheduling.volcano.sh",
                "v1beta1",
                "Queue",
            ))
            .expect("queues are discoverable");
        assert_eq!(queue.1.scope, kube::discovery::Scope::Cluster);
    }
    let list = client
        .list_api_group_resources("scheduling.volcano.sh/v1beta1")
        .await?;
    let short: Vec<String> = list
        .resources
        .iter()
        .flat_map(|r| r.short_names.clone().unwrap_or_default())
        .collect();
    assert!(short.contains(&"pg".to_string()) && short.contains(&"q".to_string()));
    let version = client.apiserver_version().await?;
    assert_eq!(version.major, "1");
    Ok(())
}

#[tokio::test]
async fn request_counts_and_injected_failures() -> TestResult {
    let server = ApiServer::start().await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "ns");
    pods.create(&PostParams::default(), &pod("p")).await?;
    server.fail_next(Verb::Create, "pods", "binding", 500, 1);
    let failed = api_error(bind(&pods, "p", "n1").await);
    assert_eq!(
        (failed.code, failed.reason.as_str()),
        (500, "InternalError")
    );
    assert!(pods
        .get("p")
        .await?
        .spec
        .and_then(|s| s.node_name)
        .is_none());
    bind(&pods, "p", "n1").await?;

    // 429 is retried by kube's default client: the caller never sees it.
    server.fail_next(Verb::Get, "pods", "", 429, 2);
    pods.get("p").await?;

    let counts = server.request_counts();
    assert_eq!(counts.get(Verb::Create, "pods", "binding"), 2);
    assert_eq!(counts.get(Verb::Create, "pods", ""), 1);
    assert_eq!(counts.get(Verb::Get, "pods", ""), 4);
    assert_eq!(counts.writes(), 3);

    // Steady state: reads only.
    let before = server.request_counts();
    pods.list(&ListParams::default()).await?;
    let delta = server.request_counts().since(&before);
    assert_eq!((delta.writes(), delta.total()), (0, 1));
    server.reset_request_counts();
    assert_eq!(server.request_counts().total(), 0);
    Ok(())
}

#[tokio::test]
async fn both_event_apis_store_events() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "ns");
    core.create(
        &PostParams::default(),
        &from_json(json!({
            "metadata": {"generateName": "p."},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p"},
            "reason": "Scheduled", "message": "Successfully assigned ns/p to n1", "type": "Normal"
        })),
    )
    .await?;
    let v1: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client, "ns");
    v1.create(
        &PostParams::default(),
        &from_json(json!({
            "metadata": {"name": "pg.1"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "regarding": {"kind": "PodGroup", "namespace": "ns", "name": "train"},
            "reason": "Unschedulable", "action": "Scheduling", "type": "Warning",
            "reportingController": "caldera", "reportingInstance": "caldera-0"
        })),
    )
    .await?;
    let listed = core
        .list(&ListParams::default().fields("involvedObject.name=p,reason=Scheduled"))
        .await?;
    assert_eq!(listed.items.len(), 1);
    assert!(listed.items[0]
        .metadata
        .name
        .as_deref()
        .is_some_and(|n| n.starts_with("p.")));
    let note = json!({"note": "6/8 members in gang unschedulable"});
    let patched = v1
        .patch("pg.1", &PatchParams::default(), &Patch::Merge(&note))
        .await?;
    assert_eq!(
        patched.note.as_deref(),
        Some("6/8 members in gang unschedulable")
    );
    assert_eq!(server.store().count("events"), 1);
    assert_eq!(server.store().count("events.events.k8s.io"), 1);
    Ok(())
}

#[tokio::test]
async fn collections_dry_runs_and_metadata_only_reads() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    for name in ["a", "b", "c"] {
        pods.create(&PostParams::default(), &pod(name)).await?;
    }
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let rv = server.store().resource_version();
    let would_be = pods.create(&dry, &pod("d")).await?;
    assert_eq!(would_be.metadata.name.as_deref(), Some("d"));
    assert!(pods.get_opt("d").await?.is_none());
    assert_eq!(server.store().resource_version(), rv);

    let partial = pods.get_metadata("a").await?;
    assert_eq!(
        partial.types.map(|t| t.kind).as_deref(),
        Some("PartialObjectMetadata")
    );
    assert_eq!(partial.metadata.name.as_deref(), Some("a"));
    let names: Vec<String> = pods
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    assert_eq!(names, ["a", "b", "c"]);

    bind(&pods, "c", "n1").await?;
    let deleted = pods
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=train"),
        )
        .await?;
    let listed = deleted.left().map(|l| l.items.len());
    assert_eq!(listed, Some(3));
    // The bound pod terminates gracefully; the others are gone.
    let left: Vec<Pod> = pods.list(&ListParams::default()).await?.items;
    assert_eq!(left.len(), 1);
    assert!(left[0].metadata.deletion_timestamp.is_some());

    // Deleting a namespace removes what is in it.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    namespaces.delete("ns", &DeleteParams::default()).await?;
    assert_eq!(server.store().count("pods"), 0);
    Ok(())
}

#[tokio::test]
async fn without_auto_created_namespaces_a_missing_namespace_is_404() -> TestResult {
    let server = ApiServer::start_with(Options {
        auto_create_namespaces: false,
        ..Options::default()
    })
    .await?;
    let pods: Api<Pod> = Api::namespaced(server.kube_client()?, "missing");
    let refused = api_error(pods.create(&PostParams::default(), &pod("p")).await);
    assert_eq!(
        (refused.code, refused.message.as_str()),
        (404, "namespaces \"missing\" not found")
    );
    let default: Api<Pod> = Api::default_namespaced(server.kube_client()?);
    default.create(&PostParams::default(), &pod("p")).await?;
    Ok(())
}

#[tokio::test]
async fn watch_option_combinations_are_validated_like_the_real_server() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let get = |query: &str| {
        axum::http::Request::get(format!("/api/v1/namespaces/ns/pods?watch=true&{query}"))
            .body(Vec::new())
    };
    for query in [
        "sendInitialEvents=true&allowWatchBookmarks=true",
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        "resourceVersionMatch=NotOlderThan&resourceVersion=1",
    ] {
        let err = api_error(client.request_text(get(query)?).await);
        assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"), "{query}");
    }
    let err = api_error(client.request_text(get("resourceVersion=abc")?).await);
    assert_eq!(err.code, 400);
    Ok(())
}

#[tokio::test]
async fn evictions_are_judged_by_disruption_budgets() -> TestResult {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    // A client that does not retry 429 by itself, to see the refusal.
    let mut config = kube::Config::new(server.url().parse()?);
    config.default_retry = false;
    let no_retry = kube::Client::try_from(config)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    let strict: Api<Pod> = Api::namespaced(no_retry, "ns");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client, "ns");
    let created = budgets
        .create(
            &PostParams::default(),
            &from_json(json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "train"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "train"}}},
                "status": {"disruptionsAllowed": 5}
            })),
        )
        .await?;
    assert_eq!(created.metadata.generation, Some(1));
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name)).await?;
        bind(&pods, name, "n1").await?;
        // Acting as the kubelet: running and ready.
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await?;
    }
    let status = budgets.get("train").await?.status.unwrap_or_default();
    assert_eq!(
        (
            status.expected_pods,
            status.current_healthy,
            status.desired_healthy,
            status.disruptions_allowed
        ),
        (Some(2), Some(2), Some(1), Some(1))
    );

    let answer = strict.evict("a", &EvictParams::default()).await?;
    assert_eq!(answer.code, 201);
    let evicted = pods.get("a").await?;
    assert!(
        evicted.metadata.deletion_timestamp.is_some(),
        "graceful: still there"
    );
    let conditions = evicted
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default();
    assert!(conditions.iter().any(|c| c.type_ == "DisruptionTarget"
        && c.status == "True"
        && c.reason.as_deref() == Some("EvictionByEvictionAPI")));
    let status = budgets.get("train").await?.status.unwrap_or_default();
    assert_eq!(
        (status.current_healthy, status.disruptions_allowed),
        (Some(1), Some(0))
    );

    let refused = api_error(strict.evict("b", &EvictParams::default()).await);
    assert_eq!(refused.code, 429);
    assert_eq!(refused.reason, "TooManyRequests");
    assert_eq!(
        refused.message,
        "Cannot evict pod as it would violate the pod's disruption budget."
    );
    let cause = refused
        .details
        .and_then(|d| d.causes.into_iter().next())
        .expect("a DisruptionBudget cause");
    assert_eq!(cause.reason, "DisruptionBudget");
    assert_eq!(
        cause.message,
        "The disruption budget train needs 1 healthy pods and has 1 currently"
    );
    assert!(pods.get("b").await?.metadata.deletion_timestamp.is_none());

    // The kubelet finishes the first; a pending pod is evicted without asking the budget.
    pods.delete("a", &DeleteParams::default().grace_period(0))
        .await?;
    pods.create(&PostParams::default(), &pod("c")).await?;
    assert_eq!(strict.evict("c", &EvictParams::default()).await?.code, 201);
    Ok(())
}

/// Kubernetes' own gang API as a 1.36 kube-apiserver serves it: a native PodGroup is created
/// without status and with the `scheduling.k8s.io/podgroup-protection` finalizer; its
/// `PodGroupScheduled` condition merges by type under a strategic merge patch; deleted while a
/// pod still names it, it stays terminating until the pod is gone (the podgroup-protection
/// controller of kube-controller-manager), then goes.
#[tokio::test]
async fn native_podgroups_carry_the_protection_finalizer_until_their_pods_go() -> TestResult {
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.k8s.io", "v1alpha2", "PodGroup"),
        "podgroups",
    );
    let groups: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let created = groups
        .create(
            &PostParams::default(),
            &from_json(json!({
                "apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
                "metadata": {"name": "train"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
                "status": {"conditions": [{"type": "Ignored", "status": "True", "reason": "X",
                    "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
            })),
        )
        .await?;
    assert_eq!(
        created.metadata.finalizers,
        Some(vec!["scheduling.k8s.io/podgroup-protection".to_string()])
    );
    assert!(created.data.get("status").is_none_or(Value::is_null));
    let condition = |type_: &str, status: &str| {
        json!({"status": {"conditions": [{"type": type_, "status": status, "reason": "R",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    };
    let params = PatchParams::default();
    groups
        .patch_status(
            "train",
            &params,
            &Patch::Strategic(condition("Other", "True")),
        )
        .await?;
    let patched = groups
        .patch_status(
            "train",
            &params,
            &Patch::Strategic(condition("PodGroupScheduled", "False")),
        )
        .await?;
    let types: Vec<&str> = patched.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, ["Other", "PodGroupScheduled"]);

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut member = pod("train-0");
    member
        .spec
        .get_or_insert_with(Default::default)
        .scheduling_group = Some(from_json(json!({"podGroupName": "train"})));
    pods.create(&PostParams::default(), &member).await?;
    groups.delete("train", &DeleteParams::default()).await?;
    let terminating = groups.get("train").await?;
    assert!(terminating.metadata.deletion_timestamp.is_some());
    pods.delete("train-0", &DeleteParams::default()).await?;
    assert!(groups.get_opt("train").await?.is_none());
    Ok(())
}

/// kube-controller-manager's ReplicaSet and Deployment controllers, as the stand-in plays them:
/// a ReplicaSet's pods are made from its template and owned by it; an evicted pod (still
/// terminating on its node) is replaced at once; a budget with `maxUnavailable` counts the
/// ReplicaSet's scale; a Deployment gets a ReplicaSet named by its template hash; deleting it
/// takes the ReplicaSets and their pods (background, the `apps/v1` default).
#[tokio::test]
async fn replicasets_and_deployments_are_played_like_kube_controller_manager() -> TestResult {
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let server = ApiServer::start().await?;
    let client = server.kube_client()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "ns");
    let sets: Api<ReplicaSet> = Api::namespaced(client.clone(), "ns");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "ns");
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client, "ns");
    let template = json!({
        "metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}},
        "spec": {"schedulerName": "caldera", "containers": [{"name": "c", "image": "x"}]}
    });
    let refused = api_error(
        sets.create(
            &PostParams::default(),
            &from_json(json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "bad"},
                "spec": {"selector": {"matchLabels": {"app": "other"}}, "template": template}
            })),
        )
        .await,
    );
    assert_eq!(refused.code, 422);
    assert!(
        refused.message.contains("spec.template.metadata.labels"),
        "{}",
        refused.message
    );

    budgets
        .create(
            &PostParams::default(),
            &from_json(json!({
                "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}
            })),
        )
        .await?;
    let rs = sets
        .create(
            &PostParams::default(),
            &from_json(json!({
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": "web-abc"},
                "spec": {"replicas": 3,
                    "selector": {"matchLabels": {"app": "web", "pod-template-hash": "abc"}},
                    "template": template}
            })),
        )
        .await?;
    let listed = pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items;
    assert_eq!(listed.len(), 3);
    for p in &listed {
        let owner = &p.metadata.owner_references.as_ref().expect("owned")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("ReplicaSet", rs.metadata.uid.as_deref().unwrap_or(""))
        );
        assert!(p
            .metadata
            .name
            .as_deref()
            .unwrap_or("")
            .starts_with("web-abc-"));
    }
    let names: Vec<String> = listed
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    for name in &names {
        bind(&pods, name, "n1").await?;
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}})),
        )
        .await?;
    }
    let status = sets.get("web-abc").await?.status.unwrap_or_default();
    assert_eq!((status.replicas, status.ready_replicas), (3, Some(3)));
    let budget = budgets.get("web").await?.status.unwrap_or_default();
    assert_eq!(
        (budget.expected_pods, budget.disruptions_allowed),
        (Some(3), Some(1)),
        "the ReplicaSet's scale is found"
    );

    pods.evict(&names[0], &EvictParams::default()).await?;
    let evicted = pods.get(&names[0]).await?;
    assert!(
        evicted.metadata.deletion_timestamp.is_some(),
        "still terminating"
    );
    let now: Vec<Pod> = pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items;
    let fresh: Vec<&Pod> = now
        .iter()
        .filter(|p| !names.contains(p.metadata.name.as_ref().unwrap_or(&String::new())))
        .collect();
    assert_eq!(fresh.len(), 1, "replaced at once");
    assert!(fresh[0]
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_ref())
        .is_none());
    let status = sets.get("web-abc").await?.status.unwrap_or_default();
    assert_eq!((status.replicas, status.terminating_replicas), (3, Some(1)));

    sets.delete("web-abc", &DeleteParams::default()).await?;
    let left: Vec<Pod> = pods
        .list(&ListParams::default().labels("app=web"))
        .await?
        .items;
    assert!(
        left.iter().all(|p| p.metadata.deletion_timestamp.is_some()),
        "the garbage collector deletes them (bound ones gracefully)"
    );

    deployments
        .create(
            &PostParams::default(),
            &from_json(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "api"},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "api"}},
                    "template": {"metadata": {"labels": {"app": "api"}},
                        "spec": {"containers": [{"name": "c", "image": "x"}]}}}
            })),
        )
        .await?;
    let owned: Vec<ReplicaSet> = sets
        .list(&ListParams::default().labels("app=api"))
        .await?
        .items;
    assert_eq!(owned.len(), 1);
    let hash = owned[0].metadata.labels.as_ref().expect("labels")["pod-template-hash"].clone();
    assert_eq!(
        owned[0].metadata.name.as_deref(),
        Some(format!("api-{hash}").as_str())
    );
    let api_pods = pods
        .list(&ListParams::default().labels("app=api"))
        .await?
        .items;
    assert_eq!(api_pods.len(), 2);
    assert!(api_pods
        .iter()
        .all(|p| p.metadata.labels.as_ref().expect("labels")["pod-template-hash"] == hash));
    deployments.delete("api", &DeleteParams::default()).await?;
    assert!(sets
        .list(&ListParams::default().labels("app=api"))
        .await?
        .items
        .is_empty());
    assert!(
        pods.list(&ListParams::default().labels("app=api"))
            .await?
            .items
            .is_empty(),
        "unbound pods go at once"
    );
    Ok(())
}

/// RBAC for one ServiceAccount's token: its requests are refused as kube-apiserver words it,
/// others (the administrator's) are not; a SelfSubjectAccessReview answers for the caller.
#[tokio::test]
async fn rbac_refuses_the_service_account_only_and_answers_access_reviews() {
    use caldera_testkit::apiserver::{yaml_documents, Rbac};
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
    };
    let docs = yaml_documents(
        "kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\nrules:\n- {apiGroups: [''], resources: [nodes], verbs: [list]}\n---\nkind: ClusterRoleBinding\napiVersion: rbac.authorization.k8s.io/v1\nmetadata: {name: r}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: r}\nsubjects: [{kind: ServiceAccount, name: sa, namespace: ns}]\n",
    )
    .unwrap();
    let rbac = Rbac::service_account(&docs, "ns", "sa", "tok").unwrap();
    let server = ApiServer::start_with(Options {
        rbac: Some(rbac),
        ..Options::default()
    })
    .await
    .unwrap();
    let mut config = kube::Config::new(server.url().parse().unwrap());
    config.auth_info.token = Some("tok".to_string().into());
    let sa = kube::Client::try_from(config).unwrap();
    let admin = server.kube_client().unwrap();
    let nodes: Api<Node> = Api::all(sa.clone());
    assert!(nodes.list(&ListParams::default()).await.is_ok());
    let pods: Api<Pod> = Api::all(sa.clone());
    let err = pods.list(&ListParams::default()).await.unwrap_err();
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 403);
            assert_eq!(
                s.message,
                "pods is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
            );
        }
        other => panic!("{other}"),
    }
    assert!(Api::<Pod>::all(admin.clone())
        .list(&ListParams::default())
        .await
        .is_ok());
    assert_eq!(server.forbidden().len(), 1);
    let review = |resource: &str| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("list".into()),
                resource: Some(resource.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let ask = |client: kube::Client, resource: &'static str| async move {
        Api::<SelfSubjectAccessReview>::all(client)
            .create(&PostParams::default(), &review(resource))
            .await
            .unwrap()
            .status
            .unwrap()
            .allowed
    };
    assert!(ask(sa.clone(), "nodes").await);
    assert!(!ask(sa, "pods").await);
    assert!(ask(admin, "pods").await);
}
