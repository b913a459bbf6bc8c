//! `caldera bench perf`: a shipped config's integration-test workloads print as JSON with
//! every gang bound; CONFIG is refused by the other benches.

use std::process::Command;

#[test]
fn bench_perf_prints_throughput_per_workload_as_json() {
    let out = Command::new(env!("CARGO_BIN_EXE_caldera"))
        .args([
            "bench",
            "perf",
            "tas",
            "--label",
            "integration-test",
            "--runs",
            "1",
            "-o",
            "json",
        ])
        .output()
        .expect("caldera runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let results = results.as_array().expect("an array");
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["test_case"], "TopologyAwareScheduling");
        assert_eq!(r["all_bound"], true, "{r}");
        assert!(
            r["throughput_average"].as_f64().is_some_and(|t| t > 0.0),
            "{r}"
        );
        assert!(r["throughput_p99"].as_f64().is_some_and(|t| t > 0.0), "{r}");
    }
}

#[test]
fn config_is_refused_by_other_benches() {
    let out = Command::new(env!("CARGO_BIN_EXE_caldera"))
        .args(["bench", "cache", "tas"])
        .output()
        .expect("caldera runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("CONFIG is read by `caldera bench perf` only"));
}
