#!/usr/bin/env bash
# The GPU check of dpviz, in one script: build, test and measure the CUDA path on a machine with
# an NVIDIA GPU, CUDA 13 (nvcc, cuBLAS), CMake, ninja and PyTorch in its python3, within about
# 10 minutes on one H200. Nothing else is assumed there: no Qt (the app is not built), no network,
# and none of the Debian packages the build needs unless DPV_CARRY provides them.
#
#   On a Debian 12 machine with the build packages:  scripts/gpu_check.sh --make-carry DIR
#   On the GPU machine, from the repository root:     DPV_CARRY=DIR scripts/gpu_check.sh
#   On a GPU machine that has the packages itself:     scripts/gpu_check.sh
#
# Steps (each one timed and recorded, each under a time limit that the budget shortens; one that
# has under 20 s left is skipped):
#   configure + build   Release, DPV_WITH_GUI=OFF: dpv, dpv_kernel_tests, dpv_kernel_math_tests,
#                       bench/gpu_collectives
#   kernel math tests   the kernels' per-element math on the CPU (tests/kernel_math)
#   kernel tests        CUDA backend vs CPU backend op by op, DataParallel and collectives on GPUs;
#                       on a GPU nothing may skip except the NCCL test on a one-GPU machine
#   compute-sanitizer   memcheck, initcheck, racecheck, synccheck on the parity tests
#   dpv step            cuda:0 and cuda:0x4 (plain and --sync-bn) against PyTorch on the GPU
#                       (scripts/gpu_step_compare.py), and `dpv step --ddp` on cuda:0x4 against
#                       cpu:4 when this build's dpv has --ddp
#   benchmarks          dpv bench on cuda and cuda:0x4, bench/gpu_vs_pytorch.py (PyTorch eager)
# Then it prints a summary table and writes it to $OUT/gpu_check_summary.txt, beside the log
# ($OUT/gpu_check.log), the test XML, the sanitizer log and the JSON results. $OUT defaults to
# build/gpu-check. Exit status: 0 when every step passed.
#
# DPV_CARRY (made by --make-carry, about 45 MB; name the folder in the device call's `carry` and
# ignore it in git through .git/info/exclude) holds what Debian packages give the build:
#   include/  cblas.h f77blas.h openblas_config.h (libopenblas-dev), nlohmann/ (nlohmann-json3-dev),
#             CLI/ (libcli11-dev), gtest/ gmock/ (googletest), gloo/ (libgloo-dev)
#   lib/      libopenblas.so.0 + libgfortran.so.5, libquadmath.so.0; libgtest*.a, libgmock*.a;
#             libgloo.so.0 + libhiredis, libibverbs, libnl-3, libnl-route-3
# The CMake package files for these are generated here (the Debian ones name /usr paths).
# Environment: OUT, DPV_CARRY, DPV_GPU_BUILD (build folder, default build/gpu),
# DPV_GPU_CHECK_SECONDS (time budget, default 570).
set -uo pipefail

make_carry() {
  local dir=$1 a=/usr/lib/x86_64-linux-gnu l=/lib/x86_64-linux-gnu
  mkdir -p "$dir/include" "$dir/lib" || return 1
  cp /usr/include/x86_64-linux-gnu/openblas-pthread/{cblas.h,f77blas.h,openblas_config.h} "$dir/include/" &&
    cp -rL /usr/include/nlohmann /usr/include/CLI /usr/include/gtest /usr/include/gmock /usr/include/gloo \
      "$dir/include/" &&
    cp -L $a/openblas-pthread/libopenblas.so.0 "$dir/lib/libopenblas.so.0" &&
    ln -sf libopenblas.so.0 "$dir/lib/libopenblas.so" &&
    cp -L $l/libgfortran.so.5 $l/libquadmath.so.0 "$dir/lib/" &&
    cp -L $a/lib{gtest,gtest_main,gmock,gmock_main}.a "$dir/lib/" &&
    cp -L /usr/lib/libgloo.so.0 "$dir/lib/" &&
    cp -L $l/libhiredis.so.0.14 $l/libibverbs.so.1 $l/libnl-3.so.200 $l/libnl-route-3.so.200 "$dir/lib/" ||
    { echo "--make-carry: a file is missing; install the build packages first (scripts/install_deps.sh)"; return 1; }
  du -sh "$dir"
}

