#!/usr/bin/env python3
"""bench/pipeline: one training step (SGD) of a 4-layer MLP (Linear(1024) + ReLU, batch 256) split into two
pipeline stages on 2 ranks, GPipe and 1F1B with 4 and 8 microbatches, next to the whole model in one
process; trainrun and PyTorch 2.6 (peer chroot) in one run with the same rank script
(bench/pipeline_rank.py). Cells: median step time in ms; "hung" when a run did not finish in 120 s
(PyTorch 2.6's 1F1B can hang on Gloo: pytorch#132644).

    bench/pipeline.py"""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"


def run(side, schedule, micro):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    args = [side, schedule, str(micro)]
    if side == "trainrun":
        launcher = [str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", "2"]
        cmd = (["/usr/bin/python3"] if schedule == "single" else launcher) + [str(ROOT / "bench" / "pipeline_rank.py")]
    else:
        cmd = ["timeout", "120", str(PEER / "enter.sh")] + \
            (["python3"] if schedule == "single" else ["torchrun", "--nproc-per-node", "2"]) + \
            ["/peer/bench/pipeline_rank.py"]
    try:
        out = subprocess.run(cmd + args, capture_output=True, text=True, timeout=150, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None
    m = re.search(r"RESULT step_ms (\S+)", out.stdout)
    return float(m.group(1)) if m else None


def main():
    sides = ["trainrun"] + (["torch"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists() else [])
    rows = [("one process", "single", 1), ("GPipe, 4 microbatches", "GPipe", 4), ("GPipe, 8 microbatches", "GPipe", 8),
            ("1F1B, 4 microbatches", "1F1B", 4), ("1F1B, 8 microbatches", "1F1B", 8)]
    print(f"{'step (ms), 2 ranks':28} " + " ".join(f"{s:>10}" for s in sides))
    print("-" * (29 + 11 * len(sides)))
    for label, schedule, micro in rows:
        cells = []
        for side in sides:
            ms = run(side, schedule, micro)
            cells.append(f"{ms:10.1f}" if ms is not None else f"{'hung':>10}")
        print(f"{label:28} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
