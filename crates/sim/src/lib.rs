//! In-memory cluster, virtual clock and scenario runner behind `caldera simulate`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod driver;
pub mod error;
pub mod expect;
pub mod invariants;
pub mod manifest;
pub mod report;
pub mod scenario;
pub mod selector;
pub mod store;

pub use driver::{Scheduling, SessionOutput, Simulation};
pub use error::{Error, Origin, Result};
pub use scenario::{Outcome, Scenario};

/// The example `caldera simulate` runs without arguments: seed article 1's TP=8 gang, a copy
/// of `scenarios/seed1-partial-gang.yaml` (a test keeps the two equal).
pub const BUNDLED_EXAMPLE: &str = include_str!("../bundled/seed1-partial-gang.yaml");

/// The file name the bundled example reports in messages.
pub const BUNDLED_EXAMPLE_NAME: &str = "bundled:seed1-partial-gang.yaml";
