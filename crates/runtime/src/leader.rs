//! Leader election on a `coordination.k8s.io/v1` Lease, with resourceVersion preconditions.
//!
//! Written here rather than taken from a crate: `kube-leader-election` needs kube 4, and
//! `kube-lease-manager` (kube 5) takes orphaned leases with server-side apply and judges
//! expiry by comparing the holder's `renewTime` with the local clock. This follows client-go's
//! `leaderelection` instead:
//!
//! - Every `retry_period` a candidate reads the Lease. It is free when it has no holder, or
//!   when its record has not changed for `leaseDurationSeconds` **as observed by this
//!   process's monotonic clock** (so clock skew between replicas does not matter).
//! - Taking or renewing is a `replace` carrying the resourceVersion that was read: if another
//!   replica wrote in between, the server answers 409 and this replica lost the race.
//! - The leader renews every `renew_period`. If it cannot renew within `renew_deadline`
//!   (2/3 of the lease duration) of the start of its last successful renewal, it steps down:
//!   others can take the lease no sooner than a full lease duration after they saw that
//!   renewal, so two leaders never overlap.
//! - On shutdown the leader releases the lease (no holder, duration 1s), so a successor takes
//!   over at its next retry instead of waiting for expiry.

use crate::metrics::Metrics;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// Leader election settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// Namespace of the Lease (`--lease-namespace`).
    pub namespace: String,
    /// Name of the Lease (`caldera`).
    pub name: String,
    /// How long a lease lasts without renewal (15s).
    pub lease_duration: Duration,
    /// How often the leader renews (5s).
    pub renew_period: Duration,
    /// How often a candidate retries (2s).
    pub retry_period: Duration,
}

impl LeaderElection {
    /// The defaults: Lease `caldera` in `namespace`, 15s / 5s / 2s.
    pub fn new(namespace: impl Into<String>) -> Self {
        LeaderElection {
            namespace: namespace.into(),
            name: "caldera".into(),
            lease_duration: Duration::from_secs(15),
            renew_period: Duration::from_secs(5),
            retry_period: Duration::from_secs(2),
        }
    }

    fn renew_deadline(&self) -> Duration {
        self.lease_duration.mul_f64(2.0 / 3.0)
    }

    /// Each API call gets at most this long, so a hung request cannot outlive the deadline.
    fn call_timeout(&self) -> Duration {
        self.renew_deadline()
            .min(Duration::from_secs(5))
            .max(Duration::from_millis(200))
    }
}

/// Errors of one election round; all are worth retrying at the next round.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the Lease failed.
    #[error("reading Lease {namespace}/{name}: {source}")]
    Get {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// Writing the Lease failed (other than losing the race).
    #[error("writing Lease {namespace}/{name}: {source}")]
    Write {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// What kube said.
        #[source]
        source: kube::Error,
    },
    /// The API call did not answer in time.
    #[error("Lease {namespace}/{name}: no answer within {timeout:?}")]
    Timeout {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The timeout.
        timeout: Duration,
    },
}

/// The last lease record seen, and when (locally) it last changed.
#[derive(Debug, Clone, PartialEq)]
struct Observed {
    record: (Option<String>, Option<String>, Option<i32>, Option<i32>),
    at: Instant,
}

struct Elector {
    api: Api<Lease>,
    config: LeaderElection,
    identity: String,
    observed: Option<Observed>,
    metrics: Arc<Metrics>,
}

fn micro_now() -> MicroTime {
    MicroTime(Timestamp::now())
}

