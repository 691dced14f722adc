#!/usr/bin/env python3
"""Writes tests/data/tf_data/: graph-mode tf.data pipelines as TensorFlow 2.21
builds them (tf.compat.v1), and the batches TensorFlow's own session fetches
from them, for dflow/data/tf_data_golden_test.cc.

  <name>.pbtxt  the GraphDef
  <name>.json   {"init": init op or null, "feed": the filename placeholder or
                null, "feed_files": the files fed to it, relative to tests/data,
                "fetches": [IteratorGetNext outputs], "batches": [[values
                of each fetch, flattened, with its shape]...]}; after the last
                batch TensorFlow's next fetch is OUT_OF_RANGE (or "error": its
                code and message).

Pipelines:
  map_batch_repeat   from_tensor_slices((float, int32)).map(x*2, y+1).batch(3)
                     .repeat(2), make_one_shot_iterator (OneShotIterator with a
                     dataset_factory function; MapDataset with a map function)
  range_skip_take    range(20).skip(3).take(10).batch(4, drop_remainder=True),
                     make_initializable_iterator (IteratorV2 + MakeIterator)
  parallel_map_filter  range(10).map(x * 2, num_parallel_calls=2).filter(x > 3),
                     make_one_shot_iterator (ParallelMapDatasetV2, FilterDataset)
  shuffle_prefetch   range(20).shuffle(8, seed=3).batch(5).prefetch(2),
                     make_initializable_iterator (ShuffleDataset with seed and seed2
                     inputs, PrefetchDataset)
  shuffle_repeat     range(20).shuffle(20, seed=3).repeat(2): TensorFlow reshuffles
                     each pass of one iterator (reshuffle_each_iteration)
  shuffle_fixed      graph seed 5: range(10).shuffle(4, reshuffle_each_iteration=False)
                     .repeat(3), one-shot: every pass in the same order
  shuffle_big_buffer graph seed 5: range(7).shuffle(100, seed=9).repeat(3), and
                     range(5).shuffle(UNKNOWN_CARDINALITY) zipped beside it
  shuffle_and_repeat range(10).apply(experimental.shuffle_and_repeat(4, 3, seed=2))
                     (ShuffleAndRepeatDataset), and over range(7) with a buffer of 25
                     (spanning epochs), over range(5) forever (count=None) .take(23),
                     and over an empty range forever (which ends), concatenated
  shuffle_nested     range(6).shuffle(3, seed=1).apply(shuffle_and_repeat(4, 2, seed=2))
                     .repeat(2) concatenated with range(12).shuffle(3, seed=1)
                     .shuffle(5, seed=2).repeat(2): the inner shuffle's iterators
                     draw seeds in TensorFlow's order
  shuffle_in_function  graph seed 5: range(3).interleave(range(10x, 10x + 6).shuffle(3,
                     seed=7).repeat(2)) zipped with range(2).flat_map(range(5).shuffle(5,
                     reshuffle_each_iteration=False).repeat(2)): inside dataset functions
                     TensorFlow 2 emits ShuffleDatasetV3 with a DummySeedGenerator
  file_cache         range(3).map((x * 2, ["a", "bb", "ccc"][x])).cache(placeholder filename)
                     .repeat(2), initializable: the json names the filename placeholder
                     ("cache_feed"); TensorFlow's run wrote its cache files to
                     tf_data/tf_cache/c.{index,data-00000-of-00001} (made afresh here)
  shuffle_pipeline   the issue's form: from_tensor_slices((float32 [10, 2], int32 [10]))
                     .map(x * 2, y + 1).shuffle(6, seed=11).batch(4).repeat(2).prefetch(1)
  tfrecord_batch     TFRecordDataset(placeholder filenames).skip(1).batch(2),
                     make_initializable_iterator; TFRecordDataset is wrapped in
                     a FlatMapDataset over the file names. The test feeds
                     tests/data/tfrecord/plain.tfrecord.
  tfrecord_prefetch  TFRecordDataset(placeholder filenames).prefetch(1),
                     make_initializable_iterator (the test feeds a corrupt copy)
  tfrecord_decode    TFRecordDataset(placeholder filenames).map(decode_raw float32):
                     TensorFlow fails on plain.tfrecord's second record ("a", 1 byte);
                     the json holds the batches before the error and its message
  padded_batch       range(1, 8) mapped to (int64 [x % 4], float32 [2, x % 3], string
                     [x % 2]).padded_batch(3, ([-1], [2, 4], [3]), (-1, 0.5, "pad")),
                     one-shot (PaddedBatchDatasetV2; the last batch holds 1)
  padded_batch_drop  the same with drop_remainder=True: 2 batches
  padded_batch_small range(1, 5) -> [x].padded_batch(2, [2]): TensorFlow fails on the
                     second batch (an element of 3 into 2): the json holds its error
  zip_concatenate    zip(range(3), slices of float32 [3, 2]).concatenate(zip(range(10, 14),
                     slices of float32 [4, 2] + 100)), initializable (ZipDataset,
                     ConcatenateDataset)
  interleave_tfrecord  slices of (placeholder filenames, ["", "GZIP", "ZLIB"])
                     .interleave(TFRecordDataset(f, t), cycle_length=2, block_length=3),
                     initializable; the test feeds tfrecord/{plain,gzip,zlib}.tfrecord
  parallel_interleave_tfrecord  the same with num_parallel_calls=2
                     (ParallelInterleaveDatasetV4), deterministic
  interleave_ranges  range(1, 6).interleave(range(10x, 10x + x), cycle_length=2,
                     block_length=2) then .batch(4), one-shot
  cache_repeat       range(6).map(x * x).cache().repeat(3), initializable (CacheDataset)
  options            range(5).map(x + 1).with_options(...).batch(2), initializable
                     (OptionsDataset: the options change nothing in dflow)
  cache_shuffle      range(20).shuffle(20).cache().repeat(2): unseeded, so the test
                     checks the second pass repeats the first (the cache's order)
  shard              range(10).shard(3, 1).repeat(2), initializable (ShardDataset);
                     the test also feeds the index constant out of range
  optional           range(2) initializable; get_next_as_optional() fetched as
                     has_value and value: the json's batches are (true, 0), (true, 1)
                     and then (false) — the value of none is an error
  anonymous_iterator AnonymousIteratorV2, MakeIterator(range(3)), two IteratorGetNext
                     and DeleteIterator in one run; the json's "runs" hold the two
                     values of two runs
  string_handle      tf.compat.v1.data.Iterator.from_string_handle over a fed handle:
                     train = one-shot range(5), test = initializable range(100, 103);
                     the json names the handle placeholder and both string_handle
                     tensors, and "sequence": the (iterator, value) pairs TensorFlow gave

Run with TensorFlow 2.21:  python3 tests/data/gen_tf_data_reference.py
"""
import json
import os

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tf_data")
COMPRESSED = ["tfrecord/plain.tfrecord", "tfrecord/gzip.tfrecord", "tfrecord/zlib.tfrecord"]
FEED_FILES = {"interleave_tfrecord": COMPRESSED, "parallel_interleave_tfrecord": COMPRESSED}


