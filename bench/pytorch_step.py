#!/usr/bin/python3
"""The training step `dpv bench` times, timed in PyTorch on the CPU with one thread.

Same four models, batch sizes and step as the engine's presets: forward, CrossEntropyLoss,
zero_grad, backward, SGD(lr=0.01).step(). Prints a table; --json writes the figures.
  /usr/bin/python3 bench/pytorch_step.py [--iters 30] [--json out.json]
"""
import argparse
import json
import sys
import time

try:
    import torch
    import torch.nn as nn
except ImportError as e:
    print(f"skipped: cannot import torch ({e})")
    sys.exit(77)


def mlp_bn(inp, hidden, out):
    return nn.Sequential(nn.Linear(inp, hidden), nn.BatchNorm1d(hidden), nn.ReLU(),
                         nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.ReLU(), nn.Linear(hidden, out))


def cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.Conv2d(8, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Flatten(), nn.Linear(16 * 16 * 16, 10))


# name: (builder, batch, input shape per sample, classes) - the engine's presets (engine/model_spec.cpp)
MODELS = {
    "simple": (lambda: nn.Linear(10, 2), 32, (10,), 2),
    "mnist-mlp": (lambda: mlp_bn(784, 256, 10), 64, (784,), 10),
    "mlp-large": (lambda: mlp_bn(784, 1024, 10), 256, (784,), 10),
    "cnn": (cnn, 32, (3, 32, 32), 10),
}


def time_model(name, iters, warmup):
    build, batch, shape, classes = MODELS[name]
    torch.manual_seed(0)
    model = build()
    x = torch.randn(batch, *shape)
    y = torch.randint(0, classes, (batch,))
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        out = model(x)
        loss = criterion(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(warmup):
        step()
    best = float("inf")
    for _ in range(3):  # best of three rounds, as noise on a shared machine only ever adds time
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        best = min(best, (time.perf_counter() - t0) / iters)
    return {"model": name, "batch": batch, "ms_per_step": best * 1e3, "steps_per_s": 1.0 / best,
            "samples_per_s": batch / best}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [time_model(m, args.iters, args.warmup) for m in args.models]
    print(f"{'model':10s} {'batch':>5s} {'ms/step':>9s} {'steps/s':>9s} {'samples/s':>11s}   (PyTorch {torch.__version__}, 1 thread)")
    for r in results:
        print(f"{r['model']:10s} {r['batch']:5d} {r['ms_per_step']:9.3f} {r['steps_per_s']:9.1f} {r['samples_per_s']:11.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": 1, "iters": args.iters, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
