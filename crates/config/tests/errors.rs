//! Bad configs and the exact one-line error each must produce.

use std::path::Path;

use caldera_config::{parse, ConfigError};

/// Parses `text` as if read from `bad.yaml` and checks the whole error message.
fn check(name: &str, text: &str, expected: &str) {
    match parse(text, Some(Path::new("bad.yaml"))) {
        Ok(config) => panic!(
            "{name}: parsed, expected {expected:?}; warnings {:?}",
            config.warnings
        ),
        Err(error) => assert_eq!(error.to_string(), expected, "{name}"),
    }
}

const PLUGIN_KEYS: &str = "name, arguments, enableJobOrder, enableHierarchy, enableJobReady, \
enableJobPipelined, enableTaskOrder, enablePreemptable, enableReclaimable, enablePreemptive, \
enableQueueOrder, enabledClusterOrder, enablePredicate, enableBestNode, enableNodeOrder, \
enableTargetJob, enableReservedNodes, enableJobEnqueued, enabledVictim, enableJobStarving, \
enabledOverused, enabledAllocatable, enabledHyperNodeOrder, enabledSubJobReady, \
enabledSubJobPipelined, enabledSubJobOrder, enabledHyperNodeGradient";

const SUPPORTED: &str =
    "priority, gang, conformance, overcommit, drf, predicates, proportion, nodeorder, binpack, fgd, capacity, network-topology-aware, fairshare";

