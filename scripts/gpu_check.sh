#!/usr/bin/env bash
# The GPU check of dpviz, in one script, for a machine with an NVIDIA GPU, CUDA 13 (nvcc), CMake,
# ninja and PyTorch in its python3, but none of the Debian packages the build needs and no network.
#
#   Here (a Debian machine with the packages):   scripts/gpu_check.sh --make-carry DIR
#   There, from the repository root:             DPV_CARRY=DIR scripts/gpu_check.sh
#
# It builds the engine, `dpv`, the kernel tests and bench/gpu_collectives (Release, no GUI), runs
# the kernel tests (which must run, not skip), compares `dpv step --devices cuda:0x4` with PyTorch
# on the GPU (per-device BatchNorm against DataParallel's semantics emulated in PyTorch, and
# --sync-bn against single-device BatchNorm on the whole batch), runs `dpv bench --devices cuda`
# and bench/gpu_vs_pytorch.py, and writes its log and results to $OUT (default ./out).
# Exit status: 0 when every check passed.
#
# What DPV_CARRY must hold (--make-carry copies exactly this from a Debian 12 machine):
#   include/cblas.h, f77blas.h, openblas_config.h  <- /usr/include/x86_64-linux-gnu/openblas-pthread/
#   include/nlohmann/                               <- /usr/include/nlohmann/   (nlohmann-json3-dev)
#   include/CLI/                                    <- /usr/include/CLI/        (libcli11-dev)
#   include/gtest/, include/gmock/                  <- /usr/include/gtest/, /usr/include/gmock/ (googletest)
#   lib/libopenblas.so.0 (+ link libopenblas.so)    <- /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so
#   lib/libgfortran.so.5, lib/libquadmath.so.0      <- /lib/x86_64-linux-gnu/ (OpenBLAS needs them)
#   lib/libgtest.a, libgtest_main.a, libgmock.a, libgmock_main.a <- /usr/lib/x86_64-linux-gnu/
# About 40 MB, almost all of it OpenBLAS. Name the folder in the device call's `carry` and ignore
# it in git (.git/info/exclude). The CMake package files of nlohmann_json and CLI11 are generated
# by this script (the Debian ones name /usr paths); GoogleTest is found by CMake's FindGTest.
set -uo pipefail

make_carry() {
  local dir=$1
  mkdir -p "$dir/include" "$dir/lib"
  cp /usr/include/x86_64-linux-gnu/openblas-pthread/{cblas.h,f77blas.h,openblas_config.h} "$dir/include/"
  cp -rL /usr/include/nlohmann /usr/include/CLI /usr/include/gtest /usr/include/gmock "$dir/include/"
  cp -L /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 "$dir/lib/libopenblas.so.0"
  ln -sf libopenblas.so.0 "$dir/lib/libopenblas.so"
  cp -L /lib/x86_64-linux-gnu/libgfortran.so.5 /lib/x86_64-linux-gnu/libquadmath.so.0 "$dir/lib/"
  cp -L /usr/lib/x86_64-linux-gnu/lib{gtest,gtest_main,gmock,gmock_main}.a "$dir/lib/"
  du -sh "$dir"
}

if [[ ${1:-} == --make-carry ]]; then
  make_carry "${2:?usage: scripts/gpu_check.sh --make-carry DIR}"
  exit $?
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CARRY=$(cd "${DPV_CARRY:?set DPV_CARRY to the folder made by --make-carry}" && pwd)
OUT=${OUT:-$ROOT/out}
BUILD=${DPV_GPU_BUILD:-$ROOT/build/gpu}
WORK=$(mktemp -d /tmp/dpv-gpu-check.XXXXXX)
mkdir -p "$OUT" "$BUILD"
exec > >(tee "$OUT/gpu_check.log") 2>&1
export LD_LIBRARY_PATH="$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
export GTEST_ROOT="$CARRY"   # FindGTest looks here when no GoogleTest package is installed

declare -a RESULTS=()
FAILED=0
record() {  # record NAME STATUS
  if [[ $2 -eq 0 ]]; then RESULTS+=("PASS  $1"); else RESULTS+=("FAIL  $1 (exit $2)"); FAILED=1; fi
}
section() { echo; echo "=== $* ($(date +%T))"; }
summary() {
  section "summary"
  printf '%s\n' "${RESULTS[@]}"
  exit $FAILED
}

section "machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1 || true
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" --version | tail -2
cmake --version | head -1
ninja --version
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

section "NCCL and cuBLAS"
NCCL_INC=""; NCCL_LIB=""
for d in /usr/local/cuda/include /usr/include "$(dirname "$NVCC")/../include"; do
  [[ -f $d/nccl.h ]] && NCCL_INC=$d && break
done
for f in /usr/local/cuda/lib64/libnccl.so /usr/local/cuda/lib/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so; do
  [[ -e $f ]] && NCCL_LIB=$f && break
