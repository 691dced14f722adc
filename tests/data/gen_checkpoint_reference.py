#!/usr/bin/env python3
"""Writes golden TensorFlow checkpoints (tensor bundle, V2) for dflow's checkpoint code.

TensorFlow's own tf.compat.v1.train.Saver (graph mode, write_version V2) writes, under
checkpoints/ beside this script (the directory is deleted first, so reruns are clean):

  basic/model.{index,data-00000-of-00001}
      one variable per dtype dflow supports (float32, float64, int32, int64, uint8, bool,
      string): a scalar, vectors, a [2,3,4] tensor, a zero-element [0,3] tensor; strings
      with an empty string, non-ASCII UTF-8 ("héllo wörld ✓"), and, in their own variable
      (`str_bytes`), strings holding NUL and 0xff bytes (not valid UTF-8).
  partitioned/model.*
      `emb` [10,4] partitioned along axis 0 into 3 slices (rows 4,3,3; reference variable),
      `cols` [3,6] partitioned along axis 1 into 2 slices (columns 3,3; resource variable),
      and a plain variable `plain`. The index holds, per partitioned variable, a full-tensor
      entry listing its slices and one entry per slice, under TensorFlow's slice keys.
  sharded/model.{index,data-00000-of-00002,data-00001-of-00002}
      Saver(sharded=True) over variables on /cpu:0 and /cpu:1 of a session with
      device_count {"CPU": 2}: two shards, merged by MergeV2Checkpoints.
  <name>/checkpoint
      the CheckpointState, rewritten with the relative path "model" and no timestamps
      (the Saver writes absolute paths and wall-clock times).
  expected.json
      per checkpoint:
        "prefix": "basic/model" (relative to checkpoints/),
        "files": the file names of the bundle,
        "tensors": every key tf.train.list_variables reports, with "name", "shape",
          "dtype" ("float32", ..., "string") and "values" (flat, row-major; the full
          assembled value for a partitioned variable; strings as hex of their bytes),
          plus, for `str_*` tensors, "utf8": whether every element is valid UTF-8;
        "slice_restores": for partitioned, slices to restore with RestoreV2 (a
          shape_and_slice spec spanning two stored slices) and their values;
        "raw_index": every key of the .index as TensorFlow wrote it (LevelDB table parsed
          here, in Python): "key_hex", and for the header (the empty key) num_shards,
          endianness, version; for the others dtype, shape, shard_id, offset, size, crc32c
          (masked, as stored) and slices ([[start, length], ...] per slice, length -1 for
          a full dimension), so dflow's tests can check its slice keys and offsets are
          TensorFlow's byte for byte.

Run: python3 tests/data/gen_checkpoint_reference.py   (needs tensorflow; TF 2.21 made the
     checked-in files)
"""
import json
import os
import shutil

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import tensor_bundle_pb2  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoints")

# Strings: empty, non-ASCII UTF-8, and (str_bytes) bytes that are not UTF-8.
STR_UTF8 = [b"", "héllo wörld ✓".encode(), b"plain ascii", b"tab\tnewline\n\"quote\"\\"]
STR_BYTES = [b"a\x00b", b"\xff\xfe\x00\xff", b"", "ü".encode() + b"\xff", b"\x80"]


def floats(n, scale=0.1, offset=-1.7, dtype=np.float32):
    return (scale * np.arange(n) + offset).astype(dtype)


def basic_values():
    rng = np.random.RandomState(20240601)
    return {
        "f32_scalar": np.float32(3.14159),
        "f32_vector": floats(7),
        "f32_3d": (floats(24) * 1.37).reshape(2, 3, 4),
        "f32_empty": np.zeros([0, 3], np.float32),
        "f64_matrix": rng.normal(size=(3, 2)).astype(np.float64),
        "f64_scalar": np.float64(-2.0 / 3.0),
        "i32_vector": np.array([0, 1, -1, 2**31 - 1, -2**31, 12345], np.int32),
        "i64_vector": np.array([0, -1, 2**40 + 7, -2**62, 2**63 - 1], np.int64),
        "i64_scalar": np.int64(42),
        "u8_vector": np.array([0, 1, 127, 128, 254, 255], np.uint8),
        "bool_matrix": np.array([[True, False, True], [False, False, True]]),
        "str_utf8": np.array(STR_UTF8, dtype=object),
        "str_bytes": np.array(STR_BYTES, dtype=object),
        "str_scalar": np.array("héllo wörld ✓".encode(), dtype=object),
    }


