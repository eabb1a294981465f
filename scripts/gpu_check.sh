#!/usr/bin/env bash
# The GPU check of dpviz: builds and checks the CUDA path on a machine with an NVIDIA GPU, CUDA 13
# (nvcc, cuBLAS, NCCL), CMake, ninja and PyTorch in its python3, in at most 7 minutes (420 s). No
# Qt (the app is not built), no network, and none of the Debian packages the build needs unless
# DPV_CARRY brings them (scripts/gpu_carry.sh says what that folder holds).
#
#   On a Debian 12 machine with the build packages:  scripts/gpu_check.sh --make-carry DIR
#   On the GPU machine, from the repository root:     DPV_CARRY=DIR scripts/gpu_check.sh
#   On a GPU machine that has the packages itself:     scripts/gpu_check.sh
#
# Steps, correctness first, each under its own time limit (seconds):
#   probe            45  compiler, CMake, ninja, cuBLAS, NCCL, GPU name and driver, build packages
#   build           270  configure (Release, no GUI, CUDA on, the GPU's own architecture) and build
#                        dpv and dpv_kernel_tests with ninja -j16
#   parity          120  dpv_kernel_tests: the CUDA backend against the CPU backend op by op, and
#                        DataParallel and collectives on the GPU; nothing may skip but the test
#                        that needs two GPUs
#   compare_dp      100  dpv step on cuda:0 and cuda:0x4 against PyTorch on the GPU
#                        (scripts/gpu_step_compare.py --device cuda)
#   compare_ddp     100  dpv step --ddp on cuda:0x4 against the same on cpu:4 (--ddp)
#   nccl_one_rank    75  dpv launch --nproc-per-node 1 --backend nccl -- step --ddp --devices cuda:0
#                        against the in-process DDP step on cpu:1 (--nccl-launch)
#   nccl_two_ranks   45  two NCCL ranks on one GPU (CUDA_VISIBLE_DEVICES=0) must be refused: exit
#                        status 1 and an error that says one process per GPU
#   bench_allreduce  45  dpv bench allreduce over NCCL, one rank, four sizes
#   memcheck        120  compute-sanitizer memcheck on the parity tests (NOT RUN without it)
#   bench            60  a short dpv bench on cuda and cuda:0x4
# A step starts only when the step it needs passed and its limit ends within the budget; else it
# is NOT RUN, with the reason. Every dpv call inside a step has its own shorter timeout.
#
# $OUT (default build/gpu-check) receives at most 8 files: summary.txt (one line per step: PASS,
# FAIL with the exit status and the output's last lines, or NOT RUN with why, and the seconds),
# rewritten before and after every step so that a kill at any moment leaves a truthful one;
# gpu_check.log (every step's output); step_compare.json, ddp_compare.json, nccl_compare.json,
# bench_allreduce.json, bench.json. "every step passed" only when every step ran and passed; the
# exit status is 0 then, 1 otherwise.
#
# Environment: OUT, DPV_CARRY, DPV_GPU_BUILD (build folder, default build/gpu),
# DPV_GPU_CHECK_SECONDS (the budget, default 420). For testing the check itself on any machine:
# DPV_GPU_CHECK_FAKE=1 runs, instead of each step's commands, the shell text in DPV_FAKE_<step>
# (default `true`; exit status 77 means NOT RUN, its last line saying why) under the limit in
# DPV_FAKE_LIMIT_<step> (default the step's), all else unchanged. Scratch files go to $TMPDIR.
set -uo pipefail

SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
ROOT=$(dirname "$(dirname "$SELF")")
# shellcheck source=scripts/gpu_carry.sh
source "$ROOT/scripts/gpu_carry.sh"

STEPS=(probe build parity compare_dp compare_ddp nccl_one_rank nccl_two_ranks bench_allreduce memcheck bench)
declare -A LIMIT=([probe]=45 [build]=270 [parity]=120 [compare_dp]=100 [compare_ddp]=100 [nccl_one_rank]=75
                  [nccl_two_ranks]=45 [bench_allreduce]=45 [memcheck]=120 [bench]=60)
# The step each one needs to have passed.
declare -A NEEDS=([build]=probe [parity]=build [compare_dp]=build [compare_ddp]=build [nccl_one_rank]=build
                  [nccl_two_ranks]=build [bench_allreduce]=build [memcheck]=build [bench]=build)
NOT_RUN=77  # a step's exit status for "could not run here" (its last output line says why)

# ---------------------------------------------------------------- the steps (run as `--step NAME`)

PY=$(command -v python3 || echo python3)
DPV=${DPV_GPU_BUILD:=$ROOT/build/gpu}/cli/dpv
KERNEL_TESTS=$DPV_GPU_BUILD/tests/dpv_kernel_tests
# A dpv call's own limit inside a step, shorter than any step's.
within() { timeout -k 5 "$@"; }
not_run() { echo "$*"; exit $NOT_RUN; }

