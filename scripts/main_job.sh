#!/usr/bin/env bash
# The main job: runs an MLP graph exported by real TensorFlow through dflow and
# prints the class probabilities, loss, predictions and accuracy it computes.
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/bin/dflow run-graph tests/data/golden/mlp_forward.pbtxt \
  --feed 'x=[[0.5,-1,2,0,1,-0.5],[1,1,1,1,1,1],[-2,0.5,0,1.5,-1,0]]' \
  --feed 'labels=[0,1,2]' \
  --fetch probs:0 --fetch loss:0 --fetch pred:0 --fetch accuracy:0
