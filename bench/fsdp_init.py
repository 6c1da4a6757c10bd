#!/usr/bin/env python3
"""bench/fsdp_init: making a 256 MiB model ready for FSDP2 on 2 ranks, built in memory then sharded ("eager")
or built on the meta device, sharded, then materialised and initialised shard by shard ("meta"), trainrun
next to PyTorch 2.6 in the peer chroot, in one run (bench/fsdp_init_rank.py serves both). Cells: median time
(ms) and rank 0's peak resident memory growth (MiB) over --rounds runs, and whether the gathered weights
equal those one process makes from the same seed.

    bench/fsdp_init.py [--rounds 3] [--ranks 2]"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"


def run(side, mode, nproc):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    if side == "trainrun":
        cmd = [str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", str(nproc),
               str(ROOT / "bench" / "fsdp_init_rank.py"), mode, "trainrun"]
    else:  # under `timeout`: torchrun in the chroot then returns when started from Python
        cmd = ["timeout", "280", str(PEER / "enter.sh"), "torchrun", "--nproc-per-node", str(nproc),
               "/peer/bench/fsdp_init_rank.py", mode, "torch"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    m = re.search(r"RESULT ms (\S+) mib (\S+) same (\w+)", out.stdout)
    if out.returncode != 0 or not m:
        if side == "torch":  # a peer failure is a cell of the table, not the end of the run
            return None
        raise RuntimeError(f"{side} {mode} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return float(m.group(1)), float(m.group(2)), m.group(3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    args = parser.parse_args()
    sides = ["trainrun"] + (["torch"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists() else [])
    cells = {}
    for _ in range(args.rounds):
        for mode in ("eager", "meta"):
            for side in sides:
                cells.setdefault((mode, side), []).append(run(side, mode, args.ranks))
    print(f"\nmaking a 256 MiB model ready for FSDP2 on {args.ranks} ranks (median of {args.rounds})")
    print(f"{'':8} {'side':10} {'ms':>8} {'peak MiB':>9} {'= one process':>14}")
    for mode in ("eager", "meta"):
        for side in sides:
            done = [c for c in cells[(mode, side)] if c is not None]
            if not done:
                print(f"{mode:8} {side:10} {'fails':>8}")
                continue
            same = "yes" if all(c[2] == "yes" for c in done) else "no"
            print(f"{mode:8} {side:10} {statistics.median(c[0] for c in done):8.0f} "
                  f"{statistics.median(c[1] for c in done):9.0f} {same:>14}")


if __name__ == "__main__":
    main()
