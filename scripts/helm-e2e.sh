#!/usr/bin/env bash
# The Helm chart on a real cluster (docs/install.md, "Checking the chart on a real cluster"):
# `helm install` into a fresh namespace, every object there, `caldera run` out of cluster with a
# token of the chart's ServiceAccount scheduling a small gang workload with zero `forbidden`
# answers, `helm upgrade` with a changed config reloaded by the running scheduler, and
# `helm uninstall` keeping the CRDs, PodGroups and Queues.
#
#   KUBECONFIG=admin.kubeconfig scripts/helm-e2e.sh [all|install|uninstall|gate]
#
#   all        (default) the whole check above, cleaning up after itself
#   install    install and check, then print the ServiceAccount's kubeconfig and the command
#              to run `caldera run` with it; leaves the release installed
#   uninstall  uninstall what `install` left, check what stays, clean up
#   gate       the same install/uninstall check with gateMode.enabled (the admission policy
#              accepted by the API server; the gate ClusterRole grants no pods/binding)
#   cleanup    after a failure: uninstall the release if it is there, remove what this made
#
# The cluster: a kube-apiserver (1.36 for gate mode's MutatingAdmissionPolicy v1) with
# kube-controller-manager, no kubelet needed (the workload runs on two Node objects this script
# makes, tainted so that only its pods go there, removed afterwards), and nothing else
# scheduling `caldera` pods while it runs. The
# kubeconfig's identity must be a cluster admin. Environment:
#
#   RELEASE       release name (caldera-helm-e2e); also the name of every object, so nothing
#                 clashes with what `kubectl apply -k deploy/` makes (ClusterRole `caldera`, ...)
#   NAMESPACE     the release namespace (caldera-helm-e2e); must not exist
#   CALDERA_BIN   the caldera binary (target/debug/caldera, built with cargo if missing)
#   METRICS_ADDR  where `caldera run` serves /readyz (127.0.0.1:18080)
#   WORK          where the kubeconfig, config file and log go (a new temporary directory)
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-all}"
RELEASE="${RELEASE:-caldera-helm-e2e}"
NAMESPACE="${NAMESPACE:-caldera-helm-e2e}"
WORKLOADS="$NAMESPACE-work"
METRICS_ADDR="${METRICS_ADDR:-127.0.0.1:18080}"
WORK="${WORK:-$(mktemp -d -t caldera-helm-e2e.XXXXXX)}"
mkdir -p "$WORK"
# The chart's name for every object (templates/_helpers.tpl, caldera.fullname).
if [[ "$RELEASE" == *caldera* ]]; then FULLNAME="$RELEASE"; else FULLNAME="$RELEASE-caldera"; fi
NODES=(helm-e2e-node-1 helm-e2e-node-2)
STATE="$WORK/state"   # what `install` found, for `uninstall`
caldera_pid=""

say() { printf '== %s\n' "$*"; }
ok() { printf 'ok: %s\n' "$*"; }
fail() {
  printf 'FAIL: %s\n' "$*" >&2
  printf '(files in %s; WORK=%s %s cleanup removes what is left)\n' "$WORK" "$WORK" "$0" >&2
  exit 1
}
stop_caldera() {
  if [[ -n "$caldera_pid" ]] && kill -0 "$caldera_pid" 2>/dev/null; then
    kill "$caldera_pid"
    wait "$caldera_pid" 2>/dev/null || true
  fi
  caldera_pid=""
}
trap stop_caldera EXIT