case ${1:-} in
  --make-carry) make_carry "${2:?usage: scripts/gpu_check.sh --make-carry DIR}"; exit $? ;;
  -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "usage: scripts/gpu_check.sh [--make-carry DIR | --help]" >&2; exit 2 ;;
esac

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/build/gpu-check}
BUILD=${DPV_GPU_BUILD:-$ROOT/build/gpu}
BUDGET=${DPV_GPU_CHECK_SECONDS:-570}
WORK=$(mktemp -d /tmp/dpv-gpu-check.XXXXXX)
mkdir -p "$OUT" "$BUILD"
exec > >(tee "$OUT/gpu_check.log") 2>&1
export PYTHONUNBUFFERED=1
PY=$(command -v python3)
START=$SECONDS

declare -a ROWS=()
FAILED=0
# record NAME STATUS(PASS|FAIL|SKIP) STEP_START NOTE
record() {
  ROWS+=("$(printf '%-44s %-5s %6ss  %s' "$1" "$2" "$((SECONDS - $3))" "$4")")
  [[ $2 == FAIL ]] && FAILED=1
  return 0
}
section() { echo; echo "=== $* (t+$((SECONDS - START))s)"; }
left() { echo $((BUDGET - (SECONDS - START))); }
summary() {
  section "summary"
  {
    echo "dpviz GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
    printf '%-44s %-5s %7s  %s\n' step result time note
    printf '%s\n' "${ROWS[@]}"
    echo "total $((SECONDS - START))s; $([[ $FAILED -eq 0 ]] && echo 'every step passed' || echo 'SOME STEP FAILED')"
  } | tee "$OUT/gpu_check_summary.txt"
  rm -rf "$WORK"
  exit $FAILED
}
# step NAME LIMIT_SECONDS COMMAND...: runs COMMAND under `timeout` of LIMIT or what is left of the
# budget, whichever is less, so the whole check ends within the budget.
step() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  (($(left) < limit)) && limit=$(left)
  if ((limit < 20)); then record "$name" SKIP $t0 "out of time budget"; return 0; fi
  section "$name"
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  if ((rc == 0)); then record "$name" PASS $t0 ""
  elif ((rc == 124 || rc == 137)); then record "$name" FAIL $t0 "timed out after ${limit}s"
  else record "$name" FAIL $t0 "exit $rc"; fi
  return $rc
}

section "machine"
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv 2>&1 || true
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" --version | tail -2
cmake --version | head -1
echo "ninja $(ninja --version)"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

# --- what the build needs: from DPV_CARRY, or from the system
t0=$SECONDS
section "build dependencies"
CMAKE_DEPS=()
if [[ -n ${DPV_CARRY:-} ]]; then
  CARRY=$(cd "$DPV_CARRY" && pwd) || { record "build dependencies" FAIL $t0 "DPV_CARRY=$DPV_CARRY is not a folder"; summary; }
  missing=""
  for f in include/cblas.h include/nlohmann/json.hpp include/CLI/CLI.hpp include/gtest/gtest.h include/gloo/config.h \
           lib/libopenblas.so.0 lib/libgtest.a lib/libgloo.so.0; do
    [[ -e $CARRY/$f ]] || missing+=" $f"
  done
  if [[ -n $missing ]]; then
    echo "DPV_CARRY lacks:$missing (remake it with scripts/gpu_check.sh --make-carry DIR on a Debian 12 machine)"
    record "build dependencies" FAIL $t0 "carry folder incomplete:$missing"; summary
  fi
  export LD_LIBRARY_PATH="$CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  mkdir -p "$WORK/cmake/nlohmann_json" "$WORK/cmake/CLI11" "$WORK/cmake/Gloo"
  header_only_package() {  # header_only_package NAME TARGET VERSION
    printf 'if(NOT TARGET %s)\n  add_library(%s INTERFACE IMPORTED)\n  set_target_properties(%s PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "%s/include")\nendif()\n' \
      "$2" "$2" "$2" "$CARRY" > "$WORK/cmake/$1/$1Config.cmake"
    printf 'set(PACKAGE_VERSION %s)\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\nset(PACKAGE_VERSION_EXACT FALSE)\n' "$3" \
      > "$WORK/cmake/$1/$1ConfigVersion.cmake"
  }
  header_only_package nlohmann_json nlohmann_json::nlohmann_json 3.11.2
  header_only_package CLI11 CLI11::CLI11 2.3.1
  cat > "$WORK/cmake/Gloo/GlooConfig.cmake" <<CFG
