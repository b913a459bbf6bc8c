//! capacity: Volcano's elastic queue quotas — a queue's explicit `deserved` share, its
//! `capability` and `guarantee` — and, with `enableHierarchy: true`, hierarchical queues
//! (`Queue.spec.parent`): only leaf queues hold jobs, a job is admitted and a member placed
//! only within its queue's and every ancestor's capability in force, and queues order by the
//! share of their ancestors just below their deepest common ancestor, then their own.
//!
//! With `fairshare`, siblings that both hold at least what they deserve go by what they hold
//! over it per KAI's usage-adjusted weight among their parent's children
//! ([`caldera_queue::capacity::OverQuota`]): usage orders only what is over the deserved
//! shares.
//!
//! The tree and the allocation summed up it are the session's (`State::tree`,
//! `State::tree_allocated`); the accounting is `caldera_queue::capacity`.

use caldera_config::{Hook, PluginOption};
use caldera_model::{PodGroupPhase, Resources, Task};
use caldera_queue::capacity::{
    compare_nodes, floors, hierarchical_order, shares, Limit, NodeShare, OverQuota, Quota,
};
use caldera_queue::QueueTree;
use caldera_session::plugin::{Plugin, Verdict};
use caldera_session::state::{holds_node, State};
use std::cmp::Ordering;

/// The capacity plugin.
#[derive(Debug, Default)]
pub struct Capacity {
    /// `enableHierarchy`.
    hierarchy: bool,
    /// Without hierarchy: every queue under a virtual root, parents ignored (and refused).
    flat: Option<QueueTree>,
    /// Per tree node.
    shares: Vec<NodeShare>,
    /// Per tree node: Σ minResources of admitted jobs not yet holding them, summed up the tree.
    inqueue: Vec<Resources>,
    /// With `fairshare`: per tree node, KAI's usage-adjusted weight among its siblings, which
    /// orders queues over their deserved share ([`OverQuota`]); empty when usage moves
    /// nothing (no memory, `kValue` 0).
    over_weights: Vec<Option<f64>>,
    /// With `over_weights`: per tree node, the floor what is over is counted from
    /// ([`floors`]).
    floors: Vec<Resources>,
}

/// Builds the plugin. Its one checked argument, `ancestorReclaimLevel`, is accepted by the
/// config only at 0 with flat queues (Volcano's default, which is what flat reclaim does), so
/// nothing is read here.
pub fn build(option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(Capacity {
        hierarchy: option.enabled(Hook::Hierarchy),
        ..Capacity::default()
    }))
}

impl Capacity {
    fn tree<'a>(&'a self, state: &'a State) -> &'a QueueTree {
        self.flat.as_ref().unwrap_or(&state.tree)
    }

    /// Node `i`'s allocation, summed over its subtree.
    fn allocated<'a>(&self, state: &'a State, i: usize) -> &'a Resources {
        if self.flat.is_some() {
            // Flat: `path` never holds the virtual root, so `i` is a queue.
            &state.queue_allocated[i]
        } else {
            &state.tree_allocated[i]
        }
    }

    /// The nodes whose capability in force binds queue `q`: the queue, then each ancestor
    /// up to the root; the root only when its Queue sets a capability (otherwise its bound is
    /// the cluster, which node fit already enforces).
    fn path(&self, state: &State, q: usize) -> Vec<usize> {
        let tree = self.tree(state);
        let root_bound = !tree.virtual_root()
            && state.queues[tree.root()].capability.is_some()
            && self.flat.is_none();
        let mut path: Vec<usize> = vec![q];
        path.extend(
            tree.ancestors(q)
                .iter()
                .rev()
                .copied()
                .filter(|&a| a != tree.root() || root_bound),
        );
        path
    }

    /// With `fairshare`, each tree node's usage-adjusted weight among its siblings
    /// ([`caldera_queue::fair::sibling_weights`]): the nodes that compete are those whose
    /// subtree holds something or has a member waiting in an open leaf; a queue's weight is
    /// its `spec.weight`, its usage its record's (which covers its subtree). Empty when usage
    /// cannot move anything.
    fn sibling_weights(&self, state: &State) -> Vec<Option<f64>> {
        let Some(fair) = state.fair.as_ref().filter(|f| f.remembers() && f.k > 0.0) else {
            return Vec::new();
        };
        let tree = self.tree(state);
        let open: Vec<bool> = (0..state.queues.len())
            .map(|q| self.closed(state, q).is_none())
            .collect();
        let mut compete = vec![false; tree.len()];
        for t in &state.tasks {
            let q = state.job_queue[t.job];
            if holds_node(t) || (open[q] && t.schedulable_pending()) {
                compete[q] = true;
                for &a in tree.ancestors(q) {
                    compete[a] = true;
                }
            }
        }
        let (mut weights, mut usage) = (vec![1.0; tree.len()], vec![0.0; tree.len()]);
        for (q, queue) in state.queues.iter().enumerate() {
            weights[q] = f64::from(queue.weight.max(1));
            usage[q] = caldera_session::fair::queue_usage(state, fair, q);
        }
        let adjusted =
            caldera_queue::fair::sibling_weights(tree, &weights, &usage, &compete, fair.k);
        if adjusted.iter().all(Option::is_none) {
            return Vec::new();
        }
        adjusted
    }

    /// Why queue `q` holds no new work, if it does not.
    fn closed(&self, state: &State, q: usize) -> Option<String> {
        let queue = &state.queues[q];
        if !queue.exists && queue.name.as_ref() != "default" {
            return Some(format!("queue {} does not exist", queue.name));
        }
        if !queue.open {
            return Some(format!("queue {} is closed", queue.name));
        }
        if !self.hierarchy {
            if let Some(p) = &queue.parent {
                return Some(format!(
                    "queue {} has parent {p}, but hierarchical queues are off: enable them with enableHierarchy: true on the capacity plugin",
                    queue.name
                ));
            }
            return None;
        }
        let tree = &state.tree;
        if let Some(problem) = tree.problem(q) {
            return Some(format!(
                "queue {} is not in the queue tree and is treated as closed: {problem}",
                queue.name
            ));
        }
        if !tree.is_leaf(q) {
            let children: Vec<&str> = tree.children(q).iter().map(|&c| &**tree.name(c)).collect();
            return Some(format!(
                "queue {} is not a leaf queue (its children: {}); only leaf queues hold jobs",
                queue.name,
                children.join(", ")
            ));
        }
        None
    }
}

