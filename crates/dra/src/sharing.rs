//! Shared devices and partitionable devices, the two ways one device serves several claims:
//! consumable capacity (KEP-5075: a device with `allowMultipleAllocations` is allocated in
//! shares, each consuming part of its capacity as its request and the capacity's
//! `requestPolicy` say) and counters (KEP-4815: a device draws from its pool's counter sets
//! while allocated, so partitions of one GPU and the whole GPU exclude each other).
//!
//! What an allocation holds is a [`Hold`]: devices taken whole and shares. The allocator keeps
//! per device how many claims hold it whole, how many shares it has and what they consume, and
//! per counter how much the devices in use draw ([`Usage`]), so placing, undoing and evicting
//! give back exactly what was taken.

use caldera_model::dra::{Capacity, Device, DeviceInventory, Quantity, RequestPolicy};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What an allocation holds: devices taken whole, and shares of shared devices.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Hold {
    /// Inventory indices of the devices taken whole (admin access aside).
    pub devices: Vec<u32>,
    /// Shares of devices with `allowMultipleAllocations`.
    pub shares: Vec<Share>,
}

impl Hold {
    /// Holds nothing.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty() && self.shares.is_empty()
    }

    /// Inventory indices of every device it touches (whole or in part).
    pub fn indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.devices
            .iter()
            .copied()
            .chain(self.shares.iter().map(|s| s.device))
    }
}

/// One share of a shared device.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Share {
    /// Inventory index of the device.
    pub device: u32,
    /// Thousandths consumed of each of the device's capacities, in the order of its capacity
    /// map (fully qualified names).
    pub consumed: Vec<i64>,
}

/// Whole units as `Quantity.Value()` reads them: thousandths rounded up.
fn units(milli: i64) -> i64 {
    milli.div_euclid(1000) + i64::from(milli.rem_euclid(1000) != 0)
}

/// The amount one allocation consumes of capacity `cap` when its request asks `asked` (`None`:
/// the request names no amount of it), as upstream's `calculateConsumedCapacity` (1.36) rounds
/// it: nothing asked takes the policy's `default`, else the whole capacity; an amount is rounded
/// up to the range's `min`, then to the next `min + n × step` (in whole units, as upstream), or
/// to the first valid value not smaller. `None`: the rounding overflows.
pub fn consumed(asked: Option<&Quantity>, cap: &Capacity) -> Option<Quantity> {
    let policy = cap.policy.as_deref();
    let Some(asked) = asked else {
        return Some(match policy.and_then(|p| p.default.clone()) {
            Some(d) => d,
            None => Quantity {
                milli: cap.milli,
                text: cap.text.clone(),
            },
        });
    };
    let Some(policy) = policy else {
        return Some(asked.clone());
    };
    if let Some(range) = &policy.valid_range {
        if asked.milli < range.min.milli {
            return Some(range.min.clone());
        }
        let Some(step) = range.step.as_ref().filter(|s| units(s.milli) > 0) else {
            return Some(asked.clone());
        };
        let (asked_u, step_u, min_u) = (
            units(asked.milli),
            units(step.milli),
            units(range.min.milli),
        );
        let added = asked_u - min_u;
        let n = added / step_u + i64::from(added % step_u != 0);
        let value = step_u
            .checked_mul(n)
            .and_then(|v| v.checked_add(min_u))
            .and_then(|v| v.checked_mul(1000))?;
        return Some(Quantity::from_milli(value));
    }
    if !policy.valid_values.is_empty() {
        return Some(
            policy
                .valid_values
                .iter()
                .find(|v| asked.milli <= v.milli)
                .unwrap_or(asked)
                .clone(),
        );
    }
    Some(asked.clone())
}

/// Whether consuming `amount` breaks the policy (upstream's `violatesPolicy`): the default is
/// always allowed; otherwise above the range's `max`, off its steps, or not a valid value.
pub fn violates(amount: &Quantity, policy: Option<&RequestPolicy>) -> bool {
    let Some(policy) = policy else {
        return false;
    };
    if policy
        .default
        .as_ref()
        .is_some_and(|d| d.milli == amount.milli)
    {
        return false;
    }
    if let Some(range) = &policy.valid_range {
        if range.max.as_ref().is_some_and(|m| amount.milli > m.milli) {
            return true;
        }
        if let Some(step) = range
            .step
            .as_ref()
            .map(|s| units(s.milli))
            .filter(|&s| s > 0)
        {
            return (units(amount.milli) - units(range.min.milli)) % step != 0;
        }
        return false;
    }
    if !policy.valid_values.is_empty() {
        return !policy.valid_values.iter().any(|v| v.milli == amount.milli);
    }
    false
}

