#!/usr/bin/env python3
"""TensorFlow 1.x graphs pinned to a worker's GPU, with TensorFlow's values, for
scripts/gpu_check.sh (a dflow server on a GPU machine runs them) and for
tests/gpu_graph_test.py (the same graphs on a CPU-only machine, soft placement).

Writes, under gpu/ beside this script, for each NAME:
  NAME.pbtxt        the graph, built by tf.compat.v1 under
                    tf.device("/job:worker/task:0/device:GPU:0"), weights as constants;
  NAME_golden.json  the feeds and TensorFlow's fetched values (a local CPU session,
                    devices cleared).
The graphs:
  tf_mlp_gpu  an MLP's forward and backward pass (dense 20-32-10, ReLU, sparse softmax
              cross-entropy, mean); fetch loss:0 and grads/w1:0, grads/b1:0, grads/w2:0;
  tf_cnn_gpu  a CNN's: conv2d 3x3 SAME + bias + ReLU, max_pool 2x2, avg_pool 3x3 stride
              1 SAME, a global avg_pool, dense 4-10, the same loss; fetch loss:0 and
              grads/filter:0, grads/bias:0, grads/dense:0;
  tf_rnn_gpu  a hand-written RNN in a TensorFlow 1.x tf.while_loop (6 steps of
              tanh(x_t W + h U)), dense 5-10, the same loss; its gradient loop keeps the
              forward values on stacks; fetch loss:0 and grads/w:0, grads/u:0, grads/out:0;
  tf_ta_rnn_gpu  the same RNN the way dynamic_rnn runs it, on TensorArrays: the input
              unstacked (scatter) and read each step, each step's state written and the
              outputs stacked (gather), then split into two halves and concatenated again;
              their gradients are the other TensorArray ops (TensorArrayGradV3, write,
              read, scatter, gather, split, concat); fetch loss:0 and the three grads;
  tf_ta_rnn_v2_gpu  the same, built with control flow v2 (TensorFlow 2's default for
              tf.compat.v1 graphs): While ops with function bodies, the TensorArrays
              TensorLists, the gradient's accumulators TensorLists too;
  tf_cnn_nchw_gpu  tf_cnn_gpu with data_format="NCHW" (channels_first); its values are
              the NHWC graph's (TensorFlow's CPU runs no NCHW convolution);
  tf_bn_cnn_gpu  a CNN with fused batch norm as tf.compat.v1.layers emits it: conv2d 3x3
              SAME, batch norm in training (FusedBatchNormV3, running averages with
              exponential_avg_factor 0.1), ReLU, batch norm in inference (the given mean
              and variance), a spatial mean, dense 6-10, and tf.compat.v1.losses'
              sparse softmax cross-entropy (its Select); fetch loss:0, the running
              averages stats/mean:0 and stats/variance:0, and grads of the filter, both
              batch norms' scale and offset, and the dense weights.

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
GPU = "/job:worker/task:0/device:GPU:0"


def write(name, graph, feeds, fetches, twin=None):
    """Writes `graph` and TensorFlow's values of `fetches` (a local session, devices
    cleared) for `feeds` ({placeholder name: array}). With `twin` (graph, feeds),
    the values are the twin's: a graph TensorFlow's CPU can run that computes the
    same fetches (NHWC for an NCHW graph)."""
    golden_graph, golden_feeds = twin if twin else (graph, feeds)
    local_def = golden_graph.as_graph_def()
    for node in list(local_def.node) + [n for f in local_def.library.function
                                        for n in f.node_def]:
        node.device = ""
    local = tf.Graph()
    with local.as_default():
        tf1.import_graph_def(local_def, name="")
    with tf1.Session(graph=local) as sess:
        values = sess.run(fetches, {k + ":0": v for k, v in golden_feeds.items()})
    os.makedirs(HERE, exist_ok=True)
    with open(os.path.join(HERE, name + ".pbtxt"), "w") as f:
        f.write(text_format.MessageToString(graph.as_graph_def()))
    golden = {"feeds": {k: v.tolist() for k, v in feeds.items()},
              "fetches": {n: np.asarray(v).tolist() for n, v in zip(fetches, values)}}
    with open(os.path.join(HERE, name + "_golden.json"), "w") as f:
        json.dump(golden, f)
    print("wrote", name)


def loss_and_grads(logits, labels, params):
    xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    loss = tf.reduce_mean(xent, name="loss")
    grads = tf.gradients(loss, list(params.values()))
    for name, grad in zip(params, grads):
        tf.identity(grad, name="grads/" + name)
    return ["loss:0"] + [f"grads/{name}:0" for name in params]


def mlp():
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
        with tf.device(GPU):
            cw1 = tf.constant(w1, name="w1")
            cb1 = tf.constant(b1, name="b1")
            cw2 = tf.constant(w2, name="w2")
            h = tf.nn.relu(tf.nn.bias_add(tf.matmul(xp, cw1), cb1), name="h")
            logits = tf.matmul(h, cw2, name="logits")
            fetches = loss_and_grads(logits, yp, {"w1": cw1, "b1": cb1, "w2": cw2})
    write("tf_mlp_gpu", g, {"x": x, "labels": labels}, fetches)


def images(rng):
    """The CNNs' inputs: 4 images 8x8x2 and their labels, drawn from `rng`."""
    x = rng.uniform(-1, 1, (4, 8, 8, 2)).astype(np.float32)
    return x, rng.randint(0, 10, (4,)).astype(np.int32)


