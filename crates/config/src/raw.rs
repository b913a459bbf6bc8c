//! The config as an untyped YAML tree, and a locator that finds where a node sits in the text.
//!
//! Validation runs on [`Raw`], which keeps every mapping entry in document order (duplicate
//! keys included, so they can be reported rather than silently merged). [`Raw`] carries no
//! positions: serde gives a `Deserialize` impl no way to ask where it is. Instead, when a
//! message needs a line and column, [`locate`] parses the text a second time with a seed that
//! walks down a [`Step`] path and fails on purpose at the node it is after; serde_yaml_ng
//! stamps that failure with the node's position. This costs one extra parse per reported
//! problem, which for a config file is nothing, and keeps the checks themselves free of
//! position bookkeeping.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A YAML node without position information.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Raw {
    /// `null`, `~` or an empty value.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer; `i128` so that any YAML integer fits and range errors can quote it exactly.
    Int(i128),
    /// A floating-point number.
    Float(f64),
    /// A string, quoted or plain.
    Str(String),
    /// A sequence.
    Seq(Vec<Raw>),
    /// A mapping, entries in document order, duplicates kept.
    Map(Vec<(Raw, Raw)>),
}

impl Raw {
    /// How the node reads in a "got …" message: scalars as written, collections by kind.
    pub(crate) fn describe(&self) -> String {
        match self {
            Raw::Null => "null".to_string(),
            Raw::Bool(value) => value.to_string(),
            Raw::Int(value) => value.to_string(),
            Raw::Float(value) => value.to_string(),
            Raw::Str(value) => format!("{value:?}"),
            Raw::Seq(_) => "a list".to_string(),
            Raw::Map(_) => "a mapping".to_string(),
        }
    }

    /// The node as a mapping key, if it is a scalar.
    pub(crate) fn as_key(&self) -> Option<String> {
        match self {
            Raw::Str(value) => Some(value.clone()),
            Raw::Bool(value) => Some(value.to_string()),
            Raw::Int(value) => Some(value.to_string()),
            Raw::Float(value) => Some(value.to_string()),
            Raw::Null | Raw::Seq(_) | Raw::Map(_) => None,
        }
    }
}

/// Parses one YAML document into a [`Raw`] tree.
pub(crate) fn parse(text: &str) -> Result<Raw, serde_yaml_ng::Error> {
    serde_yaml_ng::from_str(text)
}

