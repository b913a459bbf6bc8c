//! kube-apiserver's checks of names and labels, written once for the simulator and the API
//! stand-in, so that an object one of them accepts a real server accepts too.
//!
//! The string rules are apimachinery's (`k8s.io/apimachinery/pkg/util/validation`):
//! [`dns1123_subdomain`] (`IsDNS1123Subdomain`: most object names), [`dns1123_label`]
//! (`IsDNS1123Label`: namespaces), [`qualified_name`] (`IsQualifiedName`: label keys, resource
//! names) and [`label_value`] (`IsValidLabelValue`). Each returns the server's messages, none
//! when the value is valid. [`object_meta`] applies them to an object's name, namespace and
//! labels as `ValidateObjectMeta` does, as `(field, message)` causes of a 422 Invalid, and
//! [`invalid_message`] words them as the server's error does.

/// How an object's `metadata.name` is checked (the `ValidateNameFunc` of its kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: Pods, Nodes, custom resources and most other kinds.
    Subdomain,
    /// `NameIsDNSLabel`: Namespaces.
    Label,
}

impl NameRule {
    /// The messages for `name` under this rule, none when it is valid.
    pub fn check(self, name: &str) -> Vec<String> {
        match self {
            NameRule::Subdomain => dns1123_subdomain(name),
            NameRule::Label => dns1123_label(name),
        }
    }
}

const LABEL_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;

const LABEL_REGEX_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_REGEX_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const QUALIFIED_REGEX_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_REGEX_ERROR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// Non-empty, made of `allowed` bytes, starting and ending with `edge` bytes.
fn shaped(value: &str, allowed: impl Fn(u8) -> bool, edge: impl Fn(u8) -> bool) -> bool {
    let bytes = value.as_bytes();
    bytes.iter().all(|&b| allowed(b))
        && bytes.first().is_some_and(|&b| edge(b))
        && bytes.last().is_some_and(|&b| edge(b))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn label_shaped(value: &str) -> bool {
    let lower_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    shaped(value, |b| lower_alnum(b) || b == b'-', lower_alnum)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn qualified_shaped(value: &str) -> bool {
    shaped(
        value,
        |b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'),
        |b| b.is_ascii_alphanumeric(),
    )
}

fn subdomain_shaped(value: &str) -> bool {
    value.split('.').all(label_shaped)
}

/// `IsDNS1123Subdomain`: at most 253 characters, dot-separated DNS-1123 labels.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        errors.push(max_len(SUBDOMAIN_MAX));
    }
    if !subdomain_shaped(value) {
        errors.push(SUBDOMAIN_REGEX_ERROR.to_string());
    }
    errors
}

/// `IsDNS1123Label`: at most 63 lower-case alphanumerics or `-`, alphanumeric at both ends.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(max_len(LABEL_MAX));
    }
    if !label_shaped(value) {
        // A valid subdomain that is not a label can only have dots (length is checked above).
        errors.push(if subdomain_shaped(value) {
            "must not contain dots".to_string()
        } else {
            LABEL_REGEX_ERROR.to_string()
        });
    }
    errors
}

/// `IsQualifiedName` (label keys, resource names): an optional DNS-1123 subdomain prefix and
/// `/`, then a name of at most 63 alphanumerics, `-`, `_` or `.`, alphanumeric at both ends.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errors.push("prefix part must be non-empty".to_string());
            } else {
                errors.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_REGEX_ERROR} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )]
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX {
        errors.push(format!("name part {}", max_len(LABEL_MAX)));
    }
    if !qualified_shaped(name) {
        errors.push(format!("name part {QUALIFIED_REGEX_ERROR}"));
    }
    errors
}

/// `IsValidLabelValue`: empty, or at most 63 alphanumerics, `-`, `_` or `.`, alphanumeric at
/// both ends.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(max_len(LABEL_MAX));
    }
    if !value.is_empty() && !qualified_shaped(value) {
        errors.push(LABEL_VALUE_REGEX_ERROR.to_string());
    }
    errors
}

/// `field.Invalid(field, value, message)` for each message, as `(field, "Invalid value: …")`.
pub fn invalid(field: &str, value: &str, messages: Vec<String>) -> Vec<(String, String)> {
    messages
        .into_iter()
        .map(|m| (field.to_string(), format!("Invalid value: {value:?}: {m}")))
        .collect()
}

