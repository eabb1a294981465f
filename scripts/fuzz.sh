#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser (tests/fuzz: safetensors with a round trip, IDX, model
# JSON, quiz, progress, lessons, Chrome traces) under AddressSanitizer and UndefinedBehaviorSanitizer.
#   scripts/fuzz.sh            a short run: 5 seconds per harness (what scripts/test.sh runs)
#   scripts/fuzz.sh 600        a long run: 10 minutes per harness
#   scripts/fuzz.sh 60 quiz    one harness
# Each harness starts from its committed seeds (tests/fuzz/corpus/<name>, never written to); what
# it finds new goes to build/fuzz/corpus/<name>, kept between runs. A crash, leak, sanitizer report,
# allocation over 512 MB or input slower than 10 s stops that harness, saves the input under
# build/fuzz/artifacts/ and makes the script fail. Exits 77 when clang or libFuzzer is missing
# (scripts/install_deps.sh installs clang and libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-5}"
only="${2:-}"
jobs="${DPV_JOBS:-$(nproc)}"

if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ is not installed; skipped (scripts/install_deps.sh installs it)"
  exit 77
fi
probe="$(mktemp -d)"
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/probe.cpp"
if ! clang++ -fsanitize=fuzzer "$probe/probe.cpp" -o "$probe/probe" 2>/dev/null; then
  echo "fuzz: clang++ has no libFuzzer (Debian: libclang-rt-14-dev); skipped"
  exit 77
fi

echo "== fuzz: building the harnesses (clang, ASan + UBSan)"
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs" --target dpv_fuzzers

export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
mkdir -p build/fuzz/artifacts
failed=()
for seeds in tests/fuzz/corpus/*/; do
  name="$(basename "$seeds")"
  [ -n "$only" ] && [ "$name" != "$only" ] && continue
  harness="build/fuzz/tests/fuzz/${name}_fuzz"
  [ -x "$harness" ] || { echo "fuzz: no harness for corpus '$name'"; failed+=("$name"); continue; }
  work="build/fuzz/corpus/$name"
  mkdir -p "$work"
  echo "== fuzz: $name for ${seconds}s"
  if ! "$harness" "$work" "$seeds" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=512 -max_len=65536 -print_final_stats=0 \
      -artifact_prefix="build/fuzz/artifacts/${name}-" >"build/fuzz/${name}.log" 2>&1; then
    tail -n 40 "build/fuzz/${name}.log"
    failed+=("$name")
  else
    grep -E '^Done|^#[0-9]+ *DONE' "build/fuzz/${name}.log" | tail -n 1 || true
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in build/fuzz/artifacts/; logs in build/fuzz/<name>.log)"
  exit 1
fi
echo "fuzz: every harness ran ${seconds}s clean"
