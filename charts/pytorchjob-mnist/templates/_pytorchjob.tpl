{{/* jobKind PyTorchJob: the training-operator v1's kubeflow.org/v1 PyTorchJob (pytorchjob.yaml). Its
hooks, as _kinds.tpl describes them. */}}

{{/* torchrun only when asked for: the operator's plain mode runs one process per pod. */}}
{{- define "pytorchjob-mnist.PyTorchJob.torchrun" -}}
{{- if .Values.torchrun.enabled }}true{{ end }}
{{- end }}

{{/* The operator names each replica's pod and headless Service <name>-<replica>-<index>. */}}
{{- define "pytorchjob-mnist.PyTorchJob.names" -}}
{{- $name := include "pytorchjob-mnist.fullname" . }}
{{- $workers := int .Values.workers }}
{{- $longest := ternary (printf "%s-worker-%d" $name (sub $workers 1)) (printf "%s-master-0" $name) (gt $workers 0) }}
{{- dict "derived" (list (list "pod and Service name" $longest)) | toYaml }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchJob.validate" -}}
{{- $workers := int .Values.workers }}
{{- $elastic := .Values.elasticPolicy }}
{{- if $elastic.enabled }}
{{- if not (include "pytorchjob-mnist.torchrun" .) }}
{{- fail "elasticPolicy.enabled needs torchrun (only torchrun reads the rendezvous variables); set torchrun.enabled=true" }}
{{- end }}
{{- if eq $workers 0 }}
{{- fail "elasticPolicy.enabled needs at least one Worker (the operator's webhook requires it and the rendezvous runs on worker-0); set workers to 1 or more" }}
{{- end }}
{{- if and (ne $elastic.rdzvBackend "c10d") (not $elastic.rdzvHost) }}
{{- fail (printf "elasticPolicy.rdzvBackend %s needs an etcd server, but rdzvHost is empty (the default is worker-0, which runs none); set rdzvHost (and rdzvPort) to your etcd server, or rdzvBackend to c10d" $elastic.rdzvBackend) }}
{{- end }}
{{- $min := $elastic.minReplicas }}
{{- $max := $elastic.maxReplicas }}
{{- if and (not (kindIs "invalid" $min)) (not (kindIs "invalid" $max)) (gt (int $min) (int $max)) }}
{{- fail (printf "elasticPolicy.minReplicas (%d) is greater than elasticPolicy.maxReplicas (%d); lower minReplicas or raise maxReplicas" (int $min) (int $max)) }}
{{- end }}
{{- $nodes := add1 $workers }}
{{- if and (not (kindIs "invalid" $min)) (gt (int $min) $nodes) }}
{{- fail (printf "elasticPolicy.minReplicas (%d) is more than the job's %d pods (1 Master + workers: %d), so the rendezvous never completes; set minReplicas to at most %d, or raise workers" (int $min) $nodes $workers $nodes) }}
{{- end }}
{{- if and (not (kindIs "invalid" $max)) (lt (int $max) $nodes) }}
{{- fail (printf "elasticPolicy.maxReplicas (%d) is less than the job's %d pods (1 Master + workers: %d), so some pods can never join the rendezvous; set maxReplicas to at least %d, or lower workers" (int $max) $nodes $workers $nodes) }}
{{- end }}
{{- end }}
{{- with .Values.runPolicy.schedulingPolicy.minAvailable }}
{{- if gt (int .) (add1 $workers) }}
{{- fail (printf "runPolicy.schedulingPolicy.minAvailable (%d) is more than the job's %d pods (1 Master + workers: %d), so the gang could never be scheduled; set minAvailable to at most %d, or raise workers" (int .) (add1 $workers) $workers (add1 $workers)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Every value has a PyTorchJob counterpart. */}}
{{- define "pytorchjob-mnist.PyTorchJob.unsupportedValues" -}}
{{- end }}

{{/* The operator starts the container's command as it is, torchrun or not. */}}
{{- define "pytorchjob-mnist.PyTorchJob.command" -}}
{{- include "pytorchjob-mnist.trainerCommand" . }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchJob.args" -}}
{{- include "pytorchjob-mnist.trainerContainerArgs" . }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchJob.notes.summary" -}}
{{- $workers := int .Values.workers -}}
PyTorchJob {{ include "pytorchjob-mnist.fullname" . }} (1 Master + {{ .Values.workers }} Worker{{ if ne $workers 1 }}s{{ end }}, backend {{ include "pytorchjob-mnist.backend" . }}, recipe {{ .Values.training.recipe }}{{ if .Values.torchrun.enabled }}, torchrun with {{ include "pytorchjob-mnist.nprocPerNode" . }} process(es) per pod{{ end }}) was submitted to namespace {{ .Release.Namespace }}.
It needs a training-operator v1 running in the cluster, such as this project's chart
oci://ghcr.io/pytorchjob-mnist/charts/training-operator installs.
{{- $deadline := .Values.runPolicy.activeDeadlineSeconds }}
{{- if and (eq .Values.restartPolicy "ExitCode") (kindIs "invalid" $deadline) }}
restartPolicy is ExitCode, and the training-operator v1 does not count its pod recreations against
runPolicy.backoffLimit (kubeflow/trainer#2045): a replica that keeps exiting with 128 or more (an OOM
kill, a lost peer) is recreated forever. Set runPolicy.activeDeadlineSeconds to bound the job.
{{- end }}
{{- if and (not (kindIs "invalid" $deadline)) (eq .Values.runPolicy.cleanPodPolicy "None") }}
runPolicy.activeDeadlineSeconds is set with runPolicy.cleanPodPolicy None: the training-operator v1.9.4
deletes no pod of a job its deadline fails, so they go on running, holding their CPUs and GPUs,
until the job is deleted. Set runPolicy.cleanPodPolicy=Running to stop them. It also checks the
deadline only when the job or its pods change, so a job whose pods run on unchanged fails late.
{{- end }}
{{- $pods := add1 $workers }}
{{- $backoffLimit := .Values.runPolicy.backoffLimit }}
{{- if and (has .Values.restartPolicy (list "OnFailure" "Always")) (not .Values.elasticPolicy.enabled) (not (kindIs "invalid" $backoffLimit)) (gt (int $backoffLimit) 0) (le (int $backoffLimit) $pods) }}
runPolicy.backoffLimit {{ $backoffLimit }} lets it survive no failure: the operator adds up the restarts of
all {{ $pods }} pods, and when one fails the others lose their peer and restart too. To survive N
failures set runPolicy.backoffLimit to {{ $pods }} × N + 1 (e.g. {{ add1 (mul 3 $pods) }} for three), or 0 to fail at the first.
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchJob.notes.follow" -}}
{{- $name := include "pytorchjob-mnist.fullname" . -}}
Follow the job (State column: Created → Running → Succeeded or Failed):
     kubectl get pytorchjobs {{ $name }} -n {{ .Release.Namespace }} -w
     kubectl get pods -n {{ .Release.Namespace }} -l training.kubeflow.org/job-name={{ $name }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchJob.notes.logs" -}}
{{- $name := include "pytorchjob-mnist.fullname" . }}
{{- if .Values.elasticPolicy.enabled -}}
Read the training log of global rank 0 (loss, and "epoch=N accuracy=…" after each evaluation).
   In an elastic job any pod may hold rank 0, so follow them all:
     kubectl logs -f -n {{ .Release.Namespace }} -l training.kubeflow.org/job-name={{ $name }} --prefix --tail=-1 --max-log-requests {{ add1 (int .Values.workers) }}
{{- else -}}
Read the master's training log (loss, and "epoch=N accuracy=…" after each evaluation):
     kubectl logs -f {{ $name }}-master-0 -n {{ .Release.Namespace }}
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchJob.notes.wait" -}}
kubectl wait pytorchjob/{{ include "pytorchjob-mnist.fullname" . }} -n {{ .Release.Namespace }} --for=condition=Succeeded --timeout=30m
{{- end }}

{{- define "pytorchjob-mnist.PyTorchJob.notes.upgrade" -}}
A finished PyTorchJob does not run again on `helm upgrade`: delete it first
(kubectl delete pytorchjob {{ include "pytorchjob-mnist.fullname" . }} -n {{ .Release.Namespace }}), then upgrade.
{{- end }}
