//! `expect` steps: what a scenario says the cluster must look like, and the check that compares
//! it with the store, reporting every mismatch as expected-versus-got.
//!
//! Only what an expectation names is checked. Quantities compare by value (`"8"` equals
//! `8`, `1Gi` equals `1024Mi`); a resource an expectation names and the cluster lacks is 0.

use crate::driver::Simulation;
use crate::store::node_name;
use caldera_api::ProvisioningRequest;
use caldera_model::{Resources, TaskStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Deserializer};
use std::collections::{BTreeMap, BTreeSet};

/// An `expect` step.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// PodGroup checks.
    #[serde(default)]
    pub pod_groups: Vec<PodGroupExpect>,
    /// Pod checks.
    #[serde(default)]
    pub pods: Vec<PodExpect>,
    /// Node checks.
    #[serde(default)]
    pub nodes: Vec<NodeExpect>,
    /// Queue checks.
    #[serde(default)]
    pub queues: Vec<QueueExpect>,
    /// ProvisioningRequest checks, per PodGroup.
    #[serde(default)]
    pub provisioning_requests: Vec<ProvisioningRequestExpect>,
    /// PersistentVolumeClaim checks.
    #[serde(default)]
    pub pvcs: Vec<PvcExpect>,
    /// Checks of the pods a label selector picks (a workload's pods, whose names a
    /// controller generates).
    #[serde(default)]
    pub selected_pods: Vec<SelectedPodsExpect>,
    /// ResourceClaim (DRA) checks.
    #[serde(default)]
    pub resource_claims: Vec<ResourceClaimExpect>,
}

/// What the pods a label selector picks in a namespace must look like. `count`, `bound` and
/// `nodes` are about the pods not being deleted; `terminating` counts the others.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SelectedPodsExpect {
    /// The namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// A label selector (`app=web,tier!=db`, as in `markRunning`).
    pub selector: String,
    /// Pods not being deleted (finished ones included).
    pub count: Option<usize>,
    /// Of those, pods with a node.
    pub bound: Option<usize>,
    /// Pods being deleted (`deletionTimestamp` set), still there.
    pub terminating: Option<usize>,
    /// The exact set of nodes the bound pods not being deleted are on.
    pub nodes: Option<Vec<String>>,
    /// ResourceClaim (DRA) checks.
    #[serde(default)]
    pub resource_claims: Vec<ResourceClaimExpect>,
}

/// What a ResourceClaim (`resource.k8s.io/v1`) must look like: named, or the claim a pod's
/// `spec.resourceClaims[]` entry resolves to.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceClaimExpect {
    /// `namespace/name` (`name` alone means namespace `default`).
    pub name: Option<String>,
    /// A pod, `namespace/name`, whose entry `pod_claim` names the claim.
    pub pod: Option<String>,
    /// The pod's `spec.resourceClaims[].name`.
    pub pod_claim: Option<String>,
    /// `status.allocation` is set (`false`: not set, or no such claim yet).
    pub allocated: Option<bool>,
    /// The exact set of allocated device names.
    pub devices: Option<Vec<String>>,
    /// The node the allocation is limited to: `Some(None)` (`node: null`) means none.
    #[serde(default, deserialize_with = "present")]
    pub node: Option<Option<String>>,
    /// Entries in `status.reservedFor`.
    pub reserved_for: Option<usize>,
    /// Shares of shared devices (consumable capacity): per device name, per capacity name, the
    /// amount the claim's results with a `shareID` consume of it, summed; exactly these devices
    /// must be allocated in shares.
    pub consumed_capacity: Option<BTreeMap<String, BTreeMap<String, String>>>,
}

/// What a PersistentVolumeClaim must look like.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PvcExpect {
    /// `namespace/name` (`name` alone means namespace `default`).
    pub name: String,
    /// The `volume.kubernetes.io/selected-node` annotation: `Some(None)` (`selectedNode: null`)
    /// means none.
    #[serde(default, deserialize_with = "present")]
    pub selected_node: Option<Option<String>>,
    /// `status.phase` (`Pending`, `Bound`, `Lost`).
    pub phase: Option<String>,
    /// `spec.volumeName`: `Some(None)` (`volumeName: null`) means none.
    #[serde(default, deserialize_with = "present")]
    pub volume_name: Option<Option<String>>,
}

