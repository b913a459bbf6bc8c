//! An in-process stand-in for kube-apiserver: plain HTTP on `127.0.0.1`, the real REST and
//! watch protocol, for the resources a gang scheduler touches. Tests point the real `kube`
//! client (and `kube::runtime::watcher`) at it; no cluster, no TLS, no authentication.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use caldera_testkit::apiserver::{ApiServer, Verb};
//! let server = ApiServer::start().await?;
//! let client = server.kube_client()?;
//! // ... run the code under test against `client` ...
//! assert_eq!(server.request_counts().get(Verb::Create, "pods", "binding"), 8);
//! # Ok(()) }
//! ```
//!
//! # Served resources
//!
//! | group/version | resource | scope | subresources |
//! |---|---|---|---|
//! | `v1` | `pods` (`po`) | namespaced | `status`, `binding` (POST), `eviction` (POST) |
//! | `v1` | `nodes` (`no`) | cluster | `status` |
//! | `v1` | `namespaces` (`ns`) | cluster | `status` |
//! | `v1` | `events` (`ev`) | namespaced | |
//! | `v1` | `bindings` (POST only, the legacy binding endpoint) | namespaced | |
//! | `events.k8s.io/v1` | `events` | namespaced | |
//! | `coordination.k8s.io/v1` | `leases` | namespaced | |
//! | `node.k8s.io/v1` | `runtimeclasses` | cluster | |
//! | `scheduling.k8s.io/v1` | `priorityclasses` (`pc`) | cluster | |
//! | `apiextensions.k8s.io/v1` | `customresourcedefinitions` (`crd`) | cluster | `status` |
//! | `scheduling.volcano.sh/v1beta1` | `podgroups` (`pg`) | namespaced | `status` |
//! | `scheduling.volcano.sh/v1beta1` | `queues` (`q`) | cluster | `status` |
//! | `policy/v1` | `poddisruptionbudgets` (`pdb`) | namespaced | `status` |
//! | `v1` | `persistentvolumeclaims` (`pvc`) | namespaced | `status` |
//! | `v1` | `persistentvolumes` (`pv`) | cluster | `status` |
//! | `storage.k8s.io/v1` | `storageclasses` (`sc`) | cluster | |
//! | `storage.k8s.io/v1` | `csinodes` | cluster | |
//! | `batch/v1` | `jobs` | namespaced | `status` |
//! | `jobset.x-k8s.io/v1alpha2` | `jobsets` (once its CRD exists) | namespaced | `status` |
//! | `leaderworkerset.x-k8s.io/v1` | `leaderworkersets` (`lws`, once its CRD exists) | namespaced | `status` |
//! | `resource.k8s.io/v1` | `deviceclasses` | cluster | |
//! | `resource.k8s.io/v1` | `resourceslices` | cluster | |
//! | `resource.k8s.io/v1` | `resourceclaims` | namespaced | `status` |
//! | `resource.k8s.io/v1` | `resourceclaimtemplates` | namespaced | |
//!
//! Discovery answers `/version`, `/api`, `/api/v1`, `/apis`, `/apis/<group>` and
//! `/apis/<group>/<version>` with the same `APIResourceList` entries (names, singular names,
//! scope, kind, verbs, short names, categories, subresources) kube-apiserver gives, and the
//! aggregated form (`apidiscovery.k8s.io/v2`) when the `Accept` header asks for it, so both
//! `kube::Discovery::run` and `run_aggregated` work.
//!
//! # Behaviour that matches kube-apiserver
//!
//! * **Storage.** Objects are JSON (`serde_json::Value`). One global resourceVersion counter
//!   (decimal strings) orders every write. Create fills `uid`, `creationTimestamp` (RFC 3339),
//!   `resourceVersion`, `generation` (pods, custom resources, CRDs, priority classes; bumped on
//!   spec changes), the namespace from the URL, and `apiVersion`/`kind`; `generateName` works.
//!   A duplicate is `409 AlreadyExists`; a missing object `404 NotFound`. Every error is a
//!   `Status` object (`kind: Status`, `apiVersion: v1`, `status: Failure`, message, reason,
//!   code, details) worded as kube-apiserver words it.
//! * **Defaulting and admission on pod create.** `schedulerName: default-scheduler`,
//!   `restartPolicy: Always`, `terminationGracePeriodSeconds: 30`, `dnsPolicy`,
//!   `enableServiceLinks`, container `imagePullPolicy`/termination-message fields, requests
//!   copied from limits where missing, port protocol; status is replaced by
//!   `{phase: Pending, qosClass}` (plus `PodScheduled=False/SchedulingGated` for gated pods).
//!   Priority admission resolves `priorityClassName` (or the `globalDefault` class) into
//!   `priority` and `preemptionPolicy` (403 for an unknown class or a conflicting `priority`).
//!   RuntimeClass admission copies `overhead.podFixed` (and scheduling constraints) from the
//!   pod's RuntimeClass; a pod that sets `spec.overhead` itself is **403 Forbidden** ("pod
//!   rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"), which is
//!   what the real server answers (not 422). DefaultTolerationSeconds adds the 300 s
//!   not-ready/unreachable NoExecute tolerations.
//! * **Nodes.** Create keeps `status` as sent (kubelets register that way) and
//!   TaintNodesByCondition admission adds `node.kubernetes.io/not-ready:NoSchedule`.
//! * **Other create-time rules.** Namespaces get `status.phase: Active`, the `kubernetes`
//!   finalizer and the `kubernetes.io/metadata.name` label. PodGroups and Queues (status
//!   subresource) drop `status` on create, as custom resources do. PriorityClasses: value
//!   ≤ 1e9 for user classes, one `globalDefault` at most, `preemptionPolicy` defaulted. CRD
//!   names must be `<plural>.<group>`. `default`, `kube-system`, `kube-public`,
//!   `kube-node-lease` and the `system-node-critical`/`system-cluster-critical` priority
//!   classes exist from the start.
//! * **Update (PUT).** A stale `metadata.resourceVersion` is `409 Conflict` ("the object has
//!   been modified; …"); an empty one updates unconditionally. For resources with a `status`
//!   subresource the main resource ignores `status`. On `/status`: pods keep everything but
//!   `spec`, `ownerReferences` and deletion fields from the request (labels and annotations do
//!   change, as in `podStatusStrategy`); nodes and namespaces reset only `spec`; PodGroups,
//!   Queues and CRDs take only `status`. Pod updates may change only container images,
//!   `activeDeadlineSeconds`, tolerations (additions), `terminationGracePeriodSeconds` and
//!   remove scheduling gates (422 otherwise). A write that changes nothing is not persisted
//!   (no new resourceVersion, no event).
//! * **Patch.** `application/merge-patch+json` (RFC 7386), `application/json-patch+json`
//!   (RFC 6902; undecodable 400, failing 422) and `application/strategic-merge-patch+json`
//!   with the Go types' merge keys: pod `status.conditions` (`type`), `spec.containers`,
//!   `initContainers`, `volumes`, `schedulingGates`, … (`name`), container `env` (`name`),
//!   `ports` (`containerPort`), `volumeMounts` (`mountPath`); node `status.conditions` and
//!   `status.addresses` (`type`); `metadata.ownerReferences` (`uid`); `metadata.finalizers`
//!   (set union); node `spec.taints` and everything else without a patch strategy are
//!   replaced whole (as in the real `NodeSpec`). Directives `$patch: delete|replace|merge`,
//!   `$deleteFromPrimitiveList/…`, `$retainKeys` are honoured and `$setElementOrder/…` is
//!   accepted and ignored. PodGroups and Queues, like every custom resource, refuse strategic
//!   merge patch with 415. A `resourceVersion` inside a patch is a precondition (409).
//! * **`pods/binding`.** Sets `spec.nodeName`, merges the Binding's annotations, sets
//!   `PodScheduled=True`, honours the Binding's `uid`/`resourceVersion` preconditions and
//!   answers `201` with a `Status` of `Success`. An already bound pod is `409 Conflict`
//!   "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node
//!   \"n\"" (also for terminating or scheduling-gated pods); a missing pod is 404. The legacy
//!   `POST …/namespaces/<ns>/bindings` does the same.
//! * **`pods/eviction`.** Judged against the namespace's PodDisruptionBudgets as
//!   kube-apiserver does (`caldera_actors::disruption`): Pending, finished or terminating pods
//!   skip the budgets; two budgets are 500; a budget that allows no disruption is **429
//!   TooManyRequests** "Cannot evict pod as it would violate the pod's disruption budget."
//!   with a `DisruptionBudget` cause naming the budget and its healthy counts. An allowed
//!   eviction charges the budget (`disruptionsAllowed − 1`, the pod in `disruptedPods`), sets
//!   `DisruptionTarget=True` (reason `EvictionByEvictionAPI`) on the pod, deletes it with the
//!   eviction's `deleteOptions` (gracefully, see Delete) and answers `201 Success`.
//! * **PodDisruptionBudgets.** Create resets `status` and sets `generation` 1; with
//!   [`Options::disruption_controller`] (default on) the disruption controller's status
//!   (`currentHealthy`, `desiredHealthy`, `expectedPods`, `disruptionsAllowed`,
//!   `disruptedPods`, `observedGeneration`, the `DisruptionAllowed` condition) is written
//!   after every change to a pod or budget of the namespace. No workload controllers are
//!   served, so `maxUnavailable` and percentages count only pods without a controller.
//! * **Volumes.** A PersistentVolume is validated as kube-apiserver does for what a scheduler
//!   reads (access modes, `capacity.storage`, exactly one volume source, node affinity for a
//!   `local` volume; 422 otherwise), defaulted (`volumeMode: Filesystem`, reclaim policy
//!   `Retain`) and created with status `{phase: Pending, lastPhaseTransitionTime}`; its volume
//!   source, `volumeMode` and a set `nodeAffinity` cannot change (422), `claimRef` can. A
//!   PersistentVolumeClaim needs access modes and a storage request; the DefaultStorageClass
//!   admission plugin gives one without `storageClassName` the newest default class; it is
//!   created with status `{phase: Pending}`; its spec is immutable except `volumeName` set once,
//!   `storageClassName` set where unset, and for a bound claim `resources.requests` (never below
//!   `status.capacity`) and `volumeAttributesClassName` ("spec is immutable after creation
//!   except resources.requests and volumeAttributesClassName for bound claims"). A
//!   StorageClass needs a provisioner, is defaulted (`reclaimPolicy: Delete`,
//!   `volumeBindingMode: Immediate`) and cannot change its parameters, provisioner, reclaim
//!   policy or binding mode. CSINodes are stored as sent. With [`Options::pv_controller`]
//!   (default on) kube-controller-manager's PV controller (`caldera_actors::pv_controller`) runs
//!   after every write to a claim, a volume or a class, each object it changes written as its
//!   own write: claims are bound to volumes that name them (`volumeName`/`claimRef`) or, for an
//!   `Immediate` class, to the smallest available volume that fits; phases and
//!   `bind-completed`/`bound-by-controller` annotations as the real controller writes them. No
//!   provisioner runs (a test creates the volume), and the `pvc-protection`/`pv-protection`
//!   finalizers are not added. With the same option the ephemeral volume controller creates
//!   the claim `<pod>-<volume>` (owned by the pod) of each generic ephemeral volume of a pod
//!   when it is missing; no garbage collector removes it with the pod.
//! * **Jobs.** Created with `status` dropped and `generation` 1, defaulted as kube-apiserver
//!   does (`parallelism` 1, `completions` 1 when neither is set, `backoffLimit` 6,
//!   `completionMode: NonIndexed`, `suspend: false`); a template whose `restartPolicy` is not
//!   `Never` or `OnFailure` is 422. With [`Options::job_controller`] (default on)
//!   kube-controller-manager's Job controller (`caldera_actors::job`) runs after every write
//!   to a Job or to a pod it owns: it creates the missing pods, deletes the active pods of a
//!   Job past its `backoffLimit`, and writes the Job's status, each as its own write. Deleting
//!   a Job is what the garbage collector then does with its dependents (objects whose
//!   `ownerReferences` name it): with `propagationPolicy` `Background` or `Foreground` (what
//!   `kubectl delete` sends) they are deleted (bound pods gracefully); with none or `Orphan`
//!   (the default for `batch/v1` Jobs) their owner reference is removed. Deleting a JobSet or
//!   a LeaderWorkerSet collects its dependents the same way, `Background` by default (as for
//!   any custom resource); dependents are deleted in the background, so a JobSet's Jobs take
//!   their pods with them.
//! * **ReplicaSets and Deployments** (`apps/v1`, without the `scale` subresources). Created
//!   with `status` dropped, `generation` 1, `replicas` defaulted to 1; an empty selector or one
//!   that does not select the template's labels is 422. With [`Options::replicaset_controller`]
//!   (default on) kube-controller-manager's controllers (`caldera_actors::replicaset`) run after
//!   every write to a pod, a ReplicaSet or a Deployment of the namespace: a Deployment gets the
//!   ReplicaSet `<name>-<pod-template-hash>` of its template (older ones scaled to 0); a
//!   ReplicaSet adopts matching orphan pods, creates its missing pods `<rs>-<5 characters>`
//!   (a terminating pod does not count, so an evicted one is replaced at once), deletes its
//!   surplus, and writes its status, each as its own write. Deleting either collects its
//!   dependents, `Background` by default (as for `apps/v1`), so a Deployment takes its
//!   ReplicaSets and their pods with it. No other kind's dependents are collected.
//! * **Native gang API** (`scheduling.k8s.io/v1alpha2` Workloads and PodGroups, served as by
//!   a 1.36 kube-apiserver with `GenericWorkload` on). A PodGroup is created with `status`
//!   dropped, `generation` 1 and the finalizer `scheduling.k8s.io/podgroup-protection`; its
//!   `status.conditions` merge by `type` under a strategic merge patch. Deleting it while it
//!   has finalizers sets `deletionTimestamp` and keeps it; with
//!   [`Options::podgroup_protection`] (default on) kube-controller-manager's
//!   podgroup-protection controller is played: once no unfinished pod names the group in
//!   `spec.schedulingGroup.podGroupName` the finalizer is removed, and a terminating PodGroup
//!   without finalizers goes. Workloads are stored as sent.
//! * **Dynamic Resource Allocation** (`resource.k8s.io/v1`, `dra.rs`). A ResourceClaim is
//!   created with `status` dropped and its requests defaulted (`allocationMode: ExactCount`,
//!   `count: 1`) and validated; claim and template specs are immutable (422); the claim's
//!   status changes only through `/status`, validated as kube-apiserver does: at most 256
//!   distinct `reservedFor` users and only with an allocation, none added while the claim is
//!   being deleted, an allocation immutable once set (it may be cleared), a new allocation's
//!   results naming a request (or `request/subrequest`) of the claim, a driver, pool and
//!   device. Finalizers (`resource.kubernetes.io/delete-protection`) keep a deleted claim,
//!   terminating, until the last one is removed. ResourceSlices (driver, pool, exactly one node
//!   choice, unique device names) and DeviceClasses (`extendedResourceName`) are validated,
//!   CEL selectors are not compiled. With [`Options::resource_claim_controller`] (default on)
//!   kube-controller-manager's resource-claim controller (`caldera_actors::resourceclaim`)
//!   runs after every write to a claim, a template or a pod that names claims: the claim of
//!   each template entry (`<pod>-<entry>-<5 chars>`, owned by the pod) and the pod's
//!   `status.resourceClaimStatuses`, users that are gone removed from `reservedFor`, a claim
//!   without users deallocated and its finalizer removed, the claims of pods that are done or
//!   gone deleted (the garbage collector's part), each as its own write.
//! * **Delete.** Pods that are bound and not finished are deleted gracefully: the grace
//!   period is the request's `gracePeriodSeconds` (query or `DeleteOptions` body) or the pod's
//!   `terminationGracePeriodSeconds`; `deletionTimestamp`/`deletionGracePeriodSeconds` are
//!   set, the pod stays (no kubelet will finish it; see [`Store::remove`]) and watchers see
//!   MODIFIED. Only a shorter grace period changes a pending deletion. Unbound or finished
//!   pods, and `gracePeriodSeconds=0`, remove the pod at once (DELETED). DeleteOptions
//!   `preconditions` are checked. Pods and custom resources answer with the object, others
//!   with a `Status`. Collections can be deleted with selectors.
//! * **List.** `labelSelector` (`=`, `==`, `!=`, `in`, `notin`, exists, `!`, `>`/`<`),
//!   `fieldSelector` on `metadata.name`, `metadata.namespace` and per-resource fields (pods:
//!   `spec.nodeName` — `spec.nodeName=` selects unbound pods — `spec.schedulerName`,
//!   `status.phase`, …; unsupported fields are 400 "field label not supported"), `limit` and
//!   `continue` pagination in (namespace, name) order, each page costing O(page) rather than
//!   O(all objects); `metadata.resourceVersion` is the global version when the list began.
//!   Each stored version is serialised at most once and lists and watches copy those bytes:
//!   kube-runtime's watcher lists 150,000 pods in 300 pages in seconds even in a debug build.
//! * **Metadata-only reads.** `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`
//!   (kube's `get_metadata`, `list_metadata`, `metadata_watcher`) is answered with
//!   `PartialObjectMetadata` objects and `PartialObjectMetadataList` lists.
//! * **Watch** (`watch=true|1`, or the legacy `/watch/` path). Newline-delimited
//!   `{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR, "object": …}`. From `resourceVersion=N`
//!   every event after N is replayed from a bounded per-resource history
//!   ([`Options::history_window`]) and then live events follow; if N is older than the history
//!   the server answers 200, one `ERROR` event whose object is a `Status` with code 410,
//!   reason `Expired` and message `too old resource version: N (M)`, and closes the stream.
//!   Without a resourceVersion (or `0`) synthetic ADDED events for the current objects come
//!   first (`sendInitialEvents=false` skips them). `sendInitialEvents=true` with
//!   `resourceVersionMatch=NotOlderThan` and `allowWatchBookmarks=true` (streaming list) sends
//!   the current objects and then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`;
//!   the wrong combinations are 422. With `allowWatchBookmarks=true` a BOOKMARK carrying the
//!   current resourceVersion is sent every [`Options::bookmark_interval`]. `timeoutSeconds`
//!   ends the stream. Selectors filter events the way the watch cache does: an object that
//!   stops matching produces DELETED, one that starts matching ADDED. DELETED events carry
//!   the deletion's resourceVersion. kube-runtime's default watcher (paginated list, then
//!   watch with bookmarks) and its streaming-list mode both work.
//!
//! # Differences from a real API server
//!
//! * No authentication, authorization, TLS, HTTP/2, protobuf or YAML bodies, API priority
//!   and fairness, webhooks, managed fields, or server-side apply: `application/apply-patch+yaml`
//!   is answered with **415 Unsupported Media Type** and a message saying so.
//! * Only the resources above exist. Creating a CRD stores it (and immediately marks it
//!   `NamesAccepted`/`Established`, as the CRD controllers would) but does not serve new
//!   resources; PodGroups and Queues are served whether or not their CRD was created, and
//!   their objects are not validated against any schema. Volcano's admission webhooks (e.g.
//!   defaulting a PodGroup's queue) do not run.
//! * Validation covers names, the pod update rules, bindings and the admission rules above;
//!   other field validation of the real server is absent: a malformed quantity is stored, and
//!   quantity strings are kept as sent rather than canonicalised (`1000m` stays `1000m`).
//!   Quantities sent as JSON numbers in pods, nodes and RuntimeClasses are turned into
//!   strings as the real server does (custom resources keep numbers). QoS class
//!   compares quantity strings as written. ServiceAccount admission (default service account,
//!   token volume) does not run.
//! * Finalizers are stored but never block deletion (except those of native PodGroups and
//!   ResourceClaims, above). Deleting a namespace removes everything
//!   in it at once (the namespace controller's work, without the Terminating phase).
//! * Continued list pages read the current state, not a snapshot at the first page's
//!   resourceVersion; they still report that first resourceVersion, so a watch started from
//!   it replays every change since and a client converges to the right state. An expired
//!   continue token is not detected. `resourceVersion`/`resourceVersionMatch` on a list are
//!   accepted and the current state is served (never 410 or 504).
//! * Watch history is a count of events per resource ([`Options::history_window`]), not a
//!   time window; [`Store::compact`] empties it at once. A watch from a resourceVersion newer
//!   than the server's is accepted and simply waits. A watch without `timeoutSeconds` runs
//!   until the client leaves or [`Store::close_watches`]/[`ApiServer::shutdown`] is called.
//! * `gracePeriodSeconds=0` deletes a pod with a single DELETED event; graceful deletion does
//!   not bump `metadata.generation`.
//! * With [`Options::node_lifecycle_controller`] (default on) the node lifecycle controller's
//!   NoSchedule tainting runs synchronously after every node write, as its own write: a node
//!   whose `Ready` condition is `True` loses the admission's not-ready taint right after it is
//!   created (watchers see ADDED with the taint, then MODIFIED without it); `Ready=False` adds
//!   `not-ready`, `Unknown` adds `unreachable`, pressure conditions and `spec.unschedulable`
//!   add theirs. A node with no `Ready` condition gets no condition taint (the real controller
//!   would mark it Unknown after its startup grace period). Pods are never evicted by taints.
//! * With [`Options::auto_create_namespaces`] (default on) writing into a missing namespace
//!   creates it; a real server answers 404 (turn the option off for that).
//! * Core `v1` events and `events.k8s.io/v1` events are stored separately (the real server
//!   keeps one store with two views), and never expire.
//! * The default `kube` client retries 429, 503 and 504 answers by itself (up to 15 times);
//!   failures injected with those codes are therefore retried transparently. Inject 500 (or
//!   409, 404, …) to make a failure visible to the caller.
#![warn(missing_docs)]

