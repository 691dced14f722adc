#!/usr/bin/env python3
"""Loop benchmark (issue 12): per-iteration cost of a while loop with an empty body
(i + 1 until n), dflow against TensorFlow's local session on the same graph, in the
same run.

The graph is built once by TensorFlow (tf.while_loop; --v2 for control flow v2, a
While op that dflow lowers into the same frames). TensorFlow runs it in an
in-process Session; dflow runs it in a `dflow server` on 127.0.0.1 driven by
TensorFlow's client (grpc://), so each dflow step also pays one RunStep round trip
(~0.1 ms), which --iterations amortizes. Each system runs --repeats steps after a
warm-up; the table shows the median seconds per step over n, in microseconds per
iteration, and dflow / TensorFlow (goal: <= 1.0).

  python3 bench/loop_bench.py build/bin/dflow [--iterations 100000] [--repeats 5] [--v2]
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
from dflow_cluster import import_tensorflow_or_skip, start_cluster  # noqa: E402


def build(tf, v2):
    from tensorflow.python.ops import control_flow_v2_toggles
    tf1 = tf.compat.v1
    (control_flow_v2_toggles.enable_control_flow_v2 if v2
     else control_flow_v2_toggles.disable_control_flow_v2)()
    graph = tf.Graph()
    with graph.as_default():
        n = tf1.placeholder(tf.int32, [], name="n")
        out = tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0)],
                            parallel_iterations=10)
        out = tf.identity(out, name="out")
    return graph, n, out


def time_steps(tf, target, graph, n, out, iterations, repeats):
    tf1 = tf.compat.v1
    times = []
    with graph.as_default(), tf1.Session(target) as sess:
        if sess.run(out, {n: 1000}) != 1000:  # Warm-up, and a check of the answer.
            raise SystemExit("wrong loop result")
        for _ in range(repeats):
            start = time.perf_counter()
            got = sess.run(out, {n: iterations})
            times.append(time.perf_counter() - start)
            if got != iterations:
                raise SystemExit(f"loop returned {got}, not {iterations}")
    return statistics.median(times) / iterations * 1e6, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dflow")
    ap.add_argument("--iterations", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--v2", action="store_true")
    args = ap.parse_args()
    _, tf = import_tensorflow_or_skip()
    graph, n, out = build(tf, args.v2)
    tf_us, tf_times = time_steps(tf, "", graph, n, out, args.iterations, args.repeats)
    tmp = tempfile.mkdtemp(prefix="dflow_loop_bench_")
    _, ports, servers = start_cluster(args.dflow, tmp, {"worker": 1})
    try:
        dflow_us, dflow_times = time_steps(tf, f"grpc://127.0.0.1:{ports['worker'][0]}", graph,
                                           n, out, args.iterations, args.repeats)
    finally:
        for job in servers.values():
            for s in job:
                s.stop()
    flavour = "v2 (While)" if args.v2 else "v1 (Enter/Exit frames)"
    print(f"while loop, empty body, control flow {flavour}, {args.iterations} iterations, "
          f"median of {args.repeats}")
    print("| system | us per iteration | step times (s) |")
    print("|---|---|---|")
    print(f"| TensorFlow {tf.__version__}, local Session | {tf_us:.2f} | "
          f"{', '.join(f'{t:.3f}' for t in tf_times)} |")
    print(f"| dflow server (TensorFlow's client) | {dflow_us:.2f} | "
          f"{', '.join(f'{t:.3f}' for t in dflow_times)} |")
    print(f"dflow / TensorFlow: {dflow_us / tf_us:.2f}")


if __name__ == "__main__":
    main()
