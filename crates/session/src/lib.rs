//! Session, statement, plugin traits, tiers and actions: snapshot + time + config -> plan.
#![forbid(unsafe_code)]