#[test]
fn bad_configs_name_file_line_column_and_key() {
    let plugin_keys_error = format!(
        "bad.yaml:5:5: tiers[0].plugins[0].enableJobOrdr: unknown key \"enableJobOrdr\" in a plugin option (did you mean \"enableJobOrder\"?); known keys: {PLUGIN_KEYS}"
    );
    let cases: Vec<(&str, &str, String)> = vec![
        (
            "unknown action",
            "actions: \"enqueue, alocate, backfill\"\n",
            "bad.yaml:1:20: actions: unknown action \"alocate\" (did you mean \"allocate\"?); known actions: enqueue, allocate, backfill, preempt, reclaim, consolidate (Volcano's shuffle is not implemented yet)".into(),
        ),
        (
            "unimplemented action",
            "actions: \"enqueue, allocate, shuffle\"\n",
            "bad.yaml:1:30: actions: action \"shuffle\" is a Volcano action that Caldera does not implement yet; implemented actions: enqueue, allocate, backfill, preempt, reclaim, consolidate".into(),
        ),
        (
            "action listed twice",
            "actions: \"enqueue, allocate, allocate\"\n",
            "bad.yaml:1:30: actions: action \"allocate\" is listed twice".into(),
        ),
        (
            "stray comma in actions",
            "actions: \"enqueue,, allocate\"\n",
            "bad.yaml:1:10: actions: empty action name in \"enqueue,, allocate\" (a stray comma?)".into(),
        ),
        (
            "missing actions",
            "tiers: []\n",
            "bad.yaml:1:1: actions: missing required key; list the actions to run, e.g. actions: \"enqueue, allocate, backfill\"".into(),
        ),
        (
            "unknown plugin",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n  - name: gnag\n",
            format!("bad.yaml:5:11: tiers[0].plugins[1].name: unknown plugin \"gnag\" (did you mean \"gang\"?); supported plugins: {SUPPORTED}"),
        ),
        (
            "volcano plugin caldera lacks",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: tdm\n",
            format!("bad.yaml:4:11: tiers[0].plugins[0].name: plugin \"tdm\" is a Volcano plugin not supported by Caldera; supported plugins: {SUPPORTED}"),
        ),
        (
            "capacity and proportion together",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: proportion\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n",
            "bad.yaml:6:5: tiers[1].plugins[0]: the capacity and proportion plugins cannot both be enabled (proportion is at tiers[0].plugins[0]): they are alternative queue-share plugins; keep one".into(),
        ),
        (
            "capacity reclaim levels Caldera lacks",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: capacity\n    arguments:\n      ancestorReclaimLevel: 2\n",
            "bad.yaml:6:7: tiers[0].plugins[0].arguments: ancestorReclaimLevel 2 is not supported: Volcano's level 2 lets a queue at its deserved share reclaim while one of its 2 nearest ancestors is below its own, which Caldera does not do; with hierarchical queues Caldera's reclaim keeps every queue on a victim's path below the reclaimer's family at or above its deserved share, whatever the level (docs/queues.md); remove the argument".into(),
        ),
        (
            "capacity reclaim level 0 with the tree",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n    arguments:\n      ancestorReclaimLevel: 0\n",
            "bad.yaml:7:7: tiers[0].plugins[0].arguments: ancestorReclaimLevel 0 is not supported: Volcano's 0 checks the victim's own queue only; with hierarchical queues Caldera's reclaim keeps every queue on a victim's path below the reclaimer's family at or above its deserved share, whatever the level (docs/queues.md); remove the argument".into(),
        ),
        (
            "duplicate plugin across tiers",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: gang\n",
            "bad.yaml:6:11: tiers[1].plugins[0].name: plugin \"gang\" is listed twice (first at tiers[0].plugins[0])".into(),
        ),
        (
            "wrong argument type",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n      binpack.weight: ten\n",
            "bad.yaml:6:23: tiers[0].plugins[0].arguments[\"binpack.weight\"]: expected an integer, got \"ten\"".into(),
        ),
        (
            "negative weight",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: nodeorder\n    arguments: {leastrequested.weight: \"-1\"}\n",
            "bad.yaml:5:40: tiers[0].plugins[0].arguments[\"leastrequested.weight\"]: expected an integer of at least 0, got \"-1\"".into(),
        ),
        (
            "float argument not a number",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: overcommit\n    arguments:\n      overcommit-factor: lots\n",
            "bad.yaml:6:26: tiers[0].plugins[0].arguments.overcommit-factor: expected a number, got \"lots\"".into(),
        ),
        (
            "unknown argument",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n      binpack.wieght: 1\n",
            "bad.yaml:6:7: tiers[0].plugins[0].arguments[\"binpack.wieght\"]: unknown argument \"binpack.wieght\" for the binpack plugin (did you mean \"binpack.weight\"?); known arguments: binpack.weight, binpack.cpu, binpack.memory, binpack.resources, binpack.resources.<resource>".into(),
        ),
        (
            "consolidate argument misspelt",
            "actions: allocate, consolidate\nconfigurations:\n- name: consolidate\n  arguments:\n    maxPod: 3\n",
            "bad.yaml:5:5: configurations[0].arguments.maxPod: unknown key \"maxPod\" in the consolidate action's arguments (did you mean \"maxPods\"?); known keys: minRuntime, maxPods, maxGPUs, holdTimeout".into(),
        ),
        (
            "consolidate maxPods zero",
            "actions: allocate, consolidate\nconfigurations:\n- name: consolidate\n  arguments:\n    maxPods: 0\n",
            "bad.yaml:5:14: configurations[0].arguments.maxPods: expected an integer of at least 1, got 0".into(),
        ),
        (
            "consolidate minRuntime not a duration",
            "actions: allocate, consolidate\nconfigurations:\n- name: consolidate\n  arguments:\n    minRuntime: soon\n",
            "bad.yaml:5:17: configurations[0].arguments.minRuntime: invalid duration \"soon\": expected a number before each unit".into(),
        ),
        (
            "argument to a plugin that takes none",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    arguments:\n      foo: 1\n",
            "bad.yaml:6:7: tiers[0].plugins[0].arguments.foo: unknown argument \"foo\": the gang plugin takes no arguments".into(),
        ),
        (
            "misspelt flag",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrdr: true\n",
            plugin_keys_error,
        ),
        (
            "flag not a boolean",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrder: yes please\n",
            "bad.yaml:5:21: tiers[0].plugins[0].enableJobOrder: expected true or false, got \"yes please\"".into(),
        ),
        (
            "missing plugin name",
            "actions: enqueue\ntiers:\n- plugins:\n  - enablePreemptable: false\n",
            "bad.yaml:4:5: tiers[0].plugins[0].name: missing required key; every plugin option needs a `name`".into(),
        ),
        (
            "tiers not a list",
            "actions: enqueue\ntiers:\n  plugins: []\n",
            "bad.yaml:3:3: tiers: expected a list of tiers, each a mapping with `plugins`, got a mapping".into(),
        ),
        (
            "duration without unit",
            "actions: enqueue\nschedulePeriod: 5\n",
            "bad.yaml:2:17: schedulePeriod: expected a duration such as \"1s\", \"500ms\" or \"1m30s\", got 5".into(),
        ),
        (
            "bad duration unit",
            "actions: enqueue\nschedulePeriod: 5sec\n",
            "bad.yaml:2:17: schedulePeriod: invalid duration \"5sec\": unknown unit \"sec\" (use ns, us, ms, s, m or h)".into(),
        ),
        (
            "empty value points at its key",
            "actions: enqueue\nschedulePeriod:\n",
            "bad.yaml:2:1: schedulePeriod: expected a duration such as \"1s\", \"500ms\" or \"1m30s\", got null".into(),
        ),
        (
            "zero timeout",
            "actions: enqueue\ngangScheduleTimeout: 0s\n",
            "bad.yaml:2:22: gangScheduleTimeout: must be longer than zero, got \"0s\"".into(),
        ),
        (
            "negative bindConcurrency",
            "actions: enqueue\nbindConcurrency: -4\n",
            "bad.yaml:2:18: bindConcurrency: expected an integer of at least 1, got -4".into(),
        ),
        (
            "podScheduledEvents not a boolean",
            "actions: enqueue\npodScheduledEvents: \"no\"\n",
            "bad.yaml:2:21: podScheduledEvents: expected true or false, got \"no\"".into(),
        ),
        (
            "bindConcurrency not an integer",
            "actions: enqueue\nbindConcurrency: 2.5\n",
            "bad.yaml:2:18: bindConcurrency: expected an integer, got 2.5".into(),
        ),
        (
            "duplicate key",
            "actions: enqueue\nactions: allocate\n",
            "bad.yaml:2:1: actions: duplicate key \"actions\"".into(),
        ),
        (
            "unknown top-level key",
            "actions: enqueue\nschedulerName: [caldera]\n",
            "bad.yaml:2:1: schedulerName: unknown key \"schedulerName\" at the top level (did you mean \"schedulerNames\"?); known keys: actions, tiers, configurations, metrics, schedulerNames, schedulePeriod, sessionDebounce, gangScheduleTimeout, bindConcurrency, autoscaler, podScheduledEvents, autoGroup, networkTopologyDiscovery".into(),
        ),
        (
            "overcommit factor at the top level",
            "actions: enqueue\novercommitFactor: 1.2\n",
            "bad.yaml:2:1: overcommitFactor: not a top-level key: set `overcommit-factor` in the arguments of the overcommit plugin".into(),
        ),
        (
            "empty scheduler name list",
            "actions: enqueue\nschedulerNames: []\n",
            "bad.yaml:2:17: schedulerNames: empty list: Caldera would schedule no pods; list at least one scheduler name".into(),
        ),
        (
            "plugins that cannot be combined",
            "actions: enqueue\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n  - name: proportion\n",
            "bad.yaml:5:22: tiers[0].plugins[0].enableHierarchy: drf with enableHierarchy: true cannot be combined with the proportion plugin".into(),
        ),
        (
            "configuration of an unknown action",
            "actions: enqueue\nconfigurations:\n- name: allocte\n",
            "bad.yaml:3:9: configurations[0].name: unknown action \"allocte\" (did you mean \"allocate\"?); known actions: enqueue, allocate, backfill, preempt, reclaim, consolidate, shuffle".into(),
        ),
        (
            "document not a mapping",
            "- actions\n",
            "bad.yaml:1:1: expected a mapping of config keys, got a list".into(),
        ),
        (
            "empty document",
            "# nothing here\n",
            "bad.yaml: the config is empty; it needs at least `actions`, e.g. actions: \"enqueue, allocate, backfill\"".into(),
        ),
        (
            "YAML syntax error: unclosed flow list",
            "actions: enqueue\ntiers: [\n",
            "bad.yaml:3:1: YAML syntax error: did not find expected node content, while parsing a flow node".into(),
        ),
        (
            "YAML syntax error: unterminated quote",
            "actions: \"enqueue\ntiers:\n",
            "bad.yaml:3:1: YAML syntax error: found unexpected end of stream, while scanning a quoted scalar at line 1 column 10".into(),
        ),
    ];
    assert!(cases.len() >= 12);
    for (name, text, expected) in &cases {
        check(name, text, expected);
    }
}

#[test]
fn errors_without_a_file_name_the_line() {
    let error = parse("actions: enqueue\nbindConcurrency: 0\n", None).unwrap_err();
    assert_eq!(
        error.to_string(),
        "line 2, column 18: bindConcurrency: expected an integer of at least 1, got 0"
    );
    assert_eq!((error.line(), error.column()), (Some(2), Some(18)));
    assert_eq!(error.key_path(), Some("bindConcurrency"));
}

#[test]
fn unreadable_file_is_a_read_error() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/no-such-config.yaml");
    let error = caldera_config::load(&path).unwrap_err();
    assert!(matches!(error, ConfigError::Read { .. }), "{error:?}");
    assert!(error
        .to_string()
        .starts_with(&format!("{}: cannot read the config: ", path.display())));
}

