#!/usr/bin/env python3
"""bench/compile: trainrun eager and trainrun.compile next to PyTorch 1.13 (apt) eager and PyTorch 2.6 (the
peer chroot, when built) eager and torch.compile, in one run: the training step of an MLP and of a transformer
block, the block's inference forward (median microseconds per call), and the first compiled call (recording or
compiling). A side that fails or times out reads 'fails'.

    bench/compile.py"""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"
ROWS = [("mlp_train", "MLP training step"), ("block_train", "transformer block training step"),
        ("block_infer", "transformer block inference"), ("mlp_train_first", "MLP: first compiled call"),
        ("block_train_first", "block: first compiled call")]


def run(label, cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return label, None
    found = {m.group(1): float(m.group(2)) for m in re.finditer(r"RESULT (\w+) (\S+)", out.stdout)}
    return label, found if out.returncode == 0 and found else None


def main():
    side = str(ROOT / "bench" / "compile_side.py")
    columns = [run("trainrun eager", ["/usr/bin/python3", side, "trainrun", "eager"]),
               run("trainrun compiled", ["/usr/bin/python3", side, "trainrun", "compiled"]),
               run("torch 1.13 eager", ["/usr/bin/python3", side, "torch", "eager"])]
    if pathlib.Path("/opt/trixie/usr/bin/python3").exists():
        peer = [str(PEER / "enter.sh"), "python3", "/peer/bench/compile_side.py", "torch"]
        columns += [run("torch 2.6 eager", peer + ["eager"]), run("torch 2.6 compile", peer + ["compiled"])]
    print(f"{'us per call (median)':34}" + "".join(f"{label:>20}" for label, _ in columns))
    for key, name in ROWS:
        cells = []
        for _, found in columns:
            value = None if found is None else found.get(key)
            cells.append(f"{'fails' if found is None else ('' if value is None else f'{value:.0f}'):>20}")
        print(f"{name:34}" + "".join(cells))
    eager, compiled = columns[0][1], columns[1][1]
    if eager and compiled:
        for key, name in ROWS[:3]:
            print(f"trainrun compiled / eager, {name}: {eager[key] / compiled[key]:.2f}x")


if __name__ == "__main__":
    main()
