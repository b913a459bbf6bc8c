//! `caldera bench perf`: each shipped scheduler_perf config parses, and its integration-test
//! workloads run to completion with every gang bound whole; what the runner does not carry
//! out is refused by name.

use caldera_bench::perf::format::{self, Source, SHIPPED};
use caldera_bench::perf::{self, Error, PerfOptions};

fn integration_tests() -> PerfOptions {
    PerfOptions {
        labels: vec!["integration-test".into()],
        workload: None,
        runs: 1,
    }
}

#[test]
fn every_shipped_config_parses_with_its_performance_workloads() {
    for shipped in SHIPPED {
        let cases = format::parse(Source::Shipped(shipped)).expect("parses");
        let selected = perf::select(
            &cases,
            &PerfOptions {
                labels: vec!["performance".into()],
                workload: None,
                runs: 1,
            },
        );
        assert!(selected.len() >= 6, "{}: {}", shipped.name, selected.len());
        assert!(selected
            .iter()
            .all(|(_, w)| w.params.get("initNodes").and_then(|n| n.as_u64()) == Some(5000)));
    }
}

#[test]
fn integration_test_workloads_bind_every_gang_whole() {
    for shipped in SHIPPED {
        let results = perf::run(Source::Shipped(shipped), &integration_tests()).expect("runs");
        assert_eq!(results.len(), 2, "{}", shipped.name);
        for r in &results {
            assert!(r.all_bound, "{}: {r:?}", shipped.name);
            assert_eq!(r.unbound_pods, 0, "{r:?}");
            assert!(r.pods > 0 && r.gangs > 0 && r.nodes > 0, "{r:?}");
            assert!(r.samples > 0, "{r:?}");
            assert!(r.throughput_average > 0.0, "{r:?}");
        }
    }
}

/// The tas workload's gangs land each in one rack (their `schedulingConstraints.topology`),
/// checked against the node labels: on 100 nodes of one rack per 100 nodes, 10 gangs fit.
#[test]
fn tas_gangs_stay_within_one_rack() {
    let tas = SHIPPED.iter().find(|s| s.name == "tas").expect("shipped");
    let results = perf::run(
        Source::Shipped(tas),
        &PerfOptions {
            labels: Vec::new(),
            workload: Some("TopologyAwareScheduling/100Nodes_10Gangs".into()),
            runs: 1,
        },
    )
    .expect("runs");
    assert_eq!(results[0].topology_violations, 0);
    assert!(results[0].all_bound);
}

fn write_config(dir: &std::path::Path, ops: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("templates")).expect("dir");
    std::fs::write(
        dir.join("templates/pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-{{.Index}}\nspec:\n  containers:\n  - name: c\n    image: i\n",
    )
    .expect("template");
    let path = dir.join("performance-config.yaml");
    std::fs::write(
        &path,
        format!(
            "- name: Case\n  workloadTemplate:\n{ops}  workloads:\n  - name: W\n    labels: [short]\n    params: {{nodes: 2}}\n"
        ),
    )
    .expect("config");
    path
}

#[test]
fn an_unknown_opcode_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("caldera-perf-opcode-{}", std::process::id()));
    let path = write_config(
        &dir,
        "  - opcode: createNodes\n    countParam: $nodes\n  - opcode: churn\n    mode: recreate\n",
    );
    let err = format::parse(Source::File(&path)).expect_err("refused");
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains("opcode `churn`"), "{message}");
    assert!(message.contains("workloadTemplate[1]"), "{message}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_field_of_an_opcode_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("caldera-perf-field-{}", std::process::id()));
    let path = write_config(
        &dir,
        "  - opcode: createNodes\n    countParam: $nodes\n  - opcode: createPods\n    count: 2\n    namespace: ns\n    podTemplatePath: templates/pod.yaml\n    steadyState: true\n",
    );
    let err = format::parse(Source::File(&path)).expect_err("refused");
    assert!(err.to_string().contains("field `steadyState`"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A template field Caldera's types do not hold is refused with its path, not dropped.
#[test]
fn a_template_field_caldera_would_not_read_is_refused() {
    let dir = std::env::temp_dir().join(format!("caldera-perf-drop-{}", std::process::id()));
    let path = write_config(
        &dir,
        "  - opcode: createNodes\n    countParam: $nodes\n  - opcode: createNamespaces\n    prefix: ns\n    count: 1\n  - opcode: createPods\n    count: 2\n    namespace: ns-0\n    podTemplatePath: templates/pod.yaml\n",
    );
    std::fs::write(
        dir.join("templates/pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p-{{.Index}}\nspec:\n  gangPolicy: strict\n  containers:\n  - name: c\n    image: i\n",
    )
    .expect("template");
    let err = perf::run(
        Source::File(&path),
        &PerfOptions {
            labels: vec!["short".into()],
            workload: None,
            runs: 1,
        },
    )
    .expect_err("refused");
    assert!(err.to_string().contains(".spec.gangPolicy"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
