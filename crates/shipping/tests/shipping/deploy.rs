//! deploy/: complete for kustomize, the copies of config/ and crds/ exact, the Deployment as
//! documented.

use crate::manifests::{
    all_of, check_typed, documents_in, find, first_different_line, is_kustomization, objects, read,
    root, typed, yaml_files, Document, CLUSTER_SCOPED,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeSet;

/// The namespace Caldera is installed in.
pub const NAMESPACE: &str = "caldera-system";

/// The file holding the copy of crds/caldera-crds.yaml.
const CRDS_COPY: &str = "deploy/crds.yaml";
/// The file holding the ConfigMap with the copy of config/scheduler.yaml.
const CONFIGMAP_FILE: &str = "deploy/configmap.yaml";
/// The line after which the ConfigMap holds the config, indented.
const CONFIGMAP_KEY_LINE: &str = "  scheduler.yaml: |";
/// How the copies are regenerated.
pub const BLESS: &str = "CALDERA_BLESS=1 cargo test -p caldera-shipping";

/// Whether this run rewrites the copies (`CALDERA_BLESS=1`).
pub fn blessing() -> bool {
    std::env::var_os("CALDERA_BLESS").is_some_and(|v| v == "1")
}

/// Every object in deploy/.
pub fn deploy_objects() -> Vec<Document> {
    objects("deploy")
        .into_iter()
        .filter(|d| !d.file.starts_with(GATE_DIR))
        .collect()
}

/// Gate mode's overlay of deploy/ (its own kustomization; see gate.rs).
pub const GATE_DIR: &str = "deploy/gate/";

/// The one Deployment, typed.
pub fn deployment(documents: &[Document]) -> Deployment {
    let found = all_of(documents, "Deployment");
    assert_eq!(found.len(), 1, "deploy/ should hold one Deployment");
    typed(found[0]).unwrap_or_else(|e| panic!("{e}"))
}

fn pod_spec(deployment: &Deployment) -> &PodSpec {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .unwrap_or_else(|| panic!("the Deployment has no pod template spec"))
}

/// The Deployment's one container.
pub fn container(deployment: &Deployment) -> &Container {
    let containers = &pod_spec(deployment).containers;
    assert_eq!(
        containers.len(),
        1,
        "the Deployment should run one container"
    );
    &containers[0]
}

/// The full command line of the scheduler container.
pub fn command_line(deployment: &Deployment) -> Vec<String> {
    let c = container(deployment);
    c.command
        .iter()
        .flatten()
        .chain(c.args.iter().flatten())
        .cloned()
        .collect()
}

/// The value of `--flag value` or `--flag=value` on a command line.
pub fn flag(command: &[String], name: &str) -> Option<String> {
    let prefix = format!("{name}=");
    command.iter().enumerate().find_map(|(i, arg)| {
        if arg == name {
            command.get(i + 1).cloned()
        } else {
            arg.strip_prefix(&prefix).map(str::to_string)
        }
    })
}

/// `--lease-namespace` of the Deployment.
pub fn lease_namespace(documents: &[Document]) -> String {
    flag(&command_line(&deployment(documents)), "--lease-namespace")
        .unwrap_or_else(|| panic!("the Deployment does not pass --lease-namespace"))
}

/// The Deployment's ServiceAccount, as (namespace, name).
pub fn service_account(documents: &[Document]) -> (String, String) {
    let deployment = deployment(documents);
    let name = pod_spec(&deployment)
        .service_account_name
        .clone()
        .unwrap_or_else(|| panic!("the Deployment names no serviceAccountName"));
    let namespace = deployment
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| panic!("the Deployment has no namespace"));
    find(documents, "ServiceAccount", &name);
    (namespace, name)
}

