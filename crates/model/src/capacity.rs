//! Capacity asked of an autoscaler for a gang (a ProvisioningRequest), and capacity held for a
//! job that is not bound yet (a booking).
//!
//! The cache turns the request objects it sees into a [`CapacityRequest`] on the job they are
//! for, and books nodes for a job whose request is provisioned ([`crate::Node::booked_for`]).
//! The session decides from these when a gang needs a request, when one is no longer needed,
//! and how its timeout runs; the plan carries that out as [`CapacityNeed`] and
//! [`CapacityRelease`].

use crate::resources::Resources;
use crate::task::PlacementSpec;
use crate::time::Time;
use std::sync::Arc;

/// Where an autoscaler request is in its life, from its status conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CapacityState {
    /// Created; no autoscaler has accepted it yet.
    Pending,
    /// Accepted: the autoscaler is adding capacity.
    Accepted,
    /// Provisioned: the capacity exists and is booked for the gang.
    Provisioned,
    /// Failed (or its capacity was revoked): the autoscaler will not provide it.
    Failed,
    /// Provisioned, but the booking ran out before the gang used it.
    BookingExpired,
}

impl CapacityState {
    /// Lower-case word for messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Accepted => "accepted",
            Self::Provisioned => "provisioned",
            Self::Failed => "failed",
            Self::BookingExpired => "booking expired",
        }
    }

    /// Nodes are coming or here: accepted, or provisioned and still booked. While a request is
    /// live, the gang's timeout does not run out (only `maxWait` bounds it).
    pub fn live(self) -> bool {
        matches!(self, Self::Accepted | Self::Provisioned)
    }

    /// Over: failed or expired, to be replaced after the back-off.
    pub fn over(self) -> bool {
        matches!(self, Self::Failed | Self::BookingExpired)
    }
}

/// The request a job has, as last seen.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapacityRequest {
    /// Namespace (the job's).
    pub namespace: Arc<str>,
    /// Name of the request object.
    pub name: Arc<str>,
    /// 1 for the first request of a gang, then one more per retry.
    pub attempt: u32,
    /// When it was created.
    pub created: Time,
    /// Its state.
    pub state: CapacityState,
    /// When it entered that state (creation for `Pending`).
    pub since: Time,
    /// The autoscaler's message for the state, if any.
    pub message: String,
    /// Number of its pod sets (its PodTemplates are `<name>-0`, `<name>-1`, ...).
    pub pod_sets: u32,
}

/// Settings of autoscaler requests (config `autoscaler.provisioningRequest`). Absent from a
/// snapshot when off, or when the API server does not serve ProvisioningRequests.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProvisioningPolicy {
    /// The `provisioningClassName` of new requests.
    pub class_name: String,
    /// Back-off before a failed or expired request is replaced; doubles per attempt, up to
    /// 16 times this.
    pub retry_ms: i64,
    /// How long provisioned capacity stays booked for its gang.
    pub booking_ms: i64,
    /// Upper bound of a gang's wait while its request is live; `None`: no bound beyond the
    /// autoscaler's own.
    pub max_wait_ms: Option<i64>,
    /// Every gang may get a request unless its PodGroup opts out; when false, only gangs that
    /// opt in.
    pub all_gangs: bool,
}

impl ProvisioningPolicy {
    /// Back-off after `attempt` failed: `retry × 2^(attempt-1)`, at most `16 × retry`.
    pub fn backoff_ms(&self, attempt: u32) -> i64 {
        let doublings = attempt.saturating_sub(1).min(4);
        self.retry_ms.saturating_mul(1 << doublings)
    }
}

/// A request to delete: it is over, not needed, or a second one for the same gang.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapacityRelease {
    /// Namespace.
    pub namespace: Arc<str>,
    /// The PodGroup it was made for (its writes are carried out in order with the PodGroup's
    /// other autoscaler writes).
    pub podgroup: Arc<str>,
    /// Request name.
    pub name: Arc<str>,
    /// Members not bound yet that are annotated to consume it: the annotations are removed,
    /// or cluster-autoscaler would leave these pods to a request that no longer exists.
    pub pods: Vec<ConsumingPod>,
    /// Number of its pod sets, whose PodTemplates go with it.
    pub pod_sets: u32,
    /// Why, for logs.
    pub why: String,
}

/// One kind of member in a request: identical request and placement.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodSetNeed {
    /// What each pod requests.
    pub request: Resources,
    /// Where each pod may go.
    pub spec: Arc<PlacementSpec>,
    /// How many such pods the gang still needs.
    pub count: u32,
}

/// A pod to annotate as consuming a request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConsumingPod {
    /// Namespace.
    pub namespace: Arc<str>,
    /// Name.
    pub name: Arc<str>,
    /// Uid.
    pub uid: Arc<str>,
}

/// A request to create for a gang that cannot be placed for lack of nodes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CapacityNeed {
    /// Namespace of the PodGroup (and of the request).
    pub namespace: Arc<str>,
    /// PodGroup name.
    pub podgroup: Arc<str>,
    /// PodGroup uid (owner of the request and its PodTemplates).
    pub podgroup_uid: Arc<str>,
    /// Name of the request to create.
    pub name: Arc<str>,
    /// Its attempt number.
    pub attempt: u32,
    /// `provisioningClassName`.
    pub class_name: String,
    /// One per distinct member shape; counts sum to what the gang lacks of `minMember`.
    pub pod_sets: Vec<PodSetNeed>,
    /// Pending members to annotate as consuming the request.
    pub pods: Vec<ConsumingPod>,
}

/// The request name for attempt `attempt` of the PodGroup `podgroup`: `<podgroup>-cap-<n>`,
/// the PodGroup name cut so the whole stays a valid object name with room for PodTemplate
/// suffixes.
pub fn request_name(podgroup: &str, attempt: u32) -> String {
    let suffix = format!("-cap-{attempt}");
    let room = 240usize.saturating_sub(suffix.len());
    let mut base: String = podgroup.chars().take(room).collect();
    while base.ends_with(['-', '.']) {
        base.pop();
    }
    format!("{base}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_sixteen_times() {
        let p = ProvisioningPolicy {
            class_name: String::new(),
            retry_ms: 1000,
            booking_ms: 0,
            max_wait_ms: None,
            all_gangs: true,
        };
        let b: Vec<i64> = (1..=7).map(|a| p.backoff_ms(a)).collect();
        assert_eq!(b, vec![1000, 2000, 4000, 8000, 16000, 16000, 16000]);
    }

    #[test]
    fn request_names_are_valid_and_numbered() {
        assert_eq!(request_name("train", 1), "train-cap-1");
        let long = "a".repeat(300);
        let name = request_name(&long, 12);
        assert!(name.len() <= 240 && name.ends_with("-cap-12"));
    }
}
