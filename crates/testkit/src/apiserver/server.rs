//! The HTTP face: URL routing the way kube-apiserver lays out its paths, discovery documents,
//! request counting and injected failures, JSON responses, and streamed watches.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::counters::{take_fault, Effect, Fault, RequestCounts, RequestKey, Verb};
use super::rbac::{Attributes, Rbac};
use super::resources::{self, def, Flavor, ResourceDef, ResourceId};
use super::selector::{FieldSelector, LabelSelector};
use super::status::ApiError;
use super::store::{
    DeleteOptions, Event, EventType, ListQuery, PatchType, Replay, Store, Stored, Sub, WatchFrom,
};

/// Largest request body accepted (kube-apiserver's limit is 3 MiB per object; lists are GETs).
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Watch output is flushed in chunks of about this size.
const CHUNK: usize = 64 * 1024;

const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub(crate) struct App {
    pub store: Store,
    pub counts: Mutex<RequestCounts>,
    /// Every write request, in the order it arrived.
    pub write_log: Mutex<Vec<RequestKey>>,
    pub faults: Mutex<Vec<Fault>>,
    pub bookmark_interval: Duration,
    pub address: String,
    /// Serve `scheduling.k8s.io/v1alpha2` ([`super::Options::native_gang_api`]).
    pub native_gang_api: bool,
    /// RBAC enforced for one ServiceAccount's token ([`super::Options::rbac`]).
    pub rbac: std::sync::RwLock<Option<Rbac>>,
    /// Requests refused by [`App::rbac`], with the message sent.
    pub forbidden: Mutex<Vec<(RequestKey, String)>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Counters and fault lists stay consistent across a panic: each update is one statement.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn router(app: Arc<App>) -> Router {
    Router::new().fallback(handle).with_state(app)
}

fn json_response(code: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response()
}

fn error_response(err: &ApiError) -> Response {
    json_response(err.code, &err.to_status())
}

type Query = Vec<(String, String)>;

fn param<'a>(q: &'a Query, name: &str) -> Option<&'a str> {
    q.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn flag(q: &Query, name: &str) -> Option<bool> {
    param(q, name).map(|v| v == "true" || v == "1")
}

fn dry_run(q: &Query) -> Result<bool, ApiError> {
    match param(q, "dryRun") {
        None | Some("") => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(ApiError::bad_request(format!(
            "Invalid dry run value: {other:?}; supported values: \"All\""
        ))),
    }
}

/// A request for a resource, after routing.
struct Target {
    id: ResourceId,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
    legacy_watch: bool,
}

enum Route {
    Version,
    Health,
    Root,
    CoreVersions,
    Groups,
    Group(Value),
    ResourceList(Value),
    Resource(Target),
    NotFound,
}

/// Whether `d` is served now: built-in resources always (the native gang API unless turned
/// off), CRD-backed ones once their CustomResourceDefinition exists.
fn served(app: &App, d: &ResourceDef) -> bool {
    if d.group == "scheduling.k8s.io" && d.version == "v1alpha2" {
        return app.native_gang_api;
    }
    !d.requires_crd
        || app
            .store
            .get("customresourcedefinitions", "", &d.qualified())
            .is_some()
}

