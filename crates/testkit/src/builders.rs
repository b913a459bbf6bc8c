//! Fluent builders for model values, and a `Cluster` that assembles them into a snapshot the
//! way the cache does: `node("n1").gpus(8)`, `pod("ns", "w-0").group("train").gpus(1)`,
//! `podgroup("ns", "train").min_member(8)`, `queue("q").weight(3)`.

use caldera_model::{
    Condition, HostPort, Job, Node, PlacementSpec, PodGroupPhase, PodGroupStatus, Queue,
    Requirement, Resources, SelectorOp, SelectorTerm, Snapshot, Taint, TaintEffect, Task,
    TaskStatus, Time, Toleration, Topology, WaitingPod,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The GPU resource name.
pub const GPU: &str = "nvidia.com/gpu";

/// A node builder: 64 CPU, 512Gi, 110 pods, no GPU, Ready.
pub fn node(name: &str) -> NodeBuilder {
    let mut n = Node::new(
        name,
        Resources::from_pairs([("cpu", 64_000), ("memory", 512 << 30)]),
    );
    std::sync::Arc::make_mut(&mut n.labels).insert("kubernetes.io/hostname".into(), name.into());
    NodeBuilder(n)
}

/// Builds a [`Node`].
#[derive(Debug, Clone)]
pub struct NodeBuilder(pub Node);

impl NodeBuilder {
    /// `n` GPUs allocatable.
    pub fn gpus(mut self, n: i64) -> Self {
        self.0.allocatable.set(GPU, n);
        self
    }
    /// `n` CPUs allocatable.
    pub fn cpu(mut self, n: i64) -> Self {
        self.0.allocatable.cpu = n * 1000;
        self
    }
    /// `n` GiB of memory allocatable.
    pub fn memory_gi(mut self, n: i64) -> Self {
        self.0.allocatable.memory = n << 30;
        self
    }
    /// A label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        std::sync::Arc::make_mut(&mut self.0.labels).insert(k.into(), v.into());
        self
    }
    /// A taint.
    pub fn taint(mut self, key: &str, value: &str, effect: TaintEffect) -> Self {
        let mut taints = self.0.taints.to_vec();
        taints.push(Taint {
            key: key.into(),
            value: value.into(),
            effect,
        });
        self.0.taints = taints.into();
        self
    }
    /// Cordoned.
    pub fn unschedulable(mut self) -> Self {
        self.0.unschedulable = true;
        self
    }
    /// Not Ready.
    pub fn not_ready(mut self) -> Self {
        self.0.ready = false;
        self
    }
    /// At most `n` pods.
    pub fn max_pods(mut self, n: i64) -> Self {
        self.0.max_pods = n;
        self
    }
}

/// A pod builder: requests 1 CPU, in namespace `ns`, ours, Pending.
pub fn pod(ns: &str, name: &str) -> PodBuilder {
    PodBuilder {
        namespace: ns.into(),
        name: name.into(),
        group: None,
        queue: None,
        request: Resources::from_pairs([("cpu", 1000)]),
        node: None,
        status: TaskStatus::Pending,
        priority: 0,
        role: None,
        gated: false,
        spec: PlacementSpec::default(),
        created: Time(0),
        ours: true,
        pending_reason: None,
        labels: BTreeMap::new(),
        controller: None,
        no_consolidate: false,
        started: None,
    }
}

/// Builds a pod: a task of a job, or load on a node.
#[derive(Debug, Clone)]
pub struct PodBuilder {
    namespace: String,
    name: String,
    group: Option<String>,
    queue: Option<String>,
    request: Resources,
    node: Option<String>,
    status: TaskStatus,
    priority: i32,
    role: Option<String>,
    gated: bool,
    spec: PlacementSpec,
    created: Time,
    ours: bool,
    pending_reason: Option<Arc<caldera_model::PendingReason>>,
    labels: BTreeMap<String, String>,
    controller: Option<Arc<caldera_model::Controller>>,
    no_consolidate: bool,
    started: Option<Time>,
}

