#!/usr/bin/env python3
"""bench/compile: trainrun eager and trainrun.compile next to PyTorch 1.13 (apt) eager and PyTorch 2.6 (the
peer chroot, when built) eager and torch.compile, in one run: the training step of an MLP and of a transformer
block, the block's inference forward (median microseconds per call), and the first compiled call (recording or
compiling), and the block exported to an AOT package against its eager eval forward (also exported with dynamic
batch and sequence, called at a size it was never recorded at). "its GEMMs alone": the matrix products of the
block's compiled training step made back to back, nothing else: eager / that bounds what compiling can gain.
"compiled, unfused" is trainrun.compile with TRAINRUN_COMPILE_FUSION=0 (recorded forward and backward, no
generated loops). A side that fails or times out reads 'fails'.

    bench/compile.py                 (the table above)
    bench/compile.py --device cuda   (trainrun eager and compiled training steps on that device alone)"""
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEER = ROOT.parent / "shared" / "peer-modern"
ROWS = [("mlp_train", "MLP training step"), ("block_train", "transformer block training step"),
        ("block_train_gemms", "  its GEMMs alone"),
        ("block_infer", "transformer block inference"), ("mlp_train_first", "MLP: first compiled call"),
        ("block_train_first", "block: first compiled call"), ("block_eval_eager", "block eval forward, eager"),
        ("block_aot", "block eval forward, AOT package"), ("block_aot_first", "block: export + aot_compile"),
        ("block_other_eager", "block eval at (5, 48), eager"),
        ("block_dyn", "block eval at (5, 48), dynamic AOT"),
        ("block_dyn_first", "block: dynamic export + aot_compile")]


def run(label, cmd, **extra_env):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "SkylakeX"),
               **extra_env)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        print(f"{label}: timed out after 600 s", file=sys.stderr)
        return label, None
    found = {m.group(1): float(m.group(2)) for m in re.finditer(r"RESULT ([\w:]+) (\S+)", out.stdout)}
    if out.returncode != 0 or not found:  # say why, so a run on a machine of its own shows the cause
        print(f"{label} failed (exit {out.returncode}):\n{out.stderr[-3000:]}", file=sys.stderr)
        return label, None
    return label, found


def split(label_found, variants):
    """One 'all' run of the trainrun side as its columns: RESULT variant:name lines."""
    label, found = label_found
    if found is None:
        return [(name, None) for name in variants.values()]
    return [(name, {k.split(":", 1)[1]: v for k, v in found.items() if k.startswith(variant + ":")})
            for variant, name in variants.items()]


def print_table(columns, rows, width):
    """A row per (key, name) of `rows`, a column per (label, found): the median, blank when that side has no such
    figure, 'fails' when the side failed."""
    print(f"{'us per call (median)':34}" + "".join(f"{label:>{width}}" for label, _ in columns))
    for key, name in rows:
        cells = []
        for _, found in columns:
            value = None if found is None else found.get(key)
            cells.append(f"{'fails' if found is None else ('' if value is None else f'{value:.0f}'):>{width}}")
        print(f"{name:34}" + "".join(cells))


def peer_on_device(device):
    """The version of the torch this interpreter imports, when it has torch.compile and runs on `device` (a GPU
    machine's own PyTorch); None otherwise."""
    probe = ("import torch, sys; ok = hasattr(torch, 'compile') and (not sys.argv[1].startswith('cuda') or "
             "torch.cuda.is_available()); print(torch.__version__ if ok else '')")
    try:
        out = subprocess.run([sys.executable, "-c", probe, device], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None
    return out.stdout.strip() or None


def device_table(device):
    """--device DEV: trainrun's eager and compiled training steps on that device (cuda: fused loops as CUDA
    kernels), side by side with the interpreter's own torch eager and torch.compile there when it has them."""
    side = str(ROOT / "bench" / "compile_side.py")
    columns = split(run("trainrun", [sys.executable, side, "trainrun", "device", device]),
                    {"eager": f"trainrun eager, {device}", "compiled": f"trainrun compiled, {device}"})
    peer = peer_on_device(device)
    if peer:
        columns += split(run(f"torch {peer}", [sys.executable, side, "torch", "device", device]),
                         {"eager": f"torch {peer} eager", "compiled": f"torch {peer} compile"})
    rows = [("mlp_train", "MLP training step"), ("block_train", "transformer block training step"),
            ("mlp_train_first", "MLP: first compiled call"), ("block_train_first", "block: first compiled call")]
    print_table(columns, rows, 28)
    found = [c for _, c in columns]
    for key in ("mlp_train", "block_train"):
        for (label, eager), (_, compiled) in zip(columns[0::2], columns[1::2]):
            if eager and compiled:
                print(f"{label.rsplit(' eager', 1)[0]} compiled / eager on {device}, {key}: "
                      f"{eager[key] / compiled[key]:.2f}x")
        if peer and found[1] and found[3]:
            print(f"torch {peer} compile / trainrun compiled on {device}, {key}: "
                  f"{found[3][key] / found[1][key]:.2f}x (above 1: trainrun faster)")
    return 0 if found[0] and found[1] else 1


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--device":
        sys.exit(device_table(sys.argv[2]))
    side = str(ROOT / "bench" / "compile_side.py")
    columns = split(run("trainrun", ["/usr/bin/python3", side, "trainrun", "all"]),
                    {"eager": "trainrun eager", "compiled": "trainrun compiled", "unfused": "compiled, unfused"})
    columns.append(run("torch 1.13 eager", ["/usr/bin/python3", side, "torch", "eager"]))
    if pathlib.Path("/opt/trixie/usr/bin/python3").exists():
        peer = [str(PEER / "enter.sh"), "python3", "/peer/bench/compile_side.py", "torch"]
        columns += [run("torch 2.6 eager", peer + ["eager"]), run("torch 2.6 compile", peer + ["compiled"])]
    print_table(columns, ROWS, 20)
    eager, compiled, unfused = columns[0][1], columns[1][1], columns[2][1]
    if eager and compiled:
        for key, name in (ROWS[0], ROWS[1], ROWS[3]):
            print(f"trainrun compiled / eager, {name}: {eager[key] / compiled[key]:.2f}x "
                  f"(unfused: {eager[key] / unfused[key]:.2f}x)")
        if "block_train_gemms" in compiled:  # (what is left when everything but the GEMMs costs nothing)
            print(f"transformer block training step, eager / its GEMMs alone: "
                  f"{eager['block_train'] / compiled['block_train_gemms']:.2f}x (the most a compile that leaves "
                  f"GEMMs to the library could gain); compiled step outside its GEMMs: "
                  f"{compiled['block_train'] - compiled['block_train_gemms']:.0f} us, eager: "
                  f"{eager['block_train'] - compiled['block_train_gemms']:.0f} us")
    if compiled and "block_aot" in compiled:
        print(f"block eval forward, eager / AOT package: {compiled['block_eval_eager'] / compiled['block_aot']:.2f}x")
    if compiled and "block_dyn" in compiled:
        print(f"block eval at a size never recorded, eager / dynamic AOT package: "
              f"{compiled['block_other_eager'] / compiled['block_dyn']:.2f}x")


if __name__ == "__main__":
    main()
