"""TF1-style training programs, written as TensorFlow 1.x users wrote them.

Each program is a function run(target, device_fn, workdir, steps) -> [step record]:
it builds its graph under tf.compat.v1.device(device_fn) (None: local; a
replica_device_setter: variables on the ps tasks of a cluster), trains `steps`
steps against `target` ("" for an in-process TensorFlow session, grpc://... for a
cluster) with the driver its original used (Supervisor, MonitoredTrainingSession,
a plain Session), and returns per step the values it fetched (the global step
read after the step: fetched beside the train op, a reference variable is read
when its value is sent, which races the update), for
tests/tf1_corpus_test.py to compare between local TensorFlow and a dflow cluster.

They run under tf.compat.v1.disable_v2_behavior(), as TensorFlow 1.x did. Every
program seeds its graph and feeds seeded synthetic data, so two runs of the
same program compute the same numbers. With build_only a program returns its graph
(tests/data/gen_tf1_corpus.py writes them for `dflow ops --check`).

Programs:
  mnist_replica    the classic distributed-MNIST replica script (mnist_replica.py):
                   xw_plus_b, softmax, -sum(y_ * log(clip_by_value(y))), Adam, a
                   loss summary, under tf.train.Supervisor(logdir)
  mts_losses       tf.compat.v1.losses (softmax_cross_entropy with label smoothing
                   and weights, L2 regularization), scalar and histogram summaries,
                   momentum with exponential_decay(staircase), under
                   MonitoredTrainingSession(checkpoint_dir, save_summaries_steps)
  cnn_batch_norm   conv2d, fused batch norm in training with moving averages
                   (assign_sub under the train op's control dependencies), relu,
                   max_pool, dropout, Adam, in a plain Session
"""
import math
import os

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
# TensorFlow 1.x semantics, as these programs were written for: graph mode
# (Supervisor's threads use the graph), reference variables, v1 control flow.
tf1.disable_v2_behavior()
PROGRAMS = {}


def program(fn):
    PROGRAMS[fn.__name__] = fn
    return fn


def synthetic(seed, examples, features, classes):
    """Seeded inputs in [0, 1) and one-hot labels of a random linear rule."""
    rng = np.random.RandomState(seed)
    x = rng.rand(examples, features).astype(np.float32)
    w = rng.randn(features, classes).astype(np.float32)
    labels = np.argmax(x @ w, axis=1)
    return x, np.eye(classes, dtype=np.float32)[labels]


def batches(x, y, batch):
    """The i-th batch, cycling over the data."""
    def get(i):
        start = (i * batch) % (len(x) - batch + 1)
        return x[start:start + batch], y[start:start + batch]
    return get


def images(seed, examples, side, classes):
    """Seeded one-channel images and integer labels of a random linear rule."""
    x, y = synthetic(seed, examples, side * side, classes)
    return x.reshape(examples, side, side, 1), np.argmax(y, axis=1).astype(np.int32)


def summary_values(serialized):
    """{tag: value} of a serialized Summary: scalars, and histograms as their
    (min, max, num, sum, sum_squares) plus bucket counts."""
    s = tf1.Summary.FromString(serialized)
    out = {}
    for v in s.value:
        if v.HasField("histo"):
            h = v.histo
            out[v.tag] = [h.min, h.max, h.num, h.sum, h.sum_squares] + list(h.bucket)
        else:
            out[v.tag] = [v.simple_value]
    return out


