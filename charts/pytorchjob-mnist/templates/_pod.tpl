{{/* The pods: placement shared by every pod that mounts the volume, and the trainer's pod template. */}}

{{/*
Why every pod that mounts the volume must run on one node, empty when they need not:
"singleNode" (persistence.singleNode=true), else auto: "existingClaim" (its access modes are
unknown), "hostPath" (one node's directory) or "accessModes" (a new claim without ReadWriteMany).
A ReadWriteOnce volume attaches to one node only, and the scheduler does not co-locate its users
by itself: a pod on another node fails with Multi-Attach.
*/}}
{{- define "pytorchjob-mnist.singleNode" -}}
{{- $p := .Values.persistence }}
{{- if not $p.enabled }}
{{- else if not (kindIs "invalid" $p.singleNode) }}{{ if $p.singleNode }}singleNode{{ end }}
{{- else if $p.existingClaim }}existingClaim
{{- else if $p.hostPath.path }}hostPath
{{- else if not (has "ReadWriteMany" $p.create.accessModes) }}accessModes
{{- end }}
{{- end }}

{{/*
Affinity of a pod that mounts the volume: the user's affinity, plus, for a single-node volume, a
required podAffinity to the release's other running pods that mount it (trainer, TensorBoard,
test). The scheduler lets the first of them go anywhere (it matches its own term) and ignores
finished pods, so a helm test after the job Succeeded is not pinned to a node nobody uses.
*/}}
{{- define "pytorchjob-mnist.affinity" -}}
{{- $affinity := deepCopy (default dict .Values.affinity) }}
{{- if include "pytorchjob-mnist.singleNode" . }}
{{- $term := dict
  "topologyKey" "kubernetes.io/hostname"
  "labelSelector" (dict
    "matchLabels" (include "pytorchjob-mnist.selectorLabels" . | fromYaml)
    "matchExpressions" (list (dict "key" "app.kubernetes.io/component" "operator" "In" "values" (list "trainer" "tensorboard" "test")))) }}
{{- $podAffinity := default dict $affinity.podAffinity }}
{{- $required := default list $podAffinity.requiredDuringSchedulingIgnoredDuringExecution }}
{{- $_ := set $podAffinity "requiredDuringSchedulingIgnoredDuringExecution" (append $required $term) }}
{{- $_ = set $affinity "podAffinity" $podAffinity }}
{{- end }}
{{- with $affinity }}{{ toYaml . }}{{ end }}
{{- end }}

{{/*
Tolerations of every pod that mounts the volume: the user's, plus the GPU taint's when gpu > 0, so
TensorBoard and the test pod can join the trainers on a single-node volume's GPU node.
*/}}
{{- define "pytorchjob-mnist.tolerations" -}}
{{- $tolerations := default list .Values.tolerations }}
{{- if gt (int .Values.gpu) 0 }}
{{- $tolerations = append $tolerations (dict "key" "nvidia.com/gpu" "operator" "Exists" "effect" "NoSchedule") }}
{{- end }}
{{- with $tolerations }}{{ toYaml . }}{{ end }}
{{- end }}

{{/*
Pod spec fields shared by every pod that mounts the volume (trainers, TensorBoard, test): service
account, pull secrets, pod security context, nodeSelector, tolerations and affinity, at column 0.
These are also all a TrainJob's runtimePatches accept of them.
*/}}
{{- define "pytorchjob-mnist.placementPodSpec" -}}
serviceAccountName: {{ include "pytorchjob-mnist.serviceAccountName" . | quote }}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . | quote }}
  {{- end }}
{{- end }}
{{- with .Values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with include "pytorchjob-mnist.tolerations" . }}
tolerations:
  {{- . | nindent 2 }}
{{- end }}
{{- with include "pytorchjob-mnist.affinity" . }}
affinity:
  {{- . | nindent 2 }}
{{- end }}
{{- end }}

{{/* placementPodSpec plus the service account token's mount, which a runtime patch cannot set. */}}
{{- define "pytorchjob-mnist.sharedPodSpec" -}}
automountServiceAccountToken: {{ .Values.serviceAccount.automountToken }}
{{ include "pytorchjob-mnist.placementPodSpec" . }}
{{- end }}

{{/* "true" when the chart renders the `helm test` pod, which reads the run's results from the volume. */}}
{{- define "pytorchjob-mnist.helmTest" -}}
{{- if and .Values.tests.enabled .Values.persistence.enabled }}true{{ end }}
{{- end }}

{{/* The trainer pod's labels: the selector labels (which the single-node podAffinity and the
NetworkPolicy match), its component and the user's. */}}
{{- define "pytorchjob-mnist.trainerPodLabels" -}}
{{ include "pytorchjob-mnist.selectorLabels" . }}
app.kubernetes.io/component: trainer
{{- with .Values.labels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The trainer pod's volumes as a YAML list: the claim (or an emptyDir without persistence), the
writable /tmp and cache dirs (the root filesystem is read-only) and the memory-backed /dev/shm. */}}
{{- define "pytorchjob-mnist.trainerVolumes" -}}
- name: storage
  {{- if .Values.persistence.enabled }}
  persistentVolumeClaim:
    claimName: {{ include "pytorchjob-mnist.claimName" . | quote }}
  {{- else }}
  emptyDir: {}
  {{- end }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.scratch.tmpSizeLimit }}
- name: cache
  emptyDir:
    sizeLimit: {{ .Values.scratch.cacheSizeLimit }}
{{- if .Values.shm.enabled }}
- name: dshm
  emptyDir:
    medium: Memory
    sizeLimit: {{ .Values.shm.sizeLimit }}
{{- end }}
{{- end }}

{{/* The trainer's pod template, for a kind whose replicas take a whole one (the PyTorchJob's Master
and Workers): its command and args are the kind's (hooks command and args). The port is the one
the training-operator v1 looks up by name. */}}
{{- define "pytorchjob-mnist.podTemplate" -}}
metadata:
  labels:
    {{- include "pytorchjob-mnist.trainerPodLabels" . | nindent 4 }}
  annotations:
    {{- include "pytorchjob-mnist.trainerPodAnnotations" (list . "[]") | nindent 4 }}
spec:
  {{- with .Values.schedulerName }}
  schedulerName: {{ . | quote }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . | quote }}
  {{- end }}
  {{- with include "pytorchjob-mnist.sharedPodSpec" . | trim }}{{ . | nindent 2 }}{{ end }}
  containers:
    - name: pytorch
      image: {{ include "pytorchjob-mnist.trainerImage" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      {{- with include "pytorchjob-mnist.kindHook" (list "command" .) }}
      command:
        {{- . | nindent 8 }}
      {{- end }}
      {{- with include "pytorchjob-mnist.kindHook" (list "args" .) }}
      args:
        {{- . | nindent 8 }}
      {{- end }}
      {{- with include "pytorchjob-mnist.workingDir" . }}
      workingDir: {{ . | quote }}
      {{- end }}
      env:
        {{- include "pytorchjob-mnist.trainerEnv" . | nindent 8 }}
      ports:
        - name: pytorchjob-port
          containerPort: 23456
          protocol: TCP
      {{- with (include "pytorchjob-mnist.resources" . | fromYaml) }}
      resources:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.securityContext }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        {{- include "pytorchjob-mnist.trainerVolumeMounts" . | nindent 8 }}
  volumes:
    {{- include "pytorchjob-mnist.trainerVolumes" . | nindent 4 }}
{{- end }}
