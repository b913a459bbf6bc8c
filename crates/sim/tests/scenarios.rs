//! Runs every scenario in `scenarios/` (one test each) with the real scheduler.

use std::path::{Path, PathBuf};

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn check(relative: &str) {
    let path = scenarios_dir().join(relative);
    let text = std::fs::read_to_string(&path).unwrap();
    let scenario = caldera_sim::scenario::load(&text, &format!("scenarios/{relative}"))
        .unwrap_or_else(|e| panic!("{e}"));
    let (outcome, _) = scenario.run().unwrap_or_else(|e| panic!("{e}"));
    assert!(outcome.passed(), "\n{outcome}");
}

macro_rules! scenarios {
    ($($test:ident => $file:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check($file);
            }
        )*

        /// Every scenario file has a test above, so none is skipped silently.
        #[test]
        fn every_scenario_file_has_a_test() {
            let listed: std::collections::BTreeSet<&str> = [$($file),*].into_iter().collect();
            let mut missing = Vec::new();
            let mut dirs = vec![scenarios_dir()];
            while let Some(dir) = dirs.pop() {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        dirs.push(path);
                    } else if path.extension().is_some_and(|e| e == "yaml") {
                        let rel = path.strip_prefix(scenarios_dir()).unwrap().to_string_lossy().replace('\\', "/");
                        if !listed.contains(rel.as_str()) {
                            missing.push(rel);
                        }
                    }
                }
            }
            assert!(missing.is_empty(), "scenarios without a test: {missing:?}");
        }
    };
}

