#!/usr/bin/env python3
"""Interop: graph-mode input pipelines that parse records, run by a dflow cluster.

Real `dflow server` processes on 127.0.0.1 (tests/dflow_cluster.py: 1 ps + 1 worker);
TensorFlow's client (tf.compat.v1.Session("grpc://<worker>")) builds each graph and runs
it on the cluster and on local TensorFlow. Cases, each printing one PASS/FAIL line:

  parse_example     TFRecordDataset over serialized tf.train.Examples TensorFlow wrote
                    .batch(4), and tf.io.parse_example on each batch (ParseExampleV2)
                    with dense features (float [2] with a default, int64 required,
                    string with a default), VarLen int64 and string features (sparse)
                    and a RaggedFeature: every batch's values equal local TensorFlow's,
                    then OUT_OF_RANGE; and batch(4).map(parse_example) with the dense
                    features inside the pipeline, equal too. A record that is not an Example is
                    INVALID_ARGUMENT "Could not parse example input"; a dense feature
                    of the wrong length names the key and the record index.
  map_single        TFRecordDataset.map(tf.io.parse_single_example: dense features and
                    a VarLen feature made dense with tf.sparse.to_dense, its first two
                    values padded).batch(3): batches equal, then OUT_OF_RANGE.
  csv               Dataset.from_tensor_slices(CSV lines).map(tf.io.decode_csv: float,
                    int32, int64, string columns with defaults, a quoted field,
                    na_value).batch(2): batches equal; a line with a missing field is
                    INVALID_ARGUMENT "Expect 4 fields but have 3 in record 0".

Every wait is bounded: a watchdog kills the servers after CASE_TIMEOUT_S; servers are
always stopped.
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


def placed(target, device):
    """`device` on a cluster; locally no device scope (TensorFlow's local session
    cannot place dataset ops on /job:worker)."""
    return tf1.device(device) if target else contextlib.nullcontext()


def run_steps(target, graph, fetches, limit=50):
    """Fetches `fetches` until an error: (list of results, the error or None)."""
    results = []
    with tf1.Session(target, graph=graph) as sess:
        for _ in range(limit):
            try:
                results.append(sess.run(fetches))
            except tf.errors.OpError as e:
                return results, e
    return results, None


def same(a, b):
    """Equal nested results (dicts, tuples, SparseTensorValues, arrays)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, tf1.SparseTensorValue):
        return same((a.indices, a.values, a.dense_shape), (b.indices, b.values, b.dense_shape))
    if isinstance(a, tf1.ragged.RaggedTensorValue):
        return same((a.values, a.row_splits), (b.values, b.row_splits))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)


def message(err):
    text = getattr(err, "message", str(err)) or ""
    lines = [l for l in text.splitlines() if l.strip() and "Graph execution error" not in l]
    return lines[0][:300] if lines else ""


def equal_batches(checks, what, ours, theirs, expected):
    checks.check(len(theirs) == expected, f"{what}: TensorFlow gives {expected} batches "
                 f"({len(theirs)})")
    checks.check(same(ours, theirs),
                 f"{what}: dflow's {len(ours)} batches equal TensorFlow's {len(theirs)}")


def ends_out_of_range(checks, what, err):
    checks.check(isinstance(err, tf.errors.OutOfRangeError),
                 f"{what}: ends with OUT_OF_RANGE (got {type(err).__name__}: {message(err)})")


def fails_with(checks, what, err, fragments):
    text = message(err)
    checks.check(isinstance(err, tf.errors.InvalidArgumentError) and
                 all(f in text for f in fragments),
                 f"{what}: INVALID_ARGUMENT with {fragments} (got {type(err).__name__}: {text})")


def Cluster(dflow, tmp):
    """1 ps + 1 worker; a watchdog kills them after CASE_TIMEOUT_S; always stopped."""
    return WatchedCluster(dflow, tmp, CASE_TIMEOUT_S)


