//! scheduler_perf's config format (Kubernetes' `test/integration/scheduler_perf`), read
//! strictly: a list of test cases, each a `workloadTemplate` of operations and `workloads`
//! that set its `$params`. Every opcode and field this runner does not carry out is refused
//! with its name; only fields that steer the Go harness alone (`featureGates`, `labels` of a
//! test case, a workload's `threshold`) are read and ignored.

use super::template::Template;
use super::Error;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The opcodes this runner carries out.
pub const OPCODES: &[&str] = &[
    "createNodes",
    "createNamespaces",
    "createPodGroups",
    "createAny",
    "waitForPodGroups",
    "createPods",
];

/// The configs shipped with Caldera (`crates/bench/perf/`), built into the binary: name, and
/// its files by the path the config names them with.
pub struct Shipped {
    /// The name `caldera bench perf NAME` takes (upstream's directory name).
    pub name: &'static str,
    /// `performance-config.yaml` and its templates: (relative path, text).
    pub files: &'static [(&'static str, &'static str)],
}

/// The three podgroup configs of scheduler_perf.
pub const SHIPPED: &[Shipped] = &[
    Shipped {
        name: "basicscheduling",
        files: &[
            (
                CONFIG_FILE,
                include_str!("../../perf/basicscheduling/performance-config.yaml"),
            ),
            (
                "templates/podgroup.yaml",
                include_str!("../../perf/basicscheduling/templates/podgroup.yaml"),
            ),
            (
                "templates/basic-pod.yaml",
                include_str!("../../perf/basicscheduling/templates/basic-pod.yaml"),
            ),
        ],
    },
    Shipped {
        name: "gangscheduling",
        files: &[
            (
                CONFIG_FILE,
                include_str!("../../perf/gangscheduling/performance-config.yaml"),
            ),
            (
                "templates/podgroup.yaml",
                include_str!("../../perf/gangscheduling/templates/podgroup.yaml"),
            ),
            (
                "templates/gang-pod.yaml",
                include_str!("../../perf/gangscheduling/templates/gang-pod.yaml"),
            ),
        ],
    },
    Shipped {
        name: "tas",
        files: &[
            (
                CONFIG_FILE,
                include_str!("../../perf/tas/performance-config.yaml"),
            ),
            (
                "templates/podgroup.yaml",
                include_str!("../../perf/tas/templates/podgroup.yaml"),
            ),
            (
                "templates/gang-pod.yaml",
                include_str!("../../perf/tas/templates/gang-pod.yaml"),
            ),
            (
                "templates/node.yaml",
                include_str!("../../perf/tas/templates/node.yaml"),
            ),
        ],
    },
];

const CONFIG_FILE: &str = "performance-config.yaml";

/// Where a config and its templates come from.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// A file on disk; templates are read relative to its directory.
    File(&'a Path),
    /// A shipped config.
    Shipped(&'static Shipped),
}

impl Source<'_> {
    /// `NAME` of a shipped config, else a path.
    pub fn of(arg: &str) -> Source<'_> {
        match SHIPPED.iter().find(|s| s.name == arg) {
            Some(s) => Source::Shipped(s),
            None => Source::File(Path::new(arg)),
        }
    }

    /// How errors name the config.
    pub fn name(&self) -> String {
        match self {
            Source::File(p) => p.display().to_string(),
            Source::Shipped(s) => format!("{}/{CONFIG_FILE} (shipped)", s.name),
        }
    }

    /// The config's text.
    pub fn config(&self) -> Result<String, Error> {
        match self {
            Source::File(p) => read(p),
            Source::Shipped(_) => self.file(CONFIG_FILE),
        }
    }

    /// A file the config names (a template), relative to the config.
    pub fn file(&self, relative: &str) -> Result<String, Error> {
        match self {
            Source::File(p) => read(&p.parent().unwrap_or(Path::new(".")).join(relative)),
            Source::Shipped(s) => s
                .files
                .iter()
                .find(|(path, _)| *path == relative)
                .map(|(_, text)| text.to_string())
                .ok_or_else(|| Error::Read {
                    path: format!("{}/{relative} (shipped)", s.name),
                    message: "no such shipped file".into(),
                }),
        }
    }
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path).map_err(|e| Error::Read {
        path: PathBuf::from(path).display().to_string(),
        message: e.to_string(),
    })
}

/// One test case: its operations and the workloads that parameterise them.
#[derive(Debug, Clone)]
pub struct TestCase {
    /// `name`.
    pub name: String,
    /// `workloadTemplate`, in order.
    pub ops: Vec<Op>,
    /// `workloads`.
    pub workloads: Vec<Workload>,
}

