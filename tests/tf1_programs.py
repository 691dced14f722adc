"""TF1-style training programs, written as TensorFlow 1.x users wrote them.

Each program is a function run(target, cluster, workdir, steps) -> [step record]:
it builds its graph with its ops placed by placed(cluster, device) (cluster None:
local; else a cluster dict, and replica_device_setter puts the variables on its ps
tasks and the rest on worker 0), trains `steps` steps against `target` ("" for an
in-process TensorFlow session with 2 CPU devices, grpc://... for a cluster) with the
driver its original used (Supervisor, MonitoredTrainingSession, a plain Session),
and returns per step the values it fetched (the global step
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
  avg_pool_cnn     average pooling as Inception and ResNet used it: a 3x3 stride-1 SAME
                   avg_pool branch concatenated with a 1x1 conv, a 2x2 VALID avg_pool,
                   a global average pool, momentum, in a plain Session
  cifar_towers     TensorFlow's CIFAR-10 multi-tower model, scaled down: two towers on
                   the worker's 2 CPU devices sharing variables (reuse), conv + lrn +
                   max_pool, L2 weight decay via a losses collection, the towers'
                   gradients averaged, SGD at a staircase exponential_decay, activation
                   histograms and zero_fraction summaries, in a plain Session
  metrics          softmax regression evaluated with tf.compat.v1.metrics (accuracy,
                   mean, precision, recall, mean_per_class_accuracy), in_top_k and
                   confusion_matrix, their local variables reset by an initializer
  rnn_while_v1     a hand-written RNN: tf.while_loop (TensorFlow 1.x frames) over time
                   steps, inputs unstacked into and states written to TensorArrays,
                   trained by Adam through the loop (stacks keep the forward values)
  nested_while_v1  a loop in a loop: per time step, three inner refinement iterations
                   of the state, trained by SGD with momentum through both loops
  rnn_model_parallel
                   a two-layer RNN split over two workers (model parallelism, as
                   GNMT-style programs placed layers): one tf.while_loop whose body runs
                   layer 1 on worker 0 and layer 2 on worker 1 (locally: CPU:0 and CPU:1),
                   each value crossing through an identity on its consumer's device,
                   trained by Adam with colocate_gradients_with_ops
  dynamic_rnn_lstm tf.compat.v1.nn.dynamic_rnn over an LSTMCell (tf-keras), the
                   classic sequence classifier, Adam, gradient clipping by global norm
  layers_batch_norm tf.compat.v1.layers (tf-keras): conv2d, batch_normalization in
                   training (its UPDATE_OPS under the train op), dropout, dense, Adam,
                   under MonitoredTrainingSession
  word2vec         skip-gram with an embedding partitioned over 2 ps tasks
                   (fixed_size_partitioner, embedding_lookup's DynamicPartition/Stitch),
                   nce_loss with accidental hits removed, sparse SGD updates on both ps.
                   The negative samples are drawn in numpy and fed as nce_loss's
                   sampled_values (with TensorFlow's log-uniform expected counts):
                   dflow's sampler draws from its own random stream, not TensorFlow's
  wide_deep        feature columns (hashed, bucketized and crossed columns in a linear
                   model trained by FTRL, an embedding column and a numeric column under a
                   dense layer trained by Adagrad), string features fed as a sparse tensor
  while_v2         a hand-written RNN in tf.while_loop under control flow v2 (a While op,
                   switched on while this program builds its graph only): inputs read
                   from and per-step states written to tf.TensorArrays (TensorList ops
                   on variant tensors), a loss on the stacked states, Adam; the gradient
                   While pops the forward values TensorFlow accumulated in TensorLists

Programs that need tf-keras (TF_USE_LEGACY_KERAS=1, set here before TensorFlow is
imported) are listed in NEEDS_TF_KERAS; the test skips them, saying so, without it.
"""
import math
import os

import numpy as np

# Keras 2 for tf.compat.v1.nn.rnn_cell and tf.compat.v1.layers (must precede the import).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
# TensorFlow 1.x semantics, as these programs were written for: graph mode
# (Supervisor's threads use the graph), reference variables, v1 control flow.
tf1.disable_v2_behavior()
PROGRAMS = {}
NEEDS_TF_KERAS = {"dynamic_rnn_lstm", "layers_batch_norm"}
# Tasks per job of the cluster a program runs on, when not 1 ps + 1 worker.
CLUSTER_SHAPES = {"word2vec": {"ps": 2, "worker": 1},
                  "rnn_model_parallel": {"ps": 1, "worker": 2}}


