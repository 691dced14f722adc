#!/usr/bin/env python3
"""Writes tests/data/list_ops_golden.json: what TensorFlow's TensorList kernels
(EmptyTensorList, TensorListReserve, TensorListFromTensor, TensorListStack,
TensorListGetItem, TensorListSetItem, TensorListPushBack, TensorListPopBack,
TensorListSplit, TensorListConcatV2, TensorListLength, TensorListElementShape) compute, or the error they give, for
dflow/ops/list_ops_test.cc.

Each case is a little program run eagerly with tf.raw_ops: steps, each an op with
attrs and inputs that are constants ({"tensor": ...}) or an earlier step's output
({"step": i, "output": j}); then the value of one output of one step (never a
variant: lists are observed through the ops that read them), or the message of
the first step that fails (TensorFlow's "{{function_node ...}}" prefix and
"[Op:...]" suffix removed).

Run with TensorFlow 2.21:  python3 tests/data/gen_list_ops_reference.py
"""
import inspect
import json
import os
import re

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry

HERE = os.path.dirname(os.path.abspath(__file__))
raw = tf.raw_ops
cases = []


def tensor_json(value):
    value = np.asarray(value)
    values = value.reshape(-1).tolist()
    if value.dtype == np.object_ or value.dtype.kind == "S":
        values = [v.decode() if isinstance(v, bytes) else v for v in values]
    return {"dtype": tf.dtypes.as_dtype(value.dtype).name, "shape": list(value.shape),
            "values": values}


class Program:
    def __init__(self, name):
        self.name = name
        self.steps = []
        self.results = []  # Eager outputs of each step.
        self.error = None

    def const(self, value, dtype=None):
        return {"tensor": tensor_json(np.asarray(value, dtype=dtype))}

    def op(self, op, inputs, **attrs):
        """Appends a step; returns references to its outputs."""
        json_attrs = {k: (tf.dtypes.as_dtype(v).name if isinstance(v, tf.dtypes.DType) else v)
                      for k, v in attrs.items()}
        # Type attrs TensorFlow infers from the inputs, written out for dflow's NodeDef.
        for arg, i in zip(op_def_registry.get(op).input_arg, inputs):
            if arg.type_attr and arg.type_attr not in json_attrs and "tensor" in i:
                json_attrs[arg.type_attr] = i["tensor"]["dtype"]
        self.steps.append({"op": op, "inputs": inputs, "attrs": json_attrs})
        index = len(self.steps) - 1
        if self.error is None:
            args = [self.results[i["step"]][i["output"]] if "step" in i
                    else tf.constant(np.asarray(i["tensor"]["values"],
                                                dtype=tf.dtypes.as_dtype(
                                                    i["tensor"]["dtype"]).as_numpy_dtype)
                                     .reshape(i["tensor"]["shape"]))
                    for i in inputs]
            names = [a.name for a in
                     op_def_registry.get(op).input_arg]
            try:
                fn = getattr(raw, op)
                # Type attrs the inputs imply are not arguments of the raw op.
                accepted = inspect.signature(fn).parameters
                arg_defs = op_def_registry.get(op).input_arg
                named = ({arg_defs[0].name: args} if arg_defs[0].number_attr  # AddN's list
                         else dict(zip(names, args)))
                out = fn(**named,
                         **{k: v for k, v in attrs.items() if k in accepted})
                self.results.append(list(out) if isinstance(out, (list, tuple)) else [out])
            except tf.errors.OpError as e:
                message = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", e.message)
                self.error = re.sub(r"\s*\[Op:\w+\]( name: \S*)?$", "", message)
                self.results.append(None)
        else:
            self.results.append(None)
        n = len(op_def_registry.get(op).output_arg)
        refs = [{"step": index, "output": j} for j in range(n)]
        return refs if n > 1 else refs[0]

    def fetch(self, ref):
        case = {"name": self.name, "steps": self.steps, "fetch": ref}
        if self.error is not None:
            case["error"] = self.error
        else:
            case["out"] = tensor_json(self.results[ref["step"]][ref["output"]].numpy())
        cases.append(case)


