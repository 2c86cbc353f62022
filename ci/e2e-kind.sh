#!/usr/bin/env bash
# End-to-end test on kind (needs Docker, kind, helm, kubectl; run by `make e2e` and GitHub Actions):
#   1. a 3-node kind cluster (ci/kind/cluster.yaml);
#   2. the CPU trainer image built from this checkout and `kind load`ed, plus the operator's images;
#   3. charts/training-operator installed into a Pod Security "restricted" namespace; wait until its
#      webhook has a CA bundle and answers;
#   4. the webhook rejects a PyTorchJob with two Masters (the operator's rule); then the operator is
#      upgraded (its pod restarts) and rolled back, and after each its webhook keeps the certificate
#      the operator made (Helm must not drop what the operator wrote into the Secret and caBundle)
#      and admits a valid job;
#   5. charts/pytorchjob-mnist installed with the local image, also under "restricted"; the PyTorchJob
#      must reach Succeeded, its Master must log the world size the spec asks for (so no pod trained
#      alone), and `helm test` checks the model and metrics on the volume;
#   6. a second release without a volume whose pods must run on different nodes, so DDP crosses them,
#      behind the chart's NetworkPolicy;
#   7. a third release with ci/elastic-cpu-values.yaml (elastic torchrun, 1 Master + 2 Workers), checked
#      like the first: its rank 0 (in whichever pod the rendezvous put it) logs the world size, and
#      `helm test`;
#   8. Kubeflow Trainer v2 (upstream's chart, with JobSet and the torch-distributed runtime) next to
#      it; a release with jobKind TrainJob (examples/trainjob/cpu-values.yaml) must reach Complete, its
#      node 0 must log the world size, and `helm test` checks its model; then one training through the
#      Kubeflow SDK (ci/kind/sdk_train.py);
#   9. all releases uninstalled: nothing labelled with their release is left but what the charts keep
#      on purpose (the PyTorchJob CRD, the training volume), which is then removed by hand; then
#      Trainer v2.
#
# Environment: KIND_CLUSTER (default pytorchjob-mnist-e2e), KIND_NODE_IMAGE (kind's default),
# KEEP_CLUSTER=1 (don't delete the cluster), SKIP_BUILD=1 (reuse E2E_IMAGE), JOB_TIMEOUT (seconds, 900),
# HELM / KUBECTL (default: helm and kubectl in .tools/bin, helm being the Helm ci/install-tools.sh
# prefers; else on PATH), KIND_LOGS_DIR (on failure, the nodes' logs go there: kubelet, containerd,
# the control plane).
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
elastic_values="$workload_chart/ci/elastic-cpu-values.yaml"
elastic_release=mnist-elastic
trainjob_values="$workload_chart/examples/trainjob/cpu-values.yaml"
trainjob_release=mnist-v2
trainjob_namespace=mnist-v2
# Kubeflow Trainer v2 from upstream's chart (it brings JobSet); the chart needs v2.2 or later.
trainer_chart=oci://ghcr.io/kubeflow/charts/kubeflow-trainer
trainer_chart_version=2.3.0
trainer_release=kubeflow-trainer
trainer_namespace=kubeflow-system
# The Kubeflow SDK's run: in a namespace without Pod Security labels, as the SDK's pods are its own.
sdk_namespace=mnist-sdk
sdk_version=0.5.0
webhook_configuration=validator.training-operator.kubeflow.org
webhook_secret=$operator_release-webhook-cert

# find_tool NAME: NAME in $tools_bin, else on PATH.
find_tool() {
  if [[ -x "$tools_bin/$1" ]]; then echo "$tools_bin/$1"; return; fi
  if command -v "$1" >/dev/null; then command -v "$1"; return; fi
  echo "$1 not found: run \`make tools\` or install it" >&2
  return 1
}
HELM="${HELM:-$(find_tool helm)}"
KUBECTL="${KUBECTL:-$(find_tool kubectl)}"
command -v kind >/dev/null || { echo "kind is not installed: https://kind.sigs.k8s.io/docs/user/quick-start/" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "docker does not answer: kind needs a running Docker engine" >&2; exit 2; }

