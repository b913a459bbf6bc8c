//! Σ allocatable and Σ idle per topology domain ([`DomainRooms`]): plain values the session
//! keeps; bringing them up to date from the change log is the parent's.

use caldera_model::Resources;

/// Σ allocatable and Σ idle over the Ready nodes of every domain of one tree, kept current
/// from the session's change log: each changed node's idle is compared with what was last
/// counted and the difference goes to every domain holding it. A search then reads a
/// domain's room in constant time instead of summing its nodes.
#[derive(Debug)]
pub(crate) struct DomainRooms {
    /// Per node, the domains holding it.
    pub(crate) node_domains: Vec<Vec<u32>>,
    /// Per node, the idle counted in its domains (nothing for a node that is not Ready).
    pub(crate) counted: Vec<Resources>,
    /// Per domain: (Σ allocatable, Σ idle).
    pub(crate) rooms: Vec<(Resources, Resources)>,
    /// How much of the change log is accounted for.
    pub(crate) seen: usize,
}