/// The part of `ValidateObjectMeta` that reads names and labels: `metadata.name` under
/// `rule`, `metadata.namespace` (a DNS-1123 label, when the object has one) and
/// `metadata.labels` (`ValidateLabels`: qualified-name keys, label values), as `(field,
/// message)` causes in the server's order; none for a valid object.
pub fn object_meta<'a>(
    name: &str,
    rule: NameRule,
    namespace: Option<&str>,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Vec<(String, String)> {
    let mut causes = invalid("metadata.name", name, rule.check(name));
    if let Some(ns) = namespace {
        causes.extend(invalid("metadata.namespace", ns, dns1123_label(ns)));
    }
    for (key, value) in labels {
        causes.extend(invalid("metadata.labels", key, qualified_name(key)));
        causes.extend(invalid("metadata.labels", value, label_value(value)));
    }
    causes
}

/// kube-apiserver's message for a 422 Invalid: `Node "nodeA" is invalid: metadata.name: …`,
/// several causes in brackets. `kind` is qualified by its group for grouped kinds
/// (`PodGroup.scheduling.volcano.sh`).
pub fn invalid_message(kind: &str, name: &str, causes: &[(String, String)]) -> String {
    let text: Vec<String> = causes.iter().map(|(f, m)| format!("{f}: {m}")).collect();
    if text.len() == 1 {
        format!("{kind} \"{name}\" is invalid: {}", text[0])
    } else {
        format!("{kind} \"{name}\" is invalid: [{}]", text.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ported from apimachinery's `validation_test.go` (`TestIsDNS1123Label`,
    /// `TestIsDNS1123Subdomain`, `TestIsQualifiedName`, `TestIsValidLabelValue`): each rule
    /// with the values it accepts and those it refuses.
    #[test]
    fn rules_accept_and_refuse_as_apimachinery_does() {
        type Rule = fn(&str) -> Vec<String>;
        let a63 = "a".repeat(63);
        let a64 = "a".repeat(64);
        let a253 = "a".repeat(253);
        let a254 = "a".repeat(254);
        let long_qualified = format!("{a253}/{}", "b".repeat(63));
        let long_prefix = format!("{a254}/abc");
        let cases: Vec<(&str, Rule, Vec<&str>, Vec<&str>)> = vec![
            (
                "IsDNS1123Label",
                dns1123_label,
                vec![
                    "a",
                    "ab",
                    "abc",
                    "a1",
                    "a-1",
                    "a--1--2--b",
                    "0",
                    "01",
                    "012",
                    "1a",
                    "1-a",
                    "1--a--b--2",
                    &a63,
                ],
                vec![
                    "", "A", "ABC", "aBc", "A1", "A-1", "1-A", "-", "a-", "-a", "1-", "-1", "_",
                    "a_", "_a", "a_b", "1_", "_1", "1_2", ".", "a.", ".a", "a.b", "1.", ".1",
                    "1.2", " ", "a ", " a", "a b", "1 ", " 1", "1 2", &a64,
                ],
            ),
            (
                "IsDNS1123Subdomain",
                dns1123_subdomain,
                vec![
                    "a",
                    "ab",
                    "abc",
                    "a1",
                    "a-1",
                    "a--1--2--b",
                    "0",
                    "01",
                    "012",
                    "1a",
                    "1-a",
                    "1--a--b--2",
                    "a.a",
                    "ab.a",
                    "abc.a",
                    "a1.a",
                    "a-1.a",
                    "a--1--2--b.a",
                    "a.1",
                    "ab.1",
                    "abc.1",
                    "a1.1",
                    "a-1.1",
                    "a--1--2--b.1",
                    "0.a",
                    "01.a",
                    "012.a",
                    "1a.a",
                    "1-a.a",
                    "0.1",
                    "01.1",
                    "012.1",
                    "1a.1",
                    "1-a.1",
                    "1--a--b--2.1",
                    "a.b.c.d.e",
                    "aa.bb.cc.dd.ee",
                    "1.2.3.4.5",
                    "11.22.33.44.55",
                    &a253,
                ],
                vec![
                    "",
                    "A",
                    "ABC",
                    "aBc",
                    "A1",
                    "A-1",
                    "1-A",
                    "-",
                    "a-",
                    "-a",
                    "1-",
                    "-1",
                    "_",
                    "a_",
                    "_a",
                    "a_b",
                    "1_",
                    "_1",
                    "1_2",
                    ".",
                    "a.",
                    ".a",
                    "a..b",
                    "1.",
                    ".1",
                    "1..2",
                    " ",
                    "a ",
                    " a",
                    "a b",
                    "1 ",
                    " 1",
                    "1 2",
                    "A.a",
                    "aB.a",
                    "ab.A",
                    "A1.a",
                    "a1.A",
                    "A.1",
                    "aB.1",
                    "A1.1",
                    "1A.1",
                    "0.A",
                    "01.A",
                    "012.A",
                    "1A.a",
                    "1a.A",
                    "A.B.C.D.E",
                    "AA.BB.CC.DD.EE",
                    "a.B.c.d.e",
                    "aa.bB.cc.dd.ee",
                    "a@b",
                    "a,b",
                    "a;b",
                    "a:b",
                    "a%b",
                    "a?b",
                    "a$b",
                    &a254,
                ],
            ),
            (
                "IsQualifiedName",
                qualified_name,
                vec![
                    "simple",
                    "now-with-dashes",
                    "1-starts-with-num",
                    "1234",
                    "simple/simple",
                    "now-with-dashes/simple",
                    "now-with-dashes/now-with-dashes",
                    "now.with.dots/simple",
                    "now-with.dashes-and.dots/simple",
                    "1-num.2-num/3-num",
                    "1234/5678",
                    "1.2.3.4/5678",
                    "Uppercase_Is_OK_123",
                    "example.com/Uppercase_Is_OK_123",
                    "requests.storage-foo",
                    &a63,
                    &long_qualified,
                ],
                vec![
                    "nospecialchars%^=@",
                    "cantendwithadash-",
                    "-cantstartwithadash-",
                    "only/one/slash",
                    "Example.com/abc",
                    "example_com/abc",
                    "example.com/",
                    "/simple",
                    &a64,
                    &long_prefix,
                ],
            ),
            (
                "IsValidLabelValue",
                label_value,
                vec![
                    "simple",
                    "now-with-dashes",
                    "1-starts-with-num",
                    "end-with-num-1",
                    "1234",
                    &a63,
                    "",
                ],
                vec![
                    "nospecialchars%^=@",
                    "Tama-nui-te-rā.is.Māori.sun",
                    "\\backslashes\\are\\bad",
                    "-starts-with-dash",
                    "ends-with-dash-",
                    ".starts.with.dot",
                    "ends.with.dot.",
                    &a64,
                ],
            ),
        ];
        for (rule_name, rule, good, bad) in cases {
            for value in good {
                assert_eq!(rule(value), Vec::<String>::new(), "{rule_name}({value:?})");
            }
            for value in bad {
                assert!(
                    !rule(value).is_empty(),
                    "{rule_name}({value:?}) must refuse"
                );
            }
        }
    }

    #[test]
    fn a_node_named_in_capitals_is_refused_as_the_server_words_it() {
        let causes = object_meta("nodeA", NameRule::Subdomain, None, []);
        assert_eq!(
            invalid_message("Node", "nodeA", &causes),
            format!("Node \"nodeA\" is invalid: metadata.name: Invalid value: \"nodeA\": {SUBDOMAIN_REGEX_ERROR}")
        );
    }

    #[test]
    fn names_namespaces_and_labels_are_each_checked() {
        assert!(object_meta("p-1", NameRule::Subdomain, Some("team-a"), [("app", "x")]).is_empty());
        let causes = object_meta(
            "p_1",
            NameRule::Subdomain,
            Some("Team"),
            [("bad key!", "ok"), ("ok", "-bad")],
        );
        let fields: Vec<&str> = causes.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "metadata.namespace",
                "metadata.labels",
                "metadata.labels"
            ]
        );
        assert_eq!(
            dns1123_label("a.b"),
            vec!["must not contain dots".to_string()]
        );
        assert_eq!(dns1123_label(&"a".repeat(64)), vec![max_len(63)]);
        assert_eq!(
            qualified_name("example.com/"),
            vec![
                "name part must be non-empty".to_string(),
                format!("name part {QUALIFIED_REGEX_ERROR}")
            ]
        );
        assert_eq!(
            NameRule::Label.check("Team"),
            vec![LABEL_REGEX_ERROR.to_string()]
        );
    }
}