/// A workload: a name, labels to select it by, and the values of the `$params`.
#[derive(Debug, Clone)]
pub struct Workload {
    /// `name`.
    pub name: String,
    /// `labels` (`performance`, `integration-test`, `short`).
    pub labels: Vec<String>,
    /// `params`.
    pub params: BTreeMap<String, Value>,
}

/// A count: given, or a `$param`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Count {
    /// `count: N`.
    Fixed(u64),
    /// `countParam: $name`.
    Param(String),
}

impl Count {
    /// The count for `w`.
    pub fn resolve(&self, w: &Workload, at: &str) -> Result<u64, String> {
        match self {
            Count::Fixed(n) => Ok(*n),
            Count::Param(p) => param_int(w, p, at),
        }
    }
}

fn param_int(w: &Workload, name: &str, at: &str) -> Result<u64, String> {
    w.params.get(name).and_then(Value::as_u64).ok_or_else(|| {
        format!(
            "{at}: workload {} has no non-negative integer param `{name}`",
            w.name
        )
    })
}

/// An operation of the workload template, and where it is (`workloadTemplate[i]`).
#[derive(Debug, Clone)]
pub struct Op {
    /// `<test case>.workloadTemplate[i] (<opcode>)`, for messages.
    pub at: String,
    /// What it does.
    pub kind: OpKind,
}

/// The operations carried out.
#[derive(Debug, Clone)]
pub enum OpKind {
    /// `createNodes`: `count` nodes from `nodeTemplatePath`, or scheduler_perf's base node
    /// (4 CPU, 32Gi, 110 pods, Ready).
    CreateNodes {
        /// How many.
        count: Count,
        /// `nodeTemplatePath`.
        template: Option<Template>,
        /// `templateParams`.
        params: BTreeMap<String, Value>,
    },
    /// `createNamespaces`: `<prefix>-0` … `<prefix>-(count-1)`.
    CreateNamespaces {
        /// `prefix`.
        prefix: String,
        /// How many.
        count: Count,
    },
    /// `createPodGroups` and `createAny`: `count` objects from `templatePath` in `namespace`.
    CreateObjects {
        /// How many (`createAny` without a count: 1).
        count: Count,
        /// `namespace`.
        namespace: Option<String>,
        /// `templatePath`, parsed.
        template: Template,
        /// `templatePath` as written.
        template_path: String,
        /// `templateParams`.
        params: BTreeMap<String, Value>,
    },
    /// `waitForPodGroups`: in-process the objects are there once created; checked.
    WaitForPodGroups {
        /// `namespace`.
        namespace: String,
        /// How many must exist.
        count: Count,
    },
    /// `createPods`: `count × countMultiplier` pods from `podTemplatePath` in `namespace`.
    CreatePods {
        /// How many.
        count: Count,
        /// `countMultiplierParam`, without the `$`.
        multiplier: Option<String>,
        /// `namespace` (scheduler_perf's default, a fresh `namespace-<n>`, is not supported).
        namespace: String,
        /// `podTemplatePath`, parsed.
        template: Template,
        /// `podTemplatePath` as written.
        template_path: String,
        /// `collectMetrics`.
        collect_metrics: bool,
        /// `skipWaitToCompletion`.
        skip_wait: bool,
        /// `templateParams`.
        params: BTreeMap<String, Value>,
    },
}

