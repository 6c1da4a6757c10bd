"""Entrypoints for test_launcher_api.py: module-level functions the launched workers import by name."""
import os


def rank_plus(base):
    return base + int(os.environ["RANK"])


def all_reduce_ranks():
    import trainrun as torch
    import trainrun.distributed as dist
    dist.init_process_group("gloo")
    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    world = dist.get_world_size()
    dist.destroy_process_group()
    return (world, t.item())


def fail_on_rank_1():
    if os.environ["RANK"] == "1":
        raise ValueError("rank 1 fails on purpose")
    return "fine"