impl PodBuilder {
    /// Owned by a controller of `kind` named `name` (uid `uid-<kind>-<name>`) that re-creates
    /// it, in slot `slot` (`pod-template-hash`, index, ...).
    pub fn controlled_by(mut self, kind: &str, name: &str, slot: Option<&str>) -> Self {
        self.controller = Some(Arc::new(caldera_model::Controller {
            kind: kind.into(),
            name: name.into(),
            uid: format!("uid-{kind}-{name}").into(),
            slot: slot.map(Arc::from),
        }));
        self
    }
    /// Annotated `caldera.sh/no-consolidate` (or its PodGroup or namespace is).
    pub fn no_consolidate(mut self) -> Self {
        self.no_consolidate = true;
        self
    }
    /// Started at `t` (default: its creation time).
    pub fn started(mut self, t: Time) -> Self {
        self.started = Some(t);
        self
    }
    /// Member of PodGroup `group` (same namespace).
    pub fn group(mut self, group: &str) -> Self {
        self.group = Some(group.into());
        self
    }
    /// Queue annotation (for pods without a group).
    pub fn queue(mut self, q: &str) -> Self {
        self.queue = Some(q.into());
        self
    }
    /// Requests `n` GPUs.
    pub fn gpus(mut self, n: i64) -> Self {
        self.request.set(GPU, n);
        self
    }
    /// Requests `m` millicores.
    pub fn cpu_milli(mut self, m: i64) -> Self {
        self.request.cpu = m;
        self
    }
    /// Requests `n` GiB of memory.
    pub fn memory_gi(mut self, n: i64) -> Self {
        self.request.memory = n << 30;
        self
    }
    /// Requests nothing at all (best-effort).
    pub fn best_effort(mut self) -> Self {
        self.request = Resources::new();
        self
    }
    /// Bound to `node` (phase Pending, as with no kubelet).
    pub fn on(mut self, node: &str) -> Self {
        self.node = Some(node.into());
        self.status = TaskStatus::Bound;
        self
    }
    /// Phase Running (on its node).
    pub fn running(mut self) -> Self {
        self.status = TaskStatus::Running;
        self
    }
    /// Phase Succeeded.
    pub fn succeeded(mut self) -> Self {
        self.status = TaskStatus::Succeeded;
        self
    }
    /// Terminating.
    pub fn terminating(mut self) -> Self {
        self.status = TaskStatus::Releasing;
        self
    }
    /// Pod priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
    /// Role (`volcano.sh/task-spec`).
    pub fn role(mut self, r: &str) -> Self {
        self.role = Some(r.into());
        self
    }
    /// Has a scheduling gate.
    pub fn gated(mut self) -> Self {
        self.gated = true;
        self
    }
    /// `spec.nodeSelector` entry.
    pub fn selector(mut self, k: &str, v: &str) -> Self {
        self.spec.node_selector.insert(k.into(), v.into());
        self
    }
    /// A required node affinity term with one expression.
    pub fn affinity(mut self, key: &str, op: SelectorOp, values: &[&str]) -> Self {
        let term = SelectorTerm {
            expressions: vec![Requirement {
                key: key.into(),
                op,
                values: values.iter().map(|s| s.to_string()).collect(),
            }],
            fields: vec![],
        };
        self.spec
            .required_terms
            .get_or_insert_with(Vec::new)
            .push(term);
        self
    }
    /// A preferred node affinity term.
    pub fn prefer(mut self, weight: i32, key: &str, value: &str) -> Self {
        let term = SelectorTerm {
            expressions: vec![Requirement {
                key: key.into(),
                op: SelectorOp::In,
                values: vec![value.into()],
            }],
            fields: vec![],
        };
        self.spec.preferred_terms.push((weight, term));
        self
    }
    /// Tolerates taints with `key` (operator Exists, any effect).
    pub fn tolerate(mut self, key: &str) -> Self {
        self.spec.tolerations.push(Toleration {
            key: key.into(),
            exists: true,
            value: String::new(),
            effect: None,
        });
        self
    }
    /// Asks for host port `port`/TCP.
    pub fn host_port(mut self, port: i32) -> Self {
        self.spec.host_ports.push(HostPort {
            ip: "0.0.0.0".into(),
            protocol: "TCP".into(),
            port,
        });
        self
    }
    /// Created at `secs` seconds.
    pub fn created(mut self, secs: i64) -> Self {
        self.created = Time::from_secs(secs);
        self
    }
    /// Belongs to another scheduler: counts on its node, never placed.
    pub fn foreign(mut self) -> Self {
        self.ours = false;
        self
    }
    /// Has label `k=v`.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.labels.insert(k.into(), v.into());
        self
    }
    /// Required pod anti-affinity to pods (of its namespace) labelled `k=v`, over `topology`.
    pub fn anti_affinity(mut self, k: &str, v: &str, topology: &str) -> Self {
        let term = self.term(k, v, topology);
        self.spec.pods.anti_affinity.push(term);
        self
    }
    /// Required pod affinity to pods (of its namespace) labelled `k=v`, over `topology`.
    pub fn pod_affinity(mut self, k: &str, v: &str, topology: &str) -> Self {
        let term = self.term(k, v, topology);
        self.spec.pods.affinity.push(term);
        self
    }
    /// A topology spread constraint over pods labelled `k=v` (`hard`: DoNotSchedule).
    pub fn spread(mut self, max_skew: u32, topology: &str, k: &str, v: &str, hard: bool) -> Self {
        self.spec.pods.spread.push(caldera_model::SpreadConstraint {
            max_skew,
            topology_key: topology.into(),
            hard,
            selector: Some(Self::selector_of(k, v)),
            namespace: self.namespace.clone(),
            min_domains: None,
            honor_node_affinity: true,
            honor_taints: false,
        });
        self
    }
    fn selector_of(k: &str, v: &str) -> caldera_model::LabelSelector {
        caldera_model::LabelSelector {
            requirements: vec![caldera_model::Requirement {
                key: k.into(),
                op: SelectorOp::In,
                values: vec![v.into()],
            }],
        }
    }
    fn term(&self, k: &str, v: &str, topology: &str) -> caldera_model::PodAffinityTerm {
        caldera_model::PodAffinityTerm {
            selector: Some(Self::selector_of(k, v)),
            namespaces: caldera_model::Namespaces::Only(vec![self.namespace.clone()]),
            topology_key: topology.into(),
        }
    }
    /// Carries this `PodScheduled=False` condition already.
    pub fn pending_reason(mut self, reason: &str, message: &str) -> Self {
        self.pending_reason = Some(Arc::new(caldera_model::PendingReason {
            reason: reason.into(),
            message: message.into(),
        }));
        self
    }
}

