#!/usr/bin/env python3
"""The same TensorFlow 1.x between-graph program on two runtimes (issue 15): TensorFlow's
client driving `dflow server` processes, and driving `tf.distribute.Server` processes.

  python3 bench/tf_cluster_bench.py                  # W = 1,2; async and sync; 1 epoch
  python3 bench/tf_cluster_bench.py --workers 2 --modes async --repeats 3
  python3 bench/tf_cluster_bench.py --modes single   # one server holding the whole model

The program is what TF 1.x users wrote: `replica_device_setter` (1 ps), the MLP
784-256-256-10 of dflow's trainer (Glorot-uniform weights, zero biases), Adam 1e-3, batch
128 per worker fed from NumPy each step (`feed_dict`), `MonitoredTrainingSession` with
`StopAtStepHook`; sync wraps Adam in `SyncReplicasOptimizer(replicas_to_aggregate=W)`
and adds its session hook. Each worker is its own client process; async trains 468 global
steps of 128 examples shared by the workers, sync 60000 / (128 W) global steps of 128 W.
Mode `single` is the same program on one server (job "worker", no ps: variables and ops
all on /job:worker/task:0), W = 1: the client's RunStep against one server's runtime.

Aggregate examples/s = the examples of every global step / the wall time of the whole
run, from the moment every worker has its session (a file barrier, after TensorFlow's
import, graph building and session creation) to the end of the last worker's last step.
Configurations run interleaved round-robin, --repeats times; the table shows medians.
Test accuracy: the chief evaluates the test set after training through a plain session.

Used by bench/cluster_bench.py (its TensorFlow rows); prints RESULT lines and a table.
"""
import argparse
import gzip
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests"))
from dflow_cluster import Server, TfServer, free_port  # noqa: E402

BATCH, IN, HIDDEN, CLASSES = 128, 784, 256, 10
TRAIN = 60000
DATA_DIR = "/usr/share/datasets/fashion-mnist"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dflow", default=os.path.join(REPO, "build", "bin", "dflow"))
    p.add_argument("--runtimes", default="dflow,tensorflow")
    p.add_argument("--modes", default="async,sync", help="async, sync, single")
    p.add_argument("--workers", default="1,2", help="comma-separated W")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--repeats", type=int, default=1, help="runs per configuration (median)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per configuration")
    p.add_argument("--quick", action="store_true", help="synthetic data, 8192 examples")
    p.add_argument("--data-dir", default=DATA_DIR)
    p.add_argument("--json-out", help="write the rows as JSON here")
    # Internal: one worker's client process.
    p.add_argument("--client", help=argparse.SUPPRESS)  # JSON spec
    return p.parse_args(argv)


# --- one worker's client ----------------------------------------------------------------


def load_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_data(spec):
    import numpy as np
    if spec["quick"]:
        rng = np.random.default_rng(1)
        x = rng.random((8192 + 1638, IN), dtype=np.float32)
        y = rng.integers(0, CLASSES, 8192 + 1638).astype(np.int64)
        return x[:8192], y[:8192], x[8192:], y[8192:]
    d = spec["data_dir"]
    img = lambda n: (load_idx(os.path.join(d, n)).reshape(-1, IN) / np.float32(255)).astype(
        np.float32)
    lab = lambda n: load_idx(os.path.join(d, n)).astype(np.int64)
    return (img("train-images-idx3-ubyte.gz"), lab("train-labels-idx1-ubyte.gz"),
            img("t10k-images-idx3-ubyte.gz"), lab("t10k-labels-idx1-ubyte.gz"))


def mlp_logits(tf1, tf, images):
    """dflow trainer's MLP on `images`: Glorot-uniform weights (seed 1), zero biases."""
    init = tf1.glorot_uniform_initializer(seed=1)
    h = images
    for i, (n_in, n_out) in enumerate([(IN, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, CLASSES)]):
        w = tf1.get_variable(f"w{i}", [n_in, n_out], initializer=init)
        b = tf1.get_variable(f"b{i}", [n_out], initializer=tf1.zeros_initializer())
        h = tf.matmul(h, w) + b
        if i < 2:
            h = tf.nn.relu(h)
    return h


