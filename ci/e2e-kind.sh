#!/usr/bin/env bash
# End-to-end test on kind (needs Docker, kind, helm, kubectl; run by `make e2e` and GitHub Actions):
#   1. a 3-node kind cluster (ci/kind/cluster.yaml);
#   2. the CPU trainer image built from this checkout and `kind load`ed, plus the operator's images;
#   3. charts/training-operator installed into a Pod Security "restricted" namespace; wait until its
#      webhook has a CA bundle and answers;
#   4. the webhook rejects a PyTorchJob with two Masters (the operator's rule);
#   5. charts/pytorchjob-mnist installed with the local image, also under "restricted"; the PyTorchJob
#      must reach Succeeded; `helm test` checks the model and metrics on the volume;
#   6. both releases uninstalled: nothing labelled with their release is left but what the charts keep
#      on purpose (the PyTorchJob CRD, the training volume), which is then removed by hand.
#
# Environment: KIND_CLUSTER (default pytorchjob-mnist-e2e), KIND_NODE_IMAGE (kind's default),
# KEEP_CLUSTER=1 (don't delete the cluster), SKIP_BUILD=1 (reuse E2E_IMAGE), JOB_TIMEOUT (seconds, 900),
# HELM / KUBECTL (default: .tools/bin from `make tools`, else PATH).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools_bin="${TOOLS_BIN:-$repo/.tools/bin}"
cluster="${KIND_CLUSTER:-pytorchjob-mnist-e2e}"
image="${E2E_IMAGE:-localhost/pytorchjob-mnist/trainer:e2e-cpu}"
job_timeout="${JOB_TIMEOUT:-900}"
operator_chart="$repo/charts/training-operator"
operator_values="$operator_chart/ci/kind-values.yaml"
operator_release=training-operator
operator_namespace=kubeflow
workload_chart="$repo/charts/pytorchjob-mnist"
workload_values="$workload_chart/ci/cpu-gloo-values.yaml"
workload_release=mnist
workload_namespace=mnist
job="$workload_release"  # the chart names the PyTorchJob after the release
webhook_configuration=validator.training-operator.kubeflow.org

first_tool() {
  local candidate
  for candidate in "$@"; do
    if [[ -x "$tools_bin/$candidate" ]]; then echo "$tools_bin/$candidate"; return; fi
    if command -v "$candidate" >/dev/null; then command -v "$candidate"; return; fi
  done
  echo "none of [$*] found: run \`make tools\` or install it" >&2
  return 1
}
HELM="${HELM:-$(first_tool helm4 helm3 helm)}"
KUBECTL="${KUBECTL:-$(first_tool kubectl)}"
command -v kind >/dev/null || { echo "kind is not installed: https://kind.sigs.k8s.io/docs/user/quick-start/" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "docker does not answer: kind needs a running Docker engine" >&2; exit 2; }

step() { printf '\n==> %s\n' "$*"; }
kubectl() { "$KUBECTL" --context "kind-$cluster" "$@"; }
helm() { "$HELM" --kube-context "kind-$cluster" "$@"; }

# wait_until SECONDS DESCRIPTION COMMAND...: retry COMMAND every 5 s.
wait_until() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then echo "timed out waiting for $what" >&2; return 1; fi
    sleep 5
  done
}

diagnostics() {
  step "diagnostics"
  kubectl get nodes -o wide || true
  kubectl get pods,services,pvc -A -o wide || true
  kubectl get pytorchjobs -A -o yaml || true
  kubectl get events -A --sort-by=.lastTimestamp | tail -n 60 || true
  kubectl logs -n "$operator_namespace" -l "app.kubernetes.io/instance=$operator_release" --tail=200 || true
  kubectl logs -n "$workload_namespace" -l "training.kubeflow.org/job-name=$job" --all-containers --prefix --tail=100 || true
}

finish() {
  local status=$?
  if ((status != 0)); then diagnostics; fi
  if [[ "${KEEP_CLUSTER:-0}" == 1 ]]; then
    echo "cluster kept: kind delete cluster --name $cluster"
  else
    kind delete cluster --name "$cluster" || true
  fi
  exit "$status"
}

restricted_namespace() {
  kubectl create namespace "$1"
  kubectl label namespace "$1" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted
}

# Images a rendered chart runs, including the operator's --pytorch-init-container-image flag (the
# init-container template's own `image: {{.InitContainerImage}}` placeholder is not an image).
chart_images() {
  helm template "$@" | sed -nE \
    -e 's/^[[:space:]]*(- )?image:[[:space:]]*"?([^"[:space:]]+)"?[[:space:]]*$/\2/p' \
    -e 's/.*--pytorch-init-container-image=([^"[:space:]]+).*/\1/p' | grep -v '{{' | sort -u
}

# no_pods NAMESPACE SELECTOR: true once no pod matches (kubectl wait fails when nothing matches).
no_pods() {
  [[ -z "$(kubectl get pods -n "$1" -l "$2" -o name)" ]]
}

# leftovers RELEASE NAMESPACE: everything still labelled with the release, cluster-wide and namespaced.
leftovers() {
  local selector="app.kubernetes.io/instance=$1"
  kubectl get clusterroles,clusterrolebindings,validatingwebhookconfigurations,customresourcedefinitions,persistentvolumes \
    -l "$selector" -o name
  kubectl get all,pytorchjobs,pvc,configmaps,secrets,serviceaccounts,roles,rolebindings,leases.coordination.k8s.io \
    -n "$2" -l "$selector" -o name
}