def example(**features):
    f = {}
    for k, v in features.items():
        if isinstance(v[0], float):
            f[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        elif isinstance(v[0], int):
            f[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
        else:
            f[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def write_examples(path, records):
    with tf.io.TFRecordWriter(path) as w:
        for r in records:
            w.write(r)


def examples(n):
    """n Examples; some lack the optional features."""
    out = []
    for i in range(n):
        f = {"label": [i * 10 - 7], "tags": list(range(i % 4))}
        if i % 3:
            f["xy"] = [i * 0.5, -i * 0.25]
        if i % 2:
            f["name"] = [f"n{i}".encode()]
            f["words"] = [b"w%d" % k for k in range(i % 3 + 1)]
        if i % 4 != 1:
            f["scores"] = [float(k) + i for k in range(i % 3)] or [0.5]
        out.append(example(**{k: v for k, v in f.items() if v}))
    return out


FEATURES = {
    "xy": tf.io.FixedLenFeature([2], tf.float32, default_value=[-1.0, -2.0]),
    "label": tf.io.FixedLenFeature([], tf.int64),
    "name": tf.io.FixedLenFeature([], tf.string, default_value="none"),
    "tags": tf.io.VarLenFeature(tf.int64),
    "words": tf.io.VarLenFeature(tf.string),
    "scores": tf.io.RaggedFeature(tf.float32),
}


def parse_example(dflow, tmp, checks):
    path = os.path.join(tmp, "examples.tfrecord")
    write_examples(path, examples(10))
    bad = os.path.join(tmp, "bad.tfrecord")
    write_examples(bad, examples(2) + [b"\x0a\x05abc"])
    short = os.path.join(tmp, "short.tfrecord")
    write_examples(short, examples(5) + [example(label=[1], xy=[1.0])])

    def build(target, files):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            ds = tf.data.TFRecordDataset(files).batch(4)
            serialized = tf1.data.make_one_shot_iterator(ds).get_next()
            parsed = tf.io.parse_example(serialized, FEATURES)
        ops = {n.type for n in g.get_operations()}
        checks.check("ParseExampleV2" in ops, f"the graph parses with ParseExampleV2 ({target})")
        return run_steps(target, g, parsed)

    theirs, their_end = build("", [path])
    with Cluster(dflow, tmp) as c:
        ours, our_end = build(c.target, [path])
        _, bad_end = build(c.target, [bad])
        _, short_end = build(c.target, [short])
    equal_batches(checks, "parse_example", ours, theirs, 3)
    ends_out_of_range(checks, "dflow", our_end)
    ends_out_of_range(checks, "TensorFlow", their_end)

    # The same parse inside the pipeline: batch(4).map(parse_example), dense features.
    dense = {k: FEATURES[k] for k in ("xy", "label", "name")}

    def build_mapped(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            ds = tf.data.TFRecordDataset([path]).batch(4).map(
                lambda s: tf.io.parse_example(s, dense))
            nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        return run_steps(target, g, nxt)

    theirs, _ = build_mapped("")
    with Cluster(dflow, tmp) as c:
        ours, our_end = build_mapped(c.target)
    equal_batches(checks, "batch.map(parse_example)", ours, theirs, 3)
    ends_out_of_range(checks, "dflow batch.map(parse_example)", our_end)
    fails_with(checks, "a record that is not an Example", bad_end,
               ["Could not parse example input", "Index: 2"])
    fails_with(checks, "a dense feature of the wrong length", short_end,
               ["Key: xy, Index: 1.", "Number of float values != expected"])


def map_single(dflow, tmp, checks):
    path = os.path.join(tmp, "examples.tfrecord")
    write_examples(path, examples(8))
    features = {k: FEATURES[k] for k in ("xy", "label", "name", "tags")}

    def parse(record):
        f = tf.io.parse_single_example(record, features)
        tags = tf.sparse.to_dense(f["tags"], default_value=-1)
        tags = tf.concat([tags, tf.fill([2], np.int64(-9))], 0)[:2]  # the first two, padded
        return f["xy"], f["label"], f["name"], tags

    def build(target):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            ds = tf.data.TFRecordDataset([path]).map(parse).batch(3)
            nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        return run_steps(target, g, nxt)

    theirs, their_end = build("")
    with Cluster(dflow, tmp) as c:
        ours, our_end = build(c.target)
    equal_batches(checks, "map_single", ours, theirs, 3)
    ends_out_of_range(checks, "dflow", our_end)


CSV_LINES = ["1.5,2,30000000000,abc", '-0.25,,7,"q,""x"', "3e2,-5,,", "NA,9,1,last"]


def csv_defaults():
    return [[0.0], [-1], tf.constant([0], tf.int64), ["dflt"]]


def csv(dflow, tmp, checks):
    def build(target, lines):
        g = tf.Graph()
        with g.as_default(), placed(target, "/job:worker/task:0"):
            ds = tf.data.Dataset.from_tensor_slices(lines).map(
                lambda l: tf.io.decode_csv(l, csv_defaults(), na_value="NA")).batch(2)
            nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        return run_steps(target, g, nxt)

    theirs, their_end = build("", CSV_LINES)
    with Cluster(dflow, tmp) as c:
        ours, our_end = build(c.target, CSV_LINES)
        _, short_end = build(c.target, ["1,2,3"])
    equal_batches(checks, "csv", ours, theirs, 2)
    ends_out_of_range(checks, "dflow", our_end)
    fails_with(checks, "a line with a missing field", short_end,
               ["Expect 4 fields but have 3 in record 0"])


CASES = {"parse_example": parse_example, "map_single": map_single, "csv": csv}


if __name__ == "__main__":
    sys.exit(run_cases(CASES, __doc__.split("\n")[0], "dflow_tf_parse"))
