"""One rank of bench/fsdp.py, the same code for trainrun and PyTorch 2.6: 4 x Linear(1024) with ReLU, batch
64 per rank, Adam. argv[1]: "ddp", "fsdp" (fully_shard on each layer and the root, ZeRO-3: resharded after
forward), "fsdp-noreshard", or (trainrun only) "parts": the step's compute alone (the same model unsharded,
no communication) and its communication alone (the all-gathers and reduce-scatters FSDP issues, nothing
else); argv[2] "trainrun" or "torch". Rank 0 prints "RESULT step_ms <median> rss_mib <peak growth>" (the
growth of the process's peak resident memory over the steps: parameters, gradients, Adam state and what
the step holds), and for "parts" "RESULT compute_ms <median> comm_ms <median>"."""
import pathlib
import resource
import statistics
import sys
import time

if sys.argv[2] == "trainrun":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
    import trainrun as torch
    import trainrun.distributed as dist
    import trainrun.nn as nn
    from trainrun.distributed.fsdp import fully_shard
else:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.fsdp import fully_shard
    torch.set_num_threads(1)
    for name in ("record_event", "wait_event", "wait_stream"):  # PyTorch 2.6 on CPU lacks them (2.7 adds
        if not hasattr(torch.cpu.Stream, name):                  # no-ops): see the peer's README
            setattr(torch.cpu.Stream, name, lambda self, *args, **kwargs: None)

DIM, LAYERS, BATCH, STEPS, WARMUP = 1024, 4, 64, 13, 3


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


def timed_steps(step):
    times = []
    for i in range(STEPS):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(*[m for _ in range(LAYERS) for m in (nn.Linear(DIM, DIM), nn.ReLU())])


def training_step(model, opt, x):
    def step():
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def parts(x):
    """The compute of one step (unsharded model, no communication) and the communication FSDP adds to it
    (per layer: one all-gather in forward, one in backward, one reduce-scatter), each timed alone."""
    model = make_model()
    compute = timed_steps(training_step(model, torch.optim.Adam(model.parameters(), lr=1e-3), x))
    world = dist.get_world_size()
    shard = -(-DIM // world) * DIM + -(-DIM // world)  # one layer's padded weight and bias rows per rank
    sends = [torch.zeros(shard) for _ in range(LAYERS)]
    outs = [torch.empty(shard * world) for _ in range(LAYERS)]

    def communicate():
        for _ in range(2):  # forward's gathers, backward's gathers again
            for s, o in zip(sends, outs):
                dist.all_gather_into_tensor(o, s)
        for s, o in zip(sends, outs):
            dist.reduce_scatter_tensor(s, o, op=dist.ReduceOp.AVG)
    return compute, timed_steps(communicate)


def main():
    dist.init_process_group("gloo")
    mode = sys.argv[1]
    x = torch.randn(BATCH, DIM)
    if mode == "parts":
        compute, comm = parts(x)
        if dist.get_rank() == 0:
            print(f"RESULT compute_ms {compute:.3f} comm_ms {comm:.3f}", flush=True)
        dist.destroy_process_group()
        return
    before = rss_mib()
    model = make_model()
    if mode.startswith("fsdp"):
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, reshard_after_forward=mode == "fsdp")
        fully_shard(model)
    else:
        model = nn.parallel.DistributedDataParallel(model)
    step_ms = timed_steps(training_step(model, torch.optim.Adam(model.parameters(), lr=1e-3), x))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    if dist.get_rank() == 0:
        print(f"RESULT step_ms {step_ms:.3f} rss_mib {peak:.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
