//! `caldera bench perf CONFIG`: kube-scheduler's own benchmark workloads (scheduler_perf's
//! config format, [`mod@format`]) run in-process against Caldera's session on the simulator's
//! store, with native `scheduling.k8s.io` PodGroups, reporting `SchedulingThroughput` as
//! scheduler_perf does (average and percentiles of throughput samples, pods/s).
//!
//! What is measured (docs/scale.md): after a `createPods` op has put its pods in the store
//! (not timed), sessions run back to back until every pod of the op is bound. Each session's
//! wall time covers the snapshot from the cache, the session, and the plan carried out into
//! the store (binds and status writes), the in-process stand-in for a scheduling cycle and
//! its binder. A session that binds pods is one throughput sample (pods bound / its time,
//! with the time of sessions before it that bound nothing added, as scheduler_perf folds
//! empty intervals into the next); samples of every run are pooled; the average is their
//! mean and the percentiles are nearest-rank, as scheduler_perf's `throughputCollector`
//! computes them over its one-second samples.

pub mod format;
pub mod template;

use caldera_config::SchedulerConfig;
use caldera_model::{Snapshot, Time};
use caldera_sim::manifest::Object;
use caldera_sim::{Scheduling, SessionOutput, Simulation};
use format::{Count, OpKind, Source, TestCase, Workload};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1alpha2::PodGroup as NativePodGroup;
use serde::Serialize;
use serde_json::Value;
use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::rc::Rc;
use std::time::Instant;

/// What went wrong reading or running a config. None is worth retrying: the config, a
/// template or the workload is wrong (or asks for what this runner does not do).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("reading {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The config or a template is not what the format allows.
    #[error("{file}: {at}: {message}")]
    Invalid {
        /// The config (or template).
        file: String,
        /// Where in it.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// An opcode, field or object kind this runner does not carry out.
    #[error("{file}: {at}: {what} is not supported by caldera bench perf")]
    Unsupported {
        /// The config.
        file: String,
        /// Where in it.
        at: String,
        /// What (`opcode `deletePods``, `field `steadyState``).
        what: String,
    },
    /// A workload failed while it ran (an object refused by the store, a wait not met).
    #[error("{workload}: {message}")]
    Run {
        /// `TestCase/Workload`.
        workload: String,
        /// What happened.
        message: String,
    },
    /// The scheduler could not be built from its config.
    #[error("scheduler: {0}")]
    Scheduler(String),
    /// No workload matched the selection.
    #[error("no workload of {config} matches {selection}")]
    NoWorkload {
        /// The config.
        config: String,
        /// The labels or name asked for.
        selection: String,
    },
}

/// Which workloads to run, and how often.
#[derive(Debug, Clone)]
pub struct PerfOptions {
    /// Run workloads carrying every one of these labels (scheduler_perf's
    /// `-perf-scheduling-label-filter`; `performance` by default in the CLI).
    pub labels: Vec<String>,
    /// Run only the workload of this name (`Workload` or `TestCase/Workload`), whatever its
    /// labels.
    pub workload: Option<String>,
    /// Runs of each workload (fresh cluster each time); samples are pooled.
    pub runs: usize,
}

/// The figures of one workload.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    /// The test case (`GangScheduling`).
    pub test_case: String,
    /// The workload (`5000Nodes_1000Gangs_3000Pods`).
    pub workload: String,
    /// Nodes created.
    pub nodes: usize,
    /// Pods created by `createPods` ops with `collectMetrics` (those measured).
    pub pods: usize,
    /// PodGroups created.
    pub gangs: usize,
    /// Runs.
    pub runs: usize,
    /// Every pod bound and every PodGroup whole (all its pods bound) in every run, each
    /// topology constraint honoured.
    pub all_bound: bool,
    /// Pods left unbound (over all runs).
    pub unbound_pods: usize,
    /// PodGroups bound in part (over all runs).
    pub partial_gangs: usize,
    /// PodGroups whose pods are bound across more than one domain of their
    /// `schedulingConstraints.topology` key (over all runs).
    pub topology_violations: usize,
    /// Sessions run while measuring, per run (the largest).
    pub sessions: usize,
    /// Throughput samples (sessions that bound pods, over all runs).
    pub samples: usize,
    /// `SchedulingThroughput` `Average`: mean of the samples (pods/s).
    pub throughput_average: f64,
    /// `Perc50` (pods/s, nearest rank).
    pub throughput_p50: f64,
    /// `Perc90`.
    pub throughput_p90: f64,
    /// `Perc95`.
    pub throughput_p95: f64,
    /// `Perc99`.
    pub throughput_p99: f64,
    /// Measured seconds per run (mean): every session's snapshot, session and plan carried
    /// out, from the first measured session to the last pod bound.
    pub seconds: f64,
    /// Of that, Caldera's session alone (`Scheduler::run`), per run (mean).
    pub session_seconds: f64,
    /// Pods / session_seconds: the session's own rate.
    pub session_pods_per_second: f64,
    /// Time to render, parse and store the objects, per run (mean; not measured above).
    pub setup_seconds: f64,
}

