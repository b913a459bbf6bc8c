//! proportion: each queue's deserved share by weighted water-filling, queue order by share,
//! overuse, per-member allocatability, and enqueue admission against queue capability.

use caldera_config::PluginOption;
use caldera_model::{PodGroupPhase, Resources, Task};
use caldera_queue::{water_fill, QueueShare};
use caldera_session::plugin::{Plugin, Verdict};
use caldera_session::state::{holds_node, State};
use std::cmp::Ordering;

/// The proportion plugin.
#[derive(Debug, Default)]
pub struct Proportion {
    shares: Vec<QueueShare>,
}

/// Builds the plugin (it takes no arguments).
pub fn build(_: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    Ok(Box::new(Proportion::default()))
}

/// proportion's shares are flat: a queue placed under a parent (`spec.parent`) would silently
/// take a share of the whole cluster, so its jobs are held with a message instead.
fn unsupported_parent(state: &State, q: usize) -> Option<String> {
    let queue = &state.queues[q];
    let parent = queue.parent.as_ref()?;
    Some(format!(
        "queue {} has parent {parent}: hierarchical queues need the capacity plugin with enableHierarchy: true (proportion's shares are flat)",
        queue.name
    ))
}

/// With `fairshare` configured, the weighted split goes by KAI's usage-adjusted weights
/// (`caldera_queue::fair`) among the queues the weights split for (those that ask for
/// something and have no explicit `deserved`; guarantees stay floors in the split). Nothing changes when usage cannot move
/// the split (no memory, `kValue` 0, nobody has used anything), so the shares are exactly
/// those without the plugin.
fn adjust_for_usage(state: &State, shares: &mut [QueueShare]) {
    let Some(fair) = &state.fair else {
        return;
    };
    if !fair.remembers() || fair.k <= 0.0 {
        return;
    }
    let split: Vec<usize> = (0..shares.len())
        .filter(|&q| shares[q].explicit_deserved.is_none() && !shares[q].request.is_empty())
        .collect();
    let usage: Vec<f64> = split
        .iter()
        .map(|&q| caldera_session::fair::queue_usage(state, fair, q))
        .collect();
    if usage.iter().all(|u| *u <= 0.0) {
        return;
    }
    let weights: Vec<f64> = split.iter().map(|&q| f64::from(shares[q].weight)).collect();
    let adjusted = caldera_queue::fair::adjusted_weights(&weights, &usage, fair.k);
    for (&q, p) in split.iter().zip(adjusted) {
        shares[q].fair_weight = Some(p);
    }
}

impl Proportion {
    /// The accounting of queue `q` (after `on_open`).
    pub fn share(&self, q: usize) -> Option<&QueueShare> {
        self.shares.get(q)
    }
}

