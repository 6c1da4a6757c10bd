#!/usr/bin/env python3
"""bench/launcher: from `trainrun --nproc-per-node 4` until all four workers
have passed a store barrier and exited, next to Debian's torchrun (PyTorch
1.13) doing the same, in one run.

    bench/launcher.py [--nproc 4] [--runs 15]

Both launchers start the same C++ worker (bench/launcher_worker.cc, with
--no-python) so that only the launchers differ: start-up, rendezvous,
spawning, watching and exiting. torchrun runs with --standalone (its c10d
rendezvous on a free port), once with its defaults and once with
--monitor_interval 0.1 (its defaults poll the workers every 5 s); under it, rank 0 hosts the workers' store, as
PyTorch 1.13's env:// does. Runs alternate between the two; cells are
medians of wall-clock seconds."""
import argparse
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"
WORKER = ROOT / "bazel-bin" / "bench" / "launcher_worker"


def timed(cmd):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    elapsed = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr[-2000:]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nproc", type=int, default=4)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    for path in (TRAINRUN, WORKER):
        if not path.exists():
            sys.exit(f"{path} is missing: run scripts/bazel.sh build //launcher:trainrun //bench:launcher_worker")
    torchrun = shutil.which("torchrun")
    # 1.13's torchrun spells its flags with underscores only; trainrun takes both.
    ours_cmd = [str(TRAINRUN), "--nproc-per-node", str(args.nproc), "--no-python", str(WORKER)]
    # On Python 3.11 it crashes with its default --redirects 0 --tee 0 (PEER.md); 1 and 1 keep
    # stdout on the console as ours does.
    theirs_cmd = [torchrun, "--standalone", "--nproc_per_node", str(args.nproc), "--redirects", "1", "--tee", "1",
                  "--no_python", str(WORKER)] if torchrun else None
    fast_cmd = theirs_cmd[:1] + ["--monitor_interval", "0.1"] + theirs_cmd[1:] if torchrun else None
    ours, theirs, fast = [], [], []
    for _ in range(args.runs):
        ours.append(timed(ours_cmd))
        if theirs_cmd:
            theirs.append(timed(theirs_cmd))
            fast.append(timed(fast_cmd))
    print(f"launcher: {args.nproc} workers pass a store barrier and exit; median of {args.runs} runs (wall seconds)")
    print("| launcher | median s | min s | max s |")
    print("|---|---|---|---|")
    print(f"| trainrun | {statistics.median(ours):.3f} | {min(ours):.3f} | {max(ours):.3f} |")
    if theirs:
        print(f"| torchrun (PyTorch 1.13), defaults | {statistics.median(theirs):.3f} | {min(theirs):.3f} | "
              f"{max(theirs):.3f} |")
        print(f"| torchrun (PyTorch 1.13), --monitor_interval 0.1 | {statistics.median(fast):.3f} | {min(fast):.3f} | "
              f"{max(fast):.3f} |")
        print(f"\ntrainrun takes {statistics.median(ours) / statistics.median(theirs):.3f} of torchrun's time with its "
              f"defaults and {statistics.median(ours) / statistics.median(fast):.3f} with --monitor_interval 0.1 "
              f"(target: at most 0.2)")
    else:
        print("\n(torchrun is not installed: no peer row)")


if __name__ == "__main__":
    main()
