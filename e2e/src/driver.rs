//! The live scenario driver: runs a scenario (`scenarios/FORMAT.md`) against a real API server
//! through the `kube` client, while a scheduler (in-process or not) schedules.
//!
//! What each step does live:
//!
//! - `apply`: creates each object, or updates it with the JSON merge patch from the manifest
//!   applied before (what `kubectl apply` sends), so server-filled fields stay. A `status`
//!   given in the manifest is written through the `status` subresource when the created object
//!   lacks it (custom resources drop it on create; Nodes keep it). The driver acts as the node
//!   lifecycle controller, since no kubelet or controller runs: after writing a Node it removes
//!   the `node.kubernetes.io/not-ready:NoSchedule` taint admission added if the Node says
//!   `Ready=True` (and adds it back if not). Namespaces the scenario uses or applies are
//!   created when missing (an existing one is left as it is), and so is a namespace's
//!   `default` ServiceAccount when pod admission asks for it (a server without
//!   controller-manager never makes one).
//! - `delete`: deletes each object (pods with `gracePeriodSeconds=0`, as the scenario format
//!   says) and waits until it is gone.
//! - `run`: waits that long on the wall clock while the scheduler runs; meanwhile, acting as
//!   the kubelets ([`roles::kubelet`](crate::roles::kubelet)), the driver removes every
//!   terminating bound pod of the run once its `deletionTimestamp` has passed (also while an
//!   `expect` waits to settle).
//! - `markRunning`/`markSucceeded`: acting as kubelets, sets `status.phase` of this run's bound
//!   pods matching the selector, with the `Ready` condition a kubelet writes.
//! - `expect`: reads every object and checks with the simulator's checker; binds are
//!   asynchronous, so a failing check is re-read for up to [`DriverOptions::settle`] before it
//!   is reported.
//!
//! After every step the scenario invariants are checked on the live objects for the pods
//! bound since the last check (see [`view::check_invariants`](crate::view::check_invariants)).
//! Gangs found bound in part are re-read for up to the settle time too, since their last binds
//! may be in flight.
//!
//! Every object the driver creates carries the label `caldera.sh/e2e-run=<run id>`;
//! [`LiveRun::cleanup`] deletes them (and the events about them), so scenarios can run one after
//! another on the same cluster. [`LiveRun::prepare`] installs the CRDs if missing, deletes
//! leftovers of earlier runs that were interrupted, and refuses to run when an object the
//! scenario needs exists without the label.

use crate::error::{is_refusal, status_code, status_message, Error, Result};
use crate::namespaces::Namespaces;
use crate::objects::{
    add_label, has_status_subresource, is_empty_patch, is_subset, merge_diff, to_json, ObjectKey,
    RUN_LABEL,
};
use crate::roles::autoscaler::Autoscaler;
use crate::roles::kubelet::{wall_clock, Kubelets};
use crate::roles::node_lifecycle;
use crate::view::{check_invariants, LiveObjects, NewBind, View};
use caldera_sim::expect::Expect;
use caldera_sim::manifest::Kind;
use caldera_sim::scenario::{ObjectRef, Step, StepFailure};
use caldera_sim::{Outcome, Scenario};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::Client;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;
use tracing::{debug, info};

/// How a run behaves.
#[derive(Debug, Clone)]
pub struct DriverOptions {
    /// The value of the `caldera.sh/e2e-run` label on everything this run creates.
    pub run_id: String,
    /// How long a failing `expect`, or a gang found bound in part, is re-read before it is
    /// reported (default 5s).
    pub settle: Duration,
    /// How often it is re-read (default 200ms).
    pub poll: Duration,
    /// How long to wait for the cluster: an object to be gone, a CRD to be served, a
    /// namespace to finish terminating (default 30s).
    pub wait_timeout: Duration,
    /// Delete objects of earlier, interrupted runs (any other `caldera.sh/e2e-run` value)
    /// before starting (default true). Runs on one cluster must then not overlap.
    pub remove_leftovers: bool,
}

impl DriverOptions {
    /// The defaults, with this run id.
    pub fn new(run_id: impl Into<String>) -> Self {
        DriverOptions {
            run_id: run_id.into(),
            settle: Duration::from_secs(5),
            poll: Duration::from_millis(200),
            wait_timeout: Duration::from_secs(30),
            remove_leftovers: true,
        }
    }
}

