//! Offline checks of what Caldera ships: Dockerfile, deploy/ (RBAC against ARCHITECTURE.md),
//! examples/ and docs/. No cluster and no Docker needed.
//!
//! `CALDERA_BLESS=1 cargo test -p caldera-shipping` rewrites the copies in deploy/
//! (`crds.yaml`, the config in `configmap.yaml`) from crds/ and config/.

mod architecture;
mod chart;
mod deploy;
mod dockerfile;
mod docs;
mod examples;
mod gate;
mod manifests;
mod rbac;