/// What the ProvisioningRequests made for one PodGroup must look like.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvisioningRequestExpect {
    /// The PodGroup, `namespace/name` (`name` alone means namespace `default`).
    pub pod_group: String,
    /// Requests for it that exist now (0: none).
    pub live: Option<usize>,
    /// Requests ever created for it.
    pub created: Option<usize>,
    /// State of the newest live one: `Pending`, `Accepted`, `Provisioned`, `Failed`,
    /// `BookingExpired`.
    pub state: Option<String>,
    /// Σ `podSets[].count` of the newest live one.
    pub pods: Option<u32>,
    /// Number of pod sets of the newest live one.
    pub pod_sets: Option<usize>,
}

/// What a PodGroup must look like.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodGroupExpect {
    /// `namespace/name` (`name` alone means namespace `default`).
    pub name: String,
    /// Members with a node.
    pub bound: Option<usize>,
    /// `status.phase` (absent reads as `Pending`).
    pub phase: Option<String>,
    /// A condition that must be present.
    pub condition: Option<ConditionExpect>,
    /// The exact set of nodes its members are bound to.
    pub nodes: Option<Vec<String>>,
    /// At most this many distinct nodes.
    pub max_nodes: Option<usize>,
    /// `spec.minMember` (e.g. of a PodGroup derived from a workload).
    pub min_member: Option<i32>,
    /// `true`: gone (or being deleted); `false`: exists and is not being deleted.
    pub deleted: Option<bool>,
}

/// A PodGroup condition that must be present.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConditionExpect {
    /// `Scheduled` or `Unschedulable`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`/`False`; any when absent.
    pub status: Option<String>,
    /// Reason.
    pub reason: Option<String>,
    /// A substring of the message.
    pub message_contains: Option<String>,
}

/// What a pod must look like.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodExpect {
    /// `namespace/name` (`name` alone means namespace `default`).
    pub name: String,
    /// `Some(None)` (`node: null`): not bound; `Some(Some(n))`: bound to `n`.
    #[serde(default, deserialize_with = "present")]
    pub node: Option<Option<String>>,
    /// `status.phase` (absent reads as `Pending`).
    pub phase: Option<String>,
    /// `status.reason`.
    pub reason: Option<String>,
    /// Reason of the `PodScheduled=False` condition.
    pub condition_reason: Option<String>,
    /// `true`: being deleted (`deletionTimestamp` set) or gone; `false`: exists and is not
    /// being deleted.
    pub deleted: Option<bool>,
}

/// What a node must hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeExpect {
    /// Node name.
    pub name: String,
    /// Σ requests of the pods bound there that have not finished, per named resource.
    #[serde(default)]
    pub allocated: BTreeMap<String, Quantity>,
}

/// What a queue must hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueueExpect {
    /// Queue name.
    pub name: String,
    /// Σ requests of the queue's members that hold a node, per named resource.
    #[serde(default)]
    pub allocated: BTreeMap<String, Quantity>,
    /// A condition that must be present in `status.conditions` (`Schedulable`).
    pub condition: Option<ConditionExpect>,
    /// `true`: the Queue has no condition at all.
    pub no_conditions: Option<bool>,
    /// The decayed GPU usage of the Queue's last usage record (`status.usage.gpu`, a
    /// fraction of the cluster's GPUs with three decimals; `null`: no record).
    #[serde(default, deserialize_with = "present")]
    pub gpu_usage: Option<Option<String>>,
}

/// Tells `node: null` (present, null) from an absent `node`.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// The outcome of one `expect`: how many checks ran, and a line per mismatch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// Checks made.
    pub checks: usize,
    /// `what: expected X, got Y` lines.
    pub failures: Vec<String>,
}

