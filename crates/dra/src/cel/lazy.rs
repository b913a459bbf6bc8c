//! The CEL value of a device, resolved on access: `device.attributes["d"].name` looks the one
//! attribute up in the [`Device`] it borrows and copies nothing else, as Kubernetes' own
//! environment does with its lazy map values. Evaluating a selector therefore costs what the
//! selector reads, not the size of the device's attribute list.
//!
//! Member access (`.f`, `["k"]`, `has()`) is lazy. Everything else a map can do (`in`,
//! `size()`, the comprehensions, `==`) is done by the `cel` crate's own map, built once per
//! value on first such use, so those answer exactly as an eagerly built map would.
//!
//! The one difference from an eager map: `==` with a map *literal on the left* and a device
//! map on the right is false (the crate's map compares only with its own kind); with the device
//! map on the left, or two device maps, equality is by entries.

use super::{semver_or_string, Quantity};
use caldera_model::dra::{AttributeValue, Device};
use cel::common::traits::{Container, Indexer, Iterable, Iterator, Sizer, Zeroer};
use cel::common::types::{self, CelBool, CelInt, CelString, Kind, Type};
use cel::common::value::{CowVal, Val};
use cel::{ExecutionError, Value};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

/// Which of a device's two maps of maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Attributes,
    Capacity,
}

/// A node of the device's value tree.
#[derive(Debug, Clone, Copy)]
enum Node<'v> {
    /// `device`: `driver`, `attributes`, `capacity`, `allowMultipleAllocations`.
    Device(&'v Device),
    /// `device.attributes` or `device.capacity`: domain → map.
    Domains(&'v Device, Part),
    /// `device.attributes["d"]` or `device.capacity["d"]`: name → value.
    Domain(&'v Device, Part, &'v str),
}

/// A device, or one of its maps, as a CEL map that resolves members on access.
pub(crate) struct Lazy<'v> {
    node: Node<'v>,
    /// The whole map, built on the first use other than member access.
    whole: OnceLock<Box<dyn Val + 'v>>,
}

impl fmt::Debug for Lazy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // As an eager map would print: evaluation errors quote values this way.
        fmt::Debug::fmt(self.whole(), f)
    }
}

impl Clone for Lazy<'_> {
    fn clone(&self) -> Self {
        Lazy::new(self.node)
    }
}

/// `domain/name` → (domain, name), as the attribute maps are keyed.
pub(crate) fn split(qualified: &str) -> (&str, &str) {
    qualified.rsplit_once('/').unwrap_or(("", qualified))
}

impl<'v> Lazy<'v> {
    fn new(node: Node<'v>) -> Self {
        Lazy {
            node,
            whole: OnceLock::new(),
        }
    }

    /// The CEL value `device` of `d`.
    pub(crate) fn device(d: &'v Device) -> Self {
        Lazy::new(Node::Device(d))
    }

    fn whole(&self) -> &(dyn Val + 'v) {
        self.whole
            .get_or_init(|| {
                Box::<dyn Val>::try_from(eager(self.node)).unwrap_or_else(|_| {
                    // Every value `eager` builds converts; an empty map is the safe answer.
                    Box::new(types::CelMap::default())
                })
            })
            .as_ref()
    }

    /// The entry at `key`, a string; `None` when there is none.
    fn entry(&self, key: &str) -> Option<Box<dyn Val + 'v>> {
        match self.node {
            Node::Device(d) => match key {
                "driver" => Some(Box::new(CelString::from(&*d.driver))),
                "attributes" => Some(Box::new(Lazy::new(Node::Domains(d, Part::Attributes)))),
                "capacity" => Some(Box::new(Lazy::new(Node::Domains(d, Part::Capacity)))),
                "allowMultipleAllocations" => Some(Box::new(CelBool::from(d.shared))),
                _ => None,
            },
            Node::Domains(d, part) => {
                // The driver's own domain always exists, so `device.attributes["<driver>"].x` on
                // a device without attributes is "no such key x", as upstream.
                if key == &*d.driver {
                    return Some(Box::new(Lazy::new(Node::Domain(d, part, &d.driver))));
                }
                let domain = names(d, part)
                    .map(|n| split(n).0)
                    .find(|domain| *domain == key)?;
                Some(Box::new(Lazy::new(Node::Domain(d, part, domain))))
            }
            Node::Domain(d, Part::Attributes, domain) => {
                let (_, v) = d
                    .attributes
                    .iter()
                    .find(|(n, _)| split(n) == (domain, key))?;
                Some(match v {
                    AttributeValue::Int(i) => Box::new(CelInt::from(*i)),
                    AttributeValue::Bool(b) => Box::new(CelBool::from(*b)),
                    AttributeValue::String(s) => Box::new(CelString::from(&**s)),
                    AttributeValue::Version(s) => leaf(semver_or_string(s)),
                })
            }
            Node::Domain(d, Part::Capacity, domain) => {
                let (_, c) = d.capacity.iter().find(|(n, _)| split(n) == (domain, key))?;
                Some(leaf(Value::Opaque(Arc::new(Quantity(c.milli)))))
            }
        }
    }
}

