//! The snapshot: assembled from the index's converted objects and running totals, never
//! re-converted.

use crate::convert::{implicit_default_queue, missing_queue, GroupInfo, PodInfo};
use crate::grouping::{DerivedCache, Resolved};
use crate::index::{ClusterIndex, PodKey, SnapshotOptions};
use caldera_api::DEFAULT_QUEUE;
use caldera_model::{
    Job, LabelSelector, Namespaces, Node, PlacedPod, PlacementSpec, SelectorOp, Snapshot, Task,
    TaskStatus, WaitingPod,
};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

impl ClusterIndex {
    /// Assembles a snapshot. Nothing is re-converted: nodes get their usage from the running
    /// totals, and only our pods (by `opts.scheduler_names`) are visited. Deterministic: the
    /// same objects and options give an equal snapshot, given the same nodes booked for
    /// provisioned autoscaler requests by the snapshots before (bookings stick, see
    /// `book_nodes`; with none, a fresh index derives them from the objects alone).
    ///
    /// - Every node, with `used`/`pod_count`/`host_ports` from all pods on it.
    /// - One job per PodGroup that has at least one of our pods or no pods at all (a PodGroup
    ///   whose pods all belong to another scheduler is left to that scheduler), and one
    ///   implicit job per pod of ours without a group.
    /// - Our pending pods whose PodGroup does not exist go to `waiting`.
    /// - Every queue, plus `default` if missing, plus a closed stand-in for each queue a job
    ///   names that does not exist.
    pub fn snapshot(&self, opts: &SnapshotOptions) -> Snapshot {
        // Each node carries its pods' usage already (see `ClusterIndex`'s invariants).
        let mut nodes: Vec<Node> = self.nodes.values().cloned().collect();

        // Job id -> our pods, in name order.
        let mut names: Vec<&str> = opts.scheduler_names.iter().map(String::as_str).collect();
        names.sort_unstable();
        names.dedup();
        // Pods held at a node count there for everyone: kube-scheduler's nominated pods, and
        // in gate mode our released members. In run mode our own held pods are the session's
        // to place, so they do not count twice.
        for p in self.held.iter().filter_map(|k| self.pods.get(k)) {
            let ours = names.binary_search(&&*p.scheduler_name).is_ok();
            let Some(node) = &p.held else { continue };
            if ours && !opts.gate {
                continue;
            }
            if let Ok(i) = nodes.binary_search_by(|n| n.name.cmp(node)) {
                nodes[i].add_pod(&p.request, &p.spec.host_ports);
            }
        }
        if let (true, Some(predict)) = (opts.gate, opts.predict) {
            let pending: Vec<(&PodInfo, i32)> = names
                .iter()
                .flat_map(|n| self.members.get(*n).into_iter().flatten())
                .flat_map(|(_, pods)| pods.values().map(|p| &**p))
                .filter(|p| {
                    !opts.serves(p)
                        && p.status() == TaskStatus::Pending
                        && !p.gated
                        && p.held.is_none()
                })
                .map(|p| (p, self.priority(p.spec_priority, p.priority_class.as_ref())))
                .collect();
            if !pending.is_empty() {
                (predict.0)(&mut nodes, &pending);
            }
        }
        let mut by_job: BTreeMap<Arc<str>, Vec<&PodInfo>> = BTreeMap::new();
        // Jobs of pods that name no group but belong to a gang derived from their workload,
        // with the message of those that must wait.
        let mut derived_ids: HashMap<Arc<str>, Option<Arc<str>>> = HashMap::new();
        let mut derived = DerivedCache::default();
        for name in &names {
            for (job, pods) in self.members.get(*name).into_iter().flatten() {
                let mut served = pods
                    .values()
                    .map(|p| &**p)
                    .filter(|p| opts.serves(p))
                    .peekable();
                let Some(first) = served.peek() else {
                    continue;
                };
                let mut id = job.clone();
                if let (Some(group), Some(_)) = (&first.group, &first.owner) {
                    // A pod of a group of its own whose owner derives a gang: the explicit
                    // group keeps it, and the derived gang waits saying why (a pod is never in
                    // two gangs; Caldera does not guess).
                    if let Resolved::Derived(g) = self.resolve(first, opts, &mut derived) {
                        let why = format!(
                            "pod {}/{} names PodGroup {group} of its own and also belongs to the gang {g} derived from its workload; a pod is never in two gangs (name the PodGroup in the workload's pod template, or opt the workload out)",
                            first.namespace, first.name
                        );
                        derived_ids.insert(g, Some(why.into()));
                    }
                } else if first.group.is_none() {
                    match self.resolve(first, opts, &mut derived) {
                        Resolved::Lone => {}
                        Resolved::Derived(g) => {
                            derived_ids.entry(g.clone()).or_insert(None);
                            id = g;
                        }
                        Resolved::Wait(g, why) => {
                            derived_ids.insert(g.clone(), Some(why));
                            id = g;
                        }
                    }
                }
                let entry = by_job.entry(id).or_default();
                let merging = !entry.is_empty();
                entry.extend(served);
                if merging {
                    entry.sort_by(|a, b| a.name.cmp(&b.name));
                }
            }
        }
        // In gate mode native PodGroups are kube-scheduler's (see `serves`).
        let native_ids = self.native_podgroups.keys().filter(|_| !opts.gate);
        for id in self.podgroups.keys().chain(native_ids) {
            if !self.group_refs.contains_key(id) {
                by_job.entry(id.clone()).or_default();
            }
        }

        let mut snap = Snapshot::default();
        // Members whose claims ask alike share one spec.
        let mut volume_specs: HashSet<Arc<PlacementSpec>> = HashSet::new();
        let mut with_claims = false;
        for (id, pods) in by_job {
            let why = derived_ids.get(&id);
            let grouped = why.is_some() || pods.first().is_none_or(|p| p.group.is_some());
            // Members naming the native PodGroup of this name (`spec.schedulingGroup`), or with
            // no members, the PodGroup of either API that exists.
            let native = match pods.first() {
                Some(p) => p.native,
                None => !self.podgroups.contains_key(&id),
            };
            let mixed = pods.iter().any(|p| p.native != native);
            let clash: Option<Arc<str>> = mixed.then(|| {
                format!(
                    "pods name {id} both as a native scheduling.k8s.io PodGroup (spec.schedulingGroup) and as a Volcano PodGroup; Caldera does not guess which gang is meant"
                )
                .into()
            });
            let why_native = clash.as_ref().map(|c| Some(c.clone()));
            let why = why.or(why_native.as_ref());
            let native_missing = native && !self.native_podgroups.contains_key(&id);
            let why_missing: Option<Option<Arc<str>>> = (native_missing && why.is_none()).then(|| {
                let refused = self
                    .refused(&caldera_api::calls::NATIVE_PODGROUPS)
                    .or_else(|| self.refused(&caldera_api::calls::NATIVE_WORKLOADS));
                Some(
                    match refused {
                        Some(m) => format!(
                            "PodGroup {id} (scheduling.k8s.io/v1alpha2, named by spec.schedulingGroup) cannot be read: {m}"
                        ),
                        None => format!(
                            "PodGroup {id} (scheduling.k8s.io/v1alpha2, named by spec.schedulingGroup) does not exist yet"
                        ),
                    }
                    .into(),
                )
            });
            let why = why.or(why_missing.as_ref());
            let job = if grouped {
                let found = if native {
                    self.native_podgroups
                        .get(&id)
                        .map(|n| self.native_job(n, opts))
                } else {
                    self.podgroups.get(&id).map(|g| self.group_job(g, opts))
                };
                match found.filter(|_| why.is_none_or(Option::is_none)) {
                    Some(job) => job,
                    None => {
                        snap.waiting.extend(
                            pods.iter()
                                .filter(|p| p.status() == TaskStatus::Pending)
                                .map(|p| WaitingPod {
                                    uid: p.uid.clone(),
                                    namespace: p.namespace.clone(),
                                    name: p.name.clone(),
                                    group: id.clone(),
                                    why: why.cloned().flatten(),
                                    created: p.created,
                                    pending_reason: p.pending_reason.clone(),
                                    consumes: p.consumes.clone(),
                                }),
                        );
                        continue;
                    }
                }
            } else {
                // Without a group the job id is unique to the pod, so there is exactly one.
                let Some(pod) = pods.first() else { continue };
                self.implicit_job(pod)
            };
            let job_index = snap.jobs.len();
            let mut job = job;
            let group_opted_out = grouped
                && if native {
                    self.native_podgroups
                        .get(&id)
                        .is_some_and(|n| n.group.no_consolidate)
                } else {
                    self.podgroups.get(&id).is_some_and(|g| g.no_consolidate)
                };
            for p in pods {
                job.tasks.push(snap.tasks.len());
                let mut task = self.task(p, job_index);
                task.no_consolidate |=
                    group_opted_out || self.no_consolidate_namespaces.contains(&p.namespace);
                if task.status == TaskStatus::Pending && !p.claims.is_empty() {
                    if let Some((needs, names)) = self.volumes.resolve(p) {
                        let mut spec = (*task.spec).clone();
                        spec.volumes = needs;
                        task.spec = match volume_specs.get(&spec) {
                            Some(shared) => Arc::clone(shared),
                            None => {
                                let shared = Arc::new(spec);
                                volume_specs.insert(shared.clone());
                                shared
                            }
                        };
                        task.volumes = Some(Arc::new(names));
                        with_claims = true;
                    }
                }
                // Bound members too: their claims' devices count for their queues and are freed
                // for a preemptor when they are victims (caldera_session::devices).
                if !matches!(task.status, TaskStatus::Succeeded | TaskStatus::Failed)
                    && (p.resource_claims.is_some() || !p.extended.is_empty())
                {
                    let none = crate::dra::PodClaims::default();
                    let refs = p.resource_claims.as_deref().unwrap_or(&none);
                    let mut claims = self.dra.task_claims(refs, &p.extended);
                    if let Some(c) = claims
                        .as_mut()
                        .filter(|_| task.status == TaskStatus::Pending && !refs.refs.is_empty())
                    {
                        if let Some(m) = self.dra_refused() {
                            c.waiting = Some(m.clone());
                        }
                    }
                    task.claims = claims.map(Arc::new);
                }
                if !self.budgets.is_empty() {
                    task.budget = self.budget_of(p, &mut snap.budgets);
                }
                if !opts.gate && task.status == TaskStatus::Pending {
                    // Our own nominated members: capacity is held for them in the session.
                    task.nominated = p.held.clone().filter(|_| p.node.is_none());
                }
                if opts.gate {
                    task.gated = p.other_gates;
                    if task.status == TaskStatus::Pending && !p.gang_gate {
                        task.status = TaskStatus::Binding;
                        task.node = p.held.clone();
                    }
                }
                snap.tasks.push(task);
            }
            if !grouped {
                if let Some(t) = snap.tasks.last() {
                    job.priority = t.priority;
                }
            } else if native {
                let explicit = self
                    .native_podgroups
                    .get(&id)
                    .is_some_and(|n| n.priority.is_some() || n.group.priority_class.is_some());
                if !explicit {
                    // The native API (without WorkloadAwarePreemption) has no priority of its
                    // own: the gang's is its highest member's.
                    if let Some(p) = job.tasks.iter().map(|&t| snap.tasks[t].priority).max() {
                        job.priority = p;
                    }
                }
            }
            snap.jobs.push(job);
        }

        let mut queues = self.queues.clone();
        if !queues.contains_key(DEFAULT_QUEUE) {
            queues.insert(DEFAULT_QUEUE.into(), implicit_default_queue());
        }
        for job in &snap.jobs {
            if !queues.contains_key(&job.queue) {
                queues.insert(job.queue.clone(), missing_queue(&job.queue));
            }
        }
        snap.queues = queues.into_values().collect();
        snap.nodes = nodes;
        if !self.dra.is_empty() {
            snap.dra = self.dra.inventory();
        }
        if !self.hypernodes.is_empty() {
            snap.topology = crate::topology::build_tree(&self.hypernodes, &snap.nodes);
        }
        self.resolve_namespaces(&mut snap.tasks);
        snap.pods = self.placed_pods(&snap.tasks);
        if let Some(policy) = &opts.provisioning {
            for job in &mut snap.jobs {
                let group = self.podgroups.get(&job.id).and_then(|g| g.autoscale);
                // Autoscaler requests are owned by Volcano PodGroups; native gangs ask none.
                job.autoscale =
                    job.has_podgroup() && job.native.is_none() && group.unwrap_or(policy.all_gangs);
            }
        }
        self.attach_requests(&mut snap, opts);
        if with_claims {
            snap.volumes = self.volumes.catalog();
        }
        snap.volumes.left_to_kube_scheduler = opts.gate;
        snap
    }

