"""charts/training-operator rendered with real Helm 3 and Helm 4 binaries (the `helm` fixture)."""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.helm import (
    SCHEMA_REFUSAL,
    Helm,
    by_kind,
    notes_preview_chart,
    one,
    render_notes,
    set_chart_field,
    umbrella_chart,
)
from tests.support.k8s import KUBERNETES_VERSIONS, validate_builtin
from tests.support.paths import OPERATOR_CHART, REPO
from tests.support.pss import container_violations, restricted_violations

CI_VALUES = sorted(OPERATOR_CHART.glob("ci/*-values.yaml"))
# None = chart defaults; then every chart-testing values file.
VARIANTS = [None, *CI_VALUES]
VARIANT_IDS = ["defaults", *(f.name for f in CI_VALUES)]
RELEASE, NAMESPACE = "training-operator", "kubeflow"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
# Kinds from CRDs that kubernetes-validate does not know.
NOT_BUILTIN = {"ServiceMonitor"}


@functools.cache
def _render(helm: Helm, values_file=None, set_items: tuple = ()) -> tuple:
    docs = helm.render(
        OPERATOR_CHART,
        values_files=(values_file,) if values_file else (),
        set_values=dict(set_items),
        release=RELEASE,
        namespace=NAMESPACE,
    )
    return tuple(docs)


def render(helm: Helm, values_file=None, **set_values) -> list[dict]:
    """Rendered documents (cached: every combination is rendered once per Helm binary)."""
    frozen = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in set_values.items()))
    return json.loads(json.dumps(_render(helm, values_file, frozen)))


def template_error(helm: Helm, values_file: Path | None = None, **set_values) -> str:
    result = helm.template(
        OPERATOR_CHART,
        set_values=set_values,
        values_files=(values_file,) if values_file else (),
        release=RELEASE,
        namespace=NAMESPACE,
    )
    assert result.returncode != 0, f"{helm.name} accepted {values_file or set_values}"
    return result.stderr


def operator_container(docs: list[dict]) -> dict:
    return one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def flags(docs: list[dict]) -> dict[str, str | None]:
    """Operator flags as {"--name": value or None}."""
    parsed = {}
    for arg in operator_container(docs)["args"]:
        name, _, value = arg.partition("=")
        parsed[name] = value if value else None
    return parsed


def init_container_template(docs: list[dict], values: dict[str, str] | None = None) -> list[dict]:
    """The init-container ConfigMap as the operator would expand it for one Worker pod."""
    configmaps = [d for d in by_kind(docs, "ConfigMap") if "initContainer.yaml" in (d.get("data") or {})]
    assert len(configmaps) == 1
    text = configmaps[0]["data"]["initContainer.yaml"]
    for placeholder, value in (
        values or {"InitContainerImage": "alpine:3.22", "MaxTries": "100", "MasterAddr": "job-master-0"}
    ).items():
        text = text.replace("{{." + placeholder + "}}", value)
    assert "{{" not in text, f"unexpanded Go template action left in:\n{text}"
    return yaml.safe_load(text)


# --- lint and render: defaults and every ci/*-values.yaml -------------------------------------