/// Runs the selected workloads of a config with the shipped scheduler config, serving pods of
/// `default-scheduler` (scheduler_perf's pods name no scheduler).
pub fn run(source: Source<'_>, opts: &PerfOptions) -> Result<Vec<WorkloadResult>, Error> {
    let cases = format::parse(source)?;
    let selected = select(&cases, opts);
    if selected.is_empty() {
        return Err(Error::NoWorkload {
            config: source.name(),
            selection: match &opts.workload {
                Some(w) => format!("name {w}"),
                None => format!("labels {:?}", opts.labels),
            },
        });
    }
    let config = scheduler_config();
    selected
        .into_iter()
        .map(|(case, w)| run_workload(case, w, &config, opts.runs.max(1)))
        .collect()
}

/// The workloads `opts` selects, in config order.
pub fn select<'a>(cases: &'a [TestCase], opts: &PerfOptions) -> Vec<(&'a TestCase, &'a Workload)> {
    cases
        .iter()
        .flat_map(|c| c.workloads.iter().map(move |w| (c, w)))
        .filter(|(c, w)| match &opts.workload {
            Some(name) => *name == w.name || *name == format!("{}/{}", c.name, w.name),
            None => opts.labels.iter().all(|l| w.labels.contains(l)),
        })
        .collect()
}

/// The shipped config, serving `default-scheduler` as well: in scheduler_perf, Caldera takes
/// kube-scheduler's place.
pub fn scheduler_config() -> SchedulerConfig {
    let mut config = SchedulerConfig::default();
    config
        .scheduler_names
        .push(caldera_api::KUBE_SCHEDULER_NAME.to_string());
    config
}

/// The real scheduler, its session timed.
struct Timed {
    inner: caldera_session::Scheduler,
    seconds: Rc<Cell<f64>>,
}

impl Scheduling for Timed {
    fn run_session(&mut self, snapshot: &Snapshot, now: Time) -> SessionOutput {
        let t = Instant::now();
        let out = self.inner.run_session(snapshot, now);
        self.seconds
            .set(self.seconds.get() + t.elapsed().as_secs_f64());
        out
    }

    fn run_session_owned(&mut self, snapshot: Snapshot, now: Time) -> SessionOutput {
        let t = Instant::now();
        let out = self.inner.run_session_owned(snapshot, now);
        self.seconds
            .set(self.seconds.get() + t.elapsed().as_secs_f64());
        out
    }
}

/// Sessions in a row that bind nothing before a `createPods` op gives up on its pods.
const QUIET_SESSIONS: usize = 5;

/// One run's account.
#[derive(Default)]
struct RunAccount {
    nodes: usize,
    pods: usize,
    gangs: usize,
    unbound: usize,
    partial: usize,
    topology_violations: usize,
    sessions: usize,
    samples: Vec<f64>,
    seconds: f64,
    session_seconds: f64,
    setup_seconds: f64,
}

fn run_workload(
    case: &TestCase,
    w: &Workload,
    config: &SchedulerConfig,
    runs: usize,
) -> Result<WorkloadResult, Error> {
    let mut accounts = Vec::new();
    for _ in 0..runs {
        accounts.push(run_once(case, w, config)?);
    }
    let mut samples: Vec<f64> = accounts.iter().flat_map(|a| a.samples.clone()).collect();
    samples.sort_by(f64::total_cmp);
    let perc = |p: usize| nearest_rank(&samples, p);
    let n = accounts.len() as f64;
    let first = &accounts[0];
    let sum = |f: fn(&RunAccount) -> usize| accounts.iter().map(f).sum::<usize>();
    let mean = |f: fn(&RunAccount) -> f64| accounts.iter().map(f).sum::<f64>() / n;
    let session_seconds = mean(|a| a.session_seconds);
    let (unbound, partial, topology) = (
        sum(|a| a.unbound),
        sum(|a| a.partial),
        sum(|a| a.topology_violations),
    );
    Ok(WorkloadResult {
        test_case: case.name.clone(),
        workload: w.name.clone(),
        nodes: first.nodes,
        pods: first.pods,
        gangs: first.gangs,
        runs,
        all_bound: unbound == 0 && partial == 0 && topology == 0,
        unbound_pods: unbound,
        partial_gangs: partial,
        topology_violations: topology,
        sessions: accounts.iter().map(|a| a.sessions).max().unwrap_or(0),
        samples: samples.len(),
        throughput_average: if samples.is_empty() {
            0.0
        } else {
            samples.iter().sum::<f64>() / samples.len() as f64
        },
        throughput_p50: perc(50),
        throughput_p90: perc(90),
        throughput_p95: perc(95),
        throughput_p99: perc(99),
        seconds: mean(|a| a.seconds),
        session_seconds,
        session_pods_per_second: first.pods as f64 / session_seconds.max(1e-9),
        setup_seconds: mean(|a| a.setup_seconds),
    })
}

