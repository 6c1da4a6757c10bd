#!/usr/bin/env python3
"""bench/nccl: NCCL allreduce through trainrun's process group next to
PyTorch's (whichever torch the GPU machine has), in one run, one table.

    bench/nccl.py [--ranks N] [--iters 20] [--rounds 5] [--python PYTHON]

One process per rank, rank r on GPU r, rendezvous through a file:// store.
Both sides run the same worker code, once as `import trainrun as torch` and
once as `import torch`. Each cell is rank 0's median over rounds of the CUDA
event time of `iters` back-to-back in-place all_reduce calls of float32
buffers (1 MiB .. 1 GiB). Bus bandwidth follows nccl-tests: S/t * 2(n-1)/n.

With one GPU the world is one rank: NCCL refuses two ranks on one device
("Duplicate GPU detected"), and a one-rank allreduce moves no data between
GPUs, so its bus bandwidth is 0 by definition; the table then shows the
algorithm bandwidth S/t, i.e. what a one-rank call costs (a copy within the
GPU, or nothing when in place) and the per-call overhead of each side.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = [1 << 20, 16 << 20, 256 << 20, 1 << 30]

WORKER = textwrap.dedent("""
    import importlib, statistics, sys
    torch = importlib.import_module(sys.argv[1])
    dist = importlib.import_module(sys.argv[1] + ".distributed")
    rank, world, init = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    iters, rounds, sizes = int(sys.argv[5]), int(sys.argv[6]), [int(s) for s in sys.argv[7:]]
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=init, rank=rank, world_size=world)
    for nbytes in sizes:
        x = torch.ones([nbytes // 4], device=f"cuda:{rank}")
        for _ in range(3):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        times = []
        for _ in range(rounds):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                dist.all_reduce(x)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / iters)
        if rank == 0:
            print(nbytes, statistics.median(times), flush=True)
        del x
    dist.destroy_process_group()
""")


def run_side(module, python, ranks, iters, rounds, timeout):
    """{nbytes: ms per call} from rank 0, or the reason the side could not run."""
    env = dict(os.environ)
    if module == "trainrun":
        env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{tmp}/store"
        procs = [subprocess.Popen([python, "-c", WORKER, module, str(r), str(ranks), init, str(iters), str(rounds)] +
                                  [str(s) for s in SIZES], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for r in range(ranks)]
        outputs = []
        try:
            for p in procs:
                outputs.append(p.communicate(timeout=timeout))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            return f"timed out after {timeout} s"
        for p, (_, err) in zip(procs, outputs):
            if p.returncode != 0:
                return f"rank exited with {p.returncode}: {err.strip().splitlines()[-1] if err.strip() else ''}"
    rows = [line.split() for line in outputs[0][0].splitlines()]
    return {int(r[0]): float(r[1]) for r in rows if len(r) == 2 and r[0].isdigit()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=0, help="ranks (default: one per GPU)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default=sys.executable, help="the interpreter both sides run under")
    ap.add_argument("--timeout", type=int, default=300)
    args = ap.parse_args()
    probe = subprocess.run([args.python, "-c", "import torch; print(torch.__version__, torch.cuda.device_count())"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print("bench/nccl: skipped: the peer (torch) does not import:", probe.stderr.strip().splitlines()[-1])
        return 0
    version, gpus = probe.stdout.split()
    ranks = args.ranks or int(gpus)
    if ranks < 1:
        print("bench/nccl: skipped: no GPU")
        return 0
    sides = {"trainrun": run_side("trainrun", args.python, ranks, args.iters, args.rounds, args.timeout),
             f"torch {version}": run_side("torch", args.python, ranks, args.iters, args.rounds, args.timeout)}
    bw_name = "busbw" if ranks > 1 else "algbw"
    print(f"bench/nccl: in-place float32 all_reduce, {ranks} rank(s) on {gpus} GPU(s); "
          f"{bw_name} in GB/s, medians of {args.rounds} rounds of {args.iters} calls")
    names = list(sides)
    print("| size     | " + " | ".join(f"{n + ' us':>18} | {n + ' ' + bw_name:>22}" for n in names) + " | ratio |")
    print("|----------|" + "|".join("-" * 20 + "|" + "-" * 24 for _ in names) + "|-------|")
    for name, result in sides.items():
        if isinstance(result, str):
            print(f"{name}: {result}")
    if any(isinstance(r, str) for r in sides.values()):
        return 1
    for nbytes in SIZES:
        cells, times = [], []
        for name in names:
            ms = sides[name][nbytes]
            bw = nbytes / (ms / 1e3) / 1e9 * (2 * (ranks - 1) / ranks if ranks > 1 else 1)
            cells.append(f"{ms * 1e3:18.1f} | {bw:22.1f}")
            times.append(ms)
        print(f"| {nbytes >> 20:5d} MiB | " + " | ".join(cells) + f" | {times[1] / times[0]:5.2f} |")
    print("(ratio: peer time / trainrun time; above 1 means trainrun is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