#[test]
fn every_document_in_deploy_and_examples_has_api_version_kind_and_name() {
    for dir in ["deploy", "examples"] {
        for file in yaml_files(dir) {
            for document in documents_in(&file) {
                let what = format!("{file}, document {}", document.index);
                assert!(!document.api_version().is_empty(), "{what}: no apiVersion");
                assert!(!document.kind().is_empty(), "{what}: no kind");
                if !is_kustomization(&file) {
                    assert!(!document.name().is_empty(), "{what}: no metadata.name");
                }
            }
        }
    }
}

#[test]
fn every_object_in_deploy_and_examples_fits_its_type_without_unknown_fields() {
    let mut problems = Vec::new();
    for dir in ["deploy", "examples"] {
        for document in objects(dir) {
            if let Err(problem) = check_typed(&document) {
                problems.push(problem);
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn kustomization_lists_every_manifest_in_deploy_and_sets_the_release_image() {
    let documents = documents_in("deploy/kustomization.yaml");
    assert_eq!(documents.len(), 1);
    let kustomization = &documents[0].value;
    assert_eq!(
        kustomization["apiVersion"],
        "kustomize.config.k8s.io/v1beta1"
    );
    assert_eq!(kustomization["kind"], "Kustomization");
    let listed: BTreeSet<String> = kustomization["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("kustomization.yaml has no resources list"))
        .iter()
        .map(|r| format!("deploy/{}", r.as_str().unwrap_or_default()))
        .collect();
    let present: BTreeSet<String> = yaml_files("deploy")
        .into_iter()
        .filter(|f| !is_kustomization(f) && !f.starts_with(GATE_DIR))
        .collect();
    assert_eq!(
        listed, present,
        "kustomization.yaml resources vs the files in deploy/"
    );

    let deployment = deployment(&deploy_objects());
    let image = container(&deployment).image.clone().unwrap_or_default();
    let image_name = image.split(':').next().unwrap_or_default();
    let images = kustomization["images"]
        .as_array()
        .unwrap_or_else(|| panic!("kustomization.yaml has no images list"));
    assert_eq!(images.len(), 1);
    assert_eq!(
        images[0]["name"], image_name,
        "kustomization.yaml images[0].name should be the Deployment's image name"
    );
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        images[0]["newTag"], version,
        "the image tag should be the workspace version"
    );
    assert_eq!(
        image,
        format!("{image_name}:{version}"),
        "the Deployment's image should carry the workspace version too"
    );
}

#[test]
fn namespaced_objects_in_deploy_are_all_in_caldera_system() {
    let documents = deploy_objects();
    find(&documents, "Namespace", NAMESPACE);
    for document in &documents {
        if CLUSTER_SCOPED.contains(&document.kind()) {
            assert_eq!(
                document.namespace(),
                None,
                "{}: cluster-scoped",
                document.describe()
            );
        } else {
            assert_eq!(
                document.namespace(),
                Some(NAMESPACE),
                "{}: should be in {NAMESPACE}",
                document.describe()
            );
        }
    }
}

#[test]
fn configmap_scheduler_yaml_is_config_scheduler_yaml_byte_for_byte() {
    let config = read("config/scheduler.yaml");
    if blessing() {
        let text = read(CONFIGMAP_FILE);
        let head_end = text
            .find(&format!("{CONFIGMAP_KEY_LINE}\n"))
            .map(|i| i + CONFIGMAP_KEY_LINE.len() + 1)
            .unwrap_or_else(|| panic!("{CONFIGMAP_FILE} has no line {CONFIGMAP_KEY_LINE:?}"));
        let mut out = text[..head_end].to_string();
        for line in config.lines() {
            if !line.is_empty() {
                out.push_str("    ");
                out.push_str(line);
            }
            out.push('\n');
        }
        std::fs::write(root().join(CONFIGMAP_FILE), out)
            .unwrap_or_else(|e| panic!("writing {CONFIGMAP_FILE}: {e}"));
    }
    let documents = deploy_objects();
    let configmap = find(&documents, "ConfigMap", "caldera-config");
    assert_eq!(configmap.file, CONFIGMAP_FILE);
    let shipped = configmap.value["data"]["scheduler.yaml"]
        .as_str()
        .unwrap_or_else(|| panic!("ConfigMap caldera-config has no data[scheduler.yaml]"));
    if shipped != config {
        let line = first_different_line(shipped, &config);
        panic!(
            "{CONFIGMAP_FILE} data[scheduler.yaml] differs from config/scheduler.yaml \
             (first at line {} of the config). Regenerate it with:\n  {BLESS}",
            line + 1
        );
    }
}

#[test]
fn shipped_configmap_config_parses_without_warnings() {
    let documents = deploy_objects();
    let configmap = find(&documents, "ConfigMap", "caldera-config");
    let text = configmap.value["data"]["scheduler.yaml"]
        .as_str()
        .unwrap_or_default();
    let config = caldera_config::parse(text, Some(std::path::Path::new(CONFIGMAP_FILE)))
        .unwrap_or_else(|e| panic!("the shipped config does not load: {e}"));
    assert!(config.warnings.is_empty(), "{:?}", config.warnings);
}

#[test]
fn crds_in_deploy_are_crds_directory_byte_for_byte() {
    let original = read("crds/caldera-crds.yaml");
    if blessing() {
        std::fs::write(root().join(CRDS_COPY), &original)
            .unwrap_or_else(|e| panic!("writing {CRDS_COPY}: {e}"));
    }
    assert!(
        read(CRDS_COPY) == original,
        "{CRDS_COPY} differs from crds/caldera-crds.yaml. Regenerate it with:\n  {BLESS}"
    );
    let names: Vec<String> = documents_in(CRDS_COPY)
        .iter()
        .map(|d| d.name().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "podgroups.scheduling.volcano.sh",
            "queues.scheduling.volcano.sh",
            "hypernodes.topology.volcano.sh"
        ]
    );
}

#[test]
fn default_queue_ships_with_weight_one() {
    let documents = deploy_objects();
    let queue: caldera_api::Queue = typed(find(&documents, "Queue", caldera_api::DEFAULT_QUEUE))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(queue.spec.weight, Some(1));
}

#[test]
fn deployment_runs_caldera_run_with_the_documented_flags() {
    let documents = deploy_objects();
    let deployment = deployment(&documents);
    let spec = deployment.spec.as_ref().map(|s| s.replicas);
    assert_eq!(spec, Some(Some(2)), "two replicas, one leading");
    assert_eq!(
        command_line(&deployment).join(" "),
        "/caldera run --config /etc/caldera/scheduler.yaml --leader-elect=true --lease-namespace caldera-system"
    );
    let (namespace, account) = service_account(&documents);
    assert_eq!(
        (namespace.as_str(), account.as_str()),
        (NAMESPACE, "caldera")
    );

    // The config file comes from the ConfigMap, through a directory mount (a subPath mount
    // would never see updates, and hot reload would silently not happen).
    let pod = pod_spec(&deployment);
    let c = container(&deployment);
    let config_path = flag(&command_line(&deployment), "--config").unwrap_or_default();
    let (dir, file) = config_path
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("--config {config_path} is not an absolute path"));
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == dir)
        .unwrap_or_else(|| panic!("nothing is mounted at {dir}"));
    assert!(mount.sub_path.is_none(), "no subPath: it blocks hot reload");
    assert_eq!(mount.read_only, Some(true));
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap_or_else(|| panic!("no volume {}", mount.name));
    let configmap = volume
        .config_map
        .as_ref()
        .unwrap_or_else(|| panic!("volume {} is not a ConfigMap", mount.name));
    assert_eq!(configmap.name, "caldera-config");
    let configmap = find(&documents, "ConfigMap", "caldera-config");
    assert!(
        configmap.value["data"].get(file).is_some(),
        "ConfigMap caldera-config has no key {file}"
    );

    // Identity and Lease namespace through the downward API.
    for (name, field) in [
        ("POD_NAMESPACE", "metadata.namespace"),
        ("POD_NAME", "metadata.name"),
    ] {
        let env = c
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("no env {name}"));
        let path = env
            .value_from
            .as_ref()
            .and_then(|v| v.field_ref.as_ref())
            .map(|f| f.field_path.as_str());
        assert_eq!(path, Some(field), "env {name}");
    }

    // Probes on the metrics port.
    let port = |p: &IntOrString| match p {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => c
            .ports
            .iter()
            .flatten()
            .find(|cp| cp.name.as_deref() == Some(name.as_str()))
            .map(|cp| cp.container_port)
            .unwrap_or_else(|| panic!("no container port named {name}")),
    };
    for (probe, path) in [
        (c.liveness_probe.as_ref(), "/healthz"),
        (c.readiness_probe.as_ref(), "/readyz"),
    ] {
        let get = probe
            .and_then(|p| p.http_get.as_ref())
            .unwrap_or_else(|| panic!("no HTTP probe for {path}"));
        assert_eq!(get.path.as_deref(), Some(path));
        assert_eq!(port(&get.port), 8080, "probe {path}");
    }

    let requests = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .unwrap_or_else(|| panic!("no resource requests"));
    assert!(requests.contains_key("cpu") && requests.contains_key("memory"));
}