fn route(path: &str, served: resources::Served) -> Route {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segments.as_slice() {
        [] => return Route::Root,
        ["version"] => return Route::Version,
        ["healthz" | "livez" | "readyz", ..] => return Route::Health,
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["api", "v1"] => {
            return resources::api_resource_list("", "v1", served)
                .map_or(Route::NotFound, Route::ResourceList)
        }
        ["apis", group] => {
            return resources::api_group(group, served).map_or(Route::NotFound, Route::Group)
        }
        ["apis", group, version] => {
            return resources::api_resource_list(group, version, served)
                .map_or(Route::NotFound, Route::ResourceList)
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Route::NotFound,
    };
    let (legacy_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, resource, tail @ ..]
            if !matches!(*resource, "status" | "finalize") || !tail.is_empty() =>
        {
            (Some(ns.to_string()), &rest[2..])
        }
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(name.to_string()), None),
        [plural, name, sub] => (*plural, Some(name.to_string()), Some(sub.to_string())),
        _ => return Route::NotFound,
    };
    let Some(id) = resources::find_served(group, version, plural, served) else {
        return Route::NotFound;
    };
    let d = def(id);
    if (d.namespaced && namespace.is_none() && name.is_some())
        || (!d.namespaced && namespace.is_some())
    {
        return Route::NotFound;
    }
    if let Some(sub) = &sub {
        if !d.has_subresource(sub) {
            return Route::NotFound;
        }
    }
    Route::Resource(Target {
        id,
        namespace,
        name,
        sub,
        legacy_watch,
    })
}

async fn handle(State(app): State<Arc<App>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            return error_response(&ApiError::bad_request(format!(
                "reading the request body: {e}"
            )))
        }
    };
    let query: Query = form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
        .into_owned()
        .collect();
    let rbac = app
        .rbac
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .filter(|r| bearer(&parts.headers) == Some(r.token.as_str()));
    if parts.uri.path() == ACCESS_REVIEWS && parts.method == Method::POST {
        return access_review(rbac.as_ref(), &body);
    }
    let served = |d: &ResourceDef| served(&app, d);
    let target = match route(parts.uri.path(), &served) {
        Route::Resource(target) => target,
        other => {
            lock(&app.counts).record_non_resource();
            return non_resource(&app, other, &parts.headers);
        }
    };
    let Some(key) = request_key(&target, &parts.method, &query) else {
        return error_response(&ApiError::method_not_allowed());
    };
    if let Some(rbac) = &rbac {
        let attributes = Attributes {
            verb: key.verb.as_str(),
            group: &key.group,
            resource: &key.resource,
            subresource: target.sub.as_deref(),
            namespace: target.namespace.as_deref(),
            name: target.name.as_deref(),
        };
        if !rbac.allows(&attributes) {
            let refusal = rbac.refusal(&attributes);
            lock(&app.forbidden).push((key.clone(), refusal.message.clone()));
            return error_response(&refusal);
        }
    }
    // Taken in a statement of its own: the lock is not held across the sleep.
    let delay = take_fault(&mut lock(&app.faults), &key, true);
    if let Some(Effect::Delay(d)) = delay {
        tokio::time::sleep(d).await;
    }
    match serve_resource(&app, key, &parts.headers, &query, target, &body) {
        Ok(response) => response,
        Err(err) => error_response(&err),
    }
}

/// Where `SelfSubjectAccessReview`s are created (never stored).
const ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// The bearer token of a request, if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// A `SelfSubjectAccessReview` answered for the caller: what `rbac` allows for its account,
/// everything for the administrator.
fn access_review(rbac: Option<&Rbac>, body: &Bytes) -> Response {
    let mut review = match parse_body(body) {
        Ok(v) => v,
        Err(e) => return error_response(&e),
    };
    let attributes = review
        .pointer("/spec/resourceAttributes")
        .cloned()
        .unwrap_or(Value::Null);
    let field = |name: &str| {
        attributes
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let allowed = match rbac {
        None => true,
        Some(rbac) => rbac.allows(&Attributes {
            verb: field("verb").unwrap_or_default(),
            group: field("group").unwrap_or_default(),
            resource: field("resource").unwrap_or_default(),
            subresource: field("subresource"),
            namespace: field("namespace"),
            name: field("name"),
        }),
    };
    review["status"] = json!({"allowed": allowed});
    json_response(201, &review)
}

/// Full objects, or `meta.k8s.io/v1` `PartialObjectMetadata` when the `Accept` header asks for
/// it (kube's `get_metadata`, `list_metadata` and `metadata_watcher` do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Full,
    Metadata,
}