F, I32, I64, S = tf.float32, tf.int32, tf.int64, tf.string


def shape(dims, dtype=np.int32):
    return {"tensor": tensor_json(np.asarray(dims, dtype=dtype))}


def arange(*dims):
    return {"tensor": tensor_json(np.arange(int(np.prod(dims)), dtype=np.float32).reshape(dims))}


def scalar(v, dtype=np.int32):
    return {"tensor": tensor_json(np.asarray(v, dtype=dtype))}


def vec(values, dtype=np.float32):
    return {"tensor": tensor_json(np.asarray(values, dtype=dtype))}


UNKNOWN = -1  # A scalar -1 element_shape: unknown rank.

# --- values ---
p = Program("reserve_set_stack_unset_is_zeros")
r = p.op("TensorListReserve", [shape([2]), scalar(3)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(0), vec([1, 2])], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(2), vec([5, 6])], element_dtype=F)
p.fetch(p.op("TensorListStack", [r, shape([2])], element_dtype=F))

p = Program("from_tensor_get_item")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListGetItem", [r, scalar(1), shape([2])], element_dtype=F))

p = Program("from_tensor_stack_roundtrip_rank3")
r = p.op("TensorListFromTensor", [arange(2, 3, 2), shape([-1, 2])], element_dtype=F,
         shape_type=I32)
p.fetch(p.op("TensorListStack", [r, shape(UNKNOWN)], element_dtype=F))

p = Program("push_push_pop_value")
r = p.op("EmptyTensorList", [shape(UNKNOWN), scalar(-1)], element_dtype=I32, shape_type=I32)
r = p.op("TensorListPushBack", [r, scalar(7)], element_dtype=I32)
r = p.op("TensorListPushBack", [r, scalar(8)], element_dtype=I32)
popped, item = p.op("TensorListPopBack", [r, shape(UNKNOWN)], element_dtype=I32)
p.fetch(item)

p = Program("pop_leaves_length")
r = p.op("EmptyTensorList", [shape(UNKNOWN), scalar(-1)], element_dtype=I32, shape_type=I32)
r = p.op("TensorListPushBack", [r, scalar(7)], element_dtype=I32)
r = p.op("TensorListPushBack", [r, scalar(8)], element_dtype=I32)
popped, item = p.op("TensorListPopBack", [r, shape(UNKNOWN)], element_dtype=I32)
p.fetch(p.op("TensorListLength", [popped]))

p = Program("pushed_then_stacked")
r = p.op("EmptyTensorList", [shape([2]), scalar(-1)], element_dtype=F, shape_type=I32)
r = p.op("TensorListPushBack", [r, vec([1, 2])], element_dtype=F)
r = p.op("TensorListPushBack", [r, vec([3, 4])], element_dtype=F)
r = p.op("TensorListPushBack", [r, vec([5, 6])], element_dtype=F)
p.fetch(p.op("TensorListStack", [r, shape([2])], element_dtype=F, num_elements=3))

p = Program("set_item_leaves_its_input_alone")
a = p.op("TensorListFromTensor", [arange(2, 2), shape([2])], element_dtype=F, shape_type=I32)
b = p.op("TensorListSetItem", [a, scalar(0), vec([9, 9])], element_dtype=F)
p.op("TensorListStack", [b, shape([2])], element_dtype=F)
p.fetch(p.op("TensorListStack", [a, shape([2])], element_dtype=F))

p = Program("push_back_leaves_its_input_alone")
a = p.op("TensorListFromTensor", [arange(2, 2), shape([2])], element_dtype=F, shape_type=I32)
b = p.op("TensorListPushBack", [a, vec([9, 9])], element_dtype=F)
p.op("TensorListLength", [b])
p.fetch(p.op("TensorListLength", [a]))

p = Program("pop_back_leaves_its_input_alone")
a = p.op("TensorListFromTensor", [arange(2, 2), shape([2])], element_dtype=F, shape_type=I32)
b, _ = p.op("TensorListPopBack", [a, shape([2])], element_dtype=F)
p.op("TensorListLength", [b])
p.fetch(p.op("TensorListStack", [a, shape([2])], element_dtype=F))

