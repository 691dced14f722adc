#!/usr/bin/env python3
"""Writes tests/data/parsing_golden.json: what TensorFlow's parsing and decoding
kernels return (or which error they raise) for the inputs below, for
dflow/ops/parsing_golden_test.cc.

Run with a TensorFlow 2.x install:  python3 tests/data/gen_parsing_reference.py

Each case: {"name", "op", "attrs": {name: [kind, value]}, "inputs": [tensor],
"outputs": [tensor]} or, for a failing case, "error": [fragments]. A tensor is
{"dtype", "shape", "values"} (with "compare_prefix", only that many leading
values of the outputs are compared); strings are hex (records and images are bytes),
floats that JSON cannot hold are "nan", "inf", "-inf". Every error fragment is
checked here against TensorFlow's own message, except those listed in
"dflow_error" (where dflow says more than TensorFlow, e.g. the record index).
"""
import json
import math
import os

import numpy as np
import tensorflow as tf

raw = tf.raw_ops
HERE = os.path.dirname(os.path.abspath(__file__))
cases = []


def tensor_json(t):
    t = tf.convert_to_tensor(t)
    if t.dtype == tf.string:  # an object array: numpy's bytes dtype would drop trailing NULs
        a = np.array(t.numpy(), dtype=object)
        return {"dtype": "string", "shape": list(a.shape),
                "values": [bytes(v).hex() for v in a.reshape(-1)]}
    a = np.asarray(t.numpy())
    if t.dtype in (tf.float32, tf.float64):
        values = [("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
                  if not math.isfinite(v) else float(v) for v in np.ravel(a)]
    else:
        values = [int(v) for v in np.ravel(a)]
    return {"dtype": t.dtype.name, "shape": list(a.shape), "values": values}


def attr_json(v):
    """(kind, value) of a Python attr value, as the C++ test sets it."""
    if isinstance(v, bool):
        return ["bool", v]
    if isinstance(v, int):
        return ["int", v]
    if isinstance(v, float):
        return ["float", v]
    if isinstance(v, str):
        return ["string", v]
    if isinstance(v, tf.dtypes.DType):
        return ["type", v.name]
    if isinstance(v, tuple) and v[0] == "shapes":
        return ["list(shape)", [[-1 if d is None else d for d in s] for s in v[1]]]
    if isinstance(v, list):
        if all(isinstance(x, tf.dtypes.DType) for x in v) and v:
            return ["list(type)", [x.name for x in v]]
        if all(isinstance(x, int) for x in v) and v:
            return ["list(int)", v]
        if all(isinstance(x, str) for x in v) and v:
            return ["list(string)", v]
    raise ValueError(f"attr {v!r}")


def flatten(out):
    """The op's outputs in order, lists expanded."""
    if isinstance(out, tf.Tensor):
        return [out]
    flat = []
    for o in out:
        flat.extend(flatten(o) if not isinstance(o, tf.Tensor) else [o])
    return flat


def case(name, op, inputs, attrs, error=None, dflow_error=None):
    """Runs raw op `op` with `inputs` (a list of (arg name, value or list)) and
    `attrs`; empty list attrs go to "empty_lists" (their kind is unknown)."""
    kwargs = dict(inputs)
    # Attrs that the Python wrappers infer from the inputs are not passed.
    inferred = ("Tdense", "OUT_TYPE", "T", "Nsparse", "Ndense")
    py_attrs = {k: v for k, v in attrs.items() if k not in inferred}
    for k, v in attrs.items():
        if isinstance(v, tuple) and v[0] == "shapes":
            py_attrs[k] = [tf.TensorShape([None if d == -1 else d for d in s]) for s in v[1]]
    flat_inputs = []
    for _, v in inputs:
        flat_inputs.extend(v if isinstance(v, list) else [v])
    entry = {"name": name, "op": op,
             "attrs": {k: attr_json(v) for k, v in attrs.items()
                       if not (isinstance(v, list) and not v)},
             "empty_lists": [k for k, v in attrs.items() if isinstance(v, list) and not v],
             "inputs": [tensor_json(t) for t in flat_inputs]}
    try:
        out = getattr(raw, op)(**kwargs, **py_attrs)
        if error:
            raise AssertionError(f"{name}: expected an error, TensorFlow returned {out}")
        entry["outputs"] = [tensor_json(t) for t in flatten(out)]
    except tf.errors.OpError as e:
        if not error:
            raise
        for fragment in error:
            assert fragment in e.message, f"{name}: {fragment!r} not in {e.message!r}"
        entry["error"] = error + (dflow_error or [])
    cases.append(entry)


def example(**features):
    f = {}
    for k, v in features.items():
        if isinstance(v[0], float):
            f[k] = tf.train.Feature(float_list=tf.train.FloatList(value=v))
        elif isinstance(v[0], int):
            f[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=v))
        else:
            f[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=v))
    return tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString()


