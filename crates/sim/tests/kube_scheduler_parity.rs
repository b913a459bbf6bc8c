//! kube-scheduler's own filter tests, ported: the table cases of kube-scheduler 1.36's
//! `pkg/scheduler/framework/plugins/{interpodaffinity,tainttoleration,nodeaffinity,nodeports,
//! podtopologyspread,volumebinding,volumerestrictions,nodevolumelimits}/*_test.go` for the
//! filters Caldera implements, as data in `tests/parity/*.yaml`, run through Caldera's own
//! evaluation: the manifests go through the simulator's API-server model (its PV controller
//! included) and the cache into a snapshot, and `explain` says, node by node, whether the pod
//! fits (the session's filters, as allocate uses them; a pod whose claims keep it off every
//! node, kube-scheduler's PreFilter failures, fits nowhere).
//!
//! The volume tables (`volumebinding.yaml`: `TestVolumeBinding` and the binder's
//! `TestFindPodVolumes*`; `volumerestrictions.yaml`: `TestAccessModeConflicts`;
//! `nodevolumelimits.yaml`: `TestCSILimits`) give StorageClasses, CSINodes, PersistentVolumes
//! and PersistentVolumeClaims as manifests, and pods' claims (`pvcs`) and other volumes. Each
//! file's header says what is adapted (Caldera runs every volume filter together, as
//! kube-scheduler does, where upstream tests one plugin alone) and which upstream cases are not
//! ported (VolumeZone, in-tree volumes, VolumeAttachments, CSIStorageCapacity: not evaluated,
//! docs/volumes.md).
//!
//! `nominated.yaml` ports `TestFilterPluginsWithNominatedPods` (framework runtime) with the
//! inter-pod filters in place of its injected plugins, plus the rule its
//! `RunFilterPluginsWithNominatedPods` states (a node passes with and without the nominated
//! pods of equal or higher priority on it, so a nominated pod never satisfies an affinity).
//!
//! A case lists the nodes kube-scheduler finds feasible. A case where Caldera differs on
//! purpose says why (`differs`), and the test checks that it still does, so the list of
//! differences stays true.

