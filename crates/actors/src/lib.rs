//! The rest of the cluster, modelled once: the roles that Kubernetes components play around a
//! scheduler, as pure functions over `k8s-openapi` objects.
//!
//! Caldera itself only schedules. To test it without a cluster, three places must play the
//! other components: the simulator (`caldera-sim`, on its in-memory store and virtual clock),
//! the API server stand-in (`caldera-testkit`, for what kube-apiserver and
//! kube-controller-manager do server-side) and the e2e driver (`caldera-e2e`, acting as the
//! kubelets and as an autoscaler against any API server, real or not). Each role's rules live
//! here, in one module per role, and those three call them; none of them grows its own copy.
//!
//! Every function here is synchronous, deterministic and takes time as an input, like the
//! scheduling core.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod autoscaler;
pub mod disruption;
pub mod job;
pub mod jobset;
pub mod kube_scheduler;
pub mod kubelet;
pub mod lws;
mod meta;
pub mod pv_controller;
pub mod replicaset;
pub mod resourceclaim;
pub mod statefulset;
pub mod time;