def parse_v2(name, serialized, names=(), sparse=(), dense=(), ragged=(), **kw):
    """sparse: [(key, dtype)], dense: [(key, dtype, shape, default)], ragged:
    [(key, value dtype, split dtype)]."""
    inputs = [("serialized", tf.constant(serialized, tf.string)),
              ("names", tf.constant(list(names), tf.string)),
              ("sparse_keys", tf.constant([k for k, _ in sparse], tf.string)),
              ("dense_keys", tf.constant([d[0] for d in dense], tf.string)),
              ("ragged_keys", tf.constant([r[0] for r in ragged], tf.string)),
              ("dense_defaults", [tf.constant(d[3], d[1]) for d in dense])]
    attrs = {"num_sparse": len(sparse), "sparse_types": [t for _, t in sparse],
             "Tdense": [d[1] for d in dense], "dense_shapes": ("shapes", [d[2] for d in dense]),
             "ragged_value_types": [r[1] for r in ragged],
             "ragged_split_types": [r[2] for r in ragged]}
    case(name, "ParseExampleV2", inputs, attrs, **kw)


def wire_varint(n):
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([b])
        out += bytes([b | 0x80])


def wire_bytes(field, payload):
    return wire_varint(field << 3 | 2) + wire_varint(len(payload)) + payload


def wire_example(entries):
    return wire_bytes(1, b"".join(wire_bytes(1, wire_bytes(1, k) + wire_bytes(2, f))
                                  for k, f in entries))


# --- ParseExampleV2 ---------------------------------------------------------
e0 = example(f=[1.5, -2.0], i=[7], s=[b"x"], sp=[3, 4, 5], ss=[b"a", b"bc"], sf=[0.25],
             rf=[1.0, 2.0, 3.0], ri=[9])
e1 = example(i=[8], sp=[6], rf=[4.0])
e2 = example(f=[3.0, 4.0], i=[-9], s=[b""], ss=[b"d"], sf=[1.0, 2.0], ri=[1, 2])
ALL = dict(sparse=[("sp", tf.int64), ("ss", tf.string), ("sf", tf.float32)],
           dense=[("f", tf.float32, [2], [0.5, 0.5]), ("i", tf.int64, [], []),
                  ("s", tf.string, [], "dflt")],
           ragged=[("rf", tf.float32, tf.int64), ("ri", tf.int64, tf.int32)])
parse_v2("batch_dense_sparse_ragged", [e0, e1, e2], **ALL)
parse_v2("single_dense_sparse_ragged", e0, **ALL)
parse_v2("batch_with_names", [e0, e1], names=["first", "second"],
         dense=[("i", tf.int64, [], [])], sparse=[("sp", tf.int64)])
parse_v2("dense_matrix", [example(m=[1, 2, 3, 4, 5, 6])],
         dense=[("m", tf.int64, [2, 3], np.zeros([2, 3], np.int64))])