done
if [[ -z $NCCL_INC || -z $NCCL_LIB ]]; then
  # The NCCL of PyTorch's wheels (nvidia-nccl-cu13): include/nccl.h and lib/libnccl.so.2.
  PYNCCL=$(python3 -c 'import importlib.util as u; s=u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
  if [[ -n $PYNCCL && -f $PYNCCL/include/nccl.h ]]; then
    mkdir -p "$WORK/nccl/lib"
    ln -sf "$PYNCCL/lib/libnccl.so.2" "$WORK/nccl/lib/libnccl.so"
    NCCL_INC=$PYNCCL/include; NCCL_LIB=$WORK/nccl/lib/libnccl.so
    export LD_LIBRARY_PATH="$PYNCCL/lib:$LD_LIBRARY_PATH"
  fi
fi
echo "nccl.h: ${NCCL_INC:-NOT FOUND}; libnccl: ${NCCL_LIB:-NOT FOUND}"
ls /usr/local/cuda/lib64/libcublas.so* 2>/dev/null | head -2 || echo "libcublas not in /usr/local/cuda/lib64"
if [[ -z $NCCL_INC || -z $NCCL_LIB ]]; then record "find NCCL" 1; summary; fi

section "configure"
# CMake package files for the header-only libraries in the carry folder.
mkdir -p "$WORK/cmake/nlohmann_json" "$WORK/cmake/CLI11"
cat > "$WORK/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" <<CFG
if(NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$CARRY/include")
endif()
CFG
printf 'set(PACKAGE_VERSION 3.11.2)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' > "$WORK/cmake/nlohmann_json/nlohmann_jsonConfigVersion.cmake"
cat > "$WORK/cmake/CLI11/CLI11Config.cmake" <<CFG
if(NOT TARGET CLI11::CLI11)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "$CARRY/include")
endif()
CFG
printf 'set(PACKAGE_VERSION 2.3.1)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\n' > "$WORK/cmake/CLI11/CLI11ConfigVersion.cmake"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPV_WITH_GUI=OFF \
  -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DDPV_NCCL_INCLUDE="$NCCL_INC" -DDPV_NCCL_LIBRARY="$NCCL_LIB" \
  -Dnlohmann_json_DIR="$WORK/cmake/nlohmann_json" -DCLI11_DIR="$WORK/cmake/CLI11" \
  -DGTEST_ROOT="$CARRY" -DCMAKE_LIBRARY_PATH="$CARRY/lib" \
  -DCMAKE_CXX_FLAGS="-isystem $CARRY/include" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath,$CARRY/lib -Wl,-rpath-link,$CARRY/lib"
rc=$?; record "configure" $rc; [[ $rc -eq 0 ]] || summary
grep -q "building the CUDA backend" "$BUILD/CMakeCache.txt" 2>/dev/null || true

section "build"
cmake --build "$BUILD" -j "$(nproc)" --target dpv dpv_kernel_tests gpu_collectives
rc=$?; record "build dpv, dpv_kernel_tests, gpu_collectives" $rc; [[ $rc -eq 0 ]] || summary

section "dpv devices"
"$BUILD/cli/dpv" devices; record "dpv devices" $?

section "kernel tests"
"$BUILD/tests/dpv_kernel_tests" --gtest_output="xml:$OUT/kernel_tests.xml" 2>&1 | tee "$WORK/kernel_tests.txt"
rc=${PIPESTATUS[0]}; record "dpv_kernel_tests" $rc
# On a GPU nothing may skip except the NCCL test on a one-GPU machine.
skipped=$(grep -E '^\[  SKIPPED \] [A-Za-z]' "$WORK/kernel_tests.txt" | grep -v 'NcclAcrossDistinctGpus' || true)
if [[ -n $skipped ]]; then echo "tests skipped on a GPU machine:"; echo "$skipped"; record "no skipped kernel tests" 1
else record "no skipped kernel tests" 0; fi

section "dpv step --devices cuda:0x4 vs PyTorch on the GPU"
cat > "$WORK/step_compare.py" <<'PY'
"""dpv step on cuda:0x4 against PyTorch on cuda:0: the same model, state and batch, two steps.
Per-device BatchNorm: DataParallel emulated in PyTorch (torch.chunk, replica 0 owns the buffers,
replicas share parameters so gradients sum). --sync-bn: single-device BatchNorm on the whole
batch, which DDP + SyncBatchNorm reproduces (its merge of the per-rank statistics is exact)."""
import copy, json, subprocess, sys
import torch, torch.nn as nn, torch.nn.functional as F
from safetensors.torch import save_file, load_file

dpv, work, out_json = sys.argv[1], sys.argv[2], sys.argv[3]
torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda:0")
try:
    functional_call = torch.func.functional_call
except AttributeError:  # PyTorch < 2.0
    functional_call = torch.nn.utils.stateless.functional_call
results, ok = {}, True
for dtype_name, dtype, rtol in (("float32", torch.float32, 2e-4), ("float64", torch.float64, 1e-9)):
    torch.manual_seed(3)
    layers = [nn.Linear(32, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
              nn.Linear(64, 10)]
    spec = {"layers": [{"type": "linear", "in_features": 32, "out_features": 64}, {"type": "batchnorm1d", "num_features": 64},
                       {"type": "relu"}, {"type": "linear", "in_features": 64, "out_features": 64},
                       {"type": "batchnorm1d", "num_features": 64}, {"type": "relu"},
                       {"type": "linear", "in_features": 64, "out_features": 10}],
            "loss": "cross_entropy", "dtype": dtype_name}
    base = nn.Sequential(*layers).to(dtype)
    x = torch.randn(30, 32, dtype=dtype) * 2 + 0.5      # 30 rows: chunks 8, 8, 8, 6
    y = torch.randint(0, 10, (30,))
    with open(f"{work}/model.json", "w") as f: json.dump(spec, f)
    save_file({k: v.contiguous() for k, v in base.state_dict().items()}, f"{work}/state.safetensors")
    save_file({"input": x.contiguous(), "target": y.contiguous()}, f"{work}/batch.safetensors")
    for sync_bn in (False, True):
        name = f"{dtype_name}{'-sync-bn' if sync_bn else ''}"
        cmd = [dpv, "step", "--model", f"{work}/model.json", "--state", f"{work}/state.safetensors",
               "--batch", f"{work}/batch.safetensors", "--devices", "cuda:0x4", "--lr", "0.1", "--momentum", "0.9",
               "--weight-decay", "1e-4", "--steps", "2", "--out", f"{work}/out.safetensors"] + (["--sync-bn"] if sync_bn else [])
        subprocess.run(cmd, check=True)
        got = load_file(f"{work}/out.safetensors")
        model = copy.deepcopy(base).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
        xd, yd = x.to(dev), y.to(dev)
        for _ in range(2):
            opt.zero_grad()
            if sync_bn:
                out = model(xd)
            else:
                outs = []
                params = dict(model.named_parameters())
                for i, c in enumerate(torch.chunk(xd, 4)):
                    if i == 0:
                        outs.append(model(c))          # replica 0 is the original: its buffer updates stay
                    else:
                        bufs = {n: b.clone() for n, b in model.named_buffers()}
                        outs.append(functional_call(model, {**params, **bufs}, (c,)))
                out = torch.cat(outs)
            loss = F.cross_entropy(out, yd)
            loss.backward()
            last_out, last_loss = out.detach(), loss.detach()
            grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
            opt.step()
        ref = {"output": last_out, "loss": last_loss}
        ref.update({f"grad/{n}": g for n, g in grads.items()})
        ref.update({f"state/{n}": t for n, t in model.state_dict().items()})
        errs = {}
        for key, r in ref.items():
            if key not in got:
                errs[key] = "missing"; ok = False; continue
            g = got[key].to(dev)
            if r.dtype == torch.int64:
                errs[key] = 0.0 if torch.equal(g.reshape(r.shape).to(torch.int64), r) else "differs"
            else:
                # Floor of 1e-2: a Linear bias feeding a BatchNorm has a zero gradient in exact
                # arithmetic, so both sides hold rounding noise there.
                scale = max(r.abs().max().item(), 1e-2)
                errs[key] = (g.reshape(r.shape).to(r.dtype) - r).abs().max().item() / scale
            if errs[key] == "differs" or (isinstance(errs[key], float) and errs[key] > rtol): ok = False
        worst = max((e for e in errs.values() if isinstance(e, float)), default=0.0)
        bad = {k: e for k, e in errs.items() if not isinstance(e, float) or e > rtol}
        print(f"{name:18s} worst normwise error {worst:.2e} (bound {rtol:.0e}) {'OK' if not bad else 'MISMATCH ' + str(bad)}")
        results[name] = {"worst": worst, "bound": rtol, "errors": {k: str(e) for k, e in errs.items()}}
with open(out_json, "w") as f: json.dump(results, f, indent=1)
sys.exit(0 if ok else 1)
PY
python3 "$WORK/step_compare.py" "$BUILD/cli/dpv" "$WORK" "$OUT/step_compare.json"
record "dpv step cuda:0x4 vs PyTorch" $?

section "dpv bench --devices cuda"
"$BUILD/cli/dpv" bench --devices cuda cuda:0x4 --models mlp-large gpu-mlp --iters 10 --warmup 2 --json "$OUT/bench.json"
record "dpv bench --devices cuda" $?

section "bench/gpu_vs_pytorch.py"
python3 "$ROOT/bench/gpu_vs_pytorch.py" --dpv "$BUILD/cli/dpv" --collectives "$BUILD/bench/gpu_collectives" \
  --out "$WORK/bench" --iters 20
rc=$?; record "gpu_vs_pytorch" $rc
cp "$WORK/bench/gpu_vs_pytorch.json" "$OUT/" 2>/dev/null || true

summary
