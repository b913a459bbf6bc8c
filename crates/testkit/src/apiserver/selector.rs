//! Label and field selectors, parsed and matched as kube-apiserver does for LIST and WATCH.

use serde_json::Value;

use super::resources::{Flavor, ResourceDef};
use super::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Op {
    Exists,
    DoesNotExist,
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct LabelSelector {
    requirements: Vec<(String, Op)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Word(String),
    Not,
    Eq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
}

fn lex(input: &str) -> Vec<Token> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '!' if chars.get(i + 1) == Some(&'=') => {
                out.push(Token::NotEq);
                i += 2;
            }
            '!' => {
                out.push(Token::Not);
                i += 1;
            }
            '=' => {
                out.push(Token::Eq);
                i += if chars.get(i + 1) == Some(&'=') { 2 } else { 1 };
            }
            '>' => {
                out.push(Token::Gt);
                i += 1;
            }
            '<' => {
                out.push(Token::Lt);
                i += 1;
            }
            '(' => {
                out.push(Token::Open);
                i += 1;
            }
            ')' => {
                out.push(Token::Close);
                i += 1;
            }
            ',' => {
                out.push(Token::Comma);
                i += 1;
            }
            _ => {
                let start = i;
                while i < chars.len()
                    && !chars[i].is_whitespace()
                    && !matches!(chars[i], '!' | '=' | '>' | '<' | '(' | ')' | ',')
                {
                    i += 1;
                }
                out.push(Token::Word(chars[start..i].iter().collect()));
            }
        }
    }
    out
}

