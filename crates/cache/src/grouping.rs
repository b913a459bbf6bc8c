//! How a pod of ours that names no group is grouped: alone, or in the gang derived from its
//! Job or workload (docs/workloads.md, [`crate::derive`], [`crate::workload`]); and the PodGroup
//! writes that keep derived gangs' PodGroups up to date.

use crate::convert::{GroupInfo, PodInfo};
use crate::derive::{
    gang_part, gang_parts, gang_podgroup_name, pod_candidate, workload_gang, Candidate,
    WorkloadKind,
};
use crate::index::{key_of, ClusterIndex, PodKey, SnapshotOptions};
use crate::workload::{job_finished, job_gang, job_podgroup_name, DerivedWrite, JobGang, Owner};
use caldera_api::PodGroup;
use caldera_model::Resources;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A gang of a workload of a kind in [`crate::derive`]: kind, namespace, name, part.
pub(crate) type GangKey = (WorkloadKind, Arc<str>, Arc<str>, Option<String>);

/// Derived gangs of one snapshot, cached: per Job, and per [`GangKey`].
#[derive(Default)]
pub(crate) struct DerivedCache {
    pub(crate) jobs: HashMap<PodKey, JobGang>,
    pub(crate) workloads: HashMap<GangKey, JobGang>,
    /// [`ClusterIndex::grouped_by_operator`], once computed.
    pub(crate) operator_grouped: Option<HashSet<WorkloadKey>>,
}

/// A workload by kind, namespace and name.
pub(crate) type WorkloadKey = (WorkloadKind, Arc<str>, Arc<str>);

/// How a pod of ours that names no group is grouped.
pub(crate) enum Resolved {
    /// A group of one, as before.
    Lone,
    /// A member of the derived group with this job id (`namespace/name`).
    Derived(Arc<str>),
    /// Waits, for the derived group with this id, with this message.
    Wait(Arc<str>, Arc<str>),
}

impl ClusterIndex {
    /// The write that brings the existing PodGroup of a derived gang to `pg`, if any: create it
    /// when missing, update its derived fields when they differ; nothing when it is someone
    /// else's (a clash, reported on the pods).
    pub(crate) fn derived_write(&self, pg: PodGroup) -> Option<DerivedWrite> {
        let ns = pg.metadata.namespace.as_deref().unwrap_or("default");
        let id = format!("{ns}/{}", pg.metadata.name.as_deref().unwrap_or(""));
        let Some(existing) = self.podgroups.get(id.as_str()) else {
            return Some(DerivedWrite::Create(pg));
        };
        let owner = Owner::of(&pg.metadata).map(|o| o.uid);
        if existing.owner_uid != owner {
            return None;
        }
        let wanted = GroupInfo::try_from(&pg).ok()?;
        let same = wanted.min_member == existing.min_member
            && wanted.queue == existing.queue
            && wanted.priority_class == existing.priority_class
            && wanted.min_resources == existing.min_resources
            && wanted.timeout_seconds == existing.timeout_seconds;
        if same {
            return None;
        }
        // A merge patch merges maps: the resources the stored minResources has and the
        // derived one has not are cleared by name.
        let kept = wanted
            .min_resources
            .as_ref()
            .map(Resources::to_quantities)
            .unwrap_or_default();
        let removed_resources = existing
            .min_resources
            .as_ref()
            .map(Resources::to_quantities)
            .unwrap_or_default()
            .into_keys()
            .filter(|k| !kept.contains_key(k))
            .collect();
        Some(DerivedWrite::Update {
            podgroup: pg,
            removed_resources,
        })
    }

