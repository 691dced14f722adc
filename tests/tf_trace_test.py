#!/usr/bin/env python3
"""Step traces: TensorFlow's client asks a dflow cluster for RunMetadata.step_stats, and
`dflow train --trace-steps` writes Chrome traces of cluster steps.

Cases, each printing one PASS/FAIL line with its reason:

  tf_full_trace   Real `dflow server` processes (tests/dflow_cluster.py: 1 ps + 1 worker);
                  TensorFlow's client (tf.compat.v1.Session("grpc://<worker>")) builds a
                  training step as a TF1 user would (w, b on /job:ps, a linear model and
                  GradientDescent on /job:worker) and runs it with
                  RunOptions(trace_level=FULL_TRACE): run_metadata.step_stats holds devices
                  of both tasks; every op the step needs (the train op's and the loss's
                  transitive inputs) appears as a node; every node's times are sane
                  (op_end_rel <= all_end_rel, within the step's wall time); the worker's
                  _Recv of a ps tensor names the ps device; TensorFlow's
                  tensorflow.python.client.timeline.Timeline(step_stats)
                  .generate_chrome_trace_format() reads it and names both tasks' devices. A
                  run without trace_level returns no step_stats.
  train_trace     `dflow cluster --ps 1 --workers 2 --mode between-async -- --data synthetic
                  --max-steps 300 --trace-steps 100 --trace-dir DIR`: each worker writes
                  DIR/trace_worker<i>_step100.json and says so on stdout; each is Chrome trace
                  JSON ({"traceEvents": [...]}, "X" events with ts/dur, a process row per
                  device) showing its worker and the ps; both together show every task; a
                  transfer between tasks is a flow arrow.
  train_trace_sync
                  The same with `--mode between-sync --max-steps 40 --trace-steps 3`:
                  every worker that ran a step writes its trace of global step 3 (the
                  chief always; a worker that joined after the last step ran none).
  train_trace_in_graph
                  The same with `--mode in-graph-sync --trace-steps 2`: the one client's
                  trace of one cluster step shows every task (the ps and both workers).
  train_trace_single
                  `dflow train --data synthetic --max-steps 5 --trace-steps 1,3` in one
                  process, no --trace-dir: ./trace_step1.json and ./trace_step3.json in the
                  working directory, named on stdout, one row (the local device) holding
                  the step's ops; `--trace-steps 2,x` is refused naming 'x'.

Every wait is bounded: a watchdog kills the servers after CASE_TIMEOUT_S, `dflow cluster`
runs under a timeout; servers are always stopped.
Where TensorFlow cannot be imported, tf_full_trace says so and passes without checks.
"""
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dflow_cluster import WatchedCluster, run_cases  # noqa: E402

# Only tf_full_trace needs TensorFlow; the `dflow train` cases run without it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
try:
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.client import timeline
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
except ImportError as e:
    tf, TF_MISSING = None, str(e)

CASE_TIMEOUT_S = 60
CLUSTER_TIMEOUT_S = 90


def step_ops(graph, fetches):
    """Names of every op the fetches need: their transitive data and control inputs."""
    seen, todo = set(), [f.op if hasattr(f, "op") else f for f in fetches]
    while todo:
        op = todo.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        todo.extend(t.op for t in op.inputs)
        todo.extend(op.control_inputs)
    return seen


