//! One trial per scenario file: the whole scenario through the live driver, with the scheduler
//! in-process, on a fresh stand-in (or on the `CALDERA_E2E_KUBECONFIG` cluster).

use crate::support::{block_on, load, scenario_files};
use caldera_e2e::{run_scenario, Cluster, Target};
use caldera_sim::manifest::Object;
use caldera_sim::scenario::Step;
use caldera_sim::Scenario;
use libtest_mimic::{Completion, Failed, Trial};

/// `scenario::<file name without .yaml, / and - as _>`.
fn trial_name(file: &str) -> String {
    let stem = file.trim_end_matches(".yaml").replace(['/', '-'], "_");
    format!("scenario::{stem}")
}

/// Why a scenario cannot run on a real API server, if it cannot: a container without an
/// image is refused by its validation (the simulator's own scenarios leave images out).
fn unfit_for_real_server(scenario: &Scenario) -> Option<String> {
    for step in &scenario.steps {
        let Step::Apply(objects) = step else { continue };
        for o in objects {
            let Object::Pod(pod) = o else { continue };
            let spec = pod.spec.as_ref();
            let containers = spec
                .map(|s| {
                    s.containers
                        .iter()
                        .chain(s.init_containers.iter().flatten())
                })
                .into_iter()
                .flatten();
            for c in containers {
                if c.image.as_deref().is_none_or(str::is_empty) {
                    return Some(format!(
                        "{}: container {} has no image, which a real API server refuses",
                        o.describe(),
                        c.name
                    ));
                }
            }
        }
    }
    None
}

/// The most wall-clock time a scenario's `run` steps may add up to live. Live runs take real
/// time (periods and timeouts are not shortened); a scenario that runs hours of the
/// simulator's virtual clock (usage decaying over a half-life) is checked by the simulator
/// only (`cargo test -p caldera-plugins --test scenarios`, `caldera simulate`).
const LIVE_RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Why a scenario is not run live, if its `run` steps add up to more than [`LIVE_RUN_LIMIT`].
fn too_long_live(scenario: &Scenario) -> Option<String> {
    let total: std::time::Duration = scenario
        .steps
        .iter()
        .map(|step| match step {
            Step::Run(d, _) => *d,
            _ => std::time::Duration::ZERO,
        })
        .sum();
    (total > LIVE_RUN_LIMIT).then(|| {
        format!(
            "its run steps take {} s of the virtual clock, more than the {} s a live run may take; the simulator checks it",
            total.as_secs(),
            LIVE_RUN_LIMIT.as_secs()
        )
    })
}

/// Scenarios that pass in the simulator but race live, with the known cause. Each is a bug
/// to fix, not an expectation to relax; the simulator still runs them in `cargo test`.
const KNOWN_LIVE_RACES: &[(&str, &str)] = &[];

async fn run_one(target: Target, file: String) -> Result<Completion, Failed> {
    if let Some((_, why)) = KNOWN_LIVE_RACES.iter().find(|(f, _)| file.ends_with(f)) {
        return Ok(Completion::ignored_with(*why));
    }
    let scenario = load(&file)?;
    if let Some(why) = too_long_live(&scenario) {
        return Ok(Completion::ignored_with(why));
    }
    if target.is_real() {
        if let Some(why) = unfit_for_real_server(&scenario) {
            return Ok(Completion::ignored_with(why));
        }
    }
    let mut cluster = Cluster::connect(&target).await.map_err(Failed::from)?;
    let outcome = run_scenario(&mut cluster, scenario)
        .await
        .map_err(|e| Failed::from(format!("{file}: {e}")))?;
    if !outcome.passed() {
        return Err(Failed::from(format!("\n{outcome}")));
    }
    if let Some(server) = cluster.stand_in_server() {
        // Under the shipped RBAC, nothing the scheduler asked for was refused.
        let refused = server.forbidden();
        if !refused.is_empty() {
            return Err(Failed::from(format!(
                "{file}: the shipped RBAC refused {} request(s) of the scheduler: {:?}",
                refused.len(),
                refused.iter().take(5).collect::<Vec<_>>()
            )));
        }
        // The run cleaned up after itself: nothing of it is left, events included.
        let store = server.store();
        for resource in [
            "pods",
            "nodes",
            "podgroups",
            "queues",
            "events.events.k8s.io",
            "resourceclaims",
            "resourceclaimtemplates",
            "resourceslices",
            "deviceclasses",
        ] {
            let left = store.count(resource);
            if left > 0 {
                return Err(Failed::from(format!(
                    "{left} {resource} left after the run: {:?}",
                    store.list(resource)
                )));
            }
        }
    }
    Ok(Completion::Completed)
}

/// The trials (a failing one if no scenario file is found, so a moved directory cannot
/// pass as an empty suite).
pub fn trials(target: &Target) -> Vec<Trial> {
    let files = scenario_files();
    if files.is_empty() {
        let dir = crate::support::scenarios_dir();
        return vec![Trial::test("scenario::files_found", move || {
            Err(Failed::from(format!(
                "no *.yaml scenario under {}",
                dir.display()
            )))
        })];
    }
    files
        .into_iter()
        .map(|file| {
            let target = target.clone();
            Trial::ignorable_test(trial_name(&file), move || {
                let mut completion = Completion::Completed;
                block_on(async {
                    completion = run_one(target, file).await?;
                    Ok(())
                })?;
                Ok(completion)
            })
        })
        .collect()
}