/// Reads a config (a YAML list of test cases) and the templates it names.
pub fn parse(source: Source<'_>) -> Result<Vec<TestCase>, Error> {
    let file = source.name();
    let text = source.config()?;
    let value: Value = serde_yaml_ng::from_str(&text).map_err(|e| Error::Invalid {
        file: file.clone(),
        at: String::new(),
        message: e.to_string(),
    })?;
    let invalid = |at: &str, message: String| Error::Invalid {
        file: file.clone(),
        at: at.to_string(),
        message,
    };
    let cases = value
        .as_array()
        .ok_or_else(|| invalid("", "expected a list of test cases".into()))?;
    let mut out = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let at = format!("[{i}]");
        let map = mapping(case, &at).map_err(|m| invalid(&at, m))?;
        check_fields(
            map,
            &["name", "workloadTemplate", "workloads"],
            &["featureGates", "labels"],
        )
        .map_err(|field| unsupported(&file, &at, &format!("field `{field}`")))?;
        let name = string(map, "name", &at).map_err(|m| invalid(&at, m))?;
        let at = name.clone();
        let ops_value = map
            .get("workloadTemplate")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(&at, "`workloadTemplate` must be a list".into()))?;
        let mut ops = Vec::new();
        for (j, op) in ops_value.iter().enumerate() {
            ops.push(parse_op(
                source,
                &file,
                &format!("{at}.workloadTemplate[{j}]"),
                op,
            )?);
        }
        let workloads_value = map
            .get("workloads")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(&at, "`workloads` must be a list".into()))?;
        let mut workloads = Vec::new();
        for (j, w) in workloads_value.iter().enumerate() {
            let wat = format!("{at}.workloads[{j}]");
            let map = mapping(w, &wat).map_err(|m| invalid(&wat, m))?;
            check_fields(
                map,
                &["name", "labels", "params"],
                &["featureGates", "threshold"],
            )
            .map_err(|field| unsupported(&file, &wat, &format!("field `{field}`")))?;
            let labels = match map.get("labels") {
                None => Vec::new(),
                Some(Value::Array(l)) => l
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| invalid(&wat, "`labels` must be strings".into()))?,
                Some(_) => return Err(invalid(&wat, "`labels` must be a list".into())),
            };
            let params = match map.get("params") {
                None => BTreeMap::new(),
                Some(Value::Object(p)) => p.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                Some(_) => return Err(invalid(&wat, "`params` must be a mapping".into())),
            };
            workloads.push(Workload {
                name: string(map, "name", &wat).map_err(|m| invalid(&wat, m))?,
                labels,
                params,
            });
        }
        out.push(TestCase {
            name,
            ops,
            workloads,
        });
    }
    Ok(out)
}

fn unsupported(file: &str, at: &str, what: &str) -> Error {
    Error::Unsupported {
        file: file.to_string(),
        at: at.to_string(),
        what: what.to_string(),
    }
}

