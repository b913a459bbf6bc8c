//! Keeps `crds/caldera-crds.yaml` equal to what `caldera crd` prints (`caldera_api::crds_yaml`).
//!
//! Run with `CALDERA_BLESS=1` to rewrite the file from the types instead of checking it.

use std::path::PathBuf;

const REGENERATE: &str = "cargo run -p caldera -- crd > crds/caldera-crds.yaml\n  \
     (or: CALDERA_BLESS=1 cargo test -p caldera-api --test crd_drift)";

fn crds_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../crds/caldera-crds.yaml")
}

#[test]
fn crds_directory_matches_generated_crds() {
    let generated = caldera_api::crds_yaml().expect("the CRDs render as YAML");
    let path = crds_file();
    if std::env::var_os("CALDERA_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "reading {}: {e}\nGenerate it with:\n  {REGENERATE}",
            path.display()
        )
    });
    if on_disk != generated {
        let first_difference = on_disk
            .lines()
            .zip(generated.lines())
            .position(|(file, types)| file != types)
            .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
        let line = |text: &str| {
            text.lines()
                .nth(first_difference)
                .unwrap_or("<end of file>")
                .to_owned()
        };
        panic!(
            "{} is out of date with the CRD types in crates/api.\n\
             First difference at line {}:\n  file:  {}\n  types: {}\n\
             Regenerate it with:\n  {REGENERATE}",
            path.display(),
            first_difference + 1,
            line(&on_disk),
            line(&generated),
        );
    }
}

#[test]
fn crds_yaml_is_deterministic_and_multi_document() {
    let first = caldera_api::crds_yaml().expect("renders");
    let second = caldera_api::crds_yaml().expect("renders");
    assert_eq!(first, second);
    let documents: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&first)
        .map(|document| serde::Deserialize::deserialize(document).expect("each document parses"))
        .collect();
    let names: Vec<_> = documents
        .iter()
        .map(|d| d["metadata"]["name"].clone())
        .collect();
    assert_eq!(
        names,
        [
            "podgroups.scheduling.volcano.sh",
            "queues.scheduling.volcano.sh",
            "hypernodes.topology.volcano.sh"
        ]
    );
}
