#!/usr/bin/env python3
"""bench/train_step: one training step (forward + backward + AdamW) next to
PyTorch 1.13 eager on CPU, same threads, same OpenBLAS, in one run.

    bench/train_step.py [--threads 2] [--reps 20] [--rounds 3]

Rows: an MLP 784-1024-1024-10 (ReLU) at batch 64 with cross-entropy, and a
pre-norm transformer block (d_model 256, 4 heads, causal attention, 4x GELU
MLP) at batch 8, sequence 128, with MSE. Each round times both
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


def median_step_seconds(step, reps):
    for _ in range(3):
        step()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def torch_rows(threads, reps):
    import torch

    class Block(torch.nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln_1, self.ln_2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
            self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d))

        def attention(self, x):
            b, t, c = x.shape
            hd = c // self.heads
            q, k, v = (z.view(b, t, self.heads, hd).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
            scores = (q @ k.transpose(-2, -1)) / hd ** 0.5
            causal = torch.ones(t, t, dtype=torch.bool).tril()
            y = scores.masked_fill(~causal, float("-inf")).softmax(-1) @ v
            return self.proj(y.transpose(1, 2).reshape(b, t, c))

        def forward(self, x):
            x = x + self.attention(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    rows = {}
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.AdamW(mlp.parameters(), weight_decay=0.01)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))

    def mlp_step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(mlp(x), y).backward()
        opt.step()

    rows["mlp"] = median_step_seconds(mlp_step, reps)
    block = Block(256, 4)
    block_opt = torch.optim.AdamW(block.parameters(), weight_decay=0.01)
    xb, target = torch.randn(8, 128, 256), torch.randn(8, 128, 256)

    def block_step():
        block_opt.zero_grad()
        torch.nn.functional.mse_loss(block(xb), target).backward()
        block_opt.step()

    rows["block"] = median_step_seconds(block_step, max(3, reps // 2))
    return rows, torch.__version__


ROWS = {"mlp": "MLP 784-1024-1024-10, batch 64, AdamW", "block": "block d256 h4, seq 128, batch 8, AdamW"}


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
        ours.append({k: float(v) for k, v in (line.split("\t") for line in out.strip().splitlines())})
        if have_torch:
            rows, version = torch_rows(args.threads, args.reps)
            theirs.append(rows)
    print(f"train_step: {args.threads} threads, median over {args.rounds} rounds of median step times, "
          f"OPENBLAS_CORETYPE={os.environ['OPENBLAS_CORETYPE']}, peer: PyTorch {version}")
    print(f"| {'row':40} | trainrun ms | PyTorch ms | ratio |")
    print(f"|{'-' * 42}|-------------|------------|-------|")
    for key, label in ROWS.items():
        mine = statistics.median(r[key] for r in ours)
        if theirs:
            peer = statistics.median(r[key] for r in theirs)
            print(f"| {label:40} | {mine * 1e3:11.2f} | {peer * 1e3:10.2f} | {peer / mine:5.2f} |")
        else:
            print(f"| {label:40} | {mine * 1e3:11.2f} |        n/a |   n/a |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