    /// Pods on nodes that the inter-pod constraints of pending `tasks` select, plus every pod
    /// with required anti-affinity, found through the label index (not by scanning all pods
    /// unless a selector has no `In`/`Exists` requirement).
    pub(crate) fn placed_pods(&self, tasks: &[Task]) -> Vec<PlacedPod> {
        let mut keys: BTreeSet<&PodKey> = self.anti.iter().chain(&self.scoring).collect();
        let mut seen_specs: HashSet<*const PlacementSpec> = HashSet::new();
        let mut seen_terms: HashSet<(LabelSelector, Namespaces)> = HashSet::new();
        let mut all_pods = false;
        for t in tasks.iter().filter(|t| t.schedulable_pending()) {
            if t.spec.pods.is_empty() || !seen_specs.insert(Arc::as_ptr(&t.spec)) {
                continue;
            }
            let c = &t.spec.pods;
            let spread_ns: Vec<Namespaces> = c
                .spread
                .iter()
                .map(|s| Namespaces::Only(vec![s.namespace.clone()]))
                .collect();
            let terms = c
                .affinity
                .iter()
                .chain(&c.anti_affinity)
                .chain(c.preferred_affinity.iter().map(|(_, t)| t))
                .chain(c.preferred_anti_affinity.iter().map(|(_, t)| t))
                .filter_map(|t| t.selector.as_ref().map(|s| (s, &t.namespaces)))
                .chain(
                    c.spread
                        .iter()
                        .zip(&spread_ns)
                        .filter_map(|(s, ns)| s.selector.as_ref().map(|sel| (sel, ns))),
                );
            for (sel, ns) in terms {
                if all_pods || !seen_terms.insert((sel.clone(), ns.clone())) {
                    continue;
                }
                let Some(req) = sel.narrowest() else {
                    all_pods = true;
                    continue;
                };
                let Some(values) = self.by_label.get(&req.key) else {
                    continue;
                };
                let sets: Vec<&BTreeSet<PodKey>> = if req.op == SelectorOp::In {
                    req.values.iter().filter_map(|v| values.get(v)).collect()
                } else {
                    values.values().collect()
                };
                for key in sets.into_iter().flatten() {
                    if keys.contains(key) {
                        continue;
                    }
                    if let Some(p) = self.pods.get(key) {
                        if ns.contains(&p.namespace) && sel.matches(&p.labels) {
                            keys.insert(key);
                        }
                    }
                }
            }
        }
        let matched: std::cell::RefCell<HashMap<LabelSelector, Vec<String>>> = Default::default();
        let placed = |p: &PodInfo| {
            let node = p.node.clone().filter(|_| p.counts_on_node())?;
            let resolved = p.spec.pods.resolve_namespaces(&mut |s| {
                matched
                    .borrow_mut()
                    .entry(s.clone())
                    .or_insert_with(|| self.namespaces_matching(s))
                    .clone()
            });
            Some(PlacedPod {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                labels: p.labels.clone(),
                node,
                terminating: p.terminating,
                anti_affinity: resolved
                    .as_ref()
                    .map_or_else(
                        || p.spec.pods.anti_affinity.clone(),
                        |r| r.anti_affinity.clone(),
                    )
                    .into(),
                scoring_terms: resolved.as_ref().unwrap_or(&p.spec.pods).scoring_terms(),
            })
        };
        if all_pods {
            return self
                .pods
                .values()
                .map(|p| &**p)
                .filter_map(placed)
                .collect();
        }
        keys.into_iter()
            .filter_map(|k| self.pods.get(k).map(|p| &**p))
            .filter_map(placed)
            .collect()
    }