impl Checked {
    fn compare(&mut self, what: &str, expected: &str, got: &str) {
        self.checks += 1;
        if expected != got {
            self.failures
                .push(format!("{what}: expected {expected}, got {got}"));
        }
    }

    fn fail(&mut self, line: String) {
        self.checks += 1;
        self.failures.push(line);
    }
}

fn split_name(name: &str) -> (&str, &str) {
    name.split_once('/').unwrap_or(("default", name))
}

/// Parses an expected ResourceList; the scenario loader has validated it.
pub fn parse_allocated(list: &BTreeMap<String, Quantity>) -> Result<Resources, String> {
    Resources::parse_list(list.iter().map(|(k, v)| (k.as_str(), v.0.as_str())))
        .map_err(|(name, e)| format!("{name}: {e}"))
}

fn phase_of(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending")
}

/// How a pod's `PodScheduled` condition reads for a `conditionReason` check.
fn condition_reason(pod: &Pod) -> String {
    match caldera_cache::pod_condition(pod, "PodScheduled") {
        None => "no PodScheduled condition".into(),
        Some(c) if c.status == "False" => c.reason.clone().unwrap_or_default(),
        Some(c) => format!("PodScheduled={}", c.status),
    }
}

fn compare_resources(
    out: &mut Checked,
    what: &str,
    expected: &Resources,
    got: &Resources,
    names: &[&String],
) {
    for name in names {
        let (e, g) = (expected.get(name), got.get(name));
        let f = |v| caldera_model::resources::format_value(name, v);
        out.compare(&format!("{what} {name}"), &f(e), &f(g));
    }
}

