#!/usr/bin/env python3
"""Records TensorFlow graphs that branch and call functions, and what they compute.

Writes, under control_flow/ beside this script, one GraphDef per case (text format)
and control_flow/cases.json: for each case its graph file, the ops to run first
(initializers) and a sequence of Session.run calls (feeds, fetches, targets) with the
values TensorFlow returned. dflow's function_golden_test replays the same runs in one
session and compares.

Cases:
  cond_v1            tf.cond with TensorFlow 1.x control flow (Switch / Merge), a
                     reference variable incremented only in the true branch;
  cond_v2            the same with TensorFlow 2 control flow (StatelessIf / If and a
                     function library), the counter a resource variable;
  cond_v2_resource   If over a resource variable: one branch reads, the other adds;
                     a cond nested in a branch;
  function_call      tf.function called in a graph: (Stateful)PartitionedCall with a
                     cond inside;
  global_step_read_{ref,resource}
                     the read of the global step that MonitoredTrainingSession's
                     StopAtStepHook builds (tf.cond on is_variable_initialized);
  while_v1           tf.while_loop with TensorFlow 1.x frames: a counted sum over a
                     fed bound (0, 1, 7 and 10,000 iterations), a loop invariant;
  while_v1_parallel  32 parallel iterations, each with its own matmul;
  while_v1_nested    a loop in a loop (the inner frame once per outer iteration);
  while_v1_in_cond   a loop on both branches of tf.cond: the untaken one is dead;
  while_v1_ref       a reference variable incremented inside the loop body;
  while_v2, while_v2_nested
                     the counted sum and the nested loop with TensorFlow 2 control
                     flow (While / StatelessWhile and a function library);
  while_v2_resource  a resource variable incremented inside a While body;
  while_v1_grad      tf.gradients through a TensorFlow 1.x loop (the forward values
                     kept on stacks: StackV2 / StackPushV2 / StackPopV2);
  tensor_array_v1    an RNN-style loop over TensorArrays (unstack, read, write, stack)
                     and its gradient (TensorArrayGradV3, aggregated writes);
  while_v1_devices   a loop whose body runs partly on a second CPU device (0, 1, 7 and
                     1,000 iterations, 10 in parallel);
  while_v1_nested_devices
                     a loop in a loop, each spanning both devices;
  while_v1_grad_devices
                     tf.gradients through a loop whose body spans both devices.
The *_devices cases run in a session with two CPU devices ("cpus": 2).

Run: python3 tests/data/gen_control_flow_reference.py   (needs tensorflow)
"""
import json
import os

import numpy as np
import tensorflow as tf
from google.protobuf import text_format
from tensorflow.python.ops import control_flow_v2_toggles
from tensorflow.python.training import training_util

tf1 = tf.compat.v1
tf1.disable_eager_execution()
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "control_flow")
X = np.array([1.0, 2.0, 3.0], np.float32)


def value(v):
    a = np.asarray(v)
    dtype = {np.dtype(np.float32): "float", np.dtype(np.int64): "int64",
             np.dtype(np.int32): "int32", np.dtype(np.bool_): "bool"}[a.dtype]
    return {"dtype": dtype, "shape": list(a.shape), "values": a.ravel().tolist()}


def record(name, g, init, runs, cpus=1):
    """Runs `runs` ([(feeds, fetches, targets)]) in a fresh session of `g`."""
    with open(os.path.join(HERE, name + ".pbtxt"), "w") as f:
        f.write(text_format.MessageToString(g.as_graph_def()))
    out = []
    config = tf1.ConfigProto(device_count={"CPU": cpus})
    with tf1.Session(graph=g, config=config) as s:
        for op in init:
            s.run(op)
        for feeds, fetches, targets in runs:
            got = s.run(fetches + targets, feed_dict=feeds)[:len(fetches)]
            out.append({"feeds": {k: value(v) for k, v in feeds.items()},
                        "fetches": fetches, "targets": targets,
                        "expected": [value(v) for v in got]})
    case = {"name": name, "graph": name + ".pbtxt", "init": init, "runs": out}
    if cpus > 1:
        case["cpus"] = cpus
    return case


