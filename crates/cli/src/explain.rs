//! `caldera explain NS/PODGROUP` (or `NS/JOB`): why a gang is (or is not) placed, node by node — on the live
//! cluster (read through the kubeconfig, as `caldera snapshot` reads it), or on manifests given
//! with `-f`.

use crate::CommandResult;
use caldera_config::SchedulerConfig;
use caldera_sim::Simulation;
use clap::Args;
use k8s_openapi::api::batch::v1::Job;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `caldera explain`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  caldera explain default/training-job-tp8
  caldera explain default/training-job-tp8 -f cluster.yaml -f jobs.yaml
  caldera snapshot | caldera explain default/training-job-tp8 -f -")]
pub struct ExplainArgs {
    /// The PodGroup, as NAMESPACE/NAME (a `batch/v1` Job's name stands for the PodGroup derived
    /// from it; a pod without a group: NAMESPACE/pod:NAME).
    pub podgroup: String,
    /// Manifests describing the cluster (multi-document YAML; `-` reads stdin). Repeatable.
    /// Without -f, the live cluster is read.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub files: Vec<String>,
    /// Kubeconfig for the live cluster. Default: `$KUBECONFIG`, `~/.kube/config`, or the
    /// in-cluster config.
    #[arg(long, value_name = "FILE", conflicts_with = "files")]
    pub kubeconfig: Option<PathBuf>,
    /// The scheduler config. Default: the shipped one.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// Runs `caldera explain`.
pub fn run(args: ExplainArgs) -> CommandResult {
    if !args.podgroup.contains('/') {
        return Err(format!(
            "expected NAMESPACE/NAME, got {:?} (e.g. default/{})",
            args.podgroup, args.podgroup
        )
        .into());
    }
    let config = match &args.config {
        Some(path) => caldera_config::load(path)?,
        None => SchedulerConfig::default(),
    };
    let inputs: Vec<(String, String)> = if args.files.is_empty() {
        vec![("the live cluster".to_string(), live_manifests(&args)?)]
    } else {
        let mut inputs = Vec::new();
        for file in &args.files {
            inputs.push((file.clone(), crate::simulate::read(file)?));
        }
        inputs
    };
    let mut sim = Simulation::new(&config)?;
    crate::simulate::apply_inputs(&mut sim, &inputs)?;
    // The PodGroups Caldera derives from Jobs, as the live scheduler would have made them.
    let (opts, now) = (sim.options().clone(), sim.now());
    sim.store_mut().create_derived_podgroups(&opts, now);
    let scheduler = caldera_plugins::scheduler(&config)?;
    let snapshot = sim.snapshot();
    let id = gang_id(&sim, &args.podgroup);
    let Some(explanation) = scheduler.explain(&snapshot, sim.now(), &id) else {
        let known: Vec<&str> = snapshot
            .jobs
            .iter()
            .filter(|j| j.has_podgroup())
            .map(|j| &*j.id)
            .take(10)
            .collect();
        return Err(format!(
            "no PodGroup {} in {} (PodGroups: {})",
            args.podgroup,
            if args.files.is_empty() {
                "the cluster"
            } else {
                "the given manifests"
            },
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        )
        .into());
    };
    let mut text = explanation.to_string();
    let job = snapshot.jobs.iter().find(|j| *j.id == *args.podgroup);
    if let Some(shown) = job
        .and_then(|j| j.native.as_ref())
        .and_then(caldera_model::NativeGroup::display)
    {
        // The name users gave the gang: its Workload (the PodGroup is the controller's).
        text = format!(
            "{} is a native scheduling.k8s.io/v1alpha2 PodGroup of {shown}\n{text}",
            args.podgroup
        );
    }
    let hypernodes = job
        .and_then(|j| j.topology.as_ref())
        .is_some_and(|t| t.label_key().is_none());
    if hypernodes {
        if let Some(tree) = caldera_sim::report::topology_lines(&snapshot) {
            text.push('\n');
            text.push_str(&tree);
        }
    }
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(())
}

/// The gang `NAMESPACE/NAME` names: that PodGroup, or, when `NAME` is a `batch/v1` Job and no
/// PodGroup has that name, the PodGroup derived from the Job (`job-<name>`, docs/workloads.md).
fn gang_id(sim: &Simulation, name: &str) -> String {
    let (ns, short) = name.split_once('/').unwrap_or(("default", name));
    let store = sim.store();
    if store.podgroup(ns, short).is_none()
        && store.list::<Job>().any(|j| {
            j.metadata.namespace.as_deref().unwrap_or("default") == ns
                && j.metadata.name.as_deref() == Some(short)
        })
    {
        return format!("{ns}/{}", caldera_cache::workload::job_podgroup_name(short));
    }
    name.to_string()
}

/// Reads the live cluster as manifests, the way `caldera snapshot` does.
fn live_manifests(args: &ExplainArgs) -> Result<String, Box<dyn std::error::Error>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = crate::run::client(args.kubeconfig.as_ref()).await?;
        let yaml = caldera_runtime::manifests::cluster_manifests(&client).await?;
        Ok::<_, Box<dyn std::error::Error>>(yaml)
    })
}
