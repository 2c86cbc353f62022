{{/* Chart name, overridable. */}}
{{- define "training-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name of the chart's objects: the release name when it already contains the chart name
(`helm install training-operator …` gives "training-operator"), else "<release>-<chart>".
*/}}
{{- define "training-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "training-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "training-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "training-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "training-operator.labels" -}}
helm.sh/chart: {{ include "training-operator.chart" . }}
{{ include "training-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubeflow
{{- end }}

{{/*
The operator pod's labels: all but helm.sh/chart and app.kubernetes.io/version, which change with
every release. A changed pod template restarts the operator (Recreate without leader election),
and while none runs its webhook refuses every PyTorchJob write in the cluster; a new image, or
any setting of the pod's, still restarts it.
*/}}
{{- define "training-operator.podLabels" -}}
{{- omit (include "training-operator.labels" . | fromYaml) "helm.sh/chart" "app.kubernetes.io/version" | toYaml }}
{{- with .Values.podLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "training-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "training-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create=false: name an existing ServiceAccount" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The webhook Service and the cert Secret: the operator's cert rotator issues a certificate for
<service>.<namespace>.svc and stores it in the Secret, so both names are passed as flags from here.
*/}}
{{- define "training-operator.webhookServiceName" -}}
{{- include "training-operator.fullname" . }}
{{- end }}

{{- define "training-operator.webhookSecretName" -}}
{{- printf "%s-webhook-cert" (include "training-operator.fullname" .) }}
{{- end }}

{{- define "training-operator.initContainerConfigMapName" -}}
{{- printf "%s-pytorch-init-container" (include "training-operator.fullname" .) }}
{{- end }}

{{/*
An image reference from {registry, repository, tag, digest}; usage:
  include "training-operator.image" (dict "image" .Values.image "key" "image")
*/}}
{{- define "training-operator.image" -}}
{{- $image := .image }}
{{- if not (or $image.tag $image.digest) }}
{{- fail (printf "%s.tag or %s.digest must be set: give the image a tag (e.g. v1-93c5489) or a sha256 digest" .key .key) }}
{{- end }}
{{- $ref := $image.repository }}
{{- $firstPart := splitList "/" $image.repository | first }}
{{- if and $image.registry (gt (len (splitList "/" $image.repository)) 1) (or (contains "." $firstPart) (contains ":" $firstPart) (eq $firstPart "localhost")) }}
{{- fail (printf "%s.repository %s starts with what looks like a registry host (%s), and %s.registry %s would be put in front of it; set %s.registry to %s and drop it from %s.repository, or set %s.registry to \"\" and give the whole reference in %s.repository (also the way for a project whose name has a dot)" .key $image.repository $firstPart .key $image.registry .key $firstPart .key .key .key) }}
{{- end }}
{{- if $image.registry }}
{{- $ref = printf "%s/%s" $image.registry $image.repository }}
{{- end }}
{{- if $image.tag }}
{{- $ref = printf "%s:%s" $ref $image.tag }}
{{- end }}
{{- if $image.digest }}
{{- $ref = printf "%s@%s" $ref $image.digest }}
{{- end }}
{{- $ref }}
{{- end }}

{{/* crds.keep keeps the CRD, and with it every PyTorchJob: Helm on uninstall; Argo CD on app
deletion (it reads Helm's annotation as Delete=false) and on pruning, when the CRD drops out of
the app's manifests (crds.enabled=false), through Prune=false in the app's sync options. Its
compare option IgnoreExtraneous then keeps the unpruned CRD from holding the app OutOfSync. */}}
{{- define "training-operator.crdAnnotations" -}}
{{- $annotations := deepCopy (default dict .Values.crds.annotations) }}
{{- if .Values.crds.keep }}
{{- $_ := set $annotations "helm.sh/resource-policy" "keep" }}
{{- $_ = include "training-operator.addOption" (dict "annotations" $annotations "key" "argocd.argoproj.io/sync-options" "option" "Prune=false") }}
{{- $_ = include "training-operator.addOption" (dict "annotations" $annotations "key" "argocd.argoproj.io/compare-options" "option" "IgnoreExtraneous") }}
{{- end }}
{{- with $annotations }}{{ toYaml . }}{{ end }}
{{- end }}

{{/* Adds .option to the comma-separated list in .annotations[.key], unless it is there already. */}}
{{- define "training-operator.addOption" -}}
{{- $options := splitList "," (get .annotations .key) | compact }}
{{- if not (has .option $options) }}
{{- $_ := set .annotations .key (append $options .option | join ",") }}
{{- end }}
{{- end }}

{{/* Where the init-container template ConfigMap is mounted in the operator's pod. */}}
{{- define "training-operator.initTemplateDir" -}}
/etc/training-operator
{{- end }}

{{/* The operator's flags from the values; extraArgs follow them (validateValues keeps those apart). */}}
{{- define "training-operator.args" -}}
# Only PyTorchJob: every other enabled scheme would crash-loop on its missing CRD.
- --enable-scheme=pytorchjob
- --metrics-bind-address=:{{ .Values.metrics.port }}
- --health-probe-bind-address=:{{ .Values.healthPort }}
- --webhook-server-port={{ .Values.webhook.port }}
- --webhook-service-name={{ include "training-operator.webhookServiceName" . }}
- --webhook-secret-name={{ include "training-operator.webhookSecretName" . }}
- --pytorch-init-container-template-file={{ include "training-operator.initTemplateDir" . }}/initContainer.yaml
- --pytorch-init-container-image={{ include "training-operator.image" (dict "image" .Values.initContainer.image "key" "initContainer.image") }}
- --pytorch-init-container-max-tries={{ .Values.initContainer.maxTries }}
- --controller-threads={{ .Values.controllerThreads }}
- --kube-api-qps={{ .Values.kubeAPI.qps }}
- --kube-api-burst={{ .Values.kubeAPI.burst }}
- --zap-log-level={{ .Values.logLevel }}
{{- if .Values.leaderElection.enabled }}
- --leader-elect
{{- end }}
{{- with .Values.watchNamespace }}
- --namespace={{ . }}
{{- end }}
{{- with .Values.gangSchedulerName }}
- --gang-scheduler-name={{ . }}
{{- end }}
{{- end }}

{{/* Combinations the schema cannot express; fail early with the fix in the message. */}}
{{- define "training-operator.validateValues" -}}
{{- if eq .Values.watchNamespace .Release.Namespace }}
{{- fail (printf "watchNamespace=%s is the release namespace, which holds the operator's ServiceAccount and webhook CA key: whoever may create PyTorchJobs there could run pods as the operator and take over its webhook. Install the operator in a namespace of its own (e.g. helm install -n training-operator) and keep watchNamespace=%s" .Values.watchNamespace .Values.watchNamespace) }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicaCount=%d needs leaderElection.enabled=true: without it every replica reconciles the same PyTorchJobs" (int .Values.replicaCount)) }}
{{- end }}
{{- $pdb := .Values.podDisruptionBudget }}
{{- if and $pdb.enabled (le (int .Values.replicaCount) (int $pdb.minAvailable)) }}
{{- fail (printf "podDisruptionBudget.minAvailable=%d with replicaCount=%d lets no replica be evicted, so every node drain would hang; set replicaCount above it (with leaderElection.enabled=true), or podDisruptionBudget.enabled=false" (int $pdb.minAvailable) (int .Values.replicaCount)) }}
{{- end }}
{{- $seen := dict }}
{{- range list (list "webhook.port" .Values.webhook.port) (list "metrics.port" .Values.metrics.port) (list "healthPort" .Values.healthPort) }}
{{- $name := index . 0 }}
{{- $port := int (index . 1) }}
{{- with get $seen (toString $port) }}
{{- fail (printf "%s and %s are both %d: the operator's servers cannot share a port; give each its own" . $name $port) }}
{{- end }}
{{- $_ := set $seen (toString $port) $name }}
{{- end }}
{{- if and .Values.networkPolicy.enabled .Values.metrics.serviceMonitor.enabled (not .Values.networkPolicy.metricsFrom) }}
{{- fail "networkPolicy.enabled closes the metrics port to all but networkPolicy.metricsFrom, which is empty, so the ServiceMonitor's Prometheus could not scrape: add its namespace or pods to networkPolicy.metricsFrom, e.g. [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]" }}
{{- end }}
{{- if and (eq (int .Values.replicaCount) 0) (eq .Values.webhook.failurePolicy "Fail") }}
{{- fail "replicaCount=0 leaves the webhook without a server, and webhook.failurePolicy=Fail then rejects every PyTorchJob create and update in the cluster; set replicaCount to 1 or more, or webhook.failurePolicy to Ignore while the operator is scaled down" }}
{{- end }}
{{- $selector := include "training-operator.selectorLabels" . | fromYaml }}
{{- $chartLabels := include "training-operator.labels" . | fromYaml }}
{{- range $key, $_ := .Values.podLabels }}
{{- if hasKey $selector $key }}
{{- fail (printf "podLabels: %q is one of the Deployment's selector labels, and another value would leave the selector matching no pod; remove it from podLabels" $key) }}
{{- end }}
{{- end }}
{{- /* A repeated key renders twice: Helm keeps the last, but kustomize, Flux and post-renderers refuse the YAML. */}}
{{- range $value, $labels := dict "podLabels" .Values.podLabels "metrics.serviceMonitor.labels" .Values.metrics.serviceMonitor.labels }}
{{- range $key, $_ := $labels }}
{{- if hasKey $chartLabels $key }}
{{- fail (printf "%s: %q is one of the chart's own labels, which it sets itself; remove it from %s, or use a key of your own (e.g. team)" $value $key $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- /* With the flags that only some values render (leaderElection.enabled, watchNamespace, gangSchedulerName). */}}
{{- $chartFlags := list "--leader-elect" "--namespace" "--gang-scheduler-name" }}
{{- range include "training-operator.args" . | fromYamlArray }}
{{- $chartFlags = append $chartFlags (regexFind "^--[^=]+" .) }}
{{- end }}
{{- range .Values.extraArgs }}
{{- $flag := regexFind "^--[^=]+" . }}
{{- if eq $flag "--enable-scheme" }}
{{- fail (printf "extraArgs: %q enables another job kind, but this chart installs the CRD and RBAC of PyTorchJob alone, and the operator stops on a kind whose CRD is missing; remove it, and install the Kubeflow Trainer manifests for other kinds" .) }}
{{- end }}
{{- if has $flag $chartFlags }}
{{- fail (printf "extraArgs: %q sets %s, which the chart already sets from its values and ties to the rest of the release (Service ports, probes, RBAC, webhook); set the matching value instead (e.g. metrics.port, logLevel, leaderElection.enabled, watchNamespace)" . $flag) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
RBAC rules the operator needs on namespaced resources, for PyTorchJob only (no other job kinds,
no wildcards). Used by the ClusterRole, or by the Role in namespace-scoped mode. Secrets are not
here: see training-operator.webhookSecretRules.
*/}}
{{- define "training-operator.namespacedRules" -}}
- apiGroups: [""]
  resources: [pods]
  verbs: [create, delete, get, list, patch, update, watch]
- apiGroups: [""]
  resources: [services]
  verbs: [create, delete, get, list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch, update]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch, update]
- apiGroups: [kubeflow.org]
  resources: [pytorchjobs]
  verbs: [delete, get, list, patch, update, watch]
- apiGroups: [kubeflow.org]
  resources: [pytorchjobs/status]
  verbs: [get, patch, update]
- apiGroups: [kubeflow.org]
  resources: [pytorchjobs/finalizers]
  verbs: [update]
# elasticPolicy.metrics makes the operator manage an HPA per job.
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [create, delete, get, list, patch, update, watch]
# PodGroups are watched whenever Volcano's or scheduler-plugins' CRDs exist.
- apiGroups: [scheduling.volcano.sh, scheduling.x-k8s.io]
  resources: [podgroups]
  verbs: [create, delete, get, list, patch, update, watch]
{{- end }}

{{/*
The cert rotator keeps the webhook certificate in one Secret of the release namespace, read through
its own cache limited to that namespace, so these rules go in the Role in every mode, never in the
ClusterRole. list/watch (the cache) cannot be limited by name; get/update are.
*/}}
{{- define "training-operator.webhookSecretRules" -}}
- apiGroups: [""]
  resources: [secrets]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [{{ include "training-operator.webhookSecretName" . }}]
  verbs: [get, update]
{{- end }}

{{/* The webhook configuration is cluster-scoped; its name is fixed in the operator binary. */}}
{{- define "training-operator.webhookConfigurationRules" -}}
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  verbs: [list, watch]
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [validator.training-operator.kubeflow.org]
  verbs: [get, update]
{{- end }}

{{/*
checkov (a static analyser of Kubernetes manifests; tests/charts/test_checkov.py runs it on every
rendering the tests make) skips a check on an object that carries "checkov.io/skip<N>: <check>=<reason>".
These are the checks that do not fit the operator by design, each with its reason; the README's
Security section lists them. A skip is rendered only where its check would fail.
*/}}

{{/* The annotations of a list of [check, reason] pairs (JSON), at column 0. checkov splits at "=". */}}
{{- define "training-operator.checkovSkips" -}}
{{- range $index, $skip := fromJsonArray . }}
checkov.io/skip{{ add1 $index }}: {{ printf "%s=%s" (index $skip 0) (index $skip 1) | quote }}
{{- end }}
{{- end }}

{{/* The Deployment's skips, as JSON pairs. */}}
{{- define "training-operator.deploymentCheckovSkips" -}}
{{- $skips := list (list "CKV_K8S_38" "the operator calls the Kubernetes API with its ServiceAccount's token") }}
{{- if not (dig "limits" "cpu" "" (default dict .Values.resources)) }}
{{- $skips = append $skips (list "CKV_K8S_11" "the CPU request reserves the cores and a limit would only throttle the webhook; set resources.limits.cpu for one") }}
{{- end }}
{{- if not .Values.image.digest }}
{{- $skips = append $skips (list "CKV_K8S_43" "the tag names upstream's commit; image.digest pins the image") }}
{{- $skips = append $skips (list "CKV_K8S_15" "IfNotPresent pulls a tag once per node; image.digest pins the image instead") }}
{{- end }}
{{- toJson $skips }}
{{- end }}
