#!/usr/bin/env python3
"""Replicated-training benchmark (issue 5): aggregate examples/s of `dflow cluster`
(1 ps, 1/2/3 workers, between-async and between-sync) on 127.0.0.1 against the
single-process `dflow train` measured in the same invocation, the loopback bytes
moved per global step, and, where Debian's python3-torch is importable by
/usr/bin/python3, PyTorch peers on the same model and batch
(bench/torch_cluster_bench.py: DDP over gloo, and an RPC parameter server), and
TensorFlow's own runtime: the same TF 1.x between-graph program, driven by
TensorFlow's client, on `tf.distribute.Server`s and on `dflow server`s
(bench/tf_cluster_bench.py; --no-tf skips it).

  python3 bench/cluster_bench.py                 # 1 epoch of Fashion-MNIST per run
  python3 bench/cluster_bench.py --quick         # synthetic data (8192 examples)
  python3 bench/cluster_bench.py --no-torch --repeats 1
  python3 bench/cluster_bench.py --workers 2 --rounds 5 --no-tf   # dflow and torch interleaved
  python3 bench/cluster_bench.py --data 'tfrecord:/tmp/fm/train-*'   # input read by the graph

Model: MLP 784-256-256-10, Adam lr 0.001, batch 128 per worker (dflow's defaults).
Every run trains one epoch in all: between-async stops at 468 global steps of 128
examples shared by the workers, between-sync at 60000 / (128 W) global steps of
128 W examples. Each dflow configuration runs --repeats times, the configurations
interleaved round-robin so that load drift hits them alike (the torch script runs
its --torch-repeats back to back); the table shows the median and every run. With
--rounds R, R rounds each run every dflow configuration once and then every torch
one, so that the ratios between the systems see the same drift too.
Every subprocess runs under a deadline (--timeout) in its own process group,
which is killed past it.

  scaling efficiency = agg(W) / (W x agg(1)), same system and mode
  x single           = agg(W) / the same system's single-process examples/s

On a 2-core machine the W worker processes and the ps share the same two cores, so
scaling efficiency measures what replication costs, not a speedup.

Bytes: each cluster run is started in a fresh network namespace (`unshare -n`,
root) with its own loopback interface, so the rx_bytes of "lo" in /proc/net/dev
at its end are exactly the bytes the run's processes sent each other over TCP
(payload plus TCP/IP headers, setup and the final test-set evaluation
included); divided by the global steps. The single process runs in one too
(it should read 0). Without a namespace (not root) the
delta of the machine's "lo" counter around the run is used instead, which
includes every other process's loopback traffic; the table says which. The
analytic figure: a worker step pulls every parameter and pushes every gradient,
2 x 269,322 floats = 2.15 MB; a between-sync global step holds W worker steps.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IN, HIDDEN, CLASSES = 784, 256, 10
PARAMS = IN * HIDDEN + HIDDEN + HIDDEN * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES
PARAM_BYTES = 4 * PARAMS
NETNS_SCRIPT = ('ip link set lo up || exit 97; "$@"; rc=$?; '
                'echo "LO_RX_BYTES $(awk -F"[: ]+" \'$2 == "lo" {print $3}\' /proc/net/dev)"; '
                'exit $rc')


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dflow", default=os.path.join(REPO, "build", "bin", "dflow"))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="synthetic data instead of Fashion-MNIST")
    p.add_argument("--data", help="dflow's --data instead, e.g. tfrecord:/tmp/fm/train-* (files "
                                  "of `dflow data convert`, read by the graph on each worker)")
    p.add_argument("--repeats", type=int, default=3, help="runs per dflow configuration")
    p.add_argument("--workers", default="1,2,3")
    p.add_argument("--modes", default="between-async,between-sync")
    p.add_argument("--timeout", type=float, default=180, help="seconds per subprocess")
    p.add_argument("--torch-python", default="/usr/bin/python3")
    p.add_argument("--torch-repeats", type=int, default=3, help="runs per torch configuration")
    p.add_argument("--rounds", type=int, default=0,
                   help="instead of --repeats and --torch-repeats: this many rounds, each one "
                        "run of every dflow configuration and then of every torch one, so "
                        "that both systems see the same drift of a shared machine")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--tf-repeats", type=int, default=1,
                   help="runs per TensorFlow-client configuration (bench/tf_cluster_bench.py)")
    p.add_argument("--no-tf", action="store_true", help="skip the TensorFlow-client rows")
    p.add_argument("--json-out", help="write every row as JSON here")
    return p.parse_args()


def lo_bytes():
    """rx_bytes of the loopback interface of this process's network namespace."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[0])
    return 0


