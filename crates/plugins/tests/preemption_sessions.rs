//! Preemption over many sessions, as on a live cluster: victims terminate in different
//! sessions (a kubelet removes each some sessions after its eviction), nominations and binds
//! are seen by the next session. Checks that a preemptor takes exactly the victims it needs
//! (no unit of the set could be spared, with the room held for other preemptors counted once
//! whether it is free, held or still being freed by terminating victims) and that its
//! members bind on the nodes they were nominated to.

use caldera_model::{Plan, Snapshot, TaskStatus, Time};
use caldera_plugins::scheduler;
use caldera_testkit::builders::{node, pod, podgroup, queue, Cluster};
use proptest::prelude::*;
use std::collections::BTreeMap;

const CONFIG: &str = r#"
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"#;

/// The cluster `kpreempt.py` builds, scaled: `nodes` nodes of 8 GPUs full of 8-pod low gangs
/// (1 GPU a pod), the first half one gang per node, the second half shifted by half a gang
/// so each gang there spans two nodes; `started[g]` is gang g's start time; then `high`
/// pending high-priority gangs of 8.
fn kpreempt(nodes: usize, high: usize, started: &[i64]) -> Snapshot {
    let gpus = 8usize;
    let size = 8usize;
    let mut c = Cluster::new().queue(queue("default"));
    for i in 0..nodes {
        c = c.node(node(&format!("km-{i:03}")).gpus(gpus as i64).cpu(64));
    }
    let h = nodes / 2;
    let low_node = |s: usize| {
        if s < h * gpus {
            s / gpus
        } else {
            let r = s - h * gpus;
            h + ((r + size / 2) % ((nodes - h) * gpus)) / gpus
        }
    };
    for g in 0..nodes * gpus / size {
        let name = format!("low-{g:04}");
        c = c.group(
            podgroup("ns", &name)
                .min_member(size as u32)
                .priority(100)
                .queue("default"),
        );
        for i in 0..size {
            c = c.pod(
                pod("ns", &format!("{name}-{i}"))
                    .group(&name)
                    .gpus(1)
                    .priority(100)
                    .on(&format!("km-{:03}", low_node(g * size + i)))
                    .running()
                    .created(started.get(g).copied().unwrap_or(0)),
            );
        }
    }
    for g in 0..high {
        let name = format!("high-{g:04}");
        c = c.group(
            podgroup("ns", &name)
                .min_member(size as u32)
                .priority(1000)
                .queue("default")
                .created(100),
        );
        for i in 0..size {
            c = c.pod(
                pod("ns", &format!("{name}-{i}"))
                    .group(&name)
                    .gpus(1)
                    .priority(1000)
                    .created(100),
            );
        }
    }
    c.snapshot()
}

/// What the sessions did.
#[derive(Debug, Default)]
struct Run {
    evicted: usize,
    /// Per preemptor pod: the node it was last nominated to, and where it bound.
    nominated: BTreeMap<String, String>,
    bound: BTreeMap<String, String>,
    /// Low gangs left with 0 < running < 8.
    partial: Vec<String>,
    /// Preemptor gangs bound while pods were still terminating on nodes they were nominated
    /// to: room elsewhere freed up first, and they took it (as kube-scheduler binds a pod
    /// elsewhere when its nominated node does not fit yet).
    early: Vec<String>,
    sessions: usize,
}

/// Takes task `t` off its node: its pod is gone.
fn remove(snap: &mut Snapshot, t: usize) {
    let task = &mut snap.tasks[t];
    let node = task.node.take();
    task.status = TaskStatus::Failed;
    let (req, ports) = (task.request.clone(), task.spec.host_ports.clone());
    if let Some(n) = node.and_then(|n| snap.nodes.iter().position(|x| x.name == n)) {
        snap.nodes[n].remove_pod(&req, &ports);
    }
}

