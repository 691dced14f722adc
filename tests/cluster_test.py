#!/usr/bin/env python3
"""Multi-process cluster test: real `dflow server` processes on 127.0.0.1.

Starts 1 ps and 2 workers, runs graphs through worker 0's master with
`dflow run-graph --target grpc://...` (variables live on the ps across
sessions, tensors cross processes), checks a taken port and a malformed spec
fail clearly, then kills the ps and expects UNAVAILABLE naming it within the
session's deadline, and stops the workers with SIGTERM.

Usage: cluster_test.py path/to/dflow
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from dflow_cluster import start_cluster

DFLOW = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="dflow_cluster_test_")
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail), flush=True)
    if not ok:
        failures.append(name)


def run_graph(target, graph, fetches, timeout_ms=5000, wall=30, config_text=""):
    config = os.path.join(TMP, "config.pbtxt")
    with open(config, "w") as f:
        f.write(f"operation_timeout_in_ms: {timeout_ms}\n{config_text}")
    cmd = [DFLOW, "run-graph", graph, "--target", target, "--config", config]
    for fetch in fetches:
        cmd += ["--fetch", fetch]
    start = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=wall)
    return p.returncode, p.stdout, p.stderr, time.time() - start


def values(stdout):
    return {j["name"]: j["values"] for j in map(json.loads, stdout.splitlines())}


# v = [1, 2, 3] on the ps; `add` adds 2 * ones, computed on worker 1, to v on
# the ps; `doubled` reads v on worker 0.
GRAPH = """
node { name: "v" op: "VariableV2" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 3 } } } } }
node { name: "init_value" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } }
    float_val: 1 float_val: 2 float_val: 3 } } } }
node { name: "init" op: "Assign" input: "v" input: "init_value" device: "/job:ps/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "two" op: "Const" device: "/job:worker/task:1"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } }
    float_val: 2 } } } }
node { name: "inc" op: "Add" input: "two" input: "two" device: "/job:worker/task:1"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "half_inc" op: "Mul" input: "inc" input: "half" device: "/job:worker/task:1"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "half" op: "Const" device: "/job:worker/task:1"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 0.5 } } } }
node { name: "add" op: "AssignAdd" input: "v" input: "half_inc" device: "/job:ps/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "doubled" op: "Add" input: "v" input: "v" device: "/job:worker/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
"""


def main():
    graph = os.path.join(TMP, "graph.pbtxt")
    with open(graph, "w") as f:
        f.write(GRAPH)
    cluster, ports, servers = start_cluster(DFLOW, TMP, {"ps": 1, "worker": 2})
    ps, workers = servers["ps"][0], servers["worker"]
    target = f"grpc://127.0.0.1:{ports['worker'][0]}"
    try:
        check("server logs its devices",
              "/job:ps/replica:0/task:0/device:CPU:1" in ps.output(), ps.output())

        rc, out, err, _ = run_graph(target, graph, ["init:0"])
        check("init on the ps", rc == 0 and values(out) == {"init:0": [1, 2, 3]}, out + err)
        for step, want in [(1, [3, 4, 5]), (2, [5, 6, 7])]:
            rc, out, err, _ = run_graph(target, graph, ["add:0"])
            check(f"assign_add step {step} crosses processes",
                  rc == 0 and values(out) == {"add:0": want}, out + err)
        rc, out, err, _ = run_graph(target, graph, ["doubled:0"])
        check("read on worker 0", rc == 0 and values(out) == {"doubled:0": [10, 12, 14]},
              out + err)
        # Worker 1's master sees the same ps variable.
        rc, out, err, _ = run_graph(f"grpc://127.0.0.1:{ports['worker'][1]}", graph,
                                    ["doubled:0"])
        check("second master", rc == 0 and values(out) == {"doubled:0": [10, 12, 14]}, out + err)

        # A second server on a taken port exits non-zero, naming the address.
        p = subprocess.run([DFLOW, "server", "--cluster", cluster, "--job", "ps", "--task", "0"],
                           capture_output=True, text=True, timeout=30)
        check("taken port exits non-zero", p.returncode != 0, p.stdout + p.stderr)
        check("taken port message", str(ports["ps"][0]) in p.stderr, p.stderr)
        p = subprocess.run([DFLOW, "server", "--cluster", '{"ps": [', "--job", "ps", "--task",
                            "0"], capture_output=True, text=True, timeout=30)
        check("malformed spec exits non-zero", p.returncode != 0 and "cluster" in p.stderr.lower(),
              p.stderr)

        # Kill the ps: the next step fails UNAVAILABLE naming it, within the deadline.
        ps.stop(signal.SIGKILL)
        rc, out, err, took = run_graph(target, graph, ["doubled:0"], timeout_ms=3000)
        check("dead ps fails", rc != 0, out)
        check("dead ps is UNAVAILABLE naming the task",
              "UNAVAILABLE" in err.upper() and "/job:ps/replica:0/task:0" in err, err)
        check("dead ps within the deadline", took < 10, f"took {took:.1f}s")
        # Worker 0 still serves sessions that leave the ps out.
        rc, out, err, _ = run_graph(target, graph, ["inc:0"], timeout_ms=3000,
                                    config_text='device_filters: "/job:worker"\n')
        check("workers serve without the ps", rc == 0 and values(out) == {"inc:0": [4, 4, 4]},
              out + err)
    finally:
        codes = [w.stop() for w in workers]
        ps.stop(signal.SIGKILL)
    check("SIGTERM stops workers cleanly", codes == [0, 0], str(codes))
    check("workers log their shutdown", all("stopped" in w.output() for w in workers),
          workers[0].output())
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
