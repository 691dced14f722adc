#!/usr/bin/python3
"""PyTorch peers for bench/cluster_bench.py: the 784-256-256-10 MLP (ReLU, softmax
cross entropy, Adam lr 0.001, batch 128 per worker) trained on 127.0.0.1 as

  single  one process, no torch.distributed (the baseline of the rows below);
  ddp     DistributedDataParallel, gloo backend, W processes, each on its own shard;
          one global step = one step of every process (synchronous allreduce);
  rpc-ps  torch.distributed.rpc parameter server: one ps process holds the
          parameters and applies Adam; W trainer processes each send their
          gradients and get the updated parameters back in one RPC per step,
          asynchronously (no barrier between trainers, like dflow's between-async).

  /usr/bin/python3 bench/torch_cluster_bench.py                  # all, 1 epoch
  /usr/bin/python3 bench/torch_cluster_bench.py --quick          # synthetic data
  /usr/bin/python3 bench/torch_cluster_bench.py --json-out r.json

Every configuration runs as fresh processes of this script (`--role ...`), each
waited on with a deadline and killed past it. Debian's python3-torch is for
/usr/bin/python3, not the pyenv python3 on PATH.

Threads: the machine has 2 cores, so each training process gets
max(1, 2 // W) torch threads (OpenMP and OpenBLAS alike, set before torch is
imported, OMP_WAIT_POLICY=passive as in bench/torch_mlp_bench.py); the rpc ps
process gets 1 thread for Adam. dflow does not cap its processes: every dflow
task has its own inter-op and intra-op pools of hardware_concurrency() = 2
threads each.

Traffic: gloo and TensorPipe are pinned to TCP on the loopback interface
(GLOO_SOCKET_IFNAME=lo, TP_SOCKET_IFNAME=lo, TensorPipe transport "uv" and
channel "basic", i.e. no shared memory or cross-memory-attach shortcut), so the
loopback byte counts in /proc/net/dev are comparable with dflow's gRPC traffic.
Each configuration runs in a fresh network namespace (`unshare -n`, needs root)
whose "lo" counts only its own processes' bytes; without one the delta of the
machine's "lo" counter is reported (then other processes' traffic is included).

Aggregate examples/s = global steps x examples per global step / seconds, the
seconds counted from a barrier after setup (model built, data loaded,
processes connected) to the end of the last step, as dflow's train_seconds.
"""
import argparse
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time

BATCH, IN, HIDDEN, CLASSES = 128, 784, 256, 10
LR = 0.001
DATA_DIR = "/usr/share/datasets/fashion-mnist"
# Weights and biases of the three layers, float32.
PARAMS = IN * HIDDEN + HIDDEN + HIDDEN * HIDDEN + HIDDEN + HIDDEN * CLASSES + CLASSES
PARAM_BYTES = 4 * PARAMS


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--modes", default="single,ddp,rpc-ps")
    p.add_argument("--workers", default="1,2,3", help="comma-separated W for ddp and rpc-ps")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--quick", action="store_true", help="synthetic data, 8192 examples")
    p.add_argument("--repeats", type=int, default=1, help="runs per configuration (median)")
    p.add_argument("--timeout", type=float, default=150, help="seconds per configuration")
    p.add_argument("--json-out", help="write the results as JSON here")
    p.add_argument("--data-dir", default=DATA_DIR)
    # Internal: one process of one configuration.
    p.add_argument("--role", choices=["single", "ddp", "ps", "trainer"], help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)  # MODE:W, run in the driver's netns.
    return p.parse_args(argv)


# --- data --------------------------------------------------------------------


