{{/*
Job kinds. `jobKind` picks the API the job is rendered for; everything that differs between kinds
lives in the kind's own two files, and shared templates reach it only through the hooks below.

A kind K (values.schema.json's jobKind enum lists them) has:
- templates/<k>.yaml (K in lower case): renders the job when jobKind is K, after including
  pytorchjob-mnist.validate;
- templates/_<k>.tpl: defines every hook below as "pytorchjob-mnist.K.<hook>". Each takes the
  root context; an empty result means "none";
- an entry in KINDS of tests/support/pytorchjob_mnist.py, which runs the shared checks of
  tests/charts/pytorchjob_mnist on it (one of them checks that the kind defines every hook).

Hooks:
- torchrun: "true" when the trainer runs under torchrun with these values, else empty.
- names: YAML for the shared job name guard (pytorchjob-mnist.validate.names), any of
    derived: [[what, name], ...]  the names the kind's controller derives from the job name, each
                                  checked to be at most 63 characters;
    maxLength: N, why: "..."      the longest job name, where derived names have random parts.
- validate: `fail` guards for what the kind cannot do with these values, each message naming
  the value and the fix. Runs after the shared name and device guards (backend, image, GPU
  resources), before the process, storage, pod and trainer ones.
- unsupportedValues: YAML {alternative: "...", values: {<path>: {default: ..., why: "...",
  liftedBy: <path>}}}: the values the kind has no counterpart for, with their defaults in values.yaml
  (a test keeps the two alike) and why; liftedBy (optional) names a boolean value that gives the kind
  a counterpart when true. One shared guard refuses any of them off its default, unless its liftedBy
  is true, naming the key, the why, liftedBy and the alternative.
- command, args: the trainer container's command and args as YAML lists, empty for none (the
  image's entrypoint; no args). pytorchjob-mnist.trainerCommand and trainerContainerArgs are the
  ones for a controller that starts the container's command as it is.
- notes.summary: NOTES' opening lines: what was submitted, what it needs, the kind's warnings.
- notes.follow: step 1, how to follow the job ("Follow the job …:" and the commands); its first
  line follows the step's number, as notes.logs' does.
- notes.logs: step 2, how to read the training log of global rank 0.
- notes.wait: the one command that waits for the job to finish.
- notes.upgrade: what `helm upgrade` does to a finished job, and how to run it again.
NOTES.txt prints the multi-line pieces line by line (see there).
*/}}

{{/* The result of the job kind's hook: include "pytorchjob-mnist.kindHook" (list "<hook>" .). */}}
{{- define "pytorchjob-mnist.kindHook" -}}
{{- $root := index . 1 }}
{{- include (printf "pytorchjob-mnist.%s.%s" $root.Values.jobKind (index . 0)) $root }}
{{- end }}

{{/* "true" when the job kind has no counterpart for the value at a dotted path with these values: its
unsupportedValues hook lists the value, and the value that entry names as liftedBy is not true.
include "pytorchjob-mnist.kindLacks" (list . "workingDir"). */}}
{{- define "pytorchjob-mnist.kindLacks" -}}
{{- $root := index . 0 }}
{{- $unsupported := include "pytorchjob-mnist.kindHook" (list "unsupportedValues" $root) | fromYaml }}
{{- with index (default dict $unsupported.values) (index . 1) }}
{{- if not (and .liftedBy (eq (include "pytorchjob-mnist.valueAt" (list $root .liftedBy)) "true")) }}true{{ end }}
{{- end }}
{{- end }}
