//! `caldera simulate`: run the real scheduling cycle against an in-memory cluster with a
//! virtual clock — a scenario file (checked, exit 1 with a diff on failure), plain manifests
//! (`-f`), or, with no arguments, the bundled seed-article example told step by step.

use caldera_config::SchedulerConfig;
use caldera_sim::compare::elapsed;
use caldera_sim::driver::SessionReport;
use caldera_sim::manifest::{self, Object};
use caldera_sim::scenario::{self, Scenario, Step, StepResult};
use caldera_sim::{report, Simulation};
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Tables for people.
    Text,
    /// One JSON document: pods, podGroups, nodes, queues (sorted, deterministic).
    Json,
}

/// What `--compare` sets beside Caldera.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareWith {
    /// The kube-scheduler model placing every pod one at a time (no gangs).
    KubeScheduler,
}

/// Arguments of `caldera simulate`.
#[derive(Debug, Args)]
#[command(after_help = "\
Without arguments, runs a bundled example: a TP=8 training gang that gets no GPU while only 6 \
are free, then all 8 at once when a node frees up.

Examples:
  caldera simulate scenarios/seed1-partial-gang.yaml
  caldera simulate -f cluster.yaml -f jobs.yaml --for 2m -o json
  caldera simulate --compare kube-scheduler
  kubectl get nodes,pods -A -o yaml | caldera simulate -f -")]
pub struct SimulateArgs {
    /// A scenario file (`kind: Scenario`): run its steps and check its expectations. A file
    /// of plain manifests is read as with -f.
    pub scenario: Option<PathBuf>,
    /// Manifests to apply (multi-document YAML: Nodes, Pods, PodGroups, Queues,
    /// PriorityClasses, HyperNodes, PodDisruptionBudgets, PersistentVolumes, PersistentVolumeClaims,
    /// StorageClasses, CSINodes; StatefulSets are expanded as their controller would); `-`
    /// reads stdin. Repeatable.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub files: Vec<String>,
    /// With -f: how much virtual time to run, e.g. 30s or 5m. Default: until two sessions in a
    /// row change nothing (at most 1h).
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// With -f: the scheduler config (config/scheduler.yaml format). Default: the shipped one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Also run the same cluster and steps with kube-scheduler alone (every pod placed one at
    /// a time, whatever its schedulerName) and show both outcomes side by side; `-o json`
    /// carries both.
    #[arg(long, value_enum, value_name = "SCHEDULER")]
    pub compare: Option<CompareWith>,
}

fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    caldera_config::parse_duration(s).map_err(|e| e.to_string())
}

/// Errors of `simulate`; `main` prints them and exits 1.
type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Runs `caldera simulate`.
pub fn run(args: SimulateArgs) -> Result {
    match &args.scenario {
        Some(path) if !args.files.is_empty() => Err(format!(
            "give either a scenario ({}) or -f manifests, not both",
            path.display()
        )
        .into()),
        Some(path) => {
            let file = path.display().to_string();
            let text = read(&file)?;
            if scenario::is_scenario(&text) {
                if args.duration.is_some() || args.config.is_some() {
                    return Err(format!(
                        "{file}: a scenario carries its own config and run steps; --for and --config apply to -f manifests"
                    )
                    .into());
                }
                let scenario = scenario::load(&text, &file)?;
                if args.compare.is_some() {
                    return compare_scenario(&scenario, args.output, false);
                }
                run_scenario(&scenario, args.output, false)
            } else {
                run_manifests(&[(file, text)], &args)
            }
        }
        None if !args.files.is_empty() => {
            let mut inputs = Vec::new();
            for file in &args.files {
                inputs.push((file.clone(), read(file)?));
            }
            run_manifests(&inputs, &args)
        }
        None => {
            if args.duration.is_some() || args.config.is_some() {
                return Err("--for and --config apply to -f manifests".into());
            }
            let example = scenario::load(
                caldera_sim::BUNDLED_EXAMPLE,
                caldera_sim::BUNDLED_EXAMPLE_NAME,
            )?;
            if args.compare.is_some() {
                return compare_scenario(&example, args.output, true);
            }
            run_scenario(&example, args.output, true)
        }
    }
}

