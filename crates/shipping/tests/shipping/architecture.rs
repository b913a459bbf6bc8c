//! Reads the section "API calls `caldera run` makes" of ARCHITECTURE.md into a set of calls.
//!
//! The section holds a Markdown table, one row per API call (or per resource, with several
//! verbs in one cell). Columns are found by their header, in any order:
//!
//! - `verb` (required): `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`; several
//!   may share a cell (`list, watch`). HTTP methods are accepted too (`POST` = create,
//!   `PUT` = update, `PATCH` = patch, `DELETE` = delete, `GET` = get).
//! - `group` (API group): empty, `core`, `""` or `-` for the core group.
//! - `resource` (required): the plural name, optionally with its subresource (`pods/binding`).
//!   Without a `group` column the group may be written after the plural
//!   (`leases.coordination.k8s.io`).
//! - `subresource` (optional): `binding`, `status`, …
//! - `namespace` or `scope` (optional): a cell naming the Lease's namespace (`caldera-system`,
//!   or mentioning `lease`) means the call is made only there; anything else means
//!   cluster-wide. Without the column, only `leases` calls are taken as namespaced.
//!
//! Other columns (what the call is for, which code makes it) are ignored.

use std::collections::BTreeSet;
use std::fmt;

/// Where a call is made.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// In every namespace (or a cluster-scoped resource): needs a ClusterRole.
    Cluster,
    /// Only in this namespace: a Role there is enough.
    Namespace(String),
}

/// One permission an API call needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Call {
    /// API group, empty for the core group.
    pub group: String,
    /// `pods`, or `pods/binding` with a subresource.
    pub resource: String,
    /// RBAC verb.
    pub verb: String,
    /// Where.
    pub scope: Scope,
}

impl fmt::Display for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        let scope = match &self.scope {
            Scope::Cluster => "cluster-wide".to_string(),
            Scope::Namespace(ns) => format!("in namespace {ns}"),
        };
        write!(f, "{} {} ({group}) {scope}", self.verb, self.resource)
    }
}

/// The heading the section must have (matched case-insensitively, ignoring backticks).
pub const SECTION: &str = "API calls `caldera run` makes";

/// The body of the section titled [`SECTION`], up to the next heading of the same or a higher
/// level; `None` if there is no such section.
pub fn section(markdown: &str) -> Option<String> {
    section_titled(markdown, SECTION)
}

/// The body of the section titled `title` (as [`section`]).
pub fn section_titled(markdown: &str, title: &str) -> Option<String> {
    let wanted = normalize_heading(title);
    let mut level = None;
    let mut body = Vec::new();
    for line in markdown.lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        let is_heading = hashes > 0 && line[hashes..].starts_with(' ');
        match level {
            None if is_heading && normalize_heading(&line[hashes..]) == wanted => {
                level = Some(hashes)
            }
            Some(l) if is_heading && hashes <= l => break,
            Some(_) => body.push(line),
            None => {}
        }
    }
    level.map(|_| body.join("\n"))
}

fn normalize_heading(text: &str) -> String {
    text.replace('`', "").trim().to_lowercase()
}

/// Parses the first table of `section` into calls; `lease_namespace` is the namespace the
/// Lease lives in. Errors name the row that could not be read.
pub fn parse_calls(section: &str, lease_namespace: &str) -> Result<BTreeSet<Call>, String> {
    let rows: Vec<Vec<String>> = section
        .lines()
        .map(str::trim)
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .map(cells)
        .collect();
    let [header, separator, body @ ..] = rows.as_slice() else {
        return Err("no Markdown table (a header row, a |---| row and rows of calls)".into());
    };
    if !separator
        .iter()
        .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
    {
        return Err(format!(
            "the table's second row is not a |---| separator: {separator:?}"
        ));
    }
    let column = |test: &dyn Fn(&str) -> bool| {
        header
            .iter()
            .position(|h| test(&h.replace('`', "").to_lowercase()))
    };
    let verb_col = column(&|h| h.contains("verb")).ok_or("no `verb` column in the table")?;
    let subresource_col = column(&|h| h.contains("subresource"));
    let resource_col = column(&|h| h.contains("resource") && !h.contains("subresource"))
        .ok_or("no `resource` column in the table")?;
    let group_col = column(&|h| h.contains("group"));
    let scope_col = column(&|h| h.contains("namespace") || h.contains("scope"));

    let mut calls = BTreeSet::new();
    for (i, row) in body.iter().enumerate() {
        let cell = |col: usize| row.get(col).map(|c| c.replace('`', "")).unwrap_or_default();
        let where_ = || format!("table row {} ({})", i + 1, row.join(" | "));
        let mut resource = cell(resource_col).trim().to_string();
        let mut group = match group_col {
            Some(col) => normalize_group(&cell(col)),
            None => String::new(),
        };
        if group_col.is_none() {
            // `leases.coordination.k8s.io[/sub]`
            let (plural, sub) = match resource.split_once('/') {
                Some((p, s)) => (p.to_string(), Some(s.to_string())),
                None => (resource.clone(), None),
            };
            if let Some((p, g)) = plural.split_once('.') {
                group = g.to_string();
                resource = match sub {
                    Some(s) => format!("{p}/{s}"),
                    None => p.to_string(),
                };
            }
        }
        if let Some(col) = subresource_col {
            let sub = cell(col);
            let sub = sub.trim();
            if !is_empty_cell(sub) {
                resource = format!("{resource}/{sub}");
            }
        }
        if resource.is_empty() || resource.contains(' ') {
            return Err(format!("{}: cannot read the resource", where_()));
        }
        let scope = match scope_col {
            Some(col) => {
                let text = cell(col).to_lowercase();
                if text.contains(lease_namespace) || text.contains("lease") {
                    Scope::Namespace(lease_namespace.to_string())
                } else {
                    Scope::Cluster
                }
            }
            None if resource == "leases" => Scope::Namespace(lease_namespace.to_string()),
            None => Scope::Cluster,
        };
        let verbs: Vec<String> = cell(verb_col)
            .split(|c: char| !c.is_ascii_alphabetic())
            .filter(|v| !v.is_empty())
            .map(normalize_verb)
            .collect::<Result<_, _>>()
            .map_err(|v| format!("{}: unknown verb {v:?}", where_()))?;
        if verbs.is_empty() {
            return Err(format!("{}: no verb", where_()));
        }
        for verb in verbs {
            calls.insert(Call {
                group: group.clone(),
                resource: resource.clone(),
                verb,
                scope: scope.clone(),
            });
        }
    }
    if calls.is_empty() {
        return Err("the table lists no calls".into());
    }
    Ok(calls)
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_string()).collect()
}

