//! Synthetic clusters: GPU nodes, running pods, and pending gangs, from a seed.

use caldera_api::PodGroup;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::json;

/// A small deterministic PRNG (xorshift64*), so a seed always gives the same cluster.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (seed 0 is mapped to a fixed non-zero state).
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Shape {
    /// Nodes, each 8 GPUs, 64 CPU, 512Gi.
    pub nodes: usize,
    /// Running pods spread evenly over the nodes; they hold half of every node's GPUs.
    pub running_pods: usize,
    /// Pending pods, one GPU each, in gangs of 1–64 members.
    pub pending_pods: usize,
    /// Queues the gangs are spread over.
    pub queues: usize,
    /// Seed.
    pub seed: u64,
}

/// The generated objects.
#[derive(Debug, Default)]
pub struct Objects {
    /// Nodes.
    pub nodes: Vec<Node>,
    /// Pods, running and pending.
    pub pods: Vec<Pod>,
    /// PodGroups.
    pub podgroups: Vec<PodGroup>,
    /// Queues.
    pub queues: Vec<caldera_api::Queue>,
    /// StorageClasses.
    pub classes: Vec<k8s_openapi::api::storage::v1::StorageClass>,
    /// PersistentVolumes.
    pub volumes: Vec<k8s_openapi::api::core::v1::PersistentVolume>,
    /// PersistentVolumeClaims.
    pub claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
}

fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    // The JSON is built right here with the fields these types define; a failure is a bug in
    // this generator, not input to handle.
    serde_json::from_value(v).expect("generator builds valid objects")
}

/// A Ready GPU node.
pub fn node(name: &str, rack: usize) -> Node {
    from_json(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "rack": format!("rack-{rack}"),
                     "topology.kubernetes.io/zone": format!("zone-{}", rack % 3)}},
        "status": {
            "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}]
        }
    }))
}

/// A pod of `scheduler` asking for `gpus` GPUs and one CPU, in `group` if given, on `node` if
/// given.
pub fn pod(
    ns: &str,
    name: &str,
    scheduler: &str,
    gpus: u32,
    group: Option<&str>,
    node: Option<&str>,
    running: bool,
) -> Pod {
    let mut annotations = serde_json::Map::new();
    if let Some(g) = group {
        annotations.insert("scheduling.k8s.io/group-name".into(), json!(g));
    }
    let mut limits = serde_json::Map::new();
    let mut requests = serde_json::Map::new();
    // Running pods are small on CPU and memory so that even 110 of them fit a node.
    let (cpu, memory) = if node.is_some() {
        ("100m", "256Mi")
    } else {
        ("1", "4Gi")
    };
    requests.insert("cpu".into(), json!(cpu));
    requests.insert("memory".into(), json!(memory));
    if gpus > 0 {
        limits.insert("nvidia.com/gpu".into(), json!(gpus.to_string()));
        requests.insert("nvidia.com/gpu".into(), json!(gpus.to_string()));
    }
    let mut spec = json!({
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "worker", "resources": {"requests": requests, "limits": limits}}]
    });
    if let Some(n) = node {
        spec["nodeName"] = json!(n);
    }
    from_json(json!({
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-{ns}-{name}"), "annotations": annotations,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": spec,
        "status": {"phase": if running { "Running" } else { "Pending" }}
    }))
}

/// A PodGroup.
pub fn podgroup(ns: &str, name: &str, min: usize, queue: &str, phase: &str) -> PodGroup {
    from_json(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, "uid": format!("uid-pg-{ns}-{name}"), "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"minMember": min, "queue": queue},
        "status": {"phase": phase}
    }))
}

/// A queue.
pub fn queue(name: &str, weight: u32) -> caldera_api::Queue {
    from_json(json!({
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
        "status": {"state": "Open"}
    }))
}

