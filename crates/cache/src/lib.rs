//! Kubernetes objects → model: conversion, the in-memory index, and snapshots.
//!
//! This crate is the one place where Kubernetes objects (`Pod`, `Node`, `PriorityClass`, and
//! the Volcano `PodGroup` and `Queue`) turn into [`caldera_model`] values. It is pure and
//! synchronous, in the style of linkerd's policy-controller index: the watch wiring lives one
//! layer up and feeds [`ClusterIndex`] through `apply`, `delete` and `reset`, written once over
//! [`Indexed`], which each watched kind implements in a module of its own; the
//! simulator feeds the very same index, so `caldera simulate` and the live scheduler see a
//! cluster through one conversion.
//!
//! - [`convert`]: one function per kind, each returning a typed [`Error`] that names the object
//!   and the field on bad input (a malformed quantity, an unknown operator). Nothing panics.
//! - [`ClusterIndex`]: the converted objects, with per-node usage kept up to date as pods come
//!   and go, so that [`ClusterIndex::snapshot`] only assembles and never re-converts.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod consolidation;
pub mod convert;
pub mod derive;
pub mod discovery;
pub mod dra;
mod error;
mod fields;
pub mod gate;
mod grouping;
mod index;
mod intern;
mod kinds;
pub mod labels;
pub mod native;
pub mod provisioning;
mod snapshot;
pub mod topology;
pub mod volumes;
pub mod workload;

pub use convert::{
    group_name, node, pod_condition, pod_request, priority_class, queue, GroupInfo, PodInfo,
    PodPhase, PriorityClassInfo,
};
pub use error::{Error, ObjectKind, Problem, Result};
pub use index::{
    ClusterIndex, Indexed, Predictor, SnapshotOptions, DEFAULT_SCHEDULER_NAMES,
    NAMESPACE_NAME_LABEL,
};

#[cfg(test)]
mod tests;
