//! The kubelet, as far as a scheduler can tell: how long a deleted pod keeps its node, when it
//! is finally gone, and the status a kubelet writes when a pod starts or finishes.
//!
//! Graceful deletion follows the API server's pod strategy (`CheckGracefulDelete`): an unbound
//! pod or a finished one goes at once; a bound one gets `deletionTimestamp = now + grace` and
//! `deletionGracePeriodSeconds = grace`, the grace being the request's or the pod's
//! `terminationGracePeriodSeconds` (30 when unset, the API server's default). The pod keeps
//! its node — and its resources count there — until the kubelet confirms the kill with a
//! delete of grace 0, which a model kubelet does once `deletionTimestamp` has passed.

use caldera_model::Time;
use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};

use crate::time::{from_kube, to_kube};

/// `terminationGracePeriodSeconds` when a pod does not set it (the API server's default).
pub const DEFAULT_GRACE_SECONDS: i64 = 30;

/// What a delete does to a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletion {
    /// Gone at once (unbound, finished, or grace 0).
    Now,
    /// Terminating: stays, holding its node, until `until`.
    Graceful {
        /// The new `deletionTimestamp`.
        until: Time,
        /// The new `deletionGracePeriodSeconds`.
        grace_seconds: i64,
    },
    /// Already terminating with a grace no longer than the one asked: nothing changes.
    Unchanged,
}

fn bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}

/// The grace period a delete gives `pod` (`podStrategy.CheckGracefulDelete`): the requested
/// one, else the pod's `terminationGracePeriodSeconds`, else 30; 0 for an unbound or finished
/// pod; a negative request counts as 1.
pub fn grace_period(pod: &Pod, requested: Option<i64>) -> i64 {
    let asked = requested
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .unwrap_or(DEFAULT_GRACE_SECONDS);
    if !bound(pod) || matches!(phase(pod), Some("Failed" | "Succeeded")) {
        return 0;
    }
    if asked < 0 {
        1
    } else {
        asked
    }
}

/// What deleting `pod` at `now` with the `requested` grace does. A pending graceful deletion
/// only ever gets shorter, as on the API server.
pub fn deletion(pod: &Pod, requested: Option<i64>, now: Time) -> Deletion {
    let grace = grace_period(pod, requested);
    if grace == 0 {
        return Deletion::Now;
    }
    let pending = pod.metadata.deletion_grace_period_seconds;
    if pod.metadata.deletion_timestamp.is_some() && pending.is_some_and(|p| p > 0 && p <= grace) {
        return Deletion::Unchanged;
    }
    Deletion::Graceful {
        until: now.plus_millis(grace.saturating_mul(1000)),
        grace_seconds: grace,
    }
}

/// Marks `pod` terminating until `until` (what a graceful delete writes).
pub fn mark_terminating(pod: &mut Pod, until: Time, grace_seconds: i64) {
    pod.metadata.deletion_timestamp = to_kube(until);
    pod.metadata.deletion_grace_period_seconds = Some(grace_seconds);
}

/// When the kubelet will have finished killing `pod`: its `deletionTimestamp`, for a bound
/// pod being deleted. `None` for a pod that is not terminating (or not on a node: nothing to
/// kill, the API server removes those at once).
pub fn gone_at(pod: &Pod) -> Option<Time> {
    if !bound(pod) {
        return None;
    }
    pod.metadata.deletion_timestamp.as_ref().map(from_kube)
}

/// Whether the kubelet removes `pod` (a delete with grace 0) at `now`.
pub fn removal_due(pod: &Pod, now: Time) -> bool {
    gone_at(pod).is_some_and(|t| t <= now)
}