/// A PodGroup builder: minMember 1, queue `default`.
pub fn podgroup(ns: &str, name: &str) -> GroupBuilder {
    GroupBuilder {
        namespace: ns.into(),
        name: name.into(),
        min_member: 1,
        min_task_member: BTreeMap::new(),
        queue: "default".into(),
        priority: 0,
        min_resources: None,
        timeout: None,
        topology: None,
        sub_group_policies: Vec::new(),
        unsupported: None,
        phase: PodGroupPhase::Pending,
        conditions: vec![],
        created: Time(0),
        pending_since: None,
        min_runtime: None,
    }
}

/// Builds a PodGroup.
#[derive(Debug, Clone)]
pub struct GroupBuilder {
    namespace: String,
    name: String,
    min_member: u32,
    min_task_member: BTreeMap<String, u32>,
    queue: String,
    priority: i32,
    min_resources: Option<Resources>,
    timeout: Option<u64>,
    topology: Option<Topology>,
    sub_group_policies: Vec<caldera_model::SubGroupPolicy>,
    unsupported: Option<Arc<str>>,
    phase: PodGroupPhase,
    conditions: Vec<Condition>,
    created: Time,
    pending_since: Option<Time>,
    min_runtime: Option<Result<i64, Arc<str>>>,
}

impl GroupBuilder {
    /// Annotation `caldera.sh/min-runtime` as the cache reads it: `Ok(ms)`, or `Err(why)` for
    /// a malformed value.
    pub fn min_runtime(mut self, value: Result<i64, &str>) -> Self {
        self.min_runtime = Some(value.map_err(Arc::from));
        self
    }
    /// `minMember`.
    pub fn min_member(mut self, n: u32) -> Self {
        self.min_member = n;
        self
    }
    /// `minTaskMember[role]`.
    pub fn min_task(mut self, role: &str, n: u32) -> Self {
        self.min_task_member.insert(role.into(), n);
        self
    }
    /// `queue`.
    pub fn queue(mut self, q: &str) -> Self {
        self.queue = q.into();
        self
    }
    /// Priority value.
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
    /// `minResources` of `gpus` GPUs.
    pub fn min_gpus(mut self, gpus: i64) -> Self {
        self.min_resources = Some(Resources::from_pairs([(GPU, gpus)]));
        self
    }
    /// `scheduleTimeoutSeconds`.
    pub fn timeout(mut self, secs: u64) -> Self {
        self.timeout = Some(secs);
        self
    }
    /// Topology rule: one tier from node label `key` (Caldera's `spec.topology`).
    pub fn topology(mut self, required: bool, key: &str) -> Self {
        self.topology = Some(Topology::one_tier(key, required));
        self
    }
    /// Volcano's `networkTopology` over the cluster's HyperNodes: `hard` (`required`) up to
    /// tier `highest`, or `soft`.
    pub fn network_topology(mut self, required: bool, highest: u32) -> Self {
        self.topology = Some(Topology {
            required,
            source: caldera_model::TopologySource::HyperNodes,
            highest: caldera_model::TierLimit::Tier(highest),
        });
        self
    }
    /// A `subGroupPolicy` entry named `name`: members split by the values of label `key`
    /// (`matchLabelKeys: [key]`), `size` members per sub-group, `min` sub-groups required,
    /// each sub-group under `networkTopology` `hard` (`required`) up to tier `highest` or
    /// `soft` when `rule` is given.
    pub fn sub_groups(
        mut self,
        name: &str,
        key: &str,
        size: u32,
        min: u32,
        rule: Option<(bool, u32)>,
    ) -> Self {
        self.sub_group_policies.push(caldera_model::SubGroupPolicy {
            name: name.into(),
            selector: None,
            match_label_keys: vec![key.to_string()],
            size: size.max(1),
            min,
            topology: rule.map(|(required, highest)| Topology {
                required,
                source: caldera_model::TopologySource::HyperNodes,
                highest: caldera_model::TierLimit::Tier(highest),
            }),
        });
        self
    }
    /// Marks the PodGroup as using an input Caldera does not honour yet.
    pub fn unsupported(mut self, what: &str) -> Self {
        self.unsupported = Some(what.into());
        self
    }
    /// Current phase.
    pub fn phase(mut self, p: PodGroupPhase) -> Self {
        self.phase = p;
        self
    }
    /// Created at `secs` seconds.
    pub fn created(mut self, secs: i64) -> Self {
        self.created = Time::from_secs(secs);
        self
    }
    /// Waiting (valid) since `secs` seconds.
    pub fn pending_since(mut self, secs: i64) -> Self {
        self.pending_since = Some(Time::from_secs(secs));
        self
    }
}