def load_idx(path):
    import numpy as np
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_data(args):
    """(train_x, train_y, test_x, test_y) as torch tensors; pixels scaled to [0, 1]."""
    import numpy as np
    import torch
    if args.quick:
        rng = np.random.default_rng(1)
        n, test = 8192, 8192 // 5
        x = rng.random((n + test, IN), dtype=np.float32)
        y = rng.integers(0, CLASSES, n + test).astype(np.int64)
        return (torch.from_numpy(x[:n]), torch.from_numpy(y[:n]),
                torch.from_numpy(x[n:]), torch.from_numpy(y[n:]))
    d = args.data_dir

    def images(name):
        a = load_idx(os.path.join(d, name)).reshape(-1, IN).astype(np.float32) / 255.0
        return torch.from_numpy(a)

    def labels(name):
        return torch.from_numpy(load_idx(os.path.join(d, name)).astype(np.int64))

    return (images("train-images-idx3-ubyte.gz"), labels("train-labels-idx1-ubyte.gz"),
            images("t10k-images-idx3-ubyte.gz"), labels("t10k-labels-idx1-ubyte.gz"))


def make_model():
    import torch
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, CLASSES))


def accuracy(model, x, y):
    import torch
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def batches(n, rank, world, seed):
    """Endless row indices of this rank's batches: each epoch a fresh permutation,
    global batch i of it made of `world` slices of BATCH rows, slice `rank` ours."""
    import torch
    per_epoch = n // (BATCH * world)
    epoch = 0
    while True:
        g = torch.Generator().manual_seed(seed + epoch)
        perm = torch.randperm(n, generator=g)
        for i in range(per_epoch):
            start = (i * world + rank) * BATCH
            yield perm[start:start + BATCH]
        epoch += 1


def emit(result):
    print("RESULT " + json.dumps(result), flush=True)


# --- roles (each runs in its own process) -------------------------------------


def run_single(args):
    import torch
    torch.set_num_threads(args.threads)
    x, y, tx, ty = load_data(args)
    model = make_model()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = (x.shape[0] // BATCH) * args.epochs
    it = batches(x.shape[0], 0, 1, seed=1)
    start = time.perf_counter()
    for _ in range(steps):
        idx = next(it)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x[idx]), y[idx]).backward()
        opt.step()
    seconds = time.perf_counter() - start
    emit({"steps": steps, "seconds": seconds, "examples_per_sec": steps * BATCH / seconds,
          "test_accuracy": accuracy(model, tx, ty), "torch": torch.__version__})


def run_ddp(args):
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    torch.set_num_threads(args.threads)
    x, y, tx, ty = load_data(args)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}",
                            rank=args.rank, world_size=args.world)
    model = DistributedDataParallel(make_model())
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = (x.shape[0] // (BATCH * args.world)) * args.epochs  # Global steps, one epoch each.
    it = batches(x.shape[0], args.rank, args.world, seed=1)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(steps):
        idx = next(it)
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x[idx]), y[idx]).backward()  # Allreduces the gradients.
        opt.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if args.rank == 0:
        emit({"steps": steps, "seconds": seconds,
              "examples_per_sec": steps * BATCH * args.world / seconds,
              "test_accuracy": accuracy(model.module, tx, ty), "torch": torch.__version__})
    dist.destroy_process_group()


# The ps process's state; the trainers' RPCs name these module-level functions.
PS = {}


def _ps_ready():
    """Blocks until every trainer has called it; the ps clock starts then."""
    PS["barrier"].wait(timeout=120)
    return True


def _ps_params():
    with PS["lock"]:
        return [p.detach().clone() for p in PS["model"].parameters()]


def _ps_apply(grads):
    """Applies one trainer's gradients with Adam; returns (global step, new parameters)."""
    import torch
    with PS["lock"]:
        if PS["step"] >= PS["total"]:
            return PS["step"], None
        for p, g in zip(PS["model"].parameters(), grads):
            p.grad = g
        PS["opt"].step()
        PS["step"] += 1
        if PS["step"] == PS["total"]:
            PS["end"] = time.perf_counter()
            PS["done"].set()
        with torch.no_grad():
            return PS["step"], [p.detach().clone() for p in PS["model"].parameters()]


def rpc_options(args):
    from torch.distributed import rpc
    return rpc.TensorPipeRpcBackendOptions(
        init_method=f"tcp://127.0.0.1:{args.port}", num_worker_threads=8, rpc_timeout=120,
        _transports=["uv"], _channels=["basic"])