EMB = (floats(40, 0.25, -3.3)).reshape(10, 4)
COLS = (floats(18, -0.7, 2.9)).reshape(3, 6)
PLAIN = np.array([[1.5, -2.25], [0.1, 1e-3]], np.float32)


def partition_init(full):
    """An initializer giving each partition its piece of `full`."""
    def init(shape, dtype=None, partition_info=None):
        off = partition_info.var_offset if partition_info is not None else [0] * len(shape)
        piece = full[tuple(slice(o, o + s) for o, s in zip(off, shape))]
        return tf.constant(piece, dtype=dtype)
    return init


def save(graph, saver, path, config=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf1.Session(graph=graph, config=config) as sess:
        sess.run(tf1.global_variables_initializer())
        saver.save(sess, path, write_meta_graph=False)
    # The Saver's CheckpointState holds absolute paths and timestamps: keep a relative one.
    with open(os.path.join(os.path.dirname(path), "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "model"\nall_model_checkpoint_paths: "model"\n')


def make_basic():
    g = tf.Graph()
    with g.as_default():
        for name, value in basic_values().items():
            tf1.Variable(tf.constant(value), name=name)
        saver = tf1.train.Saver(write_version=tf1.train.SaverDef.V2)
    save(g, saver, os.path.join(HERE, "basic", "model"))
    return g


def make_partitioned():
    g = tf.Graph()
    with g.as_default():
        tf1.get_variable("emb", shape=[10, 4], initializer=partition_init(EMB),
                         partitioner=tf1.fixed_size_partitioner(3), use_resource=False)
        tf1.get_variable("cols", shape=[3, 6], initializer=partition_init(COLS),
                         partitioner=tf1.fixed_size_partitioner(2, axis=1), use_resource=True)
        tf1.get_variable("plain", initializer=tf.constant(PLAIN))
        saver = tf1.train.Saver(write_version=tf1.train.SaverDef.V2)
    save(g, saver, os.path.join(HERE, "partitioned", "model"))
    return g


def make_sharded():
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            tf1.Variable(tf.constant(floats(6).reshape(2, 3)), name="a")
            tf1.Variable(tf.constant(np.int64(7)), name="global_step")
        with tf.device("/cpu:1"):
            tf1.Variable(tf.constant(floats(5, 1.1, 0.5, np.float64)), name="b")
            tf1.Variable(tf.constant(np.array([b"shard", b"\xffone"], dtype=object)),
                         name="c")
        saver = tf1.train.Saver(sharded=True, write_version=tf1.train.SaverDef.V2)
    save(g, saver, os.path.join(HERE, "sharded", "model"),
         config=tf1.ConfigProto(device_count={"CPU": 2}))
    return g


# --- A minimal LevelDB table reader (TensorFlow's bundle index format). ---

def varint(buf, pos):
    result, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def block_entries(block):
    """(key, value) pairs of one block: entries, then restart offsets and their count."""
    num_restarts = int.from_bytes(block[-4:], "little")
    end = len(block) - 4 - 4 * num_restarts
    pos, key, out = 0, b"", []
    while pos < end:
        shared, pos = varint(block, pos)
        unshared, pos = varint(block, pos)
        value_len, pos = varint(block, pos)
        key = key[:shared] + block[pos:pos + unshared]
        pos += unshared
        out.append((key, block[pos:pos + value_len]))
        pos += value_len
    return out


def read_block(data, handle):
    offset, pos = varint(handle, 0)
    size, pos = varint(handle, pos)
    assert data[offset + size] == 0, "compressed block"  # the trailer's compression type
    return data[offset:offset + size]


def table_entries(path):
    with open(path, "rb") as f:
        data = f.read()
    footer = data[-48:]
    assert int.from_bytes(footer[40:48], "little") == 0xdb4775248b80fb57, "bad magic"
    _, pos = varint(footer, 0)   # metaindex handle: offset, size
    _, pos = varint(footer, pos)
    index = read_block(data, footer[pos:])
    entries = []
    for _, handle in block_entries(index):
        entries.extend(block_entries(read_block(data, handle)))
    return entries


def raw_index(prefix):
    out = []
    for key, value in table_entries(prefix + ".index"):
        row = {"key_hex": key.hex()}
        if key == b"":
            h = tensor_bundle_pb2.BundleHeaderProto.FromString(value)
            row.update(num_shards=h.num_shards, endianness=h.endianness,
                       version={"producer": h.version.producer,
                                "min_consumer": h.version.min_consumer})
        else:
            e = tensor_bundle_pb2.BundleEntryProto.FromString(value)
            row.update(dtype=tf.dtypes.as_dtype(e.dtype).name,
                       shape=[d.size for d in e.shape.dim], shard_id=e.shard_id,
                       offset=e.offset, size=e.size, crc32c=e.crc32c,
                       slices=[[[x.start, x.length if x.HasField("length") else -1]
                                for x in s.extent] for s in e.slices])
        row["value_hex"] = value.hex()
        out.append(row)
    return out


# --- expected.json ---

def json_values(value, dtype):
    flat = np.asarray(value).reshape(-1)
    if dtype == tf.string:
        return [bytes(v).hex() for v in flat]
    if dtype == tf.bool:
        return [bool(v) for v in flat]
    if dtype.is_floating:
        return [float(v) for v in flat]
    return [int(v) for v in flat]


def describe(name):
    prefix = os.path.join(HERE, name, "model")
    reader = tf.train.load_checkpoint(prefix)
    dtypes = reader.get_variable_to_dtype_map()
    tensors = []
    for key, shape in tf.train.list_variables(prefix):
        value = reader.get_tensor(key)
        row = {"name": key, "shape": list(shape), "dtype": dtypes[key].name,
               "values": json_values(value, dtypes[key])}
        if dtypes[key] == tf.string:
            row["utf8"] = all(_is_utf8(bytes(v)) for v in np.asarray(value).reshape(-1))
        tensors.append(row)
    return {"prefix": f"{name}/model",
            "files": sorted(os.listdir(os.path.join(HERE, name))),
            "tensors": tensors, "raw_index": raw_index(prefix)}


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def slice_restores(name, specs):
    """Restores each (key, dtype, shape_and_slice) with TensorFlow's RestoreV2."""
    prefix = os.path.join(HERE, name, "model")
    g = tf.Graph()
    with g.as_default():
        outs = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=[k for k, _, _ in specs],
                                    shape_and_slices=[s for _, _, s in specs],
                                    dtypes=[d for _, d, _ in specs])
    with tf1.Session(graph=g) as sess:
        values = sess.run(outs)
    return [{"name": k, "shape_and_slice": s, "dtype": d.name, "shape": list(v.shape),
             "values": json_values(v, d)} for (k, d, s), v in zip(specs, values)]


def main():
    shutil.rmtree(HERE, ignore_errors=True)
    os.makedirs(HERE)
    make_basic()
    make_partitioned()
    make_sharded()
    expected = {name: describe(name) for name in ("basic", "partitioned", "sharded")}
    # Rows 2..6 span emb's slices 0 (rows 0-3) and 1 (rows 4-6); columns 2..3 of cols
    # span its two column slices; rows 7..9 are exactly emb's last slice.
    expected["partitioned"]["slice_restores"] = slice_restores("partitioned", [
        ("emb", tf.float32, "10 4 2,5:-"),
        ("emb", tf.float32, "10 4 7,3:1,2"),
        ("cols", tf.float32, "3 6 -:2,2"),
        ("cols", tf.float32, "3 6 1,2:0,6"),
    ])
    # Self-check: the assembled values are what the variables were given.
    by_name = {t["name"]: t for t in expected["partitioned"]["tensors"]}
    assert np.array_equal(np.float32(by_name["emb"]["values"]), EMB.reshape(-1))
    assert np.array_equal(np.float32(by_name["cols"]["values"]), COLS.reshape(-1))
    assert expected["sharded"]["files"] == [
        "checkpoint", "model.data-00000-of-00002", "model.data-00001-of-00002",
        "model.index"], expected["sharded"]["files"]
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, ensure_ascii=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(HERE) for n in ns)
    print(f"wrote {HERE} ({total} bytes)")


if __name__ == "__main__":
    main()
