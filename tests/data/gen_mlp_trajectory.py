#!/usr/bin/env python3
"""Writes the golden MLP training trajectory checked by dflow/train/trajectory_test.cc.

An MLP 784-256-256-10 (ReLU, logits, mean sparse softmax cross-entropy) trained
by real TensorFlow (tf.compat.v1 graph mode, float32) for 50 steps, from
committed initial weights and a committed batch order, once with plain SGD
(GradientDescentOptimizer, lr 0.1) and once with Adam (AdamOptimizer, lr 1e-3,
TF's defaults beta1 0.9, beta2 0.999, epsilon 1e-8).

Files in tests/data/mlp_trajectory/:
  init_weights.bin  the initial parameters, little-endian float32, concatenated
                    in this order, each row-major:
                      w1 [784,256]  b1 [256]  w2 [256,256]  b2 [256]  w3 [256,10]  b3 [10]
                    Weights ~ U(-l, l), l = sqrt(6 / (fan_in + fan_out)) (Glorot
                    uniform); biases ~ U(-0.05, 0.05) so that their loading matters.
                    Drawn by numpy.random.default_rng(20261202).
  batch_order.bin   50 batches x 64 indices into the Fashion-MNIST train split,
                    little-endian int32, batch after batch (a permutation prefix
                    from the same generator).
  trajectory.json   {"sgd": {...}, "adam": {...}}, each with
                      "losses":  the 50 losses, loss i from sess.run([train_op, loss])
                                 at step i, i.e. computed before that step's update;
                      "final":   per tensor name, [sum, sum of squares] (float64) of
                                 the parameters after the 50 updates.

Forward pass: h1 = relu(bias_add(x @ w1, b1)), h2 = relu(bias_add(h1 @ w2, b2)),
logits = bias_add(h2 @ w3, b3), loss = mean(sparse_softmax_cross_entropy(labels, logits)).
Pixels are uint8 / 255 as float32 (as dflow's LoadFashionMnist scales them).

Run: python3 tests/data/gen_mlp_trajectory.py   (needs TensorFlow 2.x and
Debian's dataset-fashion-mnist in /usr/share/datasets/fashion-mnist)
"""
import gzip
import json
import os

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp_trajectory")
DATA = "/usr/share/datasets/fashion-mnist"
SEED = 20261202
SHAPES = [("w1", (784, 256)), ("b1", (256,)), ("w2", (256, 256)), ("b2", (256,)),
          ("w3", (256, 10)), ("b3", (10,))]
STEPS, BATCH = 50, 64


def read_idx(name):
    with gzip.open(os.path.join(DATA, name), "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = np.frombuffer(raw, ">u4", ndim, 4).astype(int)
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def make_inputs():
    rng = np.random.default_rng(SEED)
    params = []
    for name, shape in SHAPES:
        if name.startswith("w"):
            limit = np.sqrt(6.0 / (shape[0] + shape[1]))
        else:
            limit = 0.05
        params.append(rng.uniform(-limit, limit, shape).astype(np.float32))
    order = rng.permutation(60000)[:STEPS * BATCH].astype(np.int32)
    return params, order.reshape(STEPS, BATCH)


def train(params, order, images, labels, make_optimizer):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 784], name="x")
        y = tf1.placeholder(tf.int32, [None], name="y")
        vs = [tf1.Variable(p, name=n) for (n, _), p in zip(SHAPES, params)]
        w1, b1, w2, b2, w3, b3 = vs
        h1 = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w1), b1))
        h2 = tf.nn.relu(tf.nn.bias_add(tf.matmul(h1, w2), b2))
        logits = tf.nn.bias_add(tf.matmul(h2, w3), b3)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train_op = make_optimizer().minimize(loss, var_list=vs)
        init = tf1.global_variables_initializer()
    config = tf1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
    with tf1.Session(graph=g, config=config) as sess:
        sess.run(init)
        losses = []
        for batch in order:
            _, l = sess.run([train_op, loss], {x: images[batch], y: labels[batch]})
            losses.append(float(l))
        final = sess.run(vs)
    checks = {n: [float(np.sum(v, dtype=np.float64)),
                  float(np.sum(np.square(v, dtype=np.float64)))]
              for (n, _), v in zip(SHAPES, final)}
    return {"losses": losses, "final": checks}


def main():
    images = (read_idx("train-images-idx3-ubyte.gz").reshape(-1, 784).astype(np.float32)
              / np.float32(255.0))
    labels = read_idx("train-labels-idx1-ubyte.gz").astype(np.int32)
    params, order = make_inputs()
    os.makedirs(HERE, exist_ok=True)
    with open(os.path.join(HERE, "init_weights.bin"), "wb") as f:
        for p in params:
            f.write(p.astype("<f4").tobytes())
    with open(os.path.join(HERE, "batch_order.bin"), "wb") as f:
        f.write(order.astype("<i4").tobytes())
    result = {
        "sgd": train(params, order, images, labels,
                     lambda: tf1.train.GradientDescentOptimizer(0.1)),
        "adam": train(params, order, images, labels,
                      lambda: tf1.train.AdamOptimizer(1e-3)),
    }
    with open(os.path.join(HERE, "trajectory.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    for k, v in result.items():
        print(k, v["losses"][0], v["losses"][-1])


if __name__ == "__main__":
    main()
