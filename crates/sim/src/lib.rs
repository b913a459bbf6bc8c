//! In-memory cluster, virtual clock and scenario runner behind `caldera simulate`.
//!
//! The simulator runs the real scheduling cycle — the same [`caldera_cache::ClusterIndex`]
//! conversion and the same `caldera_plugins` scheduler as `caldera run` — against objects
//! held in memory, with time as a value instead of a clock:
//!
//! - [`manifest`] reads multi-document YAML into typed objects; errors name the file, the
//!   document and the field path. Kinds that need controllers the simulator does not play
//!   (DaemonSet, CronJob, ...) are skipped with one notice per kind.
//! - [`store`] keeps the objects and behaves like the API server for what the scheduler sees:
//!   defaults on create, updates that keep server-owned fields, binds, status writes.
//! - [`driver`] holds the store, the virtual clock and the scheduler: every `schedulePeriod` it
//!   snapshots, runs a session, carries out the plan, and checks the [`invariants`] (no node
//!   over-committed, no gang bound in part, every bind passing every predicate).
//! - [`scenario`] and [`expect`] run `kind: Scenario` files (see `scenarios/FORMAT.md`) and
//!   report every mismatch of a failed `expect` as expected-versus-got.
//! - [`report`] renders the result as tables for people or as deterministic JSON.
//!
//! ```
//! let scenario = caldera_sim::scenario::load(
//!     caldera_sim::BUNDLED_EXAMPLE,
//!     caldera_sim::BUNDLED_EXAMPLE_NAME,
//! )?;
//! let (outcome, sim) = scenario.run()?;
//! assert!(outcome.passed(), "{outcome}");
//! assert_eq!(sim.now().to_rfc3339(), "2026-01-01T00:00:05Z");
//! # Ok::<(), caldera_sim::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compare;
pub mod driver;
pub mod error;
pub mod expect;
pub mod invariants;
pub mod manifest;
pub mod report;
pub mod scenario;
pub mod selector;
pub mod store;

pub use driver::{Mode, Scheduling, SessionOutput, Simulation};
pub use error::{Error, Origin, Result};
pub use scenario::{Outcome, Scenario};

/// The example `caldera simulate` runs without arguments: seed article 1's TP=8 gang, a copy
/// of `scenarios/seed1-partial-gang.yaml` (a test keeps the two equal).
pub const BUNDLED_EXAMPLE: &str = include_str!("../bundled/seed1-partial-gang.yaml");

/// The file name the bundled example reports in messages.
pub const BUNDLED_EXAMPLE_NAME: &str = "bundled:seed1-partial-gang.yaml";