# uninstall_leaving_only RELEASE NAMESPACE POD_SELECTOR KEPT: uninstall, wait for the pods to go,
# fail if anything but KEPT (what the chart keeps on purpose) is left, then delete KEPT.
uninstall_leaving_only() {
  local left
  helm uninstall "$1" -n "$2" --wait --timeout 5m
  wait_until 120 "the pods of $1 to go" no_pods "$2" "$3"
  left=$(leftovers "$1" "$2")
  if [[ "$left" != "$4" ]]; then
    printf 'unexpected leftovers of %s:\n%s\n' "$1" "$left" >&2
    exit 1
  fi
  kubectl delete -n "$2" "$left" --wait
}

job_condition() {
  kubectl get pytorchjob "$job" -n "$workload_namespace" \
    -o jsonpath="{.status.conditions[?(@.type==\"$1\")].status}"
}

step "kind cluster $cluster"
kind create cluster --name "$cluster" --config "$repo/ci/kind/cluster.yaml" --wait 180s \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
trap finish EXIT

step "trainer image $image"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  IMG="$image" VARIANT=cpu CONTAINER_TOOL=docker "$repo/ci/build-image.sh"
fi
kind load docker-image "$image" --name "$cluster"

step "operator images (pulled once, loaded into the nodes)"
while read -r operator_image; do
  docker pull --quiet "$operator_image"
  # `kind load` can trip over multi-platform images in Docker's containerd image store; the nodes can
  # still pull them (IfNotPresent), so a failed preload only costs time.
  kind load docker-image "$operator_image" --name "$cluster" ||
    echo "warning: could not preload $operator_image; the nodes will pull it" >&2
done < <(chart_images "$operator_release" "$operator_chart" -n "$operator_namespace" -f "$operator_values")

step "install the training-operator"
restricted_namespace "$operator_namespace"
# crds.keep=true, the chart's default (kind-values.yaml turns it off for chart-testing's reinstalls):
# the uninstall below checks that the kept CRD is all that remains.
helm install "$operator_release" "$operator_chart" -n "$operator_namespace" --create-namespace \
  -f "$operator_values" --set crds.keep=true --wait --timeout 5m
kubectl get crd pytorchjobs.kubeflow.org -o name
wait_until 120 "the operator to inject the webhook CA bundle" bash -c \
  "[[ -n \$(\"$KUBECTL\" --context kind-$cluster get validatingwebhookconfiguration $webhook_configuration \
     -o jsonpath='{.webhooks[0].clientConfig.caBundle}') ]]"
restricted_namespace "$workload_namespace"
# A server-side dry run goes through the validating webhook: this proves it answers and admits a valid job.
wait_until 120 "the webhook to admit a valid PyTorchJob" bash -c \
  "\"$repo/ci/kind/pytorchjob.sh\" e2e-valid $workload_namespace $image 1 \
   | \"$KUBECTL\" --context kind-$cluster create --dry-run=server -f -"

step "the webhook rejects a PyTorchJob with Master.replicas=2"
if rejection=$("$repo/ci/kind/pytorchjob.sh" e2e-two-masters "$workload_namespace" "$image" 2 \
    | kubectl create --dry-run=server -f - 2>&1); then
  echo "expected the webhook to reject Master.replicas=2, but the API server accepted it" >&2
  exit 1
fi
echo "$rejection"
grep -q 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request' <<<"$rejection" || {
  echo "the rejection did not come from the PyTorchJob webhook" >&2
  exit 1
}

step "install pytorchjob-mnist with the local image"
helm install "$workload_release" "$workload_chart" -n "$workload_namespace" -f "$workload_values" \
  --set "image.repository=${image%:*}" --set "image.tag=${image##*:}" --set image.pullPolicy=Never
deadline=$((SECONDS + job_timeout))
until [[ "$(job_condition Succeeded)" == True ]]; do
  if [[ "$(job_condition Failed)" == True ]]; then echo "PyTorchJob $job failed" >&2; exit 1; fi
  if ((SECONDS >= deadline)); then echo "PyTorchJob $job did not succeed within ${job_timeout}s" >&2; exit 1; fi
  kubectl get pytorchjob "$job" -n "$workload_namespace" --no-headers || true
  sleep 15
done
# Same check, in kubectl's words (returns at once now).
kubectl wait "pytorchjob/$job" -n "$workload_namespace" --for=condition=Succeeded --timeout=10s
master_log=$(kubectl logs "$job-master-0" -n "$workload_namespace" -c pytorch)
grep -E '^epoch=[0-9]+ accuracy=[0-9.]+ val_loss=[0-9.]+$' <<<"$master_log"
kubectl get pods -n "$workload_namespace" -l "training.kubeflow.org/job-name=$job" -o wide

step "helm test"
helm test "$workload_release" -n "$workload_namespace" --logs --timeout 10m

step "uninstall and check for leftovers"
# persistence.keep (default true) keeps the claim with the trained model; nothing else may remain.
uninstall_leaving_only "$workload_release" "$workload_namespace" "training.kubeflow.org/job-name=$job" \
  "persistentvolumeclaim/$workload_release-storage"
# crds.keep keeps the CRD, so uninstalling the operator never deletes users' jobs; then delete it here.
uninstall_leaving_only "$operator_release" "$operator_namespace" "app.kubernetes.io/instance=$operator_release" \
  "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org"
kubectl delete namespace "$workload_namespace" "$operator_namespace" --wait --timeout 2m

step "e2e passed"