impl Shape {
    fn of(headers: &HeaderMap) -> Self {
        let metadata = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("as=PartialObjectMetadata"));
        if metadata {
            Shape::Metadata
        } else {
            Shape::Full
        }
    }

    /// Appends the object's JSON in this shape.
    fn write(self, obj: &Stored, out: &mut Vec<u8>) {
        match self {
            Shape::Full => out.extend_from_slice(obj.json()),
            Shape::Metadata => {
                let partial = json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj["metadata"],
                });
                // Serialising a Value into a Vec cannot fail.
                let _ = serde_json::to_writer(&mut *out, &partial);
            }
        }
    }
}

fn wants_aggregated(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("as=APIGroupDiscoveryList"))
}

fn non_resource(app: &App, route: Route, headers: &HeaderMap) -> Response {
    let aggregated = |core: bool| {
        let served = |d: &ResourceDef| served(app, d);
        let bytes =
            serde_json::to_vec(&resources::aggregated_discovery(core, &served)).unwrap_or_default();
        (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(AGGREGATED_CONTENT_TYPE),
            )],
            bytes,
        )
            .into_response()
    };
    match route {
        Route::Version => json_response(200, &resources::version_info()),
        Route::Health => (StatusCode::OK, "ok").into_response(),
        Route::Root => json_response(
            200,
            &json!({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]}),
        ),
        Route::CoreVersions if wants_aggregated(headers) => aggregated(true),
        Route::CoreVersions => json_response(200, &resources::api_versions(&app.address)),
        Route::Groups if wants_aggregated(headers) => aggregated(false),
        Route::Groups => json_response(
            200,
            &resources::api_group_list(&|d: &ResourceDef| served(app, d)),
        ),
        Route::Group(doc) | Route::ResourceList(doc) => json_response(200, &doc),
        Route::Resource(_) | Route::NotFound => error_response(&ApiError::path_not_found()),
    }
}

/// What a request is, as counted and as faults match it (`None`: no verb for this method).
fn request_key(target: &Target, method: &Method, query: &Query) -> Option<RequestKey> {
    let d = def(target.id);
    Some(RequestKey {
        verb: verb_for(method, target, query)?,
        group: d.group.to_string(),
        resource: d.plural.to_string(),
        subresource: target.sub.clone().unwrap_or_default(),
    })
}

fn verb_for(method: &Method, target: &Target, query: &Query) -> Option<Verb> {
    let watch = target.legacy_watch || flag(query, "watch") == Some(true);
    Some(match (method.as_str(), target.name.is_some()) {
        ("GET", true) if watch => Verb::Watch,
        ("GET", true) => Verb::Get,
        ("GET", false) if watch => Verb::Watch,
        ("GET", false) => Verb::List,
        ("POST", _) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return None,
    })
}

fn allowed(d: &ResourceDef, sub: Option<&str>, verb: Verb) -> bool {
    match sub {
        None => d.verbs.contains(&verb.as_str()),
        Some(sub) => d
            .subresources
            .iter()
            .find(|s| s.name == sub)
            .is_some_and(|s| s.verbs.contains(&verb.as_str())),
    }
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json");
    let media = content_type.split(';').next().unwrap_or_default().trim();
    if media == "application/json" || media == "*/*" || media.is_empty() {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json (the Caldera test API server does not decode {media})"
        )))
    }
}

fn patch_type(headers: &HeaderMap, d: &ResourceDef) -> Result<PatchType, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let media = content_type.split(';').next().unwrap_or_default().trim();
    let accepted = if d.flavor == Flavor::Custom {
        "application/json-patch+json, application/merge-patch+json"
    } else {
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
    };
    match media {
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/strategic-merge-patch+json" if d.flavor != Flavor::Custom => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => Err(ApiError::unsupported_media_type(format!(
            "server-side apply ({media}) is not implemented by the Caldera test API server; accepted media types include: {accepted}"
        ))),
        _ => Err(ApiError::unsupported_media_type(format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}"
        ))),
    }
}

