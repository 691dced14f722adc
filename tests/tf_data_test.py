#!/usr/bin/env python3
"""Interop: graph-mode tf.data pipelines run by a dflow cluster, driven by TensorFlow.

Real `dflow server` processes on 127.0.0.1 (tests/dflow_cluster.py: 1 ps + 1 worker);
TensorFlow's client (tf.compat.v1.Session("grpc://<worker>")) builds each graph and runs
it on the cluster and on local TensorFlow, step by step. Cases, each printing one
PASS/FAIL line with its reason:

  map_batch_repeat  from_tensor_slices((float32 [10, 2], int32 [10])).map(x * 2 + 1,
                    y * 3).batch(4).repeat(2), make_one_shot_iterator, on /job:worker:
                    every batch (the last of each pass holds 2) equals local TensorFlow's,
                    then OUT_OF_RANGE, and again OUT_OF_RANGE.
  tfrecord          TFRecordDataset over two files TensorFlow wrote (tf.io.TFRecordWriter)
                    .skip(1).batch(3), make_initializable_iterator with the file names fed
                    to the initializer: batches equal, OUT_OF_RANGE at the end, and
                    re-running the initializer starts over. A file with a flipped data
                    byte is DATA_LOSS naming it; a missing one NOT_FOUND naming it.
  train             replica_device_setter: w, b on /job:ps; a one-shot iterator over
                    TFRecordDataset([a file TensorFlow wrote: 20 records of 4 raw float32])
                    .map(decode_raw -> features [3], label [1]).batch(5).repeat(3) on the
                    worker feeds GradientDescent on a linear model until OUT_OF_RANGE: every step's loss and the final w, b equal local
                    TensorFlow's within 1e-5, over the same number of steps.
  padded_batch      range(1, 8) -> (int64 [x % 4], float32 [2, x % 3]).padded_batch(3,
                    ([-1], [2, 4]), (-1, 0.5)), one-shot: batches equal; an element over
                    its padded shape is DATA_LOSS on both.
  zip_concatenate   zip(range(3), float rows).concatenate(zip(range(10, 14), rows + 100)),
                    initializable: elements equal, OUT_OF_RANGE at the end.
  interleave        four TFRecord files TensorFlow wrote (two plain, two GZIP) interleaved
                    (cycle_length=3, block_length=2, num_parallel_calls=2).batch(4) with the
                    file names fed: batches equal; a truncated GZIP file is DATA_LOSS naming it
                    in dflow (TensorFlow 2.21 ends it quietly, as if it were whole).
  cache_repeat      range(8).map(x * 3).cache().repeat(3).batch(5), initializable, run
                    twice: batches equal both times.
  file_cache        range(6).map(x * 3).cache(FILE).repeat(2): the cluster writes the cache,
                    local TensorFlow reads it (an input of other values gives the cached
                    ones), and the cluster reads a cache local TensorFlow wrote.
  shard             range(20).shard(4, 3).repeat(2): elements equal; shard(3, 3) is
                    INVALID_ARGUMENT on both.
  shuffle_train     the issue's pipeline on a seeded graph: from_tensor_slices((float32
                    [30, 3], labels)).map(x * 2, y * 2).shuffle(10, seed=4).batch(4)
                    .repeat(3).prefetch(2), one-shot, feeding GradientDescent on a linear
                    model (w, b on /job:ps) until OUT_OF_RANGE: every batch, in order, and
                    every step's loss equal local TensorFlow's.
  shuffle_orders    seeded shuffles zipped in one initializable pipeline, run twice:
                    shuffle(4, reshuffle_each_iteration=False).repeat(3), a buffer larger
                    than the data (shuffle(50).repeat(3)), shuffle(buffer == data),
                    experimental.shuffle_and_repeat(3, count=3) (ShuffleAndRepeatDataset):
                    every element, in order, equals local TensorFlow's both times.
  string_handle     from_string_handle: one get_next over a fed handle switching between
                    a one-shot train iterator and an initializable test iterator, in the
                    same sequence on both: values equal; the test iterator's end is
                    OUT_OF_RANGE while the train one still gives elements.

Every wait is bounded: a watchdog kills the servers after CASE_TIMEOUT_S (so a blocked
client call fails instead of hanging); servers are always stopped.
"""
import contextlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dflow_cluster import WatchedCluster, import_tensorflow_or_skip, run_cases  # noqa: E402

