"""Writes tests/data/array_ops_golden.json: outputs of TensorFlow's array
kernels (StridedSlice, Slice, GatherV2, Transpose, Tile, ConcatV2, Pack) on
arange inputs, for dflow/ops/array_ops_test.cc.

Run with a TensorFlow 2.x install:  python3 tests/data/gen_array_reference.py
Data input i holds arange(n) + 100 * i as float32.
"""
import json
import os

import numpy as np
import tensorflow as tf

raw = tf.raw_ops
cases = []


def data(shapes):
    return [tf.constant(np.arange(int(np.prod(s)), dtype=np.float32).reshape(s) + 100 * i)
            for i, s in enumerate(shapes)]


def add(name, op, shapes, index, attrs, fn):
    out = fn(*data(shapes))
    cases.append({
        "name": name, "op": op, "data": shapes,
        "index": [{"shape": list(np.shape(v)), "values": np.ravel(v).astype(int).tolist()}
                  for v in index],
        "attrs": attrs, "out_shape": list(out.shape),
        "out": np.ravel(out.numpy()).astype(float).tolist(),
    })


def strided(name, shape, b, e, s, **masks):
    add(name, "StridedSlice", [shape], [b, e, s], masks,
        lambda x: raw.StridedSlice(input=x, begin=b, end=e, strides=s, **masks))


strided("range", [5], [1], [4], [1])
strided("reverse_clamped", [5], [-1], [-6], [-1])
strided("every_other_masked", [5], [0], [0], [2], begin_mask=1, end_mask=1)
strided("negative_stride_end_masked", [5], [4], [0], [-2], end_mask=1)
strided("shrink_first", [2, 3, 4], [1], [2], [1], shrink_axis_mask=1)
strided("ellipsis_then_shrink", [2, 3, 4], [0, 1], [0, 2], [1, 1], ellipsis_mask=1,
        shrink_axis_mask=2)
strided("new_axis_first", [2, 3], [0, 0], [0, 0], [1, 1], new_axis_mask=1, begin_mask=2,
        end_mask=2)
strided("shrink_ellipsis_newaxis_reverse", [2, 3, 4], [1, 0, 0, 0], [2, 0, 0, 0],
        [1, 1, 1, -2], ellipsis_mask=2, new_axis_mask=4, shrink_axis_mask=1,
        begin_mask=8, end_mask=8)
strided("empty_result", [5], [3], [1], [1])
strided("clamped_both", [5], [-10], [10], [1])
strided("to_scalar", [5], [2], [3], [1], shrink_axis_mask=1)
strided("negative_begins_strides", [3, 4], [-1, 1], [-4, -1], [-1, 2])
strided("implicit_trailing", [2, 3, 4], [1], [2], [1])
strided("empty_input", [0, 3], [0, 0], [0, 0], [1, 1], begin_mask=3, end_mask=3)
strided("new_axis_wins_over_shrink", [2, 3], [0], [1], [1], new_axis_mask=1,
        shrink_axis_mask=1)
strided("ellipsis_only", [2, 3], [0], [0], [1], ellipsis_mask=1)
strided("ellipsis_bit_beyond_spec", [2, 3], [1], [2], [1], ellipsis_mask=4)
strided("shrink_then_ellipsis", [2, 3, 4], [1, 0], [2, 0], [1, 1], ellipsis_mask=2,
        shrink_axis_mask=1)
strided("both_strided", [4, 5], [0, 0], [0, 0], [2, -3], begin_mask=3, end_mask=3)
strided("shrink_negative_index", [3, 4], [0, -1], [0, 0], [1, 1], begin_mask=1,
        end_mask=1, shrink_axis_mask=2)
strided("shrink_ignores_masks", [2, 3], [1], [0], [1], shrink_axis_mask=1, begin_mask=1,
        end_mask=1)
strided("middle_dims", [2, 3, 4, 5], [0, 1, 1], [0, 3, 4], [1, 1, 2], begin_mask=1,
        end_mask=1)
strided("zero_length_reverse", [4], [1], [1], [-1])


def slice_(name, shape, b, sz):
    add(name, "Slice", [shape], [b, sz], {}, lambda x: raw.Slice(input=x, begin=b, size=sz))


slice_("slice_to_end", [3, 4], [1, 1], [2, -1])
slice_("slice_3d", [2, 3, 4], [0, 1, 2], [-1, 1, 2])
slice_("slice_empty", [2, 3], [2, 3], [0, -1])
slice_("slice_whole", [2, 3], [0, 0], [-1, -1])


