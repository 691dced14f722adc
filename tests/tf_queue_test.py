#!/usr/bin/env python3
"""Interop: TF1 queue-runner input pipelines and text/fixed-length datasets on a dflow cluster.

Real `dflow server` processes on 127.0.0.1 (tests/dflow_cluster.py: 1 ps + 1 worker);
TensorFlow's client (tf.compat.v1.Session("grpc://<worker>")) builds each graph, starts
QueueRunner threads with tf.compat.v1.train.start_queue_runners under a Coordinator (they
run the enqueue ops through the session, as TF1 programs do), and runs it on the cluster
and on local TensorFlow. Cases, each printing one PASS/FAIL line with its reason:

  text_reader   string_input_producer(two files, num_epochs=1, shuffle=False) +
                TextLineReader(skip_header_lines=1) + train.batch([key, line], 3,
                allow_smaller_final_batch=True): every batch equals local TensorFlow's
                (keys "file:line"), then OUT_OF_RANGE; the queue runners' summaries
                (fraction_of_N_full) evaluate; the coordinator stops and joins cleanly.
                A missing file: the batch queue closes (OUT_OF_RANGE) and the
                coordinator re-raises the reader's NOT_FOUND naming the file.
  shuffle_train shuffle_batch over slice_input_producer([x, y], num_epochs=3,
                shuffle=True): each of 24 (x, y) pairs comes out exactly 3 times, whole;
                OUT_OF_RANGE at the end; a linear model (w, b on /job:ps) trains on the
                batches and its loss falls below a tenth of the first. Compared as a
                multiset: the enqueue thread races the training steps, so what the
                shuffle queue holds at each dequeue, and TensorFlow's own order, vary.
  shuffle_order slice_input_producer(num_epochs=2, shuffle=True, seed=1) + train.batch
                (one thread: the order is the producer's RandomShuffle permutations)
                feeding a linear model: every batch, in order, and every loss equal
                local TensorFlow's. Then shuffle_batch(batch_size=4, min_after_dequeue=8,
                seed=3) over an unshuffled producer, dequeued only once its queue holds
                every element and is closed: every batch (the last smaller, DequeueUpTo)
                equals TensorFlow's, in order.
  dynamic_pad   train.batch(dynamic_pad=True) of variable-length tf.range rows (a
                PaddingFIFOQueue), epochs counted by a ref variable (CountUpTo, as
                under disable_v2_behavior): batches equal local TensorFlow's.
  datasets      TextLineDataset and FixedLengthRecordDataset (header, footer) .batch():
                batches equal local TensorFlow's, then OUT_OF_RANGE; a truncated
                fixed-length file is INVALID_ARGUMENT naming it.

  csv_train     the classic TF1 CSV pipeline: string_input_producer(num_epochs=2,
                shuffle=False) + TextLineReader(skip_header_lines=1) + decode_csv +
                train.batch feeding a linear model (w, b on /job:ps) trained by gradient
                descent: every batch and every step's loss equal local TensorFlow's.

Every wait is bounded: a watchdog kills the servers after CASE_TIMEOUT_S (so a blocked
client call fails instead of hanging); servers are always stopped.
"""
import contextlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dflow_cluster import WatchedCluster, import_tensorflow_or_skip, run_cases  # noqa: E402

np, tf = import_tensorflow_or_skip()
tf1 = tf.compat.v1
tf1.disable_eager_execution()
CASE_TIMEOUT_S = 60
WORKER = "/job:worker/task:0"


def placed(target, device):
    """`device` on a cluster; locally (target "") no device scope."""
    return tf1.device(device) if target else contextlib.nullcontext()


def message(err):
    text = getattr(err, "message", str(err)) or ""
    lines = [l for l in text.splitlines() if l.strip() and "Graph execution error" not in l]
    return lines[0][:300] if lines else ""


def Cluster(dflow, tmp):
    """1 ps + 1 worker; a watchdog kills them after CASE_TIMEOUT_S; always stopped."""
    return WatchedCluster(dflow, tmp, CASE_TIMEOUT_S)


