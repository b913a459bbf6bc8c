//! GPU fragmentation as "Beware of Fragmentation" (USENIX ATC '23) defines it: measured
//! against the workload's typical tasks, the idle GPU capacity of a node that a task could
//! not use there counts as fragmented, weighted by how often the task occurs.
//!
//! Typical tasks: the task shapes (CPU, GPU share, GPU count, GPU models) of the trace, most
//! frequent first, until they cover 95% of its tasks, their frequencies renormalised to 1
//! (the public simulator's `podPopularityThreshold: 95`). For a node and a task: a CPU-only
//! task, or a node of a GPU model the task does not accept, leaves all the node's idle GPU
//! capacity fragmented; a task that does not fit (too few GPUs with enough room, or too little
//! CPU) too; a task that fits leaves fragmented only the GPUs with less room than it asks of
//! each. The cluster's fragmentation ratio is fragmented ÷ idle GPU capacity. Nodes keep the
//! room left on each GPU, so shares of a GPU count once GPU sharing exists.

use crate::trace::JobSpec;
use std::collections::BTreeMap;

/// A task shape.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// CPU, millicores.
    pub cpu_milli: i64,
    /// Thousandths of each GPU.
    pub gpu_milli: u32,
    /// GPUs.
    pub gpus: u32,
    /// Accepted GPU models (empty: any).
    pub models: Vec<String>,
}

/// The typical tasks and their frequencies (summing to 1).
#[derive(Debug, Clone, Default)]
pub struct Typical {
    /// (shape, frequency).
    pub shapes: Vec<(Shape, f64)>,
}

impl Typical {
    /// The typical tasks of `jobs` (each member counts once).
    pub fn of(jobs: &[JobSpec]) -> Typical {
        let mut counts: BTreeMap<Shape, u64> = BTreeMap::new();
        for j in jobs {
            let (gpus, gpu_milli) = match j.gpu.whole_gpus() {
                Some(0) => (0, 0),
                Some(n) => (n, 1000),
                None => (1, j.gpu.milli()),
            };
            let shape = Shape {
                cpu_milli: j.cpu_milli,
                gpu_milli,
                gpus,
                models: j.gpu_models.clone(),
            };
            *counts.entry(shape).or_default() += u64::from(j.members);
        }
        Typical {
            shapes: caldera_plugins::fgd::most_frequent(counts, 95),
        }
    }

    /// Fragmented GPU thousandths of `node`.
    pub fn node_frag(&self, node: &NodeRoom) -> f64 {
        let idle: u64 = node.gpu_left.iter().map(|&l| u64::from(l)).sum();
        if idle == 0 {
            return 0.0;
        }
        let mut frag = 0.0;
        for (shape, freq) in &self.shapes {
            let all = *freq * idle as f64;
            if shape.gpus == 0 {
                frag += all;
                continue;
            }
            let access = shape.models.is_empty()
                || node
                    .model
                    .as_ref()
                    .is_some_and(|m| shape.models.contains(m));
            if !access {
                frag += all;
                continue;
            }
            let roomy = node
                .gpu_left
                .iter()
                .filter(|&&l| l >= shape.gpu_milli)
                .count() as u32;
            if roomy >= shape.gpus && node.cpu_left >= shape.cpu_milli {
                let small: u64 = node
                    .gpu_left
                    .iter()
                    .filter(|&&l| l < shape.gpu_milli)
                    .map(|&l| u64::from(l))
                    .sum();
                frag += *freq * small as f64;
            } else {
                frag += all;
            }
        }
        frag
    }
}

/// What is left on a node: per GPU (thousandths), CPU, and its GPU model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRoom {
    /// Room left on each GPU, thousandths.
    pub gpu_left: Vec<u32>,
    /// CPU left, millicores.
    pub cpu_left: i64,
    /// GPU model.
    pub model: Option<String>,
}

impl NodeRoom {
    /// Takes `gpus` whole GPUs (the emptiest first) and `cpu` millicores.
    pub fn take_whole(&mut self, gpus: u32, cpu: i64) {
        let mut left = gpus;
        for l in self.gpu_left.iter_mut() {
            if left == 0 {
                break;
            }
            if *l == 1000 {
                *l = 0;
                left -= 1;
            }
        }
        self.cpu_left -= cpu;
    }

    /// Takes the given shares (GPU index, thousandths) and `cpu` millicores. `Err` names the
    /// first share that is more than its GPU has left, or a GPU the node does not have: the
    /// scheduler promised a GPU twice (nothing is taken then).
    pub fn take_shares(&mut self, shares: &[(usize, u32)], cpu: i64) -> Result<(), String> {
        let mut left = self.gpu_left.clone();
        for &(k, milli) in shares {
            match left.get_mut(k) {
                Some(l) if *l >= milli => *l -= milli,
                Some(l) => return Err(format!("gpu-{k} has {l} thousandths left, {milli} taken")),
                None => return Err(format!("gpu-{k} is not one of its {} GPUs", left.len())),
            }
        }
        self.gpu_left = left;
        self.cpu_left -= cpu;
        Ok(())
    }

    /// Idle GPU thousandths.
    pub fn idle(&self) -> u64 {
        self.gpu_left.iter().map(|&l| u64::from(l)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Gpu;

    #[test]
    fn a_node_too_small_for_the_typical_task_is_all_fragment() {
        let jobs = vec![JobSpec::new("a", 0, 0, 1, Gpu::whole(2))];
        let typical = Typical::of(&jobs);
        let mut node = NodeRoom {
            gpu_left: vec![1000; 8],
            cpu_left: 64_000,
            model: None,
        };
        assert_eq!(typical.node_frag(&node), 0.0);
        node.take_whole(7, 0);
        assert_eq!(typical.node_frag(&node), 1000.0);
    }

    #[test]
    fn a_share_past_what_a_gpu_has_left_is_an_error_and_takes_nothing() {
        let mut node = NodeRoom {
            gpu_left: vec![1000, 1000],
            cpu_left: 8000,
            model: None,
        };
        node.take_shares(&[(0, 600)], 1000).unwrap();
        let err = node.take_shares(&[(1, 500), (0, 600)], 1000).unwrap_err();
        assert_eq!(err, "gpu-0 has 400 thousandths left, 600 taken");
        assert_eq!(
            (node.gpu_left.clone(), node.cpu_left),
            (vec![400, 1000], 7000)
        );
        assert!(node.take_shares(&[(2, 1)], 0).is_err());
    }

    #[test]
    fn cpu_tasks_see_idle_gpus_as_fragment() {
        let mut jobs = vec![JobSpec::new("cpu", 0, 0, 1, Gpu::whole(0))];
        jobs.push(JobSpec::new("g", 0, 0, 1, Gpu::whole(1)));
        let typical = Typical::of(&jobs);
        let node = NodeRoom {
            gpu_left: vec![1000; 2],
            cpu_left: 1000,
            model: None,
        };
        assert_eq!(typical.node_frag(&node), 1000.0);
    }
}