fn list_query(d: &ResourceDef, target: &Target, query: &Query) -> Result<ListQuery, ApiError> {
    let labels = LabelSelector::parse(param(query, "labelSelector").unwrap_or_default())?;
    let mut field_text = param(query, "fieldSelector")
        .unwrap_or_default()
        .to_string();
    if let Some(name) = &target.name {
        // A watch on one object is a watch with a name field selector.
        if !field_text.is_empty() {
            field_text.push(',');
        }
        field_text.push_str(&format!("metadata.name={name}"));
    }
    let fields = FieldSelector::parse(&field_text, d)?;
    let limit = match param(query, "limit") {
        None | Some("") => None,
        Some(l) => Some(
            l.parse::<usize>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        ),
    };
    Ok(ListQuery {
        namespace: target.namespace.clone(),
        labels,
        fields,
        limit,
        continue_token: param(query, "continue")
            .filter(|c| !c.is_empty())
            .map(str::to_string),
    })
}

fn serve_resource(
    app: &App,
    key: RequestKey,
    headers: &HeaderMap,
    query: &Query,
    target: Target,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let d = def(target.id);
    let verb = key.verb;
    lock(&app.counts).record(key.clone());
    if verb.is_write() {
        lock(&app.write_log).push(key.clone());
    }
    if let Some(Effect::Fail(code)) = take_fault(&mut lock(&app.faults), &key, false) {
        return Err(ApiError::new(
            code,
            ApiError::reason_for(code),
            format!(
                "injected failure for {verb} {}{}",
                d.qualified(),
                target
                    .sub
                    .as_ref()
                    .map(|s| format!("/{s}"))
                    .unwrap_or_default()
            ),
        ));
    }
    if !allowed(d, target.sub.as_deref(), verb) {
        return Err(ApiError::method_not_allowed());
    }
    let ns = target.namespace.clone().unwrap_or_default();
    let name = target.name.clone().unwrap_or_default();
    let shape = Shape::of(headers);
    let sub = match target.sub.as_deref() {
        Some("status") => Sub::Status,
        _ => Sub::Main,
    };
    match verb {
        Verb::Get => {
            let obj = app.store.lock().get(target.id, &ns, &name)?;
            let mut out = Vec::new();
            shape.write(&obj, &mut out);
            Ok(json_bytes_response(out))
        }
        Verb::List => {
            let q = list_query(d, &target, query)?;
            let page = app.store.lock().list(target.id, &q)?;
            Ok(list_response(
                d,
                shape,
                page.items,
                page.resource_version,
                page.continue_token,
            ))
        }
        Verb::Watch => watch(app, d, shape, &target, query),
        Verb::Create => {
            require_json(headers)?;
            let dry = dry_run(query)?;
            let obj = parse_body(body)?;
            match (d.flavor, target.sub.as_deref()) {
                (Flavor::Binding, None) => {
                    let status = app.store.lock().bind(&ns, None, &obj, dry)?;
                    Ok(json_response(201, &status))
                }
                (_, Some("binding")) => {
                    let status = app.store.lock().bind(&ns, Some(&name), &obj, dry)?;
                    Ok(json_response(201, &status))
                }
                (_, Some("eviction")) => {
                    let status = app.store.lock().evict(&ns, &name, &obj, dry)?;
                    Ok(json_response(201, &status))
                }
                (_, None) if target.name.is_none() => {
                    let created = app.store.lock().create(target.id, &ns, obj, dry)?;
                    Ok(json_response(201, &created))
                }
                _ => Err(ApiError::method_not_allowed()),
            }
        }
        Verb::Update => {
            require_json(headers)?;
            let dry = dry_run(query)?;
            let obj = parse_body(body)?;
            let updated = app
                .store
                .lock()
                .update(target.id, &ns, &name, sub, obj, dry)?;
            Ok(json_response(200, &updated))
        }
        Verb::Patch => {
            let kind = patch_type(headers, d)?;
            let dry = dry_run(query)?;
            let patch = parse_body(body)?;
            let patched = app
                .store
                .lock()
                .patch(target.id, &ns, &name, sub, kind, &patch, dry)?;
            Ok(json_response(200, &patched))
        }
        Verb::Delete | Verb::DeleteCollection => {
            let (opts, dry) = if body.iter().any(|b| !b.is_ascii_whitespace()) {
                let options = parse_body(body)?;
                let dry = options["dryRun"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|x| x == "All"))
                    || dry_run(query)?;
                (DeleteOptions::from_body(&options), dry)
            } else {
                let grace = match param(query, "gracePeriodSeconds") {
                    Some(g) => Some(g.parse::<i64>().map_err(|_| {
                        ApiError::bad_request(format!("invalid gracePeriodSeconds {g:?}"))
                    })?),
                    None => None,
                };
                (
                    DeleteOptions {
                        grace_period_seconds: grace,
                        propagation_policy: param(query, "propagationPolicy").map(str::to_string),
                        ..Default::default()
                    },
                    dry_run(query)?,
                )
            };
            if verb == Verb::Delete {
                let result = app.store.lock().delete(target.id, &ns, &name, &opts, dry)?;
                Ok(json_response(200, &result))
            } else {
                let q = list_query(d, &target, query)?;
                let deleted = app
                    .store
                    .lock()
                    .delete_collection(target.id, &q, &opts, dry)?;
                let rv = app.store.lock().resource_version();
                let items = deleted
                    .into_iter()
                    .map(|v| Arc::new(Stored::new(v)))
                    .collect();
                Ok(list_response(d, Shape::Full, items, rv, None))
            }
        }
    }
}