def run_ps(args):
    import threading
    import torch
    from torch.distributed import rpc
    torch.set_num_threads(1)
    x, _, tx, ty = load_data(args)
    trainers = args.world - 1
    PS.update(model=make_model(), lock=threading.Lock(), step=0, done=threading.Event(),
              total=(x.shape[0] // BATCH) * args.epochs, end=None)
    PS["opt"] = torch.optim.Adam(PS["model"].parameters(), lr=LR)
    start = {}
    PS["barrier"] = threading.Barrier(trainers,
                                      action=lambda: start.setdefault("t", time.perf_counter()))
    rpc.init_rpc("ps", rank=0, world_size=args.world, rpc_backend_options=rpc_options(args))
    PS["done"].wait(timeout=args.timeout)
    rpc.shutdown()  # Waits for the trainers.
    if PS["end"] is None:
        raise SystemExit("ps: training did not finish")
    seconds = PS["end"] - start["t"]
    emit({"steps": PS["total"], "seconds": seconds,
          "examples_per_sec": PS["total"] * BATCH / seconds,
          "test_accuracy": accuracy(PS["model"], tx, ty), "torch": torch.__version__})


def run_trainer(args):
    import torch
    from torch.distributed import rpc
    torch.set_num_threads(args.threads)
    x, y, _, _ = load_data(args)
    model = make_model()
    loss_fn = torch.nn.CrossEntropyLoss()
    trainers = args.world - 1
    it = batches(x.shape[0], args.rank - 1, trainers, seed=1)
    rpc.init_rpc(f"trainer{args.rank}", rank=args.rank, world_size=args.world,
                 rpc_backend_options=rpc_options(args))
    params = rpc.rpc_sync("ps", _ps_params)
    rpc.rpc_sync("ps", _ps_ready)
    while params is not None:
        with torch.no_grad():
            for p, v in zip(model.parameters(), params):
                p.copy_(v)
        idx = next(it)
        model.zero_grad(set_to_none=True)
        loss_fn(model(x[idx]), y[idx]).backward()
        _, params = rpc.rpc_sync("ps", _ps_apply, args=([p.grad for p in model.parameters()],))
    rpc.shutdown()


# --- driver ----------------------------------------------------------------------


def lo_bytes():
    """Bytes received on the loopback interface so far (all of the machine's loopback traffic;
    on lo every byte sent is received once, so this counts each byte once)."""
    with open("/proc/net/dev") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name.strip() == "lo":
                return int(rest.split()[0])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(args, role_args, threads):
    """Runs one configuration's processes; returns the RESULT of the one that emits it."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"),
               GLOO_SOCKET_IFNAME="lo", TP_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1")
    common = [sys.executable, os.path.abspath(__file__), "--epochs", str(args.epochs),
              "--data-dir", args.data_dir, "--timeout", str(args.timeout)]
    common += ["--quick"] if args.quick else []
    procs = [subprocess.Popen(common + ra + ["--threads", str(threads)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for ra in role_args]
    deadline = time.monotonic() + args.timeout
    outputs, failed = [], False
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out, _ = p.communicate()
            out += f"\n[torch_cluster_bench] killed after {args.timeout:.0f} s"
            failed = True
        outputs.append(out)
        failed = failed or p.returncode != 0
    for q in procs:
        if q.poll() is None:
            q.kill()
            q.wait()
    results = [json.loads(line[len("RESULT "):]) for out in outputs for line in out.splitlines()
               if line.startswith("RESULT ")]
    if failed or not results:
        sys.stderr.write("\n".join(o[-3000:] for o in outputs) + "\n")
        return None
    return results[0]


NETNS = ["unshare", "-n", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


def role_args_for(mode, workers, port):
    if mode == "single":
        return [["--role", "single"]]
    if mode == "ddp":
        return [["--role", "ddp", "--rank", str(r), "--world", str(workers), "--port", str(port)]
                for r in range(workers)]
    return ([["--role", "ps", "--world", str(workers + 1), "--port", str(port)]] +
            [["--role", "trainer", "--rank", str(r), "--world", str(workers + 1),
              "--port", str(port)] for r in range(1, workers + 1)])


def run_config(args):
    """`--config MODE:W`: one configuration's processes, with the loopback bytes they moved
    (inside a fresh network namespace when the driver could make one: only theirs)."""
    mode, workers = args.config.split(":")
    workers = int(workers)
    threads = 2 if mode == "single" else max(1, 2 // workers)
    before = lo_bytes()
    r = launch(args, role_args_for(mode, workers, free_port()), threads)
    if r is None:
        raise SystemExit(1)
    r["lo_bytes"] = lo_bytes() - before
    r["threads_per_process"] = threads
    emit(r)


def measure_once(args, mode, workers, use_netns):
    cmd = [sys.executable, os.path.abspath(__file__), "--config", f"{mode}:{workers}",
           "--epochs", str(args.epochs), "--data-dir", args.data_dir,
           "--timeout", str(args.timeout)] + (["--quick"] if args.quick else [])
    before = lo_bytes()
    # Its own process group, so that a timeout ends the ranks it started too.
    p = subprocess.Popen((NETNS if use_netns else []) + cmd, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=args.timeout + 30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        sys.stderr.write(f"torch {mode} W={workers}: killed after {args.timeout + 30:.0f} s\n")
        return None
    moved = lo_bytes() - before
    results = [json.loads(line[len("RESULT "):]) for line in out.splitlines()
               if line.startswith("RESULT ")]
    if p.returncode != 0 or not results:
        sys.stderr.write(out[-3000:] + "\n")
        return None
    r = results[0]
    r["lo_scope"] = "netns" if use_netns else "machine"
    if not use_netns:
        r["lo_bytes"] = moved
    return r


def netns_works():
    try:
        return subprocess.run(NETNS + ["true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def measure(args, mode, workers, use_netns):
    runs = []
    for _ in range(args.repeats):
        r = measure_once(args, mode, workers, use_netns)
        if r is None:
            return {"system": "torch", "mode": mode, "workers": workers, "error": "failed"}
        runs.append(r)
    runs.sort(key=lambda r: r["examples_per_sec"])
    mid = runs[len(runs) // 2]
    if mode == "ddp":  # Ring allreduce: each of W ranks sends 2 (W-1)/W of the gradient bytes.
        analytic = 2 * (workers - 1) * PARAM_BYTES
    elif mode == "rpc-ps":  # Gradients up, parameters down, per step.
        analytic = 2 * PARAM_BYTES
    else:
        analytic = 0
    return {"system": "torch", "mode": mode, "workers": workers,
            "examples_per_sec": mid["examples_per_sec"],
            "runs": [round(r["examples_per_sec"], 1) for r in runs],
            "steps": mid["steps"], "seconds": mid["seconds"],
            "lo_bytes": mid["lo_bytes"], "lo_scope": mid["lo_scope"],
            "bytes_per_step": mid["lo_bytes"] / max(1, mid["steps"]),
            "analytic_bytes_per_step": analytic,
            "test_accuracy": mid["test_accuracy"], "torch": mid["torch"],
            "threads_per_process": mid["threads_per_process"]}


def main():
    args = parse_args()
    if args.role == "single":
        return run_single(args)
    if args.role == "ddp":
        return run_ddp(args)
    if args.role == "ps":
        return run_ps(args)
    if args.role == "trainer":
        return run_trainer(args)
    if args.config:
        return run_config(args)
    use_netns = netns_works()
    if not use_netns:
        print("torch: no network namespace (unshare -n); loopback bytes are machine-wide",
              flush=True)
    modes = [m for m in args.modes.split(",") if m]
    workers = [int(w) for w in args.workers.split(",") if w]
    rows = []
    for mode in modes:
        for w in ([1] if mode == "single" else workers):
            row = measure(args, mode, w, use_netns)
            rows.append(row)
            if "error" in row:
                print(f"torch {mode:7s} W={w}: FAILED", flush=True)
            else:
                print(f"torch {mode:7s} W={w}: {row['examples_per_sec']:9.0f} examples/s "
                      f"runs={row['runs']} steps={row['steps']} "
                      f"lo bytes/step={row['bytes_per_step']:.0f} "
                      f"acc={row['test_accuracy']:.4f} load={os.getloadavg()[0]:.2f}", flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