step() { printf '\n==> %s\n' "$*"; }
kubectl() { "$KUBECTL" --context "kind-$cluster" "$@"; }
helm() { "$HELM" --kube-context "kind-$cluster" "$@"; }

# wait_until SECONDS DESCRIPTION COMMAND...: retry COMMAND every 5 s; on timeout, show its last output.
wait_until() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "timed out waiting for $what; the last try said:" >&2
      "$@" >&2 || true
      return 1
    fi
    sleep 5
  done
}

# pod_logs NAMESPACE SELECTOR: the logs of every container, and of the instance before a restart.
pod_logs() {
  kubectl logs -n "$1" -l "$2" --all-containers --prefix --ignore-errors --tail=200 || true
  kubectl logs -n "$1" -l "$2" --all-containers --prefix --ignore-errors --tail=100 --previous 2>/dev/null || true
}

# Every command may fail (the cluster may be half made): each is tried on its own. Logs skip
# containers that have none yet (--ignore-errors), so one waiting pod does not hide the others'.
diagnostics() {
  step "diagnostics"
  kubectl get nodes -o wide || true
  kubectl get pods,services,endpointslices,pvc -A -o wide || true
  kubectl get pytorchjobs -A -o yaml || true
  kubectl get trainjobs,clustertrainingruntimes,jobsets -A -o yaml || true
  kubectl get validatingwebhookconfiguration "$webhook_configuration" -o yaml || true
  kubectl describe pods -n "$operator_namespace" || true
  kubectl describe pods -n "$workload_namespace" || true
  # kubectl events orders by event time, which the scheduler's events (FailedScheduling) alone set.
  kubectl events -A | tail -n 100 || true
  pod_logs "$operator_namespace" "app.kubernetes.io/instance=$operator_release"
  pod_logs "$workload_namespace" training.kubeflow.org/job-name
  pod_logs "$trainer_namespace" "app.kubernetes.io/instance=$trainer_release"
  pod_logs "$trainjob_namespace" jobset.sigs.k8s.io/jobset-name
  pod_logs "$sdk_namespace" jobset.sigs.k8s.io/jobset-name
  if [[ -n "${KIND_LOGS_DIR:-}" ]]; then kind export logs "$KIND_LOGS_DIR" --name "$cluster" || true; fi
}

finish() {
  local status=$?
  if ((status != 0)); then diagnostics; fi
  if [[ -n "${archives:-}" ]]; then rm -rf "$archives"; fi
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
    -e 's/.*--pytorch-init-container-image=([^"[:space:]]+).*/\1/p' | { grep -v '{{' || true; } | sort -u
}

# no_pods NAMESPACE SELECTOR: true once no pod matches (kubectl wait fails when nothing matches).
no_pods() {
  local pods
  pods=$(kubectl get pods -n "$1" -l "$2" -o name) || return 1
  [[ -z "$pods" ]]
}

# leftovers RELEASE NAMESPACE: everything still labelled with the release, cluster-wide and namespaced.
# Each query returns on failure: in a command substitution set -e does not apply, and only the last
# status would count.
leftovers() {
  local selector="app.kubernetes.io/instance=$1"
  kubectl get clusterroles,clusterrolebindings,validatingwebhookconfigurations,customresourcedefinitions,persistentvolumes \
    -l "$selector" -o name || return 1
  kubectl get all,pytorchjobs,trainjobs,pvc,configmaps,secrets,serviceaccounts,roles,rolebindings,leases.coordination.k8s.io,networkpolicies \
    -n "$2" -l "$selector" -o name || return 1
}

