#!/usr/bin/env python3
"""tf.data pipeline benchmark (issue 13): examples/s of one TensorFlow-built input
pipeline run by a dflow server and by local TensorFlow, in the same invocation, and
a raw sequential read of the same bytes as the ceiling.

The pipeline, built once by TensorFlow's client in graph mode:
  TFRecordDataset(files of `dflow data convert`: Fashion-MNIST train, 60000 Examples)
  .map(parse_single_example {image_raw, label} -> decode_raw -> float / 255)
  .shuffle(10000, seed) .batch(128, drop_remainder) .prefetch(2)
and a one-shot iterator; each step fetches one batch (features [128, 784], labels
[128]) to the client. Run locally (tf.compat.v1.Session()) and on a dflow server
(1 worker, `tf.compat.v1.Session("grpc://...")`, the iterator on /job:worker), each
for --epochs epochs after a warm-up of 20 batches, --repeats times interleaved; the
table shows medians. The fetch returns 401 KB a batch to the client, so the dflow row
includes gRPC transfer of every batch; a "consume in graph" row reduces each batch to
its sum on the server instead (what training does: the batch stays on the worker).

  python3 bench/tfdata_bench.py [--dflow build/bin/dflow] [--data /tmp/fm] [--repeats 3]

Raw read: the files read sequentially with os.read in 1 MiB chunks (page cache warm),
bytes/s converted to records/s at the files' mean record size.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests"))
from dflow_cluster import start_cluster, import_tensorflow_or_skip  # noqa: E402

BATCH = 128


def build(tf, files, device, consume):
    tf1 = tf.compat.v1
    g = tf.Graph()
    spec = {"image_raw": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record):
        ex = tf.io.parse_single_example(record, spec)
        image = tf.cast(tf.io.decode_raw(ex["image_raw"], tf.uint8), tf.float32) / 255.0
        return image, tf.cast(ex["label"], tf.int32)

    with g.as_default(), tf1.device(device):
        ds = (tf.data.TFRecordDataset(files).map(parse).shuffle(10000, seed=1)
              .batch(BATCH, drop_remainder=True).repeat().prefetch(2))
        images, labels = tf1.data.make_one_shot_iterator(ds).get_next()
        fetch = [tf.reduce_sum(images), tf.reduce_sum(labels)] if consume else [images, labels]
    return g, fetch


def examples_per_sec(tf, target, files, device, consume, batches):
    g, fetch = build(tf, files, device, consume)
    with tf.compat.v1.Session(target, graph=g) as s:
        for _ in range(20):
            s.run(fetch)
        start = time.perf_counter()
        for _ in range(batches):
            s.run(fetch)
        return batches * BATCH / (time.perf_counter() - start)


def raw_records_per_sec(files):
    total = sum(os.path.getsize(f) for f in files)
    records = 60000
    start = time.perf_counter()
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
        os.close(fd)
    return total / (time.perf_counter() - start) / (total / records)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dflow", default=os.path.join(REPO, "build", "bin", "dflow"))
    ap.add_argument("--data", help="directory of `dflow data convert` (made in a temp dir if unset)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--epochs", type=float, default=1.0)
    args = ap.parse_args()
    np, tf = import_tensorflow_or_skip()
    tmp = tempfile.mkdtemp(prefix="dflow_tfdata_bench_")
    data = args.data or os.path.join(tmp, "fm")
    if not os.path.exists(os.path.join(data, "train-00000-of-00004")):
        subprocess.run([args.dflow, "data", "convert", "--out", data, "--shards", "4"], check=True,
                       capture_output=True, timeout=300)
    files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith("train-"))
    batches = int(args.epochs * 60000 / BATCH)
    cluster, ports, servers = start_cluster(args.dflow, tmp, {"worker": 1})
    target = f"grpc://127.0.0.1:{ports['worker'][0]}"
    rows = {}
    try:
        for _ in range(args.repeats):
            for name, tgt, dev, consume in (
                    ("TensorFlow, local", "", "/cpu:0", False),
                    ("dflow server, batch fetched", target, "/job:worker/task:0", False),
                    ("TensorFlow, local, consumed in graph", "", "/cpu:0", True),
                    ("dflow server, consumed in graph", target, "/job:worker/task:0", True)):
                rows.setdefault(name, []).append(
                    examples_per_sec(tf, tgt, files, dev, consume, batches))
            rows.setdefault("raw sequential read", []).append(raw_records_per_sec(files))
    finally:
        for s in servers["worker"]:
            s.stop()
    load = os.getloadavg()
    print(f"tfdata_bench: {os.cpu_count()} CPUs, load {load[0]:.2f}, {len(files)} files, "
          f"{batches} batches of {BATCH} per run, {args.repeats} runs\n")
    print("| pipeline run by | examples/s (median) | runs |")
    print("|---|---|---|")
    for name, v in rows.items():
        print(f"| {name} | {statistics.median(v):,.0f} | "
              + ", ".join(f"{x / 1000:.1f}k" for x in v) + " |")
    local = statistics.median(rows["TensorFlow, local, consumed in graph"])
    ours = statistics.median(rows["dflow server, consumed in graph"])
    print(f"\ndflow / TensorFlow, consumed in graph: {ours / local:.2f}")


if __name__ == "__main__":
    main()