parse_v2("variable_length_dense_padded",
         [example(v=[1.0, 2.0, 3.0, 4.0]), example(v=[5.0, 6.0]), example()],
         dense=[("v", tf.float32, [-1, 2], -1.0)])
parse_v2("empty_batch", tf.constant([], tf.string), **ALL)
parse_v2("duplicate_key_last_wins_features_merge",
         [wire_example([(b"a", wire_bytes(2, wire_bytes(1, b"\x00\x00\x80\x3f"))),
                        (b"a", wire_bytes(2, wire_bytes(1, b"\x00\x00\x00\x40")))]) +
          wire_example([(b"b", wire_bytes(3, wire_varint(8) + wire_varint(5) +
                                          wire_varint(8) + wire_varint(300)))])],
         sparse=[("a", tf.float32), ("b", tf.int64)])
parse_v2("empty_feature_takes_default", [wire_example([(b"a", b"")])],
         dense=[("a", tf.float32, [2], [1.0, 2.0])], sparse=[("a", tf.float32)])
parse_v2("unknown_keys_ignored", [example(zz=[1], f=[1.0, 2.0])],
         dense=[("f", tf.float32, [2], [])])
parse_v2("error_dense_wrong_length", [e0, e1, example(f=[1.0])],
         dense=[("f", tf.float32, [2], [0.0, 0.0])],
         error=["Name: <unknown>, Key: f, Index: 2.  Number of float values != expected.  "
                "Values size: 1 but output shape: [2]"])
parse_v2("error_dense_wrong_length_named", [e0, example(f=[1.0])], names=["a", "b"],
         dense=[("f", tf.float32, [2], [0.0, 0.0])], error=["Name: b, Key: f, Index: 1."])
parse_v2("error_dense_wrong_type", [e0], dense=[("sp", tf.float32, [3], [])],
         error=["Name: <unknown>, Key: sp, Index: 0.  Data types don't match. "
                "Data type: int64 but expected type: float"])
parse_v2("error_sparse_wrong_type", [e1, e0], sparse=[("ss", tf.int64)],
         error=["Name: <unknown>, Key: ss, Index: 1.  Data types don't match. "
                "Expected type: int64, Actual type: string"])
parse_v2("error_ragged_wrong_type", [e0], ragged=[("rf", tf.string, tf.int64)],
         error=["Key: rf, Index: 0.  Data types don't match."])
parse_v2("error_required_missing", [e0, e1], dense=[("f", tf.float32, [2], [])],
         error=["Name: <unknown>, Feature: f (data type: float) is required but could not "
                "be found."])
parse_v2("error_malformed_record", [e0, b"\x0a\x05abc"], dense=[("f", tf.float32, [2], [])],
         error=["Could not parse example input"], dflow_error=["Index: 1"])
parse_v2("error_default_shape", [e0], dense=[("f", tf.float32, [2], [1.0, 2.0, 3.0])],
         error=["def_value[0].shape() == [3] is not compatible with dense_shapes_[0] == [2]"])
parse_v2("error_variable_length_default", [e0], dense=[("f", tf.float32, [-1, 3], [])],
         error=["dense_shape[0] is a variable length shape: [?,3], therefore def_value[0] "
                "must contain a single element (the padding element).  But its shape is: [0]"])
parse_v2("error_variable_length_stride", [example(v=[1.0, 2.0, 3.0])],
         dense=[("v", tf.float32, [-1, 2], 0.0)],
         error=["Key: v, Index: 0.  Number of float values is not a multiple of stride length. "
                "Saw 3 values but output shape is: [?,2]"])