/// Builds the cluster: nodes, running pods holding 4 of every node's 8 GPUs (half of them in
/// running Caldera gangs of 8, half from another scheduler), and pending gangs of 1–64
/// one-GPU members round-robin over the queues.
pub fn cluster(shape: &Shape) -> Objects {
    let mut rng = Rng::new(shape.seed);
    let mut o = Objects::default();
    for i in 0..shape.nodes {
        o.nodes.push(node(&format!("node-{i:05}"), i / 16));
    }
    for q in 0..shape.queues {
        o.queues
            .push(queue(&format!("queue-{q}"), (q % 4 + 1) as u32));
    }
    let per_node = shape.running_pods.div_ceil(shape.nodes.max(1)).max(1);
    let mut gang_members = 0;
    let mut gang = 0;
    for i in 0..shape.running_pods {
        let n = i / per_node;
        let slot = i % per_node;
        let gpus = u32::from(slot < 4);
        let node = format!("node-{:05}", n.min(shape.nodes.saturating_sub(1)));
        if i % 2 == 0 {
            if gang_members == 0 {
                gang += 1;
                o.podgroups.push(podgroup(
                    "running",
                    &format!("run-{gang}"),
                    8,
                    &format!("queue-{}", gang % shape.queues.max(1)),
                    "Running",
                ));
            }
            gang_members = (gang_members + 1) % 8;
            o.pods.push(pod(
                "running",
                &format!("run-{i}"),
                "caldera",
                gpus,
                Some(&format!("run-{gang}")),
                Some(&node),
                true,
            ));
        } else {
            o.pods.push(pod(
                "other",
                &format!("other-{i}"),
                "default-scheduler",
                gpus,
                None,
                Some(&node),
                true,
            ));
        }
    }
    pending_gangs(
        &mut rng,
        shape,
        &mut o,
        "pending",
        Until::Pods(shape.pending_pods),
        1,
        64,
    );
    o
}

/// How many pending gangs to add: until a number of pods, or a number of gangs.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    /// Stop once this many pods exist (the last gang is cut to fit).
    Pods(usize),
    /// Stop after this many gangs.
    Gangs(usize),
}

/// Adds pending one-GPU pods in gangs of `lo..=hi` members (`minMember` = size), round-robin
/// over the queues, named `gang-NNNNN` in `ns` ([`each_pending_gang`] into `o`).
pub fn pending_gangs(
    rng: &mut Rng,
    shape: &Shape,
    o: &mut Objects,
    ns: &str,
    until: Until,
    lo: u64,
    hi: u64,
) {
    each_pending_gang(rng, shape.queues, ns, until, lo, hi, |pg, pods| {
        o.podgroups.push(pg);
        o.pods.extend(pods);
    });
}

/// Makes pending one-GPU pods in gangs of `lo..=hi` members (`minMember` = size), round-robin
/// over `queues` queues, named `gang-NNNNN` in `ns`, and hands each gang's PodGroup and pods
/// to `gang` as it is made (so a caller need not hold them all).
pub fn each_pending_gang(
    rng: &mut Rng,
    queues: usize,
    ns: &str,
    until: Until,
    lo: u64,
    hi: u64,
    mut gang: impl FnMut(PodGroup, Vec<Pod>),
) {
    let mut made = 0;
    let mut g = 0;
    loop {
        let mut size = rng.range(lo, hi) as usize;
        match until {
            Until::Pods(pods) if made >= pods => break,
            Until::Pods(pods) => size = size.min(pods - made),
            Until::Gangs(gangs) if g >= gangs => break,
            Until::Gangs(_) => {}
        }
        let name = format!("gang-{g:05}");
        let q = format!("queue-{}", g % queues.max(1));
        let pods = (0..size)
            .map(|m| {
                pod(
                    ns,
                    &format!("{name}-{m}"),
                    "caldera",
                    1,
                    Some(&name),
                    None,
                    false,
                )
            })
            .collect();
        gang(podgroup(ns, &name, size, &q, "Inqueue"), pods);
        made += size;
        g += 1;
    }
}

