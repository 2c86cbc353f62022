{{/* The trainer container's parts, which every job kind places where its API takes them. */}}

{{/* The trainer container's command as a YAML list, empty for the image's entrypoint: the user's
command; else torchrun that exits with its failed worker's code, not always 1, for restartPolicy
ExitCode; else the image's entrypoint, spelled out behind a wrapper. The command hook of a kind
whose controller starts the container's command as it is. */}}
{{- define "pytorchjob-mnist.trainerCommand" -}}
{{- if .Values.command }}
{{- toYaml .Values.command }}
{{- else if or (include "pytorchjob-mnist.torchrun" .) .Values.wrapCommand }}
{{- $trainer := ternary (list "python" "-m" "trainer.torchrun" "--module" "trainer") (list "python" "-m" "trainer") (eq (include "pytorchjob-mnist.torchrun" .) "true") }}
{{- concat .Values.wrapCommand $trainer | toYaml }}
{{- end }}
{{- end }}

{{/* The trainer container's args as a YAML list, empty for none: the user's args, else the
generated flags, which are the trainer's: a user's own command gets only its own args. The args
hook of a kind that runs trainerCommand. */}}
{{- define "pytorchjob-mnist.trainerContainerArgs" -}}
{{- if .Values.args }}
{{- include "pytorchjob-mnist.stringList" .Values.args | fromJsonArray | toYaml }}
{{- else if not .Values.command }}
{{- include "pytorchjob-mnist.trainerArgs" . }}
{{- end }}
{{- end }}

{{/* A list of words from values (`args`, `training.extraArgs`) as a JSON array of strings, which
container args must be: `--set training.extraArgs={--limit-train,3000}` passes 3000 as a number, a
values file `true` as a boolean. Whole numbers go through int64, since a values file's are floats,
which toString writes as 1e+06. */}}
{{- define "pytorchjob-mnist.stringList" -}}
{{- $words := list }}
{{- range . }}
{{- if and (kindIs "float64" .) (eq (float64 (int64 .)) .) }}
{{- $words = append $words (int64 . | toString) }}
{{- else }}
{{- $words = append $words (toString .) }}
{{- end }}
{{- end }}
{{- toJson $words }}
{{- end }}

{{/* The trainer container's workingDir ("" = the image's). The image's is read-only
(readOnlyRootFilesystem), so the trainer's relative defaults (--data-dir data, --dir logs,
--save-model) go to the volume; a custom command keeps the image's, where its script may live. */}}
{{- define "pytorchjob-mnist.workingDir" -}}
{{- if or .Values.workingDir .Values.command }}{{ .Values.workingDir }}{{ else }}{{ .Values.persistence.mountPath }}{{ end }}
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

{{/* The trainer container's env as a YAML list. Caches go to the writable emptyDir, wherever
scratch.cachePath puts it: the image's own cache variables (docker/Dockerfile) are set again from it.
The trainer sizes its threads to requests.cpu when there is no CPU limit (trainer/runtime.py). An
`env` entry of the same name replaces the chart's (env is a keyed list: the API server refuses
duplicates). The job's controller appends its own (MASTER_*, WORLD_SIZE, RANK, PET_*). */}}
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
  mountPath: {{ .Values.persistence.mountPath | quote }}
- name: tmp
  mountPath: /tmp
- name: cache
  mountPath: {{ .Values.scratch.cachePath | quote }}
{{- if .Values.shm.enabled }}
- name: dshm
  mountPath: /dev/shm
{{- end }}
{{- end }}