    pub(crate) fn task(&self, p: &PodInfo, job: usize) -> Task {
        Task {
            uid: p.uid.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            job,
            status: p.status(),
            node: p.node.clone(),
            request: p.request.clone(),
            priority: self.priority(p.spec_priority, p.priority_class.as_ref()),
            role: p.role.clone(),
            gated: p.gated,
            spec: p.spec.clone(),
            labels: p.labels.clone(),
            created: p.created,
            pending_reason: p.pending_reason.clone(),
            critical: p.critical,
            nominated: None,
            never_preempts: p.never_preempts,
            started: p.started.unwrap_or(p.created),
            budget: None,
            consumes: p.consumes.clone(),
            volumes: None,
            claims: None,
            controller: self.recreating(p),
            no_consolidate: p.no_consolidate,
        }
    }

    /// The pod's re-creating controller; a `batch` Job's only when the Job is known and its
    /// `podFailurePolicy` ignores the eviction ([`crate::consolidation::job_ignores_disruption`]):
    /// otherwise the eviction counts against its `backoffLimit`.
    pub(crate) fn recreating(&self, p: &PodInfo) -> Option<Arc<caldera_model::Controller>> {
        let c = p.controller.as_ref()?;
        if &*c.kind == "Job" {
            let job = self.job(&p.namespace, &c.name)?;
            if job.metadata.uid.as_deref() != Some(&*c.uid)
                || !crate::consolidation::job_ignores_disruption(job)
            {
                return None;
            }
        }
        Some(c.clone())
    }

