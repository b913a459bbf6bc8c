//! gang: a job is valid only with enough members, ready only with minMember placed (and every
//! role's minimum); jobs not yet ready go first.

use caldera_config::PluginOption;
use caldera_session::plugin::Plugin;
use caldera_session::state::State;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// The gang plugin.
#[derive(Debug, Default)]
pub struct Gang;

/// Builds the plugin (it takes no arguments).
pub fn build(_: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(Gang))
}

/// Per-role counts of members that match `pred`.
fn role_counts(
    state: &State,
    job: usize,
    pred: impl Fn(&caldera_model::Task) -> bool,
) -> (u32, BTreeMap<&str, u32>) {
    let mut total = 0;
    let mut roles = BTreeMap::new();
    for &t in &state.jobs[job].tasks {
        let t = &state.tasks[t];
        if pred(t) {
            total += 1;
            if let Some(r) = t.role.as_deref() {
                *roles.entry(r).or_insert(0) += 1;
            }
        }
    }
    (total, roles)
}

/// Could still run: pending and not gated, or ready (placed, bound, running, succeeded).
fn may_run(t: &caldera_model::Task) -> bool {
    t.schedulable_pending() || t.status.is_ready()
}

impl Plugin for Gang {
    fn name(&self) -> &'static str {
        "gang"
    }

    fn job_invalid(&self, state: &State, job: usize) -> Option<String> {
        let j = &state.jobs[job];
        let (valid, roles) = role_counts(state, job, may_run);
        let gated = j.tasks.iter().filter(|&&t| state.tasks[t].gated).count();
        let gated_note = if gated > 0 {
            format!(" ({gated} held by scheduling gates)")
        } else {
            String::new()
        };
        if valid < j.min_member {
            return Some(format!(
                "{valid} of {} members exist and may be scheduled{gated_note}",
                j.min_member
            ));
        }
        for (role, &min) in &j.min_task_member {
            let have = roles.get(role.as_str()).copied().unwrap_or(0);
            if have < min {
                return Some(format!(
                    "{have} of {min} members of role {role:?} exist and may be scheduled{gated_note}"
                ));
            }
        }
        // Volcano's `minSubGroups`: so many sub-groups of the policy must be able to fill up.
        if let Some((policy, have, min)) = state.sub_groups_short(job, may_run) {
            return Some(format!(
                "{have} of {min} sub-groups of subGroupPolicy {policy:?} have subGroupSize members that exist and may be scheduled{gated_note}"
            ));
        }
        None
    }

    fn job_ready(&self, state: &State, job: usize) -> Option<bool> {
        let j = &state.jobs[job];
        // Volcano's gang: every policy's `minSubGroups` sub-groups hold `subGroupSize` members.
        if !j.sub_group_policies.is_empty()
            && state
                .sub_groups_short(job, |t| t.status.is_ready())
                .is_some()
        {
            return Some(false);
        }
        if j.min_task_member.is_empty() {
            return Some(state.ready_count(job) >= j.min_member);
        }
        let (ready, roles) = role_counts(state, job, |t| t.status.is_ready());
        Some(
            ready >= j.min_member
                && j.min_task_member
                    .iter()
                    .all(|(r, &min)| roles.get(r.as_str()).copied().unwrap_or(0) >= min),
        )
    }

    fn job_order(&self, state: &State, a: usize, b: usize) -> Ordering {
        let ready = |j| self.job_ready(state, j) == Some(true);
        // Not-ready jobs first: finishing a gang beats growing an elastic one.
        ready(a).cmp(&ready(b))
    }
}
