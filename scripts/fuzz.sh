#!/usr/bin/env bash
# Coverage-guided fuzzing of every parser (tests/fuzz: safetensors with a round trip, IDX, model
# JSON, quiz, progress, lessons, Chrome traces read and merged, the store's wire format) under
# AddressSanitizer and UndefinedBehaviorSanitizer.
#   scripts/fuzz.sh            a short run: 5 seconds per harness (what scripts/test.sh runs)
#   scripts/fuzz.sh 60         CI's run (.ci/run sets DPV_FUZZ_SECONDS=60 for scripts/test.sh)
#   scripts/fuzz.sh 600        a long run: 10 minutes per harness
#   scripts/fuzz.sh 60 quiz    one harness
# DPV_JOBS harnesses (default: the number of cores) run at once, each for the given seconds, so
# the run takes about ceil(harnesses / DPV_JOBS) * seconds after the build; a harness still
# running a minute past its time is stopped and counts as failed, so no run takes longer.
# Each harness starts from its committed seeds (tests/fuzz/corpus/<name>, never written to); what
# it finds new goes to build/fuzz/corpus/<name>, kept between runs. A crash, leak, sanitizer report,
# allocation over 512 MB or input slower than 10 s stops that harness, saves the input under
# build/fuzz/artifacts/ and makes the script fail. At the end a table gives each harness's
# executions, coverage (edges, features) and corpus size, so a reader sees it really fuzzed.
# Exits 77 when clang or libFuzzer is missing (scripts/install_deps.sh installs clang and
# libclang-rt-14-dev).
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

# One harness for `seconds`, its output in build/fuzz/<name>.log and its exit status in
# build/fuzz/<name>.status (124: stopped by the guard a minute past its time).
run_harness() {
  local name=$1 seeds=$2 harness=$3 status=0
  local work="build/fuzz/corpus/$name"
  mkdir -p "$work"
  timeout --kill-after=10 "$((seconds + 60))" "$harness" "$work" "$seeds" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb=512 -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="build/fuzz/artifacts/${name}-" >"build/fuzz/${name}.log" 2>&1 || status=$?
  echo "$status" >"build/fuzz/${name}.status"
}

names=()
failed=()
running=0
for seeds in tests/fuzz/corpus/*/; do
  name="$(basename "$seeds")"
  [ -n "$only" ] && [ "$name" != "$only" ] && continue
  harness="build/fuzz/tests/fuzz/${name}_fuzz"
  [ -x "$harness" ] || { echo "fuzz: no harness for corpus '$name'"; failed+=("$name"); continue; }
  names+=("$name")
  echo "== fuzz: $name for ${seconds}s"
  rm -f "build/fuzz/${name}.status"
  run_harness "$name" "$seeds" "$harness" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
if [ -n "$only" ] && [ ${#names[@]} -eq 0 ] && [ ${#failed[@]} -eq 0 ]; then
  echo "fuzz: no corpus named '$only' (tests/fuzz/corpus/*)"
  exit 1
fi

# The last status line of a libFuzzer log: "#1234567 DONE cov: 812 ft: 3301 corp: 190/1020Kb ...".
field() { sed -n "s/.* $1: *\([^ ]*\).*/\1/p" <<<"$2"; }
printf '%-14s %12s %8s %8s %10s  %s\n' harness executions cov ft corpus result
for name in "${names[@]}"; do
  status="$(cat "build/fuzz/${name}.status" 2>/dev/null || echo missing)"
  last="$(grep -E '^#[0-9]+' "build/fuzz/${name}.log" | tail -n 1 || true)"
  execs="$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")"
  result=clean
  if [ "$status" != 0 ]; then
    result="FAILED (exit $status)"
    failed+=("$name")
  fi
  printf '%-14s %12s %8s %8s %10s  %s\n' "$name" "${execs:-?}" "$(field cov "$last")" "$(field ft "$last")" \
    "$(field corp "$last")" "$result"
done
for name in "${failed[@]}"; do
  [ -f "build/fuzz/${name}.log" ] || continue
  echo "== fuzz: $name failed; the end of build/fuzz/${name}.log:"
  tail -n 40 "build/fuzz/${name}.log"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]} (inputs in build/fuzz/artifacts/; logs in build/fuzz/<name>.log)"
  exit 1
fi
echo "fuzz: every harness ran ${seconds}s clean"
