{{/* jobKind PyTorchTrainingJob: T9k's batch.tensorstack.dev/v1beta1 PyTorchTrainingJob in torchrun mode
(pytorchtrainingjob.yaml), from T9k's published API reference and examples. Its hooks, as _kinds.tpl
describes them. */}}

{{/* Always: in torchrun mode T9k starts torchrun itself, with the container's args. */}}
{{- define "pytorchjob-mnist.PyTorchTrainingJob.torchrun" -}}
true
{{- end }}

{{/* T9k names a job's pods <name>-<5 random hex>-<type>-<index>; the chart's one type is node. */}}
{{- define "pytorchjob-mnist.PyTorchTrainingJob.names" -}}
maxLength: {{ sub 63 (len (printf "-xxxxx-node-%d" (int .Values.workers))) }}
why: "T9k names its pods <name>-<5 hex>-node-<index> within 63"
{{- end }}

{{- define "pytorchjob-mnist.PyTorchTrainingJob.validate" -}}
{{- if .Values.command }}
{{- fail "command with jobKind PyTorchTrainingJob: in torchrun mode T9k ignores the container's command and runs torchrun with its args; put your script and its flags in args (e.g. [/workspace/train.py, --epochs=1]) and clear command" }}
{{- end }}
{{- if .Values.wrapCommand }}
{{- fail "wrapCommand with jobKind PyTorchTrainingJob: T9k starts torchrun itself, so nothing can go before it; clear wrapCommand, or use jobKind: PyTorchJob" }}
{{- end }}
{{- with .Values.args }}
{{- $first := first . }}
{{- if and (hasPrefix "-" $first) (ne $first "-m") }}
{{- fail (printf "args: %s comes first with jobKind PyTorchTrainingJob, but T9k runs torchrun <its flags> <args>, which takes the script's path or -m <module> first; start args with your script (or -m trainer), then its flags" $first) }}
{{- end }}
{{- end }}
{{- if not .Values.shm.enabled }}
{{- fail "shm.enabled=false with jobKind PyTorchTrainingJob: T9k's guide saw its job die with SIGBUS without a memory-backed /dev/shm; leave shm.enabled=true (shm.sizeLimit sets its size)" }}
{{- end }}
{{- $nproc := include "pytorchjob-mnist.nprocPerNode" . }}
{{- if not (regexMatch "^[0-9]+$" $nproc) }}
{{- fail (printf "nprocPerNode: %s with jobKind PyTorchTrainingJob: the chart renders torchrunConfig.procPerNode as a number, which the helm test's world size needs; set nprocPerNode to a number of processes per pod, or leave it empty (one per GPU, else 1)" $nproc) }}
{{- end }}
{{- if and (not (kindIs "invalid" .Values.t9k.priority)) (not .Values.t9k.queue) }}
{{- fail (printf "t9k.priority: %d without t9k.queue: a priority is one within a T9k queue, and the chart renders spec.scheduler only for a queue; set t9k.queue to a queue of the cluster, or clear t9k.priority" (int .Values.t9k.priority)) }}
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchTrainingJob.unsupportedValues" -}}
alternative: "use jobKind: PyTorchJob"
values:
  elasticPolicy.enabled: {default: false, why: "the chart renders no spec.elastic, as T9k documents its fields but not how it resizes a torchrun job (t9k.maxRestarts restarts the workers in place)"}
  runPolicy.ttlSecondsAfterFinished: {default: null, why: "T9k's runPolicy has no TTL; delete the job with kubectl delete pj"}
  runPolicy.schedulingPolicy.minAvailable: {default: null, why: "T9k schedules its jobs itself (t9k.queue and t9k.priority)"}
  runPolicy.schedulingPolicy.queue: {default: "", why: "T9k schedules its jobs itself (t9k.queue and t9k.priority)"}
  runPolicy.schedulingPolicy.priorityClass: {default: "", why: "T9k schedules its jobs itself (t9k.queue and t9k.priority)"}
  runPolicy.schedulingPolicy.scheduleTimeoutSeconds: {default: null, why: "T9k schedules its jobs itself (t9k.queue and t9k.priority)"}
  kueue.queueName: {default: "", why: "Kueue admits no T9k job (it has no PyTorchTrainingJob integration); T9k queues it with t9k.queue"}
  kueue.multiKueue: {default: false, why: "MultiKueue dispatches only the jobs Kueue admits, and Kueue has no PyTorchTrainingJob integration"}
{{- end }}

