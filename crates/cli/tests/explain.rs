//! `caldera explain` end to end: manifests on stdin, node-by-node answer, errors for bad input.

use std::io::Write;
use std::process::{Command, Output, Stdio};

fn caldera(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_caldera"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

const CLUSTER: &str = "\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '8'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
spec:
  unschedulable: true
status:
  allocatable: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '8'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: v1
kind: Pod
metadata: {name: busy}
spec:
  nodeName: node-a
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '6'}}}]
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: train}
spec: {minMember: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: train-0, annotations: {scheduling.k8s.io/group-name: train}}
spec:
  schedulerName: caldera
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '1'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: train-1, annotations: {scheduling.k8s.io/group-name: train}}
spec:
  schedulerName: caldera
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '1'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: train-2, annotations: {scheduling.k8s.io/group-name: train}}
spec:
  schedulerName: caldera
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '1'}}}]
";

#[test]
fn explain_tells_node_by_node_why_a_gang_waits() {
    let out = caldera(&["explain", "default/train", "-f", "-"], CLUSTER);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("PodGroup default/train"), "{stdout}");
    assert!(stdout.contains("Insufficient nvidia.com/gpu"), "{stdout}");
    let node_a = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("node-a"))
        .unwrap();
    assert!(node_a.contains(" 2 "), "{node_a}");
    let node_b = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("node-b"))
        .unwrap();
    assert!(node_b.contains("unschedulable"), "{node_b}");
}

#[test]
fn explain_names_a_missing_podgroup() {
    let out = caldera(&["explain", "default/nope", "-f", "-"], CLUSTER);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no PodGroup default/nope") && stderr.contains("default/train"),
        "{stderr}"
    );
}

/// A `batch/v1` Job's name stands for the PodGroup derived from it (docs/workloads.md): its
/// pods are made by the Job controller the simulator plays, and the gang is explained whole.
#[test]
fn explains_a_job_by_its_name() {
    let job = "\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '8'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: v1
kind: Pod
metadata: {name: busy}
spec:
  nodeName: node-a
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '2'}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 8
  completions: 8
  completionMode: Indexed
  template:
    spec:
      schedulerName: caldera
      restartPolicy: Never
      containers: [{name: m, resources: {limits: {nvidia.com/gpu: '1'}}}]
";
    let out = caldera(&["explain", "default/train", "-f", "-"], job);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("PodGroup default/job-train (queue default): minMember 8, 8 members"),
        "{stdout}"
    );
    assert!(stdout.contains("6 fit"), "{stdout}");
}

/// A native `scheduling.k8s.io/v1alpha2` PodGroup is explained like any gang, under the name of
/// the Workload it was made from (docs/workloads.md).
#[test]
fn explains_a_native_podgroup_under_its_workload() {
    let native = "\
apiVersion: v1
kind: Node
metadata: {name: node-a}
status:
  allocatable: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '2'}
  conditions: [{type: Ready, status: 'True'}]
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: train-workers}
spec:
  podGroupTemplateRef: {workload: {workloadName: train, podGroupTemplateName: workers}}
  schedulingPolicy: {gang: {minCount: 3}}
---
apiVersion: v1
kind: Pod
metadata: {name: w-0}
spec:
  schedulerName: caldera
  schedulingGroup: {podGroupName: train-workers}
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '1'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: w-1}
spec:
  schedulerName: caldera
  schedulingGroup: {podGroupName: train-workers}
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '1'}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: w-2}
spec:
  schedulerName: caldera
  schedulingGroup: {podGroupName: train-workers}
  containers: [{name: m, resources: {limits: {nvidia.com/gpu: '1'}}}]
";
    let out = caldera(&["explain", "default/train-workers", "-f", "-"], native);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(
            "native scheduling.k8s.io/v1alpha2 PodGroup of Workload train (template workers)"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("Insufficient nvidia.com/gpu"), "{stdout}");
}
