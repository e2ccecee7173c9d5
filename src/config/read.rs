//! The config's TOML values read into its types with errors that are data, not text: a key
//! not set ([`ReadError::Missing`]), a key the section does not know ([`ReadError::Unknown`],
//! with the keys it knows, which serde's derive hands over) or a value refused
//! ([`ReadError::Value`], with serde's or the range check's reason), each at its key path
//! (serde_path_to_error). What becomes of a refusal (a line, a placeholder, the next try) is
//! [`super::validate`]'s; the types are [`super::types`]'s.
//!
//! toml's own reader would do, but says all this only as text ("missing field `x`"); so the
//! values, once parsed by toml, are handed to the types through serde's value deserializers
//! with [`ReadError`] as their error.

use serde::de::value::{MapDeserializer, SeqDeserializer, StringDeserializer};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use std::fmt;

/// Why a value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ReadError {
    /// The key is required and not set; the path is its table's.
    Missing(&'static str),
    /// The table has a key its section does not know; the path is the table's.
    Unknown {
        key: String,
        known: &'static [&'static str],
    },
    /// The value at the path is of the wrong type or out of its range: the reason.
    Value(String),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Missing(_) => f.write_str("required, not set"),
            ReadError::Unknown { known, .. } => {
                write!(f, "unknown key (known here: {})", known.join(", "))
            }
            ReadError::Value(reason) => f.write_str(reason),
        }
    }
}

impl std::error::Error for ReadError {}

impl de::Error for ReadError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        ReadError::Value(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Self {
        ReadError::Missing(field)
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        ReadError::Unknown {
            key: field.to_owned(),
            known: expected,
        }
    }
}

/// One step of a key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    Key(String),
    Index(usize),
}

/// Where a value is: `api.timeout_secs`, `feed[1].location_id`; empty: the whole file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct KeyPath(pub(super) Vec<Step>);

impl KeyPath {
    /// The key `key` of the table at this path.
    pub(super) fn child(&self, key: &str) -> KeyPath {
        let mut steps = self.0.clone();
        steps.push(Step::Key(key.to_owned()));
        KeyPath(steps)
    }

    /// Whether `self` is `other` or inside it.
    pub(super) fn within(&self, other: &KeyPath) -> bool {
        self.0.starts_with(&other.0)
    }

    /// Its table's path (`feed[1]` for `feed[1].location_id`) and its last key, as a
    /// problem's text names them.
    pub(super) fn table_and_key(&self) -> (String, String) {
        match self.0.split_last() {
            Some((Step::Key(key), table)) => (KeyPath(table.to_vec()).to_string(), key.clone()),
            Some((Step::Index(_), _)) | None => (self.to_string(), String::new()),
        }
    }

    fn of(path: &serde_path_to_error::Path) -> KeyPath {
        use serde_path_to_error::Segment;
        KeyPath(
            path.iter()
                .filter_map(|segment| match segment {
                    Segment::Seq { index } => Some(Step::Index(*index)),
                    Segment::Map { key } | Segment::Enum { variant: key } => {
                        Some(Step::Key(key.clone()))
                    }
                    Segment::Unknown => None,
                })
                .collect(),
        )
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(key) if n == 0 => f.write_str(key)?,
                Step::Key(key) => write!(f, ".{key}")?,
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// What stopped a read: where, and why.
#[derive(Debug)]
pub(super) struct Refusal {
    pub(super) at: KeyPath,
    pub(super) error: ReadError,
}

/// Reads `value` as a `T`; the first refusal stops it.
pub(super) fn read<T: DeserializeOwned>(value: toml::Value) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(Node(value)).map_err(|e| Refusal {
        at: KeyPath::of(e.path()),
        error: e.into_inner(),
    })
}

/// A TOML value handed to serde with [`ReadError`] as the error.
struct Node(toml::Value);

impl<'de> IntoDeserializer<'de, ReadError> for Node {
    type Deserializer = Node;

