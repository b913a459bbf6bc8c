//! The cluster components the live driver plays, since a bare control plane runs none of
//! them: one module per role, each a thin layer of API calls over the shared rules in
//! `caldera_actors`.
//!
//! - [`autoscaler`]: cluster-autoscaler serving ProvisioningRequests (new Nodes, request
//!   conditions).
//! - [`node_lifecycle`]: the node lifecycle controller's readiness taint.
//! - [`gate_admission`]: gate mode's admission policy (the gate on grouped pods).
//! - [`kubelet`]: pod phases (`markRunning`/`markSucceeded`) and the end of a graceful
//!   deletion.

pub mod autoscaler;
pub mod gate_admission;
pub mod kubelet;
pub mod node_lifecycle;
