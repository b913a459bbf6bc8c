//! End-to-end test support: the scenario driver for live API servers and the harness that runs
//! the scheduler in-process against the API stand-in or a real cluster; the tests live in
//! `tests/e2e/` (see `e2e/README.md`).
//!
//! - [`driver`]: [`LiveRun`] runs a scenario (`scenarios/FORMAT.md`) step by step through the
//!   `kube` client, checks each `expect` with the simulator's checker and the scenario
//!   invariants after every step, and cleans up after itself.
//! - [`view`]: the live objects read into the simulator's store, so its expectation checker
//!   and invariant checks run unchanged.
//! - [`cluster`]: where to run ([`Target`]: stand-in or `CALDERA_E2E_KUBECONFIG`), starting
//!   the in-process scheduler, and [`run_scenario`] for a whole scenario.
//! - [`namespaces`]: the namespaces a run makes or relabels, and putting them back.
//! - [`rbac`]: the scheduler runs under the ServiceAccount and RBAC `deploy/` ships, on the
//!   stand-in (which enforces it) and on a real cluster.
//! - [`objects`]: the scenario kinds as API resources, and manifest JSON helpers.
//! - [`roles`]: the cluster components the driver plays against a bare control plane (node
//!   lifecycle controller, kubelets), over the shared rules of `caldera_actors`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod crds;
pub mod driver;
pub mod error;
pub mod namespaces;
pub mod objects;
pub mod rbac;
pub mod roles;
pub mod view;
pub mod workloads;

pub use cluster::{run_scenario, Cluster, Target};
pub use driver::{DriverOptions, LiveRun, StepReport};
pub use error::{Error, Result};
