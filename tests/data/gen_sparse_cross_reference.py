#!/usr/bin/env python3
"""Writes tests/data/sparse_cross_golden.json: what TensorFlow's SparseCross
kernel (the op tf.compat.v1.feature_column.crossed_column emits in a TF1 graph)
computes, or the error it gives, for dflow/ops/feature_column_ops_test.cc.
(TensorFlow names dtypes in two of its messages by their enum numbers, "internal
type 7 but received 9"; dflow writes the names.)

Each case: the op's attrs; its sparse inputs (indices, values, dense shape) and
dense inputs as tensors; then TensorFlow's three outputs (indices, values,
dense shape) or its error message ("[Op:SparseCross]" suffix removed).

Run with TensorFlow 2.21:  python3 tests/data/gen_sparse_cross_reference.py
"""
import json
import os
import re

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
# The hash_key crossed_column passes by default (a negative one is tested
# too: the kernel reads the attr as uint64).
HASH_KEY = 956888297470
cases = []


def tensor_json(value):
    value = np.asarray(value)
    values = value.reshape(-1).tolist()
    if value.dtype == np.object_ or value.dtype.kind == "S":
        values = [v.decode() if isinstance(v, bytes) else v for v in values]
    return {"dtype": tf.dtypes.as_dtype(value.dtype).name, "shape": list(value.shape),
            "values": values}


def const(value, dtype):
    return np.asarray(value, dtype=object if dtype == tf.string else dtype.as_numpy_dtype)


def sparse(indices, values, shape, dtype):
    return (np.asarray(indices, dtype=np.int64).reshape(-1, 2) if len(indices) else
            np.zeros([0, 2], np.int64), const(values, dtype), np.asarray(shape, np.int64))


def case(name, sparse_inputs=(), dense_inputs=(), hashed_output=True, num_buckets=0,
         hash_key=HASH_KEY, out_type=tf.int64, internal_type=tf.int64, raw_indices=None):
    indices = [s[0] for s in sparse_inputs] if raw_indices is None else raw_indices
    values = [s[1] for s in sparse_inputs]
    shapes = [s[2] for s in sparse_inputs]
    attrs = {"hashed_output": hashed_output, "num_buckets": num_buckets, "hash_key": hash_key,
             "out_type": out_type.name, "internal_type": internal_type.name}
    entry = {"name": name, "attrs": attrs,
             "indices": [tensor_json(t) for t in indices],
             "values": [tensor_json(t) for t in values],
             "shapes": [tensor_json(t) for t in shapes],
             "dense": [tensor_json(t) for t in dense_inputs]}
    try:
        out = tf.raw_ops.SparseCross(
            indices=[tf.constant(t) for t in indices],
            values=[tf.constant(t) for t in values],
            shapes=[tf.constant(t) for t in shapes],
            dense_inputs=[tf.constant(t) for t in dense_inputs],
            hashed_output=hashed_output, num_buckets=num_buckets, hash_key=hash_key,
            out_type=out_type, internal_type=internal_type)
        entry["output"] = [tensor_json(t.numpy()) for t in out]
    except (tf.errors.InvalidArgumentError, ValueError) as e:
        message = e.message if hasattr(e, "message") else str(e)
        message = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", message)
        entry["error"] = re.sub(r" \[Op:SparseCross\].*$", "", message, flags=re.S).strip()
    cases.append(entry)


S, I = tf.string, tf.int64
words = const([["a", "bb"], ["ccc", "dddd"], ["", "a much longer feature value, over 32 bytes"]], S)
ids = const([[1], [-7], [1 << 40]], I)

# Hashed (as crossed_column's): dense string x dense int64, three rows.
case("dense_string_x_int64_hashed", dense_inputs=[words, ids], num_buckets=1000)
case("dense_string_x_int64_hashed_no_buckets", dense_inputs=[words, ids], num_buckets=0)
case("dense_hashed_negative_key", dense_inputs=[ids, words], num_buckets=97, hash_key=-12345)
# Sparse inputs: rows with 2, 0, 3 and 1 features; the empty row has no cross.
sp_str = sparse([[0, 0], [0, 1], [2, 0], [2, 1], [2, 2], [3, 0]],
                ["x", "y", "x", "zz", "w", "q"], [4, 3], S)
