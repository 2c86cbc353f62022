{{/*
Guards for combinations the schema cannot express. Each message names the value and the fix.
Included once, from the job kind's template; the first guard that fails ends the render.
*/}}
{{- define "pytorchjob-mnist.validate" -}}
{{- include "pytorchjob-mnist.validate.names" . }}
{{- include "pytorchjob-mnist.validate.devices" . }}
{{- include "pytorchjob-mnist.kindHook" (list "validate" .) }}
{{- include "pytorchjob-mnist.validate.unsupportedValues" . }}
{{- include "pytorchjob-mnist.validate.processes" . }}
{{- include "pytorchjob-mnist.validate.storage" . }}
{{- include "pytorchjob-mnist.validate.pod" . }}
{{- include "pytorchjob-mnist.validate.trainer" . }}
{{- end }}

{{/* The job name, and the names derived from it (the kind's names hook, TensorBoard's Service). */}}
{{- define "pytorchjob-mnist.validate.names" -}}
{{- $name := include "pytorchjob-mnist.fullname" . }}
{{- if not (regexMatch "^[a-z]([-a-z0-9]*[a-z0-9])?$" $name) }}
{{- fail (printf "job name %q (the release name, or fullnameOverride) is not a DNS-1035 label: use lowercase letters, digits and '-', starting with a letter and ending with a letter or digit; set fullnameOverride to such a name" $name) }}
{{- end }}
{{- $kindNames := include "pytorchjob-mnist.kindHook" (list "names" .) | fromYaml }}
{{- with $kindNames.maxLength }}
{{- if gt (len $name) (int .) }}
{{- fail (printf "%s name %q has %d characters, the limit is %d: %s; set fullnameOverride to a name of at most %d characters" $.Values.jobKind $name (len $name) (int .) $kindNames.why (int .)) }}
{{- end }}
{{- end }}
{{- /* Names that must be DNS-1035 labels (at most 63 characters): [what, name]. */}}
{{- $labels := default list $kindNames.derived }}
{{- if .Values.tensorboard.enabled }}
{{- $labels = append $labels (list "TensorBoard Service name" (printf "%s-tensorboard" $name)) }}
{{- end }}
{{- range $labels }}
{{- $long := index . 1 }}
{{- if gt (len $long) 63 }}
{{- fail (printf "job name %q is too long: its %s %q has %d characters, the limit is 63; set fullnameOverride to a name of at most %d characters" $name (index . 0) $long (len $long) (sub 63 (sub (len $long) (len $name)))) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The backend, image and resources against the GPUs. The trainer refuses nccl with the chart's
--no-cuda too (test_shared_trainer.py). */}}
{{- define "pytorchjob-mnist.validate.devices" -}}
{{- $gpu := int .Values.gpu }}
{{- if and (eq (include "pytorchjob-mnist.backend" .) "nccl") (eq $gpu 0) }}
{{- fail "backend: nccl needs GPUs but gpu is 0; set gpu to the GPUs per replica, or backend to gloo (or auto)" }}
{{- end }}
{{- if and (eq .Values.image.variant "cpu") (gt $gpu 0) }}
{{- fail (printf "gpu: %d needs a CUDA image but image.variant is cpu; set image.variant to cuda (or leave it empty)" $gpu) }}
{{- end }}
{{- if and (hasSuffix "-cpu" (default "" .Values.image.tag)) (gt $gpu 0) }}
{{- fail (printf "gpu: %d needs a CUDA image but image.tag %s is a CPU build (make image VARIANT=cpu); set image.tag to its -cuda build (make image VARIANT=cuda)" $gpu .Values.image.tag) }}
{{- end }}
{{- range $field := list "requests" "limits" }}
{{- if hasKey (default dict (index (default dict $.Values.resources) $field)) "nvidia.com/gpu" }}
{{- fail (printf "resources.%s has nvidia.com/gpu; GPUs come from the gpu value (it sets the limit, and Kubernetes requires GPU requests to equal limits): remove nvidia.com/gpu from resources and set gpu to the GPUs per replica" $field) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The values the job kind has no counterpart for (its unsupportedValues hook) must keep their
defaults, unless the value its entry names as liftedBy is true. */}}
{{- define "pytorchjob-mnist.validate.unsupportedValues" -}}
{{- $kind := .Values.jobKind }}
{{- $unsupported := include "pytorchjob-mnist.kindHook" (list "unsupportedValues" .) | fromYaml }}
{{- range $path, $value := $unsupported.values }}
{{- $set := include "pytorchjob-mnist.valueAt" (list $ $path) }}
{{- if and (include "pytorchjob-mnist.kindLacks" (list $ $path)) (ne $set (toJson $value.default)) }}
{{- $lift := "" }}
{{- with $value.liftedBy }}{{ $lift = printf ", set %s=true" . }}{{ end }}
{{- fail (printf "%s: %s with jobKind %s has no %s counterpart: %s; leave %s at its default (%s)%s, or %s" $path $set $kind $kind $value.why $path (toJson $value.default) $lift $unsupported.alternative) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The value at a dotted path, as JSON: include "pytorchjob-mnist.valueAt" (list $ "runPolicy.suspend"). */}}
{{- define "pytorchjob-mnist.valueAt" -}}
{{- $value := (index . 0).Values }}
{{- range splitList "." (index . 1) }}{{ $value = index (default dict $value) . }}{{ end }}
{{- toJson $value }}
{{- end }}

