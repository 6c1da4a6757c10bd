#!/usr/bin/env python3
"""bench/fsdp: one training step (forward, backward, Adam) of 4 x Linear(1024) with batch 64 per rank on 2
ranks: trainrun's fully_shard next to its DDP, and PyTorch 2.6's FSDP2 (no-reshard: its ZeRO-3 fails on CPU,
see the peer's README) and DDP in the peer chroot, in one run. The same rank script serves both
(bench/fsdp_rank.py). Cells: median step time in ms over --rounds runs (rounds alternate sides).

    bench/fsdp.py [--rounds 3]"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"


def run(side, mode):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    if side == "trainrun":
        cmd = [str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", "2",
               str(ROOT / "bench" / "fsdp_rank.py"), mode, "trainrun"]
    else:  # under `timeout`: torchrun in the chroot then returns when started from Python
        cmd = ["timeout", "280", str(PEER / "enter.sh"), "torchrun", "--nproc-per-node", "2",
               "/peer/bench/fsdp_rank.py", mode, "torch"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    m = re.search(r"RESULT step_ms (\S+)", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"{side} {mode} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return float(m.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sides = ["trainrun"] + (["torch"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists() else [])
    cells = {}
    for _ in range(args.rounds):
        for mode in ("ddp", "fsdp"):
            for side in sides:
                cells.setdefault((mode, side), []).append(run(side, mode))
    print(f"{'step (ms), 2 ranks':28} {'trainrun':>10} {'torch 2.6':>10} {'torch/trainrun':>15}")
    print("-" * 66)
    for mode, label in (("ddp", "DDP"), ("fsdp", "FSDP2 fully_shard")):
        ours = statistics.median(cells[(mode, "trainrun")])
        if "torch" in sides:
            theirs = statistics.median(cells[(mode, "torch")])
            print(f"{label:28} {ours:10.1f} {theirs:10.1f} {theirs / ours:15.2f}")
        else:
            print(f"{label:28} {ours:10.1f}")


if __name__ == "__main__":
    main()
