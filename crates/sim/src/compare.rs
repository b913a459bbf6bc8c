//! `caldera simulate --compare kube-scheduler`: the same cluster and steps run twice, once
//! with Caldera (in the scenario's mode) and once with the kube-scheduler model alone placing
//! every pod one at a time, and the gangs' bound counts side by side after every `run` step.

use crate::driver::{Mode, SessionReport, Simulation};
use crate::error::Result;
use crate::invariants::bound_counts;
use crate::report::{self, Report};
use crate::scenario::{run_step, Outcome, Scenario, Step};
use caldera_api::PodGroup;
use caldera_config::SchedulerConfig;
use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;
use std::time::Duration;

/// One gang at a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangRow {
    /// `namespace/name` of the PodGroup.
    pub name: String,
    /// `minMember`.
    pub min_member: usize,
    /// Members with a node under kube-scheduler alone.
    pub kube_scheduler: usize,
    /// Members with a node under Caldera.
    pub caldera: usize,
}

impl GangRow {
    fn partial(n: usize, min: usize) -> bool {
        n > 0 && n < min
    }

    /// kube-scheduler alone left it bound in part.
    pub fn partial_under_kube_scheduler(&self) -> bool {
        Self::partial(self.kube_scheduler, self.min_member)
    }

    /// Caldera left it bound in part (never expected).
    pub fn partial_under_caldera(&self) -> bool {
        Self::partial(self.caldera, self.min_member)
    }
}

/// Both outcomes after one step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// 1-based step number (0 for manifests run without steps).
    pub step: usize,
    /// The step's label (`run 3s`).
    pub label: String,
    /// Virtual time.
    pub time: String,
    /// Virtual time since the start (`+3s`).
    pub elapsed: String,
    /// Every PodGroup.
    pub gangs: Vec<GangRow>,
    /// Pods with a node under kube-scheduler alone (every pod, gangs or not).
    pub pods_bound_kube_scheduler: usize,
    /// Pods with a node under Caldera.
    pub pods_bound_caldera: usize,
}

/// The comparison: checkpoints and both final states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// After every `run` step (or once, at the end, for manifests).
    pub checkpoints: Vec<Checkpoint>,
    /// Caldera's final state.
    pub caldera: Report,
    /// kube-scheduler's final state.
    pub kube_scheduler: Report,
}

/// `+3s`, `+1m30s`, `+1.5s`: virtual time since [`crate::driver::START`].
pub fn elapsed(t: caldera_model::Time) -> String {
    let ms = t.millis_since(crate::driver::START);
    let (m, s, rest) = (ms / 60_000, (ms / 1000) % 60, ms % 1000);
    let secs = if rest == 0 {
        format!("{s}s")
    } else {
        format!("{s}.{}s", format!("{rest:03}").trim_end_matches('0'))
    };
    if m > 0 {
        format!("+{m}m{secs}")
    } else {
        format!("+{secs}")
    }
}

fn bound_pods(sim: &Simulation) -> usize {
    sim.store()
        .list::<Pod>()
        .filter(|p| crate::store::node_name(p).is_some())
        .count()
}

fn checkpoint(step: usize, label: String, kube: &Simulation, caldera: &Simulation) -> Checkpoint {
    let k = bound_counts(kube.store());
    let c = bound_counts(caldera.store());
    let gangs = caldera
        .store()
        .list::<PodGroup>()
        .map(|pg| {
            let ns = pg.metadata.namespace.as_deref().unwrap_or("default");
            let name = format!("{ns}/{}", pg.metadata.name.as_deref().unwrap_or_default());
            GangRow {
                min_member: pg.spec.min_member().max(1) as usize,
                kube_scheduler: k.get(&name).copied().unwrap_or(0),
                caldera: c.get(&name).copied().unwrap_or(0),
                name,
            }
        })
        .collect();
    Checkpoint {
        step,
        label,
        time: caldera.now().to_rfc3339(),
        elapsed: elapsed(caldera.now()),
        gangs,
        pods_bound_kube_scheduler: bound_pods(kube),
        pods_bound_caldera: bound_pods(caldera),
    }
}

