//! Errors of the live driver and the harness. A mismatch between a scenario and the cluster is
//! not an error but a failed step in the [`Outcome`](caldera_sim::Outcome); these are the
//! things that stop a run: the API server refusing the driver's own bookkeeping, a timeout
//! waiting for the cluster, bad input, or a scheduler that cannot start.

use std::path::PathBuf;
use std::time::Duration;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call the driver needs failed. Worth retrying only if `source` is a transport
    /// error; the driver already retries the answers a real server gives while it catches up
    /// (a CRD not served yet, a namespace's service account not made yet).
    #[error("{action} {object}: {source}")]
    Api {
        /// What the driver was doing (`create`, `list`, `delete`, ...).
        action: &'static str,
        /// The object or collection, `Kind ns/name`.
        object: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// The cluster did not reach a state in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// An object the scenario needs exists and was not made by this suite: the driver will
    /// not take over or delete it.
    #[error("{0} already exists and was not created by the e2e suite (no label caldera.sh/e2e-run); remove it or use another cluster")]
    Occupied(String),
    /// Input the driver cannot use (an object of a kind scenarios do not have).
    #[error("{0}")]
    Input(String),
    /// A scenario file could not be read or loaded.
    #[error("{0}")]
    Scenario(#[from] caldera_sim::Error),
    /// An object could not be turned into JSON (a bug in the types).
    #[error("encoding {object} as JSON: {source}")]
    Json {
        /// The object.
        object: String,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// `CALDERA_E2E_KUBECONFIG` names a kubeconfig that cannot be used.
    #[error("kubeconfig {}: {message}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The in-process API stand-in did not start.
    #[error("starting the API stand-in: {0}")]
    StandIn(#[from] caldera_testkit::apiserver::Error),
    /// The in-process scheduler did not start.
    #[error("starting the scheduler: {0}")]
    Scheduler(#[from] caldera_runtime::Error),
}

impl Error {
    pub(crate) fn api(
        action: &'static str,
        object: impl Into<String>,
        source: kube::Error,
    ) -> Self {
        Error::Api {
            action,
            object: object.into(),
            source,
        }
    }
}

/// The HTTP status of an API error answer, if `e` is one.
pub fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Whether an API answer is a 4xx: the server refused the request as such (as opposed to a
/// transport failure or a server error).
pub fn is_refusal(e: &kube::Error) -> bool {
    status_code(e).is_some_and(|c| (400..500).contains(&c))
}

/// The message of an API error answer (empty for other errors).
pub fn status_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}
