#!/usr/bin/env bash
# End-to-end test on kind (needs Docker, kind, helm, kubectl; run by `make e2e` and GitHub Actions):
#   1. a 3-node kind cluster (ci/kind/cluster.yaml);
#   2. the CPU trainer image built from this checkout and `kind load`ed, plus the operator's images;
#   3. charts/training-operator installed into a Pod Security "restricted" namespace; wait until its
#      webhook has a CA bundle and answers;
#   4. the webhook rejects a PyTorchJob with two Masters (the operator's rule);
#   5. charts/pytorchjob-mnist installed with the local image, also under "restricted"; the PyTorchJob
#      must reach Succeeded, its Master must log the world size the spec asks for (so no pod trained
#      alone), and `helm test` checks the model and metrics on the volume;
#   6. a second release without a volume whose pods must run on different nodes, so DDP crosses them;
#   7. all releases uninstalled: nothing labelled with their release is left but what the charts keep
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
# The chart names the PyTorchJob after the release.
workload_release=mnist
workload_namespace=mnist
two_nodes_values="$repo/ci/kind/two-nodes-values.yaml"
two_nodes_release=mnist-two-nodes
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
  kubectl logs -n "$workload_namespace" -l training.kubeflow.org/job-name --all-containers --prefix --tail=100 || true
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
  local pods
  pods=$(kubectl get pods -n "$1" -l "$2" -o name) || return 1
  [[ -z "$pods" ]]
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
# fail if anything but KEPT (what the chart keeps on purpose; may be empty) is left, then delete KEPT.
uninstall_leaving_only() {
  local left
  helm uninstall "$1" -n "$2" --wait --timeout 5m
  wait_until 120 "the pods of $1 to go" no_pods "$2" "$3"
  left=$(leftovers "$1" "$2")
  if [[ "$left" != "$4" ]]; then
    printf 'unexpected leftovers of %s:\n%s\n' "$1" "$left" >&2
    exit 1
  fi
  if [[ -n "$left" ]]; then kubectl delete -n "$2" "$left" --wait; fi
}

# job_field JOB JSONPATH: a field of the PyTorchJob JOB in the workload namespace.
job_field() {
  kubectl get pytorchjob "$1" -n "$workload_namespace" -o jsonpath="$2"
}

# Pod states a retry never leaves (unlike ErrImagePull, which a registry's rate limit can cause).
unstartable='ErrImageNeverPull|InvalidImageName|CreateContainerConfigError|CreateContainerError'
# One line per pod: its name and why its init and main containers are waiting.
waiting_reasons='{range .items[*]}{.metadata.name}: {.status.initContainerStatuses[*].state.waiting.reason} {.status.containerStatuses[*].state.waiting.reason}{"\n"}{end}'

# wait_for_job JOB: until the PyTorchJob succeeds; fail as soon as it fails or a pod cannot start.
wait_for_job() {
  local deadline=$((SECONDS + job_timeout)) stuck
  until [[ "$(job_field "$1" '{.status.conditions[?(@.type=="Succeeded")].status}')" == True ]]; do
    if [[ "$(job_field "$1" '{.status.conditions[?(@.type=="Failed")].status}')" == True ]]; then
      echo "PyTorchJob $1 failed" >&2
      return 1
    fi
    stuck=$(kubectl get pods -n "$workload_namespace" -l "training.kubeflow.org/job-name=$1" -o jsonpath="$waiting_reasons")
    if grep -E "$unstartable" <<<"$stuck" >&2; then
      echo "pods of PyTorchJob $1 cannot start" >&2
      return 1
    fi
    if ((SECONDS >= deadline)); then echo "PyTorchJob $1 did not succeed within ${job_timeout}s" >&2; return 1; fi
    kubectl get pytorchjob "$1" -n "$workload_namespace" --no-headers || true
    sleep 15
  done
  # Same check, in kubectl's words (returns at once now).
  kubectl wait "pytorchjob/$1" -n "$workload_namespace" --for=condition=Succeeded --timeout=10s
}

