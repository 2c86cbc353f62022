"""The Argo CD Applications of ci/argocd/apps: the namespaces they create enforce Pod Security."""

from __future__ import annotations

import pytest
import yaml

from tests.support.paths import REPO

APPS = sorted((REPO / "ci" / "argocd" / "apps").glob("*.yaml"))


@pytest.mark.parametrize("app_file", APPS, ids=[app.name for app in APPS])
def test_created_namespaces_enforce_pod_security_restricted(app_file):
    """CreateNamespace alone makes an unlabelled namespace, where any pod spec is admitted."""
    app = yaml.safe_load(app_file.read_text())
    policy = app["spec"]["syncPolicy"]
    assert "CreateNamespace=true" in policy["syncOptions"]
    labels = policy["managedNamespaceMetadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert app["spec"]["source"]["path"].startswith("charts/"), "a chart whose pods the tests check against restricted"
