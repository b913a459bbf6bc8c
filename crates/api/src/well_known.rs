//! Well-known annotation, label and reason names shared with Volcano, kube-scheduler and the
//! scheduler-plugins coscheduling plugin.

/// Pod annotation naming the pod's PodGroup (Volcano). Checked first.
pub const ANNOTATION_GROUP_NAME: &str = "scheduling.k8s.io/group-name";

/// Pod label naming the pod's PodGroup (Volcano). Checked second.
pub const LABEL_VOLCANO_PODGROUP: &str = "scheduling.volcano.sh/podgroup";

/// Pod label naming the pod's PodGroup (scheduler-plugins coscheduling). Checked third.
pub const LABEL_COSCHEDULING_POD_GROUP: &str = "scheduling.x-k8s.io/pod-group";

/// The places a pod's group name is looked up, in the order of SPEC §2: (where to look, key).
pub const GROUP_NAME_KEYS: [(GroupKeyKind, &str); 3] = [
    (GroupKeyKind::Annotation, ANNOTATION_GROUP_NAME),
    (GroupKeyKind::Label, LABEL_VOLCANO_PODGROUP),
    (GroupKeyKind::Label, LABEL_COSCHEDULING_POD_GROUP),
];

/// Whether a key in [`GROUP_NAME_KEYS`] is looked up among annotations or labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupKeyKind {
    /// `metadata.annotations`.
    Annotation,
    /// `metadata.labels`.
    Label,
}

/// Pod annotation naming the queue of a pod that has no group.
pub const ANNOTATION_QUEUE_NAME: &str = "scheduling.volcano.sh/queue-name";

/// Pod annotation or label naming the pod's role (task) within its gang, for `minTaskMember`.
pub const TASK_SPEC_KEY: &str = "volcano.sh/task-spec";

/// Queue annotation holding Volcano's legacy hierarchy path (`root/eng/prod`).
pub const ANNOTATION_QUEUE_HIERARCHY: &str = "volcano.sh/hierarchy";

/// Queue annotation holding the weights along Volcano's legacy hierarchy path (`1/2/8`).
pub const ANNOTATION_QUEUE_HIERARCHY_WEIGHTS: &str = "volcano.sh/hierarchy-weights";

/// Name of the queue used when a PodGroup or pod names none; Caldera creates it if missing.
pub const DEFAULT_QUEUE: &str = "default";

/// Name of the queue every queue without `spec.parent` hangs under in the queue tree; Caldera
/// creates it if missing while the config uses the tree (`capacity` with `enableHierarchy`).
pub const ROOT_QUEUE: &str = "root";

/// Reasons written into PodGroup conditions, pod conditions and events.
pub mod reason {
    /// PodGroup `Unschedulable`: the gang does not fit the nodes.
    pub const NOT_ENOUGH_RESOURCES: &str = "NotEnoughResources";
    /// PodGroup `Unschedulable`: fewer members exist than `minMember`.
    pub const NOT_ENOUGH_TASKS: &str = "NotEnoughTasks";
    /// PodGroup `Unschedulable`: a role has fewer members than its `minTaskMember` (Volcano).
    pub const NOT_ENOUGH_PODS_OF_TASK: &str = "NotEnoughPodsOfTask";
    /// PodGroup `Unschedulable`: the gang timed out (SPEC §7).
    pub const SCHEDULE_TIMEOUT: &str = "ScheduleTimeout";
    /// PodGroup condition reason used by Volcano when a member failed.
    pub const POD_FAILED: &str = "PodFailed";
    /// PodGroup condition reason used by Volcano when a member was deleted.
    pub const POD_DELETED: &str = "PodDeleted";
    /// Pod `PodScheduled=False`: no node fits (what cluster-autoscaler looks for).
    pub const UNSCHEDULABLE: &str = "Unschedulable";
    /// Pod `PodScheduled=False`: the pod waits on its queue's quota, not on nodes.
    pub const QUEUE_QUOTA_EXCEEDED: &str = "QueueQuotaExceeded";
    /// Pod `status.reason` of a member failed by the gang timeout.
    pub const GANG_SCHEDULE_TIMEOUT: &str = "GangScheduleTimeout";
}

/// The scheduling gate `caldera gate` lifts (SPEC gate mode): a pod of kube-scheduler that
/// carries it waits until Caldera has found a node for its whole gang, pinned it there and
/// removed the gate. The admission policy in `deploy/gate/` adds it.
pub const GANG_GATE: &str = "scheduling.caldera.sh/gang";

/// kube-scheduler's default profile: the scheduler name gate mode works beside.
pub const KUBE_SCHEDULER_NAME: &str = "default-scheduler";

/// Annotations and names of the gangs Caldera derives from workloads (docs/workloads.md).
pub mod workload {
    /// On a derived PodGroup: the workload it was derived from, as `kubectl` names it
    /// (`job.batch/train`).
    pub const ANNOTATION_DERIVED_FROM: &str = "scheduling.caldera.sh/derived-from";
    /// On a derived PodGroup: its workload's `metadata.creationTimestamp`. The gang is ordered
    /// by it (not by the PodGroup's own, which is when Caldera's write happened to land), so
    /// of two workloads submitted together the older one's gang goes first, live as in the
    /// simulator.
    pub const ANNOTATION_WORKLOAD_CREATED: &str = "scheduling.caldera.sh/workload-created";
    /// On a workload (or its pod template): `"false"` opts it out of auto-grouping; its pods
    /// are scheduled one by one as before.
    pub const ANNOTATION_AUTO_GROUP: &str = "scheduling.caldera.sh/auto-group";
    /// On a workload: the derived gang's `minMember` (a positive integer) instead of the one
    /// derived from its spec.
    pub const ANNOTATION_MIN_MEMBER: &str = "scheduling.caldera.sh/min-member";
    /// On a workload: the derived gang's `scheduleTimeoutSeconds` (a positive integer).
    pub const ANNOTATION_SCHEDULE_TIMEOUT: &str = "scheduling.caldera.sh/schedule-timeout-seconds";
    /// Label Kueue reads on a workload naming its LocalQueue; read as the queue's name.
    pub const LABEL_KUEUE_QUEUE_NAME: &str = "kueue.x-k8s.io/queue-name";
    /// Label on every derived PodGroup: who manages it.
    pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// The value of [`LABEL_MANAGED_BY`] on derived PodGroups.
    pub const MANAGED_BY_CALDERA: &str = "caldera";
    /// Prefix of the name of the PodGroup derived from a `batch/v1` Job: `job-<job name>`.
    pub const JOB_PODGROUP_PREFIX: &str = "job-";
}
