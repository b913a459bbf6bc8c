//! Plumbing shared by the live benchmarks (`e2e`, `cold-start`): where the objects go (the
//! in-process API stand-in, or a real cluster through a kubeconfig), how API requests are
//! counted, the objects themselves, and the waits.
//!
//! On the stand-in, objects are written straight into its store (no HTTP, nothing counted) and
//! requests are read from its own counters. On a real cluster, objects are created through the
//! API with a client of their own, and the runtime's requests are counted by a tower layer in
//! the runtime's client (one count per request the client sends; kube's own retries of 429/5xx
//! are below that layer and are not seen).

#[cfg(feature = "stand-in")]
use caldera_testkit::apiserver::{ApiServer, RequestCounts};
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams,
};
use kube::runtime::watcher;
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::watch as channel;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Why a live benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The stand-in could not start, or no client could be built for it.
    #[cfg(feature = "stand-in")]
    #[error("API stand-in: {0}")]
    StandIn(#[from] caldera_testkit::apiserver::Error),
    /// This build has no API stand-in (the shipped binary): the benchmark needs a cluster.
    #[error("this caldera was built without the in-process API stand-in (build one with `cargo build --release -p caldera --features stand-in`); `bench e2e` also runs against a cluster with --kubeconfig")]
    NoStandIn,
    /// The stand-in's store refused an object.
    #[cfg(feature = "stand-in")]
    #[error("creating {what} in the stand-in: {source}")]
    Store {
        /// The object.
        what: String,
        /// What the store said.
        #[source]
        source: caldera_testkit::apiserver::ApiError,
    },
    /// A request to the cluster failed.
    #[error("{what}: {source}")]
    Kube {
        /// What was being done.
        what: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// The runtime did not start.
    #[error("starting the runtime: {0}")]
    Runtime(#[from] caldera_runtime::Error),
    /// Anything else (a timeout, a bad size).
    #[error("{0}")]
    Other(String),
}

/// Result of the live benchmarks.
pub type Result<T, E = Error> = std::result::Result<T, E>;

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}

/// Label on every object a benchmark run creates on a real cluster (value: the run's id).
pub const RUN_LABEL: &str = "caldera.bench/run";
/// Label (and NoSchedule taint key) of the benchmark's nodes; its pods select and tolerate it.
pub const NODE_LABEL: &str = "caldera.bench/node";
/// Label telling the benchmark's pod sets apart (`caldera`, `raw`).
pub const SET_LABEL: &str = "caldera.bench/set";

// ---------------------------------------------------------------------------------------
// Request counts
// ---------------------------------------------------------------------------------------

/// API requests by kind (`"create pods/binding"`, `"patch podgroups.scheduling.volcano.sh/status"`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    by_kind: BTreeMap<String, (u64, bool)>,
}

impl Counts {
    fn record(&mut self, kind: String, write: bool, n: u64) {
        self.by_kind.entry(kind).or_insert((0, write)).0 += n;
    }

    /// Every request.
    pub fn total(&self) -> u64 {
        self.by_kind.values().map(|(n, _)| n).sum()
    }

    /// Requests that change state (create, update, patch, delete).
    pub fn writes(&self) -> u64 {
        self.by_kind
            .values()
            .filter(|(_, w)| *w)
            .map(|(n, _)| n)
            .sum()
    }

    /// Write requests by kind.
    pub fn writes_by_kind(&self) -> BTreeMap<String, u64> {
        self.by_kind
            .iter()
            .filter(|(_, (n, w))| *w && *n > 0)
            .map(|(k, (n, _))| (k.clone(), *n))
            .collect()
    }

    /// The requests made since `earlier` was taken.
    pub fn since(&self, earlier: &Counts) -> Counts {
        let mut out = Counts::default();
        for (k, (n, w)) in &self.by_kind {
            let before = earlier.by_kind.get(k).map_or(0, |(n, _)| *n);
            if *n > before {
                out.record(k.clone(), *w, n - before);
            }
        }
        out
    }

