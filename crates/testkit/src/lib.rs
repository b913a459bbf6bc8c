//! Test support: model builders, proptest strategies, and the in-process API server stand-in.
#![forbid(unsafe_code)]

pub mod apiserver;
pub mod builders;
