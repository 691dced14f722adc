#!/usr/bin/env python3
"""Peak memory of a real `dflow server` running a large chain graph.

Writes a chain GraphDef (a Const, then N Identity or AddV2 nodes, each reading
the one before), starts one `dflow server` task on 127.0.0.1, runs the graph
on it once with `dflow run-graph ... --target grpc://...` (CreateSession,
RunStep fetching the end of the chain, CloseSession) and reads the server's
/proc/PID/status: the peak RSS growth over the idle server (VmHWM - VmRSS
before) per node, and the RSS left afterwards. A second run of the same
graph shows whether the first one's memory is reused. For where the bytes go
stage by stage, see graph_memory_bench.cc. Not a test.

Usage: graph_memory_server.py path/to/dflow [--nodes 200000] [--op Identity]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from dflow_cluster import Server, chain_graph, free_port, proc_status  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dflow")
    p.add_argument("--nodes", type=int, default=200000)
    p.add_argument("--op", choices=["Identity", "AddV2"], default="Identity")
    args = p.parse_args()
    tmp = tempfile.mkdtemp(prefix="dflow_graph_memory_")
    path = os.path.join(tmp, "chain.pb")
    with open(path, "wb") as f:
        f.write(chain_graph(args.nodes, args.op).SerializeToString())
    print(f"{args.nodes}-node {args.op} chain: GraphDef {os.path.getsize(path) / 1e6:.1f} MB "
          f"serialized")
    port = free_port()
    server = Server(args.dflow, tmp, f'{{"worker": ["127.0.0.1:{port}"]}}', "worker", 0)
    try:
        pid = server.proc.pid
        idle_kb = proc_status(pid, "VmRSS")
        print(f"idle server: RSS {idle_kb / 1e3:.1f} MB")
        for run in (1, 2):
            start = time.time()
            out = subprocess.run(
                [args.dflow, "run-graph", path, "--fetch", f"n{args.nodes - 1}:0", "--target",
                 f"grpc://127.0.0.1:{port}"], capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                raise RuntimeError(f"run-graph failed: {out.stderr[-2000:]}")
            hwm_kb, rss_kb = proc_status(pid, "VmHWM"), proc_status(pid, "VmRSS")
            print(f"run {run} ({time.time() - start:.1f} s): peak RSS {hwm_kb / 1e3:.1f} MB = "
                  f"{(hwm_kb - idle_kb) * 1024 / args.nodes:.0f} B/node over idle; RSS after "
                  f"CloseSession {rss_kb / 1e3:.1f} MB")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