def placed(cluster, device=""):
    """Where a program's ops go: on a cluster, variables on its ps tasks and the rest on
    worker 0's `device` ("/device:CPU:1"); locally, `device`."""
    if cluster is None:
        return device or None
    return tf1.train.replica_device_setter(cluster=tf.train.ClusterSpec(cluster),
                                           worker_device="/job:worker/task:0" + device)


def session_config():
    """Two CPU devices for the programs with towers (a remote target has its own)."""
    return tf1.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=False)


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
def mnist_replica(target, cluster, workdir, steps, build_only=False):
    pixels, hidden, classes, batch = 28, 100, 10, 100
    x_data, y_data = synthetic(1, 1000, pixels * pixels, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(7)
        with tf1.device(placed(cluster)):
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
def mts_losses(target, cluster, workdir, steps, build_only=False):
    features, classes, batch = 32, 5, 64
    x_data, y_data = synthetic(2, 2048, features, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(11)
        with tf1.device(placed(cluster)):
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
def cnn_batch_norm(target, cluster, workdir, steps, build_only=False):
    side, classes, batch, filters = 8, 4, 16, 4
    x_data, y_data = images(3, 512, side, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(5)
        with tf1.device(placed(cluster)):
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


@program
def avg_pool_cnn(target, cluster, workdir, steps, build_only=False):
    side, classes, batch, filters = 8, 4, 16, 4
    x_data, y_data = images(21, 512, side, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(22)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, side, side, 1], name="images")
            labels = tf1.placeholder(tf.int32, [None], name="labels")
            init = tf1.truncated_normal_initializer(stddev=0.3, seed=23)
            kernel = tf1.get_variable("conv/kernel", [3, 3, 1, filters], initializer=init)
            conv = tf1.nn.relu(tf1.nn.conv2d(x, kernel, [1, 1, 1, 1], padding="SAME"))
            # Inception's pooling branch (3x3, stride 1, SAME: edge windows average
            # fewer pixels) beside a 1x1 convolution, concatenated on depth.
            pool_branch = tf1.nn.avg_pool(conv, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1],
                                          padding="SAME")
            mix = tf1.get_variable("mix/kernel", [1, 1, filters, filters], initializer=init)
            mixed = tf1.concat([pool_branch, tf1.nn.conv2d(conv, mix, [1, 1, 1, 1], "SAME")], 3)
            down = tf1.nn.avg_pool(mixed, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                   padding="VALID")
            # ResNet's global average pool over the remaining 4x4.
            pooled = tf1.nn.avg_pool(down, ksize=[1, side // 2, side // 2, 1],
                                     strides=[1, 1, 1, 1], padding="VALID")
            flat = tf1.reshape(pooled, [-1, 2 * filters])
            dense = tf1.get_variable("dense/kernel", [2 * filters, classes],
                                     initializer=tf1.glorot_uniform_initializer(seed=24))
            logits = tf1.matmul(flat, dense)
            loss = tf1.reduce_mean(tf1.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits))
            train_op = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(loss,
                                                                      global_step=global_step)
            init_op = tf1.global_variables_initializer()
    if build_only:
        return graph
    records = []
    with graph.as_default(), tf1.Session(target) as sess:
        sess.run(init_op)
        for i in range(steps):
            xs, ys = get(i)
            _, value = sess.run([train_op, loss], feed_dict={x: xs, labels: ys})
            records.append({"loss": float(value), "global_step": int(sess.run(global_step))})
    return records


@program
def cifar_towers(target, cluster, workdir, steps, build_only=False):
    side, channels, classes, batch, towers = 8, 3, 5, 8, 2
    x_data, y_data = synthetic(5, 256, side * side * channels, classes)
    x_data = x_data.reshape(-1, side, side, channels)
    y_data = np.argmax(y_data, axis=1).astype(np.int32)
    get = batches(x_data, y_data, batch * towers)

    def variable(name, shape, stddev, wd):
        var = tf1.get_variable(name, shape, initializer=tf1.truncated_normal_initializer(
            stddev=stddev, seed=len(name)))
        if wd:
            tf1.add_to_collection("losses", tf1.multiply(tf1.nn.l2_loss(var), wd,
                                                         name="weight_loss"))
        return var

    def activation_summary(x):
        tf1.summary.histogram(x.op.name + "/activations", x)
        tf1.summary.scalar(x.op.name + "/sparsity", tf1.nn.zero_fraction(x))

    def inference(images):
        with tf1.variable_scope("conv1") as scope:
            kernel = variable("weights", [3, 3, channels, 8], 0.2, 0.0)
            biases = tf1.get_variable("biases", [8], initializer=tf1.constant_initializer(0.1))
            conv1 = tf1.nn.relu(tf1.nn.bias_add(
                tf1.nn.conv2d(images, kernel, [1, 1, 1, 1], padding="SAME"), biases),
                name=scope.name)
            activation_summary(conv1)
        pool1 = tf1.nn.max_pool(conv1, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1],
                                padding="SAME", name="pool1")
        norm1 = tf1.nn.lrn(pool1, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name="norm1")
        with tf1.variable_scope("local2") as scope:
            flat = tf1.reshape(norm1, [-1, (side // 2) * (side // 2) * 8])
            weights = variable("weights", [(side // 2) * (side // 2) * 8, 16], 0.05, 0.004)
            biases = tf1.get_variable("biases", [16], initializer=tf1.constant_initializer(0.1))
            local2 = tf1.nn.relu(tf1.matmul(flat, weights) + biases, name=scope.name)
            activation_summary(local2)
        with tf1.variable_scope("softmax_linear"):
            weights = variable("weights", [16, classes], 1 / 16.0, 0.0)
            biases = tf1.get_variable("biases", [classes], initializer=tf1.zeros_initializer())
            return tf1.add(tf1.matmul(local2, weights), biases, name="logits")

    def tower_loss(scope, images, labels):
        logits = inference(images)
        cross_entropy = tf1.reduce_mean(tf1.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits), name="cross_entropy")
        tf1.add_to_collection("losses", cross_entropy)
        return tf1.add_n(tf1.get_collection("losses", scope), name="total_loss")

    def average_gradients(tower_grads):
        averaged = []
        for grad_and_vars in zip(*tower_grads):
            grads = [tf1.expand_dims(g, 0) for g, _ in grad_and_vars]
            grad = tf1.reduce_mean(tf1.concat(axis=0, values=grads), 0)
            averaged.append((grad, grad_and_vars[0][1]))
        return averaged

    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(13)
        with tf1.device(placed(cluster, "/device:CPU:0")):
            global_step = tf1.train.get_or_create_global_step()
            lr = tf1.train.exponential_decay(0.1, global_step, 2, 0.5, staircase=True)
            opt = tf1.train.GradientDescentOptimizer(lr)
        inputs, tower_grads, losses = [], [], []
        with tf1.variable_scope(tf1.get_variable_scope()):
            for i in range(towers):
                with tf1.device(placed(cluster, "/device:CPU:%d" % i)):
                    with tf1.name_scope("tower_%d" % i) as scope:
                        images = tf1.placeholder(tf.float32, [batch, side, side, channels])
                        labels = tf1.placeholder(tf.int32, [batch])
                        inputs.append((images, labels))
                        loss = tower_loss(scope, images, labels)
                        losses.append(loss)
                        tf1.get_variable_scope().reuse_variables()
                        summaries = tf1.get_collection(tf1.GraphKeys.SUMMARIES, scope)
                        tower_grads.append(opt.compute_gradients(loss))
        with tf1.device(placed(cluster, "/device:CPU:0")):
            train_op = opt.apply_gradients(average_gradients(tower_grads), global_step=global_step)
            summary_op = tf1.summary.merge(summaries)
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    records = []
    with graph.as_default(), tf1.Session(target, config=session_config()) as sess:
        sess.run(init)
        for i in range(steps):
            xs, ys = get(i)
            feed = {}
            for t, (images, labels) in enumerate(inputs):
                feed[images], feed[labels] = xs[t * batch:(t + 1) * batch], ys[t * batch:(t + 1) * batch]
            _, tower_losses, rate, summary = sess.run([train_op, losses, lr, summary_op],
                                                      feed_dict=feed)
            records.append({"losses": [float(v) for v in tower_losses], "learning_rate": float(rate),
                            "global_step": int(sess.run(global_step)),
                            "summary": summary_values(summary)})
    return records


@program
def metrics(target, cluster, workdir, steps, build_only=False):
    features, classes, batch = 12, 4, 32
    x_data, y_data = synthetic(6, 1024, features, classes)
    y_data = np.argmax(y_data, axis=1).astype(np.int64)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(17)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, features])
            labels = tf1.placeholder(tf.int64, [None])
            w = tf1.get_variable("w", [features, classes],
                                 initializer=tf1.random_normal_initializer(stddev=0.1, seed=3))
            logits = tf1.matmul(x, w)
            loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
            train_op = tf1.train.GradientDescentOptimizer(0.5).minimize(loss, global_step)
            predictions = tf1.argmax(logits, 1)
            positive, predicted_positive = tf1.equal(labels, 1), tf1.equal(predictions, 1)
            values, updates = zip(
                tf1.metrics.accuracy(labels, predictions),
                tf1.metrics.mean(loss),
                tf1.metrics.precision(positive, predicted_positive),
                tf1.metrics.recall(positive, predicted_positive),
                tf1.metrics.mean_per_class_accuracy(labels, predictions, classes))
            in_top_2 = tf1.reduce_mean(tf1.cast(
                tf1.nn.in_top_k(logits, tf1.cast(labels, tf.int32), 2), tf.float32))
            confusion = tf1.confusion_matrix(labels, predictions, num_classes=classes)
            init = tf1.group(tf1.global_variables_initializer(), tf1.local_variables_initializer())
            reset = tf1.local_variables_initializer()
    if build_only:
        return graph
    records = []
    with graph.as_default(), tf1.Session(target) as sess:
        sess.run(init)
        for i in range(steps):
            xs, ys = get(i)
            feed = {x: xs, labels: ys}
            sess.run([train_op] + list(updates), feed_dict=feed)
            got = sess.run(list(values) + [in_top_2, confusion], feed_dict=feed)
            records.append({"metrics": [float(v) for v in got[:-2]], "in_top_2": float(got[-2]),
                            "confusion": got[-1].tolist(),
                            "global_step": int(sess.run(global_step))})
            if i % 3 == 2:
                sess.run(reset)  # A new evaluation window.
    return records


def sequences(seed, examples, time_steps, features, classes):
    """Seeded sequences [examples, time, features] and one-hot labels."""
    x, y = synthetic(seed, examples, time_steps * features, classes)
    return x.reshape(examples, time_steps, features), y


def sequence_model(target, graph, x, y_, x_data, y_data, steps, train_op, loss, global_step,
                   init, batch, config=None):
    """Trains `steps` steps in a plain Session; records loss and global step."""
    get = batches(x_data, y_data, batch)
    records = []
    with graph.as_default(), tf1.Session(target, config=config) as sess:
        sess.run(init)
        for i in range(steps):
            xs, ys = get(i)
            _, value = sess.run([train_op, loss], feed_dict={x: xs, y_: ys})
            records.append({"loss": float(value), "global_step": int(sess.run(global_step))})
    return records


@program
def rnn_while_v1(target, cluster, workdir, steps, build_only=False):
    time_steps, features, hidden, classes, batch = 6, 4, 8, 3, 16
    x_data, y_data = sequences(11, 512, time_steps, features, classes)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(3)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, time_steps, features], name="x")
            y_ = tf1.placeholder(tf.float32, [None, classes], name="y")
            init_w = tf1.glorot_uniform_initializer(seed=2)
            w_in = tf1.get_variable("rnn/w_in", [features, hidden], initializer=init_w)
            w_h = tf1.get_variable("rnn/w_h", [hidden, hidden], initializer=init_w)
            b = tf1.get_variable("rnn/b", [hidden], initializer=tf1.zeros_initializer())
            w_out = tf1.get_variable("out/w", [hidden, classes], initializer=init_w)
            inputs = tf1.TensorArray(tf.float32, size=time_steps).unstack(
                tf1.transpose(x, [1, 0, 2]))
            states = tf1.TensorArray(tf.float32, size=time_steps)

            def step(t, h, states):
                h = tf1.tanh(tf1.matmul(inputs.read(t), w_in) + tf1.matmul(h, w_h) + b)
                return t + 1, h, states.write(t, h)

            h0 = tf1.zeros([tf1.shape(x)[0], hidden])
            _, h, states = tf1.while_loop(lambda t, h, s: t < time_steps, step, [0, h0, states])
            logits = tf1.matmul(h + tf1.reduce_mean(states.stack(), axis=0), w_out)
            loss = tf1.reduce_mean(tf1.nn.softmax_cross_entropy_with_logits_v2(
                labels=y_, logits=logits))
            train_op = tf1.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    return sequence_model(target, graph, x, y_, x_data, y_data, steps, train_op, loss,
                          global_step, init, batch)


@program
def nested_while_v1(target, cluster, workdir, steps, build_only=False):
    time_steps, features, hidden, classes, batch = 4, 3, 6, 3, 16
    x_data, y_data = sequences(12, 512, time_steps, features, classes)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(4)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, time_steps, features], name="x")
            y_ = tf1.placeholder(tf.float32, [None, classes], name="y")
            init_w = tf1.glorot_uniform_initializer(seed=5)
            w_in = tf1.get_variable("w_in", [features, hidden], initializer=init_w)
            w_h = tf1.get_variable("w_h", [hidden, hidden], initializer=init_w)
            w_out = tf1.get_variable("w_out", [hidden, classes], initializer=init_w)
            seq = tf1.transpose(x, [1, 0, 2])

            def outer(t, h):
                drive = tf1.matmul(tf1.gather(seq, t), w_in)

                def refine(k, z):
                    return k + 1, tf1.tanh(tf1.matmul(z, w_h) + drive)

                _, h = tf1.while_loop(lambda k, z: k < 3, refine, [0, h], name="refine")
                return t + 1, h

            h0 = tf1.zeros([tf1.shape(x)[0], hidden])
            _, h = tf1.while_loop(lambda t, h: t < time_steps, outer, [0, h0], name="time")
            loss = tf1.reduce_mean(tf1.nn.softmax_cross_entropy_with_logits_v2(
                labels=y_, logits=tf1.matmul(h, w_out)))
            train_op = tf1.train.MomentumOptimizer(0.1, 0.9).minimize(
                loss, global_step=global_step)
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    return sequence_model(target, graph, x, y_, x_data, y_data, steps, train_op, loss,
                          global_step, init, batch)


