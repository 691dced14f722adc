#!/usr/bin/env python3
"""A TensorFlow 1.x graph pinned to a worker's GPU, with TensorFlow's values, for
scripts/gpu_check.sh (a dflow server on a GPU machine runs it) and for
tests/gpu_graph_test.sh (the same graph on a CPU-only machine, soft placement).

Writes, under gpu/ beside this script:
  tf_mlp_gpu.pbtxt   an MLP's forward and backward pass (dense 20-32-10, ReLU, sparse
                     softmax cross-entropy, mean) built by tf.compat.v1 under
                     tf.device("/job:worker/task:0/device:GPU:0"), weights as constants;
                     fetch loss:0 and the gradients grads/w1:0, grads/b1:0, grads/w2:0;
  tf_mlp_gpu_golden.json  the feeds and TensorFlow's fetched values (a local CPU session, devices cleared).

Run: python3 tests/data/gen_gpu_graph_reference.py   (needs tensorflow)
"""
import json
import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format

tf1 = tf.compat.v1
tf1.disable_eager_execution()
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu")


def main():
    rng = np.random.RandomState(7)
    w1 = rng.uniform(-0.5, 0.5, (20, 32)).astype(np.float32)
    b1 = rng.uniform(-0.1, 0.1, (32,)).astype(np.float32)
    w2 = rng.uniform(-0.5, 0.5, (32, 10)).astype(np.float32)
    x = rng.uniform(-1, 1, (8, 20)).astype(np.float32)
    labels = rng.randint(0, 10, (8,)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp = tf1.placeholder(tf.float32, [8, 20], name="x")
        yp = tf1.placeholder(tf.int32, [8], name="labels")
        with tf.device("/job:worker/task:0/device:GPU:0"):
            cw1 = tf.constant(w1, name="w1")
            cb1 = tf.constant(b1, name="b1")
            cw2 = tf.constant(w2, name="w2")
            h = tf.nn.relu(tf.nn.bias_add(tf.matmul(xp, cw1), cb1), name="h")
            logits = tf.matmul(h, cw2, name="logits")
            xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yp, logits=logits)
            loss = tf.reduce_mean(xent, name="loss")
            gw1, gb1, gw2 = tf.gradients(loss, [cw1, cb1, cw2])
            tf.identity(gw1, name="grads/w1")
            tf.identity(gb1, name="grads/b1")
            tf.identity(gw2, name="grads/w2")
    fetches = ["loss:0", "grads/w1:0", "grads/b1:0", "grads/w2:0"]
    # TensorFlow's values: the same graph without its devices, in a local session.
    local_def = g.as_graph_def()
    for node in local_def.node:
        node.device = ""
    local = tf.Graph()
    with local.as_default():
        tf1.import_graph_def(local_def, name="")
    with tf1.Session(graph=local) as sess:
        values = sess.run(fetches, {"x:0": x, "labels:0": labels})
    os.makedirs(HERE, exist_ok=True)
    with open(os.path.join(HERE, "tf_mlp_gpu.pbtxt"), "w") as f:
        f.write(text_format.MessageToString(g.as_graph_def()))
    golden = {"feeds": {"x": x.tolist(), "labels": labels.tolist()},
              "fetches": {name: np.asarray(v).tolist() for name, v in zip(fetches, values)}}
    with open(os.path.join(HERE, "tf_mlp_gpu_golden.json"), "w") as f:
        json.dump(golden, f)
    print("wrote", HERE)


if __name__ == "__main__":
    main()
