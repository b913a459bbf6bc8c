//! What the session learns of each job while it runs ([`JobRun`]), and why a job was held
//! ([`Holdup`]): plain values every part of the session reads, so they name no other module of
//! it (the trackers read them without reaching the state that holds them).

use caldera_model::Resources;
use std::collections::BTreeMap;

/// Why a job was not placed in this session, decided by the actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Holdup {
    /// Not admitted at enqueue; `quota` when a queue limit held it.
    NotAdmitted {
        /// A queue limit (not the cluster) held it.
        quota: bool,
        /// Which limit.
        message: String,
    },
    /// The queue's share or quota stopped it (`QueueQuotaExceeded`).
    Quota(String),
    /// Some member found no node: the kube-scheduler style fit message.
    Fit(String),
}

/// Per-job facts the session learns while it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobRun {
    /// Admitted (phase was Inqueue/Running, or enqueue admitted it now).
    pub admitted: bool,
    /// Invalid, with the NotEnoughTasks message.
    pub invalid: Option<String>,
    /// Why it was held, if it was.
    pub holdup: Option<Holdup>,
    /// Σ requests of members holding a node (for DRF and queue accounting).
    pub allocated: Resources,
    /// Members that count toward the gang (see [`crate::state::State::ready_count`]), kept current by every
    /// placement and undo.
    pub ready: u32,
    /// The topology domain its gang was placed in by this session (HyperNode or label value).
    pub domain: Option<std::sync::Arc<str>>,
    /// Per sub-group (by name) this session tried: where it was placed (`placed in <domain>`,
    /// `placed across domains`) or why it could not be.
    pub sub_groups: BTreeMap<std::sync::Arc<str>, String>,
    /// How far the last attempt at the gang got when a member found no node (its holdup's
    /// message says it), kept so an alike gang failing from the cache says it for itself.
    pub shortfall: Option<crate::shortfall::Shortfall>,
    /// Aged by fairshare's `maxWait` at session open ([`crate::aging`]): a weighted share it
    /// could never start within (`proportion`'s deserved) no longer stops it; its queue's
    /// capability and the other queues' guarantees still do.
    pub aged: bool,
}
