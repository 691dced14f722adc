#!/usr/bin/env bash
# The GPU checks of issue 17, as one run on a GPU machine (budget: 10 min):
#   1. the GPU unit tests, each GPU kernel against the CPU's (build/gpu_tests);
#   2. `dflow train` (MLP, then CNN) on /device:GPU:0 and on the CPU
#      (CUDA_VISIBLE_DEVICES=""), same seed: test accuracy and examples/s;
#   3. bench/gpu/gpu_bench: MatMul 4096² through dflow against cuBLAS direct;
#      the CNN step written directly (bench/gpu/cnn_direct_bench) and PyTorch's;
#   4. where a GPU CNN step's time goes: three traced steps, summarised by
#      scripts/trace_summary.py, as launched and with CUDA_LAUNCH_BLOCKING=1
#      (or, where Nsight Systems is installed, its CUDA API and kernel tables).
# Figures go to $OUT_DIR/gpu_check.txt (default gpu_check_out/).
#
#   scripts/gpu_check.sh                       # builds here (scripts/build.sh) first
#   scripts/gpu_check.sh --prebuilt .devpack   # binaries of scripts/gpu_pack.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT_DIR:-gpu_check_out}"
mkdir -p "$out"
report="$out/gpu_check.txt"
: > "$report"
say() { echo "$*" | tee -a "$report"; }

if [[ "${1:-}" == "--prebuilt" ]]; then
  pack="$2"
  root="$(mktemp -d)"
  tar -C "$root" -xJf "$pack/pack.tar.xz"
  dflow="$root/bin/dflow" tests="$root/bin/gpu_tests" bench="$root/bin/gpu_bench"
  direct="$root/bin/cnn_direct_bench"
  export LD_LIBRARY_PATH="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [[ -d "$root/data" && ! -d /usr/share/datasets/fashion-mnist ]]; then
    mkdir -p /usr/share/datasets && cp -r "$root/data" /usr/share/datasets/fashion-mnist
  fi
else
  scripts/build.sh || exit 1
  dflow=build/bin/dflow tests=build/gpu_tests bench=build/bench/gpu_bench
  direct=build/bench/cnn_direct_bench
fi
# CUDA's libraries where the machine keeps them (a toolkit, or Python wheels).
for lib in libcublas.so.13 libcudnn.so.9; do
  if ! ldconfig -p | grep -q "$lib"; then
    dir="$(dirname "$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)")"
    [[ "$dir" != "." ]] && export LD_LIBRARY_PATH="$dir:${LD_LIBRARY_PATH:-}"
  fi
done

say "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$report"
missing="$(ldd "$tests" | grep 'not found')"
[[ -n "$missing" ]] && say "missing libraries: $missing"

status=0
say "== 1. GPU unit tests (one process each, as ctest runs them)"
: > "$out/gpu_tests.log"
passed=0 failed=()
for t in $("$tests" --gtest_list_tests | awk '/^[^ ]/ {s=$1} /^  / {print s $1}'); do
  timeout 60 "$tests" --gtest_filter="$t" >> "$out/gpu_tests.log" 2>&1
  rc=$?
  if [[ $rc -eq 0 ]]; then
    passed=$((passed + 1))
  else
    failed+=("$t(rc $rc)")
    if [[ $rc -ge 128 ]] && command -v cuda-gdb > /dev/null; then  # A crash: where.
      { echo "== $t"; timeout 120 cuda-gdb -batch -ex run -ex bt --args "$tests" \
          --gtest_filter="$t" 2>&1 | grep -E 'signal|^#[0-9]' | head -12; } >> "$out/crashes.txt"
    fi
  fi
done
skipped=$(grep -cE '^\[  SKIPPED \] [A-Za-z]' "$out/gpu_tests.log")
say "gpu_tests: $((passed - skipped)) passed, $skipped skipped (no GPU);" \
    "${#failed[@]} failed: ${failed[*]:-none}"
