#!/usr/bin/env bash
# The main job: trains the MLP (784-256-256-10) on Fashion-MNIST with dflow's
# defaults (Adam, batch 128, 3 epochs), printing progress, then test accuracy;
# metrics go to build/main_job_metrics.json. Extra flags pass through, e.g.
#   scripts/main_job.sh --model cnn
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/bin/dflow train --metrics-out build/main_job_metrics.json "$@"
