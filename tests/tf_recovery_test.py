#!/usr/bin/env python3
"""Recovery: kill -9 of a ps, a non-chief worker and the chief mid-training, each restarted.

A cluster of 1 ps + 2 workers (real `dflow server` processes on 127.0.0.1, or with
--tensorflow real `tf.distribute.Server` processes, for comparison) and two TensorFlow client
processes, each the between-graph, asynchronous replica a TF1 user writes:
`tf.compat.v1.train.replica_device_setter(cluster=...)` puts the variables on /job:ps,
GradientDescent trains an MLP on the replica's half of a fixed, seeded synthetic
classification set, and `tf.compat.v1.train.MonitoredTrainingSession(master="grpc://<worker
i>", is_chief=(i == 0), checkpoint_dir=DIR (chief only), save_checkpoint_steps=SAVE_STEPS,
hooks=[StopAtStepHook(last_step=LAST_STEP)], config with device_filters and
operation_timeout_in_ms)` drives it. The client has no retry logic of its own: recovering is
MonitoredTrainingSession's job (it recreates its session on UnavailableError/AbortedError; the
chief then restores the latest checkpoint, a non-chief waits until the model is ready). A hook
logs each session the client gets, and the loop each completed step, as JSON lines (wall time,
global step) the harness reads live. (The harness starts the non-chief's MonitoredTrainingSession
once the chief has its session, as a launcher ordering its tasks would: a non-chief that asks
before the chief initialized the model sleeps SessionManager's 30 s.)

Cases (a fresh cluster each; every process is killed at the end):
  undisturbed  train to LAST_STEP; the test accuracy of the final checkpoint (evaluated with
               local TensorFlow: the same model, Saver().restore) is the reference. Always
               runs, also under --only.
  kill_ps      once the chief has logged global step KILL_AT: kill -9 the ps, restart it at
               once on the same address (as a launcher would).
  kill_worker  kill -9 the non-chief worker's server and its client (a dead machine), restart
               both (the client a fresh process with the same arguments); the chief must go on
               training meanwhile and restore nothing.
  kill_chief   kill -9 the chief's server and client, restart both; the new chief must restore
               the latest checkpoint.
Checks of every kill case: both clients exit 0 and see global step >= LAST_STEP; the chief
restored exactly the latest checkpoint written before the kill (kill_ps, kill_chief) or nothing
(kill_worker); steps lost = the highest global step logged before the kill minus the step
training resumed from (the restored checkpoint's global step; without a restore, the step
before the first one completed after the kill) is at most one checkpoint interval: SAVE_STEPS
+ STEP_SLACK (the chief's saver hook fires when its read of the global step, which the other
replica advances concurrently, is >= the last save's + SAVE_STEPS, so an interval can be a step
or two longer); the final checkpoint holds global step >= LAST_STEP; its test accuracy is within
ACCURACY_TOLERANCE of the undisturbed run's. Measured and printed, not asserted (no test
asserts a wall-clock time): seconds from the kill to each client's next completed step (goal:
<= 2 s on loopback) and where they went (server restart, a restarted client's Python +
TensorFlow import, its new session, SessionManager's 30 s readiness sleep), the steps the other
replica ran during an outage. Every error a client's MonitoredTrainingSession recovered from
(or logged while closing the broken session) is printed, first of each kind, so the error a
server returns on a dead peer is visible.

Exits 77 (skipped, reason printed) only where TensorFlow cannot be imported; else 0 when
every case passes, 1 otherwise. --tensorflow runs the same cases against TensorFlow's own
servers: a benchmark for comparison (slower: each TensorFlow server start imports
TensorFlow), with the same checks and exit code. DFLOW_KEEP=1 keeps every case's files
(logs, step logs, checkpoints); a failing case's are always kept.
Usage: tf_recovery_test.py path/to/dflow [--only NAME ...] [--tensorflow]
       (internally: tf_recovery_test.py --client SPEC_JSON)
"""
import argparse
import faulthandler
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from dflow_cluster import Checks, Server, TfServer, free_port, import_tensorflow_or_skip  # noqa: E402

np, tf = import_tensorflow_or_skip()
tf1 = tf.compat.v1
tf1.disable_eager_execution()