def cond_graph(v2):
    (control_flow_v2_toggles.enable_control_flow_v2 if v2
     else control_flow_v2_toggles.disable_control_flow_v2)()
    tf1.disable_resource_variables()
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [3], name="x")
        pred = tf1.placeholder(tf.bool, [], name="pred")
        # TensorFlow 2 branches cannot assign a reference variable they capture.
        counter = tf1.get_variable("counter", [], initializer=tf1.zeros_initializer(),
                                   use_resource=v2)
        y = tf.cond(pred, lambda: x * 2.0, lambda: x + 10.0, name="y")
        tf.identity(y, name="y_out")
        count = tf.cond(pred, lambda: tf1.assign_add(counter, 1.0),
                        lambda: tf.identity(counter.read_value()), name="count")
        tf.identity(count, name="count_out")
        tf1.global_variables_initializer()
    runs = []
    for p in (True, False, True):
        runs.append(({"x:0": X, "pred:0": p}, ["y_out:0"], ["count_out"]))
    runs.append(({}, ["counter:0" if not v2 else "counter/Read/ReadVariableOp:0"], []))
    return g, runs


def cond_v2_resource():
    control_flow_v2_toggles.enable_control_flow_v2()
    tf1.enable_resource_variables()
    g = tf.Graph()
    with g.as_default():
        pred = tf1.placeholder(tf.bool, [], name="pred")
        inner = tf1.placeholder(tf.bool, [], name="inner")
        v = tf1.get_variable("v", [2], initializer=tf1.ones_initializer())

        def add():
            with tf.control_dependencies([v.assign_add([1.0, 2.0])]):
                return tf.cond(inner, lambda: v.read_value() * 3.0,
                               lambda: v.read_value() - 1.0)

        out = tf.cond(pred, add, lambda: v.read_value(), name="branch")
        tf.identity(out, name="out")
        tf1.global_variables_initializer()
    runs = []
    for p, q in ((False, False), (True, True), (True, False), (False, True)):
        runs.append(({"pred:0": p, "inner:0": q}, ["out:0"], []))
    return g, runs


def function_call():
    control_flow_v2_toggles.enable_control_flow_v2()
    tf1.enable_resource_variables()
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [3], name="x")
        v = tf1.get_variable("w", [3], initializer=tf1.ones_initializer())

        @tf.function
        def scale(a, b):
            return tf.cond(tf.reduce_sum(a) > 7.0, lambda: a * b, lambda: a + b)

        @tf.function
        def bump():
            v.assign_add([0.5, 0.5, 0.5])
            return v.read_value()

        tf.identity(scale(x, 2.0), name="scaled")
        tf.identity(bump(), name="bumped")
        tf1.global_variables_initializer()
    big = X * 3.0
    runs = [({"x:0": X}, ["scaled:0"], []), ({"x:0": big}, ["scaled:0"], []),
            ({}, ["bumped:0"], []), ({}, ["bumped:0"], [])]
    return g, runs


def global_step_read(resource):
    control_flow_v2_toggles.enable_control_flow_v2()
    (tf1.enable_resource_variables if resource else tf1.disable_resource_variables)()
    g = tf.Graph()
    with g.as_default():
        gs = tf1.train.get_or_create_global_step()
        read = training_util._get_or_create_global_step_read()
        tf.identity(read, name="step_read")
        tf.group(tf1.assign_add(gs, 5), name="bump")
        tf1.global_variables_initializer()
    runs = [({}, ["step_read:0"], []), ({}, [], ["bump"]), ({}, ["step_read:0"], [])]
    return g, runs


def v1_loops():
    control_flow_v2_toggles.disable_control_flow_v2()
    tf1.disable_resource_variables()


def v2_loops():
    control_flow_v2_toggles.enable_control_flow_v2()
    tf1.enable_resource_variables()


def while_v1(v2=False):
    (v2_loops if v2 else v1_loops)()
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [], name="n")
        x = tf.constant(X, name="x")
        _, total = tf.while_loop(lambda i, s: i < n,
                                 lambda i, s: (i + 1, s + x * tf.cast(i, tf.float32)),
                                 [tf.constant(0), tf.zeros([3])], name="sum")
        tf.identity(total, name="total")
        tf.no_op(name="init")
    return g, [({"n:0": np.int32(k)}, ["total:0"], []) for k in (0, 1, 7, 10000)]


def while_v1_parallel():
    v1_loops()
    g = tf.Graph()
    with g.as_default():
        m = tf.constant(np.arange(16, dtype=np.float32).reshape(4, 4) / 16.0, name="m")

        def body(i, acc):
            f = tf.cast(i, tf.float32)
            return i + 1, acc + tf.reduce_sum(tf.matmul(m * f, m + f))

        _, acc = tf.while_loop(lambda i, acc: i < 64, body, [0, 0.0],
                               parallel_iterations=32, name="par")
        tf.identity(acc, name="acc")
        tf.no_op(name="init")
    return g, [({}, ["acc:0"], []), ({}, ["acc:0"], [])]


