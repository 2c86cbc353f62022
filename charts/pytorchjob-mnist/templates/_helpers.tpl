{{/* Chart name, for the app.kubernetes.io/name label. */}}
{{- define "pytorchjob-mnist.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name of the PyTorchJob and prefix of every other object. It is the release name (not
"<release>-<chart>") because the operator derives pod and Service names from it and the trainer
sees it in MASTER_ADDR; it is validated, never truncated, in pytorchjob-mnist.validate.
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
The PyTorchJob's labels: all but helm.sh/chart and app.kubernetes.io/version. Those change with
every release, and a changed job is a replaced one under Argo CD (Replace=true), which would
restart a running job for a release that changed nothing about it (a pinned image.tag or digest
keeps the image; the default tag changes with appVersion and so restarts it anyway).
*/}}
{{- define "pytorchjob-mnist.jobLabels" -}}
{{- omit (include "pytorchjob-mnist.labels" . | fromYaml) "helm.sh/chart" "app.kubernetes.io/version" | toYaml }}
{{- end }}

{{/* Image variant: the explicit value, else cuda for GPU jobs and cpu otherwise. */}}
{{- define "pytorchjob-mnist.variant" -}}
{{- if .Values.image.variant }}{{ .Values.image.variant }}{{ else if gt (int .Values.gpu) 0 }}cuda{{ else }}cpu{{ end }}
{{- end }}

{{/* Trainer image tag, by default "<appVersion>-<variant>" like `make image` builds it. */}}
{{- define "pytorchjob-mnist.imageTag" -}}
{{- default (printf "%s-%s" .Chart.AppVersion (include "pytorchjob-mnist.variant" .)) .Values.image.tag }}
{{- end }}

{{/* Trainer image reference "<repository>:<tag>[@<digest>]". */}}
{{- define "pytorchjob-mnist.image" -}}
{{- .Values.image.repository }}:{{ include "pytorchjob-mnist.imageTag" . }}{{ with .Values.image.digest }}@{{ . }}{{ end }}
{{- end }}

{{/* Collective backend: the explicit value, else nccl for GPU jobs and gloo otherwise. */}}
{{- define "pytorchjob-mnist.backend" -}}
{{- if ne .Values.backend "auto" }}{{ .Values.backend }}{{ else if gt (int .Values.gpu) 0 }}nccl{{ else }}gloo{{ end }}
{{- end }}

{{/* "true" when the trainer runs under torchrun: torchrun.enabled, or always for a TrainJob, whose
runtime starts the command as it is and leaves the process group to torchrun's PET_* variables. */}}
{{- define "pytorchjob-mnist.torchrun" -}}
{{- if or .Values.torchrun.enabled (eq .Values.jobKind "TrainJob") }}true{{ end }}
{{- end }}

{{/* Processes per pod: the explicit value, else one process per GPU with torchrun and 1 without. */}}
{{- define "pytorchjob-mnist.nprocPerNode" -}}
{{- if .Values.nprocPerNode }}{{ .Values.nprocPerNode }}{{ else if include "pytorchjob-mnist.torchrun" . }}{{ max 1 (int .Values.gpu) }}{{ else }}1{{ end }}
{{- end }}

