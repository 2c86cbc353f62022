{{/* Names and labels of the chart's objects. */}}

{{/* Chart name, for the app.kubernetes.io/name label. */}}
{{- define "pytorchjob-mnist.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the job and prefix of every other object. It is the release name (not "<release>-<chart>")
because the job's controller derives pod and Service names from it and the trainer sees it in
MASTER_ADDR; it is validated, never truncated, in pytorchjob-mnist.validate.names.
*/}}
{{- define "pytorchjob-mnist.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride }}
{{- end }}

{{- define "pytorchjob-mnist.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "pytorchjob-mnist.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pytorchjob-mnist.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The labels the chart sets on every object; `labels` may not repeat them. */}}
{{- define "pytorchjob-mnist.chartLabels" -}}
helm.sh/chart: {{ include "pytorchjob-mnist.chart" . }}
{{ include "pytorchjob-mnist.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pytorchjob-mnist.labels" -}}
{{ include "pytorchjob-mnist.chartLabels" . }}
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
The job's labels: all but helm.sh/chart and app.kubernetes.io/version. Those change with every
release, and the job's manifest should change only when the job does: Argo CD would otherwise show a
running job OutOfSync after a release that changed nothing about it, and a sync option such as
Replace=true would restart it (a pinned image.tag or digest keeps the image; the default tag
changes with appVersion, and so the job).
*/}}
{{- define "pytorchjob-mnist.jobLabels" -}}
{{- omit (include "pytorchjob-mnist.labels" . | fromYaml) "helm.sh/chart" "app.kubernetes.io/version" | toYaml }}
{{- end }}

{{/* The job's metadata: name, namespace, labels (with Kueue's queue) and annotations, at column 0. */}}
{{- define "pytorchjob-mnist.jobMetadata" -}}
name: {{ include "pytorchjob-mnist.fullname" . }}
namespace: {{ .Release.Namespace }}
labels:
  {{- include "pytorchjob-mnist.jobLabels" . | nindent 2 }}
  {{- with .Values.kueue.queueName }}
  kueue.x-k8s.io/queue-name: {{ . | quote }}
  {{- end }}
{{- with .Values.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The manager that hands a job to MultiKueue (kueue.multiKueue): the value of the job's managedBy
field, which this cluster's controller leaves to Kueue and Kueue dispatches on. */}}
{{- define "pytorchjob-mnist.multiKueueManager" -}}
kueue.x-k8s.io/multikueue
{{- end }}

{{/* The ServiceAccount of every pod: serviceAccount.name, else the one the chart creates
(serviceaccount.yaml), named apart from the namespace's `default` whatever the release is called. */}}
{{- define "pytorchjob-mnist.serviceAccountName" -}}
{{- default (printf "%s-workload" (include "pytorchjob-mnist.fullname" .)) .Values.serviceAccount.name }}
{{- end }}

{{- define "pytorchjob-mnist.claimName" -}}
{{- default (printf "%s-storage" (include "pytorchjob-mnist.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* Cluster-scoped, so the namespace is part of the name. */}}
{{- define "pytorchjob-mnist.hostPathVolumeName" -}}
{{- printf "%s-%s-storage" .Release.Namespace (include "pytorchjob-mnist.fullname" .) }}
{{- end }}

{{/* Keeps the volume: Helm on uninstall; Argo CD both on app deletion (it reads Helm's annotation
as Delete=false) and on pruning, when the volume drops out of the rendered manifests, where
IgnoreExtraneous keeps the unpruned volume from holding the app OutOfSync. */}}
{{- define "pytorchjob-mnist.keepAnnotations" -}}
helm.sh/resource-policy: keep
argocd.argoproj.io/sync-options: Prune=false
argocd.argoproj.io/compare-options: IgnoreExtraneous
{{- end }}