LAST_STEP = 450            # global steps of a run
SAVE_STEPS = 20            # MonitoredTrainingSession's save_checkpoint_steps
KILL_AT = LAST_STEP // 3   # kill once the chief has logged this global step
STEP_SLACK = 2             # see the docstring
ACCURACY_TOLERANCE = 0.01
FEATURES, HIDDEN, CLASSES, TRAIN, TEST = 16, 128, 4, 32000, 4000
LEARNING_RATE = 0.5
OPERATION_TIMEOUT_MS = 20000
CLIENT_TIMEOUT_S = {"dflow": 150, "tensorflow": 240}  # one client process, start to exit
SERVER_START_S = 60        # a server to serve (TensorFlow's import takes ~7 s here)
CASE_TIMEOUT_S = {"dflow": 150, "tensorflow": 300}
CASES = ("undisturbed", "kill_ps", "kill_worker", "kill_chief")


# --- The model and the client (what a TF1 user writes) ---------------------------------------

def dataset():
    """(x_train, y_train, x_test, y_test): a fixed, seeded 4-class problem with label noise
    (the MLP's test accuracy levels off at ~0.855 after ~200 steps and stays there; trained on
    one replica's half alone from there, it stays within ~0.3 points)."""
    rng = np.random.RandomState(2024)
    x = rng.normal(size=(TRAIN + TEST, FEATURES)).astype(np.float32)
    true_w = rng.normal(size=(FEATURES, CLASSES)).astype(np.float32)
    y = np.argmax(x @ true_w + 1.0 * rng.normal(size=(TRAIN + TEST, CLASSES)), axis=1)
    y = y.astype(np.int64)
    return x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]


def model(x, y):
    """An MLP (FEATURES-HIDDEN-CLASSES, ReLU): (loss, accuracy). A step over a replica's half
    of the training set takes some 30 ms of compute, so a run lasts long enough to kill a
    task mid-way and to restart a client while the other replica trains."""
    w1 = tf1.get_variable("hidden/weights", shape=[FEATURES, HIDDEN],
                          initializer=tf1.random_normal_initializer(stddev=0.25, seed=7))
    b1 = tf1.get_variable("hidden/bias", shape=[HIDDEN], initializer=tf1.zeros_initializer())
    w2 = tf1.get_variable("softmax/weights", shape=[HIDDEN, CLASSES],
                          initializer=tf1.random_normal_initializer(stddev=0.1, seed=8))
    b2 = tf1.get_variable("softmax/bias", shape=[CLASSES], initializer=tf1.zeros_initializer())
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    return loss, accuracy


class StepLog:
    """JSON lines {"t": wall time, ...}, one write per line (the harness reads them live)."""

    def __init__(self, path):
        self.f = open(path, "a", buffering=1)

    def write(self, **record):
        record["t"] = time.time()
        self.f.write(json.dumps(record) + "\n")


class SessionLogHook(tf1.train.SessionRunHook):
    """Logs the global step of every session MonitoredTrainingSession creates (the first, and
    each one it recreates after an error) and at the end."""

    def __init__(self, log, global_step):
        self.log, self.global_step = log, global_step

    def after_create_session(self, session, coord):
        self.log.write(event="session", step=int(session.run(self.global_step)))

    def end(self, session):
        self.log.write(event="end", step=int(session.run(self.global_step)))


def client_main(spec):
    """One between-graph replica (spec: index, cluster, checkpoint_dir, steps_log,
    wait_for_chief, timeout_s)."""
    faulthandler.dump_traceback_later(spec["timeout_s"] - 5, exit=True)
    # INFO, so MonitoredTrainingSession's "An error was raised ..." lines reach the log.
    tf1.logging.set_verbosity(tf1.logging.INFO)
    log = StepLog(spec["steps_log"])
    log.write(event="start", pid=os.getpid())
    index, cluster = spec["index"], spec["cluster"]
    x, y, _, _ = dataset()
    x, y = x[index::2], y[index::2]
    with tf1.device(tf1.train.replica_device_setter(
            cluster=tf.train.ClusterSpec(cluster), worker_device=f"/job:worker/task:{index}")):
        loss, _ = model(tf.constant(x), tf.constant(y))
        global_step = tf1.train.get_or_create_global_step()
        train_op = tf1.train.GradientDescentOptimizer(LEARNING_RATE).minimize(
            loss, global_step=global_step)
    config = tf1.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"],
                             operation_timeout_in_ms=OPERATION_TIMEOUT_MS)
    hooks = [tf1.train.StopAtStepHook(last_step=LAST_STEP), SessionLogHook(log, global_step)]
    # Test harness ordering only, not part of the user's program (like a launcher starting the
    # chief first): a non-chief that asks before the chief initialized the model sleeps
    # SessionManager's 30 s. A restarted non-chief finds the chief's session logged at once.
    if spec.get("wait_for_chief"):
        deadline = time.time() + 60
        while time.time() < deadline and not chief_has_session(spec["wait_for_chief"]):
            time.sleep(0.05)
    with tf1.train.MonitoredTrainingSession(
            master="grpc://" + cluster["worker"][index], is_chief=(index == 0),
            checkpoint_dir=spec["checkpoint_dir"], save_checkpoint_steps=SAVE_STEPS,
            hooks=hooks, config=config) as sess:
        while not sess.should_stop():
            _, step = sess.run([train_op, global_step])
            log.write(step=int(step))
    log.write(event="exit")
    return 0