# --- ParseExample (TensorFlow 1) ------------------------------------------------
def parse_v1(name, serialized, sparse=(), dense=(), **kw):
    inputs = [("serialized", tf.constant(serialized, tf.string)),
              ("names", tf.constant([], tf.string)),
              ("sparse_keys", [tf.constant(k) for k, _ in sparse]),
              ("dense_keys", [tf.constant(d[0]) for d in dense]),
              ("dense_defaults", [tf.constant(d[3], d[1]) for d in dense])]
    attrs = {"Nsparse": len(sparse), "Ndense": len(dense), "sparse_types": [t for _, t in sparse],
             "Tdense": [d[1] for d in dense], "dense_shapes": ("shapes", [d[2] for d in dense])}
    case(name, "ParseExample", inputs, attrs, **kw)


parse_v1("v1_batch_dense_sparse", [e0, e1, e2], sparse=ALL["sparse"], dense=ALL["dense"])
parse_v1("error_v1_wrong_length", [e0, example(f=[1.0])],
         dense=[("f", tf.float32, [2], [0.0, 0.0])],
         error=["Name: <unknown>, Key: f, Index: 1.  Number of float values != expected."])
parse_v1("error_v1_scalar", e0, dense=[("f", tf.float32, [2], [0.0, 0.0])],
         error=["Expected serialized to be a vector, got shape: []"])

# --- ParseSingleExample ----------------------------------------------------
case("single_example", "ParseSingleExample",
     [("serialized", tf.constant(e0)),
      ("dense_defaults", [tf.constant([0.0, 0.0]), tf.constant("none")])],
     {"num_sparse": 2, "sparse_keys": ["sp", "ss"], "dense_keys": ["f", "nokey"],
      "sparse_types": [tf.int64, tf.string], "Tdense": [tf.float32, tf.string],
      "dense_shapes": ("shapes", [[2], []])})
case("error_single_example_type", "ParseSingleExample",
     [("serialized", tf.constant(e0)), ("dense_defaults", [tf.constant([0.0, 0.0, 0.0])])],
     {"num_sparse": 0, "sparse_keys": [], "dense_keys": ["sp"], "sparse_types": [],
      "Tdense": [tf.float32], "dense_shapes": ("shapes", [[3]])},
     error=["Key: sp", "Data types don't match."])

# --- DecodeCSV ---------------------------------------------------------------
ROW_DEFAULTS = [tf.constant([1.0]), tf.constant([0]), tf.constant([""]),
                tf.constant([0], tf.int64), tf.constant([0.0], tf.float64)]
CSV_TYPES = [tf.float32, tf.int32, tf.string, tf.int64, tf.float64]


def csv(name, records, defaults=ROW_DEFAULTS, **kw):
    error = kw.pop("error", None)
    dflow_error = kw.pop("dflow_error", None)
    attrs = {"OUT_TYPE": [d.dtype for d in defaults]}
    attrs.update(kw)
    case(name, "DecodeCSV", [("records", tf.constant(records)), ("record_defaults", defaults)],
         attrs, error=error, dflow_error=dflow_error)


csv("csv_types_quotes_defaults", ["1.5,2,ab,3,4.25", '2,,"q,""x",,', ' 7 , -3,"",9,1e400'])
csv("csv_matrix_shape", tf.constant([["1,2,a,3,4", "5,6,b,7,8"], ["0,0,,0,0", "-1,-2,c,-3,-4"]]))
csv("csv_na_value", ["1.5,NA,ab,3,NA"], na_value="NA")
csv("csv_delim", ["1.5|2|a,b|3|4"], field_delim="|")
csv("csv_no_quote_delim", ['1.5,2,"ab",3,4'], use_quote_delim=False)
csv("csv_select_cols", ["9,1.5,2,ab,3,4,extra"], defaults=[tf.constant([0.0]), tf.constant([""])],
    select_cols=[1, 3])
csv("csv_numbers_with_spaces_and_specials", [" 1 , 2.5e1,nan,-inf"],
    defaults=[tf.constant([0]), tf.constant([0.0]), tf.constant([0.0]), tf.constant([0.0],
                                                                                    tf.float64)])
csv("error_csv_too_few_fields", ["1.5,2,ab,3,4", "1.5,2,ab,3"],
    error=["Expect 5 fields but have 4 in record 1"])