@program
def rnn_model_parallel(target, cluster, workdir, steps, build_only=False):
    time_steps, features, hidden, classes, batch = 5, 4, 8, 3, 16
    x_data, y_data = sequences(27, 512, time_steps, features, classes)
    second = "/job:worker/task:1" if cluster else "/device:CPU:1"
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(28)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, time_steps, features], name="x")
            y_ = tf1.placeholder(tf.float32, [None, classes], name="y")
            init_w = tf1.glorot_uniform_initializer(seed=29)
            w1 = tf1.get_variable("layer1/w", [features + hidden, hidden], initializer=init_w)
            w2 = tf1.get_variable("layer2/w", [2 * hidden, hidden], initializer=init_w)
            w_out = tf1.get_variable("out/w", [hidden, classes], initializer=init_w)
            seq = tf1.transpose(x, [1, 0, 2])

            def step(t, h1, h2):
                h1 = tf1.tanh(tf1.matmul(tf1.concat([tf1.gather(seq, t), h1], 1), w1))
                with tf1.device(second):
                    below, state = tf1.identity(h1), tf1.identity(h2)
                    h2 = tf1.tanh(tf1.matmul(tf1.concat([below, state], 1), w2))
                return t + 1, h1, h2

            zeros = tf1.zeros([tf1.shape(x)[0], hidden])
            _, _, h2 = tf1.while_loop(lambda t, a, b: t < time_steps, step, [0, zeros, zeros],
                                      name="layers")
            loss = tf1.reduce_mean(tf1.nn.softmax_cross_entropy_with_logits_v2(
                labels=y_, logits=tf1.matmul(tf1.identity(h2), w_out)))
            train_op = tf1.train.AdamOptimizer(0.01).minimize(
                loss, global_step=global_step, colocate_gradients_with_ops=True)
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    return sequence_model(target, graph, x, y_, x_data, y_data, steps, train_op, loss,
                          global_step, init, batch, config=session_config())


