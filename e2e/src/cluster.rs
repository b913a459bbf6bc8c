//! Where the suite runs and how it runs the scheduler: a fresh in-process API stand-in per
//! scenario by default, or the cluster of the kubeconfig named by `CALDERA_E2E_KUBECONFIG`;
//! either way the scheduler runs in-process (the `caldera run` library, [`caldera_runtime`])
//! and talks to that API server through a real `kube` client, built as `caldera run` builds
//! its own ([`Cluster::scheduler_client`]: without kube's own retries), while the driver
//! uses kube's default client ([`Cluster::client`]).
//!
//! # The stand-in as a bare control plane
//!
//! The stand-in is started the way a kube-apiserver with etcd and nothing else behaves: no
//! node lifecycle controller (the driver removes the `not-ready` taint, as FORMAT.md says) and
//! no namespaces made on first write (the driver creates them).
//!
//! # Leader election
//!
//! Off on the stand-in: each scenario has its own API server and one scheduler, and election
//! would only delay the first session by a round. On a real cluster it is on, with a Lease
//! `caldera-e2e-<run id>` in namespace `default`, deleted after the run: the Lease shows who
//! schedules, and the election code meets a real server's Lease validation. (A Caldera
//! deployed in that cluster uses another Lease and would schedule the same pods: the target
//! cluster must not run one.)

use crate::driver::{new_run_id, DriverOptions, LiveRun};
use crate::error::{status_code, Error, Result};
use caldera_config::SchedulerConfig;
use caldera_runtime::{ConfigSource, LeaderElection, Options, RunningHandle, Runtime};
use caldera_sim::{Outcome, Scenario};
use caldera_testkit::apiserver::{self, ApiServer};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use kube::Client;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The environment variable naming a kubeconfig to run against instead of the stand-in.
pub const KUBECONFIG_ENV: &str = "CALDERA_E2E_KUBECONFIG";

/// The namespace of the scheduler's Lease on a real cluster: `deploy/`'s, where its Role lets
/// the shipped ServiceAccount elect.
pub const LEASE_NAMESPACE: &str = crate::rbac::NAMESPACE;

/// Where the suite runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A fresh in-process API stand-in for each test.
    StandIn,
    /// The cluster of this kubeconfig (its current context).
    Kubeconfig(PathBuf),
}

impl Target {
    /// [`Target::Kubeconfig`] when `CALDERA_E2E_KUBECONFIG` is set and not empty, else
    /// [`Target::StandIn`].
    pub fn from_env() -> Target {
        match std::env::var_os(KUBECONFIG_ENV) {
            Some(path) if !path.is_empty() => Target::Kubeconfig(PathBuf::from(path)),
            _ => Target::StandIn,
        }
    }

    /// Whether this is a real cluster (shared between tests, so they must run one at a time).
    pub fn is_real(&self) -> bool {
        matches!(self, Target::Kubeconfig(_))
    }
}

/// The stand-in's options for a bare control plane (see the module docs).
pub fn stand_in_options() -> apiserver::Options {
    apiserver::Options {
        node_lifecycle_controller: false,
        auto_create_namespaces: false,
        ..apiserver::Options::default()
    }
}

/// A connection to the API server a test runs against.
pub struct Cluster {
    client: Client,
    scheduler_client: Client,
    server: Option<Arc<ApiServer>>,
    /// A real cluster's config (the administrator's), to build ServiceAccount clients from.
    config: Option<kube::Config>,
}