    pub(crate) fn group_job(&self, g: &GroupInfo, opts: &SnapshotOptions) -> Job {
        let default_timeout = opts
            .default_gang_timeout
            .map(|d| d.as_secs() + u64::from(d.subsec_nanos() > 0));
        Job {
            id: g.id.clone(),
            namespace: g.namespace.clone(),
            name: g.name.clone(),
            uid: g.uid.clone(),
            queue: g.queue.clone(),
            min_member: g.min_member,
            min_task_member: g.min_task_member.clone(),
            priority: self.priority(None, g.priority_class.as_ref()),
            min_resources: g.min_resources.clone(),
            timeout_seconds: g.timeout_seconds.or(default_timeout),
            topology: g.topology.clone(),
            sub_group_policies: g.sub_group_policies.clone(),
            unsupported: g.unsupported.clone().or_else(|| self.hypernodes_refused(g)),
            created: g.created,
            pending_since: g.pending_since,
            status: Some(g.status.clone()),
            tasks: Vec::new(),
            autoscale: false,
            capacity: None,
            native: None,
            moves: g.moves.clone(),
            min_runtime: g.min_runtime.clone(),
        }
    }

    pub(crate) fn implicit_job(&self, p: &PodInfo) -> Job {
        Job {
            id: p.job_id.clone(),
            namespace: p.namespace.clone(),
            name: p.name.clone(),
            uid: p.uid.clone(),
            queue: p
                .queue_annotation
                .clone()
                .unwrap_or_else(|| DEFAULT_QUEUE.into()),
            min_member: 1,
            min_task_member: BTreeMap::new(),
            // A lone pod's job has the pod's priority (Volcano's controller copies the pod's
            // priorityClassName into the PodGroup it makes for such a pod).
            priority: self.priority(p.spec_priority, p.priority_class.as_ref()),
            min_resources: None,
            timeout_seconds: None,
            topology: None,
            sub_group_policies: Vec::new(),
            unsupported: None,
            created: p.created,
            pending_since: p.pending_since,
            status: None,
            tasks: Vec::new(),
            autoscale: false,
            capacity: None,
            native: None,
            moves: Vec::new(),
            min_runtime: None,
        }
    }
}