def chief_has_session(path):
    return any(r.get("event") == "session" for r in read_log(path))


# --- Processes -------------------------------------------------------------------------------

def read_log(path):
    """The complete JSON lines of a step log (a line being written is skipped)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        text = f.read()
    out = []
    for line in text.split("\n")[:-1]:
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


class Task:
    """A server task that can be killed and restarted on its address; each incarnation logs to
    its own file."""

    def __init__(self, backend, dflow, tmp, cluster_json, job, index):
        self.backend, self.dflow, self.tmp = backend, dflow, tmp
        self.cluster_json, self.job, self.index = cluster_json, job, index
        self.incarnations = []
        self.server = None

    @property
    def name(self):
        return f"{self.job}{self.index}"

    def start(self):
        """Starts an incarnation, retrying (bounded) while the address is not yet free;
        returns the seconds it took."""
        start = time.time()
        deadline = start + SERVER_START_S
        while True:
            log_dir = os.path.join(self.tmp, f"server_{self.name}_{len(self.incarnations)}")
            os.makedirs(log_dir, exist_ok=True)
            try:
                if self.backend == "dflow":
                    self.server = Server(self.dflow, log_dir, self.cluster_json, self.job,
                                         self.index)
                else:
                    self.server = TfServer(log_dir, self.cluster_json, self.job, self.index,
                                           timeout=SERVER_START_S)
                self.incarnations.append(self.server)
                return time.time() - start
            except RuntimeError as e:
                self.incarnations.append(None)
                if time.time() > deadline:
                    raise RuntimeError(f"{self.name}: restart failed: {str(e)[-600:]}")
                time.sleep(0.1)

    def kill(self):
        if self.server and self.server.proc.poll() is None:
            self.server.proc.kill()
            self.server.proc.wait(timeout=10)

    def alive(self):
        return self.server is not None and self.server.proc.poll() is None

    def output(self):
        return "".join(f"--- incarnation {i} ---\n{s.output()[-3000:]}\n"
                       for i, s in enumerate(self.incarnations) if s)


class Client:
    """A client process (one replica); restartable with the same arguments, appending to the
    same step log."""

    def __init__(self, tmp, spec):
        self.tmp, self.spec = tmp, spec
        self.index = spec["index"]
        self.steps_log = spec["steps_log"]
        self.proc, self.logs, self.spawned = None, [], []

    def start(self):
        path = os.path.join(self.tmp, f"client{self.index}_{len(self.logs)}.log")
        self.logs.append(path)
        out = open(path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--client", json.dumps(self.spec)],
            stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.spawned.append(time.time())

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def wait(self, deadline):
        try:
            return self.proc.wait(timeout=max(1, deadline - time.time()))
        except subprocess.TimeoutExpired:
            self.kill()
            return f"timed out after {self.spec['timeout_s']}s"

    def records(self):
        return read_log(self.steps_log)

    def output(self):
        text = ""
        for i, path in enumerate(self.logs):
            with open(path, errors="replace") as f:
                text += f"--- process {i} ---\n{f.read()}\n"
        return text


LOG_LINE = re.compile(r"^(INFO|WARNING|ERROR|FATAL):tensorflow:|^[IWEF]\d{4} |^Traceback")


def log_messages(text):
    """TensorFlow's log messages in a client's output, each with its continuation lines."""
    messages = []
    for line in text.splitlines():
        if LOG_LINE.match(line) or not messages:
            messages.append(line)
        else:
            messages[-1] += "\n" + line
    return messages


def recovered_errors(text):
    """MonitoredTrainingSession's "An error was raised ..." messages (and its "An error occurred
    when attempting to close the session"): the first of each kind of error (where raised, the
    error text), with the count."""
    seen = {}
    for message in log_messages(text):
        if ("An error was raised" not in message and
                "error occurred when attempting to close" not in message):
            continue
        error = message.split("Error: ", 1)[1] if "Error: " in message else message
        error = " ".join(error.replace("Graph execution error:", "").split())
        # The same error on another step differs only in the names of the tensors and
        # sessions it mentions.
        where = ("closing the old session (logged, ignored)" if "attempting to close" in message
                 else "while creating a session" if "being created" in message else
                 "in should_stop" if "considering" in message else "in run")
        key = f"{where}: {error[:500]}"
        kind = re.sub(r"'[^']*'", "'...'", key)
        if kind not in seen:
            seen[kind] = [key, 0]
        seen[kind][1] += 1
    return dict(seen.values())


def error_lines(text, limit=6):
    keys = ("Error", "error:", "Traceback", "Aborted", "Unavailable", "Fatal")
    lines = [ln.strip() for ln in text.splitlines() if any(k in ln for k in keys)
             and "An error was raised" not in ln]
    return lines[-limit:]


# --- The harness -----------------------------------------------------------------------------

def evaluate(checkpoint_dir):
    """(global step, test accuracy) of the latest checkpoint, with local TensorFlow."""
    path = tf.train.latest_checkpoint(checkpoint_dir)
    if path is None:
        raise RuntimeError(f"no checkpoint in {checkpoint_dir}")
    _, _, x, y = dataset()
    with tf.Graph().as_default():
        _, accuracy = model(tf.constant(x), tf.constant(y))
        global_step = tf1.train.get_or_create_global_step()
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, path)
            return int(sess.run(global_step)), float(sess.run(accuracy))


def wait_until(predicate, timeout, poll=0.01):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return False


def max_step(records, before=None):
    steps = [r["step"] for r in records if "step" in r and "event" not in r
             and (before is None or r["t"] <= before)]
    return max(steps) if steps else None


def first_step_after(records, t):
    return next((r for r in records if "event" not in r and r["t"] > t), None)


def run_case(name, backend, dflow, tmp, checks, reference_accuracy):
    """Runs one case; returns its figures (a dict)."""
    figures = {}
    ports = {"ps": [free_port()], "worker": [free_port(), free_port()]}
    cluster = {job: [f"127.0.0.1:{p}" for p in ps] for job, ps in ports.items()}
    cluster_json = json.dumps(cluster)
    checkpoint_dir = os.path.join(tmp, "checkpoints")
    tasks = {"ps0": Task(backend, dflow, tmp, cluster_json, "ps", 0),
             "worker0": Task(backend, dflow, tmp, cluster_json, "worker", 0),
             "worker1": Task(backend, dflow, tmp, cluster_json, "worker", 1)}
    logs = [os.path.join(tmp, f"steps{i}.jsonl") for i in range(2)]
    clients = [Client(tmp, {"index": i, "cluster": cluster, "steps_log": logs[i],
                            "checkpoint_dir": checkpoint_dir if i == 0 else None,
                            "wait_for_chief": logs[0] if i == 1 else None,
                            "timeout_s": CLIENT_TIMEOUT_S[backend]})
               for i in range(2)]
    fired = []

    def watchdog():
        fired.append(True)
        print(f"    watchdog: killing everything after {CASE_TIMEOUT_S[backend]}s", flush=True)
        for c in clients:
            c.kill()
        for t in tasks.values():
            t.kill()

    timer = threading.Timer(CASE_TIMEOUT_S[backend], watchdog)
    timer.daemon = True
    timer.start()
    start = time.time()
    try:
        for task in tasks.values():
            task.start()
        for c in clients:
            c.start()
        checks.info(f"{backend} cluster up in {time.time() - start:.1f}s: {cluster_json}")
        if name != "undisturbed":
            kill_case(name, tasks, clients, checkpoint_dir, checks, figures)
        deadline = time.time() + CLIENT_TIMEOUT_S[backend]
        codes = [c.wait(deadline) for c in clients]
    finally:
        timer.cancel()
        for c in clients:
            c.kill()
        for t in tasks.values():
            t.kill()
    figures["wall_s"] = time.time() - start
    records = [c.records() for c in clients]
    for i, c in enumerate(clients):
        text = c.output()
        for error, count in recovered_errors(text).items():
            checks.info(f"client {i}: MonitoredTrainingSession recovered ({count}x) from an "
                        f"error {error}")
        seen = max([r["step"] for r in records[i] if "step" in r] or [-1])
        ok = checks.check(codes[i] == 0 and seen >= LAST_STEP,
                          f"client {i}: exit {codes[i]}, last global step seen {seen} "
                          f"(want >= {LAST_STEP}), {len(c.logs)} process(es)")
        if not ok:
            for line in error_lines(text):
                print(f"      client {i}: {line[:600]}")
            if checks.failures and error_lines(text):
                checks.failures[-1] += f": {error_lines(text)[-1][:400]}"
    for i, r in enumerate(records):
        steps = [x for x in r if "event" not in x]
        if len(steps) > 1:
            checks.info(f"client {i}: {len(steps)} steps logged in "
                        f"{steps[-1]['t'] - steps[0]['t']:.1f}s, global step {steps[0]['step']} "
                        f"-> {steps[-1]['step']}")
    if fired or checks.failures:
        for t in tasks.values():
            print(f"    --- {t.name} server log (tail) ---\n{t.output()[-3000:]}")
        for i, c in enumerate(clients):
            print(f"    --- client {i} log (tail) ---\n{c.output()[-4000:]}")
    try:
        step, accuracy = evaluate(checkpoint_dir)
        figures["accuracy"], figures["final_step"] = accuracy, step
        checks.check(step >= LAST_STEP, f"final checkpoint: global step {step} "
                     f"(want >= {LAST_STEP})")
        if reference_accuracy is None:
            checks.info(f"test accuracy {accuracy:.4f} (the reference)")
        else:
            checks.check(abs(accuracy - reference_accuracy) <= ACCURACY_TOLERANCE,
                         f"test accuracy {accuracy:.4f}, undisturbed {reference_accuracy:.4f} "
                         f"(tolerance {ACCURACY_TOLERANCE})")
    except Exception as e:
        checks.check(False, f"evaluating the final checkpoint: {type(e).__name__}: "
                     f"{str(e).splitlines()[0][:300] if str(e) else ''}")
    if name != "undisturbed" and "t_kill" in figures:
        analyse_recovery(name, records, figures, checks, clients)
    return figures


def kill_case(name, tasks, clients, checkpoint_dir, checks, figures):
    """Waits for KILL_AT, kills the case's victims, restarts them."""
    chief = clients[0]
    if not wait_until(lambda: (max_step(chief.records()) or -1) >= KILL_AT,
                      chief.spec["timeout_s"]):
        raise RuntimeError(f"the chief did not reach global step {KILL_AT} "
                           f"(last {max_step(chief.records())})")
    victims = {"kill_ps": (["ps0"], []), "kill_worker": (["worker1"], [1]),
               "kill_chief": (["worker0"], [0])}[name]
    t_kill = time.time()
    for t in victims[0]:
        os.kill(tasks[t].server.proc.pid, signal.SIGKILL)
    for i in victims[1]:
        os.kill(clients[i].proc.pid, signal.SIGKILL)
    for t in victims[0]:
        tasks[t].kill()   # reaps it
    for i in victims[1]:
        clients[i].kill()
    figures["t_kill"] = t_kill
    # A killed client may still log a step between t_kill and its death: its return is
    # the first step logged after it was reaped.
    figures["t_reaped"] = time.time()
    # Nothing can save a checkpoint once the ps or the chief is dead (a save in flight may
    # still rename its files: read the state after the victims are reaped).
    path = tf.train.latest_checkpoint(checkpoint_dir)
    figures["checkpoint_at_kill"] = path
    figures["checkpoint_step_at_kill"] = (
        None if path is None else int(tf.train.load_checkpoint(path).get_tensor("global_step")))
    # A dead machine comes back whole: its client starts with its server (a client that finds
    # no server yet gets UNAVAILABLE, which MonitoredTrainingSession retries).
    for i in victims[1]:
        clients[i].start()
    for t in victims[0]:
        figures[f"restart_{t}_s"] = tasks[t].start()
    figures["servers_back"] = time.time()
    checks.info(f"killed {' and '.join(victims[0] + [f'client {i}' for i in victims[1]])} at "
                f"chief's global step {max_step(chief.records(), t_kill)}; servers restarted in "
                f"{figures['servers_back'] - t_kill:.2f}s; latest checkpoint then: "
                f"{path and os.path.basename(path)} (global step "
                f"{figures['checkpoint_step_at_kill']})")


