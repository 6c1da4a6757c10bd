"""One rank of bench/fsdp.py, the same code for trainrun and PyTorch 2.6: 4 x Linear(1024) with ReLU, batch
64 per rank, Adam; argv[1] "ddp" or "fsdp" (fully_shard on each layer and the root), argv[2] "trainrun" or
"torch". Rank 0 prints "RESULT step_ms <median>"."""
import pathlib
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


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.ReLU())])
    if sys.argv[1] == "fsdp":
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, reshard_after_forward=sys.argv[2] == "trainrun")  # 2.6: no-reshard only
        fully_shard(model)
    else:
        model = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(64, 1024)
    times = []
    for step in range(13):
        dist.barrier()
        t0 = time.perf_counter()
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step >= 3:
            times.append(time.perf_counter() - t0)
    if dist.get_rank() == 0:
        print(f"RESULT step_ms {statistics.median(times) * 1e3:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
