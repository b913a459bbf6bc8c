//! Scenarios (`kind: Scenario`, see `scenarios/FORMAT.md`): a config, then steps that apply and
//! delete objects, advance the virtual clock, act as kubelets, and check expectations.
//!
//! A scenario is loaded whole before anything runs, so a malformed step, object or quantity is
//! an error naming the file, document and field path, not a failure half-way. Running stops
//! at the first failing step; the [`Outcome`] lists every mismatch of that step (an `expect`
//! reports all its failed checks together) or every invariant a session broke.

use crate::driver::{Mode, PodSelector, SessionReport, Simulation};
use crate::error::{Error, Origin, Result};
use crate::expect::{self, Checked, Expect};
use crate::manifest::{self, Kind, Manifests, Object};
use crate::selector::LabelSelector;
use caldera_config::SchedulerConfig;
use caldera_model::Time;
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::fmt;
use std::path::Path;
use std::time::Duration;

/// `apiVersion` of a scenario.
pub const API_VERSION: &str = "caldera.sh/v1alpha1";
/// `kind` of a scenario.
pub const KIND: &str = "Scenario";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawScenario {
    api_version: String,
    kind: String,
    metadata: RawMeta,
    spec: RawSpec,
}

#[derive(Deserialize)]
struct RawMeta {
    name: String,
    #[serde(default)]
    description: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    config: Option<String>,
    #[serde(default)]
    autoscaler: Option<RawAutoscaler>,
    // Steps are written `- run: 5s`: an enum as a map with one key.
    #[serde(with = "serde_yaml_ng::with::singleton_map_recursive")]
    steps: Vec<RawStep>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawAutoscaler {
    node_templates: Vec<Value>,
    #[serde(default)]
    delay: Option<String>,
    max_nodes: u32,
    #[serde(default)]
    booking_timeout: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
enum RawStep {
    Apply(Vec<Value>),
    Delete(Vec<RawRef>),
    Run(String),
    MarkRunning(RawPods),
    MarkSucceeded(RawPods),
    Expect(Expect),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRef {
    kind: String,
    #[serde(default)]
    namespace: Option<String>,
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPods {
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    selector: String,
}

/// An object to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// Kind.
    pub kind: Kind,
    /// Namespace (`default` for namespaced kinds when absent).
    pub namespace: Option<String>,
    /// Name.
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.namespace, self.kind.namespaced()) {
            (Some(ns), true) => write!(f, "{} {ns}/{}", self.kind, self.name),
            (None, true) => write!(f, "{} default/{}", self.kind, self.name),
            _ => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// One step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Apply objects, in order.
    Apply(Vec<Object>),
    /// Delete objects.
    Delete(Vec<ObjectRef>),
    /// Advance the clock, running sessions; the text as written.
    Run(Duration, String),
    /// Bound pods matching → phase Running.
    MarkRunning(PodSelector),
    /// Bound or running pods matching → phase Succeeded.
    MarkSucceeded(PodSelector),
    /// Check the cluster.
    Expect(Expect),
}

impl Step {
    /// A short label: `apply (3 objects)`, `run 5s`, `expect`, ...
    pub fn label(&self) -> String {
        match self {
            Step::Apply(objects) => format!("apply ({} objects)", objects.len()),
            Step::Delete(refs) => format!("delete ({} objects)", refs.len()),
            Step::Run(_, text) => format!("run {text}"),
            Step::MarkRunning(_) => "markRunning".into(),
            Step::MarkSucceeded(_) => "markSucceeded".into(),
            Step::Expect(_) => "expect".into(),
        }
    }
}

/// A loaded scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file it came from.
    pub file: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.description`.
    pub description: String,
    /// `spec.mode`: `caldera run` (absent) or `caldera gate` beside kube-scheduler (`gate`).
    pub mode: Mode,
    /// The scheduler config (`spec.config`, or the default).
    pub config: SchedulerConfig,
    /// The steps.
    pub steps: Vec<Step>,
    /// Skipped kinds in `apply` steps.
    pub notices: Vec<String>,
    /// `spec.autoscaler`: an autoscaler serving ProvisioningRequests.
    pub autoscaler: Option<caldera_actors::autoscaler::Settings>,
}

/// Whether `text` holds a scenario (its first document has `kind: Scenario`).
pub fn is_scenario(text: &str) -> bool {
    serde_yaml_ng::Deserializer::from_str(text)
        .next()
        .and_then(|doc| Value::deserialize(doc).ok())
        .is_some_and(|v| v.get("kind").and_then(Value::as_str) == Some(KIND))
}

fn invalid(origin: Origin, message: impl Into<String>) -> Error {
    Error::Invalid {
        origin,
        message: message.into(),
    }
}

/// Loads a scenario from `text`; `file` names it in errors.
pub fn load(text: &str, file: &str) -> Result<Scenario> {
    let mut documents = serde_yaml_ng::Deserializer::from_str(text);
    let origin = Origin::new(file, 1);
    let value = match documents.next() {
        Some(doc) => Value::deserialize(doc).map_err(|e| Error::Syntax {
            origin: origin.clone(),
            message: e.to_string(),
        })?,
        None => Value::Null,
    };
    if value.is_null() {
        return Err(invalid(origin, "empty: expected a Scenario"));
    }
    if documents.next().is_some() {
        return Err(invalid(
            Origin::new(file, 2),
            "a scenario file holds one document; put the objects in apply steps",
        ));
    }
    let raw: RawScenario = manifest::typed(value, &origin)?;
    if raw.api_version != API_VERSION {
        return Err(invalid(
            origin.at("apiVersion"),
            format!("expected {API_VERSION}, got {}", raw.api_version),
        ));
    }
    if raw.kind != KIND {
        return Err(invalid(
            origin.at("kind"),
            format!("expected {KIND}, got {}", raw.kind),
        ));
    }
    let config = match &raw.spec.config {
        Some(text) => {
            let origin = format!("{file} (spec.config)");
            caldera_config::parse(text, Some(Path::new(&origin))).map_err(Box::new)?
        }
        None => SchedulerConfig::default(),
    };
    let mode = match raw.spec.mode.as_deref() {
        None | Some("run") => Mode::Run,
        Some("gate") => Mode::Gate,
        Some(other) => {
            return Err(invalid(
                origin.at("spec.mode"),
                format!("unknown mode {other:?}; expected run or gate"),
            ))
        }
    };
    let autoscaler = match raw.spec.autoscaler {
        Some(a) => Some(autoscaler(a, &origin.at("spec.autoscaler"))?),
        None => None,
    };
    let mut notices = Vec::new();
    let mut steps = Vec::new();
    for (i, raw_step) in raw.spec.steps.into_iter().enumerate() {
        let at = origin.at(&format!("spec.steps[{i}]"));
        let step =
            match raw_step {
                RawStep::Apply(values) => {
                    let mut m = Manifests::default();
                    for (j, v) in values.into_iter().enumerate() {
                        manifest::parse_value(v, &at.at(&format!("apply[{j}]")), &mut m)?;
                    }
                    notices.extend(m.notices.messages);
                    Step::Apply(m.objects.into_iter().map(|(_, o)| o).collect())
                }
                RawStep::Delete(refs) => {
                    let mut out = Vec::new();
                    for (j, r) in refs.into_iter().enumerate() {
                        let kind = Kind::parse(&r.kind).ok_or_else(|| {
                            invalid(
                                at.at(&format!("delete[{j}].kind")),
                                format!(
                                    "unknown kind {:?}; expected one of {}",
                                    r.kind,
                                    Kind::ALL.map(Kind::as_str).join(", ")
                                ),
                            )
                        })?;
                        out.push(ObjectRef {
                            kind,
                            namespace: r.namespace,
                            name: r.name,
                        });
                    }
                    Step::Delete(out)
                }
                RawStep::Run(text) => {
                    let d = caldera_config::parse_duration(&text)
                        .map_err(|e| invalid(at.at("run"), e.to_string()))?;
                    Step::Run(d, text)
                }
                RawStep::MarkRunning(p) => Step::MarkRunning(pods(p, &at.at("markRunning"))?),
                RawStep::MarkSucceeded(p) => Step::MarkSucceeded(pods(p, &at.at("markSucceeded"))?),
                RawStep::Expect(e) => {
                    let lists =
                        e.nodes
                            .iter()
                            .enumerate()
                            .map(|(k, n)| (format!("expect.nodes[{k}].allocated"), &n.allocated))
                            .chain(e.queues.iter().enumerate().map(|(k, q)| {
                                (format!("expect.queues[{k}].allocated"), &q.allocated)
                            }));
                    for (path, list) in lists {
                        expect::parse_allocated(list).map_err(|m| invalid(at.at(&path), m))?;
                    }
                    for (k, sp) in e.selected_pods.iter().enumerate() {
                        LabelSelector::parse(&sp.selector).map_err(|m| {
                            invalid(at.at(&format!("expect.selectedPods[{k}].selector")), m)
                        })?;
                    }
                    Step::Expect(e)
                }
            };
        steps.push(step);
    }
    Ok(Scenario {
        file: file.to_string(),
        name: raw.metadata.name,
        description: raw.metadata.description,
        mode,
        config,
        steps,
        notices,
        autoscaler,
    })
}

/// `spec.autoscaler`: Node templates (checked like applied Nodes), the delay from acceptance
/// to Ready nodes (default 30s), the most nodes it adds, and the booking time (default 10m).
fn autoscaler(raw: RawAutoscaler, at: &Origin) -> Result<caldera_actors::autoscaler::Settings> {
    let mut templates = Vec::new();
    for (i, v) in raw.node_templates.into_iter().enumerate() {
        let here = at.at(&format!("nodeTemplates[{i}]"));
        let mut m = Manifests::default();
        manifest::parse_value(v, &here, &mut m)?;
        for (_, o) in m.objects {
            let Object::Node(node) = o else {
                return Err(invalid(here, "a node template must be a Node"));
            };
            if node.metadata.name.as_deref().unwrap_or_default().is_empty() {
                return Err(invalid(
                    here.at("metadata.name"),
                    "a node template needs a name",
                ));
            }
            caldera_cache::node(&node).map_err(|e| invalid(here.clone(), e.to_string()))?;
            templates.push(node);
        }
    }
    if templates.is_empty() {
        return Err(invalid(
            at.at("nodeTemplates"),
            "at least one node template is needed",
        ));
    }
    let duration = |text: Option<String>, default: Duration, key: &str| -> Result<i64> {
        let d = match text {
            Some(t) => caldera_config::parse_duration(&t)
                .map_err(|e| invalid(at.at(key), e.to_string()))?,
            None => default,
        };
        Ok(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    };
    Ok(caldera_actors::autoscaler::Settings {
        templates,
        delay_ms: duration(raw.delay, Duration::from_secs(30), "delay")?,
        max_nodes: raw.max_nodes,
        booking_ms: duration(
            raw.booking_timeout,
            Duration::from_secs(600),
            "bookingTimeout",
        )?,
    })
}

fn pods(raw: RawPods, at: &Origin) -> Result<PodSelector> {
    let selector =
        LabelSelector::parse(&raw.selector).map_err(|m| invalid(at.at("selector"), m))?;
    Ok(PodSelector {
        namespace: raw.namespace,
        selector,
    })
}

/// A step that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure {
    /// 0-based index into the steps (`spec.steps[index]`).
    pub index: usize,
    /// The step's label.
    pub label: String,
    /// Virtual time when it failed.
    pub time: Time,
    /// Checks made (for `expect`).
    pub checks: usize,
    /// One line per mismatch or broken invariant.
    pub problems: Vec<String>,
}

/// What one step did, for callers that narrate a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepResult {
    /// Sessions run by a `run` step.
    pub sessions: Vec<SessionReport>,
    /// The check of an `expect` step.
    pub checked: Option<Checked>,
    /// Objects a kubelet step changed.
    pub marked: usize,
    /// Set when the step failed.
    pub failure: Option<StepFailure>,
}

/// How a scenario went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Scenario name.
    pub name: String,
    /// The file.
    pub file: String,
    /// Steps in the scenario.
    pub steps: usize,
    /// Steps run (all of them unless one failed).
    pub steps_run: usize,
    /// Sessions run.
    pub sessions: u64,
    /// The failed step, if any.
    pub failure: Option<StepFailure>,
}

impl Outcome {
    /// Whether every step passed.
    pub fn passed(&self) -> bool {
        self.failure.is_none()
    }
}

/// `PASS name (…)`, or `FAIL name` with the failed step and every mismatch, one per line.
impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(failure) = &self.failure else {
            return writeln!(
                f,
                "PASS {} ({} steps, {} sessions)",
                self.name, self.steps, self.sessions
            );
        };
        writeln!(f, "FAIL {} ({})", self.name, self.file)?;
        let what = if failure.checks > 0 {
            format!(
                "{} of {} checks failed",
                failure.problems.len(),
                failure.checks
            )
        } else {
            format!("{} problems", failure.problems.len())
        };
        writeln!(
            f,
            "step {} of {} (spec.steps[{}]: {}) at {}: {what}",
            failure.index + 1,
            self.steps,
            failure.index,
            failure.label,
            failure.time
        )?;
        for p in &failure.problems {
            writeln!(f, "  - {p}")?;
        }
        if self.steps_run < self.steps {
            writeln!(
                f,
                "steps {}..{} were not run",
                self.steps_run + 1,
                self.steps
            )?;
        }
        Ok(())
    }
}

impl Scenario {
    /// A fresh simulation with this scenario's config and mode.
    pub fn simulation(&self) -> Result<Simulation> {
        let mut sim = Simulation::with_mode(&self.config, self.mode)?;
        if let Some(a) = &self.autoscaler {
            sim.set_autoscaler(a.clone());
        }
        Ok(sim)
    }

    /// Runs every step on a fresh simulation with the real scheduler.
    pub fn run(&self) -> Result<(Outcome, Simulation)> {
        let mut sim = self.simulation()?;
        let outcome = self.run_on(&mut sim, &mut |_, _, _, _| {});
        Ok((outcome, sim))
    }

    /// Runs the steps on `sim`, calling `observe(index, step, sim, result)` after each; stops
    /// at the first failing step.
    pub fn run_on(
        &self,
        sim: &mut Simulation,
        observe: &mut dyn FnMut(usize, &Step, &Simulation, &StepResult),
    ) -> Outcome {
        let mut outcome = Outcome {
            name: self.name.clone(),
            file: self.file.clone(),
            steps: self.steps.len(),
            steps_run: 0,
            sessions: 0,
            failure: None,
        };
        for (index, step) in self.steps.iter().enumerate() {
            let result = run_step(index, step, sim);
            observe(index, step, sim, &result);
            outcome.steps_run = index + 1;
            if let Some(failure) = result.failure {
                outcome.failure = Some(failure);
                break;
            }
        }
        outcome.sessions = sim.sessions();
        outcome
    }
}

pub(crate) fn run_step(index: usize, step: &Step, sim: &mut Simulation) -> StepResult {
    let mut result = StepResult::default();
    let mut problems = Vec::new();
    let mut checks = 0;
    match step {
        Step::Apply(objects) => {
            for o in objects {
                if let Err(e) = sim.apply([o.clone()]) {
                    problems.push(format!("{}: rejected: {e}", o.describe()));
                }
            }
        }
        Step::Delete(refs) => {
            for r in refs {
                if !sim.delete(r.kind, r.namespace.as_deref(), &r.name) {
                    problems.push(format!("{r}: not found"));
                }
            }
        }
        Step::Run(d, _) => {
            result.sessions = sim.run_for(*d);
            for s in &result.sessions {
                for v in &s.violations {
                    problems.push(format!("session {} at {}: {v}", s.number, s.time));
                }
            }
        }
        Step::MarkRunning(which) => result.marked = sim.mark(which, "Running"),
        Step::MarkSucceeded(which) => result.marked = sim.mark(which, "Succeeded"),
        Step::Expect(e) => {
            let checked = expect::check(e, sim);
            checks = checked.checks;
            problems.extend(checked.failures.iter().cloned());
            result.checked = Some(checked);
        }
    }
    if !problems.is_empty() {
        result.failure = Some(StepFailure {
            index,
            label: step.label(),
            time: sim.now(),
            checks,
            problems,
        });
    }
    result
}
