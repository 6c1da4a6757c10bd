#!/usr/bin/env python3
"""bench/train_step: one training step (forward + backward + AdamW) next to
PyTorch 1.13 eager on CPU, same threads, same OpenBLAS, in one run.

    bench/train_step.py [--threads 2] [--reps 20] [--rounds 3]

Rows: an MLP 784-1024-1024-10 (ReLU) at batch 64 with cross-entropy. The
transformer-block row waits for the attention module. Each round times both
sides one after the other; the table shows the median over rounds of the
median step time, and the ratio of throughputs (>= 1.0: trainrun is at least
as fast)."""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINARY = ROOT / "bazel-bin" / "bench" / "train_step"


def torch_mlp(threads, reps):
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.AdamW(net.parameters(), weight_decay=0.01)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()

    for _ in range(3):
        step()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times), torch.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    if not BINARY.exists():
        subprocess.run(["bazel", "build", "//bench:train_step"], cwd=ROOT, check=True)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    ours, theirs, version = [], [], "not installed"
    for _ in range(args.rounds):
        out = subprocess.run([str(BINARY), str(args.threads), str(args.reps)], check=True, capture_output=True,
                             text=True).stdout
        ours.append(float(out.split()[1]))
        if have_torch:
            t, version = torch_mlp(args.threads, args.reps)
            theirs.append(t)
    mine = statistics.median(ours)
    print(f"train_step: {args.threads} threads, median over {args.rounds} rounds of medians of {args.reps} steps, "
          f"OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']}, peer: PyTorch {version}")
    print("| row                                        | trainrun ms | PyTorch ms | ratio |")
    print("|--------------------------------------------|-------------|------------|-------|")
    if theirs:
        peer = statistics.median(theirs)
        print(f"| MLP 784-1024-1024-10, batch 64, AdamW      | {mine * 1e3:11.2f} | {peer * 1e3:10.2f} | {peer / mine:5.2f} |")
    else:
        print(f"| MLP 784-1024-1024-10, batch 64, AdamW      | {mine * 1e3:11.2f} |        n/a |   n/a |")
    print("| transformer block d256 h4 seq128 batch 8   |         n/a |        n/a |   n/a |  (no attention module yet)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