impl Plugin for Capacity {
    fn name(&self) -> &'static str {
        "capacity"
    }

    fn on_open(&mut self, state: &State) {
        self.flat = (!self.hierarchy).then(|| {
            QueueTree::flat(
                &state
                    .queues
                    .iter()
                    .map(|q| q.name.clone())
                    .collect::<Vec<_>>(),
            )
        });
        let tree = self.tree(state);
        let quotas: Vec<Quota> = state
            .queues
            .iter()
            .map(|q| Quota {
                capability: q
                    .capability
                    .as_ref()
                    .map(|c| Limit::of(c).with_zeros(&q.zero_capability)),
                guarantee: q.guarantee.clone(),
                deserved: q.deserved.clone(),
            })
            .collect();
        let computed = shares(tree, &quotas, &state.total);
        let mut inqueue = vec![Resources::new(); tree.len()];
        for (j, job) in state.jobs.iter().enumerate() {
            if job.phase() != PodGroupPhase::Inqueue {
                continue;
            }
            if let Some(min) = &job.min_resources {
                let rest = min.excess_over(&state.job_runs[j].allocated);
                let q = state.job_queue[j];
                inqueue[q].add(&rest);
                for &a in tree.ancestors(q) {
                    inqueue[a].add(&rest);
                }
            }
        }
        self.shares = computed;
        self.inqueue = inqueue;
        self.over_weights = self.sibling_weights(state);
        self.floors = if self.over_weights.is_empty() {
            Vec::new()
        } else {
            floors(self.tree(state), &self.shares)
        };
    }

    fn queue_order(&self, state: &State, a: usize, b: usize) -> Ordering {
        let (qa, qb) = (&state.queues[a], &state.queues[b]);
        let over = state
            .fair
            .as_deref()
            .filter(|_| !self.over_weights.is_empty())
            .map(|settings| OverQuota {
                weights: &self.over_weights,
                floors: &self.floors,
                settings,
                total: &state.total,
            });
        qb.priority.cmp(&qa.priority).then_with(|| {
            if self.flat.is_some() {
                compare_nodes(&self.shares, &state.queue_allocated, over.as_ref(), a, b)
            } else {
                hierarchical_order(
                    &state.tree,
                    &self.shares,
                    &state.tree_allocated,
                    over.as_ref(),
                    a,
                    b,
                )
            }
        })
    }

    fn allocatable(&self, state: &State, queue: usize, task: &Task) -> Result<(), String> {
        if let Some(why) = self.closed(state, queue) {
            return Err(why);
        }
        let tree = self.tree(state);
        for node in self.path(state, queue) {
            let s = &self.shares[node];
            let allocated = self.allocated(state, node);
            let over = s.real.exceeded(allocated, &task.request);
            if !over.is_empty() {
                let whose = if node == queue {
                    format!("queue {}", tree.name(node))
                } else {
                    format!("queue {}'s ancestor {}", tree.name(queue), tree.name(node))
                };
                return Err(format!(
                    "{whose} would exceed its capability {} (allocated {}) on {}",
                    s.real,
                    allocated,
                    over.join(", ")
                ));
            }
        }
        Ok(())
    }

    fn enqueueable(&self, state: &State, job: usize) -> Verdict {
        let q = state.job_queue[job];
        if let Some(why) = self.closed(state, q) {
            return Verdict::Reject {
                quota: true,
                message: why,
            };
        }
        let Some(min) = &state.jobs[job].min_resources else {
            return Verdict::Permit;
        };
        let tree = self.tree(state);
        for node in self.path(state, q) {
            let s = &self.shares[node];
            let used = self.allocated(state, node).plus(&self.inqueue[node]);
            let over = s.real.exceeded(&used, min);
            if over.is_empty() {
                continue;
            }
            let whose = if node == q {
                format!("queue {}", tree.name(q))
            } else {
                format!("queue {}'s ancestor {}", tree.name(q), tree.name(node))
            };
            return Verdict::Reject {
                quota: true,
                message: format!(
                    "minResources {min} do not fit the capability {} of {whose} (allocated {}, admitted {}) on {}",
                    s.real,
                    self.allocated(state, node),
                    self.inqueue[node],
                    over.join(", ")
                ),
            };
        }
        Verdict::Permit
    }

    fn on_enqueue(&mut self, state: &State, job: usize) {
        if let Some(min) = &state.jobs[job].min_resources {
            let q = state.job_queue[job];
            self.inqueue[q].add(min);
            let ancestors: Vec<usize> = self.tree(state).ancestors(q).to_vec();
            for a in ancestors {
                self.inqueue[a].add(min);
            }
        }
    }

    fn deserved(&self, queue: usize) -> Option<Resources> {
        self.shares.get(queue).map(|s| s.deserved.clone())
    }
}