/// A queue builder: weight 1, open, no limits.
pub fn queue(name: &str) -> QueueBuilder {
    QueueBuilder(Queue::new(name))
}

/// Builds a [`Queue`].
#[derive(Debug, Clone)]
pub struct QueueBuilder(pub Queue);

impl QueueBuilder {
    /// Weight.
    pub fn weight(mut self, w: u32) -> Self {
        self.0.weight = w;
        self
    }
    /// Capability of `gpus` GPUs.
    pub fn capability_gpus(mut self, gpus: i64) -> Self {
        self.0.capability = Some(Resources::from_pairs([(GPU, gpus)]));
        self.0.zero_capability = if gpus == 0 {
            vec![GPU.into()]
        } else {
            Vec::new()
        };
        self
    }
    /// Guarantee of `gpus` GPUs.
    pub fn guarantee_gpus(mut self, gpus: i64) -> Self {
        self.0.guarantee = Resources::from_pairs([(GPU, gpus)]);
        self
    }
    /// Closed.
    pub fn closed(mut self) -> Self {
        self.0.open = false;
        self
    }
    /// Queue priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.0.priority = p;
        self
    }
    /// Explicit deserved share of `gpus` GPUs.
    pub fn deserved_gpus(mut self, gpus: i64) -> Self {
        self.0.deserved = Some(Resources::from_pairs([(GPU, gpus)]));
        self
    }
    /// Parent queue (`spec.parent`).
    pub fn parent(mut self, parent: &str) -> Self {
        self.0.parent = Some(parent.into());
        self
    }
    /// A usage record (`status.usage`): since `at`, the queue has held `held_gpus` (a fraction
    /// of the cluster's GPUs), after a decayed GPU usage of `decayed_gpus` (fractions).
    pub fn gpu_usage(mut self, at: caldera_model::Time, decayed_gpus: f64, held_gpus: f64) -> Self {
        let ppm = |f: f64| (f * f64::from(caldera_model::USAGE_SCALE)).round() as u32;
        let entry = |f: f64| {
            (f > 0.0)
                .then(|| (std::sync::Arc::<str>::from(GPU), ppm(f)))
                .into_iter()
                .collect()
        };
        let status = self.0.status.get_or_insert_with(Default::default);
        status.usage = Some(caldera_model::QueueUsage {
            at,
            decayed: entry(decayed_gpus),
            held: entry(held_gpus),
        });
        self
    }
}

