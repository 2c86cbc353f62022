#!/usr/bin/env bash
# Print a minimal PyTorchJob for the webhook checks of ci/e2e-kind.sh.
#   ci/kind/pytorchjob.sh NAME NAMESPACE IMAGE MASTER_REPLICAS
set -euo pipefail

if [[ $# -ne 4 ]]; then
  echo "usage: $0 NAME NAMESPACE IMAGE MASTER_REPLICAS" >&2
  exit 2
fi
name=$1 namespace=$2 image=$3 master_replicas=$4

replica() {
  cat <<YAML
    $1:
      replicas: $2
      restartPolicy: OnFailure
      template:
        spec:
          containers:
            - name: pytorch
              image: $image
              args: ["--dataset", "synthetic", "--epochs", "1"]
YAML
}

cat <<YAML
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: $name
  namespace: $namespace
spec:
  pytorchReplicaSpecs:
$(replica Master "$master_replicas")
$(replica Worker 1)
YAML