fn parse_op(source: Source<'_>, file: &str, at: &str, op: &Value) -> Result<Op, Error> {
    let invalid = |message: String| Error::Invalid {
        file: file.to_string(),
        at: at.to_string(),
        message,
    };
    let map = mapping(op, at).map_err(invalid)?;
    let opcode = string(map, "opcode", at).map_err(invalid)?;
    let at = format!("{at} ({opcode})");
    let invalid = |message: String| Error::Invalid {
        file: file.to_string(),
        at: at.clone(),
        message,
    };
    let allowed: &[&str] = match opcode.as_str() {
        "createNodes" => &[
            "opcode",
            "count",
            "countParam",
            "nodeTemplatePath",
            "templateParams",
        ],
        "createNamespaces" => &["opcode", "prefix", "count", "countParam"],
        "createPodGroups" | "createAny" => &[
            "opcode",
            "count",
            "countParam",
            "namespace",
            "templatePath",
            "templateParams",
        ],
        "waitForPodGroups" => &["opcode", "namespace", "count", "countParam"],
        "createPods" => &[
            "opcode",
            "count",
            "countParam",
            "countMultiplierParam",
            "namespace",
            "podTemplatePath",
            "collectMetrics",
            "skipWaitToCompletion",
            "templateParams",
        ],
        other => {
            return Err(unsupported(
                file,
                &at,
                &format!(
                    "opcode `{other}` (caldera bench perf carries out {})",
                    OPCODES.join(", ")
                ),
            ))
        }
    };
    check_fields(map, allowed, &[])
        .map_err(|field| unsupported(file, &at, &format!("field `{field}`")))?;
    let params = match map.get("templateParams") {
        None => BTreeMap::new(),
        Some(Value::Object(p)) => p.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(_) => return Err(invalid("`templateParams` must be a mapping".into())),
    };
    let template = |key: &str| -> Result<Option<(String, Template)>, Error> {
        let Some(path) = map.get(key) else {
            return Ok(None);
        };
        let path = path
            .as_str()
            .ok_or_else(|| invalid(format!("`{key}` must be a string")))?;
        let text = source.file(path)?;
        let t = Template::parse(&text).map_err(|m| Error::Invalid {
            file: format!("{} ({path})", source.name()),
            at: at.clone(),
            message: m,
        })?;
        Ok(Some((path.to_string(), t)))
    };
    let count = |default: Option<u64>| -> Result<Count, Error> {
        match (map.get("countParam"), map.get("count")) {
            (Some(p), _) => {
                let p = p
                    .as_str()
                    .and_then(|p| p.strip_prefix('$'))
                    .ok_or_else(|| invalid("`countParam` must be `$name`".into()))?;
                Ok(Count::Param(p.to_string()))
            }
            (None, Some(c)) => c
                .as_u64()
                .map(Count::Fixed)
                .ok_or_else(|| invalid("`count` must be a non-negative integer".into())),
            (None, None) => default
                .map(Count::Fixed)
                .ok_or_else(|| invalid("`count` or `countParam` is required".into())),
        }
    };
    let namespace = map
        .get("namespace")
        .map(|n| {
            n.as_str()
                .map(str::to_string)
                .ok_or_else(|| invalid("`namespace` must be a string".into()))
        })
        .transpose()?;
    let kind = match opcode.as_str() {
        "createNodes" => OpKind::CreateNodes {
            count: count(None)?,
            template: template("nodeTemplatePath")?.map(|(_, t)| t),
            params,
        },
        "createNamespaces" => OpKind::CreateNamespaces {
            prefix: string(map, "prefix", &at).map_err(invalid)?,
            count: count(None)?,
        },
        "createPodGroups" | "createAny" => {
            let (template_path, template) = template("templatePath")?
                .ok_or_else(|| invalid("`templatePath` is required".into()))?;
            OpKind::CreateObjects {
                count: count((opcode == "createAny").then_some(1))?,
                namespace,
                template,
                template_path,
                params,
            }
        }
        "waitForPodGroups" => OpKind::WaitForPodGroups {
            namespace: namespace.ok_or_else(|| invalid("`namespace` is required".into()))?,
            count: count(None)?,
        },
        _ => {
            let (template_path, template) = template("podTemplatePath")?.ok_or_else(|| {
                unsupported(
                    file,
                    &at,
                    "createPods without `podTemplatePath` (scheduler_perf's default pod)",
                )
            })?;
            let multiplier = map
                .get("countMultiplierParam")
                .map(|m| {
                    m.as_str()
                        .and_then(|m| m.strip_prefix('$'))
                        .map(str::to_string)
                        .ok_or_else(|| invalid("`countMultiplierParam` must be `$name`".into()))
                })
                .transpose()?;
            let flag = |key: &str| -> Result<bool, Error> {
                map.get(key).map_or(Ok(false), |v| {
                    v.as_bool()
                        .ok_or_else(|| invalid(format!("`{key}` must be true or false")))
                })
            };
            let collect_metrics = flag("collectMetrics")?;
            let skip_wait = flag("skipWaitToCompletion")?;
            if collect_metrics && skip_wait {
                return Err(invalid(
                    "collectMetrics and skipWaitToCompletion cannot both be true (as in scheduler_perf)"
                        .into(),
                ));
            }
            OpKind::CreatePods {
                count: count(None)?,
                multiplier,
                namespace: namespace.ok_or_else(|| {
                    unsupported(
                        file,
                        &at,
                        "createPods without `namespace` (scheduler_perf's fresh namespace)",
                    )
                })?,
                template,
                template_path,
                collect_metrics,
                skip_wait,
                params,
            }
        }
    };
    Ok(Op { at, kind })
}

fn mapping<'a>(v: &'a Value, at: &str) -> Result<&'a serde_json::Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{at}: expected a mapping"))
}

fn string(map: &serde_json::Map<String, Value>, key: &str, at: &str) -> Result<String, String> {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(format!("{at}: `{key}` must be a non-empty string")),
    }
}

/// `Err(field)` for the first key neither `read` nor `ignored`.
fn check_fields(
    map: &serde_json::Map<String, Value>,
    read: &[&str],
    ignored: &[&str],
) -> Result<(), String> {
    match map
        .keys()
        .find(|k| !read.contains(&k.as_str()) && !ignored.contains(&k.as_str()))
    {
        Some(k) => Err(k.clone()),
        None => Ok(()),
    }
}

/// `templateParams` resolved for a workload: `$name` values replaced by the workload's param.
pub fn resolve_params(
    params: &BTreeMap<String, Value>,
    w: &Workload,
    at: &str,
) -> Result<BTreeMap<String, Value>, String> {
    params
        .iter()
        .map(|(k, v)| {
            let v =
                match v.as_str().and_then(|s| s.strip_prefix('$')) {
                    Some(name) => w.params.get(name).cloned().ok_or_else(|| {
                        format!("{at}: workload {} has no param `{name}`", w.name)
                    })?,
                    None => v.clone(),
                };
            Ok((k.clone(), v))
        })
        .collect()
}

/// The multiplier of a `createPods` for `w`.
pub fn multiplier(name: Option<&str>, w: &Workload, at: &str) -> Result<u64, String> {
    name.map_or(Ok(1), |n| param_int(w, n, at))
}