/// A fresh run id for a scenario: its name (cut to fit a label value) and a time-based
/// suffix.
pub fn new_run_id(name: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    while base.ends_with('-') {
        base.pop();
    }
    if base.is_empty() {
        base.push_str("run");
    }
    format!("{base}-{:08x}", (nanos as u64) & 0xffff_ffff)
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepReport {
    /// 0-based index into the steps.
    pub index: usize,
    /// The step's label (`apply (3 objects)`, `run 2s`, ...).
    pub label: String,
    /// Checks made by an `expect`.
    pub checks: usize,
    /// Pods a kubelet step changed.
    pub marked: usize,
    /// One line per mismatch, rejected object or broken invariant; empty when it passed.
    pub problems: Vec<String>,
}

impl StepReport {
    /// Whether the step passed.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// A scenario being run against a live API server.
pub struct LiveRun {
    client: Client,
    scenario: Scenario,
    options: DriverOptions,
    next: usize,
    /// The manifest last applied per object (labelled, without status): the base of the
    /// merge patch of a later apply.
    applied: HashMap<ObjectKey, Value>,
    namespaces: Namespaces,
    default_queue_existed: bool,
    /// Whether the `root` Queue existed before the run (the scheduler creates it while the
    /// queue tree is in use; cleanup deletes it if the scheduler made it during the run).
    root_queue_existed: bool,
    /// The HyperNodes a Caldera's discovery owned before the run (the scheduler's discovery
    /// makes more; they go at cleanup).
    owned_hypernodes_before: HashSet<String>,
    /// Uids of bound pods the invariants have been checked for (or that were created bound).
    verified: HashSet<String>,
    /// Uids of every object this run created, deleted ones included: cleanup deletes the
    /// events about them.
    created: HashSet<String>,
    /// Uids of the pods of the run's Jobs seen while it ran (their controller makes and
    /// deletes them): their events are the run's too.
    job_pods: std::sync::Mutex<HashSet<String>>,
    check_invariants: bool,
    kubelets: Kubelets,
    /// Played when the scenario has `spec.autoscaler`.
    autoscaler: Option<Autoscaler>,
}

impl std::fmt::Debug for LiveRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveRun")
            .field("scenario", &self.scenario.name)
            .field("run_id", &self.options.run_id)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

fn labels_of(value: &Value) -> Option<&serde_json::Map<String, Value>> {
    value["metadata"]["labels"].as_object()
}

fn dynamic(key: &ObjectKey, value: &Value) -> Result<DynamicObject> {
    serde_json::from_value(value.clone()).map_err(|source| Error::Json {
        object: key.to_string(),
        source,
    })
}

fn to_value(key: &ObjectKey, object: &DynamicObject) -> Result<Value> {
    serde_json::to_value(object).map_err(|source| Error::Json {
        object: key.to_string(),
        source,
    })
}

impl LiveRun {
    /// Gets the cluster ready for `scenario`: the CRDs installed and served, leftovers of
    /// interrupted runs deleted (see [`DriverOptions::remove_leftovers`]). Fails with
    /// [`Error::Occupied`] if an object the scenario applies already exists without the
    /// suite's label.
    pub async fn prepare(
        client: Client,
        scenario: Scenario,
        options: DriverOptions,
    ) -> Result<LiveRun> {
        let kubelets = Kubelets::new(client.clone(), &options.run_id);
        let autoscaler = scenario.autoscaler.clone().map(|settings| {
            let labels = BTreeMap::from([(RUN_LABEL.to_string(), options.run_id.clone())]);
            Autoscaler::new(settings, labels)
        });
        let namespaces = Namespaces::new(
            client.clone(),
            &options.run_id,
            options.wait_timeout,
            options.poll,
        );
        let mut run = LiveRun {
            kubelets,
            autoscaler,
            client,
            scenario,
            options,
            next: 0,
            applied: HashMap::new(),
            namespaces,
            default_queue_existed: false,
            root_queue_existed: false,
            owned_hypernodes_before: HashSet::new(),
            verified: HashSet::new(),
            created: HashSet::new(),
            job_pods: Default::default(),
            check_invariants: true,
        };
        crate::crds::install_crds(&run.client, run.options.wait_timeout, run.options.poll).await?;
        if run.scenario.steps.iter().any(|s| {
            matches!(s, caldera_sim::scenario::Step::Apply(objects)
                if objects.iter().any(|o| crate::workloads::is_played(o.kind())))
        }) {
            crate::workloads::install_crds(&run.client, run.options.wait_timeout, run.options.poll)
                .await?;
        }
        if run.autoscaler.is_some() {
            crate::crds::install_provisioning_crd(
                &run.client,
                run.options.wait_timeout,
                run.options.poll,
            )
            .await?;
        }
        if run.options.remove_leftovers {
            let selector = format!("{RUN_LABEL},{RUN_LABEL}!={}", run.options.run_id);
            let removed = run.delete_labelled(&selector).await?;
            if !removed.is_empty() {
                info!(
                    count = removed.len(),
                    "deleted objects left by earlier e2e runs"
                );
            }
            let restored = run.namespaces.restore_relabelled().await?;
            if restored > 0 {
                info!(
                    count = restored,
                    "put back the labels of namespaces earlier e2e runs relabelled"
                );
            }
        }
        run.refuse_occupied().await?;
        run.default_queue_existed = crate::objects::api(&run.client, Kind::Queue, None)
            .get_opt(caldera_api::DEFAULT_QUEUE)
            .await
            .map_err(|e| Error::api("get", "Queue default", e))?
            .is_some();
        run.root_queue_existed = crate::objects::api(&run.client, Kind::Queue, None)
            .get_opt(caldera_api::ROOT_QUEUE)
            .await
            .map_err(|e| Error::api("get", "Queue root", e))?
            .is_some();
        run.owned_hypernodes_before = run.owned_hypernodes().await?;
        Ok(run)
    }

    /// The HyperNodes labelled as made by Caldera's discovery, by name (none when the server
    /// does not serve HyperNodes).
    async fn owned_hypernodes(&self) -> Result<HashSet<String>> {
        let selector = format!(
            "{}={}",
            caldera_cache::discovery::MANAGED_BY,
            caldera_cache::discovery::MANAGER
        );
        match crate::objects::api(&self.client, Kind::HyperNode, None)
            .list(&ListParams::default().labels(&selector))
            .await
        {
            Ok(list) => Ok(list
                .items
                .into_iter()
                .filter_map(|h| h.metadata.name)
                .collect()),
            Err(e) if status_code(&e) == Some(404) => Ok(HashSet::new()),
            Err(e) => Err(Error::api("list", "HyperNodes", e)),
        }
    }

    /// The scenario.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// The run id (the `caldera.sh/e2e-run` label value).
    pub fn run_id(&self) -> &str {
        &self.options.run_id
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Index of the next step to run.
    pub fn next_step(&self) -> usize {
        self.next
    }

    /// Whether every step has run.
    pub fn is_done(&self) -> bool {
        self.next >= self.scenario.steps.len()
    }

    /// Whether the scheduler should be running before the next step: once the first `apply`
    /// step has run (a live apply is not atomic, so starting earlier would let the scheduler
    /// decide on half a cluster), or at once for a scenario without one.
    pub fn scheduler_due(&self) -> bool {
        match self
            .scenario
            .steps
            .iter()
            .position(|s| matches!(s, Step::Apply(_)))
        {
            Some(first) => self.next > first,
            None => true,
        }
    }

    /// Turns the invariant checks after each step on or off (default on). Off is for tests
    /// that break the cluster on purpose (injected bind failures) and check the repair; the
    /// binds made meanwhile are checked when the checks are back on.
    pub fn set_check_invariants(&mut self, on: bool) {
        self.check_invariants = on;
    }

    /// Runs the next step and checks the invariants after it.
    pub async fn step(&mut self) -> Result<StepReport> {
        let index = self.next;
        let Some(step) = self.scenario.steps.get(index).cloned() else {
            return Ok(StepReport::default());
        };
        self.next += 1;
        let mut report = StepReport {
            index,
            label: step.label(),
            ..StepReport::default()
        };
        debug!(scenario = %self.scenario.name, index, step = %report.label, "step");
        match &step {
            Step::Apply(objects) => {
                let mut items = Vec::with_capacity(objects.len());
                for o in objects {
                    items.push(to_json(o)?);
                }
                report.problems = self.apply_all(items).await?;
            }
            Step::Delete(refs) => report.problems = self.delete_all(refs).await?,
            Step::Run(d, _) => self.run_for(*d).await?,
            Step::MarkRunning(which) => {
                report.marked = self.kubelets.mark(which, "Running").await?
            }
            Step::MarkSucceeded(which) => {
                report.marked = self.kubelets.mark(which, "Succeeded").await?
            }
            Step::Expect(e) => {
                let (checks, failures) = self.expect(e).await?;
                report.checks = checks;
                report.problems = failures;
            }
        }
        if self.check_invariants {
            for p in self.check_invariants_now().await? {
                report.problems.push(format!("invariant: {p}"));
            }
        }
        Ok(report)
    }

    /// Runs every remaining step, calling `start_scheduler` once when the scheduler is due
    /// (see [`LiveRun::scheduler_due`]); stops at the first failing step. The outcome's
    /// `sessions` is left at 0 for the caller, who knows the scheduler, to fill.
    pub async fn run_to_end<S>(&mut self, mut start_scheduler: S) -> Result<Outcome>
    where
        S: AsyncFnMut() -> Result<()>,
    {
        let mut outcome = Outcome {
            name: self.scenario.name.clone(),
            file: self.scenario.file.clone(),
            steps: self.scenario.steps.len(),
            steps_run: 0,
            sessions: 0,
            failure: None,
        };
        let mut started = false;
        while !self.is_done() {
            if !started && self.scheduler_due() {
                start_scheduler().await?;
                started = true;
            }
            let report = self.step().await?;
            outcome.steps_run = report.index + 1;
            if !report.passed() {
                outcome.failure = Some(failure(&report));
                break;
            }
        }
        Ok(outcome)
    }

    /// Applies extra manifests (JSON objects of the scenario kinds) with the semantics of an
    /// `apply` step; returns the objects the server refused.
    pub async fn apply_values(&mut self, values: Vec<Value>) -> Result<Vec<String>> {
        let mut items = Vec::with_capacity(values.len());
        for v in values {
            let kind_name = v["kind"].as_str().unwrap_or("").to_string();
            // The group tells Volcano's PodGroup from the native one.
            let group = v["apiVersion"]
                .as_str()
                .and_then(|a| a.rsplit_once('/'))
                .map_or("", |(g, _)| g);
            let Some(kind) = Kind::of(&kind_name, group).or_else(|| Kind::parse(&kind_name)) else {
                return Err(Error::Input(format!(
                    "cannot apply an object of kind {kind_name:?}; expected one of {}",
                    Kind::ALL.map(Kind::as_str).join(", ")
                )));
            };
            let key = ObjectKey::new(
                kind,
                v["metadata"]["namespace"].as_str(),
                v["metadata"]["name"].as_str().unwrap_or(""),
            );
            let mut v = v;
            if let Some(ns) = &key.namespace {
                v["metadata"]["namespace"] = Value::String(ns.clone());
            }
            items.push((key, v));
        }
        self.apply_all(items).await
    }

    async fn apply_all(&mut self, items: Vec<(ObjectKey, Value)>) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        for (key, value) in items {
            if let Err(problem) = self.apply_one(&key, value).await? {
                problems.push(format!("{key}: rejected: {problem}"));
            }
        }
        Ok(problems)
    }

    /// Creates or updates one object. The outer error stops the run; the inner one is the
    /// server refusing the object, a failure of the step.
    async fn apply_one(
        &mut self,
        key: &ObjectKey,
        mut manifest: Value,
    ) -> Result<Result<(), String>> {
        if key.kind == Kind::Namespace {
            return self.namespaces.apply(&key.name, &manifest).await;
        }
        if let Some(ns) = &key.namespace {
            self.namespaces.ensure(ns).await?;
        }
        add_label(&mut manifest, RUN_LABEL, &self.options.run_id);
        if matches!(key.kind, Kind::Job | Kind::ReplicaSet | Kind::Deployment) {
            // The workload's pods carry the run's label too, so cleanup finds them (a
            // selector is a subset of the template's labels: it still selects them).
            if let Some(template) = manifest.pointer_mut("/spec/template") {
                add_label(template, RUN_LABEL, &self.options.run_id);
            }
        }
        let status = match &mut manifest {
            Value::Object(map) => map.remove("status").filter(|s| !s.is_null()),
            _ => None,
        };
        let api = key.api(&self.client);
        let live = match self.applied.get(key) {
            Some(old) => {
                let patch = merge_diff(old, &manifest);
                if is_empty_patch(&patch) {
                    None
                } else {
                    match api
                        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        Ok(o) => Some(to_value(key, &o)?),
                        Err(e) if is_refusal(&e) => return Ok(Err(status_message(&e))),
                        Err(e) => return Err(Error::api("patch", key.to_string(), e)),
                    }
                }
            }
            None => match self.create(key, &manifest).await? {
                Ok(created) => Some(created),
                Err(problem) => return Ok(Err(problem)),
            },
        };
        if let Some(uid) = live.as_ref().and_then(|o| o["metadata"]["uid"].as_str()) {
            self.created.insert(uid.to_string());
        }
        if key.kind == Kind::Pod && manifest["spec"]["nodeName"].as_str().is_some() {
            // Bound by the manifest, not by the scheduler: not a bind to check.
            if let Some(uid) = live.as_ref().and_then(|o| o["metadata"]["uid"].as_str()) {
                self.verified.insert(uid.to_string());
            }
        }
        self.applied.insert(key.clone(), manifest);
        if let Some(status) = status.filter(|_| has_status_subresource(key.kind)) {
            let current = match live {
                Some(o) => o,
                None => self.get(key).await?.unwrap_or(Value::Null),
            };
            if !is_subset(&status, &current["status"]) {
                let patch = json!({ "status": status });
                if let Err(e) = api
                    .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    if is_refusal(&e) {
                        return Ok(Err(format!("status: {}", status_message(&e))));
                    }
                    return Err(Error::api("patch status of", key.to_string(), e));
                }
            }
        }
        if crate::workloads::is_played(key.kind) {
            let current = self.get(key).await?.unwrap_or(Value::Null);
            let made = crate::workloads::play(
                &self.client,
                key.kind,
                &current,
                &self.options.run_id,
                self.options.wait_timeout,
            )
            .await?;
            self.created.extend(made);
        }
        if key.kind == Kind::Node {
            node_lifecycle::sync_not_ready_taint(
                &self.client,
                &key.name,
                self.options.wait_timeout,
            )
            .await?;
        }
        Ok(Ok(()))
    }

    async fn get(&self, key: &ObjectKey) -> Result<Option<Value>> {
        match key.api(&self.client).get_opt(&key.name).await {
            Ok(Some(o)) => Ok(Some(to_value(key, &o)?)),
            Ok(None) => Ok(None),
            Err(e) => Err(Error::api("get", key.to_string(), e)),
        }
    }

    /// Creates an object, riding out what a real server answers while it catches up: a
    /// custom resource not served yet (404) and a namespace without its `default`
    /// ServiceAccount (403 from ServiceAccount admission, made here since no controller may
    /// run). An object that exists already (made by this run through another path) is
    /// patched instead.
    async fn create(&mut self, key: &ObjectKey, manifest: &Value) -> Result<Result<Value, String>> {
        let api = key.api(&self.client);
        let mut manifest = manifest.clone();
        if key.kind == Kind::Pod && self.scenario.mode == caldera_sim::Mode::Gate {
            crate::roles::gate_admission::admit(&mut manifest);
        }
        let manifest = &manifest;
        let object = dynamic(key, manifest)?;
        let deadline = Instant::now() + self.options.wait_timeout;
        loop {
            let err = match api.create(&PostParams::default(), &object).await {
                Ok(created) => return Ok(Ok(to_value(key, &created)?)),
                Err(e) => e,
            };
            let message = status_message(&err);
            let code = status_code(&err);
            let retry = match code {
                Some(404)
                    if matches!(
                        key.kind,
                        Kind::PodGroup
                            | Kind::Queue
                            | Kind::HyperNode
                            | Kind::JobSet
                            | Kind::LeaderWorkerSet
                    ) =>
                {
                    true
                }
                Some(403) if key.kind == Kind::Pod && message.contains("service account") => {
                    if let Some(ns) = &key.namespace {
                        self.namespaces.ensure_service_account(ns).await?;
                    }
                    true
                }
                Some(409) if message.contains("already exists") => {
                    return match api
                        .patch(&key.name, &PatchParams::default(), &Patch::Merge(manifest))
                        .await
                    {
                        Ok(o) => Ok(Ok(to_value(key, &o)?)),
                        Err(e) if is_refusal(&e) => Ok(Err(status_message(&e))),
                        Err(e) => Err(Error::api("patch", key.to_string(), e)),
                    };
                }
                _ => false,
            };
            if !retry {
                if is_refusal(&err) {
                    return Ok(Err(message));
                }
                return Err(Error::api("create", key.to_string(), err));
            }
            if Instant::now() >= deadline {
                return Err(Error::api("create", key.to_string(), err));
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    async fn delete_all(&mut self, refs: &[ObjectRef]) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        for r in refs {
            let key = ObjectKey::new(r.kind, r.namespace.as_deref(), &r.name);
            if is_workload(key.kind) {
                // What the garbage collector deletes with it: their events are the run's too.
                let dependents = self.dependents(&key).await?;
                self.created.extend(dependents);
            }
            match self.delete_and_wait(&key).await? {
                true => {}
                false => problems.push(format!("{r}: not found")),
            }
            self.applied.remove(&key);
        }
        Ok(problems)
    }

    /// The uids of the pods and PodGroups the object `key` owns.
    async fn dependents(&self, key: &ObjectKey) -> Result<HashSet<String>> {
        let mut out = HashSet::new();
        let Some(uid) = self
            .get(key)
            .await?
            .and_then(|o| o["metadata"]["uid"].as_str().map(str::to_string))
        else {
            return Ok(out);
        };
        for kind in [Kind::Pod, Kind::PodGroup] {
            let list = crate::objects::api(&self.client, kind, key.namespace.as_deref())
                .list(&ListParams::default())
                .await
                .map_err(|e| Error::api("list", format!("{kind}s"), e))?;
            for o in list.items {
                let owned = o
                    .metadata
                    .owner_references
                    .iter()
                    .flatten()
                    .any(|r| r.uid == uid);
                if let (true, Some(u)) = (owned, o.metadata.uid) {
                    out.insert(u);
                }
            }
        }
        Ok(out)
    }

    /// Deletes an object (see [`delete_params`]) and waits until it is gone. Returns whether it
    /// existed.
    async fn delete_and_wait(&self, key: &ObjectKey) -> Result<bool> {
        match key
            .api(&self.client)
            .delete(&key.name, &delete_params(key.kind))
            .await
        {
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(404) => return Ok(false),
            Err(e) => return Err(Error::api("delete", key.to_string(), e)),
        }
        self.wait_gone(key).await?;
        Ok(true)
    }

    /// Waits until a deleted object held by `finalizer` is gone: kube-apiserver gives every
    /// native PodGroup the `scheduling.k8s.io/podgroup-protection` finalizer, and an allocated
    /// ResourceClaim carries `resource.kubernetes.io/delete-protection`;
    /// kube-controller-manager removes them once no pod uses the object (the podgroup-protection
    /// and resource-claim controllers). The pods are gone by now, so if it has not within a few
    /// seconds (a control plane without it), the driver does what it would.
    async fn wait_finalized_gone(&self, key: &ObjectKey, finalizer: &str) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(5).min(self.options.wait_timeout);
        while let Some(live) = self.get(key).await? {
            if Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
            let finalizers: Vec<Value> = live["metadata"]["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| f.as_str() != Some(finalizer))
                .cloned()
                .collect();
            let patch = json!({"metadata": {"finalizers": finalizers}});
            match key
                .api(&self.client)
                .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => {}
                Err(e) if status_code(&e) == Some(404) => return Ok(()),
                Err(e) => return Err(Error::api("patch", key.to_string(), e)),
            }
            return self.wait_gone(key).await;
        }
        Ok(())
    }

    async fn wait_gone(&self, key: &ObjectKey) -> Result<()> {
        let deadline = Instant::now() + self.options.wait_timeout;
        while self.get(key).await?.is_some() {
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("{key} to be gone"),
                    after: self.options.wait_timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Waits `d` on the wall clock while the scheduler runs, the kubelets finishing
    /// terminations every poll interval.
    async fn run_for(&self, d: Duration) -> Result<()> {
        let end = Instant::now() + d;
        loop {
            self.kubelets.finish_terminations().await?;
            self.note_job_pods().await?;
            if let Some(a) = &self.autoscaler {
                a.turn(&self.client, self.options.wait_timeout).await?;
            }
            let now = Instant::now();
            if now >= end {
                return Ok(());
            }
            tokio::time::sleep((end - now).min(self.options.poll)).await;
        }
    }

    /// Remembers the uids of the pods of the run's Jobs (labelled with the run through their
    /// template), when the scenario has Jobs.
    async fn note_job_pods(&self) -> Result<()> {
        if !self.applied.keys().any(|k| is_workload(k.kind)) {
            return Ok(());
        }
        let selector = format!("{RUN_LABEL}={}", self.options.run_id);
        let pods = crate::objects::api(&self.client, Kind::Pod, None)
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| Error::api("list", "Pods".to_string(), e))?;
        let mut seen = self
            .job_pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.extend(pods.items.into_iter().filter_map(|p| p.metadata.uid));
        Ok(())
    }

    /// Checks `e`, re-reading for up to the settle time while it fails (the kubelets keep
    /// finishing terminations meanwhile). Returns the number of checks and the failures of the
    /// last read.
    async fn expect(&self, e: &Expect) -> Result<(usize, Vec<String>)> {
        let deadline = Instant::now() + self.options.settle;
        loop {
            self.kubelets.finish_terminations().await?;
            let mut objects = LiveObjects::read(&self.client).await?;
            if let Some(a) = &self.autoscaler {
                objects.requests_created = a.seen_counts();
            }
            // A view is not `Send` (its store holds a boxed scheduler): keep it off the awaits.
            let checked = View::new(&self.scenario.config, &objects).check(e);
            if checked.failures.is_empty() || Instant::now() >= deadline {
                return Ok((checked.checks, checked.failures));
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    /// This run's pods of the scheduler's names that are bound and not yet checked.
    fn new_binds(&self, objects: &LiveObjects) -> Vec<(String, NewBind)> {
        let names = &self.scenario.config.scheduler_names;
        objects
            .pods
            .iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(RUN_LABEL))
                    .is_some_and(|v| *v == self.options.run_id)
            })
            .filter_map(|p| {
                let spec = p.spec.as_ref()?;
                let node = spec.node_name.clone().filter(|n| !n.is_empty())?;
                let scheduler = spec
                    .scheduler_name
                    .as_deref()
                    .unwrap_or("default-scheduler");
                if !names.iter().any(|n| n == scheduler) {
                    return None;
                }
                let uid = p.metadata.uid.clone()?;
                if self.verified.contains(&uid) {
                    return None;
                }
                Some((
                    uid,
                    NewBind {
                        namespace: p.metadata.namespace.clone().unwrap_or_default(),
                        name: p.metadata.name.clone().unwrap_or_default(),
                        node,
                    },
                ))
            })
            .collect()
    }

    /// Checks the invariants for the binds made since the last check (see
    /// [`check_invariants`]); a gang bound in part is re-read for up to the settle time.
    /// Returns the problems.
    pub async fn check_invariants_now(&mut self) -> Result<Vec<String>> {
        let deadline = Instant::now() + self.options.settle;
        loop {
            let objects = LiveObjects::read(&self.client).await?;
            let fresh = self.new_binds(&objects);
            let binds: Vec<NewBind> = fresh.iter().map(|(_, b)| b.clone()).collect();
            let broken = check_invariants(&self.scenario.config, &objects, &binds);
            if broken.partial.is_empty() || Instant::now() >= deadline {
                self.verified.extend(fresh.into_iter().map(|(uid, _)| uid));
                return Ok(broken.lines());
            }
            tokio::time::sleep(self.options.poll).await;
        }
    }

    /// Refuses to run over objects that exist without the suite's label.
    async fn refuse_occupied(&self) -> Result<()> {
        let mut seen = HashSet::new();
        for step in &self.scenario.steps {
            let Step::Apply(objects) = step else { continue };
            for o in objects {
                let (key, _) = to_json(o)?;
                if key.kind == Kind::Namespace || !seen.insert(key.clone()) {
                    continue;
                }
                if let Some(live) = self.get(&key).await? {
                    let ours = labels_of(&live).is_some_and(|l| l.contains_key(RUN_LABEL));
                    if !ours {
                        return Err(Error::Occupied(key.to_string()));
                    }
                }
            }
        }
        Ok(())
    }

    /// Deletes every object of the scenario kinds matching `selector` (pods first, with no
    /// grace period; claims before the volumes and nodes, so the PV controller releases the
    /// volumes and their protection finalizers go) and waits until they are gone. Returns their
    /// uids.
    async fn delete_labelled(&self, selector: &str) -> Result<HashSet<String>> {
        let mut uids = HashSet::new();
        // Listed first, deleted after: deleting a Job takes its pods with it.
        let mut listed = Vec::new();
        for kind in [Kind::JobSet, Kind::LeaderWorkerSet] {
            // Before their Jobs and pods; their CRDs may not be installed (404: none).
            listed.extend(self.list_optional(kind, selector, &mut uids).await?);
        }
        for kind in [
            // Before the pods: their controllers would make them again (a Deployment before
            // its ReplicaSets).
            Kind::Deployment,
            Kind::ReplicaSet,
            Kind::Job,
            Kind::Pod,
            // After the pods: the podgroup-protection finalizer goes once none names them.
            Kind::NativePodGroup,
            Kind::Workload,
            Kind::PersistentVolumeClaim,
            Kind::PodDisruptionBudget,
            Kind::PodGroup,
            Kind::Queue,
            Kind::PriorityClass,
            Kind::HyperNode,
            Kind::Node,
            Kind::PersistentVolume,
            Kind::StorageClass,
            Kind::CSINode,
        ] {
            listed.extend(self.list_labelled(kind, selector, &mut uids).await?);
        }
        // DRA (`resource.k8s.io/v1`, which a server may not serve: 404, none), after the pods:
        // the resource-claim controller deallocates a claim once its users are gone (the
        // claims it made from templates go with their pods).
        for kind in [
            Kind::ResourceClaim,
            Kind::ResourceClaimTemplate,
            Kind::ResourceSlice,
            Kind::DeviceClass,
        ] {
            listed.extend(self.list_optional(kind, selector, &mut uids).await?);
        }
        // PodGroups derived from the run's workloads (owned by them, not labelled): their
        // events go too; the garbage collector deletes them with their owner.
        let podgroups = crate::objects::api(&self.client, Kind::PodGroup, None)
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("list", "PodGroups".to_string(), e))?;
        for o in podgroups.items {
            let owned = o
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| uids.contains(&r.uid));
            if let (true, Some(uid)) = (owned, &o.metadata.uid) {
                uids.insert(uid.clone());
            }
        }
        let mut deleted = Vec::new();
        for key in listed {
            match key
                .api(&self.client)
                .delete(&key.name, &delete_params(key.kind))
                .await
            {
                Ok(_) => deleted.push(key),
                Err(e) if status_code(&e) == Some(404) => {}
                Err(e) => return Err(Error::api("delete", key.to_string(), e)),
            }
        }
        for key in &deleted {
            match key.kind {
                Kind::NativePodGroup => self.wait_finalized_gone(key, PODGROUP_PROTECTION).await?,
                Kind::ResourceClaim => self.wait_finalized_gone(key, CLAIM_PROTECTION).await?,
                _ => self.wait_gone(key).await?,
            }
        }
        Ok(uids)
    }

    /// The objects of `kind` matching `selector`, their uids added to `uids`.
    async fn list_labelled(
        &self,
        kind: Kind,
        selector: &str,
        uids: &mut HashSet<String>,
    ) -> Result<Vec<ObjectKey>> {
        let list = crate::objects::api(&self.client, kind, None)
            .list(&ListParams::default().labels(selector))
            .await
            .map_err(|e| Error::api("list", format!("{kind}s"), e))?;
        Ok(self.keys_of(kind, list.items, uids))
    }

    /// As [`Self::list_labelled`], for a kind the server may not serve (404: none).
    async fn list_optional(
        &self,
        kind: Kind,
        selector: &str,
        uids: &mut HashSet<String>,
    ) -> Result<Vec<ObjectKey>> {
        match crate::objects::api(&self.client, kind, None)
            .list(&ListParams::default().labels(selector))
            .await
        {
            Ok(l) => Ok(self.keys_of(kind, l.items, uids)),
            Err(e) if status_code(&e) == Some(404) => Ok(Vec::new()),
            Err(e) => Err(Error::api("list", format!("{kind}s"), e)),
        }
    }

    fn keys_of(
        &self,
        kind: Kind,
        items: Vec<kube::api::DynamicObject>,
        uids: &mut HashSet<String>,
    ) -> Vec<ObjectKey> {
        items
            .into_iter()
            .map(|o| {
                if let Some(uid) = &o.metadata.uid {
                    uids.insert(uid.clone());
                }
                ObjectKey::new(
                    kind,
                    o.metadata.namespace.as_deref(),
                    o.metadata.name.as_deref().unwrap_or(""),
                )
            })
            .collect()
    }

    /// Deletes what this run created: its objects, the events about them, the `default`
    /// and `root` Queues if the scheduler made them during the run, and the namespaces and service
    /// accounts the driver made. Call it after stopping the scheduler.
    pub async fn cleanup(&mut self) -> Result<()> {
        let selector = format!("{RUN_LABEL}={}", self.options.run_id);
        let mut uids = self.delete_labelled(&selector).await?;
        uids.extend(self.created.drain());
        uids.extend(
            self.job_pods
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .drain(),
        );
        for (name, existed) in [
            (caldera_api::DEFAULT_QUEUE, self.default_queue_existed),
            (caldera_api::ROOT_QUEUE, self.root_queue_existed),
        ] {
            if existed {
                continue;
            }
            let key = ObjectKey::new(Kind::Queue, None, name);
            if let Some(q) = self.get(&key).await? {
                let made_by_scheduler = labels_of(&q).is_none_or(|l| !l.contains_key(RUN_LABEL));
                if made_by_scheduler {
                    if let Some(uid) = q["metadata"]["uid"].as_str() {
                        uids.insert(uid.to_string());
                    }
                    self.delete_and_wait(&key).await?;
                }
            }
        }
        // HyperNodes the scheduler's discovery made during the run (from the run's labelled
        // nodes, which are gone now).
        for name in self.owned_hypernodes().await? {
            if !self.owned_hypernodes_before.contains(&name) {
                self.delete_and_wait(&ObjectKey::new(Kind::HyperNode, None, &name))
                    .await?;
            }
        }
        self.delete_events(&uids).await?;
        self.namespaces.cleanup().await?;
        self.applied.clear();
        Ok(())
    }

    /// Deletes the events (`events.k8s.io/v1`, and core `v1` ones) about the objects with
    /// these uids.
    async fn delete_events(&self, uids: &HashSet<String>) -> Result<()> {
        // The run's scheduler reports as `e2e-<run id>` (cluster::scenario_scheduler): its
        // events go too, also those about objects it made and deleted during the run (a
        // derived PodGroup no longer wanted), whose uids cleanup never saw.
        let ours = format!("e2e-{}", self.options.run_id);
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(self.client.clone());
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("list", "events.events.k8s.io", e))?;
        for e in list.items {
            let about = e.regarding.as_ref().and_then(|r| r.uid.as_deref());
            let by_us = e.reporting_instance.as_deref() == Some(ours.as_str());
            if !by_us && !about.is_some_and(|u| uids.contains(u)) {
                continue;
            }
            let ns = e.metadata.namespace.clone().unwrap_or_default();
            let name = e.metadata.name.clone().unwrap_or_default();
            let api: Api<k8s_openapi::api::events::v1::Event> =
                Api::namespaced(self.client.clone(), &ns);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(err) if status_code(&err) == Some(404) => {}
                Err(err) => return Err(Error::api("delete", format!("Event {ns}/{name}"), err)),
            }
        }
        let core: Api<k8s_openapi::api::core::v1::Event> = Api::all(self.client.clone());
        let list = core
            .list(&ListParams::default())
            .await
            .map_err(|e| Error::api("list", "events", e))?;
        for e in list.items {
            let by_us = e.reporting_instance.as_deref() == Some(ours.as_str());
            if !by_us
                && !e
                    .involved_object
                    .uid
                    .as_ref()
                    .is_some_and(|u| uids.contains(u))
            {
                continue;
            }
            let ns = e.metadata.namespace.clone().unwrap_or_default();
            let name = e.metadata.name.clone().unwrap_or_default();
            let api: Api<k8s_openapi::api::core::v1::Event> =
                Api::namespaced(self.client.clone(), &ns);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(err) if status_code(&err) == Some(404) => {}
                Err(err) => return Err(Error::api("delete", format!("Event {ns}/{name}"), err)),
            }
        }
        Ok(())
    }
}

