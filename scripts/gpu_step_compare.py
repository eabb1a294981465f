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
cuda:0x4 and on cpu:4 and compares the two: the CPU path is the one checked against real
DistributedDataParallel by the pytorch_ddp_comparison test, so this checks the GPU path of DDP
against it (same bounds). With --nccl-launch it runs one NCCL rank as a process,
`dpv launch --nproc-per-node 1 --backend nccl -- step --ddp --devices cuda:0`, against the
in-process `dpv step --ddp --devices cpu:1`.

With --device cpu the same comparisons run on the CPU, which is how they are tested without a
GPU: dpv on cpu:1 and cpu:4 against PyTorch on the CPU; with --ddp the in-process ranks
(threads, cpu:4) against the same job as 4 Gloo processes under `dpv launch`.
Needs only torch (the safetensors files are read and written with tests/fixtures/safetensors_io.py,
not the safetensors package); without it the exit status is 77 (skipped).

  python3 scripts/gpu_step_compare.py --dpv build/gpu/cli/dpv --work /tmp/cmp --json out.json
Exit status: 0 when every case matches, 1 when one does not (or dpv fails), 77 without torch.
--perturb EPS checks the comparison itself: it adds EPS x the tensor's scale to one element of
each of dpv's tensors before comparing, so any EPS above the bound must fail.
"""
import argparse
import json
import os
import subprocess
import sys

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

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


def reference_run(spec, state, x, target, k, sync_bn, device):
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


def perturb(tensors, eps):
    """Adds eps x the tensor's scale (as compare() measures it) to the first element of every
    floating-point tensor: how --perturb shows that a difference above the bound fails."""
    for t in tensors.values():
        if t.is_floating_point() and t.numel():
            t.view(-1)[0] += eps * max(t.abs().max().item(), 1e-2)
    return tensors


def launch_prefix(a, nproc, backend):
    """`dpv launch` of nproc ranks on a free port, the command after it run by every rank."""
    return [a.dpv, "launch", "--nproc-per-node", str(nproc), "--backend", backend, "--master-port", "0",
            "--timeout", str(a.timeout), "--"]


def plan(a):
    """The runs: (devices, k, sync_bn, (launch prefix, devices) under test, reference), where the
    reference is "torch" (PyTorch's DataParallel semantics) or (launch prefix, devices) of dpv."""
    cpu = a.device == "cpu"
    if a.nccl_launch:
        return [("cuda:0 nccl-launch", 1, False, (launch_prefix(a, 1, "nccl"), "cuda:0"), ([a.dpv], "cpu:1"))]
    if a.ddp and cpu:
        return [("cpu:4 gloo-launch", 4, bn, (launch_prefix(a, 4, "gloo"), "cpu:4"), ([a.dpv], "cpu:4"))
                for bn in (False, True)]
    if a.ddp:
        return [("cuda:0x4", 4, bn, ([a.dpv], "cuda:0x4"), ([a.dpv], "cpu:4")) for bn in (False, True)]
    names = ["cpu:1", "cpu:4", "cpu:4"] if cpu else ["cuda:0", "cuda:0x4", "cuda:0x4"]
    return [(d, k, bn, ([a.dpv], d), "torch") for d, k, bn in zip(names, (1, 4, 4), (False, False, True))]


def write_case(folder, layers, dtype_name, shape):
    """The case's model spec, initial state and batch as files for dpv; returns (spec, state, x, target)."""
    dtype = torch.float64 if dtype_name == "float64" else torch.float32
    spec = {"layers": layers, "loss": "cross_entropy", "dtype": dtype_name}
    torch.manual_seed(3)
    base = dp_emulation.build_model(spec)
    state = {n: t.detach().clone() for n, t in base.state_dict().items()}
    gen = torch.Generator().manual_seed(11)
    x = (torch.randn(*shape, generator=gen, dtype=torch.float64) * 2 + 0.5).to(dtype)
    target = torch.randint(0, 10, (shape[0],), generator=gen, dtype=torch.int64)
    target[[4, 17]] = -100  # ignore_index rows
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.json"), "w") as f:
        json.dump(spec, f)
    safetensors_io.save(os.path.join(folder, "state.safetensors"), state)
    safetensors_io.save(os.path.join(folder, "batch.safetensors"), {"input": x, "target": target})
    return spec, state, x, target


def dpv_step(a, folder, prefix, devices, sync_bn, out):
    """One `dpv step` (under `prefix`: dpv itself or a launch), two SGD steps; the finished process."""
    cmd = prefix + ["step", "--model", os.path.join(folder, "model.json"),
                    "--state", os.path.join(folder, "state.safetensors"),
                    "--batch", os.path.join(folder, "batch.safetensors"), "--devices", devices,
                    "--lr", repr(LR), "--momentum", repr(MOMENTUM), "--weight-decay", repr(WEIGHT_DECAY),
                    "--steps", str(STEPS), "--out", out] + (["--sync-bn"] if sync_bn else []) + \
                   (["--ddp"] if a.ddp or a.nccl_launch else [])
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(cmd, 124, "", f"timed out after {a.timeout} s: {' '.join(cmd)}")


def run_case(a, case, device, results):
    """Every run of the plan on one case; adds to results and returns whether all matched."""
    layers, dtype_name, shape = CASES[case]
    folder = os.path.join(a.work, case)
    spec, state, x, target = write_case(folder, layers, dtype_name, shape)
    bound, ok = BOUND[dtype_name], True
    for label, k, sync_bn, (prefix, devices), reference in plan(a):
        name = f"{case} {label}{' sync-bn' if sync_bn else ''}"
        out = os.path.join(folder, f"dpv-{k}-{int(sync_bn)}.safetensors")
        procs = [dpv_step(a, folder, prefix, devices, sync_bn, out)]
        if reference != "torch":
            ref_out = os.path.join(folder, f"ref-{k}-{int(sync_bn)}.safetensors")
            procs.append(dpv_step(a, folder, reference[0], reference[1], sync_bn, ref_out))
        failed = [p for p in procs if p.returncode != 0]
        if failed:
            message = f"exit {failed[0].returncode}: {failed[0].stderr.strip()[-600:]}"
            print(f"{case:14s} {label:18s} {str(sync_bn):7s} {'':>11s} {'':>7s}  dpv FAILED ({message})")
            results[name], ok = {"error": message}, False
            continue
        if reference == "torch":
            ref = reference_run(spec, state, x, target, k, sync_bn, device)
        else:
            ref = safetensors_io.load(ref_out)
            name += f" vs {reference[1]}"
        errors = compare(perturb(safetensors_io.load(out), a.perturb), ref, bound)
        bad = {n: e for n, e in errors.items() if not isinstance(e, float) or e > bound}
        worst = max((e for e in errors.values() if isinstance(e, float)), default=0.0)
        ok = ok and not bad
        print(f"{case:14s} {label:18s} {str(sync_bn):7s} {worst:11.2e} {bound:7.0e}  "
              f"{'ok' if not bad else 'MISMATCH ' + str(dict(list(bad.items())[:4]))}")
        results[name] = {"worst": worst, "bound": bound, "tensors": len(errors),
                         "mismatches": {n: str(e) for n, e in bad.items()}}
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpv", required=True, help="the dpv binary")
    ap.add_argument("--work", default="/tmp/dpv-gpu-step-compare", help="scratch folder")
    ap.add_argument("--json", help="write the per-case errors here")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                    help="cuda: dpv on cuda:0 / cuda:0x4 against PyTorch on cuda:0; cpu: the same on the CPU")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--ddp", action="store_true",
                      help="dpv step --ddp: on cuda:0x4 against cpu:4; with --device cpu, as 4 Gloo processes "
                           "against the in-process ranks")
    mode.add_argument("--nccl-launch", action="store_true",
                      help="one NCCL rank under dpv launch on cuda:0 against the in-process --ddp on cpu:1")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES), help="the cases to run")
    ap.add_argument("--timeout", type=float, default=300, help="seconds each dpv call may take")
    ap.add_argument("--perturb", type=float, default=0.0, help="check the check: see the description")
    a = ap.parse_args()
    if a.nccl_launch and a.device != "cuda":
        ap.error("--nccl-launch needs --device cuda (NCCL runs on GPUs)")
    os.makedirs(a.work, exist_ok=True)
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("error: PyTorch sees no CUDA GPU (use --device cpu to run this comparison on the CPU)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.deterministic = True
    device = torch.device("cuda:0" if a.device == "cuda" else "cpu")
    results, ok = {}, True
    print(f"{'case':14s} {'devices':18s} {'sync-bn':7s} {'worst error':>11s} {'bound':>7s}  result")
    for case in a.cases:
        ok = run_case(a, case, device, results) and ok
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    print(f"all {len(results)} runs match" if ok else "MISMATCH in some case")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