def tf_full_trace(dflow, tmp, checks):
    if tf is None:
        checks.info(f"SKIPPED: TensorFlow cannot be imported here ({TF_MISSING})")
        return
    with WatchedCluster(dflow, tmp, CASE_TIMEOUT_S) as c:
        g = tf.Graph()
        with g.as_default():
            with tf1.device("/job:ps/task:0"):
                w = tf1.get_variable("trace_w", initializer=tf.ones([4, 2]))
                b = tf1.get_variable("trace_b", initializer=tf.zeros([2]))
            with tf1.device("/job:worker/task:0"):
                x = tf1.placeholder(tf.float32, [None, 4], name="x")
                y = tf1.placeholder(tf.float32, [None, 2], name="y")
                loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y), name="loss")
                train = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = tf1.global_variables_initializer()
        feed = {x: np.ones([3, 4], np.float32), y: np.zeros([3, 2], np.float32)}
        with tf1.Session(c.target, graph=g) as sess:
            sess.run(init)
            plain = tf1.RunMetadata()
            sess.run(train, feed, run_metadata=plain)
            checks.check(len(plain.step_stats.dev_stats) == 0,
                         f"an untraced run returns no step_stats "
                         f"({len(plain.step_stats.dev_stats)} devices)")
            md = tf1.RunMetadata()
            start = time.time() * 1e6
            sess.run([train, loss], feed,
                     options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE),
                     run_metadata=md)
            end = time.time() * 1e6
        devices = [d.device for d in md.step_stats.dev_stats]
        checks.info(f"devices: {devices}")
        checks.check(any(d.startswith("/job:ps/replica:0/task:0/device:CPU") for d in devices),
                     "step_stats has the ps task's device")
        checks.check(any(d.startswith("/job:worker/replica:0/task:0/device:CPU")
                         for d in devices), "step_stats has the worker task's device")
        nodes = {}
        for d in md.step_stats.dev_stats:
            for n in d.node_stats:
                nodes.setdefault(n.node_name, []).append((d.device, n))
        wanted = step_ops(g, [train, loss]) - {x.op.name, y.op.name}  # Fed: not run.
        missing = sorted(wanted - set(nodes))
        checks.check(not missing, f"every op of the step is traced ({len(wanted)} ops; "
                                  f"missing: {missing})")
        bad = [name for name, runs in nodes.items() for _, n in runs
               if not (0 <= n.op_start_rel_micros <= n.op_end_rel_micros <= n.all_end_rel_micros
                       and start - 1e6 <= n.all_start_micros <= end + 1e6)]
        checks.check(not bad, f"every node's times are ordered and within the step ({bad[:5]})")
        recvs = [n.timeline_label for d in md.step_stats.dev_stats if "/job:worker/" in d.device
                 for n in d.node_stats if n.timeline_label.split(" = ")[-1].startswith("_Recv(")]
        checks.info(f"worker recvs: {recvs[:3]}")
        checks.check(any("@/job:ps/replica:0/task:0/device:CPU:0" in r for r in recvs),
                     "a worker _Recv names the ps device it receives from")
        labels_ok = all(" = " in n.timeline_label for runs in nodes.values() for _, n in runs)
        checks.check(labels_ok, "every node has a 'name = Op(...)' timeline label")
        trace = json.loads(timeline.Timeline(md.step_stats).generate_chrome_trace_format())
        names = [e["args"]["name"] for e in trace["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"]
        checks.check(any("/job:ps/" in n for n in names) and any("/job:worker/" in n
                                                                for n in names),
                     f"TensorFlow's timeline module shows both tasks ({names})")
        ops = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
        checks.check(len(ops) >= len(wanted), f"its trace has an event per op ({len(ops)})")


def run_cluster(dflow, tmp, mode, workers, trace_step, max_steps=8):
    trace_dir = os.path.join(tmp, "traces")
    args = [dflow, "cluster", "--ps", "1", "--workers", str(workers), "--mode", mode, "--",
            "--data", "synthetic", "--max-steps", str(max_steps),
            "--trace-steps", str(trace_step), "--trace-dir", trace_dir]
    p = subprocess.run(args, capture_output=True, text=True, timeout=CLUSTER_TIMEOUT_S)
    return p.returncode, p.stdout + p.stderr, trace_dir


def task_of(device):
    """"/job:ps/replica:0/task:0" of "/job:ps/replica:0/task:0/device:CPU:0"."""
    m = re.match(r"(/job:[^/]+/replica:\d+/task:\d+)", device)
    return m.group(1) if m else device


def read_trace(checks, path, flows=True):
    """The trace's process names (None if it is not valid Chrome trace JSON)."""
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        checks.check(False, f"{path} is JSON ({e})")
        return None, None
    events = trace.get("traceEvents", [])
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    ops = [e for e in events if e.get("ph") == "X"]
    ok = bool(ops) and all(isinstance(e.get("ts"), int) and e.get("dur", -1) >= 0
                           and e.get("pid") in procs for e in ops)
    checks.check(ok, f"{os.path.basename(path)}: {len(ops)} complete events with ts, dur "
                     f"and a process row each")
    if flows:
        arrows = [e for e in events if e.get("ph") in ("s", "f")]
        checks.check(len(arrows) >= 2, f"{os.path.basename(path)}: transfers between tasks "
                                       f"are flow arrows ({len(arrows)} flow events)")
    return set(procs.values()), ops


def train_trace(dflow, tmp, checks):
    # Async: a worker that joins late never sees the early global steps, so
    # the traced step is one both workers are sure to run past.
    rc, out, trace_dir = run_cluster(dflow, tmp, "between-async", 2, 100, max_steps=300)
    if not checks.check(rc == 0, f"dflow cluster exits 0 (rc {rc}): {out[-2000:]}"):
        return
    checks.info(" / ".join(line for line in out.splitlines() if "local steps" in line))
    every = set()
    for i in range(2):
        path = os.path.join(trace_dir, f"trace_worker{i}_step100.json")
        checks.check(f"step trace written to {path}" in out, f"worker {i} names {path}")
        procs, _ = read_trace(checks, path)
        if procs is None:
            continue
        checks.info(f"worker {i}: {sorted(procs)}")
        tasks = {task_of(p) for p in procs}
        checks.check({"/job:ps/replica:0/task:0", f"/job:worker/replica:0/task:{i}"} <= tasks,
                     f"worker {i}'s trace shows it and the ps ({sorted(tasks)})")
        every |= tasks
    want = {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
            "/job:worker/replica:0/task:1"}
    checks.check(want <= every, f"the two traces together show every task ({sorted(every)})")


def train_trace_in_graph(dflow, tmp, checks):
    rc, out, trace_dir = run_cluster(dflow, tmp, "in-graph-sync", 2, 2)
    if not checks.check(rc == 0, f"dflow cluster exits 0 (rc {rc}): {out[-2000:]}"):
        return
    path = os.path.join(trace_dir, "trace_worker0_step2.json")
    checks.check(f"step trace written to {path}" in out, f"the client names {path}")
    procs, _ = read_trace(checks, path)
    if procs is None:
        return
    tasks = {task_of(p) for p in procs}
    checks.info(f"rows: {sorted(procs)}")
    want = {"/job:ps/replica:0/task:0", "/job:worker/replica:0/task:0",
            "/job:worker/replica:0/task:1"}
    checks.check(want <= tasks, f"one cluster step's trace shows every task ({sorted(tasks)})")


def train_trace_single(dflow, tmp, checks):
    """One process, no --trace-dir: the traces go to the working directory."""
    p = subprocess.run([dflow, "train", "--data", "synthetic", "--max-steps", "5",
                        "--trace-steps", "1,3"], cwd=tmp, capture_output=True, text=True,
                       timeout=CLUSTER_TIMEOUT_S)
    out = p.stdout + p.stderr
    if not checks.check(p.returncode == 0, f"dflow train exits 0 (rc {p.returncode}): {out[-2000:]}"):
        return
    for step in (1, 3):
        checks.check(f"step trace written to ./trace_step{step}.json" in p.stdout,
                     f"stdout names ./trace_step{step}.json ({p.stdout.strip()[-300:]})")
        procs, ops = read_trace(checks, os.path.join(tmp, f"trace_step{step}.json"),
                                flows=False)
        if procs is not None:
            checks.check(procs == {"/job:localhost/replica:0/task:0/device:CPU:0"},
                         f"one row, the local device ({sorted(procs)})")
            names = {e["name"] for e in ops}
            checks.check("MatMul" in names and any("Adam" in n for n in names),
                         f"the step's ops are there ({sorted(names)[:12]}...)")
    bad = subprocess.run([dflow, "train", "--data", "synthetic", "--max-steps", "1",
                          "--trace-steps", "2,x"], cwd=tmp, capture_output=True, text=True,
                         timeout=CLUSTER_TIMEOUT_S)
    checks.check(bad.returncode != 0 and "'x'" in bad.stderr,
                 f"--trace-steps 2,x is refused naming 'x' ({bad.stderr.strip()[-200:]})")


def train_trace_sync(dflow, tmp, checks):
    # The chief's gradients alone can fill a sync step, so a worker that
    # starts late on a loaded machine may find training over and run no step
    # (then it has nothing to trace); one that runs any step traces its first
    # at or past step 3.
    rc, out, trace_dir = run_cluster(dflow, tmp, "between-sync", 2, 3, max_steps=40)
    if not checks.check(rc == 0, f"dflow cluster exits 0 (rc {rc}): {out[-2000:]}"):
        return
    stepped = {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r"worker (\d+) of 2 \(between-sync\): (\d+) local steps", out)}
    checks.info(f"local steps per worker: {stepped}")
    checks.check(stepped.get(0, 0) > 0, "the chief ran steps")
    for i in range(2):
        if i > 0 and stepped.get(i, 0) == 0:
            checks.info(f"worker {i} joined after the last step: no trace expected")
            continue
        path = os.path.join(trace_dir, f"trace_worker{i}_step3.json")
        checks.check(f"step trace written to {path}" in out, f"worker {i} names {path}")
        procs, _ = read_trace(checks, path)
        if procs is not None:
            tasks = {task_of(p) for p in procs}
            checks.check({"/job:ps/replica:0/task:0", f"/job:worker/replica:0/task:{i}"} <= tasks,
                         f"worker {i}'s trace shows it and the ps ({sorted(tasks)})")


CASES = {"tf_full_trace": tf_full_trace, "train_trace": train_trace,
         "train_trace_sync": train_trace_sync, "train_trace_in_graph": train_trace_in_graph,
         "train_trace_single": train_trace_single}


if __name__ == "__main__":
    sys.exit(run_cases(CASES, __doc__.split("\n")[0], "dflow_tf_trace"))
