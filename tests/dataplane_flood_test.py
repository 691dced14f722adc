#!/usr/bin/env python3
"""A flood of idle and half-written connections on a ps's tensor data plane.

Starts 1 ps and 1 worker (`dflow server` processes on 127.0.0.1) and runs a
graph whose worker reads a variable of the ps, so every step pulls a tensor
from the ps (RecvTensor: the worker connects to the ps's data plane). Then it
opens 1,000 connections to the ps's data-plane port, all from 127.0.0.1: a
third idle, a third stopping mid-header, a third stopping mid-request, and,
while they are held, runs steps again (the worker's first data-plane
connection meets the flood). Checks:
  - every step during the flood succeeds with the right values (a refused
    data-plane connection falls back to gRPC);
  - the ps's threads (/proc/PID/status Threads) stay within THREAD_BOUND of
    their count before the flood, its RSS within RSS_BOUND_MB;
  - once the flood's sockets close, the ps's open descriptors and threads
    return to their count before the flood, and steps still succeed.
Every wait is bounded; nothing leaves 127.0.0.1.

Usage: dataplane_flood_test.py path/to/dflow
"""
import json
import os
import resource
import socket
import struct
import subprocess
import sys
import tempfile
import time

from dflow_cluster import Checks, proc_status, start_cluster

DFLOW = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="dflow_flood_test_")
FLOOD = 1000
THREAD_BOUND = 8  # A thread per connection would add hundreds.
RSS_BOUND_MB = 64  # 128 accepted connections x a 64 KiB request at most, and slack.
STEPS = 4

# v (4096 floats) on the ps; `doubled` on the worker reads it across processes.
GRAPH = """
node { name: "v" op: "VariableV2" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 4096 } } } } }
node { name: "init_value" op: "Const" device: "/job:ps/task:0"
  attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 4096 } }
    float_val: 1.5 } } } }
node { name: "init" op: "Assign" input: "v" input: "init_value" device: "/job:ps/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "doubled" op: "Add" input: "v" input: "v" device: "/job:worker/task:0"
  attr { key: "T" value { type: DT_FLOAT } } }
node { name: "total" op: "Sum" input: "doubled" input: "axis" device: "/job:worker/task:0"
  attr { key: "T" value { type: DT_FLOAT } }
  attr { key: "Tidx" value { type: DT_INT32 } }
  attr { key: "keep_dims" value { b: false } } }
node { name: "axis" op: "Const" device: "/job:worker/task:0"
  attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
"""


