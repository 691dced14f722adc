#!/usr/bin/env python3
"""Replicated training end to end: `dflow cluster` on 127.0.0.1.

Asynchronous between-graph and in-graph training of the MLP on
Fashion-MNIST (1 ps, 2 workers, 5 epochs: stale gradients cost a little
against the single process's 3) must reach 0.84 test accuracy, and so must training
on TFRecord files that `dflow data convert` wrote (which TensorFlow parses to
Fashion-MNIST's values), read by the graph on each worker; a bad train flag stops
the whole cluster with a clear error; SIGINT stops every task. Each run is bounded
in time.

Usage: cluster_train_test.py path/to/dflow
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

DFLOW = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="dflow_cluster_train_")
failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail[-3000:]), flush=True)
    if not ok:
        failures.append(name)


def cluster(args, timeout=240):
    start = time.time()
    p = subprocess.run([DFLOW, "cluster"] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.time() - start


def tasks_left():
    """Processes of this test's SIGINT cluster still running: those whose command line
    names this test's temporary directory (other tests' clusters may run meanwhile)."""
    p = subprocess.run(["pgrep", "-f", f"train.*{TMP}"], capture_output=True, text=True)
    return [line for line in p.stdout.split() if line.strip()]


def tensorflow_reads(path, limit=3):
    """(labels, pixel rows) of the first examples of a TFRecord file as TensorFlow parses
    them, or None when TensorFlow cannot be imported."""
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
    except ImportError:
        return None
    spec = {"image_raw": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    labels, rows = [], []
    for record in tf.data.TFRecordDataset([path]).take(limit):
        ex = tf.io.parse_single_example(record, spec)
        labels.append(int(ex["label"]))
        rows.append(list(tf.io.decode_raw(ex["image_raw"], tf.uint8).numpy()))
    return labels, rows


def idx_test_examples(limit=3):
    """The first Fashion-MNIST test labels and images from Debian's idx files."""
    import gzip
    base = "/usr/share/datasets/fashion-mnist/t10k-"
    def read(name, skip, size):
        path = base + name
        data = gzip.open(path + ".gz").read() if os.path.exists(path + ".gz") else open(path, "rb").read()
        return data[skip:skip + size]
    labels = list(read("labels-idx1-ubyte", 8, limit))
    pixels = read("images-idx3-ubyte", 16, 784 * limit)
    return labels, [list(pixels[i * 784:(i + 1) * 784]) for i in range(limit)]


def tfrecord_input():
    """`dflow data convert` writes TFRecord files TensorFlow reads; `dflow train --data
    tfrecord:GLOB` on a cluster reads them in the graph on each worker and trains as well as
    the built-in reader; a missing or corrupt file is an error naming it."""
    out_dir = os.path.join(TMP, "fmnist")
    p = subprocess.run([DFLOW, "data", "convert", "--out", out_dir, "--shards", "4"],
                       capture_output=True, text=True, timeout=120)
    files = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    check(f"data convert writes 4 train shards and a test file ({files})",
          p.returncode == 0 and files == sorted([f"train-0000{i}-of-00004" for i in range(4)] +
                                                ["test-00000-of-00001"]), p.stdout + p.stderr)
    read = tensorflow_reads(os.path.join(out_dir, "test-00000-of-00001"))
    if read is None:
        print("skip TensorFlow reading dflow's TFRecord files: tensorflow cannot be imported")
    else:
        check("TensorFlow parses dflow's examples: labels and pixels equal Fashion-MNIST's",
              read == idx_test_examples(), str(read[0]))
    metrics = os.path.join(TMP, "tfrecord.json")
    rc, out, took = cluster(["--mode", "between-async", "--", "--epochs", "5", "--data",
                             f"tfrecord:{out_dir}/train-*", "--metrics-out", metrics])
    m = json.load(open(metrics)) if rc == 0 and os.path.exists(metrics) else {}
    check(f"--data tfrecord: reaches 0.84 test accuracy ({m.get('test_accuracy')}, "
          f"{m.get('examples_per_sec')} examples/s, {took:.0f}s)",
          m.get("test_accuracy", 0) >= 0.84, out)
    rc, out, _ = cluster(["--", "--data", f"tfrecord:{TMP}/nosuch-*"], timeout=60)
    check("a glob matching nothing fails naming it", rc != 0 and "nosuch-*" in out, out)
    corrupt = os.path.join(TMP, "corrupt-00000-of-00001")
    data = bytearray(open(os.path.join(out_dir, "train-00000-of-00004"), "rb").read())
    data[5000] ^= 0xFF
    open(corrupt, "wb").write(bytes(data))
    rc, out, _ = cluster(["--", "--data", f"tfrecord:{corrupt}"], timeout=60)
    check("a corrupt TFRecord file is DATA_LOSS naming it",
          rc != 0 and "DATA_LOSS" in out and corrupt in out, out)


def main():
    for mode in ("between-async", "in-graph-async"):
        metrics = os.path.join(TMP, f"{mode}.json")
        rc, out, took = cluster(["--mode", mode, "--", "--epochs", "5", "--metrics-out", metrics])
        ok = rc == 0 and os.path.exists(metrics)
        m = json.load(open(metrics)) if ok else {}
        check(f"{mode} trains", ok, out)
        check(f"{mode} reaches 0.84 test accuracy ({m.get('test_accuracy')}, "
              f"{m.get('examples_per_sec')} examples/s, {took:.0f}s)",
              m.get("test_accuracy", 0) >= 0.84, out)
        check(f"{mode} logs are prefixed by task",
              "[worker0] step" in out and "[ps0] dflow server: stopped" in out, out)

    tfrecord_input()

    rc, out, took = cluster(["--", "--model", "nosuch"], timeout=60)
    check("a bad train flag fails the cluster", rc != 0 and "nosuch" in out, out)
    check("a bad train flag fails fast", took < 30, f"{took:.0f}s")

    # SIGINT while training: every task stops, bounded.
    p = subprocess.Popen([DFLOW, "cluster", "--", "--epochs", "50", "--metrics-out",
                          os.path.join(TMP, "sigint.json")], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    seen = ""
    while time.time() < deadline:
        line = p.stdout.readline()
        seen += line
        if "[worker0] step" in line or not line:
            break
    p.send_signal(signal.SIGINT)
    try:
        rest, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, _ = p.communicate()
    check("SIGINT stops the cluster", p.returncode != 0 and "SIGINT" in seen + rest, seen + rest)
    time.sleep(0.5)
    check("no task outlives the cluster", not tasks_left(), str(tasks_left()))

    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
