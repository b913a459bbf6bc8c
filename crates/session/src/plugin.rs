//! The plugin trait: one optional hook per extension point, and how answers combine.
//!
//! Every hook has a default that abstains, so a plugin implements only what it needs. The
//! session calls plugins in tier order, then config order, and combines answers as SPEC §6
//! says; each hook's doc repeats the rule.

use crate::state::State;
use caldera_model::{Node, Task};
use std::cmp::Ordering;
use std::fmt::Debug;

/// A plugin's answer to "may this job be admitted?" at enqueue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No opinion.
    Abstain,
    /// Admit (unless another plugin rejects).
    Permit,
    /// Do not admit. `quota` says whether a queue limit (rather than the cluster) held it.
    Reject {
        /// A queue limit held it (`QueueQuotaExceeded`), not cluster capacity.
        quota: bool,
        /// Which limit, for events and conditions.
        message: String,
    },
}

/// Why a node cannot take a task, as counted in the fit message
/// ("0/5 nodes are available: 3 Insufficient nvidia.com/gpu, 2 node(s) were unschedulable.").
pub type FitReason = String;

/// A scheduling plugin. All hooks are optional.
///
/// Hooks that take `&State` see the session's current view: nodes with this session's
/// placements applied, tasks with their current status.
pub trait Plugin: Debug {
    /// The name in the config (`gang`, `drf`, ...).
    fn name(&self) -> &'static str;

    /// Called once after the session opened, before any action runs.
    fn on_open(&mut self, _state: &State) {}

    /// Job order: `Less` puts `a` first. The first plugin (tier order, then config order) that
    /// answers other than `Equal` decides; if none does, creation time then namespace/name.
    fn job_order(&self, _state: &State, _a: usize, _b: usize) -> Ordering {
        Ordering::Equal
    }

    /// Queue order, combined like [`Plugin::job_order`]; fallback: queue name.
    fn queue_order(&self, _state: &State, _a: usize, _b: usize) -> Ordering {
        Ordering::Equal
    }

    /// Task order within a job, combined like [`Plugin::job_order`]; fallback: creation time,
    /// then namespace/name.
    fn task_order(&self, _state: &State, _a: &Task, _b: &Task) -> Ordering {
        Ordering::Equal
    }

    /// Whether the job may be tried at all. `Some(message)` marks it invalid (NotEnoughTasks);
    /// any plugin saying invalid makes it invalid.
    fn job_invalid(&self, _state: &State, _job: usize) -> Option<String> {
        None
    }

    /// Whether the job's gang is satisfied. `None` abstains; every plugin that answers must say
    /// `true` (no answer at all means ready).
    fn job_ready(&self, _state: &State, _job: usize) -> Option<bool> {
        None
    }

    /// Enqueue admission. Any `Reject` ⇒ not admitted; otherwise admitted.
    fn enqueueable(&self, _state: &State, _job: usize) -> Verdict {
        Verdict::Abstain
    }

    /// Called when enqueue admits `job`, so plugins can count it as admitted.
    fn on_enqueue(&mut self, _state: &State, _job: usize) {}

    /// Whether a queue has reached its share. Any plugin saying overused ⇒ overused.
    fn overused(&self, _state: &State, _queue: usize) -> bool {
        false
    }

    /// Whether `task` may be placed given its queue's share. All must agree; `Err` carries the
    /// reason (reported as `QueueQuotaExceeded`).
    fn allocatable(&self, _state: &State, _queue: usize, _task: &Task) -> Result<(), String> {
        Ok(())
    }

    /// A filter that depends only on the task's placement spec and the node's fixed
    /// attributes (labels, taints, cordon). Results are cached per distinct spec for the
    /// session. All must pass.
    fn filter_static(&self, _task: &Task, _node: &Node) -> Result<(), FitReason> {
        Ok(())
    }

    /// A filter that depends on the node's current load (pod count, host ports). All must
    /// pass. Resource fit is checked by the session itself, before any plugin.
    fn filter(&self, _state: &State, _task: &Task, _node: &Node) -> Result<(), FitReason> {
        Ok(())
    }

    /// Whether this plugin scores nodes (lets the session skip the call otherwise).
    fn scores_nodes(&self) -> bool {
        false
    }

    /// Node score for `task`; the session sums over plugins (each applies its own weight).
    /// Must depend only on the task's request and placement spec and on the node: the session
    /// keeps scores per kind of member and rescores a node only when its load changes.
    fn score(&self, _state: &State, _task: &Task, _node: &Node) -> f64 {
        0.0
    }

    /// The queue's deserved share, if this plugin computes one (proportion, capacity; capacity
    /// answers for inner queues of the tree too); reported in the
    /// outcome. The first plugin that answers wins.
    fn deserved(&self, _queue: usize) -> Option<caldera_model::Resources> {
        None
    }

    /// Weights of resources in the score of a topology domain (HyperNode binpack: the
    /// weighted mean of (used + request) / allocatable over the resources the gang asks for;
    /// fullest domains are tried first). The first plugin that answers wins; a resource
    /// missing from the map does not count. No plugin answers: every resource weighs 1.
    fn domain_weights(&self) -> Option<&std::collections::BTreeMap<String, f64>> {
        None
    }

    /// Called after `task` was placed (in a statement) on its node.
    fn on_allocate(&mut self, _state: &State, _task: usize) {}

    /// Called after a placement of `task` was undone.
    fn on_deallocate(&mut self, _state: &State, _task: usize) {}
}

/// Which hooks of a plugin are switched on by its config flags (Volcano's `enable…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hooks {
    /// `enableJobOrder`.
    pub job_order: bool,
    /// `enableQueueOrder`.
    pub queue_order: bool,
    /// `enableTaskOrder`.
    pub task_order: bool,
    /// `enableJobReady`.
    pub job_ready: bool,
    /// `enableJobEnqueued`.
    pub enqueue: bool,
    /// `enablePredicate`.
    pub predicate: bool,
    /// `enableNodeOrder`.
    pub node_order: bool,
    /// `enabledOverused`.
    pub overused: bool,
    /// `enabledAllocatable`.
    pub allocatable: bool,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            job_order: true,
            queue_order: true,
            task_order: true,
            job_ready: true,
            enqueue: true,
            predicate: true,
            node_order: true,
            overused: true,
            allocatable: true,
        }
    }
}
