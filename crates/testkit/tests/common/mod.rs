//! Helpers the stand-in's test files share.

use kube::core::Status;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// What a test returns: `?` on any error fails it.
pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A fixture object from its JSON.
pub fn from_json<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("test fixture deserialises")
}

/// The API server's refusal a request must have met.
pub fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> Box<Status> {
    match result {
        Err(kube::Error::Api(status)) => status,
        other => panic!("expected an API error, got {other:?}"),
    }
}
