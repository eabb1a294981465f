#!/bin/sh
# dpv against PyTorch on the same training steps, in the same run on the same machine.
#   bench/compare.sh [path/to/dpv] [iters]
# Runs `dpv bench` (cpu:1, cpu:2, cpu:4) and bench/pytorch_step.py (PyTorch on the CPU, one thread),
# then prints one row per model: ms/step of each, the ratio (dpv faster by X), DataParallel's and
# DDP's speed-up on 2 and 4 simulated devices, the devices' hand-off latency, and the engine's GEMM
# rate against OpenBLAS's own (the BLAS floor of the large MLP).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dpv=${1:-$here/../build/release/cli/dpv}
iters=${2:-30}
[ -x "$dpv" ] || { echo "compare.sh: no dpv binary at $dpv (build it, or pass its path)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== dpv bench ($dpv)"
"$dpv" bench --devices cpu:1 cpu:2 cpu:4 --iters "$iters" --json "$work/dpv.json"
echo
echo "== PyTorch (/usr/bin/python3, torch.set_num_threads(1), one OpenBLAS thread)"
# Debian's torch calls the system OpenBLAS (pthreads build), which keeps its own thread pool:
# torch.set_num_threads does not reach it, so pin it here as dpv pins it per device.
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "$here/pytorch_step.py" --iters "$iters" --json "$work/torch.json"
echo
/usr/bin/python3 - "$work/dpv.json" "$work/torch.json" <<'PY'
import json, sys
dpv = json.load(open(sys.argv[1]))
torch = {r["model"]: r for r in json.load(open(sys.argv[2]))["results"]}
rows = {}
for r in dpv["results"]:
    rows.setdefault(r["model"], {})[r["device_count"]] = r
ddp = {(r["model"], r["devices"]): r for r in dpv.get("ddp", [])}
print(f"{'model':10s} {'batch':>5s} {'dpv ms':>9s} {'torch ms':>9s} {'dpv faster':>10s} "
      f"{'DP cpu:2':>8s} {'DP cpu:4':>8s} {'DDP cpu:2':>9s} {'DDP cpu:4':>9s}")
for model, by_count in rows.items():
    one = by_count.get(1)
    t = torch.get(model)
    if not one:
        continue
    ratio = f"{t['ms_per_step'] / one['ms_per_step']:.2f}x" if t else "-"
    dp = [f"{one['ms_per_step'] / by_count[k]['ms_per_step']:.2f}x" if k in by_count else "-" for k in (2, 4)]
    dd = [f"{one['ms_per_step'] / ddp[(model, f'cpu:{k}')]['ms_per_step']:.2f}x" if (model, f"cpu:{k}") in ddp else "-"
          for k in (2, 4)]
    print(f"{model:10s} {one['batch']:5d} {one['ms_per_step']:9.3f} {t['ms_per_step'] if t else float('nan'):9.3f} "
          f"{ratio:>10s} {dp[0]:>8s} {dp[1]:>8s} {dd[0]:>9s} {dd[1]:>9s}")
print("(DP / DDP columns: speed-up over one dpv device, same model and global batch)")
for h in dpv.get("handoff", []):
    print(f"hand-off {h['devices']}: {h['median_us']:.1f} us median, {h['p90_us']:.1f} us p90 per stage (empty jobs)")
g = dpv.get("gemm")
if g:
    print(f"\nmlp-large GEMMs (batch {g['batch']}, {g['flops_per_step'] / 1e9:.2f} GFLOP per step): OpenBLAS alone "
          f"{g['openblas_gflops']:.1f} GFLOP/s, the engine's whole step {g['engine_gflops']:.1f} GFLOP/s "
          f"= {100 * g['engine_to_openblas']:.0f}% of OpenBLAS")
print(f"machine: {dpv['machine']['hardware_threads']} hardware threads, OpenBLAS {dpv['machine']['openblas']}")
PY
