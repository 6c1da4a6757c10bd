#!/usr/bin/env python3
"""bench/fsdp: one training step (forward, backward, Adam) of 4 x Linear(1024) with batch 64 per rank, at 2
and 4 ranks: trainrun's fully_shard (ZeRO-3 and no-reshard) and DDP next to PyTorch 2.6's in the peer chroot,
in one run; the same rank script serves both (bench/fsdp_rank.py). Cells: median step time in ms over
--rounds runs (rounds alternate sides), and the growth of rank 0's peak resident memory over the steps (MiB).
A last table splits trainrun's step into its compute alone and its communication alone: with the
collectives on the process group's thread, an FSDP step should take at most compute + comm / 2.

    bench/fsdp.py [--rounds 3] [--ranks 2 4]"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"
MODES = (("ddp", "DDP"), ("fsdp", "FSDP2 ZeRO-3"), ("fsdp-noreshard", "FSDP2 no reshard"))


def run(side, mode, nproc):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    if side == "trainrun":
        cmd = [str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", str(nproc),
               str(ROOT / "bench" / "fsdp_rank.py"), mode, "trainrun"]
    else:  # under `timeout`: torchrun in the chroot then returns when started from Python
        cmd = ["timeout", "280", str(PEER / "enter.sh"), "torchrun", "--nproc-per-node", str(nproc),
               "/peer/bench/fsdp_rank.py", mode, "torch"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    m = re.search(r"RESULT (\w+) (\S+) (\w+) (\S+)", out.stdout)
    if out.returncode != 0 or not m:
        if side == "torch":  # a peer failure is a cell of the table, not the end of the run
            return None
        raise RuntimeError(f"{side} {mode} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return float(m.group(2)), float(m.group(4))


def median_cell(values, index, fmt):
    values = [v[index] for v in values if v is not None]
    return format(statistics.median(values), fmt) if values else "fails"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args()
    sides = ["trainrun"] + (["torch"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists() else [])
    cells = {}
    for _ in range(args.rounds):
        for nproc in args.ranks:
            for mode, _ in MODES:
                for side in sides:
                    cells.setdefault((nproc, mode, side), []).append(run(side, mode, nproc))
            cells.setdefault((nproc, "parts"), []).append(run("trainrun", "parts", nproc))
    header = f"{'':24} {'trainrun ms':>12} {'torch 2.6 ms':>13} {'trainrun MiB':>13} {'torch 2.6 MiB':>14}"
    for nproc in args.ranks:
        print(f"\nstep time and peak memory growth, {nproc} ranks")
        print(header)
        print("-" * len(header))
        for mode, label in MODES:
            ours = cells[(nproc, mode, "trainrun")]
            theirs = cells.get((nproc, mode, "torch"))
            their_ms, their_mib = ("", "") if not theirs else (median_cell(theirs, 0, ".1f"),
                                                                median_cell(theirs, 1, ".0f"))
            print(f"{label:24} {median_cell(ours, 0, '.1f'):>12} {their_ms:>13} {median_cell(ours, 1, '.0f'):>13} "
                  f"{their_mib:>14}")
    print(f"\n{'trainrun FSDP2 ZeRO-3 step':28} {'compute ms':>11} {'comm ms':>9} {'compute+comm/2':>15} "
          f"{'step ms':>9}")
    for nproc in args.ranks:
        compute = statistics.median(v[0] for v in cells[(nproc, "parts")])
        comm = statistics.median(v[1] for v in cells[(nproc, "parts")])
        step = statistics.median(v[0] for v in cells[(nproc, "fsdp", "trainrun")])
        print(f"{f'{nproc} ranks':28} {compute:11.1f} {comm:9.1f} {compute + comm / 2:15.1f} {step:9.1f}")


if __name__ == "__main__":
    main()
