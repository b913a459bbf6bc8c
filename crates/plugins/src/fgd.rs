//! fgd: Fragmentation Gradient Descent ("Beware of Fragmentation", Weng et al., USENIX ATC '23)
//! as a node-order plugin: a member asking for GPUs (shares of shared DRA devices, or whole
//! devices) goes to the node where placing it grows the GPU fragmentation least, measured
//! against the workload the session sees, and takes the GPUs within the node that keep the most
//! of them whole.
//!
//! **The workload** is learnt at every session from the pods it sees (pending and placed): each
//! pod's shape (CPU request; devices of one class and the share of each, as
//! [`caldera_session::devices::Devices::share_ask`] reads its claim), the most frequent shapes
//! until they cover `fgd.workloadCoverage` percent of the pods (default 95, as the paper's
//! simulator), their frequencies renormalised to 1.
//!
//! **Fragmentation of a node** against the workload: for each typical shape, weighted by its
//! frequency, the node's idle GPU capacity that the shape could not use there: all of it when
//! the shape asks no GPU, or does not fit (too few devices with room enough for its share, or
//! too little CPU left); otherwise the room of the devices with less room than its share.
//!
//! **Score**: `fgd.weight` × (100 − Δ ÷ 100), Δ the growth of the node's fragmentation in
//! thousandths of a GPU when the member is placed there (one GPU of growth costs 10 points;
//! clamped at 0), so a node that a placement leaves less fragmented scores above 100. Binpack
//! and spread stay selectable beside it; with equal weights, fgd's range dominates and theirs
//! breaks ties. Members without a device claim are scored by the CPU they take (a node left
//! with too little CPU for the typical GPU shapes fragments its idle GPUs).
//!
//! **Within the node**: a share goes to the device with the least room that still serves it
//! (the session's allocator is told to try devices fullest first, [`Devices::pack_shares`]),
//! which is the choice the score assumes; whole devices go to devices nothing holds.
//!
//! Not seen by the plugin: GPUs a device plugin publishes as `nvidia.com/gpu` (only DRA devices
//! have per-device rooms), and GPU models (a shape that some nodes' model excludes is measured
//! as if every node could take it).
//!
//! [`Devices::pack_shares`]: caldera_session::devices::Devices::pack_shares

use caldera_config::PluginOption;
use caldera_model::{Node, Task, TaskStatus};
use caldera_session::plugin::Plugin;
use caldera_session::state::State;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A typical pod's shape.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Shape {
    /// CPU, millicores.
    pub cpu_milli: i64,
    /// Devices (0: a pod asking no GPU).
    pub count: u32,
    /// Thousandths of each device.
    pub milli: u32,
}

/// The typical shapes and their frequencies (summing to 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Workload {
    /// (shape, frequency), most frequent first.
    pub shapes: Vec<(Shape, f64)>,
}

impl Workload {
    /// The most frequent of `shapes` (each seen once per item) until they cover `coverage`
    /// percent of them, renormalised.
    pub fn learn(shapes: impl IntoIterator<Item = Shape>, coverage: u32) -> Workload {
        let mut counts: BTreeMap<Shape, u64> = BTreeMap::new();
        for s in shapes {
            *counts.entry(s).or_default() += 1;
        }
        Workload {
            shapes: most_frequent(counts, coverage),
        }
    }

    /// Fragmented thousandths of a GPU of a node with `rooms` (thousandths free per device)
    /// and `cpu_left` millicores.
    pub fn fragmentation(&self, rooms: &[u32], cpu_left: i64) -> f64 {
        let idle: u64 = rooms.iter().map(|&r| u64::from(r)).sum();
        if idle == 0 {
            return 0.0;
        }
        let mut frag = 0.0;
        for (shape, freq) in &self.shapes {
            let all = freq * idle as f64;
            if shape.count == 0 || cpu_left < shape.cpu_milli {
                frag += all;
                continue;
            }
            let roomy = rooms.iter().filter(|&&r| r >= shape.milli).count();
            if roomy < shape.count as usize {
                frag += all;
                continue;
            }
            let small: u64 = rooms
                .iter()
                .filter(|&&r| r < shape.milli)
                .map(|&r| u64::from(r))
                .sum();
            frag += freq * small as f64;
        }
        frag
    }
}