{{/* None: T9k ignores the container's command in torchrun mode. */}}
{{- define "pytorchjob-mnist.PyTorchTrainingJob.command" -}}
{{- end }}

{{/* What T9k's torchrun starts: the user's args, else the trainer module with the generated flags. */}}
{{- define "pytorchjob-mnist.PyTorchTrainingJob.args" -}}
{{- if .Values.args }}
{{- include "pytorchjob-mnist.trainerContainerArgs" . }}
{{- else -}}
{{- /* Prepended as text: a round trip through fromYamlArray would drop the final newline of a last
argument that ends with one (toYaml trims the text's own). */ -}}
- -m
- trainer
{{ include "pytorchjob-mnist.trainerArgs" . }}
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchTrainingJob.notes.summary" -}}
{{- $pods := add1 (int .Values.workers) -}}
PyTorchTrainingJob {{ include "pytorchjob-mnist.fullname" . }} ({{ $pods }} pod{{ if gt $pods 1 }}s{{ end }} × {{ include "pytorchjob-mnist.nprocPerNode" . }} torchrun process(es), backend {{ include "pytorchjob-mnist.backend" . }}, recipe {{ .Values.training.recipe }}) was submitted to namespace {{ .Release.Namespace }}.
It needs T9k's job controller. The chart renders this kind from T9k's published API reference and
examples, and it has not been run on a T9k cluster (see the chart README).
{{- if eq .Values.restartPolicy "ExitCode" }}
restartPolicy is ExitCode, but a pod exits with torchrun's code, which is 1 when a worker fails (the
trainer's retryable 138 too) and when torchrun is stopped: T9k retries only a pod killed outright
(137). Set restartPolicy=OnFailure to restart after any failure.
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchTrainingJob.notes.follow" -}}
{{- $name := include "pytorchjob-mnist.fullname" . -}}
Follow the job (its phase: Pending → Running → Succeeded or Failed):
     kubectl get pj {{ $name }} -n {{ .Release.Namespace }} -w
     kubectl get pods -n {{ .Release.Namespace }} -l tensorstack.dev/owner-name={{ $name }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchTrainingJob.notes.logs" -}}
{{- $name := include "pytorchjob-mnist.fullname" . -}}
Read the training log of global rank 0 (loss, and "epoch=N accuracy=…" after each evaluation).
   torchrun's rendezvous may give rank 0 to any pod, and T9k puts a random part in pod names, so
   follow them all by T9k's label:
     kubectl logs -f -n {{ .Release.Namespace }} -l tensorstack.dev/owner-name={{ $name }} --prefix --tail=-1 --max-log-requests {{ add1 (int .Values.workers) }}
{{- end }}

{{- define "pytorchjob-mnist.PyTorchTrainingJob.notes.wait" -}}
kubectl wait pj/{{ include "pytorchjob-mnist.fullname" . }} -n {{ .Release.Namespace }} --for=jsonpath='{.status.phase}'=Succeeded --timeout=30m
{{- end }}

{{- define "pytorchjob-mnist.PyTorchTrainingJob.notes.upgrade" -}}
A finished PyTorchTrainingJob does not run again on `helm upgrade`: delete it first
(kubectl delete pj {{ include "pytorchjob-mnist.fullname" . }} -n {{ .Release.Namespace }}), then upgrade.
{{- end }}