@program
def dynamic_rnn_lstm(target, cluster, workdir, steps, build_only=False):
    time_steps, features, hidden, classes, batch = 5, 4, 8, 3, 16
    x_data, y_data = sequences(13, 512, time_steps, features, classes)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(6)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, time_steps, features], name="x")
            y_ = tf1.placeholder(tf.float32, [None, classes], name="y")
            cell = tf1.nn.rnn_cell.LSTMCell(
                hidden, initializer=tf1.glorot_uniform_initializer(seed=7))
            _, state = tf1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
            w_out = tf1.get_variable("out/w", [hidden, classes],
                                     initializer=tf1.glorot_uniform_initializer(seed=8))
            loss = tf1.reduce_mean(tf1.nn.softmax_cross_entropy_with_logits_v2(
                labels=y_, logits=tf1.matmul(state.h, w_out)))
            optimizer = tf1.train.AdamOptimizer(0.01)
            grads, variables = zip(*optimizer.compute_gradients(loss))
            clipped, _ = tf1.clip_by_global_norm(grads, 1.0)
            train_op = optimizer.apply_gradients(zip(clipped, variables), global_step=global_step)
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    return sequence_model(target, graph, x, y_, x_data, y_data, steps, train_op, loss,
                          global_step, init, batch)


@program
def layers_batch_norm(target, cluster, workdir, steps, build_only=False):
    side, classes, batch = 8, 4, 16
    x_data, y_data = images(14, 512, side, classes)
    get = batches(x_data, y_data, batch)
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(15)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            x = tf1.placeholder(tf.float32, [None, side, side, 1], name="images")
            labels = tf1.placeholder(tf.int32, [None], name="labels")
            layers = tf1.layers
            init = tf1.glorot_uniform_initializer(seed=16)
            # No bias before batch norm: its gradient is zero but for rounding, which
            # Adam would turn into full-size steps of either sign.
            net = layers.conv2d(x, 4, 3, padding="same", use_bias=False, kernel_initializer=init)
            net = tf1.nn.relu(layers.batch_normalization(net, training=True))
            net = layers.max_pooling2d(net, 2, 2)
            net = layers.dropout(layers.flatten(net), rate=0.2, training=True, seed=17)
            logits = layers.dense(net, classes, kernel_initializer=init)
            loss = tf1.losses.sparse_softmax_cross_entropy(labels, logits)
            with tf1.control_dependencies(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)):
                train_op = tf1.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
            moving = [v for v in tf1.global_variables() if "moving_mean" in v.name][0]
    if build_only:
        return graph
    records = []
    with graph.as_default():
        with tf1.train.MonitoredTrainingSession(master=target, is_chief=True,
                                               checkpoint_dir=None) as sess:
            for i in range(steps):
                xs, ys = get(i)
                _, value = sess.run([train_op, loss], feed_dict={x: xs, labels: ys})
                mm, step = sess.run([moving, global_step])
                records.append({"loss": float(value), "moving_mean": mm.tolist(),
                                "global_step": int(step)})
    return records


