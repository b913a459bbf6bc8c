//! Scheduler configuration: Volcano's actions-and-tiers format plus Caldera's keys, parsed and validated.
#![forbid(unsafe_code)]
