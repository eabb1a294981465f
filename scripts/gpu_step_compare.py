#!/usr/bin/env python3
"""`dpv step` on a GPU against PyTorch on the same GPU: same model, state and batch, two steps.

For each case (an MLP with BatchNorm1d in float32 and float64, a CNN with BatchNorm2d in float32;
two targets are -100, CrossEntropyLoss's ignore_index) it runs
  dpv step --devices cuda:0     against PyTorch on cuda:0 (one device)
  dpv step --devices cuda:0x4   against nn.DataParallel's semantics on 4 devices, emulated with
                                plain torch ops on cuda:0 (tests/fixtures/dp_emulation.py: chunk,
                                replicas, gather, loss on the whole output, gradients summed in
                                device order); and with --sync-bn, against BatchNorm over the whole
                                batch (what DDP + SyncBatchNorm computes)
and compares the output, the loss, every reduced gradient, the state dict after the steps and
the BatchNorm statistics, normwise: max |dpv - torch| / max(max |torch|, 1e-2) within 2e-4
(float32) or 1e-9 (float64). TF32 is off on the PyTorch side, as in the engine.

With --ddp it instead runs `dpv step --ddp` (DistributedDataParallel, one rank per device) on
cuda:0x4 and on cpu:4 and compares the two: the CPU path is the one checked against PyTorch by
the engine's own DDP tests, so this checks the GPU path of DDP against it (same bounds).

With --device cpu the same comparison runs on the CPU (dpv on cpu:1 and cpu:4), which is how it
is tested without a GPU. Needs only torch (the safetensors files are read and written with
tests/fixtures/safetensors_io.py, not the safetensors package).

  python3 scripts/gpu_step_compare.py --dpv build/gpu/cli/dpv --work /tmp/cmp --json out.json
Exit status: 0 when every case matches.
"""
import argparse
import json
import os
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "fixtures"))
import dp_emulation  # noqa: E402
import safetensors_io  # noqa: E402


def linear(i, o):
    return {"type": "linear", "in_features": i, "out_features": o}


def bn1d(c):
    return {"type": "batchnorm1d", "num_features": c}


MLP = [linear(32, 64), bn1d(64), {"type": "relu"}, linear(64, 64), bn1d(64), {"type": "relu"}, linear(64, 10)]
CNN = [{"type": "conv2d", "in_channels": 3, "out_channels": 8, "kernel_size": 3, "stride": 1, "padding": 1},
       {"type": "batchnorm2d", "num_features": 8}, {"type": "relu"},
       {"type": "conv2d", "in_channels": 8, "out_channels": 8, "kernel_size": 3, "stride": 2, "padding": 1},
       {"type": "batchnorm2d", "num_features": 8}, {"type": "relu"},
       {"type": "flatten"}, linear(8 * 4 * 4, 10)]
# name: (layers, dtype, input shape); 30 rows split by torch.chunk into 8, 8, 8, 6 on 4 devices.
CASES = {
    "mlp-float32": (MLP, "float32", [30, 32]),
    "mlp-float64": (MLP, "float64", [30, 32]),
    "cnn-float32": (CNN, "float32", [30, 3, 8, 8]),
}
BOUND = {"float32": 2e-4, "float64": 1e-9}
STEPS = 2
LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 1e-4


def reference(spec, state, x, target, k, sync_bn, device):
    """PyTorch on `device`: STEPS iterations of DataParallel on k devices (k = 1: plain training)."""
    model = dp_emulation.build_model(spec).to(device)
    model.load_state_dict(state)
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    xd, td = x.to(device), target.to(device)
    for _ in range(STEPS):
        result = dp_emulation.dp_iteration(model, opt, xd, td, k, sync_bn=sync_bn, check_merge=False)
    ref = {"output": result["output"], "loss": result["loss"].reshape([])}
    ref.update({f"grad/{n}": g for n, g in result["grads"].items()})
    ref.update({f"state/{n}": t.detach() for n, t in model.state_dict().items()})
    for (layer, dev), (mean, var) in result["stats"].items():
        where = "global" if dev == "global" else f"dev{dev}"
        ref[f"stats/{layer}/{where}/mean"] = mean
        ref[f"stats/{layer}/{where}/var"] = var
    return ref


