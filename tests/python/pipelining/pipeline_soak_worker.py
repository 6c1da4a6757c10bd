"""A rank of test_pipelining.py's long and memory tests (argv: "soak" or "memory").

soak: every schedule (one stage per rank, or two: looped, or in a V) runs 100
steps of a small MLP; the losses are all-reduced at the end (a collective over
the transport the test chose). A hang would hit the group's 60 s timeout.

memory: the live activations of 1F1B and GPipe, read from the allocator's
counters. One microbatch's state on a stage (its received input and the
activations its layers saved) is measured alone as `a` bytes; a step's peak
of allocated bytes above the start, less that of a step of one microbatch
(the same transients: gradients in flight, buffers being sent), counts the
microbatches alive at once beyond the first (on the last stage, less the
outputs kept for the merged output). 1F1B must keep at most S - stage_index
of them, GPipe all M."""
import datetime
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "python"))
import trainrun as tr  # noqa: E402
import trainrun.distributed as dist  # noqa: E402
import trainrun.nn.functional as F  # noqa: E402
from trainrun import _C, nn  # noqa: E402
from trainrun.distributed.pipelining import PipelineStage, get_schedule_class  # noqa: E402
from trainrun.distributed.pipelining.zero_bubble import v_rank  # noqa: E402

SCHEDULES = ["GPipe", "1F1B", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble"]


def build(name, rank, world, width, n_micro, wide=False):
    multi = name not in ("GPipe", "1F1B")
    num_stages = world * (2 if multi else 1)
    indices = [s for s in range(num_stages) if (v_rank(s, world) if name == "ZBVZeroBubble" else s % world) == rank]
    tr.manual_seed(0)
    # wide: a hidden layer 8 times the width, so that what a microbatch keeps for backward (its hidden
    # activations) outweighs the messages in flight (width-sized activations and gradients).
    modules = {s: nn.Sequential(nn.Linear(width, 8 * width), nn.Tanh(), nn.Linear(8 * width, width)) if wide else
               nn.Sequential(nn.Linear(width, width), nn.Tanh()) for s in indices}
    stages = [PipelineStage(modules[s], s, num_stages, "cpu") for s in indices]
    cls = get_schedule_class(name)
    schedule = cls(stages if multi else stages[0], n_micro, loss_fn=F.mse_loss)
    return schedule, stages, modules


def run_step(schedule, stages, x, y, losses=None):
    first, last = any(s.is_first for s in stages), any(s.is_last for s in stages)
    if first and last:
        return schedule.step(x, target=y, losses=losses)
    if first:
        return schedule.step(x)
    return schedule.step(target=y, losses=losses) if last else schedule.step()


def soak(rank, world):
    total = tr.zeros(1)
    for name in SCHEDULES:
        n_micro = 2 * world
        schedule, stages, modules = build(name, rank, world, 8, n_micro)
        opt = tr.optim.SGD([p for m in modules.values() for p in m.parameters()], lr=0.05)
        tr.manual_seed(1)
        x, y = tr.randn(4 * n_micro, 8), tr.randn(4 * n_micro, 8) * 0.1
        losses = []
        for _ in range(100):
            opt.zero_grad()
            losses.clear()
            run_step(schedule, stages, x, y, losses)
            opt.step()
        if losses:
            total += sum(l.item() for l in losses)
        print(f"rank {rank}: {name} ran 100 steps", flush=True)
    dist.all_reduce(total)
    return [] if total.item() > 0 else [f"the all-reduced losses are {total.item()}"]


def memory(rank, world):
    width, rows, n_micro = 64, 256, 8
    failures = []
    peaks = {}
    for name, m in (("GPipe", 1), ("GPipe", n_micro), ("1F1B", n_micro)):
        schedule, stages, modules = build(name, rank, world, width, m, wide=True)
        stage = stages[0]
        x, y = tr.randn(rows * m, width), tr.randn(rows * m, width)
        run_step(schedule, stages, x, y)  # a first step: the caches warm
        dist.barrier()  # every stage starts the measured step together (a late peer leaves messages in flight)
        base = _C._cpu_memory_allocated()
        _C._cpu_reset_peak_memory_stats()
        run_step(schedule, stages, x, y)
        peaks[(name, m)] = _C._cpu_max_memory_allocated() - base
        dist.barrier()
    # One microbatch's state on this stage: its input (received, except on the first stage, whose input is a view
    # of the batch) and what its layers keep for backward.
    before = _C._cpu_memory_allocated()
    inp = tr.randn(rows, width, requires_grad=True) if not stage.is_first else tr.randn(rows, width)
    after_input = _C._cpu_memory_allocated()
    kept = modules[stage.stage_index](inp)
    a = _C._cpu_memory_allocated() - before - (after_input - before if stage.is_first else 0)
    del kept, inp
    # The last stage also keeps every microbatch's output for the merged output step() returns.
    merged = (n_micro - 1) * rows * width * 4 if stage.is_last else 0
    live = {k: 1 + (p - peaks[("GPipe", 1)] - (merged if k[1] > 1 else 0)) / a for k, p in peaks.items()}
    s, S = stage.stage_index, stage.num_stages
    print(f"rank {rank}: stage {s}: {a / 2**20:.2f} MiB per microbatch; live microbatches at the peak: "
          f"1F1B {live[('1F1B', n_micro)]:.2f} (bound {S - s}), GPipe {live[('GPipe', n_micro)]:.2f} "
          f"(M = {n_micro})", flush=True)
    # Up to 3/4 of a microbatch above the bound is messages in flight (a send's buffer lives until the peer takes
    # it); one microbatch more than the bound would be a microbatch kept too long.
    if live[("1F1B", n_micro)] > S - s + 0.75:
        failures.append(f"1F1B keeps {live[('1F1B', n_micro)]:.2f} microbatches alive on stage {s}, more than {S - s}")
    # GPipe's count is taken against its one-microbatch run, whose peak may hold a message in flight too: up to
    # one microbatch below M is that (1F1B's counts stay at most S - s + 3/4, well below).
    if live[("GPipe", n_micro)] < n_micro - 1:
        failures.append(f"GPipe keeps {live[('GPipe', n_micro)]:.2f} microbatches alive at its peak, not {n_micro}")
    return failures


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    failures = soak(rank, world) if sys.argv[1] == "soak" else memory(rank, world)
    if failures:
        print(f"rank {rank}: failures:\n  " + "\n  ".join(failures), flush=True)
        sys.exit(1)
    print(f"rank {rank}: pipeline {sys.argv[1]} ok", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