/// Runs `scenario` with Caldera (checking its expectations) and with kube-scheduler alone
/// (same steps, expectations skipped); a checkpoint after every `run` step.
pub fn scenario(scenario: &Scenario) -> Result<(Comparison, Outcome)> {
    let mut kube = Simulation::with_mode(&scenario.config, Mode::KubeScheduler)?;
    let mut caldera = scenario.simulation()?;
    let mut checkpoints = Vec::new();
    let outcome = scenario.run_on(&mut caldera, &mut |index, step, caldera, _| {
        if !matches!(step, Step::Expect(_)) {
            run_step(index, step, &mut kube);
        }
        if matches!(step, Step::Run(..)) {
            checkpoints.push(checkpoint(index + 1, step.label(), &kube, caldera));
        }
    });
    Ok((
        Comparison {
            checkpoints,
            caldera: report::report(&caldera),
            kube_scheduler: report::report(&kube),
        },
        outcome,
    ))
}

/// The two simulations of a comparison of plain manifests: (kube-scheduler alone, Caldera).
/// Apply the same objects to both, then call [`manifests`].
pub fn simulations(config: &SchedulerConfig) -> Result<(Simulation, Simulation)> {
    Ok((
        Simulation::with_mode(config, Mode::KubeScheduler)?,
        Simulation::with_mode(config, Mode::Run)?,
    ))
}

/// Runs both for `duration` of virtual time (default: until Caldera's run is stable, and
/// kube-scheduler's for as long).
pub fn manifests(
    mut kube: Simulation,
    mut caldera: Simulation,
    duration: Option<Duration>,
) -> Comparison {
    let start = caldera.now();
    let sessions: Vec<SessionReport> = match duration {
        Some(d) => caldera.run_for(d),
        None => caldera.run_until_stable(None),
    };
    let ran = Duration::from_millis(caldera.now().millis_since(start).max(0) as u64);
    kube.run_for(ran);
    let label = format!("{} sessions", sessions.len());
    Comparison {
        checkpoints: vec![checkpoint(0, label, &kube, &caldera)],
        caldera: report::report(&caldera),
        kube_scheduler: report::report(&kube),
    }
}

/// The comparison as tables: one per checkpoint, then a summary line.
pub fn render_text(c: &Comparison) -> String {
    let mut out = String::new();
    let mut partial = Vec::new();
    for cp in &c.checkpoints {
        let when = if cp.step == 0 {
            format!("after {} ({})", cp.label, cp.elapsed)
        } else {
            format!("after step {} ({}, {})", cp.step, cp.label, cp.elapsed)
        };
        out.push_str(&when);
        out.push('\n');
        let mut rows: Vec<Vec<String>> = cp
            .gangs
            .iter()
            .map(|g| {
                let ks = format!("{}/{}", g.kube_scheduler, g.min_member);
                let ca = format!("{}/{}", g.caldera, g.min_member);
                if g.partial_under_kube_scheduler() {
                    partial.push(format!(
                        "{} ({} of {} at {})",
                        g.name, g.kube_scheduler, g.min_member, cp.elapsed
                    ));
                }
                vec![
                    g.name.clone(),
                    g.min_member.to_string(),
                    if g.partial_under_kube_scheduler() {
                        format!("{ks} PARTIAL")
                    } else {
                        ks
                    },
                    if g.partial_under_caldera() {
                        format!("{ca} PARTIAL")
                    } else {
                        ca
                    },
                ]
            })
            .collect();
        rows.push(vec![
            "(all pods bound)".into(),
            String::new(),
            cp.pods_bound_kube_scheduler.to_string(),
            cp.pods_bound_caldera.to_string(),
        ]);
        let table = report::table(&["GANG", "MIN", "KUBE-SCHEDULER", "CALDERA"], &rows);
        for line in table.lines() {
            out.push_str("  ");
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    if partial.is_empty() {
        out.push_str("kube-scheduler alone bound no gang in part.\n");
    } else {
        out.push_str(&format!(
            "kube-scheduler alone bound gangs in part: {}. Their bound members hold resources and wait for the rest.\n",
            partial.join(", ")
        ));
    }
    out
}
