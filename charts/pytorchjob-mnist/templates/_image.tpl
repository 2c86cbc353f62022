{{/* Image references: the trainer's (the job and the test pod) and TensorBoard's. */}}

{{/* An image reference "<repository>:<tag>[@<digest>]" from a dict with those keys (digest may be empty). */}}
{{- define "pytorchjob-mnist.image" -}}
{{- .repository }}:{{ .tag }}{{ with .digest }}@{{ . }}{{ end }}
{{- end }}

{{/* Trainer image variant: the explicit value, else cuda for GPU jobs and cpu otherwise. */}}
{{- define "pytorchjob-mnist.variant" -}}
{{- if .Values.image.variant }}{{ .Values.image.variant }}{{ else if gt (int .Values.gpu) 0 }}cuda{{ else }}cpu{{ end }}
{{- end }}

{{/* Trainer image tag, by default "<appVersion>-<variant>" like `make image` builds it. */}}
{{- define "pytorchjob-mnist.imageTag" -}}
{{- default (printf "%s-%s" .Chart.AppVersion (include "pytorchjob-mnist.variant" .)) .Values.image.tag }}
{{- end }}

{{/* The trainer image. */}}
{{- define "pytorchjob-mnist.trainerImage" -}}
{{- include "pytorchjob-mnist.image" (dict "repository" .Values.image.repository "tag" (include "pytorchjob-mnist.imageTag" .) "digest" .Values.image.digest) }}
{{- end }}

{{/* The helm test pod's image: the trainer's (it has Python and torch), or a custom test image that
replaces its repository, tag and/or digest, without the trainer's digest. */}}
{{- define "pytorchjob-mnist.testImage" -}}
{{- $test := .Values.tests.image }}
{{- if or $test.repository $test.tag $test.digest }}
{{- include "pytorchjob-mnist.image" (dict "repository" (default .Values.image.repository $test.repository) "tag" (default (include "pytorchjob-mnist.imageTag" .) $test.tag) "digest" $test.digest) }}
{{- else }}
{{- include "pytorchjob-mnist.trainerImage" . }}
{{- end }}
{{- end }}