RESTORE_LINE = re.compile(r"Restoring parameters from (\S+)")


def recovery_breakdown(t_kill, records, client, next_step):
    """Where a client's time from the kill to its next step went, as text."""
    marks = [("kill", t_kill)]
    if len(client.spawned) > 1:   # killed and started again
        marks.append(("client spawned", client.spawned[-1]))
        start = next((r for r in records if r.get("event") == "start"
                      and r["t"] > client.spawned[-1]), None)
        if start:
            marks.append(("python + import tensorflow", start["t"]))
    session = next((r for r in records if r.get("event") == "session" and r["t"] > t_kill),
                   None)
    if session:
        marks.append(("new session (graph, CreateSession, restore or wait until ready)",
                      session["t"]))
    if next_step:
        marks.append(("first step", next_step["t"]))
    parts = [f"{what} +{t - t0:.2f}s" for (_, t0), (what, t) in zip(marks, marks[1:])]
    waits = client.output().count("Waiting for model to be ready")
    if waits:
        parts.append(f"SessionManager logged 'Waiting for model to be ready' {waits}x (it then "
                     "sleeps recovery_wait_secs, 30 s, which MonitoredTrainingSession does not "
                     "expose)")
    return "; ".join(parts)


def analyse_recovery(name, records, figures, checks, clients):
    t_kill = figures["t_kill"]
    before = [max_step(r, t_kill) for r in records]
    g_kill = max(s for s in before if s is not None)
    figures["step_at_kill"] = g_kill
    for i in range(2):
        nxt = first_step_after(records[i], t_kill)
        figures[f"recovery_s_{i}"] = None if nxt is None else nxt["t"] - t_kill
        checks.info(f"client {i}: kill -> next completed step: "
                    + ("none" if nxt is None else f"{nxt['t'] - t_kill:.2f}s (global step "
                       f"{nxt['step']})") + ": "
                    + recovery_breakdown(t_kill, records[i], clients[i], nxt))
    # The step training resumed from: the global step in the checkpoint the chief restored,
    # else (nothing restored) the global step before the first step completed after the kill.
    restores = [m.group(1) for m in RESTORE_LINE.finditer(clients[0].output())]
    ckpt, ckpt_step = figures["checkpoint_at_kill"], figures["checkpoint_step_at_kill"]
    session = next((r for r in records[0] if r.get("event") == "session" and r["t"] > t_kill),
                   None)
    if name in ("kill_ps", "kill_chief"):
        checks.check(bool(restores) and all(p == ckpt for p in restores),
                     f"the chief restored {[os.path.basename(p) for p in restores]}; the latest "
                     f"checkpoint at the kill was {ckpt and os.path.basename(ckpt)}")
    else:
        checks.check(not restores, f"the chief restored nothing ({restores})")
    if restores and restores[-1] == ckpt:
        resumed = ckpt_step
    else:
        firsts = [r for r in (first_step_after(x, t_kill) for x in records) if r is not None]
        resumed = min(r["step"] for r in firsts) - 1 if firsts else None
    if session is not None:
        later = [s for r in records for s in [max_step([x for x in r if x["t"] < session["t"]])]
                 if s is not None]
        checks.info(f"the chief's new session reads global step {session['step']} "
                    f"({session['t'] - t_kill:.2f}s after the kill); the highest step logged "
                    f"before it: {max(later)} (the other replica's steps since the checkpoint "
                    f"are undone by the restore)")
    lost = None if resumed is None else max(0, g_kill - resumed)
    figures["steps_lost"] = lost
    checks.check(lost is not None and lost <= SAVE_STEPS + STEP_SLACK,
                 f"steps lost {lost}: global step {g_kill} at the kill, resumed from {resumed} "
                 f"(want <= {SAVE_STEPS} + {STEP_SLACK})")
    # The survivor's steps during the outage (until the restarted client's first step).
    if name in ("kill_worker", "kill_chief"):
        victim = 1 if name == "kill_worker" else 0
        other = 1 - victim
        back = first_step_after(records[victim], figures["t_reaped"])
        t_back = back["t"] if back else float("inf")
        during = [r for r in records[other] if "event" not in r and t_kill < r["t"] < t_back]
        figures["survivor_steps_in_outage"] = len(during)
        what = (f"client {other} completed {len(during)} steps while client {victim} was down "
                f"({(t_back - t_kill):.2f}s)")
        if name == "kill_worker":
            checks.check(len(during) > 0, what + " (the chief must keep training)")
        else:
            checks.info(what)