impl Elector {
    async fn call<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, kube::Error>>,
        write: bool,
    ) -> Result<Result<T, kube::Error>, Error> {
        if write {
            self.metrics.api_write("lease");
        }
        let timeout = self.config.call_timeout();
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| Error::Timeout {
                namespace: self.config.namespace.clone(),
                name: self.config.name.clone(),
                timeout,
            })
    }

    fn write_error(&self, source: kube::Error) -> Error {
        Error::Write {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// One round: returns whether this replica holds the lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, Error> {
        let got = self
            .call(self.api.get_opt(&self.config.name), false)
            .await?;
        let lease = got.map_err(|source| Error::Get {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        })?;
        let duration_secs = self.config.lease_duration.as_secs().max(1) as i32;
        let Some(mut lease) = lease else {
            let now = micro_now();
            let new = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self
                .call(self.api.create(&PostParams::default(), &new), true)
                .await?
            {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.write_error(e)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (
            holder.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
            spec.lease_duration_seconds,
            spec.lease_transitions,
        );
        let now = Instant::now();
        if self.observed.as_ref().map(|o| &o.record) != Some(&record) {
            self.observed = Some(Observed { record, at: now });
        }
        let observed_at = self.observed.as_ref().map_or(now, |o| o.at);
        let their_duration =
            Duration::from_secs(spec.lease_duration_seconds.unwrap_or(duration_secs).max(1) as u64);
        let mine = holder.as_deref() == Some(self.identity.as_str());
        let expired = holder.is_none() || now.duration_since(observed_at) >= their_duration;
        if !mine && !expired {
            return Ok(false);
        }
        let stamp = micro_now();
        let mut new_spec = spec.clone();
        new_spec.renew_time = Some(stamp.clone());
        new_spec.lease_duration_seconds = Some(duration_secs);
        if !mine {
            new_spec.holder_identity = Some(self.identity.clone());
            new_spec.acquire_time = Some(stamp);
            new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        lease.spec = Some(new_spec);
        // `lease.metadata.resourceVersion` is the one read: the replace is conditional on it.
        match self
            .call(
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease),
                true,
            )
            .await?
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                debug!("lost the race for the lease");
                Ok(false)
            }
            Err(e) => Err(self.write_error(e)),
        }
    }

    /// Gives the lease up if this replica holds it.
    async fn release(&mut self) -> Result<(), Error> {
        let got = self
            .call(self.api.get_opt(&self.config.name), false)
            .await?;
        let Ok(Some(mut lease)) = got else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(micro_now());
        match self
            .call(
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease),
                true,
            )
            .await?
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(self.write_error(e)),
        }
    }
}

/// Runs the election until `stop` is cancelled, publishing leadership on `leader`. Releases
/// the lease before returning if this replica holds it and `release` is not cancelled first.
pub(crate) async fn run(
    client: Client,
    config: LeaderElection,
    identity: String,
    leader: watch::Sender<bool>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    let mut elector = Elector {
        api: Api::namespaced(client, &config.namespace),
        config: config.clone(),
        identity: identity.clone(),
        observed: None,
        metrics,
    };
    let deadline = config.renew_deadline();
    let mut last_renew: Option<Instant> = None;
    loop {
        let started = Instant::now();
        let result = elector.try_acquire_or_renew().await;
        let is_leader = *leader.borrow();
        let now_leader = match result {
            Ok(true) => {
                last_renew = Some(started);
                true
            }
            Ok(false) => false,
            Err(e) => {
                warn!(error = %e, "leader election round failed");
                // Keep leading only while within the renew deadline.
                is_leader && last_renew.is_some_and(|t| t.elapsed() < deadline)
            }
        };
        if now_leader != is_leader {
            if now_leader {
                info!(identity = %identity, lease = %format!("{}/{}", config.namespace, config.name), "became the leader");
            } else {
                warn!(identity = %identity, "lost the leader lease; scheduling stops");
            }
            leader.send_replace(now_leader);
        }
        let wait = if now_leader {
            // Renew on time, but retry sooner after a failure.
            match last_renew {
                Some(t) if t == started => config.renew_period,
                _ => config.retry_period,
            }
        } else {
            config.retry_period
        };
        let sleep_until = if now_leader {
            // Never sleep past the point where the renew deadline would lapse.
            let hard = last_renew.map_or(started + wait, |t| t + deadline);
            (started + wait).min(hard)
        } else {
            started + wait
        };
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep_until(sleep_until) => {}
        }
        if *leader.borrow() && last_renew.is_some_and(|t| t.elapsed() >= deadline) {
            warn!(identity = %identity, "could not renew the lease in time; scheduling stops");
            leader.send_replace(false);
        }
    }
    if *leader.borrow() {
        leader.send_replace(false);
        match elector.release().await {
            Ok(()) => info!(identity = %identity, "released the leader lease"),
            Err(e) => warn!(error = %e, "could not release the lease; it expires by itself"),
        }
    }
}
