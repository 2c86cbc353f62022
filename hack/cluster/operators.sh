#!/usr/bin/env bash
# The operators of the local cluster, built from their Go modules (hack/cluster/modules/*, each a
# wrapper module of the project's own whose `tool` directives pin the upstream mains):
#
#   operators.sh build                      binaries into $CLUSTER_DIR/bin, then the FROM-scratch images;
#                                           prints one image reference a line (logs go to stderr)
#   operators.sh manifests                  controller-gen over Trainer's and JobSet's Go API packages,
#                                           into $CLUSTER_DIR/generated/{trainer,jobset}
#   operators.sh install-trainer KUBECONFIG JobSet, then Kubeflow Trainer and the torch-distributed
#                                           ClusterTrainingRuntime; waits for both webhooks to answer
#   operators.sh uninstall-trainer KUBECONFIG
#   operators.sh render                     what install-trainer applies (but the runtime), without a
#                                           cluster: prints the paths of $CLUSTER_DIR/install/*.yaml
#
# The training-operator v1 is installed by the project's chart instead:
#   helm install training-operator charts/training-operator -n kubeflow --create-namespace --wait \
#     -f hack/cluster/training-operator-values.yaml
#
# Environment: CLUSTER_DIR (default <repo>/.cluster), KUBECTL (default <repo>/.tools/bin/kubectl, else
# kubectl on PATH), TRAINER_IMAGE (the torch-distributed runtime's default image), INSTALL_TIMEOUT
# (seconds to wait for each controller, default 300). Only module downloads reach the network (the Go
# proxy) and, the first time, ci/podman/offline-base.sh's Debian mirror; no image is pulled.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CLUSTER_DIR=${CLUSTER_DIR:-$repo/.cluster}
bin_dir=$CLUSTER_DIR/bin
modules=$repo/hack/cluster/modules
manifests=$repo/hack/cluster/manifests
export CONTAINERS_CONF=${CONTAINERS_CONF:-$repo/ci/podman/containers.conf}
INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-300}
field_manager=pytorchjob-mnist-operators
image_prefix=localhost/pytorchjob-mnist
# The training-operator chart's init container image (hack/cluster/training-operator-values.yaml): a
# stable name for ci/podman/offline-base.sh's base, whose own tag follows that script's content.
init_image=localhost/pytorchjob-mnist-base:bookworm
# Label on each image: the sha256 of the binary it holds, so an unchanged binary keeps its image.
content_label=io.github.pytorchjob-mnist.manager-sha256

log() { echo "operators.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

kubectl_bin() {
  if [[ -n "${KUBECTL:-}" ]]; then
    echo "$KUBECTL"
  elif [[ -x "$repo/.tools/bin/kubectl" ]]; then
    echo "$repo/.tools/bin/kubectl"
  elif command -v kubectl >/dev/null; then
    command -v kubectl
  else
    die "no kubectl: run 'make test-deps' (it fetches the pinned one into .tools/bin) or set KUBECTL"
  fi
}

# What each wrapper module builds: "<module dir> <main package> <binary> <module the version is read from>".
# The binary is go build's name for the package (its last path element).
builds=(
  "training-operator github.com/kubeflow/training-operator/cmd/training-operator.v1 training-operator.v1 github.com/kubeflow/training-operator"
  "trainer github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager trainer-controller-manager github.com/kubeflow/trainer/v2"
  "trainer sigs.k8s.io/jobset jobset sigs.k8s.io/jobset"
  "tools/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen controller-gen sigs.k8s.io/controller-tools"
  "tools/chart-testing github.com/helm/chart-testing/v3/ct ct github.com/helm/chart-testing/v3"
)
# The images: "<component> <binary> <module>"; the tag is the module's version in its wrapper's go.mod.
images=(
  "training-operator training-operator.v1 github.com/kubeflow/training-operator"
  "trainer-controller-manager trainer-controller-manager github.com/kubeflow/trainer/v2"
  "jobset jobset sigs.k8s.io/jobset"
)

# module_version DIR MODULE: the version of MODULE that wrapper module DIR selects.
module_version() { (cd "$modules/$1" && GOWORK=off go list -m -f '{{.Version}}' "$2"); }

# module_commit DIR MODULE: the upstream commit of that version, from the Go proxy's origin record.
module_commit() {
  (cd "$modules/$1" && GOWORK=off go mod download -json "$2@$(module_version "$1" "$2")") |
    sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]*\)".*/\1/p' | head -n 1
}

