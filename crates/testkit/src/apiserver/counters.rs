//! Request accounting (verb × resource × subresource, like kube-apiserver's
//! `apiserver_request_total`) and injected failures.

use std::collections::BTreeMap;
use std::fmt;

/// A Kubernetes API verb, as kube-apiserver's audit log and metrics name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verb {
    /// GET of one object (or one object's subresource).
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST, including `pods/binding` and `pods/eviction`.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// The lower-case name kube-apiserver uses (`deletecollection` for [`Verb::DeleteCollection`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether the verb changes state.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
        )
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one counter counts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestKey {
    /// The verb.
    pub verb: Verb,
    /// API group, `""` for core.
    pub group: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
    /// Subresource, `""` for the object itself.
    pub subresource: String,
}

/// A snapshot of the request counters. Every resource request counts once, when it arrives,
/// whether it then succeeds, fails or is failed on purpose by [`fail_next`](super::ApiServer::fail_next).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    counts: BTreeMap<RequestKey, u64>,
    non_resource: u64,
}

impl RequestCounts {
    pub(crate) fn record(&mut self, key: RequestKey) {
        *self.counts.entry(key).or_default() += 1;
    }

    pub(crate) fn record_non_resource(&mut self) {
        self.non_resource += 1;
    }

    /// Requests with this verb on this resource and subresource (`""` for the object itself),
    /// summed over API groups; name a group with `plural.group` (`events.events.k8s.io`).
    pub fn get(&self, verb: Verb, resource: &str, subresource: &str) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| {
                k.verb == verb
                    && k.subresource == subresource
                    && (k.resource == resource || format!("{}.{}", k.resource, k.group) == resource)
            })
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests with this verb, on any resource.
    pub fn verb(&self, verb: Verb) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| k.verb == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// Requests that change state (create, update, patch, delete, deletecollection).
    pub fn writes(&self) -> u64 {
        self.counts
            .iter()
            .filter(|(k, _)| k.verb.is_write())
            .map(|(_, n)| n)
            .sum()
    }

    /// All resource requests (discovery, `/version` and health checks excluded).
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    /// Requests for discovery, `/version`, health checks and unknown paths.
    pub fn non_resource(&self) -> u64 {
        self.non_resource
    }

    /// Every non-zero counter.
    pub fn iter(&self) -> impl Iterator<Item = (&RequestKey, u64)> {
        self.counts.iter().map(|(k, n)| (k, *n))
    }

    /// The requests made since `earlier` was taken.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        let mut counts = BTreeMap::new();
        for (k, n) in &self.counts {
            let before = earlier.counts.get(k).copied().unwrap_or_default();
            if *n > before {
                counts.insert(k.clone(), n - before);
            }
        }
        RequestCounts {
            counts,
            non_resource: self.non_resource.saturating_sub(earlier.non_resource),
        }
    }
}

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Answers with this HTTP code before touching the store.
    Fail(u16),
    /// Holds the request this long, then serves it.
    Delay(std::time::Duration),
}

/// An injected fault waiting for matching requests.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub verb: Verb,
    pub resource: String,
    pub subresource: String,
    pub effect: Effect,
    pub remaining: u32,
}

impl Fault {
    pub(crate) fn matches(&self, key: &RequestKey) -> bool {
        self.remaining > 0
            && self.verb == key.verb
            && (self.resource == "*"
                || self.resource == key.resource
                || self.resource == format!("{}.{}", key.resource, key.group))
            && (self.subresource == "*" || self.subresource == key.subresource)
    }
}

/// Takes one use of the first fault matching `key` whose effect is a delay (`delay`) or a
/// failure (`!delay`), returning its effect.
pub(crate) fn take_fault(faults: &mut Vec<Fault>, key: &RequestKey, delay: bool) -> Option<Effect> {
    let fault = faults
        .iter_mut()
        .find(|f| f.matches(key) && matches!(f.effect, Effect::Delay(_)) == delay)?;
    fault.remaining -= 1;
    let effect = fault.effect;
    faults.retain(|f| f.remaining > 0);
    Some(effect)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(verb: Verb, group: &str, resource: &str, sub: &str) -> RequestKey {
        RequestKey {
            verb,
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
        }
    }

    #[test]
    fn counts_sum_over_groups_unless_qualified() {
        let mut c = RequestCounts::default();
        c.record(key(Verb::Create, "", "events", ""));
        c.record(key(Verb::Create, "events.k8s.io", "events", ""));
        c.record(key(Verb::Create, "", "pods", "binding"));
        assert_eq!(c.get(Verb::Create, "events", ""), 2);
        assert_eq!(c.get(Verb::Create, "events.events.k8s.io", ""), 1);
        assert_eq!(c.get(Verb::Create, "pods", "binding"), 1);
        assert_eq!(c.get(Verb::Create, "pods", ""), 0);
        assert_eq!(c.writes(), 3);
        let before = c.clone();
        c.record(key(Verb::List, "", "pods", ""));
        assert_eq!(c.since(&before).total(), 1);
    }

    #[test]
    fn faults_are_used_up() {
        let mut faults = vec![Fault {
            verb: Verb::Create,
            resource: "pods".into(),
            subresource: "binding".into(),
            effect: Effect::Fail(500),
            remaining: 2,
        }];
        let bind = key(Verb::Create, "", "pods", "binding");
        assert_eq!(
            take_fault(&mut faults, &key(Verb::Create, "", "pods", ""), false),
            None
        );
        assert_eq!(take_fault(&mut faults, &bind, true), None, "not a delay");
        assert_eq!(
            take_fault(&mut faults, &bind, false),
            Some(Effect::Fail(500))
        );
        assert_eq!(
            take_fault(&mut faults, &bind, false),
            Some(Effect::Fail(500))
        );
        assert_eq!(take_fault(&mut faults, &bind, false), None);
    }

    #[test]
    fn a_delay_and_a_failure_on_one_request_are_taken_apart() {
        let second = std::time::Duration::from_secs(1);
        let mut faults = vec![
            Fault {
                verb: Verb::Patch,
                resource: "pods".into(),
                subresource: "status".into(),
                effect: Effect::Delay(second),
                remaining: 1,
            },
            Fault {
                verb: Verb::Patch,
                resource: "*".into(),
                subresource: "*".into(),
                effect: Effect::Fail(429),
                remaining: 1,
            },
        ];
        let patch = key(Verb::Patch, "", "pods", "status");
        assert_eq!(
            take_fault(&mut faults, &patch, false),
            Some(Effect::Fail(429))
        );
        assert_eq!(
            take_fault(&mut faults, &patch, true),
            Some(Effect::Delay(second))
        );
        assert!(faults.is_empty());
    }
}
