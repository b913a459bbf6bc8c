//! Offline checks of what Caldera ships: Dockerfile, deploy/ (RBAC against ARCHITECTURE.md), the
//! Helm chart against deploy/, examples/ and docs/. No cluster and no Docker needed (the chart's
//! renderings need helm: scripts/helm.sh).
//!
//! `CALDERA_BLESS=1 cargo test -p caldera-shipping` rewrites the copies in deploy/
//! (`crds.yaml`, the config in `configmap.yaml`) from crds/ and config/, the Helm chart's copies
//! (CRDs, default config, RBAC rules, admission policy) from them and deploy/, and the chart's
//! golden renderings in tests/golden/ (chart.rs).

mod architecture;
mod chart;
mod circles;
mod deploy;
mod dockerfile;
mod docs;
mod examples;
mod gate;
mod manifests;
mod rbac;