use caldera_config::SchedulerConfig;
use caldera_sim::manifest::{parse_value, Manifests};
use caldera_sim::Origin;
use caldera_sim::Simulation;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    /// kube-scheduler's test name.
    name: String,
    /// The Go test function it comes from.
    source: String,
    nodes: Vec<NodeCase>,
    #[serde(default)]
    namespaces: Vec<NamespaceCase>,
    /// Pods already bound (`node`), Running.
    #[serde(default)]
    pods: Vec<PodCase>,
    /// Pending pods of Caldera's with `status.nominatedNodeName` (`node`): members held at that
    /// node for a preemptor (kube-scheduler's nominated pods).
    #[serde(default)]
    nominated: Vec<PodCase>,
    /// PersistentVolumes, as manifests without `apiVersion` and `kind`.
    #[serde(default)]
    persistent_volumes: Vec<Value>,
    /// PersistentVolumeClaims, likewise (namespace `default` unless they say).
    #[serde(default)]
    persistent_volume_claims: Vec<Value>,
    /// StorageClasses, likewise.
    #[serde(default)]
    storage_classes: Vec<Value>,
    /// CSINodes, likewise.
    #[serde(default)]
    csi_nodes: Vec<Value>,
    /// The pod to place.
    pod: PodCase,
    /// The nodes kube-scheduler's filter passes.
    feasible: Vec<String>,
    /// Why Caldera deliberately finds other nodes feasible (the test checks it still does).
    #[serde(default)]
    differs: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeCase {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    taints: Vec<Value>,
    #[serde(default)]
    unschedulable: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamespaceCase {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PodCase {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    /// `metadata.uid` (a generic ephemeral volume's claim names its pod's uid as owner).
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    node: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    /// Merged into the pod's spec (affinity, tolerations, nodeSelector, ...).
    #[serde(default)]
    spec: Map<String, Value>,
    /// The container's ports.
    #[serde(default)]
    ports: Vec<Value>,
    /// Claims it mounts (`persistentVolumeClaim` volumes named `pvc-<i>`).
    #[serde(default)]
    pvcs: Vec<String>,
    /// Further volumes, as in a pod spec (generic `ephemeral`, `configMap`, ...), after the
    /// claims of `pvcs`.
    #[serde(default)]
    volumes: Vec<Value>,
    #[serde(default)]
    terminating: bool,
    /// Its PriorityClass's value (a class `priority-<value>` is made for it; its PodGroup, for
    /// the incoming pod, names it too).
    #[serde(default)]
    priority: Option<i32>,
}

/// The PriorityClass a case's pod with `priority` names.
fn priority_class(priority: i32) -> String {
    format!("priority-{}", priority.unsigned_abs())
}

/// A pod's manifest: the incoming pod (`incoming`), a pending pod nominated to `p.node`
/// (`nominated`), or else a Running pod of another scheduler bound to `p.node`.
fn pod_manifest(p: &PodCase, name: &str, incoming: bool, nominated: bool) -> Value {
    let ns = p.namespace.as_deref().unwrap_or("default");
    let mut spec = Map::new();
    spec.insert(
        "containers".into(),
        json!([{
            "name": "main",
            "image": "registry.example/worker:1",
            "resources": {"requests": {"cpu": "10m"}},
            "ports": p.ports,
        }]),
    );
    if incoming || nominated {
        spec.insert("schedulerName".into(), json!("caldera"));
    } else {
        spec.insert("schedulerName".into(), json!("default-scheduler"));
        spec.insert("nodeName".into(), json!(p.node.clone().unwrap_or_default()));
    }
    if let Some(priority) = p.priority {
        spec.insert("priorityClassName".into(), json!(priority_class(priority)));
    }
    let mut volumes: Vec<Value> = p
        .pvcs
        .iter()
        .enumerate()
        .map(
            |(i, c)| json!({"name": format!("pvc-{i}"), "persistentVolumeClaim": {"claimName": c}}),
        )
        .collect();
    volumes.extend(p.volumes.iter().cloned());
    if !volumes.is_empty() {
        spec.insert("volumes".into(), Value::Array(volumes));
    }
    for (k, v) in &p.spec {
        spec.insert(k.clone(), v.clone());
    }
    let mut metadata = json!({"name": name, "namespace": ns, "labels": p.labels});
    if let Some(uid) = &p.uid {
        metadata["uid"] = json!(uid);
    }
    if incoming {
        metadata["annotations"] = json!({"scheduling.k8s.io/group-name": "incoming"});
    }
    if p.terminating {
        metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec});
    if nominated {
        pod["status"] = json!({"phase": "Pending", "nominatedNodeName": p.node});
    } else if !incoming {
        pod["status"] = json!({"phase": "Running"});
    }
    pod
}

/// The incoming pod's name: its `name`, else `incoming` (its PodGroup is `incoming` either way).
fn incoming_name(case: &Case) -> &str {
    case.pod.name.as_deref().unwrap_or("incoming")
}

fn manifests(case: &Case) -> Vec<Value> {
    let mut out = Vec::new();
    for ns in &case.namespaces {
        out.push(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": ns.name, "labels": ns.labels}}));
    }
    for n in &case.nodes {
        out.push(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n.name, "labels": n.labels},
            "spec": {"taints": n.taints, "unschedulable": n.unschedulable},
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }));
    }
    let storage = [
        ("storage.k8s.io/v1", "StorageClass", &case.storage_classes),
        ("storage.k8s.io/v1", "CSINode", &case.csi_nodes),
        ("v1", "PersistentVolume", &case.persistent_volumes),
        (
            "v1",
            "PersistentVolumeClaim",
            &case.persistent_volume_claims,
        ),
    ];
    for (api, kind, list) in storage {
        for o in list {
            let mut o = o.clone();
            o["apiVersion"] = json!(api);
            o["kind"] = json!(kind);
            if kind == "PersistentVolumeClaim" && o["metadata"]["namespace"].is_null() {
                o["metadata"]["namespace"] = json!("default");
            }
            out.push(o);
        }
    }
    let mut priorities: Vec<i32> = case
        .pods
        .iter()
        .chain(&case.nominated)
        .chain(std::iter::once(&case.pod))
        .filter_map(|p| p.priority)
        .collect();
    priorities.sort_unstable();
    priorities.dedup();
    for priority in priorities {
        out.push(json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": priority_class(priority)}, "value": priority,
        }));
    }
    for (i, p) in case.pods.iter().enumerate() {
        let name = p.name.clone().unwrap_or_else(|| format!("existing-{i}"));
        out.push(pod_manifest(p, &name, false, false));
    }
    for (i, p) in case.nominated.iter().enumerate() {
        let name = p.name.clone().unwrap_or_else(|| format!("nominated-{i}"));
        out.push(pod_manifest(p, &name, false, true));
    }
    let ns = case.pod.namespace.as_deref().unwrap_or("default");
    let mut group_spec = json!({"minMember": 1});
    if let Some(priority) = case.pod.priority {
        group_spec["priorityClassName"] = json!(priority_class(priority));
    }
    out.push(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "incoming", "namespace": ns},
        "spec": group_spec,
    }));
    out.push(pod_manifest(&case.pod, incoming_name(case), true, false));
    out
}

