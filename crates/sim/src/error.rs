//! Errors of the simulator: bad input (naming file, document and field path), bad config, and
//! a scheduler that cannot be built.

use std::fmt;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in the input a problem is: the file (`-` for stdin), the 1-based document number in a
/// multi-document stream, and the field path within that document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// File name as given.
    pub file: String,
    /// 1-based document number.
    pub document: usize,
    /// Field path, e.g. `spec.steps[0].apply[3].spec.containers[0]`; empty for the document.
    pub path: String,
}

impl Origin {
    /// The document `document` of `file`.
    pub fn new(file: &str, document: usize) -> Self {
        Origin {
            file: file.to_string(),
            document,
            path: String::new(),
        }
    }

    /// The same document, at `path` below the current path.
    pub fn at(&self, path: &str) -> Self {
        let path = match (self.path.is_empty(), path.is_empty()) {
            (true, _) => path.to_string(),
            (false, true) => self.path.clone(),
            (false, false) if path.starts_with('[') => format!("{}{path}", self.path),
            (false, false) => format!("{}.{path}", self.path),
        };
        Origin {
            file: self.file.clone(),
            document: self.document,
            path,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        Ok(())
    }
}

/// What can go wrong loading input or setting up a simulation. None of these is worth
/// retrying: they are in the input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// Not well-formed YAML.
    #[error("{origin}: YAML syntax error: {message}")]
    Syntax {
        /// Where.
        origin: Origin,
        /// The parser's message.
        message: String,
    },
    /// Well-formed YAML with a field of the wrong shape, or a missing or unknown field.
    #[error("{origin}: {message}")]
    Invalid {
        /// Where, down to the field.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
    /// An object whose content the cluster would reject (a malformed quantity, an unknown
    /// operator); the conversion error names the object and the field.
    #[error("{origin}: {source}")]
    Object {
        /// The document and the object's place in it.
        origin: Origin,
        /// The conversion error (boxed: it is large and rare).
        #[source]
        source: Box<caldera_cache::Error>,
    },
    /// The scheduler config is invalid (boxed: it is large and rare).
    #[error("{0}")]
    Config(#[from] Box<caldera_config::ConfigError>),
    /// The scheduler could not be built from a valid config.
    #[error("scheduler: {0}")]
    Scheduler(String),
}