impl Plugin for Proportion {
    fn name(&self) -> &'static str {
        "proportion"
    }

    fn on_open(&mut self, state: &State) {
        let mut shares: Vec<QueueShare> = state
            .queues
            .iter()
            .map(|q| {
                let mut s = QueueShare::new(q.name.clone(), q.weight);
                s.capability = q.capability.clone();
                s.guarantee = q.guarantee.clone();
                s.explicit_deserved = q.deserved.clone();
                s
            })
            .collect();
        for t in &state.tasks {
            let q = state.job_queue[t.job];
            let queue = &state.queues[q];
            // A queue that admits nothing (closed, or named by a job but not existing) asks
            // only for what it holds: its pending members must not take a share from queues
            // that can use it.
            let admits = queue.open && (queue.exists || &*queue.name == "default");
            if holds_node(t) || (admits && t.schedulable_pending()) {
                shares[q].request.add(&t.request);
            }
        }
        for (i, s) in shares.iter_mut().enumerate() {
            s.allocated = state.queue_allocated[i].clone();
        }
        for (j, job) in state.jobs.iter().enumerate() {
            if job.phase() == PodGroupPhase::Inqueue {
                if let Some(min) = &job.min_resources {
                    let rest = min.excess_over(&state.job_runs[j].allocated);
                    shares[state.job_queue[j]].inqueue.add(&rest);
                }
            }
        }
        adjust_for_usage(state, &mut shares);
        water_fill(&state.total, &mut shares);
        self.shares = shares;
    }

    fn queue_order(&self, state: &State, a: usize, b: usize) -> Ordering {
        let (qa, qb) = (&state.queues[a], &state.queues[b]);
        qb.priority.cmp(&qa.priority).then_with(|| {
            let share = |q: usize| {
                caldera_queue::share_of(&state.queue_allocated[q], &self.shares[q].deserved)
            };
            share(a).total_cmp(&share(b))
        })
    }

    fn overused(&self, state: &State, queue: usize) -> bool {
        let s = &self.shares[queue];
        let allocated = &state.queue_allocated[queue];
        // Reached its share on every dimension, and the share is a real limit on at least one
        // (the queue wants more there, and the cluster has more): a queue that deserves the whole cluster is never
        // "over quota", its members simply do not fit, and they must say Unschedulable so an
        // autoscaler can add nodes (SPEC §8).
        s.deserved.iter().all(|(n, v)| v <= allocated.get(n))
            && s.request.iter().any(|(n, want)| {
                let d = s.deserved.get(n);
                d < want && d < state.total.get(n)
            })
    }

    fn allocatable(&self, state: &State, queue: usize, task: &Task) -> Result<(), String> {
        if let Some(message) = unsupported_parent(state, queue) {
            return Err(message);
        }
        let s = &self.shares[queue];
        let allocated = &state.queue_allocated[queue];
        // An aged gang (fairshare's maxWait) not yet at its minimum may take its queue from
        // below its deserved share to past it, up to what the queue may ever have: a gang
        // larger than every queue's share (three queues' 32-GPU gangs on 64 GPUs deserve
        // 21-22 each) would otherwise never start (docs/queues.md). A queue already at its
        // share without the gang gets no more, so it never piles gang on gang, and the gang's
        // own GPUs are never reclaimable (taking it leaves its queue below its share).
        let run = &state.job_runs[task.job];
        let lifted = run.aged && run.ready < state.jobs[task.job].min_member;
        let (limit, what) = if lifted {
            (&s.real_capability, "capability")
        } else {
            (&s.deserved, "deserved share")
        };
        let over: Vec<&str> = task
            .request
            .iter()
            .filter(|(n, v)| {
                let deserved = s.deserved.get(n);
                if deserved >= state.total.get(n) {
                    return false;
                }
                if lifted && allocated.get(n) - run.allocated.get(n) >= deserved {
                    return true;
                }
                allocated.get(n).saturating_add(*v) > limit.get(n)
            })
            .map(|(n, _)| n)
            .collect();
        if over.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "queue {} would exceed its {what} {} on {}",
                s.name,
                limit,
                over.join(", ")
            ))
        }
    }

    fn enqueueable(&self, state: &State, job: usize) -> Verdict {
        let q = state.job_queue[job];
        let queue = &state.queues[q];
        if !queue.exists && queue.name.as_ref() != "default" {
            return Verdict::Reject {
                quota: true,
                message: format!("queue {} does not exist", queue.name),
            };
        }
        if !queue.open {
            return Verdict::Reject {
                quota: true,
                message: format!("queue {} is closed", queue.name),
            };
        }
        if let Some(message) = unsupported_parent(state, q) {
            return Verdict::Reject {
                quota: true,
                message,
            };
        }
        let Some(min) = &state.jobs[job].min_resources else {
            return Verdict::Permit;
        };
        let s = &self.shares[q];
        let want = min.plus(&state.queue_allocated[q]).plus(&s.inqueue);
        let over: Vec<&str> = min
            .iter()
            .filter(|(n, _)| want.get(n) > s.real_capability.get(n))
            .map(|(n, _)| n)
            .collect();
        if over.is_empty() {
            Verdict::Permit
        } else {
            Verdict::Reject {
                quota: true,
                message: format!(
                    "minResources {} do not fit queue {}'s capability {} (allocated {}, admitted {}) on {}",
                    min,
                    s.name,
                    s.real_capability,
                    state.queue_allocated[q],
                    s.inqueue,
                    over.join(", ")
                ),
            }
        }
    }

    fn on_enqueue(&mut self, state: &State, job: usize) {
        if let Some(min) = &state.jobs[job].min_resources {
            let q = state.job_queue[job];
            self.shares[q].inqueue.add(min);
        }
    }

    fn deserved(&self, queue: usize) -> Option<Resources> {
        self.shares.get(queue).map(|s| s.deserved.clone())
    }
}
