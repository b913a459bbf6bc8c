//! `explain`: why a gang is (or is not) placed, node by node.

use crate::plugin::Verdict;
use crate::session::Session;
use crate::state::Holdup;
use crate::Scheduler;
use caldera_model::{Resources, Snapshot, Time};
use std::fmt;

/// How one node looks to one kind of member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLine {
    /// Node name.
    pub node: String,
    /// How many such members fit on it now (0 when a filter rejects it).
    pub fit: u32,
    /// The filter that rejects it, or what runs out first.
    pub reason: Option<String>,
}

/// Members that ask for the same thing, and where they could go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindReport {
    /// What each asks for.
    pub request: Resources,
    /// Pending members of this kind.
    pub pending: usize,
    /// Every node, best first.
    pub nodes: Vec<NodeLine>,
}

/// The explanation of one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// `namespace/name`.
    pub job: String,
    /// Queue.
    pub queue: String,
    /// minMember.
    pub min_member: u32,
    /// Members in all.
    pub members: usize,
    /// Members already counting toward the gang.
    pub ready_before: u32,
    /// Members placed by this session.
    pub placed: usize,
    /// Enqueue's verdict (None if the job was already admitted).
    pub enqueue: Option<String>,
    /// Queue share line: deserved, allocated, overused.
    pub queue_line: Option<String>,
    /// With hierarchical queues: the job's queue and its ancestors, root first, each with its
    /// deserved share, allocation (its whole subtree) and share.
    pub queue_path: Vec<String>,
    /// Why the session held it, if it did.
    pub held: Option<String>,
    /// Per kind of member.
    pub kinds: Vec<KindReport>,
    /// Victims this session evicts for the job (preempt or reclaim): why these, then each
    /// victim pod and its node.
    pub victims: Option<(String, Vec<String>)>,
    /// Pods `consolidate` moves for the job this session: why these, then each moved pod, its
    /// node and the node held for its replacement; and the holds it keeps from earlier moves.
    pub consolidation: Option<(String, Vec<String>)>,
    /// Why `consolidate` never moves the job's running pods (shown while it has some).
    pub never_moved: Option<String>,
    /// Nodes where room is held for the job while its victims terminate.
    pub held_on: Vec<String>,
    /// Aged by fairshare's `maxWait`: since when it waits, and the room held for it (see
    /// [`crate::aging`]).
    pub aged: Option<String>,
    /// With `fairshare`: the queue's decayed usage, the tenant's (with `tenantKey`), and the
    /// job's place among its queue's waiting jobs in job order (priority, aging, tenant usage,
    /// creation time).
    pub fairness: Option<String>,
    /// Its topology rule, and the domain this session placed it in.
    pub topology: Option<String>,
    /// Per sub-group (`subGroupPolicy`): its size and rule, and where this session placed it
    /// or why it found no domain.
    pub sub_groups: Vec<String>,
    /// Volume binding: each member that keeps its node until its claims are bound, with what
    /// is written for each claim; or why the wait for volumes ended.
    pub volumes: Vec<String>,
    /// DRA: each member's claims, allocated (where, which devices, by whom) or not.
    pub claims: Vec<String>,
    /// For a job whose members ask through claims: each shared device
    /// (`allowMultipleAllocations`) of the nodes in the node-by-node view, with the fraction
    /// its shares hold before this session (`node-a/gpu-0 [###.....] 0.35 (2 claims)`).
    pub shared_gpus: Vec<String>,
}