    #[cfg(feature = "stand-in")]
    fn from_stand_in(c: &RequestCounts) -> Counts {
        let mut out = Counts::default();
        for (k, n) in c.iter() {
            out.record(
                kind_name(k.verb.as_str(), &k.group, &k.resource, &k.subresource),
                k.verb.is_write(),
                n,
            );
        }
        out
    }
}

fn kind_name(verb: &str, group: &str, resource: &str, sub: &str) -> String {
    let mut s = format!("{verb} {resource}");
    if !group.is_empty() {
        s.push('.');
        s.push_str(group);
    }
    if !sub.is_empty() {
        s.push('/');
        s.push_str(sub);
    }
    s
}

/// What a request is, from its method and path: `(kind, is a write)`; `None` for
/// non-resource paths (discovery, `/version`).
fn classify(method: &http::Method, uri: &http::Uri) -> Option<(String, bool)> {
    let segs: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let (group, rest) = match segs.first() {
        Some(&"api") => ("", segs.get(2..)?),
        Some(&"apis") => (*segs.get(1)?, segs.get(3..)?),
        _ => return None,
    };
    let rest = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        &rest[2..]
    } else {
        rest
    };
    let resource = *rest.first()?;
    let named = rest.len() >= 2;
    let sub = rest.get(2).copied().unwrap_or("");
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if named => "get",
        http::Method::GET => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if named => "delete",
        http::Method::DELETE => "deletecollection",
        _ => return None,
    };
    let write = !matches!(verb, "get" | "list" | "watch");
    Some((kind_name(verb, group, resource, sub), write))
}

/// Requests counted by a [`CountLayer`] in a client's stack.
#[derive(Debug, Clone, Default)]
pub struct ClientCounts(Arc<Mutex<Counts>>);

impl ClientCounts {
    /// What was counted so far.
    pub fn snapshot(&self) -> Counts {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn record(&self, kind: String, write: bool) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(kind, write, 1);
    }
}

/// A tower layer counting every request a kube client sends.
#[derive(Debug, Clone)]
pub struct CountLayer(pub ClientCounts);

impl<S> tower::Layer<S> for CountLayer {
    type Service = CountService<S>;
    fn layer(&self, inner: S) -> CountService<S> {
        CountService {
            inner,
            counts: self.0.clone(),
        }
    }
}

/// The service of [`CountLayer`].
#[derive(Debug, Clone)]
pub struct CountService<S> {
    inner: S,
    counts: ClientCounts,
}

impl<S, B> tower::Service<http::Request<B>> for CountService<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if let Some((kind, write)) = classify(req.method(), req.uri()) {
            self.counts.record(kind, write);
        }
        self.inner.call(req)
    }
}

// ---------------------------------------------------------------------------------------
// Objects
// ---------------------------------------------------------------------------------------

/// A Ready node with 8 GPUs, 64 CPU, 512Gi, labelled and tainted [`NODE_LABEL`] so that only
/// the benchmark's pods go there.
pub fn node(name: &str, run: &str) -> Value {
    let alloc = json!({"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, NODE_LABEL: "true", RUN_LABEL: run}},
        "spec": {"taints": [{"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": alloc, "capacity": alloc,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

/// A one-GPU pod of `scheduler` in pod set `set`, member of `group` if given, selecting and
/// tolerating the benchmark's nodes (and their not-ready/unreachable taints: a real cluster's
/// node lifecycle controller marks kubelet-less nodes so after its grace period).
pub fn pod(ns: &str, name: &str, scheduler: &str, set: &str, group: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {SET_LABEL: set}},
        "spec": {
            "schedulerName": scheduler,
            "nodeSelector": {NODE_LABEL: "true"},
            "tolerations": [
                {"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "1", "memory": "4Gi", "nvidia.com/gpu": "1"},
                              "limits": {"nvidia.com/gpu": "1"}}}]
        }
    });
    if let Some(g) = group {
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": g});
    }
    p
}

/// A PodGroup of `min` members in the queue `default`.
pub fn podgroup(ns: &str, name: &str, min: usize) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min, "queue": caldera_api::DEFAULT_QUEUE}
    })
}

