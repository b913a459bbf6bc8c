//! docs/: links resolve, and the references name everything the code has (and nothing else).

use crate::manifests::{read, root};
use std::collections::BTreeSet;

const DOCS: [&str; 9] = [
    "docs/install.md",
    "docs/migrating.md",
    "docs/configuration.md",
    "docs/metrics.md",
    "docs/troubleshooting.md",
    "docs/autoscaler.md",
    "docs/gate-mode.md",
    "docs/preemption.md",
    "docs/workloads.md",
];

/// The string literals that directly follow (after white space) each occurrence of `marker`
/// in `source`.
fn literals_after(source: &str, marker: &str) -> Vec<String> {
    source
        .match_indices(marker)
        .filter_map(|(i, _)| {
            let rest = source[i + marker.len()..].trim_start().strip_prefix('"')?;
            let len = rest.find('"')?;
            Some(rest[..len].to_string())
        })
        .collect()
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> BTreeSet<String> {
    markdown
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| slug(l.trim_start_matches('#')))
        .collect()
}

/// Relative Markdown links `[text](target)` of a document.
fn links(markdown: &str) -> Vec<String> {
    markdown
        .match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &markdown[i + 2..];
            let end = rest.find(')')?;
            Some(rest[..end].to_string())
        })
        .filter(|target| !target.contains("://") && !target.starts_with("mailto:"))
        .collect()
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for doc in DOCS {
        let text = read(doc);
        for target in links(&text) {
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p.to_string(), Some(f.to_string())),
                None => (target.clone(), None),
            };
            let file = if path.is_empty() {
                doc.to_string()
            } else {
                let joined = root().join("docs").join(&path);
                if !joined.exists() {
                    broken.push(format!("{doc}: ({target}): no such file"));
                    continue;
                }
                joined
                    .strip_prefix(root())
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default()
                    .replace("docs/../", "")
            };
            if let Some(fragment) = fragment {
                if file.ends_with(".md") && !anchors(&read(&file)).contains(&fragment) {
                    broken.push(format!("{doc}: ({target}): no heading #{fragment}"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

#[test]
fn configuration_reference_names_every_action_plugin_flag_and_key() {
    let doc = read("docs/configuration.md");
    let shipped = caldera_config::SchedulerConfig::default();
    let mut missing = Vec::new();
    let mut expect = |what: &str, name: &str| {
        if !doc.contains(&format!("`{name}`")) {
            missing.push(format!("{what} `{name}`"));
        }
    };
    for action in caldera_config::Action::ALL {
        expect("action", action.name());
    }
    for plugin in shipped.plugins() {
        expect("plugin", &plugin.name);
    }
    for hook in caldera_config::Hook::ALL {
        expect("flag", hook.key());
    }
    for key in [
        "schedulerNames",
        "schedulePeriod",
        "sessionDebounce",
        "gangScheduleTimeout",
        "bindConcurrency",
        "autoscaler",
        "className",
        "retry",
        "bookingTimeout",
        "maxWait",
        "allGangs",
        "autoGroup",
        "namespaces",
    ] {
        expect("key", key);
    }
    // Every argument the config crate's catalog knows, by the name it shows people.
    let catalog = read("crates/config/src/catalog.rs");
    let arguments: BTreeSet<String> = literals_after(&catalog, "used(")
        .into_iter()
        .chain(literals_after(&catalog, "ignored("))
        .chain(literals_after(&catalog, "shown: "))
        .collect();
    assert!(
        arguments.len() > 20,
        "could not read the argument catalog in crates/config/src/catalog.rs"
    );
    for argument in &arguments {
        expect("argument", argument);
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not describe: {}",
        missing.join(", ")
    );
}

#[test]
fn metrics_reference_matches_the_metrics_caldera_run_registers() {
    let source_file = "crates/runtime/src/metrics.rs";
    let source = read(source_file);
    let registered: BTreeSet<String> = literals_after(&source, "registry.register(")
        .into_iter()
        .collect();
    assert!(
        !registered.is_empty(),
        "no `registry.register(\"name\", …)` calls found in {source_file}"
    );
    let doc = read("docs/metrics.md");
    let documented: BTreeSet<String> = doc
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("caldera_"))
        .map(|w| {
            let mut name = w;
            for suffix in ["_bucket", "_sum", "_count", "_total"] {
                name = name.strip_suffix(suffix).unwrap_or(name);
            }
            name.to_string()
        })
        .collect();
    let undocumented: Vec<&String> = registered.difference(&documented).collect();
    let unknown: Vec<&String> = documented.difference(&registered).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/metrics.md vs {source_file}: not documented {undocumented:?}; documented but not registered {unknown:?}"
    );
}
