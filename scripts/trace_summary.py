#!/usr/bin/env python3
"""Where a traced step's time goes, from `dflow train --trace-steps` Chrome traces.

For each trace file: the step's span, then per device (trace process) the number of
ops, the sum of their spans and the op types that took longest. Several files (steps)
are summed per op type in the last table.

  scripts/trace_summary.py trace_step20.json trace_step21.json [--top 15]

With CUDA_LAUNCH_BLOCKING=1 a GPU op's span is its kernels' time; without it, the
host's time to launch them (the executor's overhead).
"""
import argparse
import collections
import json
import sys


def load(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    ops = [e for e in events if e.get("ph") == "X"]
    return names, ops


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    total = collections.defaultdict(lambda: [0, 0])  # (device, op) -> [count, us]
    for path in args.traces:
        names, ops = load(path)
        if not ops:
            print(f"{path}: no op spans")
            continue
        start = min(e["ts"] for e in ops)
        end = max(e["ts"] + e.get("dur", 0) for e in ops)
        print(f"{path}: step span {end - start} us, {len(ops)} spans")
        by_device = collections.defaultdict(list)
        for e in ops:
            by_device[names.get(e["pid"], str(e["pid"]))].append(e)
        for device, events in sorted(by_device.items()):
            busy = sum(e.get("dur", 0) for e in events)
            print(f"  {device}: {len(events)} spans, {busy} us summed")
            for e in events:
                key = (device.rsplit("/", 1)[-1], e["args"].get("op", e["name"]))
                total[key][0] += 1
                total[key][1] += e.get("dur", 0)
    print(f"{'device':<14} {'op':<36} {'count':>6} {'us':>9} {'us/call':>8}")
    for (device, op), (count, us) in sorted(total.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"{device:<14} {op:<36} {count:>6} {us:>9} {us / count:>8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
