#!/usr/bin/env python3
"""Writes tests/data/tf_data/: graph-mode tf.data pipelines as TensorFlow 2.21
builds them (tf.compat.v1), and the batches TensorFlow's own session fetches
from them, for dflow/data/tf_data_golden_test.cc.

  <name>.pbtxt  the GraphDef
  <name>.json   {"init": init op or null, "feed": the filename placeholder or
                null, "fetches": [IteratorGetNext outputs], "batches": [[values
                of each fetch, flattened, with its shape]...]}; after the last
                batch TensorFlow's next fetch is OUT_OF_RANGE.

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
                     inputs, PrefetchDataset); dflow's shuffle order is its own, so
                     the test compares the elements as a set
  shuffle_repeat     range(20).shuffle(20, seed=3).repeat(2): TensorFlow reshuffles
                     each pass of one iterator (reshuffle_each_iteration)
  tfrecord_batch     TFRecordDataset(placeholder filenames).skip(1).batch(2),
                     make_initializable_iterator; TFRecordDataset is wrapped in
                     a FlatMapDataset over the file names. The test feeds
                     tests/data/tfrecord/plain.tfrecord.
  tfrecord_prefetch  TFRecordDataset(placeholder filenames).prefetch(1),
                     make_initializable_iterator (the test feeds a corrupt copy)
  tfrecord_decode    TFRecordDataset(placeholder filenames).map(decode_raw float32):
                     TensorFlow fails on plain.tfrecord's second record ("a", 1 byte);
                     the json holds the batches before the error and its message

Run with TensorFlow 2.21:  python3 tests/data/gen_tf_data_reference.py
"""
import json
import os

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tf_data")
TFRECORD = os.path.join(HERE, "tfrecord", "plain.tfrecord")


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
    feed_dict = {feed: [TFRECORD]} if feed is not None else None
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
                error = {"code": e.error_code, "message": lines[0]}
                break
    with open(os.path.join(OUT, name + ".pbtxt"), "w") as f:
        f.write(str(g.as_graph_def()))
    with open(os.path.join(OUT, name + ".json"), "w") as f:
        json.dump({"init": init.name if init is not None else None,
                   "feed": feed.name if feed is not None else None,
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


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    save("map_batch_repeat", map_batch_repeat)
    save("range_skip_take", range_skip_take)
    save("parallel_map_filter", parallel_map_filter)
    save("shuffle_prefetch", shuffle_prefetch)
    save("shuffle_repeat", shuffle_repeat)
    save("tfrecord_batch", tfrecord_batch)
    save("tfrecord_prefetch", tfrecord_prefetch)
    save("tfrecord_decode", tfrecord_decode)