def image_placeholders():
    return (tf1.placeholder(tf.float32, [4, 8, 8, 2], name="x"),
            tf1.placeholder(tf.int32, [4], name="labels"))


def cnn_graph(data_format="NHWC"):
    """tf_cnn_gpu's graph in `data_format`, its feeds and fetches."""
    rng = np.random.RandomState(11)
    w = rng.uniform(-0.5, 0.5, (3, 3, 2, 4)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, (4,)).astype(np.float32)
    dense = rng.uniform(-0.5, 0.5, (4, 10)).astype(np.float32)
    x, labels = images(rng)
    nchw = data_format == "NCHW"
    # Window and stride lists in the graph's order: depth second in NCHW.
    dims = (lambda h, w: [1, 1, h, w]) if nchw else (lambda h, w: [1, h, w, 1])  # noqa: E731
    g = tf.Graph()
    with g.as_default():
        xp = tf1.placeholder(tf.float32, [4, 2, 8, 8] if nchw else [4, 8, 8, 2], name="x")
        yp = tf1.placeholder(tf.int32, [4], name="labels")
        with tf.device(GPU):
            cw = tf.constant(w, name="filter")
            cb = tf.constant(b, name="bias")
            cd = tf.constant(dense, name="dense")
            conv = tf.nn.relu(tf.nn.bias_add(
                tf1.nn.conv2d(xp, cw, dims(1, 1), "SAME", data_format=data_format), cb,
                data_format=data_format))
            pooled = tf1.nn.max_pool(conv, dims(2, 2), dims(2, 2), "VALID",
                                     data_format=data_format)
            smooth = tf1.nn.avg_pool(pooled, dims(3, 3), dims(1, 1), "SAME",
                                     data_format=data_format)
            flat = tf.reshape(tf1.nn.avg_pool(smooth, dims(4, 4), dims(1, 1), "VALID",
                                              data_format=data_format), [4, 4])
            logits = tf.matmul(flat, cd, name="logits")
            fetches = loss_and_grads(logits, yp, {"filter": cw, "bias": cb, "dense": cd})
    feeds = {"x": x.transpose(0, 3, 1, 2).copy() if nchw else x, "labels": labels}
    return g, feeds, fetches


def cnn():
    write("tf_cnn_gpu", *cnn_graph())


def nchw_cnn():
    """tf_cnn_gpu with data_format="NCHW" (channels_first, as TensorFlow 1.x models
    build for GPUs). TensorFlow's CPU kernels refuse NCHW, so the values are the NHWC
    graph's, which computes the same loss and gradients from the same weights."""
    graph, feeds, fetches = cnn_graph("NCHW")
    twin, twin_feeds, _ = cnn_graph("NHWC")
    write("tf_cnn_nchw_gpu", graph, feeds, fetches, twin=(twin, twin_feeds))


def rnn_graph(name, seed, features, control_flow_v2=False):
    """Writes graph `name`: an RNN over x [time 6, batch 4, 3] with weights w [3,5] and
    u [5,5] (drawn with `seed`), built by features(x, w, u) under tf.device(GPU) as TensorFlow
    1.x builds loops (Enter/Merge/Switch/Exit; with control_flow_v2, functional While ops
    and TensorLists), and returning features [4, 5]; then dense out [5,10] and the loss."""
    if control_flow_v2:
        tf1.enable_control_flow_v2()
    else:
        tf1.disable_control_flow_v2()
    rng = np.random.RandomState(seed)
    w = rng.uniform(-0.5, 0.5, (3, 5)).astype(np.float32)
    u = rng.uniform(-0.5, 0.5, (5, 5)).astype(np.float32)
    out = rng.uniform(-0.5, 0.5, (5, 10)).astype(np.float32)
    x = rng.uniform(-1, 1, (6, 4, 3)).astype(np.float32)
    labels = rng.randint(0, 10, (4,)).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        xp = tf1.placeholder(tf.float32, [6, 4, 3], name="x")
        yp = tf1.placeholder(tf.int32, [4], name="labels")
        with tf.device(GPU):
            cw = tf.constant(w, name="w")
            cu = tf.constant(u, name="u")
            co = tf.constant(out, name="out")
            logits = tf.matmul(features(xp, cw, cu), co, name="logits")
            fetches = loss_and_grads(logits, yp, {"w": cw, "u": cu, "out": co})
    write(name, g, {"x": x, "labels": labels}, fetches)