# Waits up to $1 seconds for the command after it to succeed.
wait_for() {
  local seconds="$1"
  shift
  for _ in $(seq "$seconds"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  "$@"
}

[[ -n "${KUBECONFIG:-}" ]] || fail "set KUBECONFIG to an admin kubeconfig of the cluster"
for tool in kubectl curl; do
  command -v "$tool" >/dev/null || fail "$tool is not installed"
done
HELM="$(./scripts/helm.sh)" || fail "no helm (scripts/helm.sh)"
kubectl version >/dev/null || fail "cannot reach the cluster of $KUBECONFIG"
say "helm $("$HELM" version --short), release $RELEASE in $NAMESPACE, files in $WORK"

install() {
  local values=("$@")
  kubectl get namespace "$NAMESPACE" >/dev/null 2>&1 &&
    fail "namespace $NAMESPACE exists: not a fresh install (delete it, or set NAMESPACE)"
  : >"$STATE"
  for crd in podgroups.scheduling.volcano.sh queues.scheduling.volcano.sh hypernodes.topology.volcano.sh; do
    kubectl get crd "$crd" >/dev/null 2>&1 && echo "crd $crd" >>"$STATE"
  done
  # A Queue `default` made by someone else (Volcano, deploy/) cannot be taken over by the release.
  if kubectl get queues.scheduling.volcano.sh default >/dev/null 2>&1; then
    echo "queue default" >>"$STATE"
    values+=(--set defaultQueue.create=false)
    say "the Queue default exists already: defaultQueue.create=false"
  fi

  say "helm install"
  "$HELM" install "$RELEASE" charts/caldera --namespace "$NAMESPACE" --create-namespace \
    "${values[@]}"
  "$HELM" get manifest "$RELEASE" --namespace "$NAMESPACE" >"$WORK/manifest.yaml"

  say "every object of the release exists"
  kubectl get -f "$WORK/manifest.yaml" -o name | tee "$WORK/objects.txt"
  [[ -s "$WORK/objects.txt" ]] || fail "the release has no objects"
  for crd in podgroups.scheduling.volcano.sh queues.scheduling.volcano.sh hypernodes.topology.volcano.sh; do
    kubectl wait --for condition=Established "crd/$crd" --timeout=60s >/dev/null ||
      fail "CRD $crd is not established"
  done
  ok "$(wc -l <"$WORK/objects.txt") objects and the CRDs"
}

# A kubeconfig for the chart's ServiceAccount: the admin kubeconfig's cluster, a token of its own.
service_account_kubeconfig() {
  local token
  token="$(kubectl --namespace "$NAMESPACE" create token "$FULLNAME" --duration=2h)" ||
    fail "kubectl create token $FULLNAME"
  kubectl config view --minify --raw >"$WORK/sa.kubeconfig"
  KUBECONFIG="$WORK/sa.kubeconfig" kubectl config set-credentials caldera-sa --token="$token" >/dev/null
  KUBECONFIG="$WORK/sa.kubeconfig" kubectl config set-context --current --user=caldera-sa >/dev/null
  ok "kubeconfig of ServiceAccount $NAMESPACE/$FULLNAME: $WORK/sa.kubeconfig"
}

# `kubectl auth can-i` as the ServiceAccount must answer $1 (yes/no) for the rest.
can_i() {
  local want="$1"
  shift
  local got
  got="$(KUBECONFIG="$WORK/sa.kubeconfig" kubectl auth can-i "$@" 2>/dev/null || true)"
  [[ "$got" == "$want" ]] || fail "can-i $* as the ServiceAccount: $got, expected $want"
  ok "can-i $*: $want"
}

# The ConfigMap's scheduler.yaml into the file `caldera run` reads, replaced in one rename as
# the kubelet does for a mounted ConfigMap.
sync_config() {
  mkdir -p "$WORK/config"
  kubectl --namespace "$NAMESPACE" get configmap "$FULLNAME-config" \
    -o jsonpath='{.data.scheduler\.yaml}' >"$WORK/config/.scheduler.yaml.new"
  mv "$WORK/config/.scheduler.yaml.new" "$WORK/config/scheduler.yaml"
}

make_nodes() {
  local now
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for node in "${NODES[@]}"; do
    kubectl get node "$node" >/dev/null 2>&1 && fail "Node $node exists already"
    kubectl create -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $node
  labels:
    kubernetes.io/hostname: $node
    caldera.sh/helm-e2e: "true"
EOF
    kubectl patch node "$node" --subresource=status --type=merge -p "{\"status\":{
      \"capacity\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\"},
      \"allocatable\":{\"cpu\":\"4\",\"memory\":\"8Gi\",\"pods\":\"110\"},
      \"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",
        \"message\":\"a Node object of scripts/helm-e2e.sh, no kubelet\",
        \"lastHeartbeatTime\":\"$now\",\"lastTransitionTime\":\"$now\"}]}}" >/dev/null
    # Admission taints a new Node not-ready until a node controller sees it Ready. The taint of
    # our own keeps other pods away (the chart's Deployment, if kube-scheduler runs): only the
    # check's pods tolerate it.
    kubectl taint node "$node" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
    kubectl taint node "$node" caldera.sh/helm-e2e=true:NoSchedule >/dev/null
  done
  ok "Nodes ${NODES[*]} (4 CPUs each, Ready, no kubelet)"
}

# Pods of a gang: gang NAME MIN COUNT CPU [SCHEDULER]
gang() {
  local name="$1" min="$2" count="$3" cpu="$4" scheduler="${5:-caldera}"
  if [[ "$min" -gt 0 ]]; then
    kubectl --namespace "$WORKLOADS" create -f - >/dev/null <<EOF
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  name: $name
spec:
  minMember: $min
  queue: default
EOF
  fi
  for i in $(seq 0 $((count - 1))); do
    local group=""
    [[ "$min" -gt 0 ]] && group="  annotations: {scheduling.k8s.io/group-name: $name}"
    kubectl --namespace "$WORKLOADS" create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name-$i
$group
spec:
  schedulerName: $scheduler
  automountServiceAccountToken: false
  tolerations:
  - {key: caldera.sh/helm-e2e, operator: Exists, effect: NoSchedule}
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
    resources:
      requests: {cpu: "$cpu", memory: 100Mi}
EOF
  done
}

bound() {
  kubectl --namespace "$WORKLOADS" get pods -o jsonpath='{range .items[*]}{.metadata.name}={.spec.nodeName}{"\n"}{end}' |
    grep -c "^$1-[0-9]*=..*" || true
}

all_bound() { [[ "$(bound "$1")" -eq "$2" ]]; }

unschedulable_condition() {
  kubectl --namespace "$WORKLOADS" get podgroups.scheduling.volcano.sh "$1" \
    -o jsonpath='{.status.conditions[?(@.type=="Unschedulable")].status}' | grep -q True
}

start_caldera() {
  local bin="${CALDERA_BIN:-${CARGO_TARGET_DIR:-target}/debug/caldera}"
  if [[ ! -x "$bin" ]]; then
    say "building caldera (cargo build -p caldera)"
    cargo build -p caldera
  fi
  sync_config
  say "caldera run with the ServiceAccount's token"
  "$bin" run --kubeconfig "$WORK/sa.kubeconfig" --config "$WORK/config/scheduler.yaml" \
    --lease-namespace "$NAMESPACE" --metrics-addr "$METRICS_ADDR" >"$WORK/caldera.log" 2>&1 &
  caldera_pid=$!
  wait_for 120 curl -sf "http://$METRICS_ADDR/readyz" || {
    tail -20 "$WORK/caldera.log" >&2
    fail "caldera run is not ready after 120 s (log: $WORK/caldera.log)"
  }
  ok "caldera run is ready (leader on Lease $NAMESPACE/caldera; log: $WORK/caldera.log)"
}

no_forbidden() {
  local count
  count="$(grep -ci forbidden "$WORK/caldera.log" || true)"
  [[ "$count" -eq 0 ]] || {
    grep -i forbidden "$WORK/caldera.log" | head -5 >&2
    fail "$count forbidden answers in $WORK/caldera.log"
  }
  ok "zero forbidden answers in the scheduler's log"
}

smoke_and_reload() {
  kubectl create namespace "$WORKLOADS" >/dev/null
  kubectl --namespace "$WORKLOADS" create serviceaccount default >/dev/null 2>&1 || true
  make_nodes
  start_caldera

  say "a gang that fits binds whole; one that cannot binds nothing and says why"
  gang fits 3 3 1
  gang too-big 3 3 3
  wait_for 60 all_bound fits 3 || fail "gang fits: $(bound fits) of 3 pods bound"
  ok "gang fits: 3 of 3 bound"
  wait_for 60 unschedulable_condition too-big || fail "PodGroup too-big has no Unschedulable condition"
  [[ "$(bound too-big)" -eq 0 ]] || fail "gang too-big is bound in part: $(bound too-big) pods"
  ok "gang too-big: none bound, PodGroup Unschedulable"

  say "helm upgrade with a changed config: the running scheduler reloads it"
  gang after-reload 0 1 100m helm-e2e-upgraded
  sleep 5
  [[ "$(bound after-reload)" -eq 0 ]] || fail "a pod of scheduler helm-e2e-upgraded was bound before the upgrade"
  local generation
  generation="$(kubectl --namespace "$NAMESPACE" get deployment "$FULLNAME" -o jsonpath='{.metadata.generation}')"
  "$HELM" upgrade "$RELEASE" charts/caldera --namespace "$NAMESPACE" --reuse-values \
    --set-json 'config.schedulerNames=["caldera","volcano","helm-e2e-upgraded"]'
  kubectl --namespace "$NAMESPACE" get configmap "$FULLNAME-config" -o jsonpath='{.data.scheduler\.yaml}' |
    grep -q helm-e2e-upgraded || fail "the ConfigMap did not change"
  [[ "$(kubectl --namespace "$NAMESPACE" get deployment "$FULLNAME" -o jsonpath='{.metadata.generation}')" == "$generation" ]] ||
    fail "helm upgrade of the config changed the Deployment (it should reload, not restart)"
  ok "ConfigMap changed, Deployment untouched"
  sync_config
  wait_for 30 grep -q "config reloaded" "$WORK/caldera.log" || fail "no 'config reloaded' in the log"
  wait_for 30 all_bound after-reload 1 || fail "the pod of scheduler helm-e2e-upgraded is not bound after the reload"
  ok "config reloaded; the pod of the new schedulerName is bound"

  no_forbidden
  stop_caldera
}

left() { kubectl get -f "$WORK/manifest.yaml" --ignore-not-found -o name; }
only_left() { [[ "$(left)" == "$1" ]]; }

uninstall() {
  local queues_before podgroups_before expected
  queues_before="$(kubectl get queues.scheduling.volcano.sh -o name | sort)"
  podgroups_before="$(kubectl get podgroups.scheduling.volcano.sh -A -o name | sort)"
  "$HELM" get manifest "$RELEASE" --namespace "$NAMESPACE" >"$WORK/manifest.yaml"
  say "helm uninstall"
  "$HELM" uninstall "$RELEASE" --namespace "$NAMESPACE"
  # What stays: the Queue default if the chart made it (resource-policy keep).
  expected=""
  grep -qx "queue default" "$STATE" || expected="queue.scheduling.volcano.sh/default"
  wait_for 60 only_left "$expected" || fail "left after helm uninstall: $(left), expected '$expected'"
  ok "every object of the release is gone${expected:+, but the Queue default (resource-policy keep)}"
  for crd in podgroups.scheduling.volcano.sh queues.scheduling.volcano.sh hypernodes.topology.volcano.sh; do
    kubectl get crd "$crd" >/dev/null || fail "CRD $crd was deleted"
  done
  [[ "$(kubectl get queues.scheduling.volcano.sh -o name | sort)" == "$queues_before" ]] || fail "Queues changed"
  [[ "$(kubectl get podgroups.scheduling.volcano.sh -A -o name | sort)" == "$podgroups_before" ]] || fail "PodGroups changed"
  ok "CRDs, $(wc -w <<<"$queues_before") Queues and $(wc -w <<<"$podgroups_before") PodGroups kept"
}

cleanup() {
  say "cleaning up"
  # No kubelet finishes a graceful delete: pods go at once.
  for ns in "$WORKLOADS" "$NAMESPACE"; do
    if kubectl get namespace "$ns" >/dev/null 2>&1; then
      kubectl --namespace "$ns" delete pods --all --grace-period=0 --force >/dev/null 2>&1 || true
    fi
  done
  kubectl delete namespace "$WORKLOADS" --ignore-not-found --wait=false >/dev/null
  for node in "${NODES[@]}"; do kubectl delete node "$node" --ignore-not-found >/dev/null; done
  # The Lease `caldera` stays in the namespace (the scheduler made it): it goes with it.
  kubectl delete namespace "$NAMESPACE" --ignore-not-found --wait=false >/dev/null
  # Gone before the next check starts (`install` wants a fresh namespace of this name).
  for ns in "$WORKLOADS" "$NAMESPACE"; do
    kubectl wait --for=delete "namespace/$ns" --timeout=120s >/dev/null 2>&1 ||
      echo "note: namespace $ns is still terminating"
  done
  if ! grep -qx "queue default" "$STATE"; then
    kubectl delete queues.scheduling.volcano.sh default --ignore-not-found >/dev/null
  fi
  for crd in podgroups.scheduling.volcano.sh queues.scheduling.volcano.sh hypernodes.topology.volcano.sh; do
    grep -qx "crd $crd" "$STATE" || echo "note: CRD $crd was installed by the chart and stays"
  done
  ok "removed the namespaces, Nodes and Queue this check made"
}

case "$mode" in
  all)
    install
    service_account_kubeconfig
    can_i yes create pods --subresource=binding --all-namespaces
    can_i no create pods --all-namespaces
    smoke_and_reload
    uninstall
    cleanup
    say "PASS"
    ;;
  install)
    install
    service_account_kubeconfig
    can_i yes create pods --subresource=binding --all-namespaces
    sync_config
    cat <<EOF