mod admission;
mod counters;
mod dra;
pub mod kube_scheduler;
mod patch;
mod podspec;
mod rbac;
mod resources;
mod selector;
mod server;
mod status;
mod storage;
mod store;
mod time;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use counters::{RequestCounts, RequestKey, Verb};
pub use rbac::{yaml_documents, Attributes, Rbac};
pub use status::ApiError;
pub use store::Store;

use counters::{Effect, Fault};
use server::{lock, App};
use store::StoreConfig;

/// Errors starting the server or building a client for it. None of them is worth retrying.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the listener on `127.0.0.1:0` failed.
    #[error("binding the API server's listener on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    /// The server's own URL did not parse (cannot happen for `http://127.0.0.1:<port>`).
    #[error("the API server URL {0:?} is not a valid URI")]
    Url(String),
    /// `kube` refused to build a client for the server.
    #[error("building a kube client for {url}: {source}")]
    Client {
        /// The server URL.
        url: String,
        /// What `kube` said.
        #[source]
        source: kube::Error,
    },
}

/// How the stand-in behaves; [`Options::default`] suits most tests.
#[derive(Debug, Clone)]
pub struct Options {
    /// Events kept per resource for watches that resume from a resourceVersion. A watch from a
    /// version older than the oldest kept event gets `410 Expired`. Default 100,000 (the order
    /// of kube-apiserver's largest watch caches; events share objects with the store, so the
    /// cost is the older object versions they keep alive).
    pub history_window: usize,
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK. Default 1 s (the
    /// real server sends about one a minute); zero disables bookmarks.
    pub bookmark_interval: Duration,
    /// Emulate the node lifecycle controller's NoSchedule condition taints (see the module
    /// docs). Default `true`.
    pub node_lifecycle_controller: bool,
    /// Create a namespace the first time an object is written into it. Default `true`; with
    /// `false`, writes into a missing namespace are `404` as on a real server.
    pub auto_create_namespaces: bool,
    /// Emulate kube-controller-manager's disruption controller: every PodDisruptionBudget's
    /// status is recomputed, as its own write, after each write to a pod or budget of its
    /// namespace. Default `true`.
    pub disruption_controller: bool,
    /// Emulate kube-controller-manager's PV controller: claims and volumes are bound, and
    /// their phases kept, after each write to a claim, a volume or a StorageClass (see the
    /// module docs). Default `true`.
    pub pv_controller: bool,
    /// Emulate kube-controller-manager's Job controller and the garbage collector for Jobs'
    /// dependents (see the module docs). Default `true`.
    pub job_controller: bool,
    /// Emulate kube-controller-manager's ReplicaSet and Deployment controllers and the garbage
    /// collector for their dependents (see the module docs). Default `true`.
    pub replicaset_controller: bool,
    /// Emulate kube-controller-manager's podgroup-protection controller: a terminating native
    /// `scheduling.k8s.io/v1alpha2` PodGroup loses the `scheduling.k8s.io/podgroup-protection`
    /// finalizer kube-apiserver gave it once no unfinished pod names it, and then goes.
    /// Default `true`.
    pub podgroup_protection: bool,
    /// Serve Kubernetes' own gang API (`scheduling.k8s.io/v1alpha2` Workloads and PodGroups),
    /// as a 1.36 kube-apiserver with `GenericWorkload` on does. Default `true`; `false` is a
    /// cluster without the gate: discovery does not list the group version and its paths are
    /// 404.
    pub native_gang_api: bool,
    /// Emulate kube-controller-manager's resource-claim controller
    /// ([`caldera_actors::resourceclaim`]): claims made from the ResourceClaimTemplates pods
    /// name (and `status.resourceClaimStatuses`), users that are gone removed from
    /// `reservedFor`, claims deallocated and deleted as the controller does. Default `true`.
    pub resource_claim_controller: bool,
    /// Enforce RBAC for one ServiceAccount's token ([`Rbac`]), as kube-apiserver's RBAC
    /// authorizer does; requests with another token or none are allowed. Default `None`.
    pub rbac: Option<Rbac>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            history_window: 100_000,
            bookmark_interval: Duration::from_secs(1),
            node_lifecycle_controller: true,
            auto_create_namespaces: true,
            disruption_controller: true,
            pv_controller: true,
            job_controller: true,
            replicaset_controller: true,
            podgroup_protection: true,
            native_gang_api: true,
            resource_claim_controller: true,
            rbac: None,
        }
    }
}

