//! The end-to-end suite: every scenario in `scenarios/` through the live driver with the
//! scheduler in-process, and the scenario-level behaviour tests (leader failover, restart in
//! the middle of a gang's binds, config reload, a malformed PodGroup, steady-state writes,
//! what a user sees), and the scheduler under the shipped RBAC with a rule missing.
//!
//! It has its own `main` (libtest-mimic, same command-line as libtest) so that trials run
//! concurrently however many cores there are: each trial on the stand-in has its own API
//! server and scheduler, an independent "cluster", and most of a trial's time is the wall
//! clock of its scenario's `run` steps. Against a real cluster (`CALDERA_E2E_KUBECONFIG`),
//! trials share the cluster and run one at a time, whatever `--test-threads` says.

mod behaviour;
mod rbac;
mod scenarios;
mod support;

use caldera_e2e::Target;
use libtest_mimic::Arguments;
use std::process::ExitCode;

/// Trials at once on the stand-in: all of them (about twenty).
const STAND_IN_THREADS: usize = 32;

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    let target = Target::from_env();
    if target.is_real() {
        args.test_threads = Some(1);
    } else if args.test_threads.is_none() {
        args.test_threads = Some(STAND_IN_THREADS);
    }
    let mut trials = scenarios::trials(&target);
    trials.extend(behaviour::trials(&target));
    trials.extend(rbac::trials(&target));
    libtest_mimic::run(&args, trials).exit_code()
}