/// The kinds the benchmarks create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nodes.
    Node,
    /// Pods.
    Pod,
    /// PodGroups.
    PodGroup,
    /// Namespaces.
    Namespace,
}

impl Kind {
    fn plural(self) -> &'static str {
        match self {
            Kind::Node => "nodes",
            Kind::Pod => "pods",
            Kind::PodGroup => "podgroups",
            Kind::Namespace => "namespaces",
        }
    }

    /// The API resource of the kind.
    pub fn api_resource(self) -> ApiResource {
        match self {
            Kind::Node => ApiResource::erase::<Node>(&()),
            Kind::Pod => ApiResource::erase::<Pod>(&()),
            Kind::Namespace => ApiResource::erase::<Namespace>(&()),
            Kind::PodGroup => ApiResource::from_gvk_with_plural(
                &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "PodGroup"),
                "podgroups",
            ),
        }
    }

    fn namespaced(self) -> bool {
        matches!(self, Kind::Pod | Kind::PodGroup)
    }
}

// ---------------------------------------------------------------------------------------
// Backends
// ---------------------------------------------------------------------------------------

/// A real cluster reached through a kubeconfig.
pub struct Cluster {
    config: kube::Config,
    client: Client,
    counts: ClientCounts,
}

/// Where a benchmark runs.
pub enum Backend {
    /// The in-process API stand-in.
    #[cfg(feature = "stand-in")]
    StandIn(ApiServer),
    /// A real cluster.
    Cluster(Box<Cluster>),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Backend {
    /// A fresh stand-in with `options`.
    #[cfg(feature = "stand-in")]
    pub async fn stand_in(options: caldera_testkit::apiserver::Options) -> Result<Backend> {
        Ok(Backend::StandIn(ApiServer::start_with(options).await?))
    }

    /// A real cluster, from a client configuration (e.g. read from a kubeconfig).
    pub fn cluster(config: kube::Config) -> Result<Backend> {
        let client = Client::try_from(config.clone()).map_err(kube_err("building a client"))?;
        Ok(Backend::Cluster(Box::new(Cluster {
            config,
            client,
            counts: ClientCounts::default(),
        })))
    }

    /// `stand-in` or `cluster`.
    pub fn name(&self) -> &'static str {
        match self {
            #[cfg(feature = "stand-in")]
            Backend::StandIn(_) => "stand-in",
            Backend::Cluster(_) => "cluster",
        }
    }

