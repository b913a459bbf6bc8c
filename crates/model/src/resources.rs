//! Resource vectors: cpu (millicores), memory (bytes) and every other resource by name.

use crate::quantity::{format_bytes, format_milli, parse_quantity, QuantityError, Scale};
use smallvec::SmallVec;
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

/// Name of a resource (`cpu`, `memory`, `nvidia.com/gpu`, ...).
pub type ResourceName = Arc<str>;

/// The resource name of CPU.
pub const CPU: &str = "cpu";
/// The resource name of memory.
pub const MEMORY: &str = "memory";
/// The resource name of the pod count.
pub const PODS: &str = "pods";
/// The resource name of node-local scratch storage.
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";

/// A vector of resource amounts. CPU is in millicores, everything else in base units (bytes,
/// devices). Dimensions that are absent are zero. The scalar list is kept sorted by name, so
/// equal vectors compare equal and iteration is deterministic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    /// CPU in millicores.
    pub cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Every other resource, sorted by name, without zero entries. The first is kept inline:
    /// most requests and nodes name one extended resource (a GPU), and a session copies every
    /// node's and every member's vectors.
    scalars: SmallVec<[(ResourceName, i64); 1]>,
}

/// At most this many distinct resource names are interned; further ones get an allocation of
/// their own (still correct, only slower to compare), so odd names cannot grow the set for ever.
const INTERNED_NAMES: usize = 4096;

/// The one shared allocation of resource name `name`. A cluster names a handful of resources
/// over and over (every request of every pod says `nvidia.com/gpu`): with one allocation per
/// name, comparing names is mostly comparing pointers, and the session's passes over hundreds
/// of thousands of requests do not read as many scattered copies of the same string (those
/// reads were the largest cost of a big session). Deterministic: which allocation a name gets
/// never changes a result.
fn intern(name: &str) -> ResourceName {
    static NAMES: OnceLock<RwLock<HashSet<ResourceName>>> = OnceLock::new();
    let names = NAMES.get_or_init(RwLock::default);
    if let Ok(set) = names.read() {
        if let Some(n) = set.get(name) {
            return n.clone();
        }
    }
    let Ok(mut set) = names.write() else {
        // A thread panicked while holding the lock: names still work, uninterned.
        return Arc::from(name);
    };
    if let Some(n) = set.get(name) {
        return n.clone();
    }
    let n: ResourceName = Arc::from(name);
    if set.len() < INTERNED_NAMES {
        set.insert(n.clone());
    }
    n
}

/// Whether two names are the same: by address first (interned names), then by content.
fn same_name(a: &str, b: &str) -> bool {
    std::ptr::eq(a, b) || a == b
}

/// Whether a resource is counted in bytes (and printed with binary suffixes).
pub fn is_byte_resource(name: &str) -> bool {
    name == MEMORY || name == EPHEMERAL_STORAGE || name.starts_with("hugepages-")
}

/// Whether a container may request less of `name` than its limit (kube-apiserver's
/// `helper.IsOvercommitAllowed`): native resources (unprefixed or in the `kubernetes.io`
/// namespace) but huge pages. Extended resources (`nvidia.com/gpu`) and huge pages need a
/// limit equal to the request.
pub fn overcommit_allowed(name: &str) -> bool {
    let native = !name.contains('/') || name.contains("kubernetes.io/");
    native && !name.starts_with("hugepages-")
}

