//! `caldera simulate` end to end: the bundled example, a scenario that fails, plain manifests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn caldera(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_caldera"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
}

fn temp_file(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("caldera-simulate-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}

#[test]
fn compare_kube_scheduler_tells_six_of_eight_against_none() {
    let out = caldera(&["simulate", "--compare", "kube-scheduler"], None);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let first = stdout.find("after step 2 (run 3s, +3s)").expect(&stdout);
    let row = stdout[first..]
        .find("default/training-job-tp8  8    6/8 PARTIAL     0/8")
        .expect(&stdout);
    let second = stdout.find("after step 5 (run 2s, +5s)").expect(&stdout);
    assert!(first + row < second, "{stdout}");
    assert!(stdout[second..].contains("8/8             8/8"), "{stdout}");
    assert!(
        stdout.contains(
            "kube-scheduler alone bound gangs in part: default/training-job-tp8 (6 of 8 at +3s)"
        ),
        "{stdout}"
    );

    let out = caldera(
        &["simulate", "--compare", "kube-scheduler", "-o", "json"],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gang = &json["checkpoints"][0]["gangs"][0];
    assert_eq!(gang["name"], "default/training-job-tp8");
    assert_eq!(
        (gang["kubeScheduler"].as_u64(), gang["caldera"].as_u64()),
        (Some(6), Some(0))
    );
    // Both final states, in the report format of `simulate -o json`.
    for side in ["caldera", "kubeScheduler"] {
        assert_eq!(json[side]["podGroups"][0]["bound"], 8, "{side}");
    }
}

#[test]
fn compare_works_on_plain_manifests_and_gate_scenarios() {
    let manifests = std::fs::read_to_string(scenario("seed2-no-deadlock.yaml")).unwrap();
    // The scenario's first apply step, as plain manifests: 5 GPUs free, two 4-pod services.
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&manifests).unwrap();
    let objects = value["spec"]["steps"][0]["apply"].as_sequence().unwrap();
    let docs: Vec<String> = objects
        .iter()
        .map(|o| serde_yaml_ng::to_string(o).unwrap())
        .collect();
    let file = temp_file("seed2.yaml", &docs.join("---\n"));
    let out = caldera(
        &[
            "simulate",
            "--compare",
            "kube-scheduler",
            "-f",
            file.to_str().unwrap(),
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    // One pod at a time, both services end 3 + 2 or similar: at least one partial.
    assert!(stdout.contains("PARTIAL"), "{stdout}");
    assert!(
        stdout.contains("kube-scheduler alone bound gangs in part"),
        "{stdout}"
    );

    let gate = scenario("gate-seed1-partial-gang.yaml");
    let out = caldera(
        &[
            "simulate",
            "--compare",
            "kube-scheduler",
            gate.to_str().unwrap(),
        ],
        None,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("caldera gate beside kube-scheduler"),
        "{stdout}"
    );
    assert!(stdout.contains("6/8 PARTIAL     0/8"), "{stdout}");
}

#[test]
fn bundled_example_tells_the_seed_story_and_passes() {
    let out = caldera(&["simulate"], None);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    // Unbound while 6 GPUs are free...
    let unbound = stdout
        .find("8    0      Inqueue  NotEnoughResources")
        .expect(&stdout);
    assert!(
        stdout[unbound..].contains("6 of 16 nvidia.com/gpu free"),
        "{stdout}"
    );
    // ...then all 8 at once.
    let bound = stdout
        .find("bound gang default/training-job-tp8, 8 pods → node-a ×6, node-b ×2")
        .expect(&stdout);
    assert!(bound > unbound);
    assert!(stdout.contains("PASS seed1-partial-gang"), "{stdout}");
}

#[test]
fn a_failing_scenario_exits_1_with_the_diff() {
    let original = std::fs::read_to_string(scenario("seed1-partial-gang.yaml")).unwrap();
    let wrong = temp_file("wrong.yaml", &original.replacen("bound: 8", "bound: 7", 1));
    let out = caldera(&["simulate", wrong.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("  - podGroup default/training-job-tp8 bound: expected 7, got 8"),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("scenario seed1-partial-gang failed"));
}

#[test]
fn a_passing_scenario_exits_0_and_json_is_deterministic() {
    let path = scenario("seed2-no-deadlock.yaml");
    let path = path.to_str().unwrap();
    let first = caldera(&["simulate", path, "-o", "json"], None);
    assert!(first.status.success(), "{}", text(&first.stderr));
    let second = caldera(&["simulate", path, "-o", "json"], None);
    assert_eq!(first.stdout, second.stdout);
    let json: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let b = json["podGroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "llm-infer-b-gang")
        .unwrap();
    assert_eq!(b["bound"], 4);
    assert_eq!(b["phase"], "Running");
}

#[test]
fn manifests_from_files_and_stdin_run_until_stable() {
    let nodes = temp_file(
        "nodes.yaml",
        "apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: '8', memory: 16Gi, nvidia.com/gpu: 4}
  conditions: [{type: Ready, status: 'True'}]
",
    );
    let pods = "apiVersion: apps/v1
kind: DaemonSet
metadata: {name: web}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: pair}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: pair-0, annotations: {scheduling.k8s.io/group-name: pair}}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: 2}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: pair-1, annotations: {scheduling.k8s.io/group-name: pair}}
spec:
  schedulerName: caldera
  containers: [{name: main, resources: {limits: {nvidia.com/gpu: 2}}}]
";
    let out = caldera(
        &["simulate", "-f", nodes.to_str().unwrap(), "-f", "-"],
        Some(pods),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.starts_with("3 sessions (+1s .. +3s)"), "{stdout}");
    assert!(
        stdout.contains("default/pair  default  2    2      Running"),
        "{stdout}"
    );
    assert!(
        stdout.contains("node-a  [####]  4/4 nvidia.com/gpu"),
        "{stdout}"
    );
    assert!(
        text(&out.stderr).contains("-: document 1: DaemonSet (apps/v1): not simulated: no controllers run here; give the Pods"),
        "{}",
        text(&out.stderr)
    );

    let out = caldera(
        &["simulate", "-f", "-", "--for", "90s", "-o", "json"],
        Some(pods),
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["time"], "2026-01-01T00:01:30Z");
    assert_eq!(json["sessions"], 90);
}

#[test]
fn bad_input_names_file_document_and_field() {
    let bad = temp_file(
        "bad.yaml",
        "apiVersion: v1
kind: Node
metadata: {name: n}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: main, resources: {requests: {cpu: lots}}}]
",
    );
    let out = caldera(&["simulate", "-f", bad.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("bad.yaml: document 2: pod default/p: spec.containers[0].resources.requests.cpu: invalid quantity \"lots\""),
        "{stderr}"
    );
}

#[test]
fn names_a_real_server_refuses_are_refused_with_its_rule() {
    let subdomain = "Invalid value: \"nodeA\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
    let manifests = temp_file(
        "names.yaml",
        "apiVersion: v1
kind: Node
metadata: {name: nodeA}
",
    );
    let out = caldera(&["simulate", "-f", manifests.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "names.yaml: document 1: node nodeA: metadata.name: {subdomain}"
        )),
        "{stderr}"
    );

    let pod = temp_file(
        "pod.yaml",
        "apiVersion: v1
kind: Pod
metadata: {name: p_1}
spec:
  containers: [{name: main}]
",
    );
    let out = caldera(&["simulate", "-f", pod.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("pod default/p_1: metadata.name: Invalid value: \"p_1\": a lowercase RFC 1123 subdomain"),
        "{stderr}"
    );

    let scenario = temp_file(
        "scenario.yaml",
        "apiVersion: caldera.sh/v1alpha1
kind: Scenario
metadata: {name: bad-node-name}
spec:
  steps:
  - apply:
    - apiVersion: v1
      kind: Node
      metadata: {name: nodeA}
  - run: 1s
",
    );
    let out = caldera(&["simulate", scenario.to_str().unwrap()], None);
    assert_ne!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("node nodeA: metadata.name: {subdomain}")),
        "{stderr}"
    );
}