# What every step needs from the environment: the carried libraries and NCCL on the library path.
step_environment() {
  [[ -n ${DPV_CARRY:-} ]] && export LD_LIBRARY_PATH="$DPV_CARRY/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  find_nccl "$PY" "$WORK"
  export PYTHONUNBUFFERED=1
}

step_probe() {
  local nvcc inc missing problems=()
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total --format=csv ||
    problems+=("nvidia-smi failed (no NVIDIA driver or GPU)")
  "$nvcc" --version | tail -2 || problems+=("no nvcc (PATH, /usr/local/cuda/bin)")
  c++ --version | head -1 || problems+=("no C++ compiler")
  cmake --version | head -1 || problems+=("no cmake")
  if ninja --version > /dev/null; then echo "ninja $(ninja --version)"; else problems+=("no ninja"); fi
  inc=$(dirname "$nvcc")/../include
  if [[ -f $inc/cublas_api.h ]]; then
    echo "cuBLAS $(grep -E '^#define CUBLAS_VER_(MAJOR|MINOR|PATCH) ' "$inc/cublas_api.h" | awk '{print $3}' | paste -sd.)"
  else problems+=("no cuBLAS (cublas_api.h in $inc)"); fi
  if [[ -n $NCCL_INC && -n $NCCL_LIB ]]; then
    echo "NCCL $(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$NCCL_INC/nccl.h" | awk '{print $3}' | paste -sd.) ($NCCL_LIB)"
  else problems+=("no NCCL (nccl.h and libnccl.so in the toolkit, /usr or PyTorch's nvidia-nccl wheel)"); fi
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' ||
    echo "no PyTorch in $PY: the compare steps will fail"
  echo "compute-sanitizer: $(sanitizer || echo 'absent (memcheck will be NOT RUN)')"
  if [[ -n ${DPV_CARRY:-} ]]; then
    missing=$(carry_missing "$DPV_CARRY")
    [[ -z $missing ]] || problems+=("DPV_CARRY lacks:$missing (remake it: scripts/gpu_check.sh --make-carry DIR)")
  else
    missing=$(system_missing)
    [[ -z $missing ]] || problems+=("the build needs:$missing (install them, or carry them: DPV_CARRY, --make-carry)")
  fi
  ((${#problems[@]} == 0)) && return 0
  local IFS=';'
  echo "cannot build and run here: ${problems[*]}"
  return 1
}

step_build() {
  local t0=$SECONDS arch cmake_args=()
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  [[ $arch =~ ^[0-9]+$ ]] && cmake_args+=("-DDPV_CUDA_ARCHITECTURES=${arch}-real")  # this GPU's only
  if [[ -n ${DPV_CARRY:-} ]]; then carry_cmake_args "$DPV_CARRY" "$WORK"; cmake_args+=("${CARRY_CMAKE_ARGS[@]}"); fi
  cmake -S "$ROOT" -B "$DPV_GPU_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPV_WITH_GUI=OFF -DDPV_WITH_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" \
    -DDPV_NCCL_INCLUDE="$NCCL_INC" -DDPV_NCCL_LIBRARY="$NCCL_LIB" "${cmake_args[@]}" > "$WORK/configure.txt" 2>&1
  local rc=$?
  cat "$WORK/configure.txt"
  ((rc == 0)) || { echo "configure failed"; return 1; }
  grep -q "building the CUDA backend" "$WORK/configure.txt" || { echo "configure left the CUDA backend off"; return 1; }
  echo "configure took $((SECONDS - t0)) s"
  t0=$SECONDS
  cmake --build "$DPV_GPU_BUILD" -j 16 --target dpv dpv_kernel_tests || { echo "build failed after $((SECONDS - t0)) s"; return 1; }
  echo "build (dpv, dpv_kernel_tests; ninja -j16) took $((SECONDS - t0)) s"
}

step_parity() {
  # Not --gtest_brief: the skipped tests must be listed to be counted.
  within 110 "$KERNEL_TESTS" > "$WORK/parity.txt" 2>&1
  local rc=$? skipped
  cat "$WORK/parity.txt"
  ((rc == 0)) || return $rc
  skipped=$(grep -E '^\[  SKIPPED \] [A-Za-z]' "$WORK/parity.txt" | grep -v 'NcclAcrossDistinctGpus')
  [[ -z $skipped ]] || { echo "skipped on a GPU machine (nothing may):"; echo "$skipped"; return 1; }
}

step_compare() {  # step_compare JSON_NAME [gpu_step_compare.py options]
  local json=$1
  shift
  "$PY" "$ROOT/scripts/gpu_step_compare.py" --device cuda --dpv "$DPV" --work "$WORK/compare-$json" \
    --json "$OUT/$json" --timeout 40 "$@"
}

step_nccl_two_ranks() {
  local text rc
  text=$(CUDA_VISIBLE_DEVICES=0 within 40 "$DPV" launch --nproc-per-node 2 --backend nccl --master-port 0 --timeout 30 \
    -- bench allreduce --min-bytes 4096 --max-bytes 4096 2>&1)
  rc=$?
  echo "$text"
  ((rc == 1)) || { echo "expected exit status 1 (refused), got $rc"; return 1; }
  grep -qi "per GPU" <<<"$text" || { echo "the error does not say one process per GPU"; return 1; }
  echo "refused with exit status 1 and a clear error, as it must be"
}

step_bench_allreduce() {
  within 40 "$DPV" launch --nproc-per-node 1 --backend nccl --master-port 0 --timeout 30 -- bench allreduce \
    --min-bytes 4096 --max-bytes 16777216 --factor 16 --iters 10 --warmup 2 --seconds-per-size 1 \
    --json "$OUT/bench_allreduce.json"
}

sanitizer() {
  local f
  command -v compute-sanitizer && return 0
  for f in /usr/local/cuda*/bin/compute-sanitizer /opt/nvidia/*/compute-sanitizer; do
    [[ -x $f ]] && echo "$f" && return 0
  done
  return 1
}

step_memcheck() {
  local tool
  tool=$(sanitizer) || not_run "compute-sanitizer not found (PATH, /usr/local/cuda*/bin)"
  # The op table's CUDA entries without its huge cases (DPV_OP_TABLE_SKIP_LARGE), which memcheck
  # would take minutes over.
  DPV_OP_TABLE_SKIP_LARGE=1 within 110 "$tool" --tool memcheck --error-exitcode 86 "$KERNEL_TESTS" \
    --gtest_filter='Ops/OpTable.Cuda*:Dtypes/GpuDevice.*:*CrossEntropyTargetErrors*' --gtest_brief=1
}

step_bench() {
  within 55 "$DPV" bench --devices cuda cuda:0x4 --models gpu-mlp mlp-large --iters 10 --warmup 2 --stage-iters 5 \
    --json "$OUT/bench.json"
}

# run_step NAME: the body of `--step NAME`, in its own process and session.
run_step() {
  local name=$1
  if [[ ${DPV_GPU_CHECK_FAKE:-0} == 1 ]]; then
    local var="DPV_FAKE_$name"
    eval "${!var:-true}"
    exit
  fi
  step_environment
  case $name in
    compare_dp) step_compare step_compare.json ;;
    compare_ddp) step_compare ddp_compare.json --ddp ;;
    nccl_one_rank) step_compare nccl_compare.json --nccl-launch ;;
    *) "step_$name" ;;
  esac
}

