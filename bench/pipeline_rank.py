"""One rank of bench/pipeline.py, the same code for trainrun and PyTorch 2.6 (argv[1]): a 4-layer MLP
(Linear(1024) + ReLU) with batch 256, trained with SGD by argv[2] with argv[3] microbatches: "GPipe" or
"1F1B" (one stage of two layers per rank), "Interleaved1F1B", "InterleavedZeroBubble" (two stages of one
layer per rank, looped) or "ZBVZeroBubble" (the same in a V: rank r holds stages r and 3 - r), or "single"
(the whole model in one process). Rank 0 prints "RESULT step_ms <median of 10 steps after 3 warm-up
steps>", and for trainrun's pipelines " bubble <measured> sim_bubble <simulated with the measured costs>
sim_msg_bubble <the same with the measured message time>" from one more step with its timeline recorded."""
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
    from trainrun.distributed.pipelining import PipelineStage, get_schedule_class
else:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import get_schedule_class
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
        multi = schedule_name not in ("GPipe", "1F1B")
        num_stages = world * (2 if multi else 1)
        per = len(layers) // num_stages
        v = schedule_name == "ZBVZeroBubble"
        indices = [rank, 2 * world - 1 - rank] if v else list(range(rank, num_stages, world))
        modules = [nn.Sequential(*layers[s * per:(s + 1) * per]) for s in indices]
        stages = [PipelineStage(m, s, num_stages, torch.device("cpu")) for m, s in zip(modules, indices)]
        cls = get_schedule_class(schedule_name)
        extra = {}
        if v and side == "torch":  # PyTorch 2.6 leaves the V's stage-to-rank map to the user
            extra["stage_index_to_group_rank"] = {s: s if s < world else 2 * world - 1 - s for s in range(num_stages)}
        schedule = cls(stages if multi else stages[0], n_micro, loss_fn=F.mse_loss, **extra)
        optimizer = torch.optim.SGD([p for m in modules for p in m.parameters()], lr=1e-3)
        first, last = 0 in indices, num_stages - 1 in indices

        def step():
            optimizer.zero_grad()
            if first and last:
                schedule.step(x, target=y, losses=[])
            elif first:
                schedule.step(x)
            elif last:
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
    measured = measured_bubbles(schedule, step, num_stages, n_micro, world) \
        if side == "trainrun" and schedule_name != "single" else ""
    if rank == 0:
        print(f"RESULT step_ms {statistics.median(times):.2f}{measured}", flush=True)
    if schedule_name != "single":
        dist.destroy_process_group()


def measured_bubbles(schedule, step, num_stages, n_micro, world):
    """One more step with its timeline recorded: the measured bubble, and the simulator's for the same orders
    with each computation's measured median time, with messages free and with the measured time of one
    microbatch's activations from rank to rank (half a ping-pong's median). With BENCH_PIPELINE_SVG=dir, rank 0
    draws the timeline there."""
    import os
    from trainrun.distributed.pipelining import simulator
    from trainrun.distributed.pipelining.timeline import Timeline
    schedule.record_timeline = True
    dist.barrier()
    step()
    joined = Timeline.gather(schedule.timeline)
    durations = {}
    for evs in joined.events.values():
        for start, end, a in evs:
            durations.setdefault(a.computation_type, []).append(end - start)
    cost = {k: statistics.median(v) for k, v in durations.items()}
    orders = [schedule._rank_order(r, world) for r in range(world)]
    costs = dict(forward_time=cost["F"], backward_time=cost.get("B", cost.get("I", 0) + cost.get("W", 0)),
                 input_time=cost.get("I"), weight_time=cost.get("W"))
    sim = simulator.simulate_ranks(lambda r: orders[r], world, num_stages, n_micro, **costs)
    message = message_time(BATCH // n_micro)
    sim_msg = simulator.simulate_ranks(lambda r: orders[r], world, num_stages, n_micro, comm_time=message, **costs)
    folder = os.environ.get("BENCH_PIPELINE_SVG")
    if folder and dist.get_rank() == 0:
        joined.save(os.path.join(folder, f"pipeline_{schedule_name}_{n_micro}.svg"),
                    title=f"{schedule_name}, {n_micro} microbatches, 2 ranks, measured (s)")
    return f" bubble {joined.bubble_ratio:.4f} sim_bubble {sim.bubble_ratio:.4f} sim_msg_bubble " \
        f"{sim_msg.bubble_ratio:.4f}"


def message_time(rows):
    """Seconds for one microbatch's activations (rows x WIDTH floats) from rank 0 to rank 1: half the median
    of 20 round trips."""
    t = torch.zeros(rows, WIDTH)
    trips = []
    for _ in range(20):
        dist.barrier()
        start = time.perf_counter()
        if dist.get_rank() == 0:
            dist.send(t, 1)
            dist.recv(t, 1)
        elif dist.get_rank() == 1:
            dist.recv(t, 0)
            dist.send(t, 0)
        trips.append(time.perf_counter() - start)
    return statistics.median(trips) / 2


if __name__ == "__main__":
    main()
    import os
    os._exit(0)
