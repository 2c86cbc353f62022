{{/* jobKind TrainJob: Kubeflow Trainer v2's trainer.kubeflow.org/v1alpha1 TrainJob (trainjob.yaml). Its
hooks, as _kinds.tpl describes them. */}}

{{/* Always: the runtime starts the command as it is and leaves the process group to torchrun's
PET_* variables. */}}
{{- define "pytorchjob-mnist.TrainJob.torchrun" -}}
true
{{- end }}

{{/* JobSet names a TrainJob's pods <name>-node-0-<index>-<5 random characters>, within 63. */}}
{{- define "pytorchjob-mnist.TrainJob.names" -}}
maxLength: 48
why: "JobSet names its pods <name>-node-0-<index>-<5 characters> within 63"
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.validate" -}}
{{- if .Values.elasticPolicy.enabled }}
{{- fail "elasticPolicy.enabled with jobKind TrainJob: Trainer v2 removed elastic training (no elasticPolicy, no PET_RDZV_*); set elasticPolicy.enabled=false, or jobKind: PyTorchJob" }}
{{- end }}
{{- $nproc := include "pytorchjob-mnist.nprocPerNode" . }}
{{- if not (regexMatch "^[0-9]+$" $nproc) }}
{{- fail (printf "nprocPerNode: %s with jobKind TrainJob: trainer.numProcPerNode is an integer since Trainer v2.2; set nprocPerNode to a number of processes per pod, or leave it empty (one per GPU, else 1)" $nproc) }}
{{- end }}
{{- range .Values.env }}
{{- if hasPrefix "PET_" .name }}
{{- fail (printf "env: %s with jobKind TrainJob: Trainer v2 refuses PET_* variables in trainer.env, as the torch runtime sets them from numNodes and nprocPerNode; remove %s from env" .name .name) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.unsupportedValues" -}}
alternative: "use jobKind: PyTorchJob (a custom runtime named by runtimeRef can carry it)"
values:
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

{{/* The runtime starts trainer.command as it is: trainerCommand, which is always torchrun here. */}}
{{- define "pytorchjob-mnist.TrainJob.command" -}}
{{- include "pytorchjob-mnist.trainerCommand" . }}
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.args" -}}
{{- include "pytorchjob-mnist.trainerContainerArgs" . }}
{{- end }}

{{/* Who owns the TrainJob's runtime patch (its `manager`, a domain-prefixed path). */}}
{{- define "pytorchjob-mnist.TrainJob.runtimePatchManager" -}}
pytorchjob-mnist.github.io/chart
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.notes.summary" -}}
TrainJob {{ include "pytorchjob-mnist.fullname" . }} ({{ add1 (int .Values.workers) }} node{{ if gt (int .Values.workers) 0 }}s{{ end }} × {{ include "pytorchjob-mnist.nprocPerNode" . }} torchrun process(es), backend {{ include "pytorchjob-mnist.backend" . }}, recipe {{ .Values.training.recipe }}, {{ .Values.runtimeRef.kind }} {{ .Values.runtimeRef.name }}) was submitted to namespace {{ .Release.Namespace }}.
It needs Kubeflow Trainer v2.2 or later (upstream's kubeflow-trainer chart) and that runtime.
A TrainJob has no restartPolicy, backoffLimit, cleanPodPolicy, ttlSecondsAfterFinished or
schedulingPolicy: the runtime decides those, and the chart ignores those values at their defaults.
{{- if not .Values.serviceAccount.automountToken }}
Its pods still get a Kubernetes API token (runtime patches cannot set automountServiceAccountToken): set automountServiceAccountToken: false on ServiceAccount {{ default "default" .Values.serviceAccount.name }} to drop it.
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.notes.follow" -}}
{{- $name := include "pytorchjob-mnist.fullname" . -}}
Follow the job (State column: empty while it runs, then Complete or Failed):
     kubectl get trainjobs {{ $name }} -n {{ .Release.Namespace }} -w
     kubectl get pods -n {{ .Release.Namespace }} -l jobset.sigs.k8s.io/jobset-name={{ $name }}
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.notes.logs" -}}
{{- $name := include "pytorchjob-mnist.fullname" . }}
{{- $ns := .Release.Namespace -}}
Read node 0's training log (loss, and "epoch=N accuracy=…" after each evaluation):
     kubectl logs -f -n {{ $ns }} -l jobset.sigs.k8s.io/jobset-name={{ $name }},jobset.sigs.k8s.io/replicatedjob-name=node,batch.kubernetes.io/job-completion-index=0 --tail=-1
   or with the Kubeflow SDK (pip install kubeflow):
     python -c 'from kubeflow.trainer import TrainerClient, KubernetesBackendConfig; print(*TrainerClient(KubernetesBackendConfig(namespace="{{ $ns }}")).get_job_logs("{{ $name }}"), sep="\n")'
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.notes.wait" -}}
kubectl wait trainjob/{{ include "pytorchjob-mnist.fullname" . }} -n {{ .Release.Namespace }} --for=condition=Complete --timeout=30m
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.notes.upgrade" -}}
A finished TrainJob does not run again on `helm upgrade`, and its trainer and runtimeRef cannot
change: delete it first (kubectl delete trainjob {{ include "pytorchjob-mnist.fullname" . }} -n {{ .Release.Namespace }}), then upgrade.
{{- end }}
