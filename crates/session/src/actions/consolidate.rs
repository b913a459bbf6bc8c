//! consolidate: move pods their controllers re-create so a fragmented gang can run (see
//! [`crate::consolidate`]).

use super::Action;
use crate::session::Session;
use caldera_config::ConsolidateConfig;

/// The consolidate action, with its arguments.
#[derive(Debug, Default)]
pub struct Consolidate {
    config: ConsolidateConfig,
}

impl Consolidate {
    /// The action with `config`'s arguments.
    pub fn new(config: ConsolidateConfig) -> Self {
        Consolidate { config }
    }
}

impl Action for Consolidate {
    fn name(&self) -> &'static str {
        "consolidate"
    }

    fn execute(&self, ssn: &mut Session) {
        crate::consolidate::run(ssn, &self.config);
    }
}