def run_with_queue_runners(target, graph, fetches, init=(), limit=200, step=None):
    """Starts the graph's queue runners under a Coordinator and fetches `fetches` until
    an error. Returns (results, the error that ended it, whether the coordinator joined
    its threads cleanly, summary value or None, the error join re-raised or None)."""
    results, end, joined, join_error = [], None, False, None
    with tf1.Session(target, graph=graph) as sess:
        for op in init:
            sess.run(op)
        coord = tf1.train.Coordinator()
        threads = tf1.train.start_queue_runners(sess, coord)
        summary = graph.get_collection(tf1.GraphKeys.SUMMARIES)
        summary_value = sess.run(tf1.summary.merge(summary)) if summary else None
        try:
            for _ in range(limit):
                results.append(sess.run(fetches))
                if step is not None:
                    step(sess, results[-1])
        except tf.errors.OpError as e:
            end = e
        coord.request_stop()
        try:
            coord.join(threads, stop_grace_period_secs=10)
            joined = not any(t.is_alive() for t in threads)
        except tf.errors.OpError as e:  # A queue runner's error, reported by the coordinator.
            join_error = e
    return results, end, joined, summary_value, join_error


def equal_batches(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y))
        for x, y in zip(a, b))


def text_reader(dflow, tmp, checks):
    a, b = os.path.join(tmp, "a.csv"), os.path.join(tmp, "b.csv")
    with open(a, "w") as f:
        f.write("name,value\r\none,1\ntwo,2\n\nfour,4")
    with open(b, "w") as f:
        f.write("name,value\nfive,5\nsix,6\nseven,7\n")

    def build(target, files, scope="text"):
        # Each graph its own names: dflow keeps a queue without shared_name under its node's
        # name on the server, across sessions (TensorFlow's are private to one session).
        g = tf.Graph()
        with g.as_default(), placed(target, WORKER), tf1.name_scope(scope):
            q = tf1.train.string_input_producer(files, num_epochs=1, shuffle=False)
            key, line = tf1.TextLineReader(skip_header_lines=1).read(q)
            batch = tf1.train.batch([key, line], batch_size=3, allow_smaller_final_batch=True)
            init = [tf1.local_variables_initializer()]
        return g, batch, init

    g, batch, init = build("", [a, b])
    theirs, their_end, _, _, _ = run_with_queue_runners("", g, batch, init)
    g, batch, init = build("x", [a, b])
    missing = os.path.join(tmp, "missing.csv")
    with Cluster(dflow, tmp) as c:
        ours, our_end, joined, summary, join_error = run_with_queue_runners(c.target, g, batch,
                                                                            init)
        g2, batch2, init2 = build("x", [missing], scope="missing")
        _, missing_end, _, _, missing_error = run_with_queue_runners(c.target, g2, batch2, init2)
    checks.check(len(theirs) == 3, f"TensorFlow gives 3 batches ({len(theirs)})")
    checks.check(equal_batches(ours, theirs),
                 f"dflow's batches equal TensorFlow's: {ours} vs {theirs}")
    checks.check(isinstance(their_end, tf.errors.OutOfRangeError), "TensorFlow ends OUT_OF_RANGE")
    checks.check(isinstance(our_end, tf.errors.OutOfRangeError),
                 f"dflow ends with OUT_OF_RANGE ({type(our_end).__name__}: {message(our_end)})")
    checks.check(joined and join_error is None,
                 f"the coordinator stops and joins every queue-runner thread ({join_error})")
    checks.check(summary is not None and b"fraction_of_" in summary,
                 "the queue runners' fraction_of_N_full summaries evaluate")
    # The reader's NOT_FOUND ends its queue runner, which closes the batch queue (the
    # dequeue is OUT_OF_RANGE); the coordinator's join re-raises it, naming the file.
    checks.check(isinstance(missing_end, tf.errors.OutOfRangeError),
                 f"missing file: the batch queue closes ({message(missing_end)})")
    checks.check(isinstance(missing_error, tf.errors.NotFoundError)
                 and missing in str(missing_error),
                 f"missing file: NOT_FOUND naming it ({message(missing_error)})")