p = Program("stack_empty_fully_defined")
r = p.op("EmptyTensorList", [shape([2, 3]), scalar(-1)], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListStack", [r, shape([2, 3])], element_dtype=F))

p = Program("stack_empty_shape_from_op")
r = p.op("EmptyTensorList", [shape(UNKNOWN), scalar(-1)], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListStack", [r, shape([4])], element_dtype=F))

p = Program("get_unset_item_shape_from_op")
r = p.op("TensorListReserve", [shape([-1]), scalar(2)], element_dtype=F)
p.fetch(p.op("TensorListGetItem", [r, scalar(0), shape([3])], element_dtype=F))

p = Program("get_unset_item_shape_from_other_elements")
r = p.op("TensorListReserve", [shape(UNKNOWN), scalar(2)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(1), vec([[1, 2, 3]])], element_dtype=F)
p.fetch(p.op("TensorListStack", [r, shape(UNKNOWN)], element_dtype=F))

p = Program("pop_unset_item_is_zeros")
r = p.op("TensorListReserve", [shape([2]), scalar(1)], element_dtype=F)
_, item = p.op("TensorListPopBack", [r, shape([2])], element_dtype=F)
p.fetch(item)

p = Program("set_item_resizes")
r = p.op("EmptyTensorList", [shape([]), scalar(-1)], element_dtype=F, shape_type=I32)
r = p.op("TensorListSetItem", [r, scalar(2), scalar(4.0, np.float32)], element_dtype=F,
         resize_if_index_out_of_bounds=True)
p.fetch(p.op("TensorListStack", [r, shape([])], element_dtype=F))

p = Program("length_of_reserved")
r = p.op("TensorListReserve", [shape([2]), scalar(5)], element_dtype=F)
p.fetch(p.op("TensorListLength", [r]))

p = Program("element_shape_partial")
r = p.op("EmptyTensorList", [shape([-1, 3]), scalar(-1)], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListElementShape", [r], shape_type=I32))

p = Program("element_shape_unknown_rank_int64")
r = p.op("EmptyTensorList", [shape(UNKNOWN, np.int64), scalar(-1)], element_dtype=F,
         shape_type=I64)
p.fetch(p.op("TensorListElementShape", [r], shape_type=I64))

p = Program("element_shape_scalar_elements")
r = p.op("TensorListFromTensor", [vec([1, 2, 3]), shape([])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListElementShape", [r], shape_type=I32))

p = Program("strings")
r = p.op("TensorListFromTensor", [vec(["a", "bc"], np.object_), shape([])], element_dtype=S,
         shape_type=I32)
r = p.op("TensorListPushBack", [r, scalar("def", np.object_)], element_dtype=S)
p.fetch(p.op("TensorListStack", [r, shape([])], element_dtype=S))

p = Program("int64_shape_type_reserve")
r = p.op("TensorListReserve", [shape([2], np.int64), scalar(2)], element_dtype=F, shape_type=I64)
p.fetch(p.op("TensorListStack", [r, shape([2])], element_dtype=F))

p = Program("add_n_of_lists_unset_adds_as_zeros")
a = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
r = p.op("TensorListReserve", [shape([2]), scalar(3)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(1), vec([10, 20])], element_dtype=F)
s = p.op("AddN", [a, r, a], T=tf.variant, N=3)
p.fetch(p.op("TensorListStack", [s, shape([2])], element_dtype=F))

p = Program("zeros_like_list_keeps_unset_elements")
r = p.op("TensorListReserve", [shape([-1]), scalar(2)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(1), vec([1, 2, 3])], element_dtype=F)
z = p.op("ZerosLike", [r], T=tf.variant)
z = p.op("TensorListSetItem", [z, scalar(0), vec([7, 8, 9])], element_dtype=F)
p.fetch(p.op("TensorListStack", [z, shape(UNKNOWN)], element_dtype=F))

p = Program("split_then_concat")
r = p.op("TensorListSplit", [arange(5, 2), shape([-1, 2]), vec([2, 0, 3], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListConcatV2", [r, shape([-1, 2]), vec([], np.int64)], element_dtype=F,
             shape_type=I32)[0])

p = Program("split_element_read")
r = p.op("TensorListSplit", [arange(5, 2), shape([-1, 2]), vec([2, 3], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListGetItem", [r, scalar(1), shape([-1, 2])], element_dtype=F))

p = Program("concat_lengths")
r = p.op("TensorListSplit", [arange(5, 2), shape([-1, 2]), vec([2, 0, 3], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListConcatV2", [r, shape([-1, 2]), vec([], np.int64)], element_dtype=F,
             shape_type=I32)[1])

p = Program("concat_unset_elements_from_leading_dims")
r = p.op("TensorListReserve", [shape([-1, 2]), scalar(3)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(1), vec([[1, 2], [3, 4]])], element_dtype=F)
p.fetch(p.op("TensorListConcatV2", [r, shape([-1, 2]), vec([1, 5, 2], np.int64)],
             element_dtype=F, shape_type=I32)[0])

p = Program("concat_unset_elements_take_the_shared_length")
r = p.op("TensorListReserve", [shape([-1, 2]), scalar(3)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(0), vec([[1, 2]])], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(2), vec([[5, 6]])], element_dtype=F)
p.fetch(p.op("TensorListConcatV2", [r, shape([-1, 2]), vec([], np.int64)], element_dtype=F,
             shape_type=I32)[0])

p = Program("concat_empty_list")
r = p.op("EmptyTensorList", [shape([-1, 3]), scalar(-1)], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListConcatV2", [r, shape([-1, 3]), vec([], np.int64)], element_dtype=F,
             shape_type=I32)[0])

# --- errors ---
p = Program("get_item_index_past_end")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListGetItem", [r, scalar(7), shape([2])], element_dtype=F))

p = Program("get_item_negative_index")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListGetItem", [r, scalar(-1), shape([2])], element_dtype=F))

p = Program("get_item_wrong_dtype")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListGetItem", [r, scalar(0), shape([2])], element_dtype=I32))

p = Program("get_unset_item_unknown_shape")
r = p.op("TensorListReserve", [shape([-1]), scalar(2)], element_dtype=F)
p.fetch(p.op("TensorListGetItem", [r, scalar(0), shape(UNKNOWN)], element_dtype=F))

p = Program("set_item_index_past_end")
r = p.op("TensorListReserve", [shape([2]), scalar(3)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(3), vec([1, 2])], element_dtype=F)
p.fetch(p.op("TensorListLength", [r]))

p = Program("set_item_wrong_dtype")
r = p.op("TensorListReserve", [shape([2]), scalar(3)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(0), vec([1, 2], np.int32)], element_dtype=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("set_item_wrong_shape")
r = p.op("TensorListReserve", [shape([2]), scalar(3)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(0), vec([1, 2, 3])], element_dtype=F)
p.fetch(p.op("TensorListLength", [r]))

p = Program("push_back_wrong_shape")
r = p.op("EmptyTensorList", [shape([2]), scalar(-1)], element_dtype=F, shape_type=I32)
r = p.op("TensorListPushBack", [r, vec([[1, 2]])], element_dtype=F)
p.fetch(p.op("TensorListLength", [r]))

p = Program("push_back_wrong_dtype")
r = p.op("EmptyTensorList", [shape([2]), scalar(-1)], element_dtype=F, shape_type=I32)
r = p.op("TensorListPushBack", [r, vec([1, 2], np.int32)], element_dtype=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("push_back_full")
r = p.op("EmptyTensorList", [shape([]), scalar(1)], element_dtype=F, shape_type=I32)
r = p.op("TensorListPushBack", [r, scalar(1.0, np.float32)], element_dtype=F)
r = p.op("TensorListPushBack", [r, scalar(2.0, np.float32)], element_dtype=F)
p.fetch(p.op("TensorListLength", [r]))

p = Program("pop_back_empty")
r = p.op("EmptyTensorList", [shape([2]), scalar(-1)], element_dtype=F, shape_type=I32)
_, item = p.op("TensorListPopBack", [r, shape([2])], element_dtype=F)
p.fetch(item)

p = Program("pop_back_wrong_dtype")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
_, item = p.op("TensorListPopBack", [r, shape([2])], element_dtype=I32)
p.fetch(item)

p = Program("reserve_negative")
r = p.op("TensorListReserve", [shape([2]), scalar(-1)], element_dtype=F)
p.fetch(p.op("TensorListLength", [r]))

p = Program("reserve_not_scalar")
r = p.op("TensorListReserve", [shape([2]), vec([1, 2], np.int32)], element_dtype=F)
p.fetch(p.op("TensorListLength", [r]))

p = Program("empty_max_not_scalar")
r = p.op("EmptyTensorList", [shape([2]), vec([1, 2], np.int32)], element_dtype=F,
         shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("element_shape_rank_2")
r = p.op("EmptyTensorList", [shape([[2]]), scalar(-1)], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("element_shape_below_minus_one")
r = p.op("EmptyTensorList", [shape([-2]), scalar(-1)], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("stack_wrong_num_elements")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListStack", [r, shape([2])], element_dtype=F, num_elements=2))

p = Program("stack_wrong_dtype")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListStack", [r, shape([2])], element_dtype=I32))

p = Program("stack_empty_unknown_shape")
r = p.op("EmptyTensorList", [shape([-1]), scalar(-1)], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListStack", [r, shape(UNKNOWN)], element_dtype=F))

p = Program("stack_shape_conflicts_with_elements")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([-1])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListStack", [r, shape([3])], element_dtype=F))

p = Program("add_n_of_lists_of_different_lengths")
a = p.op("TensorListFromTensor", [arange(3, 2), shape([2])], element_dtype=F, shape_type=I32)
b = p.op("TensorListFromTensor", [arange(2, 2), shape([2])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [p.op("AddN", [a, b], T=tf.variant, N=2)]))

p = Program("from_tensor_scalar")
r = p.op("TensorListFromTensor", [scalar(1.0, np.float32), shape([])], element_dtype=F,
         shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("from_tensor_shape_mismatch")
r = p.op("TensorListFromTensor", [arange(3, 2), shape([3])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("split_lengths_past_the_end")
r = p.op("TensorListSplit", [arange(3, 2), shape([-1, 2]), vec([2, 2], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("split_unused_values")
r = p.op("TensorListSplit", [arange(3, 2), shape([-1, 2]), vec([1, 1], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("split_negative_length")
r = p.op("TensorListSplit", [arange(3, 2), shape([-1, 2]), vec([-1, 4], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("split_scalar_element_shape")
r = p.op("TensorListSplit", [arange(3, 2), shape([]), vec([3], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("split_incompatible_shape")
r = p.op("TensorListSplit", [arange(3, 2), shape([-1, 3]), vec([3], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListLength", [r]))

p = Program("concat_scalars")
r = p.op("TensorListFromTensor", [vec([1, 2, 3]), shape([])], element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListConcatV2", [r, shape(UNKNOWN), vec([], np.int64)], element_dtype=F,
             shape_type=I32)[0])

p = Program("concat_unset_element_without_a_length")  # Set elements of 1 and 2 rows.
r = p.op("TensorListReserve", [shape([-1, 2]), scalar(2)], element_dtype=F)
r = p.op("TensorListSetItem", [r, scalar(0), vec([[1, 2]])], element_dtype=F)
r = p.op("TensorListPushBack", [r, vec([[1, 2], [3, 4]])], element_dtype=F)
p.fetch(p.op("TensorListConcatV2", [r, shape([-1, 2]), vec([], np.int64)], element_dtype=F,
             shape_type=I32)[0])

p = Program("concat_first_dim_mismatch")
r = p.op("TensorListSplit", [arange(3, 2), shape([-1, 2]), vec([1, 2], np.int64)],
         element_dtype=F, shape_type=I32)
p.fetch(p.op("TensorListConcatV2", [r, shape([1, 2]), vec([], np.int64)], element_dtype=F,
             shape_type=I32)[0])

with open(os.path.join(HERE, "list_ops_golden.json"), "w") as f:
    json.dump({"tensorflow_version": tf.__version__, "cases": cases}, f, indent=1)
print(f"wrote {len(cases)} cases")