/// Checks `expect` against the simulation's current state.
pub fn check(expect: &Expect, sim: &Simulation) -> Checked {
    let store = sim.store();
    let mut out = Checked::default();

    let mut members: BTreeMap<(String, String), Vec<&Pod>> = BTreeMap::new();
    for pod in store.list::<Pod>() {
        if let Some(group) = store.group_of(pod) {
            let ns = pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            members.entry((ns, group)).or_default().push(pod);
        }
    }
    for e in &expect.pod_groups {
        let what = format!("podGroup {}", e.name);
        let (ns, name) = split_name(&e.name);
        let found = store.podgroup(ns, name);
        if let Some(want) = e.deleted {
            let gone = found
                .as_ref()
                .is_none_or(|pg| pg.metadata.deletion_timestamp.is_some());
            let say = |d: bool| if d { "deleted" } else { "present" };
            out.compare(&what, say(want), say(gone));
        }
        let Some(pg) = found else {
            if e.deleted != Some(true) {
                out.fail(format!("{what}: not found"));
            }
            continue;
        };
        if let Some(want) = e.min_member {
            let got = pg
                .spec
                .min_member
                .map_or("absent".into(), |m| m.to_string());
            out.compare(&format!("{what} minMember"), &want.to_string(), &got);
        }
        let key = (ns.to_string(), name.to_string());
        let pods = members.get(&key).map(Vec::as_slice).unwrap_or_default();
        let nodes: BTreeSet<&str> = pods.iter().filter_map(|p| node_name(p)).collect();
        let bound = pods.iter().filter(|p| node_name(p).is_some()).count();
        if let Some(want) = e.bound {
            out.compare(
                &format!("{what} bound"),
                &want.to_string(),
                &bound.to_string(),
            );
        }
        let status = pg.status.as_ref();
        if let Some(want) = &e.phase {
            let got = status
                .and_then(|s| s.phase.as_ref())
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| "Pending".into());
            out.compare(&format!("{what} phase"), want, &got);
        }
        if let Some(want) = &e.condition {
            let conditions = status
                .and_then(|s| s.conditions.as_ref())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let describe = |c: &caldera_api::PodGroupCondition| {
                format!(
                    "{}={} reason={} message={:?}",
                    c.type_.as_ref().map(|t| t.as_str()).unwrap_or(""),
                    c.status.as_ref().map(|s| s.as_str()).unwrap_or(""),
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or("")
                )
            };
            let found = conditions.iter().find(|c| {
                c.type_.as_ref().is_some_and(|t| t.as_str() == want.type_)
                    && want
                        .status
                        .as_ref()
                        .is_none_or(|s| c.status.as_ref().is_some_and(|cs| cs.as_str() == s))
            });
            let mut expected = want.type_.clone();
            if let Some(s) = &want.status {
                expected = format!("{expected}={s}");
            }
            if let Some(r) = &want.reason {
                expected = format!("{expected} reason={r}");
            }
            if let Some(m) = &want.message_contains {
                expected = format!("{expected} message containing {m:?}");
            }
            let ok = found.is_some_and(|c| {
                want.reason
                    .as_ref()
                    .is_none_or(|r| c.reason.as_deref() == Some(r))
                    && want
                        .message_contains
                        .as_ref()
                        .is_none_or(|m| c.message.as_deref().unwrap_or("").contains(m.as_str()))
            });
            out.checks += 1;
            if !ok {
                let got = if conditions.is_empty() {
                    "no conditions".to_string()
                } else {
                    conditions
                        .iter()
                        .map(describe)
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                out.failures
                    .push(format!("{what} condition: expected {expected}, got {got}"));
            }
        }
        if let Some(want) = &e.nodes {
            let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
            let show = |s: &BTreeSet<&str>| {
                format!("[{}]", s.iter().copied().collect::<Vec<_>>().join(", "))
            };
            out.compare(&format!("{what} nodes"), &show(&want), &show(&nodes));
        }
        if let Some(max) = e.max_nodes {
            out.checks += 1;
            if nodes.len() > max {
                out.failures.push(format!(
                    "{what} maxNodes: expected at most {max}, got {} ({})",
                    nodes.len(),
                    nodes.iter().copied().collect::<Vec<_>>().join(", ")
                ));
            }
        }
    }

    for e in &expect.provisioning_requests {
        check_requests(e, sim, &mut out);
    }

    for e in &expect.pods {
        let what = format!("pod {}", e.name);
        let (ns, name) = split_name(&e.name);
        let pod = store.pod(ns, name);
        if let Some(want) = e.deleted {
            let got = match pod {
                None => "gone",
                Some(p) if p.metadata.deletion_timestamp.is_some() => "being deleted",
                Some(_) => "not deleted",
            };
            let show = |deleted: bool| {
                if deleted {
                    "deleted (being deleted or gone)"
                } else {
                    "not deleted"
                }
            };
            out.compare(
                &format!("{what} deleted"),
                show(want),
                if (got == "not deleted") == want {
                    got
                } else {
                    show(want)
                },
            );
        }
        let Some(pod) = pod else {
            if e.deleted != Some(true) {
                out.fail(format!("{what}: not found"));
            }
            continue;
        };
        if let Some(want) = &e.node {
            let show = |n: Option<&str>| {
                n.map(str::to_string)
                    .unwrap_or_else(|| "null (not bound)".into())
            };
            out.compare(
                &format!("{what} node"),
                &show(want.as_deref()),
                &show(node_name(pod)),
            );
        }
        if let Some(want) = &e.phase {
            out.compare(&format!("{what} phase"), want, phase_of(pod));
        }
        if let Some(want) = &e.reason {
            let got = pod
                .status
                .as_ref()
                .and_then(|s| s.reason.as_deref())
                .unwrap_or("no reason");
            out.compare(&format!("{what} reason"), want, got);
        }
        if let Some(want) = &e.condition_reason {
            out.compare(
                &format!("{what} conditionReason"),
                want,
                &condition_reason(pod),
            );
        }
    }

    for e in &expect.pvcs {
        check_claim(e, sim, &mut out);
    }
    for e in &expect.resource_claims {
        check_resource_claim(e, sim, &mut out);
    }

    for e in &expect.selected_pods {
        check_selected(e, sim, &mut out);
    }

    if !expect.nodes.is_empty() {
        let usage = crate::invariants::node_usage(store);
        for e in &expect.nodes {
            let what = format!("node {}", e.name);
            if store.node(&e.name).is_none() {
                out.fail(format!("{what}: not found"));
                continue;
            }
            let expected = match parse_allocated(&e.allocated) {
                Ok(r) => r,
                Err(msg) => {
                    out.fail(format!("{what} allocated: {msg}"));
                    continue;
                }
            };
            let got = usage
                .get(&e.name)
                .map(|(r, _)| r.clone())
                .unwrap_or_default();
            let names: Vec<&String> = e.allocated.keys().collect();
            compare_resources(
                &mut out,
                &format!("{what} allocated"),
                &expected,
                &got,
                &names,
            );
        }
    }

    if !expect.queues.is_empty() {
        let allocated = queue_allocated(sim);
        for e in &expect.queues {
            let what = format!("queue {}", e.name);
            let expected = match parse_allocated(&e.allocated) {
                Ok(r) => r,
                Err(msg) => {
                    out.fail(format!("{what} allocated: {msg}"));
                    continue;
                }
            };
            let Some(got) = allocated.get(e.name.as_str()) else {
                out.fail(format!("{what}: not found"));
                continue;
            };
            let names: Vec<&String> = e.allocated.keys().collect();
            compare_resources(
                &mut out,
                &format!("{what} allocated"),
                &expected,
                got,
                &names,
            );
            let conditions: Vec<[&str; 4]> = store
                .queue(&e.name)
                .and_then(|q| q.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .into_iter()
                .flatten()
                .map(|c| {
                    [
                        c.type_.as_deref().unwrap_or(""),
                        c.status.as_deref().unwrap_or(""),
                        c.reason.as_deref().unwrap_or(""),
                        c.message.as_deref().unwrap_or(""),
                    ]
                })
                .collect();
            if let Some(want) = &e.condition {
                check_queue_condition(&mut out, &what, want, &conditions);
            }
            if let Some(want) = &e.gpu_usage {
                let got = store
                    .queue(&e.name)
                    .and_then(|q| q.status.as_ref())
                    .and_then(|s| s.usage.as_ref())
                    .and_then(|u| u.gpu.clone());
                let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "null".into());
                out.compare(&format!("{what} gpuUsage"), &show(want), &show(&got));
            }
            if e.no_conditions == Some(true) {
                out.checks += 1;
                if !conditions.is_empty() {
                    out.failures.push(format!(
                        "{what}: expected no conditions, got {}",
                        describe_conditions(&conditions)
                    ));
                }
            }
        }
    }
    out
}

