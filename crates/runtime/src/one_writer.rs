//! Every write `caldera run` makes goes through the binder (`caldera-binder`): one rate limit,
//! one backoff per object, one order (binds first). This test reads the workspace's sources
//! and fails when a module outside the binder names a kube write — the parameters a write
//! takes (`PostParams`, `PatchParams`, `DeleteParams`, `EvictParams`), a subresource or status
//! write, or a raw request with a writing method — except the few that cannot go through it,
//! each with its reason.

use std::path::{Path, PathBuf};

/// What a module that writes must name.
const WRITE_MARKS: &[&str] = &[
    "PostParams",
    "PatchParams",
    "DeleteParams",
    "EvictParams",
    "create_subresource",
    "patch_subresource",
    "replace_subresource",
    "patch_status",
    "replace_status",
    "Method::POST",
    "Method::PUT",
    "Method::PATCH",
    "Method::DELETE",
    "Request::post",
    "Request::put",
    "Request::patch",
    "Request::delete",
];

/// Sources that may write outside the binder, and why.
const ALLOWED: &[(&str, &str)] = &[
    ("crates/binder/src", "the writer itself"),
    (
        "crates/runtime/src/leader.rs",
        "leader election: the Lease is written while the binder is paused (a candidate is \
         not the leader) and must be renewed on time, never behind the binds",
    ),
    (
        "crates/runtime/src/rbac.rs",
        "a SelfSubjectAccessReview is a question to the API server, not a change to the cluster",
    ),
    (
        "crates/runtime/src/one_writer.rs",
        "this test names the marks it looks for",
    ),
    // Harnesses that build the clusters they measure or test; not part of `caldera run`.
    (
        "crates/bench/src",
        "the benchmarks create the objects they measure",
    ),
    ("crates/testkit/src", "the API stand-in"),
    ("crates/sim/src", "the simulator"),
    ("crates/actors/src", "the simulated controllers"),
    ("e2e/src", "the end-to-end driver"),
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_binder_writes_to_the_api_server() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    if let Ok(crates) = std::fs::read_dir(root.join("crates")) {
        for krate in crates.flatten() {
            sources(&krate.path().join("src"), &mut files);
        }
    }
    sources(&root.join("e2e/src"), &mut files);
    let mut seen_in_binder = false;
    let mut offenders = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let marks: Vec<&str> = WRITE_MARKS
            .iter()
            .copied()
            .filter(|m| text.contains(m))
            .collect();
        if marks.is_empty() {
            continue;
        }
        if rel.starts_with("crates/binder/src") {
            seen_in_binder = true;
        }
        if !ALLOWED.iter().any(|(prefix, _)| rel.starts_with(prefix)) {
            offenders.push(format!("{rel}: {}", marks.join(", ")));
        }
    }
    assert!(
        seen_in_binder,
        "the scan found no write in crates/binder/src: it is not reading the sources"
    );
    assert!(
        offenders.is_empty(),
        "these modules write to the API server outside the binder; send their writes through \
         `caldera_binder::Binder` (`dispatch` for a plan, `write_objects` for a controller's \
         objects) instead:\n{}",
        offenders.join("\n")
    );
}
