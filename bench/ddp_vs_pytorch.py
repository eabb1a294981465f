#!/usr/bin/python3
"""DDP step: dpv's DistributedDataParallel (in-process ranks, `dpv bench`) next to PyTorch's own
DistributedDataParallel over Gloo with the same number of processes, in the same run. A benchmark:
figures and ratios, no pass/fail.

Usage: /usr/bin/python3 bench/ddp_vs_pytorch.py --dpv build/release/cli/dpv [--ranks 2 4]
       [--models simple mnist-mlp mlp-large cnn] [--iters 20] [--rounds 3]
Both sides train the presets of bench/pytorch_step.py on the same GLOBAL batch, each rank on its
DistributedSampler shard (x[rank::W]), SGD(lr=0.01), one thread per rank; PyTorch's step time is
the slowest rank's mean over --iters steps after a barrier (dpv's: the best of `dpv bench`'s three
sub-rounds). dpv and PyTorch alternate --rounds times and the MEDIAN round of each is printed, so
that one lucky or unlucky round on a shared machine does not decide the ratio; every round is in
the --json output. dpv's DataParallel step on the same devices is printed too. The large MLP runs
a quarter of --iters (at least 4): its step is 30-100x the others'.
"""
import argparse
import json
import os
import statistics
import socket
import subprocess
import sys
import tempfile
import time

# One OpenBLAS / OpenMP thread per rank, as dpv runs one thread per simulated device; set before
# torch loads OpenBLAS (the spawned ranks inherit it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_rank(rank, world, port, model_name, iters, warmup, out_path):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from pytorch_step import MODELS
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    build, batch, shape, classes = MODELS[model_name]
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(build())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, *shape, generator=g)[rank::world].contiguous()  # DistributedSampler's shard
    y = torch.randint(0, classes, (batch,), generator=g)[rank::world].contiguous()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()

    for _ in range(max(warmup, 2)):  # the second iteration rebuilds the buckets
        step()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        step()
    t = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"ms_per_step": t.item() * 1e3}, f)
    dist.destroy_process_group()


def run_torch(world, model, args, out_path, attempts=3, seconds=60):
    # PyTorch 1.13's spawned Gloo ranks now and then never finish (one rank exits, the other waits in
    # a collective for ever): stop them after `seconds` and start again, so one bad start does not
    # hang the whole benchmark.
    import torch.multiprocessing as mp
    for attempt in range(1, attempts + 1):
        if os.path.exists(out_path):
            os.remove(out_path)
        context = mp.spawn(torch_rank, args=(world, free_port(), model, args.iters, args.warmup, out_path),
                           nprocs=world, join=False)
        deadline = time.monotonic() + seconds
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                for process in context.processes:
                    if process.is_alive():
                        process.kill()
                print(f"  (PyTorch DDP, {model} on {world} ranks: no result after {seconds} s, "
                      f"attempt {attempt} of {attempts}; started again)", file=sys.stderr, flush=True)
                break
        if os.path.exists(out_path):
            with open(out_path) as f:
                return json.load(f)["ms_per_step"]
    raise RuntimeError(f"PyTorch DDP ({model}, {world} ranks) gave no result in {attempts} attempts")


def run_dpv(world, model, args, out_path):
    cmd = [args.dpv, "bench", "--devices", f"cpu:{world}", "--models", model, "--iters", str(args.iters),
           "--warmup", str(args.warmup), "--stage-iters", "0", "--json", out_path]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out_path) as f:
        j = json.load(f)
    ddp = next(r["ms_per_step"] for r in j["ddp"] if r["model"] == model)
    dp = next(r["ms_per_step"] for r in j["results"] if r["model"] == model)
    return ddp, dp


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dpv", required=True)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--models", nargs="+", default=["simple", "mnist-mlp", "mlp-large", "cnn"])
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3, help="alternate dpv and PyTorch this many times; median of each")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed for this python (use /usr/bin/python3)")
        return 77
    import torch
    print(f"DDP step, dpv (in-process ranks) against PyTorch {torch.__version__} DDP over Gloo "
          f"(processes on 127.0.0.1), median of {args.rounds} alternating rounds; load {os.getloadavg()[0]:.1f}")
    print(f"{'model':10s} {'ranks':>5s} {'dpv DDP ms':>10s} {'torch DDP':>10s} {'dpv/torch speed':>15s} "
          f"{'dpv DP ms':>10s} {'DDP vs DP':>9s}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models:
            for world in args.ranks:
                iters = max(4, args.iters // 4) if model == "mlp-large" else args.iters
                run_args = argparse.Namespace(**{**vars(args), "iters": iters})
                rounds = {"dpv_ddp": [], "dpv_dp": [], "torch_ddp": []}
                for _ in range(args.rounds):
                    ddp, dp = run_dpv(world, model, run_args, os.path.join(tmp, "dpv.json"))
                    t = run_torch(world, model, run_args, os.path.join(tmp, "torch.json"))
                    rounds["dpv_ddp"].append(ddp)
                    rounds["dpv_dp"].append(dp)
                    rounds["torch_ddp"].append(t)
                r = {"model": model, "ranks": world, "iters": iters,
                     **{k + "_ms": statistics.median(v) for k, v in rounds.items()},
                     "rounds_ms": rounds, "load": os.getloadavg()[0]}
                rows.append(r)
                print(f"{r['model']:10s} {r['ranks']:5d} {r['dpv_ddp_ms']:10.3f} {r['torch_ddp_ms']:10.3f} "
                      f"{r['torch_ddp_ms'] / r['dpv_ddp_ms']:14.2f}x {r['dpv_dp_ms']:10.3f} "
                      f"{r['dpv_dp_ms'] / r['dpv_ddp_ms']:8.2f}x", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
