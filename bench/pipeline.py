#!/usr/bin/env python3
"""bench/pipeline: one training step (SGD) of a 4-layer MLP (Linear(1024) + ReLU, batch 256) on 2 ranks:
two stages with GPipe and 1F1B (4 and 8 microbatches), four stages (two per rank) with Interleaved1F1B and
the zero-bubble schedules InterleavedZeroBubble and ZBVZeroBubble (8 microbatches), next to the whole model
in one process; trainrun and PyTorch 2.6 (peer chroot) in one run with the same rank script
(bench/pipeline_rank.py). Bubble columns: trainrun's measured bubble (the idle share of a recorded step's
timeline, receives' waits included), the simulator's for the same orders with the measured median time of each
computation, with messages free ("sim.") and taking the measured time of one microbatch's activations from rank
to rank ("sim+msg"), and the simulator's with F = 1, B = 2, I = W = 1 (the textbook formula's setting).
BENCH_PIPELINE_SVG=dir draws each recorded timeline there. Cells: median step time in ms; "hung" when a run
did not finish in 120 s, "fails" when it ended with an error
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
        return "hung"
    m = re.search(r"RESULT step_ms (\S+)(?: bubble (\S+) sim_bubble (\S+) sim_msg_bubble (\S+))?", out.stdout)
    if not m:
        return ("hung" if out.returncode == 124 else "fails"), None
    return float(m.group(1)), tuple(float(m.group(i)) for i in (2, 3, 4)) if m.group(2) else None


def main():
    sides = ["trainrun"] + (["torch"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists() else [])
    rows = [("one process", "single", 1), ("GPipe, 4 microbatches", "GPipe", 4), ("GPipe, 8 microbatches", "GPipe", 8),
            ("1F1B, 4 microbatches", "1F1B", 4), ("1F1B, 8 microbatches", "1F1B", 8),
            ("Interleaved1F1B, 8", "Interleaved1F1B", 8), ("InterleavedZeroBubble, 8", "InterleavedZeroBubble", 8),
            ("ZBVZeroBubble, 8", "ZBVZeroBubble", 8)]
    print(f"{'step (ms), 2 ranks':28} " + " ".join(f"{s:>10}" for s in sides) +
          f" {'bubble':>8} {'sim.':>8} {'sim+msg':>8} {'F=1,B=2':>8}")
    print("-" * (65 + 11 * len(sides)))
    for label, schedule, micro in rows:
        cells, bubbles = [], None
        for side in sides:
            ms, measured = run(side, schedule, micro)
            bubbles = measured if side == "trainrun" else bubbles
            cells.append(f"{ms:10.1f}" if isinstance(ms, float) else f"{ms:>10}")
        measured = " ".join(f"{b:8.1%}" for b in bubbles) if bubbles else " ".join([" " * 8] * 3)
        print(f"{label:28} " + " ".join(cells) + f" {measured} {simulated_bubble(schedule, micro):>8}", flush=True)


def simulated_bubble(schedule, micro):
    import sys
    sys.path.insert(0, str(ROOT / "python"))
    from trainrun.distributed.pipelining import schedules, simulator, zero_bubble
    if schedule == "single":
        return ""
    if schedule in ("GPipe", "1F1B"):
        rule = schedules.gpipe_order if schedule == "GPipe" else schedules.one_f_one_b_order
        t = simulator.simulate(lambda s: rule(s, 2, micro), 2, micro)
    else:
        rule = {"Interleaved1F1B": schedules.interleaved_1f1b_order,
                "InterleavedZeroBubble": zero_bubble.interleaved_zero_bubble_order,
                "ZBVZeroBubble": zero_bubble.zbv_order}[schedule]
        t = simulator.simulate_ranks(lambda r: rule(r, 2, 2, micro), 2, 4, micro, forward_time=0.5,
                                     backward_time=1.0)
    return f"{t.bubble_ratio:.1%}"


if __name__ == "__main__":
    main()
