//! Helpers of the suite: scenario files, a Tokio runtime per trial, `eventually`, logs, and a
//! client layer that sees each `pods/binding` request before it is sent.

use caldera_e2e::cluster::load_scenario;
use caldera_sim::Scenario;
use futures::future::BoxFuture;
use libtest_mimic::Failed;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

/// `scenarios/` at the workspace root.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios")
}

/// Every `*.yaml` under `scenarios/`, as paths relative to it, sorted.
pub fn scenario_files() -> Vec<String> {
    let root = scenarios_dir();
    let mut out = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                if let Ok(rel) = path.strip_prefix(&root) {
                    out.push(rel.to_string_lossy().replace('\\', "/"));
                }
            }
        }
    }
    out.sort();
    out
}

/// Loads `scenarios/<relative>`.
pub fn load(relative: &str) -> Result<Scenario, Failed> {
    load_scenario(
        &scenarios_dir().join(relative),
        &format!("scenarios/{relative}"),
    )
    .map_err(|e| Failed::from(e.to_string()))
}

/// The raw `spec.config` text of a scenario (for tests that write it to a file).
pub fn config_text(relative: &str) -> Result<String, Failed> {
    let text = std::fs::read_to_string(scenarios_dir().join(relative)).map_err(Failed::from)?;
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).map_err(Failed::from)?;
    doc["spec"]["config"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Failed::from(format!("{relative} has no spec.config")))
}

/// Runs a trial's body on its own multi-threaded runtime (two workers, as on the 2-core
/// machines the suite is sized for).
pub fn block_on<F>(body: F) -> Result<(), Failed>
where
    F: Future<Output = Result<(), Failed>>,
{
    init_logs();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Failed::from)?
        .block_on(body)
}

/// Logs to stderr when `RUST_LOG` is set (the injected failures of some tests make the
/// client log errors that are expected).
pub fn init_logs() {
    if std::env::var_os("RUST_LOG").is_none() {
        return;
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Polls `check` every 20ms until it holds; fails after `secs` seconds.
pub async fn eventually(
    secs: u64,
    what: &str,
    mut check: impl FnMut() -> bool,
) -> Result<(), Failed> {
    let waited = tokio::time::timeout(Duration::from_secs(secs), async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    waited.map_err(|_| Failed::from(format!("timed out after {secs}s waiting for: {what}")))
}

/// Like [`eventually`], for checks that read the API (polled every 100ms).
pub async fn eventually_async<C>(secs: u64, what: &str, mut check: C) -> Result<(), Failed>
where
    C: AsyncFnMut() -> bool,
{
    let waited = tokio::time::timeout(Duration::from_secs(secs), async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    waited.map_err(|_| Failed::from(format!("timed out after {secs}s waiting for: {what}")))
}

/// Fails with `message` unless `cond`.
pub fn ensure(cond: bool, message: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond {
        Ok(())
    } else {
        Err(Failed::from(message()))
    }
}

type Hook = Box<dyn Fn(usize) + Send + Sync>;

/// Sees every `POST …/pods/<name>/binding` made through a client: counts them and runs a hook
/// with the 1-based number of each before it is sent.
#[derive(Clone, Default)]
pub struct BindHook {
    seen: Arc<AtomicUsize>,
    hook: Arc<Mutex<Option<Hook>>>,
}

impl BindHook {
    /// Bind requests seen.
    pub fn seen(&self) -> usize {
        self.seen.load(Ordering::SeqCst)
    }

    /// Runs `hook(n)` before the `n`-th bind request is sent.
    pub fn on_bind(&self, hook: impl Fn(usize) + Send + Sync + 'static) {
        if let Ok(mut slot) = self.hook.lock() {
            *slot = Some(Box::new(hook));
        }
    }

    /// A client for `url` with this hook in its stack, for the scheduler: without kube's own
    /// retries, as `caldera_runtime::client` builds it.
    pub fn client(&self, url: &str) -> Result<kube::Client, Failed> {
        let mut config = kube::Config::new(url.parse().map_err(Failed::from)?);
        config.default_retry = false;
        Ok(kube::client::ClientBuilder::try_from(config)
            .map_err(Failed::from)?
            .with_layer(&HookLayer(self.clone()))
            .build())
    }
}

/// The tower layer of a [`BindHook`].
pub struct HookLayer(BindHook);

impl<S> tower::Layer<S> for HookLayer {
    type Service = HookService<S>;
    fn layer(&self, inner: S) -> HookService<S> {
        HookService {
            inner,
            hook: self.0.clone(),
        }
    }
}

/// The service of a [`HookLayer`].
pub struct HookService<S> {
    inner: S,
    hook: BindHook,
}

impl<S, B> tower::Service<http::Request<kube::client::Body>> for HookService<S>
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
        let is_bind = req.method() == http::Method::POST && req.uri().path().ends_with("/binding");
        if is_bind {
            let n = self.hook.seen.fetch_add(1, Ordering::SeqCst) + 1;
            if let Ok(slot) = self.hook.hook.lock() {
                if let Some(hook) = slot.as_ref() {
                    hook(n);
                }
            }
        }
        Box::pin(self.inner.call(req))
    }
}