/// A cluster under construction.
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    nodes: Vec<NodeBuilder>,
    pods: Vec<PodBuilder>,
    groups: Vec<GroupBuilder>,
    queues: Vec<QueueBuilder>,
    hypernodes: Vec<HyperNodeBuilder>,
}

/// A HyperNode: a domain of tier `tier` holding nodes and child HyperNodes by name.
pub fn hypernode(name: &str, tier: u32) -> HyperNodeBuilder {
    HyperNodeBuilder {
        name: name.into(),
        tier,
        tier_name: None,
        nodes: Vec::new(),
        children: Vec::new(),
    }
}

/// Builds a HyperNode (the model's domain, as the cache makes it from the object).
#[derive(Debug, Clone)]
pub struct HyperNodeBuilder {
    name: String,
    tier: u32,
    tier_name: Option<String>,
    nodes: Vec<String>,
    children: Vec<String>,
}

impl HyperNodeBuilder {
    /// `spec.tierName`.
    pub fn tier_name(mut self, name: &str) -> Self {
        self.tier_name = Some(name.into());
        self
    }
    /// Node members by name.
    pub fn nodes<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Self {
        self.nodes.extend(names.into_iter().map(String::from));
        self
    }
    /// HyperNode members by name.
    pub fn children<'a>(mut self, names: impl IntoIterator<Item = &'a str>) -> Self {
        self.children.extend(names.into_iter().map(String::from));
        self
    }
}

impl Cluster {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a node.
    pub fn node(mut self, n: NodeBuilder) -> Self {
        self.nodes.push(n);
        self
    }
    /// Adds `count` identical nodes named `{prefix}-{i}`.
    pub fn nodes(
        mut self,
        prefix: &str,
        count: usize,
        f: impl Fn(NodeBuilder) -> NodeBuilder,
    ) -> Self {
        for i in 0..count {
            self.nodes.push(f(node(&format!("{prefix}-{i}"))));
        }
        self
    }
    /// Adds a HyperNode.
    pub fn hypernode(mut self, h: HyperNodeBuilder) -> Self {
        self.hypernodes.push(h);
        self
    }
    /// Adds a pod.
    pub fn pod(mut self, p: PodBuilder) -> Self {
        self.pods.push(p);
        self
    }
    /// Adds `count` members `{name}-{i}` of PodGroup `group` in `ns`, each shaped by `f`.
    pub fn members(
        mut self,
        ns: &str,
        group: &str,
        count: usize,
        f: impl Fn(PodBuilder) -> PodBuilder,
    ) -> Self {
        for i in 0..count {
            self.pods
                .push(f(pod(ns, &format!("{group}-{i}")).group(group)));
        }
        self
    }
    /// Adds a PodGroup.
    pub fn group(mut self, g: GroupBuilder) -> Self {
        self.groups.push(g);
        self
    }
    /// Adds a queue.
    pub fn queue(mut self, q: QueueBuilder) -> Self {
        self.queues.push(q);
        self
    }