np, tf = import_tensorflow_or_skip()
tf1 = tf.compat.v1
tf1.disable_eager_execution()
CASE_TIMEOUT_S = 90


def session(target, graph):
    return tf1.Session(target, graph=graph)


def placed(target, device):
    """`device` on a cluster; locally (target "") no device scope: TensorFlow's local
    session cannot place dataset ops on /job:worker, even softly."""
    return tf1.device(device) if target else contextlib.nullcontext()


def run_steps(target, graph, fetches, init=None, feed=None, limit=100):
    """Fetches `fetches` until OUT_OF_RANGE: (list of results, the OutOfRange error or
    the other error that ended it, or None if `limit` steps passed)."""
    results = []
    with session(target, graph) as sess:
        if init is not None:
            sess.run(init, feed)
        for _ in range(limit):
            try:
                results.append(sess.run(fetches))
            except tf.errors.OpError as e:
                return results, e
    return results, None


def equal_steps(checks, what, ours, theirs):
    ok = len(ours) == len(theirs) and all(
        len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
        for a, b in zip(ours, theirs))
    checks.check(ok, f"{what}: dflow's {len(ours)} batches equal TensorFlow's {len(theirs)}")


def message(err):
    """The error's message without TensorFlow's "Graph execution error" framing."""
    text = getattr(err, "message", str(err)) or ""
    lines = [l for l in text.splitlines() if l.strip() and "Graph execution error" not in l]
    return lines[0][:300] if lines else ""


def ends_out_of_range(checks, what, err):
    checks.check(isinstance(err, tf.errors.OutOfRangeError) and "End of sequence" in str(err),
                 f"{what}: ends with OUT_OF_RANGE End of sequence (got {type(err).__name__}: "
                 f"{message(err)})")


def Cluster(dflow, tmp):
    """1 ps + 1 worker; a watchdog kills them after CASE_TIMEOUT_S; always stopped."""
    return WatchedCluster(dflow, tmp, CASE_TIMEOUT_S)


def map_batch_repeat(dflow, tmp, checks):
    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            x = np.arange(20, dtype=np.float32).reshape(10, 2)
            y = np.arange(10, dtype=np.int32)
            ds = tf.data.Dataset.from_tensor_slices((x, y)).map(
                lambda a, b: (a * 2.0 + 1.0, b * 3)).batch(4).repeat(2)
            nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        return run_steps(target, g, nxt)

    theirs, their_end = build("")
    with Cluster(dflow, tmp) as c:
        ours, our_end = build(c.target)
    checks.check(len(theirs) == 6, f"TensorFlow gives 6 batches ({len(theirs)})")
    equal_steps(checks, "map_batch_repeat", ours, theirs)
    ends_out_of_range(checks, "TensorFlow", their_end)
    ends_out_of_range(checks, "dflow", our_end)


def write_records(path, records):
    with tf.io.TFRecordWriter(path) as w:
        for r in records:
            w.write(r)


