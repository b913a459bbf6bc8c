//! PodDisruptionBudgets: the disruption controller's status and the eviction subresource's
//! verdict, as kube-controller-manager and kube-apiserver compute them.
//!
//! **Status** (`pkg/controller/disruption`): the pods a budget covers are the pods of its
//! namespace its selector matches (a missing selector matches none; in `policy/v1` an empty
//! one matches all). `minAvailable` as an integer gives `desiredHealthy` = that number and
//! `expectedPods` = the number of covered pods; `maxUnavailable`, or `minAvailable` as a
//! percentage, counts `expectedPods` as the sum of the covered pods' controllers' scales
//! (pods without a controller are left out), the percentage rounded up. A pod is healthy when
//! it is Ready, not being deleted and not listed in `disruptedPods` within the last two
//! minutes. `disruptionsAllowed = currentHealthy − desiredHealthy`, 0 when negative or when
//! `expectedPods` is 0. A pod whose controller cannot be found makes the sync fail:
//! `disruptionsAllowed` 0 with `DisruptionAllowed=False` reason `SyncFailed`.
//!
//! **Eviction** (`pkg/registry/core/pod/storage/eviction.go`): a pod that is Pending,
//! finished or already terminating is deleted without consulting budgets; more than one
//! budget is a 500; an unready pod is deleted without charging the budget when the budget is
//! `AlwaysAllow` for unhealthy pods or already has its desired healthy pods; otherwise the
//! budget must be observed at its generation (429 otherwise) and allow a disruption (429
//! "Cannot evict pod as it would violate the pod's disruption budget." otherwise), and the
//! eviction charges it: `disruptionsAllowed − 1` and the pod in `disruptedPods`. Before the
//! delete the pod gets `DisruptionTarget=True` reason `EvictionByEvictionAPI`.

use crate::kubelet::is_ready;
use crate::time::{from_kube, to_kube};
use caldera_cache::labels;
use caldera_model::Time;
use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time as KubeTime};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

/// How long an eviction's entry in `disruptedPods` keeps a pod out of the healthy count.
pub const DELETION_TIMEOUT_MILLIS: i64 = 2 * 60 * 1000;

/// The message of an eviction refused by a budget (429).
pub const REFUSED_MESSAGE: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";

fn namespace(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("default")
}