sp_int = sparse([[0, 0], [1, 0], [2, 0], [2, 1], [3, 0]], [5, 6, 7, -8, 9], [4, 2], I)
case("sparse_string_x_int64_hashed", sparse_inputs=[sp_str, sp_int], num_buckets=50)
case("sparse_x_dense_hashed", sparse_inputs=[sp_str],
     dense_inputs=[const([["u"], ["v"], ["w"], ["x"]], S)], num_buckets=10)
case("three_columns_hashed", sparse_inputs=[sp_str, sp_int],
     dense_inputs=[const([[1, 2], [3, 4], [5, 6], [7, 8]], I)], num_buckets=1 << 40)
# String crosses: features joined with "_X_", int64 written in decimal.
case("sparse_x_dense_strings", sparse_inputs=[sp_str],
     dense_inputs=[const([["u", "v"], ["w", "x"], ["y", "z"], ["0", "1"]], S)],
     hashed_output=False, out_type=S, internal_type=S)
case("strings_with_int64", sparse_inputs=[sp_str, sp_int], hashed_output=False, out_type=S,
     internal_type=I)
# The kernel follows out_type: int64 hashes even without hashed_output, string
# joins even with it.
case("int64_out_without_hashed_output", dense_inputs=[words, ids], hashed_output=False,
     num_buckets=100)
case("string_out_with_hashed_output", dense_inputs=[words, ids], hashed_output=True,
     num_buckets=100, out_type=S, internal_type=I)
# One column: its features hashed alone (a string's is its Fingerprint64 mixed).
case("one_sparse_column", sparse_inputs=[sp_int], num_buckets=0)
case("empty_batch", sparse_inputs=[sparse([], [], [0, 3], S)], num_buckets=10)
case("no_values", sparse_inputs=[sparse([], [], [3, 3], S), sp_int[:2] + (np.asarray([3, 2]),)],
     num_buckets=10)
# Rows out of order: TensorFlow reads each column's rows in order and stops
# matching a column at the first row that goes back.
case("rows_out_of_order",
     sparse_inputs=[sparse([[1, 0], [0, 0], [1, 1]], ["a", "b", "c"], [2, 2], S),
                    sparse([[0, 0], [1, 0]], ["d", "e"], [2, 1], S)], num_buckets=100)

# Bad inputs.
case("indices_not_matrix", raw_indices=[np.asarray([0, 0], np.int64)],
     sparse_inputs=[sparse([[0, 0]], ["a"], [1, 1], S)])
case("indices_not_pairs", raw_indices=[np.zeros([1, 3], np.int64)],
     sparse_inputs=[sparse([[0, 0]], ["a"], [1, 1], S)])
case("values_size_mismatch", sparse_inputs=[sparse([[0, 0], [0, 1]], ["a"], [1, 2], S)])
case("values_not_vector", sparse_inputs=[(np.zeros([1, 2], np.int64), const([["a"]], S),
                                          np.asarray([1, 1], np.int64))])
case("shape_not_2d", sparse_inputs=[sparse([[0, 0]], ["a"], [1, 1, 1], S)])
case("dense_not_matrix", dense_inputs=[const(["a", "b"], S)])
case("dense_batch_mismatch", sparse_inputs=[sp_str], dense_inputs=[const([["a"]], S)])
case("sparse_batch_mismatch", sparse_inputs=[sp_str, sparse([[0, 0]], [1], [3, 1], I)])
case("string_internal_int64_values", sparse_inputs=[sp_int], hashed_output=False, out_type=S,
     internal_type=S)
case("string_internal_int64_dense", dense_inputs=[ids], out_type=I, internal_type=S)

with open(os.path.join(HERE, "sparse_cross_golden.json"), "w") as f:
    json.dump({"cases": cases}, f, indent=1)
print(len(cases), "cases;", sum("error" in c for c in cases), "errors")
