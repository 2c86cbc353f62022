# shellcheck shell=bash
# What cluster.sh and the e2e's local provider share: where the cluster keeps its state, and how its
# processes are started and stopped (by their own pids, recorded in $run).

cluster_dir=${CLUSTER_DIR:-$repo/.cluster}
mkdir -p "$cluster_dir"
cluster_dir=$(cd "$cluster_dir" && pwd)
cluster_cache=${CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pytorchjob-mnist/cluster}
bin=$cluster_dir/bin
etc=$cluster_dir/etc
run=$cluster_dir/run
state=$cluster_dir/state
logs=$cluster_dir/logs
pki=$cluster_dir/pki
kubeconfig=$cluster_dir/kubeconfig
containerd_socket=$run/containerd.sock
registry=127.0.0.1:${REGISTRY_PORT:-5050}
provisioner_name=pytorchjob-mnist.local/host-dir
KUBECTL=${KUBECTL:-$repo/.tools/bin/kubectl}
HELM=${HELM:-$repo/.tools/bin/helm}

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

die() {
  log "$*"
  log "logs: $logs"
  exit 1
}

require_root() { [[ "$(id -u)" == 0 ]] || die "the cluster needs root (containerd, the kubelet, iptables)"; }

# wait_until SECONDS DESCRIPTION COMMAND...: retry COMMAND every 2 s; on timeout, show its last output.
wait_until() {
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out waiting for $what; the last try said:"
      "$@" >&2 || true
      die "gave up on $what"
    fi
    sleep 2
  done
}

# The Kubernetes version the kubernetes module pins.
kubernetes_version() { sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\).*/\1/p' "$here/modules/kubernetes/go.mod"; }

# image_ref NAME: the local image of the program $bin/NAME, tagged with its build's cache key.
image_ref() {
  local build
  build=$(basename "$(dirname "$(readlink "$bin/$1")")")
  echo "localhost/pytorchjob-mnist/$1:${build##*-}"
}

install_packages() {
  local package missing=()
  for package in containerd runc containernetworking-plugins iptables conntrack nftables podman \
    docker-registry debootstrap openssl curl; do
    dpkg-query -W -f '${Status}' "$package" 2>/dev/null | grep -q 'ok installed' || missing+=("$package")
  done
  ((${#missing[@]} == 0)) && return
  log "apt-get install ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

ensure_tools() {
  [[ -x "$KUBECTL" && -x "$HELM" ]] || REQUIRE_HELM=1 bash "$repo/ci/install-tools.sh" >&2
}

# is_running NAME: whether the process recorded for NAME still runs the program it was started as.
is_running() {
  local pid exe
  [[ -f "$run/$1.pid" ]] || return 1
  read -r pid exe <"$run/$1.pid"
  [[ "$(readlink -f "/proc/$pid/exe" 2>/dev/null)" == "$exe" ]]
}

# start NAME COMMAND...: run COMMAND in a session of its own, logging to $logs/NAME.log, unless NAME
# runs already.
start() {
  local name=$1 exe
  shift
  if is_running "$name"; then return; fi
  exe=$(readlink -f "$(command -v "$1")")
  log "start $name"
  setsid "$@" >>"$logs/$name.log" 2>&1 </dev/null &
  echo "$! $exe" >"$run/$name.pid"
  sleep 0.5
  is_running "$name" || { tail -n 20 "$logs/$name.log" >&2; die "$name exited at once"; }
}

# stop_process NAME: SIGTERM, then SIGKILL after 30 s, to the pid recorded for NAME.
stop_process() {
  local pid exe i
  if is_running "$1"; then
    read -r pid exe <"$run/$1.pid"
    log "stop $1 (pid $pid)"
    kill -TERM "$pid"
    for ((i = 0; i < 60; i++)); do
      is_running "$1" || break
      sleep 0.5
    done
    ! is_running "$1" || kill -KILL "$pid"
  fi
  rm -f "$run/$1.pid"
}

# remove_host_state: what the cluster changed outside its processes: mounts under $cluster_dir, its
# interfaces, iptables and nftables rules, the pods' cgroups, and the sysctls it set.
remove_host_state() {
  local mount link table family tool forward bridge_calls
  # Deepest first; a busy one is detached (-l) rather than left.
  while read -r mount; do
    umount "$mount" 2>/dev/null || umount -l "$mount" || true
  done < <(awk -v dir="$cluster_dir/" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  for link in pjm-cni0 pjm0; do
    ! ip link show "$link" >/dev/null 2>&1 || ip link delete "$link"
  done
  # kube-proxy --cleanup (in down) removes its own chains; the kubelet's canaries and anything left go here.
  for tool in iptables ip6tables; do
    for table in filter nat mangle; do
      if "$tool-save" -t "$table" 2>/dev/null | grep -q 'KUBE-'; then
        "$tool-save" -t "$table" | grep -v 'KUBE-' | "$tool-restore" -T "$table"
      fi
    done
  done
  for family in inet ip ip6; do
    ! nft list table "$family" kube-network-policies >/dev/null 2>&1 || nft delete table "$family" kube-network-policies
  done
  for table in /sys/fs/cgroup/*/kubepods; do
    [[ -d "$table" ]] && find "$table" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  if [[ -f "$run/sysctls" ]]; then
    read -r forward bridge_calls <"$run/sysctls"
    sysctl -qw "net.ipv4.ip_forward=$forward" "net.bridge.bridge-nf-call-iptables=$bridge_calls"
    rm -f "$run/sysctls"
  fi
}