fn list_response(
    d: &ResourceDef,
    shape: Shape,
    items: Vec<Arc<Stored>>,
    rv: u64,
    continue_token: Option<String>,
) -> Response {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    let mut out = Vec::with_capacity(256 + items.len() * 1024);
    let (kind, api_version) = match shape {
        Shape::Full => (d.list_kind(), d.api_version()),
        Shape::Metadata => (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        ),
    };
    out.extend_from_slice(b"{\"kind\":");
    let _ = serde_json::to_writer(&mut out, &kind);
    out.extend_from_slice(b",\"apiVersion\":");
    let _ = serde_json::to_writer(&mut out, &api_version);
    out.extend_from_slice(b",\"metadata\":");
    let _ = serde_json::to_writer(&mut out, &metadata);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        shape.write(item, &mut out);
    }
    out.extend_from_slice(b"]}");
    json_bytes_response(out)
}

fn json_bytes_response(bytes: Vec<u8>) -> Response {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response()
}

/// Selectors a watch applies to every event.
struct Filter {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if obj["metadata"]["namespace"].as_str().unwrap_or_default() != ns {
                return false;
            }
        }
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

enum Outgoing {
    Event(Arc<Event>),
    Synthetic(Arc<Stored>),
    Raw(Vec<u8>),
}

struct WatchStream {
    store: Store,
    filter: Filter,
    shape: Shape,
    kind: &'static str,
    api_version: String,
    queue: VecDeque<Outgoing>,
    live: Option<mpsc::UnboundedReceiver<Arc<Event>>>,
    bookmarks: Option<Interval>,
    deadline: Option<Instant>,
}

fn event_line(out: &mut Vec<u8>, kind: &str, object: &Value) {
    event_line_with(out, kind, |out| {
        // Serialising a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, object);
    });
}

