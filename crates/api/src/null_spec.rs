//! `null_spec_is_default!`: a CRD spec that reads a missing or `null` `spec` as its default.
//!
//! Volcano accepts a PodGroup or Queue with no `spec` at all. The spec type derives serde with
//! `#[serde(remote = "Self")]`, which makes the derives emit inherent `serialize` and
//! `deserialize` functions instead of the traits; this macro writes the trait impls around them,
//! routing deserialization through `Option` so that an absent or `null` spec is the default.

/// Implements `Serialize` and `Deserialize` for a `#[serde(remote = "Self")]` spec type, a
/// missing or `null` value reading as `Default::default()`.
macro_rules! null_spec_is_default {
    ($spec:ident) => {
        impl ::serde::Serialize for $spec {
            fn serialize<S: ::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                $spec::serialize(self, serializer)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $spec {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> Result<Self, D::Error> {
                /// The spec, when present and not `null`.
                struct Present($spec);
                impl<'de> ::serde::Deserialize<'de> for Present {
                    fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                        $spec::deserialize(d).map(Present)
                    }
                }
                Ok(Option::<Present>::deserialize(deserializer)?
                    .map(|present| present.0)
                    .unwrap_or_default())
            }
        }
    };
}
