#!/usr/bin/env python3
"""bench/ddp: DistributedDataParallel step time on 2 processes next to
PyTorch 1.13's, plus each one's single-process step time, in one run.

    bench/ddp.py [--steps 30] [--rounds 3]

The model is the MLP 784-1024-1024-10 at batch 64 per rank, one step being
forward + backward + AdamW, one thread per process (2 ranks on 2 cores).
Each cell is the median over rounds of rank 0's median step time; rounds
alternate between the two sides. Overhead = DDP step / single-process step."""
import argparse
import pathlib
import statistics
import sys
import textwrap

from rank_processes import rank0_output

ROOT = pathlib.Path(__file__).resolve().parent.parent
RANK_BINARY = ROOT / "bazel-bin" / "bench" / "ddp_rank"
PYTHON = "/usr/bin/python3"

TORCH_RANK = textwrap.dedent("""
    import os, sys, time, statistics, torch, torch.distributed as dist
    steps = int(sys.argv[1])
    torch.set_num_threads(1)
    torch.manual_seed(0)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    net = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024),
                              torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    model, rank = net, 0
    if distributed:
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.AdamW(model.parameters(), weight_decay=0.01)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    t = []
    for s in range(steps + 3):
        t0 = time.perf_counter()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if s >= 3:
            t.append(time.perf_counter() - t0)
    if rank == 0:
        print(f"{statistics.median(t):.9f}", flush=True)
    if distributed:
        dist.destroy_process_group()
""")


def run(command, world):
    """Rank 0's median step time in seconds, one thread per process."""
    return float(rank0_output(command, world, {"OMP_NUM_THREADS": "1"}, timeout=600).strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not RANK_BINARY.exists():
        sys.exit(f"{RANK_BINARY} is missing: run scripts/bazel.sh build //bench:ddp_rank")
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    cells = {k: [] for k in ("ours1", "ours2", "torch1", "torch2")}
    ours = [str(RANK_BINARY), str(args.steps)]
    theirs = [PYTHON, "-c", TORCH_RANK, str(args.steps)]
    for _ in range(args.rounds):
        cells["ours1"].append(run(ours, 1))
        cells["ours2"].append(run(ours, 2))
        if have_torch:
            cells["torch1"].append(run(theirs, 1))
            cells["torch2"].append(run(theirs, 2))
    med = {k: statistics.median(v) * 1e3 for k, v in cells.items() if v}
    print(f"ddp: MLP 784-1024-1024-10, batch 64 per rank, AdamW, 1 thread per process; median of {args.rounds} "
          f"rounds of median step times (ms)")
    print("| | single process ms | DDP 2 ranks ms | DDP overhead |")
    print("|---|---|---|---|")
    print(f"| trainrun | {med['ours1']:.2f} | {med['ours2']:.2f} | {med['ours2'] / med['ours1']:.2f}x |")
    if have_torch:
        print(f"| PyTorch 1.13 | {med['torch1']:.2f} | {med['torch2']:.2f} | {med['torch2'] / med['torch1']:.2f}x |")
        print(f"\nDDP step: trainrun takes {med['ours2'] / med['torch2']:.2f} of PyTorch's time")


if __name__ == "__main__":
    main()