fn event_line_with(out: &mut Vec<u8>, kind: &str, write_object: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(kind.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    write_object(out);
    out.extend_from_slice(b"}\n");
}

impl WatchStream {
    fn bookmark(&self, rv: u64, initial_events_end: bool) -> Vec<u8> {
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = match self.shape {
            Shape::Full => {
                json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": metadata})
            }
            Shape::Metadata => {
                json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": metadata})
            }
        };
        let mut out = Vec::new();
        event_line(&mut out, "BOOKMARK", &object);
        out
    }

    fn render(&self, item: &Outgoing, out: &mut Vec<u8>) {
        match item {
            Outgoing::Raw(bytes) => out.extend_from_slice(bytes),
            Outgoing::Synthetic(obj) => {
                if self.filter.matches(obj) {
                    event_line_with(out, "ADDED", |out| self.shape.write(obj, out));
                }
            }
            Outgoing::Event(e) => {
                let now = self.filter.matches(&e.object);
                let before = e.prev.as_deref().is_some_and(|p| self.filter.matches(p));
                let kind = match (e.kind, before, now) {
                    (EventType::Added, _, true) => Some(EventType::Added),
                    (EventType::Deleted, _, true) => Some(EventType::Deleted),
                    (EventType::Modified, true, true) => Some(EventType::Modified),
                    (EventType::Modified, false, true) => Some(EventType::Added),
                    (EventType::Modified, true, false) => Some(EventType::Deleted),
                    _ => None,
                };
                if let Some(kind) = kind {
                    event_line_with(out, kind.as_str(), |out| self.shape.write(&e.object, out));
                }
            }
        }
    }

    /// Queues a bookmark at the current resourceVersion. Holding the store lock while draining
    /// the live channel proves every event up to that version is queued ahead of it.
    fn queue_bookmark(&mut self) {
        let Some(live) = self.live.as_mut() else {
            return;
        };
        let guard = self.store.lock();
        while let Ok(event) = live.try_recv() {
            self.queue.push_back(Outgoing::Event(event));
        }
        let rv = guard.resource_version();
        drop(guard);
        let line = self.bookmark(rv, false);
        self.queue.push_back(Outgoing::Raw(line));
    }

    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if !self.queue.is_empty() {
                let mut out = Vec::new();
                while let Some(item) = self.queue.pop_front() {
                    self.render(&item, &mut out);
                    if out.len() >= CHUNK {
                        break;
                    }
                }
                if !out.is_empty() {
                    return Some(Bytes::from(out));
                }
                continue;
            }
            let live = self.live.as_mut()?;
            tokio::select! {
                event = live.recv() => match event {
                    Some(event) => {
                        self.queue.push_back(Outgoing::Event(event));
                        while let Ok(event) = live.try_recv() {
                            self.queue.push_back(Outgoing::Event(event));
                            if self.queue.len() >= 1024 {
                                break;
                            }
                        }
                    }
                    None => self.live = None,
                },
                _ = tick(&mut self.bookmarks) => self.queue_bookmark(),
                _ = until(self.deadline) => self.live = None,
            }
        }
    }
}

async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

fn invalid_watch(why: &str) -> ApiError {
    ApiError::new(
        422,
        "Invalid",
        format!("ListOptions.meta.k8s.io \"\" is invalid: {why}"),
    )
}

