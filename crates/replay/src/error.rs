//! Errors of `caldera replay`: unreadable or malformed input (naming file, line and column),
//! and a simulation that cannot be set up. None is worth retrying: they are in the input.

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong reading a trace or setting up a replay.
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
    /// A malformed line: the file, its 1-based line and column, and what is wrong.
    #[error("{file}:{line}:{column}: {message}")]
    Input {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// 1-based column (character) where the offending field starts.
        column: usize,
        /// What is wrong, naming the CSV column.
        message: String,
    },
    /// Manifests (`-f`), the scheduler config, or the simulator itself.
    #[error(transparent)]
    Sim(#[from] caldera_sim::Error),
    /// Anything else wrong with the inputs taken together (no nodes, a job naming a queue
    /// that is not there, ...).
    #[error("{0}")]
    Invalid(String),
}