    /// The writes that bring the PodGroups of workloads whose gang is derived
    /// (docs/workloads.md) up to date: for each known Job that [`job_gang`] groups, in a
    /// namespace `opts.auto_group` covers, not finished, its PodGroup is created when missing
    /// and its spec updated when the Job now derives another one (`parallelism` changed, an
    /// override annotation set). A PodGroup of that name the Job does not own is a clash:
    /// nothing is written (its pods say so). Sorted by namespace, then name.
    pub fn derived_podgroups(&self, opts: &SnapshotOptions) -> Vec<DerivedWrite> {
        if opts.gate || !opts.auto_group.enabled {
            return Vec::new();
        }
        let from_jobs = self
            .jobs
            .iter()
            .filter(|((ns, _), job)| opts.auto_group.covers(ns) && !job_finished(job))
            .filter_map(|(_, job)| match job_gang(job, &opts.scheduler_names) {
                JobGang::Gang(pg) => Some(*pg),
                _ => None,
            });
        let operator_grouped = self.grouped_by_operator();
        let from_workloads = self
            .workloads
            .iter()
            .filter(|((_, ns, _), _)| opts.auto_group.covers(ns))
            .filter(|(key, _)| !operator_grouped.contains(*key))
            .flat_map(|((kind, _, _), w)| {
                gang_parts(w, *kind).into_iter().filter_map(move |part| {
                    match workload_gang(w, *kind, part.as_deref(), &opts.scheduler_names) {
                        JobGang::Gang(pg) => Some(*pg),
                        _ => None,
                    }
                })
            });
        let wanted: Vec<PodGroup> = from_jobs.chain(from_workloads).collect();
        let wanted_ids: HashSet<String> = wanted
            .iter()
            .map(|pg| {
                let m = &pg.metadata;
                let ns = m.namespace.as_deref().unwrap_or("default");
                format!("{ns}/{}", m.name.as_deref().unwrap_or(""))
            })
            .collect();
        let stale = self
            .podgroups
            .values()
            .filter(|g| !wanted_ids.contains(&*g.id) && opts.auto_group.covers(&g.namespace))
            .filter(|g| self.derived_stale(g, opts, &operator_grouped))
            .map(|g| {
                DerivedWrite::Delete(PodGroup {
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        namespace: Some(g.namespace.to_string()),
                        name: Some(g.name.to_string()),
                        uid: (g.uid != g.id).then(|| g.uid.to_string()),
                        ..Default::default()
                    },
                    spec: Default::default(),
                    status: None,
                })
            });
        let mut writes: Vec<DerivedWrite> = wanted
            .into_iter()
            .filter_map(|pg| self.derived_write(pg))
            .chain(stale)
            .collect();
        writes.sort_by(|a, b| {
            let key = |w: &DerivedWrite| {
                let m = &w.podgroup().metadata;
                (m.namespace.clone(), m.name.clone())
            };
            key(a).cmp(&key(b))
        });
        writes
    }

    /// Whether `g` (not wanted by any workload now) is a PodGroup Caldera derived whose
    /// workload, known here by its uid, no longer derives it, and that no pod names: a Job not
    /// grouped any more (not when it finished: it keeps its PodGroup), a part of a workload
    /// that is gone (an LWS group above `replicas`, a JobSet regrouped), a workload not grouped
    /// any more or grouped by its operator ([`Self::grouped_by_operator`]), or a StatefulSet
    /// or Deployment no longer opted in (not kept here). A PodGroup
    /// whose workload is not known is left alone (the garbage collector deletes it with its
    /// owner).
    pub(crate) fn derived_stale(
        &self,
        g: &GroupInfo,
        opts: &SnapshotOptions,
        operator_grouped: &HashSet<WorkloadKey>,
    ) -> bool {
        let Some(owner) = g.derived_owner.as_ref() else {
            return false;
        };
        if self.members.values().any(|jobs| jobs.contains_key(&g.id)) {
            return false;
        }
        let uid_matches = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.uid.as_deref() == Some(&*owner.uid)
        };
        if owner.is_job() {
            let Some(job) = self
                .jobs
                .get(&key_of(&g.namespace, &owner.name))
                .filter(|j| uid_matches(&j.metadata))
            else {
                return false;
            };
            if job_finished(job) || *g.name != job_podgroup_name(&owner.name) {
                return false;
            }
            return matches!(job_gang(job, &opts.scheduler_names), JobGang::NotGrouped(_));
        }
        let Some(kind) = WorkloadKind::of(&owner.api_version, &owner.kind) else {
            return false;
        };
        if !self.workload_kinds.contains(&kind) {
            return false;
        }
        let key = (kind, g.namespace.clone(), owner.name.clone());
        let Some(w) = self.workloads.get(&key) else {
            // Kept unless opted in: a StatefulSet or Deployment not here is no longer grouped
            // (or gone, and its PodGroup with it).
            return kind.opt_in();
        };
        if !uid_matches(&w.metadata) {
            return false;
        }
        if operator_grouped.contains(&key) {
            return true;
        }
        gang_parts(w, kind)
            .into_iter()
            .filter(|part| *g.name == gang_podgroup_name(kind, &owner.name, part.as_deref()))
            .all(|part| {
                matches!(
                    workload_gang(w, kind, part.as_deref(), &opts.scheduler_names),
                    JobGang::NotGrouped(_)
                )
            })
    }

    /// The workloads of a kind whose operator groups its pods
    /// ([`WorkloadKind::operator_groups_pods`]) some pod of which names a group of its own: no
    /// gang is derived for them, their operator's PodGroup stands. Only workloads known here
    /// are ever looked up in it, so with none it is empty without a pass over the pods.
    pub(crate) fn grouped_by_operator(&self) -> HashSet<WorkloadKey> {
        if self.workloads.is_empty() {
            return HashSet::new();
        }
        self.pods
            .values()
            .filter(|p| p.group.is_some())
            .filter_map(|p| {
                let c = self.candidate(p)?;
                c.kind
                    .operator_groups_pods()
                    .then(|| (c.kind, p.namespace.clone(), c.name))
            })
            .collect()
    }

    /// How the pod `p` of ours (no group of its own) is grouped: by the gang derived from its
    /// Job when auto-grouping covers it, else alone. `derived` caches [`job_gang`] per Job
    /// for one snapshot.
    pub(crate) fn resolve(
        &self,
        p: &PodInfo,
        opts: &SnapshotOptions,
        derived: &mut DerivedCache,
    ) -> Resolved {
        if opts.gate || !opts.auto_group.covers(&p.namespace) {
            return Resolved::Lone;
        }
        if let Some(c) = self.candidate(p) {
            return self.resolve_workload(p, c, opts, derived);
        }
        let Some(owner) = p.owner.as_ref().filter(|o| o.is_job()) else {
            return Resolved::Lone;
        };
        if !self.jobs_watched {
            return Resolved::Lone;
        }
        let pg_name = job_podgroup_name(&owner.name);
        let id: Arc<str> = format!("{}/{pg_name}", p.namespace).into();
        let key = key_of(&p.namespace, &owner.name);
        let Some(job) = self
            .jobs
            .get(&key)
            .filter(|j| j.metadata.uid.as_deref() == Some(&*owner.uid))
        else {
            let why = format!(
                "waiting for Job {}/{} (its gang is derived from the Job)",
                p.namespace, owner.name
            );
            return Resolved::Wait(id, why.into());
        };
        let gang = derived
            .jobs
            .entry(key)
            .or_insert_with(|| job_gang(job, &opts.scheduler_names));
        match gang {
            JobGang::NotGrouped(_) => Resolved::Lone,
            JobGang::Invalid(why) => Resolved::Wait(id, why.as_str().into()),
            JobGang::Gang(_) => match self.podgroups.get(&id) {
                Some(g) if g.owner_uid.as_deref() != Some(&*owner.uid) => {
                    let why = format!(
                        "PodGroup {id} exists but is not derived from Job {}/{}; Caldera does not adopt it (rename the Job, or delete the PodGroup)",
                        p.namespace, owner.name
                    );
                    Resolved::Wait(id, why.into())
                }
                _ => Resolved::Derived(id),
            },
        }
    }

    /// The derived gang of a kind in [`crate::derive`] the pod belongs to, from its labels and
    /// owner, or — for an MPIJob's launcher — its Job's owner.
    pub(crate) fn candidate(&self, p: &PodInfo) -> Option<Candidate> {
        if let Some(c) = pod_candidate(&p.labels, p.owner.as_ref()) {
            return Some(c);
        }
        let owner = p.owner.as_ref().filter(|o| o.is_job())?;
        let job = self.jobs.get(&key_of(&p.namespace, &owner.name))?;
        let top = Owner::of(&job.metadata)?;
        (WorkloadKind::of(&top.api_version, &top.kind) == Some(WorkloadKind::MpiJob)).then_some(
            Candidate {
                kind: WorkloadKind::MpiJob,
                name: top.name,
                part: None,
                uid: Some(top.uid),
            },
        )
    }

    /// [`Self::resolve`] for a pod of a workload of a kind in [`crate::derive`].
    pub(crate) fn resolve_workload(
        &self,
        p: &PodInfo,
        c: Candidate,
        opts: &SnapshotOptions,
        derived: &mut DerivedCache,
    ) -> Resolved {
        if !self.workload_kinds.contains(&c.kind) {
            return Resolved::Lone;
        }
        let kind = c.kind.kind();
        let key = (c.kind, p.namespace.clone(), c.name.clone());
        let Some(w) = self.workloads.get(&key).filter(|w| {
            c.uid
                .as_deref()
                .is_none_or(|u| w.metadata.uid.as_deref() == Some(u))
        }) else {
            if c.kind.opt_in() {
                // Not kept unless opted in: scheduled as before.
                return Resolved::Lone;
            }
            let part = (c.kind == WorkloadKind::LeaderWorkerSet)
                .then_some(c.part.as_deref())
                .flatten();
            let id = format!(
                "{}/{}",
                p.namespace,
                gang_podgroup_name(c.kind, &c.name, part)
            );
            let refused = self
                .refused(c.kind.watch())
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            let why = format!(
                "waiting for {kind} {}/{} (its gang is derived from it){refused}",
                p.namespace, c.name
            );
            return Resolved::Wait(id.into(), why.into());
        };
        if c.kind.operator_groups_pods()
            && derived
                .operator_grouped
                .get_or_insert_with(|| self.grouped_by_operator())
                .contains(&key)
        {
            // Its operator groups its pods: scheduled as before (in their group).
            return Resolved::Lone;
        }
        let part = gang_part(w, c.kind, c.part.as_deref());
        let id: Arc<str> = format!(
            "{}/{}",
            p.namespace,
            gang_podgroup_name(c.kind, &c.name, part.as_deref())
        )
        .into();
        if part.as_deref() == Some("") {
            let why = format!(
                "the pod has no {} label, so its gang in {kind} {}/{} is unknown",
                if c.kind == WorkloadKind::LeaderWorkerSet {
                    crate::derive::LABEL_LWS_GROUP_INDEX
                } else {
                    crate::derive::LABEL_JOBSET_REPLICATED_JOB
                },
                p.namespace,
                c.name
            );
            return Resolved::Wait(id, why.into());
        }
        let (k, ns, name) = key;
        let gang = derived
            .workloads
            .entry((k, ns, name, part.clone()))
            .or_insert_with(|| workload_gang(w, c.kind, part.as_deref(), &opts.scheduler_names));
        match gang {
            JobGang::NotGrouped(_) => Resolved::Lone,
            JobGang::Invalid(why) => Resolved::Wait(id, why.as_str().into()),
            JobGang::Gang(pg) => {
                let owner = Owner::of(&pg.metadata).map(|o| o.uid);
                match self.podgroups.get(&id) {
                    Some(g) if g.owner_uid != owner => {
                        let why = format!(
                            "PodGroup {id} exists but is not derived from {kind} {}/{}; Caldera does not adopt it (rename the workload, or delete the PodGroup)",
                            p.namespace, c.name
                        );
                        Resolved::Wait(id, why.into())
                    }
                    _ => Resolved::Derived(id),
                }
            }
        }
    }
}