def while_v1_nested(v2=False):
    (v2_loops if v2 else v1_loops)()
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [], name="n")

        def outer(i, total):
            _, inner = tf.while_loop(lambda j, s: j < i,
                                     lambda j, s: (j + 1, s + i * j), [0, 0], name="inner")
            return i + 1, total + inner

        _, total = tf.while_loop(lambda i, t: i < n, outer, [0, 0], name="outer")
        tf.identity(total, name="total")
        tf.no_op(name="init")
    return g, [({"n:0": np.int32(k)}, ["total:0"], []) for k in (0, 1, 6)]


def while_v1_in_cond():
    v1_loops()
    g = tf.Graph()
    with g.as_default():
        pred = tf1.placeholder(tf.bool, [], name="pred")

        def loop(step):
            return lambda: tf.while_loop(lambda i: i < 20, lambda i: i + step, [0])

        out = tf.cond(pred, loop(3), loop(7), name="branch")
        tf.identity(out, name="out")
        tf.no_op(name="init")
    return g, [({"pred:0": p}, ["out:0"], []) for p in (True, False, True)]


def while_v1_ref():
    v1_loops()
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [], name="n")
        v = tf1.get_variable("v", [], initializer=tf1.zeros_initializer())

        def body(i):
            with tf.control_dependencies([tf1.assign_add(v, 2.0)]):
                return i + 1

        tf.identity(tf.while_loop(lambda i: i < n, body, [0], name="bump"), name="count")
        tf1.global_variables_initializer()
    return g, [({"n:0": np.int32(5)}, ["count:0"], []), ({}, ["v:0"], []),
               ({"n:0": np.int32(3)}, ["count:0"], []), ({}, ["v:0"], [])]


def while_v2_resource():
    v2_loops()
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, [], name="n")
        v = tf1.get_variable("v", [2], initializer=tf1.ones_initializer())

        def body(i):
            with tf.control_dependencies([v.assign_add([1.0, 0.5])]):
                return i + 1

        tf.identity(tf.while_loop(lambda i: i < n, body, [0], name="bump"), name="count")
        tf.identity(v.read_value(), name="value")
        tf1.global_variables_initializer()
    return g, [({"n:0": np.int32(4)}, ["count:0"], []), ({}, ["value:0"], []),
               ({"n:0": np.int32(0)}, ["count:0"], []), ({}, ["value:0"], [])]


W = (np.arange(9, dtype=np.float32).reshape(3, 3) - 4.0) / 8.0
X23 = np.array([[0.5, -1.0, 0.25], [1.5, 0.0, -0.75]], np.float32)


def while_v1_grad():
    v1_loops()
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        w = tf.constant(W, name="w")
        _, h = tf.while_loop(lambda i, h: i < 4, lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w))),
                             [0, x], name="loop")
        loss = tf.reduce_sum(h * h, name="loss")
        gw, gx = tf.gradients(loss, [w, x])
        tf.identity(gw, name="gw")
        tf.identity(gx, name="gx")
        tf.no_op(name="init")
    return g, [({"x:0": X23}, ["loss:0", "gw:0", "gx:0"], []),
               ({"x:0": -X23}, ["loss:0", "gw:0", "gx:0"], [])]


def tensor_array_v1():
    v1_loops()
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [5, 2, 3], name="x")
        w = tf.constant(W, name="w")
        inputs = tf.TensorArray(tf.float32, size=5).unstack(x)
        outputs = tf.TensorArray(tf.float32, size=5)

        def body(t, h, out):
            h = tf.tanh(tf.matmul(inputs.read(t), w) + h)
            return t + 1, h, out.write(t, h)

        _, _, outputs = tf.while_loop(lambda t, h, out: t < 5, body,
                                      [0, tf.zeros([2, 3]), outputs], name="rnn")
        y = tf.identity(outputs.stack(), name="y")
        loss = tf.reduce_sum(y * y, name="loss")
        gw, gx = tf.gradients(loss, [w, x])
        tf.identity(gw, name="gw")
        tf.identity(gx, name="gx")
        tf.no_op(name="init")
    xs = np.stack([X23 * (k - 2) for k in range(5)]).astype(np.float32)
    return g, [({"x:0": xs}, ["y:0", "loss:0", "gw:0", "gx:0"], [])]


CPU0, CPU1 = "/device:CPU:0", "/device:CPU:1"


