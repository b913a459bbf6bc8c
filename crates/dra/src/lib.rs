//! Dynamic Resource Allocation's structured allocator, pure: CEL device selectors
//! ([`cel::Selectors`]) and the search for devices a pod's claims ask for on a node
//! ([`Allocator`]), with the semantics of `k8s.io/dynamic-resource-allocation/structured`.
//!
//! The session keeps one [`Allocator`] per session: it knows which devices are in use, whole or
//! in shares, and what they draw from counter sets (the snapshot's allocated claims plus the
//! session's placements, through [`Allocator::take`] and [`Allocator::release`] of a [`Hold`])
//! and caches every selector's answer per device.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod allocator;
pub mod cel;
pub mod sharing;

pub use allocator::{
    extended_claim, node_selector, node_term, Allocator, Found, NodeView, SharedUse, Usage,
    CANNOT_ALLOCATE, STEP_LIMIT,
};
pub use sharing::{Hold, Share};

#[cfg(test)]
mod tests;