/// A running stand-in API server. Dropping it stops the server and ends open watches.
pub struct ApiServer {
    addr: SocketAddr,
    app: Arc<App>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ApiServer {
    /// Starts a server with [`Options::default`] on an ephemeral port of `127.0.0.1`.
    /// Must be called inside a Tokio runtime; the server runs as a task of that runtime.
    pub async fn start() -> Result<Self, Error> {
        Self::start_with(Options::default()).await
    }

    /// Starts a server with the given options.
    pub async fn start_with(options: Options) -> Result<Self, Error> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(Error::Bind)?;
        let addr = listener.local_addr().map_err(Error::Bind)?;
        let store = Store::new(StoreConfig {
            history_window: options.history_window,
            node_lifecycle_controller: options.node_lifecycle_controller,
            auto_create_namespaces: options.auto_create_namespaces,
            disruption_controller: options.disruption_controller,
            pv_controller: options.pv_controller,
            job_controller: options.job_controller,
            replicaset_controller: options.replicaset_controller,
            podgroup_protection: options.podgroup_protection,
            resource_claim_controller: options.resource_claim_controller,
        });
        let app = Arc::new(App {
            store,
            counts: Mutex::new(RequestCounts::default()),
            write_log: Mutex::new(Vec::new()),
            faults: Mutex::new(Vec::new()),
            bookmark_interval: options.bookmark_interval,
            native_gang_api: options.native_gang_api,
            address: addr.to_string(),
            rbac: std::sync::RwLock::new(options.rbac.clone()),
            forbidden: Mutex::new(Vec::new()),
        });
        let (tx, rx) = oneshot::channel::<()>();
        let router = server::router(app.clone());
        let task = tokio::spawn(async move {
            // Serving ends only on shutdown; an accept error has nowhere better to go.
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Self {
            addr,
            app,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A real `kube::Client` for this server (plain HTTP, no auth, default namespace
    /// `default`, kube's default retry policy). Must be called inside a Tokio runtime.
    pub fn kube_client(&self) -> Result<kube::Client, Error> {
        let url = self.url();
        let uri = url.parse().map_err(|_| Error::Url(url.clone()))?;
        kube::Client::try_from(kube::Config::new(uri))
            .map_err(|source| Error::Client { url, source })
    }

    /// Direct access to the stored objects.
    pub fn store(&self) -> &Store {
        &self.app.store
    }

    /// A snapshot of the request counters.
    pub fn request_counts(&self) -> RequestCounts {
        lock(&self.app.counts).clone()
    }

    /// Starts kube-scheduler beside the server (the model in `caldera_actors`): a cycle every
    /// `period` over the stored pods of `default-scheduler`, binding through `pods/binding`'s
    /// own code. Gate mode's tests run against it; it stops when the handle is dropped.
    pub fn start_kube_scheduler(
        &self,
        period: std::time::Duration,
    ) -> kube_scheduler::KubeScheduler {
        kube_scheduler::start(self.app.clone(), period)
    }

    /// Sets every request counter back to zero (and empties the write log).
    pub fn reset_request_counts(&self) {
        *lock(&self.app.counts) = RequestCounts::default();
        lock(&self.app.write_log).clear();
    }

    /// Every write request so far (create, update, patch, delete), in the order they
    /// arrived: to check what was sent between two others (say, the first and the last bind).
    pub fn write_log(&self) -> Vec<RequestKey> {
        lock(&self.app.write_log).clone()
    }

    /// Every request refused by [`Options::rbac`] (403), in order, with the message sent.
    pub fn forbidden(&self) -> Vec<(RequestKey, String)> {
        lock(&self.app.forbidden).clone()
    }

    /// Replaces the RBAC in force ([`Options::rbac`]) from now on, as an operator editing the
    /// ClusterRole would.
    pub fn set_rbac(&self, rbac: Option<Rbac>) {
        *self
            .app
            .rbac
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = rbac;
    }

    /// Makes the next `times` requests with this verb on this resource (`"*"` for any,
    /// `plural.group` to pick a group) and subresource (`""` for the object itself, `"*"` for
    /// any) fail with `code` and a matching `Status` (500 `InternalError`, 409 `Conflict`,
    /// 429 `TooManyRequests`, …) before touching the store. Failed requests are still counted.
    pub fn fail_next(&self, verb: Verb, resource: &str, subresource: &str, code: u16, times: u32) {
        self.inject(verb, resource, subresource, Effect::Fail(code), times);
    }

    /// Holds the next `times` requests matching as in [`ApiServer::fail_next`] for `delay`
    /// before serving them (a slow write: a later request can overtake it). A request that
    /// both a delay and a failure match is held, then failed.
    pub fn delay_next(
        &self,
        verb: Verb,
        resource: &str,
        subresource: &str,
        delay: std::time::Duration,
        times: u32,
    ) {
        self.inject(verb, resource, subresource, Effect::Delay(delay), times);
    }

    fn inject(&self, verb: Verb, resource: &str, subresource: &str, effect: Effect, times: u32) {
        lock(&self.app.faults).push(Fault {
            verb,
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            effect,
            remaining: times,
        });
    }

    /// Forgets every pending injected failure and delay.
    pub fn clear_failures(&self) {
        lock(&self.app.faults).clear();
    }

    /// Ends open watches, stops accepting connections and waits for the server task.
    pub async fn shutdown(mut self) {
        self.app.store.close_watches();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.app.store.close_watches();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