def value_json(v):
    if isinstance(v, bytes):  # numpy's "S" dtype would drop trailing NULs
        return {"shape": [], "dtype": "string", "values": [v.hex()]}
    v = np.asarray(v)
    if v.dtype.kind in "SO":
        values = [bytes(x).hex() for x in v.reshape(-1)]
    else:
        values = v.reshape(-1).tolist()
    return {"shape": list(v.shape), "dtype": v.dtype.name, "values": values}


def save(name, build):
    g = tf.Graph()
    with g.as_default():
        nxt, init, feed = build()
        fetches = [t.name for t in tf.nest.flatten(nxt)]
    files = FEED_FILES.get(name, ["tfrecord/plain.tfrecord"])
    feed_dict = {feed: [os.path.join(HERE, f) for f in files]} if feed is not None else None
    batches = []
    error = None
    with tf.compat.v1.Session(graph=g) as sess:
        if init is not None:
            sess.run(init, feed_dict)
        while True:
            try:
                batches.append([value_json(v) for v in sess.run(fetches)])
            except tf.errors.OutOfRangeError:
                break
            except tf.errors.OpError as e:
                # The first line after TensorFlow's "Graph execution error:".
                lines = [l.strip() for l in e.message.splitlines()[1:] if l.strip()]
                # Past the node's traceback, where TensorFlow gives one.
                for i, line in enumerate(lines):
                    if line.startswith("Node: "):
                        lines = lines[i + 1:]
                        break
                error = {"code": e.error_code, "message": lines[0]}
                break
    with open(os.path.join(OUT, name + ".pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"init": init.name if init is not None else None,
                   "feed": feed.name if feed is not None else None,
                   **({"feed_files": files} if feed is not None else {}),
                   "fetches": fetches, "batches": batches,
                   **({"error": error} if error else {})}, f, indent=1)
        f.write("\n")