/// The qualified names of one part of `d`.
fn names(d: &Device, part: Part) -> Box<dyn std::iter::Iterator<Item = &Arc<str>> + '_> {
    match part {
        Part::Attributes => Box::new(d.attributes.keys()),
        Part::Capacity => Box::new(d.capacity.keys()),
    }
}

/// A scalar value as the interpreter holds it.
fn leaf(v: Value) -> Box<dyn Val> {
    Box::<dyn Val>::try_from(v).unwrap_or_else(|_| Box::new(cel::common::types::CelNull))
}

/// The value of `node`, built whole.
fn eager(node: Node<'_>) -> Value {
    let map = |m: HashMap<String, Value>| -> Value { m.into() };
    match node {
        Node::Device(d) => {
            let mut device: HashMap<String, Value> = HashMap::new();
            device.insert(
                "driver".into(),
                Value::String(Arc::new(d.driver.to_string())),
            );
            device.insert(
                "attributes".into(),
                eager(Node::Domains(d, Part::Attributes)),
            );
            device.insert("capacity".into(), eager(Node::Domains(d, Part::Capacity)));
            device.insert("allowMultipleAllocations".into(), Value::Bool(d.shared));
            map(device)
        }
        Node::Domains(d, part) => {
            let mut domains: HashMap<String, Value> = HashMap::new();
            domains.insert(
                d.driver.to_string(),
                eager(Node::Domain(d, part, &d.driver)),
            );
            for n in names(d, part) {
                let domain = split(n).0;
                domains
                    .entry(domain.to_string())
                    .or_insert_with(|| eager(Node::Domain(d, part, domain)));
            }
            map(domains)
        }
        Node::Domain(d, part, domain) => {
            let mut entries: HashMap<String, Value> = HashMap::new();
            match part {
                Part::Attributes => {
                    for (n, v) in &d.attributes {
                        let (dom, id) = split(n);
                        if dom != domain {
                            continue;
                        }
                        let v = match v {
                            AttributeValue::Int(i) => Value::Int(*i),
                            AttributeValue::Bool(b) => Value::Bool(*b),
                            AttributeValue::String(s) => Value::String(Arc::new(s.to_string())),
                            AttributeValue::Version(s) => semver_or_string(s),
                        };
                        entries.insert(id.to_string(), v);
                    }
                }
                Part::Capacity => {
                    for (n, c) in &d.capacity {
                        let (dom, id) = split(n);
                        if dom == domain {
                            entries
                                .insert(id.to_string(), Value::Opaque(Arc::new(Quantity(c.milli))));
                        }
                    }
                }
            }
            map(entries)
        }
    }
}

impl<'v> Val for Lazy<'v> {
    fn get_type(&self) -> &Type {
        <Self as Val>::cel_type()
    }

    fn cel_type() -> &'static Type {
        &types::MAP_TYPE
    }

    fn as_container(&self) -> Option<&dyn Container> {
        self.whole().as_container()
    }

    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }

    fn as_sizer(&self) -> Option<&dyn Sizer> {
        self.whole().as_sizer()
    }

    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        self.whole().as_zeroer()
    }

    fn equals(&self, other: &dyn Val) -> bool {
        // By entries, as a map compares: same size, and each of our keys found in `other` with
        // an equal value. `other` may be the crate's map or another lazy one.
        if other.get_type().kind() != Kind::Map {
            return false;
        }
        let (Some(mine), Some(their_size), Some(theirs)) = (
            self.whole().as_sizer().map(|s| s.size()),
            other.as_sizer().map(|s| s.size()),
            other.as_indexer(),
        ) else {
            return false;
        };
        if mine != their_size {
            return false;
        }
        let Some(keys) = self.whole().as_iterable() else {
            return false;
        };
        let mut it = keys.iter();
        while let Some(k) = it.next() {
            // Our entry lazily, so a nested map compares by entries too.
            match (Indexer::get(self, k), theirs.get(k)) {
                (Ok(a), Ok(b)) if a.equals(&*b) => {}
                _ => return false,
            }
        }
        true
    }

    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }
}

impl<'v> Indexer for Lazy<'v> {
    fn get<'b, 'w>(&'b self, key: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        match key.downcast_ref::<CelString>() {
            Some(s) => match self.entry(s.inner()) {
                Some(v) => Ok(CowVal::Owned(v)),
                None => Err(ExecutionError::NoSuchKey(Arc::new(s.inner().to_string()))),
            },
            // Keys of other types: as the crate's map answers them.
            None => match self.whole().as_indexer() {
                Some(i) => i.get(key),
                None => Err(ExecutionError::no_such_key("")),
            },
        }
    }

    fn steal<'w>(self: Box<Self>, key: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(key).map(CowVal::into_owned)
    }
}

