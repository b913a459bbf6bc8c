//! An object's namespace and name as the controllers read them, and the names they generate.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The object's namespace; absent or empty reads as `default`.
pub(crate) fn namespace(meta: &ObjectMeta) -> &str {
    meta.namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// The object's name; absent reads as empty.
pub(crate) fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// The controller's 5-character suffix alphabet (`k8s.io/apimachinery/pkg/util/rand`).
pub(crate) const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// The `n`th 5-character `generateName` suffix seeded by `uid` (the Job, ReplicaSet and
/// resource-claim controllers' names).
pub(crate) fn suffix(uid: &str, n: u64) -> String {
    // FNV-1a over the uid and the counter: deterministic, spread over the alphabet.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in uid.bytes().chain(n.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (0..5)
        .map(|i| {
            let k = ((h >> (i * 12)) % ALPHABET.len() as u64) as usize;
            char::from(ALPHABET[k])
        })
        .collect()
}