/// Checks one `selectedPods` entry.
fn check_selected(e: &SelectedPodsExpect, sim: &Simulation, out: &mut Checked) {
    let ns = e.namespace.as_deref().unwrap_or("default");
    let what = format!("pods {ns}/{{{}}}", e.selector);
    let selector = match crate::selector::LabelSelector::parse(&e.selector) {
        Ok(s) => s,
        Err(m) => {
            out.fail(format!("{what}: selector: {m}"));
            return;
        }
    };
    let picked: Vec<&Pod> = sim
        .store()
        .list::<Pod>()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == ns)
        .filter(|p| selector.matches(p.metadata.labels.as_ref()))
        .collect();
    let (terminating, live): (Vec<&Pod>, Vec<&Pod>) = picked
        .into_iter()
        .partition(|p| p.metadata.deletion_timestamp.is_some());
    let bound: Vec<&Pod> = live
        .iter()
        .copied()
        .filter(|p| node_name(p).is_some())
        .collect();
    if let Some(want) = e.count {
        out.compare(
            &format!("{what} count"),
            &want.to_string(),
            &live.len().to_string(),
        );
    }
    if let Some(want) = e.bound {
        out.compare(
            &format!("{what} bound"),
            &want.to_string(),
            &bound.len().to_string(),
        );
    }
    if let Some(want) = e.terminating {
        out.compare(
            &format!("{what} terminating"),
            &want.to_string(),
            &terminating.len().to_string(),
        );
    }
    if let Some(want) = &e.nodes {
        let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
        let got: BTreeSet<&str> = bound.iter().filter_map(|p| node_name(p)).collect();
        let show =
            |s: &BTreeSet<&str>| format!("[{}]", s.iter().copied().collect::<Vec<_>>().join(", "));
        out.compare(&format!("{what} nodes"), &show(&want), &show(&got));
    }
}