impl Resources {
    /// The empty vector.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a vector from `(name, value)` pairs in canonical units.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        let mut r = Self::new();
        for (name, v) in pairs {
            r.add_named(name, v);
        }
        r
    }

    /// Parses a Kubernetes ResourceList (`{"cpu": "500m", "nvidia.com/gpu": "8"}`).
    pub fn parse_list<'a>(
        list: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, (String, QuantityError)> {
        let mut r = Self::new();
        for (name, text) in list {
            let scale = if name == CPU {
                Scale::Milli
            } else {
                Scale::Units
            };
            let v = parse_quantity(text, scale).map_err(|e| (name.to_string(), e))?;
            r.add_named(name, v);
        }
        Ok(r)
    }

    /// The amount of `name` (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            _ => self.scalar(name),
        }
    }

    /// Sets the amount of `name`.
    pub fn set(&mut self, name: &str, value: i64) {
        match name {
            CPU => self.cpu = value,
            MEMORY => self.memory = value,
            _ => match self.scalars.binary_search_by(|(n, _)| (**n).cmp(name)) {
                Ok(i) => {
                    if value == 0 {
                        self.scalars.remove(i);
                    } else {
                        self.scalars[i].1 = value;
                    }
                }
                Err(i) => {
                    if value != 0 {
                        self.scalars.insert(i, (intern(name), value));
                    }
                }
            },
        }
    }

    /// Adds `value` to `name`.
    pub fn add_named(&mut self, name: &str, value: i64) {
        let cur = self.get(name);
        self.set(name, cur.saturating_add(value));
    }

    /// Iterates over non-zero dimensions in a fixed order (cpu, memory, then by name).
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> + '_ {
        let fixed = [(CPU, self.cpu), (MEMORY, self.memory)]
            .into_iter()
            .filter(|(_, v)| *v != 0);
        fixed.chain(self.scalars.iter().map(|(n, v)| (&**n, *v)))
    }

    /// Whether every dimension is zero.
    pub fn is_empty(&self) -> bool {
        self.cpu == 0 && self.memory == 0 && self.scalars.is_empty()
    }

    /// `self += other`.
    pub fn add(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_add(other.cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.merge_scalars(other, |v| v);
    }

    /// `self -= other`.
    pub fn sub(&mut self, other: &Resources) {
        self.cpu = self.cpu.saturating_sub(other.cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.merge_scalars(other, i64::wrapping_neg);
    }

    /// Adds `sign(v)` of every scalar of `other` (saturating), keeping the list sorted and
    /// free of zeros. Sums of alike requests have the same names in the same order: those add
    /// up pairwise; otherwise each name is found by binary search, and a new one takes
    /// `other`'s allocation.
    fn merge_scalars(&mut self, other: &Resources, sign: impl Fn(i64) -> i64) {
        if other.scalars.is_empty() {
            return;
        }
        let alike = self.scalars.len() == other.scalars.len()
            && self
                .scalars
                .iter()
                .zip(&other.scalars)
                .all(|((a, _), (b, _))| same_name(a, b));
        if alike {
            for ((_, v), (_, w)) in self.scalars.iter_mut().zip(&other.scalars) {
                *v = v.saturating_add(sign(*w));
            }
            self.scalars.retain(|(_, v)| *v != 0);
            return;
        }
        for (n, w) in &other.scalars {
            match self.scalars.binary_search_by(|(m, _)| (**m).cmp(&**n)) {
                Ok(i) => {
                    let v = self.scalars[i].1.saturating_add(sign(*w));
                    if v == 0 {
                        self.scalars.remove(i);
                    } else {
                        self.scalars[i].1 = v;
                    }
                }
                Err(i) => {
                    let v = sign(*w);
                    if v != 0 {
                        self.scalars.insert(i, (n.clone(), v));
                    }
                }
            }
        }
    }

    /// `self + other` as a new vector.
    pub fn plus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.add(other);
        r
    }

    /// What `self` holds over `other`, per dimension (none where it holds no more): the
    /// positive part of `self - other`.
    pub fn excess_over(&self, other: &Resources) -> Resources {
        let mut out = Resources::new();
        for (n, v) in self.iter() {
            let x = v.saturating_sub(other.get(n));
            if x > 0 {
                out.set(n, x);
            }
        }
        out
    }

    /// `self - other` as a new vector.
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.sub(other);
        r
    }

    /// Per-dimension maximum, in place.
    pub fn max_with(&mut self, other: &Resources) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory = self.memory.max(other.memory);
        for (n, v) in &other.scalars {
            if *v > self.get(n) {
                self.set(n, *v);
            }
        }
    }

    /// Per-dimension minimum over the union of dimensions (absent = 0).
    pub fn min_with(&mut self, other: &Resources) {
        self.cpu = self.cpu.min(other.cpu);
        self.memory = self.memory.min(other.memory);
        let names: Vec<ResourceName> = self.scalars.iter().map(|(n, _)| n.clone()).collect();
        for n in names {
            let v = self.get(&n).min(other.get(&n));
            self.set(&n, v);
        }
    }

    /// Every dimension of `self` is ≤ the same dimension of `other` (absent = 0). This is the
    /// fit test: a request fits when `request.fits_in(idle)`.
    pub fn fits_in(&self, other: &Resources) -> bool {
        self.cpu <= other.cpu
            && self.memory <= other.memory
            && self.scalars.iter().all(|(n, v)| *v <= other.scalar(n))
    }

    /// `self.fits_in(&capacity.minus(used))` without building the difference: the fit test
    /// run for every node a member is scored on.
    pub fn fits_in_left(&self, capacity: &Resources, used: &Resources) -> bool {
        self.cpu <= capacity.cpu.saturating_sub(used.cpu)
            && self.memory <= capacity.memory.saturating_sub(used.memory)
            && self
                .scalars
                .iter()
                .all(|(n, v)| *v <= capacity.scalar(n).saturating_sub(used.scalar(n)))
    }

    /// The dimensions where `self` exceeds what is left of `capacity` after `used`, in
    /// iteration order: `self.insufficient(&capacity.minus(used))` without building the
    /// difference.
    pub fn insufficient_left<'a>(
        &'a self,
        capacity: &'a Resources,
        used: &'a Resources,
    ) -> impl Iterator<Item = &'a str> + 'a {
        self.iter()
            .filter(move |(n, v)| *v > 0 && *v > capacity.get(n).saturating_sub(used.get(n)))
            .map(|(n, _)| n)
    }

    /// An extended resource (never cpu or memory, which have fields of their own). Vectors
    /// hold a few such names: a scan comparing lengths first beats ordering strings.
    fn scalar(&self, name: &str) -> i64 {
        if self.scalars.len() <= 8 {
            return self
                .scalars
                .iter()
                .find(|(n, _)| same_name(n, name))
                .map_or(0, |(_, v)| *v);
        }
        self.scalars
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .map_or(0, |i| self.scalars[i].1)
    }

    /// The dimensions where `self` exceeds `other`, in iteration order.
    pub fn insufficient<'a>(&'a self, other: &'a Resources) -> impl Iterator<Item = &'a str> + 'a {
        self.iter()
            .filter(move |(n, v)| *v > 0 && *v > other.get(n))
            .map(|(n, _)| n)
    }

    /// Multiplies every dimension by `factor`, rounding down.
    pub fn scaled(&self, factor: f64) -> Resources {
        let f = |v: i64| (v as f64 * factor).floor() as i64;
        Resources {
            cpu: f(self.cpu),
            memory: f(self.memory),
            scalars: self
                .scalars
                .iter()
                .map(|(n, v)| (n.clone(), f(*v)))
                .filter(|(_, v)| *v != 0)
                .collect(),
        }
    }

    /// Names of the non-zero dimensions.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.iter().map(|(n, _)| n)
    }

    /// The vector as a Kubernetes ResourceList of quantity strings.
    pub fn to_quantities(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(n, v)| (n.to_string(), format_value(n, v)))
            .collect()
    }
}

