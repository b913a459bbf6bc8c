//! While the API server refuses (403) an optional kind, ask it every [`PERIOD`] whether the
//! permission is there now, with a SelfSubjectAccessReview (`authorization.k8s.io/v1`, which
//! every authenticated user may create through the default `system:basic-user` role, so it
//! needs no rule of Caldera's own): once it is, the refused watches are asked again at once
//! instead of at the end of their minutes-long back-off. Watching RBAC objects themselves
//! would need read access to every Role and binding of the cluster; this needs none.

use crate::Shared;
use caldera_api::calls::Resource;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube::Client;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

/// How often a refused kind's permission is asked about.
pub(crate) const PERIOD: Duration = Duration::from_secs(15);

/// Whether this client may now `list` `resource` cluster-wide.
async fn allowed(client: &Client, resource: &Resource) -> Result<bool, kube::Error> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("list".into()),
                group: Some(resource.group.into()),
                resource: Some(resource.plural.into()),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// Asks about every refused kind each [`PERIOD`] until `stop`; wakes the refused watches once
/// one of them is allowed.
pub(crate) async fn probe(shared: Arc<Shared>, client: Client, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
        let refused = shared.lock_cluster().refused_kinds();
        for resource in refused {
            match allowed(&client, &resource).await {
                Ok(true) => {
                    info!(kind = %resource, "the permission to list it is granted now: asking again");
                    shared.retry_refused.notify_waiters();
                    break;
                }
                Ok(false) => {}
                Err(e) => debug!(kind = %resource, error = %e, "SelfSubjectAccessReview failed"),
            }
        }
    }
}
