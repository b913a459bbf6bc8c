//! Test-only crate: its tests (in `tests/shipping/`) check offline that the Dockerfile, the `deploy/` manifests and RBAC, the `examples/` and the docs agree with the code.
