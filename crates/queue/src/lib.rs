//! Queues: ordering and fair-share accounting (deserved, allocated, share, overused).
#![forbid(unsafe_code)]
