//! Independent checks of a plan against the snapshot it was made from, one module per set of
//! rules: what the simulator's invariants and the property tests hold every session to. Each is
//! a direct scan of the snapshot and the plan, so the session's own indexes cannot hide their
//! mistakes. They read every part of the model; nothing in the model reads them.

pub mod dra;
pub mod interpod;
pub mod topology;
pub mod volume;
