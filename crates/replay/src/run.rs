//! What a timeline replay records as it goes: per job (arrival, start, end, nodes,
//! preemptions), per member run (for fair share), allocated GPUs over time, and the
//! invariants it checks itself (no GPU over-allocated, no job started before it arrived, no
//! gang bound in part).

use crate::trace::JobSpec;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One job's outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobOutcome {
    /// Name as in the trace.
    pub name: String,
    /// Queue.
    pub queue: String,
    /// Members.
    pub members: u32,
    /// Gang minimum.
    pub min_members: u32,
    /// GPUs per member, thousandths.
    pub gpu_milli: u32,
    /// Arrival, ms from the start.
    pub submit_ms: i64,
    /// When its last member was bound, once at least the gang minimum were (its start), ms;
    /// `None` if never.
    pub start_ms: Option<i64>,
    /// When its last member finished, ms; `None` if it never ran to the end.
    pub end_ms: Option<i64>,
    /// Members bound at its start.
    pub members_bound: u32,
    /// Nodes its members ran on.
    pub nodes: BTreeSet<String>,
    /// Members evicted (preempted or reclaimed).
    pub preempted: u32,
    /// Why it was not replayed at all.
    pub refused: Option<String>,
    /// Its pending members were failed (gang timeout).
    pub failed: bool,
}

impl JobOutcome {
    /// The outcome of a job not yet arrived.
    pub fn of(j: &JobSpec) -> JobOutcome {
        JobOutcome {
            name: j.name.clone(),
            queue: j.queue.clone(),
            members: j.members,
            min_members: j.min_members,
            gpu_milli: j.gpu.milli(),
            submit_ms: j.submit_ms,
            ..JobOutcome::default()
        }
    }

    /// Arrival to start, ms.
    pub fn wait_ms(&self) -> Option<i64> {
        self.start_ms.map(|s| s - self.submit_ms)
    }
}

/// One member's current run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemberRun {
    /// Re-creations after evictions so far.
    pub attempt: u32,
    /// Its node while bound (and after it finished); `None` while pending or after eviction.
    pub node: Option<String>,
    /// When it was bound, ms.
    pub bound_ms: i64,
    /// It ran to its end.
    pub finished: bool,
}

/// GPUs a queue's member held over an interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage {
    /// The job (index in the trace).
    pub job: usize,
    /// The member ran to its end (not evicted, not cut by the end of the replay).
    pub finished: bool,
    /// Queue.
    pub queue: String,
    /// From, ms.
    pub start_ms: i64,
    /// To, ms.
    pub end_ms: i64,
    /// GPUs, thousandths.
    pub gpu_milli: u64,
}

/// A timeline replay's record.
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Every job, in trace order.
    pub jobs: Vec<JobOutcome>,
    /// The cluster's GPUs, thousandths.
    pub total_gpu_milli: u64,
    /// Queue weights (for fair share).
    pub queue_weights: BTreeMap<String, u32>,
    /// Allocated GPUs (thousandths) from each time (ms) on, a step function.
    pub allocation: Vec<(i64, u64)>,
    /// Member runs.
    pub usage: Vec<Usage>,
    /// Sessions run.
    pub sessions: u64,
    /// Members evicted.
    pub preemptions: u64,
    /// GPU-thousandths × ms of work lost to evictions.
    pub evicted_gpu_milli_ms: u128,
    /// Time gangs spent bound in part, summed over gangs, ms.
    pub partial_gang_ms: i64,
    /// Invariants broken (none expected).
    pub violations: Vec<String>,
    /// Free GPUs when the replay ended.
    pub unallocated_end_gpus: u64,
    /// Jobs that arrived (refused ones included).
    pub submitted: u64,
    /// The last time anything happened, ms.
    pub last_ms: i64,
    /// The replay was stopped at `last_ms` (`--until`) with work still running or waiting.
    pub cut: bool,
    open: HashMap<(usize, usize), (i64, String, u64)>,
    partial_since: HashMap<usize, i64>,
    allocated: u64,
}

impl Run {
    /// An empty record for a cluster of `total_gpu_milli` GPU thousandths and these queues.
    pub fn new(total_gpu_milli: u64, queue_weights: BTreeMap<String, u32>) -> Run {
        Run {
            total_gpu_milli,
            queue_weights,
            ..Run::default()
        }
    }

    /// The clock reached `t`.
    pub fn mark(&mut self, t: i64) {
        self.last_ms = self.last_ms.max(t);
    }

    /// Allocated GPUs changed by `delta` thousandths at `t`.
    pub fn allocated_change(&mut self, t: i64, delta: i64) {
        self.allocated = (self.allocated as i64 + delta).max(0) as u64;
        match self.allocation.last_mut() {
            Some((at, v)) if *at == t => *v = self.allocated,
            _ => self.allocation.push((t, self.allocated)),
        }
    }

    /// Member `m` of job `j` (queue `queue`, `gpu` thousandths) was bound at `t`.
    pub fn usage_start(&mut self, j: usize, m: usize, t: i64, queue: &str, gpu: u64) {
        self.open.insert((j, m), (t, queue.to_string(), gpu));
    }

    /// Member `m` of job `j` stopped holding its GPUs at `t`, having run to its end or not.
    pub fn usage_end(&mut self, j: usize, m: usize, t: i64, finished: bool) {
        if let Some((start, queue, gpu)) = self.open.remove(&(j, m)) {
            self.usage.push(Usage {
                job: j,
                finished,
                queue,
                start_ms: start,
                end_ms: t,
                gpu_milli: gpu,
            });
        }
    }

    /// Re-evaluates at `t` whether job `j` (with gang minimum `min`) is bound in part: some
    /// member holds a node while fewer than `min` have one (finished members count as placed).
    pub fn partial_check(&mut self, j: usize, t: i64, members: &[MemberRun], min: u32) {
        let placed = members.iter().filter(|m| m.node.is_some()).count() as u32;
        let holding = members
            .iter()
            .filter(|m| m.node.is_some() && !m.finished)
            .count();
        let partial = holding > 0 && placed < min;
        match (partial, self.partial_since.get(&j).copied()) {
            (true, None) => {
                self.partial_since.insert(j, t);
            }
            (false, Some(since)) => {
                self.partial_since.remove(&j);
                self.partial_gang_ms += t - since;
            }
            _ => {}
        }
    }

    /// Closes what is still open at the last time.
    pub fn finish(&mut self) {
        let t = self.last_ms;
        let open: Vec<(usize, usize)> = self.open.keys().copied().collect();
        for (j, m) in open {
            self.usage_end(j, m, t, false);
        }
        self.usage.sort_by(|a, b| {
            (a.start_ms, &a.queue, a.end_ms).cmp(&(b.start_ms, &b.queue, b.end_ms))
        });
        let since: Vec<i64> = self.partial_since.drain().map(|(_, s)| s).collect();
        for s in since {
            self.partial_gang_ms += t - s;
        }
    }
}
