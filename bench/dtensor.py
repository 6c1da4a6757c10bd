#!/usr/bin/env python3
"""bench/dtensor: trainrun's DTensor and tensor parallelism next to PyTorch
2.6's (the peer chroot of ../shared/peer-modern, when it is set up) on the
same machine in one run. Both sides run the same rank script
(bench/dtensor_rank.py: `import trainrun as torch` on one side).

    bench/dtensor.py [--rounds 3]

Rows: per-op dispatch overhead of DTensor on tiny tensors (add, mm, sum: no
communication; plain-tensor add for scale) on 2 ranks; S(0) -> S(1) of 16
MiB on 4 ranks next to all_to_all_single of the same bytes; one training
step of a transformer block (dim 512, 8 x 128 tokens) under Colwise/Rowwise
TP at tp=2. Each cell is the median over rounds; rounds alternate sides."""
import argparse
import os
import pathlib
import re
import statistics
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"
ROWS = [("ops", 2, [("add_us", "DTensor add, 2 ranks (us)"), ("mm_us", "DTensor mm (us)"),
                    ("sum_us", "DTensor sum(dim=1) (us)"), ("plain_add_us", "plain tensor add (us)")]),
        ("redistribute", 4, [("s0_s1_ms", "S(0)->S(1) 16 MiB, 4 ranks (ms)"),
                             ("all_to_all_ms", "all_to_all_single 16 MiB (ms)")]),
        ("tp", 2, [("tp_step_ms", "TP block step, tp=2 (ms)")])]


def run(side, row, nproc):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    if side == "trainrun":
        cmd = [str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", str(nproc),
               str(ROOT / "bench" / "dtensor_rank.py"), "trainrun", row]
    else:
        # (under `timeout`, which gives torchrun its own process group: started directly from Python's
        # subprocess, torchrun in the chroot does not return)
        cmd = ["timeout", "280", str(PEER / "enter.sh"), "torchrun", "--nproc-per-node", str(nproc),
               "/peer/bench/dtensor_rank.py", "torch", row]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"{side} {row} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return {m.group(1): float(m.group(2)) for m in re.finditer(r"RESULT (\S+) (\S+)", out.stdout)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sides = ["trainrun"] + (["torch"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists() else [])
    if len(sides) == 1:
        print("(the PyTorch 2.6 peer is not set up: ../shared/peer-modern/setup.sh; trainrun's column only)")
    cells = {}
    for _ in range(args.rounds):
        for row, nproc, _metrics in ROWS:
            for side in sides:
                for key, value in run(side, row, nproc).items():
                    cells.setdefault((key, side), []).append(value)
    print(f"{'row':36} {'trainrun':>10} {'torch 2.6':>10} {'torch/trainrun':>15}")
    print("-" * 74)
    for _row, _nproc, metrics in ROWS:
        for key, label in metrics:
            ours = statistics.median(cells[(key, "trainrun")])
            if "torch" in sides:
                theirs = statistics.median(cells[(key, "torch")])
                print(f"{label:36} {ours:10.2f} {theirs:10.2f} {theirs / ours:15.2f}")
            else:
                print(f"{label:36} {ours:10.2f}")


if __name__ == "__main__":
    main()