fn is_empty_cell(text: &str) -> bool {
    matches!(text, "" | "-" | "—" | "–" | "\"\"" | "none")
}

fn normalize_group(text: &str) -> String {
    let text = text.trim();
    let lower = text.to_lowercase();
    if is_empty_cell(text) || lower == "core" || lower == "(core)" || lower == "core (\"\")" {
        String::new()
    } else {
        text.trim_end_matches("/v1")
            .trim_end_matches("/v1beta1")
            .to_string()
    }
}

fn normalize_verb(word: &str) -> Result<String, String> {
    let lower = word.to_lowercase();
    let verb = match lower.as_str() {
        "post" => "create",
        "put" => "update",
        v @ ("get" | "list" | "watch" | "create" | "update" | "patch" | "delete"
        | "deletecollection") => v,
        _ => return Err(word.to_string()),
    };
    Ok(verb.to_string())
}

#[test]
fn parser_reads_the_documented_table_format() {
    let markdown = "\
# Architecture

## API calls `caldera run` makes

Some text.

| verb | group | resource | subresource | namespace | why |
|---|---|---|---|---|---|
| list, watch | core | pods | | all | the cache |
| `create` | `\"\"` | `pods` | `binding` | all | bind |
| PATCH | scheduling.volcano.sh | podgroups | status | all | status |
| get, create, update | coordination.k8s.io | leases | | `--lease-namespace` (caldera-system) | election |

## Next section

| verb | group | resource |
|---|---|---|
| delete | core | nodes |
";
    let body = section(markdown).expect("the section is found");
    let calls = parse_calls(&body, "caldera-system").expect("the table parses");
    let shown: Vec<String> = calls.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "list pods (core) cluster-wide",
            "watch pods (core) cluster-wide",
            "create pods/binding (core) cluster-wide",
            "create leases (coordination.k8s.io) in namespace caldera-system",
            "get leases (coordination.k8s.io) in namespace caldera-system",
            "update leases (coordination.k8s.io) in namespace caldera-system",
            "patch podgroups/status (scheduling.volcano.sh) cluster-wide",
        ]
    );
}

#[test]
fn parser_reads_the_runtime_engineers_format() {
    // The columns and cell styles ARCHITECTURE.md uses: scope "namespaced" means "in the
    // object's namespace, whichever that is", so cluster-wide for RBAC.
    let body = "\
| verb | group | resource | scope | what for |
|---|---|---|---|---|
| `list`, `watch` | `\"\"` | `pods` | all namespaces | the cache |
| `create` | `\"\"` | `pods/binding` | namespaced | binds |
| `patch` | `scheduling.volcano.sh` | `queues/status` | cluster | status |
| `get`, `create`, `update` | `coordination.k8s.io` | `leases` | `--lease-namespace`, name `caldera` | election |
";
    let calls = parse_calls(body, "caldera-system").expect("the table parses");
    let shown: Vec<String> = calls.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "list pods (core) cluster-wide",
            "watch pods (core) cluster-wide",
            "create pods/binding (core) cluster-wide",
            "create leases (coordination.k8s.io) in namespace caldera-system",
            "get leases (coordination.k8s.io) in namespace caldera-system",
            "update leases (coordination.k8s.io) in namespace caldera-system",
            "patch queues/status (scheduling.volcano.sh) cluster-wide",
        ]
    );
}

#[test]
fn parser_takes_groups_from_resource_names_without_a_group_column() {
    let body = "\
| Resource | Verbs |
|:--|:--|
| `leases.coordination.k8s.io` | get |
| `pods/status` | patch |
| `queues.scheduling.volcano.sh/status` | patch |
";
    let calls = parse_calls(body, "caldera-system").expect("the table parses");
    let shown: Vec<String> = calls.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "patch pods/status (core) cluster-wide",
            "get leases (coordination.k8s.io) in namespace caldera-system",
            "patch queues/status (scheduling.volcano.sh) cluster-wide",
        ]
    );
}

#[test]
fn parser_rejects_what_it_cannot_read() {
    assert!(section("# Architecture\n## Other\n").is_none());
    assert!(parse_calls("no table here", "ns").is_err());
    let unknown_verb = "| verb | resource |\n|---|---|\n| frobnicate | pods |\n";
    let error = parse_calls(unknown_verb, "ns").expect_err("unknown verb");
    assert!(error.contains("frobnicate"), "{error}");
    let no_verb_column = "| resource |\n|---|\n| pods |\n";
    assert!(parse_calls(no_verb_column, "ns").is_err());
}