# uninstall_leaving_only RELEASE NAMESPACE POD_SELECTOR KEPT: uninstall, wait for the pods to go,
# fail if anything but KEPT (what the chart keeps on purpose; may be empty) is left, then delete KEPT.
uninstall_leaving_only() {
  local left
  helm uninstall "$1" -n "$2" --wait --timeout 5m
  wait_until 120 "the pods of $1 to go" no_pods "$2" "$3"
  left=$(leftovers "$1" "$2") || { echo "could not list what $1 left behind" >&2; exit 1; }
  if [[ "$left" != "$4" ]]; then
    printf 'unexpected leftovers of %s:\n%s\n' "$1" "$left" >&2
    exit 1
  fi
  if [[ -n "$left" ]]; then kubectl delete -n "$2" "$left" --wait; fi
}

# load_image IMAGE: into the kind workers; `kind load docker-image` fails on some images under Docker's
# containerd image store (kubernetes-sigs/kind#3795), so then through an archive of the node platform's
# image. To a file, not a pipe: kind opens the archive once per node.
load_image() {
  kind load docker-image "$1" --name "$cluster" --nodes "$workers" && return
  echo "kind load docker-image $1 failed; loading it from an archive instead" >&2
  docker image save --platform "$platform" -o "$archives/image.tar" "$1" &&
    kind load image-archive "$archives/image.tar" --name "$cluster" --nodes "$workers"
  local status=$?
  rm -f "$archives/image.tar"
  return "$status"
}

# preload_images IMAGES: pull each (one per line) for the nodes' platform and load it into the workers.
# The nodes can still pull them (IfNotPresent), so a failed preload only costs time.
preload_images() {
  local preload
  while read -r preload; do
    docker pull --quiet --platform "$platform" "$preload" && load_image "$preload" ||
      echo "warning: could not preload $preload; the nodes will pull it" >&2
  done <<<"$1"
}

# job_field JOB JSONPATH: a field of the PyTorchJob JOB in the workload namespace.
job_field() {
  kubectl get pytorchjob "$1" -n "$workload_namespace" -o jsonpath="$2"
}

# job_pods JOB KUBECTL_ARGS...: `kubectl get` the pods of the PyTorchJob JOB.
job_pods() {
  kubectl get pods -n "$workload_namespace" -l "training.kubeflow.org/job-name=$1" "${@:2}"
}

# Pod states a retry never leaves (unlike ErrImagePull, which a registry's rate limit can cause, and
# CreateContainerError, which the kubelet retries and a busy node often causes: both run to the timeout).
unstartable='ErrImageNeverPull|InvalidImageName|CreateContainerConfigError'
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
    stuck=$(job_pods "$1" -o jsonpath="$waiting_reasons") || stuck=""  # an API hiccup: look again next time
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

# trainjob_condition JOB TYPE: the status of condition TYPE of the TrainJob JOB.
trainjob_condition() {
  kubectl get trainjob "$1" -n "$trainjob_namespace" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}"
}

# wait_for_trainjob JOB: until the TrainJob is Complete; fail as soon as it fails or a pod cannot start.
wait_for_trainjob() {
  local deadline=$((SECONDS + job_timeout)) stuck
  until [[ "$(trainjob_condition "$1" Complete)" == True ]]; do
    if [[ "$(trainjob_condition "$1" Failed)" == True ]]; then echo "TrainJob $1 failed" >&2; return 1; fi
    stuck=$(kubectl get pods -n "$trainjob_namespace" -l "jobset.sigs.k8s.io/jobset-name=$1" \
      -o jsonpath="$waiting_reasons") || stuck=""
    if grep -E "$unstartable" <<<"$stuck" >&2; then echo "pods of TrainJob $1 cannot start" >&2; return 1; fi
    if ((SECONDS >= deadline)); then echo "TrainJob $1 did not complete within ${job_timeout}s" >&2; return 1; fi
    kubectl get trainjob "$1" -n "$trainjob_namespace" --no-headers || true
    sleep 15
  done
  kubectl wait "trainjob/$1" -n "$trainjob_namespace" --for=condition=Complete --timeout=10s
}

# trainjob_admitted: the TrainJob of the TrainJob release passes the API server and Trainer's webhooks.
trainjob_admitted() {
  helm template "$trainjob_release" "$workload_chart" -n "$trainjob_namespace" -f "$trainjob_values" \
    "${local_image[@]}" --show-only templates/trainjob.yaml | kubectl create --dry-run=server -f -
}