/// `type=status reason=… message=…` of each condition, `; `-separated.
fn describe_conditions(conditions: &[[&str; 4]]) -> String {
    if conditions.is_empty() {
        return "no conditions".into();
    }
    conditions
        .iter()
        .map(|[t, s, r, m]| format!("{t}={s} reason={r} message={m:?}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Checks that a Queue has a condition as `want` says (`[type, status, reason, message]`).
fn check_queue_condition(
    out: &mut Checked,
    what: &str,
    want: &ConditionExpect,
    conditions: &[[&str; 4]],
) {
    out.checks += 1;
    let ok = conditions.iter().any(|[t, s, r, m]| {
        *t == want.type_
            && want.status.as_deref().is_none_or(|w| w == *s)
            && want.reason.as_deref().is_none_or(|w| w == *r)
            && want
                .message_contains
                .as_deref()
                .is_none_or(|w| m.contains(w))
    });
    if !ok {
        let mut expected = want.type_.clone();
        if let Some(s) = &want.status {
            expected = format!("{expected}={s}");
        }
        if let Some(r) = &want.reason {
            expected = format!("{expected} reason={r}");
        }
        if let Some(m) = &want.message_contains {
            expected = format!("{expected} message containing {m:?}");
        }
        out.failures.push(format!(
            "{what} condition: expected {expected}, got {}",
            describe_conditions(conditions)
        ));
    }
}

/// Σ requests of each queue's members that hold a node (not finished), from a fresh snapshot,
/// summed up the queue tree (`spec.parent`): an inner queue counts its whole subtree. Every
/// queue the snapshot knows is present, at zero if it holds nothing.
pub fn queue_allocated(sim: &Simulation) -> BTreeMap<String, Resources> {
    // Devices count as the resources their classes name, as the session counts them.
    let snap = sim.session_view();
    let tree = caldera_queue::QueueTree::of(&snap.queues);
    let mut out: BTreeMap<String, Resources> = snap
        .queues
        .iter()
        .map(|q| (q.name.to_string(), Resources::new()))
        .collect();
    for job in &snap.jobs {
        let mut held = Resources::new();
        for &t in &job.tasks {
            let task = &snap.tasks[t];
            let holds = task.node.is_some()
                && !matches!(task.status, TaskStatus::Succeeded | TaskStatus::Failed);
            if holds {
                held.add(&task.request);
            }
        }
        out.entry(job.queue.to_string()).or_default().add(&held);
        if let Some(q) = snap.queue_index(&job.queue) {
            for &a in tree.ancestors(q) {
                if a < snap.queues.len() {
                    out.entry(tree.name(a).to_string()).or_default().add(&held);
                }
            }
        }
    }
    out
}

fn check_claim(e: &PvcExpect, sim: &Simulation, out: &mut Checked) {
    let what = format!("pvc {}", e.name);
    let (ns, name) = split_name(&e.name);
    let Some(claim) = sim.store().claim(ns, name) else {
        out.fail(format!("{what}: not found"));
        return;
    };
    let show = |v: Option<&str>| {
        v.map(str::to_string)
            .unwrap_or_else(|| "null (none)".into())
    };
    if let Some(want) = &e.selected_node {
        let got = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(caldera_actors::pv_controller::SELECTED_NODE))
            .map(String::as_str);
        out.compare(
            &format!("{what} selectedNode"),
            &show(want.as_deref()),
            &show(got),
        );
    }
    if let Some(want) = &e.phase {
        let got = claim
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Pending");
        out.compare(&format!("{what} phase"), want, got);
    }
    if let Some(want) = &e.volume_name {
        let got = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .filter(|v| !v.is_empty());
        out.compare(
            &format!("{what} volumeName"),
            &show(want.as_deref()),
            &show(got),
        );
    }
}

/// The ResourceClaim an expectation names: by name, or through a pod's
/// `status.resourceClaimStatuses` (template claims) or `spec.resourceClaims` (named claims).
/// `Err` says why the name cannot be resolved; `Ok(None)`: no such claim (yet).
fn expected_claim<'s>(
    e: &ResourceClaimExpect,
    store: &'s crate::store::Store,
) -> Result<
    (
        String,
        Option<&'s k8s_openapi::api::resource::v1::ResourceClaim>,
    ),
    String,
> {
    if let Some(name) = &e.name {
        let (ns, name) = split_name(name);
        return Ok((
            format!("resourceClaim {ns}/{name}"),
            store.resource_claim(ns, name),
        ));
    }
    let (Some(pod), Some(entry)) = (&e.pod, &e.pod_claim) else {
        return Err("resourceClaims: give `name`, or `pod` and `podClaim`".into());
    };
    let (ns, pod_name) = split_name(pod);
    let what = format!("resourceClaim {entry} of pod {ns}/{pod_name}");
    let Some(p) = store.pod(ns, pod_name) else {
        return Err(format!("{what}: pod not found"));
    };
    let spec_entry = p
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.name == *entry));
    let Some(spec_entry) = spec_entry else {
        return Err(format!(
            "{what}: the pod has no such spec.resourceClaims entry"
        ));
    };
    let claim_name = match &spec_entry.resource_claim_name {
        Some(n) => Some(n.clone()),
        None => p
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_ref())
            .and_then(|ss| ss.iter().find(|s| s.name == *entry))
            .and_then(|s| s.resource_claim_name.clone()),
    };
    Ok((what, claim_name.and_then(|n| store.resource_claim(ns, &n))))
}

