#!/usr/bin/env bash
# End-to-end checks of the dflow CLI: run-graph output, feeds, errors, ops.
# Usage: tests/cli_test.sh path/to/dflow
set -uo pipefail
DFLOW=${1:?usage: cli_test.sh DFLOW_BINARY}
DATA="$(cd "$(dirname "$0")" && pwd)/data/golden"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0
failed=0

check() {  # check NAME CONDITION_CMD...
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $name"; fi
}

# A fetched tensor prints as one JSON line with TensorFlow's values.
out=$("$DFLOW" run-graph "$DATA/array_ops.pbtxt" --fetch range:0 2>"$TMP/err")
check "range json" test "$out" = '{"name":"range:0","dtype":"int32","shape":[3],"values":[2,5,8]}'

# Feeds take nested JSON lists; the dtype comes from the placeholder.
out=$("$DFLOW" run-graph "$DATA/mlp_forward.pbtxt" --fetch pred:0 \
  --feed 'x=[[1,0,0,0,0,0],[0,1,0,0,0,0]]' --feed 'labels=[0,1]' 2>"$TMP/err")
check "feed nested list" grep -q '"name":"pred:0","dtype":"int64","shape":\[2\]' <<<"$out"

# A string that is not UTF-8 prints with U+FFFD in its place (once aborted the CLI).
cat >"$TMP/bytes.pbtxt" <<'GRAPH'
node { name: "s" op: "Const" attr { key: "dtype" value { type: DT_STRING } }
  attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { dim { size: 2 } }
    string_val: "ok" string_val: "\377x" } } } }
GRAPH
out=$("$DFLOW" run-graph "$TMP/bytes.pbtxt" --fetch s:0 2>"$TMP/err")
check "non-utf8 string exit 0" test $? -eq 0
check "non-utf8 string replaced" test "$out" = '{"name":"s:0","dtype":"string","shape":[2],"values":["ok","'$'\xef\xbf\xbd''x"]}'

# Errors go to stderr with exit code 1.
"$DFLOW" run-graph "$DATA/mlp_forward.pbtxt" --fetch nosuch:0 >"$TMP/out" 2>"$TMP/err"
check "unknown fetch exit 1" test $? -eq 1
check "unknown fetch message" grep -q "nosuch" "$TMP/err"

"$DFLOW" run-graph "$DATA/mlp_forward.pbtxt" --fetch pred:0 --feed 'x=[[1,2],[3' >"$TMP/out" 2>"$TMP/err"
check "bad feed json exit 1" test $? -eq 1
check "bad feed json message" grep -q "not JSON" "$TMP/err"

"$DFLOW" run-graph "$DATA/mlp_forward.pbtxt" --fetch probs:0 >"$TMP/out" 2>"$TMP/err"
check "missing feed exit 1" test $? -eq 1
check "missing feed names placeholder" grep -q "placeholder" "$TMP/err"

printf 'node { name: "a" op: "Const" ' >"$TMP/trunc.pbtxt"
"$DFLOW" run-graph "$TMP/trunc.pbtxt" --fetch a:0 >"$TMP/out" 2>"$TMP/err"
check "truncated text exit 1" test $? -eq 1

head -c 100 /dev/urandom >"$TMP/garbage.pb"
"$DFLOW" run-graph "$TMP/garbage.pb" --fetch a:0 >"$TMP/out" 2>"$TMP/err"
check "garbage binary exit 1" test $? -eq 1

# --config: four CPU devices for a graph pinned to CPU:0..3.
printf 'device_count { key: "CPU" value: 4 }\n' >"$TMP/config.pbtxt"
out=$("$DFLOW" run-graph "$DATA/multi_device.pbtxt" --config "$TMP/config.pbtxt" \
  --feed 'x=[[1,0],[0,1]]' --fetch total:0 2>"$TMP/err")
check "multi device run" grep -q '"name":"total:0"' <<<"$out"

# ops --check lists every op a graph uses that dflow lacks, with its nodes.
cat >"$TMP/unknown.pbtxt" <<'GRAPH'
node { name: "a" op: "NoSuchSummary" }
node { name: "b" op: "NoSuchReciprocal" }
node { name: "c" op: "NoSuchSummary" }
node { name: "k" op: "NoOp" }
GRAPH
"$DFLOW" ops --check "$TMP/unknown.pbtxt" >"$TMP/out" 2>"$TMP/err"
check "ops --check unknown exit 1" test $? -eq 1
check "ops --check lists each op with its count and nodes" \
  test "$(cat "$TMP/out")" = "$(printf 'NoSuchSummary\t2\ta c\nNoSuchReciprocal\t1\tb')"
