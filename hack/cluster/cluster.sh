#!/usr/bin/env bash
# A single-node Kubernetes cluster on this machine, built from Go modules and Debian packages; no
# image is ever pulled from outside it (hack/cluster/README.md):
#   hack/cluster/cluster.sh up     build what is missing, start the cluster, install the operator chart,
#                                  load the trainer image; ends with TRAINER_IMAGE=… and KUBECONFIG=…
#   hack/cluster/cluster.sh down   stop every process it started (by its pid), its pods, mounts,
#                                  interfaces, iptables rules and cgroups; keeps the built binaries
#   hack/cluster/cluster.sh env    the two closing lines of `up`, for a cluster that is up
# Control plane and node run as processes here (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet, kube-proxy, containerd), add-ons as pods (CoreDNS, kube-network-policies),
# plus a storage provisioner and a registry on loopback, which the trainer image is pushed to.
#
# Environment: CLUSTER_DIR (state, logs and the kubeconfig; default <repo>/.cluster), CLUSTER_CACHE
# (built binaries, shared by clones; default ~/.cache/pytorchjob-mnist/cluster), REGISTRY_PORT (5050),
# TRAINER_IMAGE (default: built from this checkout with `make image-offline`, pushed with `make push`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=hack/cluster/lib.sh
source "$here/lib.sh"

# The node's own address, on an interface of the cluster's (pjm0, a bridge: this kernel has no dummy links): the API server, kubelet and
# kube-proxy listen there, so no cluster traffic uses the machine's eth0.
node_ip=10.243.0.1
node_name=pytorchjob-mnist
pod_cidr=10.244.0.0/24
service_cidr=10.96.0.0/16
kubernetes_service_ip=10.96.0.1
dns_service_ip=10.96.0.10
apiserver_port=6443
etcd_port=2379

kubectl() { "$KUBECTL" --kubeconfig "$kubeconfig" "$@"; }
helm() { "$HELM" --kubeconfig "$kubeconfig" "$@"; }

# ---------------------------------------------------------------------------------------------------
# Build