/// The finalizer kube-apiserver puts on every native PodGroup.
const PODGROUP_PROTECTION: &str = "scheduling.k8s.io/podgroup-protection";
/// The finalizer an allocator puts on a ResourceClaim it allocates.
const CLAIM_PROTECTION: &str = caldera_model::dra::DELETE_PROTECTION_FINALIZER;

/// How the driver deletes an object of `kind`: a pod with no grace period (no kubelet would
/// confirm it), a workload with `propagationPolicy: Background` as `kubectl delete` does (the
/// API's default for `batch/v1` Jobs orphans their pods and the PodGroup derived from them).
fn delete_params(kind: Kind) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: (kind == Kind::Pod).then_some(0),
        propagation_policy: is_workload(kind).then_some(kube::api::PropagationPolicy::Background),
        ..DeleteParams::default()
    }
}

/// Kinds whose controller makes pods: deleted with background propagation (what `kubectl
/// delete` sends; the default of `apps/v1` too), their pods the run's.
fn is_workload(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Job | Kind::JobSet | Kind::LeaderWorkerSet | Kind::ReplicaSet | Kind::Deployment
    )
}

/// A failed step as the simulator's outcome reports it (time: the wall clock).
pub fn failure(report: &StepReport) -> StepFailure {
    StepFailure {
        index: report.index,
        label: report.label.clone(),
        time: wall_clock(),
        checks: report.checks,
        problems: report.problems.clone(),
    }
}
