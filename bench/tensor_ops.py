#!/usr/bin/env python3
"""bench/tensor_ops: the tensor core next to PyTorch (the peer) on the same
machine in one run, same thread count, same OpenBLAS and OPENBLAS_CORETYPE.

    bench/tensor_ops.py [--threads 2] [--reps 15] [--rounds 3]

Prints one table: throughput of each row for both, and the ratio
trainrun / PyTorch (>= 1.0 means trainrun is at least as fast). Each round
times both, one after the other, with the median of --reps runs after a
warm-up; the table shows the median over rounds, so that drift in a shared
machine's speed hits both sides alike."""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
N16M = 1 << 24

# row -> (label, unit, work per run in that unit's base: flops or bytes)
ROWS = {
    "matmul": ("matmul 1024^3 f32", "GFLOP/s", 2 * 1024 ** 3),
    "add": ("add 16M f32 (out=)", "GB/s", 3 * 4 * N16M),
    "mul": ("mul 16M f32 (out=)", "GB/s", 3 * 4 * N16M),
    "broadcast_add": ("add 4096x4096 + 4096 (out=)", "GB/s", 2 * 4 * N16M),
    "sum": ("sum 16M f32", "GB/s", 4 * N16M),
    "softmax": ("softmax 4096x4096 f32", "GB/s", 2 * 4 * N16M),
    "layer_norm": ("layer_norm 4096x1024 f32", "GB/s", 2 * 4 * 4096 * 1024),
    "conv2d": ("conv2d 8x64x56x56, 64->64, 3x3 pad 1", "GFLOP/s", 2 * 8 * 64 * 64 * 9 * 56 * 56),
    "max_pool2d": ("max_pool2d 32x32x64x64, 2x2", "GB/s", 4 * (N16M // 4 + N16M // 16)),  # (reads + values out)
    "transpose": ("contiguous() of 4096x4096 .t()", "GB/s", 2 * 4 * N16M),
    "sum_middle": ("sum(dim=1) of 128x512x256 f32", "GB/s", 4 * N16M),
    "reverse_last": ("index_select(-1) reversed, 4.8M f32", "GB/s", 2 * 4 * 32 * 3 * 224 * 224),
    "to_half": ("float32 -> float16, 16M", "GB/s", (4 + 2) * N16M),
    "nonzero": ("nonzero of 4096x1024 bools (16% true)", "GB/s", 4096 * 1024),
}


def median_seconds(f, reps):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_peer(threads, reps):
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed (apt-get install python3-torch)"
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    r = {}
    x, y, out = torch.randn(N16M), torch.randn(N16M), torch.empty(N16M)
    r["add"] = median_seconds(lambda: torch.add(x, y, out=out), reps)
    r["mul"] = median_seconds(lambda: torch.mul(x, y, out=out), reps)
    m, row, mout = x.view(4096, 4096), torch.randn(4096), out.view(4096, 4096)
    r["broadcast_add"] = median_seconds(lambda: torch.add(m, row, out=mout), reps)
    r["sum"] = median_seconds(lambda: torch.sum(x), reps)
    r["softmax"] = median_seconds(lambda: torch.softmax(m, -1), reps)
    lx, w, bias = torch.randn(4096, 1024), torch.randn(1024), torch.randn(1024)
    r["layer_norm"] = median_seconds(lambda: torch.nn.functional.layer_norm(lx, (1024,), w, bias, 1e-5), reps)
    img, k = torch.randn(8, 64, 56, 56), torch.randn(64, 64, 3, 3)
    r["conv2d"] = median_seconds(lambda: torch.nn.functional.conv2d(img, k, padding=1), max(3, reps // 3))
    planes = torch.randn(32, 32, 64, 64)
    r["max_pool2d"] = median_seconds(lambda: torch.nn.functional.max_pool2d(planes, 2), reps)
    r["transpose"] = median_seconds(lambda: m.t().contiguous(), reps)
    cube = x.view(128, 512, 256)
    r["sum_middle"] = median_seconds(lambda: cube.sum(1), reps)
    images, backwards = torch.randn(32, 3, 224, 224), torch.arange(223, -1, -1)
    r["reverse_last"] = median_seconds(lambda: torch.index_select(images, 3, backwards), reps)
    r["to_half"] = median_seconds(lambda: x.to(torch.float16), reps)
    mask = torch.randn(4096, 1024) > 1
    r["nonzero"] = median_seconds(lambda: torch.nonzero(mask), reps)
    # Last, as in bench/tensor_ops.cc: BLAS threads spin after a call.
    a, b, c = torch.randn(1024, 1024), torch.randn(1024, 1024), torch.empty(1024, 1024)
    r["matmul"] = median_seconds(lambda: torch.mm(a, b, out=c), reps)
    return r, f"PyTorch {torch.__version__}"


def run_ours(threads, reps):
    binary = ROOT / "bazel-bin" / "bench" / "tensor_ops"
    if not binary.exists():
        subprocess.run(["bazel", "build", "//bench:tensor_ops"], cwd=ROOT, check=True)
    out = subprocess.run([str(binary), str(threads), str(reps)], check=True, capture_output=True, text=True).stdout
    return {k: float(v) for k, v in (line.split("\t") for line in out.strip().splitlines())}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    ours_rounds, peer_rounds = [], []
    for _ in range(args.rounds):
        ours_rounds.append(run_ours(args.threads, args.reps))
        peer_result, peer_name = run_peer(args.threads, args.reps)
        if peer_result:
            peer_rounds.append(peer_result)
    ours = {k: statistics.median(r[k] for r in ours_rounds) for k in ROWS}
    peer = {k: statistics.median(r[k] for r in peer_rounds) for k in ROWS} if peer_rounds else None
    print(f"tensor_ops: {args.threads} threads, median over {args.rounds} rounds of medians of {args.reps} runs, "
          f"OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']}, peer: {peer_name}")
    header = f"| {'op':38} | {'unit':7} | {'trainrun':>9} | {'PyTorch':>9} | {'ratio':>6} |"
    print(header)
    print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|")
    for key, (label, unit, work) in ROWS.items():
        mine = work / ours[key] / 1e9
        theirs = work / peer[key] / 1e9 if peer else float("nan")
        ratio = f"{mine / theirs:6.2f}" if peer else "   n/a"
        print(f"| {label:38} | {unit:7} | {mine:9.2f} | {theirs:9.2f} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
