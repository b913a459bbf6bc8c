//! The `fairshare` plugin's settings, read from its config arguments, and the usage records
//! written at session close (Queue `status.usage`): the memory that outlives a session. With
//! `tenantKey`, each job's tenant and each tenant's usage at session open ([`tenants`],
//! [`tenant_usage`]).

use crate::state::State;
pub use crate::state::Tenants;
use caldera_config::{ArgValue, PluginOption};
use caldera_queue::fair::{FairSettings, TenantKey};
use std::sync::Arc;

/// Queue `q`'s decayed usage at the session's time, from its last record on the Queue's
/// status (0 without a record, or when `fair` keeps no memory).
pub fn queue_usage(state: &State, fair: &FairSettings, q: usize) -> f64 {
    let record = state.queues[q]
        .status
        .as_ref()
        .and_then(|s| s.usage.as_ref());
    fair.usage(record, state.now, &state.total)
}

fn duration_ms(option: &PluginOption, key: &str) -> Result<Option<i64>, String> {
    let Some(value) = option.arguments.get(key) else {
        return Ok(None);
    };
    let text = match value {
        ArgValue::Str(text) => text.clone(),
        ArgValue::Int(0) => "0".to_string(),
        other => {
            return Err(format!(
                "argument {key:?} must be a duration, got {other:?}"
            ))
        }
    };
    let parsed =
        caldera_config::parse_duration(&text).map_err(|e| format!("argument {key:?}: {e}"))?;
    i64::try_from(parsed.as_millis())
        .map(Some)
        .map_err(|_| format!("argument {key:?}: {text} is too long"))
}

/// The settings of the `fairshare` plugin option. Every argument is honoured or refused.
pub fn settings(option: &PluginOption) -> Result<FairSettings, String> {
    let mut s = FairSettings::default();
    for (key, _) in option.arguments.iter() {
        let known = [
            "halfLife",
            "kValue",
            "usageWritePeriod",
            "window",
            "minRuntime",
            "preemptionDelay",
            "maxWait",
            "tenantKey",
        ]
        .contains(&key)
            || key.starts_with("resourceWeights.");
        if !known {
            return Err(format!("unknown argument {key:?}"));
        }
    }
    if let Some(ms) = duration_ms(option, "halfLife")? {
        s.half_life_ms = ms;
    }
    if let Some(ms) = duration_ms(option, "usageWritePeriod")? {
        if ms <= 0 {
            return Err("argument \"usageWritePeriod\" must be longer than zero".into());
        }
        s.write_period_ms = ms;
    }
    if let Some(ms) = duration_ms(option, "window")? {
        if ms <= 0 {
            return Err("argument \"window\" must be longer than zero".into());
        }
        s.window_ms = ms;
    }
    if let Some(ms) = duration_ms(option, "minRuntime")? {
        s.min_runtime_ms = ms;
    }
    if let Some(ms) = duration_ms(option, "preemptionDelay")? {
        s.preemption_delay_ms = ms;
    }
    if let Some(ms) = duration_ms(option, "maxWait")? {
        s.max_wait_ms = ms;
    }
    match option.arguments.get("tenantKey") {
        None => {}
        Some(ArgValue::Str(key)) if key == "namespace" => s.tenant_key = Some(TenantKey::Namespace),
        Some(ArgValue::Str(key)) if !key.is_empty() => {
            s.tenant_key = Some(TenantKey::Label(key.clone()))
        }
        Some(other) => {
            return Err(format!(
                "argument \"tenantKey\" must be `namespace` or a label key, got {other:?}"
            ))
        }
    }
    if option.arguments.contains_key("kValue") {
        match option.arguments.get_f64("kValue") {
            Some(k) if k.is_finite() && k >= 0.0 => s.k = k,
            _ => return Err("argument \"kValue\" must be a number of at least 0".into()),
        }
    }
    let mut weights = std::collections::BTreeMap::new();
    for (name, value) in option.arguments.with_prefix("resourceWeights.") {
        let w = match value {
            ArgValue::Float(w) => *w,
            ArgValue::Int(w) => *w as f64,
            _ => f64::NAN,
        };
        if !(w.is_finite() && w >= 0.0) {
            return Err(format!(
                "argument \"resourceWeights\": the weight of {name} must be a number of at least 0"
            ));
        }
        weights.insert(name.to_string(), w);
    }
    if !weights.is_empty() {
        // Given weights replace the defaults whole: a resource left out weighs 0.
        s.resource_weights = weights;
    }
    Ok(s)
}

/// Each job's tenant under `key`: its namespace, or the value of the label on its pods (the
/// first member, in name order, that has it; a job none of whose pods has it counts as its
/// namespace's).
pub fn tenants(state: &State, key: &TenantKey) -> Tenants {
    let keys: Vec<(usize, Arc<str>)> = (0..state.jobs.len())
        .map(|j| {
            let job = &state.jobs[j];
            let labelled = match key {
                TenantKey::Namespace => None,
                TenantKey::Label(label) => job
                    .tasks
                    .iter()
                    .find_map(|&t| state.tasks[t].labels.get(label.as_str()))
                    .map(|value| Arc::<str>::from(format!("{label}={value}"))),
            };
            let name =
                labelled.unwrap_or_else(|| Arc::from(format!("namespace={}", job.namespace)));
            (state.job_queue[j], name)
        })
        .collect();
    let mut names = keys.clone();
    names.sort();
    names.dedup();
    let of_job = keys
        .iter()
        .map(|k| names.binary_search(k).unwrap_or(0) as u32)
        .collect();
    Tenants { of_job, names }
}

/// Each tenant's usage at session open: Σ over its jobs' pods that hold a node of the share
/// of the cluster each holds × what holding it since it started has added to a decayed mean
/// ([`FairSettings::tenant_weight`], at least Kueue's entry penalty).
pub fn tenant_usage(state: &State, fair: &FairSettings, tenants: &Tenants) -> Vec<f64> {
    let mut usage = vec![0.0; tenants.names.len()];
    for task in &state.tasks {
        if !crate::state::holds_node(task) {
            continue;
        }
        usage[tenants.of(task.job)] += fair.share_of(&task.request, &state.total)
            * fair.tenant_weight(task.started, state.now);
    }
    usage
}