impl<'v> Iterable for Lazy<'v> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn Iterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        match self.whole().as_iterable() {
            Some(i) => i.iter(),
            None => Box::new(Empty),
        }
    }
}

/// No elements.
struct Empty;

impl<'b, 'w> Iterator<'b, 'w> for Empty {
    fn next(&mut self) -> Option<&'b (dyn Val + 'w)> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cel::{Context, Program};

    /// `cel`'s test GPU, plus a version that is not one, a bool and an unqualified name.
    fn gpu() -> Device {
        let mut d = crate::cel::tests::gpu();
        for (name, v) in [
            (
                "gpu.nvidia.com/brokenVersion",
                AttributeValue::Version("not-a-version".into()),
            ),
            ("gpu.nvidia.com/mig", AttributeValue::Bool(false)),
            ("bare", AttributeValue::Int(1)),
        ] {
            d.attributes.insert(Arc::from(name), v);
        }
        d
    }

    /// The answer (or error text) with `device` bound lazily and bound eagerly.
    fn both(expression: &str, d: &Device) -> (Result<Value, String>, Result<Value, String>) {
        let program = Program::compile(expression).expect("test expressions parse");
        let root = Context::default();
        let mut lazy = root.new_inner_scope();
        lazy.add_variable_as_val("device", Box::new(Lazy::device(d)));
        let mut eager_ctx = root.new_inner_scope();
        eager_ctx.add_variable_from_value("device", eager(Node::Device(d)));
        (
            program.execute(&lazy).map_err(|e| e.to_string()),
            program.execute(&eager_ctx).map_err(|e| e.to_string()),
        )
    }

    #[test]
    fn lazy_devices_answer_as_eager_maps_do() {
        let d = gpu();
        let mut bare = gpu();
        bare.attributes.clear();
        bare.capacity.clear();
        for expression in [
            r#"device.driver"#,
            r#"device.driver == "gpu.nvidia.com""#,
            r#"device.allowMultipleAllocations"#,
            r#"device.attributes["gpu.nvidia.com"].productName"#,
            r#"device.attributes["gpu.nvidia.com"]["index"] + 1"#,
            r#"device.attributes["gpu.nvidia.com"].mig"#,
            r#"device.attributes["gpu.nvidia.com"].brokenVersion"#,
            r#"device.attributes["gpu.nvidia.com"].brand"#,
            r#"device.attributes["nvidia.com"].x"#,
            r#"device.attributes[""].bare"#,
            r#"device.attributes["resource.kubernetes.io"].pcieRoot"#,
            r#"device.attributes[1]"#,
            r#"device.attributes[true]"#,
            r#"device.attributes[[1]]"#,
            r#"device.nothing"#,
            r#"has(device.attributes["gpu.nvidia.com"].productName)"#,
            r#"has(device.attributes["gpu.nvidia.com"].brand)"#,
            r#"has(device.attributes.x)"#,
            r#""gpu.nvidia.com" in device.attributes"#,
            r#""productName" in device.attributes["gpu.nvidia.com"]"#,
            r#"1 in device.attributes"#,
            r#"size(device.attributes["gpu.nvidia.com"])"#,
            r#"device.attributes.size()"#,
            r#"size(device)"#,
            r#"device.attributes.exists(d, d == "resource.kubernetes.io")"#,
            r#"device.attributes.all(d, device.attributes[d].size() > 0)"#,
            r#"device.attributes["gpu.nvidia.com"].exists(n, n.startsWith("pro"))"#,
            r#"device.attributes["gpu.nvidia.com"] == device.attributes["gpu.nvidia.com"]"#,
            r#"device.attributes["gpu.nvidia.com"] == device.attributes["resource.kubernetes.io"]"#,
            r#"device.attributes["resource.kubernetes.io"] == {"pcieRoot": "pci0000:00"}"#,
            r#"device.attributes["resource.kubernetes.io"] != {"pcieRoot": "x"}"#,
            r#"device == device"#,
            r#"device.attributes == 1"#,
            r#"[device.attributes["gpu.nvidia.com"]][0].index"#,
            r#"device.attributes.map(d, d).size()"#,
            r#"device.capacity["gpu.nvidia.com"].memory"#,
            r#"device.capacity["gpu.nvidia.com"].cores"#,
            r#"type(device.attributes) == map"#,
        ] {
            for dev in [&d, &bare] {
                let (lazy, eager) = both(expression, dev);
                assert_eq!(lazy, eager, "{expression}");
            }
        }
    }

    #[test]
    fn a_map_literal_on_the_left_is_the_one_difference() {
        let (lazy, eager) = both(
            r#"{"pcieRoot": "pci0000:00"} == device.attributes["resource.kubernetes.io"]"#,
            &gpu(),
        );
        assert_eq!(eager, Ok(Value::Bool(true)));
        assert_eq!(lazy, Ok(Value::Bool(false)), "documented in the module");
    }
}
