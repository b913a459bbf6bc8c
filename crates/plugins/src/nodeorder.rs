//! nodeorder: least-allocated, most-allocated, balanced allocation, preferred node affinity,
//! PreferNoSchedule taints, preferred pod affinity/anti-affinity and `ScheduleAnyway` topology
//! spread, each on a 0–10 scale times its weight (Volcano's argument names:
//! `leastrequested.weight`, `mostrequested.weight`, `balancedresource.weight`,
//! `nodeaffinity.weight`, `tainttoleration.weight`, `podaffinity.weight`,
//! `podtopologyspread.weight`).
//!
//! Scores use the 0–10 scale so that binpack's `× 10 × binpack.weight` (SPEC §6) keeps
//! Volcano's balance between spreading and packing.

use caldera_config::PluginOption;
use caldera_model::{Node, TaintEffect, Task};
use caldera_session::plugin::Plugin;
use caldera_session::state::State;

/// Highest score a single scorer gives.
pub const MAX_SCORE: f64 = 10.0;

/// The nodeorder plugin.
#[derive(Debug)]
pub struct NodeOrder {
    least: f64,
    most: f64,
    balanced: f64,
    affinity: f64,
    taint: f64,
    pod_affinity: f64,
    spread: f64,
}

/// Builds the plugin from its weights (defaults: least 1, most 0, balanced 1, affinity 2,
/// taint 1, pod affinity 2, topology spread 2). Volcano's `imagelocality.weight` is accepted;
/// that scorer does not exist in Caldera.
pub fn build(option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(NodeOrder {
        least: crate::weight(option, "leastrequested.weight", 1)?,
        most: crate::weight(option, "mostrequested.weight", 0)?,
        balanced: crate::weight(option, "balancedresource.weight", 1)?,
        affinity: crate::weight(option, "nodeaffinity.weight", 2)?,
        taint: crate::weight(option, "tainttoleration.weight", 1)?,
        pod_affinity: crate::weight(option, "podaffinity.weight", 2)?,
        spread: crate::weight(option, "podtopologyspread.weight", 2)?,
    }))
}

/// Fraction of `alloc` used after placing `req` on top of `used` (0 when nothing offered).
fn fraction(used: i64, req: i64, alloc: i64) -> f64 {
    if alloc <= 0 {
        return 0.0;
    }
    (used.saturating_add(req) as f64 / alloc as f64).clamp(0.0, 1.0)
}

impl Plugin for NodeOrder {
    fn name(&self) -> &'static str {
        "nodeorder"
    }

    fn scores_nodes(&self) -> bool {
        true
    }

    fn score(&self, state: &State, task: &Task, node: &Node) -> f64 {
        let cpu = fraction(node.used.cpu, task.request.cpu, node.allocatable.cpu);
        let mem = fraction(
            node.used.memory,
            task.request.memory,
            node.allocatable.memory,
        );
        let mut score = 0.0;
        if self.least > 0.0 {
            score += self.least * (1.0 - (cpu + mem) / 2.0) * MAX_SCORE;
        }
        if self.most > 0.0 {
            score += self.most * (cpu + mem) / 2.0 * MAX_SCORE;
        }
        if self.balanced > 0.0 {
            score += self.balanced * (1.0 - (cpu - mem).abs()) * MAX_SCORE;
        }
        if self.affinity > 0.0 && !task.spec.preferred_terms.is_empty() {
            let total: i32 = task.spec.preferred_terms.iter().map(|(w, _)| *w).sum();
            let matched: i32 = task
                .spec
                .preferred_terms
                .iter()
                .filter(|(_, t)| t.matches(&node.name, &node.labels))
                .map(|(w, _)| *w)
                .sum();
            if total > 0 {
                score += self.affinity * MAX_SCORE * f64::from(matched) / f64::from(total);
            }
        }
        if self.taint > 0.0 {
            let intolerable = node
                .taints
                .iter()
                .filter(|t| t.effect == TaintEffect::PreferNoSchedule)
                .filter(|t| !task.spec.tolerations.iter().any(|tol| tol.tolerates(t)))
                .count() as f64;
            score += self.taint * (MAX_SCORE - intolerable.min(MAX_SCORE));
        }
        let pods = &task.spec.pods;
        // Other pods' terms may score this one even when it states none itself.
        let scored = state.trackers.interpod.scores_others();
        if (self.pod_affinity > 0.0 || self.spread > 0.0) && (scored || !pods.is_empty()) {
            if let Some(i) = state.index_of(node) {
                let i = i as u32;
                if self.pod_affinity > 0.0 {
                    let s = state
                        .trackers
                        .interpod
                        .affinity_score(task, i, &state.nodes);
                    score += self.pod_affinity * MAX_SCORE * s;
                }
                if self.spread > 0.0 && !pods.is_empty() {
                    let s = state.trackers.interpod.spread_score(task, i, &state.nodes);
                    score += self.spread * MAX_SCORE * s;
                }
            }
        }
        score
    }
}