if(NOT TARGET gloo)
  add_library(gloo SHARED IMPORTED)
  set_target_properties(gloo PROPERTIES IMPORTED_LOCATION "$CARRY/lib/libgloo.so.0" INTERFACE_INCLUDE_DIRECTORIES "$CARRY/include")
endif()
CFG
  CMAKE_DEPS=(-Dnlohmann_json_DIR="$WORK/cmake/nlohmann_json" -DCLI11_DIR="$WORK/cmake/CLI11" -DGloo_DIR="$WORK/cmake/Gloo"
              -DGTEST_ROOT="$CARRY" -DCMAKE_LIBRARY_PATH="$CARRY/lib" -DCMAKE_CXX_FLAGS="-isystem $CARRY/include"
              "-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath,$CARRY/lib -Wl,-rpath-link,$CARRY/lib")
  record "build dependencies" PASS $t0 "from DPV_CARRY"
else
  missing=""
  probe() { echo "#include <$1>" | c++ -x c++ -fsyntax-only -I/usr/include/x86_64-linux-gnu/openblas-pthread - 2>/dev/null || missing+=" $1 ($2)"; }
  probe cblas.h libopenblas-dev
  probe nlohmann/json.hpp nlohmann-json3-dev
  probe CLI/CLI.hpp libcli11-dev
  probe gtest/gtest.h googletest
  probe gloo/config.h libgloo-dev
  if [[ -n $missing ]]; then
    echo "This machine lacks what the build needs:$missing."
    echo "Either install those Debian packages (scripts/install_deps.sh), or make a carry folder on a Debian 12"
    echo "machine with 'scripts/gpu_check.sh --make-carry DIR', bring it here and run DPV_CARRY=DIR $0."
    record "build dependencies" FAIL $t0 "missing:$missing"; summary
  fi
  record "build dependencies" PASS $t0 "system packages"
fi

# NCCL: the toolkit's, else the one of PyTorch's wheels (nvidia-nccl-cu13: include/nccl.h, lib/libnccl.so.2).
NCCL_INC=""; NCCL_LIB=""
for d in /usr/local/cuda/include /usr/include "$(dirname "$NVCC")/../include"; do
  [[ -f $d/nccl.h ]] && NCCL_INC=$d && break
done
for f in /usr/local/cuda/lib64/libnccl.so /usr/local/cuda/lib/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so; do
  [[ -e $f ]] && NCCL_LIB=$f && break
