//! `caldera replay`: a job trace through the real scheduler, on the simulator's in-memory
//! cluster and virtual clock, with the figures operators judge a scheduler by.
//!
//! - Inputs: [`trace`] (Caldera's job CSV; [`openb`] reads Alibaba's `cluster-trace-gpu-v2023`
//!   as published), [`cluster`] (nodes and queues CSV, and the objects put in the store),
//!   read through [`csv`], whose errors name file, line and column; nothing is replayed
//!   unless every line reads.
//! - Modes: [`timeline`] (jobs arrive, run and end on the virtual clock; the store, driver and
//!   session of `caldera-sim`, the config's session period) and [`inflation`] (the
//!   "Beware of Fragmentation" protocol), with [`frag`] for the paper's fragmentation.
//! - Output: [`run`] records a timeline replay, [`metrics`] turns records into the figures,
//!   [`report`] prints them (table, JSON, per-job CSV, comparison).
//! - [`record`] turns a live cluster's pods and PodGroups into a trace (`caldera record`).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod csv;
pub mod error;
pub mod frag;
pub mod inflation;
pub mod input;
pub mod metrics;
pub mod openb;
pub mod plot;
pub mod record;
pub mod report;
pub mod rng;
pub mod run;
pub mod timeline;
pub mod trace;

pub use error::{Error, Result};
