#!/usr/bin/env python3
"""bench/python_overhead: what one call costs from Python on tiny tensors,
trainrun next to PyTorch 1.13 in one run (the same interpreter, one thread).

    bench/python_overhead.py [--reps 20000] [--rounds 5]

Each row times one idiom a training script calls per step on tensors of a
few elements, where the time is all dispatch and binding overhead. A round
times both libraries back to back (median microseconds per call over --reps
calls); the table shows the median over rounds and the ratio PyTorch /
trainrun (>= 1.0 means trainrun's call is at least as cheap)."""
import argparse
import os
import pathlib
import statistics
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))

# row -> setup code and the statement timed; `t` is the library, `F` its nn.functional.
ROWS = [
    ("a + b (4 elements)", "a = t.ones(4); b = t.ones(4)", "a + b"),
    ("a * 2.0", "a = t.ones(4)", "a * 2.0"),
    ("x.sum(dim=1)", "x = t.ones(2, 2)", "x.sum(dim=1)"),
    ("x.max(dim=1).values", "x = t.ones(2, 2)", "x.max(dim=1).values"),
    # Bindings generated from the op list (tensor/ops.yaml).
    ("x.exp()", "x = t.ones(4)", "x.exp()"),
    ("t.add(a, b, alpha=2)", "a = t.ones(4); b = t.ones(4)", "t.add(a, b, alpha=2)"),
    ("t.mul(a, b, out=c)", "a = t.ones(4); b = t.ones(4); c = t.empty(4)", "t.mul(a, b, out=c)"),
    ("a.lt(0.5)", "a = t.ones(4)", "a.lt(0.5)"),
    ("F.relu(x)", "x = t.ones(4)", "F.relu(x)"),
    ("F.gelu(x)", "x = t.ones(4)", "F.gelu(x)"),
    ("x.view(-1)", "x = t.ones(2, 2)", "x.view(-1)"),
    ("x[0]", "x = t.ones(2, 2)", "x[0]"),
    ("t.zeros(2, 3)", "", "t.zeros(2, 3)"),
    ("t.where(c, x, 0.0)", "x = t.ones(4); c = x > 0", "t.where(c, x, 0.0)"),
    ("x.flip(0)", "x = t.ones(4)", "x.flip(0)"),
    ("t.einsum('ij,jk->ik')", "x = t.ones(2, 2)", "t.einsum('ij,jk->ik', x, x)"),
    ("Linear(4, 4) on one row", "m = t.nn.Linear(4, 4); x = t.ones(1, 4)", "m(x)"),
    ("Linear forward+backward", "m = t.nn.Linear(4, 4); x = t.ones(1, 4)", "m(x).sum().backward()"),
]


def per_call_us(lib, setup, stmt, reps):
    import importlib
    t = importlib.import_module(lib)
    ns = {"t": t, "F": importlib.import_module(lib + ".nn.functional")}
    exec(setup, ns)  # noqa: S102
    code = compile(stmt, "<row>", "eval")
    for _ in range(200):
        eval(code, ns)  # noqa: S307
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(reps // 5):
            eval(code, ns)  # noqa: S307
        samples.append((time.perf_counter() - start) / (reps // 5) * 1e6)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_CORETYPE", "SkylakeX")
    try:
        import torch
        torch.set_num_threads(1)
        libs = ["trainrun", "torch"]
    except ImportError:
        libs = ["trainrun"]
        print("(PyTorch is not installed: trainrun's column only)")
    import trainrun  # noqa: F401
    results = {(row[0], lib): [] for row in ROWS for lib in libs}
    for _ in range(args.rounds):
        for label, setup, stmt in ROWS:
            for lib in libs:
                results[(label, lib)].append(per_call_us(lib, setup, stmt, args.reps))
    header = f"{'call (tiny tensors)':32} {'trainrun us':>12} {'torch 1.13 us':>14} {'torch/trainrun':>15}"
    print(header)
    print("-" * len(header))
    for label, _, _ in ROWS:
        ours = statistics.median(results[(label, "trainrun")])
        if "torch" in libs:
            theirs = statistics.median(results[(label, "torch")])
            print(f"{label:32} {ours:12.2f} {theirs:14.2f} {theirs / ours:15.2f}")
        else:
            print(f"{label:32} {ours:12.2f}")


if __name__ == "__main__":
    main()
