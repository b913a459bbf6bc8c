//! In-memory cluster, virtual clock and scenario runner behind `caldera simulate`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod driver;
pub mod error;
pub mod expect;
pub mod invariants;
pub mod manifest;
pub mod scenario;
pub mod selector;
pub mod store;

pub use driver::{Scheduling, SessionOutput, Simulation};
pub use error::{Error, Origin, Result};
pub use scenario::{Outcome, Scenario};