/// Runs sessions until every pending pod is bound (or `limit` sessions): after each, the
/// plan is applied as the API server would, and a victim evicted in session s is removed by
/// its kubelet after `delay(victim)` sessions (at least 1). `finish`: a low gang whose pods
/// all end (its job done) after that session, unless evicted before.
fn sessions(
    mut snap: Snapshot,
    limit: usize,
    delay: &dyn Fn(&str) -> usize,
    finish: Option<(&str, usize)>,
) -> Run {
    let config = caldera_config::parse(CONFIG, None).expect("test config parses");
    let sched = scheduler(&config).expect("scheduler builds");
    let mut run = Run::default();
    // Victim task index → the session after which it is gone.
    let mut leaving: BTreeMap<usize, usize> = BTreeMap::new();
    for s in 0..limit {
        let plan: Plan = sched.run(&snap, Time::from_secs(1_000 + s as i64)).plan;
        for b in &plan.binds {
            // Pods still terminating on a node its members are nominated to.
            let waits = snap.tasks.iter().any(|t| {
                t.status == TaskStatus::Releasing
                    && t.node.as_deref().is_some_and(|n| {
                        run.nominated
                            .iter()
                            .any(|(p, at)| p.starts_with(&b.job["ns/".len()..]) && at == n)
                    })
            });
            if waits && !run.early.contains(&b.job.to_string()) {
                run.early.push(b.job.to_string());
            }
        }
        run.sessions = s + 1;
        let index: BTreeMap<String, usize> = snap
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.to_string(), i))
            .collect();
        snap.record(&plan);
        for b in &plan.binds {
            run.bound.insert(b.pod.name.to_string(), b.node.to_string());
        }
        for e in &plan.evictions {
            let t = index[&*e.pod.name];
            assert!(
                matches!(
                    snap.tasks[t].status,
                    TaskStatus::Bound | TaskStatus::Running
                ),
                "{} evicted twice",
                e.pod.name
            );
            snap.tasks[t].status = TaskStatus::Releasing;
            leaving.insert(t, s + delay(&e.pod.name).max(1));
            run.evicted += 1;
        }
        for n in &plan.nominations {
            let t = index[&*n.pod.name];
            snap.tasks[t].nominated = n.node.clone();
            match &n.node {
                Some(node) => {
                    run.nominated
                        .insert(n.pod.name.to_string(), node.to_string());
                }
                None => {
                    run.nominated.remove(&*n.pod.name);
                }
            }
        }
        // The kubelets: victims whose time has come are gone.
        let gone: Vec<usize> = leaving
            .iter()
            .filter(|&(_, &at)| at <= s)
            .map(|(&t, _)| t)
            .collect();
        for t in gone {
            leaving.remove(&t);
            remove(&mut snap, t);
        }
        if let Some((gang, _)) = finish.filter(|&(_, at)| at == s) {
            let done: Vec<usize> = (0..snap.tasks.len())
                .filter(|&t| {
                    let task = &snap.tasks[t];
                    task.name.starts_with(gang)
                        && matches!(task.status, TaskStatus::Bound | TaskStatus::Running)
                })
                .collect();
            for t in done {
                remove(&mut snap, t);
                // Not a victim, not partial: its job ended.
                snap.tasks[t].status = TaskStatus::Succeeded;
            }
        }
        let pending = snap
            .tasks
            .iter()
            .any(|t| t.status == TaskStatus::Pending && t.name.starts_with("high-"));
        if !pending && leaving.is_empty() {
            break;
        }
    }
    let mut live: BTreeMap<String, usize> = BTreeMap::new();
    for j in &snap.jobs {
        if j.name.starts_with("low-") {
            let n = j
                .tasks
                .iter()
                .filter(|&&t| {
                    matches!(
                        snap.tasks[t].status,
                        TaskStatus::Bound | TaskStatus::Running
                    )
                })
                .count();
            live.insert(j.name.to_string(), n);
        }
    }
    run.partial = live
        .into_iter()
        .filter(|&(_, n)| n > 0 && n < 8)
        .map(|(g, _)| g)
        .collect();
    run
}

/// Every preemptor bound, exactly the victims needed (at most, when a gang ended on its
/// own and freed room), none left partial, every member bound where it was nominated unless
/// its gang bound elsewhere while its nominated nodes were still being freed.
fn check(run: &Run, high: usize, finished: bool) -> Result<(), TestCaseError> {
    prop_assert_eq!(
        run.bound.len(),
        high * 8,
        "every preemptor bound: {:?}",
        run
    );
    if finished {
        prop_assert!(
            run.evicted <= high * 8,
            "more victims than needed: {}",
            run.evicted
        );
    } else {
        prop_assert_eq!(run.evicted, high * 8, "exactly the victims needed");
    }
    prop_assert!(
        run.partial.is_empty(),
        "partial victim gangs: {:?}",
        run.partial
    );
    let off: Vec<_> = run
        .bound
        .iter()
        .filter(|(p, n)| run.nominated.get(*p) != Some(*n))
        .filter(|(p, _)| {
            !run.early
                .iter()
                .any(|g| g["ns/".len()..] == p[..p.len() - 2])
        })
        .collect();
    prop_assert!(off.is_empty(), "bound off their nomination: {:?}", off);
    Ok(())
}

#[test]
fn kpreempt_small_everything_terminates_together() {
    let started: Vec<i64> = (0..20).map(|g| g as i64).collect();
    let run = sessions(kpreempt(20, 5, &started), 30, &|_| 1, None);
    check(&run, 5, false).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn preemptors_take_exactly_enough_and_bind_where_nominated(
        half in 2usize..8,
        high in 1usize..8,
        started in prop::collection::vec(0i64..4, 32),
        delays in prop::collection::vec(1usize..5, 32),
        finish in prop::option::of((0usize..16, 0usize..4)),
    ) {
        let nodes = half * 2;
        let high = high.min(nodes - 1);
        let finish = finish.map(|(g, at)| (format!("low-{:04}-", g % nodes), at));
        let run = sessions(
            kpreempt(nodes, high, &started),
            40,
            &|victim| {
                let g: usize = victim[4..8].parse().unwrap_or(0);
                delays[g % delays.len()]
            },
            finish.as_ref().map(|(g, at)| (g.as_str(), *at)),
        );
        check(&run, high, finish.is_some())?;
    }
}
