//! Label selectors in kubectl's string form (`app=tp8,tier!=web,gpu,!spot,zone in (a,b)`),
//! for the scenario steps that act as kubelets.

use std::collections::BTreeMap;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Absent(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<Req>,
}

/// Splits at commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses `text`; the error says which part is not understood.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if text.trim().is_empty() {
            return Ok(LabelSelector { reqs });
        }
        for part in split_top(text) {
            let part = part.trim();
            let bad = || format!("cannot parse {part:?} in label selector {text:?}");
            let req = if let Some((k, v)) = part.split_once("!=") {
                Req::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                Req::Absent(k.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set_values(rest).ok_or_else(bad)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Req::In(k.trim().into(), set_values(rest).ok_or_else(bad)?)
            } else if !part.is_empty() && !part.contains(char::is_whitespace) {
                Req::Exists(part.into())
            } else {
                return Err(bad());
            };
            reqs.push(req);
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::Ne(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Req::Exists(k) => get(k).is_some(),
            Req::Absent(k) => get(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_equality_and_set_forms() {
        let labels: BTreeMap<String, String> = [("app", "tp8"), ("zone", "b")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&labels));
        assert!(m("app=tp8"));
        assert!(m("app==tp8,zone"));
        assert!(!m("app!=tp8"));
        assert!(m("zone in (a, b),!spot"));
        assert!(!m("zone notin (b)"));
        assert!(m(""));
        assert!(!LabelSelector::parse("app").unwrap().matches(None));
        assert!(LabelSelector::parse("zone in a").is_err());
    }
}