def shuffle_train(dflow, tmp, checks):
    rng = np.random.RandomState(0)
    xs = rng.randn(24, 2).astype(np.float32)
    ys = (xs @ np.array([[2.0], [-1.0]], np.float32) + 0.5).astype(np.float32)

    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, tf1.train.replica_device_setter(
                ps_tasks=1, worker_device=WORKER)):
            x, y = tf1.train.slice_input_producer([xs, ys], num_epochs=3, shuffle=True, seed=1)
            bx, by = tf1.train.shuffle_batch([x, y], batch_size=4, capacity=16,
                                             min_after_dequeue=4, seed=2,
                                             allow_smaller_final_batch=True)
            w = tf1.get_variable("queue_w", [2, 1], initializer=tf1.zeros_initializer())
            b = tf1.get_variable("queue_b", [1], initializer=tf1.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(bx, w) + b - by))
            train = tf1.train.GradientDescentOptimizer(0.2).minimize(loss)
            init = [tf1.global_variables_initializer(), tf1.local_variables_initializer()]
        return g, [bx, by, loss, train], init, w

    g, fetches, init, w = build("x")
    with Cluster(dflow, tmp) as c:
        results, end, joined, _, _ = run_with_queue_runners(c.target, g, fetches, init)
    checks.check(w.device.startswith("/job:ps"), f"w is on the ps ({w.device})")
    seen = {}
    whole = True
    for bx, by, _, _ in results:
        for x, y in zip(bx, by):
            whole &= bool(np.allclose(x @ np.array([2.0, -1.0]) + 0.5, y[0], atol=1e-5))
            seen[tuple(x.tolist())] = seen.get(tuple(x.tolist()), 0) + 1
    counts = sorted(seen.values())
    checks.check(len(seen) == 24 and counts == [3] * 24,
                 f"each of 24 pairs seen exactly 3 times ({len(seen)} distinct, counts "
                 f"{counts[:3]}..{counts[-3:]})")
    checks.check(whole, "every dequeued (x, y) pair belongs together")
    checks.check(isinstance(end, tf.errors.OutOfRangeError),
                 f"ends with OUT_OF_RANGE ({type(end).__name__}: {message(end)})")
    checks.check(joined, "the coordinator stops and joins every queue-runner thread")
    losses = [r[2] for r in results]
    checks.check(len(losses) == 18 and losses[-1] < losses[0] / 10,
                 f"18 steps and the loss falls below a tenth: {np.round(losses, 4).tolist()}")


def shuffle_order(dflow, tmp, checks):
    rng = np.random.RandomState(2)
    xs = rng.randn(10, 2).astype(np.float32)
    ys = (xs @ np.array([[1.0], [3.0]], np.float32) - 0.5).astype(np.float32)

    def train(target):
        g = tf.Graph()
        with g.as_default(), placed(target, tf1.train.replica_device_setter(
                ps_tasks=1, worker_device=WORKER)), tf1.name_scope("order_train"):
            x, y = tf1.train.slice_input_producer([xs, ys], num_epochs=2, shuffle=True, seed=1)
            bx, by = tf1.train.batch([x, y], batch_size=4, num_threads=1,
                                     allow_smaller_final_batch=True)
            w = tf1.get_variable("order_w", [2, 1], initializer=tf1.zeros_initializer())
            b = tf1.get_variable("order_b", [1], initializer=tf1.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(bx, w) + b - by))
            step = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = [tf1.global_variables_initializer(), tf1.local_variables_initializer()]
        return g, [bx, by, loss, step], init

    def batch_after_close(target):
        """shuffle_batch's queue filled and closed by its runner before any dequeue."""
        g = tf.Graph()
        with g.as_default(), placed(target, WORKER), tf1.name_scope("order_batch"):
            x, = tf1.train.slice_input_producer([np.arange(30, dtype=np.int32)],
                                                num_epochs=1, shuffle=False)
            bx = tf1.train.shuffle_batch([x], batch_size=4, capacity=64, min_after_dequeue=8,
                                         seed=3, allow_smaller_final_batch=True)
            queue = [op for op in g.get_operations() if op.type == "RandomShuffleQueueV2"][0]
            size = tf.raw_ops.QueueSizeV2(handle=queue.outputs[0])
            closed = tf.raw_ops.QueueIsClosedV2(handle=queue.outputs[0])
            init = [tf1.local_variables_initializer()]
        batches, end = [], None
        with tf1.Session(target, graph=g) as sess:
            for op in init:
                sess.run(op)
            coord = tf1.train.Coordinator()
            threads = tf1.train.start_queue_runners(sess, coord)
            for _ in range(200):  # bounded: at most ~10 s
                if sess.run(closed):
                    break
                time.sleep(0.05)
            full = sess.run(size)
            try:
                for _ in range(20):
                    batches.append([sess.run(bx)])
            except tf.errors.OpError as e:
                end = e
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=10)
        return full, batches, end

    g, fetches, init = train("")
    theirs, _, _, _, _ = run_with_queue_runners("", g, fetches, init)
    their_full, their_batches, _ = batch_after_close("")
    g, fetches, init = train("x")
    with Cluster(dflow, tmp) as c:
        ours, our_end, joined, _, _ = run_with_queue_runners(c.target, g, fetches, init)
        our_full, our_batches, batch_end = batch_after_close(c.target)
    checks.check(len(theirs) == 5, f"TensorFlow trains 5 steps ({len(theirs)})")
    order = np.concatenate([r[1] for r in theirs]).ravel()
    checks.check(not np.array_equal(order[:10], np.sort(order[:10])),
                 "TensorFlow's producer shuffles")
    checks.check(equal_batches([r[:2] for r in ours], [r[:2] for r in theirs]),
                 "slice_input_producer(shuffle=True) batches equal TensorFlow's, in order")
    our_losses, their_losses = [r[2] for r in ours], [r[2] for r in theirs]
    checks.check(len(our_losses) == len(their_losses) and
                 np.allclose(our_losses, their_losses, atol=1e-5),
                 f"losses equal: dflow {np.round(our_losses, 5).tolist()}, "
                 f"TensorFlow {np.round(their_losses, 5).tolist()}")
    checks.check(isinstance(our_end, tf.errors.OutOfRangeError) and joined,
                 f"dflow ends with OUT_OF_RANGE and joins ({message(our_end)})")
    checks.check(their_full == 30 and our_full == 30,
                 f"the shuffle queue holds all 30 when closed (dflow {our_full}, "
                 f"TensorFlow {their_full})")
    checks.check(len(their_batches) == 8, f"TensorFlow gives 8 batches ({len(their_batches)})")
    checks.check(equal_batches(our_batches, their_batches),
                 f"shuffle_batch batches equal TensorFlow's, in order: "
                 f"{[b[0].tolist() for b in our_batches]} vs "
                 f"{[b[0].tolist() for b in their_batches]}")
    checks.check(isinstance(batch_end, tf.errors.OutOfRangeError),
                 f"shuffle_batch ends with OUT_OF_RANGE ({message(batch_end)})")