def tfrecord(dflow, tmp, checks):
    files = [os.path.join(tmp, "a.tfrecord"), os.path.join(tmp, "b.tfrecord")]
    write_records(files[0], [b"", b"one", bytes(range(256)), b"x" * 5000])
    write_records(files[1], [b"\x00\xff", b"two", b"three"])
    bad = os.path.join(tmp, "bad.tfrecord")
    data = bytearray(open(files[1], "rb").read())
    data[12] ^= 1  # the first record's data
    open(bad, "wb").write(bytes(data))
    missing = os.path.join(tmp, "missing.tfrecord")

    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            names = tf1.placeholder(tf.string, [None], name="filenames")
            ds = tf.data.TFRecordDataset(names).skip(1).batch(3)
            it = tf1.data.make_initializable_iterator(ds)
            return g, names, it, it.get_next()

    g, names, it, nxt = build("")
    theirs, their_end = run_steps("", g, [nxt], it.initializer, {names: files})
    g, names, it, nxt = build("cluster")
    with Cluster(dflow, tmp) as c:
        ours, our_end = run_steps(c.target, g, [nxt], it.initializer, {names: files})
        with session(c.target, g) as sess:
            sess.run(it.initializer, {names: files})
            first = sess.run(nxt)
            sess.run(it.initializer, {names: files})
            checks.check(np.array_equal(sess.run(nxt), first),
                         "re-running the initializer starts over")
        _, bad_end = run_steps(c.target, g, [nxt], it.initializer, {names: [bad]})
        _, missing_end = run_steps(c.target, g, [nxt], it.initializer, {names: [missing]})
    checks.check(len(theirs) == 2, f"TensorFlow gives 2 batches ({len(theirs)})")
    equal_steps(checks, "tfrecord", ours, theirs)
    ends_out_of_range(checks, "dflow", our_end)
    checks.check(isinstance(bad_end, tf.errors.DataLossError) and bad + "'" in str(bad_end)
                 and "offset 0" in str(bad_end),
                 f"corrupt file: DATA_LOSS naming it and offset 0 ({message(bad_end)})")
    checks.check(isinstance(missing_end, tf.errors.NotFoundError) and missing in str(missing_end),
                 f"missing file: NOT_FOUND naming it ({message(missing_end)})")