csv("error_csv_too_many_fields", ["1.5,2,ab,3,4,5"], error=["Expect 5 fields but have 6 in record 0"])
csv("error_csv_bad_int", ["1.5,2,ab,3,4", "1.5,x2,ab,3,4"],
    error=["Field 1 in record 1 is not a valid int32: x2"])
csv("error_csv_bad_float", ["1.5x,2,ab,3,4"], error=["Field 0 in record 0 is not a valid float: 1.5x"])
csv("error_csv_int_overflow", ["1,99999999999,a,3,4"],
    error=["Field 1 in record 0 is not a valid int32: 99999999999"])
csv("error_csv_required", ["1.5,,ab,3,4"],
    defaults=[tf.constant([1.0]), tf.constant([], tf.int32), tf.constant([""]),
              tf.constant([0], tf.int64), tf.constant([0.0], tf.float64)],
    error=["Field 1 is required but missing in record 0!"])
csv("error_csv_quote_in_unquoted", ['1.5,2,a"b,3,4'],
    error=["Unquoted fields cannot have quotes/CRLFs inside"], dflow_error=["in record 0"])
csv("error_csv_bad_quote_end", ['1.5,2,"ab"c,3,4'],
    error=["Quote inside a string has to be escaped by another quote"])
csv("error_csv_unterminated_quote", ['1.5,2,"ab,3,4'],
    error=["Quoted field has to end with quote followed by delim or end"])
csv("error_csv_select_cols_missing", ["9,1.5,2"], defaults=[tf.constant([0.0]), tf.constant([""])],
    select_cols=[1, 3], error=["Expect 2 fields but have 1 in record 0"])

# --- StringToNumber ----------------------------------------------------------
def to_number(name, strings, out_type, **kw):
    case(name, "StringToNumber", [("string_tensor", tf.constant(strings))],
         {"out_type": out_type}, **kw)


to_number("to_float", [["1.5", " 2", "-0"], ["1e400", "INF", "0x10"], ["1.", ".5", "3.5e38"]],
          tf.float32)
to_number("to_double", ["1e400", "-Infinity", "1e-320", "+3.25"], tf.float64)
to_number("to_int32", ["3", " 2 ", "-7", "+5", "007"], tf.int32)
to_number("to_int64", ["9223372036854775807", "-9223372036854775808"], tf.int64)
to_number("error_to_float", ["1", "x"], tf.float32,
          error=["StringToNumberOp could not correctly convert string: x"])
to_number("error_to_int32_float_text", ["3.0"], tf.int32,
          error=["StringToNumberOp could not correctly convert string: 3.0"])
to_number("error_to_int32_overflow", ["99999999999"], tf.int32,
          error=["StringToNumberOp could not correctly convert string: 99999999999"])
to_number("error_to_float_partial_word", ["infinit"], tf.float32,
          error=["StringToNumberOp could not correctly convert string: infinit"])

# --- StringSplit / StringSplitV2 --------------------------------------------
TEXT = ["a b  c", "", " d", "e,f;g"]
case("split_skip_empty", "StringSplit", [("input", tf.constant(TEXT)), ("delimiter", tf.constant(" "))],
     {"skip_empty": True})
case("split_keep_empty", "StringSplit", [("input", tf.constant(TEXT)), ("delimiter", tf.constant(" "))],
     {"skip_empty": False})
case("split_any_of", "StringSplit", [("input", tf.constant(TEXT)), ("delimiter", tf.constant(",; "))],
     {"skip_empty": True})
case("split_chars", "StringSplit", [("input", tf.constant(["abc", "d"])),
                                    ("delimiter", tf.constant(""))], {"skip_empty": True})
case("error_split_matrix", "StringSplit", [("input", tf.constant([["a"]])),
                                           ("delimiter", tf.constant(" "))], {"skip_empty": True},
     error=["input must be a vector, got shape: [1,1]"])
