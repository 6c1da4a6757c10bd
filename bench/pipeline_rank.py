"""One rank of bench/pipeline.py, the same code for trainrun and PyTorch 2.6 (argv[1]): a 4-layer MLP
(Linear(1024) + ReLU) with batch 256, split into one stage per rank, trained with SGD by argv[2] ("GPipe",
"1F1B", or "single": the whole model in one process) with argv[3] microbatches. Rank 0 prints
"RESULT step_ms <median of 10 steps after 3 warm-up steps>"."""
import pathlib
import statistics
import sys
import time

side, schedule_name, n_micro = sys.argv[1], sys.argv[2], int(sys.argv[3])
if side == "trainrun":
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
    import trainrun as torch
    import trainrun.distributed as dist
    import trainrun.nn as nn
    import trainrun.nn.functional as F
    from trainrun.distributed.pipelining import PipelineStage, ScheduleGPipe, Schedule1F1B
else:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe, Schedule1F1B
    torch.set_num_threads(1)

WIDTH, LAYERS, BATCH = 1024, 4, 256


def main():
    torch.manual_seed(0)
    layers = [m for _ in range(LAYERS) for m in (nn.Linear(WIDTH, WIDTH), nn.ReLU())]
    x, y = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)
    if schedule_name == "single":
        model = nn.Sequential(*layers)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

        def step():
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        rank = 0
    else:
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        per = len(layers) // world
        mine = nn.Sequential(*layers[rank * per:(rank + 1) * per])
        stage = PipelineStage(mine, rank, world, torch.device("cpu"))
        cls = ScheduleGPipe if schedule_name == "GPipe" else Schedule1F1B
        schedule = cls(stage, n_micro, loss_fn=F.mse_loss)
        optimizer = torch.optim.SGD(mine.parameters(), lr=1e-3)

        def step():
            optimizer.zero_grad()
            if rank == 0:
                schedule.step(x)
            elif rank == world - 1:
                schedule.step(target=y, losses=[])
            else:
                schedule.step()
            optimizer.step()
    times = []
    for i in range(13):
        if schedule_name != "single":
            dist.barrier()
        start = time.perf_counter()
        step()
        if schedule_name != "single":
            dist.barrier()
        if i >= 3:
            times.append((time.perf_counter() - start) * 1e3)
    if rank == 0:
        print(f"RESULT step_ms {statistics.median(times):.2f}", flush=True)
    if schedule_name != "single":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
    import os
    os._exit(0)