fn compare_scenario(scenario: &Scenario, output: Output, bundled: bool) -> Result {
    for notice in &scenario.notices {
        eprintln!("caldera: {notice}");
    }
    let (comparison, outcome) = caldera_sim::compare::scenario(scenario)?;
    match output {
        Output::Text => {
            let what = if bundled {
                "Bundled example"
            } else {
                "Scenario"
            };
            let mut out = format!(
                "{what} {}: kube-scheduler alone next to Caldera ({}), bound members per gang\n",
                scenario.name,
                match scenario.mode {
                    caldera_sim::Mode::Gate => "caldera gate beside kube-scheduler",
                    _ => "caldera run",
                }
            );
            out.push_str(&wrap(&scenario.description, 92, "  "));
            out.push('\n');
            out.push_str(&caldera_sim::compare::render_text(&comparison));
            out.push_str(&format!("\n{outcome}"));
            write_out(&out)?;
        }
        Output::Json => {
            let mut json = serde_json::to_string_pretty(&comparison)?;
            json.push('\n');
            write_out(&json)?;
            if !outcome.passed() {
                eprint!("{outcome}");
            }
        }
    }
    if outcome.passed() {
        Ok(())
    } else {
        Err(format!("scenario {} failed", scenario.name).into())
    }
}

/// Reads a file, or stdin for `-`.
pub(crate) fn read(file: &str) -> Result<String> {
    if file == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("-: cannot read stdin: {e}"))?;
        return Ok(text);
    }
    std::fs::read_to_string(file).map_err(|e| format!("{file}: cannot read: {e}").into())
}

fn write_out(text: &str) -> Result {
    // `write_all` rather than `print!`, so a closed pipe is an error, not a panic.
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                "\n".to_string()
            } else {
                format!("{by}{l}\n")
            }
        })
        .collect()
}

/// Wraps `text` at `width` columns, each line prefixed with `by`.
fn wrap(text: &str, width: usize, by: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            let _ = writeln!(out, "{by}{line}");
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        let _ = writeln!(out, "{by}{line}");
    }
    out
}

