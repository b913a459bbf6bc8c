//! Benchmarks behind `caldera bench`: synthetic clusters and workloads from a seed, timed.
//!
//! Benchmarks print figures; nothing here asserts a duration. The generators build ordinary
//! Kubernetes objects and feed them through the same cache conversion the scheduler uses, so
//! `snapshot_seconds` measures the real path. The live benchmarks (`e2e`, `cold_start`) run
//! the real runtime against the in-process API stand-in (or, for `e2e`, a real cluster).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cache;
pub mod cold_start;
pub mod e2e;
pub mod gen;
pub mod live;
pub mod perf;
pub mod replay;
pub mod scale;
pub mod session;

/// Peak resident set size of this process in bytes (Linux `VmHWM`), 0 where unknown.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

/// Current resident set size in bytes (Linux `VmRSS`), 0 where unknown.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}