def gather(name, shape, idx, axis, batch_dims=0):
    add(name, "GatherV2", [shape], [idx, axis], {"batch_dims": batch_dims},
        lambda x: raw.GatherV2(params=x, indices=idx, axis=axis, batch_dims=batch_dims))


gather("rows", [3, 4], [2, 0, 2], 0)
gather("columns_2d_indices", [3, 4], [[1, 3], [0, 0]], 1)
gather("scalar_index_negative_axis", [3, 4], 2, -1)
gather("batch_dims_1_axis_1", [2, 3, 4], [[0, 2], [1, 1]], 1, 1)
gather("batch_dims_1_axis_2", [2, 3, 4], [[3, 0], [1, 2]], 2, 1)
gather("batch_dims_negative", [2, 3], [[0], [2]], 1, -1)
gather("empty_indices", [3, 4], np.zeros([0], np.int32), 1)
gather("middle_axis", [2, 3, 4], [[2]], 1)


def transpose(name, shape, perm):
    add(name, "Transpose", [shape], [perm], {}, lambda x: raw.Transpose(x=x, perm=perm))


transpose("matrix", [2, 3], [1, 0])
transpose("rotate_3d", [2, 3, 4], [2, 0, 1])
transpose("swap_outer_3d", [2, 3, 4], [1, 0, 2])
transpose("unit_dims", [2, 1, 3, 1], [3, 2, 0, 1])
transpose("nchw_to_nhwc_like", [2, 3, 4, 5], [0, 3, 1, 2])
transpose("negative_perm", [3, 4], [-1, 0])
transpose("big_matrix", [33, 70], [1, 0])


def tile(name, shape, m):
    add(name, "Tile", [shape], [m], {}, lambda x: raw.Tile(input=x, multiples=m))


tile("tile_2d", [2, 3], [2, 2])
tile("tile_1d", [3], [3])
tile("tile_3d", [2, 1, 2], [1, 3, 2])
tile("tile_zero", [2, 3], [0, 2])


def concat(name, shapes, axis):
    add(name, "ConcatV2", shapes, [axis], {"N": len(shapes)},
        lambda *xs: raw.ConcatV2(values=list(xs), axis=axis))


concat("concat_columns", [[2, 3], [2, 2]], 1)
concat("concat_rows_with_empty", [[2, 3], [1, 3], [0, 3]], 0)
concat("concat_negative_axis", [[2, 3], [2, 1]], -1)
concat("concat_3d_middle", [[2, 1, 2], [2, 3, 2]], 1)


def pack(name, shapes, axis):
    add(name, "Pack", shapes, [], {"N": len(shapes), "axis": axis},
        lambda *xs: raw.Pack(values=list(xs), axis=axis))


pack("pack_axis0", [[2, 3]] * 3, 0)
pack("pack_axis1", [[2, 3]] * 3, 1)
pack("pack_last", [[2, 3]] * 2, -1)
pack("pack_scalars", [[]] * 3, 0)

def add_random_strided(count, seed):
    """Random sparse specs, valid or not; invalid ones record TF's message."""
    rng = np.random.default_rng(seed)
    shape = [3, 4, 2]
    for k in range(count):
        n = int(rng.integers(1, 5))
        b = rng.integers(-5, 6, n).tolist()
        e = rng.integers(-5, 6, n).tolist()
        s = [int(v) for v in rng.choice([-3, -2, -1, 1, 1, 2, 3, 0] if k % 25 == 0
                                         else [-3, -2, -1, 1, 1, 2, 3], n)]
        masks = {name: int(rng.integers(0, 1 << n)) if rng.random() < p else 0
                 for name, p in [("begin_mask", 0.5), ("end_mask", 0.5),
                                 ("ellipsis_mask", 0.3), ("new_axis_mask", 0.2),
                                 ("shrink_axis_mask", 0.3)]}
        if masks["ellipsis_mask"] and rng.random() < 0.8:  # Mostly one ellipsis.
            masks["ellipsis_mask"] &= -masks["ellipsis_mask"]
        name = "random_strided_%d" % k
        try:
            strided(name, shape, b, e, s, **masks)
        except tf.errors.InvalidArgumentError as err:
            msg = err.message.split("}}")[-1].split(" [Op:")[0].strip()
            cases.append({"name": name, "op": "StridedSlice", "data": [shape],
                          "index": [{"shape": [n], "values": v} for v in (b, e, s)],
                          "attrs": masks, "error": msg})


add_random_strided(200, 7)

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "array_ops_golden.json")
with open(out, "w") as f:
    json.dump({"tensorflow_version": tf.__version__, "cases": cases}, f, indent=0)
print("wrote", len(cases), "cases to", out)
