//! Config errors: one line each, naming the file, line, column and key path.

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in the config text a problem is. Lines and columns are 1-based; columns count
/// characters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The file the text came from, when it came from a file.
    pub file: Option<PathBuf>,
    /// The line, when known.
    pub line: Option<usize>,
    /// The column, when known.
    pub column: Option<usize>,
}

/// Renders as the prefix of a message: `file:line:column: `, or `line L, column C: ` when the
/// text did not come from a file, or nothing when nothing is known.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line, self.column) {
            (Some(file), Some(line), Some(column)) => {
                write!(f, "{}:{line}:{column}: ", file.display())
            }
            (Some(file), Some(line), None) => write!(f, "{}:{line}: ", file.display()),
            (Some(file), None, _) => write!(f, "{}: ", file.display()),
            (None, Some(line), Some(column)) => write!(f, "line {line}, column {column}: "),
            (None, Some(line), None) => write!(f, "line {line}: "),
            (None, None, _) => Ok(()),
        }
    }
}

/// Why a config could not be loaded. The `Display` form is the whole one-line message, e.g.
/// `config/scheduler.yaml:14:11: tiers[1].plugins[5].arguments["binpack.weight"]: expected an
/// integer, got "ten"`.
///
/// Only [`ConfigError::Read`] is worth retrying (the file may be in the middle of being
/// replaced); the others are in the text and stay until the text changes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read the config: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The text is not well-formed YAML (or uses YAML features the config does not accept).
    #[error("{location}YAML syntax error: {message}")]
    Syntax {
        /// Where the parser gave up.
        location: Location,
        /// The parser's message, without its own position suffix.
        message: String,
    },
    /// Well-formed YAML that is not a valid scheduler config.
    #[error("{location}{}{message}", key_prefix(key_path))]
    Invalid {
        /// Where the offending key or value is.
        location: Location,
        /// The key path, e.g. `tiers[1].plugins[5].arguments["binpack.weight"]`; empty for the
        /// document itself.
        key_path: String,
        /// What is wrong.
        message: String,
    },
}

impl ConfigError {
    /// Where the problem is, when it is in the text.
    pub fn location(&self) -> Option<&Location> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Syntax { location, .. } | ConfigError::Invalid { location, .. } => {
                Some(location)
            }
        }
    }

    /// The 1-based line of the problem, when known.
    pub fn line(&self) -> Option<usize> {
        self.location().and_then(|location| location.line)
    }

    /// The 1-based column of the problem, when known.
    pub fn column(&self) -> Option<usize> {
        self.location().and_then(|location| location.column)
    }

    /// The key path of the problem, for [`ConfigError::Invalid`].
    pub fn key_path(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key_path, .. } => Some(key_path),
            ConfigError::Read { .. } | ConfigError::Syntax { .. } => None,
        }
    }
}

fn key_prefix(key_path: &str) -> String {
    if key_path.is_empty() {
        String::new()
    } else {
        format!("{key_path}: ")
    }
}

/// Converts a serde_yaml_ng parse failure, dropping the " at line L column C" the parser
/// appends since [`Location`] already says it.
pub(crate) fn from_yaml(error: &serde_yaml_ng::Error, origin: Option<&Path>) -> ConfigError {
    let position = error.location();
    let mut message = error.to_string();
    if let Some(position) = &position {
        let suffix = format!(" at line {} column {}", position.line(), position.column());
        message = message.replacen(&suffix, "", 1);
    }
    ConfigError::Syntax {
        location: Location {
            file: origin.map(Path::to_path_buf),
            line: position.as_ref().map(|position| position.line()),
            column: position.as_ref().map(|position| position.column()),
        },
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_prefixes() {
        let full = Location {
            file: Some(PathBuf::from("c.yaml")),
            line: Some(3),
            column: Some(7),
        };
        assert_eq!(full.to_string(), "c.yaml:3:7: ");
        let no_file = Location {
            file: None,
            line: Some(3),
            column: Some(7),
        };
        assert_eq!(no_file.to_string(), "line 3, column 7: ");
        assert_eq!(Location::default().to_string(), "");
    }

    #[test]
    fn invalid_without_key_path_has_no_empty_prefix() {
        let error = ConfigError::Invalid {
            location: Location::default(),
            key_path: String::new(),
            message: "empty".into(),
        };
        assert_eq!(error.to_string(), "empty");
    }
}
