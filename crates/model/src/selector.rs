//! Placement constraints: taints and tolerations, node selectors and affinity, host ports.

use std::collections::BTreeMap;

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    /// New pods are not placed.
    NoSchedule,
    /// New pods are placed elsewhere if possible (a scoring hint, not a filter).
    PreferNoSchedule,
    /// New pods are not placed and running ones are evicted.
    NoExecute,
}

impl TaintEffect {
    /// Parses Kubernetes' spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "NoSchedule" => Some(Self::NoSchedule),
            "PreferNoSchedule" => Some(Self::PreferNoSchedule),
            "NoExecute" => Some(Self::NoExecute),
            _ => None,
        }
    }

    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Key; empty with `exists` means every key.
    pub key: String,
    /// `operator: Exists` (else `Equal`).
    pub exists: bool,
    /// Value for `Equal`.
    pub value: String,
    /// Effect; `None` means every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Whether this toleration tolerates `taint`, by Kubernetes' rules.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if let Some(e) = self.effect {
            if e != taint.effect {
                return false;
            }
        }
        if self.key.is_empty() {
            return self.exists;
        }
        if self.key != taint.key {
            return false;
        }
        self.exists || self.value == taint.value
    }
}

/// The first taint with effect NoSchedule or NoExecute that no toleration tolerates.
pub fn untolerated_taint<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().find(|t| {
        t.effect != TaintEffect::PreferNoSchedule && !tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

/// A node selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    /// Label value is one of the values.
    In,
    /// Label absent or value not among the values.
    NotIn,
    /// Label present.
    Exists,
    /// Label absent.
    DoesNotExist,
    /// Label value, as an integer, is greater than the single value.
    Gt,
    /// Label value, as an integer, is less than the single value.
    Lt,
}

impl SelectorOp {
    /// Parses Kubernetes' spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "In" => Self::In,
            "NotIn" => Self::NotIn,
            "Exists" => Self::Exists,
            "DoesNotExist" => Self::DoesNotExist,
            "Gt" => Self::Gt,
            "Lt" => Self::Lt,
            _ => return None,
        })
    }
}

/// One requirement of a node selector term.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// Label key (or field name for field requirements).
    pub key: String,
    /// Operator.
    pub op: SelectorOp,
    /// Values.
    pub values: Vec<String>,
}

impl Requirement {
    /// Whether `value` (the label's value, if present) satisfies the requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match self.op {
            SelectorOp::In => value.is_some_and(|v| self.values.iter().any(|x| x == v)),
            SelectorOp::NotIn => value.is_none_or(|v| !self.values.iter().any(|x| x == v)),
            SelectorOp::Exists => value.is_some(),
            SelectorOp::DoesNotExist => value.is_none(),
            SelectorOp::Gt | SelectorOp::Lt => {
                let (Some(v), Some(bound)) = (value, self.values.first()) else {
                    return false;
                };
                match (v.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(v), Ok(b)) => {
                        if self.op == SelectorOp::Gt {
                            v > b
                        } else {
                            v < b
                        }
                    }
                    _ => false,
                }
            }
        }
    }
}

/// A node selector term: all expressions and all field requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SelectorTerm {
    /// `matchExpressions` on labels.
    pub expressions: Vec<Requirement>,
    /// `matchFields` (only `metadata.name` is defined by Kubernetes).
    pub fields: Vec<Requirement>,
}

impl SelectorTerm {
    /// Whether the node with `name` and `labels` satisfies the term. An empty term matches
    /// nothing, as in Kubernetes.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.expressions.is_empty() && self.fields.is_empty() {
            return false;
        }
        self.expressions
            .iter()
            .all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
            && self.fields.iter().all(|r| {
                let v = (r.key == "metadata.name").then_some(name);
                r.matches(v)
            })
    }
}

/// A host port a container asks for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// Host IP (`0.0.0.0` when unset).
    pub ip: String,
    /// Protocol (`TCP` when unset).
    pub protocol: String,
    /// Port number.
    pub port: i32,
}

impl HostPort {
    /// Whether two host ports collide (same port and protocol, and the same or a wildcard IP).
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.ip == other.ip || self.ip == "0.0.0.0" || other.ip == "0.0.0.0")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            op,
            values: values.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn every_operator_behaves_as_kubernetes() {
        let l = labels(&[("pool", "gpu"), ("gen", "5")]);
        let m = |r: Requirement| r.matches(l.get(&r.key).map(String::as_str));
        assert!(m(req("pool", SelectorOp::In, &["gpu", "x"])));
        assert!(!m(req("pool", SelectorOp::NotIn, &["gpu"])));
        assert!(
            m(req("zone", SelectorOp::NotIn, &["a"])),
            "absent label passes NotIn"
        );
        assert!(m(req("pool", SelectorOp::Exists, &[])));
        assert!(m(req("zone", SelectorOp::DoesNotExist, &[])));
        assert!(m(req("gen", SelectorOp::Gt, &["4"])));
        assert!(!m(req("gen", SelectorOp::Lt, &["5"])));
        assert!(
            !m(req("pool", SelectorOp::Gt, &["1"])),
            "non-integer never matches Gt"
        );
    }

    #[test]
    fn match_fields_selects_by_node_name() {
        let term = SelectorTerm {
            expressions: vec![],
            fields: vec![req("metadata.name", SelectorOp::In, &["n1"])],
        };
        assert!(term.matches("n1", &BTreeMap::new()));
        assert!(!term.matches("n2", &BTreeMap::new()));
        assert!(!SelectorTerm::default().matches("n1", &BTreeMap::new()));
    }

    #[test]
    fn tolerations_follow_kubernetes_rules() {
        let taint = Taint {
            key: "nvidia.com/gpu".into(),
            value: "present".into(),
            effect: TaintEffect::NoSchedule,
        };
        let exists = Toleration {
            key: "nvidia.com/gpu".into(),
            exists: true,
            value: String::new(),
            effect: None,
        };
        let wrong_value = Toleration {
            key: "nvidia.com/gpu".into(),
            exists: false,
            value: "absent".into(),
            effect: Some(TaintEffect::NoSchedule),
        };
        let everything = Toleration {
            key: String::new(),
            exists: true,
            value: String::new(),
            effect: None,
        };
        assert!(exists.tolerates(&taint));
        assert!(!wrong_value.tolerates(&taint));
        assert!(everything.tolerates(&taint));
        let taints = [taint];
        assert!(untolerated_taint(&taints, &[]).is_some());
        assert!(untolerated_taint(&taints, &[exists]).is_none());
    }
}