# check_node0_log JOB: the TrainJob's node 0 (JobSet's completion index 0) holds rank 0, which trained
# in a world of numNodes × numProcPerNode processes and reported its evaluation.
check_node0_log() {
  local nodes nproc log
  nodes=$(kubectl get trainjob "$1" -n "$trainjob_namespace" -o jsonpath='{.spec.trainer.numNodes}')
  nproc=$(kubectl get trainjob "$1" -n "$trainjob_namespace" -o jsonpath='{.spec.trainer.numProcPerNode}')
  log=$(kubectl logs -n "$trainjob_namespace" -c node --tail=-1 \
    -l "jobset.sigs.k8s.io/jobset-name=$1,batch.kubernetes.io/job-completion-index=0")
  grep -E "^World Size: $((nodes * nproc))\. Rank: 0\." <<<"$log" ||
    { echo "no rank 0 of $1 trained in a world of $((nodes * nproc))" >&2; return 1; }
  grep -E '^epoch=[0-9]+ accuracy=[0-9.]+ val_loss=[0-9.]+$' <<<"$log" ||
    { echo "node 0 of $1 printed no evaluation line (epoch=N accuracy=… val_loss=…)" >&2; return 1; }
}

# check_rank0_log JOB: rank 0 reported its evaluation, in a process group of every process the spec
# asks for (pods × nprocPerNode). A pod that lost the operator's environment would train alone as
# world size 1 and still succeed. Rank 0 is the Master's, except under an elasticPolicy, where the
# rendezvous gives it to any pod: then every pod's log is searched.
check_rank0_log() {
  local masters workers nproc world pods pod log=""
  masters=$(job_field "$1" '{.spec.pytorchReplicaSpecs.Master.replicas}')
  workers=$(job_field "$1" '{.spec.pytorchReplicaSpecs.Worker.replicas}')
  nproc=$(job_field "$1" '{.spec.nprocPerNode}')
  world=$((masters + ${workers:-0}))
  if [[ "$nproc" =~ ^[0-9]+$ ]]; then world=$((world * nproc)); fi
  pods="pod/$1-master-0"
  if [[ -n "$(job_field "$1" '{.spec.elasticPolicy}')" ]]; then
    pods=$(job_pods "$1" -o name)
  fi
  for pod in $pods; do
    log+=$(kubectl logs "$pod" -n "$workload_namespace" -c pytorch)$'\n'
  done
  grep -E "^World Size: $world\. Rank: 0\." <<<"$log" || { echo "no rank 0 of $1 trained in a world of $world" >&2; return 1; }
  grep -E '^epoch=[0-9]+ accuracy=[0-9.]+ val_loss=[0-9.]+$' <<<"$log" ||
    { echo "rank 0 of $1 printed no evaluation line (epoch=N accuracy=… val_loss=…)" >&2; return 1; }
}

# webhook_admits: a server-side dry run goes through the validating webhook, so it answers and admits a
# valid PyTorchJob.
webhook_admits() {
  "$repo/ci/kind/pytorchjob.sh" e2e-valid "$workload_namespace" "$image" 1 | kubectl create --dry-run=server -f -
}

# webhook_ca: the CA of the operator's certificate (in its Secret) and the CA bundle it injected into
# the webhook configuration; neither is in the chart's templates.
webhook_ca() {
  kubectl get secret "$webhook_secret" -n "$operator_namespace" -o jsonpath='{.data.ca\.crt}' || return 1
  echo
  kubectl get validatingwebhookconfiguration "$webhook_configuration" -o jsonpath='{.webhooks[0].clientConfig.caBundle}'
}

# check_webhook_kept WHAT CA: after WHAT, the webhook admits a valid job and still has the CA it had.
check_webhook_kept() {
  wait_until 120 "the webhook to admit a valid PyTorchJob after $1" webhook_admits
  [[ "$(webhook_ca)" == "$2" ]] || { echo "$1 changed the webhook's certificate or CA bundle" >&2; return 1; }
}