/// The fully qualified form of a capacity name a request or result wrote: a name without a
/// domain is the device driver's (`memory` is `<driver>/memory`), as the device's own capacity
/// names are.
pub fn qualified(driver: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("{driver}/{name}")
    }
}

/// The device's capacity key a request's capacity name refers to ([`qualified`]).
fn resolve<'d>(device: &'d Device, name: &str) -> Option<&'d Arc<str>> {
    device
        .capacity
        .keys()
        .find(|k| names(&device.driver, k, name))
}

/// Whether capacity key `key` of a device of `driver` is the capacity a request names `name`
/// (`qualified` without building the string: this runs for every device a shared request is
/// tried on).
fn names(driver: &str, key: &str, name: &str) -> bool {
    if name.contains('/') {
        key == name
    } else {
        key.len() == driver.len() + 1 + name.len()
            && key.starts_with(driver)
            && key.as_bytes()[driver.len()] == b'/'
            && key.ends_with(name)
    }
}

/// What one allocation of `device` for a request asking `asked` consumes of each of its
/// capacities (in capacity-map order), or `None` when the device cannot serve it: the request
/// names a capacity the device does not have, an amount breaks the capacity's policy, or an
/// amount alone exceeds the capacity.
pub fn consumption(device: &Device, asked: &BTreeMap<Arc<str>, Quantity>) -> Option<Vec<Quantity>> {
    // Every capacity asked must be one of the device's.
    if asked.keys().any(|name| resolve(device, name).is_none()) {
        return None;
    }
    let mut out = Vec::with_capacity(device.capacity.len());
    for (key, cap) in &device.capacity {
        // The first amount asked (in name order) of the one capacity a name resolves to.
        let asked = asked
            .iter()
            .find(|(name, _)| names(&device.driver, key, name))
            .map(|(_, q)| q);
        let amount = consumed(asked, cap)?;
        if amount.milli < 0 || violates(&amount, cap.policy.as_deref()) || amount.milli > cap.milli
        {
            return None;
        }
        out.push(amount);
    }
    Some(out)
}

/// A share's ID: a UUID (RFC 9562 version 8, the form for IDs made by other means) derived from
/// the claim (`seed`: its uid), the request, the device and the share's rank among the claim's
/// shares of that device. Upstream draws a random UUID; deriving it keeps every plan
/// deterministic, and the same decision writes the same ID.
pub fn share_id(seed: &str, request: &str, device: &str, rank: usize) -> Arc<str> {
    fn fnv(bytes: impl Iterator<Item = u8>, basis: u64) -> u64 {
        bytes.fold(basis, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }
    let text = format!("{seed}\u{0}{request}\u{0}{device}\u{0}{rank}");
    let hi = fnv(text.bytes(), 0xcbf2_9ce4_8422_2325);
    let lo = fnv(text.bytes().rev(), 0x6c62_272e_07bb_0142);
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&hi.to_be_bytes());
    b[8..].copy_from_slice(&lo.to_be_bytes());
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    // 8-4-4-4-12 hex digits, written without a string per byte (one per share in every plan).
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(36);
    for (i, x) in b.iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push('-');
        }
        out.push(char::from(HEX[usize::from(x >> 4)]));
        out.push(char::from(HEX[usize::from(x & 0x0f)]));
    }
    Arc::from(out)
}

/// Per device and per counter, what the allocations in use take: whole holders, shares and
/// their consumption, and the counters the devices in use draw.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    /// Per device: claims holding it whole.
    pub whole: Vec<u32>,
    /// Per device: shares allocated.
    pub shares: Vec<u32>,
    /// Per device: thousandths its shares consume of each capacity (empty unless shared).
    pub consumed: Vec<Box<[i64]>>,
    /// Per device: (counter, thousandths) it draws while in use.
    pub draws: Vec<Box<[(u32, i64)]>>,
    /// Per counter (every counter of every counter set, in inventory order): what there is.
    pub counter_total: Vec<i64>,
    /// Per counter: what the devices in use draw.
    pub counter_used: Vec<i64>,
    /// Per counter: `driver/pool/set` and the counter's name, for messages.
    pub counter_names: Vec<(u32, Arc<str>)>,
}

