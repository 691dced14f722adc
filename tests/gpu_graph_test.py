#!/usr/bin/env python3
"""A TensorFlow 1.x graph pinned to /job:worker/task:0/device:GPU:0 (made by real
TensorFlow: tests/data/gen_gpu_graph_reference.py) on a `dflow server`, driven by
`dflow run-graph --target grpc://...`, against TensorFlow's values.

With a GPU (scripts/gpu_check.sh) the server places the pinned nodes that have a GPU
kernel there; without one, soft placement runs them on the CPU. Either way the fetches
must equal TensorFlow's within 1e-4, and the server's log_device_placement lines show
where each node ran. Prints "gpu nodes: N of M" from those lines.

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


def main():
    dflow = sys.argv[1]
    require_gpu = "--require-gpu" in sys.argv
    golden = json.load(open(os.path.join(DATA, "tf_mlp_gpu_golden.json")))
    with tempfile.TemporaryDirectory() as tmp:
        _, ports, servers = dflow_cluster.start_cluster(dflow, tmp, {"worker": 1})
        try:
            config = os.path.join(tmp, "config.pbtxt")
            with open(config, "w") as f:
                f.write("allow_soft_placement: true\nlog_device_placement: true\n")
            cmd = [dflow, "run-graph", os.path.join(DATA, "tf_mlp_gpu.pbtxt"),
                   "--target", f"grpc://127.0.0.1:{ports['worker'][0]}", "--config", config]
            for name, value in golden["feeds"].items():
                cmd += ["--feed", f"{name}={json.dumps(value)}"]
            for name in golden["fetches"]:
                cmd += ["--fetch", name]
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if run.returncode != 0:
                print("run-graph failed:", run.stderr[-3000:])
                return 1
            got = {}
            for line in run.stdout.splitlines():
                t = json.loads(line)
                got[t["name"]] = t["values"]
            ok = True
            for name, want in golden["fetches"].items():
                same = close(got.get(name, []), flat(want))
                print(f"{name}: {'equal to TensorFlow' if same else 'DIFFERS'}")
                ok = ok and same
            log = servers["worker"][0].output()
            placed = [l for l in log.splitlines() if "/device:" in l and ": (" in l]
            on_gpu = [l for l in placed if "/device:GPU:" in l]
            print(f"gpu nodes: {len(on_gpu)} of {len(placed)} placed")
            for l in placed:
                if "/device:GPU:" not in l:
                    print("  on CPU:", l.strip())
            if require_gpu and not on_gpu:
                print("no node ran on the GPU")
                ok = False
            return 0 if ok else 1
        finally:
            for s in servers["worker"]:
                s.stop()


if __name__ == "__main__":
    sys.exit(main())
