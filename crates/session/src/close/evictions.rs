//! The writes of the evictions decided in the session: consolidation moves and preemptions
//! (evictions, events, nominations, holds).

use super::*;

/// Evictions decided by consolidate, their `Consolidated` events (on each moved pod and, once,
/// on its PodGroup), and the holds to write on the PodGroups they made room for.
pub(super) fn consolidations(ssn: &Session, plan: &mut Plan) {
    let st = &ssn.state;
    for c in &ssn.decisions.consolidations {
        let job = &st.jobs[c.job];
        // Per moved job: its members a budget covers first (see `preemptions`).
        let mut moved = c.moved.clone();
        moved.sort_by_key(|&(t, _)| (st.tasks[t].job, st.tasks[t].budget.is_none(), t));
        let mut told: Vec<usize> = Vec::new();
        for &(t, to) in &moved {
            let task = &st.tasks[t];
            let Some(node) = task.node.clone() else {
                continue;
            };
            let to = &st.nodes[to].name;
            let moved_job = &st.jobs[task.job];
            plan.evictions.push(Eviction {
                pod: task.object_ref(),
                node: node.clone(),
                job: moved_job.id.clone(),
                preemptor: job.id.clone(),
                action: "consolidate",
                budgeted: task.budget.is_some(),
            });
            plan.events.push(Event {
                object: EventObject::Pod,
                namespace: task.namespace.clone(),
                name: task.name.clone(),
                uid: task.uid.clone(),
                warning: false,
                reason: "Consolidated".into(),
                message: format!(
                    "Moved off node {node} to make room for {}; its replacement is expected on node {to}, held for it",
                    job.id
                ),
            });
            if moved_job.has_podgroup() && !told.contains(&task.job) {
                told.push(task.job);
                let places: Vec<String> = moved
                    .iter()
                    .filter(|&&(x, _)| st.tasks[x].job == task.job)
                    .map(|&(x, n)| format!("{} → {}", st.tasks[x].name, st.nodes[n].name))
                    .collect();
                plan.events.push(Event {
                    object: podgroup_object(moved_job),
                    namespace: moved_job.namespace.clone(),
                    name: moved_job.name.clone(),
                    uid: moved_job.uid.clone(),
                    warning: false,
                    reason: "Consolidated".into(),
                    message: format!(
                        "{} member(s) moved to make room for {}; expected: {}",
                        places.len(),
                        job.id,
                        places.join(", ")
                    ),
                });
            }
        }
    }
    plan.move_holds = crate::consolidate::holds_to_write(ssn);
}

/// Evictions decided by preempt and reclaim, their `Preempted` events (on each victim pod
/// and, once, on its PodGroup), and the nominations to write.
pub(super) fn preemptions(ssn: &Session, plan: &mut Plan) {
    let st = &ssn.state;
    for p in &ssn.decisions.preemptions {
        let job = &st.jobs[p.job];
        let mut nodes: Vec<&str> = p
            .placement
            .iter()
            .map(|&(_, n)| &*st.nodes[n].name)
            .collect();
        nodes.sort_unstable();
        nodes.dedup();
        let by = match p.action {
            "reclaim" => format!("reclaimed for queue {} by {}", job.queue, job.id),
            _ => format!("preempted by {} (priority {})", job.id, job.priority),
        };
        // Each victim job's evictions stop at the first refused (the binder): members a
        // PodDisruptionBudget covers — the only ones the API server may refuse — go first, one
        // at a time, so a refusal leaves the gang whole; the rest then go together.
        let mut first_of: std::collections::HashMap<usize, usize> = Default::default();
        for (i, &v) in p.victims.iter().enumerate() {
            first_of.entry(st.tasks[v].job).or_insert(i);
        }
        let mut victims = p.victims.clone();
        victims.sort_by_key(|&v| (first_of.get(&st.tasks[v].job), st.tasks[v].budget.is_none()));
        let mut told: Vec<usize> = Vec::new();
        for &v in &victims {
            let t = &st.tasks[v];
            let Some(node) = t.node.clone() else { continue };
            let victim_job = &st.jobs[t.job];
            plan.evictions.push(Eviction {
                pod: t.object_ref(),
                node: node.clone(),
                job: victim_job.id.clone(),
                preemptor: job.id.clone(),
                action: p.action,
                budgeted: t.budget.is_some(),
            });
            plan.events.push(Event {
                object: EventObject::Pod,
                namespace: t.namespace.clone(),
                name: t.name.clone(),
                uid: t.uid.clone(),
                warning: false,
                reason: "Preempted".into(),
                message: format!(
                    "Evicted from node {node}: {by}, which will run on node(s) {}",
                    nodes.join(", ")
                ),
            });
            if victim_job.has_podgroup() && !told.contains(&t.job) {
                told.push(t.job);
                let count = p
                    .victims
                    .iter()
                    .filter(|&&x| st.tasks[x].job == t.job)
                    .count();
                plan.events.push(Event {
                    object: podgroup_object(victim_job),
                    namespace: victim_job.namespace.clone(),
                    name: victim_job.name.clone(),
                    uid: victim_job.uid.clone(),
                    warning: true,
                    reason: "Preempted".into(),
                    message: format!(
                        "{count} member(s) evicted: {by}, which will run on node(s) {}",
                        nodes.join(", ")
                    ),
                });
            }
        }
    }
    // A task nominated more than once in the session (its room lent to a job of higher
    // priority, then chosen again by preempt) ends where the last one says.
    let mut last: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
    for (i, (task, _)) in ssn.decisions.nominations.iter().enumerate() {
        last.insert(*task, i);
    }
    for (i, (task, node)) in ssn.decisions.nominations.iter().enumerate() {
        let t = &st.tasks[*task];
        if last.get(task) != Some(&i)
            || t.nominated.as_deref() == node.as_deref()
            || t.status != TaskStatus::Pending
        {
            continue;
        }
        plan.nominations.push(Nomination {
            pod: t.object_ref(),
            node: node.clone(),
        });
    }
}
