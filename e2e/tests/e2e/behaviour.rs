//! Scenario-level behaviour tests.
use caldera_e2e::Target;
use libtest_mimic::Trial;

/// The trials.
pub fn trials(_target: &Target) -> Vec<Trial> {
    Vec::new()
}
