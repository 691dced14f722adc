#!/usr/bin/env python3
"""Interop: TensorFlow 1.x between-graph replication trains on a dflow cluster.

A dflow cluster of 1 ps and 2 workers (real `dflow server` processes); two
TensorFlow client processes, each a between-graph replica written as a TF1 user
would: `tf.compat.v1.train.replica_device_setter` puts the variables on the ps,
`tf.compat.v1.train.SyncReplicasOptimizer` (replicas_to_aggregate=2) averages
both replicas' gradients in ConditionalAccumulators on the ps, and each client
drives `tf.compat.v1.train.MonitoredTrainingSession` (the optimizer's
SyncReplicas hook plus StopAtStepHook(last_step=20)) through its own dflow
worker (grpc://<worker i>). The chief (replica 0) initializes the variables and
runs the optimizer's chief queue runner. The model: softmax regression on a
fixed, seeded synthetic data set, each replica on its half.

The chief adds no initial tokens (make_session_run_hook(num_tokens=0)), so
each global step averages one gradient from each replica: synchronous SGD,
which the test also computes in numpy and prints the difference (at the last
look: below 1e-6 in every step's loss).

Checks: both clients exit 0; the global step read from the ps afterwards is 20
(or more); the loss of the final weights on the whole data set is below the
initial one, and each replica's loss trajectory goes down. Every wait is
bounded; the servers are killed at the end.

The client script is unmodified TensorFlow: StopAtStepHook reads the global
step through tf.cond, which TensorFlow 2 writes as a functional If /
StatelessIf with a function library; dflow's master lowers it to Switch/Merge
like TensorFlow's own runtime does.

Exits 77 (skipped, reason printed) only where TensorFlow cannot be imported.
Usage: tf_between_graph_test.py path/to/dflow [--variables resource|reference]...
       (internally: tf_between_graph_test.py --replica I --cluster JSON --out FILE
        --variables KIND)
"""
import argparse
import faulthandler
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from dflow_cluster import import_tensorflow_or_skip

np, tf = import_tensorflow_or_skip()

LAST_STEP = 20
REPLICAS = 2
FEATURES, CLASSES, EXAMPLES = 8, 3, 256
LEARNING_RATE = 0.5
CLIENT_TIMEOUT_S = 120
# Each kind trains on its own cluster: resource variables (TF2's default) and
# reference variables (TF1's VariableV2).
VARIABLE_KINDS = ("resource", "reference")
DEFAULT_KINDS = ("resource", "reference")


def dataset():
    """A fixed, seeded, linearly separable-ish classification problem."""
    rng = np.random.RandomState(1234)
    x = rng.normal(size=(EXAMPLES, FEATURES)).astype(np.float32)
    true_w = rng.normal(size=(FEATURES, CLASSES)).astype(np.float32)
    y = np.argmax(x @ true_w + 0.1 * rng.normal(size=(EXAMPLES, CLASSES)), axis=1)
    return x, y.astype(np.int64)


def model(x, y):
    """Softmax regression; returns (loss, weights, bias). Variables start at
    fixed values so the initial loss is known."""
    w = tf.compat.v1.get_variable(
        "weights", shape=[FEATURES, CLASSES],
        initializer=tf.compat.v1.random_normal_initializer(stddev=0.5, seed=7))
    b = tf.compat.v1.get_variable("bias", shape=[CLASSES],
                                  initializer=tf.compat.v1.zeros_initializer())
    logits = tf.matmul(x, w) + b
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    return loss, w, b


def numpy_loss(x, y, w, b):
    logits = x @ w + b
    logits = logits - logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def chief_ready_path(out_path):
    return os.path.join(os.path.dirname(out_path), "chief_ready")


def reference_losses(w, b):
    """Synchronous SGD in numpy: per replica, the loss on its half at each
    global step, each step applying the mean of both halves' gradients."""
    x_all, y_all = dataset()
    halves = [(x_all[i::REPLICAS], y_all[i::REPLICAS]) for i in range(REPLICAS)]
    losses = [[] for _ in range(REPLICAS)]
    for _ in range(LAST_STEP):
        grads = []
        for i, (x, y) in enumerate(halves):
            losses[i].append(numpy_loss(x, y, w, b))
            logits = x @ w + b
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            p[np.arange(len(y)), y] -= 1
            p /= len(y)
            grads.append((x.T @ p, p.sum(axis=0)))
        w = w - LEARNING_RATE * np.mean([g[0] for g in grads], axis=0)
        b = b - LEARNING_RATE * np.mean([g[1] for g in grads], axis=0)
    return losses


