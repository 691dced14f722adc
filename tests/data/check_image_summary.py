#!/usr/bin/env python3
"""Checks dflow's ImageSummary bytes with TensorFlow: each summary the
ImageSummaryTest cases wrote (gtest properties "summary_hex_<n>") must parse
with tf.compat.v1.Summary.FromString, and its PNGs must decode with
tf.io.decode_png to TensorFlow's own ImageSummary pixels, tags and sizes for
the same inputs.

Run: ops_tests --gtest_filter='ImageSummary*' --gtest_output=xml:/tmp/img.xml
     python3 tests/data/check_image_summary.py /tmp/img.xml
"""
import re
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_logging_ops

NAN = np.nan
# The inputs of each test's runs, in order: (images, max_images, bad_color).
CASES = {
    "Uint8RgbIsStoredAsIs": [
        (np.array([0, 0, 0, 10, 20, 30, 255, 128, 1, 5, 6, 7], np.uint8).reshape(1, 2, 2, 3),
         3, None)],
    "FloatImagesAreScaledPerImageAndCapped": [
        (np.array([0.5, 1, 0.25, NAN, -1, 0.5, 2, -0.3, 0, 0, 0, 0],
                  np.float32).reshape(3, 2, 2, 1), 2, None),
        (np.zeros([1, 2, 2, 1], np.float32), 1, None)],
    "DoubleRgbaWithItsBadColor": [
        (np.array([0.1, -0.2, np.inf, 1.0, 0.3, 0.4, 0.5, -0.6]).reshape(1, 1, 2, 4), 3,
         [1, 2, 3, 4])],
    "EmptyBatchGivesAnEmptySummary": [(np.zeros([0, 2, 2, 1], np.float32), 3, None)],
}


def recorded(xml):
    """test name -> the summaries it recorded, in run order."""
    out = {}
    for m in re.finditer(r'<testcase name="(\w+)"[^>]*>\s*<properties>(.*?)</properties>', xml,
                         re.S):
        runs = re.findall(r'name="summary_hex_(\d+)" value="([0-9a-f]*)"', m.group(2))
        out[m.group(1)] = [bytes.fromhex(v) for _, v in sorted((int(k), v) for k, v in runs)]
    return out


def tf_summary(images, max_images, bad_color):
    graph = tf.Graph()
    with graph.as_default():
        kw = {} if bad_color is None else {
            "bad_color": tf.make_tensor_proto(np.array(bad_color, np.uint8))}
        op = gen_logging_ops.image_summary("im", tf.constant(images), max_images=max_images, **kw)
        with tf.compat.v1.Session(graph=graph) as sess:
            return sess.run(op)


def main():
    ours = recorded(open(sys.argv[1]).read())
    for name, runs in CASES.items():
        assert len(ours.get(name, [])) == len(runs), f"{name}: {len(ours.get(name, []))} runs"
        for got, args in zip(ours[name], runs):
            a = tf.compat.v1.Summary.FromString(got)
            b = tf.compat.v1.Summary.FromString(tf_summary(*args))
            assert len(a.value) == len(b.value), name
            for va, vb in zip(a.value, b.value):
                ia, ib = va.image, vb.image
                assert (va.tag, ia.height, ia.width, ia.colorspace) == (
                    vb.tag, ib.height, ib.width, ib.colorspace), (name, va.tag)
                pa = tf.io.decode_png(ia.encoded_image_string).numpy()
                pb = tf.io.decode_png(ib.encoded_image_string).numpy()
                assert pa.shape == pb.shape and (pa == pb).all(), (name, va.tag, pa, pb)
            print(name, "equal:", [v.tag for v in a.value])


if __name__ == "__main__":
    main()
