//! examples/: every gang can form, every pod names a scheduler Caldera serves, and the three
//! examples show what the docs say they show.

use crate::manifests::{
    all_of, documents_in, objects, pod_specs, read, typed, yaml_files, Document,
};
use caldera_api::{PodGroup, Queue, TopologyMode};
use serde_json::Value;
use std::collections::BTreeMap;

const TRAINING: &str = "examples/training-tp8.yaml";
const INFERENCE: &str = "examples/inference-tp4-statefulset.yaml";
const FAIR_SHARE: &str = "examples/fair-share-queues.yaml";

/// The group a pod (template) names, by the keys Caldera reads, in SPEC §2's order.
fn group_of(metadata: &Value) -> Option<String> {
    caldera_api::GROUP_NAME_KEYS
        .iter()
        .find_map(|(kind, key)| {
            let map = match kind {
                caldera_api::GroupKeyKind::Annotation => "annotations",
                caldera_api::GroupKeyKind::Label => "labels",
            };
            metadata.get(map)?.get(key)?.as_str()
        })
        .map(str::to_string)
}

fn scheduler_of(spec: &Value) -> &str {
    spec.get("schedulerName")
        .and_then(Value::as_str)
        .unwrap_or("default-scheduler")
}

/// GPUs one pod asks for (limits stand in for requests of extended resources).
fn gpus(spec: &Value) -> i64 {
    let containers = spec
        .get("containers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    containers
        .iter()
        .map(|c| {
            let resources = &c["resources"];
            let quantity = resources["requests"]
                .get("nvidia.com/gpu")
                .or_else(|| resources["limits"].get("nvidia.com/gpu"));
            match quantity {
                Some(Value::String(s)) => s.parse().unwrap_or(0),
                Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
                _ => 0,
            }
        })
        .sum()
}

fn podgroups(documents: &[Document]) -> BTreeMap<String, PodGroup> {
    all_of(documents, "PodGroup")
        .into_iter()
        .map(|d| {
            let pg: PodGroup = typed(d).unwrap_or_else(|e| panic!("{e}"));
            (d.name().to_string(), pg)
        })
        .collect()
}

#[test]
fn every_example_starts_with_a_header_saying_what_it_shows_and_what_to_expect() {
    for file in yaml_files("examples") {
        let text = read(&file);
        let header: Vec<&str> = text.lines().take_while(|l| l.starts_with('#')).collect();
        assert!(
            header.len() >= 3,
            "{file}: start with a comment header saying what it shows"
        );
        let header = header.join("\n");
        for needed in [
            "What it shows",
            "kubectl apply -f",
            "Expect",
            "kubectl get pg,q",
        ] {
            assert!(
                header.contains(needed),
                "{file}: the header should mention {needed:?}"
            );
        }
        assert!(
            header.contains(&file),
            "{file}: the header's kubectl apply should name the file's path"
        );
    }
}

#[test]
fn example_pods_name_a_scheduler_caldera_serves() {
    let names = caldera_config::DEFAULT_SCHEDULER_NAMES;
    let mut pods = 0;
    for document in objects("examples") {
        let Some((_, spec, _)) = pod_specs(&document) else {
            continue;
        };
        pods += 1;
        let scheduler = scheduler_of(spec);
        assert!(
            names.contains(&scheduler),
            "{}: schedulerName {scheduler:?}, but Caldera serves {names:?}",
            document.describe()
        );
    }
    assert!(pods > 0, "no pods or workloads in examples/");
}

#[test]
fn example_podgroups_and_queues_are_caldera_api_objects() {
    for document in objects("examples") {
        match document.kind() {
            "PodGroup" => drop(typed::<PodGroup>(&document).unwrap_or_else(|e| panic!("{e}"))),
            "Queue" => drop(typed::<Queue>(&document).unwrap_or_else(|e| panic!("{e}"))),
            _ => {}
        }
    }
}

/// Every gang in an example can form: each pod's group is defined in the same file, enough
/// pods name each group to reach minMember, and each group's queue exists (in the file, or
/// `default`, which deploy/ ships).
#[test]
fn every_example_gang_can_form() {
    for file in yaml_files("examples") {
        let documents = documents_in(&file);
        let groups = podgroups(&documents);
        let queues: Vec<&str> = all_of(&documents, "Queue")
            .iter()
            .map(|d| d.name())
            .collect();
        let mut members: BTreeMap<String, i64> = BTreeMap::new();
        for document in &documents {
            let Some((metadata, _, count)) = pod_specs(document) else {
                continue;
            };
            if let Some(group) = group_of(metadata) {
                assert!(
                    groups.contains_key(&group),
                    "{}: names PodGroup {group}, which {file} does not define",
                    document.describe()
                );
                *members.entry(group).or_default() += count;
            }
        }
        for (name, pg) in &groups {
            let have = members.get(name).copied().unwrap_or(0);
            assert!(
                have >= i64::from(pg.spec.min_member()),
                "{file}: PodGroup {name} needs {} members, only {have} pods name it",
                pg.spec.min_member()
            );
            let queue = pg.spec.queue_name();
            assert!(
                queue == caldera_api::DEFAULT_QUEUE || queues.contains(&queue),
                "{file}: PodGroup {name} is in queue {queue}, which does not exist"
            );
        }
    }
}

/// A StatefulSet gang needs `podManagementPolicy: Parallel`: with OrderedReady, pod 1 is not
/// created until pod 0 is Ready, and pod 0 waits for its gang, so nothing ever starts.
#[test]
fn statefulset_gangs_create_their_pods_in_parallel() {
    for document in objects("examples") {
        if !document.is("StatefulSet") {
            continue;
        }
        let Some((metadata, _, _)) = pod_specs(&document) else {
            continue;
        };
        if group_of(metadata).is_some() {
            assert_eq!(
                document.value["spec"]["podManagementPolicy"],
                "Parallel",
                "{}",
                document.describe()
            );
        }
    }
}

#[test]
fn training_example_is_the_seed_tp8_job() {
    let documents = documents_in(TRAINING);
    let groups = podgroups(&documents);
    let (name, pg) = groups
        .iter()
        .next()
        .unwrap_or_else(|| panic!("{TRAINING}: no PodGroup"));
    assert_eq!(groups.len(), 1);
    assert_eq!(pg.spec.min_member, Some(8));
    let pods = all_of(&documents, "Pod");
    assert_eq!(pods.len(), 8, "{TRAINING}: eight pods");
    for pod in pods {
        let (metadata, spec, _) = pod_specs(pod).unwrap_or_else(|| panic!("no spec"));
        assert_eq!(
            metadata["labels"][caldera_api::LABEL_VOLCANO_PODGROUP],
            name.as_str(),
            "{}: linked by the Volcano label",
            pod.describe()
        );
        assert_eq!(scheduler_of(spec), "volcano", "{}", pod.describe());
        assert_eq!(gpus(spec), 1, "{}: one GPU", pod.describe());
    }
}

#[test]
fn inference_example_is_a_single_node_tp4_statefulset() {
    let documents = documents_in(INFERENCE);
    let groups = podgroups(&documents);
    assert_eq!(groups.len(), 1);
    let (name, pg) = groups
        .iter()
        .next()
        .unwrap_or_else(|| panic!("{INFERENCE}: no PodGroup"));
    assert_eq!(pg.spec.min_member, Some(4));
    let topology = pg
        .spec
        .topology
        .as_ref()
        .unwrap_or_else(|| panic!("{INFERENCE}: no topology"));
    assert_eq!(topology.mode, TopologyMode::Required);
    assert_eq!(topology.key, "kubernetes.io/hostname");
    let sets = all_of(&documents, "StatefulSet");
    assert_eq!(sets.len(), 1);
    let (metadata, spec, replicas) = pod_specs(sets[0]).unwrap_or_else(|| panic!("no template"));
    assert_eq!(replicas, 4);
    assert_eq!(
        metadata["annotations"][caldera_api::ANNOTATION_GROUP_NAME],
        name.as_str()
    );
    assert_eq!(scheduler_of(spec), "caldera");
    assert_eq!(gpus(spec), 1);
    // RANK from the StatefulSet ordinal: the pod-index label, or the hostname in a script.
    let container = &spec["containers"][0];
    let rank = container["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == "RANK"));
    let from_label = rank.is_some_and(|r| {
        r["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
    });
    let from_hostname = container["command"].to_string().contains("HOSTNAME##*-");
    assert!(
        from_label || from_hostname,
        "{INFERENCE}: RANK should come from the pod index"
    );
}

#[test]
fn fair_share_example_has_two_weighted_queues_with_an_elastic_job_each() {
    let documents = documents_in(FAIR_SHARE);
    let weights: BTreeMap<String, i32> = all_of(&documents, "Queue")
        .into_iter()
        .map(|d| {
            let q: Queue = typed(d).unwrap_or_else(|e| panic!("{e}"));
            (d.name().to_string(), q.spec.weight())
        })
        .collect();
    assert_eq!(
        weights,
        BTreeMap::from([("team-a".to_string(), 1), ("team-b".to_string(), 3)])
    );
    let groups = podgroups(&documents);
    for queue in weights.keys() {
        let elastic: Vec<&String> = groups
            .iter()
            .filter(|(_, pg)| pg.spec.queue_name() == queue)
            .map(|(name, _)| name)
            .collect();
        assert_eq!(elastic.len(), 1, "one job in queue {queue}");
        let pg = &groups[elastic[0]];
        let members: i64 = documents
            .iter()
            .filter_map(pod_specs)
            .filter(|(metadata, _, _)| group_of(metadata).as_deref() == Some(elastic[0].as_str()))
            .map(|(_, _, count)| count)
            .sum();
        assert!(
            members > i64::from(pg.spec.min_member()),
            "job {} in {queue} should be elastic: more members ({members}) than minMember",
            elastic[0]
        );
    }
}
