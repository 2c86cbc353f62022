{{/* jobKind TrainJob: Kubeflow Trainer v2's trainer.kubeflow.org/v1alpha1 TrainJob (trainjob.yaml). Its
hooks, as _kinds.tpl describes them. */}}

{{/* Always: the runtime starts the command as it is and leaves the process group to torchrun's
PET_* variables. */}}
{{- define "pytorchjob-mnist.TrainJob.torchrun" -}}
true
{{- end }}

{{/* JobSet names a TrainJob's pods <name>-node-0-<index>-<5 random characters> and its webhook
refuses a name that would make the last node's longer than 63 (JobSet v0.12's ValidateCreate): 49
characters less the digits of the last node index. */}}
{{- define "pytorchjob-mnist.TrainJob.names" -}}
{{- $lastIndex := toString (int .Values.workers) -}}
maxLength: {{ sub 49 (len $lastIndex) }}
why: "JobSet names its pods <name>-node-0-<index>-<5 characters> within 63, and the last node index, {{ $lastIndex }}, has {{ len $lastIndex }} digit{{ if gt (len $lastIndex) 1 }}s{{ end }}"
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
{{- fail (printf "env: %s with jobKind TrainJob: Trainer v2 refuses PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, which its torch runtime sets from numNodes and nprocPerNode, and the chart refuses every other PET_* variable too: torchrun reads them as its flags; remove %s from env" .name .name) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.unsupportedValues" -}}
alternative: "use jobKind: PyTorchJob (a custom runtime named by runtimeRef can carry it)"
values:
  restartPolicy: {default: OnFailure, why: "the runtime's Job template sets the pods' restartPolicy (JobSet's default is OnFailure)", liftedBy: trainingRuntime.create}
  runPolicy.backoffLimit: {default: 3, why: "the runtime's Job template sets backoffLimit", liftedBy: trainingRuntime.create}
  runPolicy.cleanPodPolicy: {default: None, why: "JobSet keeps a Complete job's pods, and deletes the Jobs still running when it fails"}
  runPolicy.ttlSecondsAfterFinished: {default: null, why: "a TrainJob has no TTL; delete it with kubectl delete trainjob"}
  runPolicy.schedulingPolicy.minAvailable: {default: null, why: "gang scheduling is the runtime's podGroupPolicy"}
  runPolicy.schedulingPolicy.queue: {default: "", why: "gang scheduling is the runtime's podGroupPolicy"}
  runPolicy.schedulingPolicy.priorityClass: {default: "", why: "gang scheduling is the runtime's podGroupPolicy"}
  runPolicy.schedulingPolicy.scheduleTimeoutSeconds: {default: null, why: "gang scheduling is the runtime's podGroupPolicy"}
  schedulerName: {default: "", why: "runtimePatches cannot set a pod's schedulerName", liftedBy: trainingRuntime.create}
  priorityClassName: {default: "", why: "runtimePatches cannot set a pod's priorityClassName", liftedBy: trainingRuntime.create}
  workingDir: {default: "", why: "neither a TrainJob's trainer nor its runtime patch has a workingDir (the chart's flags use absolute paths on the volume)", liftedBy: trainingRuntime.create}
{{- end }}

{{/* trainingRuntime.create: a namespaced TrainingRuntime of the chart's own, named like the job, for
it to run on. It is upstream's torch-distributed runtime (Trainer v2.2.0 to v2.3.0: the torch policy,
one replicatedJob `node` marked as the trainer step, with container `node`) plus the pod and
container fields a runtime patch cannot set. The TrainJob's trainer (image, command, args, env,
resources) and runtime patch still apply on top. A Helm hook: Helm creates unknown kinds
alphabetically, TrainJob before TrainingRuntime, and Trainer's webhook refuses a TrainJob whose
TrainingRuntime does not exist yet; before-hook-creation replaces it on each upgrade. */}}
{{- define "pytorchjob-mnist.TrainJob.trainingRuntime" -}}
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: {{ include "pytorchjob-mnist.fullname" . }}
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "pytorchjob-mnist.labels" . | nindent 4 }}
    trainer.kubeflow.org/framework: torch
  annotations:
    helm.sh/hook: pre-install,pre-upgrade
    helm.sh/hook-delete-policy: before-hook-creation
spec:
  mlPolicy:
    numNodes: {{ add1 (int .Values.workers) }}
    torch: {}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              {{- if not (kindIs "invalid" .Values.runPolicy.backoffLimit) }}
              backoffLimit: {{ int .Values.runPolicy.backoffLimit }}
              {{- end }}
              {{- if eq .Values.restartPolicy "ExitCode" }}
              {{- /* The training-operator's ExitCode for a Job: a pod that exits with 1-127 fails the
              job at once; any other failure (128 and up: signals, OOM kills, the trainer's 138) is
              retried with a new pod, within backoffLimit. */}}
              podFailurePolicy:
                rules:
                  - action: FailJob
                    onExitCodes:
                      containerName: node
                      operator: In
                      values: {{ include "pytorchjob-mnist.TrainJob.permanentExitCodes" . }}
              {{- end }}
              template:
                spec:
                  {{- /* A pod failure policy needs restartPolicy Never. */}}
                  restartPolicy: {{ ternary "Never" .Values.restartPolicy (eq .Values.restartPolicy "ExitCode") }}
                  automountServiceAccountToken: {{ .Values.serviceAccount.automountToken }}
                  {{- with .Values.schedulerName }}
                  schedulerName: {{ . | quote }}
                  {{- end }}
                  {{- with .Values.priorityClassName }}
                  priorityClassName: {{ . | quote }}
                  {{- end }}
                  containers:
                    - name: node
                      image: {{ include "pytorchjob-mnist.trainerImage" . | quote }}
                      imagePullPolicy: {{ .Values.image.pullPolicy }}
                      {{- with include "pytorchjob-mnist.workingDir" . }}
                      workingDir: {{ . | quote }}
                      {{- end }}
{{- end }}