#[test]
fn deployment_is_locked_down() {
    let deployment = deployment(&deploy_objects());
    let pod = pod_spec(&deployment);
    let pod_security = pod
        .security_context
        .as_ref()
        .unwrap_or_else(|| panic!("no pod securityContext"));
    assert_eq!(pod_security.run_as_non_root, Some(true));
    let c = container(&deployment);
    let security = c
        .security_context
        .as_ref()
        .unwrap_or_else(|| panic!("no container securityContext"));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_ne!(security.privileged, Some(true));
    let dropped = security
        .capabilities
        .as_ref()
        .and_then(|c| c.drop.clone())
        .unwrap_or_default();
    assert_eq!(dropped, ["ALL"]);
    let added = security.capabilities.as_ref().and_then(|c| c.add.clone());
    assert!(added.is_none_or(|a| a.is_empty()), "no capabilities added");
    let seccomp = security
        .seccomp_profile
        .as_ref()
        .or(pod_security.seccomp_profile.as_ref())
        .map(|s| s.type_.as_str());
    assert_eq!(seccomp, Some("RuntimeDefault"));
    let non_root = security.run_as_non_root.or(pod_security.run_as_non_root);
    assert_eq!(non_root, Some(true));
    let user = security.run_as_user.or(pod_security.run_as_user);
    assert!(user.is_some_and(|u| u > 0), "a numeric non-root user");
    assert_ne!(pod.host_network, Some(true));
    assert_ne!(pod.host_pid, Some(true));
    assert!(pod.automount_service_account_token != Some(false));
}

#[test]
fn metrics_service_reaches_the_scheduler_pods_on_8080() {
    let documents = deploy_objects();
    let deployment = deployment(&documents);
    let pod_labels = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let services = all_of(&documents, "Service");
    assert_eq!(services.len(), 1);
    let service: Service = typed(services[0]).unwrap_or_else(|e| panic!("{e}"));
    let spec = service.spec.unwrap_or_default();
    let selector = spec.selector.unwrap_or_default();
    assert!(!selector.is_empty(), "the Service selects nothing");
    for (key, value) in &selector {
        assert_eq!(
            pod_labels.get(key),
            Some(value),
            "Service selector {key}={value} does not match the pods"
        );
    }
    let ports = spec.ports.unwrap_or_default();
    let metrics = ports
        .iter()
        .find(|p| p.port == 8080)
        .unwrap_or_else(|| panic!("the Service has no port 8080"));
    let target = match &metrics.target_port {
        Some(IntOrString::Int(n)) => *n,
        Some(IntOrString::String(name)) => container(&deployment)
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port)
            .unwrap_or_else(|| panic!("no container port named {name}")),
        None => metrics.port,
    };
    assert_eq!(target, 8080);
}
