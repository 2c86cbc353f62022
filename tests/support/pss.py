"""Pod Security Standards "restricted" profile, checked offline on a rendered pod spec.

Follows the rules of kubernetes.io/docs/concepts/security/pod-security-standards (baseline +
restricted, latest version): returns human-readable violations instead of raising, so a test can
show all of them at once.
"""

from __future__ import annotations

# Volume types the restricted profile allows.
RESTRICTED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
}
SAFE_SECCOMP_TYPES = {"RuntimeDefault", "Localhost"}


def restricted_violations(pod_spec: dict, where: str = "pod") -> list[str]:
    """Every rule of PSS "restricted" that `pod_spec` breaks, as `<where>.<field>: <problem>`."""
    problems: list[str] = []
    pod_sc = pod_spec.get("securityContext") or {}
    for host_field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(host_field):
            problems.append(f"{where}.{host_field}: must not be true")
    for volume in pod_spec.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUME_TYPES:
            problems.append(f"{where}.volumes[{volume.get('name')}]: type {sorted(kinds)} not allowed")
    if pod_sc.get("runAsUser") == 0:
        problems.append(f"{where}.securityContext.runAsUser: must not be 0")
    containers = [
        (kind, c) for kind in ("initContainers", "containers", "ephemeralContainers") for c in pod_spec.get(kind) or []
    ]
    for kind, container in containers:
        problems += container_violations(container, pod_sc, f"{where}.{kind}[{container.get('name')}]")
    return problems


def container_violations(
    container: dict, pod_security_context: dict | None = None, where: str = "container"
) -> list[str]:
    """PSS "restricted" violations of one container, given the pod-level securityContext."""
    pod_sc = pod_security_context or {}
    sc = container.get("securityContext") or {}
    problems: list[str] = []
    if sc.get("privileged"):
        problems.append(f"{where}.securityContext.privileged: must not be true")
    if sc.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}.securityContext.allowPrivilegeEscalation: must be false")
    capabilities = sc.get("capabilities") or {}
    if "ALL" not in (capabilities.get("drop") or []):
        problems.append(f"{where}.securityContext.capabilities.drop: must include ALL")
    if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
        problems.append(f"{where}.securityContext.capabilities.add: only NET_BIND_SERVICE is allowed")
    run_as_non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
    if run_as_non_root is not True:
        problems.append(f"{where}: runAsNonRoot must be true (container or pod securityContext)")
    if sc.get("runAsUser") == 0:
        problems.append(f"{where}.securityContext.runAsUser: must not be 0")
    seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
    if seccomp not in SAFE_SECCOMP_TYPES:
        problems.append(f"{where}: seccompProfile.type must be RuntimeDefault or Localhost (container or pod)")
    for port in container.get("ports") or []:
        if port.get("hostPort"):
            problems.append(f"{where}.ports[{port.get('name')}].hostPort: not allowed")
    return problems