/// The paper's typical tasks: of the shapes counted in `counts`, the most frequent (ties in
/// the shapes' order) until they cover `coverage` percent of all counted, with their
/// frequencies renormalised to 1 (the public simulator's `podPopularityThreshold`). The
/// replay's fragmentation measure (`caldera_replay::frag`) ranks its shapes with this too.
pub fn most_frequent<S: Ord>(counts: BTreeMap<S, u64>, coverage: u32) -> Vec<(S, f64)> {
    let total: u64 = counts.values().sum();
    let mut ranked: Vec<(S, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut out = Vec::new();
    let mut covered = 0u64;
    for (shape, n) in ranked {
        if covered * 100 >= total * u64::from(coverage) {
            break;
        }
        covered += n;
        out.push((shape, n as f64));
    }
    let sum: f64 = out.iter().map(|(_, n)| n).sum();
    for s in &mut out {
        s.1 /= sum.max(1.0);
    }
    out
}

/// Takes `count` devices of `milli` each from `rooms` as the allocator packing shares does:
/// each from the device with the least room that serves it. `false` if they do not fit.
pub fn take(rooms: &mut [u32], count: u32, milli: u32) -> bool {
    for _ in 0..count {
        let best = rooms
            .iter()
            .enumerate()
            .filter(|(_, &r)| r >= milli && r > 0)
            .min_by_key(|(i, &r)| (r, *i))
            .map(|(i, _)| i);
        match best {
            Some(i) => rooms[i] -= milli.min(rooms[i]),
            None => return false,
        }
    }
    true
}

/// The fgd plugin.
#[derive(Debug)]
pub struct Fgd {
    weight: f64,
    coverage: u32,
    workload: Workload,
    /// The device class the workload's shapes ask for (the most frequent one).
    class: Option<Arc<str>>,
}

/// Builds the plugin from `fgd.weight` (default 1) and `fgd.workloadCoverage` (percent of
/// the pods seen the typical shapes cover, 1..=100, default 95).
pub fn build(option: &PluginOption) -> Result<Box<dyn Plugin>, String> {
    let coverage = crate::weight(option, "fgd.workloadCoverage", 95)?;
    if !(1.0..=100.0).contains(&coverage) {
        return Err(format!(
            "argument \"fgd.workloadCoverage\" must be a percent in 1..=100, not {coverage}"
        ));
    }
    Ok(Box::new(Fgd {
        weight: crate::weight(option, "fgd.weight", 1)?,
        coverage: coverage as u32,
        workload: Workload::default(),
        class: None,
    }))
}

impl Fgd {
    /// The shape `task` asks for, with its device class; `None` for a claim fgd cannot read.
    fn shape(state: &State, task: &Task) -> Option<(Shape, Option<Arc<str>>)> {
        let cpu_milli = task.request.cpu;
        match state.trackers.devices.share_ask(task) {
            Some(ask) => Some((
                Shape {
                    cpu_milli,
                    count: ask.count,
                    milli: ask.milli,
                },
                Some(ask.class),
            )),
            None if task.claims.as_ref().is_none_or(|c| c.is_empty()) => Some((
                Shape {
                    cpu_milli,
                    count: 0,
                    milli: 0,
                },
                None,
            )),
            None => None,
        }
    }
}

impl Plugin for Fgd {
    fn name(&self) -> &'static str {
        "fgd"
    }

    fn on_open(&mut self, state: &State) {
        if self.weight <= 0.0 {
            return;
        }
        let mut classes: BTreeMap<Arc<str>, u64> = BTreeMap::new();
        let mut shapes = Vec::new();
        for t in &state.tasks {
            if matches!(t.status, TaskStatus::Succeeded | TaskStatus::Failed) {
                continue;
            }
            if let Some((shape, class)) = Self::shape(state, t) {
                if let Some(c) = class {
                    *classes.entry(c).or_default() += 1;
                }
                shapes.push(shape);
            }
        }
        self.class = classes
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map(|(c, _)| c);
        if self.class.is_some() {
            self.workload = Workload::learn(shapes, self.coverage);
            state.trackers.devices.pack_shares();
        }
    }

    fn scores_nodes(&self) -> bool {
        self.weight > 0.0
    }

    fn score(&self, state: &State, task: &Task, node: &Node) -> f64 {
        let Some(default_class) = &self.class else {
            return 0.0;
        };
        let Some((shape, class)) = Self::shape(state, task) else {
            return 0.0;
        };
        let class = class.as_ref().unwrap_or(default_class);
        let mut rooms = state.trackers.devices.rooms(node, class);
        if rooms.is_empty() {
            return 0.0;
        }
        let cpu_left = node.allocatable.cpu - node.used.cpu;
        let before = self.workload.fragmentation(&rooms, cpu_left);
        if !take(&mut rooms, shape.count, shape.milli) {
            return 0.0;
        }
        let after = self
            .workload
            .fragmentation(&rooms, cpu_left - shape.cpu_milli);
        self.weight * (100.0 - (after - before) / 100.0).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(cpu: i64, count: u32, milli: u32) -> Shape {
        Shape {
            cpu_milli: cpu,
            count,
            milli,
        }
    }

    #[test]
    fn coverage_keeps_the_most_frequent_shapes() {
        let mut seen = vec![shape(1000, 1, 1000); 90];
        seen.extend(vec![shape(1000, 1, 500); 8]);
        seen.extend(vec![shape(2000, 2, 1000); 2]);
        let w = Workload::learn(seen, 95);
        assert_eq!(w.shapes.len(), 2);
        assert!((w.shapes[0].1 - 90.0 / 98.0).abs() < 1e-9);
    }

    #[test]
    fn idle_gpus_a_typical_task_cannot_use_are_fragmented() {
        let w = Workload::learn(vec![shape(0, 1, 500)], 100);
        // 0.3 left on one GPU, a whole GPU on the other: only the 0.3 is fragment.
        assert_eq!(w.fragmentation(&[300, 1000], 64_000), 300.0);
        // Without CPU left for the task, all idle GPU capacity is fragment.
        let w = Workload::learn(vec![shape(8000, 1, 500)], 100);
        assert_eq!(w.fragmentation(&[300, 1000], 4000), 1300.0);
    }

    #[test]
    fn a_share_goes_to_the_fullest_gpu_that_serves_it() {
        let mut rooms = [1000, 400, 600];
        assert!(take(&mut rooms, 1, 500));
        assert_eq!(rooms, [1000, 400, 100]);
        assert!(take(&mut rooms, 1, 1000));
        assert_eq!(rooms, [0, 400, 100]);
        assert!(!take(&mut rooms, 1, 1000));
    }

    #[test]
    fn growth_of_fragmentation_orders_nodes() {
        // Typical: half-GPU shares. Placing 0.5 on a GPU with 0.5 left closes it (no growth);
        // on a whole GPU it leaves 0.5 usable (no growth either); placing 0.7 on a whole GPU
        // leaves 0.3 that no typical task can use.
        let w = Workload::learn(vec![shape(0, 1, 500)], 100);
        let growth = |rooms: &[u32], milli: u32| {
            let mut after = rooms.to_vec();
            assert!(take(&mut after, 1, milli));
            w.fragmentation(&after, 0) - w.fragmentation(rooms, 0)
        };
        assert_eq!(growth(&[500], 500), 0.0);
        assert_eq!(growth(&[1000], 700), 300.0);
        assert!(growth(&[700], 700) < growth(&[1000], 700));
    }
}
