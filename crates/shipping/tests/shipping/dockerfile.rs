//! The Dockerfile builds the locked release binary and runs it as `caldera run`, non-root.

use crate::deploy::{command_line, deploy_objects, deployment};
use crate::manifests::read;

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions() -> Vec<(String, String)> {
    let text = read("Dockerfile");
    let mut out = Vec::new();
    let mut pending = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && pending.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(trimmed);
        let full = std::mem::take(&mut pending);
        let (keyword, rest) = full.split_once(' ').unwrap_or((&full, ""));
        out.push((keyword.to_uppercase(), rest.trim().to_string()));
    }
    out
}

fn stages() -> Vec<Vec<(String, String)>> {
    let mut stages: Vec<Vec<(String, String)>> = Vec::new();
    for instruction in instructions() {
        if instruction.0 == "FROM" {
            stages.push(Vec::new());
        }
        match stages.last_mut() {
            Some(stage) => stage.push(instruction),
            None => panic!("Dockerfile: {} before the first FROM", instruction.0),
        }
    }
    stages
}

/// `major.minor` as numbers, from a tag such as `1.95-bookworm`.
fn version(text: &str) -> (u32, u32) {
    let mut parts = text.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().unwrap_or(0)
    });
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[test]
fn dockerfile_builds_the_locked_release_binary_in_a_rust_stage() {
    let stages = stages();
    assert_eq!(stages.len(), 2, "a build stage and a runtime stage");
    let build = &stages[0];
    let from = &build[0].1;
    let (image, alias) = from
        .split_once(" AS ")
        .or_else(|| from.split_once(" as "))
        .unwrap_or_else(|| panic!("the build stage has no name: FROM {from}"));
    let tag = image
        .strip_prefix("rust:")
        .unwrap_or_else(|| panic!("the build stage should start from rust:<version>, not {image}"));
    // The toolchain must be at least the workspace's rust-version.
    let manifest = read("Cargo.toml");
    let minimum = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("Cargo.toml has no rust-version"));
    assert!(
        version(tag) >= version(&minimum),
        "rust:{tag} is older than rust-version {minimum}"
    );
    let runs: Vec<&String> = build
        .iter()
        .filter(|(k, _)| k == "RUN")
        .map(|(_, v)| v)
        .collect();
    assert!(
        runs.iter().any(|r| {
            let words: Vec<&str> = r.split_whitespace().collect();
            words.windows(2).any(|w| w == ["cargo", "build"])
                && words.contains(&"--release")
                && words.contains(&"--locked")
                && words.windows(2).any(|w| w == ["-p", "caldera"])
        }),
        "the build stage should run `cargo build --release --locked -p caldera`: {runs:?}"
    );

    let runtime = &stages[1];
    assert_eq!(
        runtime[0].1, "gcr.io/distroless/cc-debian12:nonroot",
        "runtime base image"
    );
    let copy = runtime
        .iter()
        .find(|(k, _)| k == "COPY")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("the runtime stage copies nothing"));
    let words: Vec<&str> = copy.split_whitespace().collect();
    assert_eq!(words.len(), 3, "COPY --from=<stage> <binary> <destination>");
    assert_eq!(words[0], format!("--from={alias}"));
    assert!(
        words[1].ends_with("/target/release/caldera"),
        "the binary copied should be cargo's release output, not {}",
        words[1]
    );
    // The Cargo package that makes it is `caldera`, with a binary of the same name.
    let cli = read("crates/cli/Cargo.toml");
    assert!(
        cli.contains("name = \"caldera\""),
        "crates/cli is package caldera"
    );
}

#[test]
fn image_runs_caldera_run_as_a_numeric_non_root_user() {
    let stages = stages();
    let runtime = stages
        .last()
        .unwrap_or_else(|| panic!("no stages in the Dockerfile"));
    let last = |keyword: &str| {
        runtime
            .iter()
            .rev()
            .find(|(k, _)| k == keyword)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("the runtime stage has no {keyword}"))
    };
    let entrypoint: Vec<String> = serde_json::from_str(&last("ENTRYPOINT"))
        .unwrap_or_else(|e| panic!("ENTRYPOINT should be exec form (a JSON list): {e}"));
    assert_eq!(entrypoint, ["/caldera", "run"]);
    let copy = last("COPY");
    assert_eq!(
        copy.split_whitespace().last(),
        Some("/caldera"),
        "the binary goes to /caldera"
    );
    let user = last("USER");
    let uid: i64 = user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("USER {user} should be numeric, so runAsNonRoot can check it"));
    assert!(uid > 0, "USER must not be root");

    // The Deployment runs the same binary as the same user.
    let deployment = deployment(&deploy_objects());
    let command = command_line(&deployment);
    assert_eq!(&command[..2], ["/caldera", "run"]);
    let pod_user = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.security_context.as_ref())
        .and_then(|s| s.run_as_user);
    assert_eq!(
        pod_user,
        Some(uid),
        "Deployment runAsUser vs Dockerfile USER"
    );
}

#[test]
fn dockerignore_keeps_build_outputs_out_of_the_context() {
    let ignore = read(".dockerignore");
    let patterns: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(
        patterns
            .iter()
            .any(|p| p.trim_start_matches('/').trim_end_matches('/') == "target"),
        ".dockerignore should exclude target/: {patterns:?}"
    );
    // Nothing the build needs may be excluded: the sources, manifests, lockfile and the files
    // crates embed with include_str!.
    for needed in ["Cargo.toml", "Cargo.lock", "crates", "config", "e2e"] {
        assert!(
            !patterns
                .iter()
                .any(|p| p.trim_start_matches('/').trim_end_matches('/') == needed),
            ".dockerignore excludes {needed}, which the build needs"
        );
    }
}