# go_build MODULE PACKAGE [NAME]: build PACKAGE of hack/cluster/modules/MODULE into the cache, keyed by
# the module's go.mod, go.sum and the build flags, unless that build is there, and link it into $bin.
go_build() {
  local module=$here/modules/$1 package=$2 name=${3:-${2##*/}} ldflags=${LDFLAGS:--s -w} key out
  key=$(cat "$module/go.mod" "$module/go.sum" <(echo "$package $ldflags $(go env GOVERSION)") | sha256sum | cut -c1-16)
  out="$cluster_cache/bin/$1-$key"
  if [[ ! -x "$out/$name" ]]; then
    log "go build $package (module $1)"
    mkdir -p "$out"
    local started=$SECONDS
    (cd "$module" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "$ldflags" -o "$out/$name.tmp" "$package")
    mv "$out/$name.tmp" "$out/$name"
    echo "$1 $package $((SECONDS - started))" >>"$cluster_cache/build-times"
  fi
  ln -sf "$out/$name" "$bin/$name"
}

build_binaries() {
  local version component ldflags="-s -w"
  version=$(kubernetes_version)
  for component in component-base/version client-go/pkg/version; do
    ldflags+=" -X k8s.io/$component.gitVersion=$version -X k8s.io/$component.gitTreeState=clean"
    ldflags+=" -X k8s.io/$component.gitMajor=$(cut -d. -f1 <<<"${version#v}") -X k8s.io/$component.gitMinor=$(cut -d. -f2 <<<"$version")"
  done
  for component in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
    LDFLAGS=$ldflags go_build kubernetes "k8s.io/kubernetes/cmd/$component"
  done
  go_build etcd go.etcd.io/etcd/server/v3 etcd
  go_build coredns github.com/coredns/coredns
  go_build netpol sigs.k8s.io/kube-network-policies/cmd kube-network-policies
  for component in pause provisioner stop-pods; do
    go_build local "./cmd/$component"
  done
}

# ---------------------------------------------------------------------------------------------------
# Certificates: one CA signs the API server's serving certificate and every client's (etcd serves
# plain HTTP on loopback only).

# client_kubeconfig NAME USER GROUP: a certificate for USER in GROUP and a kubeconfig that uses it.
client_kubeconfig() {
  local name=$1 user=$2 group=$3
  [[ -f "$pki/$name.crt" ]] || {
    openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "/O=$group/CN=$user" -out "$pki/$name.csr" 2>/dev/null
    openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
      -extfile <(printf 'extendedKeyUsage=clientAuth\n') -out "$pki/$name.crt" 2>/dev/null
  }
  cat >"$etc/$name.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: $node_name
  cluster: {server: "https://$node_ip:$apiserver_port", certificate-authority: "$pki/ca.crt"}
users:
- name: $user
  user: {client-certificate: "$pki/$name.crt", client-key: "$pki/$name.key"}
contexts:
- name: $node_name
  context: {cluster: $node_name, user: $user}
current-context: $node_name
EOF
}

make_pki() {
  mkdir -p "$pki"
  [[ -f "$pki/ca.crt" ]] || openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=pytorchjob-mnist-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  [[ -f "$pki/apiserver.crt" ]] || {
    openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/apiserver.key" -subj "/CN=kube-apiserver" -out "$pki/apiserver.csr" 2>/dev/null
    openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial -days 30 \
      -extfile <(printf 'subjectAltName=IP:%s,IP:%s,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' \
        "$node_ip" "$kubernetes_service_ip") -out "$pki/apiserver.crt" 2>/dev/null
  }
  [[ -f "$pki/service-account.key" ]] || openssl genrsa -out "$pki/service-account.key" 2048 2>/dev/null
  client_kubeconfig admin kubernetes-admin system:masters
  client_kubeconfig apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  client_kubeconfig controller-manager system:kube-controller-manager system:kube-controller-manager
  client_kubeconfig scheduler system:kube-scheduler system:kube-scheduler
  client_kubeconfig kubelet "system:node:$node_name" system:nodes
  client_kubeconfig kube-proxy system:kube-proxy system:node-proxier
  client_kubeconfig provisioner pytorchjob-mnist:provisioner pytorchjob-mnist:provisioners
  cp "$etc/admin.kubeconfig" "$kubeconfig"
}

# ---------------------------------------------------------------------------------------------------
# Host configuration

network_up() {
  ip link show pjm0 >/dev/null 2>&1 || ip link add pjm0 type bridge
  ip addr show dev pjm0 | grep -q "inet $node_ip/" || ip addr add "$node_ip/32" dev pjm0
  ip link set pjm0 up
  # Saved once, restored by down.
  [[ -f "$run/sysctls" ]] || sysctl -n net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables | paste -sd' ' >"$run/sysctls"
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
}

write_configs() {
  mkdir -p "$etc/cni" "$etc/registry-hosts/_default" "$etc/registry-hosts/$registry"
  # containerd 1.6 (Debian's): cgroupfs, a local pause image, CNI bridge; restrict_oom_score_adj because
  # this machine's root lacks CAP_SYS_RESOURCE, so runc cannot lower a pod's OOM score below its own.
  cat >"$etc/containerd.toml" <<EOF
version = 2
root = "$state/containerd"
state = "$run/containerd"
[grpc]
  address = "$containerd_socket"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(image_ref pause)"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$run/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$etc/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$etc/registry-hosts"
EOF
  # Every registry but the loopback one resolves to a closed port, so a pull from outside fails at once
  # (and `make e2e` fails on the Pulling event it leaves).
  printf '# No image comes from outside this machine.\nserver = "http://127.0.0.1:9"\n' >"$etc/registry-hosts/_default/hosts.toml"
  printf 'server = "http://%s"\n[host."http://%s"]\n  capabilities = ["pull", "resolve"]\n' "$registry" "$registry" \
    >"$etc/registry-hosts/$registry/hosts.toml"
  cat >"$etc/cni/10-pods.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "pytorchjob-mnist", "plugins": [
  {"type": "bridge", "bridge": "pjm-cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$state/cni", "ranges": [[{"subnet": "$pod_cidr"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
EOF
  cat >"$etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups are v1 (not to be remounted): Kubernetes 1.35 runs there only when told to.
failCgroupV1: false
cgroupDriver: cgroupfs
failSwapOn: false
containerRuntimeEndpoint: unix://$containerd_socket
address: $node_ip
readOnlyPort: 0
clusterDNS: [$dns_service_ip]
clusterDomain: cluster.local
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$pki/ca.crt"}
authorization: {mode: Webhook}
# Images are imported or pushed here, never pulled from outside: the kubelet must not collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 200Mi, nodefs.available: 2%, imagefs.available: 2%}
maxPods: 60
serializeImagePulls: false
EOF
}

# ---------------------------------------------------------------------------------------------------
# Processes

start_control_plane() {
  start containerd containerd --config "$etc/containerd.toml"
  wait_until 60 "containerd to answer" ctr --address "$containerd_socket" version
  start etcd "$bin/etcd" --data-dir "$state/etcd" --name "$node_name" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster "$node_name=http://127.0.0.1:2380" --listen-metrics-urls http://127.0.0.1:2381 \
    --quota-backend-bytes 2147483648 --log-level warn
  wait_until 60 "etcd to be healthy" curl -fsS "http://127.0.0.1:2381/health"
  start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address "$node_ip" --advertise-address "$node_ip" --secure-port "$apiserver_port" \
    --service-cluster-ip-range "$service_cidr" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local --service-account-key-file "$pki/service-account.key" \
    --service-account-signing-key-file "$pki/service-account.key" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction --allow-privileged=true --profiling=false
  wait_until 120 "the API server to be ready" kubectl get --raw /readyz
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$etc/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$etc/controller-manager.kubeconfig" --authorization-kubeconfig "$etc/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 10257 --leader-elect=false --use-service-account-credentials \
    --service-account-private-key-file "$pki/service-account.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range "$service_cidr" --controllers '*,-bootstrapsigner,-tokencleaner,-cloud-node-lifecycle'
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$etc/scheduler.kubeconfig" \
    --authentication-kubeconfig "$etc/scheduler.kubeconfig" --authorization-kubeconfig "$etc/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false
}

start_node() {
  start kubelet "$bin/kubelet" --config "$etc/kubelet.yaml" --kubeconfig "$etc/kubelet.kubeconfig" \
    --root-dir "$state/kubelet" --cert-dir "$pki/kubelet" --hostname-override "$node_name" --node-ip "$node_ip"
  # A root without CAP_SYS_RESOURCE cannot lower an OOM score (see containerd.toml); no conntrack
  # sysctls either: this machine's defaults serve one node.
  start kube-proxy "$bin/kube-proxy" --kubeconfig "$etc/kube-proxy.kubeconfig" --hostname-override "$node_name" \
    --bind-address "$node_ip" --cluster-cidr "$pod_cidr" --proxy-mode iptables --oom-score-adj 0 \
    --conntrack-max-per-core 0 --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256
  wait_until 180 "node $node_name to be Ready" kubectl wait --for=condition=Ready "node/$node_name" --timeout=5s
  start provisioner "$bin/provisioner" --kubeconfig "$etc/provisioner.kubeconfig" --root "$state/volumes" \
    --name "$provisioner_name"
  start registry docker-registry serve "$etc/registry.yml"
}

write_registry_config() {
  cat >"$etc/registry.yml" <<EOF
version: 0.1
storage:
  filesystem: {rootdirectory: "$state/registry"}
  delete: {enabled: true}
http: {addr: "$registry"}
EOF
  # podman pushes there over plain HTTP; `make push` reads this through CONTAINERS_REGISTRIES_CONF.
  printf '[[registry]]\nlocation = "%s"\ninsecure = true\n' "$registry" >"$etc/registries.conf"
}

# ---------------------------------------------------------------------------------------------------
# Images and add-ons

# scratch_image NAME BINARY [USER]: an image holding only BINARY as /NAME, built with podman and
# imported into containerd unless containerd has it already.
scratch_image() {
  local name=$1 binary=$2 user=${3:-65532:65532} ref context
  ref=$(image_ref "$name")
  if ! ctr --address "$containerd_socket" -n k8s.io images ls -q | grep -qxF "$ref"; then
    if ! podman image exists "$ref"; then
      context=$(mktemp -d)
      cp "$(readlink -f "$binary")" "$context/$name"
      printf 'FROM scratch\nCOPY %s /%s\nUSER %s\nENTRYPOINT ["/%s"]\n' "$name" "$name" "$user" "$name" >"$context/Containerfile"
      podman build --quiet --tag "$ref" "$context" >/dev/null
      rm -rf "$context"
    fi
    import_image "$ref"
  fi
}

# import_image REF: from podman's store into containerd's k8s.io namespace.
import_image() {
  log "import $1 into containerd"
  podman save "$1" | ctr --address "$containerd_socket" -n k8s.io images import --digests - >/dev/null
}

install_addons() {
  scratch_image coredns "$bin/coredns"
  # kube-network-policies programs nftables in the host's network namespace: it runs as root.
  scratch_image kube-network-policies "$bin/kube-network-policies" 0:0
  render_manifest "$here/manifests/addons.yaml" | kubectl apply --server-side -f - >/dev/null
  kubectl -n kube-system rollout status deployment/coredns --timeout=180s
  kubectl -n kube-system rollout status daemonset/kube-network-policies --timeout=180s
}

# render_manifest FILE: FILE with ${NAME} replaced by the cluster's settings (envsubst-style, only these).
render_manifest() {
  sed -e "s|\${COREDNS_IMAGE}|$(image_ref coredns)|g" \
    -e "s|\${NETWORK_POLICIES_IMAGE}|$(image_ref kube-network-policies)|g" \
    -e "s|\${DNS_SERVICE_IP}|$dns_service_ip|g" -e "s|\${NODE_NAME}|$node_name|g" \
    -e "s|\${PROVISIONER_NAME}|$provisioner_name|g" "$1"
}

# The trainer image: built from this checkout offline and pushed to the loopback registry with the
# project's own `make image-offline` and `make push`, so the kubelet pulls it as a user's cluster would.
trainer_image() {
  if [[ -n "${TRAINER_IMAGE:-}" ]]; then echo "$TRAINER_IMAGE"; return; fi
  local ref variant=cpu
  # The offline CPU build needs a CPU torch wheel on disk; without one, the CUDA image, which runs on CPU too.
  if [[ -z "${TORCH_WHEEL:-}" ]] && ! compgen -G '/opt/wheels/torch-*+cpu-*.whl' >/dev/null; then
    log "no CPU torch wheel in /opt/wheels (or TORCH_WHEEL): the cluster runs the CUDA image on CPU"
    variant=cuda
  fi
  ref="$registry/pytorchjob-mnist/trainer:$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/pyproject.toml")-$variant"
  if ! curl -fsS -o /dev/null "http://$registry/v2/pytorchjob-mnist/trainer/manifests/${ref##*:}"; then
    podman image exists "$ref" || make -C "$repo" --no-print-directory image-offline VARIANT="$variant" IMG="$ref" >&2
    CONTAINERS_REGISTRIES_CONF="$etc/registries.conf" make -C "$repo" --no-print-directory push \
      IMG="$ref" CONTAINER_TOOL=podman ALLOW_UNCOMMITTED=1 >&2
  fi
  echo "$ref"
}

install_operator() {
  local images ref values=$here/training-operator-values.yaml
  if [[ ! -x "$here/operators.sh" ]]; then
    log "hack/cluster/operators.sh is missing: the training-operator is not installed"
    return
  fi
  images=$("$here/operators.sh" build)
  while read -r ref; do
    [[ -z "$ref" ]] || ctr --address "$containerd_socket" -n k8s.io images ls -q | grep -qxF "$ref" || import_image "$ref"
  done <<<"$images"
  if ! helm status training-operator -n kubeflow >/dev/null 2>&1; then
    kubectl create namespace kubeflow --dry-run=client -o yaml | kubectl apply -f - >/dev/null
    kubectl label namespace kubeflow --overwrite pod-security.kubernetes.io/enforce=restricted >/dev/null
    helm install training-operator "$repo/charts/training-operator" -n kubeflow -f "$values" --wait --timeout 5m >&2
  fi
}

# ---------------------------------------------------------------------------------------------------

up() {
  require_root
  install_packages
  mkdir -p "$bin" "$etc" "$run" "$state" "$logs" "$pki" "$cluster_cache/bin"
  ensure_tools
  local started=$SECONDS
  build_binaries
  log "binaries ready after $((SECONDS - started)) s"
  make_pki
  network_up
  write_configs
  write_registry_config
  start_control_plane
  scratch_image pause "$bin/pause" 65535:65535
  start_node
  install_addons
  local trainer
  trainer=$(trainer_image)
  install_operator
  log "cluster up after $((SECONDS - started)) s; logs in $logs"
  echo "TRAINER_IMAGE=$trainer" >"$cluster_dir/trainer-image"
  print_env
}

print_env() {
  [[ -f "$kubeconfig" && -f "$cluster_dir/trainer-image" ]] || { echo "no cluster is up in $cluster_dir" >&2; exit 1; }
  cat "$cluster_dir/trainer-image"
  echo "KUBECONFIG=$kubeconfig"
}

down() {
  require_root
  local name
  # The kubelet first, so it recreates nothing; then the pods, through the CRI, whose CNI teardown
  # removes their interfaces and leases; then the rest, newest first.
  stop_process kubelet
  if [[ -S "$containerd_socket" ]] && is_running containerd; then
    "$bin/stop-pods" --endpoint "unix://$containerd_socket" || log "some pods did not stop cleanly"
  fi
  for name in registry provisioner kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd containerd; do
    stop_process "$name"
  done
  [[ ! -x "$bin/kube-proxy" ]] || "$bin/kube-proxy" --cleanup >/dev/null 2>&1 || true
  remove_host_state
  log "cluster down; its binaries stay in $cluster_cache, its state in $cluster_dir"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) print_env ;;
  *) echo "usage: $0 up|down|env" >&2; exit 2 ;;
esac