    /// Where the request counts come from: `stand-in` (the server's counters) or `client`
    /// (a counting layer in the runtime's client).
    pub fn counts_source(&self) -> &'static str {
        match self {
            #[cfg(feature = "stand-in")]
            Backend::StandIn(_) => "stand-in",
            Backend::Cluster(_) => "client",
        }
    }

    /// A plain client (setup, watches, the raw binder): not counted on a cluster.
    pub fn client(&self) -> Result<Client> {
        match self {
            #[cfg(feature = "stand-in")]
            Backend::StandIn(s) => Ok(s.kube_client()?),
            Backend::Cluster(c) => {
                Client::try_from(c.config.clone()).map_err(kube_err("building a client"))
            }
        }
    }

    /// A client for the runtime, whose requests [`Backend::counts`] sees.
    pub fn counted_client(&self) -> Result<Client> {
        match self {
            #[cfg(feature = "stand-in")]
            Backend::StandIn(s) => Ok(s.kube_client()?),
            Backend::Cluster(c) => Ok(kube::client::ClientBuilder::try_from(c.config.clone())
                .map_err(kube_err("building a client"))?
                .with_layer(&CountLayer(c.counts.clone()))
                .build()),
        }
    }

    /// The requests counted so far (on the stand-in: every request it received).
    pub fn counts(&self) -> Counts {
        match self {
            #[cfg(feature = "stand-in")]
            Backend::StandIn(s) => Counts::from_stand_in(&s.request_counts()),
            Backend::Cluster(c) => c.counts.snapshot(),
        }
    }

    /// The stand-in, if that is where this runs.
    #[cfg(feature = "stand-in")]
    pub fn stand_in_server(&self) -> Option<&ApiServer> {
        match self {
            #[cfg(feature = "stand-in")]
            Backend::StandIn(s) => Some(s),
            Backend::Cluster(_) => None,
        }
    }

    /// Creates `objects` of `kind` (on a cluster, `concurrency` at a time) and returns them as
    /// stored (with their uids), in no particular order.
    pub async fn create_all(
        &self,
        kind: Kind,
        objects: Vec<Value>,
        concurrency: usize,
    ) -> Result<Vec<Value>> {
        match self {
            #[cfg(feature = "stand-in")]
            Backend::StandIn(s) => {
                let store = s.store().clone();
                tokio::task::spawn_blocking(move || {
                    objects
                        .into_iter()
                        .map(|o| {
                            let what = format!("{} {}", kind.plural(), name_of(&o));
                            store
                                .create(kind.plural(), o)
                                .map_err(|source| Error::Store { what, source })
                        })
                        .collect::<Result<Vec<Value>>>()
                })
                .await
                .map_err(|e| Error::Other(format!("creating {}: {e}", kind.plural())))?
            }
            Backend::Cluster(c) => {
                let client = &c.client;
                stream::iter(objects)
                    .map(|o| create_one(client, kind, o))
                    .buffer_unordered(concurrency.max(1))
                    .try_collect()
                    .await
            }
        }
    }
}

fn name_of(o: &Value) -> String {
    match o["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{ns}/{}", o["metadata"]["name"].as_str().unwrap_or("")),
        None => o["metadata"]["name"].as_str().unwrap_or("").to_string(),
    }
}

async fn create_one(client: &Client, kind: Kind, o: Value) -> Result<Value> {
    let what = format!("creating {} {}", kind.plural(), name_of(&o));
    let ar = kind.api_resource();
    let api: Api<DynamicObject> = if kind.namespaced() {
        let ns = o["metadata"]["namespace"].as_str().unwrap_or("default");
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    let obj: DynamicObject =
        serde_json::from_value(o).map_err(|e| Error::Other(format!("{what}: {e}")))?;
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .map_err(kube_err(what.clone()))?;
    serde_json::to_value(created).map_err(|e| Error::Other(format!("{what}: {e}")))
}

/// The Queue `name` as JSON.
pub async fn get_queue(client: &Client, name: &str) -> Result<Value, kube::Error> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("scheduling.volcano.sh", "v1beta1", "Queue"),
        "queues",
    );
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let q = api.get(name).await?;
    Ok(serde_json::to_value(q).unwrap_or(Value::Null))
}

/// On a cluster: checks that the PodGroup CRD is served and creates namespace `ns`. Nothing
/// to do on the stand-in (it serves PodGroups and creates namespaces on first use).
// Without the stand-in a backend is always a cluster.
#[cfg_attr(not(feature = "stand-in"), allow(irrefutable_let_patterns))]
pub async fn prepare_namespace(backend: &Backend, ns: &str, run: &str) -> Result<()> {
    let Backend::Cluster(c) = backend else {
        return Ok(());
    };
    let pgs: Api<DynamicObject> = Api::all_with(c.client.clone(), &Kind::PodGroup.api_resource());
    pgs.list(&ListParams::default().limit(1))
        .await
        .map_err(kube_err(
            "listing PodGroups (are the CRDs installed? `caldera crd | kubectl apply -f -`)",
        ))?;
    create_one(
        &c.client,
        Kind::Namespace,
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"name": ns, "labels": {RUN_LABEL: run}}}),
    )
    .await?;
    Ok(())
}