#[test]
fn the_seed_statefulset_is_expanded_and_ordered_ready_says_why_it_waits() {
    let nodes = temp_file(
        "gpu-nodes.yaml",
        "apiVersion: v1
kind: Node
metadata: {name: gpu-a, labels: {kubernetes.io/hostname: gpu-a}}
status:
  allocatable: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '8', pods: '110'}
  conditions: [{type: Ready, status: 'True'}]
",
    );
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/inference-tp4-statefulset.yaml");
    let out = caldera(
        &[
            "simulate",
            "-f",
            nodes.to_str().unwrap(),
            "-f",
            example.to_str().unwrap(),
        ],
        None,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr.contains("StatefulSet: the simulator plays its controller: created pods llm-tp4-0, llm-tp4-1, llm-tp4-2, llm-tp4-3"),
        "{stderr}"
    );
    assert!(
        stdout.contains("default/llm-tp4  default  4    4      Running"),
        "{stdout}"
    );

    let ordered = std::fs::read_to_string(&example).unwrap().replace(
        "podManagementPolicy: Parallel",
        "podManagementPolicy: OrderedReady",
    );
    let out = caldera(
        &["simulate", "-f", nodes.to_str().unwrap(), "-f", "-"],
        Some(&ordered),
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stderr.contains("created pods llm-tp4-0;"), "{stderr}");
    assert!(stderr.contains("use Parallel"), "{stderr}");
    assert!(
        stdout.contains("NotEnoughTasks: 1 of 4 members exist"),
        "{stdout}"
    );
}