/// Formats one amount of `name` as a Kubernetes quantity string.
pub fn format_value(name: &str, value: i64) -> String {
    if name == CPU {
        format_milli(value)
    } else if is_byte_resource(name) {
        format_bytes(value)
    } else {
        value.to_string()
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .iter()
            .map(|(n, v)| format!("{n}: {}", format_value(n, v)))
            .collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(n: i64) -> Resources {
        Resources::from_pairs([("nvidia.com/gpu", n), (CPU, 1000)])
    }

    #[test]
    fn excess_over_keeps_only_what_is_more() {
        let a = Resources::from_pairs([("nvidia.com/gpu", 6), (CPU, 1000), (MEMORY, 5)]);
        let b = Resources::from_pairs([("nvidia.com/gpu", 4), (CPU, 2000), ("example.com/x", 3)]);
        assert_eq!(
            a.excess_over(&b),
            Resources::from_pairs([("nvidia.com/gpu", 2), (MEMORY, 5)])
        );
        assert!(b.excess_over(&b).is_empty());
    }

    #[test]
    fn arithmetic_keeps_canonical_form() {
        let mut a = gpu(2);
        a.sub(&gpu(2));
        assert!(a.is_empty());
        assert_eq!(a, Resources::new(), "zero scalars are dropped");
        let b = gpu(1).plus(&gpu(3));
        assert_eq!(b.get("nvidia.com/gpu"), 4);
        assert_eq!(b.cpu, 2000);
    }

    #[test]
    fn fit_compares_every_requested_dimension() {
        assert!(gpu(2).fits_in(&gpu(8)));
        assert!(!gpu(9).fits_in(&gpu(8)));
        let no_gpu = Resources::from_pairs([(CPU, 64000)]);
        assert!(!gpu(1).fits_in(&no_gpu));
        assert_eq!(
            gpu(1).insufficient(&no_gpu).collect::<Vec<_>>(),
            vec!["nvidia.com/gpu"]
        );
    }

    #[test]
    fn sums_alike_and_unlike_vectors_alike() {
        // The pairwise path (same names) and the merging one (names differ) give what
        // adding name by name gives, zeros dropped.
        let mut by_name = Resources::new();
        let mut summed = Resources::new();
        let parts = [
            Resources::from_pairs([("nvidia.com/gpu", 2), ("pods", 1)]),
            Resources::from_pairs([("nvidia.com/gpu", 3), ("pods", 1)]),
            Resources::from_pairs([("example.com/fpga", 1), ("pods", -2)]),
            Resources::from_pairs([("nvidia.com/gpu", -5), ("a.io/x", 7)]),
        ];
        for p in &parts {
            for (n, v) in p.iter() {
                by_name.add_named(n, v);
            }
            summed.add(p);
        }
        assert_eq!(summed, by_name);
        assert_eq!(
            summed.iter().collect::<Vec<_>>(),
            vec![("a.io/x", 7), ("example.com/fpga", 1)]
        );
        for p in &parts {
            summed.sub(p);
        }
        assert!(summed.is_empty(), "{summed}");
        // Names from separate parses share one allocation.
        let (a, b) = (gpu(1), gpu(2));
        let (na, nb) = (a.names().last().unwrap(), b.names().last().unwrap());
        assert!(std::ptr::eq(na, nb));
    }

    #[test]
    fn parses_and_prints_resource_lists() {
        let r =
            Resources::parse_list([("cpu", "1.5"), ("memory", "512Gi"), ("nvidia.com/gpu", "8")])
                .unwrap();
        assert_eq!(r.cpu, 1500);
        assert_eq!(
            r.to_string(),
            "{cpu: 1500m, memory: 512Gi, nvidia.com/gpu: 8}"
        );
        let err = Resources::parse_list([("memory", "lots")]).unwrap_err();
        assert_eq!(err.0, "memory");
    }
}