def run_graph(target, graph, fetch):
    """(the fetched values or None, what dflow printed)."""
    config = os.path.join(TMP, "config.pbtxt")
    with open(config, "w") as f:
        f.write("operation_timeout_in_ms: 20000\n")
    p = subprocess.run([DFLOW, "run-graph", graph, "--target", target, "--config", config,
                        "--fetch", fetch], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return None, p.stdout + p.stderr
    try:
        return json.loads(p.stdout.splitlines()[0])["values"], p.stdout
    except (ValueError, IndexError, KeyError):
        return None, p.stdout + p.stderr


def total(target, graph):
    """Whether a cross-task step gives 4096 x 1.5 x 2, and what dflow printed."""
    values, out = run_graph(target, graph, "total:0")
    return values == [12288.0], out


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def data_plane_port(server, timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for line in server.output().splitlines():
            if "tensor data plane on port" in line:
                return int(line.rsplit(" ", 1)[1])
        time.sleep(0.05)
    return 0


def flood(port, n, wall=30):
    """n connections to 127.0.0.1:port: idle, mid-header, mid-request."""
    header = struct.pack("<IIQ", 0x51524644, 1000, 10_000_000)  # Announces 1000 bytes.
    socks = []
    deadline = time.time() + wall
    for i in range(n):
        if time.time() > deadline:
            break
        s = socket.socket()
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            if i % 3 == 1:
                s.send(header[:7])
            elif i % 3 == 2:
                s.send(header + b"\x08\x01")
        except OSError:
            pass  # Refused or reset: the ps's business; the socket is still closed below.
        socks.append(s)
    return socks


def count_not_served(socks):
    """How many flood sockets the ps answered "not served" (frame kind 4)."""
    n = 0
    for s in socks:
        try:
            s.settimeout(0.01)
            head = s.recv(32)
            n += len(head) >= 8 and struct.unpack("<II", head[:8]) == (0x53524644, 4)
        except OSError:
            pass
    return n


def wait_until(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = FLOOD + 256
    if soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            print(f"SKIP: {want} descriptors are needed, the hard limit is {hard}")
            return 77
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    graph = os.path.join(TMP, "graph.pbtxt")
    with open(graph, "w") as f:
        f.write(GRAPH)
    c = Checks()
    _, ports, servers = start_cluster(DFLOW, TMP, {"ps": 1, "worker": 1})
    ps, worker = servers["ps"][0], servers["worker"][0]
    target = f"grpc://127.0.0.1:{ports['worker'][0]}"
    socks = []
    try:
        port = data_plane_port(ps)
        if not c.check(port > 0, "the ps logs its data-plane port"):
            return 1
        values, out = run_graph(target, graph, "init:0")
        c.check(values is not None, f"init on the ps {'' if values else out[-300:]}")
        pid = ps.proc.pid
        time.sleep(0.5)
        threads0, rss0, fds0 = proc_status(pid, "Threads"), proc_status(pid, "VmRSS"), open_fds(pid)
        c.info(f"ps before the flood: {threads0} threads, RSS {rss0 / 1024:.1f} MB, "
               f"{fds0} descriptors")

        start = time.time()
        socks = flood(port, FLOOD)
        c.info(f"{len(socks)} flood connections opened in {time.time() - start:.1f} s")
        c.check(len(socks) == FLOOD, f"{FLOOD} flood connections opened")
        threads1, rss1 = proc_status(pid, "Threads"), proc_status(pid, "VmRSS")
        ok_steps = 0
        for step in range(STEPS):
            ok, out = total(target, graph)
            ok_steps += ok
            if not ok:
                c.info(f"step {step} during the flood: {out[-400:]}")
            threads1 = max(threads1, proc_status(pid, "Threads"))
            rss1 = max(rss1, proc_status(pid, "VmRSS"))
        fds1 = open_fds(pid)
        c.info(f"ps during the flood (peak): {threads1} threads, RSS {rss1 / 1024:.1f} MB, "
               f"{fds1} descriptors")
        c.check(ok_steps == STEPS, f"{ok_steps} of {STEPS} cross-task steps during the flood "
                                   "succeed with the right value")
        c.check(threads1 - threads0 <= THREAD_BOUND,
                f"ps threads during the flood {threads1} <= {threads0} + {THREAD_BOUND}")
        c.check((rss1 - rss0) / 1024 <= RSS_BOUND_MB,
                f"ps RSS during the flood grew {(rss1 - rss0) / 1024:.1f} MB <= {RSS_BOUND_MB} MB")
        c.check(fds1 - fds0 <= 128 + 16,
                f"ps holds {fds1 - fds0} more descriptors (per-peer cap 128)")

        c.info(f"{count_not_served(socks)} flood connections were answered \"not served\"")
        for s in socks:
            s.close()
        socks = []
        released = wait_until(lambda: open_fds(pid) <= fds0 + 4, 15)
        threads2, rss2, fds2 = proc_status(pid, "Threads"), proc_status(pid, "VmRSS"), open_fds(pid)
        c.info(f"ps after the flood: {threads2} threads, RSS {rss2 / 1024:.1f} MB, "
               f"{fds2} descriptors")
        c.check(released, f"ps descriptors back to {fds2} (before: {fds0})")
        c.check(threads2 <= threads0 + 2, f"ps threads back to {threads2} (before: {threads0})")
        ok, out = total(target, graph)
        c.check(ok, f"a step after the flood succeeds {'' if ok else out[-300:]}")
        c.check(ps.proc.poll() is None and worker.proc.poll() is None, "both servers are alive")
    finally:
        for s in socks:
            s.close()
        worker.stop()
        ps.stop()
    print(f"{len(c.failures)} failed" if c.failures else "all passed")
    return 1 if c.failures else 0


if __name__ == "__main__":
    sys.exit(main())