done
if [[ -z $NCCL_INC || -z $NCCL_LIB ]]; then
  PYNCCL=$("$PY" -c 'import importlib.util as u; s=u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
  if [[ -n $PYNCCL && -f $PYNCCL/include/nccl.h ]]; then
    mkdir -p "$WORK/nccl/lib"
    ln -sf "$PYNCCL/lib/libnccl.so.2" "$WORK/nccl/lib/libnccl.so"
    NCCL_INC=$PYNCCL/include; NCCL_LIB=$WORK/nccl/lib/libnccl.so
    export LD_LIBRARY_PATH="$PYNCCL/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
fi
echo "nccl.h: ${NCCL_INC:-NOT FOUND}; libnccl: ${NCCL_LIB:-NOT FOUND}"

t0=$SECONDS
section "configure"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPV_WITH_GUI=OFF -DCMAKE_CUDA_COMPILER="$NVCC" \
  ${NCCL_INC:+-DDPV_NCCL_INCLUDE="$NCCL_INC"} ${NCCL_LIB:+-DDPV_NCCL_LIBRARY="$NCCL_LIB"} "${CMAKE_DEPS[@]}" \
  2>&1 | tee "$WORK/configure.txt"
if [[ ${PIPESTATUS[0]} -ne 0 ]]; then record "configure" FAIL $t0 "see the log"; summary; fi
if ! grep -q "building the CUDA backend" "$WORK/configure.txt"; then
  record "configure" FAIL $t0 "CUDA backend OFF: $(grep -o 'dpviz: [^;]*CUDA[^;]*' "$WORK/configure.txt" | head -1)"; summary
fi
record "configure" PASS $t0 "Release, no GUI, CUDA backend on"

step "build" 420 cmake --build "$BUILD" -j "$(nproc)" --target dpv dpv_kernel_tests dpv_kernel_math_tests gpu_collectives ||
  summary
DPV=$BUILD/cli/dpv
step "dpv devices" 60 "$DPV" devices
step "kernel math tests (CPU)" 120 "$BUILD/tests/dpv_kernel_math_tests" --gtest_brief=1

t0=$SECONDS
step "kernel tests (GPU)" 240 bash -c "'$BUILD/tests/dpv_kernel_tests' --gtest_output=xml:'$OUT/kernel_tests.xml' 2>&1 |
  tee '$WORK/kernel_tests.txt'; exit \${PIPESTATUS[0]}"
# On a GPU nothing may skip except the NCCL test on a one-GPU machine.
skipped=$(grep -E '^\[  SKIPPED \] [A-Za-z]' "$WORK/kernel_tests.txt" 2>/dev/null | grep -v 'NcclAcrossDistinctGpus' || true)
if [[ -n $skipped ]]; then
  echo "tests skipped on a GPU machine:"; echo "$skipped"
  record "  nothing skipped on the GPU" FAIL $t0 "$(echo "$skipped" | wc -l) skipped"
else record "  nothing skipped on the GPU" PASS $t0 ""; fi

SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer \
  2>/dev/null | head -1)
# The op table's CUDA entries without its huge cases (DPV_OP_TABLE_SKIP_LARGE), which the sanitizers
# would take minutes over.
PARITY='Ops/OpTable.Cuda*:Dtypes/GpuDevice.*:*CrossEntropyTargetErrors*'
for tool in memcheck initcheck racecheck synccheck; do
  if [[ ! -x $SANITIZER ]]; then
    record "compute-sanitizer $tool (parity tests)" FAIL $SECONDS "compute-sanitizer not found (PATH, /usr/local/cuda*/bin)"
    continue
  fi
  step "compute-sanitizer $tool (parity tests)" 150 bash -c "DPV_OP_TABLE_SKIP_LARGE=1 '$SANITIZER' --tool $tool --error-exitcode 86 \
    '$BUILD/tests/dpv_kernel_tests' --gtest_filter='$PARITY' --gtest_brief=1 >>'$OUT/sanitizers.log' 2>&1; rc=\$?;
    tail -4 '$OUT/sanitizers.log'; exit \$rc"
done

step "dpv step cuda:0, cuda:0x4 vs PyTorch" 240 "$PY" "$ROOT/scripts/gpu_step_compare.py" --dpv "$DPV" \
  --work "$WORK/step" --json "$OUT/step_compare.json"
if "$DPV" step --help 2>/dev/null | grep -q -- '--ddp'; then
  step "dpv step --ddp cuda:0x4 vs cpu:4" 240 "$PY" "$ROOT/scripts/gpu_step_compare.py" --dpv "$DPV" --ddp \
    --work "$WORK/ddp" --json "$OUT/ddp_compare.json"
else
  record "dpv step --ddp cuda:0x4 vs cpu:4" SKIP $SECONDS "this dpv has no --ddp"
fi

step "dpv bench cuda, cuda:0x4" 180 "$DPV" bench --devices cuda cuda:0x4 --models mlp-large gpu-mlp --iters 10 \
  --warmup 2 --json "$OUT/bench.json"
step "bench/gpu_vs_pytorch.py (PyTorch eager)" 180 "$PY" "$ROOT/bench/gpu_vs_pytorch.py" --dpv "$DPV" \
  --collectives "$BUILD/bench/gpu_collectives" --out "$WORK/bench" --iters 20
cp "$WORK/bench/gpu_vs_pytorch.json" "$OUT/" 2>/dev/null || true

summary