def compare(got, ref, bound):
    """{name: normwise error or a problem string} for every tensor of the reference."""
    errors = {}
    for name, r in ref.items():
        if name not in got:
            errors[name] = "missing"
            continue
        g = got[name].reshape(r.shape)
        if r.dtype == torch.int64:
            errors[name] = 0.0 if torch.equal(g.to(torch.int64).cpu(), r.cpu()) else "differs"
            continue
        r64, g64 = r.detach().double().cpu(), g.double().cpu()
        if torch.isnan(r64).any() or torch.isnan(g64).any():
            errors[name] = 0.0 if torch.equal(torch.isnan(r64), torch.isnan(g64)) else "nan mismatch"
            r64, g64 = torch.nan_to_num(r64), torch.nan_to_num(g64)
            if errors[name] != 0.0:
                continue
        scale = max(r64.abs().max().item() if r64.numel() else 0.0, 1e-2)
        errors[name] = (g64 - r64).abs().max().item() / scale if r64.numel() else 0.0
    return errors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpv", required=True, help="the dpv binary")
    ap.add_argument("--work", default="/tmp/dpv-gpu-step-compare", help="scratch folder")
    ap.add_argument("--json", help="write the per-case errors here")
    ap.add_argument("--ddp", action="store_true", help="compare dpv step --ddp on the GPU with the same on cpu:4")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cuda: dpv on cuda:0 / cuda:0x4 against PyTorch on cuda:0; cpu: the same on the CPU")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("error: PyTorch sees no CUDA GPU (use --device cpu to run this comparison on the CPU)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
    device = torch.device("cuda:0" if a.device == "cuda" else "cpu")
    runs = [("cuda:0", 1, False), ("cuda:0x4", 4, False), ("cuda:0x4", 4, True)] if a.device == "cuda" else \
           [("cpu:1", 1, False), ("cpu:4", 4, False), ("cpu:4", 4, True)]
    if a.ddp:
        runs = [r for r in runs if r[1] == 4]
    results, ok = {}, True
    print(f"{'case':14s} {'devices':9s} {'sync-bn':7s} {'worst error':>11s} {'bound':>7s}  result")
    for case, (layers, dtype_name, shape) in CASES.items():
        dtype = torch.float64 if dtype_name == "float64" else torch.float32
        spec = {"layers": layers, "loss": "cross_entropy", "dtype": dtype_name}
        torch.manual_seed(3)
        base = dp_emulation.build_model(spec)
        state = {n: t.detach().clone() for n, t in base.state_dict().items()}
        gen = torch.Generator().manual_seed(11)
        x = (torch.randn(*shape, generator=gen, dtype=torch.float64) * 2 + 0.5).to(dtype)
        target = torch.randint(0, 10, (shape[0],), generator=gen, dtype=torch.int64)
        target[[4, 17]] = -100  # ignore_index rows
        folder = os.path.join(a.work, case)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "model.json"), "w") as f:
            json.dump(spec, f)
        safetensors_io.save(os.path.join(folder, "state.safetensors"), state)
        safetensors_io.save(os.path.join(folder, "batch.safetensors"), {"input": x, "target": target})
        for devices, k, sync_bn in runs:
            name = f"{case} {devices}{' sync-bn' if sync_bn else ''}"
            out = os.path.join(folder, f"dpv-{k}-{int(sync_bn)}.safetensors")
            def dpv_step(devices, out):
                cmd = [a.dpv, "step", "--model", os.path.join(folder, "model.json"),
                       "--state", os.path.join(folder, "state.safetensors"),
                       "--batch", os.path.join(folder, "batch.safetensors"), "--devices", devices,
                       "--lr", repr(LR), "--momentum", repr(MOMENTUM), "--weight-decay", repr(WEIGHT_DECAY),
                       "--steps", str(STEPS), "--out", out] + (["--sync-bn"] if sync_bn else []) + \
                      (["--ddp"] if a.ddp else [])
                return subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            proc = dpv_step(devices, out)
            cpu_out = os.path.join(folder, f"dpv-cpu-{k}-{int(sync_bn)}.safetensors")
            if proc.returncode == 0 and a.ddp:
                proc = dpv_step("cpu:4", cpu_out)
            if proc.returncode != 0:
                ok = False
                print(f"{case:14s} {devices:9s} {str(sync_bn):7s} {'':>11s} {'':>7s}  dpv FAILED: {proc.stderr.strip()}")
                results[name] = {"error": proc.stderr.strip()}
                continue
            if a.ddp:
                ref = {n: t for n, t in safetensors_io.load(cpu_out).items()}
                name += " --ddp vs cpu:4"
            else:
                ref = reference(spec, state, x, target, k, sync_bn, device)
            errors = compare(safetensors_io.load(out), ref, BOUND[dtype_name])
            bound = BOUND[dtype_name]
            bad = {n: e for n, e in errors.items() if not isinstance(e, float) or e > bound}
            worst = max((e for e in errors.values() if isinstance(e, float)), default=0.0)
            ok = ok and not bad
            print(f"{case:14s} {devices:9s} {str(sync_bn):7s} {worst:11.2e} {bound:7.0e}  "
                  f"{'ok' if not bad else 'MISMATCH ' + str(dict(list(bad.items())[:4]))}")
            results[name] = {"worst": worst, "bound": bound, "tensors": len(errors),
                             "mismatches": {n: str(e) for n, e in bad.items()}}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    print("all cases match" if ok else "MISMATCH in some case")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