def use_variables(kind):
    """Resource variables (TF2's default) or reference variables (TF1's)."""
    if kind == "reference":
        tf.compat.v1.disable_resource_variables()
    else:
        tf.compat.v1.enable_resource_variables()


def replica(index, cluster_json, out_path, kind):
    """One between-graph replica (a separate process, as in real TF1 jobs)."""
    # Shows where a hung client is stuck before the parent kills it.
    faulthandler.dump_traceback_later(CLIENT_TIMEOUT_S - 10, exit=True)
    tf.compat.v1.disable_eager_execution()
    use_variables(kind)
    cluster_def = json.loads(cluster_json)
    cluster = tf.train.ClusterSpec(cluster_def)
    x_all, y_all = dataset()
    x, y = x_all[index::REPLICAS], y_all[index::REPLICAS]
    is_chief = index == 0
    if not is_chief:
        # A non-chief whose first readiness check fails sleeps 30 s
        # (SessionManager.recovery_wait_secs); start once the chief has
        # initialized the variables.
        deadline = time.time() + CLIENT_TIMEOUT_S / 2
        while not os.path.exists(chief_ready_path(out_path)) and time.time() < deadline:
            time.sleep(0.1)
    with tf.compat.v1.device(tf.compat.v1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{index}", cluster=cluster)):
        loss, _, _ = model(tf.constant(x), tf.constant(y))
        global_step = tf.compat.v1.train.get_or_create_global_step()
        opt = tf.compat.v1.train.SyncReplicasOptimizer(
            tf.compat.v1.train.GradientDescentOptimizer(LEARNING_RATE),
            replicas_to_aggregate=REPLICAS, total_num_replicas=REPLICAS)
        train_op = opt.minimize(loss, global_step=global_step)
    # No initial tokens: every global step then needs a gradient from each
    # replica (lock-step), so neither can train alone while the other starts.
    hooks = [opt.make_session_run_hook(is_chief=is_chief, num_tokens=0),
             tf.compat.v1.train.StopAtStepHook(last_step=LAST_STEP)]
    config = tf.compat.v1.ConfigProto(
        device_filters=["/job:ps", f"/job:worker/task:{index}"])
    master = "grpc://" + cluster_def["worker"][index]
    losses, steps = [], []
    with tf.compat.v1.train.MonitoredTrainingSession(
            master=master, is_chief=is_chief, hooks=hooks, config=config,
            save_checkpoint_secs=None, save_checkpoint_steps=None,
            save_summaries_steps=None, save_summaries_secs=None, log_step_count_steps=None,
            stop_grace_period_secs=5) as sess:
        if is_chief:
            open(chief_ready_path(out_path), "w").close()
        # Bounded: each run either advances the global step or waits for the
        # other replica, and the parent's timeout kills a hung client.
        while not sess.should_stop() and len(losses) < 10 * LAST_STEP:
            _, loss_value, step = sess.run([train_op, loss, global_step])
            losses.append(float(loss_value))
            steps.append(int(step))
    with open(out_path, "w") as f:
        json.dump({"losses": losses, "steps": steps}, f)
    print(f"replica {index}: {len(losses)} runs, losses {losses[0]:.4f} -> {losses[-1]:.4f}",
          flush=True)
    return 0


def read_back(ps_address):
    """Reads the global step and weights from the ps with a fresh session."""
    tf.compat.v1.disable_eager_execution()
    graph = tf.Graph()
    x, y = dataset()
    with graph.as_default(), tf.device("/job:ps/task:0"):
        _, w, b = model(tf.constant(x), tf.constant(y))
        global_step = tf.compat.v1.train.get_or_create_global_step()
    config = tf.compat.v1.ConfigProto(device_filters=["/job:ps"])
    with tf.compat.v1.Session("grpc://" + ps_address, graph=graph, config=config) as sess:
        return sess.run([global_step, w, b])


def initial_weights():
    graph = tf.Graph()
    x, y = dataset()
    with graph.as_default():
        _, w, b = model(tf.constant(x), tf.constant(y))
        init = tf.compat.v1.global_variables_initializer()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(init)
        return sess.run([w, b])


def main_test(dflow, kinds):
    failed = 0
    for kind in kinds:
        print(f"== {kind} variables: 1 ps, {REPLICAS} workers, {REPLICAS} TensorFlow clients")
        failed += run_cluster(dflow, kind)
    return 1 if failed else 0


def run_cluster(dflow, kind):
    """Trains on a fresh cluster; returns the number of failed checks."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from dflow_cluster import start_cluster

    use_variables(kind)
    tmp = tempfile.mkdtemp(prefix="dflow_tf_between_graph_")
    cluster_json, ports, servers = start_cluster(dflow, tmp, {"ps": 1, "worker": REPLICAS})
    failed = 0
    clients = []
    try:
        for i in range(REPLICAS):
            log = open(os.path.join(tmp, f"client{i}.log"), "w")
            proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--replica", str(i),
                 "--cluster", cluster_json, "--out", os.path.join(tmp, f"client{i}.json"),
                 "--variables", kind],
                stdout=log, stderr=subprocess.STDOUT)
            clients.append((proc, log))
        deadline = time.time() + CLIENT_TIMEOUT_S
        codes = []
        for i, (proc, log) in enumerate(clients):
            try:
                codes.append(proc.wait(timeout=max(1, deadline - time.time())))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
                codes.append(f"timed out after {CLIENT_TIMEOUT_S}s")
            log.close()
        for i, code in enumerate(codes):
            ok = code == 0
            print(f"{'ok  ' if ok else 'FAIL'} replica {i} client exit: {code}")
            failed += not ok
            if not ok:
                with open(os.path.join(tmp, f"client{i}.log")) as f:
                    print(f"--- client {i} log (tail) ---\n{f.read()[-6000:]}")
        trajectories = {}
        for i in range(REPLICAS):
            path = os.path.join(tmp, f"client{i}.json")
            if os.path.exists(path):
                with open(path) as f:
                    trajectories[i] = json.load(f)
        for i, t in trajectories.items():
            print(f"     replica {i} loss trajectory (global step: loss): " + ", ".join(
                f"{s}:{l:.4f}" for s, l in zip(t["steps"], t["losses"])))
            ok = len(t["losses"]) >= 2 and t["losses"][-1] < t["losses"][0]
            print(f"{'ok  ' if ok else 'FAIL'} replica {i} loss decreased: "
                  f"{t['losses'][0]:.4f} -> {t['losses'][-1]:.4f}")
            failed += not ok
        if len(trajectories) != REPLICAS:
            failed += 1

        step, w, b = read_back(cluster_json and json.loads(cluster_json)["ps"][0])
        ok = step >= LAST_STEP
        print(f"{'ok  ' if ok else 'FAIL'} global step on the ps after training: {step} "
              f"(want >= {LAST_STEP})")
        failed += not ok
        x, y = dataset()
        w0, b0 = initial_weights()
        # Informational: lock-step SyncReplicas is synchronous SGD, so the
        # trajectories should follow numpy's (TensorFlow's initial weights).
        # Not a check: which replica takes which token is up to timing.
        want = reference_losses(w0, b0)
        for i, t in trajectories.items():
            got = dict(zip(t["steps"], t["losses"]))
            diffs = [abs(got[k] - want[i][k]) for k in range(LAST_STEP) if k in got]
            if diffs:
                print(f"     replica {i} vs numpy synchronous SGD: {len(diffs)} steps compared, "
                      f"max |loss difference| {max(diffs):.2e}")
        before, after = numpy_loss(x, y, w0, b0), numpy_loss(x, y, w, b)
        ok = after < before
        print(f"{'ok  ' if ok else 'FAIL'} full-data loss of the ps's weights: "
              f"initial {before:.4f} -> trained {after:.4f}")
        failed += not ok
    except Exception as e:  # A TensorFlow error from the remote session.
        print(f"FAIL: {type(e).__name__}: {e}")
        failed += 1
    finally:
        for proc, log in clients:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        for group in servers.values():
            for s in group:
                s.stop(signal.SIGKILL)
        if failed:
            for group in servers.values():
                for s in group:
                    print(f"--- {s.name} log (tail) ---\n{s.output()[-6000:]}")
    return failed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dflow", nargs="?")
    parser.add_argument("--replica", type=int)
    parser.add_argument("--cluster")
    parser.add_argument("--out")
    parser.add_argument("--variables", choices=VARIABLE_KINDS, action="append",
                        help="variable kind(s) to train with; default: resource")
    args = parser.parse_args()
    if args.replica is not None:
        return replica(args.replica, args.cluster, args.out, (args.variables or DEFAULT_KINDS)[0])
    if not args.dflow:
        parser.error("path to the dflow binary is required")
    return main_test(args.dflow, args.variables or DEFAULT_KINDS)


if __name__ == "__main__":
    sys.exit(main())
