#!/usr/bin/env bash
# The main job: a training run on a local cluster. `dflow cluster` starts one
# parameter server and two workers on 127.0.0.1 and trains the MLP
# (784-256-256-10) on Fashion-MNIST with synchronous between-graph
# replication (SyncReplicasOptimizer, Adam, batch 128 per worker, 3 epochs),
# printing each task's progress, then the test accuracy; the chief's metrics
# go to build/main_job_metrics.json. Cluster flags, then `--` and train
# flags, pass through, e.g.
#   scripts/main_job.sh --workers 3 --mode between-async -- --model cnn
set -euo pipefail
cd "$(dirname "$0")/.."
args=("$@")
for a in "${args[@]}"; do
  if [[ "$a" == "--" ]]; then
    exec build/bin/dflow cluster "${args[@]}" --metrics-out build/main_job_metrics.json
  fi
done
exec build/bin/dflow cluster "${args[@]}" -- --metrics-out build/main_job_metrics.json