case("splitv2_whitespace", "StringSplitV2", [("input", tf.constant(TEXT + ["  x\ty \n"])),
                                             ("sep", tf.constant(""))], {"maxsplit": -1})
case("splitv2_separator", "StringSplitV2", [("input", tf.constant(["a<>b<><>c", "", "<>"])),
                                            ("sep", tf.constant("<>"))], {"maxsplit": -1})
case("splitv2_maxsplit", "StringSplitV2", [("input", tf.constant(["a<>b<><>c", "q"])),
                                           ("sep", tf.constant("<>"))], {"maxsplit": 1})
case("splitv2_whitespace_maxsplit", "StringSplitV2", [("input", tf.constant(["  a b  c  "])),
                                                      ("sep", tf.constant(""))], {"maxsplit": 1})

# --- SerializeTensor / ParseTensor --------------------------------------------
for label, value in [("float", tf.constant([[1.0, 2.0], [3.0, -4.5]])),
                     ("string", tf.constant([b"ab", b"", b"\x00c"])),
                     ("int32_scalar", tf.constant(3)),
                     ("int64_empty", tf.constant([], tf.int64))]:
    case("serialize_" + label, "SerializeTensor", [("tensor", value)], {"T": value.dtype})
    case("parse_" + label, "ParseTensor", [("serialized", raw.SerializeTensor(tensor=value))],
         {"out_type": value.dtype})
case("error_parse_tensor_type", "ParseTensor",
     [("serialized", raw.SerializeTensor(tensor=tf.constant([1, 2])))], {"out_type": tf.float32},
     error=["Type mismatch between parsed tensor (int32) and dtype (float)"])
case("error_parse_tensor_garbage", "ParseTensor", [("serialized", tf.constant(b"abc"))],
     {"out_type": tf.float32}, error=["Could not parse `serialized` as TensorProto"])
case("error_parse_tensor_vector", "ParseTensor", [("serialized", tf.constant([b"a"]))],
     {"out_type": tf.float32}, error=["Expected `serialized` to be a scalar, got shape: [1]"])

# --- DecodePng / DecodeJpeg ---------------------------------------------------
yy, xx = np.mgrid[0:12, 0:16]
rgb = np.stack([xx * 16, yy * 20, (xx + yy) * 9], -1).astype(np.uint8)
rgba = np.concatenate([rgb, (xx * yy % 256).astype(np.uint8)[..., None]], -1)
gray = (xx * 15 + yy).astype(np.uint8)[..., None]
png_rgb = tf.io.encode_png(rgb)
png_rgba = tf.io.encode_png(rgba)
png_gray = tf.io.encode_png(gray)
png_16 = tf.io.encode_png(tf.constant((xx * 4000 + yy * 7)[..., None], tf.uint16))


def handmade_png(width, height, color_type, bit_depth, rows, chunks=()):
    """A PNG written chunk by chunk (TensorFlow's encoder writes no palette or
    sub-byte images): filter type 0 on every row."""
    import struct
    import zlib

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    raw_rows = b"".join(b"\x00" + bytes(r) for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) +
            b"".join(chunk(k, d) for k, d in chunks) +
            chunk(b"IDAT", zlib.compress(raw_rows)) + chunk(b"IEND", b""))


# A 4x2 palette image, entry 1 half transparent; a 4x2 2-bit grey image.
png_palette = tf.constant(handmade_png(
    4, 2, 3, 8, [[0, 1, 2, 1], [2, 2, 0, 1]],
    chunks=[(b"PLTE", bytes([255, 0, 0, 0, 255, 0, 10, 20, 30])), (b"tRNS", bytes([255, 128]))]))
