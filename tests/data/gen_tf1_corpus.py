#!/usr/bin/env python3
"""Writes the GraphDef of every program of tests/tf1_programs.py (built as on a
cluster: variables on a ps by replica_device_setter) to tests/data/tf1_corpus/
NAME.pbtxt, for `dflow ops --check` (tests/cli_test.sh checks that dflow supports
every op of each).

Run: python3 tests/data/gen_tf1_corpus.py   (needs TensorFlow 2.21)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf1_programs  # noqa: E402


def main():
    out = os.path.join(HERE, "tf1_corpus")
    os.makedirs(out, exist_ok=True)
    for name, program in sorted(tf1_programs.PROGRAMS.items()):
        shape = tf1_programs.CLUSTER_SHAPES.get(name, {"ps": 1, "worker": 1})
        ports = iter(range(2222, 2300))
        cluster = {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in shape.items()}
        graph = program(None, cluster, None, 0, build_only=True)
        tf.io.write_graph(graph.as_graph_def(), out, name + ".pbtxt", as_text=True)
        print("wrote", os.path.join(out, name + ".pbtxt"))


if __name__ == "__main__":
    main()