/// Sets condition `type_` to `status` (transition time moves only on a status change).
fn set_condition(
    status: &mut PodStatus,
    type_: &str,
    value: &str,
    reason: Option<&str>,
    now: Time,
) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == value => c.reason = reason.map(str::to_string),
        Some(c) => {
            c.status = value.to_string();
            c.reason = reason.map(str::to_string);
            c.message = None;
            c.last_transition_time = to_kube(now);
        }
        None => conditions.push(PodCondition {
            type_: type_.to_string(),
            status: value.to_string(),
            reason: reason.map(str::to_string),
            last_transition_time: to_kube(now),
            ..Default::default()
        }),
    }
}

/// What the kubelet writes when the pod reaches `phase` at `now`: the phase; for `Running`
/// the `Initialized`, `ContainersReady` and `Ready` conditions True and `startTime`; for
/// `Succeeded`/`Failed` `Ready` and `ContainersReady` False with reason `PodCompleted`. The
/// disruption controller counts a pod healthy only when `Ready` is True, so a PodDisruption
/// Budget sees marked pods the way it sees real ones. Returns whether anything changed.
pub fn set_phase(status: &mut PodStatus, phase: &str, now: Time) -> bool {
    let before = status.clone();
    status.phase = Some(phase.to_string());
    match phase {
        "Running" => {
            if status.start_time.is_none() {
                status.start_time = to_kube(now);
            }
            for c in ["Initialized", "ContainersReady", "Ready"] {
                set_condition(status, c, "True", None, now);
            }
        }
        "Succeeded" | "Failed" => {
            for c in ["ContainersReady", "Ready"] {
                set_condition(status, c, "False", Some("PodCompleted"), now);
            }
        }
        _ => {}
    }
    *status != before
}

/// Whether the pod's `Ready` condition is True (`podutil.IsPodReady`).
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(node: Option<&str>, grace: Option<i64>) -> Pod {
        Pod {
            spec: Some(PodSpec {
                node_name: node.map(str::to_string),
                termination_grace_period_seconds: grace,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn unbound_pods_go_at_once_bound_ones_keep_their_grace() {
        let now = Time(1_000_000);
        assert_eq!(deletion(&pod(None, Some(30)), None, now), Deletion::Now);
        assert_eq!(
            deletion(&pod(Some("n"), None), None, now),
            Deletion::Graceful {
                until: Time(1_030_000),
                grace_seconds: 30
            }
        );
        assert_eq!(
            deletion(&pod(Some("n"), Some(5)), None, now),
            Deletion::Graceful {
                until: Time(1_005_000),
                grace_seconds: 5
            }
        );
        assert_eq!(
            deletion(&pod(Some("n"), Some(5)), Some(0), now),
            Deletion::Now
        );
    }

    #[test]
    fn the_kubelet_removes_a_terminating_pod_once_its_time_has_come() {
        let mut p = pod(Some("n"), Some(10));
        assert!(!removal_due(&p, Time(i64::MAX / 2)));
        mark_terminating(&mut p, Time(1_767_225_610_000), 10);
        assert!(!removal_due(&p, Time(1_767_225_609_999)));
        assert!(removal_due(&p, Time(1_767_225_610_000)));
        // A second, longer delete changes nothing; a shorter one shortens it.
        assert_eq!(deletion(&p, Some(20), Time(0)), Deletion::Unchanged);
        assert!(matches!(
            deletion(&p, Some(2), Time(1_767_225_600_000)),
            Deletion::Graceful {
                grace_seconds: 2,
                ..
            }
        ));
    }

    #[test]
    fn running_makes_a_pod_ready_and_finishing_unready() {
        let mut s = PodStatus::default();
        assert!(set_phase(&mut s, "Running", Time(5_000)));
        let p = Pod {
            status: Some(s.clone()),
            ..Default::default()
        };
        assert!(is_ready(&p));
        assert!(!set_phase(&mut s, "Running", Time(6_000)));
        assert!(set_phase(&mut s, "Succeeded", Time(7_000)));
        assert!(!is_ready(&Pod {
            status: Some(s),
            ..Default::default()
        }));
    }
}
