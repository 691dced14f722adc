#!/usr/bin/env python3
"""Prints the TensorFlow reference values embedded in dflow's training tests.

  dflow/ops/state_ops_test.cc, training_ops_test.cc   op signatures (OpDefsMatchTensorFlow)
                                                      and one update of every Resource*
                                                      optimizer op (UpdateCase)
  dflow/train/optimizer_test.cc                       three Minimize steps of each
                                                      tf.compat.v1.train optimizer on a
                                                      small quadratic, and seeded
                                                      initializer values

Run: python3 tests/data/gen_training_reference.py   (needs TensorFlow 2.x)
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

tf1 = tf.compat.v1
f32 = lambda x: np.array(x, np.float32)
fmt = lambda a: ", ".join("%.9gf" % v for v in np.ravel(a))

OPS = ("VariableV2 Assign AssignAdd AssignSub IsVariableInitialized ApplyGradientDescent "
       "ResourceApplyGradientDescent ApplyMomentum ResourceApplyMomentum ApplyAdam "
       "ResourceApplyAdam ApplyAdagrad ResourceApplyAdagrad ApplyRMSProp "
       "ResourceApplyRMSProp").split()


def signature(op):
    arg = lambda a: "%s:%s%s" % (a.name, a.type_attr or tf.dtypes.as_dtype(a.type).name,
                                 "&" if a.is_ref else "")

    def attr(a):
        s = "%s:%s" % (a.name, a.type)
        if a.HasField("default_value"):
            d = a.default_value
            s += "=" + ("true" if d.b else "false") if d.WhichOneof("value") == "b" else \
                "='%s'" % d.s.decode()
        return s
    return "(%s) -> (%s) [%s]%s" % (", ".join(map(arg, op.input_arg)),
                                    ", ".join(map(arg, op.output_arg)),
                                    ", ".join(sorted(map(attr, op.attr))),
                                    " stateful" if op.is_stateful else "")


def print_signatures():
    for name in OPS:
        print('{"%s", "%s"},' % (name, signature(op_def_registry.get(name))))


def print_updates():
    raw = tf.raw_ops
    var, grad = f32([1.0, -2.0, 3.0, 0.5]), f32([0.1, -0.2, 0.3, -0.4])
    accum, m, v = f32([0.1, 0.2, 0.3, 0.4]), f32([0.01, -0.02, 0.03, 0.0]), \
        f32([0.001, 0.002, 0.003, 0.004])
    ms, mom = f32([0.5, 0.6, 0.7, 0.8]), f32([0.01, 0.02, -0.03, 0.0])
    V = lambda x: tf.Variable(x)
    show = lambda name, *vs: print(name, " | ".join(fmt(x.numpy()) for x in vs))
    a = V(var)
    raw.ResourceApplyGradientDescent(var=a.handle, alpha=f32(0.1), delta=grad)
    show("GradientDescent", a)
    for nesterov in (False, True):
        a, b = V(var), V(accum)
        raw.ResourceApplyMomentum(var=a.handle, accum=b.handle, lr=f32(0.1), grad=grad,
                                  momentum=f32(0.9), use_nesterov=nesterov)
        show("Momentum nesterov=%s" % nesterov, a, b)
        a, b, c = V(var), V(m), V(v)
        raw.ResourceApplyAdam(var=a.handle, m=b.handle, v=c.handle, beta1_power=f32(0.729),
                              beta2_power=f32(0.997002999), lr=f32(0.1), beta1=f32(0.9),
                              beta2=f32(0.999), epsilon=f32(1e-7), grad=grad,
                              use_nesterov=nesterov)
        show("Adam nesterov=%s" % nesterov, a, b, c)
    for update_slots in (True, False):
        a, b = V(var), V(accum)
        raw.ResourceApplyAdagrad(var=a.handle, accum=b.handle, lr=f32(0.1), grad=grad,
                                 update_slots=update_slots)
        show("Adagrad update_slots=%s" % update_slots, a, b)
    a, b, c = V(var), V(ms), V(mom)
    raw.ResourceApplyRMSProp(var=a.handle, ms=b.handle, mom=c.handle, lr=f32(0.1),
                             rho=f32(0.9), momentum=f32(0.5), epsilon=f32(1e-10), grad=grad)
    show("RMSProp", a, b, c)


OPTIMIZERS = {
    "GradientDescent": lambda: tf1.train.GradientDescentOptimizer(0.1),
    "Momentum": lambda: tf1.train.MomentumOptimizer(0.1, 0.9),
    "MomentumNesterov": lambda: tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "Adam": lambda: tf1.train.AdamOptimizer(0.1),
    "Adagrad": lambda: tf1.train.AdagradOptimizer(0.1),
    "RMSProp": lambda: tf1.train.RMSPropOptimizer(0.1),
    "RMSPropMomentum": lambda: tf1.train.RMSPropOptimizer(0.1, momentum=0.5),
}


def print_optimizers():
    for name, make in OPTIMIZERS.items():
        g = tf1.Graph()
        with g.as_default():
            w = tf1.get_variable("w", initializer=tf.constant([1.0, -2.0]), use_resource=False)
            b = tf1.get_variable("b", initializer=tf.constant(0.5), use_resource=False)
            step = tf1.train.get_or_create_global_step()
            loss = tf.reduce_sum(tf.square(w * [2.0, 0.5] - [3.0, 1.0])) + tf.square(b)
            train = make().minimize(loss, global_step=step)
            with tf1.Session() as s:
                s.run(tf1.global_variables_initializer())
                print(name)
                for _ in range(3):
                    s.run(train)
                    print("  w {%s}  b %s" % (fmt(s.run(w)), fmt(s.run(b))))
                for var in tf1.global_variables():
                    print("  %s {%s}" % (var.op.name, fmt(s.run(var))))


def print_initializers():
    g = tf1.Graph()
    with g.as_default():
        vs = [
            tf1.get_variable("glorot", [3, 2], initializer=tf1.glorot_uniform_initializer(seed=42)),
            tf1.get_variable("glorot4d", [2, 3, 4, 5],
                             initializer=tf1.glorot_uniform_initializer(seed=1)),
            tf1.get_variable("tn", [4], initializer=tf1.truncated_normal_initializer(0.5, 2.0, seed=7)),
            tf1.get_variable("rn", [2, 2], initializer=tf1.random_normal_initializer(1.0, 0.5, seed=3)),
            tf1.get_variable("ru", [3], initializer=tf1.random_uniform_initializer(-1.0, 3.0, seed=5)),
            tf1.get_variable("rnd", [3], tf.float64,
                             initializer=tf1.random_normal_initializer(1.0, 0.5, seed=3)),
        ]
        with tf1.Session() as s:
            s.run(tf1.global_variables_initializer())
            for var in vs:
                value = s.run(var)
                if var.op.name == "glorot4d":
                    value = value.flat[[0, 59, 119]]
                print(var.op.name, ", ".join("%.17g" % x for x in np.ravel(value)))


if __name__ == "__main__":
    print_signatures()
    print_updates()
    tf1.disable_eager_execution()
    print_optimizers()
    print_initializers()
