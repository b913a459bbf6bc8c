//! Round-trip tests: PodGroups and Queues, from the scenarios and from full Volcano-style
//! manifests, read into the Rust types and written back without losing anything.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use caldera_api::{
    crds, DequeueStrategy, NetworkTopologyMode, PodGroup, PodGroupPhase, Queue, QueueState,
    TopologyMode,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};
use serde_json::{json, Value};

const GROUP_VERSION: &str = "scheduling.volcano.sh/v1beta1";

/// Keys whose value is a `ResourceList`. A quantity written as a bare number (`gpu: 4`) comes
/// back as the string `"4"`, as from the API server; only there is a number allowed to turn into
/// a string.
const RESOURCE_LIST_KEYS: &[&str] = &[
    "minResources",
    "capability",
    "deserved",
    "resource",
    "capacity",
    "allocated",
];

/// Hand-written Volcano-style PodGroups; together they set every field of the schema.
const PODGROUP_FIXTURES: &[&str] = &["podgroup-every-field.yaml", "podgroup-tier-names.yaml"];

/// Hand-written Volcano-style Queues; together they set every field of the schema.
const QUEUE_FIXTURES: &[&str] = &["queue-every-field.yaml"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_yaml(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn fixture(name: &str) -> Value {
    read_yaml(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
}

/// The input as the API server would hand it back: bare-number quantities become strings.
fn with_string_quantities(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, child)| {
                    let child = match child {
                        Value::Object(list) if RESOURCE_LIST_KEYS.contains(&key.as_str()) => {
                            Value::Object(
                                list.iter()
                                    .map(|(name, quantity)| match quantity {
                                        Value::Number(n) => (name.clone(), n.to_string().into()),
                                        other => (name.clone(), with_string_quantities(other)),
                                    })
                                    .collect(),
                            )
                        }
                        other => with_string_quantities(other),
                    };
                    (key.clone(), child)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(with_string_quantities).collect()),
        other => other.clone(),
    }
}

/// Reads `manifest` as a PodGroup or Queue and writes it back; `Err` names what changed.
fn round_trip(manifest: &Value) -> Result<Value, String> {
    let written = match manifest["kind"].as_str() {
        Some("PodGroup") => serde_json::from_value::<PodGroup>(manifest.clone())
            .map_err(|e| format!("does not read as a PodGroup: {e}"))
            .and_then(|pg| serde_json::to_value(pg).map_err(|e| e.to_string()))?,
        Some("Queue") => serde_json::from_value::<Queue>(manifest.clone())
            .map_err(|e| format!("does not read as a Queue: {e}"))
            .and_then(|q| serde_json::to_value(q).map_err(|e| e.to_string()))?,
        other => return Err(format!("unexpected kind {other:?}")),
    };
    let expected = with_string_quantities(manifest);
    if written == expected {
        Ok(written)
    } else {
        Err(format!(
            "changed in the round trip:\n  read:    {expected}\n  written: {written}"
        ))
    }
}

/// Every PodGroup and Queue in `spec.steps[].apply` of a scenario file.
fn scenario_objects(scenario: &Value) -> Vec<Value> {
    let steps = scenario["spec"]["steps"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    steps
        .iter()
        .flat_map(|step| step["apply"].as_array().cloned().unwrap_or_default())
        .filter(|object| {
            object["apiVersion"] == GROUP_VERSION
                && matches!(object["kind"].as_str(), Some("PodGroup" | "Queue"))
        })
        .collect()
}

#[test]
fn scenario_podgroups_and_queues_round_trip() {
    let mut files: Vec<_> = std::fs::read_dir(repo_root().join("scenarios"))
        .expect("scenarios/ exists")
        .map(|entry| entry.expect("readable dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenario files found");

    let mut failures = Vec::new();
    let mut kinds = BTreeSet::new();
    let mut checked = 0;
    for file in &files {
        for object in scenario_objects(&read_yaml(file)) {
            checked += 1;
            kinds.insert(object["kind"].as_str().unwrap_or_default().to_owned());
            if let Err(problem) = round_trip(&object) {
                let name = &object["metadata"]["name"];
                failures.push(format!("{} {name}: {problem}", file.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Guards against the test passing because it found nothing to check.
    assert!(
        checked >= 10,
        "only {checked} objects found in the scenarios"
    );
    assert_eq!(
        kinds,
        BTreeSet::from(["PodGroup".to_owned(), "Queue".to_owned()])
    );
}

#[test]
fn podgroup_with_every_field_round_trips() {
    let manifest = fixture("podgroup-every-field.yaml");
    round_trip(&manifest).unwrap_or_else(|problem| panic!("{problem}"));

    // The fields land in their typed homes, not in `extra`.
    let pg: PodGroup = serde_json::from_value(manifest).expect("reads as a PodGroup");
    assert_eq!(pg.spec.min_member(), 12);
    assert_eq!(pg.spec.queue_name(), "research");
    let network = pg.spec.network_topology.as_ref().expect("networkTopology");
    assert_eq!(network.mode, Some(NetworkTopologyMode::Hard));
    assert_eq!(network.highest_tier_allowed, Some(2));
    let policies = pg.spec.sub_group_policy.as_ref().expect("subGroupPolicy");
    assert_eq!(policies[0].sub_group_size, Some(4));
    assert_eq!(
        policies[0].extra["futureField"],
        json!({"nested": [1, 2, 3]})
    );
    assert!(policies[1].extra.is_empty());
    let topology = pg.spec.topology.as_ref().expect("topology");
    assert_eq!(topology.mode, TopologyMode::Required);
    let status = pg.status.as_ref().expect("status");
    assert_eq!(status.phase, Some(PodGroupPhase::Running));
    assert_eq!(status.failed, Some(1));
}

#[test]
fn queue_with_every_field_round_trips() {
    let manifest = fixture("queue-every-field.yaml");
    round_trip(&manifest).unwrap_or_else(|problem| panic!("{problem}"));

    let queue: Queue = serde_json::from_value(manifest).expect("reads as a Queue");
    assert_eq!(queue.spec.weight(), 8);
    assert!(!queue.spec.reclaimable());
    assert_eq!(queue.spec.priority(), 10);
    assert_eq!(queue.spec.parent.as_deref(), Some("eng"));
    assert_eq!(queue.spec.dequeue_strategy, Some(DequeueStrategy::Fifo));
    let affinity = queue.spec.affinity.as_ref().expect("affinity");
    let anti = affinity
        .node_group_anti_affinity
        .as_ref()
        .expect("anti-affinity");
    assert_eq!(anti.preferred.as_deref(), Some(&["spot".to_owned()][..]));
    assert_eq!(queue.status.and_then(|s| s.state), Some(QueueState::Open));
}

/// Every property path of a CRD schema (`spec.subGroupPolicy.labelSelector...`), not descending
/// into maps (`additionalProperties`).
fn schema_paths(schema: &JSONSchemaProps, prefix: &str, out: &mut BTreeSet<String>) {
    for (name, child) in schema.properties.iter().flatten() {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}.{name}")
        };
        out.insert(path.clone());
        schema_paths(child, &path, out);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &schema.items {
        schema_paths(items, prefix, out);
    }
}

/// Every object-key path present in a manifest, looking through arrays.
fn value_paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (name, child) in map {
                let path = if prefix.is_empty() {
                    name.clone()
                } else {
                    format!("{prefix}.{name}")
                };
                out.insert(path.clone());
                value_paths(child, &path, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| value_paths(item, prefix, out)),
        _ => {}
    }
}

#[test]
fn every_fixture_round_trips() {
    for name in PODGROUP_FIXTURES.iter().chain(QUEUE_FIXTURES) {
        round_trip(&fixture(name)).unwrap_or_else(|problem| panic!("{name}: {problem}"));
    }
}

#[test]
fn fixtures_cover_every_schema_field() {
    for (crd, names) in crds().iter().zip([PODGROUP_FIXTURES, QUEUE_FIXTURES]) {
        let schema = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|v| v.open_api_v3_schema.as_ref())
            .expect("schema");
        let mut in_schema = BTreeSet::new();
        schema_paths(schema, "", &mut in_schema);
        let mut in_fixtures = BTreeSet::new();
        for name in names {
            value_paths(&fixture(name), "", &mut in_fixtures);
        }
        let missing: Vec<_> = in_schema.difference(&in_fixtures).collect();
        assert!(
            missing.is_empty(),
            "no {} fixture in tests/fixtures sets {missing:?}: add them so their round trip is tested",
            crd.spec.names.kind
        );
    }
}

#[test]
fn a_field_the_types_do_not_know_is_reported_as_lost() {
    let mut manifest = fixture("podgroup-every-field.yaml");
    manifest["spec"]["notAVolcanoField"] = json!(true);
    let problem = round_trip(&manifest).expect_err("an unknown spec field cannot survive");
    assert!(problem.contains("notAVolcanoField"), "{problem}");
}

#[test]
fn bare_number_quantities_read_as_strings() {
    let manifest = json!({
        "apiVersion": GROUP_VERSION,
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"capability": {"nvidia.com/gpu": 4, "cpu": 1.5}},
    });
    let written = round_trip(&manifest).unwrap_or_else(|problem| panic!("{problem}"));
    assert_eq!(
        written["spec"]["capability"],
        json!({"nvidia.com/gpu": "4", "cpu": "1.5"})
    );
}

#[test]
fn objects_without_spec_read_as_defaults() {
    for spec in [None, Some(Value::Null)] {
        let mut queue =
            json!({"apiVersion": GROUP_VERSION, "kind": "Queue", "metadata": {"name": "q"}});
        let mut pg = json!({
            "apiVersion": GROUP_VERSION, "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": "ns"},
        });
        if let Some(spec) = &spec {
            queue["spec"] = spec.clone();
            pg["spec"] = spec.clone();
        }
        let queue: Queue = serde_json::from_value(queue).expect("a Queue without spec reads");
        assert_eq!(queue.spec, Default::default());
        assert_eq!(queue.spec.weight(), 1);
        assert!(queue.spec.reclaimable());
        let pg: PodGroup = serde_json::from_value(pg).expect("a PodGroup without spec reads");
        assert_eq!(pg.spec.min_member(), 1);
        assert_eq!(pg.spec.queue_name(), caldera_api::DEFAULT_QUEUE);
    }
}

#[test]
fn unknown_phase_and_state_values_survive() {
    let pg = json!({
        "apiVersion": GROUP_VERSION, "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"minMember": 0},
        "status": {"phase": "Reconciling", "conditions": [{"type": "Evicted", "status": "True"}]},
    });
    round_trip(&pg).unwrap_or_else(|problem| panic!("{problem}"));
    let pg: PodGroup = serde_json::from_value(pg).expect("reads");
    let phase = pg.status.and_then(|s| s.phase).expect("phase");
    assert_eq!(phase, PodGroupPhase::Other("Reconciling".into()));
    assert!(!phase.is_known());
    assert_eq!(pg.spec.min_member(), 1, "minMember 0 means 1");

    let queue = json!({
        "apiVersion": GROUP_VERSION, "kind": "Queue", "metadata": {"name": "q"},
        "spec": {"weight": 2, "dequeueStrategy": "lottery"},
        "status": {"state": "Draining"},
    });
    round_trip(&queue).unwrap_or_else(|problem| panic!("{problem}"));
}

#[test]
fn string_enums_map_known_spellings_to_their_variants() {
    assert_eq!(PodGroupPhase::from("Inqueue"), PodGroupPhase::Inqueue);
    assert_eq!(QueueState::from("Closed".to_owned()), QueueState::Closed);
    assert_eq!(PodGroupPhase::Completed.to_string(), "Completed");
    assert_eq!(
        PodGroupPhase::KNOWN,
        [
            PodGroupPhase::Pending,
            PodGroupPhase::Inqueue,
            PodGroupPhase::Running,
            PodGroupPhase::Completed,
            PodGroupPhase::Unknown,
        ]
    );
    // Spelling is exact, as in Kubernetes.
    assert_eq!(
        QueueState::from("open"),
        QueueState::Other("open".to_owned())
    );
}