[[ ${#failed[@]} -ne 0 ]] && status=1
grep -hE "Failure|Expected|Which is|GPU .* vs CPU|error" "$out/gpu_tests.log" | head -40 >> "$report"

say "== 1b. TensorFlow graphs (MLP, CNN, RNN loop, RNN on TensorArrays) pinned to /job:worker/task:0/device:GPU:0 on a dflow server"
timeout 150 python3 tests/gpu_graph_test.py "$dflow" --require-gpu > "$out/gpu_graph.log" 2>&1
rc=$?
grep -v "  on CPU" "$out/gpu_graph.log" | tail -21 | tee -a "$report"
[[ $rc -ne 0 ]] && { say "gpu_graph_test failed (rc $rc)"; status=1; }

train() {  # label, device env, args...
  local label="$1" env="$2"; shift 2
  local log="$out/train_$label.log"
  env $env timeout 150 "$dflow" train --metrics-out "$out/train_$label.json" "$@" > "$log" 2>&1
  local rc=$?
  say "train $label (rc $rc): $(grep -E 'test accuracy' "$log" | tail -1)"
  [[ $rc -ne 0 ]] && { tail -5 "$log" | tee -a "$report"; status=1; }
}
say "== 2. dflow train, GPU against CPU (same seed)"
if [[ -n "${GPU_CHECK_QUICK:-}" ]]; then  # A first look at a machine: GPU runs only.
  train mlp_gpu "" --model mlp --epochs 1
  train cnn_gpu "" --model cnn --epochs 1
else
  train mlp_gpu "" --model mlp --epochs 3
  train mlp_cpu "CUDA_VISIBLE_DEVICES=" --model mlp --epochs 3
  train cnn_gpu "" --model cnn --epochs 1
  train cnn_cpu "CUDA_VISIBLE_DEVICES=" --model cnn --epochs 1
fi

say "== 3. benchmark"
timeout 120 "$bench" 2>&1 | tee -a "$report" || status=1
# The CNN step written directly with cuDNN and cuBLAS (the issue's baseline).
timeout 120 "$direct" --steps 469 2> "$out/cnn_direct.log" | tail -1 | tee -a "$report" || status=1
grep -E "grad|pool|algo" "$out/cnn_direct.log" | head -12 >> "$report"
# Peers of `dflow train`'s GPU figures: the same steps in PyTorch (cuDNN and
# cuBLAS called per op), where the machine has it.
if python3 -c "import torch" 2> /dev/null; then
  for model in mlp cnn; do
    timeout 120 python3 bench/gpu/torch_gpu_step.py --model "$model" 2>&1 | tail -1 | tee -a "$report"
  done
fi

say "== 4. where a GPU CNN step's time goes (steps 200-202; host spans, then kernel spans)"
modes="launch kernels"
if command -v nsys > /dev/null; then
  # Nsight's CUDA API and kernel tables over 203 steps replace the blocking
  # trace: host time per CUDA/cuDNN call, GPU time per kernel.
  modes="launch"
  timeout 150 nsys profile -t cuda,osrt -o "$out/cnn_nsys" --force-overwrite true \
    "$dflow" train --model cnn --epochs 1 --max-steps 203 > "$out/nsys.log" 2>&1
  for report_name in "cuda_api_sum cudaapisum" "cuda_gpu_kern_sum gpukernsum"; do
    for name in $report_name; do  # Newer name first, then the older one.
      timeout 60 nsys stats -q --report "$name" "$out/cnn_nsys.nsys-rep" > "$out/nsys_$name.txt" \
        2>&1 && break
    done
    say "-- nsys $name"
    head -30 "$out/nsys_$name.txt" | cut -c1-160 | tee -a "$report"
  done
fi
for mode in $modes; do
  blocking=""
  [[ $mode == kernels ]] && blocking="CUDA_LAUNCH_BLOCKING=1"
  env $blocking timeout 90 "$dflow" train --model cnn --epochs 1 --max-steps 203 \
    --trace-steps 200,201,202 --trace-dir "$out/trace_$mode" > "$out/trace_$mode.log" 2>&1
  python3 scripts/trace_summary.py "$out/trace_$mode"/*.json --top 30 > "$out/trace_$mode.txt" 2>&1
  say "-- $mode"
  head -28 "$out/trace_$mode.txt" | tee -a "$report"
done
say "== gpu_check exit $status"
# Few files: the report, crash traces, and every log in one archive.
tar -C "$out" -czf "$out/logs.tar.gz" --exclude=logs.tar.gz --exclude=gpu_check.txt \
  --exclude=crashes.txt . 2>/dev/null
find "$out" -mindepth 1 -maxdepth 1 ! -name gpu_check.txt ! -name crashes.txt ! -name logs.tar.gz \
  -exec rm -rf {} +
exit $status