# run_job RELEASE HELM_ARGS...: install pytorchjob-mnist as RELEASE with the local image (local_image,
# set below), wait for its PyTorchJob to succeed and check its rank 0's log.
run_job() {
  local release=$1
  shift
  helm install "$release" "$workload_chart" -n "$workload_namespace" "$@" "${local_image[@]}"
  wait_for_job "$release"
  check_rank0_log "$release"
  job_pods "$release" -o wide
}

# run_helm_test RELEASE [NAMESPACE]: the chart's test pod checks the model and metrics on the volume.
# No --logs: Helm 3 deletes a passed test's pod before reading its logs (helm/helm#9098) and then
# fails; a failed test's pod is kept and its log printed here.
run_helm_test() {
  local namespace=${2:-$workload_namespace}
  helm test "$1" -n "$namespace" --timeout 10m \
    || { kubectl logs "$1-check-run" -n "$namespace" || true; return 1; }
}

step "kind cluster $cluster"
# Checked before the EXIT trap, which deletes the cluster: this one is somebody else's.
existing_clusters=$(kind get clusters 2>/dev/null) || existing_clusters=""
if grep -qx -- "$cluster" <<<"$existing_clusters"; then
  echo "a kind cluster named $cluster exists already (a KEEP_CLUSTER=1 run leaves one): delete it with" \
    "\`kind delete cluster --name $cluster\`, or pick another name with KIND_CLUSTER=…" >&2
  exit 2
fi
# Before the create, which takes minutes: a signal then must still delete what it made. On a signal,
# exit with its status so that finish prints the diagnostics (and deletes the cluster).
trap finish EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
# --retain: nodes that fail to come up stay for finish's `kind export logs` (finish deletes them).
kind create cluster --name "$cluster" --config "$repo/ci/kind/cluster.yaml" --wait 180s --retain \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"}
# Image archives for `kind load image-archive`; finish removes them.
archives=$(mktemp -d)
# Images go to the workers only: kind taints the control plane of a cluster with workers (and
# ci/kind/cluster.yaml has two, so grep finds some and does not fail the script).
workers=$(kind get nodes --name "$cluster" | grep -v -- '-control-plane$' | paste -sd, -)

step "trainer image $image"
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
  IMG="$image" VARIANT=cpu CONTAINER_TOOL=docker "$repo/ci/build-image.sh"
fi
# The nodes' platform: a preloaded image of another one would be used (IfNotPresent) and fail to run.
platform=$(docker version --format '{{.Server.Os}}/{{.Server.Arch}}')
# pullPolicy Never below: the nodes must have it, so no warning-only fallback here.
load_image "$image"

step "operator images (pulled once, loaded into the nodes)"
operator_images=$(chart_images "$operator_release" "$operator_chart" -n "$operator_namespace" -f "$operator_values")
[[ -n "$operator_images" ]] || { echo "found no images in the rendered training-operator chart" >&2; exit 1; }
preload_images "$operator_images"

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
wait_until 120 "the webhook to admit a valid PyTorchJob" webhook_admits

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

step "upgrade the training-operator (its pod restarts), then roll it back"
ca=$(webhook_ca)
helm upgrade "$operator_release" "$operator_chart" -n "$operator_namespace" -f "$operator_values" \
  --set crds.keep=true --set logLevel=debug --wait --timeout 5m
check_webhook_kept "the upgrade" "$ca"
helm rollback "$operator_release" 1 -n "$operator_namespace" --wait --timeout 5m
check_webhook_kept "the rollback" "$ca"

local_image=(--set "image.repository=${image%:*}" --set "image.tag=${image##*:}" --set image.pullPolicy=Never)

step "install pytorchjob-mnist with the local image"
run_job "$workload_release" -f "$workload_values"

step "helm test"
run_helm_test "$workload_release"

step "a job across two nodes (no volume, so no single-node affinity), behind its NetworkPolicy"
run_job "$two_nodes_release" -f "$workload_values" -f "$two_nodes_values"
nodes=$(job_pods "$two_nodes_release" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort -u | wc -l)
((nodes == 2)) || { echo "the pods of $two_nodes_release ran on $nodes node(s), not 2" >&2; exit 1; }