def dynamic_pad(dflow, tmp, checks):
    def build(target):
        g = tf.Graph()
        # As under tf.compat.v1.disable_v2_behavior(): the epoch counter is a ref
        # variable (VariableV2 + CountUpTo).
        tf1.disable_resource_variables()
        with g.as_default(), placed(target, WORKER):
            (n,) = tf1.train.slice_input_producer([np.array([3, 1, 4, 0, 2], np.int32)],
                                                  num_epochs=1, shuffle=False)
            row = tf.range(n) + 1
            batch = tf1.train.batch([row, n], batch_size=2, dynamic_pad=True,
                                    allow_smaller_final_batch=True)
            init = [tf1.local_variables_initializer()]
        tf1.enable_resource_variables()
        return g, batch, init

    g, batch, init = build("")
    ops = {n.op for n in g.as_graph_def().node}
    checks.check({"CountUpTo", "PaddingFIFOQueueV2"} <= ops, "the graph counts with CountUpTo")
    theirs, _, _, _, _ = run_with_queue_runners("", g, batch, init)
    g, batch, init = build("x")
    with Cluster(dflow, tmp) as c:
        ours, end, joined, _, _ = run_with_queue_runners(c.target, g, batch, init)
    checks.check(len(theirs) == 3, f"TensorFlow gives 3 padded batches ({len(theirs)})")
    checks.check(equal_batches(ours, theirs), f"padded batches equal: {ours} vs {theirs}")
    checks.check(isinstance(end, tf.errors.OutOfRangeError), "ends with OUT_OF_RANGE")
    checks.check(joined, "the coordinator stops and joins every queue-runner thread")