def rnn():
    def features(xp, cw, cu):
        def step(t, h):
            h = tf.tanh(tf.matmul(tf.gather(xp, t), cw) + tf.matmul(h, cu))
            return t + 1, h

        _, h = tf1.while_loop(lambda t, h: t < 6, step, [tf.constant(0), tf.zeros([4, 5])])
        return h

    rnn_graph("tf_rnn_gpu", 13, features)


def ta_rnn(name="tf_ta_rnn_gpu", control_flow_v2=False):
    def features(xp, cw, cu):
        inputs = tf.TensorArray(tf.float32, size=6).unstack(xp)
        states = tf.TensorArray(tf.float32, size=6)

        def step(t, h, states):
            h = tf.tanh(tf.matmul(inputs.read(t), cw) + tf.matmul(h, cu))
            return t + 1, h, states.write(t, h)

        _, _, states = tf1.while_loop(lambda t, h, s: t < 6, step,
                                      [tf.constant(0), tf.zeros([4, 5]), states])
        seq = tf.reshape(states.stack(), [24, 5])
        halves = tf.TensorArray(tf.float32, size=2).split(
            seq, tf.constant([12, 12], dtype=tf.int64))
        return tf.reduce_mean(tf.reshape(halves.concat(), [6, 4, 5]), axis=0)

    rnn_graph(name, 17, features, control_flow_v2)


def bn_cnn():
    rng = np.random.RandomState(19)
    w = rng.uniform(-0.5, 0.5, (3, 3, 2, 6)).astype(np.float32)
    channel = lambda lo, hi: rng.uniform(lo, hi, (6,)).astype(np.float32)  # noqa: E731
    scale, offset, scale2, offset2 = channel(0.5, 1.5), channel(-0.2, 0.2), channel(0.5, 1.5), \
        channel(-0.2, 0.2)
    mean, variance = channel(0.2, 0.6), channel(0.3, 1.0)
    dense = rng.uniform(-0.5, 0.5, (6, 10)).astype(np.float32)
    x, labels = images(rng)
    g = tf.Graph()
    with g.as_default():
        xp, yp = image_placeholders()
        with tf.device(GPU):
            params = {name: tf.constant(v, name=name) for name, v in [
                ("filter", w), ("scale", scale), ("offset", offset), ("scale2", scale2),
                ("offset2", offset2), ("dense", dense)]}
            conv = tf1.nn.conv2d(xp, params["filter"], [1, 1, 1, 1], "SAME")
            running_mean = tf.constant(mean, name="running_mean")
            running_var = tf.constant(variance, name="running_variance")
            y, batch_mean, batch_var = tf1.nn.fused_batch_norm(
                conv, params["scale"], params["offset"], mean=running_mean,
                variance=running_var, epsilon=0.001, is_training=True,
                exponential_avg_factor=0.1)
            tf.identity(batch_mean, name="stats/mean")
            tf.identity(batch_var, name="stats/variance")
            z, _, _ = tf1.nn.fused_batch_norm(
                tf.nn.relu(y), params["scale2"], params["offset2"], mean=running_mean,
                variance=running_var, epsilon=0.001, is_training=False)
            logits = tf.matmul(tf.reduce_mean(z, [1, 2]), params["dense"], name="logits")
            loss = tf.identity(tf1.losses.sparse_softmax_cross_entropy(yp, logits), name="loss")
            for name, grad in zip(params, tf.gradients(loss, list(params.values()))):
                tf.identity(grad, name="grads/" + name)
    fetches = ["loss:0", "stats/mean:0", "stats/variance:0"] + [f"grads/{n}:0" for n in params]
    write("tf_bn_cnn_gpu", g, {"x": x, "labels": labels}, fetches)


if __name__ == "__main__":
    mlp()
    cnn()
    rnn()
    ta_rnn()
    ta_rnn("tf_ta_rnn_v2_gpu", control_flow_v2=True)
    bn_cnn()
    nchw_cnn()