{{- define "pytorchjob-mnist.claimName" -}}
{{- default (printf "%s-storage" (include "pytorchjob-mnist.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

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
{{- with .Values.serviceAccount.name }}
serviceAccountName: {{ . }}
{{- end }}
{{- with .Values.image.pullSecrets }}
imagePullSecrets:
  {{- range . }}
  - name: {{ . }}
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
{{- include "pytorchjob-mnist.placementPodSpec" . }}
{{- end }}

{{/* Cluster-scoped, so the namespace is part of the name. */}}
{{- define "pytorchjob-mnist.hostPathVolumeName" -}}
{{- printf "%s-%s-storage" .Release.Namespace (include "pytorchjob-mnist.fullname" .) }}
{{- end }}

{{/* The trainer container's workingDir ("" = the image's). The image's is read-only
(readOnlyRootFilesystem), so the trainer's relative defaults (--data-dir data, --dir logs,
--save-model) go to the volume; a custom command keeps the image's, where its script may live. */}}
{{- define "pytorchjob-mnist.workingDir" -}}
{{- if or .Values.workingDir .Values.command }}{{ .Values.workingDir }}{{ else }}{{ .Values.persistence.mountPath }}{{ end }}
{{- end }}

{{/* This run's directory on the volume: model, checkpoints and TensorBoard logs live below it. */}}
{{- define "pytorchjob-mnist.runDir" -}}
{{- printf "%s/runs/%s/%s" (trimSuffix "/" .Values.persistence.mountPath) .Release.Namespace (include "pytorchjob-mnist.fullname" .) }}
{{- end }}

{{/* Where the trainer writes the model and metrics.json, and `helm test` looks for them. */}}
{{- define "pytorchjob-mnist.modelDir" -}}
{{- printf "%s/model" (include "pytorchjob-mnist.runDir" .) }}
{{- end }}

{{/* TensorBoard's --logdir: every run's event directory is below it. */}}
{{- define "pytorchjob-mnist.tensorboardDir" -}}
{{- printf "%s/tensorboard" (include "pytorchjob-mnist.runDir" .) }}
{{- end }}

{{/* Datasets are shared by all runs on the volume: they are only ever read after the download. */}}
{{- define "pytorchjob-mnist.dataDir" -}}
{{- printf "%s/datasets" (trimSuffix "/" .Values.persistence.mountPath) }}
{{- end }}

{{/* The trainer flags generated from .Values.training, as JSON: all but the directories named by
the run id, --run-id and extraArgs. Whole numbers go through int64: a values file's are floats, which toString
writes as 1e+06. */}}
{{- define "pytorchjob-mnist.trainingFlags" -}}
{{- $t := .Values.training }}
{{- $flags := list "--backend" (include "pytorchjob-mnist.backend" .) "--dataset" $t.dataset "--recipe" $t.recipe }}
{{- with $t.fallbackDataset }}
{{- $flags = concat $flags (list "--fallback-dataset" .) }}
{{- end }}
{{- $flags = concat $flags (list "--epochs" (int64 $t.epochs | toString)) }}
{{- /* null leaves them to the recipe. */}}
{{- if not (kindIs "invalid" $t.batchSize) }}
{{- $flags = concat $flags (list "--batch-size" (int64 $t.batchSize | toString)) }}
{{- end }}
{{- $flags = concat $flags (list "--test-batch-size" (int64 $t.testBatchSize | toString)) }}
{{- range $flag, $value := dict "--lr" $t.lr "--momentum" $t.momentum }}
{{- if not (kindIs "invalid" $value) }}
{{- $flags = concat $flags (list $flag (toString $value)) }}
{{- end }}
{{- end }}
{{- $flags = concat $flags (list
  "--seed" (int64 $t.seed | toString)
  "--log-interval" (int64 $t.logInterval | toString)
  "--data-dir" (include "pytorchjob-mnist.dataDir" .)
  "--output-dir" (include "pytorchjob-mnist.modelDir" .)
  "--checkpoint-every" (int64 $t.checkpointEvery | toString)
  "--keep-checkpoints" (int64 $t.keepCheckpoints | toString)) }}
{{- if eq (int .Values.gpu) 0 }}
{{- /* CUDA images expose every GPU of the node unless told otherwise. */}}
{{- $flags = append $flags "--no-cuda" }}
{{- end }}
{{- toJson $flags }}
{{- end }}

{{/*
Names this run's results: a digest of what shapes the run (the trainer's flags as rendered, so
`--set lr=0.01` and `lr: 0.01` agree; replicas, processes per pod, torchrun, the image and the job kind). The
trainer records it in metrics.json, so `helm test` waits for a file from a run of these values
instead of passing on one that other values left on the volume.
*/}}
{{- define "pytorchjob-mnist.runId" -}}
{{- dict "flags" (include "pytorchjob-mnist.trainingFlags" .) "extraArgs" (default list .Values.training.extraArgs)
  "workers" (int .Values.workers) "nprocPerNode" (include "pytorchjob-mnist.nprocPerNode" .)
  "torchrun" (eq (include "pytorchjob-mnist.torchrun" .) "true") "image" (include "pytorchjob-mnist.image" .) "jobKind" .Values.jobKind
  | toJson | sha256sum | trunc 16 }}
{{- end }}

{{/*
The world size a run of these values trains in (pods × nprocPerNode), which `helm test` checks
in metrics.json; empty when it is not fixed (elastic, or nprocPerNode auto/cpu/gpu).
*/}}
{{- define "pytorchjob-mnist.worldSize" -}}
{{- $nproc := include "pytorchjob-mnist.nprocPerNode" . }}
{{- if and (not .Values.elasticPolicy.enabled) (regexMatch "^[0-9]+$" $nproc) }}
{{- mul (add1 (int .Values.workers)) (atoi $nproc) }}
{{- end }}
{{- end }}

{{/*
The trainer's flags. Checkpoints and TensorBoard logs go to directories of this run's own, so
restarted pods resume it, while other values train a new run rather than meeting checkpoints
they cannot resume. extraArgs come last so that a user's flags win.
*/}}
{{- define "pytorchjob-mnist.trainerArgs" -}}
{{- $runId := include "pytorchjob-mnist.runId" . }}
{{- $runFlags := list
  "--checkpoint-dir" (include "pytorchjob-mnist.checkpointDir" .)
  "--log-dir" (printf "%s/%s" (include "pytorchjob-mnist.tensorboardDir" .) $runId)
  "--run-id" $runId }}
{{- $flags := include "pytorchjob-mnist.trainingFlags" . | fromJsonArray }}
{{- toYaml (concat $flags $runFlags (default list .Values.training.extraArgs)) }}
{{- end }}

{{/* This run's checkpoints: same values, same directory. */}}
{{- define "pytorchjob-mnist.checkpointDir" -}}
{{- printf "%s/checkpoints/%s" (include "pytorchjob-mnist.runDir" .) (include "pytorchjob-mnist.runId" .) }}
{{- end }}

{{/* Container resources with the GPU limit merged in (GPUs belong in limits only). */}}
{{- define "pytorchjob-mnist.resources" -}}
{{- $resources := deepCopy (default dict .Values.resources) }}
{{- if gt (int .Values.gpu) 0 }}
{{- $limits := default dict $resources.limits }}
{{- $_ := set $limits "nvidia.com/gpu" (int .Values.gpu) }}
{{- $_ = set $resources "limits" $limits }}
{{- end }}
{{- toYaml $resources }}
{{- end }}

{{/* Who owns the TrainJob's runtime patch (its `manager`, a domain-prefixed path). */}}
{{- define "pytorchjob-mnist.runtimePatchManager" -}}
pytorchjob-mnist.github.io/chart
{{- end }}

{{/*
The values a TrainJob has no field for, with their defaults in values.yaml (a test keeps the two
alike) and why: a TrainJob ignores them at these defaults and refuses any other value.
*/}}
{{- define "pytorchjob-mnist.v1OnlyValues" -}}
restartPolicy: {default: OnFailure, why: "the runtime's Job template sets the pods' restartPolicy (JobSet's default is OnFailure)"}
runPolicy.backoffLimit: {default: 3, why: "the runtime's Job template sets backoffLimit"}
runPolicy.cleanPodPolicy: {default: None, why: "a TrainJob keeps its finished pods"}
runPolicy.ttlSecondsAfterFinished: {default: null, why: "a TrainJob has no TTL; delete it with kubectl delete trainjob"}
runPolicy.schedulingPolicy.minAvailable: {default: null, why: "gang scheduling is the runtime's podGroupPolicy"}
runPolicy.schedulingPolicy.queue: {default: "", why: "gang scheduling is the runtime's podGroupPolicy"}
runPolicy.schedulingPolicy.priorityClass: {default: "", why: "gang scheduling is the runtime's podGroupPolicy"}
runPolicy.schedulingPolicy.scheduleTimeoutSeconds: {default: null, why: "gang scheduling is the runtime's podGroupPolicy"}
schedulerName: {default: "", why: "runtimePatches cannot set a pod's schedulerName"}
priorityClassName: {default: "", why: "runtimePatches cannot set a pod's priorityClassName"}
workingDir: {default: "", why: "a TrainJob's trainer has no workingDir (the chart's flags use absolute paths on the volume)"}
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

{{/* The trainer container's command as a YAML list, empty for the image's entrypoint: the user's
command; else torchrun that exits with its failed worker's code, not always 1, for restartPolicy
ExitCode; else the image's entrypoint, spelled out behind a wrapper. */}}
{{- define "pytorchjob-mnist.trainerCommand" -}}
{{- if .Values.command }}
{{- toYaml .Values.command }}
{{- else if or (include "pytorchjob-mnist.torchrun" .) .Values.wrapCommand }}
{{- $trainer := ternary (list "python" "-m" "trainer.torchrun" "--module" "trainer") (list "python" "-m" "trainer") (eq (include "pytorchjob-mnist.torchrun" .) "true") }}
{{- concat .Values.wrapCommand $trainer | toYaml }}
{{- end }}
{{- end }}

{{/* The trainer container's args as a YAML list, empty for none: the user's args, else the
generated flags, which are the trainer's: a user's own command gets only its own args. */}}
{{- define "pytorchjob-mnist.trainerContainerArgs" -}}
{{- if .Values.args }}
{{- toYaml .Values.args }}
{{- else if not .Values.command }}
{{- include "pytorchjob-mnist.trainerArgs" . }}
{{- end }}
{{- end }}

{{/* The trainer container's env as a YAML list. Caches go to the writable emptyDir, wherever
scratch.cachePath puts it: the image's own cache variables (docker/Dockerfile) are set again from it.
The trainer sizes its threads to requests.cpu when there is no CPU limit (trainer/runtime.py). An
`env` entry of the same name replaces the chart's (env is a keyed list: the API server refuses
duplicates). The operator (v1) or the runtime (v2) appends MASTER_*, WORLD_SIZE, RANK and PET_*. */}}
{{- define "pytorchjob-mnist.trainerEnv" -}}
{{- $userEnv := list }}
{{- range .Values.env }}{{ $userEnv = append $userEnv .name }}{{ end }}
{{- $cache := .Values.scratch.cachePath }}
{{- $chartEnv := list
  (dict "name" "XDG_CACHE_HOME" "value" $cache)
  (dict "name" "TORCH_HOME" "value" (printf "%s/torch" $cache))
  (dict "name" "TRITON_HOME" "value" $cache)
  (dict "name" "MPLCONFIGDIR" "value" (printf "%s/matplotlib" $cache))
  (dict "name" "CUDA_CACHE_PATH" "value" (printf "%s/nv" $cache))
  (dict "name" "TRAINER_CPU_REQUEST_MILLICORES"
        "valueFrom" (dict "resourceFieldRef" (dict "resource" "requests.cpu" "divisor" "1m"))) }}
{{- if not .Values.command }}
{{- /* `python -m` would put the working directory, the shared volume, first on sys.path. */}}
{{- $chartEnv = append $chartEnv (dict "name" "PYTHONSAFEPATH" "value" "1") }}
{{- end }}
{{- if .Values.elasticPolicy.enabled }}
{{- /* torchrun's agents otherwise keep one store for every rendezvous round, so a restarted
worker group reads the last round's gloo/NCCL addresses and fails to connect
(pytorch/pytorch#135712). With this, each round's rank 0 serves a fresh store. */}}
{{- $chartEnv = append $chartEnv (dict "name" "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" "value" "1") }}
{{- end }}
{{- $env := list }}
{{- range $chartEnv }}{{ if not (has .name $userEnv) }}{{ $env = append $env . }}{{ end }}{{ end }}
{{- concat $env (default list .Values.env) | toYaml }}
{{- end }}

{{/* The trainer container's volume mounts as a YAML list, for the volumes of trainerVolumes. */}}
{{- define "pytorchjob-mnist.trainerVolumeMounts" -}}
- name: storage
  mountPath: {{ .Values.persistence.mountPath }}
- name: tmp
  mountPath: /tmp
- name: cache
  mountPath: {{ .Values.scratch.cachePath }}
{{- if .Values.shm.enabled }}
- name: dshm
  mountPath: /dev/shm
{{- end }}
{{- end }}

{{/* The trainer pod's volumes as a YAML list: the claim (or an emptyDir without persistence), the
writable /tmp and cache dirs (the root filesystem is read-only) and the memory-backed /dev/shm. */}}
{{- define "pytorchjob-mnist.trainerVolumes" -}}
- name: storage
  {{- if .Values.persistence.enabled }}
  persistentVolumeClaim:
    claimName: {{ include "pytorchjob-mnist.claimName" . }}
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

{{/* The pod template shared by the Master and the Workers. */}}
{{- define "pytorchjob-mnist.podTemplate" -}}
metadata:
  labels:
    {{- include "pytorchjob-mnist.trainerPodLabels" . | nindent 4 }}
  {{- with .Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  {{- with .Values.schedulerName }}
  schedulerName: {{ . }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with include "pytorchjob-mnist.sharedPodSpec" . | trim }}{{ . | nindent 2 }}{{ end }}
  containers:
    - name: pytorch
      image: {{ include "pytorchjob-mnist.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      {{- with include "pytorchjob-mnist.trainerCommand" . }}
      command:
        {{- . | nindent 8 }}
      {{- end }}
      {{- with include "pytorchjob-mnist.trainerContainerArgs" . }}
      args:
        {{- . | nindent 8 }}
      {{- end }}
      {{- with include "pytorchjob-mnist.workingDir" . }}
      workingDir: {{ . }}
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

{{/* Keeps the volume: Helm on uninstall; Argo CD both on app deletion (it reads Helm's annotation
as Delete=false) and on pruning, when the volume drops out of the rendered manifests, where
IgnoreExtraneous keeps the unpruned volume from holding the app OutOfSync. */}}
{{- define "pytorchjob-mnist.keepAnnotations" -}}
helm.sh/resource-policy: keep
argocd.argoproj.io/sync-options: Prune=false
argocd.argoproj.io/compare-options: IgnoreExtraneous
{{- end }}
