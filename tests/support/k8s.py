"""Offline validation of rendered manifests against Kubernetes' published JSON schemas."""
from __future__ import annotations

import kubernetes_validate

# The oldest Kubernetes release we support and the newest one kubernetes-validate knows.
OLDEST_KUBERNETES = "1.29"
NEWEST_KUBERNETES = kubernetes_validate.latest_version()
KUBERNETES_VERSIONS = (OLDEST_KUBERNETES, NEWEST_KUBERNETES)


def validate_builtin(doc: dict, version: str) -> None:
    """Raise if `doc` (a built-in kind) does not validate against Kubernetes `version` schemas.

    Custom resources (e.g. PyTorchJob) are not known to kubernetes-validate; validate them
    against our own CRD instead.
    """
    kubernetes_validate.validate(doc, version, strict=True)
