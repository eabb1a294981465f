#!/usr/bin/python3
"""Gloo all-reduce busbw: `dpv launch -- bench allreduce` next to torch.distributed.all_reduce over
Gloo, on this machine, in the same run, with 2 and 4 processes, 4 KiB .. 64 MiB. Prints both and
the ratio dpv / PyTorch per size. A benchmark: figures, no pass/fail.

Usage: /usr/bin/python3 bench/allreduce_vs_pytorch.py --dpv build/release/cli/dpv [--ranks 2 4]
Both sides measure the same way: per size a checked call, warm-up calls, a barrier, then the mean
of N calls, the slowest rank's time counting; busbw = bytes / time * 2(W-1)/W.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sizes(min_bytes, max_bytes, factor):
    b = min_bytes
    while b <= max_bytes:
        yield b
        b *= factor


def torch_worker(rank, world, port, args, out_path):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    rows = []
    for b in sizes(args.min_bytes, args.max_bytes, args.factor):
        n = max(1, b // 4)
        buf = torch.full((n,), float(rank + 1), dtype=torch.float32)
        dist.all_reduce(buf)
        assert buf[0].item() == world * (world + 1) / 2
        for _ in range(args.warmup):
            dist.all_reduce(buf)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(one, op=dist.ReduceOp.MAX)
        iters = max(1, min(args.iters, int(args.max_seconds_per_size / max(one.item(), 1e-9))))
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(buf)
        t = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        seconds = t.item()
        algbw = n * 4 / seconds / 1e9
        rows.append({"bytes": n * 4, "iters": iters, "seconds": seconds, "algbw_GBps": algbw,
                     "busbw_GBps": algbw * 2 * (world - 1) / world})
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump({"results": rows}, f)
    dist.destroy_process_group()


def run_torch(world, args, out_path):
    import torch.multiprocessing as mp
    mp.spawn(torch_worker, args=(world, free_port(), args, out_path), nprocs=world, join=True)
    with open(out_path) as f:
        return json.load(f)["results"]


def run_dpv(world, args, out_path):
    cmd = [args.dpv, "launch", "--nproc-per-node", str(world), "--master-port", str(free_port()), "--",
           "bench", "allreduce", "--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
           "--factor", str(args.factor), "--iters", str(args.iters), "--warmup", str(args.warmup),
           "--json", out_path]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out_path) as f:
        return json.load(f)["results"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dpv", required=True)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("--min-bytes", type=int, default=4096)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--max-seconds-per-size", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=2, help="alternate dpv and PyTorch this many times; best of each")
    args = p.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed for this python (use /usr/bin/python3)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        for world in args.ranks:
            best_dpv, best_torch = None, None
            for _ in range(args.rounds):  # alternate, so both see the same machine load
                d = run_dpv(world, args, os.path.join(tmp, "dpv.json"))
                t = run_torch(world, args, os.path.join(tmp, "torch.json"))
                best_dpv = d if best_dpv is None else [max(a, b, key=lambda r: r["busbw_GBps"]) for a, b in zip(best_dpv, d)]
                best_torch = t if best_torch is None else [max(a, b, key=lambda r: r["busbw_GBps"]) for a, b in zip(best_torch, t)]
            print(f"\nall_reduce over Gloo, {world} processes on 127.0.0.1 (best of {args.rounds} rounds)")
            print(f"{'bytes':>10} {'dpv us':>10} {'torch us':>10} {'dpv busbw':>10} {'torch busbw':>11} {'ratio':>6}")
            for d, t in zip(best_dpv, best_torch):
                print(f"{d['bytes']:>10} {d['seconds'] * 1e6:>10.1f} {t['seconds'] * 1e6:>10.1f} "
                      f"{d['busbw_GBps']:>10.3f} {t['busbw_GBps']:>11.3f} {d['busbw_GBps'] / t['busbw_GBps']:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