/// With `fairshare`, what fairness over time says of job `ji` at session open: its queue's
/// decayed usage (the share of the cluster it adjusts by), its tenant's, and its place among
/// the queue's jobs still waiting, in the session's job order.
fn fairness_line(ssn: &Session, ji: usize) -> Option<String> {
    let st = &ssn.state;
    let fair = st.fair.as_ref()?;
    let q = st.job_queue[ji];
    let mut line = format!(
        "queue {} has used {:.3} of the cluster (decayed, half-life {})",
        st.queues[q].name,
        crate::fair::queue_usage(st, fair, q),
        crate::aging::duration(fair.half_life_ms)
    );
    if let Some(tenants) = &st.tenants {
        let usage = crate::fair::tenant_usage(st, fair, tenants);
        let t = tenants.of(ji);
        line.push_str(&format!(
            "; tenant {} {:.3}",
            tenants.names[t].1,
            usage.get(t).copied().unwrap_or(0.0)
        ));
    }
    // With tenants, a placement adds to its tenant's usage, so the order between tenants
    // changes within a session; within one tenant it does not: the place is counted there.
    let tenant = st.tenants.as_ref().map(|t| (t.clone(), t.of(ji)));
    let waiting = |j: usize| {
        st.job_queue[j] == q
            && tenant.as_ref().is_none_or(|(t, own)| t.of(j) == *own)
            && st.pending_tasks(j).next().is_some()
            && !ssn.job_ready(j)
    };
    if waiting(ji) {
        let mut jobs: Vec<usize> = (0..st.jobs.len()).filter(|&j| waiting(j)).collect();
        jobs.sort_by(|&a, &b| ssn.job_order(a, b));
        let at = jobs.iter().position(|&j| j == ji).unwrap_or(0);
        let whose = if tenant.is_some() {
            "of its tenant in its queue, in job order (between tenants, the lower usage first)"
        } else {
            "in its queue, in job order"
        };
        line.push_str(&format!(
            "; {} of {} waiting jobs {whose}",
            at + 1,
            jobs.len()
        ));
    }
    Some(line)
}

impl Scheduler {
    /// Explains `job_id` (`namespace/name`) on `snapshot` at `now`: the session's outcome for
    /// it, the enqueue and queue limits, and node by node how many of its pending members fit.
    /// `None` if no such job exists.
    pub fn explain(&self, snapshot: &Snapshot, now: Time, job_id: &str) -> Option<Explanation> {
        let ji = snapshot.jobs.iter().position(|j| &*j.id == job_id)?;
        // The full session, to report what really happens.
        let mut ssn = self.open(snapshot, now);
        for a in &self.actions {
            a.execute(&mut ssn);
        }
        let placed = ssn
            .decisions
            .committed
            .iter()
            .chain(&ssn.decisions.volume_waits)
            .filter(|&&(t, _)| ssn.state.tasks[t].job == ji)
            .count();
        let held = ssn.state.job_runs[ji].holdup.as_ref().map(|h| match h {
            Holdup::NotAdmitted { message, .. } => format!("not admitted by enqueue: {message}"),
            Holdup::Quota(m) => format!("queue limit: {m}"),
            Holdup::Fit(m) => format!("no room: {m}"),
        });
        let invalid = ssn.state.job_runs[ji].invalid.clone();
        let victims = ssn
            .decisions
            .preemptions
            .iter()
            .find(|p| p.job == ji)
            .map(|p| {
                let pods = p
                    .victims
                    .iter()
                    .map(|&v| {
                        let t = &ssn.state.tasks[v];
                        format!(
                            "{} on {} (PodGroup {}, priority {})",
                            t.key(),
                            t.node.as_deref().unwrap_or("?"),
                            ssn.state.jobs[t.job].id,
                            t.priority
                        )
                    })
                    .collect();
                (p.why.clone(), pods)
            });
        let mut moves: Vec<String> = Vec::new();
        let mut why_moved = None;
        if let Some(c) = ssn.decisions.consolidations.iter().find(|c| c.job == ji) {
            why_moved = Some(c.why.clone());
            for &(t, n) in &c.moved {
                let task = &ssn.state.tasks[t];
                moves.push(format!(
                    "move {} off {} (PodGroup {}, priority {}); replacement held on {}",
                    task.key(),
                    task.node.as_deref().unwrap_or("?"),
                    ssn.state.jobs[task.job].id,
                    task.priority,
                    ssn.state.nodes[n].name
                ));
            }
        }
        for h in ssn.decisions.move_holds[ji]
            .iter()
            .filter(|h| h.hold.since < now)
        {
            moves.push(format!(
                "held from an earlier move: {} for the replacement of {} until {}",
                h.hold.node,
                h.hold.pod,
                h.hold.until.to_rfc3339()
            ));
        }
        let consolidation = match (why_moved, moves.is_empty()) {
            (Some(why), _) => Some((why, moves)),
            (None, false) => Some((
                "consolidate holds room for pods it moved".to_string(),
                moves,
            )),
            (None, true) => None,
        };
        let never_moved = ssn.state.jobs[ji]
            .tasks
            .iter()
            .any(|&t| {
                matches!(
                    ssn.state.tasks[t].status,
                    caldera_model::TaskStatus::Bound | caldera_model::TaskStatus::Running
                )
            })
            .then(|| crate::consolidate::never_moved(&ssn, ji))
            .flatten();
        let mut held_on: Vec<String> = ssn
            .reservations
            .of_job(ji)
            .iter()
            .map(|r| ssn.state.nodes[r.node].name.to_string())
            .collect();
        held_on.sort();
        held_on.dedup();
        let aged = crate::aging::describe(&ssn, ji);
        let volumes = volume_lines(&ssn, ji);
        let claims: Vec<String> = ssn.state.jobs[ji]
            .tasks
            .iter()
            .flat_map(|&t| ssn.state.trackers.devices.describe(t, &ssn.state.tasks[t]))
            .collect();
        let topology = snapshot.jobs[ji].topology.as_ref().map(|rule| {
            let mode = if rule.required { "hard" } else { "soft" };
            let limit = match (&rule.highest, rule.required) {
                (_, false) => String::new(),
                (caldera_model::TierLimit::Tier(t), true) => format!(" up to tier {t}"),
                (caldera_model::TierLimit::Name(n), true) => format!(" up to tier {n:?}"),
                (caldera_model::TierLimit::Unset, true) => " with no tier given".to_string(),
            };
            let domain = match &ssn.state.job_runs[ji].domain {
                Some(d) => format!("; placed in {d}"),
                None if placed > 0 => "; placed across domains".to_string(),
                None => String::new(),
            };
            format!("{mode}{limit} over {} domains{domain}", rule.source_name())
        });

        let sub_groups = sub_group_lines(&ssn, ji);

        // A fresh session for the node-by-node view, as the cluster is before any placement,
        // with the room held for the job and lent to it (that of jobs of lower priority)
        // released, as allocate tries it.
        let mut fresh = self.open(snapshot, now);
        let _lent = crate::reserve::release(&mut fresh, ji);
        let enqueue = if fresh.state.job_runs[ji].admitted {
            None
        } else {
            Some(match fresh.enqueueable(ji) {
                Verdict::Reject { message, .. } => format!("rejected: {message}"),
                _ => "admitted".to_string(),
            })
        };
        let q = fresh.state.job_queue[ji];
        let queue_line = fresh
            .slots
            .iter()
            .find_map(|s| s.plugin.deserved(q))
            .map(|d| {
                format!(
                    "deserved {d}, allocated {}, overused {}",
                    fresh.state.queue_allocated[q],
                    fresh.overused(q)
                )
            });
        let queue_path = queue_path(&fresh, q);
        let fairness = fairness_line(&fresh, ji);
        let kinds = kinds(&fresh, ji);
        let shared_gpus = shared_gpu_lines(&fresh, ji, &kinds);
        let job = &snapshot.jobs[ji];
        Some(Explanation {
            job: job.id.to_string(),
            queue: job.queue.to_string(),
            min_member: job.min_member,
            members: job.tasks.len(),
            ready_before: fresh.state.ready_count(ji),
            placed,
            enqueue,
            queue_line,
            queue_path,
            held: invalid.map(|m| format!("not enough members: {m}")).or(held),
            kinds,
            victims,
            consolidation,
            never_moved,
            held_on,
            aged,
            fairness,
            volumes,
            claims,
            shared_gpus,
            topology,
            sub_groups,
        })
    }
}

