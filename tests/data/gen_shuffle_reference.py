#!/usr/bin/env python3
"""Writes tests/data/shuffle_golden.json: the orders TensorFlow's RandomShuffle
op and RandomShuffleQueueV2 give for fixed seeds, for dflow/ops/reader_ops_test.cc
and dflow/ops/data_flow_ops_test.cc.

  random_shuffle  each case: the op's seed and seed2 attrs and a list of runs of
                  that one op (its stream goes on from run to run); each run: the
                  input's shape (its values are 0, 1, ... in order) and
                  TensorFlow's output, flattened.
  queue           each case: a RandomShuffleQueueV2 (int32 scalars) with seed,
                  seed2 and min_after_dequeue, and steps run one at a time in one
                  session: ["enqueue_many", [values]], ["dequeue"],
                  ["dequeue_many", n], ["dequeue_up_to", n], ["close"], and
                  ["dequeue_many_close", n]: a DequeueMany that takes what
                  min_after_dequeue allows and waits, then a close that fails it
                  (what it took goes back); a dequeue step's "out" is what TensorFlow
                  returned, or "OutOfRange".
                  What the queue holds at each dequeue is fixed by the steps, so
                  TensorFlow's order is deterministic.

Run with TensorFlow 2.21:  python3 tests/data/gen_shuffle_reference.py
"""
import json
import os
import threading
import time

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
HERE = os.path.dirname(os.path.abspath(__file__))


def random_shuffle(seed, seed2, shapes):
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.int32)
        y = tf.raw_ops.RandomShuffle(value=x, seed=seed, seed2=seed2)
    runs = []
    with tf1.Session(graph=g) as sess:
        for shape in shapes:
            value = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
            out = sess.run(y, {x: value})
            runs.append({"shape": list(shape), "out": out.reshape(-1).tolist()})
    return {"seed": seed, "seed2": seed2, "runs": runs}


def queue(seed, seed2, min_after_dequeue, steps):
    g = tf.Graph()
    with g.as_default():
        q = tf1.RandomShuffleQueue(1000, min_after_dequeue, [tf.int32], [[]],
                                   seed=seed)
        # RandomShuffleQueue derives seed2 from the graph; set the attrs.
        q.queue_ref.op._set_attr("seed", tf1.AttrValue(i=seed))
        q.queue_ref.op._set_attr("seed2", tf1.AttrValue(i=seed2))
        values = tf1.placeholder(tf.int32, [None])
        n = tf1.placeholder(tf.int32, [])
        ops = {"enqueue_many": q.enqueue_many([values]), "dequeue": q.dequeue(),
               "dequeue_many": q.dequeue_many(n), "dequeue_up_to": q.dequeue_up_to(n),
               "close": q.close()}
    out = []
    with tf1.Session(graph=g) as sess:
        for step in steps:
            kind = step[0]
            if kind == "enqueue_many":
                sess.run(ops[kind], {values: step[1]})
                out.append(step)
            elif kind == "close":
                sess.run(ops[kind])
                out.append(step)
            elif kind == "dequeue_many_close":
                result = []

                def dequeue():
                    try:
                        result.append(sess.run(ops["dequeue_many"], {n: step[1]}))
                    except tf.errors.OutOfRangeError:
                        result.append("OutOfRange")

                t = threading.Thread(target=dequeue)
                t.start()
                time.sleep(1)  # the dequeue takes what it may and waits
                sess.run(ops["close"])
                t.join()
                out.append(step + [result[0] if isinstance(result[0], str)
                                   else result[0].reshape(-1).tolist()])
            else:
                feed = {n: step[1]} if len(step) > 1 else None
                try:
                    got = np.asarray(sess.run(ops[kind], feed)).reshape(-1).tolist()
                except tf.errors.OutOfRangeError:
                    got = "OutOfRange"
                out.append(step + [got])
    return {"seed": seed, "seed2": seed2, "min_after_dequeue": min_after_dequeue,
            "steps": out}


def main():
    golden = {
        "random_shuffle": [
            random_shuffle(3, 8, [[10], [1], [7], [30], [1, 3], [5], [2], [6, 2]]),
            random_shuffle(87654321, 12, [[4, 2, 3], [100], [9]]),
            random_shuffle(-5, 1 << 40, [[17], [17]]),
        ],
        "queue": [
            queue(7, 3, 0, [["enqueue_many", list(range(20))], ["close"]] +
                  [["dequeue"]] * 20 + [["dequeue"]]),
            queue(1, 2, 5, [["enqueue_many", list(range(12))], ["dequeue"], ["dequeue"],
                            ["dequeue_many", 4], ["enqueue_many", list(range(100, 106))],
                            ["dequeue_many", 3], ["dequeue"], ["close"],
                            ["dequeue_many", 4], ["dequeue_up_to", 100],
                            ["dequeue_up_to", 2]]),
            queue(42, 0, 0, [["enqueue_many", list(range(5))], ["dequeue_up_to", 3],
                             ["enqueue_many", list(range(50, 60))], ["dequeue_many", 6],
                             ["close"], ["dequeue_many", 7], ["dequeue_up_to", 7]]),
            queue(9, 4, 2, [["enqueue_many", list(range(5))], ["dequeue_many_close", 6],
                            ["dequeue_up_to", 10]]),
        ],
    }
    with open(os.path.join(HERE, "shuffle_golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