png_gray2 = tf.constant(handmade_png(4, 2, 0, 2, [[0b00011011], [0b11100100]]))
jpg_rgb = tf.io.encode_jpeg(rgb, quality=90)
jpg_gray = tf.io.encode_jpeg(gray, quality=90)
for label, data in [("rgb", png_rgb), ("rgba", png_rgba), ("gray", png_gray), ("16bit", png_16)]:
    for channels in (0, 1, 3, 4):
        case(f"png_{label}_channels{channels}", "DecodePng", [("contents", data)],
             {"channels": channels, "dtype": tf.uint8})
for label, data in [("palette_trns", png_palette), ("gray_2bit", png_gray2)]:
    for channels in (0, 1, 3, 4):
        case(f"png_{label}_channels{channels}", "DecodePng", [("contents", data)],
             {"channels": channels, "dtype": tf.uint8})
case("png_decodes_jpeg", "DecodePng", [("contents", jpg_rgb)], {"channels": 0, "dtype": tf.uint8})
for label, data in [("rgb", jpg_rgb), ("gray", jpg_gray)]:
    for channels in (0, 1, 3):
        case(f"jpeg_{label}_channels{channels}", "DecodeJpeg", [("contents", data)],
             {"channels": channels})
case("jpeg_ratio2", "DecodeJpeg", [("contents", jpg_rgb)], {"ratio": 2})
case("jpeg_no_fancy_upscaling", "DecodeJpeg", [("contents", jpg_rgb)], {"fancy_upscaling": False})
case("jpeg_integer_fast", "DecodeJpeg", [("contents", jpg_rgb)], {"dct_method": "INTEGER_FAST"})
case("jpeg_integer_accurate", "DecodeJpeg", [("contents", jpg_rgb)],
     {"dct_method": "INTEGER_ACCURATE"})
case("jpeg_decodes_png", "DecodeJpeg", [("contents", png_rgb)], {"channels": 3})
case("error_jpeg_truncated", "DecodeJpeg", [("contents", tf.strings.substr(jpg_rgb, 0, 300))], {},
     error=["jpeg::Uncompress failed. Invalid JPEG data or crop window"])
# 64 rows cut at about 60% of the bytes: libjpeg completes the scan with grey
# rows, which TensorFlow returns when asked to recover (acceptable_fraction
# counts the rows libjpeg returned, so every row).
yy64, xx64 = np.mgrid[0:64, 0:24]
jpg_tall = tf.io.encode_jpeg(np.stack([xx64 * 10, yy64 * 4, (xx64 * yy64) % 256], -1)
                             .astype(np.uint8), quality=90)
jpg_cut = tf.strings.substr(jpg_tall, 0, tf.strings.length(jpg_tall) * 6 // 10)
case("jpeg_truncated_recovered", "DecodeJpeg", [("contents", jpg_cut)],
     {"try_recover_truncated": True, "acceptable_fraction": 0.1})
# Past the cut the rows depend on how the libjpeg-turbo release fills the missing
# data (TensorFlow bundles its own): only the first 15 rows (and the shape) are compared.
cases[-1]["compare_prefix"] = 15 * 24 * 3
case("error_jpeg_truncated_not_recovered", "DecodeJpeg", [("contents", jpg_cut)], {},
     error=["jpeg::Uncompress failed. Invalid JPEG data or crop window"])
case("error_png_truncated", "DecodePng", [("contents", tf.strings.substr(png_rgb, 0, 40))],
     {"channels": 0, "dtype": tf.uint8}, error=["Invalid PNG"])
case("error_not_an_image", "DecodePng", [("contents", tf.constant(b"notanimage"))],
     {"channels": 0, "dtype": tf.uint8}, error=["Unknown image file format."])
case("error_jpeg_four_channels", "DecodeJpeg", [("contents", jpg_rgb)], {"channels": 4},
     error=["JPEG does not support 4 channels"])

with open(os.path.join(HERE, "parsing_golden.json"), "w") as f:
    json.dump({"cases": cases}, f, indent=1)
print(f"wrote {len(cases)} cases to parsing_golden.json")
