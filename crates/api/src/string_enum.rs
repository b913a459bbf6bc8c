//! `string_enum!`: open string enums (phases, states, modes) that keep unknown values verbatim.
//!
//! Volcano and other controllers may write values this version of Caldera does not know (a newer
//! phase, a new queue state). A closed Rust enum would make the whole object fail to deserialize,
//! and the watch cache would drop it. These enums instead carry an `Other(String)` variant, so
//! every value round-trips unchanged and callers still match on the known ones.

/// Declares an open string enum: known variants with their wire spelling, plus `Other(String)`.
///
/// `schema_enum = true` lists the known values as an `enum` in the CRD schema (the API server
/// then rejects anything else); `false` leaves the schema a free-form string.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )+
        }
        schema_enum = $schema_enum:literal;
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version of Caldera does not know, kept verbatim so it round-trips.
            ///
            /// Build values with `From<&str>`/`From<String>`, which map known spellings to their
            /// variants; `Other` holding a known spelling would not compare equal to it.
            Other(::std::string::String),
        }

        impl $name {
            /// The known values, in declaration order.
            pub const KNOWN: &'static [$name] = &[ $( $name::$variant, )+ ];

            /// The wire spelling of this value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Other(other) => other.as_str(),
                }
            }

            /// Whether this is one of the known values (not [`Self::Other`]).
            pub fn is_known(&self) -> bool {
                !matches!(self, $name::Other(_))
            }
        }

        impl ::std::convert::From<&str> for $name {
            fn from(value: &str) -> Self {
                match value {
                    $( $value => $name::$variant, )+
                    other => $name::Other(other.to_owned()),
                }
            }
        }

        impl ::std::convert::From<::std::string::String> for $name {
            fn from(value: ::std::string::String) -> Self {
                match value.as_str() {
                    $( $value => $name::$variant, )+
                    _ => $name::Other(value),
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ::std::convert::Infallible;

            fn from_str(value: &str) -> ::std::result::Result<Self, Self::Err> {
                Ok($name::from(value))
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(
                &self,
                serializer: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                deserializer: D,
            ) -> ::std::result::Result<Self, D::Error> {
                <::std::string::String as ::serde::Deserialize>::deserialize(deserializer)
                    .map($name::from)
            }
        }

        impl ::schemars::JsonSchema for $name {
            fn schema_name() -> ::std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut ::schemars::SchemaGenerator) -> ::schemars::Schema {
                if $schema_enum {
                    ::schemars::json_schema!({
                        "type": "string",
                        "enum": [ $( $value, )+ ],
                    })
                } else {
                    ::schemars::json_schema!({ "type": "string" })
                }
            }
        }
    };
}

pub(crate) use string_enum;
