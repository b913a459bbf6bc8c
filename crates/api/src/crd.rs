//! The CustomResourceDefinitions for PodGroup and Queue, as objects and as the YAML in `crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{HyperNode, PodGroup, Queue};

/// Errors of this module. None is worth retrying: they mean a bug in the types.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Rendering a CRD as YAML failed.
    #[error("rendering CRD {name} as YAML: {source}")]
    Render {
        /// The CRD's `metadata.name`.
        name: String,
        /// What serde_yaml_ng reported.
        source: serde_yaml_ng::Error,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The CRDs to install: PodGroup, then Queue, with normalized, structural schemas.
///
/// Use this rather than `PodGroup::crd()`/`Queue::crd()`: those return the raw derived schema,
/// whose `nullable` markers and `null` enum values this function removes and whose quantities
/// lack the `anyOf` Kubernetes' int-or-string rules want.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [PodGroup::crd(), Queue::crd(), HyperNode::crd()]
        .into_iter()
        .map(finish)
        .collect()
}

/// [`crds`] as multi-document YAML, each document starting with `---`. Deterministic: the
/// same build always prints the same bytes. This is what `caldera crd` prints and `crds/` holds.
pub fn crds_yaml() -> Result<String> {
    let mut out = String::new();
    for crd in crds() {
        let yaml = serde_yaml_ng::to_string(&crd).map_err(|source| Error::Render {
            name: crd.metadata.name.clone().unwrap_or_default(),
            source,
        })?;
        out.push_str("---\n");
        out.push_str(&yaml);
    }
    Ok(out)
}

/// Applies what the derive cannot say: a structural schema, and no required `spec` (Volcano
/// accepts objects without one, and so do the Rust types).
fn finish(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|validation| validation.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        crate::schema::normalize(schema);
        if let Some(required) = schema.required.as_mut() {
            required.retain(|field| field != "spec");
            if required.is_empty() {
                schema.required = None;
            }
        }
    }
    crd
}
