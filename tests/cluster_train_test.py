#!/usr/bin/env python3
"""Replicated training end to end: `dflow cluster` on 127.0.0.1.

Asynchronous between-graph and in-graph training of the MLP on
Fashion-MNIST (1 ps, 2 workers, 5 epochs: stale gradients cost a little
against the single process's 3) must reach 0.84 test accuracy; a
bad train flag stops the whole cluster with a clear error; SIGINT stops every
task. Each run is bounded in time.

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
    """dflow train processes of this test still running."""
    p = subprocess.run(["pgrep", "-f", f"{DFLOW} train|dflow train --cluster"],
                       capture_output=True, text=True)
    return [line for line in p.stdout.split() if line.strip()]


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

    rc, out, took = cluster(["--", "--model", "nosuch"], timeout=60)
    check("a bad train flag fails the cluster", rc != 0 and "nosuch" in out, out)
    check("a bad train flag fails fast", took < 30, f"{took:.0f}s")

    # SIGINT while training: every task stops, bounded.
    p = subprocess.Popen([DFLOW, "cluster", "--", "--epochs", "50"], stdout=subprocess.PIPE,
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
