#!/usr/bin/env python3
"""Records TensorFlow's wire format for every proto type dflow declares.

Writes, beside this script:
  tf_proto_fields.json        for every message, enum and service that
                              dflow/proto/*.proto declares, TensorFlow's own
                              definition: fields (name -> number, type, label,
                              message/enum type), enum values, service methods;
  tf_run_graph_request.hex    a RunGraphRequest serialised by TensorFlow's
                              descriptors (hex, one line);
  tf_create_worker_session_request.hex
                              a CreateWorkerSessionRequest whose ServerDef
                              holds a cluster and a session config, including
                              fields dflow does not declare.
dflow/framework/proto_compat_test.cc checks our descriptors against the JSON
and parses the fixtures.

Where TensorFlow's definitions come from (pip package tensorflow 2.x):
  - the Python modules it ships (tensorflow.core.framework.*_pb2, ...);
  - worker.proto and master.proto, which pip TensorFlow ships no Python module
    for: their compiled FileDescriptorProtos are embedded in
    libtensorflow_cc.so.2, and are read from there;
  - service methods: TensorFlow's gRPC glue is hand-written and names each
    method by its path, "/tensorflow.WorkerService/RunGraph"; the paths are
    read from libtensorflow_cc.so.2. Every method takes <Method>Request and
    returns <Method>Response (as TensorFlow's worker_service.proto and
    master_service.proto declare); both must exist in TensorFlow's pool.
Our declarations come from running protoc over dflow/proto.

Run: python3 tests/data/gen_tf_proto_fields.py   (needs tensorflow and protoc)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import tensorflow as tf
from google.protobuf import any_pb2  # noqa: F401  (loads any.proto)
from google.protobuf import descriptor_pb2
from google.protobuf import descriptor_pool
from google.protobuf import message_factory
from tensorflow.core.framework import (attr_value_pb2, cost_graph_pb2,  # noqa: F401
                                       full_type_pb2, function_pb2,
                                       device_attributes_pb2, graph_pb2,
                                       node_def_pb2, op_def_pb2,
                                       resource_handle_pb2,
                                       step_stats_pb2, summary_pb2, tensor_pb2,
                                       tensor_shape_pb2, tensor_slice_pb2,
                                       types_pb2, versions_pb2)
from tensorflow.core.protobuf import (cluster_pb2, config_pb2, debug_pb2,  # noqa: F401
                                      error_codes_pb2, named_tensor_pb2,
                                      tensor_bundle_pb2, tensorflow_server_pb2)
from tensorflow.python.training import checkpoint_state_pb2  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
LIB = os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2")
EMBEDDED_FILES = ["tensorflow/core/protobuf/worker.proto",
                  "tensorflow/core/protobuf/master.proto"]
SERVICES = ["WorkerService", "MasterService"]

FDP = descriptor_pb2.FieldDescriptorProto
TYPE_NAMES = {v: k for k, v in FDP.Type.items()}
LABEL_NAMES = {v: k for k, v in FDP.Label.items()}


def read_varint(data, pos):
    value, shift = 0, 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def embedded_file_descriptor(data, name):
    """Cuts the serialized FileDescriptorProto of `name` out of a binary.

    It starts with field 1 (the file name); top-level fields are walked until
    a tag that a FileDescriptorProto cannot have (the array's trailing NUL).
    """
    start = data.find(b"\n" + bytes([len(name)]) + name.encode())
    if start < 0:
        sys.exit(f"{name} not found in {LIB}")
    pos = start
    while True:
        tag, after = read_varint(data, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 2 and 1 <= number <= 12 and number not in (10, 11):
            length, after = read_varint(data, after)
            pos = after + length
        elif wire == 0 and number in (10, 11, 14):
            pos = read_varint(data, after)[1]
        else:
            return data[start:pos]


def tf_pool(lib_bytes):
    pool = descriptor_pool.Default()
    for name in EMBEDDED_FILES:
        raw = embedded_file_descriptor(lib_bytes, name)
        proto = descriptor_pb2.FileDescriptorProto.FromString(raw)
        pool.Add(proto)
    return pool


def our_file_set():
    protos = sorted(os.path.join("dflow/proto", f)
                    for f in os.listdir(os.path.join(ROOT, "dflow/proto"))
                    if f.endswith(".proto"))
    with tempfile.NamedTemporaryFile(suffix=".pb") as out:
        subprocess.run(["protoc", f"--proto_path={ROOT}",
                        f"--descriptor_set_out={out.name}", *protos],
                       check=True, cwd=ROOT)
        return descriptor_pb2.FileDescriptorSet.FromString(out.read())


def our_names(file_set):
    """Our messages (full name -> DescriptorProto, nested included), enums
    and services."""
    messages, enums, services = {}, [], []

    def visit(prefix, msg):
        name = f"{prefix}.{msg.name}"
        messages[name] = msg
        enums.extend(f"{name}.{e.name}" for e in msg.enum_type)
        for nested in msg.nested_type:
            visit(name, nested)

    for f in file_set.file:
        for msg in f.message_type:
            visit(f.package, msg)
        enums.extend(f"{f.package}.{e.name}" for e in f.enum_type)
        services.extend(f"{f.package}.{s.name}" for s in f.service)
    return messages, enums, services


def field_json(field):
    # Descriptor objects of recent protobuf releases have no `label`; the
    # containing type's DescriptorProto has it.
    out = {"number": field.number}
    parent = descriptor_pb2.DescriptorProto()
    field.containing_type.CopyToProto(parent)
    proto = next(f for f in parent.field if f.name == field.name)
    out["type"] = TYPE_NAMES[proto.type]
    out["label"] = LABEL_NAMES[proto.label]
    out["type_name"] = proto.type_name.lstrip(".")
    return out


def message_json(desc):
    return {f.name: field_json(f) for f in desc.fields}


def renamed_types(ours, theirs, pool):
    """TensorFlow's message types that a field of ours mirrors under another
    name (ours: tensorflow.NodeDebugInfo, TensorFlow's:
    tensorflow.NodeDef.ExperimentalDebugInfo). The test compares those
    structurally, so their TensorFlow definitions are recorded too.

    Returns ({TensorFlow name: fields}, {our name: TensorFlow name})."""
    extra, renamed = {}, {}
    todo = [(name, name) for name in theirs if name in ours]
    while todo:
        our_name, tf_name = todo.pop()
        tf_fields = theirs[tf_name] if tf_name in theirs else extra[tf_name]
        for field in ours[our_name].field:
            tf_field = tf_fields.get(field.name)
            if (field.type != FDP.TYPE_MESSAGE or not tf_field or
                    tf_field["type"] != "TYPE_MESSAGE"):
                continue
            our_type = field.type_name.lstrip(".")
            tf_type = tf_field["type_name"]
            if our_type == tf_type or our_type in renamed:
                continue
            renamed[our_type] = tf_type
            if tf_type not in theirs:
                extra[tf_type] = message_json(
                    pool.FindMessageTypeByName(tf_type))
            todo.append((our_type, tf_type))
    return extra, renamed


def service_json(lib_bytes, pool, service):
    paths = sorted(set(re.findall(
        rb"/tensorflow\." + service.encode() + rb"/([A-Za-z]+)", lib_bytes)))
    methods = {}
    for method in (p.decode() for p in paths):
        io = {"input": f"tensorflow.{method}Request",
              "output": f"tensorflow.{method}Response"}
        for name in io.values():
            pool.FindMessageTypeByName(name)  # Raises if TensorFlow lacks it.
        methods[method] = io
    return methods


def write_hex(name, message):
    with open(os.path.join(HERE, name), "w") as f:
        f.write(message.SerializeToString().hex() + "\n")


def run_graph_request(pool):
    cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.RunGraphRequest"))
    req = cls(session_handle="sess_7f3a", create_worker_session_called=True,
              graph_handle="0000000000000003", step_id=1234567890123,
              recv_key=["/job:worker/replica:0/task:0/device:CPU:0;"
                        "0000000000000001;/job:ps/replica:0/task:0/"
                        "device:CPU:0;y:0;0:0", "loss:0"],
              is_partial=True, is_last_partial_run=True,
              store_errors_in_response_body=True, request_id=-42)
    req.exec_opts.record_timeline = True
    req.exec_opts.record_partition_graphs = True
    x = req.send.add(name="x:0")
    x.tensor.CopyFrom(tf.make_tensor_proto([[1.5, -2.0], [3.25, 4.0]],
                                           dtype=tf.float32))
    n = req.send.add(name="n:0")
    n.tensor.CopyFrom(tf.make_tensor_proto([7, -8, 9], dtype=tf.int64))
    n.tensor.ClearField("tensor_content")
    n.tensor.int64_val.extend([7, -8, 9])
    return req


def create_worker_session_request(pool):
    cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.CreateWorkerSessionRequest"))
    req = cls(session_handle="sess_7f3a", isolate_session_state=True,
              master_task="/job:worker/replica:0/task:0",
              master_incarnation=-3)
    sd = req.server_def
    ps = sd.cluster.job.add(name="ps")
    ps.tasks[0] = "localhost:2222"
    ps.tasks[1] = "localhost:2223"
    worker = sd.cluster.job.add(name="worker")
    worker.tasks[3] = "10.0.0.4:2222"
    sd.job_name, sd.task_index, sd.protocol, sd.port = "ps", 1, "grpc", 2223
    # Fields dflow does not declare: they must not disturb the rest.
    sd.cluster_device_filters.jobs.add(name="ps")
    cfg = sd.default_session_config
    cfg.rpc_options.compression_algorithm = "gzip"
    cfg.gpu_options.experimental.use_unified_memory = True
    cfg.allow_soft_placement = True
    cfg.cluster_def.job.add(name="chief").tasks[0] = "localhost:1111"
    cfg.graph_options.place_pruned_graph = True
    cfg.experimental.collective_group_leader = "/job:worker/task:0"
    dev = req.cluster_device_attributes.add(
        name="/job:ps/replica:0/task:1/device:CPU:0", device_type="CPU",
        memory_limit=1 << 33, incarnation=0xFEDCBA9876543210)
    dev.locality.numa_node = 1
    return req


def main():
    with open(LIB, "rb") as f:
        lib_bytes = f.read()
    pool = tf_pool(lib_bytes)
    messages, enums, services = our_names(our_file_set())

    out = {"tensorflow_version": tf.__version__, "messages": {}, "enums": {},
           "services": {}}
    missing = []
    for name in sorted(messages):
        try:
            out["messages"][name] = message_json(
                pool.FindMessageTypeByName(name))
        except KeyError:
            missing.append(name)
    extra, renamed = renamed_types(messages, out["messages"], pool)
    out["messages"].update(extra)
    missing = [m for m in missing if m not in renamed]
    for name in sorted(enums):
        try:
            desc = pool.FindEnumTypeByName(name)
            out["enums"][name] = {v.name: v.number for v in desc.values}
        except KeyError:
            missing.append(name)
    for name in sorted(services):
        short = name.rsplit(".", 1)[1]
        if name != f"tensorflow.{short}" or short not in SERVICES:
            missing.append(name)
            continue
        out["services"][name] = service_json(lib_bytes, pool, short)
    if missing:
        print("TensorFlow has no:", ", ".join(missing), file=sys.stderr)

    with open(os.path.join(HERE, "tf_proto_fields.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    write_hex("tf_run_graph_request.hex", run_graph_request(pool))
    write_hex("tf_create_worker_session_request.hex",
              create_worker_session_request(pool))
    print(f"{len(out['messages'])} messages, {len(out['enums'])} enums, "
          f"{len(out['services'])} services")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
