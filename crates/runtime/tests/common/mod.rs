//! Shared helpers of the runtime's tests: objects for the API stand-in, a fast config, the
//! `eventually` poller, and a client layer that taps `pods/binding` requests.
#![allow(dead_code)]

use caldera_config::SchedulerConfig;
use caldera_runtime::{ConfigSource, Options, RetryPolicy};
use caldera_testkit::apiserver::ApiServer;
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::watch;

/// Logs to the test output when `RUST_LOG` is set.
pub fn init_logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Polls `check` every 20ms until it holds, failing the test after `secs` seconds times three.
/// The bound only decides how long a failing test takes to say so; a passing one returns as soon
/// as `check` holds, so the allowance for a loaded 2-core CI machine costs nothing.
pub async fn eventually(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let secs = secs * 3;
    let result = tokio::time::timeout(Duration::from_secs(secs), async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(
        result.is_ok(),
        "timed out after {secs}s waiting for: {what}"
    );
}

/// The shipped config with a 100ms period and a 10ms debounce, so tests run fast.
pub fn fast_config() -> SchedulerConfig {
    SchedulerConfig {
        schedule_period: Duration::from_millis(100),
        session_debounce: Duration::from_millis(10),
        ..SchedulerConfig::default()
    }
}

/// In-process options: no leader election, no HTTP, fast retries.
pub fn options() -> Options {
    Options {
        config: ConfigSource::Fixed(fast_config()),
        leader_election: None,
        metrics_addr: None,
        shutdown_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            attempts: 3,
            initial_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_millis(200),
            rounds: 100,
        },
        ..Options::default()
    }
}

pub fn node(name: &str, gpus: u32) -> Value {
    let alloc =
        json!({"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": gpus.to_string(), "pods": "110"});
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": alloc, "capacity": alloc,
                   "conditions": [{"type": "Ready", "status": "True"}]}
    })
}

pub fn pod(ns: &str, name: &str, group: Option<&str>, gpus: u32) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"schedulerName": "caldera", "containers": [{
            "name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()},
                          "limits": {"nvidia.com/gpu": gpus.to_string()}}
        }]}
    });
    if let Some(g) = group {
        p["metadata"]["annotations"] = json!({"scheduling.k8s.io/group-name": g});
    }
    p
}

pub fn podgroup(ns: &str, name: &str, min_member: u32) -> Value {
    json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, "queue": "default"}
    })
}

/// Creates a PodGroup and its `members` pods of `gpus` GPUs each.
pub fn create_gang(server: &ApiServer, ns: &str, name: &str, members: u32, gpus: u32) {
    server
        .store()
        .create("podgroups", podgroup(ns, name, members))
        .expect("create podgroup");
    for i in 0..members {
        server
            .store()
            .create("pods", pod(ns, &format!("{name}-{i}"), Some(name), gpus))
            .expect("create pod");
    }
}

pub fn create_nodes(server: &ApiServer, count: u32, gpus: u32) {
    for i in 0..count {
        server
            .store()
            .create("nodes", node(&format!("n{i}"), gpus))
            .expect("create node");
    }
}

/// The node a pod is bound to.
pub fn node_of(server: &ApiServer, ns: &str, name: &str) -> Option<String> {
    server
        .store()
        .get("pods", ns, name)
        .and_then(|p| p["spec"]["nodeName"].as_str().map(str::to_string))
}

/// How many of the gang's pods are bound.
pub fn bound(server: &ApiServer, ns: &str, gang: &str, members: u32) -> usize {
    (0..members)
        .filter(|i| node_of(server, ns, &format!("{gang}-{i}")).is_some())
        .count()
}

type Hook = Box<dyn Fn(usize, &str) + Send + Sync>;

/// Taps `POST .../pods/<name>/binding` requests (or, after [`BindTap::evictions`],
/// `.../eviction` ones) made through a client: counts them, runs a
/// hook before each is sent (with its 1-based number and path), can hold them until released,
/// and can make each wait until `barrier` of them are in flight together (to observe
/// concurrency without timing).
#[derive(Clone, Default)]
pub struct BindTap {
    state: Arc<TapState>,
}

