#!/usr/bin/env python3
"""bench/train_lm: the main job (examples/train_lm.py, its default model: 4 blocks of width 128, 16 x 128
bytes per step) for 60 steps in each layout, trainrun next to PyTorch 2.6 (the same script with --on-torch,
under its torchrun in the peer chroot), in one run. Cells: tokens/s (the median of the progress lines after
the first) and rank 0's peak resident memory. The corpora differ slightly (each side reads its own
Python's standard library), the step's work does not.

    bench/train_lm.py [--steps 60]"""
import argparse
import os
import pathlib
import re
import statistics
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"
LAYOUTS = (("one process", 1, []), ("DDP, 2 ranks", 2, ["--ddp"]), ("FSDP2, 2 ranks", 2, []),
           ("FSDP2 x TP (2 x 2), 4 ranks", 4, ["--tp", "2"]), ("pipeline, 2 stages (1F1B)", 2, ["--pp", "2"]),
           ("PP x FSDP2 (2 x 2), 4 ranks", 4, ["--pp", "2"]), ("FSDP2, 4 ranks", 4, []))
TORCH_LAYOUTS = ("one process", "DDP, 2 ranks", "FSDP2, 2 ranks", "FSDP2, 4 ranks")  # (2.6's 1F1B hangs on Gloo)


def run(side, nproc, extra, steps):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    with tempfile.TemporaryDirectory(dir=ROOT) as run_dir:
        args = ["--steps", str(steps), "--log-every", "10", "--ckpt-every", str(10 * steps), "--sample-bytes", "0",
                "--eval-windows", "16", "--run-dir", run_dir, *extra]
        if side == "trainrun":
            script = [str(ROOT / "examples" / "train_lm.py"), *args]
            cmd = ["/usr/bin/python3", *script] if nproc == 1 else \
                [str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", str(nproc), *script]
        else:
            peer_dir = "/peer/" + str(pathlib.Path(run_dir).relative_to(ROOT))
            args[args.index("--run-dir") + 1] = peer_dir
            cmd = ["timeout", "400", str(PEER / "enter.sh"), "torchrun", "--nproc-per-node", str(nproc),
                   "/peer/examples/train_lm.py", *args, "--on-torch"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=420, env=env, cwd=ROOT)
    rates = [float(m.group(1)) for m in re.finditer(r"step\s+\d+/\d+\s+loss \S+\s+(\d+) tok/s", out.stdout)]
    memory = re.search(r"peak resident memory on rank 0: (\S+) MiB", out.stdout)
    if out.returncode != 0 or len(rates) < 2 or not memory:
        raise RuntimeError(f"{side} {extra} on {nproc} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return statistics.median(rates[1:]), float(memory.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    peer = pathlib.Path("/opt/trixie/usr/bin/python3").exists()
    header = f"{'train_lm, ' + str(args.steps) + ' steps':30} {'trainrun tok/s':>15} {'torch 2.6 tok/s':>16} " \
             f"{'trainrun MiB':>13} {'torch 2.6 MiB':>14}"
    print(header)
    print("-" * len(header))
    for label, nproc, extra in LAYOUTS:
        ours = run("trainrun", nproc, extra, args.steps)
        theirs = run("torch", nproc, extra, args.steps) if peer and label in TORCH_LAYOUTS else None
        their_rate = f"{theirs[0]:16.0f}" if theirs else " " * 16
        their_memory = f"{theirs[1]:14.0f}" if theirs else " " * 14
        print(f"{label:30} {ours[0]:15.0f} {their_rate} {ours[1]:13.0f} {their_memory}", flush=True)


if __name__ == "__main__":
    main()