def train(dflow, tmp, checks):
    rng = np.random.RandomState(0)
    features = rng.randn(20, 3).astype(np.float32)
    labels = (features @ np.array([[1.5], [-2.0], [0.5]], np.float32) + 0.25).astype(np.float32)
    path = os.path.join(tmp, "train.tfrecord")
    write_records(path, [np.concatenate([f, l]).tobytes() for f, l in zip(features, labels)])

    def parse(record):
        v = tf.io.decode_raw(record, tf.float32)
        return v[:3], v[3:]

    def run(target):
        g = tf.Graph()
        with g.as_default(), placed(target, tf1.train.replica_device_setter(
                ps_tasks=1, worker_device="/job:worker/task:0")):
            ds = tf.data.TFRecordDataset([path]).map(parse).batch(5).repeat(3)
            x, y = tf1.data.make_one_shot_iterator(ds).get_next()
            w = tf1.get_variable("data_w", [3, 1], initializer=tf1.zeros_initializer())
            b = tf1.get_variable("data_b", [1], initializer=tf1.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
            step = tf1.train.GradientDescentOptimizer(0.1).minimize(loss)
            init = tf1.global_variables_initializer()
        if target:
            checks.check(w.device.startswith("/job:ps"), f"w is on the ps ({w.device})")
        losses = []
        with session(target, g) as sess:
            sess.run(init)
            end = None
            for _ in range(100):
                try:
                    losses.append(sess.run([loss, step])[0])
                except tf.errors.OpError as e:
                    end = e
                    break
            return losses, sess.run([w, b]), end

    their_losses, their_vars, their_end = run("")
    with Cluster(dflow, tmp) as c:
        our_losses, our_vars, our_end = run(c.target)
    checks.check(len(their_losses) == 12, f"TensorFlow trains 12 steps ({len(their_losses)})")
    checks.check(len(our_losses) == len(their_losses) and
                 np.allclose(our_losses, their_losses, atol=1e-5),
                 f"losses equal: dflow {np.round(our_losses, 5).tolist()}, "
                 f"TensorFlow {np.round(their_losses, 5).tolist()}")
    checks.check(all(np.allclose(a, b, atol=1e-5) for a, b in zip(our_vars, their_vars)),
                 "final w, b equal TensorFlow's")
    checks.check(their_losses[-1] < their_losses[0] / 4, "the loss falls")
    ends_out_of_range(checks, "dflow", our_end)


def run_both(dflow, tmp, build, feed=None):
    """build(target) -> (graph, fetches, init): results and end on TensorFlow and dflow."""
    g, fetches, init = build("")
    theirs = run_steps("", g, fetches, init, feed(g) if feed else None)
    g, fetches, init = build("cluster")
    with Cluster(dflow, tmp) as c:
        ours = run_steps(c.target, g, fetches, init, feed(g) if feed else None)
    return ours, theirs


def same_error(checks, what, ours, theirs, cls, text=""):
    checks.check(isinstance(theirs, cls), f"{what}: TensorFlow fails with {cls.__name__} "
                 f"({type(theirs).__name__}: {message(theirs)})")
    checks.check(isinstance(ours, cls) and text in str(ours),
                 f"{what}: dflow fails with {cls.__name__} naming {text!r} "
                 f"({type(ours).__name__}: {message(ours)})")


def padded_batch(dflow, tmp, checks):
    def build(target, small=False):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            if small:
                ds = tf.data.Dataset.range(1, 5).map(lambda x: tf.fill([x], x)).padded_batch(
                    2, [2])
            else:
                ds = tf.data.Dataset.range(1, 8).map(lambda x: (
                    tf.fill([x % 4], x), tf.fill([2, x % 3], tf.cast(x, tf.float32)))).padded_batch(
                        3, padded_shapes=([-1], [2, 4]),
                        padding_values=(tf.constant(-1, tf.int64), 0.5))
            nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        return g, nxt, None

    (ours, our_end), (theirs, their_end) = run_both(dflow, tmp, build)
    checks.check(len(theirs) == 3, f"TensorFlow gives 3 batches ({len(theirs)})")
    equal_steps(checks, "padded_batch", ours, theirs)
    ends_out_of_range(checks, "dflow", our_end)
    (ours, our_end), (theirs, their_end) = run_both(
        dflow, tmp, lambda t: build(t, small=True))
    equal_steps(checks, "padded_batch into a small shape, before the error", ours, theirs)
    same_error(checks, "an element over its padded shape", our_end, their_end,
               tf.errors.DataLossError, "Attempted to pad to a smaller size")


def zip_concatenate(dflow, tmp, checks):
    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            rows = np.arange(8, dtype=np.float32).reshape(4, 2)
            a = tf.data.Dataset.zip((tf.data.Dataset.range(3),
                                     tf.data.Dataset.from_tensor_slices(rows[:3])))
            b = tf.data.Dataset.zip((tf.data.Dataset.range(10, 14),
                                     tf.data.Dataset.from_tensor_slices(rows + 100)))
            it = tf1.data.make_initializable_iterator(a.concatenate(b))
        return g, it.get_next(), it.initializer

    (ours, our_end), (theirs, their_end) = run_both(dflow, tmp, build)
    checks.check(len(theirs) == 7, f"TensorFlow gives 7 elements ({len(theirs)})")
    equal_steps(checks, "zip_concatenate", ours, theirs)
    ends_out_of_range(checks, "dflow", our_end)


def interleave(dflow, tmp, checks):
    files, types = [], []
    for i, compression in enumerate(["", "GZIP", "", "GZIP"]):
        path = os.path.join(tmp, f"part{i}.tfrecord" + (".gz" if compression else ""))
        with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression)) as w:
            for r in range(3 + 2 * i):
                w.write(f"file{i}-record{r}".encode() * (1 + r))
        files.append(path)
        types.append(compression)
    cut = os.path.join(tmp, "cut.tfrecord.gz")
    data = open(files[1], "rb").read()
    open(cut, "wb").write(data[:len(data) // 2])

    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            names = tf1.placeholder(tf.string, [None], name="filenames")
            ds = tf.data.Dataset.from_tensor_slices((names, tf.constant(types))).interleave(
                lambda f, t: tf.data.TFRecordDataset(f, t), cycle_length=3, block_length=2,
                num_parallel_calls=2).batch(4)
            it = tf1.data.make_initializable_iterator(ds)
        return g, it.get_next(), it.initializer

    feed = lambda g: {g.get_tensor_by_name("filenames:0"): files}
    (ours, our_end), (theirs, their_end) = run_both(dflow, tmp, build, feed)
    checks.check(len(theirs) == 6, f"TensorFlow gives 6 batches of 24 records ({len(theirs)})")
    equal_steps(checks, "interleave", ours, theirs)
    ends_out_of_range(checks, "dflow", our_end)
    bad = lambda g: {g.get_tensor_by_name("filenames:0"): [files[0], cut, files[2], files[3]]}
    (_, our_end), (_, their_end) = run_both(dflow, tmp, build, bad)
    # TensorFlow 2.21 ends such a file quietly, as if it were whole; dflow reports the
    # lost data instead (a deliberate difference).
    checks.check(isinstance(their_end, tf.errors.OutOfRangeError),
                 f"a truncated GZIP file: TensorFlow ends quietly ({type(their_end).__name__})")
    checks.check(isinstance(our_end, tf.errors.DataLossError) and cut in str(our_end),
                 f"a truncated GZIP file: dflow fails with DataLossError naming it "
                 f"({type(our_end).__name__}: {message(our_end)})")


def cache_repeat(dflow, tmp, checks):
    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            ds = tf.data.Dataset.range(8).map(lambda x: x * 3).cache().repeat(3).batch(5)
            it = tf1.data.make_initializable_iterator(ds)
        return g, it.get_next(), it.initializer

    g, nxt, init = build("")
    theirs, _ = run_steps("", g, nxt, init)
    g, nxt, init = build("cluster")
    with Cluster(dflow, tmp) as c:
        first, our_end = run_steps(c.target, g, nxt, init)
        second, _ = run_steps(c.target, g, nxt, init)
    checks.check(len(theirs) == 5, f"TensorFlow gives 5 batches ({len(theirs)})")
    equal_steps(checks, "cache_repeat", [[b] for b in first], [[b] for b in theirs])
    equal_steps(checks, "cache_repeat re-initialized", [[b] for b in second],
                [[b] for b in theirs])
    ends_out_of_range(checks, "dflow", our_end)


def file_cache(dflow, tmp, checks):
    def build(target, path, offset):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            ds = tf.data.Dataset.range(6).map(lambda x: x * 3 + offset).cache(path).repeat(2)
            it = tf1.data.make_initializable_iterator(ds)
        return g, it.get_next(), it.initializer

    ours_path, theirs_path = os.path.join(tmp, "ours", "c"), os.path.join(tmp, "theirs", "c")
    for path in (ours_path, theirs_path):
        os.makedirs(os.path.dirname(path))  # TensorFlow writes into an existing directory
    g, nxt, init = build("", theirs_path, 100)
    written_by_tf, _ = run_steps("", g, nxt, init)
    g, nxt, init = build("cluster", ours_path, 0)
    g2, nxt2, init2 = build("cluster", theirs_path, 0)
    with Cluster(dflow, tmp) as c:
        written_by_dflow, our_end = run_steps(c.target, g, nxt, init)
        read_by_dflow, _ = run_steps(c.target, g2, nxt2, init2)
    g, nxt, init = build("", ours_path, 100)
    read_by_tf, _ = run_steps("", g, nxt, init)
    want = [x * 3 for x in range(6)] * 2
    checks.check([int(v) for v in written_by_dflow] == want,
                 f"dflow passes the input through and repeats it from its cache "
                 f"({[int(v) for v in written_by_dflow]})")
    checks.check(os.path.exists(ours_path + ".index") and
                 not os.path.exists(ours_path + "_0.lockfile"),
                 f"dflow leaves {ours_path}.index and no lockfile")
    checks.check([int(v) for v in read_by_tf] == want,
                 f"TensorFlow reads dflow's cache ({[int(v) for v in read_by_tf]})")
    checks.check([int(v) for v in read_by_dflow] == [x + 100 for x in want],
                 f"dflow reads TensorFlow's cache ({[int(v) for v in read_by_dflow]}; "
                 f"TensorFlow wrote {[int(v) for v in written_by_tf]})")
    ends_out_of_range(checks, "dflow", our_end)


def shard(dflow, tmp, checks):
    def build(target, index=3):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            ds = tf.data.Dataset.range(20).shard(4 if index == 3 else 3, index).repeat(2)
            it = tf1.data.make_initializable_iterator(ds)
        return g, it.get_next(), it.initializer

    (ours, our_end), (theirs, their_end) = run_both(dflow, tmp, build)
    checks.check(len(theirs) == 10, f"TensorFlow gives 10 elements ({len(theirs)})")
    equal_steps(checks, "shard", [[v] for v in ours], [[v] for v in theirs])
    ends_out_of_range(checks, "dflow", our_end)

    def init_error(target):
        g, _, init = build(target, index=4)
        try:
            with session(target, g) as sess:
                sess.run(init)
        except tf.errors.OpError as e:
            return e
        return None

    theirs = init_error("")
    with Cluster(dflow, tmp) as c:
        ours = init_error(c.target)
    same_error(checks, "shard index 4 of 3", ours, theirs, tf.errors.InvalidArgumentError,
               "Index must be between 0 and 2")


def shuffle_train(dflow, tmp, checks):
    rng = np.random.RandomState(1)
    features = rng.randn(30, 3).astype(np.float32)
    labels = (features @ np.array([[1.0], [-0.5], [2.0]], np.float32) + 0.1).astype(np.float32)

    def run(target):
        g = tf.Graph()
        with g.as_default(), placed(target, tf1.train.replica_device_setter(
                ps_tasks=1, worker_device="/job:worker/task:0")):
            tf1.set_random_seed(11)
            ds = tf.data.Dataset.from_tensor_slices((features, labels)).map(
                lambda x, y: (x * 2.0, y * 2.0)).shuffle(10, seed=4).batch(4).repeat(
                    3).prefetch(2)
            x, y = tf1.data.make_one_shot_iterator(ds).get_next()
            w = tf1.get_variable("shuffle_w", [3, 1], initializer=tf1.zeros_initializer())
            b = tf1.get_variable("shuffle_b", [1], initializer=tf1.zeros_initializer())
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
            step = tf1.train.GradientDescentOptimizer(0.02).minimize(loss)
            init = tf1.global_variables_initializer()
        batches, losses, end = [], [], None
        with session(target, g) as sess:
            sess.run(init)
            for _ in range(100):
                try:
                    bx, by, l, _ = sess.run([x, y, loss, step])
                except tf.errors.OpError as e:
                    end = e
                    break
                batches.append([bx, by])
                losses.append(l)
        return batches, losses, end

    their_batches, their_losses, _ = run("")
    with Cluster(dflow, tmp) as c:
        our_batches, our_losses, our_end = run(c.target)
    checks.check(len(their_batches) == 24, f"TensorFlow gives 24 batches ({len(their_batches)})")
    first = np.concatenate([b[1] for b in their_batches[:8]]).ravel()
    checks.check(not np.array_equal(first, np.sort(first)), "TensorFlow's batches are shuffled")
    equal_steps(checks, "shuffle_train, in order", our_batches, their_batches)
    checks.check(len(our_losses) == len(their_losses) and
                 np.allclose(our_losses, their_losses, atol=1e-5),
                 f"losses equal: dflow {np.round(our_losses, 4).tolist()}, "
                 f"TensorFlow {np.round(their_losses, 4).tolist()}")
    checks.check(their_losses[-1] < their_losses[0] / 4, "the loss falls")
    ends_out_of_range(checks, "dflow", our_end)


def shuffle_orders(dflow, tmp, checks):
    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            tf1.set_random_seed(21)
            fixed = tf.data.Dataset.range(10).shuffle(
                4, seed=1, reshuffle_each_iteration=False).repeat(3)
            big = tf.data.Dataset.range(10, 20).shuffle(50, seed=2).repeat(3)
            equal = tf.data.Dataset.range(20, 30).shuffle(10).repeat(3)
            fused = tf.data.Dataset.range(30, 40).apply(
                tf.data.experimental.shuffle_and_repeat(3, count=3, seed=3))
            it = tf1.data.make_initializable_iterator(
                tf.data.Dataset.zip((fixed, big, equal, fused)))
        return g, it.get_next(), it.initializer

    g, nxt, init = build("")
    theirs = [run_steps("", g, nxt, init)[0] for _ in range(2)]
    g, nxt, init = build("cluster")
    with Cluster(dflow, tmp) as c:
        ours, our_end = run_steps(c.target, g, nxt, init)
        again, _ = run_steps(c.target, g, nxt, init)
    checks.check(len(theirs[0]) == 30, f"TensorFlow gives 30 elements ({len(theirs[0])})")
    checks.check(theirs[0] == theirs[1], "TensorFlow repeats its order when re-initialized")
    passes = [[e[1] for e in theirs[0][i * 10:(i + 1) * 10]] for i in range(3)]
    checks.check(passes[0] != passes[1], "TensorFlow reshuffles each pass of shuffle(50)")
    equal_steps(checks, "shuffle_orders", ours, theirs[0])
    equal_steps(checks, "shuffle_orders re-initialized", again, theirs[1])
    ends_out_of_range(checks, "dflow", our_end)


def string_handle(dflow, tmp, checks):
    sequence = ["train", "train", "test", "train", "test", "test", "train", "test", "train"]

    def run(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            train = tf1.data.make_one_shot_iterator(tf.data.Dataset.range(5).repeat())
            test = tf1.data.make_initializable_iterator(tf.data.Dataset.range(100, 103))
            handle = tf1.placeholder(tf.string, [])
            it = tf1.data.Iterator.from_string_handle(
                handle, tf1.data.get_output_types(train), tf1.data.get_output_shapes(train))
            nxt = it.get_next()
        got = []
        with session(target, g) as sess:
            handles = dict(zip(["train", "test"],
                               sess.run([train.string_handle(), test.string_handle()])))
            sess.run(test.initializer)
            for which in sequence:
                try:
                    got.append((which, int(sess.run(nxt, {handle: handles[which]}))))
                except tf.errors.OutOfRangeError:
                    got.append((which, "end"))
        return got

    theirs = run("")
    with Cluster(dflow, tmp) as c:
        ours = run(c.target)
    checks.check(theirs[-2] == ("test", "end"), f"TensorFlow's test iterator ends ({theirs})")
    checks.check(ours == theirs, f"dflow's sequence {ours} equals TensorFlow's {theirs}")


CASES = {"map_batch_repeat": map_batch_repeat, "tfrecord": tfrecord, "train": train,
         "padded_batch": padded_batch, "zip_concatenate": zip_concatenate,
         "interleave": interleave, "cache_repeat": cache_repeat, "file_cache": file_cache,
         "shard": shard, "shuffle_train": shuffle_train, "shuffle_orders": shuffle_orders,
         "string_handle": string_handle}


if __name__ == "__main__":
    sys.exit(run_cases(CASES, __doc__.split("\n")[0], "dflow_tf_data"))