impl Usage {
    /// Nothing in use, for `inventory`'s devices and counter sets.
    pub fn new(inventory: &DeviceInventory) -> Self {
        let mut index: BTreeMap<(usize, &str), u32> = BTreeMap::new();
        let mut counter_total = Vec::new();
        let mut counter_names = Vec::new();
        for (s, set) in inventory.counter_sets.iter().enumerate() {
            for (name, q) in &set.counters {
                index.insert((s, name), counter_total.len() as u32);
                counter_total.push(q.milli);
                counter_names.push((s as u32, name.clone()));
            }
        }
        let draws = inventory
            .devices
            .iter()
            .map(|d| {
                d.consumes
                    .iter()
                    .filter_map(|c| {
                        inventory
                            .counter_set_index(&d.driver, &d.pool, &c.counter_set)
                            .map(|s| (s, c))
                    })
                    .flat_map(|(s, c)| {
                        let index = &index;
                        c.counters
                            .iter()
                            .filter_map(move |(n, q)| index.get(&(s, &**n)).map(|&i| (i, q.milli)))
                    })
                    .collect()
            })
            .collect();
        let n = inventory.devices.len();
        Usage {
            whole: vec![0; n],
            shares: vec![0; n],
            consumed: inventory
                .devices
                .iter()
                .map(|d| {
                    if d.shared {
                        vec![0; d.capacity.len()].into_boxed_slice()
                    } else {
                        Box::default()
                    }
                })
                .collect(),
            draws,
            counter_used: vec![0; counter_total.len()],
            counter_total,
            counter_names,
        }
    }

    /// Whether device `d` is allocated at all (whole or in shares): then it draws its counters.
    pub fn in_use(&self, d: u32) -> bool {
        let d = d as usize;
        self.whole.get(d).is_some_and(|&n| n > 0) || self.shares.get(d).is_some_and(|&n| n > 0)
    }

    fn draw(&mut self, d: u32, sign: i64) {
        if let Some(draws) = self.draws.get(d as usize) {
            for &(c, milli) in draws.iter() {
                if let Some(u) = self.counter_used.get_mut(c as usize) {
                    *u = u.saturating_add(sign * milli);
                }
            }
        }
    }

    /// Adds (`sign` 1) or gives back (`sign` -1) what `hold` takes; a device going into or out
    /// of use draws or returns its counters.
    pub fn apply(&mut self, hold: &Hold, sign: i64) {
        for &d in &hold.devices {
            let was = self.in_use(d);
            if let Some(n) = self.whole.get_mut(d as usize) {
                *n = if sign > 0 {
                    *n + 1
                } else {
                    n.saturating_sub(1)
                };
            }
            self.transition(d, was);
        }
        for s in &hold.shares {
            let was = self.in_use(s.device);
            let d = s.device as usize;
            if let Some(n) = self.shares.get_mut(d) {
                *n = if sign > 0 {
                    *n + 1
                } else {
                    n.saturating_sub(1)
                };
            }
            if let Some(c) = self.consumed.get_mut(d) {
                for (used, &milli) in c.iter_mut().zip(&s.consumed) {
                    *used = used.saturating_add(sign * milli);
                }
            }
            self.transition(s.device, was);
        }
    }

    fn transition(&mut self, d: u32, was: bool) {
        match (was, self.in_use(d)) {
            (false, true) => self.draw(d, 1),
            (true, false) => self.draw(d, -1),
            _ => {}
        }
    }

