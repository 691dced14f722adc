#!/usr/bin/env python3
"""Step-time cost of checkpointing on a cluster (a benchmark, not a test).

`dflow cluster` (1 ps, 2 workers, between-async MLP on Fashion-MNIST, 3 epochs)
without checkpoints, saving every 10 global steps, and saving every 60 s (which
in a ~20 s run means the checkpoints at the start and the end), interleaved over
R rounds so the VM's drifting speed cancels. Reports each configuration's median
training examples/s and its ratio to the run without checkpoints in the same round.

Usage: checkpoint_overhead_bench.py path/to/dflow [--rounds R]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

CONFIGS = {
    "none": [],
    "every 10 steps": ["--save-checkpoint-steps", "10"],
    "every 60 s": ["--save-checkpoint-secs", "60"],
}


def run(dflow, tmp, name, extra):
    ckpt = os.path.join(tmp, "ckpt")
    shutil.rmtree(ckpt, ignore_errors=True)
    metrics = os.path.join(tmp, "metrics.json")
    args = ["--epochs", "3", "--metrics-out", metrics]
    if extra:
        args += ["--checkpoint-dir", ckpt] + extra
    subprocess.run([dflow, "cluster", "--ps", "1", "--workers", "2", "--mode", "between-async",
                    "--"] + args, check=True, capture_output=True, timeout=300)
    return json.load(open(metrics))["examples_per_sec"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dflow")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dflow_ckpt_overhead_")
    rates = {name: [] for name in CONFIGS}
    for r in range(a.rounds):
        for name, extra in CONFIGS.items():
            rates[name].append(run(a.dflow, tmp, name, extra))
        print(f"round {r + 1}: " + ", ".join(f"{n} {v[-1]:.0f}" for n, v in rates.items()),
              flush=True)
    print("\nconfiguration     median examples/s   median ratio to none (per round)")
    for name, v in rates.items():
        ratios = [x / y for x, y in zip(v, rates["none"])]
        print(f"{name:17} {statistics.median(v):17.0f}   {statistics.median(ratios):.3f}")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