/// On a cluster: force-deletes the pods of `ns` (no kubelet will ever finish them), deletes
/// the namespace and the run's nodes. Returns what could not be deleted.
// Without the stand-in a backend is always a cluster.
#[cfg_attr(not(feature = "stand-in"), allow(irrefutable_let_patterns))]
pub async fn clean_up(backend: &Backend, ns: &str, run: &str) -> Vec<String> {
    let Backend::Cluster(c) = backend else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), ns);
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    if let Err(e) = pods.delete_collection(&force, &ListParams::default()).await {
        errors.push(format!("deleting the pods of namespace {ns}: {e}"));
    }
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    if let Err(e) = namespaces.delete(ns, &DeleteParams::default()).await {
        errors.push(format!(
            "deleting namespace {ns}: {e} (kubectl delete namespace {ns})"
        ));
    }
    let nodes: Api<Node> = Api::all(c.client.clone());
    let selector = format!("{RUN_LABEL}={run}");
    if let Err(e) = nodes
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&selector),
        )
        .await
    {
        errors.push(format!(
            "deleting the benchmark's nodes: {e} (kubectl delete nodes -l {selector})"
        ));
    }
    errors
}

/// A short random hex id for names on a real cluster.
pub fn run_id() -> String {
    use std::hash::BuildHasher;
    // `RandomState` is seeded from the OS's randomness: enough for a name suffix.
    let r = std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now());
    format!("{:06x}", r & 0xff_ffff)
}

// ---------------------------------------------------------------------------------------
// Waiting
// ---------------------------------------------------------------------------------------

/// What the bind watch has seen.
#[derive(Debug, Clone, Copy, Default)]
pub struct BindProgress {
    /// The watch's initial list is done.
    pub listed: bool,
    /// Distinct pods seen bound.
    pub bound: usize,
    /// When the first was seen bound.
    pub first: Option<Instant>,
    /// When the last was seen bound.
    pub last: Option<Instant>,
}

/// Watches the pods of `ns` matching `labels` that have a node (`spec.nodeName!=`), and
/// publishes how many are bound and when. One list and one watch request, made before it
/// reports `listed`.
pub fn watch_binds(
    client: Client,
    ns: &str,
    labels: &str,
) -> (channel::Receiver<BindProgress>, JoinHandle<()>) {
    let (tx, rx) = channel::channel(BindProgress::default());
    let api: Api<Pod> = Api::namespaced(client, ns);
    let config = watcher::Config::default()
        .fields("spec.nodeName!=")
        .labels(labels);
    let task = tokio::spawn(async move {
        let stream = watcher::watcher(api, config).default_backoff();
        futures::pin_mut!(stream);
        let mut seen: HashSet<String> = HashSet::new();
        while let Some(event) = stream.next().await {
            let pod = match event {
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
                Ok(watcher::Event::InitDone) => {
                    tx.send_modify(|p| p.listed = true);
                    continue;
                }
                // Deletions, list starts and errors (the watcher retries with backoff).
                _ => continue,
            };
            let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
            let name = pod.metadata.name.unwrap_or_default();
            if bound && seen.insert(name) {
                let now = Instant::now();
                tx.send_modify(|p| {
                    p.bound += 1;
                    p.first.get_or_insert(now);
                    p.last = Some(now);
                });
            }
        }
    });
    (rx, task)
}

/// Waits until `done` holds for the bind watch, at most `timeout`.
pub async fn wait_progress(
    rx: &mut channel::Receiver<BindProgress>,
    timeout: Duration,
    what: &str,
    done: impl Fn(&BindProgress) -> bool,
) -> Result<BindProgress> {
    let outcome = tokio::time::timeout(timeout, rx.wait_for(|p| done(p)))
        .await
        .map(|r| r.map(|p| *p));
    match outcome {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(_)) => Err(Error::Other(format!("the bind watch ended before {what}"))),
        Err(_) => {
            let p = *rx.borrow();
            Err(Error::Other(format!(
                "timed out after {timeout:?} waiting for {what} ({} pods seen bound)",
                p.bound
            )))
        }
    }
}