/// Per sub-group of job `ji`: its members, size and rule, and what the session did with it.
fn sub_group_lines(ssn: &Session, ji: usize) -> Vec<String> {
    let st = &ssn.state;
    let policies = &st.jobs[ji].sub_group_policies;
    st.sub_groups[ji]
        .iter()
        .map(|g| {
            let p = &policies[g.policy as usize];
            let rule = match &p.topology {
                Some(r) if r.required => match &r.highest {
                    caldera_model::TierLimit::Tier(t) => format!("hard up to tier {t}"),
                    caldera_model::TierLimit::Name(n) => format!("hard up to tier {n:?}"),
                    caldera_model::TierLimit::Unset => "hard with no tier given".to_string(),
                },
                Some(_) => "soft".to_string(),
                None => "no networkTopology".to_string(),
            };
            let bound = g
                .tasks
                .iter()
                .filter(|&&t| st.tasks[t].status.is_ready())
                .count();
            let min = if p.min > 0 {
                format!(", minSubGroups {}", p.min)
            } else {
                String::new()
            };
            let outcome = match st.job_runs[ji].sub_groups.get(&g.name) {
                Some(o) => format!(": {o}"),
                None => String::new(),
            };
            format!(
                "{} ({} members, {bound} placed or running; subGroupSize {}{min}, {rule}){outcome}",
                g.name,
                g.tasks.len(),
                p.size
            )
        })
        .collect()
}