/// fairshare: every bad value is an error naming its argument (file, line and key path), and
/// arguments not implemented yet are refused rather than ignored.
#[test]
fn fairshare_bad_arguments_are_named() {
    let fair = |args: &str| {
        format!("actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: fairshare\n    arguments:\n      {args}\n")
    };
    let cases = [
        ("halfLife: 7days", "bad.yaml:7:17: tiers[0].plugins[1].arguments.halfLife: "),
        ("halfLife: -1h", "bad.yaml:7:17: tiers[0].plugins[1].arguments.halfLife: "),
        ("kValue: -0.5", "bad.yaml:7:15: tiers[0].plugins[1].arguments.kValue: kValue must not be negative, got -0.5"),
        ("kValue: lots", "bad.yaml:7:15: tiers[0].plugins[1].arguments.kValue: expected a number"),
        ("usageWritePeriod: 0s", "bad.yaml:7:25: tiers[0].plugins[1].arguments.usageWritePeriod: must be longer than zero"),
        ("resourceWeights: {cpu: -1}", "tiers[0].plugins[1].arguments.resourceWeights.cpu: the weight of cpu must not be negative, got -1"),
        ("resourceWeights: gpu", "tiers[0].plugins[1].arguments.resourceWeights: expected a mapping of resource names to weights"),
        ("maxWait: 30min", "bad.yaml:7:16: tiers[0].plugins[1].arguments.maxWait: "),
        ("maxWait: -1h", "bad.yaml:7:16: tiers[0].plugins[1].arguments.maxWait: "),
        ("maxWait: [1h]", "bad.yaml:7:16: tiers[0].plugins[1].arguments.maxWait: "),
        ("tenantKey: Team/x", "bad.yaml:7:18: tiers[0].plugins[1].arguments.tenantKey: \"Team/x\" is neither `namespace` nor a label key"),
        ("tenantKey: \"-team\"", "tiers[0].plugins[1].arguments.tenantKey: \"-team\" is neither `namespace` nor a label key"),
        ("tenantKey: 3", "tiers[0].plugins[1].arguments.tenantKey: expected `namespace` or a label key"),
        ("maxWiat: 1h", "unknown argument \"maxWiat\" for the fairshare plugin (did you mean \"maxWait\"?)"),
        ("window: 0s", "bad.yaml:7:15: tiers[0].plugins[1].arguments.window: must be longer than zero"),
        ("window: 1week", "bad.yaml:7:15: tiers[0].plugins[1].arguments.window: "),
        ("halfLive: 24h", "unknown argument \"halfLive\" for the fairshare plugin (did you mean \"halfLife\"?)"),
    ];
    for (args, expected) in cases {
        let error = parse(&fair(args), Some(Path::new("bad.yaml")))
            .expect_err(args)
            .to_string();
        assert!(error.contains(expected), "{args}: {error}");
    }
    // With capacity, flat or as a tree, usage orders what is handed out beyond deserved.
    for capacity in [
        "  - name: capacity\n",
        "  - name: capacity\n    enableHierarchy: true\n",
    ] {
        let config = parse(
            &format!("actions: allocate\ntiers:\n- plugins:\n{capacity}  - name: fairshare\n    arguments: {{halfLife: 168h, kValue: 2}}\n"),
            None,
        )
        .unwrap_or_else(|e| panic!("fairshare with {capacity}: {e}"));
        let names: Vec<&str> = config.tiers[0]
            .plugins
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["capacity", "fairshare"]);
        assert_eq!(
            config.tiers[0].plugins[1].arguments.get_f64("kValue"),
            Some(2.0)
        );
    }
    let error = parse(
        "actions: allocate\ntiers:\n- plugins:\n  - name: fairshare\n",
        None,
    )
    .expect_err("fairshare alone")
    .to_string();
    assert!(
        error.contains("adjusts the proportion or capacity plugin's split; enable one of them too"),
        "{error}"
    );
    let config = parse(
        "actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: fairshare\n    arguments: {halfLife: 168h, kValue: 1, usageWritePeriod: 1m, resourceWeights: {nvidia.com/gpu: 1, cpu: 0.1}}\n",
        None,
    )
    .expect("good fairshare arguments");
    let args = &config.tiers[0].plugins[1].arguments;
    assert_eq!(args.get_str("halfLife"), Some("168h"));
    assert_eq!(args.get_f64("resourceWeights.cpu"), Some(0.1));
    assert_eq!(args.get_f64("resourceWeights.nvidia.com/gpu"), Some(1.0));
    for key in ["namespace", "team", "example.com/team"] {
        let config = parse(
            &format!("actions: allocate\ntiers:\n- plugins:\n  - name: proportion\n  - name: fairshare\n    arguments: {{tenantKey: {key}}}\n"),
            None,
        )
        .expect(key);
        assert_eq!(
            config.tiers[0].plugins[1].arguments.get_str("tenantKey"),
            Some(key)
        );
    }
}
