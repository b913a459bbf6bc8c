# syntax=docker/dockerfile:1
# The Caldera scheduler image: `docker build -t caldera:0.1.0 .` from the repository root.

# Build stage: the release binary, with exactly the dependency versions in Cargo.lock.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p caldera

# Runtime stage: glibc and libgcc, no shell, no package manager, user nonroot (65532).
# Caldera writes nothing to disk, so the root filesystem can be read-only.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/caldera /caldera
# Numeric, so that Kubernetes can check `runAsNonRoot` against the image.
USER 65532:65532
# /metrics, /healthz, /readyz
EXPOSE 8080
ENTRYPOINT ["/caldera", "run"]
