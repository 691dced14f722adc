#!/usr/bin/env python3
"""TensorFlow 1.x graphs pinned to /job:worker/task:0/device:GPU:0 (made by real
TensorFlow: tests/data/gen_gpu_graph_reference.py: an MLP, a CNN with max and average
pooling, an RNN in a TensorFlow 1.x while loop, the same RNN on TensorArrays as
dynamic_rnn runs it (in TensorFlow 1.x loops, and in control flow v2's While ops on
TensorLists), a CNN with fused batch norm and tf.compat.v1.losses, and the first CNN
with data_format NCHW, forward and backward) on a `dflow server`, driven by
`dflow run-graph --target grpc://...`, against TensorFlow's values.

With a GPU (scripts/gpu_check.sh) the server places the pinned nodes that have a GPU
kernel there; without one, soft placement runs them on the CPU. Either way the fetches
must equal TensorFlow's within 1e-4, and the server's log_device_placement lines show
where each node ran. Prints "NAME: gpu nodes: N of M" from those lines.

  python3 tests/gpu_graph_test.py build/bin/dflow [--require-gpu]
Stdlib only: the GPU machine's Python has no TensorFlow.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dflow_cluster  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gpu")


def close(a, b, tol=1e-4):
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    return abs(a - b) <= tol * (1 + abs(b))


def flat(v):
    return [x for e in v for x in flat(e)] if isinstance(v, list) else [v]


GRAPHS = ["tf_mlp_gpu", "tf_cnn_gpu", "tf_rnn_gpu", "tf_ta_rnn_gpu", "tf_ta_rnn_v2_gpu",
          "tf_bn_cnn_gpu", "tf_cnn_nchw_gpu"]


def run_graph(dflow, port, config, name, require_gpu, server):
    """Runs graph `name` on the server at `port`; True when its fetches equal TensorFlow's
    (and, with require_gpu, some of its nodes ran on the GPU)."""
    golden = json.load(open(os.path.join(DATA, name + "_golden.json")))
    log_before = len(server.output().splitlines())
    cmd = [dflow, "run-graph", os.path.join(DATA, name + ".pbtxt"),
           "--target", f"grpc://127.0.0.1:{port}", "--config", config]
    for feed, value in golden["feeds"].items():
        cmd += ["--feed", f"{feed}={json.dumps(value)}"]
    for fetch in golden["fetches"]:
        cmd += ["--fetch", fetch]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        print(f"{name}: run-graph failed:", run.stderr[-3000:])
        return False
    got = {}
    for line in run.stdout.splitlines():
        t = json.loads(line)
        got[t["name"]] = t["values"]
    ok = True
    for fetch, want in golden["fetches"].items():
        same = close(got.get(fetch, []), flat(want))
        print(f"{name} {fetch}: {'equal to TensorFlow' if same else 'DIFFERS'}")
        ok = ok and same
    log = server.output().splitlines()[log_before:]
    placed = [l for l in log if "/device:" in l and ": (" in l]
    on_gpu = [l for l in placed if "/device:GPU:" in l]
    print(f"{name}: gpu nodes: {len(on_gpu)} of {len(placed)} placed")
    for l in placed:
        if "/device:GPU:" not in l:
            print("  on CPU:", l.strip())
    if require_gpu and not on_gpu:
        print(f"{name}: no node ran on the GPU")
        ok = False
    return ok


def main():
    dflow = sys.argv[1]
    require_gpu = "--require-gpu" in sys.argv
    with tempfile.TemporaryDirectory() as tmp:
        _, ports, servers = dflow_cluster.start_cluster(dflow, tmp, {"worker": 1})
        try:
            config = os.path.join(tmp, "config.pbtxt")
            with open(config, "w") as f:
                f.write("allow_soft_placement: true\nlog_device_placement: true\n")
            ok = True
            for name in GRAPHS:
                ok = run_graph(dflow, ports["worker"][0], config, name, require_gpu,
                               servers["worker"][0]) and ok
            return 0 if ok else 1
        finally:
            for s in servers["worker"]:
                s.stop()


if __name__ == "__main__":
    sys.exit(main())
