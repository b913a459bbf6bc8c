//! What consolidation decided ([`Consolidation`]) and the holds it keeps ([`Hold`]): plain
//! values the session's decisions carry; choosing them is the parent's.

use caldera_model::MoveHold;

/// One decided consolidation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consolidation {
    /// The job it made room for.
    pub job: usize,
    /// Each moved task and the node held for its replacement.
    pub moved: Vec<(usize, usize)>,
    /// The waiting job's members and the nodes held for them.
    pub placement: Vec<(usize, usize)>,
    /// Why these moves, for `caldera explain`.
    pub why: String,
}

/// A hold of the session: read from the job's PodGroup or decided now, and the task its room
/// counts through (the replacement, or the moved pod while it terminates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The hold.
    pub hold: MoveHold,
    /// The task held at its node, if any.
    pub task: Option<usize>,
}
