//! No import circles between the modules of a crate (issue 36's measure, as
//! `scripts/circles.py` counts them; this test keeps the count at none without Python).
//!
//! A module is a source file under a crate's `src/` (`a/mod.rs` and `a.rs` are module `a`).
//! Module A depends on module B when A's non-test code names a path into B: `crate::b::…`,
//! `super::…` or `self::…` resolved from A, in a `use` or inline. A path into a module's own
//! children is not a dependency (a parent re-exporting or calling its children is how Rust
//! modules are built); a child naming its parent is. Test code is left out: files named
//! `tests.rs` or `*_tests.rs`, and `#[cfg(test)]` items. A circle is a set of two or more
//! modules each reaching every other by such paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// The lines of `text` outside `#[cfg(test)]` items and `//` comments.
fn non_test(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim_start().starts_with("#[cfg(test)]") {
            let (mut depth, mut started) = (0i64, false);
            i += 1;
            while i < lines.len() {
                let s = lines[i];
                depth += s.matches('{').count() as i64 - s.matches('}').count() as i64;
                started |= s.contains('{');
                i += 1;
                if (started && depth <= 0) || (!started && s.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let line = lines[i];
        if !line.trim_start().starts_with("//") {
            out.push_str(line.split(" // ").next().unwrap_or(""));
            out.push('\n');
        }
        i += 1;
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path the text names that starts at `crate`, `super` or `self`, with groups
/// (`a::{b, c::d}`) flattened, as lists of segments.
fn paths(text: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = ["crate::", "super::", "self::"].iter().any(|p| {
            let p: Vec<char> = p.chars().collect();
            chars[i..].starts_with(&p) && (i == 0 || !is_ident(chars[i - 1]))
        });
        if !starts {
            i += 1;
            continue;
        }
        let (tree, end) = path_tree(&chars, i);
        out.extend(tree);
        i = end.max(i + 1);
    }
    out
}

/// The paths of one use tree starting at `i`, and where it ends.
fn path_tree(chars: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut prefix: Vec<String> = Vec::new();
    loop {
        let start = i;
        while i < chars.len() && (is_ident(chars[i]) || chars[i] == '*') {
            i += 1;
        }
        if i == start {
            break;
        }
        prefix.push(chars[start..i].iter().collect());
        // Whitespace inside a path (a `use` split over lines) is skipped.
        let mut j = i;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if !chars[j..].starts_with(&[':', ':']) {
            break;
        }
        j += 2;
        while j < chars.len() && chars[j].is_whitespace() {
            j += 1;
        }
        if j < chars.len() && chars[j] == '{' {
            // A group: each member is a tree of its own below the prefix.
            let mut out = Vec::new();
            let mut k = j + 1;
            loop {
                while k < chars.len() && (chars[k].is_whitespace() || chars[k] == ',') {
                    k += 1;
                }
                if k >= chars.len() || chars[k] == '}' {
                    break;
                }
                let (inner, end) = path_tree(chars, k);
                for p in inner {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
                // Skip what the member's path does not cover (`as x`, a closing group).
                k = end;
                let mut depth = 0;
                while k < chars.len() {
                    match chars[k] {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => break,
                        _ => {}
                    }
                    k += 1;
                }
            }
            return (out, k + 1);
        }
        i = j;
    }
    (vec![prefix], i)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn module_of(src: &Path, path: &Path) -> Module {
    let rel = path.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        return Vec::new();
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The modules `me` depends on, of `modules`.
fn deps(text: &str, me: &Module, modules: &BTreeSet<Module>) -> BTreeSet<Module> {
    let mut out = BTreeSet::new();
    for path in paths(text) {
        let (mut base, mut rest): (Module, &[String]) = if path[0] == "crate" {
            (Vec::new(), &path[1..])
        } else {
            (me.clone(), &path[..])
        };
        while let Some(first) = rest.first() {
            match first.as_str() {
                "super" => {
                    base.pop();
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        // The longest module the path names.
        let mut target = base;
        for s in rest {
            let mut next = target.clone();
            next.push(s.clone());
            if modules.contains(&next) {
                target = next;
            } else {
                break;
            }
        }
        if target.starts_with(me) {
            continue; // itself or its own children
        }
        if modules.contains(&target) {
            out.insert(target);
        }
    }
    out
}

/// Strongly connected sets of two or more modules (Tarjan).
fn circles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a Module, usize>,
        low: BTreeMap<&'a Module, usize>,
        stack: Vec<&'a Module>,
        on: BTreeSet<&'a Module>,
        out: Vec<Vec<Module>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a Module) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let Some((w, _)) = self.graph.get_key_value(w) else {
                    continue;
                };
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    comp.sort();
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// The circles of the crate whose sources are under `src`.
fn crate_circles(src: &Path) -> Vec<Vec<Module>> {
    let mut files = Vec::new();
    sources(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|p| module_of(src, p)).collect();
    let mut graph = BTreeMap::new();
    for p in &files {
        let name = p.file_name().unwrap().to_string_lossy();
        if name == "tests.rs" || name.ends_with("_tests.rs") {
            continue;
        }
        let me = module_of(src, p);
        let text = non_test(&std::fs::read_to_string(p).unwrap());
        graph.insert(me.clone(), deps(&text, &me, &modules));
    }
    circles(&graph)
}

#[test]
fn no_crate_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found = Vec::new();
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    crates.push(root.join("e2e"));
    crates.sort();
    let mut read = 0;
    for dir in crates {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        read += 1;
        for comp in crate_circles(&src) {
            let names: Vec<String> = comp
                .iter()
                .map(|m| {
                    if m.is_empty() {
                        "lib".into()
                    } else {
                        m.join("::")
                    }
                })
                .collect();
            let name = dir.file_name().unwrap_or_default().to_string_lossy();
            found.push(format!("{name}: {}", names.join(", ")));
        }
    }
    assert!(
        read > 10,
        "the crates were not found under {}",
        root.display()
    );
    assert!(found.is_empty(), "import circles: {found:#?}");
}

#[test]
fn a_circle_is_found_and_children_do_not_count() {
    let dir = std::env::temp_dir().join(format!("caldera-circles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::create_dir_all(src.join("c")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    // a::x names b (in a group, renamed), b names a::x: a circle. a naming its child is not a
    // dependency of a, so a is not in it; neither is c, whose child y names it (only one way).
    std::fs::write(src.join("a/mod.rs"), "pub mod x;\nuse self::x::Y;\n").unwrap();
    std::fs::write(src.join("a/x.rs"), "use crate::{b::{self, Z as W}};\n").unwrap();
    std::fs::write(
        src.join("b.rs"),
        "pub fn f() { crate::a::x::g(); }\n#[cfg(test)]\nmod tests {\n    use crate::c::D;\n}\n",
    )
    .unwrap();
    std::fs::write(src.join("c/mod.rs"), "mod y;\npub use self::y::R;\n").unwrap();
    std::fs::write(
        src.join("c/y.rs"),
        "use super::Q;\n// crate::b in a comment\n",
    )
    .unwrap();
    let found = crate_circles(&src);
    std::fs::remove_dir_all(&dir).unwrap();
    let names: Vec<Vec<String>> = found
        .iter()
        .map(|c| c.iter().map(|m| m.join("::")).collect())
        .collect();
    assert_eq!(names, vec![vec!["a::x", "b"]]);
}
