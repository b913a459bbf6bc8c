//! The configs Caldera must accept: the shipped default, Volcano's own default, the scenarios'.

use std::path::{Path, PathBuf};
use std::time::Duration;

use caldera_config::{
    load, parse, Action, ArgValue, Hook, SchedulerConfig, DEFAULT_BIND_CONCURRENCY,
    DEFAULT_SCHEDULER_NAMES,
};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn plugin_names(config: &SchedulerConfig) -> Vec<Vec<&str>> {
    config
        .tiers
        .iter()
        .map(|tier| tier.plugins.iter().map(|p| p.name.as_str()).collect())
        .collect()
}

#[test]
fn shipped_config_file_equals_default() {
    let path = workspace_root().join("config/scheduler.yaml");
    let loaded = load(&path).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded, SchedulerConfig::default());
}

#[test]
fn shipped_config_is_the_gpu_aware_volcano_layout() {
    let config = SchedulerConfig::default();
    assert_eq!(
        config.actions,
        [Action::Enqueue, Action::Allocate, Action::Backfill]
    );
    assert_eq!(
        plugin_names(&config),
        [
            vec!["priority", "gang", "conformance"],
            vec![
                "overcommit",
                "drf",
                "predicates",
                "proportion",
                "nodeorder",
                "binpack"
            ],
        ]
    );
    for name in ["gang", "drf"] {
        let option = config.plugin(name).unwrap();
        assert_eq!(option.flags.get(Hook::Preemptable), Some(false), "{name}");
        assert!(option.enabled(Hook::JobOrder), "{name}");
    }
    let binpack = &config.plugin("binpack").unwrap().arguments;
    assert_eq!(binpack.get_i64("binpack.weight"), Some(10));
    assert_eq!(
        binpack.get_list("binpack.resources"),
        Some(&["nvidia.com/gpu".to_string()][..])
    );
    assert_eq!(
        binpack
            .with_prefix("binpack.resources.")
            .collect::<Vec<_>>(),
        [("nvidia.com/gpu", &ArgValue::Int(5))]
    );
    assert_eq!(config.scheduler_names, DEFAULT_SCHEDULER_NAMES);
    assert_eq!(config.schedule_period, Duration::from_secs(1));
    assert_eq!(config.session_debounce, Duration::from_millis(50));
    assert_eq!(config.gang_schedule_timeout, None);
    assert_eq!(config.bind_concurrency, DEFAULT_BIND_CONCURRENCY);
}

/// Volcano's shipped `volcano-scheduler.conf` (installer/helm chart), verbatim.
const VOLCANO_SCHEDULER_CONF: &str = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"#;

#[test]
fn volcano_default_conf_loads_unchanged() {
    let config = parse(
        VOLCANO_SCHEDULER_CONF,
        Some(Path::new("volcano-scheduler.conf")),
    )
    .unwrap();
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
    let shipped = SchedulerConfig::default();
    assert_eq!(config.actions, shipped.actions);
    assert_eq!(plugin_names(&config), plugin_names(&shipped));
    assert!(config.plugin("binpack").unwrap().arguments.is_empty());
    assert_eq!(config.scheduler_names, DEFAULT_SCHEDULER_NAMES);
    assert_eq!(config.schedule_period, Duration::from_secs(1));
}

/// A Volcano config using arguments Caldera does not read: it loads, and says what it ignores.
#[test]
fn volcano_conf_with_unused_arguments_loads_with_warnings() {
    let text = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
    arguments:
      overcommit-factor: "1.5"
  - name: drf
    enablePreemptable: false
  - name: predicates
    arguments:
      predicate.GPUSharingEnable: true
      predicate.CacheEnable: true
  - name: proportion
  - name: nodeorder
    arguments:
      leastrequested.weight: "2"
      mostrequested.weight: 0
configurations:
- name: allocate
  arguments:
    predicateErrorCacheEnable: true
metrics:
  address: http://prometheus
"#;
    let config = parse(text, Some(Path::new("volcano.conf"))).unwrap();
    assert_eq!(
        config.warnings,
        [
            "volcano.conf:16:7: tiers[1].plugins[2].arguments[\"predicate.GPUSharingEnable\"]: Volcano argument of the predicates plugin that Caldera does not use; ignored",
            "volcano.conf:17:7: tiers[1].plugins[2].arguments[\"predicate.CacheEnable\"]: Volcano argument of the predicates plugin that Caldera does not use; ignored",
            "volcano.conf:26:5: configurations[0].arguments.predicateErrorCacheEnable: Caldera's allocate action takes no arguments; ignored",
            "volcano.conf:27:1: metrics: Volcano's metrics settings are not used by Caldera; ignored",
        ]
    );
    let overcommit = &config.plugin("overcommit").unwrap().arguments;
    assert_eq!(overcommit.get_f64("overcommit-factor"), Some(1.5));
    let nodeorder = &config.plugin("nodeorder").unwrap().arguments;
    assert_eq!(nodeorder.get_i64("leastrequested.weight"), Some(2));
    assert_eq!(nodeorder.get_i64("mostrequested.weight"), Some(0));
    assert!(config.plugin("predicates").unwrap().arguments.is_empty());
    assert_eq!(
        config.configurations["allocate"].get_bool("predicateErrorCacheEnable"),
        Some(true)
    );
}

/// Volcano's network-topology-aware example config (the comment in its plugin) loads: the
/// HyperNode binpack weights are used, the normal-pod settings are warned about.
#[test]
fn volcano_network_topology_aware_config_loads() {
    let text = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: network-topology-aware
    arguments:
      weight: 10
      hypernode.binpack.cpu: 5
      hypernode.binpack.memory: 1
      hypernode.binpack.resources: nvidia.com/gpu, example.com/foo
      hypernode.binpack.resources.nvidia.com/gpu: 2
      hypernode.binpack.resources.example.com/foo: 3
      hypernode.binpack.normal-pod.enable: true
      hypernode.binpack.normal-pod.fading: 0.8
"#;
    let config = parse(text, Some(Path::new("volcano.conf"))).unwrap();
    assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
    assert!(config.warnings[0].contains("hypernode.binpack.normal-pod.enable"));
    let args = &config.plugin("network-topology-aware").unwrap().arguments;
    assert_eq!(args.get_i64("weight"), Some(10));
    assert_eq!(
        args.get_i64("hypernode.binpack.resources.nvidia.com/gpu"),
        Some(2)
    );
}

#[test]
fn every_scenario_config_parses() {
    let dir = workspace_root().join("scenarios");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let scenario: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let Some(text) = scenario["spec"]["config"].as_str() else {
            continue;
        };
        let config = parse(text, Some(&path)).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        assert!(config.plugin("gang").is_some(), "{}", path.display());
        checked += 1;
    }
    assert!(
        checked > 0,
        "no scenario in {} has spec.config",
        dir.display()
    );
}

/// fairshare's `window` over `halfLife: 0` (no memory) loads, with a warning that it does
/// nothing; with a half-life it loads quietly.
#[test]
fn a_window_without_memory_is_warned_about() {
    let text = |half_life: &str| {
        format!(
            "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n  - name: proportion\n  - name: fairshare\n    arguments:\n      halfLife: {half_life}\n      window: 168h\n"
        )
    };
    let config = parse(&text("0s"), Some(Path::new("fair.conf"))).unwrap();
    assert_eq!(
        config.warnings,
        ["fair.conf:7:5: tiers[0].plugins[2].arguments: window has no effect with halfLife 0 (no memory of past use)"]
    );
    let config = parse(&text("24h"), Some(Path::new("fair.conf"))).unwrap();
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}