    /// The HyperNode tree over `nodes` (sorted by name).
    fn topology(&self, nodes: &[caldera_model::Node]) -> caldera_model::TopologyTree {
        let by_name: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (&*n.name, i))
            .collect();
        let index = |name: &str| by_name.get(name).copied();
        let hn_index: HashMap<&str, usize> = self
            .hypernodes
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.as_str(), i))
            .collect();
        let mut domains: Vec<caldera_model::Domain> = self
            .hypernodes
            .iter()
            .map(|h| caldera_model::Domain {
                name: h.name.as_str().into(),
                tier: h.tier,
                parent: None,
                nodes: h
                    .nodes
                    .iter()
                    .filter_map(|n| index(n))
                    .map(|i| i as u32)
                    .collect(),
            })
            .collect();
        // Parents, then every domain's nodes include its descendants' (children before parents
        // by tier).
        let mut order: Vec<usize> = (0..self.hypernodes.len()).collect();
        order.sort_by_key(|&i| self.hypernodes[i].tier);
        for &p in &order {
            for child in &self.hypernodes[p].children {
                if let Some(&c) = hn_index.get(child.as_str()) {
                    domains[c].parent = Some(p as u32);
                    let mine = domains[c].nodes.clone();
                    domains[p].nodes.extend(mine);
                }
            }
        }
        let tier_names = self
            .hypernodes
            .iter()
            .filter_map(|h| Some((h.tier_name.as_deref()?.into(), h.tier)))
            .collect();
        caldera_model::TopologyTree::from_domains(domains, tier_names, nodes.len(), Vec::new())
    }

    /// Assembles the snapshot as the cache would.
    pub fn snapshot(&self) -> Snapshot {
        let mut nodes: Vec<Node> = self.nodes.iter().map(|n| n.0.clone()).collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut queues: Vec<Queue> = self.queues.iter().map(|q| q.0.clone()).collect();
        if !queues.iter().any(|q| &*q.name == "default") {
            let mut d = Queue::new("default");
            d.exists = false;
            queues.push(d);
        }
        // Pods on nodes count there, whoever scheduled them, unless finished.
        for p in &self.pods {
            if let Some(n) = &p.node {
                if matches!(p.status, TaskStatus::Succeeded | TaskStatus::Failed) {
                    continue;
                }
                if let Some(node) = nodes.iter_mut().find(|x| &*x.name == n.as_str()) {
                    node.add_pod(&p.request, &p.spec.host_ports);
                }
            }
        }
        let mut jobs: Vec<Job> = Vec::new();
        for g in &self.groups {
            jobs.push(Job {
                id: format!("{}/{}", g.namespace, g.name).into(),
                namespace: g.namespace.as_str().into(),
                name: g.name.as_str().into(),
                uid: format!("uid-pg-{}-{}", g.namespace, g.name).into(),
                queue: g.queue.as_str().into(),
                min_member: g.min_member.max(1),
                min_task_member: g.min_task_member.clone(),
                priority: g.priority,
                min_resources: g.min_resources.clone(),
                timeout_seconds: g.timeout,
                topology: g.topology.clone(),
                sub_group_policies: g.sub_group_policies.clone(),
                unsupported: g.unsupported.clone(),
                created: g.created,
                pending_since: g.pending_since,
                status: Some(PodGroupStatus {
                    phase: g.phase,
                    conditions: g.conditions.clone(),
                    running: 0,
                    succeeded: 0,
                    failed: 0,
                }),
                tasks: vec![],
                autoscale: false,
                capacity: None,
                native: None,
                moves: Vec::new(),
                min_runtime: g.min_runtime.clone(),
            });
        }
        let mut waiting = Vec::new();
        let mut members: Vec<(String, PodBuilder)> = Vec::new();
        for p in self.pods.iter().filter(|p| p.ours) {
            match &p.group {
                Some(g) => {
                    let id = format!("{}/{}", p.namespace, g);
                    if jobs.iter().any(|j| *j.id == *id) {
                        members.push((id, p.clone()));
                    } else {
                        waiting.push(WaitingPod {
                            uid: format!("uid-{}-{}", p.namespace, p.name).into(),
                            namespace: p.namespace.as_str().into(),
                            name: p.name.as_str().into(),
                            group: id.into(),
                            why: None,
                            created: p.created,
                            pending_reason: p.pending_reason.clone(),
                            consumes: None,
                        });
                    }
                }
                None => {
                    let id = format!("{}/pod:{}", p.namespace, p.name);
                    jobs.push(Job {
                        id: id.as_str().into(),
                        namespace: p.namespace.as_str().into(),
                        name: p.name.as_str().into(),
                        uid: format!("uid-{}-{}", p.namespace, p.name).into(),
                        queue: p.queue.clone().unwrap_or_else(|| "default".into()).into(),
                        min_member: 1,
                        min_task_member: BTreeMap::new(),
                        priority: p.priority,
                        min_resources: None,
                        timeout_seconds: None,
                        topology: None,
                        sub_group_policies: Vec::new(),
                        unsupported: None,
                        created: p.created,
                        pending_since: None,
                        status: None,
                        tasks: vec![],
                        autoscale: false,
                        capacity: None,
                        native: None,
                        moves: Vec::new(),
                        min_runtime: None,
                    });
                    members.push((id, p.clone()));
                }
            }
        }
        for j in &jobs {
            if !queues.iter().any(|q| q.name == j.queue) {
                let mut q = Queue::new(&j.queue);
                q.exists = false;
                q.open = false;
                queues.push(q);
            }
        }
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        jobs.sort_by(|a, b| a.id.cmp(&b.id));
        members.sort_by(|a, b| (&a.1.namespace, &a.1.name).cmp(&(&b.1.namespace, &b.1.name)));
        let mut tasks = Vec::new();
        for (id, p) in members {
            // Every member was pushed with the id of an existing job.
            let Some(ji) = jobs.iter().position(|j| *j.id == *id) else {
                continue;
            };
            jobs[ji].tasks.push(tasks.len());
            tasks.push(Task {
                uid: format!("uid-{}-{}", p.namespace, p.name).into(),
                namespace: p.namespace.as_str().into(),
                name: p.name.as_str().into(),
                job: ji,
                status: p.status,
                node: p.node.as_deref().map(Arc::from),
                request: p.request.clone(),
                priority: p.priority,
                role: p.role.as_deref().map(Arc::from),
                gated: p.gated,
                spec: Arc::new(p.spec.clone()),
                labels: Arc::new(p.labels.clone()),
                created: p.created,
                pending_reason: p.pending_reason.clone(),
                critical: false,
                nominated: None,
                never_preempts: false,
                started: p.started.unwrap_or(p.created),
                budget: None,
                consumes: None,
                volumes: None,
                claims: None,
                controller: p.controller.clone(),
                no_consolidate: p.no_consolidate,
            });
        }
        let mut pods: Vec<caldera_model::PlacedPod> = self
            .pods
            .iter()
            .filter(|p| !matches!(p.status, TaskStatus::Succeeded | TaskStatus::Failed))
            .filter_map(|p| {
                Some(caldera_model::PlacedPod {
                    namespace: p.namespace.as_str().into(),
                    name: p.name.as_str().into(),
                    labels: Arc::new(p.labels.clone()),
                    node: p.node.as_deref()?.into(),
                    terminating: p.status == TaskStatus::Releasing,
                    anti_affinity: p.spec.pods.anti_affinity.clone().into(),
                    scoring_terms: p.spec.pods.scoring_terms(),
                })
            })
            .collect();
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let topology = self.topology(&nodes);
        Snapshot {
            topology,
            nodes,
            tasks,
            jobs,
            queues,
            waiting,
            pods,
            provisioning: None,
            stale_capacity: Vec::new(),
            budgets: Vec::new(),
            volumes: Default::default(),
            dra: Default::default(),
        }
    }
}