    /// Whether the counters device `d` draws are still there with `extra` (counter,
    /// thousandths) drawn on top.
    pub fn counters_fit(&self, d: u32, extra: &[(u32, i64)]) -> bool {
        let Some(draws) = self.draws.get(d as usize) else {
            return true;
        };
        draws.iter().all(|&(c, milli)| {
            let more: i64 = extra.iter().filter(|(x, _)| *x == c).map(|(_, m)| *m).sum();
            let c = c as usize;
            self.counter_used[c]
                .saturating_add(more)
                .saturating_add(milli)
                <= self.counter_total[c]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caldera_model::dra::CapacityRange;

    fn q(milli: i64) -> Quantity {
        Quantity::from_milli(milli)
    }

    fn cap(value: i64, policy: Option<RequestPolicy>) -> Capacity {
        Capacity {
            policy: policy.map(Arc::new),
            ..Capacity::new("c", value * 1000, &value.to_string())
        }
    }

    fn range(default: i64, min: i64, step: Option<i64>, max: Option<i64>) -> RequestPolicy {
        RequestPolicy {
            default: Some(q(default * 1000)),
            valid_values: Vec::new(),
            valid_range: Some(CapacityRange {
                min: q(min * 1000),
                max: max.map(|m| q(m * 1000)),
                step: step.map(|s| q(s * 1000)),
            }),
        }
    }

    #[test]
    fn a_capacity_name_resolves_qualified_or_by_the_devices_driver() {
        let device = Device {
            driver: "gpu.example.com".into(),
            pool: "n0".into(),
            name: "gpu-0".into(),
            attributes: BTreeMap::new(),
            capacity: BTreeMap::from([
                (Arc::from("gpu.example.com/memory"), cap(80, None)),
                (Arc::from("other.example.com/memory"), cap(40, None)),
            ]),
            nodes: caldera_model::dra::DeviceNodes::Node("n0".into()),
            shared: true,
            consumes: Vec::new(),
            unsupported: None,
        };
        let key = |name: &str| resolve(&device, name).map(|k| k.to_string());
        assert_eq!(key("memory").as_deref(), Some("gpu.example.com/memory"));
        assert_eq!(
            key("gpu.example.com/memory").as_deref(),
            Some("gpu.example.com/memory")
        );
        assert_eq!(
            key("other.example.com/memory").as_deref(),
            Some("other.example.com/memory")
        );
        assert_eq!(key("emory"), None, "a suffix is not the name");
        assert_eq!(key("cores"), None);
        assert_eq!(key("third.example.com/memory"), None);
    }

    #[test]
    fn requests_round_up_as_the_policy_says() {
        let r = cap(10, Some(range(2, 2, Some(2), Some(4))));
        let got = |asked: i64| consumed(Some(&q(asked * 1000)), &r).map(|x| x.milli / 1000);
        assert_eq!(got(1), Some(2), "below min: min");
        assert_eq!(got(3), Some(4), "between steps: the next step");
        assert_eq!(got(4), Some(4));
        assert_eq!(consumed(None, &r).map(|x| x.milli), Some(2000), "default");
        assert_eq!(
            consumed(None, &cap(7, None)).map(|x| x.milli),
            Some(7000),
            "all of it"
        );
        assert!(violates(&q(6000), r.policy.as_deref()), "above max");
        let values = cap(
            4,
            Some(RequestPolicy {
                default: Some(q(1000)),
                valid_values: vec![q(1000), q(3000)],
                valid_range: None,
            }),
        );
        assert_eq!(
            consumed(Some(&q(2000)), &values).map(|x| x.milli),
            Some(3000)
        );
        let over = consumed(Some(&q(4000)), &values).unwrap();
        assert!(
            violates(&over, values.policy.as_deref()),
            "above every valid value"
        );
    }

    #[test]
    fn share_ids_are_stable_distinct_normalized_uuids() {
        let a = share_id("uid-1", "gpu", "d/p/gpu-0", 0);
        // Pinned: a share's ID never changes between versions for the same decision (computed
        // independently of this code from the FNV-1a definition above).
        assert_eq!(&*a, "d27b799e-d537-82ca-b649-7a15c29d975b");
        assert_eq!(a, share_id("uid-1", "gpu", "d/p/gpu-0", 0));
        assert_ne!(a, share_id("uid-1", "gpu", "d/p/gpu-0", 1));
        assert_ne!(a, share_id("uid-2", "gpu", "d/p/gpu-0", 0));
        assert_eq!(a.len(), 36);
        let dashes: Vec<usize> = a.match_indices('-').map(|(i, _)| i).collect();
        assert_eq!(dashes, [8, 13, 18, 23]);
        assert!(a
            .chars()
            .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)));
        assert_eq!(&a[14..15], "8", "version 8");
    }
}