# check_master_log JOB: the Master (rank 0) reported its evaluation, in a process group of every
# process the spec asks for (pods × nprocPerNode). A pod that lost the operator's environment would
# train alone as world size 1 and still succeed.
check_master_log() {
  local masters workers nproc world log
  masters=$(job_field "$1" '{.spec.pytorchReplicaSpecs.Master.replicas}')
  workers=$(job_field "$1" '{.spec.pytorchReplicaSpecs.Worker.replicas}')
  nproc=$(job_field "$1" '{.spec.nprocPerNode}')
  world=$((masters + ${workers:-0}))
  if [[ "$nproc" =~ ^[0-9]+$ ]]; then world=$((world * nproc)); fi
  log=$(kubectl logs "$1-master-0" -n "$workload_namespace" -c pytorch)
  grep -E "^World Size: $world\. Rank: 0\." <<<"$log" || { echo "$1-master-0 did not train in a world of $world" >&2; return 1; }
  grep -E '^epoch=[0-9]+ accuracy=[0-9.]+ val_loss=[0-9.]+$' <<<"$log"
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
operator_images=$(chart_images "$operator_release" "$operator_chart" -n "$operator_namespace" -f "$operator_values")
[[ -n "$operator_images" ]] || { echo "found no images in the rendered training-operator chart" >&2; exit 1; }
while read -r operator_image; do
  docker pull --quiet "$operator_image"
  # `kind load` can trip over multi-platform images in Docker's containerd image store; the nodes can
  # still pull them (IfNotPresent), so a failed preload only costs time.
  kind load docker-image "$operator_image" --name "$cluster" ||
    echo "warning: could not preload $operator_image; the nodes will pull it" >&2
done <<<"$operator_images"

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

local_image=(--set "image.repository=${image%:*}" --set "image.tag=${image##*:}" --set image.pullPolicy=Never)

step "install pytorchjob-mnist with the local image"
helm install "$workload_release" "$workload_chart" -n "$workload_namespace" -f "$workload_values" "${local_image[@]}"
wait_for_job "$workload_release"
check_master_log "$workload_release"
kubectl get pods -n "$workload_namespace" -l "training.kubeflow.org/job-name=$workload_release" -o wide

step "helm test"
# No --logs: Helm 3 deletes a passed test's pod before reading its logs (helm/helm#9098) and then
# fails; a failed test's pod is kept and its log printed here.
helm test "$workload_release" -n "$workload_namespace" --timeout 10m \
  || { kubectl logs "$workload_release-check-run" -n "$workload_namespace" || true; exit 1; }

step "a job across two nodes (no volume, so no single-node affinity)"
helm install "$two_nodes_release" "$workload_chart" -n "$workload_namespace" -f "$workload_values" \
  -f "$two_nodes_values" "${local_image[@]}"
wait_for_job "$two_nodes_release"
check_master_log "$two_nodes_release"
kubectl get pods -n "$workload_namespace" -l "training.kubeflow.org/job-name=$two_nodes_release" -o wide
nodes=$(kubectl get pods -n "$workload_namespace" -l "training.kubeflow.org/job-name=$two_nodes_release" \
  -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | wc -l)
((nodes == 2)) || { echo "the pods of $two_nodes_release ran on $nodes node(s), not 2" >&2; exit 1; }

step "uninstall and check for leftovers"
# persistence.keep (default true) keeps the claim with the trained model; nothing else may remain.
uninstall_leaving_only "$workload_release" "$workload_namespace" "training.kubeflow.org/job-name=$workload_release" \
  "persistentvolumeclaim/$workload_release-storage"
uninstall_leaving_only "$two_nodes_release" "$workload_namespace" "training.kubeflow.org/job-name=$two_nodes_release" ""
# crds.keep keeps the CRD, so uninstalling the operator never deletes users' jobs; then delete it here.
uninstall_leaving_only "$operator_release" "$operator_namespace" "app.kubernetes.io/instance=$operator_release" \
  "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org"
kubectl delete namespace "$workload_namespace" "$operator_namespace" --wait --timeout 2m

step "e2e passed"