def datasets(dflow, tmp, checks):
    t1, t2 = os.path.join(tmp, "t1.txt"), os.path.join(tmp, "t2.txt")
    with open(t1, "w") as f:
        f.write("alpha\r\nbeta\n\ngamma")
    with open(t2, "w") as f:
        f.write("delta\nepsilon\n")
    f1, f2 = os.path.join(tmp, "f1.bin"), os.path.join(tmp, "f2.bin")
    with open(f1, "wb") as f:
        f.write(b"HH" + bytes(range(12)) + b"F")
    with open(f2, "wb") as f:
        f.write(b"HH" + bytes(range(100, 108)) + b"F")
    short = os.path.join(tmp, "short.bin")
    with open(short, "wb") as f:
        f.write(b"HH" + bytes(range(6)) + b"F")

    def build(target, fixed_files):
        g = tf.Graph()
        with g.as_default(), placed(target, WORKER):
            text = tf.data.TextLineDataset([t1, t2]).batch(3)
            fixed = tf.data.FixedLengthRecordDataset(fixed_files, record_bytes=4, header_bytes=2,
                                                     footer_bytes=1).batch(2)
            nexts = [tf1.data.make_one_shot_iterator(d).get_next() for d in (text, fixed)]
        return g, nexts

    def drain(target, fixed_files):
        g, nexts = build(target, fixed_files)
        out = []
        with tf1.Session(target, graph=g) as sess:
            for nxt in nexts:
                got, end = [], None
                for _ in range(20):
                    try:
                        got.append([sess.run(nxt)])
                    except tf.errors.OpError as e:
                        end = e
                        break
                out.append((got, end))
        return out

    theirs = drain("", [f1, f2])
    with Cluster(dflow, tmp) as c:
        ours = drain(c.target, [f1, f2])
        (_, _), (_, short_end) = drain(c.target, [short])
    for what, (our, our_end), (their, _) in zip(["TextLineDataset", "FixedLengthRecordDataset"],
                                                ours, theirs):
        checks.check(len(their) >= 2, f"{what}: TensorFlow gives {len(their)} batches")
        checks.check(equal_batches(our, their), f"{what}: batches equal: {our} vs {their}")
        checks.check(isinstance(our_end, tf.errors.OutOfRangeError),
                     f"{what}: ends with OUT_OF_RANGE ({type(our_end).__name__})")
    checks.check(isinstance(short_end, tf.errors.InvalidArgumentError) and short in str(short_end),
                 f"truncated fixed-length file: INVALID_ARGUMENT naming it ({message(short_end)})")


def csv_train(dflow, tmp, checks):
    path = os.path.join(tmp, "train.csv")
    rng = np.random.RandomState(3)
    with open(path, "w") as f:
        f.write("x1,x2,y\n")
        for _ in range(24):
            x1, x2 = rng.uniform(-1, 1, 2)
            f.write(f"{x1:.4f},{x2:.4f},{2 * x1 - 3 * x2 + 0.5:.4f}\n")

    def build(target, scope):
        g = tf.Graph()
        with g.as_default(), tf1.name_scope(scope):
            with placed(target, "/job:ps/task:0"):
                w = tf1.get_variable(f"{scope}_w", [2], initializer=tf1.zeros_initializer())
                b = tf1.get_variable(f"{scope}_b", [], initializer=tf1.zeros_initializer())
            with placed(target, WORKER):
                q = tf1.train.string_input_producer([path], num_epochs=2, shuffle=False)
                _, line = tf1.TextLineReader(skip_header_lines=1).read(q)
                x1, x2, y = tf1.decode_csv(line, record_defaults=[[0.0], [0.0], [0.0]])
                bx1, bx2, by = tf1.train.batch([x1, x2, y], batch_size=4)
                pred = bx1 * w[0] + bx2 * w[1] + b
                loss = tf.reduce_mean(tf.square(pred - by))
                train = tf1.train.GradientDescentOptimizer(0.2).minimize(loss)
            init = [tf1.global_variables_initializer(), tf1.local_variables_initializer()]
        return g, [loss, by, train], init

    g, fetches, init = build("", "csv_local")
    theirs, their_end, _, _, _ = run_with_queue_runners("", g, fetches, init)
    g, fetches, init = build("x", "csv_dflow")
    with Cluster(dflow, tmp) as c:
        ours, our_end, joined, _, join_error = run_with_queue_runners(c.target, g, fetches, init)
    checks.check(len(theirs) == 12 and len(ours) == 12,
                 f"12 batches of 4 from 2 epochs of 24 rows (TensorFlow {len(theirs)}, dflow {len(ours)})")
    checks.check(all(np.array_equal(o[1], t[1]) for o, t in zip(ours, theirs)),
                 "every batch's labels equal TensorFlow's")
    diffs = [abs(o[0] - t[0]) / max(1e-6, abs(t[0])) for o, t in zip(ours, theirs)]
    checks.check(len(diffs) == 12 and max(diffs) <= 1e-5,
                 f"every step's loss equals TensorFlow's within 1e-5 (max rel {max(diffs or [0]):.1e}; "
                 f"{theirs[0][0] if theirs else None} -> {theirs[-1][0] if theirs else None})")
    checks.check(isinstance(our_end, tf.errors.OutOfRangeError) and joined and join_error is None,
                 f"ends OUT_OF_RANGE and the coordinator joins cleanly ({message(our_end)})")


CASES = {"text_reader": text_reader, "shuffle_train": shuffle_train,
         "shuffle_order": shuffle_order, "dynamic_pad": dynamic_pad,
         "datasets": datasets, "csv_train": csv_train}


if __name__ == "__main__":
    sys.exit(run_cases(CASES, __doc__.split("\n")[0], "dflow_tf_queue"))