# module_of BINARY: the wrapper module directory that builds BINARY.
module_of() {
  local entry
  for entry in "${builds[@]}"; do
    read -r dir _ binary _ <<<"$entry"
    [[ "$binary" == "$1" ]] && echo "$dir" && return
  done
  die "no build for $1"
}

# build_module DIR: go build every main of wrapper module DIR (one go build, so they share the compile)
# into $bin_dir, unless each binary exists and the module's go.mod and go.sum are those of its last build.
build_module() {
  local dir=$1 entry d pkg binary mod stamp want start version commit
  local -a pkgs=() binaries=() ldflags=(-s -w)
  for entry in "${builds[@]}"; do
    read -r d pkg binary mod <<<"$entry"
    [[ "$d" == "$dir" ]] || continue
    pkgs+=("$pkg")
    binaries+=("$binary")
    # The version strings upstream's release builds stamp in (else they report a dev version).
    case "$binary" in
      jobset)
        version=$(module_version "$dir" "$mod")
        commit=$(module_commit "$dir" "$mod")
        ldflags+=("-X=sigs.k8s.io/jobset/pkg/version.GitVersion=$version" "-X=sigs.k8s.io/jobset/pkg/version.GitCommit=$commit")
        ;;
      ct)
        version=$(module_version "$dir" "$mod")
        commit=$(module_commit "$dir" "$mod")
        ldflags+=("-X=github.com/helm/chart-testing/v3/ct/cmd.Version=$version" "-X=github.com/helm/chart-testing/v3/ct/cmd.GitCommit=$commit")
        ;;
    esac
  done
  ((${#pkgs[@]})) || die "no build in module $dir"
  stamp="$bin_dir/.stamp-${dir//\//-}"
  want=$(cat "$modules/$dir/go.mod" "$modules/$dir/go.sum" | sha256sum | cut -c1-64)
  want="$want $(go env GOVERSION) ${ldflags[*]}"
  local missing=0
  for binary in "${binaries[@]}"; do [[ -x "$bin_dir/$binary" ]] || missing=1; done
  if ((missing == 0)) && [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    log "$dir: ${binaries[*]} up to date"
    return
  fi
  mkdir -p "$bin_dir"
  log "$dir: go build ${pkgs[*]}"
  start=$SECONDS
  (cd "$modules/$dir" && GOWORK=off CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags[*]}" -o "$bin_dir/" "${pkgs[@]}")
  echo "$want" >"$stamp"
  log "$dir: built ${binaries[*]} in $((SECONDS - start)) s"
}

# build_image COMPONENT BINARY VERSION: a FROM-scratch image with BINARY at /manager, run as 65532 (the
# uid of upstream's distroless images); skipped when the image holds that binary already.
build_image() {
  local component=$1 binary=$2 version=$3 ref sum have ctx
  ref="$image_prefix/$component:$version"
  sum=$(sha256sum "$bin_dir/$binary" | cut -c1-64)
  if podman image exists "$ref"; then
    have=$(podman image inspect --format "{{index .Labels \"$content_label\"}}" "$ref")
    if [[ "$have" == "$sum" ]]; then
      log "$ref: up to date"
      echo "$ref"
      return
    fi
  fi
  ctx=$(mktemp -d)
  cp "$bin_dir/$binary" "$ctx/manager"
  cat >"$ctx/Containerfile" <<'EOF'
FROM scratch
COPY manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
EOF
  log "$ref: podman build"
  podman build --quiet --timestamp 0 --label "$content_label=$sum" \
    --label "org.opencontainers.image.version=$version" \
    -t "$ref" -f "$ctx/Containerfile" "$ctx" >&2
  rm -rf "$ctx"
  echo "$ref"
}

cmd_build() {
  local entry dir component binary mod version ref base
  local -a dirs=() refs=()
  for entry in "${builds[@]}"; do
    read -r dir _ <<<"$entry"
    [[ " ${dirs[*]} " == *" $dir "* ]] || dirs+=("$dir")
  done
  for dir in "${dirs[@]}"; do build_module "$dir"; done
  for entry in "${images[@]}"; do
    read -r component binary mod <<<"$entry"
    dir=$(module_of "$binary")
    version=$(module_version "$dir" "$mod")
    ref=$(build_image "$component" "$binary" "$version")
    refs+=("$ref")
  done
  base=$("$repo/ci/podman/offline-base.sh")
  podman tag "${base%@*}" "$init_image"
  refs+=("$init_image")
  printf '%s\n' "${refs[@]}"
}

# generate NAME MODULE_DIR STAMP_INPUT ARGS...: run controller-gen ARGS in MODULE_DIR (upstream's module
# in the read-only module cache, as its own `make manifests` does) into $CLUSTER_DIR/generated/NAME.
generate() {
  local name=$1 dir=$2 stamp_input=$3 out stamp
  shift 3
  out=$CLUSTER_DIR/generated/$name
  stamp=$CLUSTER_DIR/generated/.stamp-$name
  if [[ -d "$out" && -f "$stamp" && "$(cat "$stamp")" == "$stamp_input" ]]; then
    log "generated/$name: up to date"
    return
  fi
  rm -rf "$out"
  mkdir -p "$out"
  log "generated/$name: controller-gen in $dir"
  (cd "$dir" && GOWORK=off GOFLAGS=-mod=readonly "$bin_dir/controller-gen" "$@" \
    "output:crd:artifacts:config=$out/crds" "output:rbac:artifacts:config=$out/rbac" \
    "output:webhook:artifacts:config=$out/webhook")
  echo "$stamp_input" >"$stamp"
}

cmd_manifests() {
  local trainer_dir jobset_dir input
  build_module tools/controller-gen
  (cd "$modules/trainer" && GOWORK=off go mod download github.com/kubeflow/trainer/v2 sigs.k8s.io/jobset)
  trainer_dir=$(cd "$modules/trainer" && GOWORK=off go list -m -f '{{.Dir}}' github.com/kubeflow/trainer/v2)
  jobset_dir=$(cd "$modules/trainer" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/jobset)
  input="$(cat "$modules/trainer/go.sum" "$modules/tools/controller-gen/go.sum" | sha256sum | cut -c1-64)"
  # Trainer's Makefile: one run over the API and the packages with RBAC and webhook markers.
  generate trainer "$trainer_dir" "$input" \
    crd:generateEmbeddedObjectMeta=true rbac:roleName=kubeflow-trainer-controller-manager webhook \
    'paths=./pkg/apis/trainer/v1alpha1/...;./pkg/controller/...;./pkg/runtime/...;./pkg/webhooks/...;./pkg/util/cert/...'
  # JobSet's Makefile runs twice (the CRD from ./api/..., RBAC and webhooks from ./pkg/...) into
  # separate folders; one run over both gives the same files.
  generate jobset "$jobset_dir" "$input" \
    crd:generateEmbeddedObjectMeta=true rbac:roleName=manager-role webhook 'paths=./api/...;./pkg/...'
  ls "$CLUSTER_DIR"/generated/{trainer,jobset}/*/*.yaml >&2
}

# render NAME: kustomize hack/cluster/manifests/NAME over generated/NAME into $CLUSTER_DIR/install/NAME.yaml.
render() {
  local name=$1 work
  [[ -d "$CLUSTER_DIR/generated/$name" ]] || cmd_manifests
  work=$CLUSTER_DIR/install/$name
  rm -rf "$work"
  mkdir -p "$work"
  cp -r "$manifests/$name/." "$work/"
  cp -r "$CLUSTER_DIR/generated/$name" "$work/generated"
  "$kubectl" kustomize "$work" >"$work.yaml"
  echo "$work.yaml"
}

# wait_deployment NAMESPACE NAME: until the Deployment is Available, or fail with its pods' state.
wait_deployment() {
  if ! "$kubectl" -n "$1" rollout status --timeout="${INSTALL_TIMEOUT}s" "deployment/$2" >&2 ||
    ! "$kubectl" -n "$1" wait --for=condition=Available --timeout="${INSTALL_TIMEOUT}s" "deployment/$2" >&2; then
    "$kubectl" -n "$1" get pods -o wide >&2 || true
    "$kubectl" -n "$1" logs "deployment/$2" --tail=30 >&2 || true
    die "deployment $1/$2 is not Available after ${INSTALL_TIMEOUT} s"
  fi
}

# until_admitted WHAT VERB ARGS... : repeat `kubectl VERB ARGS` (stdin: the object) until it succeeds,
# that is until the webhooks it goes through answer; fail after INSTALL_TIMEOUT with the last error.
until_admitted() {
  local what=$1 object err deadline=$((SECONDS + INSTALL_TIMEOUT))
  shift
  object=$(cat)
  while ! err=$("$kubectl" "$@" -f - <<<"$object" 2>&1 >/dev/null); do
    if ((SECONDS >= deadline)); then
      die "$what: not admitted after ${INSTALL_TIMEOUT} s: $err"
    fi
    log "$what: waiting for the webhook ($err)"
    sleep 5
  done
  log "$what: admitted"
}

cmd_install_trainer() {
  local file image
  file=$(render jobset)
  "$kubectl" apply --server-side --force-conflicts --field-manager="$field_manager" -f "$file" >&2
  wait_deployment jobset-system jobset-controller-manager
  until_admitted "JobSet (server-side dry run)" create --dry-run=server <<EOF
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: webhook-probe
  namespace: jobset-system
spec:
  replicatedJobs:
    - name: probe
      template:
        spec:
          template:
            spec:
              restartPolicy: Never
              containers:
                - name: probe
                  image: $image_prefix/jobset:probe
EOF

  file=$(render trainer)
  "$kubectl" apply --server-side --force-conflicts --field-manager="$field_manager" -f "$file" >&2
  wait_deployment kubeflow-system kubeflow-trainer-controller-manager
  image=${TRAINER_IMAGE:-ghcr.io/pytorchjob-mnist/trainer:$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/pyproject.toml")-cpu}
  # The runtime goes through Trainer's validating webhook as well.
  sed "s|image: TRAINER_IMAGE|image: \"$image\"|" "$manifests/trainer/torch-distributed.yaml" |
    until_admitted "ClusterTrainingRuntime torch-distributed (image $image)" \
      apply --server-side --force-conflicts --field-manager="$field_manager"
  until_admitted "TrainJob (server-side dry run)" create --dry-run=server <<'EOF'
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: webhook-probe
  namespace: kubeflow-system
spec:
  runtimeRef:
    name: torch-distributed
EOF
  log "JobSet and Kubeflow Trainer are installed"
}

cmd_uninstall_trainer() {
  local crd
  # The jobs first, while their controllers still run to clean up after them.
  for crd in trainjobs.trainer.kubeflow.org jobsets.jobset.x-k8s.io; do
    if "$kubectl" get crd "$crd" >/dev/null 2>&1; then
      "$kubectl" delete "$crd" --all --all-namespaces --wait --timeout="${INSTALL_TIMEOUT}s" >&2
    fi
  done
  "$kubectl" delete --ignore-not-found --wait --timeout="${INSTALL_TIMEOUT}s" -f "$(render trainer)" >&2
  "$kubectl" delete --ignore-not-found --wait --timeout="${INSTALL_TIMEOUT}s" -f "$(render jobset)" >&2
  log "JobSet and Kubeflow Trainer are uninstalled"
}

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

case "${1:-}" in
  build) cmd_build ;;
  manifests) cmd_manifests ;;
  render)
    kubectl=$(kubectl_bin)
    render jobset
    render trainer
    ;;
  install-trainer | uninstall-trainer)
    [[ $# -eq 2 ]] || usage
    [[ -f "$2" ]] || die "no kubeconfig at $2"
    KUBECONFIG=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
    export KUBECONFIG
    kubectl=$(kubectl_bin)
    if [[ "$1" == install-trainer ]]; then cmd_install_trainer; else cmd_uninstall_trainer; fi
    ;;
  *) usage ;;
esac