scenarios! {
    autoscaler_failed_request_retried => "autoscaler/failed-request-retried.yaml",
    autoscaler_max_wait => "autoscaler/max-wait.yaml",
    autoscaler_queue_blocked_no_request => "autoscaler/queue-blocked-no-request.yaml",
    autoscaler_seed1_scale_up => "autoscaler/seed1-scale-up.yaml",
    autoscaler_timeout_waits_for_nodes => "autoscaler/timeout-waits-for-nodes.yaml",
    autoscaler_topology_one_island => "autoscaler/topology-one-island.yaml",
    autoscaler_two_gangs_own_nodes => "autoscaler/two-gangs-own-nodes.yaml",
    workloads_job_opt_out => "workloads/job-opt-out.yaml",
    workloads_job_podgroup_deleted_with_job => "workloads/job-podgroup-deleted-with-job.yaml",
    workloads_job_seed1_indexed => "workloads/job-seed1-indexed.yaml",
    workloads_job_scaled_down => "workloads/job-scaled-down.yaml",
    workloads_job_seed2_no_deadlock => "workloads/job-seed2-no-deadlock.yaml",
    workloads_native_basic_one_by_one => "workloads/native-basic-one-by-one.yaml",
    workloads_native_gang_waits_whole => "workloads/native-gang-waits-whole.yaml",
    workloads_lws_seed2_no_deadlock => "workloads/lws-seed2-no-deadlock.yaml",
    workloads_lws_opt_out => "workloads/lws-opt-out.yaml",
    workloads_lws_scaled_down => "workloads/lws-scaled-down.yaml",
    workloads_jobset_driver_and_workers_one_gang => "workloads/jobset-driver-and-workers-one-gang.yaml",
    workloads_jobset_podgroup_deleted_with_jobset => "workloads/jobset-podgroup-deleted-with-jobset.yaml",
    workloads_jobset_gang_per_replicated_job => "workloads/jobset-gang-per-replicated-job.yaml",
    workloads_replicaset_scale_and_replace => "workloads/replicaset-scale-and-replace.yaml",
    workloads_replicaset_adopts_running_pods => "workloads/replicaset-adopts-running-pods.yaml",
    workloads_deployment_runs_a_replicaset => "workloads/deployment-runs-a-replicaset.yaml",
    dra_allocation_mode_all => "dra/allocation-mode-all.yaml",
    dra_cel_error_unallocatable => "dra/cel-error-unallocatable.yaml",
    dra_cel_memory_capacity => "dra/cel-memory-capacity.yaml",
    dra_cel_product_name => "dra/cel-product-name.yaml",
    dra_device_in_use_never_reused => "dra/device-in-use-never-reused.yaml",
    dra_extended_resource_bridge => "dra/extended-resource-bridge.yaml",
    dra_first_available_fallback => "dra/first-available-fallback.yaml",
    dra_gang_one_node_four_free => "dra/gang-one-node-four-free.yaml",
    dra_gang_short_of_devices => "dra/gang-short-of-devices.yaml",
    dra_match_attribute_clique => "dra/match-attribute-clique.yaml",
    dra_preempt_frees_devices => "dra/preempt-frees-devices.yaml",
    dra_queue_capability_counts_devices => "dra/queue-capability-counts-devices.yaml",
    dra_shared_claim => "dra/shared-claim.yaml",
    dra_shared_gpu_quarter_gang => "dra/shared-gpu-quarter-gang.yaml",
    dra_mig_partitions_counters => "dra/mig-partitions-counters.yaml",
    dra_distinct_attribute => "dra/distinct-attribute.yaml",
    dra_preempt_frees_a_share => "dra/preempt-frees-a-share.yaml",
    binpack_keeps_nodes_whole => "binpack-keeps-nodes-whole.yaml",
    enqueue_admission => "enqueue-admission.yaml",
    gang_spreads_without_topology => "gang-spreads-without-topology.yaml",
    gang_timeout => "gang-timeout.yaml",
    gate_own_affinity => "gate-own-affinity.yaml",
    gate_seed1_partial_gang => "gate-seed1-partial-gang.yaml",
    gate_seed2_no_deadlock => "gate-seed2-no-deadlock.yaml",
    gate_stream_racing_gang => "gate-stream-racing-gang.yaml",
    fairshare_past_use_goes_last => "fairshare/past-use-goes-last.yaml",
    fairshare_tree_sibling_past_use => "fairshare/tree-sibling-past-use.yaml",
    fairshare_capacity_past_use_over_deserved => "fairshare/capacity-past-use-over-deserved.yaml",
    fairshare_half_life_zero_is_todays_split => "fairshare/half-life-zero-is-todays-split.yaml",
    fairshare_off_is_todays_split => "fairshare/off-is-todays-split.yaml",
    fairshare_usage_halves_over_a_half_life => "fairshare/usage-halves-over-a-half-life.yaml",
    fairshare_max_wait_holds_room_for_a_starved_gang => "fairshare/max-wait-holds-room-for-a-starved-gang.yaml",
    fairshare_max_wait_lifts_the_deserved_share => "fairshare/max-wait-lifts-the-deserved-share.yaml",
    fairshare_max_wait_gang_past_its_share_behind_two_streams => "fairshare/max-wait-gang-past-its-share-behind-two-streams.yaml",
    fairshare_max_wait_starts_a_64_gpu_gang_behind_a_stream => "fairshare/max-wait-starts-a-64-gpu-gang-behind-a-stream.yaml",
    fairshare_no_max_wait_gang_starves => "fairshare/no-max-wait-gang-starves.yaml",
    fairshare_min_runtime_annotation => "fairshare/min-runtime-annotation.yaml",
    fairshare_tenant_burst_does_not_pass => "fairshare/tenant-burst-does-not-pass.yaml",
    fairshare_no_tenant_key_burst_passes => "fairshare/no-tenant-key-burst-passes.yaml",
    hierarchy_cycle_reported => "hierarchy/cycle-reported.yaml",
    hierarchy_guarantee_kept => "hierarchy/guarantee-kept.yaml",
    hierarchy_idle_to_sibling_first => "hierarchy/idle-to-sibling-first.yaml",
    hierarchy_leaf_only_jobs => "hierarchy/leaf-only-jobs.yaml",
    hierarchy_order_by_parent_share => "hierarchy/order-by-parent-share.yaml",
    hierarchy_parent_capability => "hierarchy/parent-capability.yaml",
    hierarchy_proportion_refuses_parent => "hierarchy/proportion-refuses-parent.yaml",
    hierarchy_reclaim_keeps_path_deserved => "hierarchy/reclaim-keeps-path-deserved.yaml",
    hierarchy_reclaim_sibling_before_cousin => "hierarchy/reclaim-sibling-before-cousin.yaml",
    hierarchy_reclaim_under_parent_at_capability => "hierarchy/reclaim-under-parent-at-capability.yaml",
    interpod_affinity_zone => "interpod-affinity-zone.yaml",
    interpod_existing_anti_affinity => "interpod-existing-anti-affinity.yaml",
    interpod_existing_preferred_affinity => "interpod-existing-preferred-affinity.yaml",
    interpod_namespace_selector => "interpod-namespace-selector.yaml",
    interpod_one_per_node => "interpod-one-per-node.yaml",
    podgroup_arrives_late => "podgroup-arrives-late.yaml",
    predicates_basic => "predicates-basic.yaml",
    consolidate_seed2_equal_priority => "consolidate/seed2-equal-priority.yaml",
    consolidate_moved_pod_fits_nowhere => "consolidate/moved-pod-fits-nowhere.yaml",
    consolidate_disruption_budget_forbids => "consolidate/disruption-budget-forbids.yaml",
    consolidate_gang_moves_whole => "consolidate/gang-moves-whole.yaml",
    consolidate_no_consolidate_respected => "consolidate/no-consolidate-respected.yaml",
    consolidate_minimum_runtime_respected => "consolidate/minimum-runtime-respected.yaml",
    preempt_defragments => "preempt-defragments.yaml",
    preempt_exact_victims_two_node_gangs => "preempt-exact-victims-two-node-gangs.yaml",
    preempt_waits_for_whole_gang => "preempt-waits-for-whole-gang.yaml",
    preempt_free_plus_emptied_node => "preempt-free-plus-emptied-node.yaml",
    preempt_held_room_higher_priority => "preempt-held-room-higher-priority.yaml",
    preempt_keeps_gangs_whole => "preempt-keeps-gangs-whole.yaml",
    preempt_lowest_whole_gangs => "preempt-lowest-whole-gangs.yaml",
    preempt_no_thrash => "preempt-no-thrash.yaml",
    preempt_respects_disruption_budget => "preempt-respects-disruption-budget.yaml",
    preempt_victim_anti_affinity => "preempt-victim-anti-affinity.yaml",
    preemption_policy_never => "preemption-policy-never.yaml",
    priority_first => "priority-first.yaml",
    proportion_gang_larger_than_deserved_waits => "proportion-gang-larger-than-deserved-waits.yaml",
    queue_weighted_share => "queue-weighted-share.yaml",
    reclaim_not_reclaimable => "reclaim-not-reclaimable.yaml",
    reclaim_whole_gang => "reclaim-whole-gang.yaml",
    scheduling_gates => "scheduling-gates.yaml",
    seed1_partial_gang => "seed1-partial-gang.yaml",
    seed2_fragmentation => "seed2-fragmentation.yaml",
    seed2_no_deadlock => "seed2-no-deadlock.yaml",
    spread_schedule_anyway => "spread-schedule-anyway.yaml",
    spread_zones_hard => "spread-zones-hard.yaml",
    topology_discovery_from_labels => "topology/discovery-from-labels.yaml",
    topology_enqueue_refuses_impossible => "topology/enqueue-refuses-impossible.yaml",
    topology_hard_within_rack => "topology/hard-within-rack.yaml",
    topology_highest_tier_name => "topology/highest-tier-name.yaml",
    resource_claim_not_found => "resource-claim-not-found.yaml",
    topology_member_selectors => "topology/member-selectors.yaml",
    topology_preempt_empties_one_rack => "topology/preempt-empties-one-rack.yaml",
    topology_running_members_pin => "topology/running-members-pin.yaml",
    topology_soft_spans_only_when_needed => "topology/soft-spans-only-when-needed.yaml",
    topology_sub_group_cannot_fit => "topology/sub-group-cannot-fit.yaml",
    topology_sub_groups_each_in_a_domain => "topology/sub-groups-each-in-a-domain.yaml",
    topology_sub_groups_min_sub_groups => "topology/sub-groups-min-sub-groups.yaml",
    topology_sub_groups_volcano_master_workers => "topology/sub-groups-volcano-master-workers.yaml",
    topology_tier2_one_spine => "topology/tier2-one-spine.yaml",
    volumes_local_pv_pins_node => "volumes/local-pv-pins-node.yaml",
    volumes_missing_claim_holds_gang => "volumes/missing-claim-holds-gang.yaml",
    volumes_read_write_once_pod => "volumes/read-write-once-pod.yaml",
    volumes_wait_for_first_consumer_zones => "volumes/wait-for-first-consumer-zones.yaml",
    // The simulator's own scenarios.
    sim_gang_lifecycle => "sim/gang-lifecycle.yaml",
    sim_init_containers_count => "sim/init-containers-count.yaml",
    sim_missing_queue => "sim/missing-queue.yaml",
}