fn check_resource_claim(e: &ResourceClaimExpect, sim: &Simulation, out: &mut Checked) {
    let (what, claim) = match expected_claim(e, sim.store()) {
        Ok(found) => found,
        Err(why) => return out.fail(why),
    };
    let allocation = claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.allocation.as_ref());
    if let Some(want) = e.allocated {
        out.compare(
            &format!("{what} allocated"),
            &want.to_string(),
            &allocation.is_some().to_string(),
        );
    }
    let Some(claim) = claim else {
        if e.devices.is_some()
            || e.node.is_some()
            || e.reserved_for.is_some()
            || e.consumed_capacity.is_some()
        {
            out.fail(format!("{what}: not found"));
        }
        return;
    };
    if let Some(want) = &e.devices {
        let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
        let got: BTreeSet<&str> = allocation
            .and_then(|a| a.devices.as_ref())
            .map(|d| {
                d.results
                    .iter()
                    .flatten()
                    .map(|r| r.device.as_str())
                    .collect()
            })
            .unwrap_or_default();
        let show = |s: &BTreeSet<&str>| format!("{:?}", s.iter().collect::<Vec<_>>());
        out.compare(&format!("{what} devices"), &show(&want), &show(&got));
    }
    if let Some(want) = &e.node {
        let got = allocation
            .and_then(|a| a.node_selector.as_ref())
            .and_then(|sel| match sel.node_selector_terms.as_slice() {
                [t] => t.match_fields.as_ref().and_then(|f| match f.as_slice() {
                    [r] if r.key == "metadata.name" && r.operator == "In" => {
                        r.values.as_ref().and_then(|v| v.first().cloned())
                    }
                    _ => None,
                }),
                _ => None,
            });
        let show = |v: Option<&str>| {
            v.map(str::to_string)
                .unwrap_or_else(|| "null (none)".into())
        };
        out.compare(
            &format!("{what} node"),
            &show(want.as_deref()),
            &show(got.as_deref()),
        );
    }
    if let Some(want) = &e.consumed_capacity {
        let milli = |q: &str| caldera_model::parse_quantity(q, caldera_model::Scale::Milli);
        let mut got: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for r in allocation
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_ref())
            .into_iter()
            .flatten()
            .filter(|r| r.share_id.is_some())
        {
            let device = got.entry(r.device.clone()).or_default();
            for (name, q) in r.consumed_capacity.iter().flatten() {
                *device.entry(name.clone()).or_default() += milli(&q.0).unwrap_or(i64::MIN / 4);
            }
        }
        let show = |m: &BTreeMap<String, BTreeMap<String, i64>>| {
            m.iter()
                .map(|(d, caps)| {
                    let caps: Vec<String> = caps
                        .iter()
                        .map(|(n, v)| {
                            format!("{n}={}", caldera_model::dra::Quantity::from_milli(*v))
                        })
                        .collect();
                    format!("{d}: {}", caps.join(", "))
                })
                .collect::<Vec<_>>()
                .join("; ")
        };
        let mut wanted: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for (device, caps) in want {
            for (name, q) in caps {
                match milli(q) {
                    Ok(v) => {
                        wanted
                            .entry(device.clone())
                            .or_default()
                            .insert(name.clone(), v);
                    }
                    Err(err) => {
                        return out.fail(format!("{what} consumedCapacity {device}.{name}: {err}"))
                    }
                }
            }
        }
        out.compare(
            &format!("{what} consumedCapacity"),
            &show(&wanted),
            &show(&got),
        );
    }
    if let Some(want) = e.reserved_for {
        let got = claim
            .status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .map_or(0, Vec::len);
        out.compare(
            &format!("{what} reservedFor"),
            &want.to_string(),
            &got.to_string(),
        );
    }
}

