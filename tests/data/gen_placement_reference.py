#!/usr/bin/env python3
"""Records how TensorFlow's placer places a small graph, for dflow's placer test.

Writes, under placement/ beside this script:
  tf_graph.pbtxt   a tf.compat.v1 GraphDef: a resource variable pinned to CPU:2, a
                   partial "/cpu:1" scope, unconstrained readers and updaters of the
                   variable, and a "/device:GPU:0" request on a machine without GPUs;
  tf_placement.txt "node device" lines: where a session with device_count {"CPU": 4}
                   and allow_soft_placement=True ran each node (from its partition
                   graphs), for the nodes of tf_graph.pbtxt it kept.

Run: python3 tests/data/gen_placement_reference.py   (needs tensorflow)
"""
import os

import tensorflow as tf
from google.protobuf import text_format

tf1 = tf.compat.v1
tf1.disable_eager_execution()
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "placement")


def build():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/device:CPU:2"):
            v = tf1.get_variable("v", shape=[2], initializer=tf1.zeros_initializer(),
                                 use_resource=True)
        x = tf1.placeholder(tf.float32, [2], name="x")
        with tf.device("/cpu:1"):
            y = tf.add(x, 1.0, name="y")
        z = tf.add(v.read_value(), y, name="z")
        upd = v.assign_add(z, name="upd")
        with tf.device("/device:GPU:0"):
            w = tf.identity(z, name="w")
    return g, v, x, upd, w


def main():
    os.makedirs(HERE, exist_ok=True)
    g, v, x, upd, w = build()
    gd = g.as_graph_def()
    gd.ClearField("library")
    with open(os.path.join(HERE, "tf_graph.pbtxt"), "w") as f:
        f.write(text_format.MessageToString(gd))
    names = {n.name for n in gd.node}
    cfg = tf1.ConfigProto(device_count={"CPU": 4}, allow_soft_placement=True)
    placed = {}
    with tf1.Session(graph=g, config=cfg) as s:
        s.run(v.initializer)
        md = tf1.RunMetadata()
        s.run([upd, w], feed_dict={x: [1.0, 2.0]},
              options=tf1.RunOptions(output_partition_graphs=True), run_metadata=md)
        for pg in md.partition_graphs:
            for n in pg.node:
                if n.name in names:
                    placed[n.name] = n.device
    with open(os.path.join(HERE, "tf_placement.txt"), "w") as f:
        for name in sorted(placed):
            f.write(f"{name} {placed[name]}\n")


if __name__ == "__main__":
    main()