step "an elastic torchrun job (c10d rendezvous, 1 Master + 2 Workers)"
run_job "$elastic_release" -f "$elastic_values"
run_helm_test "$elastic_release"

step "Kubeflow Trainer v2 $trainer_chart_version (upstream's chart, with JobSet and the torch-distributed runtime)"
trainer_args=(--version "$trainer_chart_version" -n "$trainer_namespace" --set runtimes.torchDistributed.enabled=true)
# The runtime's own default image (pytorch/pytorch, gigabytes) never runs: the TrainJob sets its image.
trainer_images=$(chart_images "$trainer_release" "$trainer_chart" "${trainer_args[@]}" | { grep -v '^pytorch/' || true; })
preload_images "$trainer_images"
helm install "$trainer_release" "$trainer_chart" "${trainer_args[@]}" --create-namespace --wait --timeout 10m
# The runtimes come from a hook once the controller is up.
wait_until 300 "the torch-distributed ClusterTrainingRuntime" kubectl get clustertrainingruntime torch-distributed

step "pytorchjob-mnist with jobKind TrainJob"
restricted_namespace "$trainjob_namespace"
# Trainer's webhook may refuse TrainJobs for a moment after its install, and a failed `helm install`
# leaves a release that blocks the next: wait until it admits ours in a server-side dry run.
wait_until 120 "Trainer's webhook to admit the TrainJob" trainjob_admitted
helm install "$trainjob_release" "$workload_chart" -n "$trainjob_namespace" -f "$trainjob_values" "${local_image[@]}"
wait_for_trainjob "$trainjob_release"
check_node0_log "$trainjob_release"
kubectl get pods -n "$trainjob_namespace" -l "jobset.sigs.k8s.io/jobset-name=$trainjob_release" -o wide
run_helm_test "$trainjob_release" "$trainjob_namespace"

step "one training through the Kubeflow SDK $sdk_version"
kubectl create namespace "$sdk_namespace"
# A virtualenv of the SDK alone (make e2e has no dev venv); finish removes it with the archives.
python3 -m venv "$archives/sdk"
"$archives/sdk/bin/pip" install --quiet "kubeflow==$sdk_version"
# ci/kind/sdk_train.py (written with the local runner's SDK tests) submits a TrainJob of the trainer
# image with TrainerClient().train, waits for Complete and reads node 0's log with get_job_logs. The
# SDK reads the kube context from KUBECONFIG's current context, which kind create cluster set.
"$archives/sdk/bin/python" "$repo/ci/kind/sdk_train.py" --image "$image" --namespace "$sdk_namespace"

step "uninstall and check for leftovers"
# persistence.keep (default true) keeps the claim with the trained model; nothing else may remain.
uninstall_leaving_only "$workload_release" "$workload_namespace" "training.kubeflow.org/job-name=$workload_release" \
  "persistentvolumeclaim/$workload_release-storage"
uninstall_leaving_only "$two_nodes_release" "$workload_namespace" "training.kubeflow.org/job-name=$two_nodes_release" ""
uninstall_leaving_only "$elastic_release" "$workload_namespace" "training.kubeflow.org/job-name=$elastic_release" \
  "persistentvolumeclaim/$elastic_release-storage"
uninstall_leaving_only "$trainjob_release" "$trainjob_namespace" "jobset.sigs.k8s.io/jobset-name=$trainjob_release" \
  "persistentvolumeclaim/$trainjob_release-storage"
# crds.keep keeps the CRD, so uninstalling the operator never deletes users' jobs; then delete it here.
uninstall_leaving_only "$operator_release" "$operator_namespace" "app.kubernetes.io/instance=$operator_release" \
  "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org"
kubectl delete namespace "$workload_namespace" "$operator_namespace" "$trainjob_namespace" "$sdk_namespace" --wait --timeout 2m
helm uninstall "$trainer_release" -n "$trainer_namespace" --wait --timeout 5m

step "e2e passed"