fn check_requests(e: &ProvisioningRequestExpect, sim: &Simulation, out: &mut Checked) {
    let store = sim.store();
    let what = format!("provisioningRequests for {}", e.pod_group);
    let (ns, name) = split_name(&e.pod_group);
    let mine: Vec<_> = store
        .list::<ProvisioningRequest>()
        .filter_map(|pr| caldera_cache::provisioning::request_info(pr).map(|i| (pr, i)))
        .filter(|(_, i)| *i.request.namespace == *ns && *i.podgroup == *name)
        .collect();
    if let Some(want) = e.live {
        out.compare(
            &format!("{what} live"),
            &want.to_string(),
            &mine.len().to_string(),
        );
    }
    if let Some(want) = e.created {
        let got = store.requests_created(&format!("{ns}/{name}"));
        out.compare(
            &format!("{what} created"),
            &want.to_string(),
            &got.to_string(),
        );
    }
    let newest = mine
        .iter()
        .max_by_key(|(_, i)| (i.request.attempt, i.request.created));
    let state = |s: caldera_model::CapacityState| match s {
        caldera_model::CapacityState::Pending => "Pending",
        caldera_model::CapacityState::Accepted => "Accepted",
        caldera_model::CapacityState::Provisioned => "Provisioned",
        caldera_model::CapacityState::Failed => "Failed",
        caldera_model::CapacityState::BookingExpired => "BookingExpired",
    };
    let none = "no request".to_string();
    if let Some(want) = &e.state {
        let got = newest.map(|(_, i)| state(i.request.state).to_string());
        out.compare(
            &format!("{what} state"),
            want,
            got.as_ref().unwrap_or(&none),
        );
    }
    if let Some(want) = e.pods {
        let got = newest.map(|(pr, _)| {
            pr.spec
                .pod_sets
                .iter()
                .map(|s| i64::from(s.count))
                .sum::<i64>()
                .to_string()
        });
        out.compare(
            &format!("{what} pods"),
            &want.to_string(),
            got.as_ref().unwrap_or(&none),
        );
    }
    if let Some(want) = e.pod_sets {
        let got = newest.map(|(pr, _)| pr.spec.pod_sets.len().to_string());
        out.compare(
            &format!("{what} podSets"),
            &want.to_string(),
            got.as_ref().unwrap_or(&none),
        );
    }
}