The release is installed. Run the scheduler as its ServiceAccount with:

  ${CALDERA_BIN:-target/debug/caldera} run --kubeconfig $WORK/sa.kubeconfig \\
    --lease-namespace $NAMESPACE --config $WORK/config/scheduler.yaml

(the token lasts 2 hours; the config file is the chart's ConfigMap), then finish with:

  WORK=$WORK KUBECONFIG=$KUBECONFIG $0 uninstall
EOF
    ;;
  uninstall)
    [[ -f "$STATE" ]] || fail "no $STATE: run with the WORK of the install"
    uninstall
    cleanup
    say "PASS"
    ;;
  gate)
    install --set gateMode.enabled=true
    kubectl get mutatingadmissionpolicy "$FULLNAME-gang-gate" >/dev/null ||
      fail "no MutatingAdmissionPolicy $FULLNAME-gang-gate"
    service_account_kubeconfig
    can_i no create pods --subresource=binding --all-namespaces
    can_i yes patch pods --all-namespaces
    can_i yes update leases.coordination.k8s.io/caldera-gate --namespace "$NAMESPACE"
    uninstall
    cleanup
    say "PASS"
    ;;
  cleanup)
    [[ -f "$STATE" ]] || fail "no $STATE: run with the WORK of the failed run"
    "$HELM" uninstall "$RELEASE" --namespace "$NAMESPACE" 2>/dev/null || true
    cleanup
    ;;
  *)
    fail "unknown mode $mode (all, install, uninstall, gate, cleanup)"
    ;;
esac
