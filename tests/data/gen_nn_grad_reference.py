#!/usr/bin/env python3
"""Reference values for dflow/ops/nn_grad_ops_test.cc, computed with real
TensorFlow's CPU kernels. Run: TF_ENABLE_ONEDNN_OPTS=0 python3 gen_nn_grad_reference.py

Inputs come from the formulas of gen_nn_reference.py (C++: Pattern for images
and gradients, FilterPattern for filters), so only the outputs are embedded in
the test; they are sums of products of quarters and halves, exact in float.
"""
import numpy as np
import tensorflow as tf

raw = tf.raw_ops


def pattern(shape):
    # in[i] = ((7 i) mod 11 - 5) / 4   (C++: Pattern)
    n = int(np.prod(shape))
    return (((np.arange(n) * 7) % 11 - 5) / 4.0).astype(np.float32).reshape(shape)


def filter_pattern(shape):
    # f[i] = ((5 i) mod 9 - 4) / 2     (C++: FilterPattern)
    n = int(np.prod(shape))
    return (((np.arange(n) * 5) % 9 - 4) / 2.0).astype(np.float32).reshape(shape)


def show(name, t):
    a = np.asarray(t)
    print(f"// {name}: shape {list(a.shape)}")
    print("{" + ", ".join(repr(float(v)) for v in a.ravel()) + "}")


def conv_grads(name, in_shape, f_shape, strides, padding, explicit=()):
    x, w = pattern(in_shape), filter_pattern(f_shape)
    y = raw.Conv2D(input=x, filter=w, strides=strides, padding=padding,
                   explicit_paddings=list(explicit))
    dy = pattern(y.shape)
    kw = dict(strides=strides, padding=padding, explicit_paddings=list(explicit))
    print(f"// {name}: out_backprop {list(y.shape)}")
    show(f"{name} BackpropInput",
         raw.Conv2DBackpropInput(input_sizes=in_shape, filter=w, out_backprop=dy, **kw))
    show(f"{name} BackpropFilter",
         raw.Conv2DBackpropFilter(input=x, filter_sizes=f_shape, out_backprop=dy, **kw))


conv_grads("SAME s1", [1, 5, 4, 2], [3, 3, 2, 3], [1, 1, 1, 1], "SAME")
conv_grads("SAME s2", [2, 5, 4, 2], [3, 3, 2, 3], [1, 2, 2, 1], "SAME")
conv_grads("VALID s1", [2, 5, 4, 2], [3, 2, 2, 3], [1, 1, 1, 1], "VALID")
conv_grads("VALID s2", [1, 5, 5, 3], [3, 3, 3, 2], [1, 2, 2, 1], "VALID")
conv_grads("EXPLICIT", [1, 4, 4, 1], [3, 3, 1, 2], [1, 1, 1, 1], "EXPLICIT",
           explicit=(0, 0, 1, 0, 0, 2, 0, 0))


def pool_grad(name, x, ksize, strides, padding):
    y = raw.MaxPool(input=x, ksize=ksize, strides=strides, padding=padding)
    dy = pattern(y.shape) + 2.0  # positive and distinct enough to see every route
    print(f"// {name}: grad {list(y.shape)} = Pattern + 2")
    show(name, raw.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy, ksize=ksize,
                               strides=strides, padding=padding))


pool_grad("MaxPoolGrad SAME k2 s2", pattern([1, 5, 5, 2]), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
pool_grad("MaxPoolGrad VALID k3 s2", pattern([1, 5, 5, 2]), [1, 3, 3, 1], [1, 2, 2, 1], "VALID")
pool_grad("MaxPoolGrad SAME k3 s1", pattern([2, 3, 4, 1]), [1, 3, 3, 1], [1, 1, 1, 1], "SAME")
# Ties: every window of a constant image sends its gradient to its first element.
pool_grad("MaxPoolGrad ties", np.ones([1, 3, 3, 1], np.float32), [1, 2, 2, 1], [1, 1, 1, 1],
          "VALID")


def avg_pool_grad(name, in_shape, ksize, strides, padding):
    y = raw.AvgPool(value=pattern(in_shape), ksize=ksize, strides=strides, padding=padding)
    print(f"// {name}: grad {list(y.shape)} = Pattern + 2")
    show(name, raw.AvgPoolGrad(orig_input_shape=in_shape, grad=pattern(y.shape) + 2.0,
                               ksize=ksize, strides=strides, padding=padding))


avg_pool_grad("AvgPoolGrad SAME k2 s2", [1, 5, 5, 2], [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
avg_pool_grad("AvgPoolGrad VALID k3 s2", [2, 5, 5, 2], [1, 3, 3, 1], [1, 2, 2, 1], "VALID")
avg_pool_grad("AvgPoolGrad SAME k3 s1", [1, 3, 4, 1], [1, 3, 3, 1], [1, 1, 1, 1], "SAME")

nan = np.float32("nan")
show("MaxPoolGrad NaN first", raw.MaxPoolGrad(
    orig_input=np.array([nan, 1, 2, nan], np.float32).reshape(1, 2, 2, 1),
    orig_output=np.ones([1, 1, 1, 1], np.float32), grad=np.ones([1, 1, 1, 1], np.float32),
    ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"))
show("MaxPoolGrad NaN later", raw.MaxPoolGrad(
    orig_input=np.array([1, nan, 2, 0], np.float32).reshape(1, 2, 2, 1),
    orig_output=np.ones([1, 1, 1, 1], np.float32), grad=np.ones([1, 1, 1, 1], np.float32),
    ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"))

show("ReluGrad", raw.ReluGrad(gradients=pattern([2, 3]) + 3,
                              features=np.array([[-1, 0, 2], [nan, 0.5, -0.25]], np.float32)))
show("BiasAddGrad NHWC", raw.BiasAddGrad(out_backprop=pattern([2, 3, 4])))
show("BiasAddGrad NCHW", raw.BiasAddGrad(out_backprop=pattern([2, 3, 2, 2]), data_format="NCHW"))
show("BiasAddGrad NCHW rank 2", raw.BiasAddGrad(out_backprop=pattern([2, 3]),
                                                data_format="NCHW"))