@pytest.mark.both_helm_majors
@pytest.mark.parametrize("values_file", VARIANTS, ids=VARIANT_IDS)
def test_helm_lint_strict(helm, values_file):
    args = ["lint", "--strict", str(OPERATOR_CHART), "--namespace", NAMESPACE] + (
        ["-f", str(values_file)] if values_file else []
    )
    result = helm.run(*args, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout
    # Lint logs a tripped `fail` guard on stderr as a mere info line (Helm 3: "Fail:", Helm 4:
    # "funcMap fail") and passes.
    assert "Fail:" not in result.stderr and "funcMap fail" not in result.stderr, result.stderr


def test_chart_testing_finds_values_files():
    assert {f.name for f in CI_VALUES} >= {"kind-values.yaml", "namespaced-values.yaml"}


@pytest.mark.parametrize("values_file", CI_VALUES, ids=[f.name for f in CI_VALUES])
def test_chart_testing_values_do_not_keep_the_crd(values_file):
    """`ct install` installs each file in turn under a new release name: a CRD kept by the first,
    and so still owned by it, fails the next install."""
    assert yaml.safe_load(values_file.read_text())["crds"]["keep"] is False


@pytest.mark.parametrize("values_file", VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("kube_version", KUBERNETES_VERSIONS)
def test_every_manifest_is_valid_kubernetes(helm, values_file, kube_version):
    docs = render(helm, values_file)
    assert {"CustomResourceDefinition", "Deployment", "Service", "ValidatingWebhookConfiguration"} <= {
        d["kind"] for d in docs
    }
    for doc in docs:
        if doc["kind"] not in NOT_BUILTIN:
            validate_builtin(doc, kube_version)


@pytest.mark.parametrize("values_file", VARIANTS, ids=VARIANT_IDS)
def test_rbac_has_no_wildcards(helm, values_file):
    docs = render(helm, values_file)
    roles = by_kind(docs, "ClusterRole") + by_kind(docs, "Role")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), (
                    f"{role['kind']}/{role['metadata']['name']}: wildcard in {field}: {rule}"
                )
            assert not any("*" in r for r in rule["resources"]), f"{role['metadata']['name']}: {rule}"


@pytest.mark.parametrize("values_file", VARIANTS, ids=VARIANT_IDS)
def test_every_pod_spec_meets_pss_restricted(helm, values_file):
    docs = render(helm, values_file)
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert restricted_violations(pod, "operator") == []
    # The init container the operator injects into Worker pods must pass too (the pod-level
    # context belongs to the user's job, so the container must be restricted on its own).
    for container in init_container_template(docs):
        assert container_violations(container, {}, "init-pytorch") == []


def test_pss_check_reports_each_violation():
    """The `== []` checks above are only as good as the checker: it must name every broken rule,
    and nothing in a compliant container beside them."""
    pod = {
        "hostNetwork": True,
        "volumes": [{"name": "host", "hostPath": {"path": "/"}}, {"name": "scratch", "emptyDir": {}}],
        "containers": [
            {
                "name": "bad",
                "securityContext": {
                    "privileged": True,
                    "allowPrivilegeEscalation": True,
                    "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
                },
            },
            {
                "name": "good",
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "runAsNonRoot": True,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
            },
        ],
    }
    assert restricted_violations(pod, "pod") == [
        "pod.hostNetwork: must not be true",
        "pod.volumes[host]: type ['hostPath'] not allowed",
        "pod.containers[bad].securityContext.privileged: must not be true",
        "pod.containers[bad].securityContext.allowPrivilegeEscalation: must be false",
        "pod.containers[bad].securityContext.capabilities.add: only NET_BIND_SERVICE is allowed",
        "pod.containers[bad]: runAsNonRoot must be true (container or pod securityContext)",
        "pod.containers[bad]: seccompProfile.type must be RuntimeDefault or Localhost (container or pod)",
    ]


# --- operator wiring ---------------------------------------------------------------------------


def test_operator_defaults(helm):
    docs = render(helm)
    container = operator_container(docs)
    assert container["image"] == "ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489"
    operator_flags = flags(docs)
    assert operator_flags["--enable-scheme"] == "pytorchjob"
    assert "--leader-elect" not in operator_flags and "--namespace" not in operator_flags
    assert "--gang-scheduler-name" not in operator_flags
    assert operator_flags["--kube-api-qps"] == "20" and operator_flags["--kube-api-burst"] == "30"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "metrics": 8080,
        "webhook": 9443,
        "health": 8081,
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert isinstance(deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"], int)


@pytest.mark.parametrize("values_file", VARIANTS, ids=VARIANT_IDS)
def test_webhook_service_and_secret_match_the_operator_flags(helm, values_file):
    docs = render(helm, values_file)
    operator_flags = flags(docs)
    service = one(docs, "Service")
    secret = one(docs, "Secret")
    webhook_configuration = one(docs, "ValidatingWebhookConfiguration")
    assert operator_flags["--webhook-service-name"] == service["metadata"]["name"]
    assert operator_flags["--webhook-secret-name"] == secret["metadata"]["name"]
    volumes = one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-cert", "secret": {"secretName": secret["metadata"]["name"]}} in volumes
    assert webhook_configuration["metadata"]["name"] == WEBHOOK_CONFIGURATION
    (webhook,) = webhook_configuration["webhooks"]
    client = webhook["clientConfig"]
    assert "caBundle" not in client, "the operator injects caBundle; templating it fights the cert rotator"
    assert client["service"] == {
        "name": service["metadata"]["name"],
        "namespace": NAMESPACE,
        "path": "/validate-kubeflow-org-v1-pytorchjob",
        "port": 443,
    }
    webhook_port = {p["name"]: p for p in service["spec"]["ports"]}["webhook"]
    assert webhook_port["port"] == 443 and webhook_port["targetPort"] == "webhook"
    assert webhook["rules"][0]["resources"] == ["pytorchjobs"]
    assert "data" not in secret and "stringData" not in secret, "declared keys break Helm 4 upgrades"


def test_default_release_uses_upstream_names(helm):
    docs = render(helm)
    assert one(docs, "Secret")["metadata"]["name"] == "training-operator-webhook-cert"
    assert one(docs, "Service")["metadata"]["name"] == "training-operator"


def test_longest_full_name_renders_valid_objects(helm):
    """The schema allows 63 characters, and the Secret's name may be longer (253)."""
    docs = render(helm, fullnameOverride="a" * 63)
    assert one(docs, "Secret")["metadata"]["name"] == "a" * 63 + "-webhook-cert"
    for doc in docs:
        if doc["kind"] not in NOT_BUILTIN:
            validate_builtin(doc, KUBERNETES_VERSIONS[-1])


def test_init_container_template_is_mounted_and_passed(helm):
    docs = render(helm, **{"initContainer.image.registry": "mirror.local", "initContainer.image.tag": "3.21"})
    operator_flags = flags(docs)
    assert operator_flags["--pytorch-init-container-image"] == "mirror.local/library/alpine:3.21"
    template_path = operator_flags["--pytorch-init-container-template-file"]
    mount = {m["name"]: m for m in operator_container(docs)["volumeMounts"]}["init-container-template"]
    assert template_path == f"{mount['mountPath']}/initContainer.yaml"
    (init,) = init_container_template(
        docs, {"InitContainerImage": "mirror.local/library/alpine:3.21", "MaxTries": "7", "MasterAddr": "j-master-0"}
    )
    assert init["name"] == "init-pytorch" and init["image"] == "mirror.local/library/alpine:3.21"
    assert "seq 7" in init["command"][-1] and "getent hosts j-master-0" in init["command"][-1]
    # busybox nslookup (Alpine >= 3.11) exits 1 whenever any search domain says NXDOMAIN, which a
    # short in-cluster name always gets: workers would never leave init (kubeflow/pytorch-operator#216).
    assert "nslookup" not in init["command"][-1]


def run_wait_loop(helm: Helm, tmp_path, answers_after: int | None, max_tries: int = 3) -> tuple[int, list[str]]:
    """Run the rendered init command with stub `getent` and `sleep` on PATH; return (exit code, getent calls)."""
    (init,) = init_container_template(
        render(helm), {"InitContainerImage": "alpine", "MaxTries": str(max_tries), "MasterAddr": "j-master-0"}
    )
    assert init["command"][:2] == ["sh", "-c"]
    stubs = tmp_path / "bin"
    stubs.mkdir()
    calls = tmp_path / "calls"
    answer = (
        f'[ "$(wc -l < {calls})" -ge {answers_after} ] && {{ echo "10.96.0.5 $2"; exit 0; }}' if answers_after else ""
    )
    (stubs / "getent").write_text(f'#!/bin/sh\necho "$*" >> {calls}\n{answer}\nexit 2\n')
    (stubs / "sleep").write_text("#!/bin/sh\nexit 0\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    env = {"PATH": f"{stubs}:/usr/bin:/bin"}
    result = subprocess.run(
        ["sh", "-c", init["command"][2]], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    return result.returncode, calls.read_text().splitlines() if calls.exists() else []


def test_init_container_waits_until_the_master_resolves(helm, tmp_path):
    code, calls = run_wait_loop(helm, tmp_path, answers_after=2)
    assert code == 0
    assert calls == ["hosts j-master-0", "hosts j-master-0"], "stops at the first answer"


def test_init_container_gives_up_after_max_tries(helm, tmp_path):
    code, calls = run_wait_loop(helm, tmp_path, answers_after=None, max_tries=3)
    assert code != 0, "a Worker must fail its init container when the Master never resolves"
    assert len(calls) == 3


def test_leader_election_adds_flag_and_leases_rule(helm):
    without = render(helm)
    roles = by_kind(without, "ClusterRole") + by_kind(without, "Role")
    assert not any("leases" in rule["resources"] for role in roles for rule in role["rules"])
    docs = render(helm, **{"leaderElection.enabled": True, "replicaCount": 2})
    assert "--leader-elect" in flags(docs)
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert any(r["apiGroups"] == ["coordination.k8s.io"] and r["resources"] == ["leases"] for r in role["rules"])
    # client-go records an Event on the Lease at each change of leader; in watchNamespace mode no
    # other rule grants Events in the operator's own namespace.
    for scoped in (docs, render(helm, **{"leaderElection.enabled": True, "replicaCount": 2, "watchNamespace": "ml"})):
        (own,) = [role for role in by_kind(scoped, "Role") if role["metadata"]["namespace"] == NAMESPACE]
        assert {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]} in own["rules"]
    # Rendered, not left to the API server: under server-side apply an unowned rollingUpdate would
    # stay when leader election is turned off, and Recreate with rollingUpdate is refused.
    assert one(docs, "Deployment")["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }


def test_several_replicas_need_leader_election(helm):
    error = template_error(helm, replicaCount=2)
    assert "leaderElection.enabled" in error


def test_high_availability_survives_a_node_drain(helm, tmp_path):
    """ci/ha-values.yaml: a PodDisruptionBudget over the operator pods, and replicas spread by node."""
    docs = render(helm, OPERATOR_CHART / "ci" / "ha-values.yaml")
    deployment = one(docs, "Deployment")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    budget = one(docs, "PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1 < deployment["spec"]["replicas"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    # Otherwise replicas that are all unhealthy (a crash loop) can never be evicted: drains hang.
    assert budget["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    (spread,) = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    assert spread["labelSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert not by_kind(render(helm), "PodDisruptionBudget")
    own = {"matchLabels": {"team": "ml"}}
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": own,
    }
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump({"topologySpreadConstraints": [constraint]}))
    kept = one(render(helm, values_file), "Deployment")
    assert kept["spec"]["template"]["spec"]["topologySpreadConstraints"] == [constraint], "a given selector is kept"


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_budget_that_blocks_every_drain_is_refused(helm, replicas):
    error = template_error(
        helm,
        **{
            "podDisruptionBudget.enabled": True,
            "podDisruptionBudget.minAvailable": replicas,
            "replicaCount": replicas,
            "leaderElection.enabled": True,
        },
    )
    assert (
        f"podDisruptionBudget.minAvailable={replicas} with replicaCount={replicas} lets no replica be evicted" in error
    )


def test_network_policy_opens_the_webhook_to_all_and_metrics_to_the_given_peers(helm, tmp_path):
    (default,) = by_kind(render(helm), "NetworkPolicy")
    webhook, metrics = default["spec"]["ingress"]
    assert metrics == {"from": [{"namespaceSelector": {}}], "ports": [{"port": "metrics", "protocol": "TCP"}]}, (
        "by default any pod may scrape: the chart cannot know where Prometheus runs"
    )
    docs = render(helm, OPERATOR_CHART / "ci" / "tuned-values.yaml")
    policy = one(docs, "NetworkPolicy")["spec"]
    deployment = one(docs, "Deployment")
    assert policy["podSelector"]["matchLabels"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert policy["policyTypes"] == ["Ingress"], "egress stays open: the operator talks to the API server"
    webhook, metrics = policy["ingress"]
    assert webhook == {"ports": [{"port": "webhook", "protocol": "TCP"}]}, "the API server matches no selector"
    assert metrics["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    assert metrics["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    ports = {port["name"] for port in operator_container(docs)["ports"]}
    assert {"webhook", "metrics"} <= ports, "the policy's named ports exist on the container"
    unscraped_values = tmp_path / "unscraped.yaml"
    unscraped_values.write_text("networkPolicy: {metricsFrom: []}\n")
    (unscraped,) = by_kind(render(helm, unscraped_values), "NetworkPolicy")
    assert len(unscraped["spec"]["ingress"]) == 1, "no metricsFrom: only the webhook port is open"
    assert not by_kind(render(helm, **{"networkPolicy.enabled": False}), "NetworkPolicy")


def test_a_service_monitor_that_the_network_policy_would_block_is_refused(helm, tmp_path):
    unscraped_values = tmp_path / "unscraped.yaml"
    unscraped_values.write_text("networkPolicy: {metricsFrom: []}\n")
    error = template_error(helm, unscraped_values, **{"metrics.serviceMonitor.enabled": True})
    assert "add its namespace or pods to networkPolicy.metricsFrom" in error


def test_namespace_scoped_mode(helm):
    docs = render(helm, watchNamespace="ml")
    assert flags(docs)["--namespace"] == "ml"
    roles = {role["metadata"]["namespace"]: role for role in by_kind(docs, "Role")}
    bindings = {binding["metadata"]["namespace"]: binding for binding in by_kind(docs, "RoleBinding")}
    assert set(roles) == set(bindings) == {NAMESPACE, "ml"}
    job_rules = {res for rule in roles["ml"]["rules"] for res in rule["resources"]}
    assert "pods" in job_rules and "secrets" not in job_rules
    own_rules = {res for rule in roles[NAMESPACE]["rules"] for res in rule["resources"]}
    assert own_rules == {"secrets"}, "only the webhook Secret in the operator's namespace"
    for namespace, binding in bindings.items():
        assert binding["roleRef"]["name"] == roles[namespace]["metadata"]["name"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]
    operator_cluster_role = next(r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == RELEASE)
    resources = {res for rule in operator_cluster_role["rules"] for res in rule["resources"]}
    assert resources == {"validatingwebhookconfigurations"}, "cluster-wide rights beyond the webhook configuration"
    webhook = one(docs, "ValidatingWebhookConfiguration")["webhooks"][0]
    assert webhook["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "ml"}}


def test_the_release_namespace_cannot_be_the_watched_one(helm):
    """Job creators there could run pods as the operator's ServiceAccount and mount its webhook CA key."""
    error = template_error(helm, watchNamespace=NAMESPACE)
    assert f"watchNamespace={NAMESPACE} is the release namespace" in error
    assert "Install the operator in a namespace of its own" in error


@pytest.mark.parametrize("values_file", VARIANTS, ids=VARIANT_IDS)
def test_secrets_are_granted_only_in_the_release_namespace(helm, values_file):
    # The cert rotator reads the webhook Secret through a cache limited to the release namespace,
    # so no mode may grant Secrets cluster-wide.
    docs = render(helm, values_file)
    for cluster_role in by_kind(docs, "ClusterRole"):
        assert not any("secrets" in rule["resources"] for rule in cluster_role["rules"]), cluster_role["metadata"][
            "name"
        ]
    secret_name = one(docs, "Secret")["metadata"]["name"]
    assert flags(docs)["--webhook-secret-name"] == secret_name
    (role,) = [role for role in by_kind(docs, "Role") if role["metadata"]["namespace"] == NAMESPACE]
    for watched in by_kind(docs, "Role"):
        if watched is not role:
            assert not any("secrets" in rule["resources"] for rule in watched["rules"]), (
                "Secrets of the watched namespace"
            )
    secret_rules = [rule for rule in role["rules"] if "secrets" in rule["resources"]]
    assert secret_rules, "the cert rotator cannot read or update its Secret"
    by_name = [rule for rule in secret_rules if rule.get("resourceNames")]
    assert all(rule["resourceNames"] == [secret_name] for rule in by_name)
    verbs_by_name = {verb for rule in by_name for verb in rule["verbs"]}
    unnamed_verbs = {verb for rule in secret_rules if not rule.get("resourceNames") for verb in rule["verbs"]}
    assert verbs_by_name == {"get", "update"}, "only the webhook Secret may be read by name or written"
    assert unnamed_verbs == {"list", "watch"}, "the cache needs list/watch; nothing else namespace-wide"
    (binding,) = [binding for binding in by_kind(docs, "RoleBinding") if binding["metadata"]["namespace"] == NAMESPACE]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    service_account = one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}]


def test_cluster_mode_rules_cover_only_pytorchjobs(helm):
    docs = render(helm)
    operator_role = next(r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == RELEASE)
    kubeflow = {
        res for rule in operator_role["rules"] if "kubeflow.org" in rule["apiGroups"] for res in rule["resources"]
    }
    assert kubeflow == {"pytorchjobs", "pytorchjobs/status", "pytorchjobs/finalizers"}
    binding = one(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}]


def test_existing_service_account_needs_a_name(helm):
    """Without create or a name the operator would run as the namespace's `default` account, unbound."""
    error = template_error(helm, **{"serviceAccount.create": False})
    assert "serviceAccount.name is required when serviceAccount.create=false: name an existing ServiceAccount" in error


@pytest.mark.parametrize("watched", ["", "ml"], ids=["cluster", "namespaced"])
def test_existing_service_account_is_used_and_bound(helm, watched):
    """With create=false the chart must not create the account, but must still run as it and bind it."""
    docs = render(helm, watchNamespace=watched, **{"serviceAccount.create": False, "serviceAccount.name": "sa"})
    assert not by_kind(docs, "ServiceAccount")
    assert one(docs, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == "sa"
    bindings = by_kind(docs, "RoleBinding") + by_kind(docs, "ClusterRoleBinding")
    assert {b["kind"] for b in bindings} == {"RoleBinding", "ClusterRoleBinding"}
    for binding in bindings:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": NAMESPACE}], binding[
            "metadata"
        ]["name"]


def test_user_roles_aggregate_into_builtin_roles(helm):
    docs = render(helm)
    aggregated = {
        label.rsplit("-", 1)[-1]
        for role in by_kind(docs, "ClusterRole")
        for label, value in role["metadata"]["labels"].items()
        if label.startswith("rbac.authorization.k8s.io/aggregate-to-") and value == "true"
    }
    assert aggregated == {"admin", "edit", "view"}
    assert len(by_kind(render(helm, **{"rbac.aggregateToUserRoles": False}), "ClusterRole")) == 1


def test_tunables_reach_the_operator(helm):
    docs = render(
        helm,
        gangSchedulerName="volcano",
        logLevel="debug",
        controllerThreads=3,
        **{"kubeAPI.qps": 55, "kubeAPI.burst": 80, "extraArgs": ["--zap-encoder=json"]},
    )
    operator_flags = flags(docs)
    assert operator_flags["--gang-scheduler-name"] == "volcano"
    assert operator_flags["--zap-log-level"] == "debug"
    assert operator_flags["--controller-threads"] == "3"
    assert (operator_flags["--kube-api-qps"], operator_flags["--kube-api-burst"]) == ("55", "80")
    assert operator_flags["--zap-encoder"] == "json"


def test_log_level_takes_a_debug_verbosity(helm):
    assert flags(render(helm, logLevel=5))["--zap-log-level"] == "5"  # 0 is refused: REFUSED_VALUES


@pytest.mark.both_helm_majors
def test_fractional_qps_from_a_values_file_is_refused(helm, tmp_path):
    # The operator's --kube-api-qps is an int flag: 2.5 would crash-loop it (--set would pass a string).
    values = tmp_path / "values.yaml"
    values.write_text("kubeAPI:\n  qps: 2.5\n")
    error = template_error(helm, values_file=values)
    assert SCHEMA_REFUSAL in error
    assert "qps" in error


def test_init_container_user_can_be_left_to_the_platform(helm):
    (init,) = init_container_template(render(helm, **{"initContainer.runAsUser": None}))
    assert "runAsUser" not in init["securityContext"] and init["securityContext"]["runAsNonRoot"] is True


def test_scheduling_knobs_reach_the_pod(helm):
    pod = one(render(helm, priorityClassName="high", **{"nodeSelector.pool": "system"}), "Deployment")["spec"][
        "template"
    ]["spec"]
    assert pod["priorityClassName"] == "high"
    assert pod["nodeSelector"] == {"pool": "system"}


def test_image_digest_pins_the_image(helm):
    digest = "sha256:" + "a" * 64
    container = operator_container(render(helm, **{"image.digest": digest}))
    assert container["image"] == f"ghcr.io/kubeflow/training-v1/training-operator:v1-93c5489@{digest}"
    error = template_error(helm, **{"image.tag": "", "image.digest": ""})
    assert "image.tag or image.digest" in error


def test_crd_toggles(helm):
    crd = one(render(helm), "CustomResourceDefinition")
    # Kept from Helm's uninstall and, once an Argo CD app stops rendering it, from Argo CD's pruning,
    # without holding the app OutOfSync.
    assert crd["metadata"]["annotations"] == {
        "helm.sh/resource-policy": "keep",
        "argocd.argoproj.io/sync-options": "ServerSideApply=true,Prune=false",
        "argocd.argoproj.io/compare-options": "IgnoreExtraneous",
    }
    unkept = one(render(helm, **{"crds.keep": False}), "CustomResourceDefinition")
    assert unkept["metadata"]["annotations"] == {"argocd.argoproj.io/sync-options": "ServerSideApply=true"}
    bare = one(render(helm, **{"crds.annotations": None}), "CustomResourceDefinition")
    assert bare["metadata"]["annotations"] == {
        "helm.sh/resource-policy": "keep",
        "argocd.argoproj.io/sync-options": "Prune=false",
        "argocd.argoproj.io/compare-options": "IgnoreExtraneous",
    }
    own = one(
        render(helm, **{"crds.annotations.argocd\\.argoproj\\.io/compare-options": "IgnoreExtraneous"}),
        "CustomResourceDefinition",
    )
    assert own["metadata"]["annotations"]["argocd.argoproj.io/compare-options"] == "IgnoreExtraneous", "not twice"
    assert (
        "annotations"
        not in one(render(helm, **{"crds.annotations": None, "crds.keep": False}), "CustomResourceDefinition")[
            "metadata"
        ]
    )
    assert not by_kind(render(helm, **{"crds.enabled": False}), "CustomResourceDefinition")


def test_service_monitor_is_optional(helm):
    assert not by_kind(render(helm), "ServiceMonitor")
    monitor = one(
        render(helm, **{"metrics.serviceMonitor.enabled": True, "metrics.serviceMonitor.labels.release": "prom"}),
        "ServiceMonitor",
    )
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert (
        monitor["spec"]["selector"]["matchLabels"] == one(render(helm), "Deployment")["spec"]["selector"]["matchLabels"]
    )


def test_notes_tell_the_user_what_to_check(helm, tmp_path):
    chart = notes_preview_chart(OPERATOR_CHART, tmp_path)

    def notes(**set_values):
        return render_notes(helm, chart, set_values=set_values, release=RELEASE, namespace=NAMESPACE)

    text = notes()
    assert "kubectl get crd pytorchjobs.kubeflow.org" in text
    assert f"rollout status deployment/{RELEASE}" in text
    assert "--set image.repository=<registry>/trainer" in text, "a user's own build, unless a release published it"
    assert "WARNING" not in text
    assert "helm install mnist oci://ghcr.io/pytorchjob-mnist/charts/pytorchjob-mnist -n <namespace>" in text
    scoped = notes(watchNamespace="ml")
    assert "/charts/pytorchjob-mnist -n ml " in scoped, "the only namespace it watches"
    without_crd = notes(**{"crds.enabled": False})
    assert "crds.enabled=false" in without_crd
    # The command it gives must render the CRD (the template file itself is not applicable YAML).
    show_only = re.search(r"--show-only (\S+) \| kubectl apply --server-side -f -", without_crd).group(1)
    (crd,) = helm.render(OPERATOR_CHART, set_values={"crds.enabled": True}, extra=("--show-only", show_only))
    assert crd["kind"] == "CustomResourceDefinition" and crd["metadata"]["name"] == "pytorchjobs.kubeflow.org"


# --- values schema: refusals name the key --------------------------------------------------------

REFUSED_VALUES = [
    ({"replicaCount": -1}, "replicaCount"),
    ({"replicaCount": "two"}, "replicaCount"),
    ({"image.tag": 5}, "image.tag"),
    ({"image.pullPolicy": "Sometimes"}, "image.pullPolicy"),
    ({"image.digest": "sha256:short"}, "image.digest"),
    ({"kubeAPI.qps": -5}, "kubeAPI.qps"),
    ({"kubeAPI.burst": 0}, "kubeAPI.burst"),
    ({"controllerThreads": 0}, "controllerThreads"),
    ({"initContainer.maxTries": -1}, "initContainer.maxTries"),
    ({"webhook.failurePolicy": "Maybe"}, "webhook.failurePolicy"),
    ({"webhook.timeoutSeconds": 60}, "webhook.timeoutSeconds"),
    ({"metrics.port": 70000}, "metrics.port"),
    ({"logLevel": "verbose"}, "logLevel"),
    ({"logLevel": 0}, "logLevel"),
    ({"leaderElection.enabled": "yes"}, "leaderElection.enabled"),
    ({"extraArgs": ["zap-log-level=debug"]}, "extraArgs"),
    ({"unknownKey": 1}, "unknownKey"),
    ({"crds.install": True}, "install"),
    ({"initContainer.image.name": "x"}, "name"),
    ({"fullnameOverride": "Training_Operator"}, "fullnameOverride"),
    ({"fullnameOverride": "9to"}, "fullnameOverride"),
    ({"nameOverride": "-operator"}, "nameOverride"),
    ({"podSecurityContext.runAsUsr": 1000}, "runAsUsr"),
    ({"securityContext.readOnlyRootFilesytem": True}, "readOnlyRootFilesytem"),
    # Kubernetes quantities, which the API server would refuse (or the operator, for every Worker
    # pod's init container, only once a job runs).
    ({"resources.limits.memory": "512MB"}, "resources.limits.memory"),
    ({"initContainer.resources.limits.memory": "20MB"}, "initContainer.resources.limits.memory"),
    ({"initContainer.resources.requests.cpu": -1}, "initContainer.resources.requests.cpu"),
    # Image references the kubelet cannot pull (InvalidImageName): a tag or digest in the wrong value.
    ({"image.repository": "kubeflow/training-operator:v1"}, "image.repository"),
    ({"image.tag": "sha256:" + "0" * 64}, "image.tag"),
    ({"initContainer.image.tag": "3.22:latest"}, "initContainer.image.tag"),
    ({"image.repository": "Kubeflow/training-operator"}, "image.repository"),
]


def test_values_schema_closes_every_object():
    def open_objects(node, path="values"):
        if not isinstance(node, dict):
            return []
        found = [path] if "properties" in node and node.get("additionalProperties") is not False else []
        for name, child in node.get("properties", {}).items():
            found += open_objects(child, f"{path}.{name}")
        return found + open_objects(node.get("items"), f"{path}[]")

    schema = json.loads((OPERATOR_CHART / "values.schema.json").read_text())
    assert open_objects(schema) == [], "objects that would accept misspelled keys"


@pytest.mark.both_helm_majors
@pytest.mark.parametrize(("set_values", "key"), REFUSED_VALUES, ids=[k for _, k in REFUSED_VALUES])
def test_schema_refuses_bad_values_naming_the_key(helm, set_values, key):
    """The schema, not a template `fail` that happens to mention the key, refuses each value."""
    error = template_error(helm, **set_values)
    assert SCHEMA_REFUSAL in error, error
    # Helm 3 reports "a.b: …", Helm 4 "at '/a/b': …"; unknown keys appear by name in both.
    assert key in error or "/" + key.replace(".", "/") in error, error


def test_security_contexts_accept_kubernetes_fields(helm):
    pod = one(render(helm, **{"podSecurityContext.fsGroup": 65532, "securityContext.privileged": False}), "Deployment")[
        "spec"
    ]["template"]["spec"]
    assert pod["securityContext"]["fsGroup"] == 65532
    assert pod["containers"][0]["securityContext"]["privileged"] is False


@pytest.mark.both_helm_majors
def test_renders_with_helm_global_values(helm):
    # Helm hands every subchart a `global` map; a closed root schema without it breaks umbrella charts.
    assert one(render(helm, **{"global.foo": "bar"}), "Deployment")


@pytest.mark.both_helm_majors
def test_renders_as_a_subchart(helm, tmp_path):
    # The usual optional dependency: its condition key reaches the subchart's closed schema.
    parent = umbrella_chart(OPERATOR_CHART, tmp_path)
    docs = helm.render(
        parent,
        release=RELEASE,
        namespace=NAMESPACE,
        set_values={"global.imageRegistry": "mirror.local", "training-operator.enabled": True},
    )
    assert one(docs, "Deployment")["metadata"]["name"] == RELEASE
    assert (
        helm.render(parent, release=RELEASE, namespace=NAMESPACE, set_values={"training-operator.enabled": False}) == []
    )


@pytest.mark.parametrize(
    ("set_values", "expected"),
    [
        ({"metrics.port": 9443}, "webhook.port and metrics.port are both 9443"),
        ({"healthPort": 9443}, "webhook.port and healthPort are both 9443"),
        ({"healthPort": 8080}, "metrics.port and healthPort are both 8080"),
    ],
    ids=["metrics=webhook", "health=webhook", "health=metrics"],
)
def test_port_guards_name_the_values(helm, set_values, expected):
    assert expected in template_error(helm, **set_values)


def test_scaling_to_zero_needs_a_webhook_that_fails_open(helm):
    """With no endpoints, a failurePolicy Fail webhook rejects every PyTorchJob write in the cluster."""
    assert "set replicaCount to 1 or more, or webhook.failurePolicy to Ignore" in template_error(helm, replicaCount=0)
    assert (
        one(render(helm, **{"replicaCount": 0, "webhook.failurePolicy": "Ignore"}), "Deployment")["spec"]["replicas"]
        == 0
    )


@pytest.mark.parametrize("image", ["image", "initContainer.image"])
def test_a_registry_host_in_the_repository_is_not_prefixed_again(helm, image):
    """Mirroring the images, users write the host into the repository; the default registry in front
    of it would make an unpullable reference (for the init container, only once a job runs)."""
    error = template_error(helm, **{f"{image}.repository": "registry.example.com:5000/ml/mirrored"})
    assert (
        f"{image}.repository registry.example.com:5000/ml/mirrored starts with what looks like a registry host "
        "(registry.example.com:5000)"
        in error
        and f"set {image}.registry to registry.example.com:5000 and drop it from {image}.repository, "
        f'or set {image}.registry to "" and give the whole reference in {image}.repository'
        in error
    ), error
    docs = render(helm, **{f"{image}.repository": "registry.example.com:5000/ml/mirrored", f"{image}.registry": ""})
    deployment = yaml.safe_dump(one(docs, "Deployment"))
    assert "registry.example.com:5000/ml/mirrored:" in deployment and "/registry.example.com" not in deployment
    # A repository whose first part is an organisation, not a host, takes the registry as before.
    assert "mirror.example.com/kubeflow/training-v1/training-operator:" in yaml.safe_dump(
        render(helm, **{"image.registry": "mirror.example.com"})
    )


@pytest.mark.parametrize("value", ["podLabels", "metrics.serviceMonitor.labels"])
def test_labels_cannot_repeat_the_charts_own(helm, value):
    """A repeated key renders twice: Helm keeps the last, kustomize, Flux and post-renderers refuse the YAML."""
    error = template_error(
        helm, **{f"{value}.app\\.kubernetes\\.io/part-of": "ml-platform", "metrics.serviceMonitor.enabled": True}
    )
    assert f'{value}: "app.kubernetes.io/part-of" is one of the chart\'s own labels' in error, error


@pytest.mark.parametrize(
    "flag", ["--metrics-bind-address=:9090", "--webhook-server-port=9444", "--leader-elect", "--namespace=ml"]
)
def test_extra_args_cannot_override_the_charts_flags(helm, flag):
    """The last flag wins: the Service, probes and RBAC would no longer match what the operator does."""
    error = template_error(helm, extraArgs=[flag])
    assert f'extraArgs: "{flag}" sets {flag.split("=")[0]}, which the chart already sets' in error, error
    assert flags(render(helm, extraArgs=["--zap-encoder=json"]))["--zap-encoder"] == "json"


def test_extra_args_cannot_enable_job_kinds_the_chart_does_not_install(helm):
    error = template_error(helm, extraArgs=["--enable-scheme=tfjob"])
    assert (
        'extraArgs: "--enable-scheme=tfjob" enables another job kind, but this chart installs the CRD and RBAC '
        "of PyTorchJob alone" in error
    ), error


def test_pod_labels_cannot_change_the_selector_labels(helm):
    error = template_error(helm, **{"podLabels.app\\.kubernetes\\.io/instance": "other"})
    assert 'podLabels: "app.kubernetes.io/instance" is one of the Deployment\'s selector labels' in error
    labels = one(render(helm, **{"podLabels.team": "ml"}), "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert labels["team"] == "ml"


def test_a_new_release_alone_leaves_the_operator_pod_unchanged(helm, tmp_path):
    """A changed pod template restarts the operator, and until the new one is ready its webhook
    refuses every PyTorchJob write: a release that bumps only the chart's versions must not."""
    bumped = tmp_path / OPERATOR_CHART.name
    shutil.copytree(OPERATOR_CHART, bumped)
    set_chart_field(bumped, "version", "99.0.0")
    set_chart_field(bumped, "appVersion", "99.0.0")
    before, after = (one(helm.render(chart), "Deployment") for chart in (OPERATOR_CHART, bumped))
    assert before["spec"]["template"] == after["spec"]["template"]
    assert after["metadata"]["labels"]["helm.sh/chart"] == "training-operator-99.0.0"


def test_a_changed_init_container_template_restarts_the_operator(helm):
    """The operator reads the template once, at start."""

    def checksum(**set_values) -> str:
        return one(render(helm, **set_values), "Deployment")["spec"]["template"]["metadata"]["annotations"][
            "checksum/init-container"
        ]

    assert checksum(**{"initContainer.resources.limits.cpu": "200m"}) != checksum()


def test_distinct_ports_are_rendered(helm):
    ports = {
        p["name"]: p["containerPort"]
        for p in operator_container(render(helm, **{"webhook.port": 10443, "metrics.port": 9090}))["ports"]
    }
    assert ports == {"metrics": 9090, "webhook": 10443, "health": 8081}


# --- chart-testing config ------------------------------------------------------------------------


def test_yamllint_passes_on_chart_metadata_and_values():
    files = sorted(
        str(p)
        for pattern in ("charts/*/Chart.yaml", "charts/*/values.yaml", "charts/*/ci/*-values.yaml", "ct.yaml")
        for p in REPO.glob(pattern)
    )
    assert any(f.endswith("training-operator/values.yaml") for f in files)
    result = subprocess.run(
        [sys.executable, "-m", "yamllint", "--strict", "-c", str(REPO / "ci" / "lintconf.yaml"), *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_ct_config_points_at_the_charts():
    config = yaml.safe_load((REPO / "ct.yaml").read_text())
    assert config["chart-dirs"] == ["charts"]
    assert config["validate-maintainers"] is False
    assert (REPO / config["lint-conf"]).is_file()
