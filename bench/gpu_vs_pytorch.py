#!/usr/bin/env python3
"""dpviz on a GPU against PyTorch eager on the same GPU. Prints figures and ratios; checks nothing.

1. Training step of the "gpu-mlp" preset (Linear 1024-4096, BatchNorm1d, ReLU, Linear 4096-4096,
   BatchNorm1d, ReLU, Linear 4096-1000; batch 4096, float32, cross-entropy, SGD) per step:
   `dpv bench --devices cuda:0 --models gpu-mlp` against the same model in PyTorch eager. Both
   keep the batch on the GPU (no host-to-device copy is timed) and TF32 is off on both sides
   (PyTorch's default for matmul, and the engine's cuBLAS math mode).
2. Collectives for 64 MiB of float32 gradients on virtual devices (cuda:0x4, peer copies), from
   the engine's bench/gpu_collectives, against the device-to-device copy bandwidth that PyTorch
   measures on the same GPU. Both copy timings are CUDA events around one copy on one stream.

Usage: gpu_vs_pytorch.py --dpv BUILD/cli/dpv --collectives BUILD/bench/gpu_collectives --out DIR
"""
import argparse
import json
import os
import subprocess
import sys


def torch_step_ms(iters, warmup, batch=4096):
    import torch
    import torch.nn as nn
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    dev = torch.device("cuda:0")
    model = nn.Sequential(nn.Linear(1024, 4096), nn.BatchNorm1d(4096), nn.ReLU(),
                          nn.Linear(4096, 4096), nn.BatchNorm1d(4096), nn.ReLU(),
                          nn.Linear(4096, 1000)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(batch, 1024, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        step()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / iters


def torch_copy_gbps(mib=64):
    import torch
    n = mib * 1024 * 1024 // 4
    a = torch.empty(n, device="cuda:0")
    b = torch.ones(n, device="cuda:0")
    a.copy_(b)
    torch.cuda.synchronize()
    best = 1e300
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a.copy_(b)
        e.record()
        torch.cuda.synchronize()
        best = min(best, s.elapsed_time(e) / 1e3)
    return n * 4 / best / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpv", required=True)
    ap.add_argument("--collectives", help="bench/gpu_collectives binary (optional)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    summary = {}

    bench_json = os.path.join(a.out, "dpv_bench_gpu_mlp.json")
    cmd = [a.dpv, "bench", "--devices", "cuda:0", "--models", "gpu-mlp", "--iters", str(a.iters),
           "--warmup", str(a.warmup), "--stage-iters", "2", "--json", bench_json]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    with open(bench_json) as f:
        res = [r for r in json.load(f)["results"] if r["model"] == "gpu-mlp"][0]
    dpv_ms = res["ms_per_step"]
    batch = res["batch"]
    torch_ms = torch_step_ms(a.iters, a.warmup, batch)
    # FLOPs of one step's GEMMs: forward 2*B*in*out per Linear, backward dW (2*B*in*out) and dX
    # (2*B*in*out) except for the first layer, whose input needs no gradient: neither PyTorch
    # (x.requires_grad is False) nor the engine (need_input_grad is false for layer 0) runs it.
    layers = [(1024, 4096), (4096, 4096), (4096, 1000)]
    flops = sum(3 * 2 * batch * i * o for i, o in layers) - 2 * batch * layers[0][0] * layers[0][1]
    summary["gpu_mlp"] = {"batch": batch, "dpv_ms_per_step": dpv_ms, "torch_ms_per_step": torch_ms,
                          "dpv_over_torch": dpv_ms / torch_ms,
                          "dpv_tflops": flops / dpv_ms / 1e9, "torch_tflops": flops / torch_ms / 1e9}
    print(f"gpu-mlp batch {batch}: dpviz {dpv_ms:.3f} ms/step, PyTorch eager {torch_ms:.3f} ms/step, "
          f"ratio {dpv_ms / torch_ms:.2f}x ({flops / dpv_ms / 1e9:.1f} vs {flops / torch_ms / 1e9:.1f} TFLOP/s)")
    if batch != 4096:
        print(f"note: dpv bench ran gpu-mlp at batch {batch}, not 4096 (cli default_batch)")

    if a.collectives:
        coll_json = os.path.join(a.out, "dpv_collectives.json")
        subprocess.run([a.collectives, "cuda:0x4", coll_json, "64"], check=True)
        with open(coll_json) as f:
            coll = json.load(f)
        torch_gbps = torch_copy_gbps(64)
        summary["collectives"] = coll
        summary["collectives"]["torch_copy_gbps"] = torch_gbps
        print(f"device copy 64 MiB: PyTorch {torch_gbps:.1f} GB/s, engine {coll['copy_gbps']:.1f} GB/s")
        for op in coll["ops"]:
            print(f"  {op['op']:<11} {op['ms']:8.3f} ms  busbw {op['busbw']:8.1f} GB/s = "
                  f"{100 * op['busbw'] / torch_gbps:5.1f}% of PyTorch's copy bandwidth")

    with open(os.path.join(a.out, "gpu_vs_pytorch.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