impl<'de> serde::Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Raw, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Raw, E> {
        Ok(Raw::Int(i128::from(value)))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Raw, E> {
        Ok(Raw::Int(i128::from(value)))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Raw, E> {
        Ok(Raw::Int(value))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Raw, E> {
        match i128::try_from(value) {
            Ok(value) => Ok(Raw::Int(value)),
            Err(_) => Err(E::custom(format!("integer {value} is too large"))),
        }
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Raw, E> {
        Ok(Raw::Float(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Raw, E> {
        Ok(Raw::Str(value.to_string()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Raw, E> {
        Ok(Raw::Str(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Raw, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some((key, value)) = map.next_entry()? {
            entries.push((key, value));
        }
        Ok(Raw::Map(entries))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _data: A) -> Result<Raw, A::Error> {
        // serde_yaml_ng presents a node with a custom tag (`!foo value`) as an enum.
        Err(de::Error::custom(
            "YAML tags such as `!foo` are not supported in the scheduler config",
        ))
    }
}

/// One step from a node to one of its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The element at this index of a sequence.
    Index(usize),
    /// The key of the entry at this index of a mapping (document order).
    Key(usize),
    /// The value of the entry at this index of a mapping (document order).
    Value(usize),
}

/// A position in the text, both 1-based; the column counts characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) line: usize,
    pub(crate) column: usize,
}

/// The message of the deliberate failure; any other failure means the walk went wrong.
const FOUND: &str = "caldera-config locator: found the node";

/// Where the node at the end of `steps` starts, or `None` when the path does not exist.
///
/// For a scalar that is where its text (or opening quote) starts, for a block mapping or
/// sequence where its first entry starts, for a flow collection its opening bracket.
pub(crate) fn locate(text: &str, steps: &[Step]) -> Option<Position> {
    let deserializer = serde_yaml_ng::Deserializer::from_str(text);
    match (Locate { steps }).deserialize(deserializer) {
        Err(error) if error.to_string().contains(FOUND) => {
            error.location().map(|location| Position {
                line: location.line(),
                column: location.column(),
            })
        }
        _ => None,
    }
}

/// Finds the `occurrence`-th (0-based) appearance of `needle` at or after `from`, for pointing
/// into a scalar (one action name inside `actions: "enqueue, allocate"`).
pub(crate) fn find_after(
    text: &str,
    from: Position,
    needle: &str,
    occurrence: usize,
) -> Option<Position> {
    if needle.is_empty() {
        return None;
    }
    let line_start = text
        .split_inclusive('\n')
        .take(from.line.saturating_sub(1))
        .map(str::len)
        .sum::<usize>();
    let start = line_start
        + text
            .get(line_start..)?
            .chars()
            .take(from.column.saturating_sub(1))
            .map(char::len_utf8)
            .sum::<usize>();
    let rest = text.get(start..)?;
    let (offset, _) = rest.match_indices(needle).nth(occurrence)?;
    let found = start + offset;
    let before = text.get(..found)?;
    let line = before.matches('\n').count() + 1;
    let column = before
        .rsplit_once('\n')
        .map_or(before, |(_, tail)| tail)
        .chars()
        .count()
        + 1;
    Some(Position { line, column })
}

/// Walks `steps` down the document; fails with [`FOUND`] at the target node.
struct Locate<'s> {
    steps: &'s [Step],
}

impl<'de> DeserializeSeed<'de> for Locate<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Locate<'_> {
    /// At the target, every visit fails so that the parser stamps the node's position; on the
    /// way there a scalar means the path does not exist.
    fn scalar<E: de::Error>(&self) -> Result<(), E> {
        if self.steps.is_empty() {
            Err(E::custom(FOUND))
        } else {
            Ok(())
        }
    }
}

impl<'de> Visitor<'de> for Locate<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, _value: bool) -> Result<(), E> {
        self.scalar()
    }

    fn visit_i64<E: de::Error>(self, _value: i64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_u64<E: de::Error>(self, _value: u64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_i128<E: de::Error>(self, _value: i128) -> Result<(), E> {
        self.scalar()
    }

    fn visit_u128<E: de::Error>(self, _value: u128) -> Result<(), E> {
        self.scalar()
    }

    fn visit_f64<E: de::Error>(self, _value: f64) -> Result<(), E> {
        self.scalar()
    }

    fn visit_str<E: de::Error>(self, _value: &str) -> Result<(), E> {
        self.scalar()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.scalar()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _data: A) -> Result<(), A::Error> {
        self.scalar()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((first, rest)) = self.steps.split_first() else {
            return Err(de::Error::custom(FOUND));
        };
        let Step::Index(index) = *first else {
            return Ok(());
        };
        for _ in 0..index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Locate { steps: rest })?;
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((first, rest)) = self.steps.split_first() else {
            return Err(de::Error::custom(FOUND));
        };
        let (index, want_key) = match *first {
            Step::Key(index) => (index, true),
            Step::Value(index) => (index, false),
            Step::Index(_) => return Ok(()),
        };
        for _ in 0..index {
            if map.next_key::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
            map.next_value::<IgnoredAny>()?;
        }
        if want_key {
            map.next_key_seed(Locate { steps: rest })?;
        } else if map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Locate { steps: rest })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
actions: \"enqueue, allocate\"
tiers:
- plugins:
  - name: gang
  - {name: binpack, arguments: {binpack.weight: ten}}
";

    fn at(line: usize, column: usize) -> Option<Position> {
        Some(Position { line, column })
    }

    #[test]
    fn raw_keeps_order_and_duplicates() {
        let raw = parse("b: 1\na: x\nb: 2.5\n").unwrap();
        assert_eq!(
            raw,
            Raw::Map(vec![
                (Raw::Str("b".into()), Raw::Int(1)),
                (Raw::Str("a".into()), Raw::Str("x".into())),
                (Raw::Str("b".into()), Raw::Float(2.5)),
            ])
        );
    }

    #[test]
    fn locates_scalar_values_and_keys() {
        assert_eq!(locate(TEXT, &[Step::Value(0)]), at(1, 10));
        assert_eq!(locate(TEXT, &[Step::Key(1)]), at(2, 1));
        let gang = [
            Step::Value(1),
            Step::Index(0),
            Step::Value(0),
            Step::Index(0),
        ];
        assert_eq!(
            locate(TEXT, &[&gang[..], &[Step::Value(0)]].concat()),
            at(4, 11)
        );
        let weight = [
            Step::Value(1),
            Step::Index(0),
            Step::Value(0),
            Step::Index(1),
            Step::Value(1),
            Step::Value(0),
        ];
        assert_eq!(locate(TEXT, &weight), at(5, 49));
    }

    #[test]
    fn locates_collections_at_their_start() {
        assert_eq!(locate(TEXT, &[Step::Value(1), Step::Index(0)]), at(3, 3));
        assert_eq!(locate(TEXT, &[]), at(1, 1));
    }

    #[test]
    fn missing_paths_are_not_found() {
        assert_eq!(locate(TEXT, &[Step::Value(7)]), None);
        assert_eq!(locate(TEXT, &[Step::Value(0), Step::Index(0)]), None);
    }

    #[test]
    fn finds_a_word_inside_a_scalar() {
        let start = Position {
            line: 1,
            column: 10,
        };
        assert_eq!(find_after(TEXT, start, "allocate", 0), at(1, 20));
        assert_eq!(find_after(TEXT, start, "allocate", 1), None);
    }
}