@program
def word2vec(target, cluster, workdir, steps, build_only=False):
    vocabulary, dim, batch, negatives = 40, 6, 16, 8
    rng = np.random.RandomState(18)
    corpus = rng.zipf(1.5, 4000) % vocabulary
    pairs = np.stack([corpus[:-1], corpus[1:]], axis=1)
    log_range = math.log(vocabulary + 1)

    def expected(ids):  # TensorFlow's log-uniform probability times the draws.
        return negatives * (np.log((ids + 2.0) / (ids + 1.0)) / log_range)

    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(19)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            words = tf1.placeholder(tf.int64, [None], name="words")
            contexts = tf1.placeholder(tf.int64, [None, 1], name="contexts")
            sampled = tf1.placeholder(tf.int64, [negatives], name="sampled")
            true_expected = tf1.placeholder(tf.float32, [None, 1], name="true_expected")
            sampled_expected = tf1.placeholder(tf.float32, [negatives], name="sampled_expected")
            partitioner = tf1.fixed_size_partitioner(2)
            embeddings = tf1.get_variable(
                "embeddings", [vocabulary, dim], partitioner=partitioner,
                initializer=tf1.random_uniform_initializer(-1.0, 1.0, seed=20))
            nce_w = tf1.get_variable(
                "nce_w", [vocabulary, dim], partitioner=partitioner,
                initializer=tf1.truncated_normal_initializer(stddev=1.0 / math.sqrt(dim), seed=21))
            nce_b = tf1.get_variable("nce_b", [vocabulary], initializer=tf1.zeros_initializer())
            embedded = tf1.nn.embedding_lookup(embeddings, words)
            loss = tf1.reduce_mean(tf1.nn.nce_loss(
                weights=nce_w, biases=nce_b, labels=contexts, inputs=embedded,
                num_sampled=negatives, num_classes=vocabulary,
                sampled_values=(sampled, true_expected, sampled_expected),
                remove_accidental_hits=True))
            train_op = tf1.train.GradientDescentOptimizer(0.5).minimize(
                loss, global_step=global_step)
            norm = tf1.sqrt(tf1.reduce_sum(tf1.square(tf1.concat(list(embeddings), 0))))
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    records = []
    with graph.as_default(), tf1.Session(target) as sess:
        sess.run(init)
        for i in range(steps):
            chunk = pairs[(i * batch) % (len(pairs) - batch):][:batch]
            draw = (np.exp(rng.rand(negatives) * log_range).astype(np.int64) - 1) % vocabulary
            feed = {words: chunk[:, 0], contexts: chunk[:, 1:],
                    sampled: draw, true_expected: expected(chunk[:, 1:]).astype(np.float32),
                    sampled_expected: expected(draw).astype(np.float32)}
            _, value = sess.run([train_op, loss], feed_dict=feed)
            records.append({"loss": float(value), "embedding_norm": float(sess.run(norm)),
                            "global_step": int(sess.run(global_step))})
    return records


