#!/usr/bin/env python3
"""PyTorch peer of `dflow train` on a GPU (issue 17): the same MLP (784-256-256-10) and
CNN (conv3x3x16 SAME + bias + ReLU + maxpool 2, conv3x3x32 likewise, dense 1568-128 ReLU,
dense 128-10; sparse softmax cross-entropy, Adam lr 0.001, batch 128) trained step by
step as dflow's trainer does: each batch copied from pageable host memory, the loss read
back every step (a synchronisation), so the figure is comparable with `dflow train`'s
examples/s. PyTorch calls cuDNN (benchmark mode: autotuned like dflow's) and cuBLAS
directly per op: the "same step written directly with cuDNN/cuBLAS calls".

  python3 bench/gpu/torch_gpu_step.py [--model cnn|mlp] [--steps 469]
Prints `torch_gpu_step {"model": ..., "examples_per_sec": ...}`; exits 77 without a GPU.
"""
import argparse
import json
import sys
import time

import numpy as np


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    p.add_argument("--steps", type=int, default=469)
    p.add_argument("--batch", type=int, default=128)
    a = p.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("torch_gpu_step: no GPU visible")
        return 77
    torch.backends.cudnn.benchmark = True
    torch.backends.cuda.matmul.allow_tf32 = False  # dflow computes in fp32.
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(1)
    nn = torch.nn
    if a.model == "cnn":
        model = nn.Sequential(
            nn.Unflatten(1, (1, 28, 28)),
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
    model = model.cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    rng = np.random.default_rng(1)
    batches = [(rng.random((a.batch, 784), dtype=np.float32),
                rng.integers(0, 10, a.batch).astype(np.int64)) for _ in range(10)]

    def step(i):
        x, y = batches[i % len(batches)]
        xs = torch.from_numpy(x).cuda()
        ys = torch.from_numpy(y).cuda()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs), ys)
        loss.backward()
        opt.step()
        return loss.item()

    for i in range(20):  # Warm-up: cuDNN's autotuning, the caching allocator.
        step(i)
    start = time.perf_counter()
    for i in range(a.steps):
        last = step(i)
    seconds = time.perf_counter() - start
    print("torch_gpu_step " + json.dumps({
        "model": a.model, "torch": torch.__version__, "steps": a.steps, "batch": a.batch,
        "ms_per_step": 1e3 * seconds / a.steps,
        "examples_per_sec": a.steps * a.batch / seconds, "loss_last": last}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