{{/* Processes per pod: without torchrun one, and with GPUs one per GPU at most. */}}
{{- define "pytorchjob-mnist.validate.processes" -}}
{{- $gpu := int .Values.gpu }}
{{- $nproc := include "pytorchjob-mnist.nprocPerNode" . }}
{{- $nprocIsNumber := regexMatch "^[0-9]+$" $nproc }}
{{- if not (include "pytorchjob-mnist.torchrun" .) }}
{{- if gt $gpu 1 }}
{{- fail (printf "gpu: %d without torchrun would use only one GPU per replica; set torchrun.enabled=true (one process per GPU), or gpu to 1" $gpu) }}
{{- end }}
{{- if and $nprocIsNumber (gt (atoi $nproc) 1) }}
{{- fail (printf "nprocPerNode: %s without torchrun breaks WORLD_SIZE (the operator multiplies by it but starts one process per pod); set torchrun.enabled=true, or nprocPerNode to 1" $nproc) }}
{{- else if not $nprocIsNumber }}
{{- fail (printf "nprocPerNode: %s is one of torchrun's counts, but without torchrun each pod runs one process; set torchrun.enabled=true, or leave nprocPerNode empty" $nproc) }}
{{- end }}
{{- end }}
{{- /* The trainer gives each process of a pod the GPU numbered by its LOCAL_RANK, whatever the backend. */}}
{{- if gt $gpu 0 }}
{{- if and $nprocIsNumber (gt (atoi $nproc) $gpu) }}
{{- fail (printf "nprocPerNode: %s is more than gpu: %d, but every process of a GPU replica takes a GPU of its own; set nprocPerNode to at most %d (or leave it empty: one per GPU)" $nproc $gpu $gpu) }}
{{- end }}
{{- if eq $nproc "cpu" }}
{{- fail (printf "nprocPerNode: cpu starts a process per CPU core, but with gpu: %d every process takes a GPU of its own; leave nprocPerNode empty (one per GPU), or set gpu: 0 to train on CPUs" $gpu) }}
{{- end }}
{{- else if not $nprocIsNumber }}
{{- if eq $nproc "gpu" }}
{{- fail "nprocPerNode: gpu counts the pod's GPUs, but gpu is 0, so torchrun stops with \"Cuda is not available\"; set nprocPerNode to a number of processes per pod (e.g. 2), or gpu to the GPUs per replica" }}
{{- else }}
{{- fail (printf "nprocPerNode: %s with gpu: 0 starts a process per CPU core of the node (not of the pod's CPU limit), each holding the model and data within the pod's one memory limit; set nprocPerNode to a number of processes per pod (e.g. 2)" $nproc) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The volume, its mounts and the pods that share it. */}}
{{- define "pytorchjob-mnist.validate.storage" -}}
{{- $p := .Values.persistence }}
{{- /* A hostPath volume pinned to a node already places every pod there, TensorBoard or not. */}}
{{- if and .Values.tensorboard.enabled (gt (int .Values.gpu) 0) (include "pytorchjob-mnist.singleNode" .) (not (and $p.hostPath.path $p.hostPath.nodeName)) }}
{{- if $p.hostPath.path }}
{{- fail "tensorboard.enabled with gpu > 0 on a hostPath volume: TensorBoard starts with the job and, if scheduled first, would pin the GPU pods to its node, which may have no GPUs. Set persistence.hostPath.nodeName to a GPU node (every pod then runs there), or leave TensorBoard off" }}
{{- else }}
{{- fail "tensorboard.enabled with gpu > 0 on a single-node volume: TensorBoard starts with the job and, if scheduled first, would pin the GPU pods to its node, which may have no GPUs. Use a ReadWriteMany claim (persistence.create.accessModes, or persistence.singleNode=false for an existing one), or leave TensorBoard off and copy the logs with kubectl cp" }}
{{- end }}
{{- end }}
{{- /* The trainer's mounts: volumeMounts is keyed by mountPath and the API server refuses duplicates.
Fixed paths come first, so a collision always names a value that can move. */}}
{{- $mounts := list (list "the chart's /tmp emptyDir" "/tmp") }}
{{- if .Values.shm.enabled }}
{{- $mounts = append $mounts (list "the /dev/shm emptyDir (shm.enabled)" "/dev/shm") }}
{{- end }}
{{- $mounts = concat $mounts (list (list "persistence.mountPath" $p.mountPath) (list "scratch.cachePath" .Values.scratch.cachePath)) }}
{{- $seen := dict }}
{{- range $mounts }}
{{- $value := index . 0 }}
{{- $path := trimSuffix "/" (index . 1) }}
{{- with get $seen $path }}
{{- fail (printf "%s %q is also the mount path of %s, and a container cannot mount two volumes at one path; set %s to another directory" $value $path . $value) }}
{{- end }}
{{- $_ := set $seen $path $value }}
{{- end }}
{{- if not $p.enabled }}
{{- range $value, $set := dict "persistence.existingClaim" $p.existingClaim "persistence.hostPath.path" $p.hostPath.path }}
{{- if $set }}
{{- fail (printf "%s is set but persistence.enabled=false, which mounts an emptyDir instead, so the model and checkpoints would be lost with the pods; set persistence.enabled=true to use it, or clear %s" $value $value) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and $p.existingClaim $p.hostPath.path }}
{{- fail "persistence.existingClaim and persistence.hostPath.path are both set; pick one: the existing claim, or a hostPath volume the chart creates" }}
{{- end }}
{{- if and .Values.tensorboard.enabled (not $p.enabled) }}
{{- fail "tensorboard.enabled needs persistence.enabled=true: TensorBoard reads the run's logs from the volume" }}
{{- end }}
{{- end }}

