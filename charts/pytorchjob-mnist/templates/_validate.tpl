{{/*
Guards for combinations the schema cannot express. Each message names the value and the fix.
Included once, from pytorchjob.yaml.
*/}}
{{- define "pytorchjob-mnist.validate" -}}
{{- $name := include "pytorchjob-mnist.fullname" . }}
{{- $workers := int .Values.workers }}
{{- $gpu := int .Values.gpu }}
{{- $backend := include "pytorchjob-mnist.backend" . }}
{{- $nproc := include "pytorchjob-mnist.nprocPerNode" . }}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) }}
{{- fail (printf "job name %q (the release name, or fullnameOverride) is not a DNS-1035 label: use lowercase letters, digits and '-', starting with a letter and ending with a letter or digit; set fullnameOverride to such a name" $name) }}
{{- end }}
{{- $longestPod := ternary (printf "%s-worker-%d" $name (sub $workers 1)) (printf "%s-master-0" $name) (gt $workers 0) }}
{{- if gt (len $longestPod) 63 }}
{{- fail (printf "job name %q is too long: its pod and Service name %q has %d characters, the limit is 63; set fullnameOverride to a name of at most %d characters" $name $longestPod (len $longestPod) (sub 63 (sub (len $longestPod) (len $name)))) }}
{{- end }}
{{- if and (eq $backend "nccl") (eq $gpu 0) }}
{{- fail "backend: nccl needs GPUs but gpu is 0; set gpu to the GPUs per replica, or backend to gloo (or auto)" }}
{{- end }}
{{- if and (eq .Values.image.variant "cpu") (gt $gpu 0) }}
{{- fail (printf "gpu: %d needs a CUDA image but image.variant is cpu; set image.variant to cuda (or leave it empty)" $gpu) }}
{{- end }}
{{- if not .Values.torchrun.enabled }}
{{- if gt $gpu 1 }}
{{- fail (printf "gpu: %d without torchrun would use only one GPU per replica; set torchrun.enabled=true (one process per GPU), or gpu to 1" $gpu) }}
{{- end }}
{{- if and (regexMatch "^[0-9]+$" $nproc) (gt (atoi $nproc) 1) }}
{{- fail (printf "nprocPerNode: %s without torchrun breaks WORLD_SIZE (the operator multiplies by it but starts one process per pod); set torchrun.enabled=true, or nprocPerNode to 1" $nproc) }}
{{- end }}
{{- if .Values.elasticPolicy.enabled }}
{{- fail "elasticPolicy.enabled needs torchrun (only torchrun reads the rendezvous variables); set torchrun.enabled=true" }}
{{- end }}
{{- end }}
{{- if and (eq $backend "nccl") (regexMatch "^[0-9]+$" $nproc) (gt (atoi $nproc) $gpu) }}
{{- fail (printf "nprocPerNode: %s is more than gpu: %d, but with nccl every process needs its own GPU; set nprocPerNode to at most %d" $nproc $gpu $gpu) }}
{{- end }}
{{- if .Values.elasticPolicy.enabled }}
{{- if eq $workers 0 }}
{{- fail "elasticPolicy.enabled needs at least one Worker (the operator's webhook requires it and the rendezvous runs on worker-0); set workers to 1 or more" }}
{{- end }}
{{- $min := .Values.elasticPolicy.minReplicas }}
{{- $max := .Values.elasticPolicy.maxReplicas }}
{{- if and (not (kindIs "invalid" $min)) (not (kindIs "invalid" $max)) (gt (int $min) (int $max)) }}
{{- fail (printf "elasticPolicy.minReplicas (%d) is greater than elasticPolicy.maxReplicas (%d); lower minReplicas or raise maxReplicas" (int $min) (int $max)) }}
{{- end }}
{{- end }}
{{- if and .Values.persistence.existingClaim .Values.persistence.hostPath.path }}
{{- fail "persistence.existingClaim and persistence.hostPath.path are both set; pick one: the existing claim, or a hostPath volume the chart creates" }}
{{- end }}
{{- if and .Values.tensorboard.enabled (not .Values.persistence.enabled) }}
{{- fail "tensorboard.enabled needs persistence.enabled=true: TensorBoard reads the run's logs from the volume" }}
{{- end }}
{{- end }}