def while_v1_devices():
    v1_loops()
    g = tf.Graph()
    with g.as_default(), tf.device(CPU0):
        n = tf1.placeholder(tf.int32, [], name="n")
        x = tf.constant(X, name="x")

        def body(i, s):
            with tf.device(CPU1):  # The loop variables and the invariant x cross here.
                y = tf.tanh(s) + x * tf.cast(i, tf.float32)
            return i + 1, y * 0.5

        _, total = tf.while_loop(lambda i, s: i < n, body, [tf.constant(0), tf.zeros([3])],
                                 name="span")
        tf.identity(total, name="total")
        tf.no_op(name="init")
    return g, [({"n:0": np.int32(k)}, ["total:0"], []) for k in (0, 1, 7, 1000)]


def while_v1_nested_devices():
    v1_loops()
    g = tf.Graph()
    with g.as_default(), tf.device(CPU0):
        n = tf1.placeholder(tf.int32, [], name="n")

        def outer(i, total):
            with tf.device(CPU1):  # The inner loop's own nodes on CPU:1 ...
                def inner_body(j, s):
                    with tf.device(CPU0):  # ... and its body's sum back on CPU:0.
                        s = s + i * j
                    return j + 1, s

                _, inner = tf.while_loop(lambda j, s: j < i, inner_body, [0, 0], name="inner")
            return i + 1, total + inner

        _, total = tf.while_loop(lambda i, t: i < n, outer, [0, 0], name="outer")
        tf.identity(total, name="total")
        tf.no_op(name="init")
    return g, [({"n:0": np.int32(k)}, ["total:0"], []) for k in (0, 1, 6)]


def while_v1_grad_devices():
    v1_loops()
    g = tf.Graph()
    with g.as_default(), tf.device(CPU0):
        x = tf1.placeholder(tf.float32, [2, 3], name="x")
        w = tf.constant(W, name="w")

        def body(i, h):
            with tf.device(CPU1):
                # The copy keeps the matmul's saved input on its device: TensorFlow
                # colocates a saved value's stack with both its producer and consumer.
                z = tf.matmul(tf.identity(h), w)
            return i + 1, tf.tanh(z)

        _, h = tf.while_loop(lambda i, h: i < 4, body, [0, x], name="loop")
        loss = tf.reduce_sum(h * h, name="loss")
    with g.as_default():
        # Each gradient op on its forward op's device, as multi-device TF1 models do.
        gw, gx = tf1.gradients(loss, [w, x], colocate_gradients_with_ops=True)
        tf.identity(gw, name="gw")
        tf.identity(gx, name="gx")
        tf.no_op(name="init")
    return g, [({"x:0": X23}, ["loss:0", "gw:0", "gx:0"], []),
               ({"x:0": -X23}, ["loss:0", "gw:0", "gx:0"], [])]


def main():
    os.makedirs(HERE, exist_ok=True)
    cases = []
    for name, (g, runs) in (("cond_v1", cond_graph(False)), ("cond_v2", cond_graph(True)),
                            ("cond_v2_resource", cond_v2_resource()),
                            ("function_call", function_call()),
                            ("global_step_read_ref", global_step_read(False)),
                            ("global_step_read_resource", global_step_read(True)),
                            ("while_v1", while_v1()), ("while_v1_parallel", while_v1_parallel()),
                            ("while_v1_nested", while_v1_nested()),
                            ("while_v1_in_cond", while_v1_in_cond()),
                            ("while_v1_ref", while_v1_ref()), ("while_v2", while_v1(True)),
                            ("while_v2_nested", while_v1_nested(True)),
                            ("while_v2_resource", while_v2_resource()),
                            ("while_v1_grad", while_v1_grad()),
                            ("tensor_array_v1", tensor_array_v1())):
        cases.append(record(name, g, ["init"], runs))
    for name, (g, runs) in (("while_v1_devices", while_v1_devices()),
                            ("while_v1_nested_devices", while_v1_nested_devices()),
                            ("while_v1_grad_devices", while_v1_grad_devices())):
        cases.append(record(name, g, ["init"], runs, cpus=2))
    with open(os.path.join(HERE, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
    for c in cases:
        with open(os.path.join(HERE, c["graph"])) as f:
            gd = text_format.Parse(f.read(), tf1.GraphDef())
        ops = {n.op for n in gd.node} | {n.op for f in gd.library.function for n in f.node_def}
        print(c["name"], len(c["runs"]), "runs;", " ".join(sorted(ops)))


if __name__ == "__main__":
    main()
