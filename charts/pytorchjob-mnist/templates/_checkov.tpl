{{/*
checkov (a static analyser of Kubernetes manifests; tests/charts/test_checkov.py runs it on the chart's
objects and on the job's pods) skips a check on an object that carries the annotation
"checkov.io/skip<N>: <check>=<reason>". These are the checks that do not fit a pod by design, each with
its reason; the README's Security section lists them. A skip is rendered only where its check would
fail: a pinned digest, or a CPU limit, makes its check pass.
*/}}

{{/* The annotations of a list of [check, reason] pairs (JSON), at column 0. checkov splits at "=". */}}
{{- define "pytorchjob-mnist.checkovSkips" -}}
{{- range $index, $skip := fromJsonArray . }}
checkov.io/skip{{ add1 $index }}: {{ printf "%s=%s" (index $skip 0) (index $skip 1) | quote }}
{{- end }}
{{- end }}

{{/* The skips, as JSON pairs, of a pod whose process runs to its end (the trainer, the test): nothing
serves a probe, and its controller acts on its exit. */}}
{{- define "pytorchjob-mnist.checkovBatchSkips" -}}
{{- list
  (list "CKV_K8S_8" "a batch process serves nothing for a liveness probe to ask; its controller acts on its exit")
  (list "CKV_K8S_9" "a batch process serves nothing for a readiness probe to ask; no Service routes to it")
  | toJson }}
{{- end }}

{{/* The skip of a container without a CPU limit, as JSON pairs: dict "resources" <its resources>
"value" <the value that sets the limit>. */}}
{{- define "pytorchjob-mnist.checkovCpuLimitSkips" -}}
{{- if dig "limits" "cpu" "" (default dict .resources) }}[]
{{- else }}
{{- list (list "CKV_K8S_11" (printf "the CPU request reserves the cores and a limit would only throttle; set %s for one" .value)) | toJson }}
{{- end }}
{{- end }}

{{/* The skips of an image pulled by tag, as JSON pairs: dict "image" <the reference> "value" <the value
that pins its digest>. */}}
{{- define "pytorchjob-mnist.checkovDigestSkips" -}}
{{- if contains "@sha256:" .image }}[]
{{- else }}
{{- list
  (list "CKV_K8S_43" (printf "pulled by tag until %s pins a digest" .value))
  (list "CKV_K8S_15" (printf "IfNotPresent pulls a tag once per node; %s pins the image instead" .value))
  | toJson }}
{{- end }}
{{- end }}

{{/* The skips of the trainer's pods, as JSON pairs; the job kind may add its own (`extra`, JSON pairs):
list <root> <extra>. */}}
{{- define "pytorchjob-mnist.trainerCheckovSkips" -}}
{{- $root := index . 0 }}
{{- concat
  (include "pytorchjob-mnist.checkovBatchSkips" $root | fromJsonArray)
  (include "pytorchjob-mnist.checkovCpuLimitSkips" (dict "resources" $root.Values.resources "value" "resources.limits.cpu") | fromJsonArray)
  (include "pytorchjob-mnist.checkovDigestSkips" (dict "image" (include "pytorchjob-mnist.trainerImage" $root) "value" "image.digest") | fromJsonArray)
  (index . 1 | fromJsonArray)
  | toJson }}
{{- end }}

{{/* The trainer pods' annotations: the checkov skips (trainerCheckovSkips' arguments), and podAnnotations,
which win. */}}
{{- define "pytorchjob-mnist.trainerPodAnnotations" -}}
{{- $root := index . 0 }}
{{- $skips := include "pytorchjob-mnist.checkovSkips" (include "pytorchjob-mnist.trainerCheckovSkips" .) | fromYaml }}
{{- merge (deepCopy (default dict $root.Values.podAnnotations)) $skips | toYaml }}
{{- end }}
