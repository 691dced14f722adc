#!/usr/bin/env python3
"""Writes tests/data/tfrecord/: TFRecord files written by TensorFlow's
tf.io.TFRecordWriter, for dflow/io/tfrecord_test.cc and tests/tf_data_test.py.

  plain.tfrecord   uncompressed: the records of RECORDS below, in order
  empty.tfrecord   no records (a zero-byte file)
  gzip.tfrecord    the same records, compression_type "GZIP"
  zlib.tfrecord    the same records, compression_type "ZLIB"
  records.json     the records, hex-encoded, in order

Run with TensorFlow 2.21:  python3 tests/data/gen_tfrecord_reference.py
"""
import json
import os

import tensorflow as tf

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfrecord")
# An empty record, short ones, bytes that are not UTF-8, and one longer than
# a few kilobytes.
RECORDS = [b"", b"a", b"hello tfrecord", bytes(range(256)), b"x" * 3000,
           b"\x00\xff\x00", b"last"]


def write(name, compression):
    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(os.path.join(HERE, name), options) as w:
        for r in RECORDS:
            w.write(r)


def main():
    os.makedirs(HERE, exist_ok=True)
    write("plain.tfrecord", "")
    with tf.io.TFRecordWriter(os.path.join(HERE, "empty.tfrecord")):
        pass
    write("gzip.tfrecord", "GZIP")
    write("zlib.tfrecord", "ZLIB")
    # Checked back through TensorFlow's own reader.
    for name, compression in [("plain", ""), ("gzip", "GZIP"), ("zlib", "ZLIB")]:
        got = [r.numpy() for r in tf.data.TFRecordDataset(
            os.path.join(HERE, name + ".tfrecord"), compression)]
        assert got == RECORDS, name
    with open(os.path.join(HERE, "records.json"), "w") as f:
        json.dump([r.hex() for r in RECORDS], f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