/// `2 Nodes, 10 Pods, 1 PodGroup`.
fn count_kinds(objects: &[Object]) -> String {
    let mut counts: BTreeMap<manifest::Kind, usize> = BTreeMap::new();
    for o in objects {
        *counts.entry(o.kind()).or_default() += 1;
    }
    counts
        .into_iter()
        .map(|(k, n)| {
            let k = k.to_string();
            let plural = match n {
                1 => "",
                _ if k.ends_with('s') => "es",
                _ => "s",
            };
            format!("{n} {k}{plural}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A summary line (`3 sessions (+1s .. +3s)`, `, nothing bound` when nothing happened),
/// then one line per bound gang, timed-out gang or broken invariant.
fn describe_sessions(sim: &Simulation, sessions: &[SessionReport]) -> Vec<String> {
    let (Some(first), Some(last)) = (sessions.first(), sessions.last()) else {
        return vec!["no session ran".into()];
    };
    let mut lines = vec![format!(
        "{} session{} ({} .. {})",
        sessions.len(),
        if sessions.len() == 1 { "" } else { "s" },
        elapsed(first.time),
        elapsed(last.time)
    )];
    for s in sessions {
        // Group binds by gang (or lone pod), then count per node.
        let mut by_gang: BTreeMap<String, BTreeMap<&str, usize>> = BTreeMap::new();
        for (pod, node) in &s.bound {
            let (ns, name) = pod.split_once('/').unwrap_or(("default", pod));
            let gang = sim
                .store()
                .pod(ns, name)
                .and_then(|p| sim.store().group_of(p))
                .map(|g| format!("gang {ns}/{g}"))
                .unwrap_or_else(|| format!("pod {pod}"));
            *by_gang.entry(gang).or_default().entry(node).or_default() += 1;
        }
        let mut released: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, node) in &s.released {
            *released.entry(node).or_default() += 1;
        }
        if !released.is_empty() {
            let spread: Vec<String> = released.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
            lines.push(format!(
                "{}: released {} pod{} to kube-scheduler → {}",
                elapsed(s.time),
                s.released.len(),
                if s.released.len() == 1 { "" } else { "s" },
                spread.join(", ")
            ));
        }
        for (gang, nodes) in by_gang {
            let total: usize = nodes.values().sum();
            let spread: Vec<String> = nodes.iter().map(|(n, c)| format!("{n} ×{c}")).collect();
            lines.push(format!(
                "{}: bound {gang}, {total} pod{} → {}",
                elapsed(s.time),
                if total == 1 { "" } else { "s" },
                spread.join(", ")
            ));
        }
        if !s.evicted.is_empty() {
            lines.push(format!(
                "{}: evicted (preempt/reclaim; they keep their nodes for their grace period): {}",
                elapsed(s.time),
                s.evicted.join(", ")
            ));
        }
        if !s.failed.is_empty() {
            lines.push(format!(
                "{}: marked Failed (gang timeout): {}",
                elapsed(s.time),
                s.failed.join(", ")
            ));
        }
        for v in &s.violations {
            lines.push(format!("{}: INVARIANT BROKEN: {v}", elapsed(s.time)));
        }
    }
    if lines.len() == 1 {
        lines[0].push_str(", nothing bound");
    }
    lines
}

/// What a person reads after a step.
fn narrate(sim: &Simulation, index: usize, step: &Step, result: &StepResult) -> String {
    let mut out = format!("step {}  ", index + 1);
    match step {
        Step::Apply(objects) => {
            let _ = writeln!(out, "apply {}", count_kinds(objects));
        }
        Step::Delete(refs) => {
            let names: Vec<String> = refs.iter().map(|r| r.to_string()).collect();
            let _ = writeln!(out, "delete {}", names.join(", "));
        }
        Step::Run(_, text) => {
            let lines = describe_sessions(sim, &result.sessions);
            let _ = writeln!(out, "run {text}: {}", lines.join("\n        "));
            out.push('\n');
            out.push_str(&indent(
                &report::gang_table(sim, &report::report(sim)),
                "        ",
            ));
            if let Some(tree) = report::queue_tree_table(sim) {
                out.push('\n');
                out.push_str(&indent(&tree, "        "));
            }
            if let Some(usage) = report::queue_usage_table(sim) {
                out.push('\n');
                out.push_str(&indent(&usage, "        "));
            }
            if let Some(pods) = report::lone_pod_table(sim) {
                out.push('\n');
                out.push_str(&indent(&pods, "        "));
            }
            if let Some(gpus) = report::gpu_view(sim) {
                out.push('\n');
                out.push_str(&indent(&gpus, "        "));
            }
        }
        Step::MarkRunning(_) | Step::MarkSucceeded(_) => {
            let _ = writeln!(out, "{}: {} pods", step.label(), result.marked);
        }
        Step::Expect(_) => match (&result.checked, &result.failure) {
            (_, Some(f)) => {
                let _ = writeln!(
                    out,
                    "expect: {} of {} checks FAILED",
                    f.problems.len(),
                    f.checks
                );
            }
            (Some(c), None) => {
                let _ = writeln!(out, "expect: ok ({} checks)", c.checks);
            }
            (None, None) => out.push_str("expect\n"),
        },
    }
    if let (Some(f), false) = (&result.failure, matches!(step, Step::Expect(_))) {
        let _ = writeln!(out, "        FAILED: {} problems", f.problems.len());
    }
    if matches!(step, Step::Run(..)) {
        out.push('\n');
    }
    out
}

fn run_scenario(scenario: &Scenario, output: Output, bundled: bool) -> Result {
    for notice in &scenario.notices {
        eprintln!("caldera: {notice}");
    }
    let mut sim = scenario.simulation()?;
    let text = output == Output::Text;
    if text {
        let mut intro = if bundled {
            format!("Bundled example: {}\n", scenario.name)
        } else {
            format!("Scenario {} ({})\n", scenario.name, scenario.file)
        };
        intro.push_str(&wrap(&scenario.description, 92, "  "));
        intro.push('\n');
        write_out(&intro)?;
    }
    let mut io_error = None;
    let outcome = scenario.run_on(&mut sim, &mut |index, step, sim, result| {
        if text && io_error.is_none() {
            if let Err(e) = write_out(&narrate(sim, index, step, result)) {
                io_error = Some(e);
            }
        }
    });
    if let Some(e) = io_error {
        return Err(e);
    }
    match output {
        Output::Text => write_out(&format!("\n{outcome}"))?,
        Output::Json => {
            write_out(&report::to_json(&report::report(&sim))?)?;
            if !outcome.passed() {
                eprint!("{outcome}");
            }
        }
    }
    if bundled && text && outcome.passed() {
        write_out(
            "\nTry your own: caldera simulate -f cluster.yaml -f jobs.yaml, or write a scenario \
             (see scenarios/FORMAT.md).\n",
        )?;
    }
    if outcome.passed() {
        Ok(())
    } else {
        Err(format!("scenario {} failed", scenario.name).into())
    }
}

fn run_manifests(inputs: &[(String, String)], args: &SimulateArgs) -> Result {
    let config = match &args.config {
        Some(path) => caldera_config::load(path)?,
        None => SchedulerConfig::default(),
    };
    for warning in &config.warnings {
        eprintln!("caldera: {warning}");
    }
    if args.compare.is_some() {
        let (mut kube, mut caldera) = caldera_sim::compare::simulations(&config)?;
        apply_inputs(&mut kube, inputs)?;
        apply_inputs(&mut caldera, inputs)?;
        let comparison = caldera_sim::compare::manifests(kube, caldera, args.duration);
        let text = match args.output {
            Output::Text => caldera_sim::compare::render_text(&comparison),
            Output::Json => serde_json::to_string_pretty(&comparison)? + "\n",
        };
        return write_out(&text);
    }
    let mut sim = Simulation::new(&config)?;
    apply_inputs(&mut sim, inputs)?;
    let sessions = match args.duration {
        Some(d) => sim.run_for(d),
        None => sim.run_until_stable(None),
    };
    match args.output {
        Output::Text => {
            let mut out = describe_sessions(&sim, &sessions).join("\n  ");
            out.push_str("\n\n");
            out.push_str(&report::render_text(&sim));
            write_out(&out)?;
        }
        Output::Json => write_out(&report::to_json(&report::report(&sim))?)?,
    }
    let broken = sim.violations();
    if broken.is_empty() {
        return Ok(());
    }
    for v in broken {
        eprintln!(
            "caldera: invariant broken in session {} at {}: {}",
            v.session, v.time, v.message
        );
    }
    Err(format!("{} invariant violations", broken.len()).into())
}

/// Applies manifest texts `(file, text)` to `sim` in order, printing what is skipped. The
/// StatefulSets of each input go after its other objects (their claims then find the
/// StorageClasses), their controller played by the simulator; what it made is printed.
pub(crate) fn apply_inputs(sim: &mut Simulation, inputs: &[(String, String)]) -> Result {
    for (file, text) in inputs {
        let manifests = manifest::parse_stream(text, file)?;
        for notice in &manifests.notices.messages {
            eprintln!("caldera: {notice}");
        }
        for (origin, object) in manifests.objects {
            if let Some(why) = not_ready(&object) {
                eprintln!("caldera: {origin}: {why}");
            }
            sim.apply([object])
                .map_err(|e| format!("{origin}: rejected: {e}"))?;
        }
        for (origin, set) in manifests.statefulsets {
            let ordered = set
                .spec
                .as_ref()
                .and_then(|s| s.pod_management_policy.as_deref())
                != Some("Parallel");
            let replicas = caldera_actors::statefulset::ordinals(&set).len();
            let created = sim
                .add_statefulset(set)
                .map_err(|e| format!("{origin}: rejected: {e}"))?;
            eprintln!(
                "caldera: {}",
                statefulset_notice(&origin.to_string(), &created, replicas, ordered)
            );
        }
    }
    Ok(())
}

/// Why nothing will be placed on a Node of the input: its status has no `Ready=True` condition
/// (Node status is taken as given; there are no kubelets to report it), or `None`.
fn not_ready(object: &manifest::Object) -> Option<String> {
    let manifest::Object::Node(node) = object else {
        return None;
    };
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.as_str());
    match ready {
        Some("True") => None,
        Some(other) => Some(format!(
            "Node {}: condition Ready is {other}: nothing is placed on it",
            object.name()
        )),
        None => Some(format!(
            "Node {}: no Ready condition in its status (add `conditions: [{{type: Ready, status: \"True\"}}]`): \
             it counts as not ready and nothing is placed on it",
            object.name()
        )),
    }
}

/// What the StatefulSet controller did, for a user reading `simulate -f` output.
fn statefulset_notice(
    origin: &str,
    created: &caldera_actors::statefulset::Created,
    replicas: usize,
    ordered: bool,
) -> String {
    let names = |v: Vec<String>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let pods = names(
        created
            .pods
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect(),
    );
    let claims = names(
        created
            .claims
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect(),
    );
    let mut line = format!(
        "{origin}: StatefulSet: the simulator plays its controller: created pods {pods}; claims {claims}"
    );
    if ordered && created.pods.len() < replicas {
        line.push_str(&format!(
            " (podManagementPolicy OrderedReady: each next pod only once the one before is Running and Ready, and the first cannot start before its whole gang is placed, so a gang of all {replicas} never forms — use Parallel)"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_sim::driver::START;

    #[test]
    fn times_read_as_offsets_from_the_start() {
        assert_eq!(elapsed(START.plus_millis(3000)), "+3s");
        assert_eq!(elapsed(START.plus_millis(90_500)), "+1m30.5s");
    }

    #[test]
    fn kinds_are_counted_in_plain_english() {
        let objects = caldera_sim::manifest::parse_stream(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: a}\nvalue: 1\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: b}\nvalue: 2\n---\napiVersion: v1\nkind: Node\nmetadata: {name: n}\n",
            "t.yaml",
        )
        .unwrap()
        .objects
        .into_iter()
        .map(|(_, o)| o)
        .collect::<Vec<_>>();
        assert_eq!(count_kinds(&objects), "2 PriorityClasses, 1 Node");
    }

    #[test]
    fn wrap_breaks_at_width() {
        assert_eq!(wrap("aa bb cc", 5, "> "), "> aa bb\n> cc\n");
    }
}