struct TapState {
    seen: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    held: AtomicUsize,
    hold_after: AtomicUsize,
    barrier: AtomicUsize,
    open: watch::Sender<bool>,
    hook: Mutex<Option<Hook>>,
    /// Taps evictions instead of binds.
    evictions: std::sync::atomic::AtomicBool,
}

impl Default for TapState {
    fn default() -> Self {
        TapState {
            seen: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            held: AtomicUsize::new(0),
            hold_after: AtomicUsize::new(usize::MAX),
            barrier: AtomicUsize::new(0),
            open: watch::channel(true).0,
            hook: Mutex::new(None),
            evictions: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl BindTap {
    pub fn seen(&self) -> usize {
        self.state.seen.load(Ordering::SeqCst)
    }
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
    pub fn held(&self) -> usize {
        self.state.held.load(Ordering::SeqCst)
    }
    /// Requests wait (before being sent) until [`BindTap::release`].
    pub fn hold(&self) {
        self.hold_after(0);
    }
    /// Requests after the first `n` wait (before being sent) until [`BindTap::release`].
    pub fn hold_after(&self, n: usize) {
        self.state.hold_after.store(n, Ordering::SeqCst);
        self.state.open.send_replace(false);
    }
    pub fn release(&self) {
        self.state.open.send_replace(true);
    }
    /// Each request waits (at most 5s) until `n` are in flight.
    pub fn barrier(&self, n: usize) {
        self.state.barrier.store(n, Ordering::SeqCst);
    }
    /// Taps `pods/eviction` requests instead of binds.
    pub fn evictions(&self) {
        self.state.evictions.store(true, Ordering::SeqCst);
    }
    pub fn on_bind(&self, hook: impl Fn(usize, &str) + Send + Sync + 'static) {
        *self.state.hook.lock().unwrap() = Some(Box::new(hook));
    }

    /// A kube client for `server` with this tap in its stack.
    pub fn client(&self, server: &ApiServer) -> kube::Client {
        let config = kube::Config::new(server.url().parse().unwrap());
        kube::client::ClientBuilder::try_from(config)
            .unwrap()
            .with_layer(&TapLayer(self.clone()))
            .build()
    }
}

pub struct TapLayer(BindTap);

impl<S> tower::Layer<S> for TapLayer {
    type Service = TapService<S>;
    fn layer(&self, inner: S) -> TapService<S> {
        TapService {
            inner,
            tap: self.0.clone(),
        }
    }
}

pub struct TapService<S> {
    inner: S,
    tap: BindTap,
}

impl<S, B> tower::Service<http::Request<kube::client::Body>> for TapService<S>
where
    S: tower::Service<http::Request<kube::client::Body>, Response = http::Response<B>>,
    S::Future: Future<Output = Result<http::Response<B>, S::Error>> + Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<http::Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<kube::client::Body>) -> Self::Future {
        let suffix = if self.tap.state.evictions.load(Ordering::SeqCst) {
            "/eviction"
        } else {
            "/binding"
        };
        let is_bind = req.method() == http::Method::POST && req.uri().path().ends_with(suffix);
        if !is_bind {
            return Box::pin(self.inner.call(req));
        }
        let st = self.tap.state.clone();
        let n = st.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(hook) = st.hook.lock().unwrap().as_ref() {
            hook(n, req.uri().path());
        }
        let fut = self.inner.call(req);
        Box::pin(async move {
            let mut open = st.open.subscribe();
            if n > st.hold_after.load(Ordering::SeqCst) && !*open.borrow_and_update() {
                st.held.fetch_add(1, Ordering::SeqCst);
                while !*open.borrow_and_update() {
                    if open.changed().await.is_err() {
                        // The test is over: a held request is never sent.
                        std::future::pending::<()>().await;
                    }
                }
                st.held.fetch_sub(1, Ordering::SeqCst);
            }
            let now = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            st.max_in_flight.fetch_max(now, Ordering::SeqCst);
            let barrier = st.barrier.load(Ordering::SeqCst);
            if barrier > 0 {
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    while st.in_flight.load(Ordering::SeqCst) < barrier {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .await;
            }
            let result = fut.await;
            st.in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }
}