fn parse_error(input: &str, why: &str) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: {why} (in label selector {input:?})"
    ))
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3`.
    pub(crate) fn parse(input: &str) -> Result<Self, ApiError> {
        let tokens = lex(input);
        let mut requirements = Vec::new();
        let mut pos = 0;
        let word = |pos: usize| match tokens.get(pos) {
            Some(Token::Word(w)) => Some(w.clone()),
            _ => None,
        };
        while pos < tokens.len() {
            let requirement = if tokens[pos] == Token::Not {
                let key =
                    word(pos + 1).ok_or_else(|| parse_error(input, "expected a key after '!'"))?;
                pos += 2;
                (key, Op::DoesNotExist)
            } else {
                let key = word(pos).ok_or_else(|| parse_error(input, "expected a key"))?;
                pos += 1;
                match tokens.get(pos) {
                    None | Some(Token::Comma) => (key, Op::Exists),
                    Some(Token::Eq) | Some(Token::NotEq) => {
                        let negate = tokens[pos] == Token::NotEq;
                        pos += 1;
                        let value = match word(pos) {
                            Some(v) => {
                                pos += 1;
                                v
                            }
                            None => String::new(),
                        };
                        if negate {
                            (key, Op::NotEquals(value))
                        } else {
                            (key, Op::Equals(value))
                        }
                    }
                    Some(Token::Gt) | Some(Token::Lt) => {
                        let greater = tokens[pos] == Token::Gt;
                        let value = word(pos + 1)
                            .and_then(|v| v.parse::<i64>().ok())
                            .ok_or_else(|| parse_error(input, "expected an integer"))?;
                        pos += 2;
                        if greater {
                            (key, Op::Gt(value))
                        } else {
                            (key, Op::Lt(value))
                        }
                    }
                    Some(Token::Word(w)) if w == "in" || w == "notin" => {
                        let is_in = w == "in";
                        pos += 1;
                        if tokens.get(pos) != Some(&Token::Open) {
                            return Err(parse_error(input, "expected '(' after set operator"));
                        }
                        pos += 1;
                        let mut values = Vec::new();
                        loop {
                            match tokens.get(pos) {
                                Some(Token::Word(v)) => {
                                    values.push(v.clone());
                                    pos += 1;
                                }
                                Some(Token::Comma) => pos += 1,
                                Some(Token::Close) => {
                                    pos += 1;
                                    break;
                                }
                                _ => return Err(parse_error(input, "unterminated value set")),
                            }
                        }
                        if is_in {
                            (key, Op::In(values))
                        } else {
                            (key, Op::NotIn(values))
                        }
                    }
                    Some(_) => return Err(parse_error(input, "unexpected operator")),
                }
            };
            requirements.push(requirement);
            match tokens.get(pos) {
                None => {}
                Some(Token::Comma) => pos += 1,
                Some(_) => return Err(parse_error(input, "expected ',' between requirements")),
            }
        }
        Ok(Self { requirements })
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.requirements.iter().all(|(key, op)| {
            let value = labels.get(key).and_then(Value::as_str);
            match op {
                Op::Exists => value.is_some(),
                Op::DoesNotExist => value.is_none(),
                Op::Equals(v) => value == Some(v.as_str()),
                Op::NotEquals(v) => value != Some(v.as_str()),
                Op::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                Op::NotIn(vs) => !value.is_some_and(|x| vs.iter().any(|v| v == x)),
                Op::Gt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                Op::Lt(n) => value
                    .and_then(|x| x.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }
}

/// A parsed field selector: `field=value` / `field==value` / `field!=value` terms, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

/// The selectable fields of each resource (kube-apiserver's `GetAttrs`/field label conversions).
fn supported_fields(def: &ResourceDef) -> &'static [&'static str] {
    match def.flavor {
        Flavor::Pod => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        Flavor::Node => &["spec.unschedulable"],
        Flavor::Namespace => &["status.phase"],
        Flavor::CoreEvent => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        Flavor::EventV1 => &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        _ => &[],
    }
}

fn split_unescaped(input: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in input.chars() {
        if escaped {
            current.push('\\');
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    if escaped {
        current.push('\\');
    }
    parts.push(current);
    parts
}

fn unescape(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Finds the first unescaped operator in a field selector term.
fn split_term(term: &str) -> Option<(String, bool, String)> {
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((term[..i].trim().to_string(), true, unescape(&term[i + 2..])));
            }
            b'=' => {
                let skip = if bytes.get(i + 1) == Some(&b'=') {
                    2
                } else {
                    1
                };
                return Some((
                    term[..i].trim().to_string(),
                    false,
                    unescape(&term[i + skip..]),
                ));
            }
            _ => i += 1,
        }
    }
    None
}

impl FieldSelector {
    pub(crate) fn parse(input: &str, def: &ResourceDef) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        if input.trim().is_empty() {
            return Ok(Self { terms });
        }
        for raw in split_unescaped(input, ',') {
            if raw.trim().is_empty() {
                continue;
            }
            let (field, negate, value) = split_term(&raw).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "invalid selector: '{input}'; can't understand '{raw}'"
                ))
            })?;
            let supported = field == "metadata.name"
                || field == "metadata.namespace"
                || supported_fields(def).contains(&field.as_str());
            if !supported {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field, negate, value));
        }
        Ok(Self { terms })
    }

    /// The value this selector requires for `metadata.name`, if it pins one (used to serve
    /// `fieldSelector=metadata.name=x` without scanning).
    pub(crate) fn required_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, negate, _)| f == "metadata.name" && !negate)
            .map(|(_, _, v)| v.as_str())
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, negate, wanted)| {
            let actual = field_value(object, field);
            (actual == *wanted) != *negate
        })
    }
}

/// A field's value as the field set holds it: strings as-is, booleans as `true`/`false`, and
/// absent fields as their zero value.
fn field_value(object: &Value, field: &str) -> String {
    let mut v = object;
    for part in field.split('.') {
        v = &v[part];
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null if field == "spec.hostNetwork" || field == "spec.unschedulable" => {
            "false".to_string()
        }
        // `source` on core events is the reporting component's name.
        Value::Object(_) if field == "source" => {
            v["component"].as_str().unwrap_or_default().to_string()
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::resources::{def, NODES, PODS};
    use serde_json::json;

    fn labelled(labels: Value) -> Value {
        json!({"metadata": {"labels": labels}})
    }

    #[test]
    fn label_selectors_cover_every_operator() {
        let obj = labelled(json!({"app": "web", "tier": "front", "n": "5"}));
        let check = |sel: &str| LabelSelector::parse(sel).map(|s| s.matches(&obj));
        assert_eq!(check("app=web"), Ok(true));
        assert_eq!(check("app==web"), Ok(true));
        assert_eq!(check("app!=web"), Ok(false));
        assert_eq!(check("missing!=x"), Ok(true));
        assert_eq!(check("app in (web, db)"), Ok(true));
        assert_eq!(check("app notin (web,db)"), Ok(false));
        assert_eq!(check("missing notin (web)"), Ok(true));
        assert_eq!(check("tier"), Ok(true));
        assert_eq!(check("!tier"), Ok(false));
        assert_eq!(check("!missing,app=web"), Ok(true));
        assert_eq!(check("n>4,n<6"), Ok(true));
        assert_eq!(check(""), Ok(true));
        assert_eq!(check("app=web,tier=back"), Ok(false));
        assert!(check("app in web").is_err());
        assert!(check("app=web tier").is_err());
    }

    #[test]
    fn pod_field_selectors_treat_absent_as_empty() {
        let pods = def(PODS);
        let unbound = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {}, "status": {"phase": "Pending"}});
        let bound =
            json!({"metadata": {"name": "b", "namespace": "ns"}, "spec": {"nodeName": "n1"}});
        let sel = FieldSelector::parse("spec.nodeName=", pods).unwrap_or_default();
        assert!(sel.matches(&unbound));
        assert!(!sel.matches(&bound));
        let sel = FieldSelector::parse("spec.nodeName!=,metadata.namespace==ns", pods)
            .unwrap_or_default();
        assert!(sel.matches(&bound));
        let sel = FieldSelector::parse("status.phase=Pending", pods).unwrap_or_default();
        assert!(sel.matches(&unbound));
        assert_eq!(sel.required_name(), None);
        let err = FieldSelector::parse("spec.foo=bar", pods)
            .err()
            .map(|e| e.message);
        assert_eq!(err.as_deref(), Some("field label not supported: spec.foo"));
        let sel = FieldSelector::parse("spec.unschedulable=false", def(NODES)).unwrap_or_default();
        assert!(sel.matches(&json!({"spec": {}})));
    }
}
