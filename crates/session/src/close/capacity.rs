//! Capacity requests to the autoscaler (`ProvisioningRequest`): when a gang that fits nowhere asks
//! for nodes, and for how much.

use super::*;

/// Autoscaler requests of job `ji`: asks for one when the gang is short of nodes and has none
/// (or its last one is over and the back-off has passed), deletes one it no longer needs, and
/// says on the PodGroup's condition where the request is.
pub(super) fn capacity(ssn: &Session, ji: usize, v: &mut Verdict, plan: &mut Plan) {
    let st = &ssn.state;
    let Some(policy) = &st.provisioning else {
        return;
    };
    let job = &st.jobs[ji];
    let run = &st.job_runs[ji];
    let needs = job.autoscale && run.invalid.is_none() && v.short_of_nodes;
    let current = job.capacity.as_ref();
    if !needs {
        // Kept while the session could not tell (the gang was not tried); released once the
        // gang is placed, timed out, gone, held by its queue, or opted out.
        let unknown = run.holdup.is_none()
            && st.pending_tasks(ji).next().is_some()
            && st.ready_count(ji) < job.min_member
            && !v.timed_out
            && job.autoscale;
        if let (Some(c), false) = (current, unknown) {
            let why = if v.timed_out {
                "the gang timed out"
            } else if st.ready_count(ji) >= job.min_member {
                "the gang is placed"
            } else if !job.autoscale {
                "the PodGroup opted out"
            } else {
                "the gang no longer waits for nodes"
            };
            // Members still waiting stop consuming it, so cluster-autoscaler sees them again
            // (not those a timeout fails in this plan). A member the cache shows without the
            // annotation is included too: its annotation may have been written and not yet seen
            // (the pod's watch lags the PodGroup's), and removing an absent annotation is a no-op,
            // whereas a missed one would keep cluster-autoscaler away from the pod for good.
            let pods = job
                .tasks
                .iter()
                .copied()
                .filter(|&ti| {
                    let t = &st.tasks[ti];
                    !v.timed_out
                        && t.node.is_none()
                        && t.status == caldera_model::TaskStatus::Pending
                        && t.consumes.as_deref().is_none_or(|r| r == &*c.name)
                })
                .map(|ti| {
                    let t = &st.tasks[ti];
                    caldera_model::ConsumingPod {
                        namespace: t.namespace.clone(),
                        name: t.name.clone(),
                        uid: t.uid.clone(),
                    }
                })
                .collect();
            plan.capacity_releases.push(caldera_model::CapacityRelease {
                namespace: c.namespace.clone(),
                podgroup: job.name.clone(),
                name: c.name.clone(),
                pods,
                pod_sets: c.pod_sets,
                why: why.into(),
            });
        }
        return;
    }
    let fit = v
        .condition
        .as_ref()
        .map(|c| c.2.clone())
        .unwrap_or_default();
    let attempt = match current {
        None => 1,
        Some(c) if c.state.over() => {
            let retry_at = c.since.plus_millis(policy.backoff_ms(c.attempt));
            if st.now < retry_at {
                // A fixed time, not a countdown: the condition (and its event) changes only
                // when something happens.
                let message = format!(
                    "ProvisioningRequest {}/{} {} ({}); attempt {} at {}; {fit}",
                    c.namespace,
                    c.name,
                    c.state.as_str(),
                    c.message,
                    c.attempt + 1,
                    retry_at.to_rfc3339()
                );
                v.condition = Some(("Unschedulable", PROVISIONING_FAILED, message));
                return;
            }
            // The next attempt annotates the waiting members with its own name.
            plan.capacity_releases.push(caldera_model::CapacityRelease {
                namespace: c.namespace.clone(),
                podgroup: job.name.clone(),
                name: c.name.clone(),
                pods: Vec::new(),
                pod_sets: c.pod_sets,
                why: format!("replaced by attempt {}", c.attempt + 1),
            });
            c.attempt + 1
        }
        Some(c) => {
            let message = format!(
                "waiting for capacity: ProvisioningRequest {}/{} is {} (attempt {}); {fit}",
                c.namespace,
                c.name,
                c.state.as_str(),
                c.attempt
            );
            v.condition = Some(("Unschedulable", WAITING_FOR_CAPACITY, message));
            return;
        }
    };
    let need = capacity_need(ssn, ji, attempt, &policy.class_name);
    if need.pod_sets.len() > MAX_POD_SETS {
        // The API refuses such a request; say why instead of asking every session.
        let message = format!(
            "no ProvisioningRequest: the gang's members come in {} shapes and a request holds at most {MAX_POD_SETS}; {fit}",
            need.pod_sets.len()
        );
        v.condition = Some(("Unschedulable", NOT_ENOUGH_RESOURCES, message));
        return;
    }
    let message = format!(
        "waiting for capacity: ProvisioningRequest {}/{} created for {} pods (attempt {attempt}); {fit}",
        need.namespace,
        need.name,
        need.pod_sets.iter().map(|p| p.count).sum::<u32>()
    );
    v.condition = Some(("Unschedulable", WAITING_FOR_CAPACITY, message));
    plan.capacity_requests.push(need);
}

/// What to ask for: the pending members the gang lacks of `minMember`, in placement order,
/// one pod set per distinct kind (request and placement).
pub(super) fn capacity_need(
    ssn: &Session,
    ji: usize,
    attempt: u32,
    class: &str,
) -> caldera_model::CapacityNeed {
    let st = &ssn.state;
    let job = &st.jobs[ji];
    let lacking = st.lacking(ji) as usize;
    let members = ssn.order_tasks(ji, st.pending_tasks(ji).collect());
    let mut pod_sets: Vec<caldera_model::PodSetNeed> = Vec::new();
    let mut pods = Vec::new();
    for &t in members.iter().take(lacking) {
        let t = &st.tasks[t];
        pods.push(caldera_model::ConsumingPod {
            namespace: t.namespace.clone(),
            name: t.name.clone(),
            uid: t.uid.clone(),
        });
        match pod_sets
            .iter_mut()
            .find(|p| p.request == t.request && p.spec == t.spec)
        {
            Some(p) => p.count += 1,
            None => pod_sets.push(caldera_model::PodSetNeed {
                request: t.request.clone(),
                spec: t.spec.clone(),
                count: 1,
            }),
        }
    }
    caldera_model::CapacityNeed {
        namespace: job.namespace.clone(),
        podgroup: job.name.clone(),
        podgroup_uid: job.uid.clone(),
        name: caldera_model::request_name(&job.name, attempt).into(),
        attempt,
        class_name: class.to_string(),
        pod_sets,
        pods,
    }
}
