//! Test support: model builders, proptest strategies, and the in-process API server stand-in.
#![forbid(unsafe_code)]

#[cfg(feature = "apiserver")]
pub mod apiserver;
pub mod builders;