/// Gives every fifth pending gang of `ns` (20%) an inter-pod constraint, alternating required
/// anti-affinity on `kubernetes.io/hostname` among its members (one per node) and a
/// `DoNotSchedule` zone spread (maxSkew 1). Returns how many gangs were constrained.
pub fn constrain_gangs(o: &mut Objects, ns: &str) -> usize {
    let mut constrained = std::collections::BTreeSet::new();
    for p in o.pods.iter_mut() {
        if p.metadata.namespace.as_deref() != Some(ns) {
            continue;
        }
        let Some(group) = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("scheduling.k8s.io/group-name"))
            .cloned()
        else {
            continue;
        };
        let Some(index) = group
            .strip_prefix("gang-")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        if index % 5 != 0 {
            continue;
        }
        constrained.insert(index);
        p.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("gang".into(), group.clone());
        let selector = json!({"matchLabels": {"gang": group}});
        let Some(spec) = p.spec.as_mut() else {
            continue;
        };
        if index % 10 == 0 {
            spec.affinity = Some(from_json(json!({"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}]}})));
        } else {
            spec.topology_spread_constraints = Some(from_json(json!([{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}])));
        }
    }
    constrained.len()
}

/// The class of the bench's claims: zonal block storage, provisioned at first consumer in
/// zones 0 and 1.
pub const BENCH_CLASS: &str = "zonal-ssd";

/// Gives every twentieth pending pod of `ns` (5%) a PersistentVolumeClaim volume, as a
/// training job's checkpoint disk: alternately a claim already bound to a zonal volume (its
/// node affinity pins the pod to that volume's zone) and an unbound claim of a
/// `WaitForFirstConsumer` class provisioning only in zones 0 and 1 (the member keeps its node
/// until the claim is bound). Returns how many pods mount a claim.
pub fn mount_claims(o: &mut Objects, ns: &str) -> usize {
    o.classes.push(from_json(json!({
        "metadata": {"name": BENCH_CLASS}, "provisioner": "ebs.csi.example",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [
            {"key": "topology.kubernetes.io/zone", "values": ["zone-0", "zone-1"]}]}],
    })));
    let mut mounted = 0usize;
    let mut seen = 0usize;
    for p in o.pods.iter_mut() {
        if p.metadata.namespace.as_deref() != Some(ns) {
            continue;
        }
        seen += 1;
        if !seen.is_multiple_of(20) {
            continue;
        }
        let Some(name) = p.metadata.name.clone() else {
            continue;
        };
        let Some(spec) = p.spec.as_mut() else {
            continue;
        };
        let claim = format!("ckpt-{name}");
        spec.volumes = Some(from_json(json!([
            {"name": "ckpt", "persistentVolumeClaim": {"claimName": claim}}])));
        let bound = mounted.is_multiple_of(2);
        let mut pvc = json!({
            "metadata": {"namespace": ns, "name": claim, "uid": format!("uid-{claim}")},
            "spec": {"storageClassName": BENCH_CLASS, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "100Gi"}}},
        });
        if bound {
            let pv = format!("pv-{claim}");
            pvc["spec"]["volumeName"] = json!(pv);
            pvc["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
            o.volumes.push(from_json(json!({
                "metadata": {"name": pv},
                "spec": {"storageClassName": BENCH_CLASS, "capacity": {"storage": "100Gi"},
                         "accessModes": ["ReadWriteOnce"],
                         "claimRef": {"namespace": ns, "name": claim},
                         "csi": {"driver": "ebs.csi.example", "volumeHandle": format!("vol-{claim}")},
                         "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": "topology.kubernetes.io/zone", "operator": "In",
                              "values": [format!("zone-{}", mounted % 3)]}]}]}}},
                "status": {"phase": "Bound"},
            })));
        }
        o.claims.push(from_json(pvc));
        mounted += 1;
    }
    mounted
}
