"""Test harness: `dflow server` processes on 127.0.0.1.

Ports: the kernel picks free ones (bind to 127.0.0.1:0, then release), since
every task must know the others' addresses before it starts.
"""
import json
import os
import sys
import signal
import socket
import subprocess
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `dflow server` process; waits (bounded) until it serves."""

    def __init__(self, dflow, log_dir, cluster_json, job, task, timeout=30, extra_args=()):
        self.name = f"/job:{job}/replica:0/task:{task}"
        self.log_path = os.path.join(log_dir, f"{job}{task}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [dflow, "server", "--cluster", cluster_json, "--job", job, "--task", str(task),
             "--cpus", "2", *extra_args], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline and self.proc.poll() is None:
            if "serving grpc://" in self.output():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not start: {self.output()}")

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
