//! Good configs: what each key turns into, defaults, flags and warnings.

use std::time::Duration;

use caldera_config::{parse, Action, ArgValue, Hook, SchedulerConfig};

fn ok(text: &str) -> SchedulerConfig {
    parse(text, None).unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn caldera_keys_default_when_absent() {
    let config = ok("actions: allocate\n");
    assert_eq!(config.actions, [Action::Allocate]);
    assert!(config.tiers.is_empty());
    assert!(config.configurations.is_empty());
    assert_eq!(config.scheduler_names, ["caldera", "volcano"]);
    assert_eq!(config.schedule_period, Duration::from_secs(1));
    assert_eq!(config.session_debounce, Duration::from_millis(50));
    assert_eq!(config.gang_schedule_timeout, None);
    assert_eq!(config.bind_concurrency, 64);
    assert!(config.pod_scheduled_events);
    assert!(config.warnings.is_empty());
}

#[test]
fn caldera_keys_when_set() {
    let config = ok(r#"
actions: "backfill,allocate"
schedulerNames: [my-scheduler]
schedulePeriod: 1m30s
sessionDebounce: 0
gangScheduleTimeout: 10m
bindConcurrency: "8"
podScheduledEvents: false
"#);
    assert_eq!(config.actions, [Action::Backfill, Action::Allocate]);
    assert!(config.runs(Action::Allocate) && !config.runs(Action::Enqueue));
    assert_eq!(config.scheduler_names, ["my-scheduler"]);
    assert_eq!(config.schedule_period, Duration::from_secs(90));
    assert_eq!(config.session_debounce, Duration::ZERO);
    assert_eq!(config.gang_schedule_timeout, Some(Duration::from_secs(600)));
    assert_eq!(config.bind_concurrency, 8);
    assert!(!config.pod_scheduled_events);
}

#[test]
fn numbers_may_be_written_as_strings() {
    let config = ok(r#"
actions: allocate
tiers:
- plugins:
  - name: overcommit
    arguments: {overcommit-factor: 2}
  - name: binpack
    arguments:
      binpack.weight: "10"
      binpack.cpu: 2
      binpack.resources: " nvidia.com/gpu, example.com/foo ,"
      binpack.resources.nvidia.com/gpu: "5"
      binpack.resources.example.com/foo: 3
"#);
    let overcommit = &config.plugin("overcommit").unwrap().arguments;
    assert_eq!(
        overcommit.get("overcommit-factor"),
        Some(&ArgValue::Float(2.0))
    );
    let binpack = &config.plugin("binpack").unwrap().arguments;
    assert_eq!(binpack.get_i64("binpack.weight"), Some(10));
    assert_eq!(binpack.get_i64("binpack.cpu"), Some(2));
    assert_eq!(binpack.get_i64("binpack.memory"), None);
    assert_eq!(
        binpack.get_list("binpack.resources").unwrap(),
        ["nvidia.com/gpu", "example.com/foo"]
    );
    assert_eq!(
        binpack
            .with_prefix("binpack.resources.")
            .collect::<Vec<_>>(),
        [
            ("example.com/foo", &ArgValue::Int(3)),
            ("nvidia.com/gpu", &ArgValue::Int(5)),
        ]
    );
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn flags_and_hook_iteration() {
    let config = ok(r#"
actions: allocate
tiers:
- plugins:
  - name: priority
    enableJobOrder: false
  - name: gang
- plugins:
  - name: drf
    enableHierarchy: true
    enabledVictim: false
"#);
    let job_order: Vec<&str> = config
        .plugins_enabled_for(Hook::JobOrder)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(job_order, ["gang", "drf"]);
    let drf = config.plugin("drf").unwrap();
    assert!(drf.enabled(Hook::Hierarchy));
    assert!(!drf.enabled(Hook::Victim));
    assert!(!config.plugin("gang").unwrap().enabled(Hook::Hierarchy));
    assert_eq!(
        config.warnings,
        ["line 10, column 22: tiers[1].plugins[0].enableHierarchy: hierarchical queues are not implemented by Caldera; shares are computed flat"]
    );
}

#[test]
fn capacity_with_hierarchy_is_accepted_and_its_dra_switches_are_reported() {
    let config = ok(r#"
actions: enqueue, allocate, backfill
tiers:
- plugins:
  - name: gang
  - name: capacity
    enableHierarchy: true
    arguments:
      capacity.DynamicResourceAllocationEnable: true
"#);
    let capacity = config.plugin("capacity").unwrap();
    assert!(capacity.enabled(Hook::Hierarchy));
    assert_eq!(
        config.warnings,
        ["line 9, column 7: tiers[0].plugins[1].arguments[\"capacity.DynamicResourceAllocationEnable\"]: Volcano argument of the capacity plugin that Caldera does not use; ignored"]
    );
}

#[test]
fn flat_capacity_takes_volcanos_default_reclaim_level_and_dra_switches() {
    // Level 0 without the tree: the reclaim Caldera does with flat queues, as Volcano's.
    let config = ok(r#"
actions: enqueue, allocate, reclaim, backfill
tiers:
- plugins:
  - name: gang
  - name: capacity
    arguments:
      ancestorReclaimLevel: 0
      capacity.DRAConsumableCapacityEnable: false
"#);
    let capacity = config.plugin("capacity").unwrap();
    assert!(!capacity.enabled(Hook::Hierarchy));
    assert_eq!(
        config.warnings,
        ["line 9, column 7: tiers[0].plugins[1].arguments[\"capacity.DRAConsumableCapacityEnable\"]: Volcano argument of the capacity plugin that Caldera does not use; ignored"]
    );
}

#[test]
fn binpack_weight_for_an_unlisted_resource_is_a_warning() {
    let config = ok(r#"
actions: allocate
tiers:
- plugins:
  - name: binpack
    arguments:
      binpack.resources.nvidia.com/gpu: 5
"#);
    assert_eq!(
        config.warnings,
        ["line 7, column 7: tiers[0].plugins[0].arguments[\"binpack.resources.nvidia.com/gpu\"]: \"nvidia.com/gpu\" is not listed in binpack.resources, so this weight is ignored (as in Volcano)"]
    );
}

#[test]
fn configurations_of_actions_that_do_not_run_are_warnings() {
    let config = ok(r#"
actions: "enqueue, allocate"
configurations:
- name: preempt
  arguments:
    preemptable: "true"
"#);
    assert_eq!(
        config.configurations["preempt"].get_str("preemptable"),
        Some("true")
    );
    assert_eq!(
        config.warnings,
        ["line 4, column 9: configurations[0].name: action \"preempt\" is not run (not in `actions`); this configuration is ignored"]
    );
}

#[test]
fn legacy_namespace_order_flag_is_accepted() {
    let config = ok(
        "actions: allocate\ntiers:\n- plugins:\n  - name: drf\n    enableNamespaceOrder: true\n",
    );
    assert_eq!(
        config.warnings,
        ["line 5, column 5: tiers[0].plugins[0].enableNamespaceOrder: flag of Volcano 1.3 and earlier, not used by Caldera; ignored"]
    );
}

#[test]
fn autoscaler_is_off_unless_configured() {
    assert_eq!(ok("actions: allocate\n").autoscaler, None);
    let off = ok("actions: allocate\nautoscaler:\n  provisioningRequest:\n    enabled: false\n");
    assert_eq!(off.autoscaler, None);
    let on = ok("actions: allocate\nautoscaler:\n  provisioningRequest: {}\n");
    let a = on.autoscaler.unwrap();
    assert_eq!(
        a.class_name,
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    );
    assert_eq!(a.retry, Duration::from_secs(60));
    assert_eq!(a.booking_timeout, Duration::from_secs(600));
    assert_eq!(a.max_wait, Some(Duration::from_secs(3600)));
    assert!(a.all_gangs);
}

#[test]
fn autoscaler_keys_when_set() {
    let config = ok(r#"
actions: allocate
autoscaler:
  provisioningRequest:
    className: check-capacity.autoscaling.x-k8s.io
    retry: 30s
    bookingTimeout: 5m
    maxWait: null
    allGangs: false
"#);
    let a = config.autoscaler.unwrap();
    assert_eq!(a.class_name, "check-capacity.autoscaling.x-k8s.io");
    assert_eq!(a.retry, Duration::from_secs(30));
    assert_eq!(a.booking_timeout, Duration::from_secs(300));
    assert_eq!(a.max_wait, None);
    assert!(!a.all_gangs);
    let p = a.policy();
    assert_eq!(
        (p.retry_ms, p.booking_ms, p.max_wait_ms),
        (30_000, 300_000, None)
    );
}

#[test]
fn autoscaler_mistakes_name_the_key() {
    let err = |text: &str| parse(text, None).unwrap_err().to_string();
    assert!(
        err("actions: allocate\nautoscaler:\n  provisioningRequest:\n    retrys: 1m\n")
            .contains("autoscaler.provisioningRequest.retrys: unknown key \"retrys\"")
    );
    assert!(
        err("actions: allocate\nautoscaler:\n  provisioningRequest:\n    retry: 0s\n")
            .contains("must be longer than zero")
    );
    assert!(err(
        "actions: allocate\nautoscaler:\n  provisioningRequest:\n    className: Not_Valid\n"
    )
    .contains("not a valid provisioning class name"));
    assert!(err("actions: allocate\nautoscaler:\n  provisioning: {}\n")
        .contains("unknown key \"provisioning\" in autoscaler"));
}

#[test]
fn network_topology_discovery_is_off_by_default() {
    assert_eq!(ok("actions: allocate\n").network_topology_discovery, None);
}

#[test]
fn network_topology_discovery_from_labels_in_either_form() {
    let config = ok(r#"
actions: allocate
networkTopologyDiscovery:
- source: ufm
  enabled: false
- source: label
  interval: 30s
  config:
    labels: [nvidia.com/gpu.clique, example.com/rack]
    networkTopologyTypes:
      a2:
      - nodeLabel: volcano.sh/hypercluster
      - nodeLabel: volcano.sh/tor
      - nodeLabel: kubernetes.io/hostname
"#);
    let d = config.network_topology_discovery.expect("discovery on");
    assert_eq!(
        d.label_levels,
        [
            vec!["nvidia.com/gpu.clique", "example.com/rack"],
            // Volcano's order is highest first, ending with the node-level label.
            vec!["volcano.sh/tor", "volcano.sh/hypercluster"],
        ]
    );
    assert_eq!(d.interval, Duration::from_secs(30));
}

#[test]
fn network_topology_discovery_refuses_what_it_cannot_honour() {
    let err = |text: &str| parse(text, None).unwrap_err().to_string();
    assert!(
        err("actions: allocate\nnetworkTopologyDiscovery:\n- source: ufm\n")
            .contains("discovery source \"ufm\" is not supported")
    );
    assert!(err("actions: allocate\nnetworkTopologyDiscovery:\n- source: label\n  config:\n    labels: [a, a]\n")
        .contains("node label \"a\" is listed twice"));
    assert!(
        err("actions: allocate\nnetworkTopologyDiscovery:\n- source: label\n  config: {}\n")
            .contains("lists no labels")
    );
    assert!(err("actions: allocate\nnetworkTopologyDiscovery:\n- source: label\n  config:\n    lables: [a]\n")
        .contains("unknown key \"lables\""));
}

/// fairshare's `maxWait` (aging against starvation) is a Go duration kept as its text; `0`
/// (off, the default) is allowed, written as a number or a string.
#[test]
fn fairshare_max_wait_is_a_duration() {
    let config = |value: &str| {
        ok(&format!(
            "actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: fairshare\n    arguments:\n      maxWait: {value}\n"
        ))
    };
    let fairshare = |c: &SchedulerConfig| c.tiers[0].plugins[1].arguments.clone();
    for (value, text) in [("30m", "30m"), ("2h", "2h"), ("0", "0"), ("\"0s\"", "0s")] {
        let c = config(value);
        assert_eq!(fairshare(&c).get_str("maxWait"), Some(text), "{value}");
        assert!(c.warnings.is_empty(), "{value}: {:?}", c.warnings);
    }
}