#[test]
fn bundled_example_is_the_seed1_scenario_and_passes() {
    let original =
        std::fs::read_to_string(scenarios_dir().join("seed1-partial-gang.yaml")).unwrap();
    assert_eq!(
        caldera_sim::BUNDLED_EXAMPLE,
        original,
        "copy scenarios/seed1-partial-gang.yaml to crates/sim/bundled/"
    );
    let scenario = caldera_sim::scenario::load(
        caldera_sim::BUNDLED_EXAMPLE,
        caldera_sim::BUNDLED_EXAMPLE_NAME,
    )
    .unwrap();
    let (outcome, _) = scenario.run().unwrap();
    assert!(outcome.passed(), "{outcome}");
}

/// A failed ProvisioningRequest is reported once per attempt: the condition waiting for the
/// retry does not change (and so writes no event) every session.
#[test]
fn a_failed_request_is_reported_once_per_attempt() {
    let path = scenarios_dir().join("autoscaler/failed-request-retried.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let scenario = caldera_sim::scenario::load(&text, "failed-request-retried.yaml").unwrap();
    let (outcome, sim) = scenario.run().unwrap();
    assert!(outcome.passed(), "\n{outcome}");
    let failed: Vec<_> = sim
        .events()
        .iter()
        .filter(|e| e.event.reason == "ProvisioningFailed")
        .collect();
    assert_eq!(failed.len(), 2, "{failed:#?}");
    assert!(failed.iter().all(|e| e.event.warning));
}
