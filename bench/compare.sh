#!/bin/sh
# dpv against PyTorch on the same training steps, in the same run on the same machine.
#   bench/compare.sh [path/to/dpv] [iters] [runs]
# Each run: `dpv bench` (cpu:1, cpu:2, cpu:4, DataParallel and DDP) then bench/pytorch_step.py
# (PyTorch on the CPU, one thread), one after the other so both see the same load. Then one row
# per model with the MEDIAN over the runs of: ms/step of each, the ratio (dpv faster by X),
# DataParallel's and DDP's speed-up on 2 and 4 simulated devices; the devices' hand-off latency;
# DDP as 1 and 2 launched processes over Gloo (COMPARE_LAUNCH_STEPS steps of the large MLP, default 40);
# and the large MLP's BLAS floor (the engine's whole step against the faster GEMM library per shape alone on the same GEMMs).
# Run it at normal priority; `uptime` before and after says how loaded the machine was.
#
# Linux's autogroup scheduling (/proc/sys/kernel/sched_autogroup_enabled = 1, Debian's default)
# shares the CPU between sessions first: every session (a login, a terminal, a setsid'd job) gets
# an equal share whatever the nice values inside it, so other sessions' builds at `nice -n 19`
# take as much of a core from a one-thread benchmark as runs at normal priority would, and nice
# on the benchmark itself changes nothing between sessions. COMPARE_AUTOGROUP_NICE=-5 (as root)
# runs each timed program in a session of its own whose autogroup has that nice value, which is
# what `nice -n -5` was meant to do; without it wall times at load grow with the number of busy
# sessions, not with the code.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dpv=${1:-$here/../build/release/cli/dpv}
iters=${2:-30}
runs=${3:-3}
[ -x "$dpv" ] || { echo "compare.sh: no dpv binary at $dpv (build it, or pass its path)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# timed CMD...: runs CMD, in its own session with COMPARE_AUTOGROUP_NICE when that is set.
timed() {
  if [ -n "${COMPARE_AUTOGROUP_NICE:-}" ]; then
    setsid -w sh -c 'echo "$0" > /proc/self/autogroup && exec "$@"' "$COMPARE_AUTOGROUP_NICE" "$@"
  else
    "$@"
  fi
}
if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo 0)" = 1 ]; then
  if [ -n "${COMPARE_AUTOGROUP_NICE:-}" ]; then
    echo "autogroup scheduling on: each timed program runs in its own session, autogroup nice $COMPARE_AUTOGROUP_NICE"
  else
    echo "autogroup scheduling on: other sessions' jobs share the CPU with this one whatever their nice" \
      "(COMPARE_AUTOGROUP_NICE=-5 to give the timed programs a larger share)"
  fi
fi
echo "load before: $(uptime)"
COMPARE_LAUNCH_STEPS=${COMPARE_LAUNCH_STEPS:-40}
run=1
while [ "$run" -le "$runs" ]; do
  echo "== run $run of $runs: dpv bench ($dpv)"
  timed "$dpv" bench --devices cpu:1 cpu:2 cpu:4 --iters "$iters" --json "$work/dpv.$run.json"
  echo "== run $run of $runs: PyTorch (/usr/bin/python3, torch.set_num_threads(1), one OpenBLAS thread)"
  # Debian's torch calls the system OpenBLAS (pthreads build), which keeps its own thread pool:
  # torch.set_num_threads does not reach it, so pin it here as dpv pins it per device.
  timed env OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "$here/pytorch_step.py" --iters "$iters" \
    --json "$work/torch.$run.json"
  # DDP as launched processes over Gloo: one rank, then two, on the large MLP (rank 0's samples/s
  # over the run, first steps included), the same global batch.
  for nproc in 1 2; do
    timed "$dpv" launch --nproc-per-node "$nproc" -- train --ddp --devices "cpu:$nproc" --preset mlp-large \
      --steps "$COMPARE_LAUNCH_STEPS" >"$work/launch.$nproc.$run.txt" 2>&1 || echo "launch with $nproc rank(s) failed"
  done
  run=$((run + 1))
done
echo "load after: $(uptime)"
echo
/usr/bin/python3 - "$work" "$runs" <<'PY'
import json, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
dpv_runs = [json.load(open(f"{work}/dpv.{i}.json")) for i in range(1, runs + 1)]
torch_runs = [{r["model"]: r for r in json.load(open(f"{work}/torch.{i}.json"))["results"]} for i in range(1, runs + 1)]

def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

def per_run(fn):
    out = []
    for d, t in zip(dpv_runs, torch_runs):
        try:
            out.append(fn(d, t))
        except (KeyError, ZeroDivisionError, StopIteration):
            out.append(None)
    return med(out)

def ms(d, model, count):
    return next(r["ms_per_step"] for r in d["results"] if r["model"] == model and r["device_count"] == count)

def ddp_ms(d, model, devices):
    return next(r["ms_per_step"] for r in d.get("ddp", []) if r["model"] == model and r["devices"] == devices)