/// On a real cluster: the shipped ServiceAccount and RBAC of a mode installed
/// ([`crate::rbac::install`]), and a client acting as that account, built as `caldera run`
/// builds its own.
async fn service_account_client(
    admin: &Client,
    config: &kube::Config,
    gate: bool,
) -> Result<Client> {
    let token = crate::rbac::install(admin, gate).await?;
    let mut config = config.clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(token.into()),
        ..kube::config::AuthInfo::default()
    };
    caldera_runtime::client(config)
        .map_err(|e| Error::Input(format!("a client for the ServiceAccount: {e}")))
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("stand_in", &self.server.as_ref().map(|s| s.url()))
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Starts a fresh stand-in, or connects to the kubeconfig's cluster.
    pub async fn connect(target: &Target) -> Result<Cluster> {
        match target {
            Target::StandIn => Cluster::stand_in().await,
            Target::Kubeconfig(path) => Cluster::kubeconfig(path).await,
        }
    }

    /// A fresh in-process stand-in with [`stand_in_options`], enforcing run mode's shipped
    /// RBAC ([`crate::rbac`]) for the scheduler's token.
    pub async fn stand_in() -> Result<Cluster> {
        let options = apiserver::Options {
            rbac: Some(crate::rbac::stand_in(false)?),
            ..stand_in_options()
        };
        let server = ApiServer::start_with(options).await?;
        let client = server.kube_client()?;
        // As `kubectl apply -k deploy/` leaves it: the namespace of the Lease.
        let namespace: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(
            serde_json::json!({"metadata": {"name": crate::rbac::NAMESPACE}}),
        )
        .map_err(|e| Error::Input(e.to_string()))?;
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .create(&kube::api::PostParams::default(), &namespace)
            .await
            .map_err(|e| {
                Error::api("create", format!("Namespace {}", crate::rbac::NAMESPACE), e)
            })?;
        let url = server.url();
        let uri = url
            .parse()
            .map_err(|_| Error::Input(format!("stand-in url {url}")))?;
        let mut config = kube::Config::new(uri);
        config.auth_info.token = Some(crate::rbac::STAND_IN_TOKEN.to_string().into());
        let scheduler_client = caldera_runtime::client(config)
            .map_err(|source| apiserver::Error::Client { url, source })?;
        Ok(Cluster {
            client,
            scheduler_client,
            server: Some(Arc::new(server)),
            config: None,
        })
    }

    /// The cluster of the kubeconfig's current context.
    pub async fn kubeconfig(path: &Path) -> Result<Cluster> {
        let fail = |message: String| Error::Kubeconfig {
            path: path.to_path_buf(),
            message,
        };
        let kubeconfig =
            kube::config::Kubeconfig::read_from(path).map_err(|e| fail(e.to_string()))?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| fail(e.to_string()))?;
        let client = Client::try_from(config.clone()).map_err(|e| fail(e.to_string()))?;
        let scheduler_client = service_account_client(&client, &config, false).await?;
        Ok(Cluster {
            client,
            scheduler_client,
            server: None,
            config: Some(config),
        })
    }

    /// Makes the scheduler run under gate mode's shipped RBAC from now on (its own
    /// ServiceAccount on a real cluster, its ClusterRole on the stand-in).
    pub async fn use_gate_rbac(&mut self) -> Result<()> {
        match (&self.server, &self.config) {
            (Some(server), _) => server.set_rbac(Some(crate::rbac::stand_in(true)?)),
            (None, Some(config)) => {
                self.scheduler_client = service_account_client(&self.client, config, true).await?;
            }
            (None, None) => {}
        }
        Ok(())
    }

    /// A client for the cluster, for the test driver (kube's default retries).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The client to start the scheduler with: built as `caldera run` builds its own
    /// ([`caldera_runtime::client`], without kube's own retries, so a refused eviction is
    /// seen at once).
    pub fn scheduler_client(&self) -> Client {
        self.scheduler_client.clone()
    }

    /// The stand-in, when the cluster is one (for request counters, injected failures and
    /// direct looks at the store).
    pub fn stand_in_server(&self) -> Option<Arc<ApiServer>> {
        self.server.clone()
    }

    /// Whether this is a real cluster.
    pub fn is_real(&self) -> bool {
        self.server.is_none()
    }
}

/// In-process scheduler options for a test: the given config, no HTTP endpoint, the given
/// leader election, a recognisable identity, a short shutdown.
pub fn scheduler_options(
    config: SchedulerConfig,
    leader_election: Option<LeaderElection>,
    identity: &str,
) -> Options {
    Options {
        config: ConfigSource::Fixed(config),
        leader_election,
        metrics_addr: None,
        identity: Some(identity.to_string()),
        shutdown_timeout: Duration::from_secs(5),
        ..Options::default()
    }
}

