"""Test harness: `dflow server` processes on 127.0.0.1.

Ports: the kernel picks free ones (bind to 127.0.0.1:0, then release), since
every task must know the others' addresses before it starts.
"""
import argparse
import json
import os
import shutil
import sys
import signal
import socket
import subprocess
import tempfile
import threading
import time
import traceback


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid, field):
    """A number of /proc/PID/status ("VmRSS", "VmHWM" in KB, "Threads"); -1 when absent."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def chain_graph(nodes, op="Identity"):
    """A GraphDef: Const c, then `nodes` float nodes of `op` in a chain (AddV2 also adds c
    at each link). Needs TensorFlow's protos."""
    from tensorflow.core.framework import graph_pb2, types_pb2
    g = graph_pb2.GraphDef()
    c = g.node.add(name="c", op="Const")
    c.attr["dtype"].type = types_pb2.DT_FLOAT
    c.attr["value"].tensor.dtype = types_pb2.DT_FLOAT
    c.attr["value"].tensor.float_val.append(1.0)
    prev = "c"
    for i in range(nodes):
        n = g.node.add(name=f"n{i}", op=op, input=[prev] + (["c"] if op == "AddV2" else []))
        n.attr["T"].type = types_pb2.DT_FLOAT
        prev = n.name
    return g


class Server:
    """One `dflow server` process; waits (bounded) until it serves."""

    def __init__(self, dflow, log_dir, cluster_json, job, task, timeout=30, extra_args=()):
        self._start([dflow, "server", "--cluster", cluster_json, "--job", job, "--task",
                     str(task), "--cpus", "2", *extra_args], log_dir, job, task, timeout)

    def _start(self, cmd, log_dir, job, task, timeout):
        self.name = f"/job:{job}/replica:0/task:{task}"
        self.log_path = os.path.join(log_dir, f"{job}{task}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            if "serving grpc://" in self.output():
                return
            time.sleep(0.05)
        self.stop(signal.SIGKILL)
        raise RuntimeError(f"{self.name} did not start: {self.output()[-2000:]}")

    def output(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


class TfServer(Server):
    """One tf.distribute.Server process (TensorFlow's runtime, for comparisons); Server's
    interface. TensorFlow's import takes several seconds, hence the longer wait."""

    SCRIPT = ("import json, sys, os\n"
              "os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')\n"
              "import tensorflow as tf\n"
              "s = tf.distribute.Server(tf.train.ClusterSpec(json.loads(sys.argv[1])),\n"
              "                         job_name=sys.argv[2], task_index=int(sys.argv[3]))\n"
              "print('serving grpc://' + s.target, flush=True)\n"
              "s.join()\n")

    def __init__(self, log_dir, cluster_json, job, task, timeout=60):
        self._start([sys.executable, "-c", self.SCRIPT, cluster_json, job, str(task)], log_dir,
                    job, task, timeout)


def start_cluster(dflow, log_dir, tasks_per_job, extra_args=()):
    """Starts a server per task, e.g. tasks_per_job={"ps": 1, "worker": 2};
    `extra_args` go to every `dflow server` (e.g. ["--auth-token-file", path]).

    Returns (cluster JSON, {job: [port, ...]}, {job: [Server, ...]}).
    """
    ports = {job: [free_port() for _ in range(n)] for job, n in tasks_per_job.items()}
    cluster = json.dumps({job: [f"127.0.0.1:{p}" for p in ps] for job, ps in ports.items()})
    servers = {}
    try:
        for job, n in tasks_per_job.items():
            servers[job] = [Server(dflow, log_dir, cluster, job, i, extra_args=extra_args)
                            for i in range(n)]
    except Exception:
        for started in servers.values():
            for s in started:
                s.stop(signal.SIGKILL)
        raise
    return cluster, ports, servers


class WatchedCluster:
    """A cluster for one test case (`with WatchedCluster(...) as c:`, `c.target` is the
    first worker's grpc:// address); a watchdog kills its servers after `timeout_s`, so a
    blocked client call fails instead of hanging; always stopped on exit."""

    def __init__(self, dflow, tmp, timeout_s, tasks_per_job=None):
        _, ports, self.servers = start_cluster(dflow, tmp, tasks_per_job or {"ps": 1, "worker": 1})
        self.target = f"grpc://127.0.0.1:{ports['worker'][0]}"
        self.timeout_s = timeout_s
        self.timer = threading.Timer(timeout_s, self.kill)
        self.timer.daemon = True
        self.timer.start()

    def kill(self):
        print(f"    watchdog: killing the servers after {self.timeout_s}s", flush=True)
        for group in self.servers.values():
            for s in group:
                s.proc.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        for group in self.servers.values():
            for s in group:
                s.stop(signal.SIGKILL)


def import_tensorflow_or_skip():
    """(numpy, tensorflow), or exit 77 (ctest's skip) saying why."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import numpy
        import tensorflow
    except ImportError as e:
        print(f"SKIP: TensorFlow cannot be imported here ({e}); "
              "install it with `python3 -m pip install tensorflow-cpu`")
        sys.exit(77)
    return numpy, tensorflow


class Checks:
    """Prints each check of a test case; remembers the failures."""

    def __init__(self):
        self.failures = []

    def check(self, ok, what):
        print(f"    {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            self.failures.append(what)
        return ok

    def info(self, what):
        print(f"    info {what}", flush=True)


def run_case(prefix, name, fn, dflow):
    """Runs case `fn(dflow, tmp, checks)` in a fresh temporary directory (kept, and
    named, when the case fails); prints its PASS/FAIL line with the first failed check
    or the exception. Returns whether it passed."""
    print(f"== {name}", flush=True)
    tmp = tempfile.mkdtemp(prefix=f"{prefix}_{name}_")
    checks = Checks()
    start = time.time()
    try:
        fn(dflow, tmp, checks)
        ok = not checks.failures
        reason = (f"{len(checks.failures)} check(s) failed; first: {checks.failures[0]}"
                  if checks.failures else "all checks passed")
    except Exception as e:
        traceback.print_exc()
        ok, reason = False, str(e).splitlines()[0] if str(e) else repr(e)
    if ok:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        reason += f" (files kept in {tmp})"
    print(f"{'PASS' if ok else 'FAIL'} {name} ({time.time() - start:.1f}s): {reason}",
          flush=True)
    return ok


def run_cases(cases, description, prefix):
    """The main of an interop test: `SCRIPT path/to/dflow [--only NAME ...]` runs the
    named cases (all by default) and returns the exit status (1 if any failed)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("dflow")
    parser.add_argument("--only", nargs="+", choices=list(cases), metavar="NAME")
    args = parser.parse_args()
    dflow = os.path.abspath(args.dflow)
    # SIGTERM (a runner's timeout) unwinds through the cases' finally blocks.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = {n: run_case(prefix, n, cases[n], dflow) for n in (args.only or list(cases))}
    failed = [n for n, ok in results.items() if not ok]
    print(f"{len(results) - len(failed)}/{len(results)} cases passed"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0