@program
def wide_deep(target, cluster, workdir, steps, build_only=False):
    rng = np.random.RandomState(22)
    vocabulary = ["cat", "dog", "fish", "bird", "eel", "ant", "owl", "yak"]
    graph = tf.Graph()
    with graph.as_default():
        tf1.set_random_seed(23)
        with tf1.device(placed(cluster)):
            global_step = tf1.train.get_or_create_global_step()
            fc = tf1.feature_column
            word = fc.categorical_column_with_hash_bucket("word", 20)
            age = fc.numeric_column("age")
            age_buckets = fc.bucketized_column(age, [18.0, 30.0, 50.0])
            features = {"word": tf1.sparse_placeholder(tf.string, name="word"),
                        "age": tf1.placeholder(tf.float32, [None, 1], name="age")}
            labels = tf1.placeholder(tf.float32, [None, 1], name="labels")
            # Crossed with the age buckets: SparseCross of a sparse string and a
            # sparse int64 column, hashed into 16 buckets.
            word_x_age = fc.crossed_column(["word", age_buckets], 16)
            with tf1.variable_scope("wide"):
                wide = fc.linear_model(features, [word, age_buckets, word_x_age])
            embedding = fc.embedding_column(
                word, 4, combiner="sqrtn",
                initializer=tf1.truncated_normal_initializer(stddev=0.5, seed=24))
            with tf1.variable_scope("deep"):
                hidden = tf1.layers.dense(fc.input_layer(features, [embedding, age]), 8,
                                          activation=tf1.nn.relu,
                                          kernel_initializer=tf1.glorot_uniform_initializer(
                                              seed=25))
                deep = tf1.layers.dense(hidden, 1, kernel_initializer=tf1.glorot_uniform_initializer(
                    seed=26))
            loss = tf1.reduce_mean(tf1.nn.sigmoid_cross_entropy_with_logits(
                labels=labels, logits=wide + deep))
            wide_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "wide")
            deep_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES, "deep")
            train_op = tf1.group(
                tf1.train.FtrlOptimizer(0.3, l1_regularization_strength=0.01).minimize(
                    loss, var_list=wide_vars, global_step=global_step),
                tf1.train.AdagradOptimizer(0.2).minimize(loss, var_list=deep_vars))
            init = tf1.global_variables_initializer()
    if build_only:
        return graph
    records = []
    with graph.as_default(), tf1.Session(target) as sess:
        sess.run(init)
        for _ in range(steps):
            rows = 8
            counts = rng.randint(1, 3, rows)
            indices = [[r, k] for r in range(rows) for k in range(counts[r])]
            ages = rng.uniform(10, 70, (rows, 1)).astype(np.float32)
            feed = {features["word"]: tf1.SparseTensorValue(
                        indices, rng.choice(vocabulary, len(indices)).astype(object), [rows, 2]),
                    features["age"]: ages,
                    labels: (ages > 35).astype(np.float32)}
            _, value = sess.run([train_op, loss], feed_dict=feed)
            records.append({"loss": float(value), "global_step": int(sess.run(global_step))})
    return records


