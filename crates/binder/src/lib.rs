//! Carries a plan out against the Kubernetes API.
#![forbid(unsafe_code)]
