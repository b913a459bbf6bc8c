//! The scheduling plugins: gang, priority, drf, proportion, predicates, nodeorder, binpack, overcommit, conformance.
#![forbid(unsafe_code)]