/// The nodes Caldera finds feasible for the case's pod, and why each other node is not.
fn caldera_feasible(case: &Case) -> Result<(Vec<String>, Vec<String>), String> {
    let config = SchedulerConfig::default();
    let mut sim = Simulation::new(&config).map_err(|e| e.to_string())?;
    let mut parsed = Manifests::default();
    for (i, m) in manifests(case).into_iter().enumerate() {
        let m: serde_yaml_ng::Value = serde_yaml_ng::to_value(&m).map_err(|e| e.to_string())?;
        parse_value(m, &Origin::new(&case.name, i + 1), &mut parsed).map_err(|e| e.to_string())?;
    }
    sim.apply(parsed.objects.into_iter().map(|(_, o)| o))
        .map_err(|e| e.to_string())?;
    let scheduler = caldera_plugins::scheduler(&config).map_err(|e| e.to_string())?;
    let ns = case.pod.namespace.as_deref().unwrap_or("default");
    let explanation = scheduler
        .explain(&sim.snapshot(), sim.now(), &format!("{ns}/incoming"))
        .ok_or("no job for the incoming pod")?;
    let kind = explanation.kinds.first().ok_or("no pending member")?;
    let mut feasible: Vec<String> = kind
        .nodes
        .iter()
        .filter(|n| n.fit > 0)
        .map(|n| n.node.clone())
        .collect();
    feasible.sort();
    let why: Vec<String> = kind
        .nodes
        .iter()
        .filter(|n| n.fit == 0)
        .map(|n| format!("{}: {}", n.node, n.reason.as_deref().unwrap_or("?")))
        .collect();
    Ok((feasible, why))
}

fn run_table(file: &str) {
    let path = format!("{}/tests/parity/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let cases: Vec<Case> = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(!cases.is_empty(), "{path}: no cases");
    let mut failures = Vec::new();
    for case in &cases {
        let mut want = case.feasible.clone();
        want.sort();
        match caldera_feasible(case) {
            Err(e) => failures.push(format!("{} ({}): {e}", case.name, case.source)),
            Ok((got, why)) => match &case.differs {
                None if got != want => failures.push(format!(
                    "{} ({}): kube-scheduler finds {want:?} feasible, Caldera {got:?} ({})",
                    case.name,
                    case.source,
                    why.join("; ")
                )),
                Some(why) if got == want => failures.push(format!(
                    "{} ({}): listed as a deliberate difference ({why}) but Caldera agrees now",
                    case.name, case.source
                )),
                _ => {}
            },
        }
    }
    assert!(
        failures.is_empty(),
        "{file}: {} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn interpodaffinity() {
    run_table("interpodaffinity.yaml");
}

#[test]
fn tainttoleration() {
    run_table("tainttoleration.yaml");
}

#[test]
fn nodeaffinity() {
    run_table("nodeaffinity.yaml");
}

#[test]
fn nodeports() {
    run_table("nodeports.yaml");
}

#[test]
fn podtopologyspread() {
    run_table("podtopologyspread.yaml");
}

#[test]
fn nominated_pods() {
    run_table("nominated.yaml");
}

#[test]
fn volumebinding() {
    run_table("volumebinding.yaml");
}

#[test]
fn volumerestrictions() {
    run_table("volumerestrictions.yaml");
}

#[test]
fn nodevolumelimits() {
    run_table("nodevolumelimits.yaml");
}
