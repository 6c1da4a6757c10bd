#!/usr/bin/env python3
"""bench/collectives: trainrun's gloo process group next to PyTorch 1.13's,
same machine, same ranks, in one run.

    bench/collectives.py [--ranks 2 4] [--iters 20] [--rounds 2] [--tcp [--allreduce ring|bcube]]

For allreduce, allgather (into one tensor), reduce_scatter (from one tensor)
and broadcast of float32 buffers of 4 KiB .. 64 MiB, each side runs as
separate processes (one per rank) that time every operation after a barrier;
cells are the median over rounds of rank 0's median latency. Bus bandwidth
follows nccl-tests: allreduce S/t * 2(n-1)/n, allgather and reduce_scatter
S/t * (n-1)/n with S the full (gathered) size, broadcast S/t. PyTorch 1.13's
gloo has no reduce_scatter (its cell says so) and no all_gather_into_tensor
(its allgather row uses all_gather into a list, what its users call). Rounds alternate between the
two sides so that machine noise hits both alike. Ranks on one host use the
shared-memory transport; --tcp turns it off to measure trainrun over Gloo's
TCP alone (what ranks on different hosts use), and --allreduce picks Gloo's
allreduce algorithm there."""
import argparse
import pathlib
import statistics
import sys
import textwrap

from rank_processes import rank0_output

ROOT = pathlib.Path(__file__).resolve().parent.parent
RANK_BINARY = ROOT / "bazel-bin" / "bench" / "collectives_rank"
PYTHON = "/usr/bin/python3"
SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]
OPS = ["allreduce", "allgather", "reduce_scatter", "broadcast"]

TORCH_RANK = textwrap.dedent("""
    import sys, time, statistics, datetime, torch, torch.distributed as dist
    iters, sizes = int(sys.argv[1]), [int(s) for s in sys.argv[2:]]
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=600))
    n, rank = dist.get_world_size(), dist.get_rank()
    for nbytes in sizes:
        numel = nbytes // 4
        buf, chunk = torch.ones(numel), torch.ones(numel // n)
        parts = [torch.empty(numel // n) for _ in range(n)]
        ops = {"allreduce": lambda: dist.all_reduce(buf),
               "allgather": lambda: dist.all_gather(parts, chunk),
               "broadcast": lambda: dist.broadcast(buf, 0)}
        for name, run in ops.items():
            for _ in range(2):
                run()
            t = []
            for _ in range(iters):
                dist.barrier()
                t0 = time.perf_counter()
                run()
                t.append(time.perf_counter() - t0)
            if rank == 0:
                print(f"{name}\\t{nbytes}\\t{statistics.median(t):.9f}", flush=True)
    dist.destroy_process_group()
""")


def run_ranks(command, world, env_extra=None):
    """Rank 0's {(op, bytes): seconds} from `world` ranks of `command`."""
    result = {}
    for line in rank0_output(command, world, env_extra).splitlines():
        op, nbytes, seconds = line.split("\t")
        result[(op, int(nbytes))] = float(seconds)
    return result


def bus_bandwidth(op, nbytes, seconds, world):
    factor = {"allreduce": 2 * (world - 1) / world, "allgather": (world - 1) / world,
              "reduce_scatter": (world - 1) / world, "broadcast": 1.0}[op]
    return nbytes / seconds * factor / 1e9


def human(nbytes):
    return f"{nbytes >> 20} MiB" if nbytes >= 1 << 20 else f"{nbytes >> 10} KiB"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES, help="bytes")
    parser.add_argument("--tcp", action="store_true", help="trainrun without its shared-memory transport")
    parser.add_argument("--allreduce", choices=["auto", "ring", "bcube"], default="auto",
                        help="Gloo's algorithm over TCP (auto: bcube up to 256 KiB, ring above)")
    args = parser.parse_args()
    if not RANK_BINARY.exists():
        sys.exit(f"{RANK_BINARY} is missing: run scripts/bazel.sh build //bench:collectives_rank")
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    sizes = [str(s) for s in args.sizes]
    print(f"collectives: float32, median latency over {args.iters} iterations (rank 0), median of {args.rounds} "
          f"rounds; trainrun over {'TCP (' + args.allreduce + ')' if args.tcp else 'shared memory'}; "
          f"peer: {'PyTorch ' + torch.__version__ + ' gloo' if have_torch else 'none (torch missing)'}")
    print("| ranks | op | size | trainrun us | trainrun busbw GB/s | PyTorch us | PyTorch busbw GB/s | busbw ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for world in args.ranks:
        ours, theirs = [], []
        for _ in range(args.rounds):
            env = {"TRAINRUN_SHM_COLLECTIVES": "0" if args.tcp else "1", "TRAINRUN_GLOO_ALLREDUCE": args.allreduce}
            ours.append(run_ranks([str(RANK_BINARY), str(args.iters), *sizes], world, env))
            if have_torch:
                theirs.append(run_ranks([PYTHON, "-c", TORCH_RANK, str(args.iters), *sizes], world))
        for op in OPS:
            for nbytes in args.sizes:
                t = statistics.median(r[(op, nbytes)] for r in ours)
                bw = bus_bandwidth(op, nbytes, t, world)
                row = f"| {world} | {op} | {human(nbytes)} | {t * 1e6:.0f} | {bw:.2f} |"
                if theirs and all((op, nbytes) in r for r in theirs):
                    pt = statistics.median(r[(op, nbytes)] for r in theirs)
                    pbw = bus_bandwidth(op, nbytes, pt, world)
                    row += f" {pt * 1e6:.0f} | {pbw:.2f} | {bw / pbw:.2f} |"
                else:
                    row += " n/a | n/a (gloo 1.13 has no reduce_scatter) | |" if op == "reduce_scatter" else " | | |"
                print(row, flush=True)


if __name__ == "__main__":
    main()
