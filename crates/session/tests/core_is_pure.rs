//! Enforces the invariant "the scheduling core does no I/O": the core crates (`model`, `dra`,
//! `queue`, `session`, `plugins`) must not depend, even transitively, on a Kubernetes client,
//! an async runtime or an HTTP stack. Reads the resolved graph from `cargo metadata`.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::process::Command;

const CORE: [&str; 5] = [
    "caldera-model",
    "caldera-dra",
    "caldera-queue",
    "caldera-session",
    "caldera-plugins",
];
const FORBIDDEN: [&str; 8] = [
    "kube",
    "kube-client",
    "kube-runtime",
    "k8s-openapi",
    "tokio",
    "hyper",
    "reqwest",
    "axum",
];

#[test]
fn core_crates_do_not_depend_on_kube_tokio_or_http() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let names: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    // id -> ids of normal (non-dev, non-build) dependencies
    let mut graph: HashMap<&str, Vec<&str>> = HashMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let deps = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["kind"].is_null())
            })
            .map(|d| d["pkg"].as_str().unwrap())
            .collect();
        graph.insert(node["id"].as_str().unwrap(), deps);
    }
    let mut checked = 0;
    for (id, name) in &names {
        if !CORE.contains(name) {
            continue;
        }
        checked += 1;
        let mut seen = BTreeSet::new();
        let mut stack = vec![*id];
        while let Some(cur) = stack.pop() {
            for &d in graph.get(cur).map(Vec::as_slice).unwrap_or(&[]) {
                if seen.insert(d) {
                    stack.push(d);
                }
            }
        }
        let bad: Vec<&str> = seen
            .iter()
            .map(|d| names[d])
            .filter(|n| FORBIDDEN.contains(n))
            .collect();
        assert!(bad.is_empty(), "{name} depends on {bad:?}");
    }
    assert_eq!(checked, CORE.len(), "all core crates were found");
}