/// scheduler_perf's percentile: the sample at rank ⌈len·p/100⌉ of the sorted samples.
pub fn nearest_rank(sorted: &[f64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

fn run_once(case: &TestCase, w: &Workload, config: &SchedulerConfig) -> Result<RunAccount, Error> {
    let id = format!("{}/{}", case.name, w.name);
    let fail = |message: String| Error::Run {
        workload: id.clone(),
        message,
    };
    let session_seconds = Rc::new(Cell::new(0.0));
    let scheduler =
        caldera_plugins::scheduler(config).map_err(|e| Error::Scheduler(e.to_string()))?;
    let opts = caldera_cache::SnapshotOptions {
        scheduler_names: config.scheduler_names.clone(),
        default_gang_timeout: config.gang_schedule_timeout,
        ..caldera_cache::SnapshotOptions::default()
    };
    let mut sim = Simulation::with_scheduler(
        Box::new(Timed {
            inner: scheduler,
            seconds: session_seconds.clone(),
        }),
        config.schedule_period,
        opts,
    );
    sim.set_checks(false);
    let period = i64::try_from(config.schedule_period.as_millis())
        .unwrap_or(1000)
        .max(1);
    let mut account = RunAccount::default();
    // Gangs by namespace/name: their topology key, if any.
    let mut gangs: BTreeMap<String, Option<String>> = BTreeMap::new();
    for op in &case.ops {
        let at = op.at.as_str();
        let count = |c: &Count| c.resolve(w, at).map_err(fail);
        match &op.kind {
            OpKind::CreateNodes {
                count: c,
                template,
                params,
            } => {
                let n = count(c)?;
                let params = format::resolve_params(params, w, at).map_err(fail)?;
                let t = Instant::now();
                for i in 0..n {
                    let object = match template {
                        Some(template) => {
                            let text = render(template, &params, i, n).map_err(fail)?;
                            let object =
                                object(&text, i == 0).map_err(|m| fail(format!("{at}: {m}")))?;
                            if !matches!(object, Object::Node(_)) {
                                return Err(fail(format!(
                                    "{at}: the template makes a {}, not a Node",
                                    object.kind()
                                )));
                            }
                            object
                        }
                        None => base_node(account.nodes),
                    };
                    apply(&mut sim, object).map_err(|m| fail(format!("{at}: {m}")))?;
                    account.nodes += 1;
                }
                account.setup_seconds += t.elapsed().as_secs_f64();
            }
            OpKind::CreateNamespaces { prefix, count: c } => {
                for i in 0..count(c)? {
                    let ns = k8s_openapi::api::core::v1::Namespace {
                        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                            name: Some(format!("{prefix}-{i}")),
                            ..Default::default()
                        },
                        ..Default::default()
                    };
                    apply(&mut sim, Object::Namespace(ns)).map_err(fail)?;
                }
            }
            OpKind::CreateObjects {
                count: c,
                namespace,
                template,
                template_path,
                params,
            } => {
                let n = count(c)?;
                let params = format::resolve_params(params, w, at).map_err(fail)?;
                let t = Instant::now();
                for i in 0..n {
                    let text = render(template, &params, i, n).map_err(fail)?;
                    let mut object = object(&text, i == 0)
                        .map_err(|m| fail(format!("{at}: {template_path}: {m}")))?;
                    match &mut object {
                        Object::NativePodGroup(pg) => {
                            let ns = namespace.clone().ok_or_else(|| {
                                fail(format!("{at}: a PodGroup needs `namespace`"))
                            })?;
                            let name = pg.metadata.name.clone().unwrap_or_default();
                            let key = pg
                                .spec
                                .scheduling_constraints
                                .as_ref()
                                .and_then(|c| c.topology.as_ref())
                                .and_then(|t| t.first())
                                .map(|t| t.key.clone());
                            gangs.insert(format!("{ns}/{name}"), key);
                            pg.metadata.namespace = Some(ns);
                        }
                        other => {
                            return Err(Error::Unsupported {
                                file: template_path.clone(),
                                at: at.to_string(),
                                what: format!("creating a {} here", other.kind()),
                            })
                        }
                    }
                    apply(&mut sim, object).map_err(|m| fail(format!("{at}: {m}")))?;
                }
                account.setup_seconds += t.elapsed().as_secs_f64();
            }
            OpKind::WaitForPodGroups {
                namespace,
                count: c,
            } => {
                let want = count(c)? as usize;
                let have = sim
                    .store()
                    .list::<NativePodGroup>()
                    .filter(|pg| pg.metadata.namespace.as_deref() == Some(namespace.as_str()))
                    .count();
                if have < want {
                    return Err(fail(format!(
                        "{at}: {have} PodGroups in {namespace}, {want} awaited"
                    )));
                }
            }
            OpKind::CreatePods {
                count: c,
                multiplier,
                namespace,
                template,
                template_path,
                collect_metrics,
                skip_wait,
                params,
            } => {
                let n =
                    count(c)? * format::multiplier(multiplier.as_deref(), w, at).map_err(fail)?;
                let params = format::resolve_params(params, w, at).map_err(fail)?;
                let t = Instant::now();
                let mut waiting: HashSet<String> = HashSet::new();
                for i in 0..n {
                    let text = render(template, &params, i, n).map_err(fail)?;
                    let mut object = object(&text, i == 0)
                        .map_err(|m| fail(format!("{at}: {template_path}: {m}")))?;
                    let Object::Pod(pod) = &mut object else {
                        return Err(fail(format!(
                            "{at}: {template_path} makes a {}, not a Pod",
                            object.kind()
                        )));
                    };
                    pod.metadata.namespace = Some(namespace.clone());
                    waiting.insert(format!(
                        "{namespace}/{}",
                        pod.metadata.name.as_deref().unwrap_or_default()
                    ));
                    apply(&mut sim, object).map_err(|m| fail(format!("{at}: {m}")))?;
                }
                account.setup_seconds += t.elapsed().as_secs_f64();
                if *collect_metrics {
                    account.pods += waiting.len();
                }
                if *skip_wait {
                    continue;
                }
                let before = session_seconds.get();
                let mut quiet = 0;
                let mut idle = 0.0;
                while !waiting.is_empty() && quiet < QUIET_SESSIONS {
                    sim.advance_to(sim.now().plus_millis(period));
                    let t = Instant::now();
                    let report = sim.session();
                    let seconds = t.elapsed().as_secs_f64();
                    let bound = report
                        .bound
                        .iter()
                        .filter(|(pod, _)| waiting.remove(pod))
                        .count();
                    if !*collect_metrics {
                        continue;
                    }
                    account.sessions += 1;
                    account.seconds += seconds;
                    if bound == 0 {
                        quiet += 1;
                        idle += seconds;
                        continue;
                    }
                    quiet = 0;
                    account.samples.push(bound as f64 / (seconds + idle));
                    idle = 0.0;
                }
                if *collect_metrics {
                    account.session_seconds += session_seconds.get() - before;
                }
            }
        }
    }
    account.gangs = gangs.len();
    check(&sim, &gangs, &mut account);
    Ok(account)
}

/// Counts what is not bound, gangs bound in part, and gangs spread over more than one domain
/// of their topology key.
fn check(sim: &Simulation, gangs: &BTreeMap<String, Option<String>>, account: &mut RunAccount) {
    let store = sim.store();
    // Per gang: (members, bound, domains bound to).
    let mut members: BTreeMap<String, (usize, usize, HashSet<String>)> = BTreeMap::new();
    for pod in store.list::<Pod>() {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let node = caldera_sim::store::node_name(pod);
        if node.is_none() {
            account.unbound += 1;
        }
        let Some(group) = pod
            .spec
            .as_ref()
            .and_then(|s| s.scheduling_group.as_ref())
            .and_then(|g| g.pod_group_name.as_deref())
        else {
            continue;
        };
        let key = format!("{ns}/{group}");
        let entry = members.entry(key.clone()).or_default();
        entry.0 += 1;
        if let Some(node) = node {
            entry.1 += 1;
            if let Some(Some(label)) = gangs.get(&key) {
                let domain = store
                    .node(node)
                    .and_then(|n| n.metadata.labels.as_ref())
                    .and_then(|l| l.get(label))
                    .cloned()
                    .unwrap_or_default();
                entry.2.insert(domain);
            }
        }
    }
    for (total, bound, domains) in members.values() {
        if *bound > 0 && bound < total {
            account.partial += 1;
        }
        if domains.len() > 1 {
            account.topology_violations += 1;
        }
    }
}

fn render(
    template: &template::Template,
    params: &BTreeMap<String, Value>,
    index: u64,
    count: u64,
) -> Result<String, String> {
    let mut env = params.clone();
    env.insert("Index".into(), Value::from(index));
    env.insert("Count".into(), Value::from(count));
    template.render(&env)
}

fn apply(sim: &mut Simulation, object: Object) -> Result<(), String> {
    let now = sim.now();
    let describe = object.describe();
    sim.store_mut()
        .apply(object, now)
        .map(drop)
        .map_err(|e| format!("{describe}: {e}"))
}

/// The API versions of `scheduling.k8s.io` PodGroup read as Caldera's
/// `scheduling.k8s.io/v1alpha2`: what Caldera reads of a PodGroup (`schedulingPolicy.gang.minCount`,
/// `schedulingPolicy.basic`, `schedulingConstraints.topology[].key`) has the same shape in
/// them; any field the v1alpha2 type does not hold is refused (`strict`).
const PODGROUP_VERSIONS: &[&str] = &["v1alpha2", "v1alpha3", "v1beta1"];

/// A rendered template as an object of the store. With `strict`, a field the typed object
/// drops (one Caldera would not see) is an error naming it: done for the first object of
/// each op, as the others come from the same template.
fn object(text: &str, strict: bool) -> Result<Object, String> {
    let mut v: Value = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    let api_version = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let kind = v
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
    let object = match (group, version, kind.as_str()) {
        ("", "v1", "Node") => Object::Node(typed(&v, strict)?),
        ("", "v1", "Pod") => Object::Pod(typed(&v, strict)?),
        ("scheduling.k8s.io", version, "PodGroup") if PODGROUP_VERSIONS.contains(&version) => {
            v["apiVersion"] = Value::String(caldera_cache::native::GROUP_VERSION.into());
            Object::NativePodGroup(typed(&v, strict)?)
        }
        _ => {
            return Err(format!(
                "kind {kind} ({api_version}) is not supported by caldera bench perf"
            ))
        }
    };
    Ok(object)
}

fn typed<T: serde::de::DeserializeOwned + Serialize>(v: &Value, strict: bool) -> Result<T, String> {
    let t: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    if strict {
        let back = serde_json::to_value(&t).map_err(|e| e.to_string())?;
        if let Some(path) = dropped(v, &back, "") {
            return Err(format!(
                "field {path} is not read (not in Caldera's types of this kind)"
            ));
        }
    }
    Ok(t)
}

/// The first path present in `input` but not in `kept`.
fn dropped(input: &Value, kept: &Value, path: &str) -> Option<String> {
    match (input, kept) {
        (Value::Object(a), Value::Object(b)) => a.iter().find_map(|(k, v)| {
            let p = format!("{path}.{k}");
            match b.get(k) {
                None if !v.is_null() => Some(p),
                None => None,
                Some(kv) => dropped(v, kv, &p),
            }
        }),
        (Value::Array(a), Value::Array(b)) => a.iter().enumerate().find_map(|(i, v)| {
            let p = format!("{path}[{i}]");
            match b.get(i) {
                None => Some(p),
                Some(kv) => dropped(v, kv, &p),
            }
        }),
        _ => None,
    }
}

/// scheduler_perf's base node (`createNodes` without a template): 4 CPU, 32Gi, 110 pods,
/// Ready; named `scheduler-perf-<i>` (upstream: `GenerateName: scheduler-perf-`).
fn base_node(i: usize) -> Object {
    let quantity = |s: &str| k8s_openapi::apimachinery::pkg::api::resource::Quantity(s.into());
    let resources = BTreeMap::from([
        ("cpu".to_string(), quantity("4")),
        ("memory".to_string(), quantity("32Gi")),
        ("pods".to_string(), quantity("110")),
    ]);
    let name = format!("scheduler-perf-{i}");
    Object::Node(k8s_openapi::api::core::v1::Node {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.clone()),
            labels: Some(BTreeMap::from([(
                "kubernetes.io/hostname".to_string(),
                name,
            )])),
            ..Default::default()
        },
        spec: None,
        status: Some(k8s_openapi::api::core::v1::NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            phase: Some("Running".into()),
            conditions: Some(vec![k8s_openapi::api::core::v1::NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    })
}
