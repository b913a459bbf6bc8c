//! Model time ↔ Kubernetes timestamps.

use caldera_model::Time;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time as KubeTime;

/// A model time as a Kubernetes timestamp (`None` only outside the years -9999..=9999).
pub fn to_kube(t: Time) -> Option<KubeTime> {
    k8s_openapi::jiff::Timestamp::from_millisecond(t.0)
        .ok()
        .map(KubeTime)
}

/// A Kubernetes timestamp as a model time (milliseconds since the epoch).
pub fn from_kube(t: &KubeTime) -> Time {
    Time(t.0.as_millisecond())
}