def run_client(spec):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    index, workers, sync = spec["index"], spec["workers"], spec["mode"] == "sync"
    x, y, tx, ty = load_data(spec)
    cluster = tf.train.ClusterSpec(spec["cluster"])
    device = (f"/job:worker/task:{index}" if spec["mode"] == "single" else
              tf1.train.replica_device_setter(cluster=cluster,
                                              worker_device=f"/job:worker/task:{index}"))
    with tf1.device(device):
        images = tf1.placeholder(tf.float32, [None, IN])
        labels = tf1.placeholder(tf.int64, [None])
        h = mlp_logits(tf1, tf, images)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h))
        correct = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(h, 1), labels), tf.float32))
        global_step = tf1.train.get_or_create_global_step()
        opt = tf1.train.AdamOptimizer(0.001)
        if sync:
            opt = tf1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=workers,
                                                  total_num_replicas=workers)
        train = opt.minimize(loss, global_step=global_step)
    per_global = BATCH * (workers if sync else 1)
    last_step = spec["epochs"] * (x.shape[0] // per_global)
    hooks = [tf1.train.StopAtStepHook(last_step=last_step)]
    if sync:
        hooks.append(opt.make_session_run_hook(index == 0, num_tokens=0))
    # A blocked token dequeue at the very end (the other replica is done) times out.
    config = tf1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"],
                             operation_timeout_in_ms=60000)
    master = "grpc://" + spec["cluster"]["worker"][index]
    rng = np.random.default_rng(100 + index)
    steps, start, end = 0, None, None
    ended = (tf.errors.DeadlineExceededError, tf.errors.CancelledError,
             tf.errors.OutOfRangeError)
    try:
        with tf1.train.MonitoredTrainingSession(master=master, is_chief=index == 0,
                                                hooks=hooks, config=config,
                                                save_checkpoint_secs=None,
                                                save_summaries_steps=None,
                                                log_step_count_steps=None) as sess:
            open(os.path.join(spec["barrier"], f"ready{index}"), "w").close()
            deadline = time.time() + 120
            while len(os.listdir(spec["barrier"])) < workers and time.time() < deadline:
                time.sleep(0.005)
            start = time.time()
            while not sess.should_stop():
                idx = rng.integers(0, x.shape[0], BATCH)
                sess.run(train, {images: x[idx], labels: y[idx]})
                steps += 1
                end = time.time()
    except ended:
        # Sync, at the end: a replica waiting for a token the other will not give, or the
        # chief's queue runner waiting for gradients nobody sends, times out.
        if start is None:
            raise
    result = {"index": index, "steps": steps, "start": start, "end": end or start}
    if index == 0:
        with tf1.Session(master, config=config) as s:
            result["global_step"] = int(s.run(global_step))
            result["test_accuracy"] = float(s.run(correct, {images: tx, labels: ty}))
    print("RESULT " + json.dumps(result), flush=True)


# --- driver -----------------------------------------------------------------------------