# ---------------------------------------------------------------- the driver

case ${1:-} in
  --make-carry) make_carry "${2:?usage: scripts/gpu_check.sh --make-carry DIR}"; exit $? ;;
  --step) echo $$ > "$WORK/$2.session"; run_step "$2"; exit $? ;;
  -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "usage: scripts/gpu_check.sh [--make-carry DIR | --help]" >&2; exit 2 ;;
esac

export OUT=${OUT:-$ROOT/build/gpu-check} DPV_GPU_BUILD
BUDGET=${DPV_GPU_CHECK_SECONDS:-420}
[[ $BUDGET =~ ^[0-9]+$ ]] || { echo "DPV_GPU_CHECK_SECONDS=$BUDGET is not a whole number of seconds" >&2; exit 2; }
if [[ -n ${DPV_CARRY:-} ]]; then
  DPV_CARRY=$(cd "$DPV_CARRY" 2>/dev/null && pwd) || { echo "DPV_CARRY is not a folder" >&2; exit 2; }
  export DPV_CARRY
fi
mkdir -p "$OUT" "$DPV_GPU_BUILD" || exit 2
OUT=$(cd "$OUT" && pwd) DPV_GPU_BUILD=$(cd "$DPV_GPU_BUILD" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dpv-gpu-check.XXXXXX") || exit 2
export WORK
LOG=$OUT/gpu_check.log
: > "$LOG"
START=$SECONDS
declare -A STATUS=() SECS=() NOTE=()
CURRENT=""

elapsed() { echo $((SECONDS - START)); }
say() { echo "$*" | tee -a "$LOG"; }

# The summary, written whole to a temporary file and renamed, so a reader never sees half of it.
write_summary() {
  local verdict=$1 name
  {
    echo "dpviz GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), budget ${BUDGET}s, t+$(elapsed)s"
    for name in "${STEPS[@]}"; do
      printf '%-16s %-8s %4ss  %s\n' "$name" "${STATUS[$name]:-PENDING}" "${SECS[$name]:-0}" "${NOTE[$name]:-}"
    done
    echo "$verdict"
  } > "$OUT/.summary.tmp" && mv -f "$OUT/.summary.tmp" "$OUT/summary.txt"
}

# Ends every process the step started (its session), also those that left its process group.
end_session() {
  local sid stat pid line fields
  sid=$(cat "$WORK/$1.session" 2>/dev/null) || return 0
  for stat in /proc/[0-9]*/stat; do
    pid=${stat#/proc/}; pid=${pid%/stat}
    read -r line 2>/dev/null < "$stat" || continue
    read -r -a fields <<< "${line##*) }"  # state ppid pgrp session ...
    [[ ${fields[3]:-} == "$sid" ]] && kill -KILL "$pid" 2>/dev/null
  done
  return 0
}

# The step's output (from byte OFFSET of the log) in at most 3 lines of at most 300 characters.
last_lines() { tail -c +"$(($1 + 1))" "$LOG" | grep -v '^\s*$' | tail -3 | cut -c1-300 | paste -sd'|' | sed 's/|/ | /g'; }

run_one() {
  local name=$1 limit=${LIMIT[$1]} need=${NEEDS[$1]:-} t0=$SECONDS offset rc fake_limit="DPV_FAKE_LIMIT_$1"
  [[ ${DPV_GPU_CHECK_FAKE:-0} == 1 && -n ${!fake_limit:-} ]] && limit=${!fake_limit}
  if [[ -n $need && ${STATUS[$need]:-} != PASS ]]; then
    STATUS[$name]="NOT RUN"; NOTE[$name]="needs step $need, which is ${STATUS[$need]}"; return
  fi
  if (($(elapsed) + limit > BUDGET)); then
    STATUS[$name]="NOT RUN"
    NOTE[$name]="its ${limit}s limit from t+$(elapsed)s would end past the ${BUDGET}s budget"; return
  fi
  STATUS[$name]=RUNNING; NOTE[$name]="started at t+$(elapsed)s, limit ${limit}s (still RUNNING: the check was killed)"
  CURRENT=$name
  write_summary "INCOMPLETE: step $name is running"
  say "=== $name (limit ${limit}s, t+$(elapsed)s)"
  offset=$(stat -c %s "$LOG")
  # In the background and waited for, so that a SIGTERM to this script is handled at once.
  timeout -k 5 "$limit" setsid "$BASH" "$SELF" --step "$name" >> "$LOG" 2>&1 < /dev/null &
  wait $!
  rc=$?
  end_session "$name"
  CURRENT=""
  SECS[$name]=$((SECONDS - t0))
  if ((rc == 0)); then STATUS[$name]=PASS; NOTE[$name]=""
  elif ((rc == NOT_RUN)); then STATUS[$name]="NOT RUN"; NOTE[$name]=$(last_lines "$offset")
  elif ((rc == 124 || rc == 137)); then STATUS[$name]=FAIL; NOTE[$name]="(timed out after ${limit}s) $(last_lines "$offset")"
  else STATUS[$name]=FAIL; NOTE[$name]="(exit $rc) $(last_lines "$offset")"; fi
  tail -c +"$((offset + 1))" "$LOG" | tail -5
  say "--- $name: ${STATUS[$name]} in ${SECS[$name]}s"
}

# Stopped from outside (SIGTERM, Ctrl-C): the running step fails, the rest did not run.
stopped() {
  local name
  if [[ -n $CURRENT ]]; then
    end_session "$CURRENT"
    STATUS[$CURRENT]=FAIL; NOTE[$CURRENT]="stopped by $1 while running"; SECS[$CURRENT]=0
  fi
  for name in "${STEPS[@]}"; do
    [[ -z ${STATUS[$name]:-} ]] && STATUS[$name]="NOT RUN" && NOTE[$name]="the check was stopped by $1"
  done
  write_summary "STOPPED by $1: some steps did not pass"
  rm -rf "$WORK"
  exit 1
}
trap 'stopped SIGTERM' TERM
trap 'stopped SIGINT' INT
trap 'stopped SIGHUP' HUP

write_summary "INCOMPLETE: no step has run yet"
for name in "${STEPS[@]}"; do
  run_one "$name"
  write_summary "INCOMPLETE: $name finished, $(elapsed)s of ${BUDGET}s used"
done

passed=0
for name in "${STEPS[@]}"; do [[ ${STATUS[$name]} == PASS ]] && passed=$((passed + 1)); done
if ((passed == ${#STEPS[@]})); then
  verdict="every step passed (${passed} of ${#STEPS[@]}) in $(elapsed)s"
else
  verdict="SOME STEPS DID NOT PASS: ${passed} of ${#STEPS[@]} passed in $(elapsed)s"
fi
write_summary "$verdict"
rm -rf "$WORK"
echo
cat "$OUT/summary.txt"
[[ $passed -eq ${#STEPS[@]} ]]