fn watch(
    app: &App,
    d: &'static ResourceDef,
    shape: Shape,
    target: &Target,
    query: &Query,
) -> Result<Response, ApiError> {
    let q = list_query(d, target, query)?;
    let filter = Filter {
        namespace: q.namespace.clone().filter(|_| d.namespaced),
        labels: q.labels,
        fields: q.fields,
    };
    let bookmarks_allowed = flag(query, "allowWatchBookmarks") == Some(true);
    let send_initial = flag(query, "sendInitialEvents");
    let version_match = param(query, "resourceVersionMatch").filter(|m| !m.is_empty());
    if send_initial == Some(true) {
        if version_match != Some("NotOlderThan") {
            return Err(invalid_watch("resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
        }
        if !bookmarks_allowed {
            return Err(invalid_watch("allowWatchBookmarks: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true"));
        }
    } else if version_match.is_some() && send_initial.is_none() {
        return Err(invalid_watch("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
    }
    let rv_text = param(query, "resourceVersion").unwrap_or_default();
    let from = if send_initial == Some(true) {
        WatchFrom::CurrentState
    } else if rv_text.is_empty() || rv_text == "0" {
        if send_initial == Some(false) {
            WatchFrom::Now
        } else {
            WatchFrom::CurrentState
        }
    } else {
        let n = rv_text
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_text:?}")))?;
        WatchFrom::After(n)
    };
    let timeout = match param(query, "timeoutSeconds") {
        Some(t) => Some(
            t.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
        ),
        None => None,
    };
    let started = app.store.lock().watch(target.id, from);
    let mut stream = WatchStream {
        store: app.store.clone(),
        filter,
        shape,
        kind: d.kind,
        api_version: d.api_version(),
        queue: VecDeque::new(),
        live: None,
        bookmarks: None,
        deadline: timeout.map(|t| Instant::now() + Duration::from_secs(t)),
    };
    match started {
        Err(err) => {
            // The real server answers an expired watch with 200 and a single ERROR event.
            let mut line = Vec::new();
            event_line(&mut line, "ERROR", &err.to_status());
            stream.queue.push_back(Outgoing::Raw(line));
        }
        Ok(start) => {
            match start.replay {
                Replay::Events(events) => {
                    stream.queue.extend(events.into_iter().map(Outgoing::Event))
                }
                Replay::Objects(objects) => stream
                    .queue
                    .extend(objects.into_iter().map(Outgoing::Synthetic)),
            }
            if send_initial == Some(true) {
                let line = stream.bookmark(start.resource_version, true);
                stream.queue.push_back(Outgoing::Raw(line));
            }
            stream.live = Some(start.live);
            if bookmarks_allowed && !app.bookmark_interval.is_zero() {
                let mut interval = tokio::time::interval_at(
                    Instant::now() + app.bookmark_interval,
                    app.bookmark_interval,
                );
                interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
                stream.bookmarks = Some(interval);
            }
        }
    }
    let body = futures::stream::unfold(stream, |mut s| async move {
        s.next_chunk()
            .await
            .map(|chunk| (Ok::<Bytes, Infallible>(chunk), s))
    });
    Ok((
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from_stream(body),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `plural ns name sub`, `-` for absent parts.
    fn target(path: &str) -> Option<String> {
        match route(path, &|_| true) {
            Route::Resource(t) => Some(format!(
                "{} {} {} {}",
                def(t.id).plural,
                t.namespace.as_deref().unwrap_or("-"),
                t.name.as_deref().unwrap_or("-"),
                t.sub.as_deref().unwrap_or("-")
            )),
            _ => None,
        }
    }

    #[test]
    fn routes_follow_the_api_server_layout() {
        let t = |p: &str| target(p);
        assert_eq!(
            t("/api/v1/namespaces/ns/pods/p/binding").as_deref(),
            Some("pods ns p binding")
        );
        assert_eq!(t("/api/v1/pods").as_deref(), Some("pods - - -"));
        assert_eq!(t("/api/v1/pods/p"), None);
        assert_eq!(
            t("/api/v1/namespaces/ns").as_deref(),
            Some("namespaces - ns -")
        );
        assert_eq!(
            t("/api/v1/namespaces/ns/status").as_deref(),
            Some("namespaces - ns status")
        );
        assert_eq!(
            t("/apis/scheduling.volcano.sh/v1beta1/queues/default/status").as_deref(),
            Some("queues - default status")
        );
        assert_eq!(
            t("/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/queues"),
            None
        );
        assert_eq!(t("/api/v1/namespaces/ns/pods/p/log"), None);
        assert_eq!(t("/apis/apps/v1/daemonsets"), None);
        assert_eq!(
            t("/apis/apps/v1/namespaces/ns/replicasets/web/status").as_deref(),
            Some("replicasets ns web status")
        );
        assert_eq!(
            t("/api/v1/watch/namespaces/ns/pods").as_deref(),
            Some("pods ns - -")
        );
        assert!(matches!(
            route("/apis/scheduling.volcano.sh/v1beta1", &|_| true),
            Route::ResourceList(_)
        ));
    }
}