def run_config(args, runtime, mode, workers, tmp):
    """One run: servers, W client processes; returns the measured row or raises."""
    ports = {"worker": [free_port() for _ in range(workers)]}
    if mode != "single":
        ports["ps"] = [free_port()]
    cluster = {job: [f"127.0.0.1:{p}" for p in ps] for job, ps in ports.items()}
    cluster_json = json.dumps(cluster)
    logs = tempfile.mkdtemp(prefix=f"{runtime}_{mode}_{workers}_", dir=tmp)
    servers, clients = [], []
    try:
        for job, n in (("ps", len(ports.get("ps", []))), ("worker", workers)):
            for i in range(n):
                servers.append(Server(args.dflow, logs, cluster_json, job, i)
                               if runtime == "dflow" else TfServer(logs, cluster_json, job, i))
        barrier = os.path.join(logs, "barrier")
        os.mkdir(barrier)
        for i in range(workers):
            spec = {"index": i, "workers": workers, "mode": mode, "cluster": cluster,
                    "epochs": args.epochs, "quick": args.quick, "data_dir": args.data_dir,
                    "barrier": barrier}
            clients.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--client", json.dumps(spec)],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True))
        deadline = time.monotonic() + args.timeout
        outputs = []
        for c in clients:
            try:
                out, _ = c.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise RuntimeError(f"{runtime} {mode} W={workers}: timed out after "
                                   f"{args.timeout:.0f} s")
            if c.returncode != 0:
                raise RuntimeError(f"{runtime} {mode} W={workers}: client exit {c.returncode}: "
                                   f"{out[-2000:]}")
            outputs.append(out)
    finally:
        for c in clients:
            if c.poll() is None:
                os.killpg(c.pid, signal.SIGKILL)
                c.wait()
        for s in servers:
            s.stop()
    results = [json.loads(line[len("RESULT "):]) for out in outputs for line in out.splitlines()
               if line.startswith("RESULT ")]
    if os.environ.get("TF_CLUSTER_BENCH_DEBUG"):
        for out in outputs:
            print(out[-3000:])
    chief = next(r for r in results if r["index"] == 0)
    if not chief["global_step"]:
        raise RuntimeError(f"{runtime} {mode} W={workers}: no global step was taken")
    seconds = max(r["end"] for r in results) - min(r["start"] for r in results)
    per_global = BATCH * (workers if mode == "sync" else 1)
    return {"global_steps": chief["global_step"], "seconds": seconds,
            "examples_per_sec": chief["global_step"] * per_global / seconds,
            "local_steps": [r["steps"] for r in results],
            "test_accuracy": chief["test_accuracy"]}


def main():
    args = parse_args()
    if args.client:
        run_client(json.loads(args.client))
        return
    runtimes = [r for r in args.runtimes.split(",") if r]
    configs = [(m, int(w)) for m in args.modes.split(",") for w in args.workers.split(",")
               if m != "single" or int(w) == 1]
    runs = {(r, m, w): [] for r in runtimes for m, w in configs}
    print(f"tf_cluster_bench: {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory(prefix="tf_cluster_bench_") as tmp:
        for rep in range(args.repeats):
            for m, w in configs:
                for r in runtimes:
                    row = run_config(args, r, m, w, tmp)
                    runs[(r, m, w)].append(row)
                    print(f"  [{rep + 1}/{args.repeats}] TF client on {r:10s} servers, {m:5s} "
                          f"W={w}: {row['examples_per_sec']:8.0f} examples/s, "
                          f"{row['global_steps']} global steps, accuracy "
                          f"{row['test_accuracy']:.4f}, load {os.getloadavg()[0]:.2f}",
                          flush=True)
    rows = []
    for (r, m, w), rs in runs.items():
        rs = sorted(rs, key=lambda x: x["examples_per_sec"])
        mid = rs[len(rs) // 2]
        rows.append({"system": f"tf-client/{r}", "mode": m if m == "single" else f"between-{m}",
                     "workers": w,
                     "examples_per_sec": statistics.median(x["examples_per_sec"] for x in rs),
                     "runs": [round(x["examples_per_sec"], 1) for x in rs],
                     "steps": mid["global_steps"], "seconds": mid["seconds"],
                     "test_accuracy": mid["test_accuracy"]})
    print("\n| servers | mode | W | examples/s (median) | runs | dflow / TensorFlow | test acc |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        tf_row = next((x for x in rows if x["system"] == "tf-client/tensorflow" and
                       x["mode"] == row["mode"] and x["workers"] == row["workers"]), None)
        ratio = (f"{row['examples_per_sec'] / tf_row['examples_per_sec']:.2f}"
                 if tf_row and row is not tf_row else "—")
        print(f"| {row['system'].split('/')[1]} | {row['mode']} | {row['workers']} | "
              f"{row['examples_per_sec']:,.0f} | "
              f"{', '.join(f'{x / 1000:.1f}k' for x in row['runs'])} | {ratio} | "
              f"{row['test_accuracy']:.4f} |")
    print(f"\nload average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
