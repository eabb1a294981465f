#!/usr/bin/env bash
# The README's second command: install what is missing, build, and run the whole test suite:
# every GoogleTest suite through ctest (GUI tests offscreen, GPU tests skip without a GPU, the
# PyTorch comparison where python3-torch is installed), then the engine tests under ASan+UBSan,
# the collectives and DataParallel tests under TSan, then every parser under libFuzzer for
# DPV_FUZZ_SECONDS per harness (default 5; CI's .ci/run sets 60) (scripts/fuzz.sh; skipped when
# clang is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/stage.sh
export QT_QPA_PLATFORM=offscreen
jobs="${DPV_JOBS:-$(nproc)}"
stage "installing the Debian packages dpviz needs (only those missing)"
bash scripts/install_deps.sh test
stage "building everything (build/release)"
bash scripts/build.sh

stage "ctest (release)"
ctest --preset release -j "$jobs" | tee build/release/ctest-summary.log

stage "engine tests under AddressSanitizer + UndefinedBehaviorSanitizer"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs" --target dpv_engine_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  build/asan/tests/dpv_engine_tests --gtest_brief=1

stage "collectives, DataParallel, the in-process group and DDP under ThreadSanitizer"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j "$jobs" --target dpv_engine_tests
TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/scripts/tsan_suppressions.txt" build/tsan/tests/dpv_engine_tests --gtest_brief=1 \
  --gtest_filter='HostCollectives*:DataParallel*:SyncBatchNorm*:InProcessGroup*:RingExecutor*:*Ddp*:FakeGpu*'

stage "every parser under libFuzzer (ASan + UBSan), ${DPV_FUZZ_SECONDS:-5} s each"
fuzz_status=0
bash scripts/fuzz.sh "${DPV_FUZZ_SECONDS:-5}" || fuzz_status=$?
if [ "$fuzz_status" -eq 77 ]; then
  echo "fuzz: skipped (no clang/libFuzzer)"
elif [ "$fuzz_status" -ne 0 ]; then
  exit "$fuzz_status"
fi

total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' build/release/ctest-summary.log | tail -n 1)
skipped=$(grep -c '\*\*\*Skipped' build/release/ctest-summary.log || true)
echo "dpviz: all test stages passed (ctest: ${total:-?} tests, ${skipped} skipped without a GPU; sanitizer runs clean)"
summary="$(( ${total:-0} - skipped )) passed, 0 failed, ${skipped} skipped"
echo "$summary" >build/test-summary.txt
stage "all test stages passed"
echo "$summary"