/// Polls `check` every `every` until it holds, at most `timeout`.
pub async fn poll(
    timeout: Duration,
    every: Duration,
    what: &str,
    mut check: impl FnMut() -> bool,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !check() {
        if Instant::now() >= deadline {
            return Err(Error::Other(format!(
                "timed out after {timeout:?} waiting for {what}"
            )));
        }
        tokio::time::sleep(every).await;
    }
    Ok(())
}

/// What [`settle`] saw: the counts at the end, and when writes of each kind were last seen
/// (to within the 10 ms it polls at).
#[derive(Debug, Clone)]
pub struct Settled {
    /// The counts once quiet.
    pub counts: Counts,
    /// When the last write of any kind was seen (`None`: none after the call).
    pub last_write: Option<Instant>,
    /// When the last write of each kind was seen.
    pub last_by_kind: BTreeMap<String, Instant>,
}

impl Settled {
    /// When the last write of a kind whose name contains `part` was seen.
    pub fn last_of(&self, part: &str) -> Option<Instant> {
        self.last_by_kind
            .iter()
            .filter(|(k, _)| k.contains(part))
            .map(|(_, t)| *t)
            .max()
    }
}

/// Waits until no write request has been counted for `quiet` (at most `max`), and returns the
/// counts then, with when each kind of write was last seen.
pub async fn settle(backend: &Backend, quiet: Duration, max: Duration) -> Settled {
    let deadline = Instant::now() + max;
    let mut last = backend.counts();
    let mut since = Instant::now();
    let mut settled = Settled {
        counts: last.clone(),
        last_write: None,
        last_by_kind: BTreeMap::new(),
    };
    loop {
        tokio::time::sleep(Duration::from_millis(10).min(quiet)).await;
        let now = backend.counts();
        if now.writes() != last.writes() {
            let at = Instant::now();
            for kind in now.since(&last).writes_by_kind().into_keys() {
                settled.last_by_kind.insert(kind, at);
            }
            settled.last_write = Some(at);
            last = now;
            since = at;
        } else if since.elapsed() >= quiet || Instant::now() >= deadline {
            settled.counts = now;
            return settled;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: http::Method, uri: &str) -> Option<(String, bool)> {
        classify(&method, &uri.parse::<http::Uri>().ok()?)
    }

    #[test]
    fn requests_are_classified_like_the_api_server_counts_them() {
        assert_eq!(
            kind(
                http::Method::POST,
                "/api/v1/namespaces/ns/pods/p-0/binding?"
            ),
            Some(("create pods/binding".into(), true))
        );
        assert_eq!(
            kind(
                http::Method::PATCH,
                "/apis/scheduling.volcano.sh/v1beta1/namespaces/ns/podgroups/g/status"
            ),
            Some(("patch podgroups.scheduling.volcano.sh/status".into(), true))
        );
        assert_eq!(
            kind(
                http::Method::POST,
                "/apis/events.k8s.io/v1/namespaces/ns/events"
            ),
            Some(("create events.events.k8s.io".into(), true))
        );
        assert_eq!(
            kind(
                http::Method::GET,
                "/api/v1/pods?watch=true&resourceVersion=5"
            ),
            Some(("watch pods".into(), false))
        );
        assert_eq!(
            kind(http::Method::GET, "/api/v1/nodes?limit=500"),
            Some(("list nodes".into(), false))
        );
        assert_eq!(
            kind(http::Method::GET, "/api/v1/namespaces/default"),
            Some(("get namespaces".into(), false))
        );
        assert_eq!(kind(http::Method::GET, "/version"), None);
    }

    #[test]
    fn counts_subtract_and_split_writes() {
        let mut a = Counts::default();
        a.record("create pods/binding".into(), true, 3);
        a.record("list pods".into(), false, 1);
        let mut b = a.clone();
        b.record("create pods/binding".into(), true, 2);
        b.record("create events.events.k8s.io".into(), true, 2);
        let d = b.since(&a);
        assert_eq!(d.total(), 4);
        assert_eq!(d.writes(), 4);
        assert_eq!(d.writes_by_kind().get("create pods/binding"), Some(&2));
        assert_eq!(b.writes(), 7);
        assert_eq!(b.total(), 8);
    }
}