/// What volume binding does for job `ji` in the session: per waiting member, its node and each
/// claim's state; and why a wait ended.
fn volume_lines(ssn: &Session, ji: usize) -> Vec<String> {
    use crate::volumes::Choice;
    let st = &ssn.state;
    let mut out = Vec::new();
    for &(t, node) in ssn
        .decisions
        .volume_waits
        .iter()
        .filter(|(t, _)| st.tasks[*t].job == ji)
    {
        let task = &st.tasks[t];
        let node = &st.nodes[node].name;
        let mut claims = Vec::new();
        if let (Some(choices), Some(v)) = (st.trackers.volumes.chosen(t), task.volumes.as_ref()) {
            for (c, (name, _)) in choices.iter().zip(&v.claims) {
                let what = match *c {
                    Choice::Static(pv) => {
                        format!(
                            "volume {} pre-bound to it",
                            st.trackers.volumes.volume(pv).name
                        )
                    }
                    Choice::Provision => format!("to be provisioned for {node}"),
                    Choice::Selected => format!("provisioning for {node} (selected before)"),
                    Choice::Prebound => "its pre-bound volume is being bound".to_string(),
                };
                claims.push(format!("claim {name}: {what}"));
            }
        }
        if claims.is_empty() {
            claims.push("claims bound; waits for the rest of the gang".into());
        }
        out.push(format!(
            "{} keeps {node}: {}",
            task.key(),
            claims.join("; ")
        ));
    }
    for (j, why) in &ssn.decisions.volume_releases {
        if *j == ji && !out.iter().any(|l| l == why) {
            out.push(why.clone());
        }
    }
    out
}

fn kinds(ssn: &Session, ji: usize) -> Vec<KindReport> {
    let mut reps: Vec<(usize, usize)> = Vec::new(); // (representative task, count)
    for t in ssn.state.pending_tasks(ji) {
        let task = &ssn.state.tasks[t];
        match reps.iter_mut().find(|(r, _)| {
            let r = &ssn.state.tasks[*r];
            r.request == task.request && r.spec == task.spec
        }) {
            Some((_, n)) => *n += 1,
            None => reps.push((t, 1)),
        }
    }
    reps.into_iter()
        .map(|(rep, pending)| {
            let task = &ssn.state.tasks[rep];
            let mut nodes: Vec<NodeLine> = ssn
                .state
                .nodes
                .iter()
                .enumerate()
                .map(|(i, _)| {
                    let (fit, reason) = ssn.how_many_fit(rep, i);
                    NodeLine {
                        node: ssn.state.nodes[i].name.to_string(),
                        fit,
                        reason,
                    }
                })
                .collect();
            nodes.sort_by(|a, b| b.fit.cmp(&a.fit).then_with(|| a.node.cmp(&b.node)));
            KindReport {
                request: task.request.clone(),
                pending,
                nodes,
            }
        })
        .collect()
}

/// Root first down to queue `q`, one line per queue (indented by depth): deserved,
/// allocated over its subtree, share. Empty when `q` hangs directly under a virtual root
/// (flat queues) and is not in a tree at all; a queue out of the tree says why.
fn queue_path(ssn: &Session, q: usize) -> Vec<String> {
    let st = &ssn.state;
    if let Some(problem) = st.tree.problem(q) {
        return vec![format!(
            "{}: not in the queue tree: {problem}",
            st.queues[q].name
        )];
    }
    let path = st.tree.path(q);
    if path.len() <= 2 && st.tree.virtual_root() && st.tree.is_leaf(q) {
        return Vec::new();
    }
    path.iter()
        .map(|&x| {
            let indent = "  ".repeat(st.tree.depth(x));
            let name = st.tree.name(x);
            match ssn.deserved(x) {
                Some(d) => format!(
                    "{indent}{name}: deserved {d}, allocated {}, share {:.2}",
                    st.tree_allocated[x],
                    caldera_queue::capacity::share(&st.tree_allocated[x], &d)
                ),
                None => format!("{indent}{name}: allocated {}", st.tree_allocated[x]),
            }
        })
        .collect()
}

/// Nodes whose shared GPUs [`Explanation::shared_gpus`] draws, at most.
const SHARED_GPU_NODES: usize = 16;