/// Whether `pdb` covers `pod`: same namespace, and its selector matches the pod's labels (a
/// missing selector matches nothing; an empty one everything, as in `policy/v1`).
pub fn covers(pdb: &PodDisruptionBudget, pod: &Pod) -> bool {
    if namespace(&pdb.metadata) != namespace(&pod.metadata) {
        return false;
    }
    let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    labels::matches(selector, pod.metadata.labels.as_ref())
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, roundUp=true)`.
fn scaled(v: &IntOrString, total: i32) -> Result<i32, String> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let pct = s
                .strip_suffix('%')
                .and_then(|p| p.parse::<i64>().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid value {s:?}"))?;
            let value = (pct * i64::from(total) + 99).div_euclid(100);
            Ok(i32::try_from(value).unwrap_or(i32::MAX))
        }
    }
}

fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// Σ scale of the controllers of `pods` (each counted once); pods without one are skipped.
fn expected_scale(
    pods: &[&Pod],
    scale_of: &dyn Fn(&OwnerReference, &str) -> Option<i32>,
) -> Result<i32, String> {
    let mut scales: BTreeMap<&str, i32> = BTreeMap::new();
    for pod in pods {
        let Some(owner) = controller_of(pod) else {
            continue;
        };
        if scales.contains_key(owner.uid.as_str()) {
            continue;
        }
        let scale = scale_of(owner, namespace(&pod.metadata)).ok_or_else(|| {
            format!(
                "found no controllers for pod {:?}",
                pod.metadata.name.as_deref().unwrap_or("")
            )
        })?;
        scales.insert(owner.uid.as_str(), scale);
    }
    Ok(scales.values().sum())
}

/// `(expectedPods, desiredHealthy)` for the covered `pods`.
fn expected(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    scale_of: &dyn Fn(&OwnerReference, &str) -> Option<i32>,
) -> Result<(i32, i32), String> {
    let spec = pdb.spec.clone().unwrap_or_default();
    if let Some(max) = &spec.max_unavailable {
        let expected = expected_scale(pods, scale_of)?;
        let max = scaled(max, expected)?;
        return Ok((expected, (expected - max).max(0)));
    }
    match &spec.min_available {
        Some(IntOrString::Int(n)) => Ok((i32::try_from(pods.len()).unwrap_or(i32::MAX), *n)),
        Some(pct @ IntOrString::String(_)) => {
            let expected = expected_scale(pods, scale_of)?;
            Ok((expected, scaled(pct, expected)?))
        }
        None => Ok((0, 0)),
    }
}

/// Sets `DisruptionAllowed` (`pdbhelper.UpdateDisruptionAllowedCondition`): True with reason
/// `SufficientPods` when a disruption is allowed, else False `InsufficientPods`.
fn set_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Time) {
    let (value, reason) = if status.disruptions_allowed.unwrap_or(0) > 0 {
        ("True", "SufficientPods")
    } else {
        ("False", "InsufficientPods")
    };
    set_condition(status, value, reason, "", now);
}

fn set_condition(
    status: &mut PodDisruptionBudgetStatus,
    value: &str,
    reason: &str,
    message: &str,
    now: Time,
) {
    let observed = status.observed_generation;
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    let stamp = to_kube(now).unwrap_or(KubeTime(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    match conditions
        .iter_mut()
        .find(|c| c.type_ == "DisruptionAllowed")
    {
        Some(c) => {
            if c.status != value {
                c.last_transition_time = stamp;
            }
            c.status = value.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            c.observed_generation = observed;
        }
        None => conditions.push(Condition {
            type_: "DisruptionAllowed".into(),
            status: value.into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: observed,
            last_transition_time: stamp,
        }),
    }
}

/// The status the disruption controller writes for `pdb` at `now`, given every pod (those it
/// covers are picked here) and how to find a controller's scale (`None`: no such controller).
pub fn status(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    now: Time,
    scale_of: &dyn Fn(&OwnerReference, &str) -> Option<i32>,
) -> PodDisruptionBudgetStatus {
    let covered: Vec<&Pod> = pods.iter().copied().filter(|p| covers(pdb, p)).collect();
    let old = pdb.status.clone().unwrap_or_default();
    let generation = pdb.metadata.generation.unwrap_or(0);
    let (expected_pods, desired_healthy) = match expected(pdb, &covered, scale_of) {
        Ok(v) => v,
        Err(message) => {
            let mut failed = old;
            failed.disruptions_allowed = Some(0);
            set_condition(&mut failed, "False", "SyncFailed", &message, now);
            return failed;
        }
    };
    // Evictions the controller has not seen finish yet (kept for two minutes).
    let mut disrupted = BTreeMap::new();
    for pod in &covered {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Some(at) = old.disrupted_pods.as_ref().and_then(|d| d.get(&name)) {
            if from_kube(at).plus_millis(DELETION_TIMEOUT_MILLIS) >= now {
                disrupted.insert(name, at.clone());
            }
        }
    }
    let current_healthy = covered
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or("")))
        .filter(|p| is_ready(p))
        .count();
    let current_healthy = i32::try_from(current_healthy).unwrap_or(i32::MAX);
    let mut allowed = current_healthy - desired_healthy;
    if expected_pods <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let mut status = PodDisruptionBudgetStatus {
        current_healthy: Some(current_healthy),
        desired_healthy: Some(desired_healthy),
        expected_pods: Some(expected_pods),
        disruptions_allowed: Some(allowed),
        disrupted_pods: Some(disrupted).filter(|d| !d.is_empty()),
        observed_generation: Some(generation),
        conditions: old.conditions,
    };
    set_allowed_condition(&mut status, now);
    status
}

/// What the disruption controller writes for `pdb` at `now` ([`status`]), or `None` when it
/// writes nothing: it rewrites a status only on a change of content (the conditions aside),
/// and always one it has not written yet (one without conditions).
pub fn refresh(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    now: Time,
    scale_of: &dyn Fn(&OwnerReference, &str) -> Option<i32>,
) -> Option<PodDisruptionBudgetStatus> {
    let new = status(pdb, pods, now, scale_of);
    let content = |s: &PodDisruptionBudgetStatus| PodDisruptionBudgetStatus {
        conditions: None,
        ..s.clone()
    };
    let old = pdb.status.as_ref().filter(|old| old.conditions.is_some());
    let unchanged = old.is_some_and(|old| content(old) == content(&new));
    (!unchanged).then_some(new)
}

/// What the eviction subresource does with a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eviction {
    /// Delete the pod without touching a budget.
    Delete,
    /// Charge the budget at this index of the given list ([`charge`]), then delete the pod.
    Charge(usize),
    /// 429 TooManyRequests: [`REFUSED_MESSAGE`], with this `DisruptionBudget` cause.
    Refused {
        /// The cause's message.
        cause: String,
    },
    /// 500: the pod has more than one budget.
    MultipleBudgets,
    /// 403 Forbidden on the budget, with this reason.
    Forbidden {
        /// The budget's name.
        budget: String,
        /// Why.
        reason: String,
    },
}

/// The message of [`Eviction::MultipleBudgets`].
pub const MULTIPLE_MESSAGE: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

/// Whether an eviction may skip the budgets (`canIgnorePDB`).
pub fn can_ignore_budgets(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    matches!(phase, Some("Succeeded" | "Failed" | "Pending") | None)
        || pod.metadata.deletion_timestamp.is_some()
}

/// The eviction verdict for `pod` given every budget of its namespace.
pub fn evict(pod: &Pod, budgets: &[&PodDisruptionBudget]) -> Eviction {
    if can_ignore_budgets(pod) {
        return Eviction::Delete;
    }
    let covering: Vec<usize> = budgets
        .iter()
        .enumerate()
        .filter(|(_, b)| {
            // The eviction handler lets no empty selector match (unlike the controller).
            b.spec
                .as_ref()
                .and_then(|s| s.selector.as_ref())
                .is_some_and(|s| !labels::is_empty(s))
                && covers(b, pod)
        })
        .map(|(i, _)| i)
        .collect();
    let index = match covering.as_slice() {
        [] => return Eviction::Delete,
        [one] => *one,
        _ => return Eviction::MultipleBudgets,
    };
    let pdb = budgets[index];
    let name = pdb.metadata.name.clone().unwrap_or_default();
    let status = pdb.status.clone().unwrap_or_default();
    if !is_ready(pod) {
        let always = pdb
            .spec
            .as_ref()
            .and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow");
        let (current, desired) = (
            status.current_healthy.unwrap_or(0),
            status.desired_healthy.unwrap_or(0),
        );
        if always || (current >= desired && desired > 0) {
            return Eviction::Delete;
        }
    }
    if status.observed_generation.unwrap_or(0) < pdb.metadata.generation.unwrap_or(0) {
        return Eviction::Refused {
            cause: format!("The disruption budget {name} is still being processed by the server."),
        };
    }
    let allowed = status.disruptions_allowed.unwrap_or(0);
    if allowed < 0 {
        return Eviction::Forbidden {
            budget: name,
            reason: "pdb disruptions allowed is negative".into(),
        };
    }
    if status
        .disrupted_pods
        .as_ref()
        .is_some_and(|d| d.len() > 2000)
    {
        return Eviction::Forbidden {
            budget: name,
            reason:
                "DisruptedPods map too big - too many evictions not confirmed by PDB controller"
                    .into(),
        };
    }
    if allowed == 0 {
        return Eviction::Refused {
            cause: format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status.desired_healthy.unwrap_or(0),
                status.current_healthy.unwrap_or(0)
            ),
        };
    }
    Eviction::Charge(index)
}

/// Charges `pdb` for evicting `pod_name` at `now` (`checkAndDecrement`).
pub fn charge(pdb: &mut PodDisruptionBudget, pod_name: &str, now: Time) {
    let status = pdb.status.get_or_insert_with(Default::default);
    let allowed = status.disruptions_allowed.unwrap_or(0) - 1;
    status.disruptions_allowed = Some(allowed);
    if allowed == 0 {
        set_allowed_condition(status, now);
    }
    if let Some(t) = to_kube(now) {
        status
            .disrupted_pods
            .get_or_insert_with(BTreeMap::new)
            .insert(pod_name.to_string(), t);
    }
}

/// The condition the eviction subresource puts on a pod before deleting it.
pub fn disruption_target(now: Time) -> PodCondition {
    PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some("EvictionByEvictionAPI".into()),
        message: Some("Eviction API: evicting".into()),
        last_transition_time: to_kube(now),
        ..Default::default()
    }
}

/// Marks a pod being evicted with [`disruption_target`] at `now`, unless it has finished.
/// Returns whether it did.
pub fn mark_evicted(pod: &mut Pod, now: Time) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    let finished = matches!(phase, Some("Succeeded" | "Failed"));
    if !finished {
        put_condition(pod, disruption_target(now));
    }
    !finished
}

/// Adds (or refreshes) `condition` among the pod's conditions, by type.
pub fn put_condition(pod: &mut Pod, condition: PodCondition) {
    let conditions = pod
        .status
        .get_or_insert_with(Default::default)
        .conditions
        .get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(c) if c.status == condition.status => {
            c.reason = condition.reason;
            c.message = condition.message;
        }
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::set_phase;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

    const NOW: Time = Time(1_767_225_600_000);

    fn pod(name: &str, app: &str, running: bool) -> Pod {
        let mut status = PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        };
        if running {
            set_phase(&mut status, "Running", NOW);
        }
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some([("app".to_string(), app.to_string())].into()),
                ..Default::default()
            },
            status: Some(status),
            ..Default::default()
        }
    }

    fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
        PodDisruptionBudget {
            metadata: ObjectMeta {
                name: Some("budget".into()),
                namespace: Some("default".into()),
                generation: Some(1),
                ..Default::default()
            },
            spec: Some(PodDisruptionBudgetSpec {
                min_available: min,
                max_unavailable: max,
                selector: Some(LabelSelector {
                    match_labels: Some([("app".to_string(), "web".to_string())].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn no_controllers(_: &OwnerReference, _: &str) -> Option<i32> {
        None
    }

    #[test]
    fn min_available_counts_ready_covered_pods() {
        let pods = [
            pod("a", "web", true),
            pod("b", "web", true),
            pod("c", "web", false),
            pod("d", "db", true),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = status(
            &pdb(Some(IntOrString::Int(1)), None),
            &refs,
            NOW,
            &no_controllers,
        );
        assert_eq!(
            (
                s.expected_pods,
                s.desired_healthy,
                s.current_healthy,
                s.disruptions_allowed
            ),
            (Some(3), Some(1), Some(2), Some(1))
        );
        let s = status(
            &pdb(Some(IntOrString::Int(2)), None),
            &refs,
            NOW,
            &no_controllers,
        );
        assert_eq!(s.disruptions_allowed, Some(0));
        let cond = &s.conditions.unwrap()[0];
        assert_eq!(
            (cond.status.as_str(), cond.reason.as_str()),
            ("False", "InsufficientPods")
        );
    }

    #[test]
    fn max_unavailable_without_controllers_allows_nothing() {
        let pods = [pod("a", "web", true), pod("b", "web", true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let s = status(
            &pdb(None, Some(IntOrString::Int(1))),
            &refs,
            NOW,
            &no_controllers,
        );
        assert_eq!((s.expected_pods, s.disruptions_allowed), (Some(0), Some(0)));
    }

    #[test]
    fn percentages_use_controller_scales_rounded_up() {
        let owner = OwnerReference {
            uid: "rs".into(),
            controller: Some(true),
            ..Default::default()
        };
        let mut pods = vec![
            pod("a", "web", true),
            pod("b", "web", true),
            pod("c", "web", true),
        ];
        for p in &mut pods {
            p.metadata.owner_references = Some(vec![owner.clone()]);
        }
        let refs: Vec<&Pod> = pods.iter().collect();
        let three = |_: &OwnerReference, _: &str| Some(3);
        // maxUnavailable 50% of 3 rounds up to 2: desired 1, allowed 2.
        let s = status(
            &pdb(None, Some(IntOrString::String("50%".into()))),
            &refs,
            NOW,
            &three,
        );
        assert_eq!(
            (s.expected_pods, s.desired_healthy, s.disruptions_allowed),
            (Some(3), Some(1), Some(2))
        );
        let s = status(
            &pdb(None, Some(IntOrString::Int(1))),
            &refs,
            NOW,
            &no_controllers,
        );
        let cond = &s.conditions.unwrap()[0];
        assert_eq!(cond.reason, "SyncFailed");
        assert_eq!(s.disruptions_allowed, Some(0));
    }

    #[test]
    fn evictions_follow_the_budget() {
        let pods = [pod("a", "web", true), pod("b", "web", true)];
        let refs: Vec<&Pod> = pods.iter().collect();
        let mut budget = pdb(Some(IntOrString::Int(1)), None);
        budget.status = Some(status(&budget, &refs, NOW, &no_controllers));
        assert_eq!(evict(&pods[0], &[&budget]), Eviction::Charge(0));
        charge(&mut budget, "a", NOW);
        assert!(matches!(
            evict(&pods[1], &[&budget]),
            Eviction::Refused { .. }
        ));
        // The controller keeps the evicted pod out of the healthy count.
        let s = status(&budget, &refs, NOW.plus_millis(1000), &no_controllers);
        assert_eq!(
            (s.current_healthy, s.disruptions_allowed),
            (Some(1), Some(0))
        );
        // Pending pods and pods of no budget are deleted at once.
        assert_eq!(evict(&pod("p", "web", false), &[&budget]), Eviction::Delete);
        assert_eq!(evict(&pod("x", "db", true), &[&budget]), Eviction::Delete);
        assert_eq!(
            evict(&pods[0], &[&budget, &budget]),
            Eviction::MultipleBudgets
        );
    }
}