check "ops --check message" grep -q "2 ops dflow does not support" "$TMP/err"
# Every program of the TF1 corpus (tests/data/gen_tf1_corpus.py) is supported.
for graph in "$(dirname "$DATA")"/tf1_corpus/*.pbtxt; do
  check "ops --check $(basename "$graph")" "$DFLOW" ops --check "$graph" >/dev/null
done

# ops lists registered ops with their kernels.
"$DFLOW" ops >"$TMP/ops"
check "ops lists MatMul" grep -qE "^MatMul	.*CPU T=float" "$TMP/ops"
# Built with CUDA, the GPU kernels are listed too.
if "$DFLOW" --version | grep -q "CUDA yes"; then
  check "ops lists MatMul's GPU kernel" grep -qE "^MatMul	.*GPU T=float" "$TMP/ops"
fi

# Out-of-range flags fail as sentences naming the flag, the bound and the value.
"$DFLOW" train --epochs -1 >"$TMP/out" 2>"$TMP/err"
check "epochs -1 exit nonzero" test $? -ne 0
check "epochs -1 sentence" grep -q -- "--epochs must be >= 1, got -1" "$TMP/err"
check "no raw CLI11 bound" bash -c "! grep -q '179769313486' '$TMP/err'"
"$DFLOW" cluster --workers 0 >"$TMP/out" 2>"$TMP/err"
check "workers 0 sentence" grep -q -- "--workers must be >= 1, got 0" "$TMP/err"
"$DFLOW" train --task -2 >"$TMP/out" 2>"$TMP/err"
check "task -2 sentence" grep -q -- "--task must be >= 0, got -2" "$TMP/err"
"$DFLOW" train --batch-size many >"$TMP/out" 2>"$TMP/err"
check "batch-size not a number" grep -q -- "--batch-size must be an integer >= 1, got many" "$TMP/err"
"$DFLOW" server --inter-op-threads -1 >"$TMP/out" 2>"$TMP/err"
check "inter-op-threads -1 sentence" grep -q -- "--inter-op-threads must be >= 0, got -1" "$TMP/err"
"$DFLOW" train --learning-rate 0 >"$TMP/out" 2>"$TMP/err"
check "learning-rate 0 sentence" grep -q -- "--learning-rate must be > 0, got 0" "$TMP/err"

# --version: version, commit, build type and CUDA, exit 0.
"$DFLOW" --version >"$TMP/out" 2>"$TMP/err"
check "version exit 0" test $? -eq 0
check "version line" grep -qE '^dflow [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out"
check "version commit" grep -qE '^git commit ([0-9a-f]{7,}|unknown)$' "$TMP/out"
check "version build type" grep -qE '^build type [A-Za-z]+' "$TMP/out"
check "version cuda" grep -qE '^CUDA (yes|no)$' "$TMP/out"

# A cluster whose task cannot start stops the tasks it started and signals
# nothing else: it once signalled kill(-1, SIGTERM), every process the user
# may signal, for the tasks not yet started, then aborted. Run in a PID
# namespace of its own (there that bug kills only the namespace's sentinel);
# a file descriptor limit makes a later task's pipe fail. Skipped where
# unprivileged: no namespace.
if unshare --pid --fork --mount-proc true 2>/dev/null; then
  timeout -k 10 300 unshare --pid --fork --mount-proc bash -c '
    sleep 300 & sentinel=$!
    for n in $(seq 6 16); do
      out=$( (ulimit -n "$n"; timeout -k 5 20 "$1" cluster --ps 1 --workers 2 -- --epochs 1 \
        --data synthetic) 2>&1 )
      rc=$?
      if grep -q "cannot create a pipe" <<<"$out"; then
        echo "exit $rc"
        kill -0 "$sentinel" 2>/dev/null && echo "sentinel alive"
        pgrep -f "^dflow train" >/dev/null || echo "no task left"
        exit 0
      fi
    done
    echo "no limit made a spawn fail"' bash "$DFLOW" >"$TMP/out" 2>"$TMP/err"
  check "failed spawn exits 1" grep -qx "exit 1" "$TMP/out"
  check "failed spawn signals only its tasks" grep -qx "sentinel alive" "$TMP/out"
  check "failed spawn stops the started tasks" grep -qx "no task left" "$TMP/out"
else
  echo "skipped: failed spawn (no PID namespace)"
fi

echo "$passed passed, $failed failed"
test "$failed" -eq 0