/// The scheduler options for a scenario run on `cluster` (see the module docs on leader
/// election), and the Lease to delete after the run, if any.
pub fn scenario_scheduler(
    cluster: &Cluster,
    config: SchedulerConfig,
    run_id: &str,
    gate: bool,
) -> (Options, Option<LeaderElection>) {
    let lease = cluster.is_real().then(|| LeaderElection {
        name: crate::rbac::lease_name(gate).to_string(),
        ..LeaderElection::new(LEASE_NAMESPACE)
    });
    let options = scheduler_options(config, lease.clone(), &format!("e2e-{run_id}"));
    (options, lease)
}

/// Starts a lone scheduler replica and waits, at most `timeout`, until it leads (at once
/// without leader election, after its first election round with it), its caches are synced
/// and it has run a session: from then on a scenario's `run` steps get their sessions.
pub async fn start_scheduler(
    options: Options,
    client: Client,
    timeout: Duration,
) -> Result<RunningHandle> {
    let handle = Runtime::start(options, client).await?;
    let deadline = Instant::now() + timeout;
    loop {
        if handle.is_leader() && handle.is_ready() {
            return Ok(handle);
        }
        if Instant::now() >= deadline {
            handle.shutdown().await;
            return Err(Error::Timeout {
                what: "the scheduler to lead, sync its caches and run a session".into(),
                after: timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Deletes a Lease (after the scheduler released it).
pub async fn delete_lease(client: &Client, namespace: &str, name: &str) -> Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(404) => Ok(()),
        Err(e) => Err(Error::api("delete", format!("Lease {namespace}/{name}"), e)),
    }
}

/// Runs a whole scenario on `cluster` with an in-process scheduler started after the first
/// `apply` step, then stops the scheduler and cleans up (also when a step failed).
pub async fn run_scenario(cluster: &mut Cluster, scenario: Scenario) -> Result<Outcome> {
    let run_id = new_run_id(&scenario.name);
    let config = scenario.config.clone();
    let gate = scenario.mode == caldera_sim::Mode::Gate;
    let client = cluster.client();
    let mut run = LiveRun::prepare(client.clone(), scenario, DriverOptions::new(&run_id)).await?;
    if gate {
        cluster.use_gate_rbac().await?;
    }
    let cluster = &*cluster;
    let (mut options, lease) = scenario_scheduler(cluster, config, &run_id, gate);
    if gate {
        // `caldera gate` beside kube-scheduler: the stand-in's model of it, or the real one
        // of the cluster the suite points at (e2e/README.md).
        options.gate = Some(caldera_runtime::GateOptions::default());
    }
    let _kube_scheduler = gate
        .then(|| cluster.stand_in_server())
        .flatten()
        .map(|server| server.start_kube_scheduler(Duration::from_millis(100)));
    let mut handle: Option<RunningHandle> = None;
    let result = run
        .run_to_end(async || {
            let started = start_scheduler(
                options.clone(),
                cluster.scheduler_client(),
                Duration::from_secs(30),
            )
            .await?;
            handle = Some(started);
            Ok(())
        })
        .await;
    let sessions = handle.as_ref().map_or(0, RunningHandle::sessions);
    if let Some(h) = handle {
        h.shutdown().await;
    }
    if let Some(le) = &lease {
        delete_lease(&client, &le.namespace, &le.name).await?;
    }
    let cleaned = run.cleanup().await;
    let mut outcome = result?;
    cleaned?;
    outcome.sessions = sessions;
    Ok(outcome)
}

/// Loads a scenario file.
pub fn load_scenario(path: &Path, shown_as: &str) -> Result<Scenario> {
    let text = std::fs::read_to_string(path).map_err(|source| caldera_sim::Error::Read {
        file: shown_as.to_string(),
        source,
    })?;
    Ok(caldera_sim::scenario::load(&text, shown_as)?)
}