def run_named(name, backend, dflow, reference):
    print(f"== {name} ({backend})", flush=True)
    tmp = tempfile.mkdtemp(prefix=f"dflow_tf_recovery_{backend}_{name}_")
    checks = Checks()
    start = time.time()
    figures = {}
    try:
        figures = run_case(name, backend, dflow, tmp, checks, reference)
        ok = not checks.failures
        reason = (f"{len(checks.failures)} check(s) failed; first: {checks.failures[0]}"
                  if checks.failures else "all checks passed")
    except Exception as e:
        traceback.print_exc()
        ok, reason = False, f"{type(e).__name__}: {e}"
    elapsed = time.time() - start
    if ok and not os.environ.get("DFLOW_KEEP"):
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        reason += f" (files kept in {tmp})"
    print(f"{'PASS' if ok else 'FAIL'} {name} [{backend}] ({elapsed:.1f}s): "
          f"{format_figures(figures)}; {reason}", flush=True)
    return ok, figures, elapsed


def fmt(value, spec):
    return "-" if value is None else format(value, spec)


def format_figures(f):
    if not f:
        return "no figures"
    parts = []
    if "t_kill" in f:
        parts.append(f"kill->next step chief {fmt(f.get('recovery_s_0'), '.2f')}s, non-chief "
                     f"{fmt(f.get('recovery_s_1'), '.2f')}s, steps lost "
                     f"{fmt(f.get('steps_lost'), 'd')}")
    parts.append(f"accuracy {fmt(f.get('accuracy'), '.4f')}")
    return ", ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dflow", nargs="?")
    parser.add_argument("--only", nargs="+", action="extend", choices=CASES, metavar="NAME",
                        help=f"cases to run: {', '.join(CASES)} (undisturbed always runs: "
                        "the accuracy reference)")
    parser.add_argument("--tensorflow", action="store_true",
                        help="against tf.distribute.Server processes (a benchmark)")
    parser.add_argument("--client")
    args = parser.parse_args()
    if args.client:
        return client_main(json.loads(args.client))
    backend = "tensorflow" if args.tensorflow else "dflow"
    dflow = None
    if backend == "dflow":
        if not args.dflow:
            parser.error("path to the dflow binary is required")
        dflow = os.path.abspath(args.dflow)
        if not os.access(dflow, os.X_OK):
            print(f"FAIL: {dflow} is not an executable")
            return 1
    names = [n for n in CASES if n == "undisturbed" or not args.only or n in args.only]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    faulthandler.dump_traceback_later(
        (CASE_TIMEOUT_S[backend] + CLIENT_TIMEOUT_S[backend]) * len(names) + 120, exit=True)
    results = {}
    reference = None
    for name in names:
        ok, figures, elapsed = run_named(name, backend, dflow, reference)
        results[name] = (ok, figures, elapsed)
        if name == "undisturbed":
            reference = figures.get("accuracy")
    print(f"\nSummary ({backend}; {LAST_STEP} global steps, checkpoint every {SAVE_STEPS}, "
          f"kill at step {KILL_AT}):")
    print(f"  {'case':<12} {'result':<6} {'chief s':>8} {'non-chief s':>11} {'lost':>5} "
          f"{'accuracy':>9} {'wall s':>7}")
    for name, (ok, f, elapsed) in results.items():
        print(f"  {name:<12} {'PASS' if ok else 'FAIL':<6} {fmt(f.get('recovery_s_0'), '.2f'):>8}"
              f" {fmt(f.get('recovery_s_1'), '.2f'):>11} {fmt(f.get('steps_lost'), 'd'):>5}"
              f" {fmt(f.get('accuracy'), '.4f'):>9} {elapsed:>7.1f}")
    failed = [n for n, (ok, _, _) in results.items() if not ok]
    print(f"{len(results) - len(failed)}/{len(results)} cases passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
