#!/usr/bin/env python3
"""Reference values for dflow/ops/{nn,conv,pooling}_ops_test.cc, computed with
real TensorFlow's CPU kernels. Run: TF_ENABLE_ONEDNN_OPTS=0 python3 gen_nn_reference.py

Inputs come from formulas the C++ tests repeat (Pattern / FilterPattern), so only
the outputs are embedded there; they are multiples of 1/8 and exact in float.
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
    a = np.asarray(t).ravel()
    print(f"// {name}: shape {list(np.asarray(t).shape)}")
    print("{" + ", ".join(repr(float(v)) for v in a) + "}")


def conv(name, in_shape, f_shape, strides, padding, dilations=(1, 1, 1, 1), explicit=()):
    out = raw.Conv2D(input=pattern(in_shape), filter=filter_pattern(f_shape),
                     strides=list(strides), padding=padding, dilations=list(dilations),
                     explicit_paddings=list(explicit))
    show(name, out)


conv("Conv SAME s1", [1, 5, 4, 2], [3, 3, 2, 3], [1, 1, 1, 1], "SAME")
conv("Conv SAME s2", [2, 5, 4, 2], [3, 3, 2, 3], [1, 2, 2, 1], "SAME")
conv("Conv VALID s1", [2, 5, 4, 2], [3, 2, 2, 3], [1, 1, 1, 1], "VALID")
conv("Conv VALID s2", [1, 5, 5, 3], [3, 3, 3, 2], [1, 2, 2, 1], "VALID")
conv("Conv pointwise", [1, 2, 3, 3], [1, 1, 3, 2], [1, 1, 1, 1], "VALID")
conv("Conv dilated", [1, 5, 5, 1], [2, 2, 1, 1], [1, 1, 1, 1], "SAME", dilations=(1, 2, 2, 1))
conv("Conv grouped", [1, 3, 3, 4], [2, 2, 2, 2], [1, 1, 1, 1], "VALID")
conv("Conv explicit", [1, 4, 4, 1], [3, 3, 1, 1], [1, 1, 1, 1], "EXPLICIT",
     explicit=(0, 0, 1, 0, 0, 2, 0, 0))


def pool(name, x, ksize, strides, padding):
    show(name, raw.MaxPool(input=x, ksize=ksize, strides=strides, padding=padding))


pool("MaxPool SAME k2 s2", pattern([1, 5, 5, 2]), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
pool("MaxPool VALID k3 s2", pattern([1, 5, 5, 2]), [1, 3, 3, 1], [1, 2, 2, 1], "VALID")
# All negative: padding must not act as zeros.
pool("MaxPool SAME k3 s1 negative", -np.abs(pattern([1, 3, 3, 1])) - 1, [1, 3, 3, 1],
     [1, 1, 1, 1], "SAME")
pool("MaxPool depth", pattern([1, 2, 2, 4]), [1, 1, 1, 2], [1, 1, 1, 2], "VALID")


def avg_pool(name, x, ksize, strides, padding):
    show(name, raw.AvgPool(value=x, ksize=ksize, strides=strides, padding=padding))


# SAME: edge windows average only the elements inside the image.
avg_pool("AvgPool SAME k2 s2", pattern([1, 5, 5, 2]), [1, 2, 2, 1], [1, 2, 2, 1], "SAME")
avg_pool("AvgPool VALID k3 s2", pattern([2, 5, 5, 2]), [1, 3, 3, 1], [1, 2, 2, 1], "VALID")
avg_pool("AvgPool SAME k3 s1", pattern([1, 3, 4, 1]), [1, 3, 3, 1], [1, 1, 1, 1], "SAME")

logits = np.array([[1000., 1001., 1002.], [-1000., 0., 1000.], [1., 2., 3.]], np.float32)
show("Softmax", raw.Softmax(logits=logits))
show("LogSoftmax", raw.LogSoftmax(logits=logits))
loss, back = raw.SparseSoftmaxCrossEntropyWithLogits(features=logits,
                                                      labels=np.array([0, 1, 2], np.int32))
show("Sparse loss", loss)
show("Sparse backprop", back)
labels = np.array([[0.25, 0.25, 0.5], [0., 1., 0.], [1., 0., 0.]], np.float32)
loss, back = raw.SoftmaxCrossEntropyWithLogits(features=logits, labels=labels)
show("Xent loss", loss)
show("Xent backprop", back)
loss, back = raw.SoftmaxCrossEntropyWithLogits(features=logits,
                                                labels=np.array([[0.5, 0.25, 0.25]], np.float32))
show("Xent broadcast labels loss", loss)
show("Xent broadcast labels backprop", back)
loss, back = raw.SoftmaxCrossEntropyWithLogits(features=np.array([1., 2., 4.], np.float32),
                                                labels=labels)
show("Xent broadcast logits loss", loss)
show("Xent broadcast logits backprop", back)
show("BiasAdd NCHW", raw.BiasAdd(value=pattern([2, 3, 2]), bias=np.array([1., 2., 3.], np.float32),
                                  data_format="NCHW"))

# Softplus / SoftplusGrad (nn_ops_test.cc NnSoftplusTest, nn_grad_ops_test.cc
# NnGradSoftplusTest): around both thresholds, log(eps) + 2, of each type.
sp_x = np.array([-30, -20, -15, -14, -1, -0.25, 0, 0.5, 1, 14, 15, 20, 30, np.nan], np.float32)
show("Softplus float", raw.Softplus(features=sp_x))
show("Softplus double", raw.Softplus(
    features=np.array([-40, -37, -36, -35, -1, 0, 1, 35, 36, 37, 40], np.float64)))
show("SoftplusGrad float", raw.SoftplusGrad(
    gradients=np.array([1, 2, -1, 0.5, 3, 1, 1, 2, -2, 1, 1, 1, 1, 1], np.float32), features=sp_x))
