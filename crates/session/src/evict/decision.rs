//! What the config lets evict ([`Switches`]) and what preempt and reclaim decided
//! ([`Preemption`]): plain values the session keeps; choosing victims is the parent's.

/// What the config lets evict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Switches {
    /// `preempt` is an action and some plugin keeps `enablePreemptable` on.
    pub preempt: bool,
    /// `reclaim` is an action and some plugin keeps `enableReclaimable` on.
    pub reclaim: bool,
    /// No plugin turned `enablePreemptive` off: queues below their share may reclaim.
    pub preemptive: bool,
    /// Deserved shares are explicit (the capacity plugin): a queue reclaims while the gang
    /// fits its share on the resources the share names (Volcano's zero-filtered check), not
    /// on every resource.
    pub explicit_deserved: bool,
    /// Hierarchical queues are on (capacity with `enableHierarchy`): reclaim takes from the
    /// nearest relatives first and keeps every queue on a victim's path below the common
    /// ancestor at its deserved share and guarantee.
    pub tree: bool,
}

/// One decided preemption: who, whom, and where the preemptor will go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// `preempt` or `reclaim`.
    pub action: &'static str,
    /// The preemptor job.
    pub job: usize,
    /// The victim tasks, unit by unit.
    pub victims: Vec<usize>,
    /// The preemptor's members and the nodes held for them.
    pub placement: Vec<(usize, usize)>,
    /// Why these victims, for `caldera explain`.
    pub why: String,
}
