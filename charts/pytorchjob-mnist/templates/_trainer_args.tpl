{{/* How the trainer runs: backend, processes, torchrun, its directories on the volume and its flags. */}}

{{/* Collective backend: the explicit value, else nccl for GPU jobs and gloo otherwise. */}}
{{- define "pytorchjob-mnist.backend" -}}
{{- if ne .Values.backend "auto" }}{{ .Values.backend }}{{ else if gt (int .Values.gpu) 0 }}nccl{{ else }}gloo{{ end }}
{{- end }}

{{/* "true" when the trainer runs under torchrun, which the job kind decides (its torchrun hook). */}}
{{- define "pytorchjob-mnist.torchrun" -}}
{{- include "pytorchjob-mnist.kindHook" (list "torchrun" .) }}
{{- end }}

{{/* Processes per pod: the explicit value, else one process per GPU with torchrun and 1 without. */}}
{{- define "pytorchjob-mnist.nprocPerNode" -}}
{{- if .Values.nprocPerNode }}{{ .Values.nprocPerNode }}{{ else if include "pytorchjob-mnist.torchrun" . }}{{ max 1 (int .Values.gpu) }}{{ else }}1{{ end }}
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

{{/* This run's checkpoints: same values, same directory. */}}
{{- define "pytorchjob-mnist.checkpointDir" -}}
{{- printf "%s/checkpoints/%s" (include "pytorchjob-mnist.runDir" .) (include "pytorchjob-mnist.runId" .) }}
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
{{- dict "flags" (include "pytorchjob-mnist.trainingFlags" .) "extraArgs" (include "pytorchjob-mnist.extraArgs" . | fromJsonArray)
  "workers" (int .Values.workers) "nprocPerNode" (include "pytorchjob-mnist.nprocPerNode" .)
  "torchrun" (eq (include "pytorchjob-mnist.torchrun" .) "true") "image" (include "pytorchjob-mnist.trainerImage" .) "jobKind" .Values.jobKind
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
The trainer's flags, as a YAML list. Checkpoints and TensorBoard logs go to directories of this
run's own, so restarted pods resume it, while other values train a new run rather than meeting
checkpoints they cannot resume. extraArgs come last so that a user's flags win.
*/}}
{{- define "pytorchjob-mnist.trainerArgs" -}}
{{- $runId := include "pytorchjob-mnist.runId" . }}
{{- $runFlags := list
  "--checkpoint-dir" (include "pytorchjob-mnist.checkpointDir" .)
  "--log-dir" (printf "%s/%s" (include "pytorchjob-mnist.tensorboardDir" .) $runId)
  "--run-id" $runId }}
{{- $flags := include "pytorchjob-mnist.trainingFlags" . | fromJsonArray }}
{{- toYaml (concat $flags $runFlags (include "pytorchjob-mnist.extraArgs" . | fromJsonArray)) }}
{{- end }}

{{/* training.extraArgs as a JSON array of strings. */}}
{{- define "pytorchjob-mnist.extraArgs" -}}
{{- include "pytorchjob-mnist.stringList" (default list .Values.training.extraArgs) }}
{{- end }}