{{/* The exit codes restartPolicy ExitCode does not retry, 1 to 127, as a JSON array. */}}
{{- define "pytorchjob-mnist.TrainJob.permanentExitCodes" -}}
{{- $codes := list }}
{{- range until 127 }}{{ $codes = append $codes (add1 .) }}{{ end }}
{{- toJson $codes }}
{{- end }}

{{/* The runtime starts trainer.command as it is: trainerCommand, which is always torchrun here. */}}
{{- define "pytorchjob-mnist.TrainJob.command" -}}
{{- include "pytorchjob-mnist.trainerCommand" . }}
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.args" -}}
{{- include "pytorchjob-mnist.trainerContainerArgs" . }}
{{- end }}

{{/* The node pods' own checkov skip (_checkov.tpl), as JSON pairs: on upstream's runtime they take
automountServiceAccountToken from the chart's ServiceAccount, as a runtime patch cannot set it. */}}
{{- define "pytorchjob-mnist.TrainJob.checkovSkips" -}}
{{- if or .Values.trainingRuntime.create .Values.serviceAccount.name .Values.serviceAccount.automountToken }}[]
{{- else }}
{{- list (list "CKV_K8S_38" (printf "ServiceAccount %s mounts no token; a runtime patch cannot set automountServiceAccountToken on the pod" (include "pytorchjob-mnist.serviceAccountName" .))) | toJson }}
{{- end }}
{{- end }}

{{/* Who owns the TrainJob's runtime patch (its `manager`, a domain-prefixed path). */}}
{{- define "pytorchjob-mnist.TrainJob.runtimePatchManager" -}}
pytorchjob-mnist.github.io/chart
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.notes.summary" -}}
{{- $name := include "pytorchjob-mnist.fullname" . -}}
{{- $runtime := ternary (printf "TrainingRuntime %s of this release" $name) (printf "%s %s" .Values.runtimeRef.kind .Values.runtimeRef.name) .Values.trainingRuntime.create -}}
TrainJob {{ $name }} ({{ add1 (int .Values.workers) }} node{{ if gt (int .Values.workers) 0 }}s{{ end }} × {{ include "pytorchjob-mnist.nprocPerNode" . }} torchrun process(es), backend {{ include "pytorchjob-mnist.backend" . }}, recipe {{ .Values.training.recipe }}, {{ $runtime }}) was submitted to namespace {{ .Release.Namespace }}.
It needs Kubeflow Trainer v2.2.0–v2.3.0 (checked) with its JobSet, from upstream's kubeflow-trainer
chart (Kubernetes 1.31 or later for its 2.3.0){{ if not .Values.trainingRuntime.create }}, and that runtime{{ end }}.
{{- if .Values.trainingRuntime.create }}
TrainingRuntime {{ $name }} is a Helm hook, which `helm uninstall` leaves: kubectl delete trainingruntime {{ $name }} -n {{ .Release.Namespace }}
{{- else }}
A TrainJob has no restartPolicy, backoffLimit, cleanPodPolicy, ttlSecondsAfterFinished or
schedulingPolicy: the runtime decides those, and the chart ignores those values at their defaults
(trainingRuntime.create=true sets restartPolicy and backoffLimit in a runtime of the chart's own).
{{- if and .Values.serviceAccount.name (not .Values.serviceAccount.automountToken) }}
Its pods still get a Kubernetes API token unless ServiceAccount {{ .Values.serviceAccount.name }} sets automountServiceAccountToken: false
(runtime patches cannot set it on the pods); set it there, or trainingRuntime.create=true.
{{- end }}
{{- end }}
{{- end }}

{{- define "pytorchjob-mnist.TrainJob.notes.follow" -}}
{{- $name := include "pytorchjob-mnist.fullname" . -}}
{{- if or .Values.kueue.queueName .Values.runPolicy.suspend -}}
Follow the job (State column, the type of its last condition: Suspended while it waits and still
   after it is resumed or Kueue admits it, as resuming only sets Suspended to False; then Complete or Failed):
{{- else -}}
Follow the job (State column: empty while it runs, then Complete or Failed):
{{- end }}
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
A finished TrainJob does not run again on `helm upgrade`. Its trainer, runtimeRef, activeDeadlineSeconds
and managedBy are immutable, and so is its runtime patch: volumes, mounts, security contexts, service
account and pull secrets for good, placement, labels and annotations unless the job is suspended. For
values that change them, delete it first (kubectl delete trainjob {{ include "pytorchjob-mnist.fullname" . }} -n {{ .Release.Namespace }}), or suspend it.
{{- end }}
