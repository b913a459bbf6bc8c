//! Volcano-compatible CRD types: PodGroup and Queue in scheduling.volcano.sh/v1beta1.
#![forbid(unsafe_code)]
