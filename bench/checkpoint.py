#!/usr/bin/env python3
"""bench/checkpoint: distributed checkpoint save and load of a 128 MiB sharded state on 2 ranks, trainrun
next to PyTorch 2.6's DCP (peer chroot) in one run, each against the disk's own rate measured in the same
run (every rank writing+fsyncing, then reading, its share of the bytes). The same rank script serves both
(bench/checkpoint_rank.py). Cells: median seconds and MB/s (for async_save, the time the call blocks
training, against the state's bytes). Reads are cold (the page cache dropped before each, so the disk is
read) when /proc/sys/vm/drop_caches is writable (root), and also measured warm (from the page cache).

    bench/checkpoint.py"""
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"


def run(side, cache):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"))
    folder = ".bench-checkpoint/" + side  # under the repository: the chroot sees it as /peer/...
    if side == "trainrun":
        cmd = [str(ROOT / "bazel-bin" / "launcher" / "trainrun"), "--nproc-per-node", "2",
               str(ROOT / "bench" / "checkpoint_rank.py"), "trainrun", str(ROOT / folder), cache]
    else:
        cmd = ["timeout", "280", str(PEER / "enter.sh"), "torchrun", "--nproc-per-node", "2",
               "/peer/bench/checkpoint_rank.py", "torch", "/peer/" + folder, cache]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    found = dict((m.group(1), (float(m.group(2)), int(m.group(3))))
                 for m in re.finditer(r"RESULT (\w+) (\S+) (\d+)", out.stdout))
    if out.returncode != 0 or len(found) != (5 if side == "trainrun" else 4):
        raise RuntimeError(f"{side} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return found


def can_drop_caches():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


def main():
    sides = ["trainrun"] + (["torch"] if pathlib.Path("/opt/trixie/usr/bin/python3").exists() else [])
    for cache in (["cold"] if can_drop_caches() else []) + ["warm"]:
        results = {side: run(side, cache) for side in sides}
        print(f"\n{'128 MiB, 2 ranks, ' + cache:26} " + " ".join(f"{s + ' s':>12} {s + ' MB/s':>14}" for s in sides) +
              f" {'of disk rate':>13}")
        print("-" * (27 + 28 * len(sides) + 14))
        for name, label, disk in (("save", "save", "disk_write"), ("load", "load", "disk_read"),
                                  ("async_save_blocks", "async_save: blocking part", None),
                                  ("disk_write", "disk: write + fsync", None), ("disk_read", "disk: read", None)):
            cells = []
            for side in sides:
                if name not in results[side]:
                    cells.append(f"{'n/a':>12} {'':>14}")
                    continue
                seconds, nbytes = results[side][name]
                cells.append(f"{seconds:12.3f} {nbytes / seconds / 1e6:14.0f}")
            ratio = ""
            if disk is not None:
                ours, disk_ours = results["trainrun"][name][0], results["trainrun"][disk][0]
                ratio = f"{disk_ours / ours:13.0%}"
            print(f"{label:26} " + " ".join(cells) + f" {ratio:>13}")


if __name__ == "__main__":
    main()
