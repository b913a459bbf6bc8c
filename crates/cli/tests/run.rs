//! The `caldera` binary against the API stand-in: `caldera run` binds a gang, serves
//! `/metrics` and `/readyz`, and on SIGTERM stops and releases its lease; `caldera snapshot`
//! writes manifests that `caldera explain -f` reads; `caldera record` writes the jobs that ran
//! as a trace that `caldera replay` reads back; under the shipped RBAC, a refused required kind
//! stops `caldera run` naming the rule and a refused optional kind is named once in its log.

use caldera_testkit::apiserver::ApiServer;
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn caldera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_caldera"))
}

/// A spawned `caldera`, killed when dropped: a failing assertion must not leave it running
/// (an orphaned `caldera run` keeps retrying its API server's port, which a later test's
/// stand-in may reuse).
struct Spawned(Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn kubeconfig(server: &ApiServer, dir: &Path) -> PathBuf {
    kubeconfig_with_token(server, dir, None)
}

/// A kubeconfig for the stand-in, its user the administrator or, with `token`, whoever the
/// stand-in's RBAC takes that token for.
fn kubeconfig_with_token(server: &ApiServer, dir: &Path, token: Option<&str>) -> PathBuf {
    let path = dir.join("kubeconfig");
    let user = token.map_or("{}".to_string(), |t| format!("{{token: {t}}}"));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: s\n  cluster:\n    server: {}\nusers:\n- name: u\n  user: {user}\ncontexts:\n- name: c\n  context:\n    cluster: s\n    user: u\n    namespace: default\ncurrent-context: c\n",
        server.url()
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("caldera-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn setup(server: &ApiServer) {
    let alloc = json!({"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"});
    server
        .store()
        .create(
            "nodes",
            json!({"metadata": {"name": "n1"},
                   "status": {"allocatable": alloc, "capacity": alloc,
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .unwrap();
    server
        .store()
        .create(
            "podgroups",
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": "train", "namespace": "ml"},
                   "spec": {"minMember": 4}}),
        )
        .unwrap();
    for i in 0..4 {
        server
            .store()
            .create(
                "pods",
                json!({"metadata": {"name": format!("train-{i}"), "namespace": "ml",
                                    "annotations": {"scheduling.k8s.io/group-name": "train"}},
                       "spec": {"schedulerName": "caldera", "containers": [{"name": "c", "image": "x",
                                "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}),
            )
            .unwrap();
    }
}

fn bound(server: &ApiServer) -> usize {
    (0..4)
        .filter(|i| {
            server
                .store()
                .get("pods", "ml", &format!("train-{i}"))
                .unwrap()["spec"]["nodeName"]
                .is_string()
        })
        .count()
}

/// A plain HTTP/1.0 GET; returns (status line, body).
fn get(addr: &str, path: &str) -> Option<(String, String)> {
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((head.lines().next()?.to_string(), body.to_string()))
}

async fn wait(secs: u64, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caldera_run_binds_serves_metrics_and_stops_on_sigterm() {
    let server = ApiServer::start().await.unwrap();
    setup(&server);
    let dir = temp_dir("run");
    let kubeconfig = kubeconfig(&server, &dir);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Spawned(
        caldera()
            .args(["run", "--kubeconfig"])
            .arg(&kubeconfig)
            .args([
                "--metrics-addr",
                &addr,
                "--log-format",
                "json",
                "--lease-namespace",
                "caldera-system",
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait(20, "the gang bound", || bound(&server) == 4).await;
    wait(10, "/readyz 200", || {
        get(&addr, "/readyz").is_some_and(|(status, _)| status.contains("200"))
    })
    .await;
    // The API server stores a binding before its answer reaches the binder, which counts it
    // then: the counter follows the bound pods by a moment.
    wait(10, "caldera_pods_bound_total 4", || {
        get(&addr, "/metrics")
            .is_some_and(|(_, metrics)| metrics.contains("caldera_pods_bound_total 4"))
    })
    .await;
    let (_, metrics) = get(&addr, "/metrics").unwrap();
    assert!(metrics.contains("caldera_pods_bound_total 4"), "{metrics}");
    assert!(metrics.contains("caldera_leader 1"), "{metrics}");
    let (status, _) = get(&addr, "/healthz").unwrap();
    assert!(status.contains("200"));

    let kill = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut status = None;
    wait(15, "exit after SIGTERM", || {
        status = child.0.try_wait().unwrap();
        status.is_some()
    })
    .await;
    let mut logs = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    assert!(status.unwrap().success(), "{logs}");
    assert!(
        logs.lines().all(|l| l.starts_with('{')),
        "JSON logs: {logs}"
    );
    let lease = server
        .store()
        .get("leases", "caldera-system", "caldera")
        .unwrap();
    assert!(
        lease["spec"]["holderIdentity"].is_null(),
        "released: {lease}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_invalid_config_is_a_non_zero_exit_naming_the_line_and_key() {
    let dir = temp_dir("badconfig");
    let path = dir.join("scheduler.yaml");
    std::fs::write(&path, "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\nbindConcurrency: lots\n").unwrap();
    let out = caldera()
        .arg("run")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("scheduler.yaml:5:") && stderr.contains("bindConcurrency"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caldera_snapshot_feeds_explain() {
    let server = ApiServer::start().await.unwrap();
    setup(&server);
    let dir = temp_dir("snapshot");
    let kubeconfig = kubeconfig(&server, &dir);
    let file = dir.join("cluster.yaml");
    let kc = kubeconfig.clone();
    let f = file.clone();
    let out = tokio::task::spawn_blocking(move || {
        caldera()
            .args(["snapshot", "--kubeconfig"])
            .arg(&kc)
            .arg("-o")
            .arg(&f)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = std::fs::read_to_string(&file).unwrap();
    assert!(
        yaml.contains("kind: PodGroup") && yaml.contains("kind: Node"),
        "{yaml}"
    );
    let explain = caldera()
        .args(["explain", "ml/train", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        explain.status.success(),
        "{}",
        String::from_utf8_lossy(&explain.stderr)
    );
    // Without -f, explain reads the live cluster itself and says the same.
    let kc = kubeconfig.clone();
    let live = tokio::task::spawn_blocking(move || {
        caldera()
            .args(["explain", "ml/train", "--kubeconfig"])
            .arg(&kc)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        live.status.success(),
        "{}",
        String::from_utf8_lossy(&live.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&live.stdout),
        String::from_utf8_lossy(&explain.stdout)
    );
    assert!(String::from_utf8_lossy(&live.stdout).contains("PodGroup ml/train"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stand-in enforcing `deploy/`'s ClusterRole for the ServiceAccount's token `sa-token`, less
/// `verb` on `resource` in `group`; and `caldera run` against it with that token and the
/// default log filter, its stderr piped.
async fn shipped_rbac_without(
    group: &str,
    resource: &str,
    verb: &str,
    dir: &Path,
) -> (ApiServer, Spawned) {
    use caldera_testkit::apiserver::{yaml_documents, Options, Rbac};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let mut docs = Vec::new();
    for file in ["serviceaccount.yaml", "rbac.yaml"] {
        docs.extend(yaml_documents(&std::fs::read_to_string(root.join(file)).unwrap()).unwrap());
    }
    let rbac = Rbac::service_account(&docs, "caldera-system", "caldera", "sa-token")
        .unwrap()
        .without(group, resource, verb);
    let server = ApiServer::start_with(Options {
        rbac: Some(rbac),
        ..Options::default()
    })
    .await
    .unwrap();
    let path = kubeconfig_with_token(&server, dir, Some("sa-token"));
    let child = Spawned(
        caldera()
            .args(["run", "--kubeconfig"])
            .arg(&path)
            .args(["--metrics-addr", "127.0.0.1:0", "--leader-elect=false"])
            .env_remove("RUST_LOG")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    (server, child)
}

/// Everything `child` wrote to its (piped) stderr, once it has exited.
fn stderr_of(child: &mut Spawned) -> String {
    let mut logs = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut logs)
        .unwrap();
    logs
}

/// Under the shipped ServiceAccount with the `list pods` rule removed from its ClusterRole,
/// `caldera run` does not wait silently: it exits non-zero naming the missing rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caldera_run_exits_naming_the_rule_when_pods_are_refused() {
    let dir = temp_dir("refused");
    let (_server, mut child) = shipped_rbac_without("", "pods", "list", &dir).await;
    let mut status = None;
    wait(30, "caldera run to exit", || {
        status = child.0.try_wait().unwrap();
        status.is_some()
    })
    .await;
    let logs = stderr_of(&mut child);
    assert!(!status.unwrap().success(), "{logs}");
    assert!(
        logs.contains("cannot schedule without pods")
            && logs.contains("`list` and `watch` on `pods` in API group \"\""),
        "{logs}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The shipped RBAC with `list resourceslices` removed: `caldera run` schedules the gang, and
/// its log (default filter) names the refusal once although the watch is asked again after
/// its 10 s back-off (kube-runtime's own warning per retry is filtered out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caldera_run_names_a_refused_optional_kind_once_in_its_log() {
    let dir = temp_dir("refused-optional");
    let (server, mut child) =
        shipped_rbac_without("resource.k8s.io", "resourceslices", "list", &dir).await;
    setup(&server);
    wait(30, "the gang bound", || bound(&server) == 4).await;
    // Past the first 10 s back-off: the refused list has been asked again at least once.
    let asked = || {
        server
            .forbidden()
            .iter()
            .filter(|(k, _)| k.resource == "resourceslices")
            .count()
    };
    wait(30, "the refused list asked again", || asked() >= 2).await;
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let logs = stderr_of(&mut child);
    let named: Vec<&str> = logs
        .lines()
        .filter(|l| l.to_lowercase().contains("forbidden"))
        .collect();
    assert_eq!(named.len(), 1, "{logs}");
    assert!(
        named[0].contains("ERROR")
            && named[0].contains(
                "`list` and `watch` on `resourceslices` in API group \"resource.k8s.io\""
            ),
        "{logs}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caldera_record_writes_the_jobs_that_ran_and_replay_reads_them() {
    let server = ApiServer::start().await.unwrap();
    let alloc = json!({"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"});
    server
        .store()
        .create(
            "nodes",
            json!({"metadata": {"name": "n1"},
                   "status": {"allocatable": alloc, "capacity": alloc,
                              "conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .unwrap();
    let dir = temp_dir("record");
    let kubeconfig = kubeconfig(&server, &dir);
    let (trace, nodes) = (dir.join("trace.csv"), dir.join("nodes.csv"));
    let child = Spawned(
        caldera()
            .args(["record", "--for", "8s", "--kubeconfig"])
            .arg(&kubeconfig)
            .arg("--out")
            .arg(&trace)
            .arg("--nodes-out")
            .arg(&nodes)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait(20, "the recorder to start", || nodes.exists()).await;
    server
        .store()
        .create(
            "podgroups",
            json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                   "metadata": {"name": "train", "namespace": "ml"},
                   "spec": {"minMember": 2, "queue": "default"}}),
        )
        .unwrap();
    for i in 0..2 {
        let pod = server
            .store()
            .create(
                "pods",
                json!({"metadata": {"name": format!("train-{i}"), "namespace": "ml",
                                    "annotations": {"scheduling.k8s.io/group-name": "train"}},
                       "spec": {"schedulerName": "caldera", "containers": [{"name": "c", "image": "x",
                                "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"},
                                              "limits": {"nvidia.com/gpu": "2"}}}]}}),
            )
            .unwrap();
        let binding = json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": format!("train-{i}"), "namespace": "ml", "uid": pod["metadata"]["uid"]},
            "target": {"kind": "Node", "name": "n1"}});
        server
            .store()
            .bind("ml", &format!("train-{i}"), &binding)
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for i in 0..2 {
        server
            .store()
            .modify("pods", "ml", &format!("train-{i}"), |p| {
                p["status"]["phase"] = json!("Succeeded");
            })
            .unwrap();
    }
    let out = tokio::task::spawn_blocking(move || {
        let mut child = child;
        let status = child.0.wait().unwrap();
        let mut err = String::new();
        child
            .0
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status, err)
    })
    .await
    .unwrap();
    assert!(out.0.success(), "{}", out.1);
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}\n{}", out.1);
    let fields: Vec<&str> = lines[1].split(',').collect();
    // job, members, min_members, cpu, gpu, queue as the cluster had them.
    assert_eq!(
        (fields[0], fields[3], fields[4], fields[5], fields[7], fields[9]),
        ("ml.train", "2", "2", "1", "2", "default"),
        "{text}"
    );
    let replay = caldera()
        .arg("replay")
        .arg(&trace)
        .arg("--nodes")
        .arg(&nodes)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let m: serde_json::Value = serde_json::from_slice(&replay.stdout).unwrap();
    assert_eq!(m["jobs"]["completed"], 1, "{m}");
    let _ = std::fs::remove_dir_all(&dir);
}
