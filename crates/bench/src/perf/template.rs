//! The part of Go's `text/template` that scheduler_perf's object templates use: `{{.Name}}`
//! (a template parameter, or `Index`/`Count`) and `{{DivideInt A B}}` (integer division of
//! two parameters or integers). Anything else is refused with the action named, so a template
//! never renders into something other than what kube-scheduler's harness would create.

use serde_json::Value;
use std::collections::BTreeMap;

/// A template, parsed once and rendered once per object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Field(String),
    DivideInt(Arg, Arg),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg {
    Field(String),
    Int(i64),
}

impl Template {
    /// Parses `text`; the error names the first action Caldera does not evaluate.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            if open > 0 {
                pieces.push(Piece::Text(rest[..open].to_string()));
            }
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| format!("`{{{{` without `}}}}` near {:?}", excerpt(after)))?;
            pieces.push(action(&after[..close])?);
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_string()));
        }
        Ok(Template { pieces })
    }

    /// Renders with `env` (parameter name → value); a missing parameter or a non-integer
    /// argument of `DivideInt` is an error naming it.
    pub fn render(&self, env: &BTreeMap<String, Value>) -> Result<String, String> {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Field(name) => match lookup(env, name)? {
                    Value::String(s) => out.push_str(s),
                    other => out.push_str(&other.to_string()),
                },
                Piece::DivideInt(a, b) => {
                    let (a, b) = (int(env, a)?, int(env, b)?);
                    if b == 0 {
                        return Err("DivideInt by zero".into());
                    }
                    out.push_str(&(a / b).to_string());
                }
            }
        }
        Ok(out)
    }
}

fn excerpt(s: &str) -> &str {
    &s[..s.len().min(20)]
}

fn action(inner: &str) -> Result<Piece, String> {
    if inner.starts_with('-') || inner.ends_with('-') {
        return Err(format!(
            "template action `{{{{{inner}}}}}`: whitespace trimming (`{{{{-`, `-}}}}`) is not supported"
        ));
    }
    let words: Vec<&str> = inner.split_whitespace().collect();
    match words.as_slice() {
        [field] if field.starts_with('.') => Ok(Piece::Field(field_name(field)?)),
        ["DivideInt", a, b] => Ok(Piece::DivideInt(arg(a)?, arg(b)?)),
        _ => Err(format!(
            "template action `{{{{{}}}}}` is not supported (only `{{{{.Name}}}}` and `{{{{DivideInt A B}}}}`)",
            inner.trim()
        )),
    }
}

fn field_name(word: &str) -> Result<String, String> {
    let name = &word[1..];
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err(format!("template field `{word}` is not supported"));
    }
    Ok(name.to_string())
}

fn arg(word: &str) -> Result<Arg, String> {
    if word.starts_with('.') {
        return field_name(word).map(Arg::Field);
    }
    word.parse::<i64>()
        .map(Arg::Int)
        .map_err(|_| format!("template argument `{word}` is neither `.Name` nor an integer"))
}

fn lookup<'a>(env: &'a BTreeMap<String, Value>, name: &str) -> Result<&'a Value, String> {
    env.get(name)
        .ok_or_else(|| format!("template parameter `.{name}` is not set"))
}

fn int(env: &BTreeMap<String, Value>, a: &Arg) -> Result<i64, String> {
    match a {
        Arg::Int(i) => Ok(*i),
        Arg::Field(name) => lookup(env, name)?
            .as_i64()
            .ok_or_else(|| format!("template parameter `.{name}` is not an integer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn fields_and_divide_int_render() {
        let t = Template::parse("gang-{{DivideInt .Index .podsPerGroup}} #{{.Index}} {{ .name }}")
            .expect("parses");
        let out = t
            .render(&env(&[
                ("Index", json!(7)),
                ("podsPerGroup", json!(3)),
                ("name", json!("x")),
            ]))
            .expect("renders");
        assert_eq!(out, "gang-2 #7 x");
    }

    #[test]
    fn other_actions_are_refused_by_name() {
        let e = Template::parse("{{if .A}}x{{end}}").expect_err("refused");
        assert!(e.contains("`{{if .A}}`"), "{e}");
        let e = Template::parse("{{Mod .Index 2}}").expect_err("refused");
        assert!(e.contains("Mod"), "{e}");
    }

    #[test]
    fn a_missing_parameter_is_named() {
        let t = Template::parse("{{.nodesPerRack}}").expect("parses");
        let e = t.render(&env(&[])).expect_err("missing");
        assert!(e.contains(".nodesPerRack"), "{e}");
    }
}
