//! The `fairshare` plugin's settings, read from its config arguments, and the usage records
//! written at session close (Queue `status.usage`): the memory that outlives a session.

use crate::state::State;
use caldera_config::{ArgValue, PluginOption};
use caldera_queue::fair::FairSettings;

/// Queue `q`'s decayed usage at the session's time, from its last record on the Queue's
/// status (0 without a record, or when `fair` keeps no memory).
pub fn queue_usage(state: &State, fair: &FairSettings, q: usize) -> f64 {
    let record = state.queues[q]
        .status
        .as_ref()
        .and_then(|s| s.usage.as_ref());
    fair.usage(record, state.now, &state.total)
}

/// Arguments named by the design but not implemented yet: refused, never ignored.
const NOT_YET: [&str; 2] = ["window", "tenantKey"];

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
        if NOT_YET.contains(&key) {
            return Err(format!("argument {key:?} is not supported yet"));
        }
        let known = [
            "halfLife",
            "kValue",
            "usageWritePeriod",
            "minRuntime",
            "preemptionDelay",
            "maxWait",
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
    if let Some(ms) = duration_ms(option, "minRuntime")? {
        s.min_runtime_ms = ms;
    }
    if let Some(ms) = duration_ms(option, "preemptionDelay")? {
        s.preemption_delay_ms = ms;
    }
    if let Some(ms) = duration_ms(option, "maxWait")? {
        s.max_wait_ms = ms;
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
