#!/usr/bin/env bash
# scripts/gpu_check.sh's bookkeeping, on any machine: its fake mode (DPV_GPU_CHECK_FAKE=1) runs a
# given shell text instead of each step's commands and keeps everything else (budget, time limits,
# dependencies, the summary, signals). Checks: every step passing says "every step passed" and
# exits 0; a failing step is FAIL with its exit status and last lines; the summary is rewritten
# before and after every step (a step reads it while it runs; a SIGKILL mid-step leaves it saying
# RUNNING and INCOMPLETE); a step past its own limit is FAIL (timed out); a budget too small for a
# step marks it and what needs it NOT RUN, exits non-zero and never says "every step passed";
# SIGTERM fails the running step and ends its processes; at most 8 files land in $OUT.
#   bash tests/scripts/gpu_check_test.sh REPO_ROOT
set -uo pipefail
ROOT=${1:?usage: gpu_check_test.sh REPO_ROOT}
CHECK=$ROOT/scripts/gpu_check.sh
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
export TMPDIR=$TMP DPV_GPU_CHECK_FAKE=1 DPV_GPU_BUILD=$TMP/build
FAILURES=0
fail() { echo "FAIL: $*"; FAILURES=$((FAILURES + 1)); }
# A fake step's text that prints the pid of gpu_check.sh itself (the step runs under `timeout`).
# shellcheck disable=SC2016  # expanded by the fake step, not here
CHECK_PID='read -r l < /proc/$PPID/stat; f=(${l##*) }); echo ${f[1]}'

# run_check NAME [VAR=VALUE...]: runs the check with $OUT = $TMP/NAME and the given fake steps;
# sets RC, SUMMARY (the summary's text) and OUTPUT (what it printed).
run_check() {
  local name=$1
  shift
  mkdir -p "$TMP/$name"
  OUTPUT=$(env OUT="$TMP/$name" "$@" bash "$CHECK" 2>&1)
  RC=$?
  SUMMARY=$(cat "$TMP/$name/summary.txt" 2>/dev/null)
}
line_of() { grep -E "^$1 " <<<"$SUMMARY"; }
expect_line() {  # expect_line CASE STEP REGEX
  line_of "$2" | grep -Eq -- "$3" || fail "$1: the summary's $2 line does not match '$3': $(line_of "$2")"
}
expect_no_pass_verdict() {
  grep -q "every step passed" <<<"$SUMMARY$OUTPUT" && fail "$1: says 'every step passed'"
  ((RC != 0)) || fail "$1: exit status 0"
}

# 1. Every step passes; the steps write the JSON files a real run writes.
run_check pass "DPV_FAKE_compare_dp=echo '{}' > \"\$OUT/step_compare.json\"; echo '{}' > \"\$OUT/ddp_compare.json\"" \
  "DPV_FAKE_nccl_one_rank=echo '{}' > \"\$OUT/nccl_compare.json\"" \
  "DPV_FAKE_bench_allreduce=echo '{}' > \"\$OUT/bench_allreduce.json\"" "DPV_FAKE_bench=echo '{}' > \"\$OUT/bench.json\""
((RC == 0)) || fail "pass: exit status $RC: $OUTPUT"
grep -q "^every step passed (10 of 10)" <<<"$SUMMARY" || fail "pass: no 'every step passed (10 of 10)': $SUMMARY"
[[ $(grep -c ' PASS ' <<<"$SUMMARY") -eq 10 ]] || fail "pass: not 10 PASS lines: $SUMMARY"
count=$(find "$TMP/pass" -type f | wc -l)
((count <= 8)) || fail "pass: $count files under \$OUT (at most 8): $(ls -A "$TMP/pass")"
((count == 7)) || fail "pass: expected the summary, the log and 5 JSON files, found $(ls -A "$TMP/pass")"

# 2. A failing step: FAIL with its exit status and last lines; the others still run.
run_check failing "DPV_FAKE_parity=echo first; echo second; echo the kernel broke; exit 3"
expect_line failing parity 'FAIL .*\(exit 3\) .*second \| the kernel broke'
expect_line failing compare_dp 'PASS'
expect_no_pass_verdict failing
grep -q "^SOME STEPS DID NOT PASS: 9 of 10" <<<"$SUMMARY" || fail "failing: verdict: $SUMMARY"

# 3. A step that cannot run here (exit 77) is NOT RUN with its reason, never PASS.
run_check notrun "DPV_FAKE_memcheck=echo 'compute-sanitizer not found'; exit 77"
expect_line notrun memcheck 'NOT RUN .*compute-sanitizer not found'
expect_no_pass_verdict notrun

# 4. The summary while a step runs: the steps before it done, it RUNNING, the verdict INCOMPLETE.
run_check during "DPV_FAKE_compare_ddp=cp \"\$OUT/summary.txt\" \"$TMP/during.txt\""
SUMMARY=$(cat "$TMP/during.txt")
expect_line during compare_dp 'PASS'
expect_line during compare_ddp 'RUNNING .*started at t\+'
expect_line during bench 'PENDING'
grep -q "^INCOMPLETE: step compare_ddp is running" <<<"$SUMMARY" || fail "during: verdict: $SUMMARY"

# 5. gpu_check.sh killed (SIGKILL, no trap runs) during a step: the summary still tells the truth.
run_check killed "DPV_FAKE_nccl_one_rank=kill -KILL \$($CHECK_PID)"
((RC == 137)) || fail "killed: exit status $RC, not 137 (SIGKILL)"
expect_line killed compare_ddp 'PASS'
expect_line killed nccl_one_rank 'RUNNING'
grep -q "^INCOMPLETE" <<<"$SUMMARY" || fail "killed: verdict: $SUMMARY"
expect_no_pass_verdict killed

# 6. A step past its own limit is stopped and FAIL (timed out); the check goes on.
run_check timeout "DPV_FAKE_LIMIT_parity=3" "DPV_FAKE_parity=echo hanging; exec sleep 60"
expect_line timeout parity 'FAIL .*timed out after 3s.*hanging'
expect_line timeout compare_dp 'PASS'
expect_no_pass_verdict timeout

# 7. The budget: the build's 270 s limit does not fit 100 s, so it and every step needing it are
# NOT RUN, and the check fails without starting them.
run_check budget DPV_GPU_CHECK_SECONDS=100 "DPV_FAKE_build=echo built > \"$TMP/built\""
expect_line budget probe 'PASS'
expect_line budget build 'NOT RUN .*270s limit .* past the 100s budget'
expect_line budget parity 'NOT RUN .*needs step build, which is NOT RUN'
expect_line budget bench 'NOT RUN'
[[ -e $TMP/built ]] && fail "budget: the build step ran although its limit crossed the budget"
expect_no_pass_verdict budget

# 8. SIGTERM to gpu_check.sh during a step: that step FAIL, its processes ended, the rest NOT RUN.
run_check term "DPV_FAKE_compare_dp=echo \$\$ > \"$TMP/step.pid\"; kill -TERM \$($CHECK_PID); exec sleep 60"
expect_line term compare_dp 'FAIL .*stopped by SIGTERM'
expect_line term bench 'NOT RUN .*stopped by SIGTERM'
expect_no_pass_verdict term
step_pid=$(cat "$TMP/step.pid" 2>/dev/null)
[[ -n $step_pid ]] && kill -0 "$step_pid" 2>/dev/null && { fail "term: the step's process $step_pid survived"; kill -KILL "$step_pid"; }

if ((FAILURES)); then echo "$FAILURES check(s) failed"; exit 1; fi
echo "gpu_check.sh: all checks passed"
