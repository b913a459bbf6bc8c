//! Dynamic Resource Allocation's structured allocator, pure: CEL device selectors
//! ([`cel::Selectors`]) and the search for devices a pod's claims ask for on a node
//! ([`Allocator`]), with the semantics of `k8s.io/dynamic-resource-allocation/structured`.
//!
//! The session keeps one [`Allocator`] per session: it knows which devices are in use (the
//! snapshot's allocated claims plus the session's placements, through [`Allocator::take`] and
//! [`Allocator::release`]) and caches every selector's answer per device.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod allocator;
pub mod cel;
mod lazy;

pub use allocator::{
    extended_claim, node_selector, node_term, Allocator, Found, NodeView, Usage, CANNOT_ALLOCATE,
    STEP_LIMIT,
};

#[cfg(test)]
mod tests;