fmt = lambda v, f: (f % v) if v is not None else "-"
models = list(dict.fromkeys(r["model"] for r in dpv_runs[0]["results"]))
batch = {r["model"]: r["batch"] for r in dpv_runs[0]["results"]}
print(f"medians of {runs} runs")
print(f"{'model':10s} {'batch':>5s} {'dpv ms':>9s} {'torch ms':>9s} {'dpv faster':>10s} "
      f"{'DP cpu:2':>8s} {'DP cpu:4':>8s} {'DDP cpu:2':>9s} {'DDP cpu:4':>9s}")
for m in models:
    one = per_run(lambda d, t: ms(d, m, 1))
    torch_ms = per_run(lambda d, t: t[m]["ms_per_step"])
    ratio = per_run(lambda d, t: t[m]["ms_per_step"] / ms(d, m, 1))
    dp = [per_run(lambda d, t, k=k: ms(d, m, 1) / ms(d, m, k)) for k in (2, 4)]
    dd = [per_run(lambda d, t, k=k: ms(d, m, 1) / ddp_ms(d, m, f"cpu:{k}")) for k in (2, 4)]
    print(f"{m:10s} {batch[m]:5d} {fmt(one, '%9.3f')} {fmt(torch_ms, '%9.3f')} {fmt(ratio, '%9.2fx')} "
          f"{fmt(dp[0], '%7.2fx')} {fmt(dp[1], '%7.2fx')} {fmt(dd[0], '%8.2fx')} {fmt(dd[1], '%8.2fx')}")
print("(dpv faster: PyTorch's ms / dpv's ms, one device each; DP / DDP: speed-up over one dpv device, same model "
      "and global batch)")
for spec in dict.fromkeys(h["devices"] for h in dpv_runs[0].get("handoff", [])):
    m50 = med([h["median_us"] for d in dpv_runs for h in d.get("handoff", []) if h["devices"] == spec])
    p90 = med([h["p90_us"] for d in dpv_runs for h in d.get("handoff", []) if h["devices"] == spec])
    print(f"hand-off {spec}: {m50:.1f} us median, {p90:.1f} us p90 per stage (empty jobs)")
gemms = [d["gemm"] for d in dpv_runs if d.get("gemm")]
if gemms:
    g = gemms[0]
    floor = med([x.get("engine_to_floor", x["engine_to_openblas"]) for x in gemms])
    library = g.get("gemm_library", "OpenBLAS")
    print(f"BLAS floor, mlp-large (batch {g['batch']}, {g['flops_per_step'] / 1e9:.2f} GFLOP per step): the faster "
          f"library per shape alone {med([x.get('floor_gflops', x['openblas_gflops']) for x in gemms]):.1f} GFLOP/s "
          f"(OpenBLAS alone {med([x['openblas_gflops'] for x in gemms]):.1f}), the engine's whole step "
          f"{med([x['engine_gflops'] for x in gemms]):.1f} GFLOP/s = {100 * floor:.0f}% of it, running {library} "
          f"(target: within 10%, i.e. >= 90%)")
# The machine's own limit (K independent single-threaded GEMM workers against one) and each
# strategy's parallel efficiency against it: its speed-up over what the machine allows.
for k in sorted({r["workers"] for d in dpv_runs for r in d.get("machine_reference", [])}):
    ref = med([r["speedup"] for d in dpv_runs for r in d.get("machine_reference", []) if r["workers"] == k])
    effs = []
    for m in models:
        dp_eff = med([r.get("parallel_efficiency") for d in dpv_runs for r in d["results"]
                      if r["model"] == m and r["device_count"] == k])
        ddp_eff = med([r.get("parallel_efficiency") for d in dpv_runs for r in d.get("ddp", [])
                       if r["model"] == m and r["devices"] == f"cpu:{k}"])
        effs.append(f"{m} DP {fmt(dp_eff, '%.2f')} DDP {fmt(ddp_eff, '%.2f')}")
    print(f"machine reference cpu:{k}: {k} GEMM workers {ref:.2f}x one; efficiency (speed-up / reference): " + ", ".join(effs))
def launched_samples_per_s(nproc, run):
    try:
        lines = [l for l in open(f"{work}/launch.{nproc}.{run}.txt") if "samples/s" in l]
        return float(lines[-1].split("samples/s")[0].split()[-1]) if lines else None
    except (OSError, ValueError, IndexError):
        return None
launch_speedups = []
for i in range(1, runs + 1):
    one, two = launched_samples_per_s(1, i), launched_samples_per_s(2, i)
    if one and two:
        launch_speedups.append(two / one)
ref2 = med([r["speedup"] for d in dpv_runs for r in d.get("machine_reference", []) if r["workers"] == 2])
if launch_speedups:
    s = med(launch_speedups)
    eff = f", efficiency {s / ref2:.2f} of the machine's {ref2:.2f}x" if ref2 else ""
    print(f"DDP as 2 launched processes over Gloo, mlp-large: {s:.2f}x one launched rank{eff}")
free = [r.get("free_cores") for d in dpv_runs for r in d["results"] if r.get("free_cores")]
if free:
    print(f"free cores the engine found while measuring: {min(free)} to {max(free)} of "
          f"{dpv_runs[0]['results'][0].get('usable_cores', '?')}")
print(f"machine: {dpv_runs[0]['machine']['hardware_threads']} hardware threads, OpenBLAS {dpv_runs[0]['machine']['openblas']}")
PY
