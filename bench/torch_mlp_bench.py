#!/usr/bin/python3
"""PyTorch peer figure for bench/train_bench.cc: one SGD step of the
784-256-256-10 MLP at batch 128 on a fixed batch (sparse softmax cross
entropy, learning rate 0.1), reported as examples/s.

  /usr/bin/python3 bench/torch_mlp_bench.py --threads 1
  /usr/bin/python3 bench/torch_mlp_bench.py --threads 2

Debian's python3-torch is for /usr/bin/python3, not the pyenv python3 on PATH.
Debian's torch does its matmuls through the system BLAS (OpenBLAS, own
pthreads), so the thread count is set for OpenMP and OpenBLAS alike, before
torch is imported; OMP_WAIT_POLICY=passive because with OpenMP's default
spin-wait PyTorch ran 15x slower on this 2-core VM (docs/performance.md).
"""
import argparse
import os
import time


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repetitions", type=int, default=3)
    return parser.parse_args()


ARGS = parse_args()
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)

import torch  # noqa: E402  (after the thread settings)

BATCH, IN, HIDDEN, CLASSES = 128, 784, 256, 10


def make_model():
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.ReLU(),
        torch.nn.Linear(HIDDEN, CLASSES))


def measure(threads, seconds, repetitions):
    torch.set_num_threads(threads)
    model = make_model()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.rand(BATCH, IN)
    y = torch.randint(0, CLASSES, (BATCH,))

    def step():
        sgd.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        sgd.step()

    for _ in range(50):  # Warm up allocator and thread pool.
        step()
    rates = []
    for _ in range(repetitions):
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            step()
            steps += 1
        rates.append(steps * BATCH / (time.perf_counter() - start))
    return rates


def main():
    args = ARGS
    rates = measure(args.threads, args.seconds, args.repetitions)
    mean = sum(rates) / len(rates)
    print(f"torch {torch.__version__} threads={args.threads} batch={BATCH} "
          f"examples/s mean={mean:.0f} runs={[round(r) for r in rates]}")


if __name__ == "__main__":
    main()
