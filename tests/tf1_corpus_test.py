#!/usr/bin/env python3
"""The TF1 corpus (tests/tf1_programs.py) through TensorFlow's client on a dflow cluster.

For every program: run it in local TensorFlow (an in-process session, no device
function), then against a dflow cluster of real `dflow server` processes on
127.0.0.1 (1 ps + 1 worker, or the program's CLUSTER_SHAPES; its variables placed on the ps by
tf.compat.v1.train.replica_device_setter, everything else on the worker, the
session on grpc://worker), with the program's own driver (Supervisor,
MonitoredTrainingSession) unchanged, and on a cluster of TensorFlow's own servers
(tf.distribute.Server) the same way. Each step's fetched values (loss, global step,
learning rate, summaries) must match TensorFlow's within 1e-5 relative (1e-6
absolute), histogram buckets and counts likewise, for local TensorFlow and for
TensorFlow's cluster.

Each run is a child process with a deadline; each cluster is killed at the end.
Exits 77 (skipped, reason printed) only where TensorFlow cannot be imported.
Usage: tf1_corpus_test.py path/to/dflow [--only NAME ...] [--steps N]
       (internally: tf1_corpus_test.py --run NAME --target T --cluster JSON --out FILE)
"""
import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

# Keras 2 for the programs built with tf.compat.v1.nn.rnn_cell (before TensorFlow loads).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dflow_cluster import import_tensorflow_or_skip, start_cluster  # noqa: E402

RUN_TIMEOUT_S = 180
RTOL, ATOL = 1e-5, 1e-6


def cluster_shape(programs, name):
    return programs.CLUSTER_SHAPES.get(name, {"ps": 1, "worker": 1})


def run_child(args):
    np, tf = import_tensorflow_or_skip()
    import tf1_programs
    if args.cluster == "tensorflow":  # TensorFlow's own servers, in this process.
        from dflow_cluster import free_port
        shape = cluster_shape(tf1_programs, args.run)
        spec = {job: [f"127.0.0.1:{free_port()}" for _ in range(n)] for job, n in shape.items()}
        servers = [tf.distribute.Server(tf.train.ClusterSpec(spec), job_name=job, task_index=i,
                                        config=tf1_programs.session_config())
                   for job, n in shape.items() for i in range(n)]
        args.target, args.cluster = servers[-1].target, json.dumps(spec)
    cluster = json.loads(args.cluster) if args.cluster else None
    records = tf1_programs.PROGRAMS[args.run](args.target, cluster, args.workdir, args.steps)
    with open(args.out, "w") as f:
        json.dump(records, f)


def differences(got, want, path=""):
    """Where `got` and `want` differ beyond the tolerance (paths, values)."""
    if isinstance(want, dict):
        if set(got) != set(want):
            return [f"{path}: keys {sorted(got)} != {sorted(want)}"]
        return [d for k in want for d in differences(got[k], want[k], f"{path}.{k}")]
    if isinstance(want, list):
        if len(got) != len(want):
            return [f"{path}: {len(got)} values != {len(want)}: {got} vs {want}"]
        return [d for i, (g, w) in enumerate(zip(got, want)) for d in differences(g, w, f"{path}[{i}]")]
    if isinstance(want, float) or isinstance(got, float):
        if math.isclose(got, want, rel_tol=RTOL, abs_tol=ATOL):
            return []
        return [f"{path}: {got} != {want}"]
    return [] if got == want else [f"{path}: {got} != {want}"]


def run_program(name, steps, tmp, target="", cluster=""):
    workdir = tempfile.mkdtemp(prefix=f"{name}_", dir=tmp)
    out = os.path.join(workdir, "records.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--run", name, "--target", target,
           "--cluster", cluster, "--out", out, "--workdir", workdir, "--steps", str(steps)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {RUN_TIMEOUT_S} s"
    if p.returncode != 0:
        return None, (p.stdout + p.stderr)[-4000:]
    with open(out) as f:
        return json.load(f), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dflow", nargs="?")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--run")
    ap.add_argument("--target", default="")
    ap.add_argument("--cluster", default="")
    ap.add_argument("--out")
    ap.add_argument("--workdir")
    args = ap.parse_args()
    if args.run:
        return run_child(args)
    import_tensorflow_or_skip()
    import tf1_programs
    names = args.only or list(tf1_programs.PROGRAMS)
    tmp = tempfile.mkdtemp(prefix="dflow_tf1_corpus_")
    failures = []
    for name in names:
        if name in tf1_programs.NEEDS_TF_KERAS and importlib.util.find_spec("tf_keras") is None:
            print(f"skip {name}: needs tf-keras (scripts/setup.sh installs it)")
            continue
        local, error = run_program(name, args.steps, tmp)
        tf_cluster, tf_error = run_program(name, args.steps, tmp, cluster="tensorflow")
        if local is None or tf_cluster is None:
            print(f"FAIL {name}: TensorFlow itself failed: {error or tf_error}")
            failures.append(name)
            continue
        cluster, ports, servers = start_cluster(args.dflow, tmp,
                                                cluster_shape(tf1_programs, name))
        try:
            got, error = run_program(name, args.steps, tmp, f"grpc://127.0.0.1:{ports['worker'][0]}",
                                     cluster)
        finally:
            for job in servers.values():
                for s in job:
                    s.stop()
        if got is None:
            print(f"FAIL {name}: on the dflow cluster: {error}")
            failures.append(name)
            continue
        diffs = differences(got, tf_cluster)
        local_diffs = differences(got, local)
        ok = not diffs and not local_diffs and len(got) == args.steps
        last = {k: v for r in local for k, v in r.items()}  # The last value of each.
        print(("ok   " if ok else "FAIL ") + f"{name}: {len(got)} steps on dflow "
              f"{'equal to' if ok else 'unlike'} TensorFlow's "
              f"(last loss {last.get('loss', last.get('losses'))}, "
              f"global step {last.get('global_step')})"
              + ("" if not diffs else "; vs TensorFlow's cluster: " + "; ".join(diffs[:8]))
              + ("" if not local_diffs else "; vs local TensorFlow: " + "; ".join(local_diffs[:8])),
              flush=True)
        if not ok:
            failures.append(name)
    if failures:
        print(f"{len(failures)} program(s) failed: {failures}")
        return 1
    print(f"all {len(names)} programs match TensorFlow, local and on its own cluster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