#[test]
fn the_seed_statefulset_with_claims_and_anti_affinity_places_as_kube_scheduler_plus_the_gang_rule()
{
    // The seed example, one pod per node (required anti-affinity on the hostname instead of
    // the one-node topology), each with a claim of a WaitForFirstConsumer class that
    // provisions only in zone-b.
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/inference-tp4-statefulset.yaml");
    let text_of = std::fs::read_to_string(&example).unwrap();
    let changed = text_of
        .replace(
            "  topology:\n    mode: required\n    key: kubernetes.io/hostname\n",
            "",
        )
        .replace(
            "      schedulerName: caldera\n",
            "      schedulerName: caldera
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - labelSelector: {matchLabels: {app: llm-tp4}}
            topologyKey: kubernetes.io/hostname
",
        )
        .replace(
            "  podManagementPolicy: Parallel\n",
            "  podManagementPolicy: Parallel
  volumeClaimTemplates:
  - metadata: {name: cache}
    spec:
      storageClassName: zonal-ssd
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 100Gi}}
",
        );
    assert_ne!(changed, text_of);
    assert!(changed.contains("volumeClaimTemplates") && !changed.contains("mode: required"));
    let node = |name: &str, zone: &str| {
        format!(
            "---
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}, topology.kubernetes.io/zone: {zone}}}}}
status:
  allocatable: {{cpu: '64', memory: 512Gi, nvidia.com/gpu: '8', pods: '110'}}
  conditions: [{{type: Ready, status: 'True'}}]
"
        )
    };
    let class = "---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zonal-ssd}
provisioner: ebs.csi.example
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [zone-b]}
";
    let three = [
        node("a0", "zone-a"),
        node("a1", "zone-a"),
        node("b0", "zone-b"),
        node("b1", "zone-b"),
        node("b2", "zone-b"),
        class.to_string(),
    ]
    .concat();
    let cluster = temp_file("zones.yaml", &three);
    let out = caldera(
        &["simulate", "-f", cluster.to_str().unwrap(), "-f", "-"],
        Some(&changed),
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stderr
            .contains("claims cache-llm-tp4-0, cache-llm-tp4-1, cache-llm-tp4-2, cache-llm-tp4-3"),
        "{stderr}"
    );
    // Four members, one per node, but only three nodes can get their volumes: nothing binds,
    // and the output says why node by node, as kube-scheduler would.
    assert!(
        stdout.contains("default/llm-tp4  default  4    0"),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 node(s) didn't find available persistent volumes to bind")
            && stdout.contains("3 node(s) didn't satisfy existing pods anti-affinity rules"),
        "{stdout}"
    );
    // A fourth node in zone-b: every member has a node there, the claims are annotated with
    // them, and the gang waits for its volumes before any member binds.
    let four = format!("{three}{}", node("b3", "zone-b"));
    let cluster = temp_file("zones4.yaml", &four);
    let out = caldera(
        &["simulate", "-f", cluster.to_str().unwrap(), "-f", "-"],
        Some(&changed),
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(
            "WaitingForVolumes: 4/4 members keep their nodes until their claims are bound"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("default/llm-tp4  default  4    0"),
        "{stdout}"
    );
    // The claims table shows each claim annotated with a zone-b node, one node per member, and
    // the nodes held for the members; nothing provisions, and the output says so.
    let selected: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("default/cache-llm-tp4-"))
        .map(|l| l.split_whitespace().last().unwrap_or(""))
        .collect();
    let mut sorted = selected.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, ["b0", "b1", "b2", "b3"], "{stdout}");
    assert!(stdout.contains("CLAIM"), "{stdout}");
    assert!(
        stdout.contains("held for pods not bound yet: default/llm-tp4-0 → "),
        "{stdout}"
    );
    assert!(stdout.contains("nothing provisions volumes"), "{stdout}");
    // A Node without a Ready condition is reported: nothing would be placed on it.
    let unready = four.replace("  conditions: [{type: Ready, status: 'True'}]\n", "");
    assert_ne!(unready, four);
    let cluster = temp_file("zones-unready.yaml", &unready);
    let out = caldera(
        &["simulate", "-f", cluster.to_str().unwrap(), "-f", "-"],
        Some(&changed),
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("Node a0: no Ready condition in its status"),
        "{stderr}"
    );
}

#[test]
fn a_preemption_is_told_step_by_step() {
    let file = scenario("preempt-defragments.yaml");
    let out = caldera(&["simulate", file.to_str().unwrap()], None);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let evicted = stdout
        .find("+4s: evicted (preempt/reclaim; they keep their nodes for their grace period): default/low-n1-0, default/low-n1-1, default/low-n1-2")
        .expect(&stdout);
    let terminating = stdout[evicted..]
        .find("default/low-n1-0  n1    Running  Terminating (EvictionByEvictionAPI)")
        .expect(&stdout);
    assert!(
        stdout[evicted + terminating..].contains("bound gang default/tp4, 4 pods → n1 ×4"),
        "{stdout}"
    );
}
