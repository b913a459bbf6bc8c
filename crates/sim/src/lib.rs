//! In-memory cluster, virtual clock and scenario runner behind `caldera simulate`.
#![forbid(unsafe_code)]
