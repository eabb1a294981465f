#!/usr/bin/python3
"""scripts/gpu_step_compare.py must fail when dpv's results differ from the reference: its
comparison function on made-up tensors, then whole runs on the CPU with --perturb (a known error
added to each of dpv's tensors): 1e-6 of the scale passes float32's bound (2e-4) but fails
float64's (1e-9), and 1e-3 fails both. Exit status 77 (skipped) without torch, as the other
PyTorch comparisons.

    /usr/bin/python3 tests/scripts/gpu_step_compare_test.py --dpv build/release/cli/dpv --work /tmp/w
"""
import argparse
import os
import subprocess
import sys

try:
    import torch
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "gpu_step_compare.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import gpu_step_compare  # noqa: E402

FAILURES = []


def expect(condition, what):
    print(("ok   " if condition else "FAIL ") + what)
    if not condition:
        FAILURES.append(what)


def check_compare():
    ref = {"w": torch.tensor([1.0, -2.0, 4.0], dtype=torch.float64), "n": torch.tensor([3, 1])}
    same = {n: t.clone() for n, t in ref.items()}
    errors = gpu_step_compare.compare(same, ref, 1e-9)
    expect(errors == {"w": 0.0, "n": 0.0}, f"identical tensors have no error: {errors}")
    off = gpu_step_compare.perturb({n: t.clone() for n, t in ref.items()}, 1e-3)
    errors = gpu_step_compare.compare(off, ref, 1e-9)
    expect(abs(errors["w"] - 1e-3) < 1e-12, f"--perturb 1e-3 is an error of 1e-3 of the scale: {errors['w']}")
    expect(errors["n"] == 0.0, "--perturb leaves integer tensors alone")
    expect(gpu_step_compare.compare({"n": ref["n"]}, ref, 1e-9)["w"] == "missing", "a missing tensor is reported")
    wrong_index = {"w": ref["w"], "n": torch.tensor([3, 2])}
    expect(gpu_step_compare.compare(wrong_index, ref, 1e-9)["n"] == "differs", "a different integer tensor")
    nan = {"w": torch.tensor([1.0, float("nan"), 4.0], dtype=torch.float64), "n": ref["n"]}
    expect(gpu_step_compare.compare(nan, ref, 1e-9)["w"] == "nan mismatch", "a NaN only on one side")


def run(a, *args):
    cmd = [sys.executable, SCRIPT, "--device", "cpu", "--dpv", a.dpv, "--work", a.work, "--timeout", "120", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    print(proc.stdout + proc.stderr)
    return proc


def row(proc, case):
    return [line for line in proc.stdout.splitlines() if line.startswith(case)]


def check_runs(a):
    proc = run(a, "--cases", "mlp-float32", "mlp-float64", "--perturb", "1e-6")
    expect(proc.returncode == 1, f"--perturb 1e-6 fails the float64 case (exit {proc.returncode})")
    expect(all(line.endswith("ok") for line in row(proc, "mlp-float32")) and len(row(proc, "mlp-float32")) == 3,
           "--perturb 1e-6 stays inside float32's bound")
    expect(all("MISMATCH" in line for line in row(proc, "mlp-float64")) and len(row(proc, "mlp-float64")) == 3,
           "--perturb 1e-6 is a MISMATCH in float64")
    proc = run(a, "--cases", "cnn-float32", "--ddp", "--perturb", "1e-3")
    expect(proc.returncode == 1 and "MISMATCH in some case" in proc.stdout,
           f"--ddp --perturb 1e-3 fails float32 (exit {proc.returncode})")
    proc = run(a, "--cases", "cnn-float32")
    expect(proc.returncode == 0 and "all 3 runs match" in proc.stdout, "unperturbed, the same case matches")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dpv", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    check_compare()
    check_runs(a)
    print(f"{len(FAILURES)} check(s) failed" if FAILURES else "gpu_step_compare.py: all checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