def netns_works():
    try:
        return subprocess.run(["unshare", "-n", "--", "sh", "-c", NETNS_SCRIPT, "sh", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_dflow(args, argv, use_netns, tmp):
    """Runs `dflow ARGV... --metrics-out F`; returns (metrics, loopback bytes) or raises."""
    metrics = os.path.join(tmp, "metrics.json")
    if os.path.exists(metrics):
        os.remove(metrics)
    data = ["--data", args.data or ("synthetic" if args.quick else "fashion-mnist")]
    cmd = [args.dflow] + argv + ["--epochs", str(args.epochs), "--batch-size", "128"] + data + [
        "--metrics-out", metrics]
    if use_netns:
        cmd = ["unshare", "-n", "--", "sh", "-c", NETNS_SCRIPT, "sh"] + cmd
    before = lo_bytes()
    # Its own process group, so that a timeout ends the cluster's ps and workers too.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired as e:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
        raise RuntimeError(f"timed out after {args.timeout:.0f} s: {' '.join(cmd)}") from e
    moved = lo_bytes() - before
    if p.returncode != 0 or not os.path.exists(metrics):
        raise RuntimeError(f"exit {p.returncode}: {' '.join(cmd)}\n{out[-3000:]}")
    if use_netns:
        lines = [l for l in out.splitlines() if l.startswith("LO_RX_BYTES ")]
        if not lines or not lines[-1].split()[1:]:
            raise RuntimeError(f"no loopback count from the namespace: {' '.join(cmd)}")
        moved = int(lines[-1].split()[1])
    with open(metrics) as f:
        return json.load(f), moved


def median_row(system, mode, workers, runs, analytic, scope):
    runs = sorted(runs, key=lambda r: r["examples_per_sec"])
    mid = runs[len(runs) // 2]
    return {"system": system, "mode": mode, "workers": workers,
            "examples_per_sec": statistics.median(r["examples_per_sec"] for r in runs),
            "runs": [round(r["examples_per_sec"], 1) for r in runs],
            "steps": mid["steps"], "local_steps": mid.get("local_steps"),
            "seconds": mid["train_seconds"], "lo_bytes": mid["lo_bytes"], "lo_scope": scope,
            "bytes_per_step": mid["lo_bytes"] / max(1, mid["steps"]),
            "analytic_bytes_per_step": analytic, "test_accuracy": mid["test_accuracy"],
            "stale_gradients": mid.get("stale_gradients")}


def bench_dflow(args, use_netns):
    workers = [int(w) for w in args.workers.split(",") if w]
    modes = [m for m in args.modes.split(",") if m]
    configs = [("single", 1)] + [(m, w) for m in modes for w in workers]
    runs = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="cluster_bench_") as tmp:
        for rep in range(args.repeats):
            for mode, w in configs:
                argv = (["train"] if mode == "single" else
                        ["cluster", "--ps", "1", "--workers", str(w), "--mode", mode, "--"])
                m, moved = run_dflow(args, argv, use_netns, tmp)
                m["lo_bytes"] = moved
                runs[(mode, w)].append(m)
                print(f"  [{rep + 1}/{args.repeats}] dflow {mode:13s} W={w}: "
                      f"{m['examples_per_sec']:8.0f} examples/s, {m['steps']} global steps, "
                      f"{moved / 1e6:8.1f} MB on lo, load {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for mode, w in configs:
        analytic = 0 if mode == "single" else 2 * PARAM_BYTES * (w if mode == "between-sync" else 1)
        scope = "netns" if use_netns else "machine"
        rows.append(median_row("dflow", mode, w, runs[(mode, w)], analytic, scope))
    return rows


def bench_torch(args):
    script = os.path.join(REPO, "bench", "torch_cluster_bench.py")
    py = args.torch_python
    if args.no_torch:
        return [], "torch rows skipped (--no-torch)"
    if not (shutil.which(py) or os.path.exists(py)):
        return [], f"torch rows skipped: {py} not found"
    probe = subprocess.run([py, "-c", "import torch, numpy, torch.distributed.rpc"],
                           capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        return [], f"torch rows skipped: python3-torch is not importable by {py}"
    with tempfile.TemporaryDirectory(prefix="cluster_bench_torch_") as tmp:
        out = os.path.join(tmp, "torch.json")
        cmd = [py, script, "--workers", args.workers, "--epochs", str(args.epochs),
               "--repeats", str(args.torch_repeats), "--timeout", str(args.timeout),
               "--json-out", out] + (["--quick"] if args.quick else [])
        n_configs = 1 + 2 * len(args.workers.split(","))
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=(args.timeout + 60) * n_configs * args.torch_repeats)
        except subprocess.TimeoutExpired:
            return [], "torch rows failed: timed out"
        for line in p.stdout.splitlines():
            print("  " + line, flush=True)
        if p.returncode != 0 or not os.path.exists(out):
            return [], f"torch rows failed (exit {p.returncode})"
        with open(out) as f:
            rows = json.load(f)
    version = next((r.get("torch") for r in rows if r.get("torch")), "?")
    return [r for r in rows if "error" not in r], f"torch {version} via {py}"


def fmt_mb(b):
    return f"{b / 1e6:.2f}"


def bench_tf(args):
    """TensorFlow's client running the same between-graph program on dflow's servers and on
    TensorFlow's (bench/tf_cluster_bench.py); no byte counts."""
    if args.no_tf:
        return [], "TensorFlow rows skipped (--no-tf)"
    probe = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                           timeout=300)
    if probe.returncode != 0:
        return [], "TensorFlow rows skipped: tensorflow is not importable"
    with tempfile.TemporaryDirectory(prefix="cluster_bench_tf_") as tmp:
        out = os.path.join(tmp, "tf.json")
        cmd = [sys.executable, os.path.join(REPO, "bench", "tf_cluster_bench.py"),
               "--dflow", args.dflow, "--workers", args.workers, "--epochs", str(args.epochs),
               "--modes", ",".join(["single"] + [m.replace("between-", "")
                                                 for m in args.modes.split(",") if m]),
               "--repeats", str(args.tf_repeats), "--timeout", str(args.timeout),
               "--json-out", out] + (["--quick"] if args.quick else [])
        n_runs = 2 * (1 + len(args.modes.split(",")) * len(args.workers.split(","))) * \
            args.tf_repeats
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=(args.timeout + 60) * n_runs)
        except subprocess.TimeoutExpired:
            return [], "TensorFlow rows failed: timed out"
        for line in p.stdout.splitlines():
            if line.startswith("  ["):
                print(line, flush=True)
        if p.returncode != 0 or not os.path.exists(out):
            print(p.stdout[-3000:])
            return [], f"TensorFlow rows failed (exit {p.returncode})"
        with open(out) as f:
            rows = json.load(f)
    for r in rows:
        r.update(bytes_per_step=None, analytic_bytes_per_step=0 if r["mode"] == "single" else
                 2 * PARAM_BYTES * (r["workers"] if r["mode"] == "between-sync" else 1))
    return rows, (f"TensorFlow-client rows: {args.tf_repeats} run(s) each, the same TF 1.x "
                  f"program on dflow's and on TensorFlow's servers")


def table(rows):
    base = {}  # (system) -> single-process examples/s; (system, mode) -> W=1 examples/s
    for r in rows:
        if r["mode"] == "single":
            base[r["system"]] = r["examples_per_sec"]
        elif r["workers"] == 1:
            base[(r["system"], r["mode"])] = r["examples_per_sec"]
    lines = ["| system | mode | W | examples/s (median) | runs | scaling eff. | × single | "
             "global steps | lo MB / global step | analytic MB | test acc |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        agg = r["examples_per_sec"]
        single = base.get(r["system"])
        one = base.get((r["system"], r["mode"]))
        eff = "—" if r["mode"] == "single" or not one else f"{agg / (r['workers'] * one):.2f}"
        xs = f"{agg / single:.2f}" if single else "—"
        measured = fmt_mb(r["bytes_per_step"]) if r.get("bytes_per_step") is not None else "—"
        if r.get("lo_scope") == "machine":
            measured += " (machine-wide)"
        lines.append(
            f"| {r['system']} | {r['mode']} | {r['workers']} | {agg:,.0f} | "
            f"{', '.join(f'{x / 1000:.1f}k' for x in r['runs'])} | {eff} | {xs} | {r['steps']} | "
            f"{measured} | {fmt_mb(r['analytic_bytes_per_step'])} | {r['test_accuracy']:.4f} |")
    return "\n".join(lines)


def merge_rounds(rounds):
    """One row per configuration from rows of one run each: the median run's row, with every
    round's examples/s in "runs" and their median as the figure."""
    by_config = {}
    for rows in rounds:
        for r in rows:
            by_config.setdefault((r["system"], r["mode"], r["workers"]), []).append(r)
    merged = []
    for runs in by_config.values():
        runs.sort(key=lambda r: r["examples_per_sec"])
        row = dict(runs[len(runs) // 2])
        row["runs"] = [round(r["examples_per_sec"], 1) for r in runs]
        row["examples_per_sec"] = statistics.median(r["examples_per_sec"] for r in runs)
        merged.append(row)
    return merged


def bench_interleaved(args, use_netns):
    """--rounds: dflow's configurations, then torch's, one run each, round after round."""
    once = argparse.Namespace(**{**vars(args), "repeats": 1, "torch_repeats": 1})
    dflow_rounds, torch_rounds, torch_note = [], [], ""
    for i in range(args.rounds):
        print(f"round {i + 1}/{args.rounds}", flush=True)
        dflow_rounds.append(bench_dflow(once, use_netns))
        rows, torch_note = bench_torch(once)
        torch_rounds.append(rows)
    return merge_rounds(dflow_rounds), merge_rounds(torch_rounds), torch_note


def main():
    args = parse_args()
    if args.rounds > 0:  # Each row then has one run a round.
        args.repeats = args.torch_repeats = args.rounds
    if not os.path.exists(args.dflow):
        sys.exit(f"no dflow binary at {args.dflow} (ninja -C build dflow)")
    use_netns = netns_works()
    start = time.time()
    print(f"cluster_bench: {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"{args.data or ('synthetic data' if args.quick else 'Fashion-MNIST')}, {args.epochs} epoch(s), "
          f"loopback bytes {'per run (own network namespace)' if use_netns else 'machine-wide'}",
          flush=True)
    if args.rounds > 0:
        rows, torch_rows, torch_note = bench_interleaved(args, use_netns)
    else:
        rows = bench_dflow(args, use_netns)
        torch_rows, torch_note = bench_torch(args)
    rows += torch_rows
    tf_rows, tf_note = bench_tf(args)
    rows += tf_rows
    end_load = os.getloadavg()
    print()
    print(table(rows))
    print()
    dflow_single = next(r["examples_per_sec"] for r in rows
                        if r["system"] == "dflow" and r["mode"] == "single")
    torch_single = next((r["examples_per_sec"] for r in rows
                         if r["system"] == "torch" and r["mode"] == "single"), None)
    print(f"dflow: {args.repeats} run(s) per row (a pool of one thread per core in each process, "
          f"one thread in each worker where `dflow cluster` has more tasks than cores); "
          f"{torch_note}"
          + (f", {args.torch_repeats} run(s) per row, max(1, 2 // W) threads per training "
             f"process" if torch_rows else ""))
    print(tf_note)
    for r in tf_rows:
        if r["system"] == "tf-client/dflow":
            peer = next((x for x in tf_rows if x["system"] == "tf-client/tensorflow" and
                         x["mode"] == r["mode"] and x["workers"] == r["workers"]), None)
            own = next((x for x in rows if x["system"] == "dflow" and x["mode"] == r["mode"] and
                        x["workers"] == r["workers"]), None)
            if peer:
                print(f"{r['mode']} W={r['workers']}: TF client on dflow / on TensorFlow "
                      f"servers = {r['examples_per_sec'] / peer['examples_per_sec']:.2f}"
                      + (f"; dflow's trainer / TensorFlow's runtime = "
                         f"{own['examples_per_sec'] / peer['examples_per_sec']:.2f}" if own else ""))
    if torch_single:
        print(f"torch single / dflow single = {torch_single / dflow_single:.2f}")
    print(f"analytic bytes: 2 x {PARAMS:,} float32 parameters = {2 * PARAM_BYTES:,} bytes per "
          f"worker step; elapsed {time.time() - start:.0f} s; load average at the end "
          f"{' '.join(f'{x:.2f}' for x in end_load)}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