@program
def while_v2(target, cluster, workdir, steps, build_only=False):
    return v2_loop_rnn(target, cluster, steps, build_only, use_resource=False)


@program
def while_v2_resource(target, cluster, workdir, steps, build_only=False):
    return v2_loop_rnn(target, cluster, steps, build_only, use_resource=True)


def v2_loop_rnn(target, cluster, steps, build_only, use_resource):
    """while_v2's RNN; with use_resource its variables are resource variables on the ps,
    which the While's body reads inside the loop (so the lowered loop spans ps and worker)."""
    from tensorflow.python.ops import control_flow_v2_toggles as toggles
    time_steps, features, hidden, classes, batch = 5, 4, 8, 3, 16
    x_data, y_data = sequences(30, 512, time_steps, features, classes)
    graph = tf.Graph()
    was_v2 = toggles.control_flow_v2_enabled()
    toggles.enable_control_flow_v2()
    try:
        with graph.as_default():
            tf1.set_random_seed(31)
            with tf1.device(placed(cluster)):
                global_step = tf1.train.get_or_create_global_step()
                x = tf1.placeholder(tf.float32, [None, time_steps, features], name="x")
                y_ = tf1.placeholder(tf.float32, [None, classes], name="y")
                init_w = tf1.glorot_uniform_initializer(seed=32)
                w_in = tf1.get_variable("rnn_v2/w_in", [features, hidden], initializer=init_w,
                                       use_resource=use_resource)
                w_h = tf1.get_variable("rnn_v2/w_h", [hidden, hidden], initializer=init_w,
                                       use_resource=use_resource)
                b = tf1.get_variable("rnn_v2/b", [hidden], initializer=tf1.zeros_initializer(),
                                     use_resource=use_resource)
                w_out = tf1.get_variable("rnn_v2/w_out", [hidden, classes], initializer=init_w,
                                       use_resource=use_resource)
                inputs = tf.TensorArray(tf.float32, size=time_steps).unstack(
                    tf1.transpose(x, [1, 0, 2]))
                states = tf.TensorArray(tf.float32, size=time_steps)

                def step(t, h, states):
                    h = tf1.tanh(tf1.matmul(inputs.read(t), w_in) + tf1.matmul(h, w_h) + b)
                    return t + 1, h, states.write(t, h)

                h0 = tf1.zeros([tf1.shape(x)[0], hidden])
                _, h, states = tf1.while_loop(lambda t, h, s: t < time_steps, step,
                                              [0, h0, states])
                logits = tf1.matmul(h + tf1.reduce_mean(states.stack(), axis=0), w_out)
                loss = tf1.reduce_mean(tf1.nn.softmax_cross_entropy_with_logits_v2(
                    labels=y_, logits=logits))
                train_op = tf1.train.AdamOptimizer(0.01).minimize(loss, global_step=global_step)
                init = tf1.global_variables_initializer()
    finally:
        if not was_v2:
            toggles.disable_control_flow_v2()
    if not any(n.op in ("While", "StatelessWhile") for n in graph.as_graph_def().node):
        raise AssertionError("while_v2 built no While op: control flow v2 was not on")
    if build_only:
        return graph
    return sequence_model(target, graph, x, y_, x_data, y_data, steps, train_op, loss,
                          global_step, init, batch)