/// [`Explanation::shared_gpus`]: the nodes of the node-by-node view in its order (best
/// first), each once, the first [`SHARED_GPU_NODES`] of those with shared devices.
fn shared_gpu_lines(ssn: &Session, ji: usize, kinds: &[KindReport]) -> Vec<String> {
    let st = &ssn.state;
    if !st.jobs[ji]
        .tasks
        .iter()
        .any(|&t| st.tasks[t].claims.is_some())
    {
        return Vec::new();
    }
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let (mut drawn, mut more) = (0, 0);
    for line in kinds.iter().flat_map(|k| &k.nodes) {
        if !seen.insert(line.node.as_str()) {
            continue;
        }
        let Some(n) = st.node_index(&line.node) else {
            continue;
        };
        let shared = st.trackers.devices.shared_usage(&st.nodes[n]);
        if shared.is_empty() {
            continue;
        }
        if drawn == SHARED_GPU_NODES {
            more += 1;
            continue;
        }
        drawn += 1;
        for d in shared {
            out.push(format!(
                "{}/{} {} {}",
                line.node,
                d.device,
                d.bar(),
                d.summary()
            ));
        }
    }
    if more > 0 {
        out.push(format!("(and {more} more nodes with shared GPUs)"));
    }
    out
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "PodGroup {} (queue {}): minMember {}, {} members, {} already placed",
            self.job, self.queue, self.min_member, self.members, self.ready_before
        )?;
        if let Some(e) = &self.enqueue {
            writeln!(f, "  enqueue: {e}")?;
        }
        if let Some(q) = &self.queue_line {
            writeln!(f, "  queue {}: {q}", self.queue)?;
        }
        if !self.queue_path.is_empty() {
            writeln!(f, "  queue tree (allocated counts each queue's subtree):")?;
            for line in &self.queue_path {
                writeln!(f, "    {line}")?;
            }
        }
        if let Some(line) = &self.fairness {
            writeln!(f, "  fairshare: {line}")?;
        }
        if let Some(t) = &self.topology {
            writeln!(f, "  topology: {t}")?;
        }
        if !self.sub_groups.is_empty() {
            writeln!(f, "  sub-groups:")?;
            for line in &self.sub_groups {
                writeln!(f, "    {line}")?;
            }
        }
        match (&self.held, self.placed) {
            (_, n) if n > 0 => writeln!(f, "  this session places {n} members")?,
            (Some(h), _) => writeln!(f, "  held: {h}")?,
            (None, _) => writeln!(f, "  nothing to place")?,
        }
        if let Some(aged) = &self.aged {
            writeln!(f, "  {aged}")?;
        }
        if let Some((why, pods)) = &self.victims {
            writeln!(f, "  victims: {why}")?;
            for p in pods {
                writeln!(f, "    evict {p}")?;
            }
        }
        if let Some((why, moves)) = &self.consolidation {
            writeln!(f, "  consolidation: {why}")?;
            for m in moves {
                writeln!(f, "    {m}")?;
            }
        }
        if let Some(why) = &self.never_moved {
            writeln!(f, "  consolidate never moves its pods: {why}")?;
        }
        if !self.volumes.is_empty() {
            writeln!(
                f,
                "  volumes (members are bound only once every claim is bound):"
            )?;
            for line in &self.volumes {
                writeln!(f, "    {line}")?;
            }
        }
        if !self.claims.is_empty() {
            writeln!(
                f,
                "  DRA claims (allocated with their member's node, or not at all):"
            )?;
            for line in &self.claims {
                writeln!(f, "    {line}")?;
            }
        }
        if !self.shared_gpus.is_empty() {
            writeln!(
                f,
                "  shared GPUs (the fraction held, of the fullest capacity):"
            )?;
            for line in &self.shared_gpus {
                writeln!(f, "    {line}")?;
            }
        }
        // An aged gang's line names its held room already.
        if !self.held_on.is_empty() && self.aged.is_none() {
            writeln!(
                f,
                "  room held while victims terminate on: {}",
                self.held_on.join(", ")
            )?;
        }
        for k in &self.kinds {
            let total: u32 = k.nodes.iter().map(|n| n.fit).sum();
            writeln!(
                f,
                "  {} pending members asking {} each; {} fit on the nodes as they are now:",
                k.pending, k.request, total
            )?;
            for n in &k.nodes {
                match &n.reason {
                    Some(r) if n.fit == 0 => writeln!(f, "    {:<24} 0  {r}", n.node)?,
                    Some(r) => writeln!(f, "    {:<24} {}  (then {r})", n.node, n.fit)?,
                    None => writeln!(f, "    {:<24} {}", n.node, n.fit)?,
                }
            }
        }
        Ok(())
    }
}
