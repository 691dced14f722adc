#!/usr/bin/env python3
"""Where TensorFlow's client graph spends a step on a dflow server and on a TensorFlow server
(issue 15): the same TF 1.x MLP training step (784-256-256-10, Adam, batch 128 fed from
NumPy, all on /job:worker/task:0), run on one `dflow server` and on one `tf.distribute.Server`.

  python3 bench/tf_op_compare.py                      # both runtimes, 400 steps each
  python3 bench/tf_op_compare.py --steps 1000 --rounds 3

For each runtime: the untraced step as the client sees it (µs, median of --rounds rounds
of --steps steps, the runtimes alternating), then --traced steps with
RunOptions(trace_level=FULL_TRACE) whose `RunMetadata.step_stats` give, per op type, the
nodes that ran and their median summed time, and the span of the server's work. The
difference between the untraced step and the span is the client's and the RPC's share.
Node counts show what each runtime's graph rewriting left to run (TensorFlow's Grappler
fuses MatMul+BiasAdd+Relu and drops what only gates others; dflow does the latter).
"""
import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from dflow_cluster import Server, TfServer, free_port  # noqa: E402
from tf_cluster_bench import BATCH, CLASSES, IN, mlp_logits  # noqa: E402


def build(tf1, tf):
    """The MLP training graph; returns (graph, images, labels, train op, init op)."""
    g = tf1.Graph()
    with g.as_default(), tf1.device("/job:worker/task:0"):
        images = tf1.placeholder(tf.float32, [None, IN])
        labels = tf1.placeholder(tf.int64, [None])
        h = mlp_logits(tf1, tf, images)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h))
        step = tf1.train.get_or_create_global_step()
        train = tf1.train.AdamOptimizer(0.001).minimize(loss, global_step=step)
        init_op = tf1.global_variables_initializer()
    return g, images, labels, train, init_op


def op_type(node_stats):
    label = node_stats.timeline_label  # "name = Op(inputs)"
    if " = " in label:
        return label.split(" = ", 1)[1].split("(", 1)[0].strip()
    return node_stats.node_name


class Runtime:
    """One server and a session of TensorFlow's client on it."""

    def __init__(self, name, args, tf1, tf, np):
        cluster = {"worker": [f"127.0.0.1:{free_port()}"]}
        logs = tempfile.mkdtemp(prefix=f"tf_op_compare_{name}_")
        self.name = name
        self.server = (Server(args.dflow, logs, json.dumps(cluster), "worker", 0)
                       if name == "dflow" else TfServer(logs, json.dumps(cluster), "worker", 0))
        g, self.images, self.labels, self.train, init_op = build(tf1, tf)
        self.sess = tf1.Session("grpc://" + cluster["worker"][0], graph=g)
        self.sess.run(init_op)
        rng = np.random.default_rng(0)
        self.x = rng.random((4096, IN), dtype=np.float32)
        self.y = rng.integers(0, CLASSES, 4096)
        self.rng = rng
        self.tf1 = tf1
        self.rounds = []
        for _ in range(50):  # Warm-up: plans, connections, first allocations.
            self.step()

    def step(self, **kw):
        idx = self.rng.integers(0, self.x.shape[0], BATCH)
        self.sess.run(self.train, {self.images: self.x[idx], self.labels: self.y[idx]}, **kw)

    def timed_round(self, steps):
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        self.rounds.append((time.perf_counter() - start) / steps * 1e6)

    def traced(self, steps):
        """(median span µs, {op: (nodes, median summed µs)})."""
        per_op, spans = collections.defaultdict(list), []
        opts = self.tf1.RunOptions(trace_level=self.tf1.RunOptions.FULL_TRACE)
        for _ in range(steps):
            md = self.tf1.RunMetadata()
            self.step(options=opts, run_metadata=md)
            summed, nodes = collections.defaultdict(float), collections.Counter()
            lo, hi = float("inf"), 0
            for dev in md.step_stats.dev_stats:
                for n in dev.node_stats:
                    if n.node_name == "RunGraph":  # dflow's master row: the span itself.
                        continue
                    op = op_type(n)
                    summed[op] += n.all_end_rel_micros
                    nodes[op] += 1
                    lo = min(lo, n.all_start_micros)
                    hi = max(hi, n.all_start_micros + n.all_end_rel_micros)
            spans.append(hi - lo)
            for op in summed:
                per_op[op].append((nodes[op], summed[op]))
        table = {op: (max(c for c, _ in v), statistics.median(t for _, t in v))
                 for op, v in per_op.items()}
        return statistics.median(spans), table

    def close(self):
        self.sess.close()
        self.server.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dflow", default=os.path.join(REPO, "build", "bin", "dflow"))
    p.add_argument("--steps", type=int, default=400, help="untraced steps a round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--traced", type=int, default=30, help="traced steps")
    p.add_argument("--top", type=int, default=15, help="op types shown")
    args = p.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    runtimes = [Runtime(name, args, tf1, tf, np) for name in ("dflow", "tensorflow")]
    try:
        for _ in range(args.rounds):
            for r in runtimes:
                r.timed_round(args.steps)
        traced = {r.name: r.traced(args.traced) for r in runtimes}
    finally:
        for r in runtimes:
            r.close()
    step = {r.name: statistics.median(r.rounds) for r in runtimes}
    print(f"tf_op_compare: {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for r in runtimes:
        span = traced[r.name][0]
        print(f"{r.name:10s} untraced step {step[r.name]:7.0f} us (rounds: "
              f"{', '.join(f'{x:.0f}' for x in r.rounds)}); traced span {span:6.0f} us; "
              f"client and RPC {step[r.name] - span:6.0f} us")
    print(f"TensorFlow / dflow step time: {step['tensorflow'] / step['dflow']:.2f}")
    ops = set(traced["dflow"][1]) | set(traced["tensorflow"][1])
    rows = sorted(ops, key=lambda op: -max(traced[n][1].get(op, (0, 0))[1] for n in traced))
    print(f"\n| op | dflow nodes | dflow µs | TensorFlow nodes | TensorFlow µs |")
    print("|---|---|---|---|---|")
    for op in rows[:args.top]:
        d = traced["dflow"][1].get(op, (0, 0.0))
        t = traced["tensorflow"][1].get(op, (0, 0.0))
        print(f"| {op} | {d[0]} | {d[1]:.0f} | {t[0]} | {t[1]:.0f} |")
    for name in ("dflow", "tensorflow"):
        nodes = sum(c for c, _ in traced[name][1].values())
        total = sum(t for _, t in traced[name][1].values())
        print(f"{name}: {nodes} nodes ran, {total:.0f} us summed over nodes")


if __name__ == "__main__":
    main()