@program
def mnist_replica(target, device_fn, workdir, steps, build_only=False):
    pixels, hidden, classes, batch = 28, 100, 10, 100
    x_data, y_data = synthetic(1, 1000, pixels * pixels, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(7)
        with tf1.device(device_fn):
            global_step = tf1.Variable(0, name="global_step", trainable=False)
            hid_w = tf1.Variable(tf1.truncated_normal([pixels * pixels, hidden],
                                                      stddev=1.0 / pixels), name="hid_w")
            hid_b = tf1.Variable(tf1.zeros([hidden]), name="hid_b")
            sm_w = tf1.Variable(tf1.truncated_normal([hidden, classes],
                                                     stddev=1.0 / math.sqrt(hidden)), name="sm_w")
            sm_b = tf1.Variable(tf1.zeros([classes]), name="sm_b")
            x = tf1.placeholder(tf.float32, [None, pixels * pixels])
            y_ = tf1.placeholder(tf.float32, [None, classes])
            hid = tf1.nn.relu(tf1.nn.xw_plus_b(x, hid_w, hid_b))
            y = tf1.nn.softmax(tf1.nn.xw_plus_b(hid, sm_w, sm_b))
            cross_entropy = -tf1.reduce_sum(y_ * tf1.log(tf1.clip_by_value(y, 1e-10, 1.0)))
            tf1.summary.scalar("cross_entropy", cross_entropy)
            train_step = tf1.train.AdamOptimizer(0.001).minimize(cross_entropy,
                                                                 global_step=global_step)
            summary_op = tf1.summary.merge_all()
            init_op = tf1.global_variables_initializer()
    if build_only:
        return graph
    records = []
    with graph.as_default():
        sv = tf1.train.Supervisor(is_chief=True, logdir=os.path.join(workdir, "train"),
                                  init_op=init_op, summary_op=None, recovery_wait_secs=1,
                                  global_step=global_step)
        with sv.managed_session(target) as sess:
            for i in range(steps):
                xs, ys = get(i)
                feed = {x: xs, y_: ys}
                _, loss, summary = sess.run([train_step, cross_entropy, summary_op],
                                            feed_dict=feed)
                sv.summary_computed(sess, summary)
                records.append({"loss": float(loss), "global_step": int(sess.run(global_step)),
                                "summary": summary_values(summary)})
            sv.stop()
    return records


@program
def mts_losses(target, device_fn, workdir, steps, build_only=False):
    features, classes, batch = 32, 5, 64
    x_data, y_data = synthetic(2, 2048, features, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(11)
        with tf1.device(device_fn):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, features], name="x")
            labels = tf1.placeholder(tf.float32, [None, classes], name="labels")
            weights = tf1.placeholder(tf.float32, [None], name="weights")
            regularizer = lambda w: 1e-3 * tf1.nn.l2_loss(w)
            w1 = tf1.get_variable("w1", [features, 64], regularizer=regularizer,
                                  initializer=tf1.glorot_uniform_initializer(seed=1))
            b1 = tf1.get_variable("b1", [64], initializer=tf1.zeros_initializer())
            w2 = tf1.get_variable("w2", [64, classes], regularizer=regularizer,
                                  initializer=tf1.glorot_uniform_initializer(seed=2))
            b2 = tf1.get_variable("b2", [classes], initializer=tf1.zeros_initializer())
            hidden = tf1.nn.tanh(tf1.matmul(x, w1) + b1)
            logits = tf1.matmul(hidden, w2) + b2
            data_loss = tf1.losses.softmax_cross_entropy(labels, logits, weights=weights,
                                                         label_smoothing=0.1)
            loss = data_loss + tf1.losses.get_regularization_loss()
            tf1.summary.scalar("loss", loss)
            tf1.summary.histogram("logits", logits)
            learning_rate = tf1.train.exponential_decay(0.1, global_step, decay_steps=3,
                                                        decay_rate=0.5, staircase=True)
            tf1.summary.scalar("learning_rate", learning_rate)
            train_op = tf1.train.MomentumOptimizer(learning_rate, 0.9).minimize(
                loss, global_step=global_step)
            summary_op = tf1.summary.merge_all()
    if build_only:
        return graph
    records = []
    weight_rng = np.random.RandomState(3)
    with graph.as_default():
        with tf1.train.MonitoredTrainingSession(
                master=target, is_chief=True, checkpoint_dir=os.path.join(workdir, "ckpt"),
                save_summaries_steps=2, log_step_count_steps=None,
                hooks=[tf1.train.StopAtStepHook(last_step=steps)]) as sess:
            i = 0
            while not sess.should_stop():
                xs, ys = get(i)
                ws = weight_rng.rand(batch).astype(np.float32)
                ws[::7] = 0  # Some examples count for nothing.
                _, value, lr, summary = sess.run([train_op, loss, learning_rate, summary_op],
                                                 feed_dict={x: xs, labels: ys, weights: ws})
                records.append({"loss": float(value), "learning_rate": float(lr),
                                "summary": summary_values(summary)})
                if not sess.should_stop():
                    records[-1]["global_step"] = int(sess.run(global_step))
                i += 1
    return records


@program
def cnn_batch_norm(target, device_fn, workdir, steps, build_only=False):
    side, classes, batch, filters = 8, 4, 16, 4
    x_data, y_data = images(3, 512, side, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(5)
        with tf1.device(device_fn):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, side, side, 1], name="images")
            labels = tf1.placeholder(tf.int32, [None], name="labels")
            kernel = tf1.get_variable("conv/kernel", [3, 3, 1, filters],
                                      initializer=tf1.truncated_normal_initializer(stddev=0.3))
            conv = tf1.nn.conv2d(x, kernel, strides=[1, 1, 1, 1], padding="SAME")
            gamma = tf1.get_variable("bn/gamma", [filters], initializer=tf1.ones_initializer())
            beta = tf1.get_variable("bn/beta", [filters], initializer=tf1.zeros_initializer())
            moving_mean = tf1.get_variable("bn/moving_mean", [filters], trainable=False,
                                           initializer=tf1.zeros_initializer())
            moving_var = tf1.get_variable("bn/moving_variance", [filters], trainable=False,
                                          initializer=tf1.ones_initializer())
            normed, mean, variance = tf1.nn.fused_batch_norm(conv, gamma, beta, epsilon=1e-3,
                                                             is_training=True)
            decay = 0.9
            updates = [tf1.assign_sub(moving_mean, (moving_mean - mean) * (1 - decay)),
                       tf1.assign_sub(moving_var, (moving_var - variance) * (1 - decay))]
            pooled = tf1.nn.max_pool(tf1.nn.relu(normed), ksize=[1, 2, 2, 1],
                                     strides=[1, 2, 2, 1], padding="VALID")
            flat = tf1.reshape(pooled, [-1, (side // 2) * (side // 2) * filters])
            dropped = tf1.nn.dropout(flat, rate=0.25, seed=9)
            dense = tf1.get_variable("dense/kernel", [flat.shape[1], classes],
                                     initializer=tf1.glorot_uniform_initializer(seed=4))
            logits = tf1.matmul(dropped, dense)
            loss = tf1.reduce_mean(tf1.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits))
            with tf1.control_dependencies(updates):
                train_op = tf1.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    records = []
    with graph.as_default(), tf1.Session(target) as sess:
        sess.run(init)
        for i in range(steps):
            xs, ys = get(i)
            _, value = sess.run([train_op, loss], feed_dict={x: xs, labels: ys})
            mm, mv, step = sess.run([moving_mean, moving_var, global_step])
            records.append({"loss": float(value), "moving_mean": mm.tolist(),
                            "moving_variance": mv.tolist(), "global_step": int(step)})
    return records
