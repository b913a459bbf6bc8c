//! Resources, quantities, nodes, tasks, jobs, queues, the snapshot and the plan: the pure domain model.
#![forbid(unsafe_code)]