{{/* Labels and Kueue's queue and MultiKueue. */}}
{{- define "pytorchjob-mnist.validate.pod" -}}
{{- $kueue := .Values.kueue.queueName }}
{{- if and $kueue .Values.runPolicy.suspend }}
{{- fail (printf "runPolicy.suspend=true with kueue.queueName %q: Kueue owns runPolicy.suspend (it keeps the job suspended until admitted); leave runPolicy.suspend false, or clear kueue.queueName to suspend the job yourself" $kueue) }}
{{- end }}
{{- if and .Values.kueue.multiKueue (not $kueue) }}
{{- fail "kueue.multiKueue=true without kueue.queueName: the job's controller leaves a MultiKueue job to Kueue, which admits only queued jobs, so it would never run; set kueue.queueName to a LocalQueue whose ClusterQueue has a MultiKueue AdmissionCheck, or kueue.multiKueue=false" }}
{{- end }}
{{- /* A repeated key would render twice; the chart's own select the pods that share the volume.
They are its object labels plus the component label of every pod. */}}
{{- $chartOwned := append (keys (include "pytorchjob-mnist.chartLabels" . | fromYaml)) "app.kubernetes.io/component" }}
{{- range $key, $_ := .Values.labels }}
{{- if has $key $chartOwned }}
{{- fail (printf "labels: %q is one of the chart's own labels (they select the pods that share the volume); remove it from labels, or use another key such as app.kubernetes.io/part-of" $key) }}
{{- end }}
{{- if eq $key "kueue.x-k8s.io/queue-name" }}
{{- fail (printf "labels: %q belongs in kueue.queueName, which also leaves runPolicy.suspend to Kueue (a rendered suspend: false fights Kueue's on every sync); move the queue name there" $key) }}
{{- end }}
{{- end }}
{{- end }}

{{/* The trainer's command and env, and flags it would refuse (test_shared_trainer.py checks that it does). */}}
{{- define "pytorchjob-mnist.validate.trainer" -}}
{{- if and .Values.command .Values.wrapCommand }}
{{- fail "command and wrapCommand are both set: wrapCommand goes before the chart's trainer command, which command replaces; put the wrapper into command, or clear command" }}
{{- end }}
{{- /* env is a keyed list: the API server refuses a container with two variables of one name. */}}
{{- $envNames := dict }}
{{- range .Values.env }}
{{- if hasKey $envNames .name }}
{{- fail (printf "env: %s is listed twice, and a container's variables must have distinct names; keep one entry named %s in env" .name .name) }}
{{- end }}
{{- $_ := set $envNames .name true }}
{{- end }}
{{- /* The trainer refuses Nesterov without momentum (exit 2 in every pod); extraArgs come last, so --no-nesterov there wins. */}}
{{- $t := .Values.training }}
{{- if and (eq $t.recipe "fast") (not (kindIs "invalid" $t.momentum)) (eq (float64 $t.momentum) 0.0) (not (has "--no-nesterov" $t.extraArgs)) }}
{{- fail (printf "training.momentum: %v with training.recipe: fast: the fast recipe uses Nesterov momentum, which needs a momentum above 0 (every pod would exit 2); set training.momentum above 0 (or null for the recipe's 0.9), or training.recipe: seed" $t.momentum) }}
{{- end }}
{{- end }}
