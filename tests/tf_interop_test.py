#!/usr/bin/env python3
"""Interop: TensorFlow's own Python client drives a dflow cluster.

A graph with variables on /job:ps/task:0 and compute on /job:worker/task:0
runs its initializer and 10 assign_add steps through
tf.compat.v1.Session("grpc://<dflow worker>") against real `dflow server`
processes (1 ps, 1 worker); the values must equal TensorFlow running the same
graph locally. Reference (VariableV2) and resource variables both.

Then tf.cond on the worker over a ps variable (one branch adds to it, the
other reads it), written with TensorFlow 1.x control flow (Switch/Merge) and
with TensorFlow 2's (If + function library, which dflow's master lowers): the
values of a fixed sequence of predicates must equal TensorFlow's.

Exits 77 (skipped, reason printed) only where TensorFlow cannot be imported.
Usage: tf_interop_test.py path/to/dflow
"""
import signal
import sys
import tempfile

from dflow_cluster import start_cluster, import_tensorflow_or_skip

np, tf = import_tensorflow_or_skip()
from tensorflow.python.ops import control_flow_v2_toggles  # noqa: E402

tf.compat.v1.disable_eager_execution()
STEPS = 10


def build(use_resource, ps_device, worker_device):
    """Returns (graph, init op, step op, fetches)."""
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(ps_device):
            v = tf.compat.v1.get_variable(
                "v", initializer=tf.constant([1.0, -2.0, 3.5]), use_resource=use_resource)
            w = tf.compat.v1.get_variable(
                "w", shape=[3, 3], initializer=tf.compat.v1.random_normal_initializer(seed=7),
                use_resource=use_resource)
            count = tf.compat.v1.get_variable(
                "count", initializer=tf.constant(0, tf.int64), use_resource=use_resource)
        with tf.device(worker_device):
            # The update is computed on the worker from the ps's variables.
            delta = tf.tanh(tf.linalg.matvec(w, v)) * 0.25 + 0.5
        with tf.control_dependencies([delta]):
            update_v = tf.compat.v1.assign_add(v, delta)
            update_count = tf.compat.v1.assign_add(count, tf.constant(1, tf.int64))
        step = tf.group(update_v, update_count)
        init = tf.compat.v1.global_variables_initializer()
        with tf.device(worker_device):
            fetch = [tf.identity(v), tf.identity(count), tf.reduce_sum(w)]
    return graph, init, step, fetch


def trajectory(target, use_resource, ps_device="", worker_device=""):
    graph, init, step, fetch = build(use_resource, ps_device, worker_device)
    values = []
    with tf.compat.v1.Session(target, graph=graph) as sess:
        sess.run(init)
        for _ in range(STEPS):
            sess.run(step)
            values.append(sess.run(fetch))
    return values


PREDICATES = (True, False, True, True, False)


def cond_trajectory(target, control_flow_v2, ps_device="", worker_device=""):
    """Values of tf.cond(pred, v += 1, v * 2) for PREDICATES."""
    if control_flow_v2:
        control_flow_v2_toggles.enable_control_flow_v2()
    else:
        control_flow_v2_toggles.disable_control_flow_v2()
    graph = tf.Graph()
    with graph.as_default():
        with tf.device(ps_device):
            v = tf.compat.v1.get_variable("v", initializer=tf.constant([1.0, -2.0]),
                                          use_resource=True)
        pred = tf.compat.v1.placeholder(tf.bool, [], name="pred")
        with tf.device(worker_device):
            out = tf.cond(pred, lambda: v.assign_add([1.0, 1.0]), lambda: v.read_value() * 2.0)
        init = tf.compat.v1.global_variables_initializer()
    ops = {n.op for n in graph.as_graph_def().node}
    with tf.compat.v1.Session(target, graph=graph) as sess:
        sess.run(init)
        return [sess.run(out, {pred: p}) for p in PREDICATES], ops


def check_cond(target):
    failed = 0
    for v2 in (False, True):
        want, _ = cond_trajectory("", v2)
        got, ops = cond_trajectory(target, v2, "/job:ps/task:0", "/job:worker/task:0")
        ok = all(np.allclose(g, w, rtol=1e-6) for g, w in zip(got, want))
        written = ", ".join(sorted(ops & {"If", "StatelessIf", "Switch", "Merge"}))
        print(f"{'ok  ' if ok else 'FAIL'} tf.cond written as {written}: "
              f"dflow {[g.tolist() for g in got]}, TensorFlow {[w.tolist() for w in want]}")
        failed += not ok
    return failed


def main():
    dflow = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="dflow_tf_interop_")
    _, ports, servers = start_cluster(dflow, tmp, {"ps": 1, "worker": 1})
    target = f"grpc://127.0.0.1:{ports['worker'][0]}"
    failed = 0
    try:
        for use_resource in (False, True):
            kind = "resource" if use_resource else "reference"
            want = trajectory("", use_resource)
            got = trajectory(target, use_resource, "/job:ps/task:0", "/job:worker/task:0")
            ok = all(
                np.allclose(g, w, rtol=1e-6, atol=1e-6) for gs, ws in zip(got, want)
                for g, w in zip(gs, ws))
            print(f"{'ok  ' if ok else 'FAIL'} {kind} variables: {STEPS} assign_add steps; "
                  f"v after the last: dflow {got[-1][0]}, TensorFlow {want[-1][0]}, "
                  f"count {got[-1][1]}")
            failed += not ok
            # The variables live on the ps: its own master, seeing only the ps,
            # reads them after the worker's session has closed.
            graph, _, _, fetch = build(use_resource, "/job:ps/task:0", "/job:ps/task:0")
            config = tf.compat.v1.ConfigProto(device_filters=["/job:ps"])
            ps_target = f"grpc://127.0.0.1:{ports['ps'][0]}"
            with tf.compat.v1.Session(ps_target, graph=graph, config=config) as sess:
                on_ps = sess.run(fetch)
            ok = np.allclose(on_ps[0], got[-1][0]) and on_ps[1] == STEPS
            print(f"{'ok  ' if ok else 'FAIL'} {kind} variables are on the ps: {on_ps[0]}")
            failed += not ok
        failed += check_cond(target)
    except Exception as e:  # A TensorFlow error from the remote session.
        print(f"FAIL: {type(e).__name__}: {e}")
        failed += 1
    finally:
        for group in servers.values():
            for s in group:
                s.stop(signal.SIGKILL)
        if failed:
            for group in servers.values():
                for s in group:
                    print(f"--- {s.name} log ---\n{s.output()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