def map_batch_repeat():
    ds = tf.data.Dataset.from_tensor_slices(
        (tf.range(10, dtype=tf.float32), tf.range(10))).map(
            lambda x, y: (x * 2.0, y + 1)).batch(3).repeat(2)
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def range_skip_take():
    ds = tf.data.Dataset.range(20).skip(3).take(10).batch(4, drop_remainder=True)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def parallel_map_filter():
    ds = tf.data.Dataset.range(10).map(lambda x: x * 2, num_parallel_calls=2).filter(
        lambda x: x > 3)
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def shuffle_prefetch():
    ds = tf.data.Dataset.range(20).shuffle(8, seed=3).batch(5).prefetch(2)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def shuffle_repeat():
    ds = tf.data.Dataset.range(20).shuffle(20, seed=3).repeat(2)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def shuffle_fixed():
    tf.compat.v1.set_random_seed(5)
    ds = tf.data.Dataset.range(10).shuffle(4, reshuffle_each_iteration=False).repeat(3)
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def shuffle_big_buffer():
    tf.compat.v1.set_random_seed(5)
    a = tf.data.Dataset.range(7).shuffle(100, seed=9).repeat(3)
    b = tf.data.Dataset.range(5).shuffle(tf.data.UNKNOWN_CARDINALITY, seed=4).repeat()
    ds = tf.data.Dataset.zip((a, b))
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def shuffle_and_repeat():
    fused = tf.data.experimental.shuffle_and_repeat
    ds = tf.data.Dataset.range(10).apply(fused(4, count=3, seed=2)).concatenate(
        tf.data.Dataset.range(7).apply(fused(25, count=3, seed=3))).concatenate(
            tf.data.Dataset.range(5).apply(fused(3, seed=4)).take(23)).concatenate(
                tf.data.Dataset.range(0).apply(fused(3, seed=5)))
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def shuffle_nested():
    fused = tf.data.experimental.shuffle_and_repeat
    a = tf.data.Dataset.range(6).shuffle(3, seed=1).apply(fused(4, count=2, seed=2)).repeat(2)
    b = tf.data.Dataset.range(12).shuffle(3, seed=1).shuffle(5, seed=2).repeat(2)
    it = tf.compat.v1.data.make_initializable_iterator(a.concatenate(b))
    return it.get_next(), it.initializer, None