    fn into_deserializer(self) -> Node {
        self
    }
}

impl<'de> de::Deserializer<'de> for Node {
    type Error = ReadError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        match self.0 {
            toml::Value::String(s) => visitor.visit_string(s),
            toml::Value::Integer(i) => visitor.visit_i64(i),
            toml::Value::Float(f) => visitor.visit_f64(f),
            toml::Value::Boolean(b) => visitor.visit_bool(b),
            toml::Value::Datetime(d) => visitor.visit_string(d.to_string()),
            toml::Value::Array(items) => {
                let mut items = SeqDeserializer::new(items.into_iter().map(Node));
                let value = visitor.visit_seq(&mut items)?;
                items.end()?;
                Ok(value)
            }
            toml::Value::Table(table) => {
                let mut entries =
                    MapDeserializer::new(table.into_iter().map(|(k, v)| (k, Node(v))));
                let value = visitor.visit_map(&mut entries)?;
                entries.end()?;
                Ok(value)
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ReadError> {
        // A key that is there has a value: TOML has no null.
        visitor.visit_some(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        match self.0 {
            // The config's enums are words (`mode = "delta"`).
            toml::Value::String(s) => {
                let word: StringDeserializer<ReadError> = s.into_deserializer();
                visitor.visit_enum(word)
            }
            other => Node(other).deserialize_any(visitor),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ReadError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn refusal(text: &str) -> Refusal {
        let table: toml::Table = toml::from_str(text).unwrap();
        read::<Config>(toml::Value::Table(table)).unwrap_err()
    }

    const MINIMAL: &str = "[api]\nbase_url = \"https://x\"\norganization_id = 1\n";

    /// What stopped the read is data: the kind, the key path, the keys known.
    #[test]
    fn a_refusal_says_where_and_what_as_data() {
        let r = refusal("[api]\nbase_url = \"https://x\"\n");
        assert_eq!(r.at.to_string(), "api");
        assert_eq!(r.error, ReadError::Missing("organization_id"));

        let r = refusal(&format!(
            "{MINIMAL}[[feed]]\nname = \"a\"\ninbox = \"i\"\nlocation_id = 1\n\
             [[feed]]\nname = \"b\"\ninbox = \"i\"\nlocation_id = 2\ninbx = 1\n"
        ));
        // The path holds the key once serde_path_to_error read it.
        assert_eq!(r.at.to_string(), "feed[1].inbx");
        let ReadError::Unknown { key, known } = &r.error else {
            panic!("{r:?}");
        };
        assert_eq!(key, "inbx");
        assert!(known.contains(&"inbox") && known.contains(&"poll_interval_secs"));

        let r = refusal(&format!("{MINIMAL}timeout_secs = \"ten\"\n"));
        assert_eq!(r.at.to_string(), "api.timeout_secs");
        assert_eq!(
            r.error,
            ReadError::Value("invalid type: string \"ten\", expected u64".into())
        );

        let r = refusal(&format!("{MINIMAL}[daemon]\nlog_format = \"xml\"\n"));
        assert_eq!(r.at.to_string(), "daemon.log_format");
        assert!(matches!(r.error, ReadError::Value(_)), "{r:?}");
    }

    /// What the derive reads from toml's own reader it reads from this one the same.
    #[test]
    fn reads_what_toml_reads() {
        let text = format!(
            "{MINIMAL}max_requests_per_second = 5\ntoken_file = \"t\"\n\
             [state]\ndir = \"s\"\n[daemon]\nsettle_secs = 1\nlog_format = \"json\"\n\
             metrics = \"127.0.0.1:9187\"\n[notifications]\napplication_slug = \"inv\"\n\
             [[feed]]\nname = \"a\"\ninbox = \"i\"\nlocation_id = 3\nmode = \"delta\"\n\
             watch = \"poll\"\n"
        );
        let table: toml::Table = toml::from_str(&text).unwrap();
        let ours: Config = read(toml::Value::Table(table)).unwrap();
        let toml_s: Config = toml::from_str(&text).unwrap();
        assert_eq!(format!("{ours:?}"), format!("{toml_s:?}"));
        assert_eq!(ours.feeds[0].mode, crate::diff::Mode::Delta);
        assert_eq!(ours.api.max_requests_per_second, 5.0);
    }
}