def shuffle_in_function():
    tf.compat.v1.set_random_seed(5)
    a = tf.data.Dataset.range(3).interleave(
        lambda x: tf.data.Dataset.range(x * 10, x * 10 + 6).shuffle(3, seed=7).repeat(2),
        cycle_length=3, block_length=1)
    b = tf.data.Dataset.range(2).flat_map(lambda x: tf.data.Dataset.range(5).shuffle(
        5, reshuffle_each_iteration=False).repeat(2))
    ds = tf.data.Dataset.zip((a, b))
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def save_file_cache():
    prefix = os.path.join(OUT, "tf_cache", "c")
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    for f in os.listdir(os.path.dirname(prefix)):
        os.remove(os.path.join(os.path.dirname(prefix), f))
    g = tf.Graph()
    with g.as_default():
        filename = tf.compat.v1.placeholder(tf.string, [], name="cache_filename")
        ds = tf.data.Dataset.range(3).map(
            lambda x: (x * 2, tf.gather(["a", "bb", "ccc"], x))).cache(filename).repeat(2)
        it = tf.compat.v1.data.make_initializable_iterator(ds)
        fetches = [t.name for t in tf.nest.flatten(it.get_next())]
    batches = []
    with tf.compat.v1.Session(graph=g) as sess:
        sess.run(it.initializer, {filename: prefix})
        while True:
            try:
                batches.append([value_json(v) for v in sess.run(fetches)])
            except tf.errors.OutOfRangeError:
                break
    with open(os.path.join(OUT, "file_cache.pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    with open(os.path.join(OUT, "file_cache.json"), "w") as f:
        json.dump({"init": it.initializer.name, "feed": None, "cache_feed": filename.name,
                   "fetches": fetches, "batches": batches}, f, indent=1)
        f.write("\n")


def shuffle_pipeline():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    ds = tf.data.Dataset.from_tensor_slices((x, np.arange(10, dtype=np.int32))).map(
        lambda a, b: (a * 2.0, b + 1)).shuffle(6, seed=11).batch(4).repeat(2).prefetch(1)
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def tfrecord_batch():
    files = tf.compat.v1.placeholder(tf.string, [None], name="filenames")
    ds = tf.data.TFRecordDataset(files).skip(1).batch(2)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, files


def tfrecord_prefetch():
    files = tf.compat.v1.placeholder(tf.string, [None], name="filenames")
    it = tf.compat.v1.data.make_initializable_iterator(
        tf.data.TFRecordDataset(files).prefetch(1))
    return it.get_next(), it.initializer, files


def tfrecord_decode():
    files = tf.compat.v1.placeholder(tf.string, [None], name="filenames")
    it = tf.compat.v1.data.make_initializable_iterator(
        tf.data.TFRecordDataset(files).map(lambda r: tf.io.decode_raw(r, tf.float32)))
    return it.get_next(), it.initializer, files


def padded_batch(drop=False):
    def parts(x):
        return (tf.fill([x % 4], x), tf.fill([2, x % 3], tf.cast(x, tf.float32)),
                tf.fill([x % 2], tf.gather(tf.constant(["z", "a", "bb", "ccc"]), x % 4)))
    ds = tf.data.Dataset.range(1, 8).map(parts).padded_batch(
        3, padded_shapes=([-1], [2, 4], [3]),
        padding_values=(tf.constant(-1, tf.int64), 0.5, "pad"), drop_remainder=drop)
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def padded_batch_small():
    ds = tf.data.Dataset.range(1, 5).map(lambda x: tf.fill([x], x)).padded_batch(2, [2])
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def zip_concatenate():
    a = tf.data.Dataset.zip((tf.data.Dataset.range(3), tf.data.Dataset.from_tensor_slices(
        np.arange(6, dtype=np.float32).reshape(3, 2))))
    b = tf.data.Dataset.zip((tf.data.Dataset.range(10, 14), tf.data.Dataset.from_tensor_slices(
        np.arange(8, dtype=np.float32).reshape(4, 2) + 100)))
    it = tf.compat.v1.data.make_initializable_iterator(a.concatenate(b))
    return it.get_next(), it.initializer, None


def interleave_tfrecord(parallel=None):
    files = tf.compat.v1.placeholder(tf.string, [None], name="filenames")
    ds = tf.data.Dataset.from_tensor_slices((files, tf.constant(["", "GZIP", "ZLIB"]))).interleave(
        lambda f, t: tf.data.TFRecordDataset(f, t), cycle_length=2, block_length=3,
        num_parallel_calls=parallel)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, files


def interleave_ranges():
    ds = tf.data.Dataset.range(1, 6).interleave(
        lambda x: tf.data.Dataset.range(10 * x, 10 * x + x), cycle_length=2,
        block_length=2).batch(4)
    return tf.compat.v1.data.make_one_shot_iterator(ds).get_next(), None, None


def cache_repeat():
    ds = tf.data.Dataset.range(6).map(lambda x: x * x).cache().repeat(3)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def options():
    opts = tf.data.Options()
    opts.deterministic = True
    opts.experimental_optimization.map_parallelization = False
    ds = tf.data.Dataset.range(5).map(lambda x: x + 1).with_options(opts).batch(2)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def cache_shuffle():
    ds = tf.data.Dataset.range(20).shuffle(20).cache().repeat(2)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def shard():
    ds = tf.data.Dataset.range(10).shard(3, 1).repeat(2)
    it = tf.compat.v1.data.make_initializable_iterator(ds)
    return it.get_next(), it.initializer, None


def optional():
    it = tf.compat.v1.data.make_initializable_iterator(tf.data.Dataset.range(2))
    opt = it.get_next_as_optional()
    return (opt.has_value(), opt.get_value()), it.initializer, None


def save_anonymous_iterator():
    """One run makes an anonymous iterator over range(3), takes two elements and
    deletes it; every run gives the same two (a fresh iterator each run)."""
    g = tf.Graph()
    with g.as_default():
        ds = tf.data.Dataset.range(3)
        handle, deleter = tf.raw_ops.AnonymousIteratorV2(
            output_types=[tf.int64], output_shapes=[[]])
        init = tf.raw_ops.MakeIterator(dataset=ds._variant_tensor, iterator=handle)
        with tf.control_dependencies([init]):
            a = tf.raw_ops.IteratorGetNext(iterator=handle, output_types=[tf.int64],
                                           output_shapes=[[]])[0]
        with tf.control_dependencies([a]):
            b = tf.raw_ops.IteratorGetNext(iterator=handle, output_types=[tf.int64],
                                           output_shapes=[[]])[0]
        with tf.control_dependencies([b]):
            delete = tf.raw_ops.DeleteIterator(handle=handle, deleter=deleter, name="delete")
    with tf.compat.v1.Session(graph=g) as sess:
        runs = [[int(v) for v in sess.run([a, b, delete])[:2]] for _ in range(2)]
    with open(os.path.join(OUT, "anonymous_iterator.pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    with open(os.path.join(OUT, "anonymous_iterator.json"), "w") as f:
        json.dump({"fetches": [a.name, b.name], "target": delete.name, "runs": runs}, f,
                  indent=1)
        f.write("\n")


def save_optional():
    """Like save, but the batch after the last value is has_value = false alone."""
    g = tf.Graph()
    with g.as_default():
        (has, value), init, _ = optional()
    batches = []
    with tf.compat.v1.Session(graph=g) as sess:
        sess.run(init)
        for _ in range(2):
            batches.append([value_json(v) for v in sess.run([has, value])])
        batches.append([value_json(sess.run(has))])
    with open(os.path.join(OUT, "optional.pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    with open(os.path.join(OUT, "optional.json"), "w") as f:
        json.dump({"init": init.name, "fetches": [has.name, value.name], "batches": batches},
                  f, indent=1)
        f.write("\n")


def save_string_handle():
    g = tf.Graph()
    with g.as_default():
        train = tf.compat.v1.data.make_one_shot_iterator(tf.data.Dataset.range(5))
        test = tf.compat.v1.data.make_initializable_iterator(tf.data.Dataset.range(100, 103))
        handle = tf.compat.v1.placeholder(tf.string, [], name="handle")
        it = tf.compat.v1.data.Iterator.from_string_handle(
            handle, tf.compat.v1.data.get_output_types(train),
            tf.compat.v1.data.get_output_shapes(train))
        nxt = it.get_next()
        train_h, test_h = train.string_handle(), test.string_handle()
    sequence = []
    with tf.compat.v1.Session(graph=g) as sess:
        th, vh = sess.run([train_h, test_h])
        sess.run(test.initializer)
        for which in ["train", "train", "test", "train", "test", "test", "train"]:
            v = sess.run(nxt, {handle: th if which == "train" else vh})
            sequence.append([which, int(v)])
    with open(os.path.join(OUT, "string_handle.pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    with open(os.path.join(OUT, "string_handle.json"), "w") as f:
        json.dump({"handle": handle.name, "train_handle": train_h.name,
                   "test_handle": test_h.name, "test_init": test.initializer.name,
                   "fetch": nxt.name, "sequence": sequence}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    save("map_batch_repeat", map_batch_repeat)
    save("range_skip_take", range_skip_take)
    save("parallel_map_filter", parallel_map_filter)
    save("shuffle_prefetch", shuffle_prefetch)
    save("shuffle_repeat", shuffle_repeat)
    save("shuffle_fixed", shuffle_fixed)
    save("shuffle_big_buffer", shuffle_big_buffer)
    save("shuffle_and_repeat", shuffle_and_repeat)
    save("shuffle_nested", shuffle_nested)
    save("shuffle_in_function", shuffle_in_function)
    save("shuffle_pipeline", shuffle_pipeline)
    save("tfrecord_batch", tfrecord_batch)
    save("tfrecord_prefetch", tfrecord_prefetch)
    save("tfrecord_decode", tfrecord_decode)
    save("padded_batch", padded_batch)
    save("padded_batch_drop", lambda: padded_batch(drop=True))
    save("padded_batch_small", padded_batch_small)
    save("zip_concatenate", zip_concatenate)
    save("interleave_tfrecord", interleave_tfrecord)
    save("parallel_interleave_tfrecord", lambda: interleave_tfrecord(parallel=2))
    save("interleave_ranges", interleave_ranges)
    save("cache_repeat", cache_repeat)
    save("cache_shuffle", cache_shuffle)
    save("options", options)
    save("shard", shard)
    save_anonymous_iterator()
    save_file_cache()
    save_optional()
    save_string_handle()
